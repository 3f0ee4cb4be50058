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
 * with theta never formed: cos(theta) = 0.95 c, sin(theta) = sqrt(1 - (0.95 c)^2), and
 * cos(theta - s), sin(theta - s) from the sum formulas with cos(s), sin(s) computed once.
 * The terms are formed in REAL and summed per entry in double, then added (with the sign of the
 * entry's direction) to the double pair gradients.  Centers are processed in order, so the result
 * is deterministic.
 *
 * Vectors: the transcendental factors (the radial exponentials of a batch of entries; the angular
 * powers and exponentials of a batch of pairs, base^zeta = exp(zeta ln base)) are computed in
 * vectors by aev_vec.h with vmath.h's exp and log (a few units in the last place; terms below
 * about 2e-19 in float, 1e-148 in double, are flushed to 0, so that no subnormal number slows
 * the sums), then summed per entry or pair in the order of the scalar loops.  The same bits from
 * every vector width (16, 32 or 64 bytes, chosen at run time: nnpops__cpu_isa).  On a water box
 * the float32 step takes 30 % less time than with a libm call per term.
 *
 * The file includes itself twice: REAL = float (functions *_f32) and REAL = double (*_f64).
 */
#ifndef NNPOPS__AEV_BODY

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "potentials/ani/ani_ops.h"

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

/* Batches of the vector parts (aev_vec.h): AEV_PB entries or pairs, a multiple of every vector
 * length. */
#define AEV_PB 128

/* The batch arrays' sizes in values: per-pair (or per-entry) arrays AEV_BATCH_1 of AEV_PB, term
 * arrays [terms][AEV_PB] (or the transpose) of the radial terms (R), f1 / df1 (n_zeta n_shf_z)
 * and f2 / df2 (n_eta_a n_shf_a). */
#define AEV_BATCH_1 5 /* dist / cs, sn, dm, dtheta, cosine */
static size_t aev_batch_values(const nnpops__aev_desc *d) {
    const size_t n1 = (size_t)d->n_zeta * d->n_shf_z, n2 = (size_t)d->n_eta_a * d->n_shf_a;
    return (size_t)AEV_PB * (AEV_BATCH_1 + (size_t)d->radial_len + 2 * n1 + 2 * n2);
}

