/*
 * aev.cu - ANI atomic environment vectors on the GPU and their adjoint: twins of
 * potentials/ani/cpu/aev.c (same definition, constants and index layout: see
 * potentials/ani/ani_ops.h), float and double.
 *
 * Forward: one thread block per column r, i.e. per center atom centers[r] (128 threads; 512 when
 * there are at most AEV_SMALL_COLS columns, so that a small system's few centers spread their
 * angular pairs over 16 warps: latency, not throughput, bounds those).
 *   1. The center's entries (CSR: start[c] .. start[c+1], entry code 2p + direction, or
 *      entry == NULL for the center lists of the GPU step, entry e = pair e): a half-warp per
 *      entry adds its radial terms (a lane per term, so the shared-memory atomics of one
 *      instruction hit distinct addresses; when the warp's two entries hit the same species
 *      block, one half-warp adds both) into a shared row of aev_len values, and its first lane
 *      appends the entry, when inside the angular cutoff, to a shared list (v, d, fc, species; at
 *      most max_angular of them): one pass over the entries (the range and each half-warp's first
 *      entry are loaded before the barrier that follows zeroing the row, hiding their latency).
 *   2. The angular terms: a group of G lanes per unordered pair (j, k) of listed entries (G = 16,
 *      two pairs per warp, when a pair's distinct factors fit in 16 lanes, as in ANI; else 32), a
 *      lane per angular term (looping when the block has more than G terms).  (Walking contiguous
 *      shares of species-sorted pairs with sums kept in registers is no faster forward and about
 *      a third slower backward on large systems.)  A term is the
 *      product of a radial factor f2 (n_eta_a * n_shf_a distinct values per pair) and an angle
 *      factor f1 (n_zeta * n_shf_z values): when both fit in one group (ANI: 8 + 4), each distinct
 *      factor is computed by one lane and every term fetches its two with shuffles; otherwise each
 *      lane computes its own from constants tabulated in shared memory.  Float atomics on shared
 *      memory are compare-and-swap loops on this hardware (sm_90): when the two pairs of a warp
 *      fall in the same block of the row, the first group adds both pairs' terms (one atomic each
 *      instead of two that collide; not in deterministic mode).  Float divisions and roots of a
 *      pair use the reciprocal and reciprocal-root instructions (fdiv, fsqrt, frsqrt).
 *      cos(theta - s) is formed as cos(theta) cos(s) + sin(theta) sin(s) with
 *      cos(theta) = 0.95 cos_ijk and
 *      sin(theta) = sqrt(1 - cos(theta)^2) (no acos).
 *   3. The row is stored into column r of the feature-major output, aev[f * ld + r].
 * What does not depend on the center is done before the wait for the kernel before (programmatic
 * dependent launch): the row zeroed, each lane's radial term constants, and the lanes' angular
 * constants (factor parameters and term sources: integer divisions, cos / sin of the shifts,
 * loads of lane-dependent parameters), made by one warp and kept in shared memory; pi / cutoff
 * comes from the host, and the cutoff function is 0.5 cospi(d / rc) + 0.5.  (A small step's
 * AEV runs a block on each of a few SMs, so every cycle of such set-up after the wait is on the
 * step's critical path.)
 * Backward: the same block structure over g = dE/dAEV (column r read into the shared row):
 *   radial terms give dE/dv per entry directly (one thread per entry, its first entry loaded while
 *   the row is read); angular pairs are reduced per group (sums over the terms of g df1 f2,
 *   g f1 df2, g f1 f2, as on the CPU) and six of its lanes add a component each of the two entry
 *   gradients into per-listed-entry accumulators (shared, double; the two pairs of a warp
 *   that share an entry add their gradients with one atomic).  Entry gradients
 *   go to pair_grad[p] ([n_pairs][3], double) with the entry's sign: atomicAdd in CSR mode (a pair
 *   is seen by both of its centers), a plain store (radial) plus read-add-write (angular, after a
 *   block barrier) in center-list mode, where every entry belongs to exactly one center.
 * The terms are formed in REAL (float or double), summed in REAL in the shared row (forward; order
 * set by the atomics, so the last bits vary from run to run) and in double per entry (backward).
 * Shared memory per block: aev_len REALs, 5 angular_len REALs of tables (only when the factors do
 * not fit one warp), and max_angular listed entries (plus 3 doubles each in the backward).
 * Deterministic twins (*_det_*, option deterministic): the shared sums (the forward row, the
 * backward's per-entry angular gradients) are 64-bit fixed-point integers (2^-40 units, see fx_of),
 * whose atomic additions are exact, so their order no longer matters; every term is computed the
 * same way whichever warp or slot handles it (the pair terms are symmetric in j and k bit for bit),
 * so for a fixed entry order the results are bitwise reproducible.  Forward adds aev_len 8-byte
 * integers of shared memory.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

extern "C" {
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani_ops.h"
}

using namespace nnpops_cuda;

namespace {

/* Threads per block (a block per column): 512 for up to AEV_SMALL_COLS columns (small systems:
 * every center's angular pairs spread over 16 warps, for latency), else 128. */
const int AEV_THREADS = 128, AEV_THREADS_SMALL = 512;
const int64_t AEV_SMALL_COLS = 640;
const double PI = 3.14159265358979323846;

template <typename R> struct ang_ent {
    R v[3], d, fc, dfc;
    int32_t sp, e; /* neighbor species; entry index (CSR position) */
};

template <typename R> struct aev_args {
    nnpops__aev_desc d;
    int64_t n;
    const int32_t *centers;
    const int64_t *start, *entry;
    const int32_t *pairs;
    const double *vec;
    const int32_t *species;
    R *aev;            /* forward: output; backward: dE/dAEV (read) */
    int64_t ld;
    int64_t capacity;
    int32_t max_ang;
    nnpops__dev_status *status;
    double *pair_grad; /* backward */
    /* backward: dE/dAEV is aev plus n_extra more slices, extra + j extra_stride (the slices of a
     * k-split adjoint, nnpops__aev_backward_sum_cuda_f32), added in order */
    const R *extra;
    int32_t n_extra;
    int64_t extra_stride;
    double pi_rc_r, pi_rc_a;   /* pi / cutoff (radial, angular), formed on the host */
    double inv_rc_r, inv_rc_a; /* 1 / cutoff */
};

