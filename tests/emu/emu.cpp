/* Fiber scheduler of the CPU stand-in (include/cuda_runtime.h): a launch runs its blocks one after
 * another; a block's threads are fibers switched at warp collectives and block barriers, which
 * resolve once every live thread of the warp (block) has arrived; a mismatch (lanes of a warp at
 * different collectives, a collective with exited lanes) or a deadlock aborts with a message.
 *
 * The race model (EMU_TSAN: this file built without ThreadSanitizer's instrumentation, the
 * kernels, the library and the test program with it; tests/emu/tests.cmake, label tsan).  Every
 * GPU thread of a block group is a ThreadSanitizer fiber of its own, and only what orders
 * memory on the GPU orders it here (happens-before): a block barrier among the block's threads,
 * a cluster barrier among the cluster's, __syncwarp among the warp's lanes (shuffles and votes
 * exchange registers, not memory); nothing between the blocks of a launch but __threadfence
 * (modelled as ordering every earlier fence before every later one, enough for the fence +
 * atomic ticket pattern); atomics are relaxed atomics.  Between operations, a stream order:
 * each operation starts after everything enqueued before it has completed (one stream: the
 * side streams' branches count as ordered) and after the host's work before the enqueue; a
 * kernel launched with programmatic stream serialization after a kernel K may start once every
 * block of K has called pdl_trigger() or ended, which orders nothing of K's own writes before it:
 * it starts after what was complete then (what was complete when K started, and the kernel before
 * K as well if a block of K triggered, or ended, after its pdl_wait()), and its pdl_wait() orders
 * it after everything before it; the host sees the device's writes only after a synchronization
 * (stream, event, device, a blocking copy or memset, cudaFree).  So ThreadSanitizer reports a
 * missing barrier or __syncwarp, two blocks writing one location without atomics, a kernel
 * reading before its pdl_wait() what the kernel before writes, and the host reading results or
 * rewriting inputs before it synchronizes.  Not modelled: memory ordering beyond that (fences are stronger here
 * than on the GPU), concurrency between streams, the asynchronous copies' completion (cp.async
 * copies at issue), reads and writes of uninstrumented code (the stand-in's GEMM marks its
 * ranges instead). */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#ifdef EMU_TSAN
#include <sanitizer/tsan_interface.h>
/* (ThreadSanitizer's annotations: the calling context's reads and writes not recorded) */
extern "C" void AnnotateIgnoreReadsBegin(const char *file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char *file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char *file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char *file, int line);
/* (ThreadSanitizer's range accesses, for code it does not instrument) */
extern "C" void __tsan_read_range(void *addr, unsigned long size);
extern "C" void __tsan_write_range(void *addr, unsigned long size);
#endif

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

/* a graph and an executable graph (cudaGraph_t, cudaGraphExec_t): recorded operations and
 * their kinds (EMU_OP_*) */
struct emu_graph {
    std::vector<std::pair<std::function<void()>, int>> ops;
};

