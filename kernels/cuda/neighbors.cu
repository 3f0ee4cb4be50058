/*
 * neighbors.cu - neighbor search on the GPU: the center lists of the GPU step (twin of
 * kernels/cpu/center_neighbors.c), the half list (twin of kernels/cpu/neighbors.c), and CSR center
 * lists from a half list (twin of nnpops__center_lists_cpu).
 *
 * What is found (as on the CPU): for each system of a batch (atoms order[sys_start[s] ..
 * sys_start[s+1]), its own cell H with rows a, b, c and periodic flags), every atom j or periodic
 * image of j (the atom itself included) with |r| < cutoff, r = x_j - x_i + s . H, s an integer shift
 * (zero along non-periodic axes), x the ORIGINAL positions (anywhere, not only inside the cell).
 * r is evaluated in double as (x_j - x_i) + ((s_a a + s_b b) + s_c c), every operation rounded on
 * its own (__dadd_rn / __dmul_rn: never contracted into an FMA), the shift term skipped for s = 0,
 * and |r|^2 = (r_x^2 + r_y^2) + r_z^2 likewise: the CPU twin's expressions, so vectors, distances
 * and the |r|^2 < cutoff^2 decisions are the CPU's bit for bit (where the host compiler does not
 * contract either, e.g. x86-64), and every kernel that repeats a decision repeats it exactly.
 * Two output modes:
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
 * Algorithms (nnpops__nbr_cuda_plan chooses from host copies of cells and system sizes; the
 * choice rules are at nnpops__nbr_cuda_plan below):
 *   small (NNPOPS__NBR_SMALL, center mode): ONE launch of ONE block (512 threads) for tiny inputs
 *                (at most 1024 atoms and a small brute-force cost): a warp per center counts its
 *                candidates (every atom of its system, every image shift s' in [-img, img]^3) into
 *                shared memory, the block scans the counts, writes start[] and the status, and the
 *                warps run the candidates again writing the entries.  No memset, no work space.
 *   brute force (NNPOPS__NBR_BRUTE): a warp per (center, slice); the slice is a range of at most
 *                32 atoms of the center's system, a lane per atom, every image shift in turn: the
 *                lane forms the vector to each image in double by increments (a few additions per
 *                image) and runs the exact test only where that is within cutoff (1 + 1e-9) plus
 *                a bound of its rounding; the frame of a system is computed once per block (the
 *                system of the block's first item) instead of once per warp.  A wide cell (every
 *                periodic width at least 2 reach (1 + 1e-6)) skips the image loop: an atom has at
 *                most one image within reach, the one nearest in wrapped fractional offset on
 *                every periodic axis, and its exact test decides (the plan counts one candidate
 *                per atom there, 3.5 times an open system's test).  For small systems,
 *                where the launches of a cell list cost more than the tests.  Center mode: count,
 *                cub's scan (two launches), write (see "Launches" below).
 *   one pass (NNPOPS__NBR_ONEPASS, center mode): the brute force's items (center, slice) and
 *                tests (brute_item) in ONE launch of about 256 blocks of 256 threads: a block
 *                takes a ticket, owns the center ids [ticket cpb, (ticket + 1) cpb) (cpb: centers
 *                / 256 rounded up, at most 1024 items a block), counts its items a warp per item
 *                into shared memory, scans them, takes the entries before it from the blocks with
 *                smaller tickets (see "Launches"), writes start[] and then its entries: from the
 *                accepted candidates its count pass recorded in shared memory (id and shift; the
 *                vector from the original positions, the same expression), or for an item whose
 *                record did not fit, by its tests again.  The center's position in `order` (its
 *                system) is order[c] == c in atom order, otherwise the block finds its centers
 *                in one sweep of `order`.
 *   cell list:   per system, bins along the three fractional axes at least `reach` (cutoff plus a
 *                rounding margin) thick (periodic axes span [0, 1), non-periodic axes the atoms'
 *                range, found with a min/max reduction); at most 2 n_s + 27 bins per system
 *                (coarsened); atoms are counted per bin (the atomic's return value is the atom's
 *                rank in its bin), the counts scanned (the bins in use by one block, or cub over
 *                the work space's bound for large inputs), the atoms placed in bin order.  A
 *                stencil of +-r_k bins around a bin covers every pair, r_k = ceil(reach / bin
 *                thickness): one bin for ordinary boxes and several when the cell is thinner than
 *                the cutoff (bin b + o maps to bin (b + o) mod nb with shift floor((b + o) / nb),
 *                one-to-one, so every (j, s') is met once).  Two kernels search the stencils:
 *     fast (NNPOPS__NBR_CELL_FAST, center mode; the plan's choice when every periodic axis is at
 *                least one reach wide, i.e. r_k == 1; any r_k is handled):
 *                search pass (fast_search_kernel): a BLOCK per bin (128 threads, bins in turn
 *                over a grid of about n_atoms / 16 blocks).  The bin's own atoms (position, id)
 *                go to shared memory with the check that it has centers.  Warp 0 lists up to 32
 *                stencil bins (27 for r_k == 1; more in groups of 32) with a prefix sum of their
 *                atom counts; the block copies their atoms, at most 512 at a time, into shared
 *                memory (float position xr moved by the listed bin's image shift, with the code
 *                below or the slot; listed-bin index), padded to a multiple of 32 with far-away
 *                candidates; then each warp sweeps its centers of the bin two at a time (one
 *                shared load per candidate for both), a lane per candidate for the decision
 *                below against each center's own float position; the count goes to
 *                counts[c] (also the cursor between chunks), and the accepted candidates' codes
 *                (slot | image shift << 27: with stencils of one bin a shift is one of 27 values,
 *                in {-1, 0, 1}^3) in order (ballot + popc) to the center's row of FAST_K (128)
 *                codes while they fit (rows by slot; only with one-bin stencils and at most
 *                2^32 / FAST_K atoms, so that a row entry has a 32-bit index).
 *                emit pass (fast_emit_kernel): a warp per slot (centers in bin order), a lane per
 *                code: the image shift from the code, the candidate's wrap count, id and
 *                original position, the vector in double (the CPU expression above), the entry
 *                at offs[c] + its rank: no float test again, the pairs of a round stored at
 *                consecutive positions and its vectors as 32 consecutive doubles per store; the
 *                first two rounds' codes and data are read before the center's count arrives.  A
 *                center whose codes were not all kept (more than FAST_K entries: dense systems;
 *                thin cells) searches its stencil again in the emit pass, bin by bin in the same
 *                order, with the same decisions.
 *                The decision: m = f_j + float(h . H) per candidate and image h (explicit _rn
 *                roundings, the same bits wherever it is repeated), d2f = |m - float(xr_c)|^2
 *                in float32 (fmaf chain); d2f >= hi2 rejects, d2f < lo2 accepts (the center itself
 *                excepted), anything between (or a NaN) goes to the exact double test from the
 *                original positions (thresholds below).
 *     general (NNPOPS__NBR_CELL; half mode, and the fallback for cells thinner than the cutoff):
 *                a warp per center (centers in bin order, so neighboring warps read the same
 *                bins) visits the stencil; along the third axis consecutive stencil bins with one
 *                shift are one contiguous range of sorted atoms, swept by the 32 lanes together,
 *                double-precision tests on wrapped positions against reach^2.
 *
 * Float32 thresholds of the fast cell list (per system, geom_kernel).  Positions are stored as
 * xr = xw - o rounded to float (o: the origin of the binned range along non-periodic axes, zero
 * along periodic ones), so |xr| <= M = sum_k ext_k max_d |H_kd| (ext_k = 1 along periodic axes,
 * the atoms' fractional range otherwise), and image shifts are bounded by S = sum_k r_k max_d
 * |H_kd|.  With u = 2^-24, f_j, float(xr_c), float(h . H), m and the difference are each one
 * rounding, so the float vector differs from the exact one by at most u (3M + 2S) + u|d| per
 * component (norm: sqrt(3) u (3M + 2S) <= 4u (3M + S), plus u relative), and the squared norm
 * (fmaf chain) adds 3u relative; the CPU's own double evaluation and the double wrapping differ
 * from the exact vector by far less than E_d = 64 2^-53 (3 kappa (X + Hs) + M + S + cutoff), X the
 * largest |coordinate| of the system's original positions (bbox_kernel), Hs = sum_k max_d |H_kd|,
 * kappa = max_k |a_k| / w_k >= 1 (the skew: it bounds the terms |n_k a_k| of the wrapping and
 * |s_k a_k| of the shift by about kappa (|x| + |a_k|)).  With E = 4u(3M + S) + E_d:
 *     hi = cutoff (1 + 1e-5) + E,  lo = cutoff (1 - 1e-5) - E,
 *     hi2 = hi^2 rounded up to float, lo2 = lo^2 rounded down (or -1 when lo <= 0),
 * so d2f >= hi2 only for pairs the CPU rejects and d2f < lo2 only for pairs it accepts (the 1e-5
 * relative part covers the few-u relative errors many times over).  If M >= 1e30 or hi >= 1e18
 * hi2 is NaN: every candidate goes to the double test.  A second search (emit pass) computes the
 * same bits for every decision, so it writes exactly the entries the search pass counted.
 *
 * Launches.  Center mode of the brute force and the fast cell list counts each center's entries
 * and, for the status word, the entries whose neighbor is a ghost (j >= n_centers): n_half =
 * (n_entries + ghost entries) / 2, since each local-local pair is two entries.  When the fast cell
 * list scans at most 8192 counts, the search kernel's blocks take tickets on status->n_entries
 * (zero on entry: the caller zeroes the status) after writing their counts, and the last block
 * scans the counts (offsets written straight into start[] when there is one per center), writes
 * n_entries, n_half and the overflow flag; otherwise cub scans them (also straight into start[]
 * where it can) and the emit kernel finishes the status.  The brute force always takes cub's scan,
 * its write kernel finishing the status (with graphs cub's two short launches cost less than the
 * last block's tail).  The small path does all of it in its one block.
 * The one pass does the brute force's count, scan and write in one launch, its blocks ordered by
 * tickets: the ticket word is status->n_entries (zero on entry), low 32 bits the tickets taken,
 * high 32 bits the blocks that have cleared their two slots in the work space (sum of its own
 * entries + 1, sum up to and including itself + 1; 0 = not published).  A block publishes its own
 * sum once the two halves agree (every block with a ticket has cleared: no slot below its own still
 * holds an earlier launch's sum, so the work space needs no zeroing), then walks back over the
 * slots of smaller tickets, 32 at a time, adding own sums down to the nearest inclusive one (a slot
 * not yet published is read again; it belongs to a block that has started, so this ends whatever
 * the blocks' residency or order), publishes its inclusive sum and writes.  The last ticket
 * writes start[n_centers] and the status (n_half from the ghost entries the blocks added to
 * status->n_half first), when every block has published, i.e. none reads the ticket word again.
 * Either way the entries of a center are contiguous and the output needs no atomics; only the
 * counters of the status word (and the one pass's slots) use them.  The general cell list and half mode keep count, scan,
 * write and a finish kernel.
 *
 * Device work space (nnpops__nbr_cuda_work_bytes): counts and offsets [n_centers * slices + 1]
 * (int64), the scan's temporary storage, and for the cell lists per system the frame (struct geom)
 * and the min/max of fractional coordinates and of |x|, per atom its bin, system, rank in the bin
 * and wrap count, per bin a count and start (int32, at most 2 N + 27 ns bins), and the atoms in bin
 * order (id, wrap count, double position: wrapped for the general kernel, original for the fast
 * one, and the float position xr with the id in .w); the fast cell list's codes, FAST_K int32
 * per slot.  The one pass: counts, offsets and the scan's storage as the brute force (the half list
 * runs it as the brute force), and two 64-bit sums per block.
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
const double WIDE_MARGIN = 1e-6; /* relative margin of the wide-cell test (wide_cell) */
const double FLT_REL = 1e-5; /* relative margin of the float32 thresholds of the fast cell list */

const int TB = 256;           /* threads per block of the multi-block kernels */
const int SMALL_TB = 512;     /* the one-block path */
const int SMALL_MAX = 1024;   /* atoms (hence centers) the one-block path takes */
/* staging jobs of at most this many bytes (copied plus zeroed) the one-block path does itself */
const size_t SMALL_STAGE_MAX = 16 << 10;
/* counts scanned by the last block of the fast cell list's search kernel (more: cub's scan
 * between the passes) */
const int64_t LB_SCAN_MAX = 8192;
/* cell lists: the counts of the bins in use are scanned by one block (bin_scan_kernel) when the
 * work space's bound on bins is at most this, i.e. up to ~65,000 atoms (more: cub's scan over
 * the bound, which is faster there) */
const int64_t BIN_SCAN_MAX = 1 << 17;
/* brute force with at most this many items (centers x slices): no scan between the passes, the
 * write pass's warps sum the counts before their items */
const int64_t BRUTE_PREFIX_MAX = 1024;
const int FAST_TB = 128;      /* fast cell list, search pass: threads per block */
const int FAST_CAP = 512;     /* fast cell list: candidates staged in shared memory at a time */
const int FAST_ATOMS_PER_BLOCK = 16; /* fast cell list, search pass: grid = n_atoms / this */
/* fast cell list, search pass: blocks per SM the registers allow (8: 64 registers with a few
 * spills, faster on large systems than 6 without them) */
const int FAST_MIN_BLOCKS = 8;
/* fast cell list, emit pass: its register bound, as blocks of TB threads per SM (5 and 6 are
 * slower) */
const int FAST_EMIT_MIN_BLOCKS = 4;
/* fast cell list, emit pass: threads per block (a divisor of TB; the register bound stays that of
 * FAST_EMIT_MIN_BLOCKS blocks of TB threads per SM).  Blocks of 128 threads end sooner after their
 * slowest warp than blocks of 256 (64 threads gain nothing more). */
const int FAST_EMIT_TB = 128;
/* fast cell list: codes kept per center (a row per slot) by the search pass */
const int FAST_K = 128;
const int FAST_SLOT_BITS = 27; /* a code: slot | image shift (0..26) << FAST_SLOT_BITS */
const int32_t FAST_SLOT_MASK = (1 << FAST_SLOT_BITS) - 1;
/* Whether the search pass keeps codes for n atoms: slots below 2^FAST_SLOT_BITS, and the rows'
 * entries (n FAST_K of them) indexed in 32 bits. */
__host__ __device__ constexpr bool fast_codes_fit(int64_t n) {
    return n < ((int64_t)1 << FAST_SLOT_BITS) && n * FAST_K <= ((int64_t)1 << 32);
}
/* A code's top bits for an image shift h in {-1, 0, 1}^3 (fast_emit_kernel decodes them). */
__host__ __device__ constexpr int32_t fast_shift_code(int h0, int h1, int h2) {
    return ((h0 + 1) * 9 + (h1 + 1) * 3 + (h2 + 1)) << FAST_SLOT_BITS;
}

