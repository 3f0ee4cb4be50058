/*
 * test_celu_cpu.c - the CPU CELU kernels (kernels/cpu/mlp.c: e^y - 1 and e^y in vectors) against
 * libm's expm1 and exp, on a sweep of pre-activations from far below the underflow of e^y to
 * positive values (every binade of small magnitudes, the points k ln2 / 2 where the reduction
 * switches, -0, subnormals, infinities, NaN), for CELU alpha 0.1 (ANI), 1 and 0.37:
 *   forward  A = x > 0 ? x : alpha (e^(x / alpha) - 1)
 *   backward dZ = x > 0 ? dA : dA e^(x / alpha)
 * each within 2 units in the last place of the libm value (float: of libm's double value rounded
 * to float), NaN to NaN, infinities to their limits; every vector width gives the same bits, and a
 * value's bits do not depend on its column (whole vectors or the last, partial one).
 * Cases: f32, f64.  (Compiled with -ffp-contract=off, like the library.)
 */
#ifndef NNPOPS__TEST_CELU_BODY
#define NNPOPS__TEST_CELU_BODY

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/kernels.h"

#define REAL float
#define INT int32_t
#define FN(name) name##_f32
#define NAME "f32"
#include "test_celu_cpu.c"
#undef REAL
#undef INT
#undef FN
#undef NAME

#define REAL double
#define INT int64_t
#define FN(name) name##_f64
#define NAME "f64"
#include "test_celu_cpu.c"
#undef REAL
#undef INT
#undef FN
#undef NAME