namespace {
/* ---- the race model's happens-before (see the top; empty functions without EMU_TSAN) ---- */
struct sync_obj { /* an address that ThreadSanitizer keeps a clock for */
    char c[8];
};
#ifdef EMU_TSAN
void *tsan_stream = nullptr; /* the stream: what has completed, in stream order */
void *tsan_op = nullptr;     /* runs the operations other than kernels */
/* the stream's state when each kernel started (a ring: a slot used again only joins an earlier
 * state into a later one, which changes no order) */
sync_obj start_ring[1024];
unsigned start_next = 0;
/* where a kernel launched programmatically next starts (nullptr: the last operation was not a
 * kernel); the running kernel's start state, entry and end; whether one of its blocks triggered
 * (or ended) after its pdl_wait */
sync_obj *entry_next = nullptr;
sync_obj *k_start, *k_end, *k_entry, *k_host; /* (k_host: the host's history at the launch) */
bool k_waited_trigger = false;
sync_obj fence_obj;
void as(void *f) { __tsan_switch_to_fiber(f, __tsan_switch_to_fiber_no_sync); }
void *host_context() {
    void *h = __tsan_get_current_fiber();
    if (!tsan_stream) {
        tsan_stream = __tsan_create_fiber(0);
        tsan_op = __tsan_create_fiber(0);
    }
    return h;
}
/* the stream takes the host's history (an enqueue) and publishes its state in snap */
sync_obj *stream_snapshot(void *host, sync_obj *snap = nullptr) {
    sync_obj *enq = new sync_obj;
    if (!snap) snap = new sync_obj;
    __tsan_release(enq);
    as(tsan_stream);
    __tsan_acquire(enq);
    __tsan_release(snap);
    as(host);
    delete enq;
    return snap;
}
/* the stream takes what an operation did */
void stream_complete(void *host, sync_obj *end) {
    as(tsan_stream);
    __tsan_acquire(end);
    as(host);
}
/* a closure the GPU threads ran, destroyed by the stream (after it took what they did) */
void stream_delete(void *host, std::function<void()> *f) {
    as(tsan_stream);
    delete f;
    as(host);
}
void race_host_sync() {
    void *host = host_context();
    sync_obj *s = new sync_obj;
    as(tsan_stream);
    __tsan_release(s);
    as(host);
    __tsan_acquire(s);
    delete s;
}
/* (the operations run on copies of their closures, made by the host before the enqueue and
 * destroyed by the context that ran them: the caller's closure, freed or reused by the host
 * later, is never read by a GPU thread) */
void race_op(const std::function<void()> &op) {
    void *host = host_context();
    auto *copy = new std::function<void()>(op);
    sync_obj *start = stream_snapshot(host), *end = new sync_obj;
    as(tsan_op);
    __tsan_acquire(start);
    (*copy)();
    delete copy;
    __tsan_release(end);
    stream_complete(host, end);
    delete start;
    delete end;
    entry_next = nullptr;
}
/* a kernel launch: its closure copied likewise, destroyed by the stream once it has completed */
void race_kernel(const std::function<void()> &op) {
    void *host = host_context();
    auto *copy = new std::function<void()>(op);
    (*copy)();
    stream_delete(host, copy);
}
/* while it lives, the calling context's accesses are not recorded: memory allocated then is new
 * to ThreadSanitizer (no access so far), memory freed then is not checked against the accesses
 * before */
struct ignoring {
    ignoring() {
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    }
    ~ignoring() {
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    }
};
#else
void race_host_sync() {}
void race_op(const std::function<void()> &op) { op(); }
void race_kernel(const std::function<void()> &op) { op(); }
struct ignoring {};
#endif
/* the shared memory of a block: fresh for each group of blocks (filled with 0xa5: not zeroed on
 * the GPU either), the accesses of earlier groups forgotten */
unsigned char *fresh_alloc(size_t n) {
    ignoring ig;
    unsigned char *p = (unsigned char *)aligned_alloc(16, (n + 15) & ~(size_t)15);
    if (p) memset(p, 0xa5, n);
    return p;
}
void fresh_free(void *p) {
    ignoring ig;
    free(p);
}

enum { RUN, WARP, BAR, DONE };
struct fiber {
    context ctx;
    int state, op, arg, width;
    unsigned mask;
    uint64_t val, res;
    uint3 tid, bid;
    int blk; /* the block's rank in the group of blocks that runs together (its cluster) */
    char *stack;
    void *tf;          /* (EMU_TSAN) its ThreadSanitizer fiber */
    sync_obj *pending; /* (EMU_TSAN) the barrier object to acquire when released */
    bool waited;       /* (EMU_TSAN) it has called pdl_wait */
};
/* A thread's stack (the kernels take at most ~7 KB: tests/emu, race model), whose lowest bytes
 * stay 0x5a unless it overflowed (checked after each group), and (EMU_TSAN) the ThreadSanitizer
 * fiber that always runs on it: a pool of them, taken in turn by the threads of successive
 * groups (POOL_TURNS groups apart, a thread index meets its own fiber, and so its program order,
 * again: blocks that far apart are not checked against each other at that index). */
const size_t STACK = 64 << 10, GUARD = 256;
const int POOL_TURNS = 8;
[[noreturn]] void fail(const char *what, int warp);
struct pool_entry {
    char *stack;
    void *tf;
};
std::vector<pool_entry> pool;
size_t pool_next = 0;
pool_entry &pool_take(int n) {
    if (pool.size() < (size_t)POOL_TURNS * n) {
        ignoring ig;
        while (pool.size() < (size_t)POOL_TURNS * n) {
            pool_entry e{(char *)malloc(STACK), nullptr};
            if (!e.stack) fail("out of memory for a stack", -1);
            memset(e.stack, 0x5a, GUARD);
#ifdef EMU_TSAN
            e.tf = __tsan_create_fiber(0); /* (its history: the host's, so far) */
#endif
            pool.push_back(e);
        }
    }
    pool_next %= pool.size();
    return pool[pool_next++];
}
/* Runs for every thread of every block: the guard's top cache line (the bytes an overflow,
 * growing down, reaches first) still holds its fill.  Compared in eight-byte words here rather
 * than by memcmp, which ThreadSanitizer intercepts (a range check of both operands on every
 * call, though this file is not instrumented): the race model would spend a tenth of its time
 * on it. */
const size_t GUARD_CHECKED = 64;
void check_stack(const char *p) {
    const uint64_t fill = 0x5a5a5a5a5a5a5a5aull;
    uint64_t diff = 0;
    for (size_t k = GUARD - GUARD_CHECKED; k < GUARD; k += sizeof(uint64_t)) {
        uint64_t w;
        __builtin_memcpy(&w, p + k, sizeof w); /* (a load: constant size, no call) */
        diff |= w ^ fill;
    }
    if (diff != 0) fail("a thread's stack overflowed (emu.cpp: STACK)", -1);
}
std::vector<fiber> fibers; /* the running group: block r's threads at r nb .. r nb + nb - 1 */
int nb = 0, ngroup = 1;    /* threads per block, blocks per group */
int n_run = 0, n_done = 0; /* the group's threads that can run, that have ended */
fiber *cur = nullptr;
context sched;
const std::function<void()> *body = nullptr;
/* each running block's dynamic shared memory, and its static shared variables (key, storage,
 * bytes: emu_block_alloc) */
struct block_var {
    const void *key;
    unsigned char *p;
    size_t bytes;
};
std::vector<unsigned char *> dyn_smem;
size_t dyn_bytes = 0;
std::vector<std::vector<block_var>> block_vars;
#ifdef EMU_TSAN
/* the objects of the group's barriers: two per warp, block and cluster (episodes in turn, so
 * that a thread already at the next barrier never releases into the one others are still
 * leaving), and the episode counts */
std::vector<sync_obj> warp_sync, block_sync, cluster_sync;
std::vector<unsigned> warp_ep, block_ep;
unsigned cluster_ep = 0;
/* each block of the group: it has triggered; one of its threads called pdl_wait */
std::vector<char> cta_triggered, cta_waited;
void *tsan_sched = nullptr; /* the host context that runs the scheduler */
#endif


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
/* warp w of the group: its threads t0 .. t1 - 1; the warp of thread t */
int warps_per_block() { return (nb + 31) / 32; }
int warp_of(int t) { return t / nb * warps_per_block() + t % nb / 32; }
void warp_range(int w, int &t0, int &t1) {
    const int r = w / warps_per_block(), q = w % warps_per_block();
    t0 = r * nb + 32 * q;
    t1 = t0 + 32 < (r + 1) * nb ? t0 + 32 : (r + 1) * nb;
}
/* the threads to run in this pass, in order */
void pass_order(std::vector<int> &order) {
    order.clear();
    const int n = (int)fibers.size();
    if (!seeded()) {
        for (int t = 0; t < n; t++) order.push_back(t);
        return;
    }
    std::vector<int> warps;
    for (int w = 0; w < warps_per_block() * ngroup; w++) warps.push_back(w);
    shuffle(warps);
    for (size_t q = 0; q < warps.size(); q++) {
        if (q + 1 < warps.size() && rnd(2)) continue; /* (the last one always runs) */
        int t0, t1;
        warp_range(warps[q], t0, t1);
        std::vector<int> lanes;
        for (int t = t0; t < t1; t++) lanes.push_back(t);
        shuffle(lanes);
        order.insert(order.end(), lanes.begin(), lanes.end());
    }
}

void yield_to_scheduler() {
#ifdef EMU_TSAN
    as(tsan_sched);
#endif
    context_switch(cur->ctx, sched);
}

void fiber_main() {
#ifdef EMU_TSAN
    __tsan_acquire(k_host);
    __tsan_acquire(k_entry);
#endif
    (*body)();
#ifdef EMU_TSAN
    __tsan_release(k_end);
    if (cur->waited) cta_waited[cur->blk] = 1; /* (its block, if it never triggers, ends after) */
#endif
    cur->state = DONE;
    yield_to_scheduler();
    abort(); /* never resumed */
}

/* (EMU_TSAN) a thread at a barrier: releases into the barrier's object of this episode now
 * (arrive_warp: its warp's __syncwarp; arrive_barrier: a block or cluster barrier, op
 * EMU_BAR_*), acquires it when let through (leave) */
void arrive_warp() {
#ifdef EMU_TSAN
    const int w = warp_of((int)(cur - fibers.data()));
    cur->pending = &warp_sync[2 * w + (warp_ep[w] & 1)];
    __tsan_release(cur->pending);
#endif
}
void arrive_barrier(int op) {
#ifdef EMU_TSAN
    cur->pending = op == EMU_BAR_CLUSTER ? &cluster_sync[cluster_ep & 1]
                                         : &block_sync[2 * cur->blk + (block_ep[cur->blk] & 1)];
    __tsan_release(cur->pending);
#else
    (void)op;
#endif
}
void leave() {
#ifdef EMU_TSAN
    __tsan_acquire(cur->pending);
    cur->pending = nullptr;
#endif
}

[[noreturn]] void fail(const char *what, int warp) {
    const uint3 b = cur ? cur->bid : uint3{0, 0, 0};
    fprintf(stderr, "emu: %s (block %u %u %u, warp %d)\n", what, b.x, b.y, b.z, warp);
    for (size_t t = 0; t < fibers.size(); t++)
        if (fibers[t].state != DONE)
            fprintf(stderr, "  thread %zu: state %d op %d\n", t, fibers[t].state, fibers[t].op);
    abort();
}

/* every live lane of warp w waits at a collective: the results */
bool resolve_warp(int w) {
    int t0, t1;
    warp_range(w, t0, t1);
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
        if (fibers[t].state == WARP) {
            fibers[t].state = RUN;
            n_run++;
        }
#ifdef EMU_TSAN
    warp_ep[w]++;
#endif
    return true;
}

/* every live thread of threads t0 .. t1 - 1 waits at a barrier of the kind `cluster`: release */
bool resolve_barrier(int t0, int t1, bool cluster) {
    int live = 0, waiting = 0, op = -1;
    uint64_t any = 0;
    for (int t = t0; t < t1; t++) {
        if (fibers[t].state == DONE) continue;
        live++;
        if (fibers[t].state == BAR && (fibers[t].op == EMU_BAR_CLUSTER) == cluster) {
            waiting++;
            if (op < 0) op = fibers[t].op;
            else if (op != fibers[t].op) fail("threads at different kinds of barrier", -1);
            any |= fibers[t].val;
        }
    }
    if (!live || waiting != live) return false;
    for (int t = t0; t < t1; t++)
        if (fibers[t].state == BAR) {
            fibers[t].res = any;
            fibers[t].state = RUN;
            n_run++;
        }
#ifdef EMU_TSAN
    if (cluster) cluster_ep++;
    else block_ep[t0 / nb]++;
#endif
    return true;
}

/* the capture in progress (cudaStreamBeginCapture .. cudaStreamEndCapture), if any */
emu_graph *capture = nullptr;
bool capture_invalid = false;
/* a call that synchronizes or allocates: refused while capturing (and the capture invalidated),
 * as CUDA does in the global and thread-local capture modes */
bool refused_in_capture() {
    if (!capture) return false;
    capture_invalid = true;
    return true;
}
} // namespace

