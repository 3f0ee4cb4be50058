// pdl_latency.cu - micro-benchmark (not part of the build): how long after a kernel's last block
// finishes does a programmatic dependent's griddepcontrol.wait return, against a flag (fence +
// atomic counter) the dependent polls instead.  13 blocks of 512 threads spin 8 us (as a small
// step's AEV kernel runs one block per center), the dependent has 256 blocks; 30 launches each,
// global timer.  Build and run on a GPU machine:
//   nvcc -arch=sm_90 -O2 -o pdl_latency tests/bench/pdl_latency.cu && ./pdl_latency
#include <algorithm>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void primary(unsigned long long *exit_t, unsigned *ctr, int use_flag, int spin_ns) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    const unsigned long long t0 = gtime();
    while (gtime() < t0 + spin_ns) {
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        exit_t[blockIdx.x] = gtime();
        if (use_flag) {
            __threadfence();
            atomicAdd(ctr, 1u);
        }
    }
}

__global__ void secondary(unsigned long long *rel_t, unsigned *ctr, int use_flag,
                          unsigned target) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (use_flag) {
        if (threadIdx.x == 0) {
            unsigned v;
            do {
                asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(ctr) : "memory");
            } while (v < target);
        }
        __syncthreads();
    } else {
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    if (threadIdx.x == 0) rel_t[blockIdx.x] = gtime();
}

int main() {
    const int NP = 13, NS = 256, reps = 30;
    unsigned long long *ex, *rel;
    unsigned *ctr;
    cudaMalloc(&ex, NP * 8);
    cudaMalloc(&rel, NS * 8);
    cudaMalloc(&ctr, 4);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int flag = 0; flag < 2; flag++) {
        std::vector<double> first, last;
        for (int r = 0; r < reps; r++) {
            cudaMemsetAsync(ctr, 0, 4, s);
            primary<<<NP, 512, 0, s>>>(ex, ctr, flag, 8000);
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.gridDim = NS;
            cfg.blockDim = 256;
            cfg.stream = s;
            cfg.attrs = at;
            cfg.numAttrs = 1;
            cudaLaunchKernelEx(&cfg, secondary, rel, ctr, flag, (unsigned)NP);
            cudaStreamSynchronize(s);
            unsigned long long he[NP], hr[NS];
            cudaMemcpy(he, ex, sizeof he, cudaMemcpyDeviceToHost);
            cudaMemcpy(hr, rel, sizeof hr, cudaMemcpyDeviceToHost);
            const unsigned long long end = *std::max_element(he, he + NP);
            first.push_back((double)(long long)(*std::min_element(hr, hr + NS) - end));
            last.push_back((double)(long long)(*std::max_element(hr, hr + NS) - end));
        }
        std::sort(first.begin(), first.end());
        std::sort(last.begin(), last.end());
        printf("%s: release after the primary's last block, ns: first block median %.0f (min "
               "%.0f), last block median %.0f (max %.0f)\n",
               flag ? "flag (fence + atomic, polled)" : "griddepcontrol.wait", first[reps / 2],
               first[0], last[reps / 2], last[reps - 1]);
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
