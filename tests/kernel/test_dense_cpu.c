/*
 * test_dense_cpu.c - the GEMM of the CPU dense kernels (kernels/cpu/mlp.c) in each of its variants
 * (columns in vectors or rows in vectors, 16-, 32- or 64-byte vectors, and the dense kernels' own
 * choice) against a plain loop that forms every element as the kernels promise to: the bias (0 +
 * b[i], or 0) plus a[i][k] * b[k][r] added in increasing k, rounded after each operation (the
 * unfused variants) or with one fused multiply-add per product (fma, the variants that
 * nnpops__dense_variant_fused_cpu names; the test fails unless their results differ from the
 * unfused loop's on some shape where they ran, so that the fused path is shown to run).  Every
 * variant must give those bits exactly, on random matrices of many shapes: row counts that are
 * and are not multiples of the vector lengths and of the row blocks, 1 to 17 and 23 to 25
 * columns (either side of the few-column kernel's limits: 12 in f32, 16 or 24 in f64), inner
 * dimensions below and above the k chunks, A as W (forward: rows apart, packed) and as W^T
 * (backward: rows contiguous, read in place), with and without bias; and the forward from the
 * few-column kernel's panels of W (nnpops__dense_forward_packed_cpu) likewise, with proof of
 * which of W and its panels it read.  Cases: f32, f64.  (This
 * file is compiled with -ffp-contract=off, so that the plain loop is not fused into multiply-adds.)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NNPOPS__TEST_DENSE_BODY
#define NNPOPS__TEST_DENSE_BODY

#include "check.h"
#include "kernels/cpu/kernels.h"

#define N_VARIANTS 7
static const char *const variant_name[N_VARIANTS] = {
    "auto",         "blocked 16-byte", "blocked 32-byte", "rows 16-byte",
    "rows 32-byte", "blocked 64-byte", "rows 64-byte"};

#define REAL float
#define FN(name) name##_f32
#define NAME "f32"
#define RFMA fmaf
#include "test_dense_cpu.c"
#undef REAL
#undef FN
#undef NAME
#undef RFMA

#define REAL double
#define FN(name) name##_f64
#define NAME "f64"
#define RFMA fma
#include "test_dense_cpu.c"
#undef REAL
#undef FN
#undef NAME
#undef RFMA

int main(int argc, char **argv) {
    static const test_case cases[] = {{"f32", run_f32}, {"f64", run_f64}};
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

#else /* NNPOPS__TEST_DENSE_BODY: the precision-generic body */

/* 1 (printed: what, the shape, the first element that differs) when got and want differ in the
 * n columns of their m rows. */
static int FN(differs)(const char *what, const char *form, int64_t m, int64_t n, int64_t kk,
                       const REAL *bp, const REAL *got, const REAL *want, int64_t ld) {
    for (int64_t q = 0; q < m * n; q++) {
        const int64_t i = q / n, r = q % n;
        if (memcmp(&got[i * ld + r], &want[i * ld + r], sizeof(REAL)) == 0) continue;
        fprintf(stderr, "%s: %s, m %lld n %lld kk %lld %s%s: C[%lld][%lld] = %.17g, the plain loop "
                "gives %.17g\n", NAME, what, (long long)m, (long long)n, (long long)kk, form,
                bp ? " + bias" : "", (long long)i, (long long)r, (double)got[i * ld + r],
                (double)want[i * ld + r]);
        return 1;
    }
    return 0;
}

/* The forward from panels (nnpops__dense_forward_packed_cpu, A = W [m][kk]) against the plain
 * loop: once with W and its panels, once with W replaced by NaNs, which must give the same bits up
 * to 12 columns (the panels alone are read where the few-column kernel runs: at least 12 columns
 * in either precision) or NaNs (W is read), and once with the panels replaced by NaNs from 25
 * columns on (beyond the few-column kernel, W alone is read).  Returns 1 at a difference. */
static int FN(packed)(int64_t m, int64_t n, int64_t kk, const REAL *a, const REAL *b, int64_t ld,
                      const REAL *bp, const REAL *want_plain, const REAL *want_fused, REAL *got) {
    const REAL *want =
        FN(nnpops__dense_variant_fused_cpu)(NNPOPS__GEMM_AUTO) ? want_fused : want_plain;
    REAL *wp = malloc(sizeof(REAL) * (size_t)(m * kk));
    REAL *nan = malloc(sizeof(REAL) * (size_t)(m * kk));
    CHECK(wp && nan);
    FN(nnpops__dense_pack_panels_cpu)(kk, m, a, wp);
    for (int64_t q = 0; q < m * kk; q++) nan[q] = (REAL)NAN;
    int fail = 0;
    for (int form = 0; form < 3 && !fail; form++) {
        if ((form == 1 && n > 12) || (form == 2 && n < 25)) continue;
        for (int64_t q = 0; q < m * ld; q++) got[q] = (REAL)-7;
        FN(nnpops__dense_forward_packed_cpu)(n, kk, m, form == 1 ? nan : a, form == 2 ? nan : wp,
                                             bp, b, ld, got, ld);
        fail = FN(differs)(form == 1   ? "forward from panels (W as NaNs)"
                           : form == 2 ? "forward from panels (panels as NaNs)"
                                       : "forward from panels",
                           "forward", m, n, kk, bp, got, want, ld);
    }
    free(wp);
    free(nan);
    return fail;
}

