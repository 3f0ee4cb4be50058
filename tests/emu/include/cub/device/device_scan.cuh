/* device_scan.cuh - CPU stand-in of cub::DeviceScan::ExclusiveSum for the emulated tests: the scan
 * is an asynchronous operation (emu_enqueue, see ../../cuda_runtime.h). */
#pragma once
#include <cuda_runtime.h>
#include <type_traits>
namespace cub {
struct DeviceScan {
    template <typename In, typename Out, typename N>
    static cudaError_t ExclusiveSum(void *tmp, size_t &bytes, In in, Out out, N n,
                                    cudaStream_t = 0) {
        if (!tmp) {
            bytes = 16;
            return cudaSuccess;
        }
        emu_enqueue([=] {
            using T = typename std::remove_reference<decltype(*out)>::type;
            T run = 0;
            for (N i = 0; i < n; i++) {
                const T v = in[i];
                out[i] = run;
                run += v;
            }
        });
        return cudaSuccess;
    }
};
} // namespace cub
