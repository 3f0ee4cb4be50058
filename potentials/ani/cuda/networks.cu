/*
 * networks.cu - ANI's ensemble network ops on the GPU: the output layer of an ensemble (each
 * member's output, the ensemble mean plus self energy per atom, member energies and the seed of
 * the backward pass), its grouped launch over the small species, and the small-n grouped GEMM
 * with its fused epilogues; twins of potentials/ani/cpu/networks.c (potentials/ani/ani_ops.h).
 *
 * The output layer (ani_output) runs a block per (32 columns, member) whose 8 warps split the
 * width (partial sums in shared memory), then (need_grad) overwrite the last hidden activations
 * with the seed of the backward pass; each member adds its output (over the ensemble size, for the
 * mean) to the atom energy with an atomicAdd in double, so on the GPU atom_energy must be zero on
 * entry (the CPU twin writes it).  With args->deterministic (option deterministic) the output
 * layer runs ani_output_kernel instead: one thread per column sums the members in order and
 * writes the atom energy (no atomics).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

extern "C" {
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani_ops.h"
}
#include "potentials/ani/cuda/nets.cuh"

using namespace nnpops_cuda;

namespace {

/* Bodies of the output-layer kernels, shared with the grouped launch of the small species
 * (nnpops__ani_output_group_cuda_f32): bx and m stand for blockIdx.x and blockIdx.y. */
template <typename R>
__device__ __forceinline__ void ani_output_body(const nnpops__ani_output_args &g, const R *w,
                                                const R *b, R *A, int64_t bx) {
    const int64_t r = bx * blockDim.x + threadIdx.x;
    if (r >= g.n) return;
    const int32_t c = g.centers[r];
    if (c < 0) return;
    const R inv = (R)(1.0 / g.alpha);
    double esum = 0.0, chosen = 0.0;
    for (int32_t m = 0; m < g.members; m++) {
        const int32_t gm = g.member_offset + m;
        R *a = A + (int64_t)m * g.width * g.lda + r;
        const R *wm = w + (int64_t)m * g.width;
        R y = b[m];
        for (int32_t k = 0; k < g.width; k++) y += wm[k] * a[(int64_t)k * g.lda];
        esum += (double)y;
        if (gm == g.member) chosen = (double)y;
        if (g.member_energy) g.member_energy[(int64_t)c * g.ensemble + gm] = (double)y + g.self_energy;
        if (g.need_grad) {
            const R seed = output_seed<R>(g, gm);
            for (int32_t k = 0; k < g.width; k++) {
                const R x = a[(int64_t)k * g.lda];
                const R da = wm[k] * seed;
                a[(int64_t)k * g.lda] = x > 0 ? da : da * (x * inv + (R)1);
            }
        }
    }
    const double e = g.member < 0 ? esum / (double)g.ensemble : chosen;
    g.atom_energy[c] = e + g.self_energy;
}

/* The output layer, a block per (32 columns, member): the 8 warps of a block split the width,
 * each lane one column (coalesced rows); partial sums meet in shared memory; the first warp adds
 * the member's output (divided by the ensemble size for the mean) to the atom's energy with an
 * atomicAdd (atom_energy must be zero on entry; the member holding the self energy adds it), then
 * every warp overwrites its part of the activations with the backward seed. */
template <typename R>
__device__ __forceinline__ void ani_output_split_body(const nnpops__ani_output_args &g,
                                                      const R *__restrict__ w,
                                                      const R *__restrict__ b,
                                                      R *__restrict__ A, int64_t bx, int32_t m) {
    __shared__ R part[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int32_t gm = g.member_offset + m;
    const int64_t r = bx * 32 + tx;
    const int32_t c = r < g.n ? g.centers[r] : -1;
    const int32_t chunk = (g.width + 7) / 8;
    const int32_t k0 = ty * chunk, k1 = min(g.width, k0 + chunk);
    R *a = A + (int64_t)m * g.width * g.lda + r;
    const R *wm = w + (int64_t)m * g.width;
    R p = 0;
    if (c >= 0) {
#pragma unroll 4
        for (int32_t k = k0; k < k1; k++) p += wm[k] * a[(int64_t)k * g.lda];
    }
    part[ty][tx] = p;
    __syncthreads();
    if (ty == 0 && c >= 0) {
        R y = b[m];
        for (int t = 0; t < 8; t++) y += part[t][tx];
        output_add_energy(g, c, gm, (double)y);
    }
    if (!g.need_grad || c < 0) return;
    const R inv = (R)(1.0 / g.alpha);
    const R seed = output_seed<R>(g, gm);
#pragma unroll 4
    for (int32_t k = k0; k < k1; k++) {
        const R x = a[(int64_t)k * g.lda];
        const R da = wm[k] * seed;
        a[(int64_t)k * g.lda] = x > 0 ? da : da * (x * inv + (R)1);
    }
}

template <typename R>
__global__ void ani_output_kernel(const nnpops__ani_output_args g, const R *w, const R *b, R *A) {
    ani_output_body<R>(g, w, b, A, blockIdx.x);
}

template <typename R>
__global__ void ani_output_split_kernel(const nnpops__ani_output_args g, const R *__restrict__ w,
                                        const R *__restrict__ b, R *__restrict__ A) {
    ani_output_split_body<R>(g, w, b, A, blockIdx.x, (int32_t)blockIdx.y);
}

} /* namespace */

