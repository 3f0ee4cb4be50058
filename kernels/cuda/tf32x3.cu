/*
 * tf32x3.cu - float32 GEMMs on the tensor cores with float32 accuracy: the 3xTF32 split.
 *
 * TF32 keeps 10 explicit mantissa bits (float32 keeps 23), so a plain TF32 GEMM has a relative
 * error of ~2^-11 per input: far outside the float32 tolerances.  Splitting every input
 *     x = hi + lo,   hi = x rounded to TF32 (to nearest, ties away from zero),   lo = x - hi
 * (lo is exact in float32: x and hi share the exponent and the top 11 bits) gives
 *     A B = A_hi B_hi + A_hi B_lo + A_lo B_hi + A_lo B_lo,
 * and the three first products run as TF32 GEMMs (cuBLAS, CUBLAS_COMPUTE_32F_FAST_TF32, float32
 * accumulation).  A_hi and B_hi are exact in TF32; lo enters the tensor cores with its own TF32
 * rounding (|lo| <= 2^-11 |x|, so that error is <= 2^-22 |x|), and the dropped A_lo B_lo term is
 * <= 2^-22 |A B|: per product about 2^-21, a few float32 roundings, and the sums are float32.
 * The two small products are accumulated first, the large one last.
 *
 * Layout (cuBLAS, column major): C[m x n] = beta C + op(A) op(B), A is the operand split here on
 * every call (activations: it changes every step), B comes split already (weights: split once at
 * model upload by nnpops__tf32_split_cuda).  The split copy of A has its columns 32 floats apart.
 */
#include <stdint.h>
#include <string.h>

#include <cublas_v2.h>

#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

const int SPLIT_THREADS = 256;

__device__ __forceinline__ void tf32_split(float x, float *hi, float *lo) {
    const uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u) { /* inf / nan: passed through */
        *hi = x;
        *lo = 0.0f;
        return;
    }
    /* round the magnitude to 10 explicit mantissa bits, half away from zero */
    uint32_t r = (u + 0x1000u) & 0xffffe000u;
    if ((r & 0x7f800000u) == 0x7f800000u) r = u & 0xffffe000u; /* would overflow: truncate */
    const float h = __uint_as_float(r);
    *hi = h;
    *lo = x - h;
}

/* x: rows x cols (column major, ld ldx, batch entries stride_x apart) -> hi / lo (ld ld_out,
 * batch entries ld_out * cols apart).  A thread per V consecutive rows (V = 4: 16-byte loads and
 * stores, for 16-byte aligned columns on both sides; the last rows scalar), blockIdx.y over the
 * (column, batch entry) pairs: no per-element index divisions, coalesced loads and stores. */
template <int V>
__global__ void split_kernel(int64_t rows, int64_t cols, int64_t batch, const float *__restrict__ x,
                             int64_t ldx, int64_t stride_x, float *__restrict__ hi,
                             float *__restrict__ lo, int64_t ld_out) {
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= rows) return;
    for (int64_t jt = blockIdx.y; jt < cols * batch; jt += gridDim.y) {
        const int64_t t = jt / cols, j = jt - t * cols;
        const int64_t o = (t * cols + j) * ld_out + i;
        const float *src = x + t * stride_x + j * ldx + i;
        if (V == 4 && i + 4 <= rows) {
            const float4 v = *reinterpret_cast<const float4 *>(src);
            float4 h, l;
            tf32_split(v.x, &h.x, &l.x);
            tf32_split(v.y, &h.y, &l.y);
            tf32_split(v.z, &h.z, &l.z);
            tf32_split(v.w, &h.w, &l.w);
            *reinterpret_cast<float4 *>(hi + o) = h;
            *reinterpret_cast<float4 *>(lo + o) = l;
            continue;
        }
        for (int u = 0; u < V && i + u < rows; u++) tf32_split(src[u], hi + o + u, lo + o + u);
    }
}

nnpops_status blas_check(cublasStatus_t s, const char *file, int line, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return NNPOPS_OK;
    return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: %s: %s", file, line, what,
                        cublasGetStatusString(s));
}

} /* namespace */

