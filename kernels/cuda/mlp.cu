/*
 * mlp.cu - dense layers, CELU and the fused network ops on the GPU: twins of kernels/cpu/mlp.c and
 * kernels/cpu/fused.c, float and double.
 *
 * Layout (kernels.h): feature-major matrices X[f * ld + r] for atom column r < n.  In cuBLAS's
 * column-major terms such a matrix is an (n x F) matrix with leading dimension ld, and a row-major
 * weight W [out][in] is an (in x out) matrix with leading dimension in, i.e. W^T.  Hence
 *     forward   Y (n x out) = X (n x in) . W^T        -> gemm(N, N, n, out, in, X, W, Y)
 *     backward  dX (n x in) = dY (n x out) . W        -> gemm(N, T, n, in, out, dY, W, dX)
 * and the ensemble's fused layers (potentials/ani/ani_cuda.c) are the same products with the
 * members' weights stacked (first layer: one GEMM over [members * h1][in]) or strided (deeper
 * layers: one strided-batched GEMM, a member per batch entry).  Every product uses the plain FP32
 * or FP64 compute type (CUBLAS_COMPUTE_32F / _64F; no TF32).
 *
 * Elementwise kernels (bias + CELU, CELU adjoints) run a 2-D grid: x over 256-column tiles of a
 * row, y over rows (looping when there are more than 65535 rows).  The output layer (ani_output)
 * runs a block per (32 columns, member) whose 8 warps split the width (partial sums in shared
 * memory), then (need_grad) overwrite the last hidden activations with the seed of the backward
 * pass; each member adds its output (over the ensemble size, for the mean) to the atom energy with
 * an atomicAdd in double, so on the GPU atom_energy must be zero on entry (the CPU twin writes it).
 * With args->deterministic (option deterministic) the output layer runs ani_output_kernel instead:
 * one thread per column sums the members in order and writes the atom energy (no atomics).
 */
#include <cublas_v2.h>
#include <math.h>
#include <string.h>

#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

const int EW_THREADS = 256;

template <typename R> __device__ __forceinline__ R rexpm1(R x);
template <> __device__ __forceinline__ float rexpm1(float x) { return expm1f(x); }
template <> __device__ __forceinline__ double rexpm1(double x) { return expm1(x); }
template <typename R> __device__ __forceinline__ R rexp_(R x);
template <> __device__ __forceinline__ float rexp_(float x) { return expf(x); }
template <> __device__ __forceinline__ double rexp_(double x) { return exp(x); }

dim3 ew_grid(int64_t n, int64_t width) {
    const int64_t gx = (n + EW_THREADS - 1) / EW_THREADS;
    const int64_t gy = width < 65535 ? width : 65535;
    return dim3((unsigned)(gx > 0 ? gx : 1), (unsigned)(gy > 0 ? gy : 1), 1);
}

template <typename R>
__global__ void bias_celu_kernel(int64_t n, int64_t width, R al, R inv, const R *b, R *Z,
                                 int64_t ldz) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) {
        const R x = Z[f * ldz + r] + (b ? b[f] : (R)0);
        Z[f * ldz + r] = x > 0 ? x : al * rexpm1(x * inv);
    }
}

template <typename R>
__global__ void celu_fwd_kernel(int64_t n, int64_t width, R al, R inv, const R *Z, int64_t ldz, R *A,
                                int64_t lda) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) {
        const R x = Z[f * ldz + r];
        A[f * lda + r] = x > 0 ? x : al * rexpm1(x * inv);
    }
}

template <typename R>
__global__ void celu_bwd_kernel(int64_t n, int64_t width, R inv, const R *Z, int64_t ldz,
                                const R *dA, int64_t ldda, R *dZ, int64_t lddz) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) {
        const R x = Z[f * ldz + r];
        const R da = dA[f * ldda + r];
        dZ[f * lddz + r] = x > 0 ? da : da * rexp_(x * inv);
    }
}