/* One shape: random A, B (padding columns included) and bias; every variant against the plain
 * loop on the n columns; checked[v] counts the variants that ran.  Returns 1 at the first
 * difference (printed). */
static int FN(one_shape)(int64_t m, int64_t n, int64_t kk, int backward, int with_bias,
                         unsigned long long *seed, long long checked[N_VARIANTS],
                         long long *fused_differ) {
    const int64_t ld = (n + NNPOPS__DENSE_PAD - 1) / NNPOPS__DENSE_PAD * NNPOPS__DENSE_PAD + 3;
    REAL *a = malloc(sizeof(REAL) * (size_t)(m * kk));
    REAL *b = malloc(sizeof(REAL) * (size_t)(kk * ld));
    REAL *bias = malloc(sizeof(REAL) * (size_t)m);
    REAL *want = malloc(sizeof(REAL) * (size_t)(m * ld));
    REAL *want_fused = malloc(sizeof(REAL) * (size_t)(m * ld));
    REAL *got = malloc(sizeof(REAL) * (size_t)(m * ld));
    CHECK(a && b && bias && want && want_fused && got);
    for (int64_t q = 0; q < m * kk; q++) a[q] = (REAL)(2 * test_rand(seed) - 1);
    for (int64_t q = 0; q < kk * ld; q++) b[q] = (REAL)(2 * test_rand(seed) - 1);
    for (int64_t q = 0; q < m; q++) bias[q] = (REAL)(test_rand(seed) - 0.5);
    /* forward: A = W [m][kk]; backward: A = W^T of W [kk][m] */
    const int64_t sa_i = backward ? 1 : kk, sa_k = backward ? m : 1;
    const REAL *bp = with_bias ? bias : NULL;
    int differ = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = 0; r < n; r++) {
            REAL acc = bp ? (REAL)0 + bp[i] : (REAL)0, accf = acc;
            for (int64_t k = 0; k < kk; k++) {
                const REAL p = a[i * sa_i + k * sa_k] * b[k * ld + r];
                acc = acc + p;
                accf = RFMA(a[i * sa_i + k * sa_k], b[k * ld + r], accf);
            }
            want[i * ld + r] = acc;
            want_fused[i * ld + r] = accf;
            differ |= acc != accf;
        }
    int fail = 0;
    if (!backward) fail = FN(packed)(m, n, kk, a, b, ld, bp, want, want_fused, got);
    for (int v = 0; v < N_VARIANTS && !fail; v++) {
        for (int64_t q = 0; q < m * ld; q++) got[q] = (REAL)-7;
        if (!FN(nnpops__dense_gemm_variant_cpu)(v, m, n, kk, a, sa_i, sa_k, b, ld, bp, got, ld))
            continue; /* not on this machine */
        checked[v]++;
        const int fused = FN(nnpops__dense_variant_fused_cpu)(v);
        if (fused && differ) ++*fused_differ;
        fail = FN(differs)(variant_name[v], backward ? "backward" : "forward", m, n, kk, bp, got,
                           fused ? want_fused : want, ld);
    }
    free(a);
    free(b);
    free(bias);
    free(want);
    free(want_fused);
    free(got);
    return fail;
}

static int FN(run)(void) {
    unsigned long long seed = 12345;
    const int64_t ms[] = {1, 3, 7, 8, 17, 64, 70, 133};
    const int64_t ks[] = {1, 5, 64, 65, 300};
    long long checked[N_VARIANTS] = {0}, shapes = 0, fused_differ = 0;
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
        for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++)
            for (int64_t n = 1; n <= 25; n += n == 17 ? 6 : 1) /* 1 .. 17, 23 .. 25 */
                for (int form = 0; form < 4; form++, shapes++)
                    if (FN(one_shape)(ms[im], n, ks[ik], form & 1, form >> 1, &seed, checked,
                                      &fused_differ))
                        return 1;
    printf("%s: %lld shapes, each variant bit for bit equal to the plain loop (fused: the fma "
           "loop):", NAME, shapes);
    int any_fused = 0;
    for (int v = 0; v < N_VARIANTS; v++) {
        const int fused = FN(nnpops__dense_variant_fused_cpu)(v);
        any_fused |= fused && checked[v] > 0;
        printf(" %s%s %lld%s", variant_name[v], fused ? " (fused)" : "", checked[v],
               v + 1 < N_VARIANTS ? "," : "\n");
    }
    /* the fused variants ran where the two loops differ: their fused multiply-adds are shown */
    printf("%s: %lld runs of fused variants on shapes whose fused and unfused loops differ\n", NAME,
           fused_differ);
    if (any_fused) CHECK(fused_differ > 0);
    /* the portable variants and the dense kernels' own choice ran on every shape */
    CHECK(checked[0] == shapes && checked[1] == shapes && checked[3] == shapes);
    return 0;
}

#endif
