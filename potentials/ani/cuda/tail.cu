/*
 * tail.cu - the tail of small species' networks in one launch: twin of nnpops__sg_tail_cpu_f32
 * (potentials/ani/ani_ops.h).  Hidden layers 1 .. h-1, the output layer and the backward pass back to
 * dE/dZ of hidden layer 0, for a group of networks, without a kernel boundary between layers.
 *
 * A thread block cluster (sm_90) of TL_CS = 8 blocks per (network, member, chunk of at most NC
 * columns; NC = 8, 16 or 32 by the launch's largest column count).  Block b of the cluster owns
 * rows b rs .. b rs + rs - 1 of every layer (rs = ceil(width / 8), at most TL_ROWS = 32): it
 * copies those rows of each weight matrix into its shared memory before waiting for the previous
 * kernel (programmatic dependent launch), so that after the wait the layers run from shared
 * memory.  The blocks exchange activations through distributed shared memory:
 *   forward, layer l: the block's rows of Z = W H + b over the whole input H (the 8 warps split
 *     k, lane tiles of RT rows x 4 columns, the warps' sums added in warp order), CELU into the
 *     block's slice S_l; cluster barrier; every block gathers the next layer's whole input from
 *     the 8 slices.
 *   output layer: each block adds its rows' part of w . h to the energies (atomics; the block of
 *     the first rows adds the output bias and the self energy), as the fused output epilogue of
 *     the small-n GEMM does; the backward seed w seed celu'(h) of its rows stays in shared memory.
 *   backward, layer l: the block's partial product W_rowsᵀ dZ_rows over its own rows (every input
 *     row, no reduction within the block); cluster barrier; each block sums the 8 partials of its
 *     rows of the layer below in block order, times CELU' of that layer's activation (its slice,
 *     or for hidden layer 0 the activations in global memory, overwritten with dE/dZ0).
 * Five cluster barriers for ANI's three hidden layers, one kernel instead of 2 h - 2.
 * With 8-column chunks (the smallest molecules, whose steps are latency-bound) the blocks PUSH
 * instead: each writes its rows of a layer's activations straight into the 8 blocks' input
 * buffers for the next layer, and its backward partials into the owners' receive buffers
 * ([source block][row][column]), with two exchange buffers used in turn, so that a cluster
 * barrier needs no loads after it: three barriers instead of five, no distributed-shared-memory
 * loads on the path (the same sums in the same order: the same results).  The next
 * kernel is let start (pdl_trigger) once the forward pass is done: earlier, its weight prefetches
 * compete with this kernel's copies.  Plain FP32
 * FMA; every sum in a fixed order, so the results are the same from run to run (the energies'
 * atomics aside, as in the small-n GEMM's fused output).  Shared memory per block: the weight
 * rows (32 x (k + 4) floats per layer, zero padded), one exchange buffer, the slices.
 */
#include <cooperative_groups.h>
#include <string.h>

#include <atomic>

#include "kernels/cuda/common.cuh"

extern "C" {
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani_ops.h"
}
#include "potentials/ani/cuda/nets.cuh"

using namespace nnpops_cuda;
namespace cgx = cooperative_groups;

