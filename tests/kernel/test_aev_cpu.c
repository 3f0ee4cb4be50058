/*
 * test_aev_cpu.c - the CPU AEV kernels (potentials/ani/cpu/aev.c) against a plain long double
 * implementation of the definition written here (acos, cos, pow, exp per term; kernels.h gives the
 * formulas), on random clusters of three species:
 *   forward:  every AEV entry of every center within atol + rtol |reference|;
 *   backward: dE/dr of each entry, E = sum g . AEV(center) with random g, against central finite
 *             differences of the long double reference;
 *   every vector width (16-, 32-, 64-byte variants, where the machine has them) gives the same
 *   bits, forward and backward.
 * Two descriptors: ANI-1x's constants, and a generic one (two radial etas, two zetas, one of them
 * 1, 36 angular terms).  A dense cluster puts more than one batch (potentials/ani/cpu/aev.c: AEV_PB) of
 * entries and of pairs on a center.  Also the vector logarithm behind the angular factors
 * (kernels/cpu/vmath.h) against libm, within 4 units in the last place, on every binade from the
 * smallest normal number to 2.
 * Cases: f32, f64.  (Compiled with -ffp-contract=off, like the library.)
 */
#ifndef NNPOPS__TEST_AEV_BODY
#define NNPOPS__TEST_AEV_BODY

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "potentials/ani/ani_ops.h"
#include "cluster.h"

typedef long double LD;
#define PI_L 3.141592653589793238462643383279502884L

/* ANI-1x's descriptor constants (three species here), or the generic one. */
static nnpops__aev_desc make_desc(int generic) {
    nnpops__aev_desc d;
    memset(&d, 0, sizeof d);
    d.n_species = 3;
    d.rc_r = 5.2;
    d.rc_a = 3.5;
    if (!generic) {
        d.n_eta_r = 1;
        d.eta_r[0] = 16;
        d.n_shf_r = 16;
        for (int i = 0; i < 16; i++) d.shf_r[i] = 0.9 + 0.26875 * i;
        d.n_eta_a = 1;
        d.eta_a[0] = 8;
        d.n_zeta = 1;
        d.zeta[0] = 32;
        d.n_shf_a = 4;
        for (int i = 0; i < 4; i++) d.shf_a[i] = 0.9 + 0.65 * i;
        d.n_shf_z = 8;
        for (int i = 0; i < 8; i++) d.shf_z[i] = (2 * i + 1) * 3.141592653589793 / 16;
    } else {
        d.n_eta_r = 2;
        d.eta_r[0] = 16;
        d.eta_r[1] = 4;
        d.n_shf_r = 5;
        for (int i = 0; i < 5; i++) d.shf_r[i] = 0.8 + 0.9 * i;
        d.n_eta_a = 2;
        d.eta_a[0] = 8;
        d.eta_a[1] = 3;
        d.n_zeta = 2;
        d.zeta[0] = 14.1;
        d.zeta[1] = 1;
        d.n_shf_a = 3;
        for (int i = 0; i < 3; i++) d.shf_a[i] = 1.0 + 0.8 * i;
        d.n_shf_z = 3;
        for (int i = 0; i < 3; i++) d.shf_z[i] = 0.4 + 1.1 * i;
    }
    for (int i = 0; i < 32; i++) { /* float-rounded, as a model file's values */
        d.eta_r[i] = (float)d.eta_r[i];
        d.shf_r[i] = (float)d.shf_r[i];
        d.eta_a[i] = (float)d.eta_a[i];
        d.zeta[i] = (float)d.zeta[i];
        d.shf_a[i] = (float)d.shf_a[i];
        d.shf_z[i] = (float)d.shf_z[i];
    }
    d.radial_len = d.n_eta_r * d.n_shf_r;
    d.angular_len = d.n_eta_a * d.n_zeta * d.n_shf_a * d.n_shf_z;
    d.aev_len = d.n_species * d.radial_len + d.n_species * (d.n_species + 1) / 2 * d.angular_len;
    return d;
}

/* A random cluster (tests/common/cluster.h): n atoms in a cube of side a, at least dmin apart, atom
 * 0 at the center, species drawn uniformly from n_species. */
