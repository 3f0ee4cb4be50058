/* device_radix_sort.cuh - CPU stand-in of cub::DeviceRadixSort::SortPairs for the emulated tests:
 * a stable sort by key (as cub's, over the bits begin_bit .. end_bit - 1), an asynchronous
 * operation (emu_enqueue, see ../../cuda_runtime.h). */
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <vector>
namespace cub {
struct DeviceRadixSort {
    template <typename K, typename V, typename N>
    static cudaError_t SortPairs(void *tmp, size_t &bytes, const K *keys_in, K *keys_out,
                                 const V *vals_in, V *vals_out, N n, int begin_bit = 0,
                                 int end_bit = (int)sizeof(K) * 8, cudaStream_t = 0) {
        if (!tmp) {
            bytes = 16;
            return cudaSuccess;
        }
        emu_enqueue([=] {
            using U = typename std::make_unsigned<K>::type;
            const int width = end_bit - begin_bit;
            const U mask = width >= (int)sizeof(U) * 8 ? (U)~(U)0 : (U)(((U)1 << width) - 1);
            const auto digits = [&](N i) { return (U)(((U)keys_in[i] >> begin_bit) & mask); };
            std::vector<N> idx((size_t)n);
            std::iota(idx.begin(), idx.end(), (N)0);
            std::stable_sort(idx.begin(), idx.end(),
                             [&](N a, N b) { return digits(a) < digits(b); });
            std::vector<K> k((size_t)n);
            std::vector<V> v((size_t)n);
            for (N i = 0; i < n; i++) {
                k[(size_t)i] = keys_in[idx[(size_t)i]];
                v[(size_t)i] = vals_in[idx[(size_t)i]];
            }
            std::copy(k.begin(), k.end(), keys_out);
            std::copy(v.begin(), v.end(), vals_out);
        });
        return cudaSuccess;
    }
};
} // namespace cub
