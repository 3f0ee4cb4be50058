/*
 * common.cuh - helpers shared by the CUDA kernel files (C++; never included from C).
 *
 *  - NNPOPS__LAUNCH_CHECK(where): turns a failed launch (cudaGetLastError) into NNPOPS_ERROR_CUDA
 *    with the call site and cudaGetErrorString; launchers never synchronize, so an error raised
 *    while a kernel runs surfaces at the caller's stream synchronization.
 *  - warp helpers: full-mask sums, and run-segmented sums (lanes holding the same key in
 *    consecutive lanes form a run; the first lane of each run gets the run's total), used to cut
 *    atomics when consecutive items hit the same atom or system.
 *  - atomic_add_f64 (native double atomicAdd, sm_60 and newer).
 *  - programmatic dependent launch (sm_90): pdl_wait / pdl_trigger in kernels, pdl_enabled and
 *    launch_ex / launch_pdl / launch_chain on the host; set_dynamic_smem for kernels with more
 *    than 48 KiB of shared memory; device_attr: an attribute of the current device.
 *  - copy_bytes, zero_bytes: strided byte copies and zeroing in 16-byte units (staging).
 *  - tf32_split: x = hi + lo with hi rounded to TF32 (the 3xTF32 GEMMs, tf32x3.cu), put_split3:
 *    V consecutive values split and written into the three blocks of a stacked operand, and
 *    stack3_col: where the three blocks of a stacked column go.
 *  - float / double overloads of exp, expm1, cos, sin, cospi, sinpi, sqrt (rexp, ...).
 */
#ifndef NNPOPS_KERNELS_CUDA_COMMON_CUH
#define NNPOPS_KERNELS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "kernels/base.h"
}

#define NNPOPS__FULL_MASK 0xffffffffu

#define NNPOPS__LAUNCH_CHECK(where)                                                               \
    do {                                                                                          \
        cudaError_t e_ = cudaGetLastError();                                                      \
        if (e_ != cudaSuccess)                                                                    \
            return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, (where),  \
                                cudaGetErrorString(e_));                                          \
    } while (0)

namespace nnpops_cuda {

static inline cudaStream_t as_stream(void *s) { return (cudaStream_t)s; }

static inline unsigned grid_for(int64_t items, int per_block) {
    int64_t g = (items + per_block - 1) / per_block;
    if (g < 1) g = 1;
    if (g > 0x7fffffff) g = 0x7fffffff;
    return (unsigned)g;
}

static inline size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(NNPOPS__FULL_MASK, v, o);
    return v;
}

/* Run-segmented suffix sum: lanes with equal `key` in consecutive lanes form a run; afterwards the
 * first lane of each run holds the run total in v.  All 32 lanes must call it.  Returns whether this
 * lane is the first of its run. */
struct warp_runs {
    int lane, run_end;
    bool head;
    __device__ __forceinline__ warp_runs(int64_t key) {
        lane = threadIdx.x & 31;
        const int64_t prev = __shfl_up_sync(NNPOPS__FULL_MASK, key, 1);
        head = lane == 0 || prev != key;
        const unsigned heads = __ballot_sync(NNPOPS__FULL_MASK, head);
        const unsigned later = lane == 31 ? 0u : (heads & (0xffffffffu << (lane + 1)));
        run_end = later ? __ffs(later) - 2 : 31;
    }
    template <typename T> __device__ __forceinline__ T sum(T v) const {
        for (int o = 1; o < 32; o <<= 1) {
            const T u = __shfl_down_sync(NNPOPS__FULL_MASK, v, o);
            if (lane + o <= run_end) v += u;
        }
        return v;
    }
};

__device__ __forceinline__ void atomic_add_f64(double *p, double v) { atomicAdd(p, v); }

/* A kernel launched with the programmatic-stream-serialization attribute may start while the
 * kernels before it still run: it reads nothing they write and writes nothing before pdl_wait(),
 * which returns once every earlier kernel has completed and its writes are visible.
 * pdl_trigger() lets the next such kernel launch as soon as every block of this one has started. */
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#elif defined(NNPOPS_CUDA_EMULATION) /* (tests/emu: what its race model orders by the wait) */
    emu_pdl_wait();
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#elif defined(NNPOPS_CUDA_EMULATION)
    emu_pdl_trigger();