/* Plan thresholds (host). */
const int64_t PLAN_SMALL_MAX_COST = 2048;
const double PLAN_BRUTE_MAX_CAND = 8192;
const double PLAN_BRUTE_MAX_COST = 6e6;     /* tests of one system (x3 with images) */
/* cost of a wide cell's test against an open system's: it puts the crossover of the one pass and
 * the fast cell list on periodic boxes with 64 neighbors per atom near 1,730 atoms, between the
 * sizes where each is the faster (docs/performance.md, neighbor list) */
const double PLAN_WIDE_FACTOR = 2.0;
const double PLAN_BRUTE_CAND_PER_WARP = 256; /* candidates a warp sweeps for a center */
const double PLAN_BRUTE_MIN_WARPS = 2048;     /* ... unless that leaves fewer warps than this */

struct geom {
    double h[9];    /* rows a, b, c */
    double rec[9];  /* reciprocal vectors (rows): f_k = x . rec_k */
    double w[3];    /* perpendicular widths */
    double f0[3];   /* binned range start (fractional) */
    double fs[3];   /* bins per unit of fractional coordinate */
    double org[3];  /* origin subtracted from the float positions (fast cell list) */
    int32_t per[3], img[3], nb[3], r[3];
    int64_t bin0;   /* first global bin of the system */
    float hi2, lo2; /* float32 thresholds of the fast cell list */
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
    int32_t max_images, half, slices, fast;
    int32_t ghost_nhalf;     /* center mode: n_half from the ghost entries counted by the count pass */
    int32_t lb_scan;         /* the last block of the count kernel scans and finishes */
    int32_t finish_in_write; /* the write kernel finishes (copies start[], fills the status) */
    int32_t prefix_in_write; /* brute force, few items: no scan; the write kernel's warps sum the
                              * counts before their item, and start[] and the status come from it */
    int64_t capacity, n_items;
    /* outputs */
    int32_t *pairs, *shifts;
    double *vec, *dist;
    int64_t *start;
    nnpops__dev_status *status;
    /* work */
    int64_t *counts, *offs; /* offs may be `start` itself (one slice per center) */
    geom *g;
    unsigned long long *bbox; /* [ns][8]: encoded min f_k, then ~encoded max f_k, ~encoded max |x|
                               * (atomicMin all) */
    int32_t *atom_bin, *atom_sys, *atom_rank, *bin_count, *bin_start, *sorted_id;
    int32_t *fast_ids; /* fast cell list: [n_atoms][FAST_K] codes by slot (NULL: none kept) */
    int4 *atom_wrap, *sorted_wrap;
    double *sorted_xd; /* [n][3]: wrapped (general cell list) or original (fast) positions */
    float4 *sorted_f4; /* fast cell list: float xr, id in .w */
    int64_t *n_bins_used;
    int64_t n_bins_bound;
    /* one pass: centers per block, and the blocks' published sums ([0, grid): a block's own
     * entries + 1, [grid, 2 grid): the entries up to and including the block + 1; 0: not yet) */
    int64_t op_cpb;
    unsigned long long *op_slots;
    nnpops__stage_job stage; /* the one-block path: staging done first (zero bytes: none) */
};

/* ---- exact arithmetic helpers (never contracted) ---- */
__device__ __forceinline__ double dmul(double x, double y) { return __dmul_rn(x, y); }
__device__ __forceinline__ double dadd(double x, double y) { return __dadd_rn(x, y); }
__device__ __forceinline__ double dsub(double x, double y) { return __dsub_rn(x, y); }
__device__ __forceinline__ double dot3(const double *u, const double *v) {
    return dadd(dadd(dmul(u[0], v[0]), dmul(u[1], v[1])), dmul(u[2], v[2]));
}

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

/* Frame of system s (no bins): h, rec, w, per, img; validates the cell (as the CPU).  Explicit
 * roundings, so every kernel computes the same frame (and image counts) bit for bit. */
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
        cr[3 * k + 0] = dsub(dmul(u[1], v[2]), dmul(u[2], v[1]));
        cr[3 * k + 1] = dsub(dmul(u[2], v[0]), dmul(u[0], v[2]));
        cr[3 * k + 2] = dsub(dmul(u[0], v[1]), dmul(u[1], v[0]));
        len[k] = sqrt(dot3(g.h + 3 * k, g.h + 3 * k));
        crlen[k] = sqrt(dot3(cr + 3 * k, cr + 3 * k));
    }
    const double det = dot3(g.h, cr);
    const double vol = fabs(det);
    if (!finite || !(vol > dmul(dmul(dmul(1e-10, len[0]), len[1]), len[2]))) {
        if (report) {
            int bad = 0;
            double worst = 1e300;
            for (int k = 0; k < 3; k++) {
                double q = len[k] == 0.0 ? -1.0 : (crlen[k] == 0.0 ? 1e300 : vol / dmul(len[k], crlen[k]));
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
    return dot3(x, g.rec + 3 * k);
}

/* Every periodic axis of the frame at least twice the reach wide (with a margin far above the
 * rounding of the fractional offsets): an atom has at most one image within the reach of a
 * center.  A system without periodic axes is not `wide` (it has one image anyway). */
__device__ __forceinline__ bool wide_cell(const nbr_args &a, const geom &g) {
    if (!g.any_per) return false;
    const double need = 2.0 * a.reach * (1.0 + WIDE_MARGIN);
    for (int q = 0; q < 3; q++)
        if (g.per[q] && !(g.w[q] >= need)) return false;
    return true;
}

/* h . H for an integer image h (explicit roundings). */
__device__ __forceinline__ double image_comp(const double *H, int h0, int h1, int h2, int d) {
    return dadd(dadd(dmul((double)h0, H[d]), dmul((double)h1, H[3 + d])), dmul((double)h2, H[6 + d]));
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

/* Is entry (c, j, s) of center mode a distinct half-list pair?  (n_half of the general cell list) */
__device__ __forceinline__ bool half_representative(const nbr_args &a, int64_t c, int64_t j, int s0,
                                                    int s1, int s2) {
    if (j >= a.n_centers) return true;
    if (s0 == 0 && s1 == 0 && s2 == 0) return c < j;
    return lex_positive(s0, s1, s2);
}

/* Exact test from the original positions (the CPU's expression, explicit roundings); fills r and
 * d2.  H: the rows a, b, c. */
__device__ __forceinline__ void pair_vector(const double *H, const double xc[3], const double xj[3],
                                            int s0, int s1, int s2, double r[3], double &d2) {
    if ((s0 | s1 | s2) == 0) {
        for (int d = 0; d < 3; d++) r[d] = dsub(xj[d], xc[d]);
    } else {
        for (int d = 0; d < 3; d++) r[d] = dadd(dsub(xj[d], xc[d]), image_comp(H, s0, s1, s2, d));
    }
    d2 = dadd(dadd(dmul(r[0], r[0]), dmul(r[1], r[1])), dmul(r[2], r[2]));
}

__device__ void record_close(const nbr_args &a, int64_t c, int64_t j, double d2) {
    const unsigned old = atomicOr((unsigned *)&a.status->flags, NNPOPS__ST_TOO_CLOSE);
    if (!(old & NNPOPS__ST_TOO_CLOSE)) {
        a.status->close_i = (int32_t)c;
        a.status->close_j = (int32_t)j;
        a.status->close_d = sqrt(d2);
    }
}

/* Writes entry e (already checked against capacity), its vector too when with_vec. */
__device__ __forceinline__ void write_entry(const nbr_args &a, int64_t e, int64_t c, int64_t j,
                                            int s0, int s1, int s2, const double r[3], double d2,
                                            bool with_vec = true) {
    if (((uintptr_t)a.pairs & 7) == 0) { /* the pair as one 8-byte store */
        reinterpret_cast<int2 *>(a.pairs)[e] = make_int2((int32_t)c, (int32_t)j);
    } else {
        a.pairs[2 * e] = (int32_t)c;
        a.pairs[2 * e + 1] = (int32_t)j;
    }
    if (a.shifts) {
        a.shifts[3 * e] = s0;
        a.shifts[3 * e + 1] = s1;
        a.shifts[3 * e + 2] = s2;
    }
    if (a.vec && with_vec) {
        a.vec[3 * e] = r[0];
        a.vec[3 * e + 1] = r[1];
        a.vec[3 * e + 2] = r[2];
    }
    if (a.dist) a.dist[e] = sqrt(d2);
}

/* The vectors of entries e .. e + cnt - 1 (cnt <= 32), entry e + i held by lane i, written by the
 * whole warp so that each store instruction covers 32 consecutive doubles (lane l of round m
 * writes double l + 32 m of the block, fetched with shuffles): a strided store per component
 * would carry three times the bytes to L2.  Entries at or past the capacity are not written.
 * (Through shared memory instead of shuffles: no faster.) */
__device__ __forceinline__ void store_vecs(const nbr_args &a, int64_t e, int cnt, const double r[3]) {
    if (!a.vec) return;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < 3; m++) {
        const int t = lane + 32 * m, i = t / 3, comp = t - 3 * i; /* i <= 31 */
        const double v0 = __shfl_sync(NNPOPS__FULL_MASK, r[0], i);
        const double v1 = __shfl_sync(NNPOPS__FULL_MASK, r[1], i);
        const double v2 = __shfl_sync(NNPOPS__FULL_MASK, r[2], i);
        const double v = comp == 0 ? v0 : (comp == 1 ? v1 : v2);
        if (i < cnt && e + i < a.capacity) a.vec[3 * e + t] = v;
    }
}

/* ---- status, scans and the ends of the count / write kernels ---- */

/* The totals of the status word once the offsets are known. */
__device__ void finish_status(const nbr_args &a, int64_t total) {
    a.status->n_entries = total;
    if (a.half) {
        a.status->n_half = total;
    } else if (a.ghost_nhalf) {
        const unsigned long long ghosts =
            atomicAdd((unsigned long long *)&a.status->n_half, 0ull);
        a.status->n_half = (total + (int64_t)ghosts) / 2;
    }
    if (total > a.capacity) atomicOr((unsigned *)&a.status->flags, NNPOPS__ST_OVERFLOW);
}

/* Inclusive warp scan. */
__device__ __forceinline__ long long warp_incl_scan(long long v) {
    const int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        const long long u = __shfl_up_sync(NNPOPS__FULL_MASK, v, o);
        if (lane >= o) v += u;
    }
    return v;
}

/* Block-wide exclusive scan of v[0..n) in shared memory, in place (every thread calls it). */
__device__ void block_scan_shared(long long *v, int n, long long *s_warp) {
    const int T = blockDim.x, t = threadIdx.x, lane = t & 31, warp = t >> 5, nw = T >> 5;
    const int per = (n + T - 1) / T;
    const int lo = min(n, t * per), hi = min(n, lo + per);
    long long sum = 0;
    for (int i = lo; i < hi; i++) sum += v[i];
    const long long incl = warp_incl_scan(sum);
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        long long x = lane < nw ? s_warp[lane] : 0;
        x = warp_incl_scan(x);
        if (lane < nw) s_warp[lane] = x;
    }
    __syncthreads();
    long long run = (warp ? s_warp[warp - 1] : 0) + incl - sum;
    for (int i = lo; i < hi; i++) {
        const long long x = v[i];
        v[i] = run;
        run += x;
    }
    __syncthreads();
}

/* Exclusive scan by one block (every thread calls it): out(i, prefix) for i in [0, n) with the sum
 * of in(0 .. i), in rounds of blockDim.x * IPT values (IPT consecutive ones a thread); returns the
 * total (to every thread). */
template <int IPT, typename In, typename Out>
__device__ long long block_scan_rounds(int64_t n, In in, Out out) {
    __shared__ long long s_warp[32];
    __shared__ long long s_carry;
    const int T = blockDim.x, t = threadIdx.x, lane = t & 31, warp = t >> 5, nw = T >> 5;
    if (t == 0) s_carry = 0;
    __syncthreads();
    for (int64_t base = 0; base < n; base += (int64_t)T * IPT) {
        long long v[IPT];
        long long sum = 0;
        const int64_t i0 = base + (int64_t)t * IPT;
#pragma unroll
        for (int k = 0; k < IPT; k++) {
            v[k] = i0 + k < n ? in(i0 + k) : 0;
            sum += v[k];
        }
        const long long incl = warp_incl_scan(sum);
        if (lane == 31) s_warp[warp] = incl;
        __syncthreads();
        if (warp == 0) {
            long long x = lane < nw ? s_warp[lane] : 0;
            x = warp_incl_scan(x);
            if (lane < nw) s_warp[lane] = x;
        }
        __syncthreads();
        long long run = s_carry + (warp ? s_warp[warp - 1] : 0) + incl - sum;
#pragma unroll
        for (int k = 0; k < IPT; k++) {
            if (i0 + k < n) out(i0 + k, run);
            run += v[k];
        }
        __syncthreads();
        if (t == 0) s_carry += s_warp[nw - 1];
        __syncthreads();
    }
    return s_carry;
}

/* The last block of a count kernel: offs = exclusive scan of counts[0 .. n_items) (offs[n_items] =
 * total), start[] from offs where they differ, the status.  Every thread of the block calls it. */
__device__ void last_block_scan(const nbr_args &a) {
    const int t = threadIdx.x, T = blockDim.x;
    const int64_t total = block_scan_rounds<8>(
        a.n_items, [&](int64_t i) { return (long long)__ldcg(a.counts + i); },
        [&](int64_t i, long long run) { a.offs[i] = run; });
    if (t == 0) a.offs[a.n_items] = total;
    if (a.start && a.start != a.offs) {
        __syncthreads();
        for (int64_t c = t; c <= a.n_centers; c += T) a.start[c] = a.offs[c * a.slices];
    }
    if (t == 0) finish_status(a, total);
}

/* End of a count kernel (every thread of every block calls it): the block's ghost entries go to
 * status->n_half; with lb_scan, a ticket, and the last block scans. */