template <typename R>
__global__ void celu_bwd_act_kernel(int64_t n, int64_t width, R inv, const R *dA, int64_t ldda,
                                    R *A, int64_t lda) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) {
        const R x = A[f * lda + r];
        const R da = dA[f * ldda + r];
        A[f * lda + r] = x > 0 ? da : da * (x * inv + (R)1);
    }
}

template <typename R>
__global__ void broadcast_rows_kernel(int64_t n, int64_t width, const R *b, R *Y, int64_t ldy) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) Y[f * ldy + r] = b[f];
}

template <typename R>
__global__ void ani_output_kernel(const nnpops__ani_output_args g, const R *w, const R *b, R *A) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
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
            const R seed = g.member < 0 ? (R)(1.0 / (double)g.ensemble)
                                        : (gm == g.member ? (R)1 : (R)0);
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
__global__ void ani_output_split_kernel(const nnpops__ani_output_args g, const R *__restrict__ w,
                                        const R *__restrict__ b, R *__restrict__ A) {
    __shared__ R part[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int32_t m = blockIdx.y, gm = g.member_offset + m;
    const int64_t r = (int64_t)blockIdx.x * 32 + tx;
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
        const double yv = (double)y;
        if (g.member_energy) g.member_energy[(int64_t)c * g.ensemble + gm] = yv + g.self_energy;
        double add = 0.0;
        if (g.member < 0) add = yv / (double)g.ensemble + (gm == 0 ? g.self_energy : 0.0);
        else if (gm == g.member) add = yv + g.self_energy;
        if (add != 0.0) atomicAdd(g.atom_energy + c, add);
    }
    if (!g.need_grad || c < 0) return;
    const R inv = (R)(1.0 / g.alpha);
    const R seed = g.member < 0 ? (R)(1.0 / (double)g.ensemble) : (gm == g.member ? (R)1 : (R)0);
#pragma unroll 4
    for (int32_t k = k0; k < k1; k++) {
        const R x = a[(int64_t)k * g.lda];
        const R da = wm[k] * seed;
        a[(int64_t)k * g.lda] = x > 0 ? da : da * (x * inv + (R)1);
    }
}

template <typename R> constexpr int prec_of() { return sizeof(R) == 4 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64; }

nnpops_status blas_fail(cublasStatus_t s, const char *file, int line, const char *what) {
    return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: %s: %s", file, line, what,
                        cublasGetStatusString(s));
}

template <typename R>
nnpops_status dense_forward(int64_t n, int64_t in, int64_t out, const R *W, const R *b, const R *X,
                            int64_t ldx, R *Y, int64_t ldy, void *blas, void *stream) {
    if (n <= 0 || out <= 0) return NNPOPS_OK;
    if (b) {
        broadcast_rows_kernel<R><<<ew_grid(n, out), EW_THREADS, 0, as_stream(stream)>>>(n, out, b,
                                                                                          Y, ldy);
        NNPOPS__LAUNCH_CHECK("dense forward (bias)");
    }
    return nnpops__gemm_cuda(blas, stream, prec_of<R>(), 0, 0, n, out, in, X, ldx, 0, W, in, 0,
                             b ? 1.0 : 0.0, Y, ldy, 0, 1);
}

template <typename R>
nnpops_status dense_backward(int64_t n, int64_t in, int64_t out, const R *W, const R *dY,
                             int64_t ldy, R *dX, int64_t ldx, void *blas, void *stream) {
    if (n <= 0 || in <= 0) return NNPOPS_OK;
    return nnpops__gemm_cuda(blas, stream, prec_of<R>(), 0, 1, n, in, out, dY, ldy, 0, W, in, 0,
                             0.0, dX, ldx, 0, 1);
}

} /* namespace */

