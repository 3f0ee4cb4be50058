/*
 * test_aev_restrict.c - nnpops__aev_desc_restrict (kernels/cpu/aev.c), the AEV restricted to the
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
#include "kernels/cpu/kernels.h"

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

typedef struct cluster {
    int n;
    int64_t n_pairs;
    int32_t *species, *rank, *pairs, *centers;
    double *vec;
    int64_t *start, *entry, max_entries;
} cluster;

/* n atoms at random in a cube (no two closer than 0.9 A), species drawn from `present`. */
static cluster make_cluster(int n, uint32_t present, const int32_t *rank, double rc) {
    cluster c;
    memset(&c, 0, sizeof c);
    c.n = n;
    double *x = malloc(sizeof(double) * 3 * n);
    int list[32], np = 0;
    for (int s = 0; s < 32; s++)
        if (present >> s & 1u) list[np++] = s;
    c.species = malloc(sizeof(int32_t) * n);
    c.rank = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) {
        for (int tries = 0;; tries++) {
            for (int k = 0; k < 3; k++) x[3 * i + k] = 7.0 * test_rand(&rng);
            int ok = 1;
            for (int j = 0; j < i && ok; j++) {
                double d2 = 0;
                for (int k = 0; k < 3; k++) d2 += pow(x[3 * i + k] - x[3 * j + k], 2);
                ok = d2 > 0.81;
            }
            if (ok || tries > 1000) break;
        }
        c.species[i] = list[(int)(test_rand(&rng) * np) % np];
        c.rank[i] = rank[c.species[i]];
    }
    c.pairs = malloc(sizeof(int32_t) * n * (n - 1));
    c.vec = malloc(sizeof(double) * 3 * n * (n - 1) / 2);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double v[3], d2 = 0;
            for (int k = 0; k < 3; k++) {
                v[k] = x[3 * j + k] - x[3 * i + k];
                d2 += v[k] * v[k];
            }
            if (d2 >= rc * rc) continue;
            c.pairs[2 * c.n_pairs] = i;
            c.pairs[2 * c.n_pairs + 1] = j;
            memcpy(c.vec + 3 * c.n_pairs, v, sizeof v);
            c.n_pairs++;
        }
    c.start = malloc(sizeof(int64_t) * (n + 1));
    c.entry = malloc(sizeof(int64_t) * (2 * c.n_pairs + 1));
    c.max_entries = nnpops__center_lists_cpu(n, c.n_pairs, c.pairs, c.start, c.entry);
    c.centers = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) c.centers[i] = i;
    free(x);
    return c;
}

static void free_cluster(cluster *c) {
    free(c->species);
    free(c->rank);
    free(c->pairs);
    free(c->vec);
    free(c->start);
    free(c->entry);
    free(c->centers);
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
    cluster c = make_cluster(48, present, rank, full.rc_r);
    const int n = c.n, ld = n;
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
        nnpops__aev_forward_cpu_f64(&full, n, c.centers, c.start, c.entry, c.pairs, c.vec,
                                    c.species, (double *)af, ld, wf);
        nnpops__aev_forward_cpu_f64(&r, n, c.centers, c.start, c.entry, c.pairs, c.vec, c.rank,
                                    (double *)ar, ld, wr);
        nnpops__aev_backward_cpu_f64(&full, n, c.centers, c.start, c.entry, c.pairs, c.vec,
                                     c.species, (const double *)gf, ld, pf, wf);
        nnpops__aev_backward_cpu_f64(&r, n, c.centers, c.start, c.entry, c.pairs, c.vec, c.rank,
                                     (const double *)gr, ld, pr, wr);
    } else {
        nnpops__aev_forward_cpu_f32(&full, n, c.centers, c.start, c.entry, c.pairs, c.vec,
                                    c.species, (float *)af, ld, wf);
        nnpops__aev_forward_cpu_f32(&r, n, c.centers, c.start, c.entry, c.pairs, c.vec, c.rank,
                                    (float *)ar, ld, wr);
        nnpops__aev_backward_cpu_f32(&full, n, c.centers, c.start, c.entry, c.pairs, c.vec,
                                     c.species, (const float *)gf, ld, pf, wf);
        nnpops__aev_backward_cpu_f32(&r, n, c.centers, c.start, c.entry, c.pairs, c.vec, c.rank,
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
    free_cluster(&c);
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
