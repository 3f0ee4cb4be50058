/*
 * neighbors.cu - neighbor search on the GPU: the center lists of the GPU step (twin of
 * kernels/cpu/center_neighbors.c), the half list (twin of kernels/cpu/neighbors.c), and CSR center
 * lists from a half list (twin of nnpops__center_lists_cpu).
 *
 * What is found (as on the CPU): for each system of a batch (atoms order[sys_start[s] ..
 * sys_start[s+1]), its own cell H with rows a, b, c and periodic flags), every atom j or periodic
 * image of j (the atom itself included) with |r| < cutoff, r = x_j - x_i + s . H, s an integer shift
 * (zero along non-periodic axes), x the ORIGINAL positions (anywhere, not only inside the cell).
 * r is evaluated in double as (x_j - x_i) + (s_a a + s_b b + s_c c).  Two output modes:
 *   center mode: for every center c < n_centers all its (j, s), written as entries {c, j} grouped
 *                by center (CSR start[]); a local-local pair appears once per center;
 *   half mode:   every unordered pair once, oriented i < j for s = 0 and s lexicographically
 *                positive otherwise, pairs whose atoms are both >= skip_from dropped.
 *
 * Frame.  With no periodic axis H = I (the cell is ignored).  Otherwise the cell must be finite and
 * |det H| > 1e-10 |a||b||c|; fractional coordinates f_k = x . rec_k (rec = reciprocal vectors,
 * a_k . rec_m = delta_km); along periodic axes an atom is wrapped, n_k = floor(f_k),
 * xw = x - n . H, and a pair found between wrapped atoms with shift s' has the original shift
 * s = s' + n_i - n_j.  The images needed along periodic axis k are ceil(cutoff / w_k), w_k the
 * perpendicular width; more than max_images is NNPOPS__ST_TOO_MANY_IMAGES.
 *
 * Algorithms (nnpops__nbr_cuda_plan chooses from host copies of cells and system sizes):
 *   brute force: a warp per (center, slice); the slice is a range of at most 64 atoms of the
 *                center's system, a lane per atom, every image shift s' in [-img, img]^3 of the
 *                atom in turn; for small systems, where the launches of a cell list cost more
 *                than the distance tests;
 *   cell list:   per system, bins along the three fractional axes at least `reach` (cutoff plus a
 *                rounding margin) thick (periodic axes span [0, 1), non-periodic axes the atoms'
 *                range, found with a min/max reduction); at most 2 n_s + 27 bins per system
 *                (coarsened); atoms are counted per bin, the counts scanned, the atoms placed in bin
 *                order; then a warp per center (centers in bin order, so neighboring warps read the
 *                same bins) visits the stencil of +-r_k bins, r_k = ceil(reach / bin thickness),
 *                which is one bin for ordinary boxes and several when the cell is thinner than the
 *                cutoff (bin b + o maps to bin (b + o) mod nb with shift floor((b + o) / nb),
 *                one-to-one, so every (j, s') is met once).  Along the third axis consecutive
 *                stencil bins with one shift are one contiguous range of sorted atoms, swept by
 *                the 32 lanes together.
 * Both pass over the candidates twice: a count pass writes each center's (or slice's) count, an
 * exclusive scan gives offsets, and a write pass writes the entries in the same order.  So the
 * entries of a center are contiguous and the output needs no atomics; only the counters of the
 * status word use them.  Candidates are tested on wrapped positions against reach^2, and survivors
 * are recomputed from the original positions and kept if |r|^2 < cutoff^2 (the CPU's test).
 *
 * Device work space (nnpops__nbr_cuda_work_bytes): counts and offsets [n_centers * slices + 1]
 * (int64), the scan's temporary storage, and for the cell list per system the frame (struct geom)
 * and the min/max of fractional coordinates, per atom its bin, wrap count and wrapped position,
 * per bin a count and start (int32, at most 2 N + 27 ns bins), and the atoms in bin order.
 */
#include <string.h>

#include <cub/device/device_scan.cuh>

#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

const double REACH_REL = 1e-9, REACH_ABS = 1e-9;

struct geom {
    double h[9];    /* rows a, b, c */
    double rec[9];  /* reciprocal vectors (rows): f_k = x . rec_k */
    double w[3];    /* perpendicular widths */
    double f0[3];   /* binned range start (fractional) */
    double fs[3];   /* bins per unit of fractional coordinate */
    int32_t per[3], img[3], nb[3], r[3];
    int64_t bin0;   /* first global bin of the system */
    int32_t any_per, ok;
};

struct nbr_args {
    int64_t n_atoms, n_systems, n_centers, skip_from;
    const double *pos;
    const int64_t *sys_start;
    const int32_t *order;
    const double *cells;
    const uint8_t *pbc;
    double cutoff, cut2, reach, reach2, min_d2;
    int32_t max_images, half, slices, pad;
    int64_t capacity;
    /* outputs */
    int32_t *pairs, *shifts;
    double *vec, *dist;
    int64_t *start;
    nnpops__dev_status *status;
    /* work */
    int64_t *counts, *offs;
    geom *g;
    unsigned long long *bbox; /* [ns][6]: encoded min f_k, then ~encoded max f_k (atomicMin both) */
    int32_t *atom_bin, *atom_sys, *bin_count, *bin_start, *sorted_id;
    int4 *atom_wrap, *sorted_wrap;
    double *atom_xw, *sorted_xw;
    int64_t n_bins_bound;
};

__device__ __forceinline__ unsigned long long enc_double(double d) {
    const unsigned long long u = (unsigned long long)__double_as_longlong(d);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}
__device__ __forceinline__ double dec_double(unsigned long long e) {
    const unsigned long long u = (e >> 63) ? (e & 0x7fffffffffffffffull) : ~e;
    return __longlong_as_double((long long)u);
}