__host__ __device__ inline size_t align16(size_t b) { return (b + 15) & ~(size_t)15; }

/* Whether a pair's distinct angular factors fit in one warp (see ang_lane: the shared-factor path,
 * which needs no per-term tables: then none are allocated). */
__host__ __device__ inline bool factors_fit(const nnpops__aev_desc &d) {
    return d.n_zeta * d.n_shf_z + d.n_eta_a * d.n_shf_a <= 32;
}
__host__ __device__ inline size_t table_bytes(const nnpops__aev_desc &d, size_t es) {
    return factors_fit(d) ? 0 : align16(es * 5 * (size_t)d.angular_len);
}

/* Programmatic dependent launch (common.cuh): both kernels are launched with the attribute and let
 * the next kernel start early.  The forward zeroes its shared row before pdl_wait() and reads
 * everything after it, and lets the next kernel start only after its pdl_wait(): so every later
 * kernel starts after the center lists are complete, and the backward lists its center's angular
 * entries before its pdl_wait() and reads only dE/dAEV after it. */

template <typename R>
size_t smem_bytes(const nnpops__aev_desc *d, int max_ang, bool backward, bool det) {
    return align16(sizeof(R) * (size_t)d->aev_len) + table_bytes(*d, sizeof(R)) +
           align16(sizeof(ang_ent<R>) * (size_t)max_ang) +
           (backward ? align16(sizeof(double) * 3 * (size_t)max_ang) : 0) +
           (det && !backward ? align16(sizeof(unsigned long long) * (size_t)d->aev_len) : 0);
}

/* Fixed-point sums of deterministic mode: values scaled by 2^40 and rounded to 64-bit integers,
 * whose (wrapping) integer additions are exact and so independent of their order.  Resolution
 * 2^-40 (9.1e-13), range +-2^23 (8.4e6): AEV terms are at most 2 each, entry gradients (model
 * energy per angstrom) far below the range for any geometry the min_distance check lets through. */
__device__ __forceinline__ unsigned long long fx_of(double v) {
    return (unsigned long long)__double2ll_rn(v * 1099511627776.0);
}
__device__ __forceinline__ double fx_val(unsigned long long q) {
    return (double)(long long)q * (1.0 / 1099511627776.0);
}

/* The angular pairs' divisions and roots.  Double: exact (/, sqrt).  Float: a / b as a times the
 * correctly rounded reciprocal (<= 1.5 ulp instead of 0.5, without the division's range check and
 * slow path), sqrt(x) as x rsqrt(x) and 1 / sqrt(x) as rsqrt(x) (a few ulp): far inside the
 * float32 AEV tolerances, and about a tenth of the instructions of a pair. */
template <typename R> __device__ __forceinline__ R fdiv(R a, R b) { return a / b; }
template <> __device__ __forceinline__ float fdiv(float a, float b) { return a * __frcp_rn(b); }
template <typename R> __device__ __forceinline__ R fsqrt(R x) { return sqrt(x); }
template <> __device__ __forceinline__ float fsqrt(float x) {
    return x > 0.0f ? x * rsqrtf(x) : 0.0f;
}
template <typename R> __device__ __forceinline__ R frsqrt(R x) { return (R)1 / sqrt(x); }
template <> __device__ __forceinline__ float frsqrt(float x) { return rsqrtf(x); }
template <typename R> __device__ __forceinline__ R rpow(R x, R y);
/* float: exp2(y log2(x)) instead of powf, whose extended-precision logarithm made it the costliest
 * part of an angular pair.  x is a (1 + cos) / 2 base here, y > 0 or y == 0 (zeta - 1 with
 * zeta = 1); the relative error (a few ulp of y log2(x)) stays below 1e-5 where the factor is not
 * negligible, inside the float32 AEV tolerances (tests/gpu/test_gpu_ops.c, case aev). */
template <> __device__ __forceinline__ float rpow(float x, float y) {
    if (y == 0.0f) return 1.0f;
    return x > 0.0f ? exp2f(y * log2f(x)) : 0.0f;
}
template <> __device__ __forceinline__ double rpow(double x, double y) { return pow(x, y); }

/* Shared memory carve-up and the per-term tables. */
template <typename R> struct aev_smem {
    R *row, *tc, *ts, *tzeta, *teta, *tshfa;
    ang_ent<R> *ang;
    double *acc;              /* backward: per listed entry; fixed point (same bytes) when det */
    unsigned long long *rowq; /* forward, det: the row in fixed point */
    __device__ aev_smem(const nnpops__aev_desc &d, int max_ang, unsigned char *base) {
        size_t o = 0;
        row = (R *)(base + o);
        o += align16(sizeof(R) * (size_t)d.aev_len);
        const int A = d.angular_len;
        tc = (R *)(base + o);
        ts = tc + A;
        tzeta = ts + A;
        teta = tzeta + A;
        tshfa = teta + A;
        o += table_bytes(d, sizeof(R));
        ang = (ang_ent<R> *)(base + o);
        o += align16(sizeof(ang_ent<R>) * (size_t)max_ang);
        acc = (double *)(base + o);
        rowq = (unsigned long long *)(base + o); /* the forward has no acc */
    }
    __device__ void tables(const nnpops__aev_desc &d) {
        const int nsz = d.n_shf_z, nsa = d.n_shf_a, nz = d.n_zeta;
        for (int t = threadIdx.x; t < d.angular_len; t += blockDim.x) {
            const int it = t % nsz;
            const int iq = (t / nsz) % nsa;
            const int iz = (t / (nsz * nsa)) % nz;
            const int ia = t / (nsz * nsa * nz);
            const R sz = (R)d.shf_z[it];
            tc[t] = rcos(sz);
            ts[t] = rsin(sz);
            tzeta[t] = (R)d.zeta[iz];
            teta[t] = (R)d.eta_a[ia];
            tshfa[t] = (R)d.shf_a[iq];
        }
    }
};

/* Entry e of the center: pair index, direction, vector, neighbor species.  False when outside the
 * readable range (after an overflow). */
