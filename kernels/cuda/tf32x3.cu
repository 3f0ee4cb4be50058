/*
 * tf32x3.cu - float32 GEMMs on the tensor cores with float32 accuracy: the 3xTF32 split.
 *
 * TF32 keeps 10 explicit mantissa bits (float32 keeps 23), so a plain TF32 GEMM has a relative
 * error of ~2^-11 per input: far outside the float32 tolerances.  Splitting every input
 *     x = hi + lo,   hi = x rounded to TF32 (to nearest, ties away from zero),   lo = x - hi
 * (lo is exact in float32: x and hi share the exponent and the top 11 bits) gives
 *     A B = A_hi B_hi + A_hi B_lo + A_lo B_hi + A_lo B_lo,
 * and the three first products run as ONE TF32 GEMM over a three times longer inner dimension
 * (cuBLAS through nnpops__gemm_cuda, CUBLAS_COMPUTE_32F_FAST_TF32, float32 accumulation):
 *     C = [A_lo | A_hi | A_hi] [B_hi ; B_lo ; B_hi],
 * so that C is written once (three GEMMs accumulating into C read and write it five times: the
 * hidden layers of the ANI networks are bound by that traffic) and one launch replaces three.
 * A_hi and B_hi are exact in TF32; lo enters the tensor cores with its own TF32 rounding
 * (|lo| <= 2^-11 |x|, so that error is <= 2^-22 |x|), and the dropped A_lo B_lo term is
 * <= 2^-22 |A B|: per product about 2^-21, a few float32 roundings, and the sums are float32.
 * The two small products come first along the inner dimension, the large one last.
 *
 * Stacking along the inner dimension goes by groups of kg (kg divides k): group q of the inner
 * index contributes the blocks [lo_q | hi_q | hi_q] of A and [hi_q ; lo_q ; hi_q] of B, each kg
 * long.  kg = k for a plain product; kg = the width of one ensemble member for the first layer's
 * backward, whose inner dimension runs over the members (the weights are stacked per member,
 * which serves the strided-batched hidden layers too).
 *
 * Layout (cuBLAS, column major): C[m x n] = beta C + op(A) op(B), A is the operand split here on
 * every call (activations: it changes every step), B comes stacked already (weights: stacked once
 * at model upload by nnpops__tf32_stack_cuda).  The stacked copy of A keeps its columns a multiple
 * of 32 floats apart.
 */
#include <stdint.h>
#include <string.h>

#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

const int SPLIT_THREADS = 256;

/* x (rows x cols, column major, ld ldx, batch entries stride_x apart) split and written three
 * times (see the file header): along the rows (by_rows: row i of group q = i / g goes to rows
 * 3 g q + b g + i % g of column j) or along the columns (column j to 3 g q + b g + j % g), block b
 * holding lo where b == lo_block and hi elsewhere; out has ld ld_out, batch entries stride_out
 * apart.  A thread per V consecutive rows (V = 4: 16-byte loads and stores, when everything is
 * 16-byte aligned and, along the rows, g is a multiple of 4), blockIdx.y over (column, entry). */
template <int V>
__global__ void stack_kernel(int64_t rows, int64_t cols, int64_t batch, const float *__restrict__ x,
                             int64_t ldx, int64_t stride_x, float *__restrict__ out, int64_t ld_out,
                             int64_t stride_out, int64_t g, int by_rows, int lo_block) {
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= rows) return;
    for (int64_t jt = blockIdx.y; jt < cols * batch; jt += gridDim.y) {
        const int64_t t = jt / cols, j = jt - t * cols;
        const float *src = x + t * stride_x + j * ldx + i;
        float *dst = out + t * stride_out;
        /* output of block 0 for row i, and the distance between blocks */
        const int64_t o = by_rows ? j * ld_out + stack3_col(i, g) : stack3_col(j, g) * ld_out + i;
        const int64_t step = by_rows ? g : g * ld_out;
        if (V == 4 && i + 4 <= rows) {
            const float4 v = *reinterpret_cast<const float4 *>(src);
            put_split3<4>({v.x, v.y, v.z, v.w}, dst + o, step, lo_block);
            continue;
        }
        for (int u = 0; u < V && i + u < rows; u++)
            put_split3<1>({src[u]}, dst + (by_rows ? j * ld_out + stack3_col(i + u, g) : o + u),
                          step, lo_block);
    }
}

} /* namespace */

