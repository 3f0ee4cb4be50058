/*
 * test_aev_restrict.c - nnpops__aev_desc_restrict (potentials/ani/cpu/aev.c), the AEV restricted to the
 * species present among a step's atoms, which the GPU step computes instead of the full AEV
 * (potentials/ani/ani_cuda.c).  With the CPU AEV kernels on random clusters whose atoms use only
 * the present species (ANI-2x's sizes: 7 species, radial blocks of 16, angular blocks of 32):
 *
 *   forward   the restricted AEV (restricted descriptor, species ranked) equals the full AEV at
 *             the map's entries, bit for bit, and every other full entry is exactly zero;
 *             lengths: 128 for {H, O}, 384 for {H, C, N, O}, 560 for {H, C, N, O, S}, 1008 for
 *             all seven, 48 for one species
 *   backward  dE/dr from the restricted adjoint with dE/dAEV taken at the map's entries equals the
 *             full adjoint's with random dE/dAEV at EVERY entry (no terms behind the skipped
 *             ones), bit for bit
 *   map       the map is strictly increasing, and ranks are -1 exactly for the absent species
 * Both precisions, 20 random species sets (each with a cluster of 48 atoms).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "potentials/ani/ani_ops.h"
#include "cluster.h"

static unsigned long long rng = 0x2545f4914f6cdd1dull;

/* ANI-2x's AEV sizes; the constants are plausible values of that form. */
static nnpops__aev_desc ani2x_like(void) {
    nnpops__aev_desc d;
    memset(&d, 0, sizeof d);
    d.n_species = 7;
    d.n_eta_r = 1;
    d.n_shf_r = 16;
    d.n_eta_a = 1;
    d.n_zeta = 1;
    d.n_shf_a = 8;
    d.n_shf_z = 4;
    d.radial_len = 16;
    d.angular_len = 32;
    d.aev_len = 7 * 16 + 28 * 32;
    d.rc_r = 5.1;
    d.rc_a = 3.5;
    d.eta_r[0] = 19.7;
    d.eta_a[0] = 12.5;
    d.zeta[0] = 14.1;
    for (int k = 0; k < 16; k++) d.shf_r[k] = 0.8 + 0.26875 * k;
    for (int k = 0; k < 8; k++) d.shf_a[k] = 0.8 + 0.3375 * k;
    for (int k = 0; k < 4; k++) d.shf_z[k] = 0.3927 + 0.7854 * k;
    return d;
}

/* n atoms at random in a cube of side 7 A (no two closer than 0.9 A: tests/common/cluster.h),
 * species drawn from `present`; rk[i] is the rank of atom i's species. */
static void make_cluster(test_cluster *c, int32_t *rk, int n, uint32_t present,
                         const int32_t *rank, double rc) {
    test_cluster_new(c, n, 7.0, 0.9, 0, &rng);
    int list[32], np = 0;
    for (int s = 0; s < 32; s++)
        if (present >> s & 1u) list[np++] = s;
    for (int i = 0; i < n; i++) {
        c->species[i] = list[(int)(test_rand(&rng) * np) % np];
        rk[i] = rank[c->species[i]];
    }
    test_cluster_pairs(c, rc);
}

static void *work_for(const nnpops__aev_desc *d, int64_t max_entries) {
    size_t b = nnpops__aev_work_bytes(d, max_entries);
    b = (b + 63) / 64 * 64 + 64;
    void *p = aligned_alloc(64, b);
    CHECK(p != NULL);
    return p;
}