/* Largest s with sys_start[s] <= k (skips empty systems). */
__device__ __forceinline__ int64_t system_of(const int64_t *sys_start, int64_t ns, int64_t k) {
    int64_t lo = 0, hi = ns - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) >> 1;
        if (sys_start[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__device__ void record_geom_error(nnpops__dev_status *st, uint32_t kind, int64_t s, int axis,
                                  int images) {
    const unsigned old = atomicOr((unsigned *)&st->flags, kind | NNPOPS__ST_GEOM_SET);
    if (!(old & NNPOPS__ST_GEOM_SET)) {
        st->bad_system = (int32_t)s;
        st->bad_axis = axis;
        st->images = images;
        st->bad_kind = (int32_t)kind;
    }
}

/* Frame of system s (no bins): h, rec, w, per, img; validates the cell (as the CPU). */
__device__ bool setup_frame(const nbr_args &a, int64_t s, geom &g, bool report) {
    g.any_per = 0;
    for (int k = 0; k < 3; k++) {
        g.per[k] = a.pbc ? (a.pbc[3 * s + k] != 0) : 0;
        g.any_per |= g.per[k];
        g.img[k] = 0;
    }
    for (int k = 0; k < 9; k++) {
        g.h[k] = (k % 4 == 0) ? 1.0 : 0.0;
        g.rec[k] = g.h[k];
    }
    g.w[0] = g.w[1] = g.w[2] = 1.0;
    g.ok = 1;
    if (!g.any_per) return true;
    const double *c = a.cells + 9 * s;
    bool finite = true;
    for (int k = 0; k < 9; k++) {
        g.h[k] = c[k];
        finite = finite && isfinite(c[k]);
    }
    double cr[9], len[3], crlen[3];
    for (int k = 0; k < 3; k++) {
        const double *u = g.h + 3 * ((k + 1) % 3), *v = g.h + 3 * ((k + 2) % 3);
        cr[3 * k + 0] = u[1] * v[2] - u[2] * v[1];
        cr[3 * k + 1] = u[2] * v[0] - u[0] * v[2];
        cr[3 * k + 2] = u[0] * v[1] - u[1] * v[0];
        len[k] = sqrt(g.h[3 * k] * g.h[3 * k] + g.h[3 * k + 1] * g.h[3 * k + 1] +
                      g.h[3 * k + 2] * g.h[3 * k + 2]);
        crlen[k] = sqrt(cr[3 * k] * cr[3 * k] + cr[3 * k + 1] * cr[3 * k + 1] +
                        cr[3 * k + 2] * cr[3 * k + 2]);
    }
    const double det = g.h[0] * cr[0] + g.h[1] * cr[1] + g.h[2] * cr[2];
    const double vol = fabs(det);
    if (!finite || !(vol > 1e-10 * len[0] * len[1] * len[2])) {
        if (report) {
            int bad = 0;
            double worst = 1e300;
            for (int k = 0; k < 3; k++) {
                double q = len[k] == 0.0 ? -1.0 : (crlen[k] == 0.0 ? 1e300 : vol / (len[k] * crlen[k]));
                if (q < worst) {
                    worst = q;
                    bad = k;
                }
            }
            record_geom_error(a.status, NNPOPS__ST_BAD_CELL, s, finite ? bad : -1, 0);
        }
        g.ok = 0;
        return false;
    }
    for (int k = 0; k < 3; k++) {
        for (int d = 0; d < 3; d++) g.rec[3 * k + d] = cr[3 * k + d] / det;
        g.w[k] = vol / crlen[k];
        if (g.per[k]) {
            const double need = ceil(a.cutoff / g.w[k]);
            if (need > (double)a.max_images) {
                if (report)
                    record_geom_error(a.status, NNPOPS__ST_TOO_MANY_IMAGES, s, k,
                                      need > 2e9 ? 2000000000 : (int)need);
                g.ok = 0;
                return false;
            }
            g.img[k] = (int32_t)need;
        }
    }
    return true;
}

__device__ __forceinline__ void load3(const double *p, int64_t i, double x[3]) {
    x[0] = p[3 * i];
    x[1] = p[3 * i + 1];
    x[2] = p[3 * i + 2];
}

__device__ __forceinline__ double frac(const geom &g, const double x[3], int k) {
    return x[0] * g.rec[3 * k] + x[1] * g.rec[3 * k + 1] + x[2] * g.rec[3 * k + 2];
}

__device__ __forceinline__ bool lex_positive(int s0, int s1, int s2) {
    return s0 > 0 || (s0 == 0 && (s1 > 0 || (s1 == 0 && s2 > 0)));
}

/* The accept rule of the mode for a candidate (c, j, s) inside the cutoff. */
__device__ __forceinline__ bool keep_pair(const nbr_args &a, int64_t c, int64_t j, int s0, int s1,
                                          int s2) {
    if (!a.half) return true;
    if (c >= a.skip_from && j >= a.skip_from) return false;
    if (s0 == 0 && s1 == 0 && s2 == 0) return c < j;
    return lex_positive(s0, s1, s2);
}

/* Is entry (c, j, s) of center mode a distinct half-list pair?  (n_half statistics) */
__device__ __forceinline__ bool half_representative(const nbr_args &a, int64_t c, int64_t j, int s0,
                                                    int s1, int s2) {
    if (j >= a.n_centers) return true;
    if (s0 == 0 && s1 == 0 && s2 == 0) return c < j;
    return lex_positive(s0, s1, s2);
}

/* Exact test from the original positions; fills r and d2. */
__device__ __forceinline__ void pair_vector(const geom &g, const double xc[3], const double xj[3],
                                            int s0, int s1, int s2, double r[3], double &d2) {
    for (int d = 0; d < 3; d++) {
        const double sh = (double)s0 * g.h[d] + (double)s1 * g.h[3 + d] + (double)s2 * g.h[6 + d];
        r[d] = (xj[d] - xc[d]) + sh;
    }
    d2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
}

__device__ void record_close(const nbr_args &a, int64_t c, int64_t j, double d2) {
    const unsigned old = atomicOr((unsigned *)&a.status->flags, NNPOPS__ST_TOO_CLOSE);
    if (!(old & NNPOPS__ST_TOO_CLOSE)) {
        a.status->close_i = (int32_t)c;
        a.status->close_j = (int32_t)j;
        a.status->close_d = sqrt(d2);
    }
}

/* Writes entry e (already checked against capacity). */
__device__ __forceinline__ void write_entry(const nbr_args &a, int64_t e, int64_t c, int64_t j,
                                            int s0, int s1, int s2, const double r[3], double d2) {
    a.pairs[2 * e] = (int32_t)c;
    a.pairs[2 * e + 1] = (int32_t)j;
    if (a.shifts) {
        a.shifts[3 * e] = s0;
        a.shifts[3 * e + 1] = s1;
        a.shifts[3 * e + 2] = s2;
    }
    if (a.vec) {
        a.vec[3 * e] = r[0];
        a.vec[3 * e + 1] = r[1];
        a.vec[3 * e + 2] = r[2];
    }
    if (a.dist) a.dist[e] = sqrt(d2);
}

/* Count pass / write pass of one candidate chunk, shared by both algorithms: a warp-uniform
 * call; `acc` says whether this lane's candidate is kept.  The write pass places the kept
 * candidates of the chunk in lane order after `base`, which advances. */
struct emit_state {
    int64_t base, count, nhalf;
};

template <bool WRITE>
__device__ __forceinline__ void emit(const nbr_args &a, emit_state &es, bool acc, int64_t c,
                                     int64_t j, int s0, int s1, int s2, const double r[3],
                                     double d2) {
    if (!WRITE) {
        es.count += acc;
        return;
    }
    const int lane = threadIdx.x & 31;
    const unsigned b = __ballot_sync(NNPOPS__FULL_MASK, acc);
    if (acc) {
        const int64_t e = es.base + __popc(b & ((1u << lane) - 1u));
        if (e < a.capacity) write_entry(a, e, c, j, s0, s1, s2, r, d2);
        if (d2 < a.min_d2) record_close(a, c, j, d2);
        if (!a.half) es.nhalf += half_representative(a, c, j, s0, s1, s2);
    }
    es.base += __popc(b);
}

template <bool WRITE>
__device__ __forceinline__ void finish_center(const nbr_args &a, emit_state &es, int64_t slot) {
    const int lane = threadIdx.x & 31;
    if (!WRITE) {
        const int64_t count = warp_sum(es.count);
        if (lane == 0) a.counts[slot] = count;
    } else if (!a.half) {
        const int64_t nhalf = warp_sum(es.nhalf);
        if (lane == 0 && nhalf)
            atomicAdd((unsigned long long *)&a.status->n_half, (unsigned long long)nhalf);
    }
}

/* ---- brute force: a warp per (center position k of `order`, slice w); the slice is a range of
 * the system's atoms, a lane per atom, every image shift of the atom in turn ---- */
template <bool WRITE>
__global__ void brute_kernel(const nbr_args a) {
    const int lane = threadIdx.x & 31;
    const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (!WRITE && gw == 0 && lane == 0) a.counts[a.n_centers * a.slices] = 0;
    if (gw >= a.n_atoms * a.slices) return;
    const int64_t k = gw / a.slices;
    const int w = (int)(gw - k * a.slices);
    const int64_t c = a.order[k];
    if (c >= a.n_centers) return;
    const int64_t s = system_of(a.sys_start, a.n_systems, k);
    geom g;
    const bool ok = setup_frame(a, s, g, !WRITE && lane == 0);
    const int64_t slot = c * a.slices + w;
    if (!ok) {
        if (!WRITE && lane == 0) a.counts[slot] = 0;
        return;
    }
    double xc[3];
    load3(a.pos, c, xc);
    int nc[3];
    for (int q = 0; q < 3; q++) nc[q] = g.per[q] ? (int)floor(frac(g, xc, q)) : 0;
    const int64_t a0 = a.sys_start[s], na = a.sys_start[s + 1] - a0;
    const int64_t per = (na + a.slices - 1) / a.slices;
    const int64_t lo = w * per, hi = min(na, lo + per);
    emit_state es = {WRITE ? a.offs[slot] : 0, 0, 0};
    for (int64_t t0 = lo; t0 < hi; t0 += 32) {
        const int64_t t = t0 + lane;
        const bool valid = t < hi;
        int64_t j = 0;
        double xj[3] = {0, 0, 0};
        int nj[3] = {0, 0, 0};
        if (valid) {
            j = a.order[a0 + t];
            load3(a.pos, j, xj);
            for (int q = 0; q < 3; q++) nj[q] = g.per[q] ? (int)floor(frac(g, xj, q)) : 0;
        }
        for (int i0 = -g.img[0]; i0 <= g.img[0]; i0++)
            for (int i1 = -g.img[1]; i1 <= g.img[1]; i1++)
                for (int i2 = -g.img[2]; i2 <= g.img[2]; i2++) {
                    const int s0 = i0 + nc[0] - nj[0], s1 = i1 + nc[1] - nj[1],
                              s2 = i2 + nc[2] - nj[2];
                    bool acc = false;
                    double r[3] = {0, 0, 0}, d2 = 0;
                    if (valid && !(j == c && s0 == 0 && s1 == 0 && s2 == 0)) {
                        pair_vector(g, xc, xj, s0, s1, s2, r, d2);
                        acc = d2 < a.cut2 && keep_pair(a, c, j, s0, s1, s2);
                    }
                    emit<WRITE>(a, es, acc, c, j, s0, s1, s2, r, d2);
                }
    }
    finish_center<WRITE>(a, es, slot);
}

/* After the scan: start[c] = offsets of every center (centers of systems with a bad cell too, so
 * that start[] is always a valid CSR), the total, overflow. */
__global__ void finish_kernel(const nbr_args a) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a.start && c <= a.n_centers) a.start[c] = a.offs[c * a.slices];
    if (c == 0) {
        const int64_t total = a.offs[a.n_centers * a.slices];
        a.status->n_entries = total;
        if (a.half) a.status->n_half = total;
        if (total > a.capacity) atomicOr((unsigned *)&a.status->flags, NNPOPS__ST_OVERFLOW);
    }
}