#define NNPOPS__ANI_OUTPUT_TWIN(SUF, R)                                                            \
    extern "C" nnpops_status nnpops__ani_output_cuda_##SUF(const nnpops__ani_output_args *args,    \
                                                           const R *w, const R *b, R *A,           \
                                                           void *stream) {                         \
        if (args->n <= 0) return NNPOPS_OK;                                                        \
        if (args->members <= 65535 && !args->deterministic) {                                      \
            ani_output_split_kernel<R><<<dim3(grid_for(args->n, 32), (unsigned)args->members),     \
                                         dim3(32, 8), 0, as_stream(stream)>>>(*args, w, b, A);     \
        } else {                                                                                   \
            ani_output_kernel<R><<<grid_for(args->n, 128), 128, 0, as_stream(stream)>>>(*args, w,  \
                                                                                       b, A);      \
        }                                                                                          \
        NNPOPS__LAUNCH_CHECK("ANI output layer");                                                  \
        return NNPOPS_OK;                                                                          \
    }

NNPOPS__ANI_OUTPUT_TWIN(f32, float)
NNPOPS__ANI_OUTPUT_TWIN(f64, double)

/* ---- small-n grouped GEMM (float32), twin of nnpops__small_gemm_cpu_f32 ----------------------
 * The networks of species with few atoms (n <= NNPOPS__SG_MAX_COLS columns) are thin products
 * (m x k weights times k x n activations): their cost is streaming the weights (about 28 MB for
 * the first layers of ANI-2x's H, C, N, O over 8 members) and, from n ~ 16 on, the FMAs.  The
 * problems of a group run in one launch per kind (trans 0, trans 1) and NNPOPS__SG_PER_LAUNCH
 * problems (their shapes passed by value).  Every block covers the whole k of its outputs: no
 * second pass, no work space, and each sum runs in a fixed order (deterministic).  Only the real
 * columns are computed, in chunks of NB = 8 (when every problem of the launch has n <= 8) or 16
 * columns: a block per (problem, batch entry, tile of 32 rows, column chunk).  Everything is about
 * latency: the block's first weights load into registers and the rest of its weights into L2
 * (prefetch) before it waits for the previous kernel (programmatic dependent launch, see
 * pdl_wait: with it this prologue overlaps the previous kernel); then it stages its B chunk (k x NB,
 * zeros past n and k; k in slices of L.kc when longer) in shared memory with cp.async, every copy
 * in flight at once, and past that one barrier the warps run free: each step's weights load
 * while the previous step is summed (two steps ahead for NB = 8); the epilogue's inputs (bias,
 * activation) are fetched early.  The loops are issue-bound at these sizes (13 atoms: a
 * quarter occupancy, L2 hit rate 82 %, DRAM 8 %), so their overhead is kept off the FMAs: the
 * weights of a step or round wholly inside the slice load without bounds tests from a fixed
 * stride, and the register buffers are used in turn (trans 0 with NB = 8: the step loop fully
 * unrolled over a ring of D + 1 steps; trans 1: two round buffers) instead of being copied.
 *   trans 0 (forward: A = W [m][k], rows contiguous in k): 8 warps of 4 rows.  The lanes of a warp
 *     stride over k (lane l takes j = 128 s + 32 u + l, u < 4: each weight load is a coalesced
 *     128-byte row segment, each weight read once per column chunk); B^T is staged permuted so
 *     that a lane's 4 values of one row are one 16-byte load.  A lane accumulates 4 rows x NB
 *     columns in registers, then a butterfly reduce-scatter over the 32 lanes (31 or 62 shuffles)
 *     leaves each lane 1 or 2 finished sums.
 *   trans 1 (backward: A = W [k][m], rows contiguous in m): 4, 8 or 16 warps (by k) share 32 rows.
 *     Lane (li, lj) = (lane & 7, lane >> 3) takes rows li + 8 q (q < 4) and j = 4 g + lj for the
 *     warp's groups g = warp, warp + warps, ... (a weight load: 4 rows x 32 contiguous bytes); B is
 *     staged [j][NB] with row stride NB + 4 (the 4 rows one instruction reads hit distinct banks)
 *     and read with 16-byte broadcast loads; a round is U groups per warp (the next round's
 *     weights load while one is summed).  A lane accumulates 4 rows x NB columns, a
 *     reduce-scatter over lj (2 shuffle steps) leaves it one row's NB sums, and the warps' partial
 *     sums meet in shared memory, added in warp order.
 * The thread holding a finished sum applies the epilogue (bias + CELU; CELU' from the activation
 * in C; plain store; trans 0 also bias + CELU followed by the output layer: each output's term
 * w a is summed over the block's rows in shared memory and added to the energies with atomics,
 * the first row block adding the output bias and self energy, and the activation is replaced by
 * the backward seed).  Plain FP32 FMA throughout: equal to the CPU twin to rounding (another
 * summation order), bitwise the same from run to run. */