#endif
}

/* Host: launches use the attribute unless the environment variable NNPOPS_NO_PDL is set to
 * something other than 0 (read once; a function-local static initializes thread-safely). */
inline bool pdl_enabled() {
    static const bool on = [] {
        const char *e = getenv("NNPOPS_NO_PDL");
        return !(e && *e && strcmp(e, "0") != 0);
    }();
    return on;
}

/* The configuration of a launch of grid x block threads with smem bytes on st: in clusters of
 * `cluster` blocks along x when cluster > 0, with the programmatic-stream-serialization attribute
 * when `programmatic` (and pdl_enabled()).  attr holds the attributes cfg points to. */
inline void launch_config(cudaLaunchConfig_t &cfg, cudaLaunchAttribute (&attr)[2], dim3 grid,
                          dim3 block, size_t smem, cudaStream_t st, bool programmatic,
                          unsigned cluster) {
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    memset(attr, 0, sizeof attr);
    unsigned n = 0;
    if (cluster > 0) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = cluster;
        attr[n].val.clusterDim.y = 1;
        attr[n].val.clusterDim.z = 1;
        n++;
    }
    if (programmatic && pdl_enabled()) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n].val.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
}

/* Launches kern<<<grid, block, smem, st>>>(args...), in clusters of `cluster` blocks when
 * cluster > 0, with the programmatic-stream-serialization attribute when `programmatic` (and
 * pdl_enabled()); `what` names the kernel in the error. */
template <typename... Args>
nnpops_status launch_ex(bool programmatic, unsigned cluster, void (*kern)(Args...), dim3 grid,
                        dim3 block, size_t smem, cudaStream_t st, const char *what,
                        Args... args) {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[2];
    launch_config(cfg, attr, grid, block, smem, st, programmatic, cluster);
    const cudaError_t e = cudaLaunchKernelEx(&cfg, kern, args...);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, what,
                            cudaGetErrorString(e));
    }
    return NNPOPS_OK;
}

/* Launches with the attribute (when pdl_enabled()). */
template <typename... Args>
nnpops_status launch_pdl(void (*kern)(Args...), dim3 grid, dim3 block, size_t smem,
                         cudaStream_t st, const char *what, Args... args) {
    return launch_ex(true, 0, kern, grid, block, smem, st, what, args...);
}

/* The launches at the two ends of the step's chain (staging kernel, one-block and one-pass
 * neighbor searches, AEV forward, reductions) are programmatic too. */
template <typename... Args>
nnpops_status launch_chain(void (*kern)(Args...), dim3 grid, dim3 block, size_t smem,
                           cudaStream_t st, const char *what, Args... args) {
    return launch_ex(true, 0, kern, grid, block, smem, st, what, args...);
}

/* Zeroes n bytes at z (16-byte aligned), thread t of `stride`. */
__device__ __forceinline__ void zero_bytes(char *z, size_t n, size_t t, size_t stride) {
    const size_t n16 = n >> 4;
    for (size_t k = t; k < n16; k += stride)
        reinterpret_cast<uint4 *>(z)[k] = make_uint4(0, 0, 0, 0);
    for (size_t k = (n16 << 4) + t; k < n; k += stride) z[k] = 0;
}

/* Copies n bytes from src to dst, thread t of `stride` (16-byte units, then the tail byte by
 * byte; both 16-byte aligned).  cg: loads through L2 only (data another block wrote in this
 * kernel, see the reductions' staging tail). */
template <bool CG>
__device__ __forceinline__ void copy_bytes(char *dst, const char *src, size_t n, size_t t,
                                           size_t stride) {
    const size_t n16 = n >> 4;
    for (size_t k = t; k < n16; k += stride) {
        const uint4 *s = reinterpret_cast<const uint4 *>(src) + k;
        reinterpret_cast<uint4 *>(dst)[k] = CG ? __ldcg(s) : *s;
    }
    for (size_t k = (n16 << 4) + t; k < n; k += stride)
        dst[k] = CG ? (char)__ldcg(src + k) : src[k];
}

