/*
 * mma_rate.cu - the issue rate of the tensor-core and FMA instructions the float32 GEMMs use, on
 * the GPU at hand: mma.sync m16n8k8 TF32 (HMMA.1688.F32.TF32, the 3xTF32 kernel of
 * potentials/tensornet/cuda/tn_ops.cu) against FFMA, each from registers only (no memory), with 1
 * to 16 warps per multiprocessor and 8 independent accumulators per warp.
 *
 *   nvcc -O3 -arch=sm_90 -o mma_rate dev/mma_rate.cu && ./mma_rate
 *
 * Prints TFLOP/s and cycles per instruction per SM sub-partition (scheduler).  A development
 * harness, not part of the library.
 */
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

#define ITERS 4096

__global__ void hmma_loop(float *out, uint32_t seed) {
    float acc[8][4];
    for (int t = 0; t < 8; t++)
        for (int r = 0; r < 4; r++) acc[t][r] = 0.0f;
    uint32_t a[4] = {seed, seed ^ 1u, seed ^ 2u, seed ^ 3u}, b[2] = {seed ^ 5u, seed ^ 7u};
    for (int i = 0; i < ITERS; i++) {
#pragma unroll
        for (int t = 0; t < 8; t++)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                         "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(acc[t][0]), "+f"(acc[t][1]), "+f"(acc[t][2]), "+f"(acc[t][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0;
    for (int t = 0; t < 8; t++)
        for (int r = 0; r < 4; r++) s += acc[t][r];
    if (s == 1.2345f) out[threadIdx.x] = s;
}

__global__ void ffma_loop(float *out, float seed) {
    float acc[8];
    for (int t = 0; t < 8; t++) acc[t] = seed + t;
    const float x = seed * 0.5f, y = seed * 0.25f;
    for (int i = 0; i < ITERS * 4; i++) {
#pragma unroll
        for (int t = 0; t < 8; t++) acc[t] = fmaf(acc[t], x, y);
    }
    float s = 0;
    for (int t = 0; t < 8; t++) s += acc[t];
    if (s == 1.2345f) out[threadIdx.x] = s;
}

int main() {
    int dev = 0, sms = 0, clock_khz = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, dev);
    printf("%s, %d SMs, %.0f MHz (reported)\n", prop.name, sms, clock_khz / 1e3);
    float *out;
    cudaMalloc(&out, 1024 * sizeof(float));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    printf("| instruction | warps per SM | TFLOP/s | cycles per instruction per scheduler |\n");
    printf("|---|---|---|---|\n");
    for (int kind = 0; kind < 2; kind++)
        for (int warps = 1; warps <= 16; warps *= 2) {
            const int threads = 32 * warps;
            for (int rep = 0; rep < 2; rep++) { /* the first warms up */
                cudaEventRecord(e0);
                if (kind == 0)
                    hmma_loop<<<sms, threads>>>(out, 0x3f800000u);
                else
                    ffma_loop<<<sms, threads>>>(out, 1.0f);
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
                if (rep == 0) continue;
                float ms = 0;
                cudaEventElapsedTime(&ms, e0, e1);
                /* per warp: ITERS x 8 HMMA of 16 x 8 x 8 x 2 flops, or 4 ITERS x 8 FFMA x 32 x 2 */
                const double inst = (double)ITERS * 8 * (kind == 0 ? 1 : 4);
                const double flop_per = kind == 0 ? 2048.0 : 64.0;
                const double flops = inst * flop_per * warps * sms;
                const double cycles = ms * 1e-3 * clock_khz * 1e3;
                const double per_sched = warps < 4 ? 1.0 : warps / 4.0; /* warps per scheduler */
                printf("| %s | %d | %.1f | %.2f |\n", kind == 0 ? "HMMA.1688.F32.TF32" : "FFMA",
                       warps, flops / (ms * 1e-3) / 1e12, cycles / (inst * per_sched));
            }
        }
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 0;
}