/* The checks of the header for one species set, one precision; returns the restricted length. */
static int32_t check_set(uint32_t present, int f64) {
    const nnpops__aev_desc full = ani2x_like();
    nnpops__aev_desc r;
    int32_t rank[7], map[1008];
    const int32_t Lr = nnpops__aev_desc_restrict(&full, present, &r, rank, map);
    const int32_t L = full.aev_len;
    CHECK(Lr == r.aev_len && Lr <= L);
    for (int s = 0; s < 7; s++) CHECK((rank[s] < 0) == !(present >> s & 1u));
    for (int t = 1; t < Lr; t++) CHECK(map[t] > map[t - 1]);
    enum { N = 48 };
    test_cluster c;
    int32_t crank[N], centers[N];
    make_cluster(&c, crank, N, present, rank, full.rc_r);
    for (int i = 0; i < N; i++) centers[i] = i;
    const int n = N, ld = n;
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    char *af = calloc((size_t)L * ld, es), *ar = calloc((size_t)(Lr ? Lr : 1) * ld, es);
    char *gf = calloc((size_t)L * ld, es), *gr = calloc((size_t)(Lr ? Lr : 1) * ld, es);
    double *pf = calloc(3 * (size_t)(c.n_pairs + 1), sizeof(double));
    double *pr = calloc(3 * (size_t)(c.n_pairs + 1), sizeof(double));
    void *wf = work_for(&full, c.max_entries), *wr = work_for(&r, c.max_entries);
    for (int64_t k = 0; k < (int64_t)L * ld; k++) {
        const double g = 2 * test_rand(&rng) - 1;
        if (f64)
            ((double *)gf)[k] = g;
        else
            ((float *)gf)[k] = (float)g;
    }
    for (int t = 0; t < Lr; t++)
        memcpy(gr + es * (size_t)t * ld, gf + es * (size_t)map[t] * ld, es * ld);
    if (f64) {
        nnpops__aev_forward_cpu_f64(&full, n, centers, c.start, c.entry, c.pairs, c.vec,
                                    c.species, (double *)af, ld, wf);
        nnpops__aev_forward_cpu_f64(&r, n, centers, c.start, c.entry, c.pairs, c.vec, crank,
                                    (double *)ar, ld, wr);
        nnpops__aev_backward_cpu_f64(&full, n, centers, c.start, c.entry, c.pairs, c.vec,
                                     c.species, (const double *)gf, ld, pf, wf);
        nnpops__aev_backward_cpu_f64(&r, n, centers, c.start, c.entry, c.pairs, c.vec, crank,
                                     (const double *)gr, ld, pr, wr);
    } else {
        nnpops__aev_forward_cpu_f32(&full, n, centers, c.start, c.entry, c.pairs, c.vec,
                                    c.species, (float *)af, ld, wf);
        nnpops__aev_forward_cpu_f32(&r, n, centers, c.start, c.entry, c.pairs, c.vec, crank,
                                    (float *)ar, ld, wr);
        nnpops__aev_backward_cpu_f32(&full, n, centers, c.start, c.entry, c.pairs, c.vec,
                                     c.species, (const float *)gf, ld, pf, wf);
        nnpops__aev_backward_cpu_f32(&r, n, centers, c.start, c.entry, c.pairs, c.vec, crank,
                                     (const float *)gr, ld, pr, wr);
    }
    /* forward: the map's entries equal, every other entry zero; and the AEV is not all zero */
    int t = 0, nonzero = 0;
    for (int f = 0; f < L; f++) {
        const int kept = t < Lr && map[t] == f;
        for (int col = 0; col < n; col++) {
            const double vf = f64 ? ((double *)af)[(size_t)f * ld + col]
                                  : ((float *)af)[(size_t)f * ld + col];
            if (!kept) {
                if (vf != 0.0) {
                    fprintf(stderr, "set %#x: full entry %d of atom %d is %g, not 0\n", present,
                            f, col, vf);
                    exit(1);
                }
                continue;
            }
            const double vr = f64 ? ((double *)ar)[(size_t)t * ld + col]
                                  : ((float *)ar)[(size_t)t * ld + col];
            if (vr != vf) {
                fprintf(stderr, "set %#x: restricted entry %d (full %d) of atom %d: %.17g, %.17g\n",
                        present, t, f, col, vr, vf);
                exit(1);
            }
            nonzero += vf != 0.0;
        }
        t += kept;
    }
    CHECK(t == Lr && nonzero > 0);
    /* backward: the same dE/dr bit for bit */
    for (int64_t k = 0; k < 3 * c.n_pairs; k++) {
        if (pf[k] != pr[k]) {
            fprintf(stderr, "set %#x: dE/dr[%lld] %.17g (full) against %.17g (restricted)\n",
                    present, (long long)k, pf[k], pr[k]);
            exit(1);
        }
    }
    double gmax = 0;
    for (int64_t k = 0; k < 3 * c.n_pairs; k++) gmax = fmax(gmax, fabs(pf[k]));
    CHECK(gmax > 0);
    free(af);
    free(ar);
    free(gf);
    free(gr);
    free(pf);
    free(pr);
    free(wf);
    free(wr);
    test_cluster_free(&c);
    return Lr;
}

static int case_lengths(void) {
    /* species indices in ANI-2x's order: H 0, C 1, N 2, O 3, S 4, F 5, Cl 6 */
    const struct {
        uint32_t set;
        int32_t len;
    } want[] = {{0x9, 128}, {0xf, 384}, {0x1f, 560}, {0x7f, 1008}, {0x1, 48}, {0x40, 48}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            const int32_t got = check_set(want[k].set, f64);
            printf("set %#04x %s: %d entries\n", want[k].set, f64 ? "f64" : "f32", got);
            CHECK(got == want[k].len);
        }
    return 0;
}

static int case_random(void) {
    for (int k = 0; k < 20; k++) {
        uint32_t set = 0;
        while (!set) set = (uint32_t)(test_rand(&rng) * 128) & 0x7fu;
        for (int f64 = 0; f64 < 2; f64++) check_set(set, f64);
    }
    printf("20 random species sets: restricted AEV and adjoint equal the full ones\n");
    return 0;
}

static const test_case cases[] = {
    {"lengths", case_lengths},
    {"random", case_random},
};

int main(int argc, char **argv) {
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
