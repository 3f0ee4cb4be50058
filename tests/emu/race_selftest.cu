/*
 * race_selftest.cu - what the race model of the emulated runtime (emu.cpp, EMU_TSAN) must report
 * and what it must let pass: small kernels, each in a form with the ordering it needs and one
 * without.  Built (through launches.py, like the library's kernels) only in the race build
 * (tests/emu/tests.cmake, label tsan); the forms without ordering must make ThreadSanitizer
 * report a data race, those with it must run clean.
 *
 *   race_selftest CASE ORDERED
 *     barrier  threads of two warps exchange values through shared memory (__syncthreads)
 *     warp     lanes of a warp exchange values through shared memory (__syncwarp; a shuffle
 *              in between does not order memory)
 *     blocks   the first thread of two blocks adds to one global value (atomicAdd)
 *     ticket   the last of four blocks to take a ticket sums what the others wrote (__threadfence
 *              before and after the ticket)
 *     pdl      a kernel launched programmatically after another reads what it wrote (after
 *              pdl_wait, not before)
 *     host     the host reads what a copy from the device wrote (after cudaStreamSynchronize)
 *   ORDERED: 1 with the ordering, 0 without.  Exit status 0 when the results are right (a race
 *   does not change them here: the emulator runs threads one at a time).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

__global__ void barrier_kernel(int *out, int ordered) {
    __shared__ int s[64];
    const int t = threadIdx.x;
    s[t] = t + 1;
    if (ordered) __syncthreads();
    out[t] = s[(t + 33) % 64];
}

__global__ void warp_kernel(int *out, int ordered) {
    __shared__ int s[32];
    const int l = threadIdx.x;
    s[l] = l + 1;
    const int first = __shfl_sync(0xffffffffu, l, 0);
    if (ordered) __syncwarp();
    out[l] = s[(l + 1) % 32] + first;
}

__global__ void blocks_kernel(int *out, int ordered) {
    if (threadIdx.x != 0) return;
    if (ordered) atomicAdd(out, 1);
    else *out += 1;
}

__global__ void ticket_kernel(int *data, unsigned *ticket, int *sum, int ordered) {
    if (threadIdx.x != 0) return;
    data[blockIdx.x] = (int)blockIdx.x + 1;
    if (ordered) __threadfence();
    const unsigned t = atomicAdd(ticket, 1u);
    if (t != gridDim.x - 1) return;
    if (ordered) __threadfence();
    int s = 0;
    for (unsigned b = 0; b < gridDim.x; b++) s += data[b];
    *sum = s;
}

__global__ void produce_kernel(int *x) {
    x[threadIdx.x] = (int)threadIdx.x + 1;
    emu_pdl_trigger();
}

__global__ void consume_kernel(const int *x, int *y, int ordered) {
    int v = 0;
    if (!ordered) v = x[threadIdx.x];
    emu_pdl_wait();
    if (ordered) v = x[threadIdx.x];
    y[threadIdx.x] = v;
}

int check(bool ok, const char *what) {
    if (!ok) fprintf(stderr, "race_selftest: wrong result (%s)\n", what);
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: race_selftest barrier|warp|blocks|ticket|pdl|host 0|1\n");
        return 2;
    }
    const char *c = argv[1];
    const int ordered = atoi(argv[2]);
    int *d = nullptr, *e = nullptr;
    unsigned *tk = nullptr;
    int h[64] = {0};
    cudaMalloc((void **)&d, 64 * sizeof(int));
    cudaMalloc((void **)&e, 64 * sizeof(int));
    cudaMalloc((void **)&tk, sizeof(unsigned));
    cudaMemset(d, 0, 64 * sizeof(int));
    cudaMemset(e, 0, 64 * sizeof(int));
    cudaMemset(tk, 0, sizeof(unsigned));
    int bad = 0;
    if (!strcmp(c, "barrier")) {
        barrier_kernel<<<1, 64>>>(d, ordered);
        cudaMemcpy(h, d, 64 * sizeof(int), cudaMemcpyDeviceToHost);
        for (int t = 0; t < 64; t++) bad |= check(h[t] == (t + 33) % 64 + 1, "barrier");
    } else if (!strcmp(c, "warp")) {
        warp_kernel<<<1, 32>>>(d, ordered);
        cudaMemcpy(h, d, 32 * sizeof(int), cudaMemcpyDeviceToHost);
        for (int l = 0; l < 32; l++) bad |= check(h[l] == (l + 1) % 32 + 1, "warp");
    } else if (!strcmp(c, "blocks")) {
        blocks_kernel<<<2, 32>>>(d, ordered);
        cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost);
        bad |= check(h[0] == 2, "blocks");
    } else if (!strcmp(c, "ticket")) {
        ticket_kernel<<<4, 32>>>(d, tk, e, ordered);
        cudaMemcpy(h, e, sizeof(int), cudaMemcpyDeviceToHost);
        bad |= check(h[0] == 10, "ticket");
    } else if (!strcmp(c, "pdl")) {
        produce_kernel<<<1, 64>>>(d);
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDim = dim3(1);
        cfg.blockDim = dim3(64);
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, consume_kernel, (const int *)d, e, ordered);
        cudaMemcpy(h, e, 64 * sizeof(int), cudaMemcpyDeviceToHost);
        for (int t = 0; t < 64; t++) bad |= check(h[t] == t + 1, "pdl");
    } else if (!strcmp(c, "host")) {
        int *pinned = nullptr;
        cudaMallocHost((void **)&pinned, 64 * sizeof(int));
        produce_kernel<<<1, 64>>>(d);
        cudaMemcpyAsync(pinned, d, 64 * sizeof(int), cudaMemcpyDeviceToHost, 0);
        if (ordered) cudaStreamSynchronize(0);
        for (int t = 0; t < 64; t++) bad |= check(pinned[t] == t + 1, "host");
        cudaFreeHost(pinned);
    } else {
        fprintf(stderr, "race_selftest: unknown case %s\n", c);
        return 2;
    }
    cudaFree(d);
    cudaFree(e);
    cudaFree(tk);
    if (!bad) printf("race_selftest %s %d: results right\n", c, ordered);
    return bad;
}