namespace {

const int SGN_THREADS = 256; /* trans 0: 8 warps */
const int SGN_R = 4;         /* trans 0: rows per warp */
const int SGN_KC = 1024;     /* trans 0: largest k slice staged at once */
const int SG_ROWS = 32;      /* rows per block (both kinds) */
const int SGT_MAX_THREADS = 512;
/* weight steps in flight ahead (trans 0) and groups per round (trans 1), per column bucket */
const int SGN_D8 = 2, SGN_D16 = 1; /* trans 0, 8- / 16-column chunks */
const int SGT_U8 = 4, SGT_U16 = 2; /* trans 1 */

struct SgProb {
    nnpops__sg_problem p;
    int64_t mt, cc, start; /* row tiles, column chunks, first block of the problem */
    int64_t kper;          /* inner rows per slice of a k split (nnpops__sg_split_k) */
    int32_t slices;        /* slices of the k split (nnpops__sg_slices) */
};
struct SgLaunch {
    int32_t count, kc; /* problems; k per staged slice */
    float alpha, inv;
    SgProb q[NNPOPS__SG_PER_LAUNCH];
};

__device__ __forceinline__ int sg_find(const SgLaunch &L) {
    int pi = 0;
    while (pi + 1 < L.count && (int64_t)blockIdx.x >= L.q[pi + 1].start) pi++;
    return pi;
}

/* The epilogue's input of output (t, i, r), fetched before the sums are done: the bias (bias +
 * CELU; a weight, read before pdl_wait) or the activation held in C (CELU'; read after it). */
__device__ __forceinline__ float sg_pre(const nnpops__sg_problem &p, int64_t t, int64_t i,
                                        const float *c, bool after_wait) {
    const bool bias = p.epilogue == NNPOPS__SG_BIAS_CELU || p.epilogue == NNPOPS__SG_BIAS_CELU_OUT;
    if (bias && !after_wait) return p.bias ? __ldg(p.bias + t * p.m + i) : 0.0f;
    if (p.epilogue == NNPOPS__SG_CELU_ACT && after_wait) return *c;
    return 0.0f;
}
__device__ __forceinline__ float sg_finish(const nnpops__sg_problem &p, float al, float inv,
                                           float s, float pre) {
    if (p.epilogue == NNPOPS__SG_BIAS_CELU || p.epilogue == NNPOPS__SG_BIAS_CELU_OUT) {
        const float x = s + pre;
        return x > 0 ? x : al * expm1f(x * inv);
    }
    if (p.epilogue == NNPOPS__SG_CELU_ACT) return pre > 0 ? s : s * (pre * inv + 1.0f);
    return s;
}

/* One step of a butterfly reduce-scatter over lane bit o: of the 2H values v[0..2H) the lanes with
 * bit o clear keep the lower half, the others the upper half, each adding its partner's copy; the
 * kept half moves to v[0..H).  After the steps o = 16, 8, ... a lane holds the values from index
 * sum over the steps of (lane & o ? H : 0) on. */
template <int H>
__device__ __forceinline__ void sg_half(float *v, int lane, int o) {
    const bool hi = (lane & o) != 0;
#pragma unroll
    for (int u = 0; u < H; u++) {
        const float send = hi ? v[u] : v[u + H];
        const float keep = hi ? v[u + H] : v[u];
        v[u] = keep + __shfl_xor_sync(NNPOPS__FULL_MASK, send, o);
    }
}

/* The weights of one trans-0 step s (128 values of k) of a warp's rows (rows past m read row
 * m - 1; their sums are never written); arow: the rows from the lane's first value on.  A step
 * wholly inside the slice loads without bounds tests (the step loop is unrolled: s is a constant
 * there, and the offsets are immediates). */
__device__ __forceinline__ void sgn_load(float (&a)[SGN_R][4], const float *const (&arow)[SGN_R],
                                         int kl, int s, int lane) {
    if (((s + 1) << 7) <= kl) {
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int q = 0; q < SGN_R; q++) a[q][u] = __ldg(arow[q] + (s << 7) + (u << 5));
        return;
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const int j = (s << 7) + (u << 5) + lane;
#pragma unroll
        for (int q = 0; q < SGN_R; q++) a[q][u] = j < kl ? __ldg(arow[q] + (j - lane)) : 0.0f;
    }
}