static void make_cluster(test_cluster *c, int n, double a, double dmin, int n_species, double rc,
                         unsigned long long seed) {
    test_cluster_new(c, n, a, dmin, 1, &seed);
    for (int i = 0; i < n; i++) c->species[i] = (int32_t)(test_rand(&seed) * n_species);
    test_cluster_pairs(c, rc);
}

/* The entries of center ci: vectors (long double, from the pair vectors with the entry's sign)
 * and species. */
static int64_t center_entries(const test_cluster *c, int ci, LD (*v)[3], int32_t *sp) {
    const int64_t e0 = c->start[ci], ne = c->start[ci + 1] - e0;
    for (int64_t e = 0; e < ne; e++) {
        const int64_t code = c->entry[e0 + e], p = code >> 1;
        const LD s = (code & 1) ? -1.0L : 1.0L;
        for (int k = 0; k < 3; k++) v[e][k] = s * (LD)c->vec[3 * p + k];
        sp[e] = c->species[c->pairs[2 * p + ((code & 1) ? 0 : 1)]];
    }
    return ne;
}

static int angular_block_of(int s1, int s2, int S) {
    if (s1 > s2) {
        const int t = s1;
        s1 = s2;
        s2 = t;
    }
    return s1 * S - s1 * (s1 - 1) / 2 + (s2 - s1);
}

/* The AEV of one center from its entries, term by term in long double. */
static void ref_aev(const nnpops__aev_desc *d, int64_t ne, LD (*v)[3], const int32_t *sp,
                    LD *out) {
    const int S = d->n_species, R = d->radial_len, A = d->angular_len;
    for (int f = 0; f < d->aev_len; f++) out[f] = 0;
    LD dist[1024];
    CHECK(ne <= 1024);
    for (int64_t e = 0; e < ne; e++)
        dist[e] = sqrtl(v[e][0] * v[e][0] + v[e][1] * v[e][1] + v[e][2] * v[e][2]);
    for (int64_t e = 0; e < ne; e++) {
        if (!(dist[e] < d->rc_r)) continue;
        const LD fc = 0.5L * cosl(PI_L * dist[e] / d->rc_r) + 0.5L;
        for (int ie = 0; ie < d->n_eta_r; ie++)
            for (int is = 0; is < d->n_shf_r; is++) {
                const LD x = dist[e] - d->shf_r[is];
                out[sp[e] * R + ie * d->n_shf_r + is] += 0.25L * expl(-d->eta_r[ie] * x * x) * fc;
            }
    }
    for (int64_t j = 0; j < ne; j++) {
        if (!(dist[j] < d->rc_a)) continue;
        for (int64_t k = j + 1; k < ne; k++) {
            if (!(dist[k] < d->rc_a)) continue;
            const LD dot = v[j][0] * v[k][0] + v[j][1] * v[k][1] + v[j][2] * v[k][2];
            const LD theta = acosl(0.95L * dot / (dist[j] * dist[k]));
            const LD fcj = 0.5L * cosl(PI_L * dist[j] / d->rc_a) + 0.5L;
            const LD fck = 0.5L * cosl(PI_L * dist[k] / d->rc_a) + 0.5L;
            const LD dm = 0.5L * (dist[j] + dist[k]);
            LD *blk = out + S * R + angular_block_of(sp[j], sp[k], S) * A;
            for (int a = 0; a < d->n_eta_a; a++)
                for (int z = 0; z < d->n_zeta; z++)
                    for (int q = 0; q < d->n_shf_a; q++)
                        for (int t = 0; t < d->n_shf_z; t++) {
                            const LD f1 = powl((1 + cosl(theta - d->shf_z[t])) / 2, d->zeta[z]);
                            const LD x = dm - d->shf_a[q];
                            const LD f2 = expl(-d->eta_a[a] * x * x);
                            blk[((a * d->n_zeta + z) * d->n_shf_a + q) * d->n_shf_z + t] +=
                                2 * f1 * f2 * fcj * fck;
                        }
        }
    }
}