uint3 blockDim, gridDim;
uint3 emu_thread_idx(void) { return cur->tid; }
uint3 emu_block_idx(void) { return cur->bid; }
unsigned emu_cluster_rank(void) { return (unsigned)cur->blk; }
unsigned emu_cluster_size(void) { return (unsigned)ngroup; }
void *emu_map_shared(void *p, int rank) {
    const size_t off = (size_t)((unsigned char *)p - dyn_smem[cur->blk]);
    if (rank < 0 || rank >= ngroup || off >= dyn_bytes)
        fail("map_shared_rank outside the dynamic shared memory or the cluster", -1);
    return dyn_smem[rank] + off;
}

void *emu_block_alloc(const void *key, size_t bytes, size_t align) {
    std::vector<block_var> &vars = block_vars[cur->blk];
    for (const block_var &v : vars)
        if (v.key == key) return v.p;
    if (align > 16) fail("a shared variable aligned to more than 16 bytes", -1);
    unsigned char *p = fresh_alloc(bytes);
    if (!p) fail("out of memory for a shared variable", -1);
    ignoring ig; /* (the list's own memory) */
    vars.push_back(block_var{key, p, bytes});
    return p;
}

void emu_enqueue(const std::function<void()> &op, int kind) {
    if (capture) capture->ops.emplace_back(op, kind);
    else if (kind == EMU_OP_KERNEL) race_kernel(op); /* (emu_run keeps the race model's order) */
    else race_op(op);
}

