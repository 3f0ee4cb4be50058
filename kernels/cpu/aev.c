/*
 * aev.c - ANI atomic environment vectors (AEV) on the CPU and their adjoint (the reference and
 * fallback for the CUDA twins in kernels/cuda/), in float and double.
 *
 * What is computed (torchani's definition, see kernels.h for the index layout): for every center
 * atom, S radial blocks (one per neighbor species) and S(S+1)/2 angular blocks (one per unordered
 * pair of neighbor species) of
 *     radial   0.25 exp(-eta_r (d - shf_r)^2) fc(d, rc_r)
 *     angular  2 ((1 + cos(theta - shf_z)) / 2)^zeta exp(-eta_a ((d_j + d_k)/2 - shf_a)^2)
 *              fc(d_j, rc_a) fc(d_k, rc_a),   theta = acos(0.95 cos(angle j-i-k))
 * summed over the neighbor entries (atom, periodic image) of the center, and over the unordered
 * pairs of distinct entries for the angular terms (two images of one atom are distinct entries).
 *
 * Data: the neighbors of a center come from the CSR center lists built here from the half pair
 * list (entry = 2 p + direction bit, see kernels.h); pair vectors are double and are rounded to
 * REAL once per entry.  The AEV is written feature-major (column r of an [aev_len][ld] matrix):
 * each center is accumulated in a contiguous row of the work space, then stored in its column.
 *
 * Backward: the AEV's adjoint maps g = dE/dAEV of a center to dE/dr of each of its entries,
 *     radial:   dE/dv += sum g 0.25 exp(..) (fc' - 2 eta_r (d - shf_r) fc) v / d
 *     angular:  through d_j, d_k (shift term and the cutoff functions) and through
 *               c = v_j.v_k / (d_j d_k):  dc/dv_j = v_k / (d_j d_k) - c v_j / d_j^2,
 *               d/dc ((1 + cos(theta - s)) / 2)^zeta
 *                   = zeta base^(zeta-1) sin(theta - s) 0.475 / sqrt(1 - (0.95 c)^2)
 * The terms are formed in REAL and summed per entry in double, then added (with the sign of the
 * entry's direction) to the double pair gradients.  Centers are processed in order, so the result
 * is deterministic.
 *
 * The file includes itself twice: REAL = float (functions *_f32) and REAL = double (*_f64).
 */
#ifndef NNPOPS__AEV_BODY

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define NNPOPS__PI 3.14159265358979323846

/* One neighbor entry of the current center, in the work space. */
typedef struct aev_ent_f32 {
    double g[3];         /* dE/dv accumulated (backward) */
    float v[3], d;       /* vector from the center, length */
    float fca, dfca;     /* angular cutoff function and its derivative (d < rc_a only) */
    int32_t sp;          /* neighbor species */
    int32_t pad;
} aev_ent_f32;
typedef struct aev_ent_f64 {
    double g[3];
    double v[3], d;
    double fca, dfca;
    int32_t sp;
    int32_t pad;
} aev_ent_f64;

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

size_t nnpops__aev_work_bytes(const nnpops__aev_desc *desc, int64_t max_entries) {
    const size_t m = max_entries > 0 ? (size_t)max_entries : 1;
    return round64((size_t)desc->aev_len * sizeof(double)) + round64(m * sizeof(aev_ent_f64)) +
           round64(m * sizeof(int32_t));
}

int64_t nnpops__center_lists_cpu(int64_t n_centers, int64_t n_pairs, const int32_t *pairs,
                                 int64_t *start, int64_t *entry) {
    memset(start, 0, sizeof(int64_t) * (size_t)(n_centers + 1));
    for (int64_t p = 0; p < n_pairs; p++) {
        const int64_t i = pairs[2 * p], j = pairs[2 * p + 1];
        if (i < n_centers) start[i + 1]++;
        if (j < n_centers) start[j + 1]++;
    }
    int64_t max_count = 0;
    for (int64_t c = 0; c < n_centers; c++) {
        if (start[c + 1] > max_count) max_count = start[c + 1];
        start[c + 1] += start[c];
    }
    /* fill with start[c] as the cursor of c, then shift the cursors back into starts */
    for (int64_t p = 0; p < n_pairs; p++) {
        const int64_t i = pairs[2 * p], j = pairs[2 * p + 1];
        if (i < n_centers) entry[start[i]++] = 2 * p;
        if (j < n_centers) entry[start[j]++] = 2 * p + 1;
    }
    for (int64_t c = n_centers; c > 0; c--) start[c] = start[c - 1];
    start[0] = 0;
    return max_count;
}