namespace {

const int TL_CS = 8;        /* blocks per cluster */
const int TL_THREADS = 256; /* 8 warps */
const int TL_ROWS = 32;     /* rows of a block's slice (padded) */
const int TL_MAXW = 256;    /* widest layer */
const int TL_MAXSMEM = 227 * 1024;

/* Shared memory layout of a network (offsets in floats), computed on the host (tl_layout). */
struct TlLayout {
    int32_t ws[NNPOPS__SG_TAIL_MAX_HIDDEN]; /* weight rows of layer l: [rs][kpad + 4] */
    int32_t s[NNPOPS__SG_TAIL_MAX_HIDDEN];  /* slice of layer l's activations: [TL_ROWS][NC + 4] */
    int32_t bias[NNPOPS__SG_TAIL_MAX_HIDDEN];
    int32_t xp;   /* exchange: the forward's input [NC][kpad + 4] and warp sums, the partials */
    int32_t xq;   /* the second exchange buffer (push mode: tl_push), as large as the first */
    int32_t dz;   /* [TL_ROWS][NC + 4] */
    int32_t h0;   /* the block's rows of hidden layer 0's activations: [TL_ROWS][NC + 4] */
    int32_t cen;  /* the chunk's centers (int32): [NC] */
    int32_t wout; /* the output layer's weights of the block's rows */
    int32_t total;
};
struct TlProb {
    nnpops__sg_tail t;
    TlLayout y;
    int32_t chunks, start; /* column chunks; first cluster */
};
struct TlLaunch {
    int32_t count;
    float alpha, inv;
    TlProb q[NNPOPS__SG_PER_LAUNCH];
};

/* Push mode (see the header): 8-column chunks. */
__host__ __device__ constexpr bool tl_push(int NC) { return NC == 8; }

/* Input rows of a layer padded to the warps' k split (8 warps x a multiple of 4). */
__host__ __device__ inline int tl_kpad(int k) { return (k + 31) / 32 * 32; }
__host__ __device__ inline int tl_rs(int m) { return (m + TL_CS - 1) / TL_CS; }

TlLayout tl_layout(const nnpops__sg_tail &t, int NC) {
    TlLayout L;
    memset(&L, 0, sizeof L);
    const int ncp = NC + 4;
    /* the exchange buffer holds at least the 8 warps' sums of the forward, [8][TL_ROWS][NC], as
     * large as push mode's receive buffers [TL_CS][TL_ROWS][NC] */
    int o = 0, xp = 8 * TL_ROWS * NC;
    for (int l = 1; l < t.hidden; l++) {
        const int kp = tl_kpad(t.width[l - 1]);
        L.ws[l] = o;
        o += tl_rs(t.width[l]) * (kp + 4);
        if (NC * (kp + 4) > xp) xp = NC * (kp + 4);
        if (kp * ncp > xp) xp = kp * ncp;
    }
    for (int l = 1; l < t.hidden; l++) {
        L.s[l] = o;
        o += TL_ROWS * ncp;
        L.bias[l] = o;
        o += TL_ROWS;
    }
    L.xp = o;
    o += xp;
    L.xq = o;
    if (tl_push(NC)) o += xp;
    L.dz = o;
    o += TL_ROWS * ncp;
    L.wout = o; /* and the output bias after them */
    o += TL_ROWS + 4;
    L.h0 = o;
    o += TL_ROWS * ncp;
    L.cen = o;
    o += NC;
    L.total = o;
    return L;
}

__device__ __forceinline__ float celu_f(float x, float al, float inv) {
    return x > 0 ? x : al * expm1f(x * inv);
}
/* d celu(z) from the activation a = celu(z), times g */
__device__ __forceinline__ float celu_back(float a, float g, float inv) {
    return a > 0 ? g : g * (a * inv + 1.0f);
}

/* The block's rows of Z = W H + b over X ([NC][kpad + 4], zero past k; ws: [rs][kpad + 4]),
 * CELU into S ([TL_ROWS][NC + 4], zeros past rs rows and nc columns).  Lane (rg, cg) of a warp
 * takes rows rg + RG i (i < RT) and columns cg + CG j (j < 4) over the warp's eighth of k. */
template <int NC>
__device__ __forceinline__ void tl_forward(const float *ws, const float *bias, float *X, float *S,
                                           int kp, int rs, int nc, float al, float inv) {
    constexpr int CG = NC / 4, RG = 32 / CG, RT = TL_ROWS / RG;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cg = lane % CG, rg = lane / CG, kx = kp + 4, kq = kp / 8;
    float acc[RT][4];
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int k = warp * kq; k < (warp + 1) * kq; k += 4) {
        float4 x[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            x[j] = *reinterpret_cast<const float4 *>(X + (cg + CG * j) * kx + k);
#pragma unroll
        for (int i = 0; i < RT; i++) {
            const float4 a = rg + RG * i < rs
                                 ? *reinterpret_cast<const float4 *>(ws + (rg + RG * i) * kx + k)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float c = acc[i][j];
                c = fmaf(a.x, x[j].x, c);
                c = fmaf(a.y, x[j].y, c);
                c = fmaf(a.z, x[j].z, c);
                c = fmaf(a.w, x[j].w, c);
                acc[i][j] = c;
            }
        }
    }
    __syncthreads(); /* X is read; the warps' sums go over it */
#pragma unroll
    for (int i = 0; i < RT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            X[(warp * TL_ROWS + rg + RG * i) * NC + cg + CG * j] = acc[i][j];
    __syncthreads();
    const int ncp = NC + 4;
    for (int e = tid; e < TL_ROWS * NC; e += TL_THREADS) {
        const int r = e / NC, c = e - r * NC;
        float v = 0.0f;
        if (r < rs && c < nc) {
            float s = 0.0f;
#pragma unroll
            for (int w = 0; w < 8; w++) s += X[(w * TL_ROWS + r) * NC + c];
            v = celu_f(s + bias[r], al, inv);
        }
        S[r * ncp + c] = v;
    }
}

/* The block's partial product over its rows r < rs of W[r][k] dZ[r][c], k < kp, of lane (kg, cg)
 * of warp w: acc[i][j] for k = 32 w + kg + KG i (i < KT) and column 4 cg + j; false when the warp
 * has no k (32 w >= kp). */
template <int NC>
__device__ __forceinline__ bool tl_partial_acc(const float *ws, const float *dz, int kp, int rs,
                                               float (&acc)[NC / 4][4]) {
    constexpr int CG = NC / 4, KG = 32 / CG, KT = 32 / KG;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cg = lane % CG, kg = lane / CG, kw = kp + 4, ncp = NC + 4, k0 = 32 * warp + kg;
    if (32 * warp >= kp) return false;
#pragma unroll
    for (int i = 0; i < KT; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int r = 0; r < rs; r++) {
        const float4 d = *reinterpret_cast<const float4 *>(dz + r * ncp + 4 * cg);
        const float *wr = ws + r * kw + k0;
#pragma unroll
        for (int i = 0; i < KT; i++) {
            const float a = wr[KG * i];
            acc[i][0] = fmaf(a, d.x, acc[i][0]);
            acc[i][1] = fmaf(a, d.y, acc[i][1]);
            acc[i][2] = fmaf(a, d.z, acc[i][2]);
            acc[i][3] = fmaf(a, d.w, acc[i][3]);
        }
    }
    return true;
}

/* The block's partial product P[k][c] (P: [kp][NC + 4]; tl_partial_acc). */
template <int NC>
__device__ __forceinline__ void tl_partial(const float *ws, const float *dz, float *P, int kp,
                                           int rs) {
    constexpr int CG = NC / 4, KG = 32 / CG, KT = 32 / KG;
    const int lane = threadIdx.x & 31, cg = lane % CG, ncp = NC + 4;
    const int k0 = 32 * (threadIdx.x >> 5) + lane / CG;
    float acc[NC / 4][4];
    if (!tl_partial_acc<NC>(ws, dz, kp, rs, acc)) return;
#pragma unroll
    for (int i = 0; i < KT; i++)
        *reinterpret_cast<float4 *>(P + (k0 + KG * i) * ncp + 4 * cg) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

/* Push mode: the products of tl_partial_acc, each written into the receive buffer of the block
 * that owns its row of the layer below (rows o rsk .. o rsk + rsk - 1 of block o) at
 * R[b][row - o rsk] ([TL_CS][TL_ROWS][NC]); rows past k (padding) are not sent. */
template <int NC>
__device__ __forceinline__ void tl_partial_push(cgx::cluster_group &cl, const float *ws,
                                                const float *dz, float *R, int kp, int rs, int k,
                                                int rsk, int b) {
    constexpr int CG = NC / 4, KG = 32 / CG, KT = 32 / KG;
    const int lane = threadIdx.x & 31, cg = lane % CG;
    const int k0 = 32 * (threadIdx.x >> 5) + lane / CG;
    float acc[NC / 4][4];
    if (!tl_partial_acc<NC>(ws, dz, kp, rs, acc)) return;
#pragma unroll
    for (int i = 0; i < KT; i++) {
        const int kk = k0 + KG * i;
        if (kk >= k) continue;
        const int o = kk / rsk;
        float *dst = cl.map_shared_rank(R, o) + (b * TL_ROWS + kk - o * rsk) * NC + 4 * cg;
        *reinterpret_cast<float4 *>(dst) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
}

template <int NC>
__global__ void __launch_bounds__(TL_THREADS, NC == 32 ? 2 : 3) tail_kernel(const TlLaunch L) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(NNPOPS_CUDA_EMULATION)
    constexpr bool PUSH = tl_push(NC);
    extern __shared__ __align__(16) float tl_sm[];
    cgx::cluster_group cl = cgx::this_cluster();
    const int b = (int)cl.block_rank();
    const int ci = (int)(blockIdx.x / TL_CS);
    int pi = 0;
    while (pi + 1 < L.count && ci >= L.q[pi + 1].start) pi++;
    const TlProb &Q = L.q[pi];
    const nnpops__sg_tail &T = Q.t;
    const int lc = ci - Q.start, chunk = lc % Q.chunks, mt = lc / Q.chunks;
    const int h = T.hidden, c0 = chunk * NC, ncp = NC + 4;
    const int nc = (int)(T.out.n - c0 < NC ? T.out.n - c0 : NC);
    const int64_t ld = T.out.lda;
    const int tid = threadIdx.x;
    const TlLayout &Y = Q.y;
    const float al = L.alpha, inv = L.inv;
    /* the block's rows of every weight matrix, its biases and output weights (static inputs) */
    for (int l = 1; l < h; l++) {
        const int m = T.width[l], k = T.width[l - 1], kw = tl_kpad(k) + 4, rs = tl_rs(m);
        const float *W = T.W[l] + (int64_t)mt * m * k;
        float *ws = tl_sm + Y.ws[l];
        for (int r = tid >> 5; r < rs; r += TL_THREADS / 32) {
            const int gr = b * rs + r;
            for (int g = tid & 31; 4 * g < kw; g += 32) {
                const bool ok = gr < m && 4 * g < k;
                cp_async16(ws + r * kw + 4 * g, ok ? W + (int64_t)gr * k + 4 * g : W, ok);
            }
        }
        if (tid < TL_ROWS) { /* (asynchronous too: no load waited for before pdl_wait) */
            const int gr = b * rs + tid;
            const bool ok = tid < rs && gr < m;
            const float *src = T.b[l] + (int64_t)mt * m + gr;
            cp_async4(tl_sm + Y.bias[l] + tid, ok ? src : T.b[l], ok);
        }
    }
    const int mo = T.width[h - 1], rso = tl_rs(mo);
    if (tid < TL_ROWS) {
        const int gr = b * rso + tid;
        const bool ok = tid < rso && gr < mo;
        cp_async4(tl_sm + Y.wout + tid, ok ? T.W[h] + (int64_t)mt * mo + gr : T.W[h], ok);
    } else if (tid == TL_ROWS) { /* the output bias, added by block 0 */
        cp_async4(tl_sm + Y.wout + TL_ROWS, T.b[h] + mt, b == 0);
    }
    cp_async_commit();
    pdl_wait();
    /* hidden layer 0's activations of the chunk, X[c][k]; push mode uses the two exchange
     * buffers in turn */
    float *X = tl_sm + Y.xp;
    const auto other_buffer = [&](const float *p) {
        return p == tl_sm + Y.xp ? tl_sm + Y.xq : tl_sm + Y.xp;
    };
    float *A0 = T.A + (int64_t)mt * T.width[0] * ld + c0;
    int32_t *cen = reinterpret_cast<int32_t *>(tl_sm + Y.cen);
    float *h0 = tl_sm + Y.h0;
    const int k0 = T.width[0], kx0 = tl_kpad(k0) + 4, rs0 = tl_rs(k0);
    for (int e = tid; e < (kx0 - 4) * NC; e += TL_THREADS) { /* every copy in flight at once */
        const int kk = e / NC, c = e - kk * NC;
        const bool ok = kk < k0 && c < nc;
        cp_async4(X + c * kx0 + kk, ok ? A0 + (int64_t)kk * ld + c : A0, ok);
    }
    cp_async_commit();
    if (tid < NC) cen[tid] = tid < nc ? T.out.centers[c0 + tid] : -1;
    cp_async_wait_pending(0);
    __syncthreads();
    /* the block's rows of layer 0 (CELU' of the last backward step), read before X is reused */
    for (int e = tid; e < rs0 * NC; e += TL_THREADS) {
        const int r = e / NC, c = e - r * NC, gr = b * rs0 + r;
        h0[r * ncp + c] = gr < k0 ? X[c * kx0 + gr] : 0.0f;
    }
    for (int l = 1; l < h; l++) {
        const int m = T.width[l], rs = tl_rs(m);
        float *S = tl_sm + Y.s[l];
        tl_forward<NC>(tl_sm + Y.ws[l], tl_sm + Y.bias[l], X, S, tl_kpad(T.width[l - 1]), rs, nc,
                       al, inv);
        if (l + 1 == h) break;
        const int kp = tl_kpad(m), kx = kp + 4;
        if (PUSH) { /* the block's rows into every block's next input, then one barrier */
            float *Xn = other_buffer(X);
            for (int e = tid; e < rs * NC; e += TL_THREADS) {
                const int r = e / NC, c = e - r * NC, gr = b * rs + r;
                if (gr >= m) continue;
                const float v = S[r * ncp + c];
#pragma unroll
                for (int p = 0; p < TL_CS; p++) cl.map_shared_rank(Xn, p)[c * kx + gr] = v;
            }
            for (int e = tid; e < (kp - m) * NC; e += TL_THREADS) {
                const int kk = m + e / NC, c = e % NC;
                Xn[c * kx + kk] = 0.0f;
            }
            cl.sync(); /* every block's rows of layer l are in place */
            X = Xn;
            continue;
        }
        cl.sync(); /* every slice of layer l written */
        /* the next layer's input from the 8 slices (a thread's 8 loads in flight at once) */
        for (int e = tid; e < rs * NC; e += TL_THREADS) {
            const int r = e / NC, c = e - r * NC;
            float v[TL_CS];
#pragma unroll
            for (int p = 0; p < TL_CS; p++) v[p] = cl.map_shared_rank(S, p)[r * ncp + c];
#pragma unroll
            for (int p = 0; p < TL_CS; p++)
                if (p * rs + r < m) X[c * kx + p * rs + r] = v[p];
        }
        for (int e = tid; e < (kp - m) * NC; e += TL_THREADS) {
            const int kk = m + e / NC, c = e % NC;
            X[c * kx + kk] = 0.0f;
        }
        __syncthreads();
    }
    __syncthreads();
    /* the output layer: the block's rows' part of each column's output */
    const float *Sh = tl_sm + Y.s[h - 1];
    const float *wo = tl_sm + Y.wout;
    const int32_t gm = T.out.member_offset + mt;
    if (tid < nc) {
        float e = wo[TL_ROWS]; /* the output bias in block 0, else 0 */
        for (int r = 0; r < rso; r++) e += wo[r] * Sh[r * ncp + tid];
        const int32_t c = cen[tid];
        if (c >= 0) output_add_partial(T.out, c, gm, (double)e, b == 0);
    }
    /* the next kernel (the adjoint onto the AEV) may start loading its weights now; earlier, its
     * prefetches compete with this kernel's weight copies */
    pdl_trigger();
    if (T.out.need_grad) {
        /* the backward seed of the block's rows (padding columns keep the activation, as the
         * output layer's twin leaves them) */
        const float seed = output_seed<float>(T.out, gm);
        float *dz = tl_sm + Y.dz;
        for (int e = tid; e < TL_ROWS * NC; e += TL_THREADS) {
            const int r = e / NC, c = e - r * NC;
            float v = 0.0f;
            if (r < rso && c < nc) {
                const float a = Sh[r * ncp + c];
                v = cen[c] >= 0 ? celu_back(a, wo[r] * seed, inv) : a;
            }
            dz[r * ncp + c] = v;
        }
        __syncthreads();
        /* push mode: the receive buffers, in turn from the one the last layer did not read (a
         * peer may still be reading its own) */
        float *R = other_buffer(X);
        for (int l = h - 1; l >= 1; l--) {
            const int m = T.width[l], k = T.width[l - 1], kp = tl_kpad(k), rs = tl_rs(m);
            const int rsk = tl_rs(k);
            if (PUSH) {
                tl_partial_push<NC>(cl, tl_sm + Y.ws[l], dz, R, kp, rs, k, rsk, b);
            } else {
                if (l + 1 < h) cl.sync(); /* the peers have read the previous partials */
                tl_partial<NC>(tl_sm + Y.ws[l], dz, X, kp, rs);
            }
            cl.sync();
            /* the block's rows of layer l - 1: the 8 partials in block order, times CELU' */
            const float *Sl = l > 1 ? tl_sm + Y.s[l - 1] : nullptr;
            for (int e = tid; e < rsk * NC; e += TL_THREADS) {
                const int r = e / NC, c = e - r * NC, gr = b * rsk + r;
                if (gr >= k || c >= nc) { /* (zero weights meet these rows: keep them zero) */
                    if (l > 1) dz[r * ncp + c] = 0.0f;
                    continue;
                }
                float g = 0.0f;
                if (PUSH) {
#pragma unroll
                    for (int p = 0; p < TL_CS; p++) g += R[(p * TL_ROWS + r) * NC + c];
                } else {
#pragma unroll
                    for (int p = 0; p < TL_CS; p++) g += cl.map_shared_rank(X, p)[gr * ncp + c];
                }
                if (l > 1) {
                    dz[r * ncp + c] = celu_back(Sl[r * ncp + c], g, inv);
                } else {
                    A0[(int64_t)gr * ld + c] = celu_back(h0[r * ncp + c], g, inv);
                }
            }
            __syncthreads();
            R = other_buffer(R);
        }
    }
    /* no block leaves while a peer may still read its shared memory (push mode: every write
     * into a peer came before a barrier that peer passed too) */
    if (!PUSH) cl.sync();
#endif
}

int tl_nc(int64_t nmax) { return nmax <= 8 ? 8 : (nmax <= 16 ? 16 : 32); }

using TlKernel = void (*)(const TlLaunch);
TlKernel tl_kernel(int NC) {
    return NC == 8 ? tail_kernel<8> : (NC == 16 ? tail_kernel<16> : tail_kernel<32>);
}

nnpops_status tl_launch(TlLaunch &L, int NC, int64_t clusters, size_t smem, cudaStream_t st) {
    const TlKernel kern = tl_kernel(NC);
    NNPOPS__TRY(set_dynamic_smem((const void *)kern, smem));
    return launch_ex(true, (unsigned)TL_CS, kern, dim3((unsigned)(clusters * TL_CS)),
                     dim3(TL_THREADS), smem, st, "network tail", (const TlLaunch)L);
}

/* per device (< 16) and NC: the most shared memory (KiB) a cluster was found to fit with */
std::atomic<int> tl_ok_kib[16][3];

/* Whether the tail kernel with NC columns per chunk runs on the current device with `smem` bytes
 * per block (clusters: compute capability 9.0 on; a cluster must fit). */
bool tl_device_ok(int NC, size_t smem) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    const int ni = NC == 8 ? 0 : (NC == 16 ? 1 : 2), kib = (int)((smem + 1023) / 1024);
    if (dev >= 0 && dev < 16 && tl_ok_kib[dev][ni].load() >= kib) return true;
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (major < 9) return false;
    const TlKernel kern = tl_kernel(NC);
    if (set_dynamic_smem((const void *)kern, smem) != NNPOPS_OK) return false;
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[2];
    launch_config(cfg, attr, dim3(TL_CS), dim3(TL_THREADS), smem, 0, false, TL_CS);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (n <= 0) return false;
    if (dev >= 0 && dev < 16) {
        int cur = tl_ok_kib[dev][ni].load();
        while (cur < kib && !tl_ok_kib[dev][ni].compare_exchange_weak(cur, kib)) {
        }
    }
    return true;
}

/* Shared memory bytes of network t with NC columns per chunk. */
size_t tl_smem(const nnpops__sg_tail &t, int NC) {
    return sizeof(float) * (size_t)tl_layout(t, NC).total;
}

} // namespace

