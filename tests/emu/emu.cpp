/* Fiber scheduler of the CPU stand-in (include/cuda_runtime.h): a launch runs its blocks one after
 * another; a block's threads are fibers switched at warp collectives and block barriers, which
 * resolve once every live thread of the warp (block) has arrived; a mismatch (lanes of a warp at
 * different collectives, a collective with exited lanes) or a deadlock aborts with a message. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

/* Context switches: a few instructions on x86-64 (the callee-saved registers and the stack
 * pointer), ucontext elsewhere. */
#if defined(__x86_64__)
extern "C" void emu_switch(void **save_sp, void *new_sp);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
)");
struct context {
    void *sp;
};
static void context_make(context &c, char *stack, size_t size, void (*entry)()) {
    void **sp = (void **)(((uintptr_t)(stack + size)) & ~(uintptr_t)15);
    *--sp = nullptr;          /* alignment: entry starts as if called */
    *--sp = (void *)entry;    /* where emu_switch returns to */
    for (int r = 0; r < 6; r++) *--sp = nullptr; /* the six registers it pops */
    c.sp = sp;
}
static void context_switch(context &from, context &to) { emu_switch(&from.sp, to.sp); }
#else
#include <ucontext.h>
struct context {
    ucontext_t uc;
};
static void context_make(context &c, char *stack, size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
static void context_switch(context &from, context &to) { swapcontext(&from.uc, &to.uc); }
#endif

namespace {
enum { RUN, WARP, BAR, DONE };
struct fiber {
    context ctx;
    int state, op, arg, width;
    unsigned mask;
    uint64_t val, res;
    uint3 tid;
};
const size_t STACK = 256 << 10;
std::vector<fiber> fibers;
std::vector<char *> stacks;
fiber *cur = nullptr;
context sched;
const std::function<void()> *body = nullptr;
std::vector<unsigned char> dyn_smem; /* the running block's dynamic shared memory */

/* The order in which runnable threads run: in index order, or with NNPOPS_EMU_SEED set to a
 * number other than 0 in a random order, each pass leaving about half of the warps for a later
 * one, so that warps drift apart between barriers and a missing barrier shows more often. */
unsigned long long seed_state = 0;
bool seeded() {
    static const bool on = [] {
        const char *e = getenv("NNPOPS_EMU_SEED");
        seed_state = e ? strtoull(e, nullptr, 10) : 0;
        return seed_state != 0;
    }();
    return on;
}
unsigned rnd(unsigned n) { /* xorshift64*, in 0 .. n-1 */
    seed_state ^= seed_state >> 12;
    seed_state ^= seed_state << 25;
    seed_state ^= seed_state >> 27;
    return (unsigned)(((seed_state * 2685821657736338717ull) >> 33) % n);
}
template <typename T> void shuffle(std::vector<T> &v) {
    for (size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[rnd((unsigned)i)]);
}
/* the threads to run in this pass, in order */
void pass_order(int n, std::vector<int> &order) {
    order.clear();
    if (!seeded()) {
        for (int t = 0; t < n; t++) order.push_back(t);
        return;
    }
    std::vector<int> warps;
    for (int w = 0; w * 32 < n; w++) warps.push_back(w);
    shuffle(warps);
    for (size_t q = 0; q < warps.size(); q++) {
        if (q + 1 < warps.size() && rnd(2)) continue; /* (the last one always runs) */
        std::vector<int> lanes;
        for (int t = 32 * warps[q]; t < n && t < 32 * warps[q] + 32; t++) lanes.push_back(t);
        shuffle(lanes);
        order.insert(order.end(), lanes.begin(), lanes.end());
    }
}

void fiber_main() {
    (*body)();
    cur->state = DONE;
    context_switch(cur->ctx, sched);
    abort(); /* never resumed */
}

void yield_to_scheduler() {
    context_switch(cur->ctx, sched);
}

[[noreturn]] void fail(const char *what, int warp) {
    fprintf(stderr, "emu: %s (block %u %u %u, warp %d)\n", what, blockIdx.x, blockIdx.y, blockIdx.z,
            warp);
    for (size_t t = 0; t < fibers.size(); t++)
        if (fibers[t].state != DONE && (warp < 0 || (int)t / 32 == warp))
            fprintf(stderr, "  thread %zu: state %d op %d\n", t, fibers[t].state, fibers[t].op);
    abort();
}

/* every live lane of warp w waits at a collective: the results */
bool resolve_warp(int w, int n) {
    const int t0 = 32 * w, t1 = t0 + 32 < n ? t0 + 32 : n;
    int waiting = 0, live = 0, op = -1;
    for (int t = t0; t < t1; t++) {
        if (fibers[t].state == DONE) continue;
        live++;
        if (fibers[t].state == WARP) {
            waiting++;
            if (op < 0) op = fibers[t].op;
            else if (op != fibers[t].op) fail("lanes of a warp at different collectives", w);
        }
    }
    if (!live || waiting != live) return false;
    if (live != t1 - t0 && op != EMU_SYNCWARP) fail("warp collective with exited lanes", w);
    uint64_t bits = 0;
    for (int t = t0; t < t1; t++)
        if (fibers[t].state == WARP && fibers[t].val) bits |= 1ull << (t - t0);
    for (int t = t0; t < t1; t++) {
        fiber &f = fibers[t];
        if (f.state != WARP) continue;
        if (f.mask != 0xffffffffu && op != EMU_SYNCWARP) fail("partial-mask collective", w);
        /* shuffles within segments of `width` lanes: the source outside the lane's own
         * segment (up / down past its ends, xor into a later one) gives the lane's own value */
        const int lane = t - t0, w1 = f.width - 1, seg = lane & ~w1, in = lane & w1;
        int src = lane;
        switch (op) {
        case EMU_BALLOT: f.res = bits; break;
        case EMU_ANY: f.res = bits != 0; break;
        case EMU_SHFL: src = seg + (f.arg & w1); break;
        case EMU_SHFL_UP: src = in - f.arg >= 0 ? lane - f.arg : lane; break;
        case EMU_SHFL_DOWN: src = in + f.arg <= w1 ? lane + f.arg : lane; break;
        case EMU_SHFL_XOR:
            src = (lane ^ f.arg) & 31;
            if (src > seg + w1) src = lane;
            break;
        default: break;
        }
        if (op == EMU_SHFL || op == EMU_SHFL_UP || op == EMU_SHFL_DOWN || op == EMU_SHFL_XOR) {
            if (t0 + src >= t1) fail("shuffle from a lane past the block", w);
            f.res = fibers[t0 + src].val;
        }
    }
    for (int t = t0; t < t1; t++)
        if (fibers[t].state == WARP) fibers[t].state = RUN;
    return true;
}

bool resolve_block(int n) {
    int live = 0, waiting = 0, op = -1;
    uint64_t any = 0;
    for (int t = 0; t < n; t++) {
        if (fibers[t].state == DONE) continue;
        live++;
        if (fibers[t].state == BAR) {
            waiting++;
            if (op < 0) op = fibers[t].op;
            else if (op != fibers[t].op) fail("threads at different kinds of barrier", -1);
            any |= fibers[t].val;
        }
    }
    if (!live || waiting != live) return false;
    for (int t = 0; t < n; t++)
        if (fibers[t].state == BAR) {
            fibers[t].res = any;
            fibers[t].state = RUN;
        }
    return true;
}
} // namespace

uint3 blockIdx, blockDim, gridDim;
uint3 emu_thread_idx(void) { return cur->tid; }

uint64_t emu_warp_op(int op, uint64_t v, int arg, unsigned mask, int width) {
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail("shuffle width not a power of 2", -1);
    cur->state = WARP;
    cur->op = op;
    cur->val = v;
    cur->arg = arg;
    cur->width = width;
    cur->mask = mask;
    yield_to_scheduler();
    return cur->res;
}

int emu_barrier(int op, int pred) {
    cur->state = BAR;
    cur->op = op;
    cur->val = pred != 0;
    yield_to_scheduler();
    return (int)cur->res;
}

unsigned char *emu_dynamic_smem(void) { return dyn_smem.data(); }

void emu_run(dim3 grid, dim3 block, size_t smem, const std::function<void()> &b) {
    const int n = (int)(block.x * block.y * block.z); /* warps: consecutive linear indices */
    gridDim = uint3{grid.x, grid.y, grid.z};
    blockDim = uint3{block.x, block.y, block.z};
    const std::function<void()> *saved_body = body;
    body = &b;
    fibers.assign(n, fiber{});
    dyn_smem.assign(smem + 16, 0xa5); /* (not zeroed on the GPU either) */
    while ((int)stacks.size() < n) stacks.push_back((char *)malloc(STACK));
    for (unsigned long long bl = 0; bl < (unsigned long long)grid.x * grid.y * grid.z; bl++) {
        blockIdx = uint3{(unsigned)(bl % grid.x), (unsigned)(bl / grid.x % grid.y),
                         (unsigned)(bl / grid.x / grid.y)};
        for (int t = 0; t < n; t++) {
            fiber &f = fibers[t];
            f = fiber{};
            f.tid = uint3{t % block.x, t / block.x % block.y, t / block.x / block.y};
            f.state = RUN;
            context_make(f.ctx, stacks[t], STACK, fiber_main);
        }
        std::vector<int> order;
        for (;;) {
            bool ran = false;
            pass_order(n, order);
            for (int t : order) {
                if (fibers[t].state != RUN) continue;
                cur = &fibers[t];
                context_switch(sched, cur->ctx);
                ran = true;
            }
            bool resolved = false;
            for (int w = 0; w * 32 < n; w++) resolved |= resolve_warp(w, n);
            resolved |= resolve_block(n);
            bool all_done = true;
            for (int t = 0; t < n; t++) all_done &= fibers[t].state == DONE;
            if (all_done) break;
            bool runnable = false;
            for (int t = 0; t < n; t++) runnable |= fibers[t].state == RUN;
            if (!ran && !resolved && !runnable) fail("deadlock", -1);
        }
    }
    cur = nullptr;
    body = saved_body;
}

/* ---- host API ---- */
extern "C" {
cudaError_t cudaMalloc(void **p, size_t n) {
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : 2;
}
cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned) {
    *d = h;
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { return cudaMemset(p, v, n); }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind) {
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t) {
    return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = (cudaStream_t)0x1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
cudaError_t cudaFuncSetAttribute(const void *, int, int) { return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, int attr, int) {
    /* as an H200 */
    *v = attr == cudaDevAttrMaxSharedMemoryPerBlockOptin ? 227 * 1024
         : attr == cudaDevAttrMultiProcessorCount        ? 132
                                                         : 0;
    return cudaSuccess;
}
int nnpops_cuda_device_count(void) { return 1; }
}

/* ---- cuBLAS (include/cublas_v2.h): C = alpha op(A) op(B) + beta C, column-major ---- */
#include <cublas_v2.h>

struct emu_cublas {
    cudaStream_t stream;
};

namespace {
template <typename T>
void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha, const T *A,
          int lda, const T *B, int ldb, T beta, T *C, int ldc) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            T s = 0;
            for (int p = 0; p < k; p++) {
                const T a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
                const T b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
                s += a * b;
            }
            T &c = C[i + (size_t)j * ldc];
            c = beta == 0 ? alpha * s : alpha * s + beta * c; /* beta 0: C is not read */
        }
}
} // namespace

extern "C" {
cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = new emu_cublas{nullptr};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s) {
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
const char *cublasGetStatusString(cublasStatus_t s) { return s ? "emulated failure" : "success"; }
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t) {
    if (at != bt || at != ct || (at == CUDA_R_64F) != (comp == CUBLAS_COMPUTE_64F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    for (int q = 0; q < batch; q++) {
        if (at == CUDA_R_64F)
            gemm(ta, tb, m, n, k, *(const double *)alpha, (const double *)A + q * sa, lda,
                 (const double *)B + q * sb, ldb, *(const double *)beta, (double *)C + q * sc, ldc);
        else
            gemm(ta, tb, m, n, k, *(const float *)alpha, (const float *)A + q * sa, lda,
                 (const float *)B + q * sb, ldb, *(const float *)beta, (float *)C + q * sc, ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t comp,
                            cublasGemmAlgo_t algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0,
                                      beta, C, ct, ldc, 0, 1, comp, algo);
}
}