__device__ void count_epilogue(const nbr_args &a, long long ghosts) {
    __shared__ unsigned long long s_ghosts;
    __shared__ int s_last;
    if (threadIdx.x == 0) s_ghosts = 0;
    __syncthreads();
    if (ghosts) atomicAdd(&s_ghosts, (unsigned long long)ghosts);
    if (a.lb_scan) __threadfence(); /* this thread's counts, before the block's ticket */
    __syncthreads();
    if (threadIdx.x == 0) {
        if (s_ghosts && a.ghost_nhalf)
            atomicAdd((unsigned long long *)&a.status->n_half, s_ghosts);
        s_last = 0;
        if (a.lb_scan) {
            __threadfence();
            const unsigned long long ticket =
                atomicAdd((unsigned long long *)&a.status->n_entries, 1ull);
            s_last = ticket == (unsigned long long)gridDim.x - 1ull;
        }
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    last_block_scan(a);
}

/* The output offset of item `slot` in the write pass: offs[slot], or with prefix_in_write the sum
 * of counts[0 .. slot) by the warp (all its lanes call it). */
__device__ __forceinline__ int64_t item_offset(const nbr_args &a, int64_t slot) {
    if (!a.prefix_in_write) return a.offs[slot];
    long long sum = 0;
    for (int64_t q = threadIdx.x & 31; q < slot; q += 32) sum += a.counts[q];
    return warp_sum(sum);
}

/* End of a write kernel when cub scanned: start[] from offs where they differ, the status; with
 * prefix_in_write, start[n_centers] and the status from the sum of all counts (the first warp). */
__device__ __forceinline__ void write_epilogue(const nbr_args &a) {
    if (a.prefix_in_write) {
        if (blockIdx.x != 0 || threadIdx.x >= 32) return;
        const int64_t total = item_offset(a, a.n_items);
        if (threadIdx.x == 0) {
            if (a.start) a.start[a.n_centers] = total;
            finish_status(a, total);
        }
        return;
    }
    if (!a.finish_in_write) return;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (a.start && a.start != a.offs)
        for (int64_t c = t; c <= a.n_centers; c += stride) a.start[c] = a.offs[c * a.slices];
    if (t == 0) finish_status(a, a.offs[a.n_items]);
}

/* ---- general cell list, old-style emit (warp-uniform calls) ---- */
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

/* ---- brute force: one (center position k of `order`, slice w) per warp; the slice is a range of
 * the system's atoms, a lane per atom, every image shift of the atom in turn.  A lane first forms
 * the vector to the atom's image in double by increments (the wrapped difference plus i . H, a
 * few additions per image) and runs the exact test (the CPU's expression) only where that is
 * within cutoff (1 + 1e-9) plus a bound of its rounding (mj below).  Count pass: count and ghost
 * entries (warp-uniform); write pass: entries from `base`.  g: the (valid) frame of system s.
 * A system without periodic axes has one image, and the exact test alone. ---- */
/* The one pass's record of an item's accepted candidates in its count pass, in the order the write
 * pass would write them: codes[q] = {j, shift (10 bits a component, +512)} for entry q < cap;
 * bad (per lane): an entry past cap or a shift component outside [-512, 512). */
struct brute_rec {
    int2 *codes;
    int cap, bad;
};
__host__ __device__ constexpr bool rec_shift_fits(int s0, int s1, int s2) {
    return s0 >= -512 && s0 < 512 && s1 >= -512 && s1 < 512 && s2 >= -512 && s2 < 512;
}

/* One test of a warp's lanes (acc: accepted): the count pass counts the entries and those whose
 * neighbor is a ghost (warp-uniform), with REC recording them in rec; the write pass writes them
 * from e on. */
template <bool WRITE, bool REC = false>
__device__ __forceinline__ void brute_emit(const nbr_args &a, bool acc, int64_t c, int64_t j,
                                           int s0, int s1, int s2, const double r[3], double d2,
                                           int64_t &e, int64_t &count, int64_t &ghosts,
                                           brute_rec &rec) {
    const int lane = threadIdx.x & 31;
    const unsigned b = __ballot_sync(NNPOPS__FULL_MASK, acc);
    if (!WRITE) {
        if (REC && acc) {
            const int64_t q = count + __popc(b & ((1u << lane) - 1u));
            if (q < rec.cap && rec_shift_fits(s0, s1, s2))
                rec.codes[q] = make_int2((int32_t)j, (s0 + 512) | (s1 + 512) << 10 | (s2 + 512) << 20);
            else
                rec.bad = 1;
        }
        count += __popc(b);
        ghosts += __popc(__ballot_sync(NNPOPS__FULL_MASK, acc && j >= a.n_centers));
    } else {
        if (acc) {
            const int64_t ee = e + __popc(b & ((1u << lane) - 1u));
            if (ee < a.capacity) write_entry(a, ee, c, j, s0, s1, s2, r, d2);
            if (d2 < a.min_d2) record_close(a, c, j, d2);
        }
        e += __popc(b);
    }
}

template <bool WRITE, bool REC = false>
__device__ void brute_item(const nbr_args &a, const double *pos, const int32_t *order, const geom &g,
                           int64_t s, int64_t c, int w, int slices, int64_t base, int64_t &count,
                           int64_t &ghosts, brute_rec &rec) {
    const int lane = threadIdx.x & 31;
    count = 0;
    ghosts = 0;
    double xc[3];
    load3(pos, c, xc);
    const int64_t a0 = a.sys_start[s], na = a.sys_start[s + 1] - a0;
    const int64_t per = (na + slices - 1) / slices;
    const int64_t lo = w * per, hi = min(na, lo + per);
    if (!g.any_per) {
        /* no periodic axis: the one image, whose exact test is the whole test */
        int64_t e = base;
        for (int64_t t0 = lo; t0 < hi; t0 += 32) {
            const int64_t t = t0 + lane;
            bool acc = false;
            int64_t j = 0;
            double r[3] = {0, 0, 0}, d2 = 0;
            if (t < hi) {
                j = order[a0 + t];
                double xj[3];
                load3(pos, j, xj);
                pair_vector(g.h, xc, xj, 0, 0, 0, r, d2);
                acc = j != c && d2 < a.cut2 && keep_pair(a, c, j, 0, 0, 0);
            }
            brute_emit<WRITE, REC>(a, acc, c, j, 0, 0, 0, r, d2, e, count, ghosts, rec);
        }
        return;
    }
    int nc[3];
    double fx[3]; /* the center's fractional coordinates on the periodic axes */
    for (int q = 0; q < 3; q++) {
        fx[q] = g.per[q] ? frac(g, xc, q) : 0.0;
        nc[q] = (int)floor(fx[q]);
    }
    if (wide_cell(a, g)) {
        /* every periodic width at least twice the reach: of an atom's images at most one lies
         * within the reach of c, the one whose wrapped fractional offset fb from c is nearest to
         * zero on every periodic axis (|fb_q + i_q| w_q <= |v| < reach <= w_q / 2 leaves one
         * i_q = -rint(fb_q)); its exact test is the whole test (the same shift, vector and
         * decision as the image loop below, which accepts no other image) */
        double fc[3];
        for (int q = 0; q < 3; q++) fc[q] = dsub(fx[q], (double)nc[q]);
        int64_t e = base;
        for (int64_t t0 = lo; t0 < hi; t0 += 32) {
            const int64_t t = t0 + lane;
            bool acc = false;
            int64_t j = 0;
            int sh[3] = {0, 0, 0};
            double r[3] = {0, 0, 0}, d2 = 0;
            if (t < hi) {
                j = order[a0 + t];
                double xj[3];
                load3(pos, j, xj);
                for (int q = 0; q < 3; q++) {
                    if (!g.per[q]) continue;
                    const double fj = frac(g, xj, q), nj = floor(fj);
                    /* shift = image i_q + nc_q - nj_q, as in the loop */
                    sh[q] = nc[q] - (int)nj - (int)rint(dsub(dsub(fj, nj), fc[q]));
                }
                if (!(j == c && (sh[0] | sh[1] | sh[2]) == 0)) {
                    pair_vector(g.h, xc, xj, sh[0], sh[1], sh[2], r, d2);
                    acc = d2 < a.cut2 && keep_pair(a, c, j, sh[0], sh[1], sh[2]);
                }
            }
            brute_emit<WRITE, REC>(a, acc, c, j, sh[0], sh[1], sh[2], r, d2, e, count, ghosts, rec);
        }
        return;
    }
    double hm[3];
    for (int q = 0; q < 3; q++)
        hm[q] = fmax(fabs(g.h[3 * q]), fmax(fabs(g.h[3 * q + 1]), fabs(g.h[3 * q + 2])));
    const double xcm = fmax(fabs(xc[0]), fmax(fabs(xc[1]), fabs(xc[2])));
    const int i0n = g.img[0], i1n = g.img[1], i2n = g.img[2];
    int64_t e = base;
    for (int64_t t0 = lo; t0 < hi; t0 += 32) {
        const int64_t t = t0 + lane;
        const bool valid = t < hi;
        int64_t j = 0;
        double xj[3] = {0, 0, 0}, bv[3] = {0, 0, 0};
        int nj[3] = {0, 0, 0};
        double thr2 = -1.0;
        if (valid) {
            j = order[a0 + t];
            load3(pos, j, xj);
            for (int q = 0; q < 3; q++) nj[q] = g.per[q] ? (int)floor(frac(g, xj, q)) : 0;
            for (int d = 0; d < 3; d++)
                bv[d] = dadd(dsub(xj[d], xc[d]), image_comp(g.h, nc[0] - nj[0], nc[1] - nj[1],
                                                             nc[2] - nj[2], d));
            /* rounding of the incremental vector against the exact one (generous) */
            double mag = xcm + fmax(fabs(xj[0]), fmax(fabs(xj[1]), fabs(xj[2])));
            for (int q = 0; q < 3; q++) mag += (fabs((double)(nc[q] - nj[q])) + g.img[q]) * hm[q];
            const double mj = 1e-9 + 64.0 * (4 + i0n + i1n + i2n) * 1.1102230246251565e-16 * mag;
            const double th = a.cutoff * (1.0 + 1e-9) + mj;
            thr2 = th * th;
        }
        for (int i0 = -i0n; i0 <= i0n; i0++) {
            double v0[3];
            for (int d = 0; d < 3; d++) v0[d] = dadd(bv[d], dmul((double)i0, g.h[d]));
            for (int i1 = -i1n; i1 <= i1n; i1++) {
                double v[3];
                for (int d = 0; d < 3; d++)
                    v[d] = dadd(dadd(v0[d], dmul((double)i1, g.h[3 + d])), dmul((double)-i2n, g.h[6 + d]));
                for (int i2 = -i2n; i2 <= i2n; i2++) {
                    const int s0 = i0 + nc[0] - nj[0], s1 = i1 + nc[1] - nj[1],
                              s2 = i2 + nc[2] - nj[2];
                    bool acc = false;
                    double r[3] = {0, 0, 0}, d2 = 0;
                    const double d2a = dadd(dadd(dmul(v[0], v[0]), dmul(v[1], v[1])), dmul(v[2], v[2]));
                    if (valid && !(d2a >= thr2) && !(j == c && s0 == 0 && s1 == 0 && s2 == 0)) {
                        pair_vector(g.h, xc, xj, s0, s1, s2, r, d2);
                        acc = d2 < a.cut2 && keep_pair(a, c, j, s0, s1, s2);
                    }
                    for (int d = 0; d < 3; d++) v[d] = dadd(v[d], g.h[6 + d]);
                    brute_emit<WRITE, REC>(a, acc, c, j, s0, s1, s2, r, d2, e, count, ghosts, rec);
                }
            }
        }
    }
}

/* Blocks per SM the brute-force kernels are compiled for.  The frame lives in shared memory for
 * every warp (a warp whose system differs from the block's first one computes its own into s_gw),
 * so brute_item is inlined once: 113 / 114 registers (count / write) without spills (2 blocks of
 * 256 threads per SM, a quarter of the SM's warps).  A bound of 4 blocks per SM (64 registers,
 * 250-500 bytes of spills) speeds open clusters but slows periodic boxes (27 images, the longer
 * loop) more: 1 it is. */
const int BRUTE_MIN_BLOCKS = 1;
/* The frame of system s for the calling warp, set up by its lane 0 in shared memory (gw, ok in
 * okw; the warp's lanes wait for one another before and after, so that a frame still being read
 * is not overwritten); returns whether the cell is usable. */
__device__ __forceinline__ bool warp_frame(const nbr_args &a, int64_t s, geom &gw, int &okw,
                                           bool count) {
    __syncwarp();
    if ((threadIdx.x & 31) == 0) okw = setup_frame(a, s, gw, count);
    __syncwarp();
    return okw != 0;
}

template <bool WRITE>
__global__ void __launch_bounds__(TB, BRUTE_MIN_BLOCKS) brute_kernel(const nbr_args a) {
    __shared__ geom s_g;      /* the frame of the system of the block's first item */
    __shared__ geom s_gw[TB / 32]; /* a warp's own frame, when its system is another */
    __shared__ int s_okw[TB / 32];
    __shared__ int64_t s_sys;
    __shared__ int s_ok;
    const int lane = threadIdx.x & 31;
    const int64_t gt = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t gw = gt >> 5;
    const int64_t n_warps = a.n_atoms * a.slices;
    if (!WRITE && gt == 0) a.counts[a.n_items] = 0;
    if (threadIdx.x == 0) {
        const int64_t gw0 = ((int64_t)blockIdx.x * blockDim.x) >> 5;
        s_sys = -1;
        s_ok = 0;
        if (gw0 < n_warps) {
            s_sys = system_of(a.sys_start, a.n_systems, gw0 / a.slices);
            s_ok = setup_frame(a, s_sys, s_g, !WRITE);
        }
    }
    __syncthreads();
    long long ghosts = 0;
    if (gw < n_warps) { /* warp-uniform */
        const int64_t k = gw / a.slices;
        const int w = (int)(gw - k * a.slices);
        const int64_t c = a.order[k];
        if (c < a.n_centers) {
            const int64_t slot = c * a.slices + w;
            const int64_t s = system_of(a.sys_start, a.n_systems, k);
            int64_t count = 0, gh = 0;
            /* the frame in shared memory either way (one brute_item, no frame in registers) */
            const geom *gp = &s_g;
            int ok = s_ok;
            if (s != s_sys) {
                const int wi = (int)(threadIdx.x >> 5);
                ok = warp_frame(a, s, s_gw[wi], s_okw[wi], !WRITE);
                gp = &s_gw[wi];
            }
            const int64_t off = WRITE ? item_offset(a, slot) : 0;
            if (WRITE && a.prefix_in_write && w == 0 && lane == 0 && a.start) a.start[c] = off;
            brute_rec none = {nullptr, 0, 0};
            if (ok)
                brute_item<WRITE>(a, a.pos, a.order, *gp, s, c, w, a.slices, off, count, gh, none);
            if (!WRITE && lane == 0) {
                a.counts[slot] = count;
                ghosts = gh;
            }
        }
    }
    if (!WRITE) count_epilogue(a, ghosts);
    else write_epilogue(a);
}

/* ---- one pass (NNPOPS__NBR_ONEPASS): the brute force's count, scan and write in one launch.  A
 * block takes a ticket (the order in which blocks start) and owns centers [ticket cpb, + cpb) of
 * the center ids, so the blocks' entries follow one another in ticket order; it counts its items
 * (center, slice) as brute_kernel does into shared memory, scans them, takes the entries before
 * it from the blocks with smaller tickets (decoupled look-back over the published sums), publishes
 * its own, writes start[] and its entries.  Tickets and slot clearing share one word,
 * status->n_entries (zero on entry, as the caller guarantees): its low 32 bits count the tickets
 * taken, its high 32 bits the blocks that have cleared their two slots; a block reads any slot only
 * once both halves are equal (every block that has a ticket has cleared its slots, so no slot
 * before its own still holds a value of an earlier launch), and waits only on blocks with smaller
 * tickets, which have started: no deadlock whatever the order or number of resident blocks.  The
 * last ticket's block writes start[n_centers] and the status (n_entries over the ticket word,
 * n_half from the ghost entries the blocks added to status->n_half), once every block has
 * published (its look-back has seen them all), so no block still reads the ticket word.  The
 * write pass takes its items' entries from what the count pass recorded (brute_rec) where the
 * record is complete. ---- */
const int OP_TB = 256;            /* threads per block */
const int OP_ITEMS = 1024;        /* items (center, slice) a block counts: shared memory */
const int OP_CODES = 2048;        /* accepted candidates a block records between its passes */
const int64_t OP_BLOCKS = 256;    /* blocks aimed at: about two per SM of an H100 or H200 */
/* blocks per SM the one pass is compiled for: two, as the brute force's kernels reach without a
 * bound (at most 128 registers; unbounded, its two inlined passes take 129, one block per SM) */
const int OP_MIN_BLOCKS = 2;

/* Centers per block and blocks of the one pass for n_centers centers of `slices` items each. */
__host__ __device__ inline void onepass_shape(int64_t n_centers, int slices, int64_t &cpb,
                                              int64_t &blocks) {
    if (slices < 1) slices = 1;
    cpb = (n_centers + OP_BLOCKS - 1) / OP_BLOCKS;
    if (cpb > OP_ITEMS / slices) cpb = OP_ITEMS / slices;
    if (cpb < 1) cpb = 1;
    blocks = n_centers > 0 ? (n_centers + cpb - 1) / cpb : 1;
}

/* A word another block writes with atomics, read without caching in L1 (the emulation: an atomic
 * read, which is what its race model orders). */
__device__ __forceinline__ unsigned long long load_shared_word(unsigned long long *p) {
#if defined(__CUDA_ARCH__)
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return atomicAdd(p, 0ull);
#endif
}

__global__ void __launch_bounds__(OP_TB, OP_MIN_BLOCKS) onepass_kernel(const nbr_args a) {
    __shared__ long long s_cnt[OP_ITEMS + 1];
    __shared__ int32_t s_kpos[OP_ITEMS]; /* the position in `order` of each center of the block */
    __shared__ int2 s_codes[OP_CODES];   /* the items' accepted candidates (brute_rec) */
    __shared__ unsigned char s_bad[OP_ITEMS]; /* an item whose record is incomplete */
    __shared__ long long s_warp[32];
    __shared__ geom s_g;                /* one system: its frame, for every warp */
    __shared__ geom s_gw[OP_TB / 32];   /* several: a warp's current system's */
    __shared__ int s_okw[OP_TB / 32];
    __shared__ int s_ok;
    __shared__ unsigned long long s_ghosts;
    __shared__ long long s_excl;
    __shared__ long long s_ticket;
    unsigned long long *const tick = (unsigned long long *)&a.status->n_entries;
    unsigned long long *const agg = a.op_slots, *const incl = a.op_slots + gridDim.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const bool one_sys = a.n_systems == 1;
    /* launched programmatically (the step's chain): the next kernel may launch once every block
     * has started (it waits for this one's end before it reads), and this one reads nothing,
     * the status word included, before the kernel before it has completed */
    pdl_trigger();
    pdl_wait();
    if (threadIdx.x == 0) {
        const unsigned long long t = atomicAdd(tick, 1ull);
        s_ok = one_sys && setup_frame(a, 0, s_g, true); /* (while the ticket comes) */
        s_ticket = (long long)(t & 0xffffffffull);
        s_ghosts = 0;
    }
    __syncthreads();
    const long long ticket = s_ticket;
    if (threadIdx.x == 0) { /* (the other warps go on meanwhile) */
        agg[ticket] = 0;
        incl[ticket] = 0;
        __threadfence(); /* the cleared slots, before the count of blocks that cleared */
        atomicAdd(tick, 1ull << 32);
    }
    const int64_t c0 = ticket * a.op_cpb;
    const int64_t c1 = min(a.n_centers, c0 + a.op_cpb);
    const int nc = (int)(c1 - c0), S = a.slices, n_items = nc * S;
    /* the centers' positions in `order`: order[c] == c where the atoms are in system order (one
     * system, or a batch given system by system), else a sweep of `order` */
    int miss = 0;
    for (int i = threadIdx.x; i < nc; i += blockDim.x) {
        const int64_t c = c0 + i;
        const bool same = c < a.n_atoms && a.order[c] == c;
        s_kpos[i] = same ? (int32_t)c : -1;
        miss |= !same;
    }
    if (__syncthreads_or(miss)) {
        for (int64_t k = threadIdx.x; k < a.n_atoms; k += blockDim.x) {
            const int64_t c = a.order[k];
            if (c >= c0 && c < c1) s_kpos[c - c0] = (int32_t)k;
        }
        __syncthreads();
    }
    /* count: a warp per item, the frame in shared memory (one system: the block's; several: the
     * warp's current system's) */
    const geom &g = one_sys ? s_g : s_gw[warp];
    int64_t gs = one_sys ? 0 : -1;
    bool gok = one_sys && s_ok;
    long long ghosts = 0;
    const int cap = OP_CODES / n_items; /* codes an item may record */
    for (int i = warp; i < n_items; i += nw) { /* warp-uniform */
        const int ci = i / S, w = i - ci * S;
        const int64_t k = s_kpos[ci];
        int64_t count = 0, gh = 0;
        brute_rec rec = {s_codes + i * cap, cap, 0};
        if (k >= 0) {
            const int64_t s = system_of(a.sys_start, a.n_systems, k);
            if (s != gs) {
                gs = s;
                gok = warp_frame(a, s, s_gw[warp], s_okw[warp], true);
            }
            if (gok)
                brute_item<false, true>(a, a.pos, a.order, g, s, c0 + ci, w, S, 0, count, gh, rec);
        }
        const bool bad = __any_sync(NNPOPS__FULL_MASK, rec.bad);
        if (lane == 0) {
            s_cnt[i] = count;
            s_bad[i] = bad;
            ghosts += gh;
        }
    }
    if (ghosts) atomicAdd(&s_ghosts, (unsigned long long)ghosts);
    if (threadIdx.x == 0) s_cnt[n_items] = 0;
    __syncthreads();
    block_scan_shared(s_cnt, n_items + 1, s_warp); /* s_cnt[n_items]: the block's entries */
    const long long own = s_cnt[n_items];
    if (warp == 0) {
        if (lane == 0) {
            if (s_ghosts && a.ghost_nhalf)
                atomicAdd((unsigned long long *)&a.status->n_half, s_ghosts);
            /* every block with a ticket has cleared its slots */
            for (;;) {
                const unsigned long long v = load_shared_word(tick);
                if ((v >> 32) == (v & 0xffffffffull)) break;
            }
            __threadfence(); /* the ghost entries before the sum, the clearing before the reads */
            atomicAdd(ticket == 0 ? incl : agg + ticket, (unsigned long long)own + 1ull);
        }
        __syncwarp();
        long long excl = 0;
        /* look-back: a window of 32 blocks below the last one read, lane l at p = top - l; each
         * published block adds its sum (its own entries) until the nearest one that published
         * the entries up to itself, which ends the walk; a window with a block before that one
         * that has not published yet is read again */
        for (long long top = ticket - 1; top >= 0;) {
            const long long p = top - lane;
            unsigned long long vi = 0, va = 0;
            if (p >= 0) {
                vi = load_shared_word(incl + p);
                if (!vi) va = load_shared_word(agg + p);
            }
            const unsigned bp = __ballot_sync(NNPOPS__FULL_MASK, vi != 0);
            const unsigned bx = __ballot_sync(NNPOPS__FULL_MASK, p >= 0 && !vi && !va);
            const int fp = bp ? __ffs(bp) - 1 : 32;
            const unsigned upto = fp >= 31 ? 0xffffffffu : (2u << fp) - 1u; /* lanes 0 .. fp */
            if (bx & upto) continue;
            const long long v = lane <= fp && p >= 0 ? (long long)((vi ? vi : va) - 1ull) : 0;
            excl += warp_sum(v);
            if (fp < 32) break;
            top -= 32;
        }
        if (lane == 0) {
            __threadfence(); /* what the look-back saw, before this block's total */
            if (ticket > 0) atomicAdd(incl + ticket, (unsigned long long)(excl + own) + 1ull);
            s_excl = excl;
            if (ticket == (long long)gridDim.x - 1) {
                if (a.start) a.start[a.n_centers] = excl + own;
                finish_status(a, excl + own);
            }
        }
    }
    __syncthreads();
    const long long excl = s_excl;
    if (a.start)
        for (int i = threadIdx.x; i < nc; i += blockDim.x) a.start[c0 + i] = excl + s_cnt[i * S];
    /* write: the same items, from the offsets; an item with a complete record writes its
     * entries from it (the vector from the original positions and the shift: the same
     * expression and bits as the tests), the others run their tests again */
    for (int i = warp; i < n_items; i += nw) {
        const int ci = i / S, w = i - ci * S;
        const int64_t k = s_kpos[ci];
        if (k < 0) continue;
        const int64_t s = system_of(a.sys_start, a.n_systems, k);
        if (s != gs) {
            gs = s;
            gok = warp_frame(a, s, s_gw[warp], s_okw[warp], false);
        }
        if (!gok) continue;
        const int64_t c = c0 + ci, base = excl + s_cnt[i];
        if (s_bad[i]) {
            int64_t count = 0, gh = 0;
            brute_rec none = {nullptr, 0, 0};
            brute_item<true>(a, a.pos, a.order, g, s, c, w, S, base, count, gh, none);
            continue;
        }
        const int cnt = (int)(s_cnt[i + 1] - s_cnt[i]);
        double xc[3];
        load3(a.pos, c, xc);
        for (int q = lane; q < cnt; q += 32) {
            const int2 code = s_codes[i * cap + q];
            const int s0 = (code.y & 1023) - 512, s1 = ((code.y >> 10) & 1023) - 512,
                      s2 = ((code.y >> 20) & 1023) - 512;
            double xj[3], r[3], d2;
            load3(a.pos, code.x, xj);
            pair_vector(g.h, xc, xj, s0, s1, s2, r, d2);
            if (base + q < a.capacity) write_entry(a, base + q, c, code.x, s0, s1, s2, r, d2);
            if (d2 < a.min_d2) record_close(a, c, code.x, d2);
        }
    }
}

/* ---- the one-block path: positions, order and counts in shared memory, block scan, entries;
 * one launch (which may first do the step's staging job, nnpops__center_neighbors_staged_cuda)
 * ---- */
template <bool WRITE>
__device__ __forceinline__ void small_pass(const nbr_args &a, const double *s_pos,
                                           const int32_t *s_order, long long *s_off,
                                           geom *s_gw, int *s_okw, long long &ghosts) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    /* the frame of system gs (a warp's centers mostly share one), in shared memory: lane 0
     * computes it, and the item code reads it from there (no frame in registers) */
    const geom &g = s_gw[warp];
    int64_t gs = -1;
    bool gok = false;
    for (int64_t k = warp; k < a.n_atoms; k += nw) {
        const int64_t c = s_order[k];
        if (c >= a.n_centers) continue; /* warp-uniform */
        const int64_t s = system_of(a.sys_start, a.n_systems, k);
        if (s != gs) {
            gs = s;
            gok = warp_frame(a, s, s_gw[warp], s_okw[warp], !WRITE);
        }
        int64_t count = 0, gh = 0;
        brute_rec none = {nullptr, 0, 0};
        if (gok)
            brute_item<WRITE>(a, s_pos, s_order, g, s, c, 0, 1, WRITE ? s_off[c] : 0, count, gh,
                              none);
        if (!WRITE && lane == 0) {
            s_off[c] = count;
            ghosts += gh;
        }
    }
}