extern "C" int nnpops__sg_tail_supported(const nnpops__sg_tail *t) {
    if (t->hidden < 2 || t->hidden > NNPOPS__SG_TAIL_MAX_HIDDEN || t->out.n <= 0 ||
        t->out.n > NNPOPS__SG_MAX_COLS || t->out.members <= 0 || t->out.deterministic ||
        t->out.width != t->width[t->hidden - 1] || !t->out.centers)
        return 0;
    for (int l = 0; l < t->hidden; l++)
        if (t->width[l] <= 0 || t->width[l] > TL_MAXW || t->width[l] % 4) return 0;
    for (int l = 1; l < t->hidden; l++)
        if (((uintptr_t)t->W[l]) % 16) return 0;
    const int NC = tl_nc(t->out.n);
    const size_t smem = tl_smem(*t, NC);
    if (smem > (size_t)TL_MAXSMEM) return 0;
    return tl_device_ok(NC, smem) ? 1 : 0;
}

extern "C" nnpops_status nnpops__sg_tail_cuda_f32(const nnpops__sg_tail *t, int32_t count,
                                                 double alpha, void *stream) {
    for (int32_t q = 0; q < count; q++)
        if (!nnpops__sg_tail_supported(&t[q]))
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                                "network tail %d: %d hidden layers, %lld columns: not supported "
                                "by the one-launch path (nnpops__sg_tail_supported)",
                                (int)q, (int)t[q].hidden, (long long)t[q].out.n);
    cudaStream_t st = as_stream(stream);
    int64_t nmax = 0;
    for (int32_t q = 0; q < count; q++)
        if (t[q].out.n > nmax) nmax = t[q].out.n;
    const int NC = tl_nc(nmax);
    for (int32_t q0 = 0; q0 < count; q0 += NNPOPS__SG_PER_LAUNCH) {
        TlLaunch L;
        memset(&L, 0, sizeof L);
        L.alpha = (float)alpha;
        L.inv = (float)(1.0 / alpha);
        int64_t clusters = 0;
        size_t smem = 0;
        for (int32_t q = q0; q < count && q < q0 + NNPOPS__SG_PER_LAUNCH; q++) {
            TlProb &P = L.q[L.count++];
            P.t = t[q];
            P.chunks = (int32_t)((t[q].out.n + NC - 1) / NC);
            P.start = (int32_t)clusters;
            P.y = tl_layout(t[q], NC);
            clusters += (int64_t)P.chunks * t[q].out.members;
            const size_t b = tl_smem(t[q], NC);
            if (b > smem) smem = b;
        }
        if (clusters * TL_CS > INT32_MAX)
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "network tail: grid too large");
        NNPOPS__TRY(tl_launch(L, NC, clusters, smem, st));
    }
    return NNPOPS_OK;
}

