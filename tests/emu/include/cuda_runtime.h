/* cuda_runtime.h - a CPU stand-in for the part of the CUDA runtime and of the device intrinsics
 * that the library's CUDA backend uses, so that its kernels (kernels/cuda, compiled as C++ after
 * tests/emu/launches.py) and its host code run on the CPU in the emulated tests
 * (tests/emu/tests.cmake).  Every "device" pointer is a host pointer; an asynchronous operation
 * (launch, asynchronous copy or memset, cub call, GEMM) runs at once in program order, which
 * respects every stream and event dependency, or is recorded while a stream is being captured
 * and replayed by cudaGraphLaunch; calls that synchronize or allocate fail a capture, as in CUDA's
 * global and thread-local modes.  A launch runs block after block (a cluster's blocks together);
 * a block's threads are fibers (emu.cpp) that switch at warp collectives and block or cluster
 * barriers, so warp-synchronous code and barriers behave as on the GPU for code that is correct
 * there; with NNPOPS_EMU_SEED the threads run in a random order between those points, so that a
 * missing barrier shows more often.  What it does not model: concurrency between blocks and
 * within a warp between collectives (one OS thread runs everything; atomics are plain
 * operations), memory ordering, partial-mask collectives (refused), timing.  The rounding
 * intrinsics (__dadd_rn, __fmaf_rn, ...) are the host's IEEE operations: compile with
 * -ffp-contract=off. */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
#define cudaSuccess 0
#define cudaErrorMemoryAllocation 2
#define cudaErrorInvalidValue 1
#define cudaErrorUnknown 999
#define cudaErrorStreamCaptureUnsupported 900
#define cudaErrorStreamCaptureInvalidated 901
#define cudaErrorStreamCaptureImplicit 906
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone, cudaStreamCaptureStatusActive,
                               cudaStreamCaptureStatusInvalidated };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                             cudaStreamCaptureModeRelaxed };
enum cudaMemoryType { cudaMemoryTypeUnregistered, cudaMemoryTypeHost, cudaMemoryTypeDevice,
                      cudaMemoryTypeManaged };
struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer, *hostPointer;
};
#define cudaEventDefault 0
#define cudaEventDisableTiming 2
#define cudaDevAttrComputeCapabilityMajor 75
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
#define cudaStreamNonBlocking 1
#define cudaFuncAttributeMaxDynamicSharedMemorySize 8
#define cudaLaunchAttributeClusterDimension 4
#define cudaLaunchAttributeProgrammaticStreamSerialization 5

typedef struct { int x, y, z, w; } int4;
typedef struct { int x, y; } int2;
typedef struct { float x, y, z, w; } float4;
typedef struct { float x, y; } float2;
typedef struct { unsigned x, y, z, w; } uint4;
typedef struct { unsigned x, y, z; } uint3;

#ifdef __cplusplus
extern "C" {
#endif
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t st);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaFuncSetAttribute(const void *f, int attr, int v);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaDeviceGetAttribute(int *v, int attr, int d);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);
#ifdef __cplusplus
}
#endif
#define cudaDevAttrMaxSharedMemoryPerBlockOptin 97
#define cudaDevAttrMultiProcessorCount 16

#ifdef __cplusplus
#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __restrict__ __restrict
/* every __shared__ declaration is rewritten by launches.py (this name fails to compile) */
#define __shared__ emu_shared_declaration_not_rewritten_by_launches_py
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct cudaLaunchAttribute {
    int id;
    union {
        struct { unsigned x, y, z; } clusterDim;
        int programmaticStreamSerializationAllowed;
    } val;
};
struct cudaLaunchConfig_t {
    dim3 gridDim, blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    cudaLaunchAttribute *attrs;
    unsigned numAttrs;
};

/* the running fiber's thread index and the launch's block index and sizes */
extern uint3 emu_thread_idx(void);
extern uint3 emu_block_idx(void);
extern uint3 blockDim, gridDim;
#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx())

/* runs body on every thread of every block of grid x block, clusters of `cluster` blocks
 * along x (0: none) running together, with smem bytes of dynamic shared memory per block
 * (emu_dynamic_smem; launches.py rewrites `extern __shared__` arrays); pdl: launched with the
 * programmatic-stream-serialization attribute (the race model of EMU_TSAN, emu.cpp) */
void emu_run(dim3 grid, dim3 block, size_t smem, unsigned cluster, bool pdl,
             const std::function<void()> &body);
unsigned char *emu_dynamic_smem(void);
/* the running block's storage for the static __shared__ declaration whose key is `key`
 * (launches.py rewrites those declarations), fresh for every block */