void emu_pdl_wait(void) {
#ifdef EMU_TSAN
    __tsan_acquire(k_start);
    cur->waited = true;
#endif
}
void emu_pdl_trigger(void) {
#ifdef EMU_TSAN
    if (!cta_triggered[cur->blk]) { /* (the block's first trigger counts) */
        cta_triggered[cur->blk] = 1;
        if (cur->waited) k_waited_trigger = true;
    }
#endif
}
void emu_fence(void) {
#ifdef EMU_TSAN
    __tsan_release(&fence_obj);
    __tsan_acquire(&fence_obj);
#endif
}

uint64_t emu_warp_op(int op, uint64_t v, int arg, unsigned mask, int width) {
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail("shuffle width not a power of 2", -1);
    if (op == EMU_SYNCWARP) arrive_warp();
    cur->state = WARP;
    cur->op = op;
    cur->val = v;
    cur->arg = arg;
    cur->width = width;
    cur->mask = mask;
    yield_to_scheduler();
    if (op == EMU_SYNCWARP) leave();
    return cur->res;
}

int emu_barrier(int op, int pred) {
    arrive_barrier(op);
    cur->state = BAR;
    cur->op = op;
    cur->val = pred != 0;
    yield_to_scheduler();
    leave();
    return (int)cur->res;
}