/* ---- cell list ---- */

/* Fractional min/max along the non-periodic axes of each system (only systems with a periodic
 * axis and a non-periodic one, or with none, need it). */
__global__ void bbox_kernel(const nbr_args a) {
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = k < a.n_atoms;
    const int64_t s = valid ? system_of(a.sys_start, a.n_systems, k) : -1;
    geom g;
    bool ok = false;
    double f[3] = {0, 0, 0};
    if (valid) {
        ok = setup_frame(a, s, g, false);
        if (ok) {
            double x[3];
            load3(a.pos, a.order[k], x);
            for (int q = 0; q < 3; q++) f[q] = frac(g, x, q);
        }
    }
    const warp_runs runs(s);
    for (int q = 0; q < 3; q++) {
        const bool need = ok && !g.per[q];
        /* min of f (encoded) and min of the complement of encoded f (= max) */
        unsigned long long lo = need ? enc_double(f[q]) : ~0ull;
        unsigned long long hi = need ? ~enc_double(f[q]) : ~0ull;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned long long ul = __shfl_down_sync(NNPOPS__FULL_MASK, lo, o);
            const unsigned long long uh = __shfl_down_sync(NNPOPS__FULL_MASK, hi, o);
            if (runs.lane + o <= runs.run_end) {
                lo = ul < lo ? ul : lo;
                hi = uh < hi ? uh : hi;
            }
        }
        if (runs.head && valid && lo != ~0ull) {
            atomicMin(a.bbox + 6 * s + q, lo);
            atomicMin(a.bbox + 6 * s + 3 + q, hi);
        }
    }
}

