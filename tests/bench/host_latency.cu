// host_latency.cu - micro-benchmark (not part of the build): the host's share of a small step
// replayed as a CUDA graph.  A graph of one kernel (one block spinning SPIN_US on the global
// timer, as the small step's chain of ~50 us) or of nothing but a 4-byte copy is launched from
// the host; the host waits for it with
//   sync   cudaStreamSynchronize (what the library's host entry does),
//   event  cudaEventSynchronize on an event recorded after the launch,
//   flag   polling a word of mapped pinned memory that the kernel's last action sets (fence at
//          system scope, then a volatile store), the stream synchronized only every 64 steps.
// Median and 10 / 90 % of the host's wall time per step over 3,000 steps, and the same less the
// spin (the overhead).  Build and run on a GPU machine:
//   nvcc -arch=sm_90 -O2 -o host_latency tests/bench/host_latency.cu && ./host_latency
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                         \
    do {                                                                              \
        cudaError_t e_ = (x);                                                         \
        if (e_ != cudaSuccess) {                                                      \
            std::printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));   \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin(long long spin_ns, volatile unsigned *flag, const unsigned *step) {
    const unsigned long long t0 = gtime();
    while ((long long)(gtime() - t0) < spin_ns) {
    }
    __syncthreads();
    if (threadIdx.x == 0 && flag) {
        __threadfence_system();
        *flag = *step;
    }
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static void report(const char *what, std::vector<double> &t, double spin_us) {
    std::sort(t.begin(), t.end());
    const size_t n = t.size();
    std::printf("| %-28s | %8.2f | %8.2f | %8.2f | %8.2f |\n", what, t[n / 2], t[n / 10],
                t[9 * n / 10], t[n / 2] - spin_us);
}

int main() {
    const int steps = 3000;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *flag_h, *flag_d, *step_h, *step_d;
    CK(cudaHostAlloc((void **)&flag_h, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&flag_d, flag_h, 0));
    CK(cudaHostAlloc((void **)&step_h, 64, cudaHostAllocMapped));
    CK(cudaMalloc((void **)&step_d, 64));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    std::printf("| wait (graph) | median us | 10 %% | 90 %% | median less the spin |\n");
    std::printf("|---|---|---|---|---|\n");
    for (int spin_us : {0, 50}) {
        // the graph: the step number copied in (as the inputs are), then the kernel
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        CK(cudaMemcpyAsync(step_d, step_h, 4, cudaMemcpyHostToDevice, s));
        spin<<<1, 128, 0, s>>>(spin_us * 1000LL, flag_d, step_d);
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        for (int mode = 0; mode < 3; mode++) {
            std::vector<double> t;
            for (int k = 0; k < steps + 100; k++) {
                const unsigned id = (unsigned)(k + 1 + 100000 * mode + 1000000 * spin_us);
                *(volatile unsigned *)step_h = id;
                const double t0 = now_us();
                CK(cudaGraphLaunch(ge, s));
                if (mode == 0) {
                    CK(cudaStreamSynchronize(s));
                } else if (mode == 1) {
                    CK(cudaEventRecord(ev, s));
                    CK(cudaEventSynchronize(ev));
                } else {
                    while (*(volatile unsigned *)flag_h != id) {
                    }
                }
                const double t1 = now_us();
                if (mode == 2 && k % 64 == 63) CK(cudaStreamSynchronize(s));
                if (k >= 100) t.push_back(t1 - t0);
            }
            CK(cudaStreamSynchronize(s));
            char what[64];
            std::snprintf(what, sizeof what, "%s, kernel %d us",
                          mode == 0 ? "sync" : mode == 1 ? "event" : "flag", spin_us);
            report(what, t, spin_us);
        }
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }
    return 0;
}