unsigned char *emu_dynamic_smem(void) { return dyn_smem[cur->blk]; }

namespace {
/* a group's shared memory: new at its start, released at its end */
void group_memory(size_t smem) {
    dyn_bytes = smem + 16;
    dyn_smem.assign(ngroup, nullptr);
    for (int r = 0; r < ngroup; r++) {
        dyn_smem[r] = fresh_alloc(dyn_bytes);
        if (!dyn_smem[r]) fail("out of memory for dynamic shared memory", -1);
    }
    block_vars.assign(ngroup, {});
}
void group_memory_release() {
    for (int r = 0; r < ngroup; r++) {
        fresh_free(dyn_smem[r]);
        for (block_var &v : block_vars[r]) fresh_free(v.p);
    }
    ignoring ig;
    dyn_smem.clear();
    block_vars.clear();
}
} // namespace

void emu_run(dim3 grid, dim3 block, size_t smem, unsigned cluster, bool pdl,
             const std::function<void()> &b) {
    nb = (int)(block.x * block.y * block.z); /* warps: consecutive linear indices */
    ngroup = cluster > 1 ? (int)cluster : 1;
    if (grid.x % ngroup) fail("grid not a multiple of the cluster size", -1);
    gridDim = uint3{grid.x, grid.y, grid.z};
    blockDim = uint3{block.x, block.y, block.z};
    /* (launches do not nest: a kernel launches nothing; EMU_TSAN: the threads run a copy, see
     * race_op) */
#ifdef EMU_TSAN
    auto *body_copy = new std::function<void()>(b);
    body = body_copy;
#else
    body = &b;
#endif
    const int n = nb * ngroup;
    fibers.assign(n, fiber{});
#ifdef EMU_TSAN
    /* the kernel's threads start after the host's history and the stream's state or, launched
     * programmatically after a kernel, after what was complete when that kernel's blocks had all
     * triggered (entry_next); pdl_wait takes the stream's state */
    void *host = host_context();
    tsan_sched = host;
    k_start = stream_snapshot(host, &start_ring[start_next++ % 1024]);
    k_end = new sync_obj;
    k_host = new sync_obj;
    __tsan_release(k_host);
    k_entry = pdl && entry_next ? entry_next : k_start;
    k_waited_trigger = false;
#else
    (void)pdl;
#endif
    const unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long b0 = 0; b0 < blocks; b0 += ngroup) {
        group_memory(smem);
#ifdef EMU_TSAN
        warp_sync.assign(2 * warps_per_block() * ngroup, sync_obj{});
        block_sync.assign(2 * ngroup, sync_obj{});
        cluster_sync.assign(2, sync_obj{});
        warp_ep.assign(warps_per_block() * ngroup, 0);
        block_ep.assign(ngroup, 0);
        cluster_ep = 0;
        cta_triggered.assign(ngroup, 0);
        cta_waited.assign(ngroup, 0);
#endif
        for (int r = 0; r < ngroup; r++) {
            const unsigned long long bl = b0 + r;
            const uint3 bid{(unsigned)(bl % grid.x), (unsigned)(bl / grid.x % grid.y),
                            (unsigned)(bl / grid.x / grid.y)};
            for (int t = 0; t < nb; t++) {
                fiber &f = fibers[r * nb + t];
                f = fiber{};
                f.tid = uint3{t % block.x, t / block.x % block.y, t / block.x / block.y};
                f.bid = bid;
                f.blk = r;
                f.state = RUN;
                const pool_entry &e = pool_take(n);
                f.stack = e.stack;
                f.tf = e.tf;
                context_make(f.ctx, f.stack, STACK, fiber_main);
            }
        }
        std::vector<int> order;
        std::vector<char> warp_ran(warps_per_block() * ngroup), block_ran(ngroup);
        n_run = n;
        n_done = 0;
        for (;;) {
            /* run each runnable thread until it waits or ends; then only the warps and blocks
             * that ran can have completed a collective or a barrier */
            std::fill(warp_ran.begin(), warp_ran.end(), 0);
            std::fill(block_ran.begin(), block_ran.end(), 0);
            bool ran = false;
            pass_order(order);
            for (int t : order) {
                if (fibers[t].state != RUN) continue;
                cur = &fibers[t];
#ifdef EMU_TSAN
                as(cur->tf);
#endif
                context_switch(sched, cur->ctx);
                n_run--;
                if (cur->state == DONE) n_done++;
                warp_ran[warp_of(t)] = 1;
                block_ran[cur->blk] = 1;
                ran = true;
            }
            if (n_done == n) break;
            bool resolved = false;
            for (size_t w = 0; w < warp_ran.size(); w++)
                if (warp_ran[w]) resolved |= resolve_warp((int)w);
            for (int r = 0; r < ngroup; r++)
                if (block_ran[r]) resolved |= resolve_barrier(r * nb, (r + 1) * nb, false);
            if (ran) resolved |= resolve_barrier(0, n, true);
            if (!resolved && n_run == 0) fail("deadlock", -1);
        }
        for (int t = 0; t < n; t++) check_stack(fibers[t].stack);
#ifdef EMU_TSAN
        for (int r = 0; r < ngroup; r++) /* a block that never triggered counts when it ends */
            if (!cta_triggered[r] && cta_waited[r]) k_waited_trigger = true;
#endif
        group_memory_release();
#ifdef EMU_TSAN
        warp_sync.clear(); /* (their clocks go with them) */
        block_sync.clear();
        cluster_sync.clear();
#endif
    }