extern "C" nnpops_status nnpops__gemm_cuda(void *blas, void *stream, int precision, int trans_a,
                                           int trans_b, int64_t m, int64_t n, int64_t k,
                                           const void *A, int64_t lda, int64_t stride_a,
                                           const void *B, int64_t ldb, int64_t stride_b,
                                           double beta, void *C, int64_t ldc, int64_t stride_c,
                                           int64_t batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return NNPOPS_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX ||
        ldc > INT32_MAX || batch > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "GEMM of %lld x %lld x %lld is too large",
                            (long long)m, (long long)n, (long long)k);
    cublasHandle_t h = (cublasHandle_t)blas;
    cublasStatus_t s = cublasSetStream(h, as_stream(stream));
    if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(s, __FILE__, __LINE__, "cublasSetStream");
    const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float a32 = 1.0f, b32 = (float)beta;
    const double a64 = 1.0, b64 = beta;
    const bool f64 = precision == NNPOPS_FLOAT64;
    const cudaDataType dt = f64 ? CUDA_R_64F : CUDA_R_32F;
    const cublasComputeType_t ct = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    const void *alpha = f64 ? (const void *)&a64 : (const void *)&a32;
    const void *bet = f64 ? (const void *)&b64 : (const void *)&b32;
    if (batch == 1) {
        s = cublasGemmEx(h, ta, tb, (int)m, (int)n, (int)k, alpha, A, dt, (int)lda, B, dt,
                         (int)ldb, bet, C, dt, (int)ldc, ct, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(s, __FILE__, __LINE__, "cublasGemmEx");
    } else {
        s = cublasGemmStridedBatchedEx(h, ta, tb, (int)m, (int)n, (int)k, alpha, A, dt, (int)lda,
                                       (long long)stride_a, B, dt, (int)ldb, (long long)stride_b,
                                       bet, C, dt, (int)ldc, (long long)stride_c, (int)batch, ct,
                                       CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS)
            return blas_fail(s, __FILE__, __LINE__, "cublasGemmStridedBatchedEx");
    }
    return NNPOPS_OK;
}

#define NNPOPS__MLP_TWINS(SUF, R)                                                                  \
    extern "C" nnpops_status nnpops__dense_forward_cuda_##SUF(                                     \
        int64_t n, int64_t in, int64_t out, const R *W, const R *b, const R *X, int64_t ldx, R *Y, \
        int64_t ldy, void *blas, void *stream) {                                                   \
        return dense_forward<R>(n, in, out, W, b, X, ldx, Y, ldy, blas, stream);                   \
    }                                                                                              \
    extern "C" nnpops_status nnpops__dense_backward_cuda_##SUF(                                    \
        int64_t n, int64_t in, int64_t out, const R *W, const R *dY, int64_t ldy, R *dX,           \
        int64_t ldx, void *blas, void *stream) {                                                   \
        return dense_backward<R>(n, in, out, W, dY, ldy, dX, ldx, blas, stream);                   \
    }                                                                                              \
    extern "C" nnpops_status nnpops__celu_forward_cuda_##SUF(int64_t n, int64_t width,             \
                                                             double alpha, const R *Z,             \
                                                             int64_t ldz, R *A, int64_t lda,       \
                                                             void *stream) {                       \
        if (n <= 0 || width <= 0) return NNPOPS_OK;                                                \
        celu_fwd_kernel<R><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(               \
            n, width, (R)alpha, (R)(1.0 / alpha), Z, ldz, A, lda);                                 \
        NNPOPS__LAUNCH_CHECK("CELU forward");                                                      \
        return NNPOPS_OK;                                                                          \
    }                                                                                              \
    extern "C" nnpops_status nnpops__celu_backward_cuda_##SUF(                                     \
        int64_t n, int64_t width, double alpha, const R *Z, int64_t ldz, const R *dA,              \
        int64_t ldda, R *dZ, int64_t lddz, void *stream) {                                         \
        if (n <= 0 || width <= 0) return NNPOPS_OK;                                                \
        celu_bwd_kernel<R><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(               \
            n, width, (R)(1.0 / alpha), Z, ldz, dA, ldda, dZ, lddz);                               \
        NNPOPS__LAUNCH_CHECK("CELU backward");                                                     \
        return NNPOPS_OK;                                                                          \
    }                                                                                              \
    extern "C" nnpops_status nnpops__bias_celu_cuda_##SUF(int64_t n, int64_t width, double alpha,  \
                                                          const R *b, R *Z, int64_t ldz,           \
                                                          void *stream) {                          \
        if (n <= 0 || width <= 0) return NNPOPS_OK;                                                \
        bias_celu_kernel<R><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(              \
            n, width, (R)alpha, (R)(1.0 / alpha), b, Z, ldz);                                      \
        NNPOPS__LAUNCH_CHECK("bias + CELU");                                                       \
        return NNPOPS_OK;                                                                          \
    }                                                                                              \
    extern "C" nnpops_status nnpops__celu_backward_act_cuda_##SUF(                                 \
        int64_t n, int64_t width, double alpha, const R *dA, int64_t ldda, R *A, int64_t lda,      \
        void *stream) {                                                                            \
        if (n <= 0 || width <= 0) return NNPOPS_OK;                                                \
        celu_bwd_act_kernel<R><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(           \
            n, width, (R)(1.0 / alpha), dA, ldda, A, lda);                                         \
        NNPOPS__LAUNCH_CHECK("CELU backward (from activations)");                                  \
        return NNPOPS_OK;                                                                          \
    }                                                                                              \
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