__global__ void __launch_bounds__(SMALL_TB) small_kernel(const nbr_args a) {
    __shared__ long long s_off[SMALL_MAX + 1];
    __shared__ double s_pos[3 * SMALL_MAX];
    __shared__ int32_t s_order[SMALL_MAX];
    __shared__ long long s_warp[32];
    __shared__ geom s_gw[SMALL_TB / 32];
    __shared__ int s_okw[SMALL_TB / 32];
    __shared__ unsigned long long s_ghosts;
    const int nc = (int)a.n_centers, na = (int)a.n_atoms;
    pdl_trigger();
    if (threadIdx.x == 0) s_ghosts = 0;
    for (int c = threadIdx.x; c <= nc; c += blockDim.x) s_off[c] = 0;
    pdl_wait(); /* (launched programmatically: the inputs come from the kernel before) */
    if (a.stage.copy_bytes || a.stage.zero_bytes) { /* the step's staging, then its inputs */
        copy_bytes<false>((char *)a.stage.dst, (const char *)a.stage.src, a.stage.copy_bytes,
                          threadIdx.x, blockDim.x);
        zero_bytes((char *)a.stage.zdst, a.stage.zero_bytes, threadIdx.x, blockDim.x);
        __syncthreads();
    }
    for (int i = threadIdx.x; i < 3 * na; i += blockDim.x) s_pos[i] = a.pos[i];
    for (int i = threadIdx.x; i < na; i += blockDim.x) s_order[i] = a.order[i];
    __syncthreads();
    long long ghosts = 0;
    small_pass<false>(a, s_pos, s_order, s_off, s_gw, s_okw, ghosts);
    if (ghosts) atomicAdd(&s_ghosts, (unsigned long long)ghosts);
    __syncthreads();
    block_scan_shared(s_off, nc + 1, s_warp); /* s_off[nc] (zero) becomes the total */
    if (a.start)
        for (int c = threadIdx.x; c <= nc; c += blockDim.x) a.start[c] = s_off[c];
    if (threadIdx.x == 0) {
        const int64_t total = s_off[nc];
        a.status->n_entries = total;
        a.status->n_half = (total + (int64_t)s_ghosts) / 2;
        if (total > a.capacity) atomicOr((unsigned *)&a.status->flags, NNPOPS__ST_OVERFLOW);
    }
    small_pass<true>(a, s_pos, s_order, s_off, s_gw, s_okw, ghosts);
}

/* After the scan (old flow: general cell list, half mode): start[c] = offsets of every center
 * (centers of systems with a bad cell too, so that start[] is always a valid CSR), the total,
 * overflow. */
__global__ void finish_kernel(const nbr_args a) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a.start && a.start != a.offs && c <= a.n_centers) a.start[c] = a.offs[c * a.slices];
    if (c == 0) {
        const int64_t total = a.offs[a.n_items];
        a.status->n_entries = total;
        if (a.half) a.status->n_half = total;
        if (total > a.capacity) atomicOr((unsigned *)&a.status->flags, NNPOPS__ST_OVERFLOW);
    }
}