/* Trans 0.  Template: NB columns per chunk, D steps of weights in flight ahead of the one summed. */
template <int NB, int D>
__global__ void __launch_bounds__(SGN_THREADS, 2) sgn_kernel(const SgLaunch L) {
    extern __shared__ __align__(16) float sg_sm[];
    constexpr int V = SGN_R * NB, NO = V / 32;
    const SgProb &Q = L.q[sg_find(L)];
    const nnpops__sg_problem &p = Q.p;
    int64_t lb = (int64_t)blockIdx.x - Q.start;
    const int64_t mi = lb % Q.mt;
    lb /= Q.mt;
    const int64_t ci = lb % Q.cc, t = lb / Q.cc;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t r0 = ci * NB, m = p.m, k = p.k, ldb = p.ldb;
    const int nr = (int)(p.n - r0 < NB ? p.n - r0 : NB);
    const int64_t i0 = mi * SG_ROWS + warp * SGN_R;
    const float *__restrict__ B = p.B + t * p.stride_b + r0;
    float *C = p.C + t * p.stride_c + r0;
    pdl_trigger();
    /* the lane's outputs after the reduce-scatter, and their epilogue inputs (fetched early) */
    const int base = ((lane >> 4) & 1) * (V / 2) + ((lane >> 3) & 1) * (V / 4) +
                     ((lane >> 2) & 1) * (V / 8) + ((lane >> 1) & 1) * (V / 16) + (lane & 1) * (V / 32);
    float pre[NO];
#pragma unroll
    for (int u = 0; u < NO; u++) {
        const int q = (base + u) / NB, r = (base + u) - q * NB;
        pre[u] = (i0 + q < m && r < nr) ? sg_pre(p, t, i0 + q, C + (i0 + q) * p.ldc + r, false)
                                        : 0.0f;
    }
    /* the output layer's weights of the lane's rows and the atoms of its columns (the fused
     * output epilogue; static inputs, complete when the AEV forward lets this kernel start) */
    const bool out = p.epilogue == NNPOPS__SG_BIAS_CELU_OUT;
    float wo[NO];
    int32_t cen[NO];
#pragma unroll
    for (int u = 0; u < NO; u++) {
        const int q = (base + u) / NB, r = (base + u) - q * NB;
        const bool ok = out && i0 + q < m && r < nr;
        wo[u] = ok ? __ldg(p.out_w + t * m + i0 + q) : 0.0f;
        cen[u] = ok ? p.out.centers[r0 + r] : -1;
    }
    const float *arow[SGN_R]; /* the rows from the lane's first value on */
#pragma unroll
    for (int q = 0; q < SGN_R; q++)
        arow[q] = p.A + t * p.stride_a + min(i0 + q, m - 1) * p.lda + lane;
    const int kc = L.kc, kcs = kc + 4;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; v++) acc[v] = 0.0f;
    /* the first weights into registers and the rest of the warp's rows into L2, before waiting
     * for the kernels that write B (and C); a holds D + 1 steps as a ring (step s in a[s % (D + 1)]:
     * the unrolled step loop indexes it with constants, no register moves) */
    float a[D + 1][SGN_R][4];
    {
        const int kl = (int)(k < kc ? k : kc);
#pragma unroll
        for (int d = 0; d < D; d++) sgn_load(a[d], arow, kl, d, lane);
        for (int q = 0; q < SGN_R; q++)
            for (int64_t j = (int64_t)D * 128 + 32 * lane; j < k; j += 32 * 32)
                prefetch_l2(arow[q] - lane + j);
    }
    pdl_wait();
#pragma unroll
    for (int u = 0; u < NO; u++) {
        const int q = (base + u) / NB, r = (base + u) - q * NB;
        if (i0 + q < m && r < nr && p.epilogue == NNPOPS__SG_CELU_ACT)
            pre[u] = sg_pre(p, t, i0 + q, C + (i0 + q) * p.ldc + r, true);
    }
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
        const int kl = (int)(k - k0 < kc ? k - k0 : kc), ns = (kl + 127) >> 7;
        if (k0 > 0) {
            __syncthreads();
#pragma unroll
            for (int q = 0; q < SGN_R; q++) arow[q] += kc;
#pragma unroll
            for (int d = 0; d < D; d++) sgn_load(a[d], arow, kl, d, lane);
        }
        /* B^T of the slice (every copy in flight at once): j = 128 s + 32 u + l goes to
         * 128 s + 4 l + u of row r; a thread keeps one r (SGN_THREADS is a multiple of NB) */
        {
            constexpr int JS = SGN_THREADS / NB;
            const int r = tid % NB;
            float *dr = sg_sm + r * kcs;
            const bool rok = r < nr;
            const float *src = B + (k0 + tid / NB) * ldb + r;
            const int64_t sstep = (int64_t)JS * ldb;
            for (int j = tid / NB; j < (ns << 7); j += JS, src += sstep) {
                const bool ok = rok && j < kl;
                cp_async4(dr + (j & ~127) + ((j & 31) << 2) + ((j >> 5) & 3), ok ? src : B, ok);
            }
        }
        cp_async_commit();
        cp_async_wait_pending(0);
        __syncthreads();
        /* the steps: fully unrolled for NB = 8 (the ring indexed with constants); for NB = 16
         * (D = 1) the unrolled loop spills, so the ring rotates by register moves there */
        const auto step = [&](const float(&w)[SGN_R][4], int s) {
            const float *bt = sg_sm + (s << 7) + (lane << 2);
#pragma unroll
            for (int r = 0; r < NB; r++) {
                const float4 b = *reinterpret_cast<const float4 *>(bt + r * kcs);
#pragma unroll
                for (int q = 0; q < SGN_R; q++) {
                    float c = acc[q * NB + r];
                    c = fmaf(w[q][0], b.x, c);
                    c = fmaf(w[q][1], b.y, c);
                    c = fmaf(w[q][2], b.z, c);
                    c = fmaf(w[q][3], b.w, c);
                    acc[q * NB + r] = c;
                }
            }
        };
        if constexpr (NB == 8) {
#pragma unroll
            for (int s = 0; s < SGN_KC / 128; s++) {
                if (s >= ns) break;
                sgn_load(a[(s + D) % (D + 1)], arow, kl, s + D, lane);
                step(a[s % (D + 1)], s);
            }
        } else {
            for (int s = 0; s < ns; s++) {
                sgn_load(a[D], arow, kl, s + D, lane);
                step(a[0], s);
#pragma unroll
                for (int d = 0; d < D; d++)
#pragma unroll
                    for (int q = 0; q < SGN_R; q++)
#pragma unroll
                        for (int u = 0; u < 4; u++) a[d][q][u] = a[d + 1][q][u];
            }
        }
    }
    sg_half<V / 2>(acc, lane, 16);
    sg_half<V / 4>(acc, lane, 8);
    sg_half<V / 8>(acc, lane, 4);
    sg_half<V / 16>(acc, lane, 2);
    sg_half<V / 32>(acc, lane, 1);
    if (out) { /* (block-uniform) */
        /* the fused output layer: each output's term w a into shared memory (the staged B is no
         * longer read), summed per column over the block's rows in row order; the block of the
         * first rows adds the output bias (and the self energy); the activation is replaced by
         * the backward seed w coef celu'(a) as ani_output does */
        __syncthreads();
        float *ep = sg_sm; /* [SG_ROWS][NB] */
        const nnpops__ani_output_args &o = p.out;
        const int32_t gm = o.member_offset + (int32_t)t;
        const float seed = output_seed<float>(o, gm);
#pragma unroll
        for (int u = 0; u < NO; u++) {
            const int q = (base + u) / NB, r = (base + u) - q * NB;
            const int64_t i = i0 + q;
            float e = 0.0f;
            if (i < m && r < nr) {
                const float a = sg_finish(p, L.alpha, L.inv, acc[u], pre[u]);
                e = wo[u] * a;
                float v = a;
                if (o.need_grad && cen[u] >= 0) { /* (padding columns keep the activation) */
                    const float da = wo[u] * seed;
                    v = a > 0 ? da : da * (a * L.inv + 1.0f);
                }
                C[i * p.ldc + r] = v;
            }
            ep[(warp * SGN_R + q) * NB + r] = e;
        }
        __syncthreads();
        if (tid < nr) {
            float s = mi == 0 ? __ldg(p.out_b + t) : 0.0f;
            for (int row = 0; row < SG_ROWS; row++) s += ep[row * NB + tid];
            const int32_t c = o.centers[r0 + tid];
            if (c >= 0) output_add_partial(o, c, gm, (double)s, mi == 0);
        }
        return;
    }
