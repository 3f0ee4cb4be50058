/* cublas_v2.h - the part of cuBLAS that the library calls, for the emulated tests: GEMMs
 * (column-major, float or double, batched with strides; FAST_TF32 rounds the inputs to TF32)
 * as plain loops, asynchronous operations (see cuda_runtime.h); the handle only remembers its
 * stream. */
#ifndef EMU_CUBLAS_V2_H
#define EMU_CUBLAS_V2_H
#include "cuda_runtime.h"

typedef struct emu_cublas *cublasHandle_t;
typedef int cublasStatus_t;
#define CUBLAS_STATUS_SUCCESS 0
#define CUBLAS_STATUS_NOT_SUPPORTED 15
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_64F = 1 } cudaDataType;
typedef enum {
    CUBLAS_COMPUTE_32F,
    CUBLAS_COMPUTE_32F_FAST_TF32,
    CUBLAS_COMPUTE_64F
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;

#ifdef __cplusplus
extern "C" {
#endif
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *w, size_t bytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t comp,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo);
#ifdef __cplusplus
}
#endif
#endif