/* Index of the angular block of the unordered species pair (s1, s2). */
static inline int32_t angular_block(int32_t s1, int32_t s2, int32_t n_species) {
    if (s1 > s2) {
        const int32_t t = s1;
        s1 = s2;
        s2 = t;
    }
    return s1 * n_species - s1 * (s1 - 1) / 2 + (s2 - s1);
}

int32_t nnpops__aev_desc_restrict(const nnpops__aev_desc *full, uint32_t present,
                                  nnpops__aev_desc *out, int32_t *rank, int32_t *map) {
    const int32_t S = full->n_species, R = full->radial_len, A = full->angular_len;
    const int32_t np = nnpops__species_ranks(present, S, rank);
    *out = *full;
    out->n_species = np;
    out->aev_len = np * R + np * (np + 1) / 2 * A;
    if (map) {
        /* the full order, restricted: radial blocks by species, then angular blocks by pair */
        int32_t t = 0;
        for (int32_t s = 0; s < S; s++)
            for (int32_t k = 0; rank[s] >= 0 && k < R; k++) map[t++] = s * R + k;
        for (int32_t s1 = 0; s1 < S; s1++)
            for (int32_t s2 = s1; s2 < S; s2++)
                for (int32_t k = 0; rank[s1] >= 0 && rank[s2] >= 0 && k < A; k++)
                    map[t++] = S * R + angular_block(s1, s2, S) * A + k;
    }
    return out->aev_len;
}

#define NNPOPS__AEV_BODY 1

#define REAL float
#define FN(name) name##_f32
#define M(fn) fn##f /* the float version of a <math.h> function */
#define ENT aev_ent_f32
#include "aev.c"
#undef REAL
#undef FN
#undef M
#undef ENT

#define REAL double
#define FN(name) name##_f64
#define M(fn) fn
#define ENT aev_ent_f64
#include "aev.c"
#undef REAL
#undef FN
#undef M
#undef ENT

#else /* NNPOPS__AEV_BODY: the precision-generic body */

#define TT NNPOPS__AEV_MAX_TERMS

/* The descriptor constants rounded to REAL once per call. */
typedef struct FN(aev_consts) {
    REAL rc_r, rc_a, pi_rc_r, pi_rc_a;
    REAL eta_r[TT], shf_r[TT], eta_a[TT], zeta[TT], shf_a[TT], shf_z[TT];
} FN(aev_consts);

static void FN(aev_consts_init)(const nnpops__aev_desc *d, FN(aev_consts) *k) {
    k->rc_r = (REAL)d->rc_r;
    k->rc_a = (REAL)d->rc_a;
    k->pi_rc_r = (REAL)(NNPOPS__PI / d->rc_r);
    k->pi_rc_a = (REAL)(NNPOPS__PI / d->rc_a);
    for (int i = 0; i < d->n_eta_r; i++) k->eta_r[i] = (REAL)d->eta_r[i];
    for (int i = 0; i < d->n_shf_r; i++) k->shf_r[i] = (REAL)d->shf_r[i];
    for (int i = 0; i < d->n_eta_a; i++) k->eta_a[i] = (REAL)d->eta_a[i];
    for (int i = 0; i < d->n_zeta; i++) k->zeta[i] = (REAL)d->zeta[i];
    for (int i = 0; i < d->n_shf_a; i++) k->shf_a[i] = (REAL)d->shf_a[i];
    for (int i = 0; i < d->n_shf_z; i++) k->shf_z[i] = (REAL)d->shf_z[i];
}

/* Loads the entries of center c into the work space: vectors, lengths, species, angular cutoff
 * values; returns the number of entries and the list of those inside the angular cutoff. */