#pragma unroll
    for (int u = 0; u < NO; u++) {
        const int q = (base + u) / NB, r = (base + u) - q * NB;
        const int64_t i = i0 + q;
        if (i < m && r < nr) C[i * p.ldc + r] = sg_finish(p, L.alpha, L.inv, acc[u], pre[u]);
    }
}

/* Trans 1.  Template: NB columns per chunk, U groups of 4 k-rows per warp and round (a round's
 * weights load while the previous round is summed). */
template <int NB, int U>
__global__ void __launch_bounds__(SGT_MAX_THREADS) sgt_kernel(const SgLaunch L) {
    extern __shared__ __align__(16) float sg_sm[];
    constexpr int NBP = NB + 4, RS = NB + 1;
    const SgProb &Q = L.q[sg_find(L)];
    const nnpops__sg_problem &p = Q.p;
    int64_t lb = (int64_t)blockIdx.x - Q.start;
    const int64_t mi = lb % Q.mt;
    lb /= Q.mt;
    const int64_t ci = lb % Q.cc;
    lb /= Q.cc;
    /* slice ks of a k split (nnpops__sg_split_k): its rows of A and B, its copy of C */
    const int32_t S = Q.slices;
    const int64_t ks = lb % S, t = lb / S, kper = Q.kper, kb = ks * kper;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const int li = lane & 7, lj = lane >> 3;
    const int64_t r0 = ci * NB, m = p.m, lda = p.lda, ldb = p.ldb;
    const int64_t k = kb < p.k ? (p.k - kb < kper ? p.k - kb : kper) : 0;
    const int nr = (int)(p.n - r0 < NB ? p.n - r0 : NB);
    const int64_t ib = mi * SG_ROWS + li;
    const float *__restrict__ Ab = p.A + t * p.stride_a + kb * lda + ib;
    const float *__restrict__ B = p.B + t * p.stride_b + kb * ldb + r0;
    float *C = p.C + t * p.stride_c + ks * p.split_stride + r0;
    pdl_trigger();
    /* this thread's outputs o = tid + v blockDim.x (lane ln = o / NB, column o % NB) and their
     * epilogue inputs, fetched early */
    float pre[4];
    int64_t oi[4];
#pragma unroll
    for (int v = 0; v < 4; v++) {
        const int o = tid + v * (int)blockDim.x;
        pre[v] = 0.0f;
        oi[v] = -1;
        if (o < 32 * NB) {
            const int ln = o / NB, r = o - ln * NB;
            const int64_t i = mi * SG_ROWS + (ln & 7) + 8 * (((ln >> 4) & 1) * 2 + ((ln >> 3) & 1));
            if (i < m && r < nr) {
                oi[v] = i;
                pre[v] = sg_pre(p, t, i, C + i * p.ldc + r, false);
            }
        }
    }
    /* the lane's rows ib + 8 q; rows past m read row m - 1 (their sums are never written) */
    int qoff[4];
#pragma unroll
    for (int q = 0; q < 4; q++) qoff[q] = (int)(min(ib + 8 * q, m - 1) - ib);
    const int kc = L.kc;
    float acc[4 * NB];
#pragma unroll
    for (int v = 0; v < 4 * NB; v++) acc[v] = 0.0f;
    /* round rd of a slice (Ak: its first k-row, kl long, G groups of 4 k-rows): group g = warp +
     * nw (rd U + uu) of the warp, k-row j = 4 g + lj; a round wholly inside the slice loads
     * without bounds tests (the warp's k-rows are a fixed stride apart) */
    const int64_t gstep = (int64_t)4 * nw * lda;
    const auto load_round = [&](float(&buf)[U][4], const float *Ak, int kl, int rd) {
        const float *aw = Ak + (int64_t)(4 * warp + lj) * lda + (int64_t)(rd * U) * gstep;
        if (4 * (warp + nw * (rd * U + U - 1)) + 3 < kl) {
#pragma unroll
            for (int uu = 0; uu < U; uu++)
#pragma unroll
                for (int q = 0; q < 4; q++) buf[uu][q] = __ldg(aw + uu * gstep + qoff[q]);
            return;
        }
#pragma unroll
        for (int uu = 0; uu < U; uu++) {
            const int j = 4 * (warp + nw * (rd * U + uu)) + lj;
#pragma unroll
            for (int q = 0; q < 4; q++)
                buf[uu][q] = j < kl ? __ldg(aw + uu * gstep + qoff[q]) : 0.0f;
        }
    };
    const auto sum_round = [&](const float(&buf)[U][4], int G, int rd) {
#pragma unroll
        for (int uu = 0; uu < U; uu++) {
            const int g = warp + nw * (rd * U + uu);
            const float *bs = sg_sm + (g < G ? (g << 2) + lj : 0) * NBP;
#pragma unroll
            for (int c = 0; c < NB / 4; c++) {
                const float4 b = *reinterpret_cast<const float4 *>(bs + 4 * c);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float *x = acc + q * NB + 4 * c;
                    x[0] = fmaf(buf[uu][q], b.x, x[0]);
                    x[1] = fmaf(buf[uu][q], b.y, x[1]);
                    x[2] = fmaf(buf[uu][q], b.z, x[2]);
                    x[3] = fmaf(buf[uu][q], b.w, x[3]);
                }
            }
        }
    };
    /* the first round's weights into registers and the block's weight columns into L2, before
     * waiting for the kernels that write B (and C); two round buffers, used in turn */
    float a[2][U][4];
    {
        load_round(a[0], Ab, (int)(k < kc ? k : kc), 0);
        const float *A0 = Ab - li; /* column mi * 32 of the tile, up to its last column in m */
        const int64_t last = min(mi * SG_ROWS + SG_ROWS - 1, m - 1) - mi * SG_ROWS;
        for (int64_t j = tid; j < k; j += blockDim.x) {
            prefetch_l2(A0 + j * lda);
            prefetch_l2(A0 + j * lda + last);
        }
    }
    pdl_wait();
