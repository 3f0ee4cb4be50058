/* cublas_v2.h - declarations only: the emulated tests run no cuBLAS case (see ../tests.cmake). */
#ifndef EMU_CUBLAS_V2_H
#define EMU_CUBLAS_V2_H
typedef struct emu_cublas *cublasHandle_t;
#define CUBLAS_STATUS_SUCCESS 0
int cublasCreate(cublasHandle_t *h);
int cublasDestroy(cublasHandle_t h);
#endif