static int64_t FN(aev_load_center)(const FN(aev_consts) *k, int64_t c, const int64_t *start,
                                   const int64_t *entry, const int32_t *pairs,
                                   const double *pair_vec, const int32_t *species, ENT *ent,
                                   int32_t *ang, int64_t *n_ang) {
    const int64_t e0 = start[c], ne = start[c + 1] - e0;
    int64_t na = 0;
    for (int64_t e = 0; e < ne; e++) {
        const int64_t code = entry[e0 + e];
        const int64_t p = code >> 1;
        const int rev = (int)(code & 1);
        const double sgn = rev ? -1.0 : 1.0;
        ENT *en = ent + e;
        en->g[0] = en->g[1] = en->g[2] = 0.0;
        for (int x = 0; x < 3; x++) en->v[x] = (REAL)(sgn * pair_vec[3 * p + x]);
        en->d = M(sqrt)(en->v[0] * en->v[0] + en->v[1] * en->v[1] + en->v[2] * en->v[2]);
        en->sp = species[pairs[2 * p + (rev ? 0 : 1)]];
        /* an entry at distance 0 (only possible with min_distance set to 0) has no direction:
         * it is kept out of the angular terms, whose gradient would divide by 0 */
        if (en->d < k->rc_a && en->d > 0) {
            const REAL arg = en->d * k->pi_rc_a;
            en->fca = (REAL)0.5 * M(cos)(arg) + (REAL)0.5;
            en->dfca = (REAL)-0.5 * k->pi_rc_a * M(sin)(arg);
            ang[na++] = (int32_t)e;
        }
    }
    *n_ang = na;
    return ne;
}

/* The angular quantities of one (j, k) pair of entries: cosine, f1 = base^zeta for every
 * (zeta, shf_z), f2 = exp(..) for every (eta_a, shf_a); with derivatives when df1, df2 != NULL. */
static void FN(aev_angular_factors)(const nnpops__aev_desc *d, const FN(aev_consts) *k,
                                    const ENT *ej, const ENT *ek, REAL *cosine, REAL *f1,
                                    REAL *df1, REAL *f2, REAL *df2) {
    const REAL dot = ej->v[0] * ek->v[0] + ej->v[1] * ek->v[1] + ej->v[2] * ek->v[2];
    REAL den = ej->d * ek->d;
    if (den < (REAL)1e-10) den = (REAL)1e-10;
    const REAL c = dot / den;
    const REAL theta = M(acos)((REAL)0.95 * c);
    /* d theta / d c = -0.95 / sqrt(1 - (0.95 c)^2) */
    const REAL dtheta = df1 ? (REAL)-0.95 / M(sqrt)((REAL)1 - (REAL)0.9025 * c * c) : 0;
    *cosine = c;
    for (int t = 0; t < d->n_shf_z; t++) {
        const REAL diff = theta - k->shf_z[t];
        const REAL base = ((REAL)1 + M(cos)(diff)) * (REAL)0.5;
        /* dbase/dc = -sin(diff)/2 * dtheta */
        const REAL dbase = df1 ? (REAL)-0.5 * M(sin)(diff) * dtheta : 0;
        for (int z = 0; z < d->n_zeta; z++) {
            const REAL pm1 = M(pow)(base, k->zeta[z] - (REAL)1);
            f1[z * d->n_shf_z + t] = pm1 * base;
            if (df1) df1[z * d->n_shf_z + t] = k->zeta[z] * pm1 * dbase;
        }
    }
    const REAL dm = (ej->d + ek->d) * (REAL)0.5;
    for (int a = 0; a < d->n_eta_a; a++) {
        for (int q = 0; q < d->n_shf_a; q++) {
            const REAL x = dm - k->shf_a[q];
            const REAL f = M(exp)(-k->eta_a[a] * x * x);
            f2[a * d->n_shf_a + q] = f;
            if (df2) df2[a * d->n_shf_a + q] = (REAL)-2 * k->eta_a[a] * x * f;
        }
    }
}

/* Work space layout: row [aev_len] (sized for double) | entries [ne_max] | angular list
 * [ne_max], ne_max = the largest entry count among the n centers. */
static void FN(aev_work_layout)(const nnpops__aev_desc *d, int64_t n, const int32_t *centers,
                                const int64_t *start, void *work, REAL **row, ENT **ent,
                                int32_t **ang) {
    int64_t ne_max = 1;
    for (int64_t r = 0; r < n; r++) {
        const int64_t c = centers[r];
        if (start[c + 1] - start[c] > ne_max) ne_max = start[c + 1] - start[c];
    }
    char *w = (char *)work;
    *row = (REAL *)w;
    w += round64((size_t)d->aev_len * sizeof(double));
    *ent = (ENT *)w;
    w += round64((size_t)ne_max * sizeof(aev_ent_f64)); /* the larger of the two entry types */
    *ang = (int32_t *)w;
}