int main(int argc, char **argv) {
    static const test_case cases[] = {{"f32", run_f32}, {"f64", run_f64}};
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

#else /* NNPOPS__TEST_CELU_BODY: the precision-generic body */

/* Distance in units in the last place between two values (the distance of their bit patterns
 * read as sign-magnitude integers). */
static int64_t FN(ulps)(REAL a, REAL b) {
    INT ia, ib;
    const INT lowest = (INT)((uint64_t)1 << (8 * sizeof(INT) - 1)); /* the sign bit alone */
    memcpy(&ia, &a, sizeof a);
    memcpy(&ib, &b, sizeof b);
    if (ia < 0) ia = lowest - ia;
    if (ib < 0) ib = lowest - ib;
    return ia > ib ? (int64_t)ia - (int64_t)ib : (int64_t)ib - (int64_t)ia;
}

/* The sweep: x values (pre-activations) for a given alpha; returns the count. */
static int64_t FN(sweep)(double alpha, REAL *x, int64_t cap) {
    int64_t n = 0;
#define PUT(v)                                                                                     \
    do {                                                                                           \
        if (n < cap) x[n++] = (REAL)(v);                                                           \
    } while (0)
    for (int64_t i = 0; i <= 200000; i++) PUT(alpha * (-800.0 + 805.0 * (double)i / 200000.0));
    for (int e = -149; e <= 3; e++) /* every binade of small magnitudes, both signs */
        for (int m = 0; m < 8; m++) {
            const double v = ldexp(1.0 + m / 8.0, e);
            PUT(-v);
            PUT(v);
        }
    for (int k = -2200; k <= 4; k++) { /* where round(y / ln2) changes, and its neighbors */
        const REAL y = (REAL)((k + 0.5) * 0.6931471805599453);
        PUT(y * (REAL)alpha);
        PUT(nextafter((double)y, 0.0) * alpha);
    }
    PUT(-0.0);
    PUT(0.0);
    PUT(-INFINITY);
    PUT(INFINITY);
    PUT(NAN);
#undef PUT
    return n;
}

static int FN(check_alpha)(double alpha, int64_t *worst_f, int64_t *worst_b) {
    const int64_t cap = 220000;
    REAL *x = malloc(sizeof(REAL) * (size_t)cap), *da = malloc(sizeof(REAL) * (size_t)cap);
    REAL *out[3][2];
    CHECK(x && da);
    const int64_t n = FN(sweep)(alpha, x, cap);
    unsigned long long seed = 99;
    for (int64_t i = 0; i < n; i++) da[i] = (REAL)(2 * test_rand(&seed) - 1);
    const REAL al = (REAL)alpha, inv = (REAL)(1.0 / alpha);
    int ran[3] = {0, 0, 0};
    for (int v = 0; v < 3; v++)
        for (int bw = 0; bw < 2; bw++) {
            out[v][bw] = malloc(sizeof(REAL) * (size_t)n);
            CHECK(out[v][bw]);
            ran[v] = FN(nnpops__celu_variant_cpu)(v, bw, n, 1, alpha, x, n, da, n, out[v][bw], n);
        }
    CHECK(ran[0]);
    for (int bw = 0; bw < 2; bw++) {
        for (int v = 1; v < 3; v++)
            if (ran[v]) CHECK(memcmp(out[0][bw], out[v][bw], sizeof(REAL) * (size_t)n) == 0);
        /* the same values when every column moves by 1 .. 7 (other lanes, another tail) */
        for (int sh = 1; sh < 8; sh++) {
            REAL *xs = malloc(sizeof(REAL) * (size_t)(n + sh));
            REAL *ds = malloc(sizeof(REAL) * (size_t)(n + sh));
            CHECK(xs && ds);
            memset(xs, 0, sizeof(REAL) * (size_t)sh);
            memset(ds, 0, sizeof(REAL) * (size_t)sh);
            memcpy(xs + sh, x, sizeof(REAL) * (size_t)n);
            memcpy(ds + sh, da, sizeof(REAL) * (size_t)n);
            CHECK(FN(nnpops__celu_variant_cpu)(0, bw, n + sh, 1, alpha, xs, n + sh, ds, n + sh,
                                               xs, n + sh)); /* in place */
            CHECK(memcmp(xs + sh, out[0][bw], sizeof(REAL) * (size_t)n) == 0);
            free(xs);
            free(ds);
        }
    }
    for (int64_t i = 0; i < n; i++) {
        const REAL xi = x[i], y = xi * inv;
        const REAL f = out[0][0][i], b = out[0][1][i];
        REAL wf, wb;
        if (sizeof(REAL) == 4) { /* libm in double, rounded once */
            wf = xi > 0 ? xi : (REAL)((double)al * expm1((double)y));
            wb = xi > 0 ? da[i] : (REAL)((double)da[i] * exp((double)y));
        } else {
            wf = xi > 0 ? xi : al * (REAL)expm1((double)y);
            wb = xi > 0 ? da[i] : da[i] * (REAL)exp((double)y);
        }
        if (isnan(xi)) {
            CHECK(isnan(f) && isnan(b));
            continue;
        }
        int64_t uf = (isinf(wf) || isinf(f)) ? (wf == f ? 0 : INT64_MAX) : FN(ulps)(f, wf);
        int64_t ub = FN(ulps)(b, wb);
        if ((f == 0 && wf == 0) || f == wf) uf = 0;
        if ((b == 0 && wb == 0) || b == wb) ub = 0;
        if (uf > 2 || ub > 2) {
            fprintf(stderr, "%s alpha %g: x = %.9g: forward %.17g (libm %.17g, %lld ulps), "
                    "backward %.17g (libm %.17g, %lld ulps)\n", NAME, alpha, (double)xi,
                    (double)f, (double)wf, (long long)uf, (double)b, (double)wb, (long long)ub);
            return 1;
        }
        if (uf > *worst_f) *worst_f = uf;
        if (ub > *worst_b) *worst_b = ub;
    }
    printf("%s alpha %g: %lld values, 32-byte variant %s, 64-byte variant %s\n", NAME, alpha,
           (long long)n, ran[1] ? "ran (same bits)" : "not on this machine",
           ran[2] ? "ran (same bits)" : "not on this machine");
    for (int v = 0; v < 3; v++)
        for (int bw = 0; bw < 2; bw++) free(out[v][bw]);
    free(x);
    free(da);
    return 0;
}

static int FN(run)(void) {
    int64_t wf = 0, wb = 0;
    const double alphas[] = {0.1, 1.0, 0.37};
    for (int a = 0; a < 3; a++)
        if (FN(check_alpha)(alphas[a], &wf, &wb)) return 1;
    printf("%s: worst forward %lld ulps, backward %lld ulps from libm\n", NAME, (long long)wf,
           (long long)wb);
    return 0;
}

#endif