/* ---- cell lists ---- */

/* Zeroes the bin counters and the per-center counts (grid-stride); the fractional min/max along
 * the non-periodic axes of each system and the largest |coordinate|. */
__global__ void bbox_kernel(const nbr_args a) {
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = k; t <= a.n_bins_bound; t += stride) a.bin_count[t] = 0;
    for (int64_t t = k; t <= a.n_items; t += stride) a.counts[t] = 0;
    const bool valid = k < a.n_atoms;
    const int64_t s = valid ? system_of(a.sys_start, a.n_systems, k) : -1;
    /* the frame of the system of the block's first atom, set up once (a thread of another system
     * sets up its own; a block past the last atom, whose first thread has no system, none) */
    __shared__ geom s_g;
    __shared__ int s_ok;
    __shared__ int64_t s_sys;
    if (threadIdx.x == 0) {
        s_sys = s;
        s_ok = valid && setup_frame(a, s, s_g, false);
    }
    __syncthreads();
    geom own;
    const bool mine = s == s_sys;
    const geom &g = mine ? s_g : own;
    bool ok = false;
    double f[3] = {0, 0, 0}, xabs = 0;
    if (valid) {
        ok = mine ? s_ok != 0 : setup_frame(a, s, own, false);
        if (ok) {
            double x[3];
            load3(a.pos, a.order[k], x);
            for (int q = 0; q < 3; q++) {
                f[q] = frac(g, x, q);
                xabs = fmax(xabs, fabs(x[q]));
            }
        }
    }
    const warp_runs runs(s);
    for (int q = 0; q < 4; q++) {
        /* q < 3: min of f (encoded) and min of the complement of encoded f (= max);
         * q == 3: the complement of encoded |x| (its min is the max) */
        const bool need = ok && (q == 3 || !g.per[q]);
        unsigned long long lo = need ? (q < 3 ? enc_double(f[q]) : ~enc_double(xabs)) : ~0ull;
        unsigned long long hi = need && q < 3 ? ~enc_double(f[q]) : ~0ull;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned long long ul = __shfl_down_sync(NNPOPS__FULL_MASK, lo, o);
            const unsigned long long uh = __shfl_down_sync(NNPOPS__FULL_MASK, hi, o);
            if (runs.lane + o <= runs.run_end) {
                lo = ul < lo ? ul : lo;
                hi = uh < hi ? uh : hi;
            }
        }
        if (runs.head && valid && lo != ~0ull) {
            if (q < 3) {
                atomicMin(a.bbox + 8 * s + q, lo);
                atomicMin(a.bbox + 8 * s + 3 + q, hi);
            } else {
                atomicMin(a.bbox + 8 * s + 6, lo);
            }
        }
    }
}

/* Frames and bins of every system, and the float32 thresholds; one block, systems in chunks with
 * a running bin offset (a block scan per chunk); the total number of bins goes to *n_bins_used. */
__global__ void geom_kernel(const nbr_args a) {
    __shared__ long long part[256];
    __shared__ long long s_warp[32];
    __shared__ long long carry;
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
                double range[3];
                for (int q = 0; q < 3; q++) {
                    double thick;
                    range[q] = 1.0;
                    g.f0[q] = 0.0;
                    if (!g.per[q]) {
                        const double lo = dec_double(a.bbox[8 * s + q]);
                        const double hi = dec_double(~a.bbox[8 * s + 3 + q]);
                        g.f0[q] = lo;
                        range[q] = hi - lo;
                    }
                    thick = range[q] * g.w[q];
                    double m = thick / a.reach;
                    if (!(m >= 1.0)) m = 1.0;
                    if (m > 1048576.0) m = 1048576.0;
                    nb[q] = (int64_t)floor(m);
                    g.fs[q] = range[q] > 0 ? 1.0 / range[q] : 0.0;
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
                /* fast cell list: origin and float32 thresholds (see the header) */
                const double X = dec_double(~a.bbox[8 * s + 6]);
                double M = 0, S = 0, Hs = 0, kappa = 1;
                for (int q = 0; q < 3; q++) {
                    const double hm =
                        fmax(fabs(g.h[3 * q]), fmax(fabs(g.h[3 * q + 1]), fabs(g.h[3 * q + 2])));
                    M += (g.per[q] ? 1.0 : range[q]) * hm;
                    if (g.per[q]) S += (double)g.r[q] * hm;
                    Hs += hm;
                    /* skew: |a_k| / w_k bounds |n_k a_k| by kappa |x| (+ |a_k|) */
                    kappa = fmax(kappa, sqrt(dot3(g.h + 3 * q, g.h + 3 * q)) / g.w[q]);
                }
                for (int d = 0; d < 3; d++) {
                    double o = 0;
                    for (int q = 0; q < 3; q++)
                        if (!g.per[q]) o += g.f0[q] * g.h[3 * q + d];
                    g.org[d] = o;
                }
                const double u = 5.9604644775390625e-8, ud = 1.1102230246251565e-16;
                const double E = 4.0 * u * (3.0 * M + S) +
                                 64.0 * ud * (kappa * 3.0 * (X + Hs) + M + S + a.cutoff) + 1e-30;
                const double hi = a.cutoff * (1.0 + FLT_REL) + E;
                const double lo = a.cutoff * (1.0 - FLT_REL) - E;
                if (M < 1e30 && hi < 1e18 && isfinite(E)) {
                    g.hi2 = __double2float_ru(hi * hi);
                    g.lo2 = lo > 0 ? __double2float_rd(lo * lo) : -1.0f;
                } else {
                    g.hi2 = __int_as_float(0x7fc00000); /* NaN: every candidate to the double test */
                    g.lo2 = -1.0f;
                }
            }
        }
        part[threadIdx.x] = nbins;
        __syncthreads();
        block_scan_shared(part, (int)blockDim.x, s_warp); /* exclusive, in place */
        const long long run0 = carry;
        if (s < a.n_systems) {
            g.bin0 = run0 + part[threadIdx.x];
            a.g[s] = g;
        }
        __syncthreads(); /* (every thread has read carry) */
        if (threadIdx.x == blockDim.x - 1) carry = run0 + part[threadIdx.x] + nbins;
        __syncthreads();
    }
    if (threadIdx.x == 0) *a.n_bins_used = carry;
}

/* Bin, system and wrap count of every atom; its rank in the bin is the counter's old value. */
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
            f = dsub(f, fl);
        }
        const double bf = floor(dmul(dsub(f, g.f0[q]), g.fs[q]));
        b[q] = bf < 0 ? 0 : (bf >= g.nb[q] ? g.nb[q] - 1 : (int)bf);
    }
    const int64_t gb = g.bin0 + ((int64_t)b[0] * g.nb[1] + b[1]) * g.nb[2] + b[2];
    a.atom_bin[i] = (int32_t)gb;
    a.atom_sys[i] = (int32_t)s;
    a.atom_wrap[i] = make_int4(n[0], n[1], n[2], (int)s); /* .w: the system */
    a.atom_rank[i] = atomicAdd(a.bin_count + gb, 1);
}

/* One block (BIN_SCAN_TB threads, BIN_SCAN_IPT counts a thread per round): the exclusive scan of
 * the counts of the bins in use into bin_start[0 .. n_bins_used] (the last one the total, the
 * counters past the bins in use being zero), the total also to bin_start[n_bins_bound] (the
 * starts between are never read). */
const int BIN_SCAN_TB = 1024, BIN_SCAN_IPT = 8;
__global__ void __launch_bounds__(BIN_SCAN_TB) bin_scan_kernel(const nbr_args a) {
    const long long total = block_scan_rounds<BIN_SCAN_IPT>(
        *a.n_bins_used + 1, [&](int64_t i) { return (long long)a.bin_count[i]; },
        [&](int64_t i, long long run) { a.bin_start[i] = (int32_t)run; });
    if (threadIdx.x == 0) a.bin_start[a.n_bins_bound] = (int32_t)total;
}

/* Atoms in bin order: id, wrap count, double position (wrapped for the general kernel, original
 * for the fast one) and, for the fast one, xr = x - n . H - org as float with the id in .w. */
__global__ void place_kernel(const nbr_args a) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.n_atoms) return;
    const int32_t gb = a.atom_bin[i];
    if (gb < 0) return;
    const int32_t q = a.bin_start[gb] + a.atom_rank[i];
    const int4 n = a.atom_wrap[i];
    const geom &g = a.g[a.atom_sys[i]];
    double x[3], xw[3];
    load3(a.pos, i, x);
    for (int d = 0; d < 3; d++)
        xw[d] = dsub(x[d], image_comp(g.h, n.x, n.y, n.z, d));
    a.sorted_id[q] = (int32_t)i;
    a.sorted_wrap[q] = n;
    if (!a.fast) {
        for (int d = 0; d < 3; d++) a.sorted_xd[3 * (int64_t)q + d] = xw[d];
    } else {
        for (int d = 0; d < 3; d++) a.sorted_xd[3 * (int64_t)q + d] = x[d];
        a.sorted_f4[q] = make_float4(__double2float_rn(dsub(xw[0], g.org[0])),
                                     __double2float_rn(dsub(xw[1], g.org[1])),
                                     __double2float_rn(dsub(xw[2], g.org[2])),
                                     __int_as_float((int)i));
    }
}

/* Deterministic mode: placing orders the atoms of a bin by the order of its atomics; a thread per
 * bin then sorts the bin's slots by atom index (insertion sort: bins hold a few atoms). */
__global__ void bin_sort_kernel(const nbr_args a) {
    const int64_t gb = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (gb >= *a.n_bins_used) return; /* (the starts of unused bins may not be written) */
    const int32_t lo = a.bin_start[gb], hi = a.bin_start[gb + 1];
    for (int32_t q = lo + 1; q < hi; q++) {
        const int32_t id = a.sorted_id[q];
        const int4 wr = a.sorted_wrap[q];
        const double x0 = a.sorted_xd[3 * (int64_t)q], x1 = a.sorted_xd[3 * (int64_t)q + 1],
                     x2 = a.sorted_xd[3 * (int64_t)q + 2];
        const float4 f4 = a.fast ? a.sorted_f4[q] : make_float4(0, 0, 0, 0);
        int32_t p = q - 1;
        while (p >= lo && a.sorted_id[p] > id) {
            a.sorted_id[p + 1] = a.sorted_id[p];
            a.sorted_wrap[p + 1] = a.sorted_wrap[p];
            for (int d = 0; d < 3; d++)
                a.sorted_xd[3 * (int64_t)(p + 1) + d] = a.sorted_xd[3 * (int64_t)p + d];
            if (a.fast) a.sorted_f4[p + 1] = a.sorted_f4[p];
            p--;
        }
        a.sorted_id[p + 1] = id;
        a.sorted_wrap[p + 1] = wr;
        a.sorted_xd[3 * (int64_t)(p + 1)] = x0;
        a.sorted_xd[3 * (int64_t)(p + 1) + 1] = x1;
        a.sorted_xd[3 * (int64_t)(p + 1) + 2] = x2;
        if (a.fast) a.sorted_f4[p + 1] = f4;
    }
}

__device__ __forceinline__ int floordiv(int x, int n) {
    int q = x / n;
    if ((x % n != 0) && ((x < 0) != (n < 0))) q--;
    return q;
}

/* Bin t (stencil offset applied) along an axis of nb bins: a periodic axis wraps it into 0 .. nb-1
 * and h receives the image shift; false when a non-periodic axis has no such bin. */
__device__ __forceinline__ bool wrap_bin(int &t, int nb, int per, int &h) {
    h = 0;
    if (per) {
        h = floordiv(t, nb);
        t -= h * nb;
        return true;
    }
    return t >= 0 && t < nb;
}