void *emu_block_alloc(const void *key, size_t bytes, size_t align);
template <typename T> inline T &emu_block_shared(const void *key) {
    return *(T *)emu_block_alloc(key, sizeof(T), alignof(T));
}
/* an asynchronous operation (a kernel launch: kind EMU_OP_KERNEL): run at once, or recorded
 * while a stream is being captured */
enum { EMU_OP_COPY = 0, EMU_OP_KERNEL = 1 };
void emu_enqueue(const std::function<void()> &op, int kind = EMU_OP_COPY);
/* griddepcontrol.wait / .launch_dependents and __threadfence: what the race model orders by
 * them (no-ops otherwise) */
void emu_pdl_wait(void);
void emu_pdl_trigger(void);
void emu_fence(void);
unsigned emu_cluster_rank(void);
unsigned emu_cluster_size(void);
void *emu_map_shared(void *p, int rank);

template <typename... P, typename... A>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *cfg, void (*k)(P...), A... args) {
    unsigned cluster = 0;
    bool pdl = false;
    for (unsigned q = 0; q < cfg->numAttrs; q++) {
        if (cfg->attrs[q].id == cudaLaunchAttributeClusterDimension)
            cluster = cfg->attrs[q].val.clusterDim.x;
        if (cfg->attrs[q].id == cudaLaunchAttributeProgrammaticStreamSerialization)
            pdl = cfg->attrs[q].val.programmaticStreamSerializationAllowed != 0;
    }
    const dim3 g = cfg->gridDim, b = cfg->blockDim;
    const size_t smem = cfg->dynamicSmemBytes;
    emu_enqueue([=] { emu_run(g, b, smem, cluster, pdl, [&] { k(args...); }); },
                EMU_OP_KERNEL);
    return cudaSuccess;
}
template <typename K>
cudaError_t cudaOccupancyMaxActiveClusters(int *n, K, const cudaLaunchConfig_t *) {
    *n = 16;
    return cudaSuccess;
}
template <typename T> cudaError_t cudaGetSymbolAddress(void **p, const T &s) {
    *p = (void *)&s;
    return cudaSuccess;
}
/* (as on an H200 for kernels of at most 64 registers a thread) */
template <typename K>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, K, int block, size_t) {
    *n = block > 0 ? 2048 / block : 1;
    return cudaSuccess;
}
template <typename T> cudaError_t cudaMemcpyFromSymbol(void *d, const T &s, size_t n) {
    memcpy(d, &s, n);
    return cudaSuccess;
}
/* kernel<<<g, b, s, st>>>(args) is rewritten as EMU_LAUNCH(kernel, g, b, s, st)(args) */
template <typename K> struct emu_bound_launch {
    K k;
    dim3 g, b;
    size_t smem;
    template <typename... A> void operator()(A... args) const {
        /* (copies: a recorded launch outlives this temporary) */
        const K kk = k;
        const dim3 gg = g, bb = b;
        const size_t sm = smem;
        emu_enqueue([=] { emu_run(gg, bb, sm, 0, false, [&] { kk(args...); }); },
                    EMU_OP_KERNEL);
    }
};
template <typename K> emu_bound_launch<K> emu_launch(K k, dim3 g, dim3 b, size_t smem = 0,
                                                     cudaStream_t = 0) {
    return emu_bound_launch<K>{k, g, b, smem};
}
#define EMU_LAUNCH(k, ...) emu_launch(k, __VA_ARGS__)

/* ---- warp collectives and barriers (emu.cpp) ---- */
enum { EMU_BALLOT = 1, EMU_ANY, EMU_SHFL, EMU_SHFL_UP, EMU_SHFL_DOWN, EMU_SHFL_XOR, EMU_SYNCWARP };
enum { EMU_BAR_BLOCK = 0, EMU_BAR_BLOCK_OR = 1, EMU_BAR_CLUSTER = 2 };
uint64_t emu_warp_op(int op, uint64_t v, int arg, unsigned mask, int width = 32);
int emu_barrier(int op, int pred); /* EMU_BAR_* */