#pragma unroll
    for (int v = 0; v < 4; v++) {
        const int o = tid + v * (int)blockDim.x;
        if (oi[v] >= 0 && p.epilogue == NNPOPS__SG_CELU_ACT)
            pre[v] = sg_pre(p, t, oi[v], C + oi[v] * p.ldc + (o - (o / NB) * NB), true);
    }
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
        const int kl = (int)(k - k0 < kc ? k - k0 : kc), G = (kl + 3) >> 2;
        const int gr = nw * U, nrounds = (G + gr - 1) / gr; /* groups per round, rounds */
        const float *Ak = Ab + k0 * lda;
        if (k0 > 0) {
            __syncthreads();
            load_round(a[0], Ak, kl, 0);
        }
        /* B rows of the slice (every copy in flight at once); a thread keeps one r (blockDim.x
         * is a multiple of NB) */
        {
            const int js = (int)blockDim.x / NB, r = tid % NB;
            const bool rok = r < nr;
            const float *src = B + (k0 + tid / NB) * ldb + r;
            const int64_t sstep = (int64_t)js * ldb;
            for (int j = tid / NB; j < (G << 2); j += js, src += sstep) {
                const bool ok = rok && j < kl;
                cp_async4(sg_sm + j * NBP + r, ok ? src : B, ok);
            }
        }
        cp_async_commit();
        cp_async_wait_pending(0);
        __syncthreads();
        /* the warps run free from here: no barrier until the reduction; the next round's
         * weights load while one is summed */
        for (int rd = 0; rd < nrounds; rd += 2) {
            load_round(a[1], Ak, kl, rd + 1);
            sum_round(a[0], G, rd);
            if (rd + 1 >= nrounds) break;
            load_round(a[0], Ak, kl, rd + 2);
            sum_round(a[1], G, rd + 1);
        }
    }
    __syncthreads();
    /* over lj: the lane keeps rows li + 8 q, q = 2 (lane >> 4 & 1) + (lane >> 3 & 1), all NB
     * columns; then the warps' sums meet in shared memory, added in warp order */
    sg_half<2 * NB>(acc, lane, 16);
    sg_half<NB>(acc, lane, 8);
#pragma unroll
    for (int u = 0; u < NB; u++) sg_sm[(warp * 32 + lane) * RS + u] = acc[u];
    __syncthreads();
#pragma unroll
    for (int v = 0; v < 4; v++) {
        const int o = tid + v * (int)blockDim.x;
        if (o >= 32 * NB) break;
        const int ln = o / NB, r = o - ln * NB;
        float s = 0.0f;
        for (int w = 0; w < nw; w++) s += sg_sm[(w * 32 + ln) * RS + r];
        const int64_t i = mi * SG_ROWS + (ln & 7) + 8 * (((ln >> 4) & 1) * 2 + ((ln >> 3) & 1));
        if (i < m && r < nr) C[i * p.ldc + r] = sg_finish(p, L.alpha, L.inv, s, pre[v]);
    }
}

/* Launches whose problems have at most this many columns run chunks of 8 columns, others of 16. */
const int64_t SG_NB8_MAX = 8;