NNPOPS__MLP_TWINS(f32, float)
NNPOPS__MLP_TWINS(f64, double)

/* ---- small-n grouped GEMM (float32), twin of nnpops__small_gemm_cpu_f32 ----------------------
 * One launch per NNPOPS__SG_PER_LAUNCH problems (their shapes passed by value).  A block computes
 * 32 rows x nc columns (nc = 32 or 64) of one batch entry over one k-slice of tks = 4096 / nc
 * values: it loads its whole A tile (32 x tks, coalesced along the contiguous index) and B tile
 * (tks x nc, only columns < n) into shared memory in one go (every load in flight at once: the
 * weights are streamed once, the cost at small n), then each thread sums 4 rows x 1-2 columns in
 * plain FP32 FMA.  With one k-slice the block applies the epilogue and writes C; otherwise it
 * writes its partial sums to the work space and a second grouped kernel sums the slices in order
 * and applies the epilogue (no atomics: deterministic). */
namespace {

const int SG_TM = 32, SG_THREADS = 256, SG_TILE = 4096;

struct SgProb {
    nnpops__sg_problem p;
    int64_t nc, tks, ks, mt, gemm_start, red_start, part_off;
};
struct SgLaunch {
    int32_t count;
    float alpha, inv;
    SgProb q[NNPOPS__SG_PER_LAUNCH];
};

__device__ __forceinline__ float sg_epilogue(const nnpops__sg_problem &p, float al, float inv,
                                             float s, int64_t t, int64_t i, float *c) {
    if (p.epilogue == NNPOPS__SG_BIAS_CELU) {
        const float x = s + (p.bias ? p.bias[t * p.m + i] : 0.0f);
        return x > 0 ? x : al * expm1f(x * inv);
    }
    if (p.epilogue == NNPOPS__SG_CELU_ACT) {
        const float x = *c;
        return x > 0 ? s : s * (x * inv + 1.0f);
    }
    return s;
}

__global__ void __launch_bounds__(SG_THREADS) sg_gemm_kernel(const SgLaunch L, float *work) {
    __shared__ float As[128][SG_TM + 1];
    __shared__ float Bs[SG_TILE];
    int pi = 0;
    while (pi + 1 < L.count && (int64_t)blockIdx.x >= L.q[pi + 1].gemm_start) pi++;
    const SgProb &Q = L.q[pi];
    const nnpops__sg_problem &p = Q.p;
    int64_t lb = (int64_t)blockIdx.x - Q.gemm_start;
    const int64_t mi = lb % Q.mt;
    lb /= Q.mt;
    const int64_t kb = lb % Q.ks, t = lb / Q.ks;
    const int nc = (int)Q.nc, tks = (int)Q.tks, lg = nc == 32 ? 7 : 6, lgc = nc == 32 ? 5 : 6;
    const int64_t i0 = mi * SG_TM, k0 = kb * tks;
    const int kl = (int)(p.k - k0 < tks ? p.k - k0 : tks);
    const float *__restrict__ A = p.A + t * p.stride_a;
    const float *__restrict__ B = p.B + t * p.stride_b;
    const int tid = threadIdx.x;
    /* A tile: 32 x tks values (16 or 8 per thread), B tile: tks x nc = 4096 (16 per thread) */
    float ra[16], rb[16];
#pragma unroll
    for (int u = 0; u < 16; u++) {
        const int e = tid + SG_THREADS * u;
        int ii, jj;
        if (p.trans) {
            ii = e & (SG_TM - 1);
            jj = e >> 5;
        } else {
            ii = e >> lg;
            jj = e & (tks - 1);
        }
        float v = 0.0f;
        if (e < SG_TM * tks && jj < kl && i0 + ii < p.m)
            v = p.trans ? __ldg(A + (k0 + jj) * p.lda + i0 + ii) : __ldg(A + (i0 + ii) * p.lda + k0 + jj);
        ra[u] = v;
    }
#pragma unroll
    for (int u = 0; u < 16; u++) {
        const int e = tid + SG_THREADS * u;
        const int jj = e >> lgc, rr = e & (nc - 1);
        float v = 0.0f;
        if (jj < kl && rr < p.n) v = __ldg(B + (k0 + jj) * p.ldb + rr);
        rb[u] = v;
    }
#pragma unroll
    for (int u = 0; u < 16; u++) {
        const int e = tid + SG_THREADS * u;
        if (e >= SG_TM * tks) break;
        int ii, jj;
        if (p.trans) {
            ii = e & (SG_TM - 1);
            jj = e >> 5;
        } else {
            ii = e >> lg;
            jj = e & (tks - 1);
        }
        As[jj][ii] = ra[u];
    }
#pragma unroll
    for (int u = 0; u < 16; u++) Bs[tid + SG_THREADS * u] = rb[u];
    __syncthreads();
    const int lane = tid & 31, ty = tid >> 5;
    float acc[4][2] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
    if (nc == 32) {
#pragma unroll 4
        for (int j = 0; j < kl; j++) {
            const float b0 = Bs[j * 32 + lane];
#pragma unroll
            for (int q = 0; q < 4; q++) acc[q][0] = fmaf(As[j][ty * 4 + q], b0, acc[q][0]);
        }
    } else {
#pragma unroll 4
        for (int j = 0; j < kl; j++) {
            const float b0 = Bs[j * 64 + lane], b1 = Bs[j * 64 + 32 + lane];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const float a = As[j][ty * 4 + q];
                acc[q][0] = fmaf(a, b0, acc[q][0]);
                acc[q][1] = fmaf(a, b1, acc[q][1]);
            }
        }
    }
    float *C = p.C + t * p.stride_c;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int64_t i = i0 + ty * 4 + q;
        if (i >= p.m) break;
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int r = lane + 32 * c;
            if (r >= nc || r >= p.n) continue;
            if (Q.ks == 1) {
                float *dst = C + i * p.ldc + r;
                *dst = sg_epilogue(p, L.alpha, L.inv, acc[q][c], t, i, dst);
            } else {
                work[Q.part_off + ((t * Q.ks + kb) * p.m + i) * nc + r] = acc[q][c];
            }
        }
    }
}