void FN(nnpops__aev_forward_cpu)(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                 const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                 const double *pair_vec, const int32_t *species, REAL *aev,
                                 int64_t ld, void *work) {
    const nnpops__aev_desc *d = desc;
    FN(aev_consts) k;
    FN(aev_consts_init)(d, &k);
    const int32_t L = d->aev_len, R = d->radial_len, A = d->angular_len, S = d->n_species;
    const int32_t nsr = d->n_shf_r, ner = d->n_eta_r;
    const int32_t nsz = d->n_shf_z, nsa = d->n_shf_a, nz = d->n_zeta;
    REAL *row;
    ENT *ent;
    int32_t *ang;
    FN(aev_work_layout)(d, n, centers, start, work, &row, &ent, &ang);
    REAL f1[TT * TT], f2[TT * TT];

    for (int64_t r = 0; r < n; r++) {
        const int64_t c = centers[r];
        int64_t na;
        const int64_t ne =
            FN(aev_load_center)(&k, c, start, entry, pairs, pair_vec, species, ent, ang, &na);
        memset(row, 0, sizeof(REAL) * (size_t)L);

        /* radial */
        for (int64_t e = 0; e < ne; e++) {
            const ENT *en = ent + e;
            if (!(en->d < k.rc_r)) continue;
            const REAL fc = (REAL)0.5 * M(cos)(en->d * k.pi_rc_r) + (REAL)0.5;
            REAL *blk = row + (int64_t)en->sp * R;
            for (int ie = 0; ie < ner; ie++) {
                for (int is = 0; is < nsr; is++) {
                    const REAL x = en->d - k.shf_r[is];
                    blk[ie * nsr + is] += (REAL)0.25 * M(exp)(-k.eta_r[ie] * x * x) * fc;
                }
            }
        }

        /* angular: unordered pairs of distinct entries inside rc_a */
        for (int64_t a1 = 0; a1 < na; a1++) {
            const ENT *ej = ent + ang[a1];
            for (int64_t a2 = a1 + 1; a2 < na; a2++) {
                const ENT *ek = ent + ang[a2];
                REAL cosine;
                FN(aev_angular_factors)(d, &k, ej, ek, &cosine, f1, NULL, f2, NULL);
                const REAL pre = (REAL)2 * ej->fca * ek->fca;
                REAL *blk = row + (int64_t)S * R +
                            (int64_t)angular_block(ej->sp, ek->sp, S) * A;
                for (int a = 0; a < d->n_eta_a; a++)
                    for (int z = 0; z < nz; z++)
                        for (int q = 0; q < nsa; q++) {
                            REAL *out = blk + ((a * nz + z) * nsa + q) * nsz;
                            const REAL f2pre = f2[a * nsa + q] * pre;
                            const REAL *f1z = f1 + z * nsz;
                            for (int t = 0; t < nsz; t++) out[t] += f1z[t] * f2pre;
                        }
            }
        }

        for (int32_t f = 0; f < L; f++) aev[(int64_t)f * ld + r] = row[f];
    }
}