inline void __syncthreads() { emu_barrier(EMU_BAR_BLOCK, 0); }
inline int __syncthreads_or(int p) { return emu_barrier(EMU_BAR_BLOCK_OR, p != 0); }
inline void __syncwarp(unsigned m = 0xffffffffu) { emu_warp_op(EMU_SYNCWARP, 0, 0, m); }
inline unsigned __ballot_sync(unsigned m, int p) {
    return (unsigned)emu_warp_op(EMU_BALLOT, p != 0, 0, m);
}
inline int __any_sync(unsigned m, int p) { return (int)emu_warp_op(EMU_ANY, p != 0, 0, m); }
template <typename T> inline uint64_t emu_bits(T v) {
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <typename T> inline T emu_from(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}
/* (width w: segments of w lanes, as on the GPU) */
template <typename T> inline T __shfl_sync(unsigned m, T v, int src, int w = 32) {
    return emu_from<T>(emu_warp_op(EMU_SHFL, emu_bits(v), src, m, w));
}
template <typename T> inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) {
    return emu_from<T>(emu_warp_op(EMU_SHFL_UP, emu_bits(v), (int)d, m, w));
}
template <typename T> inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) {
    return emu_from<T>(emu_warp_op(EMU_SHFL_DOWN, emu_bits(v), (int)d, m, w));
}
template <typename T> inline T __shfl_xor_sync(unsigned m, T v, int x, int w = 32) {
    return emu_from<T>(emu_warp_op(EMU_SHFL_XOR, emu_bits(v), x, m, w));
}

/* ---- memory: one OS thread, so plain operations (atomic ones, relaxed, for ThreadSanitizer in
 * the race model: EMU_TSAN) ---- */
inline void __threadfence() { emu_fence(); }
template <typename T> inline T __ldcg(const T *p) { return *p; }
template <typename T> inline T __ldg(const T *p) { return *p; }
template <typename T, typename U> inline void __stcg(T *p, U v) { *p = (T)v; }
template <typename T, typename U> inline void __stcs(T *p, U v) { *p = (T)v; }
#ifdef EMU_TSAN
/* *p = f(*p), atomically; the old value */
template <typename T, typename F> inline T emu_atomic_rmw(T *p, F f) {
    T o;
    __atomic_load(p, &o, __ATOMIC_RELAXED);
    T n = f(o);
    while (!__atomic_compare_exchange(p, &o, &n, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        n = f(o);
    return o;
}
#else
template <typename T, typename F> inline T emu_atomic_rmw(T *p, F f) {
    const T o = *p;
    *p = f(o);
    return o;
}
#endif
template <typename T, typename U> inline T atomicAdd(T *p, U v) {
    return emu_atomic_rmw(p, [&](T o) { return (T)(o + (T)v); });
}
template <typename T, typename U> inline T atomicOr(T *p, U v) {
    return emu_atomic_rmw(p, [&](T o) { return (T)(o | (T)v); });
}
template <typename T, typename U> inline T atomicMin(T *p, U v) {
    return emu_atomic_rmw(p, [&](T o) { return (T)v < o ? (T)v : o; });
}
template <typename T, typename U> inline T atomicMax(T *p, U v) {
    return emu_atomic_rmw(p, [&](T o) { return (T)v > o ? (T)v : o; });
}

/* ---- bits and roundings ---- */
template <typename A, typename B> inline auto min(A a, B b) -> decltype(a + b) {
    return b < a ? b : a;
}
template <typename A, typename B> inline auto max(A a, B b) -> decltype(a + b) {
    return a < b ? b : a;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __float_as_int(float f) { return emu_from<int>(emu_bits(f)); }
inline unsigned __float_as_uint(float f) { return emu_from<unsigned>(emu_bits(f)); }
inline float __int_as_float(int i) { return emu_from<float>(emu_bits(i)); }
inline float __uint_as_float(unsigned i) { return emu_from<float>(emu_bits(i)); }
inline long long __double_as_longlong(double d) { return emu_from<long long>(emu_bits(d)); }
inline double __longlong_as_double(long long i) { return emu_from<double>(emu_bits(i)); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __double2float_rn(double d) { return (float)d; }
inline long long __double2ll_rn(double d) { return llrint(d); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __double2float_ru(double d) {
    float f = (float)d;
    if ((double)f < d) f = nextafterf(f, INFINITY);
    return f;
}
inline float __double2float_rd(double d) {
    float f = (float)d;
    if ((double)f > d) f = nextafterf(f, -INFINITY);
    return f;
}
inline float cospif(float x) { return cosf((float)M_PI * x); }
inline float sinpif(float x) { return sinf((float)M_PI * x); }
inline double cospi(double x) { return cos(M_PI * x); }
inline double sinpi(double x) { return sin(M_PI * x); }

inline int4 make_int4(int a, int b, int c, int d) { return int4{a, b, c, d}; }
inline int2 make_int2(int a, int b) { return int2{a, b}; }
inline float2 make_float2(float a, float b) { return float2{a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return uint4{a, b, c, d};
}
#endif /* __cplusplus */
#endif