#ifdef EMU_TSAN
    stream_complete(host, k_end);
    stream_delete(host, body_copy);
    delete k_end;
    delete k_host;
    entry_next = !pdl || k_waited_trigger ? k_start : k_entry;
#endif
    cur = nullptr;
    body = nullptr;
}

/* ---- host API ---- */
#include <map>
#include <mutex>

namespace {
/* allocations: device (cudaMalloc) or pinned host (cudaMallocHost) memory, for
 * cudaPointerGetAttributes */
struct alloc_info {
    size_t bytes;
    cudaMemoryType type;
};
std::map<uintptr_t, alloc_info> allocs;
std::mutex allocs_lock;
cudaError_t allocate(void **p, size_t n, cudaMemoryType type) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    std::lock_guard<std::mutex> g(allocs_lock);
    allocs[(uintptr_t)*p] = alloc_info{n ? n : 1, type};
    return cudaSuccess;
}
cudaError_t release(void *p) {
    if (!p) return cudaSuccess;
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    race_host_sync(); /* (cudaFree waits for the device) */
    std::lock_guard<std::mutex> g(allocs_lock);
    allocs.erase((uintptr_t)p);
    free(p);
    return cudaSuccess;
}
} // namespace

extern "C" {
cudaError_t cudaMalloc(void **p, size_t n) { return allocate(p, n, cudaMemoryTypeDevice); }
cudaError_t cudaFree(void *p) { return release(p); }
cudaError_t cudaMallocHost(void **p, size_t n) { return allocate(p, n, cudaMemoryTypeHost); }
cudaError_t cudaFreeHost(void *p) { return release(p); }
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned) {
    *d = h;
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered;
    std::lock_guard<std::mutex> g(allocs_lock);
    auto it = allocs.upper_bound((uintptr_t)p);
    if (it != allocs.begin()) {
        --it;
        if ((uintptr_t)p < it->first + it->second.bytes) {
            a->type = it->second.type;
            a->devicePointer = (void *)p;
            a->hostPointer = it->second.type == cudaMemoryTypeHost ? (void *)p : nullptr;
        }
    }
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    race_host_sync();
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) {
    emu_enqueue([=] { memset(p, v, n); });
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    race_host_sync();
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind,
                            cudaStream_t) {
    emu_enqueue([=] { memmove(d, s, n); });
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    race_host_sync();
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaDeviceSynchronize(); }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaDeviceSynchronize(); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = (cudaStream_t)malloc(1);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    free(s);
    return cudaSuccess;
}
/* every operation runs (or is recorded) in program order, which respects every event */
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = (cudaEvent_t)malloc(1);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    free(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t) {
    *ms = 0;
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, enum cudaStreamCaptureMode) {
    if (capture) return cudaErrorStreamCaptureUnsupported;
    capture = new emu_graph;
    capture_invalid = false;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
    *g = nullptr;
    if (!capture) return cudaErrorInvalidValue;
    emu_graph *c = capture;
    capture = nullptr;
    if (capture_invalid) {
        delete c;
        return cudaErrorStreamCaptureInvalidated;
    }
    *g = c;
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t, enum cudaStreamCaptureStatus *st) {
    *st = !capture ? cudaStreamCaptureStatusNone
          : capture_invalid ? cudaStreamCaptureStatusInvalidated
                            : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long) {
    *x = new emu_graph{g->ops};
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t) {
    for (const auto &op : x->ops) emu_enqueue(op.first, op.second);
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
    delete x;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; } /* (launches never fail here) */
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    default: return "emulated error";
    }
}
cudaError_t cudaFuncSetAttribute(const void *, int, int) { return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
/* (NNPOPS_EMU_SM: the compute capability's major number, default 9; below 9 the paths that need
 * thread block clusters are not taken) */
cudaError_t cudaDeviceGetAttribute(int *v, int attr, int) {
    const char *sm = getenv("NNPOPS_EMU_SM");
    /* as an H200 */
    *v = attr == cudaDevAttrMaxSharedMemoryPerBlockOptin ? 227 * 1024
         : attr == cudaDevAttrMultiProcessorCount        ? 132
         : attr == cudaDevAttrComputeCapabilityMajor     ? (sm && *sm ? atoi(sm) : 9)
                                                         : 0;
    return cudaSuccess;
}
}

