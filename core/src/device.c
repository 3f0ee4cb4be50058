/*
 * device.c - what the build and the machine offer: CUDA built in or not, and how many GPUs.
 *
 * Only the CUDA runtime API is used (never libcuda directly), so a CUDA build loads on a machine
 * without a driver and reports zero devices instead of failing to load.
 */
#include "internal.h"

#ifdef NNPOPS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int32_t nnpops_cuda_built(void) {
#ifdef NNPOPS_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int32_t nnpops_cuda_device_count(void) {
#ifdef NNPOPS_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
#else
    return 0;
#endif
}