size_t nnpops__aev_work_bytes(const nnpops__aev_desc *desc, int64_t max_entries) {
    const size_t m = max_entries > 0 ? (size_t)max_entries : 1;
    return round64((size_t)desc->aev_len * sizeof(double)) + round64(m * sizeof(aev_ent_f64)) +
           round64(m * sizeof(int32_t)) + round64(2 * AEV_PB * sizeof(int32_t)) +
           round64(aev_batch_values(desc) * sizeof(double));
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

/* *p += v where other threads may add to *p at the same time (compare-and-swap). */
static inline void aev_add_shared(double *p, double v) {
    double old, sum;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        sum = old + v;
    } while (!__atomic_compare_exchange(p, &old, &sum, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

#define NNPOPS__AEV_BODY 1

#define REAL float
#define REAL_SIZE 4
#define AEV_TINY FLT_MIN
#define FN(name) name##_f32
#define M(fn) fn##f /* the float version of a <math.h> function */
#define ENT aev_ent_f32
#include "aev.c"
#undef REAL
#undef REAL_SIZE
#undef AEV_TINY
#undef FN
#undef M
#undef ENT

#define REAL double
#define REAL_SIZE 8
#define AEV_TINY DBL_MIN
#define FN(name) name##_f64
#define M(fn) fn
#define ENT aev_ent_f64
#include "aev.c"
#undef REAL
#undef REAL_SIZE
#undef AEV_TINY
#undef FN
#undef M
#undef ENT

#else /* NNPOPS__AEV_BODY: the precision-generic body */

#define TT NNPOPS__AEV_MAX_TERMS

/* The descriptor constants rounded to REAL once per call. */
typedef struct FN(aev_consts) {
    REAL rc_r, rc_a, pi_rc_r, pi_rc_a;
    REAL eta_r[TT], shf_r[TT], eta_a[TT], zeta[TT], shf_a[TT];
    REAL cos_z[TT], sin_z[TT]; /* cos and sin of the angle shifts shf_z */
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
    for (int i = 0; i < d->n_shf_z; i++) {
        k->cos_z[i] = (REAL)cos(d->shf_z[i]);
        k->sin_z[i] = (REAL)sin(d->shf_z[i]);
    }
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

/* ---- the vector parts: one variant per instruction set (aev_vec.h) ---- */
#define VB 16
#define NM(name) FN(name##_base)
#define TARGET
#include "aev_vec.h"
#undef VB
#undef NM
#undef TARGET
#if NNPOPS__CPU_X86
#define VB 32
#define NM(name) FN(name##_avx)
#define TARGET __attribute__((target("avx2,fma")))
#include "aev_vec.h"
#undef VB
#undef NM
#undef TARGET
#define VB 64
#define NM(name) FN(name##_avx512)
#define TARGET __attribute__((target("avx512f")))
#include "aev_vec.h"
#undef VB
#undef NM
#undef TARGET
#endif

/* The variant of instruction set isa (2: 64-byte vectors, 1: 32-byte, 0: 16-byte). */
static void FN(aev_radial_terms)(int isa, const FN(aev_consts) *k, int ner, int nsr, int64_t nb,
                                 const REAL *dist, REAL *ex) {
#if NNPOPS__CPU_X86
    if (isa == 2) FN(aev_radial_terms_avx512)(k, ner, nsr, nb, dist, ex);
    else if (isa == 1) FN(aev_radial_terms_avx)(k, ner, nsr, nb, dist, ex);
    else
#endif
        FN(aev_radial_terms_base)(k, ner, nsr, nb, dist, ex);
    (void)isa;
}
static void FN(aev_angular_terms)(int isa, const nnpops__aev_desc *d, const FN(aev_consts) *k,
                                  int64_t nb, const REAL *cs, const REAL *sn, const REAL *dm,
                                  const REAL *dth, REAL *f1, REAL *df1, REAL *f2, REAL *df2) {
#if NNPOPS__CPU_X86
    if (isa == 2) FN(aev_angular_terms_avx512)(d, k, nb, cs, sn, dm, dth, f1, df1, f2, df2);
    else if (isa == 1) FN(aev_angular_terms_avx)(d, k, nb, cs, sn, dm, dth, f1, df1, f2, df2);
    else
#endif
        FN(aev_angular_terms_base)(d, k, nb, cs, sn, dm, dth, f1, df1, f2, df2);
    (void)isa;
}

/* Work space: row [aev_len] (sized for double) | entries [ne_max] | angular list [ne_max] | the
 * batch's entry indices pj, pk [AEV_PB] | its arrays (aev_batch_values), ne_max = the largest
 * entry count among the n centers. */
typedef struct FN(aev_work) {
    REAL *row;
    ENT *ent;
    int32_t *ang, *pj, *pk;
    REAL *dist; /* radial: the entries' distances (the same array as cs) */
    REAL *cs, *sn, *dm, *dth, *cosine;
    REAL *ex, *f2, *df2; /* [terms][AEV_PB] */
    REAL *f1, *df1;      /* [AEV_PB][n_zeta n_shf_z] */
} FN(aev_work);

static void FN(aev_work_layout)(const nnpops__aev_desc *d, int64_t n, const int32_t *centers,
                                const int64_t *start, void *work, FN(aev_work) *w) {
    int64_t ne_max = 1;
    for (int64_t r = 0; r < n; r++) {
        const int64_t c = centers[r];
        if (start[c + 1] - start[c] > ne_max) ne_max = start[c + 1] - start[c];
    }
    char *p = (char *)work;
    w->row = (REAL *)p;
    p += round64((size_t)d->aev_len * sizeof(double));
    w->ent = (ENT *)p;
    p += round64((size_t)ne_max * sizeof(aev_ent_f64)); /* the larger of the two entry types */
    w->ang = (int32_t *)p;
    p += round64((size_t)ne_max * sizeof(int32_t));
    w->pj = (int32_t *)p;
    w->pk = w->pj + AEV_PB;
    p += round64(2 * AEV_PB * sizeof(int32_t));
    REAL *b = (REAL *)p;
    const int64_t n1 = (int64_t)d->n_zeta * d->n_shf_z, n2 = (int64_t)d->n_eta_a * d->n_shf_a;
    w->cs = w->dist = b;
    w->sn = b + AEV_PB;
    w->dm = b + 2 * AEV_PB;
    w->dth = b + 3 * AEV_PB;
    w->cosine = b + 4 * AEV_PB;
    w->ex = b + AEV_BATCH_1 * AEV_PB;
    w->f1 = w->ex + (int64_t)d->radial_len * AEV_PB;
    w->df1 = w->f1 + n1 * AEV_PB;
    w->f2 = w->df1 + n1 * AEV_PB;
    w->df2 = w->f2 + n2 * AEV_PB;
}

/* Pads a batch of nb values to a whole vector (16 values: the longest vector) with v. */
static void FN(aev_pad)(REAL *a, int64_t nb, REAL v) {
    for (int64_t b = nb; b < AEV_PB && (b & 15); b++) a[b] = v;
}

/* Radial: the next batch of the center's entries inside rc_r (and, for the backward, at a
 * distance > 0, which gives a direction) from entry *e on: their indices in w->pj, their terms in
 * w->ex (vectors); returns the batch's size, 0 when no entry is left. */
static int64_t FN(aev_entry_batch)(int isa, const nnpops__aev_desc *d, const FN(aev_consts) *k,
                                   FN(aev_work) *w, int64_t ne, int64_t *e, int backward) {
    int64_t nb = 0;
    for (; nb < AEV_PB && *e < ne; ++*e) {
        const REAL dist = w->ent[*e].d;
        if (!(dist < k->rc_r) || (backward && !(dist > 0))) continue;
        w->pj[nb] = (int32_t)*e;
        w->dist[nb++] = dist;
    }
    if (nb == 0) return 0;
    FN(aev_pad)(w->dist, nb, 0);
    FN(aev_radial_terms)(isa, k, d->n_eta_r, d->n_shf_r, nb, w->dist, w->ex);
    return nb;
}

/* Angular: the unordered pairs of distinct entries inside rc_a, in batches: geometry per pair
 * (cosine c of the angle, cs = cos(theta) = 0.95 c, sn = sin(theta) = sqrt(1 - cs^2) > 0, the
 * mean distance dm, and for the backward dtheta / dc = -0.95 / sn), the factors (vectors), then
 * done(nb) with the pairs' entries in w->pj, w->pk. */
static int64_t FN(aev_pair_batch)(int isa, const nnpops__aev_desc *d, const FN(aev_consts) *k,
                                  FN(aev_work) *w, int64_t na, int64_t *a1, int64_t *a2,
                                  int backward) {
    int64_t nb = 0;
    while (nb < AEV_PB && *a1 + 1 < na) {
        const ENT *ej = w->ent + w->ang[*a1], *ek = w->ent + w->ang[*a2];
        const REAL dot = ej->v[0] * ek->v[0] + ej->v[1] * ek->v[1] + ej->v[2] * ek->v[2];
        REAL den = ej->d * ek->d;
        if (den < (REAL)1e-10) den = (REAL)1e-10;
        const REAL c = dot / den;
        const REAL cs = (REAL)0.95 * c;
        const REAL sn = M(sqrt)(M(fmax)((REAL)0, (REAL)1 - cs * cs));
        w->pj[nb] = w->ang[*a1];
        w->pk[nb] = w->ang[*a2];
        w->cosine[nb] = c;
        w->cs[nb] = cs;
        w->sn[nb] = sn;
        w->dm[nb] = (ej->d + ek->d) * (REAL)0.5;
        if (backward) w->dth[nb] = (REAL)-0.95 / sn;
        nb++;
        if (++*a2 == na) {
            ++*a1;
            *a2 = *a1 + 1;
        }
    }
    if (nb == 0) return 0;
    FN(aev_pad)(w->cs, nb, 0);
    FN(aev_pad)(w->sn, nb, 1);
    FN(aev_pad)(w->dm, nb, 0);
    if (backward) FN(aev_pad)(w->dth, nb, -1);
    FN(aev_angular_terms)(isa, d, k, nb, w->cs, w->sn, w->dm, backward ? w->dth : NULL, w->f1,
                          backward ? w->df1 : NULL, w->f2, backward ? w->df2 : NULL);
    return nb;
}

static void FN(aev_forward)(int isa, const nnpops__aev_desc *desc, int64_t n,
                            const int32_t *centers, const int64_t *start, const int64_t *entry,
                            const int32_t *pairs, const double *pair_vec, const int32_t *species,
                            REAL *aev, int64_t ld, void *work) {
    const nnpops__aev_desc *d = desc;
    FN(aev_consts) k;
    FN(aev_consts_init)(d, &k);
    const int32_t L = d->aev_len, R = d->radial_len, A = d->angular_len, S = d->n_species;
    const int32_t nsz = d->n_shf_z, nsa = d->n_shf_a, nz = d->n_zeta;
    const int64_t n1 = (int64_t)nz * nsz;
    FN(aev_work) w;
    FN(aev_work_layout)(d, n, centers, start, work, &w);
    REAL *row = w.row;

    for (int64_t r = 0; r < n; r++) {
        const int64_t c = centers[r];
        int64_t na;
        const int64_t ne = FN(aev_load_center)(&k, c, start, entry, pairs, pair_vec, species,
                                               w.ent, w.ang, &na);
        memset(row, 0, sizeof(REAL) * (size_t)L);

        /* radial */
        int64_t e = 0, nb;
        while ((nb = FN(aev_entry_batch)(isa, d, &k, &w, ne, &e, 0)) > 0) {
            for (int64_t b = 0; b < nb; b++) {
                const ENT *en = w.ent + w.pj[b];
                const REAL fc = (REAL)0.5 * M(cos)(en->d * k.pi_rc_r) + (REAL)0.5;
                REAL *blk = row + (int64_t)en->sp * R;
                for (int t = 0; t < R; t++) blk[t] += w.ex[(int64_t)t * AEV_PB + b] * fc;
            }
        }

        /* angular: unordered pairs of distinct entries inside rc_a */
        int64_t a1 = 0, a2 = 1;
        while ((nb = FN(aev_pair_batch)(isa, d, &k, &w, na, &a1, &a2, 0)) > 0) {
            for (int64_t b = 0; b < nb; b++) {
                const ENT *ej = w.ent + w.pj[b], *ek = w.ent + w.pk[b];
                const REAL pre = (REAL)2 * ej->fca * ek->fca;
                REAL *blk = row + (int64_t)S * R +
                            (int64_t)angular_block(ej->sp, ek->sp, S) * A;
                const REAL *f1b = w.f1 + b * n1;
                for (int a = 0; a < d->n_eta_a; a++)
                    for (int z = 0; z < nz; z++)
                        for (int q = 0; q < nsa; q++) {
                            REAL *out = blk + ((a * nz + z) * nsa + q) * nsz;
                            const REAL f2pre = w.f2[(int64_t)(a * nsa + q) * AEV_PB + b] * pre;
                            const REAL *f1z = f1b + z * nsz;
                            for (int t = 0; t < nsz; t++) out[t] += f1z[t] * f2pre;
                        }
            }
        }

        for (int32_t f = 0; f < L; f++) aev[(int64_t)f * ld + r] = row[f];
    }
}

static void FN(aev_backward)(int isa, const nnpops__aev_desc *desc, int64_t n,
                             const int32_t *centers, const int64_t *start, const int64_t *entry,
                             const int32_t *pairs, const double *pair_vec,
                             const int32_t *species, const REAL *grad_aev, int64_t ld,
                             double *pair_grad, int shared, void *work) {
    const nnpops__aev_desc *d = desc;
    FN(aev_consts) k;
    FN(aev_consts_init)(d, &k);
    const int32_t L = d->aev_len, R = d->radial_len, A = d->angular_len, S = d->n_species;
    const int32_t nsr = d->n_shf_r, ner = d->n_eta_r;
    const int32_t nsz = d->n_shf_z, nsa = d->n_shf_a, nz = d->n_zeta;
    const int64_t n1 = (int64_t)nz * nsz;
    FN(aev_work) w;
    FN(aev_work_layout)(d, n, centers, start, work, &w);
    REAL *row = w.row;

    for (int64_t r = 0; r < n; r++) {
        const int64_t c = centers[r];
        int64_t na;
        const int64_t ne = FN(aev_load_center)(&k, c, start, entry, pairs, pair_vec, species,
                                               w.ent, w.ang, &na);
        for (int32_t f = 0; f < L; f++) row[f] = grad_aev[(int64_t)f * ld + r];

        /* radial: dE/dd, then along v / d (no direction at distance 0) */
        int64_t e = 0, nb;
        while ((nb = FN(aev_entry_batch)(isa, d, &k, &w, ne, &e, 1)) > 0) {
            for (int64_t b = 0; b < nb; b++) {
                ENT *en = w.ent + w.pj[b];
                const REAL arg = en->d * k.pi_rc_r;
                const REAL fc = (REAL)0.5 * M(cos)(arg) + (REAL)0.5;
                const REAL dfc = (REAL)-0.5 * k.pi_rc_r * M(sin)(arg);
                const REAL *g = row + (int64_t)en->sp * R;
                REAL dedd = 0;
                for (int ie = 0; ie < ner; ie++) {
                    for (int is = 0; is < nsr; is++) {
                        const REAL x = en->d - k.shf_r[is];
                        const REAL ex = w.ex[(int64_t)(ie * nsr + is) * AEV_PB + b];
                        dedd += g[ie * nsr + is] * ex * (dfc - (REAL)2 * k.eta_r[ie] * x * fc);
                    }
                }
                const REAL s = dedd / en->d;
                for (int x = 0; x < 3; x++) en->g[x] += (double)(s * en->v[x]);
            }
        }

        /* angular */
        int64_t a1 = 0, a2 = 1;
        while ((nb = FN(aev_pair_batch)(isa, d, &k, &w, na, &a1, &a2, 1)) > 0) {
            for (int64_t b = 0; b < nb; b++) {
                ENT *ej = w.ent + w.pj[b], *ek = w.ent + w.pk[b];
                const REAL c_ = w.cosine[b];
                const REAL *g = row + (int64_t)S * R +
                                (int64_t)angular_block(ej->sp, ek->sp, S) * A;
                /* sums over the block of g * (df1 f2), g * (f1 df2), g * (f1 f2): first over
                 * shf_a for every shf_z (u: with f2, v: with df2; vectors along t), then over
                 * shf_z with f1 and df1 */
                REAL sc = 0, sm = 0, sv = 0;
                const REAL *f1b = w.f1 + b * n1, *df1b = w.df1 + b * n1;
                for (int a = 0; a < d->n_eta_a; a++)
                    for (int z = 0; z < nz; z++) {
                        REAL u[TT], v[TT];
                        for (int t = 0; t < nsz; t++) u[t] = v[t] = 0;
                        for (int q = 0; q < nsa; q++) {
                            const REAL *gg = g + ((a * nz + z) * nsa + q) * nsz;
                            const int64_t o = (int64_t)(a * nsa + q) * AEV_PB + b;
                            const REAL f2 = w.f2[o], df2 = w.df2[o];
                            for (int t = 0; t < nsz; t++) {
                                u[t] += gg[t] * f2;
                                v[t] += gg[t] * df2;
                            }
                        }
                        const REAL *f1z = f1b + z * nsz, *df1z = df1b + z * nsz;
                        for (int t = 0; t < nsz; t++) {
                            sc += u[t] * df1z[t];
                            sv += u[t] * f1z[t];
                            sm += v[t] * f1z[t];
                        }
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
            if (shared) { /* (a - b is a + (-b): the same bits as below) */
                for (int x = 0; x < 3; x++)
                    aev_add_shared(pg + x, (code & 1) ? -w.ent[e].g[x] : w.ent[e].g[x]);
            } else if (code & 1) {
                for (int x = 0; x < 3; x++) pg[x] -= w.ent[e].g[x];
            } else {
                for (int x = 0; x < 3; x++) pg[x] += w.ent[e].g[x];
            }
        }
    }
}

void FN(nnpops__aev_forward_cpu)(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                 const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                 const double *pair_vec, const int32_t *species, REAL *aev,
                                 int64_t ld, void *work) {
    FN(aev_forward)(nnpops__cpu_isa(), desc, n, centers, start, entry, pairs, pair_vec, species,
                    aev, ld, work);
}

void FN(nnpops__aev_backward_cpu)(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                  const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                  const double *pair_vec, const int32_t *species,
                                  const REAL *grad_aev, int64_t ld, double *pair_grad,
                                  void *work) {
    FN(aev_backward)(nnpops__cpu_isa(), desc, n, centers, start, entry, pairs, pair_vec, species,
                     grad_aev, ld, pair_grad, 0, work);
}

void FN(nnpops__aev_backward_shared_cpu)(const nnpops__aev_desc *desc, int64_t n,
                                         const int32_t *centers, const int64_t *start,
                                         const int64_t *entry, const int32_t *pairs,
                                         const double *pair_vec, const int32_t *species,
                                         const REAL *grad_aev, int64_t ld, double *pair_grad,
                                         void *work) {
    FN(aev_backward)(nnpops__cpu_isa(), desc, n, centers, start, entry, pairs, pair_vec, species,
                     grad_aev, ld, pair_grad, 1, work);
}

int FN(nnpops__aev_variant_cpu)(int isa, int backward, const nnpops__aev_desc *desc, int64_t n,
                                const int32_t *centers, const int64_t *start,
                                const int64_t *entry, const int32_t *pairs,
                                const double *pair_vec, const int32_t *species, REAL *aev_or_grad,
                                int64_t ld, double *pair_grad, void *work) {
    if (isa < 0 || isa > nnpops__cpu_isa()) return 0;
    if (backward) {
        FN(aev_backward)(isa, desc, n, centers, start, entry, pairs, pair_vec, species,
                         aev_or_grad, ld, pair_grad, 0, work);
    } else {
        FN(aev_forward)(isa, desc, n, centers, start, entry, pairs, pair_vec, species, aev_or_grad,
                        ld, work);
    }
    return 1;
}

int FN(nnpops__log_variant_cpu)(int isa, int64_t n, const REAL *x, REAL *y) {
    if (isa < 0 || isa > nnpops__cpu_isa()) return 0;
    REAL buf[16] __attribute__((aligned(64)));
    for (int64_t i0 = 0; i0 < n; i0 += 16) {
        const int64_t m = n - i0 < 16 ? n - i0 : 16;
        for (int64_t i = 0; i < 16; i++) buf[i] = i < m ? x[i0 + i] : (REAL)1;
#if NNPOPS__CPU_X86
        if (isa == 2) FN(aev_log_avx512)(buf);
        else if (isa == 1) FN(aev_log_avx)(buf);
        else
#endif
            FN(aev_log_base)(buf);
        for (int64_t i = 0; i < m; i++) y[i0 + i] = buf[i];
    }
    return 1;
}

#undef TT

#endif /* NNPOPS__AEV_BODY */