/* Frames and bins of every system; one block, systems in chunks with a running bin offset. */
__global__ void geom_kernel(const nbr_args a) {
    __shared__ int64_t part[256];
    __shared__ int64_t carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (int64_t base = 0; base < a.n_systems; base += blockDim.x) {
        const int64_t s = base + threadIdx.x;
        int64_t nbins = 0;
        geom g;
        if (s < a.n_systems) {
            const int64_t n_s = a.sys_start[s + 1] - a.sys_start[s];
            g.ok = 0;
            if (n_s > 0 && setup_frame(a, s, g, true)) {
                int64_t nb[3];
                for (int q = 0; q < 3; q++) {
                    double range = 1.0, thick;
                    g.f0[q] = 0.0;
                    if (!g.per[q]) {
                        const double lo = dec_double(a.bbox[6 * s + q]);
                        const double hi = dec_double(~a.bbox[6 * s + 3 + q]);
                        g.f0[q] = lo;
                        range = hi - lo;
                    }
                    thick = range * g.w[q];
                    double m = thick / a.reach;
                    if (!(m >= 1.0)) m = 1.0;
                    if (m > 1048576.0) m = 1048576.0;
                    nb[q] = (int64_t)floor(m);
                    g.fs[q] = range > 0 ? 1.0 / range : 0.0;
                }
                const int64_t cap = 2 * n_s + 27;
                while (nb[0] * nb[1] * nb[2] > cap) {
                    int q = 0;
                    if (nb[1] > nb[q]) q = 1;
                    if (nb[2] > nb[q]) q = 2;
                    nb[q] = (nb[q] + 1) / 2;
                }
                for (int q = 0; q < 3; q++) {
                    g.nb[q] = (int32_t)nb[q];
                    g.fs[q] *= (double)nb[q];
                    g.r[q] = 1;
                    if (g.per[q]) {
                        const double rr = ceil(a.reach * (double)nb[q] / g.w[q]);
                        g.r[q] = rr < 1 ? 1 : (int32_t)rr;
                    }
                }
                nbins = nb[0] * nb[1] * nb[2];
            }
        }
        part[threadIdx.x] = nbins;
        __syncthreads();
        if (threadIdx.x == 0) {
            int64_t run = carry;
            for (int t = 0; t < (int)blockDim.x; t++) {
                const int64_t v = part[t];
                part[t] = run;
                run += v;
            }
            carry = run;
        }
        __syncthreads();
        if (s < a.n_systems) {
            g.bin0 = part[threadIdx.x];
            a.g[s] = g;
        }
        __syncthreads();
    }
}

__global__ void bin_kernel(const nbr_args a) {
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= a.n_atoms) return;
    const int64_t s = system_of(a.sys_start, a.n_systems, k);
    const int32_t i = a.order[k];
    const geom &g = a.g[s];
    if (!g.ok) {
        a.atom_bin[i] = -1;
        return;
    }
    double x[3];
    load3(a.pos, i, x);
    int n[3], b[3];
    for (int q = 0; q < 3; q++) {
        double f = frac(g, x, q);
        n[q] = 0;
        if (g.per[q]) {
            const double fl = floor(f);
            n[q] = (int)fl;
            f -= fl;
        }
        double bf = floor((f - g.f0[q]) * g.fs[q]);
        int bi = bf < 0 ? 0 : (bf >= g.nb[q] ? g.nb[q] - 1 : (int)bf);
        b[q] = bi;
    }
    const int64_t gb = g.bin0 + ((int64_t)b[0] * g.nb[1] + b[1]) * g.nb[2] + b[2];
    a.atom_bin[i] = (int32_t)gb;
    a.atom_sys[i] = (int32_t)s;
    a.atom_wrap[i] = make_int4(n[0], n[1], n[2], 0);
    for (int d = 0; d < 3; d++)
        a.atom_xw[3 * i + d] = x[d] - ((double)n[0] * g.h[d] + (double)n[1] * g.h[3 + d] +
                                       (double)n[2] * g.h[6 + d]);
    atomicAdd(a.bin_count + gb, 1);
}