extern "C" nnpops_status nnpops__tf32_stack_cuda(int64_t rows, int64_t cols, int64_t batch,
                                                 const float *x, int64_t ldx, int64_t stride_x,
                                                 float *out, int64_t ld_out, int64_t stride_out,
                                                 int64_t g, int by_rows, int lo_block,
                                                 void *stream) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return NNPOPS_OK;
    if (g <= 0 || (by_rows ? rows : cols) % g != 0)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "TF32 stack: group %lld does not divide %lld",
                            (long long)g, (long long)(by_rows ? rows : cols));
    const auto a16 = [](const void *p, int64_t ld) {
        return ((uintptr_t)p & 15) == 0 && ld % 4 == 0;
    };
    const int vec = a16(x, ldx) && (batch == 1 || stride_x % 4 == 0) && a16(out, ld_out) &&
                    (batch == 1 || stride_out % 4 == 0) && (!by_rows || g % 4 == 0);
    const int64_t per = vec ? 4 * SPLIT_THREADS : SPLIT_THREADS;
    const int64_t bx = (rows + per - 1) / per, by = cols * batch;
    if (bx > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "TF32 split of %lld rows is too large",
                            (long long)rows);
    const dim3 grid((unsigned)bx, (unsigned)(by < 65535 ? by : 65535));
    if (vec)
        stack_kernel<4><<<grid, SPLIT_THREADS, 0, as_stream(stream)>>>(
            rows, cols, batch, x, ldx, stride_x, out, ld_out, stride_out, g, by_rows, lo_block);
    else
        stack_kernel<1><<<grid, SPLIT_THREADS, 0, as_stream(stream)>>>(
            rows, cols, batch, x, ldx, stride_x, out, ld_out, stride_out, g, by_rows, lo_block);
    NNPOPS__LAUNCH_CHECK("TF32 stack");
    return NNPOPS_OK;
}

/* the stacked copy of A keeps its columns a multiple of 32 floats (128 bytes) apart: the
 * tensor-core kernels need 16-byte aligned columns, which an odd column count would not give */
static int64_t round32(int64_t r) { return (r + 31) / 32 * 32; }

extern "C" size_t nnpops__gemm_3xtf32_work_bytes(int64_t rows_a, int64_t cols_a, int64_t batch) {
    if (rows_a <= 0 || cols_a <= 0 || batch <= 0) return 0;
    /* 3 round32(rows) >= round32(3 rows): either stacking direction fits */
    return align256(sizeof(float) * 3 * (size_t)round32(rows_a) * (size_t)cols_a * (size_t)batch);
}

extern "C" nnpops_status nnpops__gemm_cuda_3xtf32(
    void *blas, void *stream, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, int64_t kg,
    const float *A, int64_t lda, int64_t stride_a, const float *B3, int64_t ldb3,
    int64_t stride_b3, double beta, float *C, int64_t ldc, int64_t stride_c, int64_t batch,
    void *work, size_t work_bytes) {
    if (m <= 0 || n <= 0 || batch <= 0) return NNPOPS_OK;
    if (kg <= 0 || k % kg != 0)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "3xTF32 GEMM: group %lld does not divide k = %lld",
                            (long long)kg, (long long)k);
    if (m > INT32_MAX || n > INT32_MAX || 3 * k > INT32_MAX || round32(3 * k) > INT32_MAX ||
        round32(m) > INT32_MAX || ldb3 > INT32_MAX || ldc > INT32_MAX || batch > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "GEMM of %lld x %lld x %lld is too large",
                            (long long)m, (long long)n, (long long)k);
    const int64_t ra = trans_a ? k : m, ca = trans_a ? m : k;
    const size_t need = nnpops__gemm_3xtf32_work_bytes(ra, ca, batch);
    if (need > work_bytes)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "3xTF32 GEMM: work space of %zu bytes, %zu needed", work_bytes, need);
    /* A3: op(A3) = [lo | hi | hi] per group, m x 3k; stored 3k x m (trans_a) or m x 3k */
    float *A3 = (float *)work;
    const int64_t lds = trans_a ? round32(3 * k) : round32(m);
    const int64_t stride3 = trans_a ? lds * m : lds * 3 * k;
    nnpops_status st = nnpops__tf32_stack_cuda(ra, ca, batch, A, lda, stride_a, A3, lds, stride3,
                                               kg, trans_a, 0, stream);
    if (st != NNPOPS_OK) return st;
    return nnpops__gemm_cuda_3xtf32_stacked(blas, stream, trans_a, trans_b, m, n, k, A3, lds,
                                            stride3, B3, ldb3, stride_b3, beta, C, ldc, stride_c,
                                            batch);
}

extern "C" int64_t nnpops__tf32_stack_ld(int64_t rows) { return round32(rows); }

extern "C" nnpops_status nnpops__gemm_cuda_3xtf32_stacked(
    void *blas, void *stream, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
    const float *A3, int64_t lda3, int64_t stride_a3, const float *B3, int64_t ldb3,
    int64_t stride_b3, double beta, float *C, int64_t ldc, int64_t stride_c, int64_t batch) {
    return nnpops__gemm_cuda(blas, stream, NNPOPS__GEMM_FAST_TF32, trans_a, trans_b, m, n, 3 * k,
                             A3, lda3, stride_a3, B3, ldb3, stride_b3, beta, C, ldc, stride_c,
                             batch);
}