static LD ref_energy(const nnpops__aev_desc *d, int64_t ne, LD (*v)[3], const int32_t *sp,
                     const double *g, LD *work) {
    ref_aev(d, ne, v, sp, work);
    LD e = 0;
    for (int f = 0; f < d->aev_len; f++) e += (LD)g[f] * work[f];
    return e;
}

/* Distance in units in the last place (bit patterns as sign-magnitude integers). */
static int64_t ulps_f(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}
static int64_t ulps_d(double a, double b) {
    int64_t ia, ib;
    memcpy(&ia, &a, 8);
    memcpy(&ib, &b, 8);
    if (ia < 0) ia = INT64_MIN - ia;
    if (ib < 0) ib = INT64_MIN - ib;
    return ia > ib ? ia - ib : ib - ia;
}

#define REAL float
#define FN(name) name##_f32
#define NAME "f32"
#define ULPS ulps_f
#define TOL_F_RTOL 5e-5 /* forward: relative to the entry, plus TOL_F_ATOL of the largest */
#define TOL_F_ATOL 1e-6
#define TOL_B 2e-3 /* backward: of the largest finite-difference component */
#include "test_aev_cpu.c"
#undef REAL
#undef FN
#undef NAME
#undef ULPS
#undef TOL_F_RTOL
#undef TOL_F_ATOL
#undef TOL_B

#define REAL double
#define FN(name) name##_f64
#define NAME "f64"
#define ULPS ulps_d
#define TOL_F_RTOL 1e-11
#define TOL_F_ATOL 1e-13
#define TOL_B 1e-7
#include "test_aev_cpu.c"
#undef REAL
#undef FN
#undef NAME
#undef ULPS
#undef TOL_F_RTOL
#undef TOL_F_ATOL
#undef TOL_B

int main(int argc, char **argv) {
    static const test_case cases[] = {{"f32", run_f32}, {"f64", run_f64}};
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

#else /* NNPOPS__TEST_AEV_BODY: the precision-generic body */

/* The vector logarithm against libm (float: libm's double value rounded to float). */
static int FN(check_log)(void) {
    const int64_t cap = 200000;
    REAL *x = malloc(sizeof(REAL) * (size_t)cap), *y[3];
    CHECK(x);
    int64_t n = 0;
    const int emin = sizeof(REAL) == 4 ? FLT_MIN_EXP - 1 : DBL_MIN_EXP - 1;
    for (int e = emin; e <= 1 && n + 64 <= cap; e++)
        for (int m = 0; m < 64; m++) x[n++] = (REAL)ldexp(1.0 + m / 64.0, e);
    unsigned long long seed = 5;
    while (n < cap) { /* random values near 1 (log's cancellation) and over (0, 1] */
        const double r = test_rand(&seed);
        x[n++] = (REAL)(n % 2 ? 0.5 + r : exp(-700.0 * r * r * (sizeof(REAL) == 4 ? 0.12 : 1)));
    }
    int ran[3];
    for (int v = 0; v < 3; v++) {
        y[v] = malloc(sizeof(REAL) * (size_t)n);
        CHECK(y[v]);
        ran[v] = FN(nnpops__log_variant_cpu)(v, n, x, y[v]);
    }
    CHECK(ran[0]);
    for (int v = 1; v < 3; v++)
        if (ran[v]) CHECK(memcmp(y[0], y[v], sizeof(REAL) * (size_t)n) == 0);
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!(x[i] >= (sizeof(REAL) == 4 ? FLT_MIN : DBL_MIN))) continue;
        const REAL want = (REAL)log((double)x[i]);
        const int64_t u = y[0][i] == want ? 0 : ULPS(y[0][i], want);
        if (u > 4) {
            fprintf(stderr, "%s log(%.17g) = %.17g, libm %.17g (%lld ulps)\n", NAME,
                    (double)x[i], (double)y[0][i], (double)want, (long long)u);
            return 1;
        }
        if (u > worst) worst = u;
    }
    printf("%s log: %lld values, worst %lld ulps from libm; 32-byte variant %s, 64-byte %s\n",
           NAME, (long long)n, (long long)worst, ran[1] ? "ran (same bits)" : "not here",
           ran[2] ? "ran (same bits)" : "not here");
    for (int v = 0; v < 3; v++) free(y[v]);
    free(x);
    return 0;
}