/* General cell list: a warp per sorted slot (its atom is the center; a warp's neighbors in slot
 * order are atoms of the same bin, so they read the same bins).  Along the third axis the
 * stencil's bins form runs of consecutive bins with one image shift, i.e. one contiguous range of
 * sorted slots, which the lanes sweep 32 at a time. */
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
    load3(a.sorted_xd, qc, xw);
    load3(a.pos, c, xc);
    for (int k = 0; k < 9; k++) h[k] = g.h[k];
    emit_state es = {WRITE ? a.offs[c] : 0, 0, 0};
    const int r0 = g.r[0], r1 = g.r[1], r2 = g.r[2];
    for (int o0 = -r0; o0 <= r0; o0++) {
        int t0 = b0 + o0, h0;
        if (!wrap_bin(t0, nb0, g.per[0], h0)) continue;
        for (int o1 = -r1; o1 <= r1; o1++) {
            int t1 = b1 + o1, h1;
            if (!wrap_bin(t1, nb1, g.per[1], h1)) continue;
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
                for (int d = 0; d < 3; d++) sv[d] = dsub(image_comp(h, h0, h1, h2, d), xw[d]);
                for (int32_t qb = q_lo; qb < q_hi; qb += 32) {
                    const int32_t q = qb + lane;
                    bool acc = false;
                    int64_t j = 0;
                    int s0 = 0, s1 = 0, s2 = 0;
                    double r[3] = {0, 0, 0}, d2 = 0;
                    if (q < q_hi) {
                        const double dx = dadd(a.sorted_xd[3 * (int64_t)q], sv[0]);
                        const double dy = dadd(a.sorted_xd[3 * (int64_t)q + 1], sv[1]);
                        const double dz = dadd(a.sorted_xd[3 * (int64_t)q + 2], sv[2]);
                        if (dadd(dadd(dmul(dx, dx), dmul(dy, dy)), dmul(dz, dz)) < a.reach2) {
                            j = a.sorted_id[q];
                            const int4 nj = a.sorted_wrap[q];
                            s0 = h0 + nc.x - nj.x;
                            s1 = h1 + nc.y - nj.y;
                            s2 = h2 + nc.z - nj.z;
                            if (!(j == c && s0 == 0 && s1 == 0 && s2 == 0)) {
                                double xj[3];
                                load3(a.pos, j, xj);
                                pair_vector(h, xc, xj, s0, s1, s2, r, d2);
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

/* Fast cell list: the float32 pre-test of a candidate against a center (float position cf).  The
 * candidate's raw float position f is first moved by its image shift, m = f + float(h . H) (one
 * rounding per component; fast_shift_of and fast_moved give the same bits wherever they are
 * repeated), then d2f = |m - cf|^2 (fmaf chain).  fast_pretest: 2: accept without more (below
 * lo2), 1: between the thresholds or NaN (the exact double test decides), 0: reject. */
__device__ __forceinline__ float4 fast_shift_of(const double *H, int h0, int h1, int h2) {
    return make_float4(__double2float_rn(image_comp(H, h0, h1, h2, 0)),
                       __double2float_rn(image_comp(H, h0, h1, h2, 1)),
                       __double2float_rn(image_comp(H, h0, h1, h2, 2)), 0.0f);
}
__device__ __forceinline__ float4 fast_moved(float4 f, float4 sh) {
    return make_float4(__fadd_rn(f.x, sh.x), __fadd_rn(f.y, sh.y), __fadd_rn(f.z, sh.z), f.w);
}
__device__ __forceinline__ float fast_d2f(float4 m, float4 cf) {
    const float dx = __fsub_rn(m.x, cf.x), dy = __fsub_rn(m.y, cf.y), dz = __fsub_rn(m.z, cf.z);
    return __fmaf_rn(dz, dz, __fmaf_rn(dy, dy, __fmul_rn(dx, dx)));
}
__device__ __forceinline__ int fast_pretest(float4 m, float4 cf, float hi2, float lo2) {
    const float d2f = fast_d2f(m, cf);
    return d2f < lo2 ? 2 : (d2f >= hi2 ? 0 : 1);
}

/* Fast cell list: the exact double test of slot q moved by image h against center c (slot qc),
 * for candidates between the float thresholds (rare: out of line, so that the loops keep few
 * registers). */
__device__ __noinline__ bool fast_count_exact(const nbr_args &a, const double *H, int64_t qc,
                                              int32_t q, int h0, int h1, int h2, int c) {
    const int j = a.sorted_id[q];
    const int4 nc = a.sorted_wrap[qc], nj = a.sorted_wrap[q];
    const int s0 = h0 + nc.x - nj.x, s1 = h1 + nc.y - nj.y, s2 = h2 + nc.z - nj.z;
    if (j == c && (s0 | s1 | s2) == 0) return false;
    double xc[3], xj[3], r[3], d2;
    load3(a.sorted_xd, qc, xc);
    load3(a.sorted_xd, q, xj);
    pair_vector(H, xc, xj, s0, s1, s2, r, d2);
    return d2 < a.cut2;
}

/* Global bin b of system g as (b0, b1, b2) inside the system's grid. */
__device__ __forceinline__ void bin_coords_of(const geom &g, int64_t b, int &b0, int &b1,
                                              int &b2) {
    const int local = (int)(b - g.bin0); /* bins are counted in int32 */
    const int nb1 = g.nb[1], nb2 = g.nb[2];
    b2 = local % nb2;
    b1 = (local / nb2) % nb1;
    b0 = local / (nb2 * nb1);
}
/* The bin of atom c. */
__device__ __forceinline__ void bin_coords(const nbr_args &a, const geom &g, int c, int &b0,
                                           int &b1, int &b2) {
    bin_coords_of(g, a.atom_bin[c], b0, b1, b2);
}

/* Whether the search pass keeps codes for a system: stencils of one bin along every axis (27
 * listed bins, image shifts in {-1, 0, 1}: a code holds the shift's 27 values in its top bits). */
__device__ __forceinline__ bool codes_kept(const nbr_args &a, const geom &g) {
    /* (one test of the three: their loads need not wait on each other) */
    return a.fast_ids != nullptr && ((g.r[0] == 1) & (g.r[1] == 1) & (g.r[2] == 1));
}

/* Stencil bin number idx (lexicographic in (o0, o1, o2), o_k in [-r_k, r_k]) around bin b:
 * false when a non-periodic axis has no such bin; else the global bin tb and its image shift. */
__device__ __forceinline__ bool stencil_bin(const geom &g, int b0, int b1, int b2, int64_t idx,
                                            int64_t &tb, int hh[3]) {
    const int w1 = 2 * g.r[1] + 1, w2 = 2 * g.r[2] + 1;
    int o0, o1, o2;
    if (idx <= INT32_MAX) { /* (32-bit divisions: a 64-bit one is a long routine) */
        const int i = (int)idx, tq = i / w2;
        o2 = i - tq * w2 - g.r[2];
        o1 = tq % w1 - g.r[1];
        o0 = tq / w1 - g.r[0];
    } else {
        const int64_t tq = idx / w2;
        o2 = (int)(idx % w2) - g.r[2];
        o1 = (int)(tq % w1) - g.r[1];
        o0 = (int)(tq / w1) - g.r[0];
    }
    int t[3] = {b0 + o0, b1 + o1, b2 + o2};
    for (int q = 0; q < 3; q++)
        if (!wrap_bin(t[q], g.nb[q], g.per[q], hh[q])) return false;
    tb = g.bin0 + ((int64_t)t[0] * g.nb[1] + t[1]) * g.nb[2] + t[2];
    return true;
}

/* Fast cell list, search pass: the sweep of the staged candidates (s_pos: moved float positions
 * with the code (KEEP) or the slot in .w, padded to a multiple of 32; s_l: listed-bin index |
 * ghost << 7) by NC centers at once (slots k, float positions cf, ids c), a lane per candidate, so
 * that each candidate's shared-memory load and the loop's bookkeeping serve NC decisions; KEEP:
 * each center's accepted codes go to its row (slot k) in order while they fit; GHOSTS: the
 * accepted ghost neighbors are counted in ghc.  n: the centers' counts so far, updated.
 * Branch-free but for the (rare) candidates between the thresholds. */
template <bool KEEP, bool GHOSTS, int NC>
__device__ __forceinline__ void fast_sweep(const nbr_args &a, const float4 *s_pos,
                                           const unsigned char *s_l, const int4 *s_rng, int nch,
                                           const float4 (&cf)[NC], const int32_t (&k)[NC],
                                           const int (&c)[NC], int (&n)[NC], unsigned zmask,
                                           float lo2, float hi2, const double *H,
                                           long long &ghc) {
    const int lane = threadIdx.x & 31;
    const unsigned bit = 1u << lane, lt = bit - 1u;
    /* the .w of a center's own candidate: with codes, its slot with no shift (unique: the shift
     * is part of the code); without, its slot, the shift checked from the listed bin */
    int32_t own[NC];
    uint32_t row[NC]; /* KEEP: the index of each center's row of codes (fast_codes_fit) */
#pragma unroll
    for (int m = 0; m < NC; m++) {
        own[m] = KEEP ? k[m] | fast_shift_code(0, 0, 0) : k[m];
        row[m] = (uint32_t)k[m] * (uint32_t)FAST_K;
    }
    const float4 *sp = s_pos + lane;
    const unsigned char *sl = s_l + lane;
    for (int i0 = 0; i0 < nch; i0 += 32, sp += 32, sl += 32) {
        const float4 p = *sp;
        const int32_t w = __float_as_int(p.w);
        /* the decisions as ballots (acc[m]: bit lane of bm[m]) */
        unsigned bm[NC];
        bool maybe[NC], any_maybe = false;
#pragma unroll
        for (int m = 0; m < NC; m++) {
            const float d2f = fast_d2f(p, cf[m]);
            bool self = w == own[m];
            if (!KEEP && self) self = (zmask >> (*sl & 31)) & 1u;
            bm[m] = __ballot_sync(NNPOPS__FULL_MASK, d2f < lo2 && !self);
            /* (a padding candidate, code -1, is "maybe" only with NaN thresholds: skipped) */
            maybe[m] = !(d2f < lo2) && !(d2f >= hi2);
            any_maybe |= maybe[m];
        }
        if (__any_sync(NNPOPS__FULL_MASK, any_maybe)) { /* rare: the exact tests */
#pragma unroll
            for (int m = 0; m < NC; m++) {
                bool acc = bm[m] & bit;
                if (maybe[m] && w != -1) {
                    const int4 rg = s_rng[*sl & 31];
                    const int32_t q = KEEP ? w & FAST_SLOT_MASK : w;
                    acc = fast_count_exact(a, H, k[m], q, rg.y, rg.z, rg.w, c[m]);
                }
                bm[m] = __ballot_sync(NNPOPS__FULL_MASK, acc);
            }
        }
#pragma unroll
        for (int m = 0; m < NC; m++) {
            if (KEEP) {
                const int slot = n[m] + __popc(bm[m] & lt);
                if ((bm[m] & bit) && slot < FAST_K) a.fast_ids[row[m] + (uint32_t)slot] = w;
            }
            n[m] += __popc(bm[m]);
            if (GHOSTS) {
                const unsigned bg = bm[m] & __ballot_sync(NNPOPS__FULL_MASK, *sl >= 128);
                if (lane == 0) ghc += __popc(bg);
            }
        }
    }
}

/* fast_sweep with the kernel's run-time choices (codes kept, ghosts present). */
/* A center's count so far, read by every lane of its warp at the start of a chunk and written back
 * by lane 0 at its end, after a __syncwarp (which orders the write after the other lanes'
 * reads). */
__device__ __forceinline__ int fast_count_get(const nbr_args &a, int c) {
    return (int)__ldcg(a.counts + c);
}
__device__ __forceinline__ void fast_count_put(const nbr_args &a, int c, int n) {
    __stcg(a.counts + c, (long long)n);
}

template <int NC>
__device__ __forceinline__ void fast_sweep_of(bool keep, bool ghosts, const nbr_args &a,
                                              const float4 *s_pos, const unsigned char *s_l,
                                              const int4 *s_rng, int nch, const float4 (&cf)[NC],
                                              const int32_t (&k)[NC], const int (&c)[NC],
                                              int (&n)[NC], unsigned zmask, float lo2, float hi2,
                                              const double *H, long long &ghc) {
#define NNPOPS__SWEEP(K, G) \
    fast_sweep<K, G, NC>(a, s_pos, s_l, s_rng, nch, cf, k, c, n, zmask, lo2, hi2, H, ghc)
    if (keep) {
        if (ghosts) NNPOPS__SWEEP(true, true);
        else NNPOPS__SWEEP(true, false);
    } else {
        if (ghosts) NNPOPS__SWEEP(false, true);
        else NNPOPS__SWEEP(false, false);
    }
#undef NNPOPS__SWEEP
}

/* Fast cell list, search pass (see the header): a block per bin, grid-stride over the bins in
 * use; the stencil's candidates staged in shared memory (float position moved by the listed bin's
 * image shift, with the code (slot | shift << 27) or, when no codes are kept, the slot in .w;
 * listed-bin index with a ghost bit), then a warp per center of the bin, a lane per candidate: the
 * float pre-test against the center's own float position and, between the thresholds, the exact
 * test; the accepted candidates' codes go to the center's row of FAST_K (in order, while they fit;
 * rows by slot k), the count to counts[c] (also the cursor between chunks), the ghost entries to
 * the status.  The staged rows are padded to a multiple of 32 with far-away candidates (code -1),
 * so that the lanes run without bounds tests. */
__global__ void __launch_bounds__(FAST_TB, FAST_MIN_BLOCKS) fast_search_kernel(const __grid_constant__ nbr_args a) {
    __shared__ float4 s_pos[FAST_CAP];       /* moved float position, code (or slot) in .w */
    __shared__ unsigned char s_l[FAST_CAP];  /* listed-bin index | ghost (j >= n_centers) << 7 */
    __shared__ long long s_pre[33];          /* prefix of the listed bins' atom counts */
    __shared__ int4 s_rng[32];               /* first slot, image shift of each listed bin */
    __shared__ float4 s_shf[32];             /* float image shift vector of each listed bin */
    __shared__ unsigned s_zero;              /* listed bins without image shift (bit l) */
    __shared__ int32_t s_hc[32];             /* image shift of each listed bin, as a code's top */
    __shared__ float4 s_ctr[FAST_TB];        /* the bin's first atoms: float position, id in .w */
    /* (launched with FAST_TB threads: the warp count a constant) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = FAST_TB / 32;
    const int64_t nbins = *a.n_bins_used;
    const float4 *__restrict__ sf4 = a.sorted_f4;
    const int n_centers = (int)a.n_centers;
    const bool ghosts = a.n_centers < a.n_atoms; /* otherwise no entry has a ghost neighbor */
    long long ghc = 0;
    for (int64_t b = blockIdx.x; b < nbins; b += gridDim.x) {
        const int32_t q0 = a.bin_start[b], q1 = a.bin_start[b + 1];
        /* the bin's atoms (id in .w), the first FAST_TB kept for the centers' loop below */
        int has = 0;
        for (int32_t q = q0 + (int32_t)threadIdx.x; q < q1; q += (int32_t)blockDim.x) {
            const float4 f = sf4[q];
            has |= __float_as_int(f.w) < n_centers;
            if (q - q0 < FAST_TB) s_ctr[q - q0] = f;
        }
        if (!__syncthreads_or(has)) continue; /* no center here (block-uniform) */
        const geom &g = a.g[a.n_systems == 1 ? 0 : a.sorted_wrap[q0].w];
        int bb0, bb1, bb2;
        bin_coords_of(g, b, bb0, bb1, bb2);
        const int64_t R = (int64_t)(2 * g.r[0] + 1) * (2 * g.r[1] + 1) * (2 * g.r[2] + 1);
        const float hi2 = g.hi2, lo2 = g.lo2;
        const double *H = g.h;
        const bool keep = codes_kept(a, g);
        for (int64_t gr = 0; gr < R; gr += 32) {
            if (warp == 0) { /* list up to 32 stencil bins */
                const int64_t idx = gr + lane;
                int len = 0, hh[3] = {0, 0, 0};
                int64_t tb = 0;
                int4 rng = make_int4(0, 0, 0, 0);
                bool zero = false;
                if (idx < R && stencil_bin(g, bb0, bb1, bb2, idx, tb, hh)) {
                    const int32_t qlo = a.bin_start[tb];
                    len = a.bin_start[tb + 1] - qlo;
                    rng = make_int4(qlo, hh[0], hh[1], hh[2]);
                    zero = (hh[0] | hh[1] | hh[2]) == 0;
                }
                const long long incl = warp_incl_scan(len);
                const unsigned zm = __ballot_sync(NNPOPS__FULL_MASK, zero);
                s_pre[lane + 1] = incl;
                if (lane == 0) {
                    s_pre[0] = 0;
                    s_zero = zm;
                }
                s_rng[lane] = rng;
                s_hc[lane] = fast_shift_code(hh[0], hh[1], hh[2]);
                s_shf[lane] = fast_shift_of(H, hh[0], hh[1], hh[2]);
            }
            __syncthreads();
            const long long total = s_pre[32];
            const unsigned zmask = s_zero;
            /* at least one chunk, so that every center's count is initialized in group 0 */
            for (long long co = 0; co == 0 || co < total; co += FAST_CAP) {
                const int nch = (int)min((long long)FAST_CAP, total - co);
                const int ncp = (nch + 31) & ~31; /* FAST_CAP is a multiple of 32 */
                for (int i = threadIdx.x; i < ncp; i += blockDim.x) {
                    if (i >= nch) { /* padding: rejected by every center, never its own */
                        s_pos[i] = make_float4(3.0e38f, 3.0e38f, 3.0e38f, __int_as_float(-1));
                        s_l[i] = 0;
                        continue;
                    }
                    const long long idx = co + i;
                    int l = 0;
                    for (int step = 16; step; step >>= 1)
                        if (s_pre[l + step] <= idx) l += step;
                    const int32_t q = s_rng[l].x + (int32_t)(idx - s_pre[l]);
                    const float4 f = sf4[q];
                    const float4 m = fast_moved(f, s_shf[l]);
                    s_pos[i] = make_float4(m.x, m.y, m.z, __int_as_float(keep ? q | s_hc[l] : q));
                    s_l[i] = (unsigned char)(l | (__float_as_int(f.w) >= n_centers ? 128 : 0));
                }
                __syncthreads();
                const bool first = gr == 0 && co == 0;
                /* the warp's centers (slots q0 + warp, + nw, ...) two at a time */
                for (int32_t k0 = q0 + warp; k0 < q1; k0 += 2 * nw) {
                    const int32_t k1 = k0 + nw;
                    const float4 cf0 = k0 - q0 < FAST_TB ? s_ctr[k0 - q0] : sf4[k0];
                    float4 cf1 = cf0;
                    if (k1 < q1) cf1 = k1 - q0 < FAST_TB ? s_ctr[k1 - q0] : sf4[k1];
                    const int c0 = __float_as_int(cf0.w), c1 = __float_as_int(cf1.w);
                    const bool has0 = c0 < n_centers, has1 = k1 < q1 && c1 < n_centers;
                    if (has0 && has1) { /* warp-uniform */
                        const float4 cf[2] = {cf0, cf1};
                        const int32_t kk[2] = {k0, k1};
                        const int cc[2] = {c0, c1};
                        int n[2] = {first ? 0 : fast_count_get(a, c0),
                                    first ? 0 : fast_count_get(a, c1)};
                        fast_sweep_of<2>(keep, ghosts, a, s_pos, s_l, s_rng, nch, cf, kk, cc, n,
                                         zmask, lo2, hi2, H, ghc);
                        __syncwarp(); /* (every lane's read of the counts before the write) */
                        if (lane == 0) {
                            fast_count_put(a, c0, n[0]);
                            fast_count_put(a, c1, n[1]);
                        }
                    } else if (has0 || has1) {
                        const float4 cf[1] = {has0 ? cf0 : cf1};
                        const int32_t kk[1] = {has0 ? k0 : k1};
                        const int cc[1] = {has0 ? c0 : c1};
                        int n[1] = {first ? 0 : fast_count_get(a, cc[0])};
                        fast_sweep_of<1>(keep, ghosts, a, s_pos, s_l, s_rng, nch, cf, kk, cc, n,
                                         zmask, lo2, hi2, H, ghc);
                        __syncwarp();
                        if (lane == 0) fast_count_put(a, cc[0], n[0]);
                    }
                }
                __syncthreads();
            }
        }
    }
    count_epilogue(a, ghc);
}

/* Fast cell list, emit pass for a center whose candidates were not all kept (more than FAST_K,
 * or more than 32 listed bins, or too many atoms for the codes): the warp searches the stencil
 * again from global memory, bin by bin in the search pass's order, with the same decisions, and
 * writes the entries from e on. */
__device__ __noinline__ void fast_rescan(const nbr_args &a, const geom &g, int64_t k, int c, int4 nc,
                                         int64_t e) {
    const int lane = threadIdx.x & 31;
    double xc[3];
    load3(a.sorted_xd, k, xc);
    const float4 *__restrict__ sf4 = a.sorted_f4;
    const float4 cf = sf4[k];
    const float hi2 = g.hi2, lo2 = g.lo2;
    const double *H = g.h;
    int b0, b1, b2;
    bin_coords(a, g, c, b0, b1, b2);
    const int64_t R = (int64_t)(2 * g.r[0] + 1) * (2 * g.r[1] + 1) * (2 * g.r[2] + 1);
    int64_t unused_count = 0, unused_ghosts = 0;
    brute_rec no_rec = {nullptr, 0, 0};
    for (int64_t idx = 0; idx < R; idx++) {
        int64_t tb;
        int hh[3];
        if (!stencil_bin(g, b0, b1, b2, idx, tb, hh)) continue;
        const int32_t q_lo = a.bin_start[tb], q_hi = a.bin_start[tb + 1];
        const float4 sh = fast_shift_of(H, hh[0], hh[1], hh[2]);
        for (int32_t qb = q_lo; qb < q_hi; qb += 32) {
            const int32_t q = qb + lane;
            bool acc = false;
            int j = 0, s0 = 0, s1 = 0, s2 = 0;
            double r[3] = {0, 0, 0}, d2 = 0;
            if (q < q_hi) {
                const float4 f = sf4[q];
                const int pt = fast_pretest(fast_moved(f, sh), cf, hi2, lo2);
                if (pt) {
                    j = __float_as_int(f.w);
                    const int4 nj = a.sorted_wrap[q];
                    s0 = hh[0] + nc.x - nj.x;
                    s1 = hh[1] + nc.y - nj.y;
                    s2 = hh[2] + nc.z - nj.z;
                    if (!(j == c && (s0 | s1 | s2) == 0)) {
                        double xj[3];
                        load3(a.sorted_xd, q, xj);
                        pair_vector(H, xc, xj, s0, s1, s2, r, d2);
                        acc = pt == 2 || d2 < a.cut2; /* the search pass's decision */
                    }
                }
            }
            brute_emit<true>(a, acc, c, j, s0, s1, s2, r, d2, e, unused_count, unused_ghosts,
                             no_rec);
        }
    }
}

/* Fast cell list, emit pass: a candidate's data (code's slot kept in range: a row's codes past the
 * count may be stale, and their data is loaded before the count is known but never used). */
struct emit_cand {
    int j;
    int4 nj;
    double x[3];
};
__device__ __forceinline__ emit_cand emit_load(const nbr_args &a, int32_t code) {
    int32_t q = code & FAST_SLOT_MASK;
    if (q >= a.n_atoms) q = 0;
    emit_cand d;
    d.j = a.sorted_id[q];
    d.nj = a.sorted_wrap[q];
    load3(a.sorted_xd, q, d.x);
    return d;
}
/* One round of 32 kept codes of center c (slot data nc, position xc): entries e + e0 + lane. */
__device__ __forceinline__ void emit_round(const nbr_args &a, const double *H, const double xc[3],
                                           int4 nc, int c, int n, int64_t e, int e0, int32_t code,
                                           const emit_cand &d) {
    const int idx = e0 + (threadIdx.x & 31);
    /* the shift's index hc = 9 (h0 + 1) + 3 (h1 + 1) + (h2 + 1) < 32: hc / 3 = (11 hc) >> 5 and
     * hc / 9 = (57 hc) >> 9 there (exact for 0 <= hc < 32; fewer instructions than divisions) */
    const int hc = (int)((uint32_t)code >> FAST_SLOT_BITS);
    const int t3 = (hc * 11) >> 5, t9 = (hc * 57) >> 9;
    const int h0 = t9 - 1, h1 = t3 - 3 * t9 - 1, h2 = hc - 3 * t3 - 1;
    double r[3] = {0, 0, 0}, d2 = 0;
    if (idx < n) {
        const int s0 = h0 + nc.x - d.nj.x, s1 = h1 + nc.y - d.nj.y, s2 = h2 + nc.z - d.nj.z;
        pair_vector(H, xc, d.x, s0, s1, s2, r, d2);
        if (e + idx < a.capacity) write_entry(a, e + idx, c, d.j, s0, s1, s2, r, d2, false);
        if (d2 < a.min_d2) record_close(a, c, d.j, d2);
    }
    store_vecs(a, e + e0, min(32, n - e0), r);
}

/* Fast cell list, emit pass: a warp per slot (centers in bin order, so that neighboring warps read
 * the same candidates), a lane per kept code: the image shift from the code, the candidate's
 * wrap count, id and original position, the vector in double (the CPU expression) and the entry
 * at offs[c] + its rank.  The first EMIT_EARLY rounds' codes (rows by slot) are read with the
 * slot's center id, and their candidates' data right after, before the center's count and offset
 * arrive: the warp's loads wait on two round trips rather than one per dependent step.  The
 * entries come in the search pass's order; centers whose codes were not all kept search again
 * (fast_rescan). */
const int EMIT_EARLY = 2; /* rounds, at most FAST_K / 32 */
__global__ void __launch_bounds__(FAST_EMIT_TB, FAST_EMIT_MIN_BLOCKS *(TB / FAST_EMIT_TB))
    fast_emit_kernel(const __grid_constant__ nbr_args a) {
    const int lane = threadIdx.x & 31;
    const int64_t k = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int n_centers = (int)a.n_centers;
    /* the slot's atom and the slots in use read side by side (sorted_id has n_atoms entries;
     * one past the slots in use may be stale and is not used) */
    const int64_t n_slots = a.bin_start[a.n_bins_bound];
    const int cid = k < a.n_atoms ? a.sorted_id[k] : n_centers;
    const int c = k < n_slots ? cid : n_centers;
    /* rows exist for every slot below n_atoms: the early rounds need not wait for c */
    const int32_t *ids = a.fast_ids && k < a.n_atoms ? a.fast_ids + k * FAST_K : nullptr;
    int32_t code[EMIT_EARLY > 0 ? EMIT_EARLY : 1] = {};
    emit_cand d[EMIT_EARLY > 0 ? EMIT_EARLY : 1];
    if (ids) {
#pragma unroll
        for (int m = 0; m < EMIT_EARLY; m++) code[m] = ids[32 * m + lane];
#pragma unroll
        for (int m = 0; m < EMIT_EARLY; m++) d[m] = emit_load(a, code[m]);
    }
    /* the slot's own data, with the same round trip */
    int4 nc = make_int4(0, 0, 0, 0);
    double xc[3] = {0, 0, 0};
    if (k < a.n_atoms) {
        nc = a.sorted_wrap[k];
        load3(a.sorted_xd, k, xc);
    }
    if (c < n_centers) {
        const geom &g = a.g[a.n_systems == 1 ? 0 : nc.w];
        const int n = (int)a.counts[c];
        const int64_t e = a.offs[c];
        if (codes_kept(a, g) && n <= FAST_K) {
            const double *H = g.h;
#pragma unroll
            for (int m = 0; m < EMIT_EARLY; m++)
                if (32 * m < n) emit_round(a, H, xc, nc, c, n, e, 32 * m, code[m], d[m]);
            for (int e0 = 32 * EMIT_EARLY; e0 < n; e0 += 32) {
                const int idx = e0 + lane;
                const int32_t cd = idx < n ? ids[idx] : 0;
                emit_round(a, H, xc, nc, c, n, e, e0, cd, emit_load(a, cd));
            }
        } else {
            fast_rescan(a, g, k, c, nc, e);
        }
    }
    write_epilogue(a);
}

/* ---- work space layout ---- */
struct nbr_layout {
    size_t counts, offs, scan_tmp, scan_tmp_bytes, g, bbox, atom_bin, atom_sys, atom_rank,
        atom_wrap, bin_count, bin_start, sorted_id, sorted_wrap, sorted_xd, sorted_f4, n_bins_used,
        fast_ids, op_slots, total;
    int64_t n_items, n_bins_bound;
};

bool is_cell(int32_t alg) { return alg == NNPOPS__NBR_CELL || alg == NNPOPS__NBR_CELL_FAST; }

/* A plan's algorithm as the launchers use it (unknown values: the general cell list) and slices. */
void sanitize(nnpops__nbr_plan &p) {
    if (p.algorithm != NNPOPS__NBR_BRUTE && p.algorithm != NNPOPS__NBR_SMALL &&
        p.algorithm != NNPOPS__NBR_CELL_FAST && p.algorithm != NNPOPS__NBR_ONEPASS)
        p.algorithm = NNPOPS__NBR_CELL;
    if (p.slices < 1) p.slices = 1;
    if (p.slices > 32) p.slices = 32;
}

/* The layout of a (sanitized) plan; it also serves the algorithm the launcher may fall back to
 * (small and one pass -> brute force, fast -> general cell list). */
nbr_layout layout_of(int64_t n_atoms, int64_t n_systems, int64_t n_centers,
                     const nnpops__nbr_plan *plan) {
    nbr_layout L;
    memset(&L, 0, sizeof L);
    const bool cell = is_cell(plan->algorithm);
    const int slices = cell ? 1 : plan->slices;
    L.n_items = n_centers * slices;
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
        L.bbox = take(sizeof(unsigned long long) * 8 * (size_t)n_systems);
        L.atom_bin = take(sizeof(int32_t) * (size_t)n_atoms);
        L.atom_sys = take(sizeof(int32_t) * (size_t)n_atoms);
        L.atom_rank = take(sizeof(int32_t) * (size_t)n_atoms);
        L.atom_wrap = take(sizeof(int4) * (size_t)n_atoms);
        L.bin_count = take(sizeof(int32_t) * (size_t)(L.n_bins_bound + 1));
        L.bin_start = take(sizeof(int32_t) * (size_t)(L.n_bins_bound + 1));
        L.sorted_id = take(sizeof(int32_t) * (size_t)n_atoms);
        L.sorted_wrap = take(sizeof(int4) * (size_t)n_atoms);
        L.sorted_xd = take(sizeof(double) * 3 * (size_t)n_atoms);
        L.sorted_f4 = take(sizeof(float4) * (size_t)n_atoms);
        L.n_bins_used = take(sizeof(int64_t));
        if (plan->algorithm == NNPOPS__NBR_CELL_FAST && fast_codes_fit(n_atoms))
            L.fast_ids = take(sizeof(int32_t) * (size_t)FAST_K * (size_t)n_atoms);
    }
    if (plan->algorithm == NNPOPS__NBR_ONEPASS) {
        int64_t cpb, blocks;
        onepass_shape(n_centers, slices, cpb, blocks);
        L.op_slots = take(sizeof(unsigned long long) * 2 * (size_t)blocks);
    }
    L.total = cur;
    return L;
}

nnpops_status run_search(const nnpops__nbr_in *in, int64_t n_centers, int half,
                         double min_distance, const nnpops__nbr_plan *plan_in, int64_t capacity,
                         int32_t *pairs, int32_t *shifts, double *vec, double *dist,
                         int64_t *start, nnpops__dev_status *status, void *work,
                         size_t work_bytes, void *stream, const nnpops__stage_job *stage) {
    /* the staging kernel first, unless the one-block path does the job */
    const auto stage_first = [&]() -> nnpops_status {
        if (!stage || (!stage->copy_bytes && !stage->zero_bytes)) return NNPOPS_OK;
        return nnpops__stage_cuda(stage->dst, stage->src, stage->copy_bytes, stage->zdst,
                                  stage->zero_bytes, stream);
    };
    if (in->n_atoms <= 0 || n_centers <= 0) {
        NNPOPS__TRY(stage_first());
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
    sanitize(plan);
    const nbr_layout L = layout_of(in->n_atoms, in->n_systems, n_centers, &plan);
    if (work_bytes < L.total)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "neighbor search: work space of %zu bytes, %zu needed", work_bytes,
                            L.total);
    if (is_cell(plan.algorithm) && L.n_bins_bound > INT32_MAX - 1)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "neighbor search: %lld atoms is too many for the cell list",
                            (long long)in->n_atoms);
    /* the algorithm that runs: the small and fast paths serve center mode only; the small path
     * holds at most SMALL_MAX centers and atoms */
    int32_t alg = plan.algorithm;
    if (half && (alg == NNPOPS__NBR_SMALL || alg == NNPOPS__NBR_ONEPASS)) alg = NNPOPS__NBR_BRUTE;
    if (half && alg == NNPOPS__NBR_CELL_FAST) alg = NNPOPS__NBR_CELL;
    if (alg == NNPOPS__NBR_SMALL && (in->n_atoms > SMALL_MAX || n_centers > SMALL_MAX))
        alg = NNPOPS__NBR_BRUTE;
    const bool own_stage = alg == NNPOPS__NBR_SMALL && stage &&
                           stage->copy_bytes + stage->zero_bytes <= SMALL_STAGE_MAX;
    if (!own_stage) NNPOPS__TRY(stage_first());
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
    a.slices = alg == NNPOPS__NBR_BRUTE || alg == NNPOPS__NBR_ONEPASS ? plan.slices : 1;
    a.fast = alg == NNPOPS__NBR_CELL_FAST;
    a.n_items = n_centers * a.slices;
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
    /* center mode of the small, brute-force and fast paths: ghost-entry n_half, and the count
     * kernel's last block scans when the counts are few */
    const bool newflow = !half && alg != NNPOPS__NBR_CELL;
    if (newflow) {
        a.ghost_nhalf = 1;
        a.lb_scan = (alg == NNPOPS__NBR_SMALL || alg == NNPOPS__NBR_CELL_FAST) &&
                    a.n_items + 1 <= LB_SCAN_MAX;
        a.prefix_in_write = alg == NNPOPS__NBR_BRUTE && a.n_items <= BRUTE_PREFIX_MAX;
        a.finish_in_write = !a.lb_scan && !a.prefix_in_write;
        if (start && a.slices == 1) a.offs = start; /* the scan writes start[] itself */
    }
    if (alg == NNPOPS__NBR_SMALL) {
        if (own_stage) a.stage = *stage;
        return launch_chain(small_kernel, dim3(1), dim3(SMALL_TB), 0, st,
                          "neighbor search (one block)", (nbr_args)a);
    }
    if (alg == NNPOPS__NBR_ONEPASS) {
        int64_t cpb, blocks;
        onepass_shape(a.n_centers, a.slices, cpb, blocks);
        a.op_cpb = cpb;
        a.op_slots = (unsigned long long *)(w + L.op_slots);
        return launch_chain(onepass_kernel, dim3((unsigned)blocks), dim3(OP_TB), 0, st,
                            "neighbor search (one pass)", (nbr_args)a);
    }
    if (alg == NNPOPS__NBR_BRUTE) {
        const unsigned grid = grid_for(a.n_atoms * a.slices * 32, TB);
        brute_kernel<false><<<grid, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (brute force, count)");
        if (!a.lb_scan && !a.prefix_in_write)
            NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, a.counts, a.offs,
                                                            (int64_t)(a.n_items + 1), st));
        brute_kernel<true><<<grid, TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (brute force, write)");
        if (!newflow) {
            finish_kernel<<<grid_for(a.n_centers + 1, TB), TB, 0, st>>>(a);
            NNPOPS__LAUNCH_CHECK("neighbor search (totals)");
        }
        return NNPOPS_OK;
    }
    /* cell lists */
    a.g = (geom *)(w + L.g);
    a.bbox = (unsigned long long *)(w + L.bbox);
    a.atom_bin = (int32_t *)(w + L.atom_bin);
    a.atom_sys = (int32_t *)(w + L.atom_sys);
    a.atom_rank = (int32_t *)(w + L.atom_rank);
    a.atom_wrap = (int4 *)(w + L.atom_wrap);
    a.bin_count = (int32_t *)(w + L.bin_count);
    a.bin_start = (int32_t *)(w + L.bin_start);
    a.sorted_id = (int32_t *)(w + L.sorted_id);
    a.sorted_wrap = (int4 *)(w + L.sorted_wrap);
    a.sorted_xd = (double *)(w + L.sorted_xd);
    a.sorted_f4 = (float4 *)(w + L.sorted_f4);
    a.n_bins_used = (int64_t *)(w + L.n_bins_used);
    NNPOPS__CUDA_CALL(cudaMemsetAsync(a.bbox, 0xff, sizeof(unsigned long long) * 8 *
                                                        (size_t)a.n_systems, st));
    const unsigned ga = grid_for(a.n_atoms, TB);
    /* also zeroes the bin counters and the counts (centers of systems with a bad cell are never
     * visited: their counts stay 0) */
    bbox_kernel<<<ga, TB, 0, st>>>(a);
    NNPOPS__LAUNCH_CHECK("neighbor search (bounding boxes)");
    geom_kernel<<<1, 256, 0, st>>>(a);
    NNPOPS__LAUNCH_CHECK("neighbor search (cell geometry)");
    bin_kernel<<<ga, TB, 0, st>>>(a);
    NNPOPS__LAUNCH_CHECK("neighbor search (binning)");
    if (L.n_bins_bound + 1 <= BIN_SCAN_MAX) {
        bin_scan_kernel<<<1, BIN_SCAN_TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (bin starts)");
    } else {
        NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, a.bin_count,
                                                        a.bin_start,
                                                        (int64_t)(L.n_bins_bound + 1), st));
    }
    place_kernel<<<ga, TB, 0, st>>>(a);
    NNPOPS__LAUNCH_CHECK("neighbor search (placing)");
    if (plan.deterministic) {
        bin_sort_kernel<<<grid_for(L.n_bins_bound, TB), TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (bin order)");
    }
    scan_bytes = L.scan_tmp_bytes;
    if (a.fast) {
        if (fast_codes_fit(a.n_atoms)) a.fast_ids = (int32_t *)(w + L.fast_ids);
        int64_t blocks = (a.n_atoms + FAST_ATOMS_PER_BLOCK - 1) / FAST_ATOMS_PER_BLOCK;
        if (blocks > L.n_bins_bound) blocks = L.n_bins_bound;
        fast_search_kernel<<<grid_for(blocks, 1), FAST_TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (fast cell list, search)");
        if (!a.lb_scan)
            NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, a.counts, a.offs,
                                                            (int64_t)(a.n_items + 1), st));
        fast_emit_kernel<<<grid_for(a.n_atoms * 32, FAST_EMIT_TB), FAST_EMIT_TB, 0, st>>>(a);
        NNPOPS__LAUNCH_CHECK("neighbor search (fast cell list, emit)");
        return NNPOPS_OK;
    }
    const unsigned gw = grid_for(a.n_atoms * 32, TB);
    cell_kernel<false><<<gw, TB, 0, st>>>(a);
    NNPOPS__LAUNCH_CHECK("neighbor search (cell list, count)");
    NNPOPS__CUDA_CALL(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, a.counts, a.offs,
                                                    (int64_t)(a.n_items + 1), st));
    cell_kernel<true><<<gw, TB, 0, st>>>(a);
    NNPOPS__LAUNCH_CHECK("neighbor search (cell list, write)");
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