template <typename R>
__device__ __forceinline__ bool load_entry(const aev_args<R> &a, int64_t e, int64_t &p, int &rev,
                                           R v[3], R &dd, int32_t &sp) {
    const int64_t code = a.entry ? a.entry[e] : 2 * e;
    p = code >> 1;
    rev = (int)(code & 1);
    if (p >= a.capacity) return false;
    const double sg = rev ? -1.0 : 1.0;
    for (int x = 0; x < 3; x++) v[x] = (R)(sg * a.vec[3 * p + x]);
    dd = rsqrt_(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    sp = a.species[a.pairs[2 * p + (rev ? 0 : 1)]];
    return true;
}

/* Lists an entry for the angular terms (vector v, distance dd, neighbor species sp) in the next
 * slot of the shared list (*nang counts them; past max_ang nothing is stored: listed_count flags
 * it); returns the slot, or -1.  Both kernels list the same way (the backward adds dfc, e). */
template <typename R>
__device__ __forceinline__ int list_angular(const aev_args<R> &a, ang_ent<R> *ang, int *nang,
                                            const R v[3], R dd, R inv_rc_a, int32_t sp) {
    const int slot = atomicAdd(nang, 1);
    if (slot >= a.max_ang) return -1;
    ang_ent<R> &en = ang[slot];
    en.v[0] = v[0];
    en.v[1] = v[1];
    en.v[2] = v[2];
    en.d = dd;
    en.fc = (R)0.5 * rcospi(dd * inv_rc_a) + (R)0.5;
    en.sp = sp;
    return slot;
}

/* The two half-warps of the forward kernels (lanes l and l ^ 16) may add their terms into the same
 * block of the row (the same neighbor species, the same species pair): where both are active with
 * the same key, the upper half's term joins the lower half's (term) and the upper half skips its
 * atomic (skip), so that one atomic is issued per address (two on one address make every
 * compare-and-swap of one of them fail).  The default (no exchange) merges nothing. */
struct half_merge {
    bool merge = false, skip = false;
    template <typename R> __device__ __forceinline__ R term(R t) const {
        const R other = __shfl_xor_sync(NNPOPS__FULL_MASK, t, 16);
        return merge ? t + other : t;
    }
};
__device__ __forceinline__ half_merge half_merge_of(bool active, int key, bool upper) {
    half_merge h;
    const int other = __shfl_xor_sync(NNPOPS__FULL_MASK, active ? key : -1, 16);
    h.merge = active && other == key;
    h.skip = h.merge && upper;
    return h;
}

/* Walks the unordered pairs (a1 < a2) of na entries in row-major order, `step` pairs at a time
 * (start with a1 = a2 = 0 and step = first pair + 1); false once past the last pair. */
__device__ __forceinline__ bool pair_advance(int na, int &a1, int &a2, int step) {
    int rem = (a2 - a1 - 1) + step;
    while (a1 < na - 1 && rem >= na - 1 - a1) {
        rem -= na - 1 - a1;
        a1++;
    }
    a2 = a1 + 1 + rem;
    return a1 < na - 1;
}

__device__ __forceinline__ int angular_block(int s1, int s2, int S) {
    if (s1 > s2) {
        const int t = s1;
        s1 = s2;
        s2 = t;
    }
    return s1 * S - s1 * (s1 - 1) / 2 + (s2 - s1);
}

/* Source lanes of term t's two factors. */
__device__ __forceinline__ void term_sources(const nnpops__aev_desc &d, int n2, int t, int &src2,
                                             int &src1) {
    const int nsz = d.n_shf_z, nsa = d.n_shf_a, nz = d.n_zeta;
    const int it = t % nsz, iq = (t / nsz) % nsa, iz = (t / (nsz * nsa)) % nz,
              ia = t / (nsz * nsa * nz);
    src2 = ia * nsa + iq;
    src1 = n2 + iz * nsz + it;
}

/* Distinct angular factors: of the A terms of a block, f2 = exp(-eta (d_mean - shf_a)^2) takes
 * n2 = n_eta_a * n_shf_a values and f1 = ((1 + cos(theta - shf_z)) / 2)^zeta takes
 * n1 = n_zeta * n_shf_z.  When n1 + n2 <= 32, lane l < n2 computes f2 number l and lane
 * n2 <= l < n2 + n1 computes f1 number l - n2 (with their derivatives in the backward), and each
 * term fetches its two factors with shuffles: n1 + n2 transcendentals per pair instead of 2 A. */
template <typename R> struct ang_lane {
    int G;               /* lanes per pair: 16 when n1 + n2 <= 16 (two pairs per warp), else 32 */
    int gl, sub;         /* lane within its group, group within the warp */
    bool shared_factors; /* n1 + n2 <= G */
    int n2;
    int role;            /* 0: f2, 1: f1, 2: none */
    int src2, src1;      /* sources (lanes of the group) of term t = gl */
    int src2b, src1b;    /* ... of term t = gl + G */
    R eta, shfa, zeta, cz, sz;
    __device__ void init(const nnpops__aev_desc &d, int lane) {
        n2 = d.n_eta_a * d.n_shf_a;
        const int n1 = d.n_zeta * d.n_shf_z;
        G = n1 + n2 <= 16 ? 16 : 32;
        gl = lane & (G - 1);
        sub = lane / G;
        shared_factors = n1 + n2 <= G;
        role = 2;
        eta = shfa = zeta = cz = sz = (R)0;
        src2 = src1 = src2b = src1b = 0;
        if (gl < d.angular_len) term_sources(d, n2, gl, src2, src1);
        if (gl + G < d.angular_len) term_sources(d, n2, gl + G, src2b, src1b);
        if (gl < n2) {
            role = 0;
            eta = (R)d.eta_a[gl / d.n_shf_a];
            shfa = (R)d.shf_a[gl % d.n_shf_a];
        } else if (gl < n2 + n1) {
            role = 1;
            const int l = gl - n2;
            zeta = (R)d.zeta[l / d.n_shf_z];
            const R s = (R)d.shf_z[l % d.n_shf_z];
            cz = rcos(s);
            sz = rsin(s);
        }
    }
    /* sources of term t = t0 + gl (t0 a multiple of G): the first two slices kept, later ones
     * recomputed (their lanes t >= angular_len keep the first slice's, valid, sources) */
    __device__ __forceinline__ void sources(const nnpops__aev_desc &d, int t0, int t, int &s2,
                                            int &s1) const {
        s2 = src2;
        s1 = src1;
        if (t0 == G) {
            s2 = src2b;
            s1 = src1b;
        } else if (t0 > G && t < d.angular_len) {
            term_sources(d, n2, t, s2, s1);
        }
    }
};

/* A lane's distinct factor of the pair (role 0: f2 = exp(-eta (dm - shf_a)^2); role 1:
 * f1 = ((1 + cos(theta - shf_z)) / 2)^zeta, with cos(theta - s) = cs cos(s) + sn sin(s); role 2: 0)
 * and, for the backward, its derivative (by dm for f2, by the cosine's angle for f1, dtheta =
 * d(theta) / d(cos_ijk)).  Double: the two branches.  Float: both roles as one exp2 of a selected
 * argument, so that the roles' lanes do not diverge (log2 is taken by every lane). */
template <typename R>
__device__ __forceinline__ R lane_factor(const ang_lane<R> &al, R dm, R cs, R sn) {
    if (al.role == 0) {
        const R x = dm - al.shfa;
        return rexp(-al.eta * x * x);
    }
    if (al.role == 1) return rpow(((R)1 + (cs * al.cz + sn * al.sz)) * (R)0.5, al.zeta);
    return (R)0;
}
template <typename R>
__device__ __forceinline__ void lane_factor_grad(const ang_lane<R> &al, R dm, R cs, R sn, R dtheta,
                                                 R &v, R &dv) {
    v = dv = (R)0;
    if (al.role == 0) {
        const R x = dm - al.shfa;
        v = rexp(-al.eta * x * x);
        dv = (R)-2 * al.eta * x * v;
    } else if (al.role == 1) {
        const R base = ((R)1 + (cs * al.cz + sn * al.sz)) * (R)0.5;
        const R sdiff = sn * al.cz - cs * al.sz; /* sin(theta - shift) */
        const R dbase = (R)-0.5 * sdiff * dtheta;
        const R pm1 = rpow(base, al.zeta - (R)1);
        v = pm1 * base;
        dv = al.zeta * pm1 * dbase;
    }
}
const float LOG2E_F = 1.4426950408889634f;
template <>
__device__ __forceinline__ float lane_factor<float>(const ang_lane<float> &al, float dm, float cs,
                                                    float sn) {
    const float x = dm - al.shfa;
    /* the base clamped into the normal range: 0 (or a rounding below) gives 2^(-99.7 zeta) = 0 */
    const float base = fmaxf((1.0f + (cs * al.cz + sn * al.sz)) * 0.5f, 1e-30f);
    const float arg = al.role == 0 ? -al.eta * x * x * LOG2E_F : al.zeta * log2f(base);
    return al.role == 2 ? 0.0f : exp2f(arg);
}
template <>
__device__ __forceinline__ void lane_factor_grad<float>(const ang_lane<float> &al, float dm,
                                                        float cs, float sn, float dtheta, float &v,
                                                        float &dv) {
    const float x = dm - al.shfa;
    const float base = (1.0f + (cs * al.cz + sn * al.sz)) * 0.5f;
    const float sdiff = sn * al.cz - cs * al.sz; /* sin(theta - shift) */
    const float dbase = -0.5f * sdiff * dtheta;
    /* role 0: e = f2; role 1: e = base^(zeta - 1) (1 for zeta = 1: the argument is 0 then) */
    const float arg =
        al.role == 0 ? -al.eta * x * x * LOG2E_F : (al.zeta - 1.0f) * log2f(fmaxf(base, 1e-30f));
    const float e = exp2f(arg);
    v = al.role == 0 ? e : (al.role == 1 ? e * fmaxf(base, 0.0f) : 0.0f);
    dv = al.role == 0 ? -2.0f * al.eta * x * e : (al.role == 1 ? al.zeta * e * dbase : 0.0f);
}

/* The entries listed for the angular terms, at most max_ang: more is flagged (with the count
 * needed) for the host to grow the list and compute again. */
template <typename R> __device__ __forceinline__ int listed_count(const aev_args<R> &a, int nang) {
    if (nang <= a.max_ang) return nang;
    if (threadIdx.x == 0) {
        atomicOr((unsigned *)&a.status->flags, NNPOPS__ST_POT_CAPACITY);
        atomicMax(&a.status->pot_need, nang);
    }
    return a.max_ang;
}

/* cos of the angle between two listed entries (their distances' product kept >= 1e-10) */
template <typename R>
__device__ __forceinline__ R pair_cos(const ang_ent<R> &ej, const ang_ent<R> &ek) {
    const R dot = ej.v[0] * ek.v[0] + ej.v[1] * ek.v[1] + ej.v[2] * ek.v[2];
    R den = ej.d * ek.d;
    if (den < (R)1e-10) den = (R)1e-10;
    return fdiv(dot, den);
}

/* Sum over the G lanes of each group (G = 16 or 32: all 32 lanes call it). */
template <typename T> __device__ __forceinline__ T group_sum(T v, int G) {
    for (int o = G >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(NNPOPS__FULL_MASK, v, o);
    return v;
}

/* (float: at most 40 registers, so that three blocks of AEV_THREADS_SMALL fit on an SM) */
template <typename R, bool DET>
__global__ void __launch_bounds__(AEV_THREADS_SMALL, sizeof(R) == 4 ? 3 : 1)
    aev_forward_kernel(const aev_args<R> a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ int nang;
    const nnpops__aev_desc &d = a.d;
    aev_smem<R> sm(d, a.max_ang, smem_raw);
    const int L = d.aev_len, Rl = d.radial_len, A = d.angular_len, S = d.n_species;
    /* the shared row zeroed (and the tables made) while the kernel before finishes */
    for (int f = threadIdx.x; f < L; f += blockDim.x) sm.row[f] = (R)0;
    if (DET)
        for (int f = threadIdx.x; f < L; f += blockDim.x) sm.rowq[f] = 0ull;
    if (!factors_fit(d)) sm.tables(d); /* only the per-lane path reads the tables */
    if (threadIdx.x == 0) nang = 0;
    /* the lanes' constants (angular factors and term sources; the radial term of lane t for
     * q < 16) while the kernel before finishes: they take integer divisions and loads of
     * lane-dependent parameters, which would otherwise start the radial and angular phases */
    const int half = (threadIdx.x >> 4) & 1, t = threadIdx.x & 15;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __shared__ ang_lane<R> s_al[32]; /* made by one warp, read by every warp's lane */
    if (warp == (nw > 1 ? 1 : 0)) s_al[lane].init(d, lane);
    R eta_t = 0, shf_t = 0;
    if (t < Rl) {
        const int ie = t / d.n_shf_r, is = t - ie * d.n_shf_r;
        eta_t = (R)d.eta_r[ie];
        shf_t = (R)d.shf_r[is];
    }
    pdl_wait(); /* the center lists come from the kernels before */
    /* the next kernels may start from here on: so every later kernel starts after the center
     * lists are complete (the backward reads them before its own pdl_wait) */
    pdl_trigger();
    const int64_t col = blockIdx.x;
    const int32_t c = a.centers[col];
    if (c < 0) return;
    int64_t e0 = a.start[c], e1 = a.start[c + 1];
    if (!a.entry && e1 > a.capacity) e1 = a.capacity;
    const int gw = (threadIdx.x >> 5) * 2 + half, ng = (blockDim.x >> 5) * 2;
    int64_t p = 0;
    int rev = 0;
    R v[3] = {0, 0, 0}, dd = 0;
    int32_t sp = 0;
    bool have = e0 + gw < e1 && load_entry(a, e0 + gw, p, rev, v, dd, sp);
    __syncthreads();
    const R rc_r = (R)d.rc_r, rc_a = (R)d.rc_a;
    const R inv_rc_r = (R)a.inv_rc_r, inv_rc_a = (R)a.inv_rc_a;
    /* radial terms: a half-warp per entry, a lane per term (distinct addresses: no conflicts);
     * the half-warp's first lane lists the entry when inside the angular cutoff.  The warp's two
     * entries go round together (a warp-uniform loop), and when both add into the same species
     * block the second half-warp's terms join the first's atomics (non-deterministic mode) */
    {
        for (int64_t eb = e0 + (gw & ~1); __any_sync(NNPOPS__FULL_MASK, eb < e1); eb += ng) {
            const int64_t e = eb + half;
            bool ok = e < e1;
            if (ok && e != e0 + gw) have = load_entry(a, e, p, rev, v, dd, sp);
            ok = ok && have;
            if (ok && t == 0 && dd < rc_a) /* listed for the angular terms */
                list_angular(a, sm.ang, &nang, v, dd, inv_rc_a, sp);
            const bool rad = ok && dd < rc_r;
            half_merge hm;
            if (!DET) hm = half_merge_of(rad, sp, half == 1);
            const R fc = rad ? (R)0.5 * rcospi(dd * inv_rc_r) + (R)0.5 : (R)0;
            R *blk = sm.row + sp * Rl;
#pragma unroll 1
            for (int q0 = 0; q0 < Rl; q0 += 16) {
                const int q = q0 + t;
                R term = 0;
                if (rad && q < Rl) {
                    R eta = eta_t, shf = shf_t;
                    if (q0 > 0) {
                        const int ie = q / d.n_shf_r, is = q - ie * d.n_shf_r;
                        eta = (R)d.eta_r[ie];
                        shf = (R)d.shf_r[is];
                    }
                    const R x = dd - shf;
                    term = (R)0.25 * rexp(-eta * x * x) * fc;
                }
                if (!DET) term = hm.term(term);
                if (!rad || q >= Rl || hm.skip) continue;
                if (DET) atomicAdd(sm.rowq + sp * Rl + q, fx_of((double)term));
                else atomicAdd(blk + q, term);
            }
        }
    }
    __syncthreads();
    const int na = listed_count(a, nang);
    const ang_lane<R> al = s_al[lane];
    const int G = al.G, gl = al.gl, vw = warp * (32 / G) + al.sub, nvw = nw * (32 / G);
    int a1 = 0, a2 = 0;
    /* a group of G lanes per pair; a group past its last pair runs along on pair (0, 0), whose
     * results it drops, while the other group of its warp still has pairs (shuffles need all 32) */
    bool more = pair_advance(na, a1, a2, vw + 1);
    while (__any_sync(NNPOPS__FULL_MASK, more)) {
        const ang_ent<R> &ej = sm.ang[more ? a1 : 0], &ek = sm.ang[more ? a2 : 0];
        const R cs = (R)0.95 * pair_cos(ej, ek);
        const R sn = fsqrt(fmax((R)0, (R)1 - cs * cs));
        const R dm = (ej.d + ek.d) * (R)0.5;
        const R pre = (R)2 * ej.fc * ek.fc;
        const int boff = S * Rl + angular_block(ej.sp, ek.sp, S) * A;
        R *blk = sm.row + boff;
        unsigned long long *blkq = sm.rowq + boff;
        if (al.shared_factors) {
            const R v = lane_factor(al, dm, cs, sn);
            /* two pairs per warp (G = 16) in the same block of the row: the second group's terms
             * are added to the first's and one atomic is issued (otherwise the two groups'
             * atomics on the same addresses make every compare-and-swap of one of them fail) */
            half_merge hm;
            if (G == 16 && !DET) hm = half_merge_of(more, boff, al.sub == 1);
            for (int t0 = 0; t0 < A; t0 += G) {
                const int t = t0 + gl;
                int src2, src1;
                al.sources(d, t0, t, src2, src1);
                const R f2 = __shfl_sync(NNPOPS__FULL_MASK, v, src2, G);
                const R f1 = __shfl_sync(NNPOPS__FULL_MASK, v, src1, G);
                R term = f1 * (f2 * pre);
                if (G == 16 && !DET) term = hm.term(term);
                if (more && t < A && !hm.skip) {
                    if (DET) atomicAdd(blkq + t, fx_of((double)term));
                    else atomicAdd(blk + t, term);
                }
            }
        } else if (more) {
            for (int t = gl; t < A; t += G) {
                const R base = ((R)1 + (cs * sm.tc[t] + sn * sm.ts[t])) * (R)0.5;
                const R f1 = rpow(base, sm.tzeta[t]);
                const R x = dm - sm.tshfa[t];
                const R f2 = rexp(-sm.teta[t] * x * x);
                if (DET) atomicAdd(blkq + t, fx_of((double)(f1 * (f2 * pre))));
                else atomicAdd(blk + t, f1 * (f2 * pre));
            }
        }
        if (more) more = pair_advance(na, a1, a2, nvw);
    }
    __syncthreads();
    if (DET)
        for (int f = threadIdx.x; f < L; f += blockDim.x)
            a.aev[(int64_t)f * a.ld + col] = (R)fx_val(sm.rowq[f]);
    else
        for (int f = threadIdx.x; f < L; f += blockDim.x) a.aev[(int64_t)f * a.ld + col] = sm.row[f];
}

template <typename R, bool DET> __global__ void aev_backward_kernel(const aev_args<R> a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ int nang;
    const nnpops__aev_desc &d = a.d;
    aev_smem<R> sm(d, a.max_ang, smem_raw);
    pdl_trigger(); /* the reductions after it do nothing before their pdl_wait */
    const int64_t col = blockIdx.x;
    const int32_t c = a.centers[col];
    if (c < 0) {
        pdl_wait();
        return;
    }
    /* the lanes' angular constants (as in the forward) while the center's entries load */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __shared__ ang_lane<R> s_al[32];
    if (warp == (nw > 1 ? 1 : 0)) s_al[lane].init(d, lane);
    const int L = d.aev_len, Rl = d.radial_len, A = d.angular_len, S = d.n_species;
    /* the center's entry range and this thread's first entry load while the row is read */
    int64_t e0 = a.start[c], e1 = a.start[c + 1];
    const bool own = a.entry == nullptr; /* center-list mode: entries belong to this center */
    if (own && e1 > a.capacity) e1 = a.capacity;
    int64_t p;
    int rev;
    R v[3], dd;
    int32_t sp;
    bool have = e0 + threadIdx.x < e1 && load_entry(a, e0 + threadIdx.x, p, rev, v, dd, sp);
    int64_t held = e0 + threadIdx.x; /* the entry in p, rev, v, dd, sp */
    if (!factors_fit(d)) sm.tables(d); /* only the per-lane path reads the tables */
    if (threadIdx.x == 0) nang = 0;
    __syncthreads();
    const R rc_r = (R)d.rc_r, rc_a = (R)d.rc_a;
    const R pi_rc_r = (R)a.pi_rc_r, pi_rc_a = (R)a.pi_rc_a;
    const R inv_rc_r = (R)a.inv_rc_r, inv_rc_a = (R)a.inv_rc_a;
    /* the angular entries listed while the kernel before finishes (no dE/dAEV needed) */
    for (int64_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
        if (e != held) {
            have = load_entry(a, e, p, rev, v, dd, sp);
            held = e;
        }
        if (!have || !(dd < rc_a)) continue;
        const int slot = list_angular(a, sm.ang, &nang, v, dd, inv_rc_a, sp);
        if (slot >= 0) {
            ang_ent<R> &en = sm.ang[slot];
            en.dfc = (R)-0.5 * pi_rc_a * rsinpi(dd * inv_rc_a);
            en.e = (int32_t)(e - e0);
            sm.acc[3 * slot] = sm.acc[3 * slot + 1] = sm.acc[3 * slot + 2] = 0.0;
        }
    }
    pdl_wait(); /* dE/dAEV comes from the kernel before */
    for (int f = threadIdx.x; f < L; f += blockDim.x) {
        R g = a.aev[(int64_t)f * a.ld + col];
        for (int j = 0; j < a.n_extra; j++)
            g += a.extra[j * a.extra_stride + (int64_t)f * a.ld + col];
        sm.row[f] = g;
    }
    __syncthreads();
    /* radial terms: the entry gradients (the angular ones are added at the end) */
    for (int64_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
        if (e != held) {
            have = load_entry(a, e, p, rev, v, dd, sp);
            held = e;
        }
        if (!have) continue;
        double g[3] = {0, 0, 0};
        if (dd < rc_r) {
            const R arg = dd * inv_rc_r;
            const R fc = (R)0.5 * rcospi(arg) + (R)0.5;
            const R dfc = (R)-0.5 * pi_rc_r * rsinpi(arg);
            const R *gr = sm.row + sp * Rl;
            R dedd = 0;
            for (int ie = 0; ie < d.n_eta_r; ie++) {
                const R eta = (R)d.eta_r[ie];
                for (int is = 0; is < d.n_shf_r; is++) {
                    const R x = dd - (R)d.shf_r[is];
                    const R ex = (R)0.25 * rexp(-eta * x * x);
                    dedd += gr[ie * d.n_shf_r + is] * ex * (dfc - (R)2 * eta * x * fc);
                }
            }
            const R s = dedd / dd;
            for (int x = 0; x < 3; x++) g[x] = (double)(s * v[x]);
        }
        if (own) {
            for (int x = 0; x < 3; x++) a.pair_grad[3 * p + x] = g[x];
        } else {
            const double sg = rev ? -1.0 : 1.0;
            for (int x = 0; x < 3; x++) atomic_add_f64(a.pair_grad + 3 * p + x, sg * g[x]);
        }
    }
    __syncthreads();
    const int na = listed_count(a, nang);
    const ang_lane<R> al = s_al[lane];
    const int G = al.G, gl = al.gl, vw = warp * (32 / G) + al.sub, nvw = nw * (32 / G);
    int a1 = 0, a2 = 0;
    /* groups of G lanes per pair, as in the forward */
    bool more = pair_advance(na, a1, a2, vw + 1);
    while (__any_sync(NNPOPS__FULL_MASK, more)) {
        const ang_ent<R> &ej = sm.ang[more ? a1 : 0], &ek = sm.ang[more ? a2 : 0];
        const R cc = pair_cos(ej, ek);
        const R cs = (R)0.95 * cc;
        const R sn = fsqrt(fmax((R)0, (R)1 - cs * cs));
        const R dtheta = (R)-0.95 * frsqrt((R)1 - (R)0.9025 * cc * cc);
        const R dm = (ej.d + ek.d) * (R)0.5;
        const R *gb = sm.row + S * Rl + angular_block(ej.sp, ek.sp, S) * A;
        R sc = 0, smv = 0, sv = 0;
        if (al.shared_factors) {
            R v, dv;
            lane_factor_grad(al, dm, cs, sn, dtheta, v, dv);
            for (int t0 = 0; t0 < A; t0 += G) {
                const int t = t0 + gl;
                int src2, src1;
                al.sources(d, t0, t, src2, src1);
                const R f2 = __shfl_sync(NNPOPS__FULL_MASK, v, src2, G);
                const R df2 = __shfl_sync(NNPOPS__FULL_MASK, dv, src2, G);
                const R f1 = __shfl_sync(NNPOPS__FULL_MASK, v, src1, G);
                const R df1 = __shfl_sync(NNPOPS__FULL_MASK, dv, src1, G);
                if (t < A) {
                    const R g = gb[t];
                    sc += g * df1 * f2;
                    smv += g * f1 * df2;
                    sv += g * f1 * f2;
                }
            }
        } else {
            for (int t = gl; t < A; t += G) {
                const R base = ((R)1 + (cs * sm.tc[t] + sn * sm.ts[t])) * (R)0.5;
                const R sdiff = sn * sm.tc[t] - cs * sm.ts[t]; /* sin(theta - shift) */
                const R dbase = (R)-0.5 * sdiff * dtheta;
                const R z = sm.tzeta[t];
                const R pm1 = rpow(base, z - (R)1);
                const R f1 = pm1 * base, df1 = z * pm1 * dbase;
                const R x = dm - sm.tshfa[t];
                const R f2 = rexp(-sm.teta[t] * x * x);
                const R df2 = (R)-2 * sm.teta[t] * x * f2;
                const R g = gb[t];
                sc += g * df1 * f2;
                smv += g * f1 * df2;
                sv += g * f1 * f2;
            }
        }
        sc = group_sum(sc, G);
        smv = group_sum(smv, G);
        sv = group_sum(sv, G);
        /* the two entry gradients: lane gl < 6 of the group forms component gl % 3 of entry j
         * (gl < 3) or k, from the group's sums (every lane holds them); one expression for both
         * entries, so that swapping j and k gives bitwise the same terms */
        R go = 0;
        int slot = -1, x = 0;
        if (more && gl < 6) {
            x = gl % 3;
            const bool second = gl >= 3;
            const ang_ent<R> &eo = second ? ek : ej, &ep = second ? ej : ek; /* own, partner */
            const R fcjk = ej.fc * ek.fc;
            const R dedc = (R)2 * fcjk * sc;
            const R dedo = fcjk * smv + (R)2 * sv * (eo.dfc * ep.fc);
            const R inv_jk = fdiv((R)1, ej.d * ek.d);
            const R co = fdiv(dedc * cc, eo.d * eo.d), ro = fdiv(dedo, eo.d);
            go = dedc * ep.v[x] * inv_jk - co * eo.v[x] + ro * eo.v[x];
            slot = second ? a2 : a1;
        }
        if (DET) {
            if (slot >= 0)
                atomicAdd((unsigned long long *)sm.acc + 3 * slot + x, fx_of((double)go));
        } else {
            /* the two pairs of a warp (G = 16) often share an entry (consecutive pairs of one
             * row): one atomic with both gradients (summed in double) instead of two that
             * collide */
            double gd = (double)go;
            if (G == 16) {
                const double og = __shfl_xor_sync(NNPOPS__FULL_MASK, gd, 16);
                const int os = __shfl_xor_sync(NNPOPS__FULL_MASK, slot, 16);
                if (slot >= 0 && os == slot) {
                    if (al.sub == 0) gd += og;
                    else slot = -1;
                }
            }
            if (slot >= 0) atomicAdd(sm.acc + 3 * slot + x, gd);
        }
        if (more) more = pair_advance(na, a1, a2, nvw);
    }
    __syncthreads();
    if (DET) {
        const unsigned long long *q = (const unsigned long long *)sm.acc;
        for (int k = threadIdx.x; k < 3 * na; k += blockDim.x) sm.acc[k] = fx_val(q[k]);
        __syncthreads();
    }
    for (int slot = threadIdx.x; slot < na; slot += blockDim.x) {
        const int64_t e = e0 + sm.ang[slot].e;
        if (own) {
            for (int x = 0; x < 3; x++) a.pair_grad[3 * e + x] += sm.acc[3 * slot + x];
        } else {
            const int64_t code = a.entry[e];
            const double sg = (code & 1) ? -1.0 : 1.0;
            for (int x = 0; x < 3; x++)
                atomic_add_f64(a.pair_grad + 3 * (code >> 1) + x, sg * sm.acc[3 * slot + x]);
        }
    }
}

int smem_optin_limit() { return device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, 48 * 1024); }

template <typename R>
nnpops_status launch(bool backward, const nnpops__aev_desc *desc, int64_t n,
                     const int32_t *centers, const int64_t *start, const int64_t *entry,
                     const int32_t *pairs, const double *vec, const int32_t *species, R *aev,
                     int64_t ld, double *pair_grad, int64_t capacity, int32_t max_angular,
                     nnpops__dev_status *status, void *stream, bool det,
                     const R *extra = nullptr, int32_t n_extra = 0, int64_t extra_stride = 0) {
    if (n <= 0) return NNPOPS_OK;
    if (desc->angular_len > 1024)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "AEV on the GPU: %d angular terms per block (at most 1024)",
                            (int)desc->angular_len);
    if (n > 0x7fffffff)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "AEV on the GPU: %lld centers is too many",
                            (long long)n);
    if (max_angular < 2) max_angular = 2;
    const size_t sm = smem_bytes<R>(desc, max_angular, backward, det);
    const int limit = smem_optin_limit();
    if (sm > (size_t)limit)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "AEV on the GPU: %d angular neighbors need %zu bytes of shared memory "
                            "(the device has %d per block)",
                            (int)max_angular, sm, limit);
    aev_args<R> a;
    memset(&a, 0, sizeof a);
    a.d = *desc;
    a.n = n;
    a.centers = centers;
    a.start = start;
    a.entry = entry;
    a.pairs = pairs;
    a.vec = vec;
    a.species = species;
    a.aev = aev;
    a.ld = ld;
    a.capacity = capacity;
    a.max_ang = max_angular;
    a.status = status;
    a.pair_grad = pair_grad;
    a.extra = extra;
    a.n_extra = extra ? n_extra : 0;
    a.extra_stride = extra_stride;
    a.pi_rc_r = PI / desc->rc_r;
    a.pi_rc_a = PI / desc->rc_a;
    a.inv_rc_r = 1.0 / desc->rc_r;
    a.inv_rc_a = 1.0 / desc->rc_a;
    cudaStream_t st = as_stream(stream);
    const int threads = n <= AEV_SMALL_COLS ? AEV_THREADS_SMALL : AEV_THREADS;
    /* deterministic mode is a kernel of its own (less code on the common path) */
    if (backward) {
        void (*kern)(const aev_args<R>) =
            det ? aev_backward_kernel<R, true> : aev_backward_kernel<R, false>;
        NNPOPS__TRY(set_dynamic_smem((const void *)kern, sm));
        NNPOPS__TRY(launch_pdl(kern, dim3((unsigned)n), dim3(threads), sm, st, "AEV backward",
                               (aev_args<R>)a));
    } else {
        void (*kern)(const aev_args<R>) =
            det ? aev_forward_kernel<R, true> : aev_forward_kernel<R, false>;
        NNPOPS__TRY(set_dynamic_smem((const void *)kern, sm));
        NNPOPS__TRY(launch_chain(kern, dim3((unsigned)n), dim3(threads), sm, st, "AEV forward",
                                 (aev_args<R>)a));
    }
    return NNPOPS_OK;
}

} /* namespace */