__global__ void place_kernel(const nbr_args a) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.n_atoms) return;
    const int32_t gb = a.atom_bin[i];
    if (gb < 0) return;
    const int32_t q = a.bin_start[gb] + atomicSub(a.bin_count + gb, 1) - 1;
    a.sorted_id[q] = (int32_t)i;
    a.sorted_wrap[q] = a.atom_wrap[i];
    for (int d = 0; d < 3; d++) a.sorted_xw[3 * q + d] = a.atom_xw[3 * i + d];
}

/* Deterministic mode: place_kernel orders the atoms of a bin by the order of its atomics; a thread
 * per bin then sorts the bin's slots by atom index (insertion sort: bins hold a few atoms). */
__global__ void bin_sort_kernel(const nbr_args a) {
    const int64_t gb = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (gb >= a.n_bins_bound) return;
    const int32_t lo = a.bin_start[gb], hi = a.bin_start[gb + 1];
    for (int32_t q = lo + 1; q < hi; q++) {
        const int32_t id = a.sorted_id[q];
        const int4 wr = a.sorted_wrap[q];
        const double x0 = a.sorted_xw[3 * q], x1 = a.sorted_xw[3 * q + 1], x2 = a.sorted_xw[3 * q + 2];
        int32_t p = q - 1;
        while (p >= lo && a.sorted_id[p] > id) {
            a.sorted_id[p + 1] = a.sorted_id[p];
            a.sorted_wrap[p + 1] = a.sorted_wrap[p];
            for (int d = 0; d < 3; d++) a.sorted_xw[3 * (p + 1) + d] = a.sorted_xw[3 * p + d];
            p--;
        }
        a.sorted_id[p + 1] = id;
        a.sorted_wrap[p + 1] = wr;
        a.sorted_xw[3 * (p + 1)] = x0;
        a.sorted_xw[3 * (p + 1) + 1] = x1;
        a.sorted_xw[3 * (p + 1) + 2] = x2;
    }
}

__device__ __forceinline__ int floordiv(int x, int n) {
    int q = x / n;
    if ((x % n != 0) && ((x < 0) != (n < 0))) q--;
    return q;
}

/* A warp per sorted slot (its atom is the center; a warp's neighbors in slot order are atoms of
 * the same bin, so they read the same bins).  Along the third axis the stencil's bins form runs
 * of consecutive bins with one image shift, i.e. one contiguous range of sorted slots, which the
 * lanes sweep 32 at a time. */
template <bool WRITE>
__global__ void cell_kernel(const nbr_args a) {
    const int lane = threadIdx.x & 31;
    const int64_t qc = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (qc >= a.n_atoms || qc >= a.bin_start[a.n_bins_bound]) return;
    const int64_t c = a.sorted_id[qc];
    if (c >= a.n_centers) return;
    const int32_t sy = a.atom_sys[c];
    const geom &g = a.g[sy];
    const int nb0 = g.nb[0], nb1 = g.nb[1], nb2 = g.nb[2];
    const int64_t bin0 = g.bin0;
    const int64_t local = a.atom_bin[c] - bin0;
    const int b2 = (int)(local % nb2);
    const int b1 = (int)((local / nb2) % nb1);
    const int b0 = (int)(local / ((int64_t)nb2 * nb1));
    const int4 nc = a.sorted_wrap[qc];
    double xw[3], xc[3], h[9];
    load3(a.sorted_xw, qc, xw);
    load3(a.pos, c, xc);
    for (int k = 0; k < 9; k++) h[k] = g.h[k];
    emit_state es = {WRITE ? a.offs[c] : 0, 0, 0};
    const int r0 = g.r[0], r1 = g.r[1], r2 = g.r[2];
    for (int o0 = -r0; o0 <= r0; o0++) {
        int t0 = b0 + o0, h0 = 0;
        if (g.per[0]) {
            h0 = floordiv(t0, nb0);
            t0 -= h0 * nb0;
        } else if (t0 < 0 || t0 >= nb0) continue;
        for (int o1 = -r1; o1 <= r1; o1++) {
            int t1 = b1 + o1, h1 = 0;
            if (g.per[1]) {
                h1 = floordiv(t1, nb1);
                t1 -= h1 * nb1;
            } else if (t1 < 0 || t1 >= nb1) continue;
            int o2 = -r2;
            while (o2 <= r2) {
                int t2 = b2 + o2, h2 = 0;
                if (g.per[2]) {
                    h2 = floordiv(t2, nb2);
                    t2 -= h2 * nb2;
                } else if (t2 < 0) {
                    o2 -= t2;
                    continue;
                } else if (t2 >= nb2) {
                    break;
                }
                int run = r2 - o2 + 1;
                if (run > nb2 - t2) run = nb2 - t2;
                const int64_t tb = bin0 + ((int64_t)t0 * nb1 + t1) * nb2 + t2;
                const int32_t q_lo = a.bin_start[tb], q_hi = a.bin_start[tb + run];
                double sv[3];
                for (int d = 0; d < 3; d++)
                    sv[d] = (double)h0 * h[d] + (double)h1 * h[3 + d] + (double)h2 * h[6 + d] - xw[d];
                for (int32_t qb = q_lo; qb < q_hi; qb += 32) {
                    const int32_t q = qb + lane;
                    bool acc = false;
                    int64_t j = 0;
                    int s0 = 0, s1 = 0, s2 = 0;
                    double r[3] = {0, 0, 0}, d2 = 0;
                    if (q < q_hi) {
                        const double dx = a.sorted_xw[3 * q] + sv[0];
                        const double dy = a.sorted_xw[3 * q + 1] + sv[1];
                        const double dz = a.sorted_xw[3 * q + 2] + sv[2];
                        if (dx * dx + dy * dy + dz * dz < a.reach2) {
                            j = a.sorted_id[q];
                            const int4 nj = a.sorted_wrap[q];
                            s0 = h0 + nc.x - nj.x;
                            s1 = h1 + nc.y - nj.y;
                            s2 = h2 + nc.z - nj.z;
                            if (!(j == c && s0 == 0 && s1 == 0 && s2 == 0)) {
                                double xj[3];
                                load3(a.pos, j, xj);
                                pair_vector(g, xc, xj, s0, s1, s2, r, d2);
                                acc = d2 < a.cut2 && keep_pair(a, c, j, s0, s1, s2);
                            }
                        }
                    }
                    emit<WRITE>(a, es, acc, c, j, s0, s1, s2, r, d2);
                }
                o2 += run;
            }
        }
    }
    finish_center<WRITE>(a, es, c);
}

