/*
 * mlp.cu - dense layers, CELU and the fused bias + CELU steps on the GPU: twins of
 * kernels/cpu/mlp.c and kernels/cpu/fused.c, float and double, and the cuBLAS products of the
 * GPU path (nnpops__gemm_cuda).
 *
 * Layout (kernels.h): feature-major matrices X[f * ld + r] for atom column r < n.  In cuBLAS's
 * column-major terms such a matrix is an (n x F) matrix with leading dimension ld, and a row-major
 * weight W [out][in] is an (in x out) matrix with leading dimension in, i.e. W^T.  Hence
 *     forward   Y (n x out) = X (n x in) . W^T        -> gemm(N, N, n, out, in, X, W, Y)
 *     backward  dX (n x in) = dY (n x out) . W        -> gemm(N, T, n, in, out, dY, W, dX)
 * and an ensemble's fused layers (ANI's, potentials/ani/ani_cuda.c) are the same products with the
 * members' weights stacked (first layer: one GEMM over [members * h1][in]) or strided (deeper
 * layers: one strided-batched GEMM, a member per batch entry).  Every product uses the plain FP32
 * or FP64 compute type (CUBLAS_COMPUTE_32F / _64F; no TF32).
 *
 * Elementwise kernels (bias + CELU, CELU adjoints) run a 2-D grid: x over 256-column tiles of a
 * row, y over rows (looping when there are more than 65535 rows).
 */
#include <cublas_v2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

const int EW_THREADS = 256;

dim3 ew_grid(int64_t n, int64_t width) {
    const int64_t gx = (n + EW_THREADS - 1) / EW_THREADS;
    const int64_t gy = width < 65535 ? width : 65535;
    return dim3((unsigned)(gx > 0 ? gx : 1), (unsigned)(gy > 0 ? gy : 1), 1);
}

/* Elementwise kernels over (n rows) x (width columns): a thread per V consecutive rows (V = 4:
 * float only, 16-byte loads and stores, for 16-byte aligned columns; the last rows scalar). */
template <typename R> __device__ __forceinline__ R celu_of(R x, R al, R inv) {
    return x > 0 ? x : al * rexpm1(x * inv);
}

/* The stacked copy (float, out3 != NULL; see kernels_cuda.h): V values of column f from row r,
 * split into lo (block 0) and hi (blocks 1, 2). */
template <typename R, int V>
__device__ __forceinline__ void put_stacked(const R (&v)[V], int64_t f, int64_t r, int64_t g,
                                            R *out3, int64_t ld3) {
    if constexpr (sizeof(R) == 4) put_split3<V>(v, out3 + stack3_col(f, g) * ld3 + r, g * ld3, 0);
}

/* out3 == NULL: Z = CELU(Z + b) in place; else also the stacked copy. */
template <typename R, int V>
__global__ void bias_celu_kernel(int64_t n, int64_t width, R al, R inv, const R *b, R *Z,
                                 int64_t ldz, int64_t g, R *out3, int64_t ld3) {
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) {
        const R bf = b ? b[f] : (R)0;
        R *z = Z + f * ldz + r;
        if constexpr (V == 4 && sizeof(R) == 4) {
            if (r + 4 <= n) {
                float4 q = *reinterpret_cast<const float4 *>(z);
                q.x = celu_of(q.x + bf, al, inv);
                q.y = celu_of(q.y + bf, al, inv);
                q.z = celu_of(q.z + bf, al, inv);
                q.w = celu_of(q.w + bf, al, inv);
                *reinterpret_cast<float4 *>(z) = q;
                if (out3) put_stacked<R, 4>({q.x, q.y, q.z, q.w}, f, r, g, out3, ld3);
                continue;
            }
        }
        for (int u = 0; u < V && r + u < n; u++) {
            const R a = celu_of(z[u] + bf, al, inv);
            z[u] = a;
            if (out3) put_stacked<R, 1>({a}, f, r + u, g, out3, ld3);
        }
    }
}

/* Whether V = 4 applies: float, and every column start 16-byte aligned. */
template <typename R> bool ew_vec4(const void *p, int64_t ld) {
    return sizeof(R) == 4 && ((uintptr_t)p & 15) == 0 && ld % 4 == 0;
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
        dZ[f * lddz + r] = x > 0 ? da : da * rexp(x * inv);
    }
}

template <typename R> __device__ __forceinline__ R celu_grad_of(R x, R da, R inv) {
    return x > 0 ? da : da * (x * inv + (R)1);
}

/* out3 == NULL: A = dA CELU'(A) in place; else that only into the stacked copy (A unchanged). */
template <typename R, int V>
__global__ void celu_bwd_act_kernel(int64_t n, int64_t width, R inv, const R *dA, int64_t ldda,
                                    R *A, int64_t lda, int64_t g, R *out3, int64_t ld3) {
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) {
        R *a = A + f * lda + r;
        const R *gr = dA + f * ldda + r;
        if constexpr (V == 4 && sizeof(R) == 4) {
            if (r + 4 <= n) {
                float4 q = *reinterpret_cast<const float4 *>(a);
                const float4 d = *reinterpret_cast<const float4 *>(gr);
                q.x = celu_grad_of(q.x, d.x, inv);
                q.y = celu_grad_of(q.y, d.y, inv);
                q.z = celu_grad_of(q.z, d.z, inv);
                q.w = celu_grad_of(q.w, d.w, inv);
                if (out3) put_stacked<R, 4>({q.x, q.y, q.z, q.w}, f, r, g, out3, ld3);
                else *reinterpret_cast<float4 *>(a) = q;
                continue;
            }
        }
        for (int u = 0; u < V && r + u < n; u++) {
            const R v = celu_grad_of(a[u], gr[u], inv);
            if (out3) put_stacked<R, 1>({v}, f, r + u, g, out3, ld3);
            else a[u] = v;
        }
    }
}