extern "C" int32_t nnpops__aev_cuda_max_angular_limit(const nnpops__aev_desc *desc,
                                                      int precision) {
    const size_t es = precision == NNPOPS_FLOAT64 ? 8 : 4;
    /* (the fixed-point row of deterministic mode counted too) */
    const size_t fixed = align16(es * (size_t)desc->aev_len) + align16(es * 5 * (size_t)desc->angular_len) +
                         align16(8 * (size_t)desc->aev_len);
    const size_t per = (precision == NNPOPS_FLOAT64 ? sizeof(ang_ent<double>) : sizeof(ang_ent<float>)) +
                       3 * sizeof(double);
    const int limit = smem_optin_limit();
    if ((size_t)limit <= fixed + 64) return 0;
    size_t m = ((size_t)limit - fixed - 64) / per;
    return m > 100000 ? 100000 : (int32_t)m;
}

extern "C" nnpops_status nnpops__aev_forward_cuda_f32(
    const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,
    const int64_t *entry, const int32_t *pairs, const double *pair_vec, const int32_t *species,
    float *aev, int64_t ld, int64_t capacity, int32_t max_angular, nnpops__dev_status *status,
    void *stream) {
    return launch<float>(false, desc, n, centers, start, entry, pairs, pair_vec, species, aev, ld,
                         nullptr, capacity, max_angular, status, stream, false);
}