/* ---- work space layout ---- */
struct nbr_layout {
    size_t counts, offs, scan_tmp, scan_tmp_bytes, g, bbox, atom_bin, atom_sys, atom_wrap, atom_xw,
        bin_count, bin_start, sorted_id, sorted_wrap, sorted_xw, total;
    int64_t n_items, n_bins_bound;
};

nbr_layout layout_of(int64_t n_atoms, int64_t n_systems, int64_t n_centers,
                     const nnpops__nbr_plan *plan) {
    nbr_layout L;
    memset(&L, 0, sizeof L);
    const int slices = plan->algorithm == NNPOPS__NBR_BRUTE ? plan->slices : 1;
    L.n_items = n_centers * slices;
    const bool cell = plan->algorithm == NNPOPS__NBR_CELL;
    L.n_bins_bound = cell ? 2 * n_atoms + 27 * n_systems : 0;
    size_t cur = 0;
    auto take = [&](size_t bytes) {
        size_t o = cur;
        cur += align256(bytes ? bytes : 1);
        return o;
    };
    L.counts = take(sizeof(int64_t) * (size_t)(L.n_items + 1));
    L.offs = take(sizeof(int64_t) * (size_t)(L.n_items + 1));
    size_t t1 = 0, t2 = 0;
    cub::DeviceScan::ExclusiveSum(nullptr, t1, (int64_t *)nullptr, (int64_t *)nullptr,
                                  (int64_t)(L.n_items + 1));
    if (cell)
        cub::DeviceScan::ExclusiveSum(nullptr, t2, (int32_t *)nullptr, (int32_t *)nullptr,
                                      (int64_t)(L.n_bins_bound + 1));
    L.scan_tmp_bytes = t1 > t2 ? t1 : t2;
    L.scan_tmp = take(L.scan_tmp_bytes);
    if (cell) {
        L.g = take(sizeof(geom) * (size_t)n_systems);
        L.bbox = take(sizeof(unsigned long long) * 6 * (size_t)n_systems);
        L.atom_bin = take(sizeof(int32_t) * (size_t)n_atoms);
        L.atom_sys = take(sizeof(int32_t) * (size_t)n_atoms);
        L.atom_wrap = take(sizeof(int4) * (size_t)n_atoms);
        L.atom_xw = take(sizeof(double) * 3 * (size_t)n_atoms);
        L.bin_count = take(sizeof(int32_t) * (size_t)(L.n_bins_bound + 1));
        L.bin_start = take(sizeof(int32_t) * (size_t)(L.n_bins_bound + 1));
        L.sorted_id = take(sizeof(int32_t) * (size_t)n_atoms);
        L.sorted_wrap = take(sizeof(int4) * (size_t)n_atoms);
        L.sorted_xw = take(sizeof(double) * 3 * (size_t)n_atoms);
    }
    L.total = cur;
    return L;
}