/* Forward and backward of the n_check first centers of a cluster, against the reference;
 * fd_entries: the entries per center checked by finite differences (all when larger). */
static int FN(check_cluster)(const nnpops__aev_desc *d, const test_cluster *c, int n_check,
                             int fd_entries, const char *what) {
    const int64_t L = d->aev_len, n = c->n, ld = n;
    int32_t *centers = malloc(sizeof(int32_t) * (size_t)n);
    CHECK(centers);
    for (int i = 0; i < n; i++) centers[i] = i;
    const size_t wb = nnpops__aev_work_bytes(d, c->max_entries);
    void *work = aligned_alloc(64, (wb + 63) / 64 * 64);
    REAL *aev[3];
    double *pg[3];
    REAL *g = malloc(sizeof(REAL) * (size_t)(L * n));
    double *gd = malloc(sizeof(double) * (size_t)L);
    LD (*v)[3] = malloc(sizeof(LD) * 3 * (size_t)(c->max_entries + 1));
    int32_t *sp = malloc(sizeof(int32_t) * (size_t)(c->max_entries + 1));
    LD *ref = malloc(sizeof(LD) * (size_t)L);
    CHECK(work && g && gd && v && sp && ref);
    unsigned long long seed = 11;
    for (int64_t i = 0; i < L * n; i++) g[i] = (REAL)(2 * test_rand(&seed) - 1);
    int ran[3];
    for (int k = 0; k < 3; k++) {
        aev[k] = malloc(sizeof(REAL) * (size_t)(L * n));
        pg[k] = calloc(3 * (size_t)c->n_pairs + 1, sizeof(double));
        CHECK(aev[k] && pg[k]);
        ran[k] = FN(nnpops__aev_variant_cpu)(k, 0, d, n, centers, c->start, c->entry, c->pairs,
                                              c->vec, c->species, aev[k], ld, NULL, work);
        if (ran[k])
            CHECK(FN(nnpops__aev_variant_cpu)(k, 1, d, n, centers, c->start, c->entry, c->pairs,
                                               c->vec, c->species, g, ld, pg[k], work));
    }
    CHECK(ran[0]);
    for (int k = 1; k < 3; k++) {
        if (!ran[k]) continue;
        CHECK(memcmp(aev[0], aev[k], sizeof(REAL) * (size_t)(L * n)) == 0);
        CHECK(memcmp(pg[0], pg[k], sizeof(double) * 3 * (size_t)c->n_pairs) == 0);
    }

    /* forward, every center */
    double worst_f = 0;
    int64_t most = 0, most_ang = 0;
    const int n_fwd = n < 40 ? (int)n : 40;
    for (int ci = 0; ci < n_fwd; ci++) {
        const int64_t ne = center_entries(c, ci, v, sp);
        if (ne > most) most = ne;
        int64_t na = 0;
        for (int64_t e = 0; e < ne; e++)
            na += sqrtl(v[e][0] * v[e][0] + v[e][1] * v[e][1] + v[e][2] * v[e][2]) < d->rc_a;
        if (na * (na - 1) / 2 > most_ang) most_ang = na * (na - 1) / 2;
        ref_aev(d, ne, v, sp, ref);
        LD big = 0;
        for (int64_t f = 0; f < L; f++) big = fabsl(ref[f]) > big ? fabsl(ref[f]) : big;
        for (int64_t f = 0; f < L; f++) {
            const LD got = aev[0][f * ld + ci], err = fabsl(got - ref[f]);
            const LD tol = TOL_F_ATOL * big + TOL_F_RTOL * fabsl(ref[f]);
            if (!(err <= tol)) {
                fprintf(stderr, "%s %s: center %d, AEV[%lld] = %.17g, reference %.17Lg\n", NAME,
                        what, ci, (long long)f, (double)got, ref[f]);
                return 1;
            }
            if (big > 0 && (double)(err / big) > worst_f) worst_f = (double)(err / big);
        }
    }

    /* backward: the n_check first centers, one at a time */
    double worst_b = 0;
    for (int ci = 0; ci < n_check; ci++) {
        double *pgc = calloc(3 * (size_t)c->n_pairs + 1, sizeof(double));
        CHECK(pgc);
        const int32_t one = ci;
        REAL *gc = malloc(sizeof(REAL) * (size_t)L);
        CHECK(gc);
        for (int64_t f = 0; f < L; f++) gc[f] = g[f * ld + ci];
        CHECK(FN(nnpops__aev_variant_cpu)(0, 1, d, 1, &one, c->start, c->entry, c->pairs,
                                           c->vec, c->species, gc, 1, pgc, work));
        for (int64_t f = 0; f < L; f++) gd[f] = (double)gc[f];
        const int64_t ne = center_entries(c, ci, v, sp), e0 = c->start[ci];
        const int64_t nfd = ne < fd_entries ? ne : fd_entries;
        double *fd = malloc(sizeof(double) * 3 * (size_t)(nfd + 1));
        CHECK(fd);
        double big = 0;
        for (int64_t e = 0; e < nfd; e++)
            for (int k = 0; k < 3; k++) {
                const LD h = 1e-5L, keep = v[e][k];
                v[e][k] = keep + h;
                const LD ep = ref_energy(d, ne, v, sp, gd, ref);
                v[e][k] = keep - h;
                const LD em = ref_energy(d, ne, v, sp, gd, ref);
                v[e][k] = keep;
                fd[3 * e + k] = (double)((ep - em) / (2 * h));
                if (fabs(fd[3 * e + k]) > big) big = fabs(fd[3 * e + k]);
            }
        for (int64_t e = 0; e < nfd; e++) {
            const int64_t code = c->entry[e0 + e];
            const double s = (code & 1) ? -1.0 : 1.0;
            for (int k = 0; k < 3; k++) {
                const double got = s * pgc[3 * (code >> 1) + k];
                const double err = fabs(got - fd[3 * e + k]);
                if (!(err <= TOL_B * big)) {
                    fprintf(stderr, "%s %s: center %d, entry %lld, dE/dr[%d] = %.17g, finite "
                            "differences %.17g (largest %.3g)\n", NAME, what, ci, (long long)e, k,
                            got, fd[3 * e + k], big);
                    return 1;
                }
                if (big > 0 && err / big > worst_b) worst_b = err / big;
            }
        }
        free(fd);
        free(gc);
        free(pgc);
    }
    printf("%s %s: forward of %d centers (up to %lld entries, %lld angular pairs) within %.2g "
           "of the largest entry; backward of %d within %.2g of the largest component; 32-byte "
           "variant %s, 64-byte %s\n", NAME, what, n_fwd, (long long)most, (long long)most_ang,
           worst_f, n_check, worst_b, ran[1] ? "same bits" : "not here",
           ran[2] ? "same bits" : "not here");
    for (int k = 0; k < 3; k++) {
        free(aev[k]);
        free(pg[k]);
    }
    free(centers);
    free(work);
    free(g);
    free(gd);
    free(v);
    free(sp);
    free(ref);
    return 0;
}

static int FN(run)(void) {
    if (FN(check_log)()) return 1;
    for (int generic = 0; generic < 2; generic++) {
        const nnpops__aev_desc d = make_desc(generic);
        test_cluster small, dense;
        make_cluster(&small, 40, 6.5, 0.75, 3, d.rc_r, 21 + generic);
        make_cluster(&dense, 260, 10.0, 0.6, 3, d.rc_r, 31 + generic);
        const char *name = generic ? "generic" : "ANI-1x";
        char what[64];
        snprintf(what, sizeof what, "%s, 40 atoms", name);
        if (FN(check_cluster)(&d, &small, 6, 1000, what)) return 1;
        snprintf(what, sizeof what, "%s, 260 atoms", name);
        if (FN(check_cluster)(&d, &dense, 1, 10, what)) return 1;
        test_cluster_free(&small);
        test_cluster_free(&dense);
    }
    return 0;
}

#endif