extern "C" nnpops_status nnpops__aev_forward_cuda_f64(
    const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,
    const int64_t *entry, const int32_t *pairs, const double *pair_vec, const int32_t *species,
    double *aev, int64_t ld, int64_t capacity, int32_t max_angular, nnpops__dev_status *status,
    void *stream) {
    return launch<double>(false, desc, n, centers, start, entry, pairs, pair_vec, species, aev, ld,
                          nullptr, capacity, max_angular, status, stream, false);
}

extern "C" nnpops_status nnpops__aev_backward_cuda_f32(
    const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,
    const int64_t *entry, const int32_t *pairs, const double *pair_vec, const int32_t *species,
    const float *grad_aev, int64_t ld, double *pair_grad, int64_t capacity, int32_t max_angular,
    nnpops__dev_status *status, void *stream) {
    return launch<float>(true, desc, n, centers, start, entry, pairs, pair_vec, species,
                         (float *)grad_aev, ld, pair_grad, capacity, max_angular, status, stream, false);
}

extern "C" nnpops_status nnpops__aev_backward_sum_cuda_f32(
    const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,
    const int64_t *entry, const int32_t *pairs, const double *pair_vec, const int32_t *species,
    const float *grad_aev, int64_t ld, int32_t slices, int64_t slice_stride, double *pair_grad,
    int64_t capacity, int32_t max_angular, nnpops__dev_status *status, void *stream, int det) {
    return launch<float>(true, desc, n, centers, start, entry, pairs, pair_vec, species,
                         (float *)grad_aev, ld, pair_grad, capacity, max_angular, status, stream,
                         det != 0, slices > 1 ? grad_aev + slice_stride : nullptr, slices - 1,
                         slice_stride);
}