template <typename R>
__global__ void broadcast_rows_kernel(int64_t n, int64_t width, const R *b, R *Y, int64_t ldy) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    for (int64_t f = blockIdx.y; f < width; f += gridDim.y) Y[f * ldy + r] = b[f];
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
    /* cublasSetStream also resets the handle's work space to cuBLAS's default pool: only when the
     * stream changes, so that the work space the GPU step bound (cublasSetWorkspace) stays */
    cudaStream_t cur = NULL;
    cublasStatus_t s = cublasGetStream(h, &cur);
    if (s != CUBLAS_STATUS_SUCCESS || cur != as_stream(stream))
        s = cublasSetStream(h, as_stream(stream));
    if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(s, __FILE__, __LINE__, "cublasSetStream");
    const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float a32 = 1.0f, b32 = (float)beta;
    const double a64 = 1.0, b64 = beta;
    const bool f64 = precision == NNPOPS_FLOAT64;
    const cudaDataType dt = f64 ? CUDA_R_64F : CUDA_R_32F;
    const cublasComputeType_t ct = f64 ? CUBLAS_COMPUTE_64F
                                   : precision == NNPOPS__GEMM_FAST_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                         : CUBLAS_COMPUTE_32F;
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
        if (ew_vec4<R>(Z, ldz))                                                                    \
            bias_celu_kernel<R, 4><<<ew_grid((n + 3) / 4, width), EW_THREADS, 0,                   \
                                     as_stream(stream)>>>(n, width, (R)alpha, (R)(1.0 / alpha), b, \
                                                          Z, ldz, 1, nullptr, 0);                  \
        else                                                                                       \
            bias_celu_kernel<R, 1><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(       \
                n, width, (R)alpha, (R)(1.0 / alpha), b, Z, ldz, 1, nullptr, 0);                   \
        NNPOPS__LAUNCH_CHECK("bias + CELU");                                                       \
        return NNPOPS_OK;                                                                          \
    }                                                                                              \
    extern "C" nnpops_status nnpops__celu_backward_act_cuda_##SUF(                                 \
        int64_t n, int64_t width, double alpha, const R *dA, int64_t ldda, R *A, int64_t lda,      \
        void *stream) {                                                                            \
        if (n <= 0 || width <= 0) return NNPOPS_OK;                                                \
        if (ew_vec4<R>(A, lda) && ew_vec4<R>(dA, ldda))                                            \
            celu_bwd_act_kernel<R, 4><<<ew_grid((n + 3) / 4, width), EW_THREADS, 0,                \
                                        as_stream(stream)>>>(n, width, (R)(1.0 / alpha), dA, ldda, \
                                                             A, lda, 1, nullptr, 0);               \
        else                                                                                       \
            celu_bwd_act_kernel<R, 1><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(    \
                n, width, (R)(1.0 / alpha), dA, ldda, A, lda, 1, nullptr, 0);                      \
        NNPOPS__LAUNCH_CHECK("CELU backward (from activations)");                                  \
        return NNPOPS_OK;                                                                          \
    }

NNPOPS__MLP_TWINS(f32, float)
NNPOPS__MLP_TWINS(f64, double)

extern "C" nnpops_status nnpops__bias_celu_stack_cuda_f32(int64_t n, int64_t width, double alpha,
                                                          const float *b, float *Z, int64_t ldz,
                                                          int64_t g, float *out3, int64_t ld3,
                                                          void *stream) {
    if (n <= 0 || width <= 0) return NNPOPS_OK;
    if (g <= 0 || width % g != 0)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "stacked bias + CELU: group %lld, width %lld",
                            (long long)g, (long long)width);
    if (ew_vec4<float>(Z, ldz) && ew_vec4<float>(out3, ld3))
        bias_celu_kernel<float, 4><<<ew_grid((n + 3) / 4, width), EW_THREADS, 0,
                                     as_stream(stream)>>>(n, width, (float)alpha,
                                                          (float)(1.0 / alpha), b, Z, ldz, g, out3,
                                                          ld3);
    else
        bias_celu_kernel<float, 1><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(
            n, width, (float)alpha, (float)(1.0 / alpha), b, Z, ldz, g, out3, ld3);
    NNPOPS__LAUNCH_CHECK("bias + CELU (stacked)");
    return NNPOPS_OK;
}

extern "C" nnpops_status nnpops__celu_backward_act_stack_cuda_f32(
    int64_t n, int64_t width, double alpha, const float *dA, int64_t ldda, float *A, int64_t lda,
    int64_t g, float *out3, int64_t ld3, void *stream) {
    if (n <= 0 || width <= 0) return NNPOPS_OK;
    if (g <= 0 || width % g != 0)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "stacked CELU backward: group %lld, width %lld",
                            (long long)g, (long long)width);
    if (ew_vec4<float>(A, lda) && ew_vec4<float>(dA, ldda) && ew_vec4<float>(out3, ld3))
        celu_bwd_act_kernel<float, 4><<<ew_grid((n + 3) / 4, width), EW_THREADS, 0,
                                        as_stream(stream)>>>(n, width, (float)(1.0 / alpha), dA,
                                                             ldda, A, lda, g, out3, ld3);
    else
        celu_bwd_act_kernel<float, 1><<<ew_grid(n, width), EW_THREADS, 0, as_stream(stream)>>>(
            n, width, (float)(1.0 / alpha), dA, ldda, A, lda, g, out3, ld3);
    NNPOPS__LAUNCH_CHECK("CELU backward (stacked)");
    return NNPOPS_OK;
}