/* Attribute attr (a cudaDevAttr...) of the current device, or fallback where it cannot be read. */
template <typename Attr> inline int device_attr(Attr attr, int fallback) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return fallback;
    }
    return v;
}

/* Lets kernel fn use `bytes` of dynamic shared memory (an opt-in above 48 KiB). */
inline nnpops_status set_dynamic_smem(const void *fn, size_t bytes) {
    if (bytes <= 48 * 1024) return NNPOPS_OK;
    const cudaError_t e =
        cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cudaFuncSetAttribute (%zu bytes of shared "
                            "memory): %s", __FILE__, __LINE__, bytes, cudaGetErrorString(e));
    }
    return NNPOPS_OK;
}

/* x = hi + lo: hi = x rounded to TF32 (10 explicit mantissa bits, half away from zero), lo = x - hi
 * (exact); inf / nan pass through in hi (lo 0). */
__device__ __forceinline__ void tf32_split(float x, float *hi, float *lo) {
    const uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        *hi = x;
        *lo = 0.0f;
        return;
    }
    uint32_t r = (u + 0x1000u) & 0xffffe000u;
    if ((r & 0x7f800000u) == 0x7f800000u) r = u & 0xffffe000u; /* would overflow: truncate */
    const float h = __uint_as_float(r);
    *hi = h;
    *lo = x - h;
}

/* V consecutive values (V = 1, or 4 with o 16-byte aligned) split by tf32_split and written three
 * times, at o + b step for the blocks b = 0, 1, 2: lo into block lo_block, hi into the others. */
template <int V>
__device__ __forceinline__ void put_split3(const float (&v)[V], float *o, int64_t step,
                                           int lo_block) {
    float h[V], l[V];
#pragma unroll
    for (int u = 0; u < V; u++) tf32_split(v[u], &h[u], &l[u]);
#pragma unroll
    for (int b = 0; b < 3; b++) {
        const float *w = b == lo_block ? l : h;
        if constexpr (V == 4)
            *reinterpret_cast<float4 *>(o + b * step) = make_float4(w[0], w[1], w[2], w[3]);
        else
            o[b * step] = w[0];
    }
}

/* Column f of an activation stacked along its columns by groups of g (tf32x3.cu): the columns
 * of blocks 0 (lo), 1 and 2 (hi) are c, c + g and c + 2 g with c = 3 g (f / g) + f % g. */
__device__ __forceinline__ int64_t stack3_col(int64_t f, int64_t g) {
    return (f / g) * 3 * g + f % g;
}

/* float / double overloads of the math functions the kernels take, each the precision's own
 * library call: rexp, rexpm1, rcos, rsin, rcospi and rsinpi (cos(pi x), sin(pi x): the AEV cutoff
 * function's cos(pi d / rc) without the general argument reduction of cos, whose large-argument
 * path is a long stretch of code on the kernels' path) and rsqrt_. */
#define NNPOPS__MATH_PAIR(name, f32, f64)                                                         \
    __device__ __forceinline__ float name(float x) { return f32(x); }                             \
    __device__ __forceinline__ double name(double x) { return f64(x); }
NNPOPS__MATH_PAIR(rexp, expf, exp)
NNPOPS__MATH_PAIR(rexpm1, expm1f, expm1)
NNPOPS__MATH_PAIR(rcos, cosf, cos)
NNPOPS__MATH_PAIR(rsin, sinf, sin)
NNPOPS__MATH_PAIR(rcospi, cospif, cospi)
NNPOPS__MATH_PAIR(rsinpi, sinpif, sinpi)
NNPOPS__MATH_PAIR(rsqrt_, sqrtf, sqrt)
#undef NNPOPS__MATH_PAIR

} /* namespace nnpops_cuda */

#endif /* NNPOPS_KERNELS_CUDA_COMMON_CUH */
