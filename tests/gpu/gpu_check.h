/* gpu_check.h - helpers of the GPU tests: device buffers, copies on the test's (non-default)
 * stream, a skip when no GPU is present, and array comparisons with atol + rtol. */
#ifndef NNPOPS_TEST_GPU_CHECK_H
#define NNPOPS_TEST_GPU_CHECK_H

#include <cuda_runtime_api.h>

#include "check.h"

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static cudaStream_t g_stream;

/* Exit 77 (skipped) without a usable GPU; otherwise create the test's non-blocking stream. */
static inline void gpu_init_or_skip(void) {
    if (nnpops_cuda_device_count() == 0) {
        fprintf(stderr, "no CUDA device: skipped\n");
        exit(SKIP_RETURN);
    }
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
}

/* cudaMemset and cudaMemcpy from pageable memory run on the legacy default stream and may still
 * be in flight when they return; the kernels under test run on a non-blocking stream, which does
 * not wait for them: synchronize the device after every upload. */
static inline void *dalloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
    CUDA_CHECK(cudaDeviceSynchronize());
    return p;
}

static inline void *dup_to_device(const void *h, size_t bytes) {
    void *d = dalloc(bytes);
    if (bytes) CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    return d;
}

static inline void gsync(void) { CUDA_CHECK(cudaStreamSynchronize(g_stream)); }

static inline void to_host(void *h, const void *d, size_t bytes) {
    gsync();
    if (bytes) CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* max over k of |a - b| / (atol + rtol |b|); prints the worst element when it exceeds 1. */
static inline double compare(const char *what, const double *a, const double *b, size_t n,
                             double atol, double rtol) {
    double worst = 0;
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        const double r = fabs(a[k] - b[k]) / (atol + rtol * fabs(b[k]));
        if (!(r <= worst)) {
            worst = r;
            at = k;
        }
    }
    if (!(worst <= 1.0))
        fprintf(stderr, "%s: element %zu: %.17g vs %.17g (ratio %.3g, atol %g rtol %g)\n", what, at,
                a[at], b[at], worst, atol, rtol);
    else
        printf("  %-40s %zu values, worst ratio to tolerance %.3g\n", what, n, worst);
    return worst;
}

static inline double compare_f(const char *what, const float *a, const float *b, size_t n,
                               double atol, double rtol) {
    double *x = malloc(sizeof(double) * (n ? n : 1)), *y = malloc(sizeof(double) * (n ? n : 1));
    for (size_t k = 0; k < n; k++) {
        x[k] = a[k];
        y[k] = b[k];
    }
    const double w = compare(what, x, y, n, atol, rtol);
    free(x);
    free(y);
    return w;
}

#endif