void FN(nnpops__aev_backward_cpu)(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                  const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                  const double *pair_vec, const int32_t *species,
                                  const REAL *grad_aev, int64_t ld, double *pair_grad,
                                  void *work) {
    const nnpops__aev_desc *d = desc;
    FN(aev_consts) k;
    FN(aev_consts_init)(d, &k);
    const int32_t L = d->aev_len, R = d->radial_len, A = d->angular_len, S = d->n_species;
    const int32_t nsr = d->n_shf_r, ner = d->n_eta_r;
    const int32_t nsz = d->n_shf_z, nsa = d->n_shf_a, nz = d->n_zeta;
    REAL *row;
    ENT *ent;
    int32_t *ang;
    FN(aev_work_layout)(d, n, centers, start, work, &row, &ent, &ang);
    REAL f1[TT * TT], df1[TT * TT], f2[TT * TT], df2[TT * TT];

    for (int64_t r = 0; r < n; r++) {
        const int64_t c = centers[r];
        int64_t na;
        const int64_t ne =
            FN(aev_load_center)(&k, c, start, entry, pairs, pair_vec, species, ent, ang, &na);
        for (int32_t f = 0; f < L; f++) row[f] = grad_aev[(int64_t)f * ld + r];

        /* radial: dE/dd, then along v / d */
        for (int64_t e = 0; e < ne; e++) {
            ENT *en = ent + e;
            if (!(en->d < k.rc_r) || !(en->d > 0)) continue; /* no direction at distance 0 */
            const REAL arg = en->d * k.pi_rc_r;
            const REAL fc = (REAL)0.5 * M(cos)(arg) + (REAL)0.5;
            const REAL dfc = (REAL)-0.5 * k.pi_rc_r * M(sin)(arg);
            const REAL *g = row + (int64_t)en->sp * R;
            REAL dedd = 0;
            for (int ie = 0; ie < ner; ie++) {
                for (int is = 0; is < nsr; is++) {
                    const REAL x = en->d - k.shf_r[is];
                    const REAL ex = (REAL)0.25 * M(exp)(-k.eta_r[ie] * x * x);
                    dedd += g[ie * nsr + is] * ex * (dfc - (REAL)2 * k.eta_r[ie] * x * fc);
                }
            }
            const REAL s = dedd / en->d;
            for (int x = 0; x < 3; x++) en->g[x] += (double)(s * en->v[x]);
        }

        /* angular */
        for (int64_t a1 = 0; a1 < na; a1++) {
            ENT *ej = ent + ang[a1];
            for (int64_t a2 = a1 + 1; a2 < na; a2++) {
                ENT *ek = ent + ang[a2];
                REAL c_;
                FN(aev_angular_factors)(d, &k, ej, ek, &c_, f1, df1, f2, df2);
                const REAL *g = row + (int64_t)S * R +
                                (int64_t)angular_block(ej->sp, ek->sp, S) * A;
                /* sums over the block of g * (df1 f2), g * (f1 df2), g * (f1 f2) */
                REAL sc = 0, sm = 0, sv = 0;
                for (int a = 0; a < d->n_eta_a; a++)
                    for (int z = 0; z < nz; z++)
                        for (int q = 0; q < nsa; q++) {
                            const REAL *gg = g + ((a * nz + z) * nsa + q) * nsz;
                            const REAL *f1z = f1 + z * nsz, *df1z = df1 + z * nsz;
                            REAL h1 = 0, hd1 = 0;
                            for (int t = 0; t < nsz; t++) {
                                h1 += gg[t] * f1z[t];
                                hd1 += gg[t] * df1z[t];
                            }
                            sc += hd1 * f2[a * nsa + q];
                            sm += h1 * df2[a * nsa + q];
                            sv += h1 * f2[a * nsa + q];
                        }
                const REAL fcjk = ej->fca * ek->fca;
                const REAL dedc = (REAL)2 * fcjk * sc;
                /* dE/dd_j: mean-distance term (half of it) + cutoff function of j */
                const REAL dm_term = fcjk * sm; /* 2 * fcjk * sm * 0.5 */
                const REAL dedj = dm_term + (REAL)2 * sv * ej->dfca * ek->fca;
                const REAL dedk = dm_term + (REAL)2 * sv * ej->fca * ek->dfca;
                const REAL inv_jk = (REAL)1 / (ej->d * ek->d);
                const REAL cj = dedc * c_ / (ej->d * ej->d), ck = dedc * c_ / (ek->d * ek->d);
                const REAL rj = dedj / ej->d, rk = dedk / ek->d;
                for (int x = 0; x < 3; x++) {
                    const REAL gj = dedc * ek->v[x] * inv_jk - cj * ej->v[x] + rj * ej->v[x];
                    const REAL gk = dedc * ej->v[x] * inv_jk - ck * ek->v[x] + rk * ek->v[x];
                    ej->g[x] += (double)gj;
                    ek->g[x] += (double)gk;
                }
            }
        }

        /* scatter into the pair gradients with the entries' directions */
        const int64_t e0 = start[c];
        for (int64_t e = 0; e < ne; e++) {
            const int64_t code = entry[e0 + e];
            double *pg = pair_grad + 3 * (code >> 1);
            if (code & 1) {
                for (int x = 0; x < 3; x++) pg[x] -= ent[e].g[x];
            } else {
                for (int x = 0; x < 3; x++) pg[x] += ent[e].g[x];
            }
        }
    }
}

#undef TT

#endif /* NNPOPS__AEV_BODY */