/* Plan (host copies of the geometry; the choice never depends on positions, so a plan stays valid
 * while atoms move and can key a CUDA graph).  Per system s with n_s atoms: the images of the
 * brute force nimg_s = prod over periodic axes of (2 ceil(cutoff / w_k) + 1).  In this order:
 *   small      when all systems together hold at most SMALL_MAX (1024) atoms and
 *              sum_s n_s^2 nimg_s (x3 for systems with images: their tests add the shift term)
 *              <= 2048;
 *   brute      when the largest n_s nimg_s is at most 8192 and the largest n_s^2 nimg_s (x3 with
 *              images; in a wide cell n_s^2 x PLAN_WIDE_FACTOR) at most 6e6, as the one pass (NNPOPS__NBR_ONEPASS: the same tests and
 *              items in one launch instead of four; the half list, which it does not serve, runs
 *              as the brute force);
 *   cell       (general) when some periodic axis is thinner than reach (1 + 1e-6) (stencils of
 *              several bins; the margin keeps the device, whose widths may differ by an ulp, on
 *              stencils of at most 2 bins in the fast kernel should it be forced there);
 *   cell fast  otherwise (every stencil is +-1 bin).
 * slices (brute force): ceil(largest n_s nimg_s / 256), or ceil(2048 / atoms) when that is more
 * (small systems: parallelism over latency), at most ceil(largest n_s / 32), 1..32: a warp sweeps
 * about 256 candidates (at least 32 atoms, all their images) for a center: on open clusters of
 * about 1,000-2,000 atoms such slices take about half the time of one slice per 32 atoms, while on
 * small ones (100-250 atoms) one slice per 32 atoms, which the 2048 / atoms term gives, is faster.
 * The thresholds come from timing the paths under CUDA graph replay on random open clusters of
 * about 40-50 neighbors per atom (bench_gpu --nbr-only N --nbr-open): the one-block path is the
 * fastest for the smallest clusters, the brute force (about 10 us) up to a few hundred atoms, the
 * fast cell list (about ten launches, near 0.1 ms at every size up to ~16,000 atoms) beyond; on a
 * periodic box of 256 atoms (27 images) the brute force is about five times faster than the
 * cell list. */
