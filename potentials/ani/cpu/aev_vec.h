/*
 * aev_vec.h - the AEV's per-pair and per-entry factors in vectors (potentials/ani/cpu/aev.c), one
 * instruction set of one precision: included by aev.c's precision body once per variant, with
 * REAL, REAL_SIZE, FN, VB (vector bytes), NM(name) and TARGET defined.
 *
 * The factors are computed for a batch of entries (radial) or of (j, k) pairs (angular) held in
 * arrays of AEV_PB values, VL at a time (the arrays padded to a whole vector with finite values),
 * and stored term-major ([term][AEV_PB]: consecutive pairs in consecutive places; radial, f2 and
 * df2) or pair-major ([AEV_PB][terms]: f1 and df1, whose sums over shf_z run along a pair's
 * terms).  Element-wise operations only: every vector width gives the same bits.
 */
#define VL ((int)(VB / sizeof(REAL)))

typedef REAL NM(vec) __attribute__((vector_size(VB)));
typedef REAL NM(uvec) __attribute__((vector_size(VB), aligned(sizeof(REAL)), may_alias));
#if REAL_SIZE == 4
typedef int32_t NM(ivec) __attribute__((vector_size(VB)));
#else
typedef int64_t NM(ivec) __attribute__((vector_size(VB)));
#endif

#include "kernels/cpu/vmath.h"

/* Radial: ex[t][b] = 0.25 exp(-eta_r (d_b - shf_r)^2), t = ie n_shf_r + is, for the nb entries of
 * the batch. */
static TARGET void NM(aev_radial_terms)(const FN(aev_consts) *k, int ner, int nsr, int64_t nb,
                                        const REAL *dist, REAL *ex) {
    for (int64_t b = 0; b < nb; b += VL) {
        const NM(vec) d = *(const NM(uvec) *)(dist + b);
        for (int ie = 0; ie < ner; ie++) {
            for (int is = 0; is < nsr; is++) {
                const NM(vec) x = d - k->shf_r[is];
                const NM(vec) y = (x * -k->eta_r[ie]) * x;
                *(NM(uvec) *)(ex + (int64_t)(ie * nsr + is) * AEV_PB + b) =
                    NM(exp_flush)(y) * (REAL)0.25;
            }
        }
    }
}

/* Angular, for the nb pairs of the batch, from the cosine and sine of theta (cs, sn), the mean
 * distance dm and, for the derivatives (df1 != NULL), dtheta = d theta / d cos_ijk:
 *   f1[pair][z nsz + t] = base^zeta,  base = (1 + cos(theta - shf_z)) / 2 (clamped to >= 0),
 *                  as exp(zeta ln base); base = 0 gives 0;
 *   df1 = zeta base^(zeta - 1) dbase/dcos_ijk,  base^(zeta - 1) = f1 / base;
 *   f2[a nsa + q][pair] = exp(-eta_a (dm - shf_a)^2),  df2 = -2 eta_a (dm - shf_a) f2. */
static TARGET void NM(aev_angular_terms)(const nnpops__aev_desc *d, const FN(aev_consts) *k,
                                         int64_t nb, const REAL *cs_, const REAL *sn_,
                                         const REAL *dm_, const REAL *dth_, REAL *f1, REAL *df1,
                                         REAL *f2, REAL *df2) {
    const int nsz = d->n_shf_z, nz = d->n_zeta, nsa = d->n_shf_a, nea = d->n_eta_a;
    const int64_t n1 = (int64_t)nz * nsz;
    const NM(vec) zero = {0}, tiny = zero + AEV_TINY;
    for (int64_t b = 0; b < nb; b += VL) {
        const NM(vec) cs = *(const NM(uvec) *)(cs_ + b), sn = *(const NM(uvec) *)(sn_ + b);
        const NM(vec) dm = *(const NM(uvec) *)(dm_ + b);
        NM(vec) dth = zero;
        if (df1) dth = *(const NM(uvec) *)(dth_ + b);
        for (int t = 0; t < nsz; t++) {
            const REAL cz = k->cos_z[t], sz = k->sin_z[t];
            NM(vec) base = ((REAL)1 + (cs * cz + sn * sz)) * (REAL)0.5;
            base = NM(blend)(base < zero, zero, base);
            const NM(ivec) pos = base > zero;
            const NM(vec) bc = NM(blend)(base < tiny, tiny, base);
            const NM(vec) lb = NM(log_pos)(bc);
            /* dbase/dc = -sin(theta - s)/2 * dtheta */
            const NM(vec) dbase = df1 ? ((sn * cz - cs * sz) * (REAL)-0.5) * dth : zero;
            for (int z = 0; z < nz; z++) {
                const REAL zeta = k->zeta[z];
                const NM(vec) f = NM(blend)(pos, NM(exp_flush)(lb * zeta), zero);
                /* pair-major: the pair's n1 values side by side for the sums over its terms */
                const int64_t o = b * n1 + z * nsz + t;
                for (int l = 0; l < VL; l++) f1[o + l * n1] = f[l];
                if (df1) {
                    const NM(vec) df = ((f / bc) * zeta) * dbase;
                    for (int l = 0; l < VL; l++) df1[o + l * n1] = df[l];
                }
            }
        }
        for (int a = 0; a < nea; a++) {
            for (int q = 0; q < nsa; q++) {
                const NM(vec) x = dm - k->shf_a[q];
                const NM(vec) f = NM(exp_flush)((x * -k->eta_a[a]) * x);
                const int64_t o = (int64_t)(a * nsa + q) * AEV_PB + b;
                *(NM(uvec) *)(f2 + o) = f;
                if (df2) *(NM(uvec) *)(df2 + o) = (x * ((REAL)-2 * k->eta_a[a])) * f;
            }
        }
    }
}

/* ln x of 16 values in place (tests: nnpops__log_variant_cpu_*). */
static TARGET void NM(aev_log)(REAL *buf) {
    for (int i = 0; i < 16; i += VL) *(NM(uvec) *)(buf + i) = NM(log_pos)(*(NM(uvec) *)(buf + i));
}

#undef VL