/* One launch of L's problems (all of kind trans, n <= nmax, k <= kmax), `blocks` blocks. */
nnpops_status sg_launch(SgLaunch &L, int trans, int64_t nmax, int64_t kmax, int64_t blocks,
                        cudaStream_t st) {
    const bool small = nmax <= SG_NB8_MAX;
    if (!trans) {
        int64_t kc = (kmax + 127) / 128 * 128;
        if (kc < 128) kc = 128;
        if (kc > SGN_KC) kc = SGN_KC;
        L.kc = (int32_t)kc;
        const size_t sm = sizeof(float) * (small ? 8 : 16) * (size_t)(kc + 4);
        auto kern = small ? sgn_kernel<8, SGN_D8> : sgn_kernel<16, SGN_D16>;
        NNPOPS__TRY(set_dynamic_smem((const void *)kern, sm));
        return launch_pdl(kern, dim3((unsigned)blocks), dim3(SGN_THREADS), sm, st,
                           "small GEMM (forward)", (SgLaunch)L);
    }
    const int nbc = small ? 8 : 16;
    const int64_t kcmax = small ? 2048 : 1024;
    int64_t kc = (kmax + 3) / 4 * 4;
    if (kc < 4) kc = 4;
    if (kc > kcmax) kc = kcmax;
    L.kc = (int32_t)kc;
    const int64_t G = kc / 4;
    const int nw = G >= 256 ? 16 : (G >= 64 ? 8 : 4);
    size_t stage = (size_t)kc * (nbc + 4), red = (size_t)nw * 32 * (nbc + 1);
    const size_t sm = sizeof(float) * (stage > red ? stage : red);
    auto kern = small ? sgt_kernel<8, SGT_U8> : sgt_kernel<16, SGT_U16>;
    NNPOPS__TRY(set_dynamic_smem((const void *)kern, sm));
    return launch_pdl(kern, dim3((unsigned)blocks), dim3(32 * nw), sm, st,
                       "small GEMM (backward)", (SgLaunch)L);
}

/* The grouped output layer: blockIdx.z picks the entry. */
struct SgOutLaunch {
    nnpops__ani_output_args a[NNPOPS__SG_PER_LAUNCH];
    const float *w[NNPOPS__SG_PER_LAUNCH], *b[NNPOPS__SG_PER_LAUNCH];
    float *A[NNPOPS__SG_PER_LAUNCH];
};

/* As ani_output_split_body (a block per 32 columns, member and entry; 8 warps split the width,
 * the same sums in the same order), with each thread's activations and weights loaded at once
 * into registers (up to SG_OUT_K per thread, a loop beyond) and reused for the backward seed. */
const int SG_OUT_K = 32;
__global__ void sg_output_split_kernel(const SgOutLaunch L) {
    __shared__ float part[8][33];
    const int z = blockIdx.z;
    const nnpops__ani_output_args &g = L.a[z];
    pdl_trigger();
    if ((int64_t)blockIdx.x * 32 >= g.n || (int32_t)blockIdx.y >= g.members) {
        pdl_wait();
        return;
    }
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int32_t m = blockIdx.y, gm = g.member_offset + m;
    const int64_t r = (int64_t)blockIdx.x * 32 + tx;
    const bool col = r < g.n;
    const int32_t c = col ? g.centers[r] : -1;
    const int32_t chunk = (g.width + 7) / 8;
    const int32_t k0 = ty * chunk, k1 = min(g.width, k0 + chunk);
    float *a = L.A[z] + (int64_t)m * g.width * g.lda + (col ? r : 0);
    const float *wm = L.w[z] + (int64_t)m * g.width;
    float x[SG_OUT_K], wk[SG_OUT_K];
#pragma unroll
    for (int u = 0; u < SG_OUT_K; u++) wk[u] = col && k0 + u < k1 ? __ldg(wm + k0 + u) : 0.0f;
    pdl_wait(); /* the activations come from the kernel before */
#pragma unroll
    for (int u = 0; u < SG_OUT_K; u++) x[u] = col && k0 + u < k1 ? a[(int64_t)(k0 + u) * g.lda] : 0.0f;
    float p = 0.0f;
    if (c >= 0) {
#pragma unroll
        for (int u = 0; u < SG_OUT_K; u++)
            if (k0 + u < k1) p += wk[u] * x[u];
        for (int32_t k = k0 + SG_OUT_K; k < k1; k++) p += wm[k] * a[(int64_t)k * g.lda];
    }
    part[ty][tx] = p;
    __syncthreads();
    if (ty == 0 && c >= 0) {
        float y = L.b[z][m];
        for (int t = 0; t < 8; t++) y += part[t][tx];
        output_add_energy(g, c, gm, (double)y);
    }
    if (!g.need_grad || c < 0) return;
    const float inv = (float)(1.0 / g.alpha);
    const float seed = output_seed<float>(g, gm);
#pragma unroll
    for (int u = 0; u < SG_OUT_K; u++) {
        if (k0 + u < k1) {
            const float da = wk[u] * seed;
            a[(int64_t)(k0 + u) * g.lda] = x[u] > 0 ? da : da * (x[u] * inv + 1.0f);
        }
    }
    for (int32_t k = k0 + SG_OUT_K; k < k1; k++) {
        const float xv = a[(int64_t)k * g.lda];
        const float da = wm[k] * seed;
        a[(int64_t)k * g.lda] = xv > 0 ? da : da * (xv * inv + 1.0f);
    }
}

__global__ void sg_output_det_kernel(const SgOutLaunch L) {
    const int z = blockIdx.z;
    pdl_trigger();
    pdl_wait();
    ani_output_body<float>(L.a[z], L.w[z], L.b[z], L.A[z], blockIdx.x);
}

} /* namespace */