__global__ void __launch_bounds__(SG_THREADS) sg_reduce_kernel(const SgLaunch L,
                                                               const float *__restrict__ work) {
    int pi = 0;
    while (pi + 1 < L.count && (int64_t)blockIdx.x >= L.q[pi + 1].red_start) pi++;
    const SgProb &Q = L.q[pi];
    const nnpops__sg_problem &p = Q.p;
    const int64_t e = ((int64_t)blockIdx.x - Q.red_start) * SG_THREADS + threadIdx.x;
    const int64_t nc = Q.nc;
    if (e >= p.batch * p.m * nc) return;
    const int64_t r = e % nc, i = (e / nc) % p.m, t = e / (nc * p.m);
    if (r >= p.n) return;
    const float *w = work + Q.part_off + (t * Q.ks * p.m + i) * nc + r;
    float s = 0.0f;
    for (int64_t kb = 0; kb < Q.ks; kb++) s += w[kb * p.m * nc];
    float *dst = p.C + t * p.stride_c + i * p.ldc + r;
    *dst = sg_epilogue(p, L.alpha, L.inv, s, t, i, dst);
}

} /* namespace */

extern "C" nnpops_status nnpops__small_gemm_cuda_f32(const nnpops__sg_group *g, void *work,
                                                     size_t work_bytes, void *stream) {
    if (g->count < 0 || g->count > NNPOPS__SG_MAX_PROBLEMS)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "small GEMM: %d problems (at most %d)",
                            (int)g->count, NNPOPS__SG_MAX_PROBLEMS);
    if (nnpops__small_gemm_work_bytes(g) > work_bytes)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "small GEMM: work space of %zu bytes, %zu needed",
                            work_bytes, nnpops__small_gemm_work_bytes(g));
    for (int32_t c0 = 0; c0 < g->count; c0 += NNPOPS__SG_PER_LAUNCH) {
        SgLaunch L;
        memset(&L, 0, sizeof L);
        L.alpha = (float)g->alpha;
        L.inv = (float)(1.0 / g->alpha);
        int64_t nb = 0, nr = 0, off = 0;
        for (int32_t q = c0; q < g->count && q < c0 + NNPOPS__SG_PER_LAUNCH; q++) {
            const nnpops__sg_problem *p = &g->p[q];
            if (p->m <= 0 || p->n <= 0 || p->batch <= 0) continue;
            if (p->n > NNPOPS__SG_MAX_COLS || p->m > INT32_MAX || p->k > INT32_MAX)
                return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                                    "small GEMM: %lld columns (at most %d)", (long long)p->n,
                                    NNPOPS__SG_MAX_COLS);
            SgProb &Q = L.q[L.count++];
            Q.p = *p;
            nnpops__sg_split(p, &Q.nc, &Q.tks, &Q.ks);
            Q.mt = (p->m + SG_TM - 1) / SG_TM;
            Q.gemm_start = nb;
            Q.red_start = nr;
            Q.part_off = off;
            nb += p->batch * Q.ks * Q.mt;
            if (Q.ks > 1) {
                nr += (p->batch * p->m * Q.nc + SG_THREADS - 1) / SG_THREADS;
                off += nnpops__sg_partial_floats(p);
            }
        }
        if (nb == 0) continue;
        if (nb > INT32_MAX || nr > INT32_MAX)
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "small GEMM: grid too large");
        sg_gemm_kernel<<<(unsigned)nb, SG_THREADS, 0, as_stream(stream)>>>(L, (float *)work);
        NNPOPS__LAUNCH_CHECK("small GEMM");
        if (nr > 0) {
            sg_reduce_kernel<<<(unsigned)nr, SG_THREADS, 0, as_stream(stream)>>>(L,
                                                                                (const float *)work);
            NNPOPS__LAUNCH_CHECK("small GEMM (k-slice sums)");
        }
    }
    return NNPOPS_OK;
}