nnpops_status run_search(const nnpops__nbr_in *in, int64_t n_centers, int half,
                         double min_distance, const nnpops__nbr_plan *plan_in, int64_t capacity,
                         int32_t *pairs, int32_t *shifts, double *vec, double *dist,
                         int64_t *start, nnpops__dev_status *status, void *work,
                         size_t work_bytes, void *stream) {
    if (in->n_atoms <= 0 || n_centers <= 0) {
        /* nothing to search: zero counts */
        if (start)
            NNPOPS__CUDA_CALL(cudaMemsetAsync(start, 0, sizeof(int64_t) * (size_t)(n_centers + 1),
                                              as_stream(stream)));
        return NNPOPS_OK;
    }
    if (in->n_atoms > INT32_MAX - 1)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "neighbor search: %lld atoms is too many",
                            (long long)in->n_atoms);
    nnpops__nbr_plan plan = *plan_in;
    if (plan.algorithm != NNPOPS__NBR_BRUTE) plan.algorithm = NNPOPS__NBR_CELL;
    if (plan.slices < 1) plan.slices = 1;
    if (plan.slices > 32) plan.slices = 32;
    const nbr_layout L = layout_of(in->n_atoms, in->n_systems, n_centers, &plan);
    if (work_bytes < L.total)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "neighbor search: work space of %zu bytes, %zu needed", work_bytes,
                            L.total);
    char *w = (char *)work;
    cudaStream_t st = as_stream(stream);
    nbr_args a;
    memset(&a, 0, sizeof a);
    a.n_atoms = in->n_atoms;
    a.n_systems = in->n_systems;
    a.n_centers = n_centers;
    a.skip_from = in->skip_from;
    a.pos = in->positions;
    a.sys_start = in->sys_start;
    a.order = in->order;
    a.cells = in->cells;
    a.pbc = in->pbc;
    a.cutoff = in->cutoff;
    a.cut2 = in->cutoff * in->cutoff;
    a.reach = in->cutoff * (1.0 + REACH_REL) + REACH_ABS;
    a.reach2 = a.reach * a.reach;
    a.min_d2 = min_distance > 0 ? min_distance * min_distance : -1.0;
    a.max_images = in->max_images;
    a.half = half;
    a.slices = plan.algorithm == NNPOPS__NBR_BRUTE ? plan.slices : 1;
    a.capacity = capacity;
    a.pairs = pairs;
    a.shifts = shifts;
    a.vec = vec;
    a.dist = dist;
    a.start = start;
    a.status = status;
    a.counts = (int64_t *)(w + L.counts);
    a.offs = (int64_t *)(w + L.offs);
    a.n_bins_bound = L.n_bins_bound;
    void *scan_tmp = w + L.scan_tmp;
    size_t scan_bytes = L.scan_tmp_bytes;
    const int TB = 256;
    if (plan.algorithm == NNPOPS__NBR_BRUTE) {
        const unsigned grid = grid_for(a.n_atoms * a.slices * 32, TB);
        brute_kernel<false><<<grid, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (brute force, count)");
        NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, a.counts, a.offs,
                                                        (int64_t)(L.n_items + 1), st));
        brute_kernel<true><<<grid, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (brute force, write)");
    } else {
        a.g = (geom *)(w + L.g);
        a.bbox = (unsigned long long *)(w + L.bbox);
        a.atom_bin = (int32_t *)(w + L.atom_bin);
        a.atom_sys = (int32_t *)(w + L.atom_sys);
        a.atom_wrap = (int4 *)(w + L.atom_wrap);
        a.atom_xw = (double *)(w + L.atom_xw);
        a.bin_count = (int32_t *)(w + L.bin_count);
        a.bin_start = (int32_t *)(w + L.bin_start);
        a.sorted_id = (int32_t *)(w + L.sorted_id);
        a.sorted_wrap = (int4 *)(w + L.sorted_wrap);
        a.sorted_xw = (double *)(w + L.sorted_xw);
        NNPOPS__CUDA_CALL(cudaMemsetAsync(a.bbox, 0xff, sizeof(unsigned long long) * 6 *
                                                            (size_t)a.n_systems, st));
        NNPOPS__CUDA_CALL(cudaMemsetAsync(a.bin_count, 0,
                                          sizeof(int32_t) * (size_t)(L.n_bins_bound + 1), st));
        /* centers of systems with a bad cell are never visited: their counts stay 0 */
        NNPOPS__CUDA_CALL(cudaMemsetAsync(a.counts, 0, sizeof(int64_t) * (size_t)(L.n_items + 1),
                                          st));
        const unsigned ga = grid_for(a.n_atoms, TB);
        bbox_kernel<<<ga, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (bounding boxes)");
        geom_kernel<<<1, 256, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (cell geometry)");
        bin_kernel<<<ga, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (binning)");
        NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, a.bin_count,
                                                        a.bin_start, (int64_t)(L.n_bins_bound + 1),
                                                        st));
        place_kernel<<<ga, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (placing)");
        if (plan.deterministic) {
            bin_sort_kernel<<<grid_for(L.n_bins_bound, TB), TB, 0, st>>>(a);
            NNPOPS__LAUNCH_CHECK("neighbor search (bin order)");
        }
        const unsigned gw = grid_for(a.n_atoms * 32, TB);
        cell_kernel<false><<<gw, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (cell list, count)");
        scan_bytes = L.scan_tmp_bytes;
        NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, a.counts, a.offs,
                                                        (int64_t)(L.n_items + 1), st));
        cell_kernel<true><<<gw, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (cell list, write)");
    }
    finish_kernel<<<grid_for(a.n_centers + 1, TB), TB, 0, st>>>(a);
    NNPOPS__LAUNCH_CHECK("neighbor search (totals)");
    return NNPOPS_OK;
}

/* ---- center lists from a half list ---- */
__global__ void cl_count_kernel(int64_t n_centers, int64_t n_pairs, const int32_t *pairs,
                                const int64_t *n_pairs_dev, int64_t *counts) {
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p == 0) counts[n_centers] = 0;
    const int64_t np = n_pairs_dev ? min(n_pairs, *n_pairs_dev) : n_pairs;
    if (p >= np) return;
    const int32_t i = pairs[2 * p], j = pairs[2 * p + 1];
    if (i < n_centers) atomicAdd((unsigned long long *)(counts + i), 1ull);
    if (j < n_centers) atomicAdd((unsigned long long *)(counts + j), 1ull);
}

__global__ void cl_max_kernel(int64_t n_centers, const int64_t *counts, int64_t *max_count) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    long long v = c < n_centers ? (long long)counts[c] : 0;
    for (int o = 16; o > 0; o >>= 1) {
        const long long u = __shfl_xor_sync(NNPOPS__FULL_MASK, v, o);
        v = u > v ? u : v;
    }
    if ((threadIdx.x & 31) == 0 && v > 0) atomicMax((unsigned long long *)max_count,
                                                    (unsigned long long)v);
}

__global__ void cl_fill_kernel(int64_t n_centers, int64_t n_pairs, const int32_t *pairs,
                               const int64_t *n_pairs_dev, const int64_t *start, int64_t *cursor,
                               int64_t *entry) {
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t np = n_pairs_dev ? min(n_pairs, *n_pairs_dev) : n_pairs;
    if (p >= np) return;
    const int32_t i = pairs[2 * p], j = pairs[2 * p + 1];
    if (i < n_centers)
        entry[start[i] + (int64_t)atomicAdd((unsigned long long *)(cursor + i), 1ull)] = 2 * p;
    if (j < n_centers)
        entry[start[j] + (int64_t)atomicAdd((unsigned long long *)(cursor + j), 1ull)] = 2 * p + 1;
}

} /* namespace */

/* ---- host API ---- */