extern "C" nnpops_status nnpops__aev_backward_cuda_f64(
    const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,
    const int64_t *entry, const int32_t *pairs, const double *pair_vec, const int32_t *species,
    const double *grad_aev, int64_t ld, double *pair_grad, int64_t capacity, int32_t max_angular,
    nnpops__dev_status *status, void *stream) {
    return launch<double>(true, desc, n, centers, start, entry, pairs, pair_vec, species,
                          (double *)grad_aev, ld, pair_grad, capacity, max_angular, status, stream, false);
}

/* Deterministic twins (the center lists of the GPU step, entry == NULL): the same results to
 * rounding, and bitwise the same on every run for the same entry order. */
#define NNPOPS__AEV_DET(SUF, R)                                                                    \
    extern "C" nnpops_status nnpops__aev_forward_det_cuda_##SUF(                                   \
        const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,     \
        const int64_t *entry, const int32_t *pairs, const double *pair_vec,                        \
        const int32_t *species, R *aev, int64_t ld, int64_t capacity, int32_t max_angular,         \
        nnpops__dev_status *status, void *stream) {                                                \
        return launch<R>(false, desc, n, centers, start, entry, pairs, pair_vec, species, aev, ld, \
                         nullptr, capacity, max_angular, status, stream, true);                    \
    }                                                                                              \
    extern "C" nnpops_status nnpops__aev_backward_det_cuda_##SUF(                                  \
        const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,     \
        const int64_t *entry, const int32_t *pairs, const double *pair_vec,                        \
        const int32_t *species, const R *grad_aev, int64_t ld, double *pair_grad,                  \
        int64_t capacity, int32_t max_angular, nnpops__dev_status *status, void *stream) {         \
        return launch<R>(true, desc, n, centers, start, entry, pairs, pair_vec, species,           \
                         (R *)grad_aev, ld, pair_grad, capacity, max_angular, status, stream,      \
                         true);                                                                    \
    }
NNPOPS__AEV_DET(f32, float)
NNPOPS__AEV_DET(f64, double)