extern "C" nnpops_status nnpops__small_gemm_cuda_f32(const nnpops__sg_group *g, void *work,
                                                     size_t work_bytes, void *stream) {
    (void)work;
    (void)work_bytes;
    if (g->count < 0 || g->count > NNPOPS__SG_MAX_PROBLEMS)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "small GEMM: %d problems (at most %d)",
                            (int)g->count, NNPOPS__SG_MAX_PROBLEMS);
    for (int32_t q = 0; q < g->count; q++) {
        const nnpops__sg_problem *p = &g->p[q];
        if (p->m <= 0 || p->n <= 0 || p->batch <= 0) continue;
        if (p->n > NNPOPS__SG_MAX_COLS || p->m > INT32_MAX || p->k > INT32_MAX || p->k < 0)
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                                "small GEMM: %lld x %lld x %lld (at most %d columns)",
                                (long long)p->m, (long long)p->k, (long long)p->n,
                                NNPOPS__SG_MAX_COLS);
        if (p->split > 1 && (!p->trans || p->epilogue != NNPOPS__SG_STORE || p->split > 64))
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                "small GEMM: a k split (%d) needs trans 1, a plain store and at "
                                "most 64 slices", (int)p->split);
        if (p->epilogue == NNPOPS__SG_BIAS_CELU_OUT &&
            (p->trans || p->out.deterministic || p->out.members != p->batch ||
             p->out.width != p->m || p->stride_c != p->m * p->ldc || !p->out.centers))
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                "small GEMM: the fused output layer needs trans 0, one member per "
                                "batch entry (stride m ldc), centers and the atomic form");
    }
    cudaStream_t st = as_stream(stream);
    for (int trans = 0; trans < 2; trans++) {
        int32_t q = 0;
        for (;;) {
            SgLaunch L;
            memset(&L, 0, sizeof L);
            L.alpha = (float)g->alpha;
            L.inv = (float)(1.0 / g->alpha);
            int32_t idx[NNPOPS__SG_PER_LAUNCH];
            int cnt = 0;
            int64_t nmax = 0, kmax = 0;
            for (; q < g->count && cnt < NNPOPS__SG_PER_LAUNCH; q++) {
                const nnpops__sg_problem *p = &g->p[q];
                if ((p->trans != 0) != (trans != 0) || p->m <= 0 || p->n <= 0 || p->batch <= 0)
                    continue;
                idx[cnt++] = q;
                if (p->n > nmax) nmax = p->n;
                const int64_t kl = nnpops__sg_split_k(p->k, p->split);
                if (kl > kmax) kmax = kl;
            }
            if (cnt == 0) break;
            const int64_t nb = nmax <= SG_NB8_MAX ? 8 : 16;
            int64_t blocks = 0;
            for (int c = 0; c < cnt; c++) {
                SgProb &Q = L.q[L.count++];
                Q.p = g->p[idx[c]];
                Q.mt = (Q.p.m + SG_ROWS - 1) / SG_ROWS;
                Q.cc = (Q.p.n + nb - 1) / nb;
                Q.kper = nnpops__sg_split_k(Q.p.k, Q.p.split);
                Q.slices = nnpops__sg_slices(Q.p.split);
                Q.start = blocks;
                blocks += Q.p.batch * Q.mt * Q.cc * Q.slices;
            }
            if (blocks > INT32_MAX)
                return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "small GEMM: grid too large");
            const nnpops_status s = sg_launch(L, trans, nmax, kmax, blocks, st);
            if (s != NNPOPS_OK) return s;
        }
    }
    return NNPOPS_OK;
}

extern "C" nnpops_status nnpops__ani_output_group_cuda_f32(int32_t count,
                                                           const nnpops__ani_output_args *args,
                                                           const float *const *w,
                                                           const float *const *b, float *const *A,
                                                           void *stream) {
    cudaStream_t st = as_stream(stream);
    for (int det = 0; det < 2; det++) {
        int32_t q = 0;
        for (;;) {
            SgOutLaunch L;
            memset(&L, 0, sizeof L);
            int cnt = 0;
            int64_t nmax = 0;
            int32_t mmax = 0;
            for (; q < count && cnt < NNPOPS__SG_PER_LAUNCH; q++) {
                const nnpops__ani_output_args *a = &args[q];
                const int d = a->deterministic || a->members > 65535;
                if (d != det || a->n <= 0 || a->members <= 0) continue;
                L.a[cnt] = *a;
                L.w[cnt] = w[q];
                L.b[cnt] = b[q];
                L.A[cnt] = A[q];
                cnt++;
                if (a->n > nmax) nmax = a->n;
                if (a->members > mmax) mmax = a->members;
            }
            if (cnt == 0) break;
            const nnpops_status s =
                det ? launch_pdl(sg_output_det_kernel, dim3(grid_for(nmax, 128), 1, (unsigned)cnt),
                                  dim3(128), 0, st, "ANI output layers (grouped)", (SgOutLaunch)L)
                    : launch_pdl(sg_output_split_kernel,
                                  dim3(grid_for(nmax, 32), (unsigned)mmax, (unsigned)cnt),
                                  dim3(32, 8), 0, st, "ANI output layers (grouped)", (SgOutLaunch)L);
            if (s != NNPOPS_OK) return s;
        }
    }
    return NNPOPS_OK;
}