extern "C" void nnpops__nbr_cuda_plan(int64_t n_systems, const int64_t *sys_start,
                                      const double *cells, const uint8_t *pbc, double cutoff,
                                      int32_t force, nnpops__nbr_plan *plan) {
    const double reach = cutoff * (1.0 + REACH_REL) + REACH_ABS;
    double max_cand = 0, max_n = 0, total_n = 0, cost = 0, max_cost = 0;
    int thin = 0;
    for (int64_t s = 0; s < n_systems; s++) {
        const double n_s = (double)(sys_start[s + 1] - sys_start[s]);
        if (n_s > max_n) max_n = n_s;
        total_n += n_s;
        double nimg = 1;
        int wide = 0;
        if (cells && pbc && (pbc[3 * s] || pbc[3 * s + 1] || pbc[3 * s + 2])) {
            wide = 1;
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
                if (!(wk >= reach * (1.0 + 1e-6))) thin = 1;
                if (!(wk >= 2.0 * reach * (1.0 + WIDE_MARGIN))) wide = 0;
            }
        }
        /* a wide cell (wide_cell): one image per candidate, found without the image loop */
        const double cand = wide ? n_s : n_s * nimg;
        if (cand > max_cand) max_cand = cand;
        const double c_s = n_s * cand * (wide ? PLAN_WIDE_FACTOR : (nimg > 1 ? 3.0 : 1.0));
        cost += c_s;
        if (c_s > max_cost) max_cost = c_s;
    }
    if (total_n <= SMALL_MAX && cost <= (double)PLAN_SMALL_MAX_COST)
        plan->algorithm = NNPOPS__NBR_SMALL;
    else if (max_cand <= PLAN_BRUTE_MAX_CAND && max_cost <= PLAN_BRUTE_MAX_COST)
        plan->algorithm = NNPOPS__NBR_BRUTE;
    else
        plan->algorithm = thin ? NNPOPS__NBR_CELL : NNPOPS__NBR_CELL_FAST;
    /* the brute force's choice is served in one launch (the launcher runs the half list, which the
     * one pass does not serve, as the brute force) */
    if (plan->algorithm == NNPOPS__NBR_BRUTE) plan->algorithm = NNPOPS__NBR_ONEPASS;
    if (force == NNPOPS__NBR_BRUTE || force == NNPOPS__NBR_CELL || force == NNPOPS__NBR_SMALL ||
        force == NNPOPS__NBR_CELL_FAST || force == NNPOPS__NBR_ONEPASS)
        plan->algorithm = force;
    int sl = (int)ceil(max_cand / PLAN_BRUTE_CAND_PER_WARP);
    const int sl_par = total_n > 0 ? (int)ceil(PLAN_BRUTE_MIN_WARPS / total_n) : 1;
    if (sl < sl_par) sl = sl_par;
    const int sl_atoms = (int)ceil(max_n / 32.0);
    if (sl > sl_atoms) sl = sl_atoms;
    plan->slices = sl < 1 ? 1 : (sl > 32 ? 32 : sl);
    plan->deterministic = 0;
}

extern "C" const char *nnpops__nbr_cuda_algorithm_name(int32_t algorithm) {
    switch (algorithm) {
    case NNPOPS__NBR_BRUTE: return "brute";
    case NNPOPS__NBR_CELL: return "cell";
    case NNPOPS__NBR_SMALL: return "small";
    case NNPOPS__NBR_CELL_FAST: return "cell-fast";
    case NNPOPS__NBR_ONEPASS: return "onepass";
    default: return "auto";
    }
}

extern "C" size_t nnpops__nbr_cuda_work_bytes(int64_t n_atoms, int64_t n_systems, int64_t n_centers,
                                              const nnpops__nbr_plan *plan) {
    nnpops__nbr_plan p = *plan;
    sanitize(p);
    return layout_of(n_atoms, n_systems, n_centers, &p).total;
}

extern "C" nnpops_status nnpops__center_neighbors_staged_cuda(
    const nnpops__nbr_in *in, int64_t n_centers, double min_distance, const nnpops__nbr_plan *plan,
    nnpops__center_out *out, void *work, size_t work_bytes, const nnpops__stage_job *stage,
    void *stream) {
    nnpops__nbr_in cin = *in;
    cin.skip_from = n_centers;
    return run_search(&cin, n_centers, 0, min_distance, plan, out->capacity, out->pairs,
                      out->shifts, out->vec, out->dist, out->start, out->status, work, work_bytes,
                      stream, stage);
}

extern "C" nnpops_status nnpops__center_neighbors_cuda(const nnpops__nbr_in *in, int64_t n_centers,
                                                       double min_distance,
                                                       const nnpops__nbr_plan *plan,
                                                       nnpops__center_out *out, void *work,
                                                       size_t work_bytes, void *stream) {
    return nnpops__center_neighbors_staged_cuda(in, n_centers, min_distance, plan, out, work,
                                                work_bytes, NULL, stream);
}

extern "C" nnpops_status nnpops__neighbors_cuda(const nnpops__nbr_in *in,
                                                const nnpops__nbr_plan *plan, nnpops__nbr_out *out,
                                                nnpops__dev_status *status, void *work,
                                                size_t work_bytes, void *stream) {
    return run_search(in, in->n_atoms, 1, 0.0, plan, out->capacity, out->pairs, out->shifts,
                      out->vec, out->dist, NULL, status, work, work_bytes, stream, NULL);
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