/* ---- cuBLAS (include/cublas_v2.h): C = alpha op(A) op(B) + beta C, column-major ---- */
#include <cublas_v2.h>

struct emu_cublas {
    cudaStream_t stream;
};

namespace {
/* x rounded to TF32 (10 explicit mantissa bits, to nearest, ties away from zero) */
float to_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}
/* (EMU_TSAN) the elements of a column-major r x c matrix with leading dimension ld, as one range
 * read or written (this file is not instrumented) */
template <typename T> void mark(const T *p, int r, int c, int ld, bool write) {
#ifdef EMU_TSAN
    if (r <= 0 || c <= 0) return;
    const size_t bytes = sizeof(T) * ((size_t)(c - 1) * ld + r);
    if (write) __tsan_write_range((void *)p, bytes);
    else __tsan_read_range((void *)p, bytes);
#else
    (void)p, (void)r, (void)c, (void)ld, (void)write;
#endif
}
template <typename T>
void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha, const T *A,
          int lda, const T *B, int ldb, T beta, T *C, int ldc, bool tf32) {
    mark(A, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, false);
    mark(B, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, false);
    if (beta != 0) mark(C, m, n, ldc, false);
    mark(C, m, n, ldc, true);
    /* op(A) by rows and op(B) by columns, each contiguous along k (and rounded to TF32, as the
     * tensor cores take them, for CUBLAS_COMPUTE_32F_FAST_TF32) */
    std::vector<T> a((size_t)m * k), b((size_t)k * n);
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++) {
            const T v = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
            a[(size_t)i * k + p] = tf32 ? (T)to_tf32((float)v) : v;
        }
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++) {
            const T v = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
            b[(size_t)j * k + p] = tf32 ? (T)to_tf32((float)v) : v;
        }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            const T *x = a.data() + (size_t)i * k, *y = b.data() + (size_t)j * k;
            T s = 0;
            for (int p = 0; p < k; p++) s += x[p] * y[p];
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
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t) {
    if (at != bt || at != ct || (at == CUDA_R_64F) != (comp == CUBLAS_COMPUTE_64F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    /* alpha and beta are host scalars, read now (as cuBLAS does when a stream is captured) */
    const bool f64 = at == CUDA_R_64F, tf32 = comp == CUBLAS_COMPUTE_32F_FAST_TF32;
    const double a64 = f64 ? *(const double *)alpha : 0, b64 = f64 ? *(const double *)beta : 0;
    const float a32 = f64 ? 0 : *(const float *)alpha, b32 = f64 ? 0 : *(const float *)beta;
    emu_enqueue([=] {
        for (int q = 0; q < batch; q++) {
            if (f64)
                gemm(ta, tb, m, n, k, a64, (const double *)A + q * sa, lda,
                     (const double *)B + q * sb, ldb, b64, (double *)C + q * sc, ldc, false);
            else
                gemm(ta, tb, m, n, k, a32, (const float *)A + q * sa, lda,
                     (const float *)B + q * sb, ldb, b32, (float *)C + q * sc, ldc, tf32);
        }
    });
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