extern "C" void nnpops__nbr_cuda_plan(int64_t n_systems, const int64_t *sys_start,
                                      const double *cells, const uint8_t *pbc, double cutoff,
                                      int32_t force, nnpops__nbr_plan *plan) {
    double max_cand = 0, max_n = 0;
    for (int64_t s = 0; s < n_systems; s++) {
        const double n_s = (double)(sys_start[s + 1] - sys_start[s]);
        if (n_s > max_n) max_n = n_s;
        double nimg = 1;
        if (cells && pbc && (pbc[3 * s] || pbc[3 * s + 1] || pbc[3 * s + 2])) {
            const double *h = cells + 9 * s;
            double cr[3][3], det = 0;
            for (int k = 0; k < 3; k++) {
                const double *u = h + 3 * ((k + 1) % 3), *v = h + 3 * ((k + 2) % 3);
                cr[k][0] = u[1] * v[2] - u[2] * v[1];
                cr[k][1] = u[2] * v[0] - u[0] * v[2];
                cr[k][2] = u[0] * v[1] - u[1] * v[0];
            }
            det = fabs(h[0] * cr[0][0] + h[1] * cr[0][1] + h[2] * cr[0][2]);
            for (int k = 0; k < 3; k++) {
                if (!pbc[3 * s + k]) continue;
                const double cl = sqrt(cr[k][0] * cr[k][0] + cr[k][1] * cr[k][1] + cr[k][2] * cr[k][2]);
                const double wk = cl > 0 ? det / cl : 0;
                double im = wk > 0 ? ceil(cutoff / wk) : 1e9;
                if (!(im < 1e6)) im = 1e6;
                nimg *= 2 * im + 1;
            }
        }
        const double cand = n_s * nimg;
        if (cand > max_cand) max_cand = cand;
    }
    plan->algorithm = max_cand <= 8192 ? NNPOPS__NBR_BRUTE : NNPOPS__NBR_CELL;
    if (force == NNPOPS__NBR_BRUTE || force == NNPOPS__NBR_CELL) plan->algorithm = force;
    /* brute force: a warp sweeps at most 64 atoms of the system (all their images) */
    int sl = (int)ceil(max_n / 64.0);
    plan->slices = sl < 1 ? 1 : (sl > 32 ? 32 : sl);
    plan->deterministic = 0;
}

extern "C" size_t nnpops__nbr_cuda_work_bytes(int64_t n_atoms, int64_t n_systems, int64_t n_centers,
                                              const nnpops__nbr_plan *plan) {
    nnpops__nbr_plan p = *plan;
    if (p.algorithm != NNPOPS__NBR_BRUTE) p.algorithm = NNPOPS__NBR_CELL;
    if (p.slices < 1) p.slices = 1;
    if (p.slices > 32) p.slices = 32;
    return layout_of(n_atoms, n_systems, n_centers, &p).total;
}

extern "C" nnpops_status nnpops__center_neighbors_cuda(const nnpops__nbr_in *in, int64_t n_centers,
                                                       double min_distance,
                                                       const nnpops__nbr_plan *plan,
                                                       nnpops__center_out *out, void *work,
                                                       size_t work_bytes, void *stream) {
    nnpops__nbr_in cin = *in;
    cin.skip_from = n_centers;
    return run_search(&cin, n_centers, 0, min_distance, plan, out->capacity, out->pairs,
                      out->shifts, out->vec, out->dist, out->start, out->status, work, work_bytes,
                      stream);
}

extern "C" nnpops_status nnpops__neighbors_cuda(const nnpops__nbr_in *in,
                                                const nnpops__nbr_plan *plan, nnpops__nbr_out *out,
                                                nnpops__dev_status *status, void *work,
                                                size_t work_bytes, void *stream) {
    return run_search(in, in->n_atoms, 1, 0.0, plan, out->capacity, out->pairs, out->shifts,
                      out->vec, out->dist, NULL, status, work, work_bytes, stream);
}

extern "C" size_t nnpops__center_lists_cuda_work_bytes(int64_t n_centers) {
    size_t t = 0;
    cub::DeviceScan::ExclusiveSum(nullptr, t, (int64_t *)nullptr, (int64_t *)nullptr,
                                  (int64_t)(n_centers + 1));
    return align256(sizeof(int64_t) * (size_t)(n_centers + 1)) * 2 + align256(t);
}

extern "C" nnpops_status nnpops__center_lists_cuda(int64_t n_centers, int64_t n_pairs,
                                                   const int32_t *pairs, const int64_t *n_pairs_dev,
                                                   int64_t *start, int64_t *entry,
                                                   int64_t *max_count_dev, void *work,
                                                   size_t work_bytes, void *stream) {
    if (n_centers <= 0) return NNPOPS_OK;
    if (work_bytes < nnpops__center_lists_cuda_work_bytes(n_centers))
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "center lists: work space too small");
    cudaStream_t st = as_stream(stream);
    char *w = (char *)work;
    int64_t *counts = (int64_t *)w;
    int64_t *cursor = (int64_t *)(w + align256(sizeof(int64_t) * (size_t)(n_centers + 1)));
    void *tmp = w + 2 * align256(sizeof(int64_t) * (size_t)(n_centers + 1));
    size_t tmp_bytes = work_bytes - 2 * align256(sizeof(int64_t) * (size_t)(n_centers + 1));
    NNPOPS__CUDA_CALL(cudaMemsetAsync(counts, 0, sizeof(int64_t) * (size_t)(n_centers + 1), st));
    NNPOPS__CUDA_CALL(cudaMemsetAsync(cursor, 0, sizeof(int64_t) * (size_t)(n_centers + 1), st));
    const unsigned gp = grid_for(n_pairs, 256);
    if (n_pairs > 0) {
        cl_count_kernel<<<gp, 256, 0, st>>>(n_centers, n_pairs, pairs, n_pairs_dev, counts);
        NNPOPS__LAUNCH_CHECK("center lists (count)");
    }
    if (max_count_dev) {
        NNPOPS__CUDA_CALL(cudaMemsetAsync(max_count_dev, 0, sizeof(int64_t), st));
        cl_max_kernel<<<grid_for(n_centers, 256), 256, 0, st>>>(n_centers, counts, max_count_dev);
        NNPOPS__LAUNCH_CHECK("center lists (largest count)");
    }
    NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, counts, start,
                                                    (int64_t)(n_centers + 1), st));
    if (n_pairs > 0) {
        cl_fill_kernel<<<gp, 256, 0, st>>>(n_centers, n_pairs, pairs, n_pairs_dev, start, cursor,
                                           entry);
        NNPOPS__LAUNCH_CHECK("center lists (fill)");
    }
    return NNPOPS_OK;
}