extern "C" nnpops_status nnpops__tf32_split_cuda(int64_t rows, int64_t cols, int64_t batch,
                                                 const float *x, int64_t ldx, int64_t stride_x,
                                                 float *hi, float *lo, int64_t ld_out,
                                                 void *stream) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return NNPOPS_OK;
    const auto a16 = [](const void *p, int64_t ld) {
        return ((uintptr_t)p & 15) == 0 && ld % 4 == 0;
    };
    const int vec = a16(x, ldx) && (batch == 1 || stride_x % 4 == 0) && a16(hi, ld_out) &&
                    a16(lo, ld_out);
    const int64_t per = vec ? 4 * SPLIT_THREADS : SPLIT_THREADS;
    const int64_t bx = (rows + per - 1) / per, by = cols * batch;
    if (bx > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "TF32 split of %lld rows is too large",
                            (long long)rows);
    const dim3 grid((unsigned)bx, (unsigned)(by < 65535 ? by : 65535));
    if (vec)
        split_kernel<4><<<grid, SPLIT_THREADS, 0, as_stream(stream)>>>(rows, cols, batch, x, ldx,
                                                                        stride_x, hi, lo, ld_out);
    else
        split_kernel<1><<<grid, SPLIT_THREADS, 0, as_stream(stream)>>>(rows, cols, batch, x, ldx,
                                                                        stride_x, hi, lo, ld_out);
    NNPOPS__LAUNCH_CHECK("TF32 split");
    return NNPOPS_OK;
}

/* the split copy of A keeps its columns 32 floats apart (128 bytes): the tensor-core kernels
 * need 16-byte aligned columns, which an odd column count would not give */
static int64_t split_ld(int64_t rows) { return (rows + 31) / 32 * 32; }

extern "C" size_t nnpops__gemm_3xtf32_work_bytes(int64_t rows_a, int64_t cols_a, int64_t batch) {
    if (rows_a <= 0 || cols_a <= 0 || batch <= 0) return 0;
    return 2 * align256(sizeof(float) * (size_t)split_ld(rows_a) * (size_t)cols_a * (size_t)batch);
}

extern "C" nnpops_status nnpops__gemm_cuda_3xtf32(
    void *blas, void *stream, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
    const float *A, int64_t lda, int64_t stride_a, const float *B_hi, const float *B_lo,
    int64_t ldb, int64_t stride_b, double beta, float *C, int64_t ldc, int64_t stride_c,
    int64_t batch, void *work, size_t work_bytes) {
    if (m <= 0 || n <= 0 || batch <= 0) return NNPOPS_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX ||
        ldc > INT32_MAX || batch > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "GEMM of %lld x %lld x %lld is too large",
                            (long long)m, (long long)n, (long long)k);
    const int64_t ra = trans_a ? k : m, ca = trans_a ? m : k;
    const size_t need = nnpops__gemm_3xtf32_work_bytes(ra, ca, batch);
    if (need > work_bytes)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "3xTF32 GEMM: work space of %zu bytes, %zu needed", work_bytes, need);
    float *A_hi = (float *)work;
    float *A_lo = (float *)((char *)work + need / 2);
    const int64_t lds = split_ld(ra);
    nnpops_status st =
        nnpops__tf32_split_cuda(ra, ca, batch, A, lda, stride_a, A_hi, A_lo, lds, stream);
    if (st != NNPOPS_OK) return st;
    cublasHandle_t h = (cublasHandle_t)blas;
    if ((st = blas_check(cublasSetStream(h, as_stream(stream)), __FILE__, __LINE__,
                         "cublasSetStream")) != NNPOPS_OK)
        return st;
    const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float one = 1.0f, b0 = (float)beta;
    const int lda_c = (int)lds;
    const float *As[3] = {A_lo, A_hi, A_hi};
    const float *Bs[3] = {B_hi, B_lo, B_hi};
    for (int p = 0; p < 3; p++) {
        const float *bet = p == 0 ? &b0 : &one;
        cublasStatus_t s;
        if (batch == 1)
            s = cublasGemmEx(h, ta, tb, (int)m, (int)n, (int)k, &one, As[p], CUDA_R_32F, lda_c,
                             Bs[p], CUDA_R_32F, (int)ldb, bet, C, CUDA_R_32F, (int)ldc,
                             CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
        else
            s = cublasGemmStridedBatchedEx(
                h, ta, tb, (int)m, (int)n, (int)k, &one, As[p], CUDA_R_32F, lda_c,
                (long long)(lds * ca), Bs[p], CUDA_R_32F, (int)ldb, (long long)stride_b, bet, C,
                CUDA_R_32F, (int)ldc, (long long)stride_c, (int)batch, CUBLAS_COMPUTE_32F_FAST_TF32,
                CUBLAS_GEMM_DEFAULT);
        if ((st = blas_check(s, __FILE__, __LINE__, "3xTF32 GEMM (cublasGemmEx)")) != NNPOPS_OK)
            return st;
    }
    return NNPOPS_OK;
}
