/*
 * cuda_step.c - the GPU step of nnpops_compute for a model loaded on "cuda" / "cuda:N", the
 * experimental device-pointer entry nnpops_compute_device, and the context's GPU state (stream,
 * cuBLAS handle, NNPOPS__SIDE_STREAMS side streams with their own handles and fork / join events,
 * one device arena per entry, pinned staging buffers).
 *
 * ---- host entry (nnpops_compute) ----
 * context.c validates and prepares the inputs on the host (units, species, grouping by system) and
 * hands them here.  One step:
 *   host   choose the neighbor algorithm (system sizes and cells), group the local atoms by species
 *          into GEMM columns (padded to multiples of 32), lay out the arena, grow it if needed,
 *          pack every input into ONE pinned buffer;
 *   device (all on the context's stream, in order)
 *          1. ONE host-to-device copy of the packed inputs;
 *          2. ONE memset of the output block (status word, energies, virials, forces, per-atom
 *             terms: everything that is accumulated);
 *          3. neighbor search: center lists of the local atoms (kernels/cuda/neighbors.cu);
 *          4. the potential (vt->compute_cuda): atom energies, member energies, dE/dr per entry;
 *          5. force scatter and virials (pair reduction over the entries), energies per system;
 *          6. ONE device-to-host copy of the output block (status word first) into pinned memory;
 *          (for inputs and outputs of at most NNPOPS_STAGE_KERNEL_MAX bytes, 1-2 are ONE staging
 *          kernel reading the pinned inputs through their device pointer and 6 another one
 *          writing the pinned outputs: kernel nodes follow each other in a graph with less
 *          latency than copy-engine nodes, which matters for small systems; for a small system
 *          on the one-block neighbor search, that kernel does 1-2 itself before it searches,
 *          and for output blocks of at most NNPOPS_STAGE_TAIL_MAX bytes the last block of the
 *          reductions does 6, nnpops__reduce_cuda: two kernels fewer);
 *   host   ONE stream synchronization, then the status word: a neighbor overflow (more entries than
 *          capacity) or a center with more angular neighbors than the AEV kernels held grows the
 *          capacity and recomputes the whole step (a truncated result is never returned); bad
 *          cells, too many images and too-close atoms become the CPU path's errors; otherwise the
 *          outputs are copied to the caller's arrays with the unit factors applied.
 * Arena layout (each part 256-byte aligned): [inputs: positions, cells | static inputs: sys_start,
 * species, species ranks, batch, order, centers, pbc | outputs | member atom energies |
 * device-entry io word | center lists: start, pairs, vectors, pair gradients | neighbor-search
 * work | cuBLAS work space | potential work | deterministic-reduction work].  The arena and the
 * pinned buffers grow by at least 1.5x and never shrink, so a run of same-sized steps allocates
 * nothing after the first.  Every entry point makes the model's device current and restores the
 * caller's device on return (OpenMM calls from its own thread).
 *
 * CUDA graphs (option cuda_graphs, launch_step): device steps 1-6 are exactly what a graph holds.
 * Capture safety: everything that allocates (arena, pinned staging), sets the cuBLAS work spaces
 * (cublasSetWorkspace on the arena for the main handle and the side-stream handles the potential's
 * step uses, bound before the step, so cuBLAS never allocates while capturing), reads the host
 * inputs or the device status is OUTSIDE the enqueued region; inside it
 * there are only async copies from/to the pinned buffers, memsets, kernel launches, cub calls on
 * preallocated work space and cuBLAS GEMMs on the context's stream, and work the potential forks
 * onto the context's side streams (their own cuBLAS handles) and joins back with events, which a
 * capture records as parallel branches of the graph.  A graph is keyed by every
 * host-side value baked into it (sizes, column counts per species, neighbor plan, capacity,
 * max_angular, options, arena and staging addresses); a step with another key drops the graph and
 * runs eagerly until graph_warmup_steps steps of the new key have run, then captures again.  A
 * neighbor overflow seen after a replay grows the capacity, which changes the key: the step is
 * recomputed eagerly with the grown buffers and the new shape re-captured after its warm-up.  A
 * failed capture runs the step eagerly (it succeeds), counts stats.eager_fallbacks once, writes
 * CUDA's reason to the context's warning (nnpops_context_last_warning) and keeps that key eager.
 * The internal test hook nnpops__cuda_test_break_next_capture makes the next capture synchronize
 * the capturing stream (which CUDA forbids), so that this failure path runs with CUDA's own error.
 * The species set: the host marks the species present among a step's atoms (ghosts included) and
 * ranks each atom's species among them (a static input); before the step is sized, the potential's
 * vt->cuda_prepare builds or finds its per-context state for that set (ANI: the AEV restricted to
 * the present species, with its first layers' weights restricted to match), outside any capture;
 * the set and the state are part of the graph key.  The state lives until the context is
 * destroyed.
 * Option deterministic: the cell list orders the atoms of each bin, the AEV kernels sum in fixed
 * point, the output layer sums the members in order, and forces, virials and energies are gathered
 * (nnpops__center_reduce_det_cuda) instead of scattered with atomics: bitwise reproducible.
 *
 * ---- device entry (nnpops_compute_device, experimental) ----
 * The caller's inputs and outputs are device arrays and the step runs on the CALLER's stream.  The
 * entry has its own arena (the host entry's steps never touch it) and a PLAN: the sizes, species
 * columns, neighbor plan, capacity and layout of one shape (atom count, local count, system count
 * as given, outputs asked, cells given, pbc, options), plus the static inputs (species, batch,
 * order, sys_start, centers, pbc) uploaded into the arena ONCE, when the plan is made.
 *   planning call (first call, another shape, or a re-plan requested by a problem that
 *          nnpops_context_device_status reported; only on a stream that is not capturing):
 *          context.c copies the caller's device inputs to the host (nnpops__cuda_device_fetch, one
 *          synchronization), validates and prepares them with nnpops_compute's code (same errors),
 *          computes n_systems = max(batch) + 1 when it is not given, and calls
 *          nnpops__cuda_device_plan: plan, arena, static-input upload, then the step as below with
 *          a synchronization and the status word checked like the host entry (growing the
 *          capacity and recomputing on overflow).
 *   steady call (same shape; nnpops__cuda_device_try): only enqueues, on the caller's stream:
 *          1. a memset of the output block (status word, io word, accumulated outputs);
 *          2. the prepare kernel (kernels/cuda/device_io.cu): caller positions -> angstrom into the
 *             arena, each coordinate checked finite, atomic numbers -> species compared with the
 *             plan's, batch compared with the plan's (an index >= the plan's system count has its
 *             own flag), cells -> angstrom, the plan generation compared (stale graphs);
 *          3-5. the host entry's device steps 3-5 (enqueue_core), reading the arena;
 *          6. the finish kernel: the caller's outputs in the caller's units, or NaN in every
 *             element when any flag of the step is set; the flags accumulate in a sticky record
 *             (a device allocation that never moves);
 *          7. an async copy of the sticky record into a pinned host slot (also never moved);
 *          1 and 7 are the staging kernel (nnpops__stage_cuda) where the output block is at most
 *          NNPOPS_STAGE_KERNEL_MAX bytes, as in the host entry.
 *          No synchronization, no allocation, no host read of device data: when the caller's
 *          stream is capturing, the same calls go into the caller's graph.  cuBLAS runs on the
 *          caller's stream with the device arena's work space for the call and is set back after.
 *          A call on another stream than the previous non-capturing call first waits (event) for
 *          that call's work, which uses the same arena.
 *   nnpops__cuda_device_status synchronizes the stream it is given, reads the pinned record, zeroes
 *          it, and turns the flags into the host entry's errors; a neighbor overflow (or too many
 *          angular neighbors) grows the capacity and marks the plan for a re-plan, as do changed
 *          atomic numbers or batch indices.  A re-plan after the caller captured a graph moves the
 *          device entry to a fresh arena and keeps the old one (up to DEV_RETIRED_MAX of them) until
 *          the context is destroyed, so replaying a stale graph writes only retired memory and is
 *          reported (its prepare kernel sees an old generation).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "internal.h"
#include "kernels/cuda/kernels_cuda.h"

#define CUBLAS_WORK_BYTES ((size_t)32 << 20)
#define DEV_RETIRED_MAX 8

/* ---- layout -------------------------------------------------------------------------------- */

typedef struct step_layout {
    /* inputs (offsets inside the pinned input buffer and the arena alike); the static inputs are
     * sys_start .. in_bytes */
    size_t pos, cells, sys_start, species, species_rank, batch, order, centers, pbc, in_bytes;
    /* outputs: [status | energies | member energies | virials | forces | atomic virials | atom
     * energies] copied back up to d2h_end; then member atom energies, the device entry's io word
     * and the reductions' ticket (nnpops__reduce_cuda's staging tail), zeroed with the rest */
    size_t out0, status, energies, member_e, virials, forces, atom_vir, atom_e, d2h_end, member_ae,
        io, ticket, zero_end;
    size_t start, pairs, vec, grad, nbr_work, nbr_work_bytes, blas_work, pot_work, pot_work_bytes,
        det_work, det_work_bytes, total;
    int blas_sides; /* side-stream cuBLAS handles with a work space after the main one's */
} step_layout;

typedef struct step_sizes {
    int64_t n, n_local, ns, ens, n_cols, capacity;
    int want_energies, want_member, want_virials, want_forces, want_atom_e, want_atom_vir;
    int need_grad;
    int det;                   /* option deterministic */
    int tc;                    /* option tensor_cores */
    int dev_io;                /* device entry: the layout holds an io word */
    nnpops__nbr_plan plan;
} step_sizes;

/* Everything one step enqueues (also what a graph holds, and the device entry's plan). */
typedef struct step_plan {
    step_sizes z;
    step_layout L;
    nnpops__dstep ds;
    double min_distance;
    int32_t max_images;
    int32_t max_angular;       /* angular entries per center the AEV kernels hold */
} step_plan;

typedef struct step_wants {
    int energies, member, virials, forces, atom_e, atom_vir;
} step_wants;

typedef struct graph_key {
    step_sizes z;
    int64_t ds_cols;
    int64_t col_count[NNPOPS__MAX_SPECIES];
    int32_t member, max_angular, max_images;
    uint32_t species_present;
    double min_distance;
    void *dev, *pin_in, *pin_out, *pot_state;
    size_t total;
} graph_key;

/* The shape of a device-entry plan: a call with another key re-plans (or, capturing, fails). */
typedef struct dev_key {
    int64_t n, n_local, ns_given;
    int32_t want_e, want_f, want_v, has_cells, has_pbc, max_images, member, det, tc;
    int64_t max_neighbors;
    double to_A, e_factor, f_factor, min_distance;
} dev_key;

/* Offsets in the device entry's persistent allocations (they never move: a caller's graph refers
 * to them).  Device: the sticky record, then the current plan generation.  Pinned host: the copy of
 * the sticky record, the planning call's status and io words, the generation to upload. */
#define PERSIST_GEN (((sizeof(nnpops__io_sticky)) + 255) & ~(size_t)255)
#define PERSIST_BYTES (PERSIST_GEN + 256)
#define PIN_STICKY 0
#define PIN_STATUS PERSIST_GEN
#define PIN_IO (PIN_STATUS + ((sizeof(nnpops__dev_status) + 255) & ~(size_t)255))
#define PIN_GEN (PIN_IO + ((sizeof(nnpops__io_status) + 255) & ~(size_t)255))
#define PIN_BYTES (PIN_GEN + 256)

typedef struct dev_state {
    int ready;                 /* a plan exists and no re-plan is pending */
    dev_key key;
    uint8_t *pbc;              /* the plan's pbc flags [ns][3] (host copy, when has_pbc) */
    size_t pbc_bytes;
    step_plan P;
    void *dev;                 /* the device entry's arena */
    size_t dev_bytes;
    void *retired[DEV_RETIRED_MAX]; /* arenas of earlier plans a caller's graph may still use */
    int n_retired;
    int64_t capacity;          /* center-list entries */
    int captured;              /* a caller captured a step on the current arena */
    int64_t generation;        /* plans made; the device copy is at PERSIST_GEN */
    void *persist;             /* device, PERSIST_BYTES */
    void *pin;                 /* pinned host, PIN_BYTES */
    void *pin_dev;             /* its device pointer (NULL: not mapped) */
    cudaEvent_t done;          /* recorded after each non-capturing call */
    int have_done;
    cudaStream_t last_stream;  /* the stream of that call (compared, never used) */
    nnpops__buf stage;         /* host image of the plan's static inputs */
} dev_state;

struct nnpops__cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    /* side streams of the step (nnpops__dstep: concurrent species networks), their cuBLAS handles
     * and the fork / join events */
    cudaStream_t side[NNPOPS__SIDE_STREAMS];
    cublasHandle_t side_blas[NNPOPS__SIDE_STREAMS];
    cudaEvent_t fork_event, join_event[NNPOPS__SIDE_STREAMS];
    void *dev;
    size_t dev_bytes;
    void *pin_in, *pin_out;
    void *pin_in_dev, *pin_out_dev; /* their device pointers (NULL: not mapped) */
    size_t pin_in_bytes, pin_out_bytes;
    int64_t capacity;          /* center-list entries */
    double entries_per_center; /* largest ratio seen, for the first capacity of a new size */
    int32_t max_angular;
    void *blas_work;           /* where cuBLAS's work space was last set (NULL: set it again) */
    int blas_sides;            /* and for how many side-stream handles */
    /* CUDA graph of the last shape (option cuda_graphs) */
    cudaGraphExec_t graph_exec;
    int have_graph, have_key, same_steps, capture_failed;
    graph_key key;
    /* the potential's state for the species sets seen (vt->cuda_prepare) and its release */
    void *pot_state;
    void (*pot_release)(void *state);
    /* the device-pointer entry */
    dev_state dv;
};

#define TRY(x) NNPOPS__TRY(x)

static size_t al(size_t b) { return (b + 255) & ~(size_t)255; }

/* Makes `device` current; *prev receives the caller's. */
static nnpops_status enter_device(int device, int *prev) {
    *prev = -1;
    if (cudaGetDevice(prev) != cudaSuccess) {
        (void)cudaGetLastError();
        *prev = -1;
    }
    if (*prev != device) {
        cudaError_t e = cudaSetDevice(device);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return nnpops__fail(NNPOPS_ERROR_NO_DEVICE, "cannot use CUDA device %d: %s", device,
                                cudaGetErrorString(e));
        }
    }
    return NNPOPS_OK;
}

static void leave_device(int device, int prev) {
    if (prev >= 0 && prev != device) cudaSetDevice(prev);
}

/* ---- model glue ---------------------------------------------------------------------------- */

nnpops_status nnpops__cuda_model_upload(nnpops_model *m) {
    if (!m->vt->upload || !m->vt->compute_cuda)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "model '%s' of type %s has no GPU implementation; load it on \"cpu\"",
                            m->name, m->type);
    int prev;
    TRY(enter_device(m->device_index, &prev));
    nnpops_status st = m->vt->upload(m);
    leave_device(m->device_index, prev);
    return st;
}

void nnpops__cuda_model_release(nnpops_model *m) {
    if (!m->device_data || !m->vt->release_device) return;
    int prev;
    if (enter_device(m->device_index, &prev) != NNPOPS_OK) return;
    m->vt->release_device(m);
    leave_device(m->device_index, prev);
}

/* ---- context state ------------------------------------------------------------------------- */

static void dev_free(dev_state *v) {
    /* the device entry's work may still run on a caller's stream (cudaFree waits for the device
     * too, but say so) */
    if (v->have_done) cudaEventSynchronize(v->done);
    if (v->dev || v->n_retired || v->persist) cudaDeviceSynchronize();
    if (v->dev) cudaFree(v->dev);
    for (int k = 0; k < v->n_retired; k++) cudaFree(v->retired[k]);
    if (v->persist) cudaFree(v->persist);
    if (v->pin) cudaFreeHost(v->pin);
    if (v->done) cudaEventDestroy(v->done);
    nnpops__buf_free(&v->stage);
    free(v->pbc);
    memset(v, 0, sizeof *v);
}

static void ctx_free(nnpops__cuda_ctx *c) {
    if (c->stream) cudaStreamSynchronize(c->stream);
    dev_free(&c->dv);
    if (c->pot_state && c->pot_release) c->pot_release(c->pot_state);
    if (c->graph_exec) cudaGraphExecDestroy(c->graph_exec);
    if (c->dev) cudaFree(c->dev);
    if (c->pin_in) cudaFreeHost(c->pin_in);
    if (c->pin_out) cudaFreeHost(c->pin_out);
    if (c->blas) cublasDestroy(c->blas);
    for (int k = 0; k < NNPOPS__SIDE_STREAMS; k++) {
        if (c->side[k]) cudaStreamSynchronize(c->side[k]);
        if (c->side_blas[k]) cublasDestroy(c->side_blas[k]);
        if (c->side[k]) cudaStreamDestroy(c->side[k]);
        if (c->join_event[k]) cudaEventDestroy(c->join_event[k]);
    }
    if (c->fork_event) cudaEventDestroy(c->fork_event);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

void nnpops__cuda_ctx_destroy(nnpops__cuda_ctx *c) {
    if (!c) return;
    int prev;
    if (enter_device(c->device, &prev) != NNPOPS_OK) {
        free(c);
        return;
    }
    const int device = c->device;
    ctx_free(c);
    leave_device(device, prev);
    (void)cudaGetLastError();
}

/* A cuBLAS handle bound to `stream`: plain FP32 / FP64 arithmetic (no TF32; the compute type of
 * every GEMM says so too), and the stream set now, since setting a stream resets the handle's
 * work space, which the step binds to the arena before it runs (set_workspaces;
 * nnpops__gemm_cuda sets the stream only when it changes).  *h is NULL on failure. */
static nnpops_status new_blas(cublasHandle_t *h, cudaStream_t stream) {
    cublasStatus_t b = cublasCreate(h);
    if (b == CUBLAS_STATUS_SUCCESS) b = cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH);
    if (b == CUBLAS_STATUS_SUCCESS) b = cublasSetStream(*h, stream);
    if (b == CUBLAS_STATUS_SUCCESS) return NNPOPS_OK;
    if (*h) cublasDestroy(*h);
    *h = NULL;
    return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: creating a cuBLAS handle: %s", __FILE__,
                        __LINE__, cublasGetStatusString(b));
}

/* The cuBLAS work spaces of the context's handles in the arena from `work` on: the main handle's,
 * then those of the first `sides` side-stream handles (the ones the potential's step uses,
 * vt->cuda_work_bytes), CUBLAS_WORK_BYTES each, so that no GEMM of a step (nor of a captured
 * graph) uses cuBLAS's own pool. */
static nnpops_status set_workspaces(nnpops__cuda_ctx *c, char *work, int sides) {
    cublasStatus_t b = cublasSetWorkspace(c->blas, work, CUBLAS_WORK_BYTES);
    for (int k = 0; k < sides && k < NNPOPS__SIDE_STREAMS && b == CUBLAS_STATUS_SUCCESS; k++)
        b = cublasSetWorkspace(c->side_blas[k], work + (size_t)(k + 1) * CUBLAS_WORK_BYTES,
                               CUBLAS_WORK_BYTES);
    if (b == CUBLAS_STATUS_SUCCESS) return NNPOPS_OK;
    return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cublasSetWorkspace: %s", __FILE__, __LINE__,
                        cublasGetStatusString(b));
}

static nnpops_status ctx_create(int device, nnpops__cuda_ctx **out) {
    nnpops__cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (GPU context state)");
    c->device = device;
    c->max_angular = 64;
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        c->stream = NULL;
        ctx_free(c);
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cudaStreamCreateWithFlags: %s", __FILE__,
                            __LINE__, cudaGetErrorString(e));
    }
    nnpops_status st = new_blas(&c->blas, c->stream);
    if (st != NNPOPS_OK) {
        ctx_free(c);
        return st;
    }
    e = cudaEventCreateWithFlags(&c->fork_event, cudaEventDisableTiming);
    for (int k = 0; k < NNPOPS__SIDE_STREAMS && e == cudaSuccess; k++) {
        e = cudaStreamCreateWithFlags(&c->side[k], cudaStreamNonBlocking);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->join_event[k], cudaEventDisableTiming);
        if (e == cudaSuccess && (st = new_blas(&c->side_blas[k], c->side[k])) != NNPOPS_OK) {
            ctx_free(c);
            return st;
        }
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        ctx_free(c);
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: side streams of the GPU context: %s",
                            __FILE__, __LINE__, cudaGetErrorString(e));
    }
    *out = c;
    return NNPOPS_OK;
}

/* Grows a device arena to at least `bytes` (1.5x, whole MiB); `stream` is synchronized first (the
 * arena's last user). */
static nnpops_status grow_arena(void **p, size_t *have, size_t bytes, cudaStream_t stream,
                                int device, const char *what) {
    if (bytes <= *have) return NNPOPS_OK;
    size_t want = *have + *have / 2;
    if (want < bytes) want = bytes;
    want = (want + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    NNPOPS__CUDA_CALL(cudaStreamSynchronize(stream));
    if (*p) cudaFree(*p);
    *p = NULL;
    *have = 0;
    cudaError_t e = cudaMalloc(p, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                           : NNPOPS_ERROR_CUDA,
                            "%s:%d: cudaMalloc of %zu bytes (%s) on device %d: %s", __FILE__,
                            __LINE__, want, what, device, cudaGetErrorString(e));
    }
    *have = want;
    return NNPOPS_OK;
}

/* The device pointer of pinned host memory h (mapped under unified addressing), or NULL. */
static void *pinned_device_pointer(void *h) {
    void *dp = NULL;
    if (cudaHostGetDevicePointer(&dp, h, 0) == cudaSuccess) return dp;
    (void)cudaGetLastError();
    return NULL;
}

/* Grows the pinned buffer *p to at least `bytes` (1.5x at least); *dp receives its device pointer
 * (pinned_device_pointer). */
static nnpops_status grow_pinned(void **p, void **dp, size_t *have, size_t bytes,
                                 const char *what) {
    if (bytes <= *have) return NNPOPS_OK;
    size_t want = *have + *have / 2;
    if (want < bytes) want = bytes;
    if (*p) cudaFreeHost(*p);
    *p = NULL;
    *dp = NULL;
    *have = 0;
    cudaError_t e = cudaMallocHost(p, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY,
                            "%s:%d: cudaMallocHost of %zu bytes (%s): %s", __FILE__, __LINE__, want,
                            what, cudaGetErrorString(e));
    }
    *have = want;
    *dp = pinned_device_pointer(*p);
    return NNPOPS_OK;
}

static void layout_of(const step_sizes *z, size_t pot_work, int sides, step_layout *L) {
    size_t cur = 0;
#define TAKE(field, bytes)                                                                        \
    do {                                                                                          \
        L->field = cur;                                                                           \
        cur += al((size_t)(bytes) > 0 ? (size_t)(bytes) : 1);                                     \
    } while (0)
    TAKE(pos, sizeof(double) * 3 * z->n);
    TAKE(cells, sizeof(double) * 9 * z->ns);
    TAKE(sys_start, sizeof(int64_t) * (z->ns + 1));
    TAKE(species, sizeof(int32_t) * z->n);
    TAKE(species_rank, sizeof(int32_t) * z->n);
    TAKE(batch, sizeof(int32_t) * z->n);
    TAKE(order, sizeof(int32_t) * z->n);
    TAKE(centers, sizeof(int32_t) * z->n_cols);
    TAKE(pbc, 3 * z->ns);
    L->in_bytes = cur;
    L->out0 = cur;
    TAKE(status, sizeof(nnpops__dev_status));
    TAKE(energies, sizeof(double) * z->ns);
    TAKE(member_e, z->want_member ? sizeof(double) * z->ns * z->ens : 0);
    TAKE(virials, z->want_virials ? sizeof(double) * 9 * z->ns : 0);
    TAKE(forces, z->want_forces ? sizeof(double) * 3 * z->n : 0);
    TAKE(atom_vir, z->want_atom_vir ? sizeof(double) * 9 * z->n : 0);
    L->d2h_end = cur; /* atom energies come back only when wanted */
    TAKE(atom_e, sizeof(double) * z->n);
    if (z->want_atom_e) L->d2h_end = cur;
    TAKE(member_ae, z->want_member ? sizeof(double) * z->n * z->ens : 0);
    if (z->dev_io)
        TAKE(io, sizeof(nnpops__io_status));
    else
        L->io = cur; /* the host entry has none */
    TAKE(ticket, sizeof(unsigned));
    L->zero_end = cur;
    TAKE(start, sizeof(int64_t) * (z->n_local + 1));
    TAKE(pairs, sizeof(int32_t) * 2 * z->capacity);
    TAKE(vec, sizeof(double) * 3 * z->capacity);
    TAKE(grad, z->need_grad ? sizeof(double) * 3 * z->capacity : 0);
    L->nbr_work_bytes = nnpops__nbr_cuda_work_bytes(z->n, z->ns, z->n_local, &z->plan);
    TAKE(nbr_work, L->nbr_work_bytes);
    L->blas_sides = sides < 0 ? 0 : (sides > NNPOPS__SIDE_STREAMS ? NNPOPS__SIDE_STREAMS : sides);
    TAKE(blas_work, (1 + (size_t)L->blas_sides) * CUBLAS_WORK_BYTES); /* set_workspaces */
    L->pot_work_bytes = pot_work;
    TAKE(pot_work, pot_work);
    L->det_work_bytes = z->det ? nnpops__center_reduce_det_work_bytes(z->n, z->capacity) : 0;
    TAKE(det_work, L->det_work_bytes);
    L->total = cur;
#undef TAKE
}

/* The layout of a step with the potential's needs for it: its work space and the side streams
 * whose cuBLAS handles get work space (vt->cuda_work_bytes). */
static void step_layout_of(const nnpops_model *m, const step_sizes *z, const nnpops__dstep *ds,
                           step_layout *L) {
    int sides = 0;
    const size_t pot = m->vt->cuda_work_bytes ? m->vt->cuda_work_bytes(m, ds, &sides) : 0;
    layout_of(z, pot, sides, L);
}

/* ---- the step ------------------------------------------------------------------------------ */

static const char axis_name[3] = {'a', 'b', 'c'};

static nnpops_status check_status(const nnpops__dev_status *s, const nnpops__cuda_args *g,
                                  double cutoff) {
    if (s->flags & (NNPOPS__ST_BAD_CELL | NNPOPS__ST_TOO_MANY_IMAGES)) {
        const int ax = s->bad_axis;
        if (s->bad_kind == (int32_t)NNPOPS__ST_TOO_MANY_IMAGES)
            return nnpops__fail(NNPOPS_ERROR_TOO_MANY_IMAGES,
                                "system %d: cutoff %g needs %d periodic images along axis %c, more "
                                "than max_images = %d",
                                (int)s->bad_system, cutoff, (int)s->images,
                                ax >= 0 && ax < 3 ? axis_name[ax] : '?', (int)g->max_images);
        if (ax < 0)
            return nnpops__fail(NNPOPS_ERROR_BAD_CELL, "system %d: cell has a non-finite entry",
                                (int)s->bad_system);
        return nnpops__fail(NNPOPS_ERROR_BAD_CELL,
                            "system %d: cell is singular along axis %c (when any axis is periodic "
                            "all three cell vectors must be independent)",
                            (int)s->bad_system, axis_name[ax]);
    }
    if (s->flags & NNPOPS__ST_TOO_CLOSE) {
        if (s->close_i == s->close_j)
            return nnpops__fail(NNPOPS_ERROR_BAD_CELL,
                                "atom %d is %g angstrom from its own periodic image (cell too "
                                "small; min_distance = %g angstrom)",
                                (int)s->close_i, s->close_d, g->min_distance);
        return nnpops__fail(NNPOPS_ERROR_ATOMS_TOO_CLOSE,
                            "atoms %d and %d are %g angstrom apart (min_distance = %g angstrom)",
                            (int)s->close_i, (int)s->close_j, s->close_d, g->min_distance);
    }
    return NNPOPS_OK;
}


/* After a synchronous step: the errors of the status word, the max_neighbors limit, the entries
 * per center statistic, and growth: *retry = 1 when the capacity or max_angular grew (the step must
 * be recomputed; an error after a few rounds). */
static nnpops_status settle_status(nnpops__cuda_ctx *c, const nnpops_model *m,
                                   const nnpops__dev_status *s, const nnpops__cuda_args *g,
                                   const step_sizes *z, int64_t *capacity, int attempt,
                                   int *retry) {
    *retry = 0;
    TRY(check_status(s, g, m->cutoff));
    if (g->max_neighbors > 0 && s->n_half > g->max_neighbors * z->n)
        return nnpops__fail(NNPOPS_ERROR_NEIGHBOR_OVERFLOW,
                            "%lld neighbor pairs exceed the limit max_neighbors = %lld per "
                            "atom (%lld atoms)",
                            (long long)s->n_half, (long long)g->max_neighbors, (long long)z->n);
    if (z->n_local > 0) {
        const double ratio = (double)s->n_entries / (double)z->n_local;
        if (ratio > c->entries_per_center) c->entries_per_center = ratio;
    }
    if (s->flags & NNPOPS__ST_OVERFLOW) {
        *capacity = s->n_entries + s->n_entries / 8 + 64;
        g->stats->neighbor_rebuilds++;
        *retry = 1;
    }
    if (s->flags & NNPOPS__ST_ANGULAR) {
        /* the AEV launchers refuse (UNSUPPORTED) more than their shared memory holds */
        c->max_angular = (s->max_angular + 31) / 32 * 32;
        *retry = 1;
    }
    if (*retry && attempt >= 3)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "GPU step: neighbor buffers still too small after growing");
    return NNPOPS_OK;
}

/* The host-side plan of a step: sizes, local atoms grouped by species into padded GEMM columns,
 * neighbor plan, and the capacity (*capacity grows when the entries per center seen so far need
 * it).  The layout is left to the caller (it depends on the capacity and the work spaces). */
static void plan_init(nnpops__cuda_ctx *c, const nnpops_model *m, const nnpops__cuda_args *g,
                      const step_wants *w, int64_t *capacity, step_plan *P) {
    memset(P, 0, sizeof *P);
    step_sizes *z = &P->z;
    nnpops__dstep *ds = &P->ds;
    P->min_distance = g->min_distance;
    P->max_images = g->max_images;
    P->max_angular = c->max_angular;
    z->n = g->n_atoms;
    z->n_local = g->n_local;
    z->ns = g->n_systems;
    z->ens = m->ensemble_size;
    z->want_energies = w->energies;
    z->want_member = w->member;
    z->want_virials = w->virials;
    z->want_forces = w->forces;
    z->want_atom_e = w->atom_e;
    z->want_atom_vir = w->atom_vir;
    z->need_grad = z->want_forces || z->want_virials || z->want_atom_vir;
    z->det = g->deterministic != 0;
    z->tc = g->tensor_cores; /* 0 off, 1 on, 2 auto */

    /* the species present (ghosts too); local atoms grouped by species into padded GEMM columns */
    ds->species_present = nnpops__species_present(g->species, z->n);
    int64_t count[NNPOPS__MAX_SPECIES] = {0};
    for (int64_t i = 0; i < z->n_local; i++) count[g->species[i]]++;
    int64_t cols = 0;
    for (int s = 0; s < m->n_species; s++) {
        ds->col_start[s] = cols;
        ds->col_count[s] = count[s];
        cols += (count[s] + 31) / 32 * 32;
    }
    ds->col_start[m->n_species] = cols;
    z->n_cols = cols;
    ds->n_atoms = z->n;
    ds->n_local = z->n_local;
    ds->n_systems = z->ns;
    ds->n_cols = z->n_cols;
    ds->member = g->member;
    /* the potential's work space depends on these (sized before the step is enqueued) */
    ds->deterministic = z->det;
    ds->tensor_cores = z->tc;

    nnpops__nbr_cuda_plan(z->ns, g->sys_start, g->cells, g->pbc, m->cutoff, NNPOPS__NBR_AUTO,
                          &z->plan);
    z->plan.deterministic = z->det;
    {
        /* grow (with 1/8 headroom) only when the capacity is below what the largest entries per
         * center seen so far needs: steps of one system whose counts fluctuate keep one capacity,
         * hence one graph key */
        const double per = c->entries_per_center > 0 ? c->entries_per_center : 48.0;
        const int64_t need = (int64_t)(per * (double)z->n_local);
        const int64_t guess = (int64_t)(per * 1.125 * (double)z->n_local) + 64;
        if (*capacity < need) *capacity = guess;
        const int64_t nn = z->n > 0 ? z->n : 1;
        if (g->max_neighbors > 0 && *capacity > 2 * g->max_neighbors * nn + 64)
            *capacity = 2 * g->max_neighbors * nn + 64;
    }
    z->capacity = *capacity;
    ds->capacity = *capacity;
}

/* The potential's state for the plan's species set (vt->cuda_prepare; outside any capture), and
 * the descriptor length it reports in the context's statistics. */
static nnpops_status prepare_potential(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P,
                                       nnpops_stats *stats, cudaStream_t stream) {
    P->ds.pot_state = NULL;
    P->ds.descriptor_length = 0;
    P->ds.stream = stream; /* for the copies of the potential's state (synchronized) */
    if (m->vt->cuda_prepare) {
        c->pot_release = m->vt->cuda_release_state;
        TRY(m->vt->cuda_prepare(m, &P->ds, &c->pot_state));
    }
    stats->descriptor_length = P->ds.descriptor_length;
    return NNPOPS_OK;
}

/* Writes the static inputs (sys_start, species, species ranks, batch, order, centers, pbc) at the
 * layout's offsets of `base` (an image of the arena's input block). */
static void pack_static(const nnpops_model *m, const nnpops__cuda_args *g, const step_plan *P,
                        char *base) {
    const step_sizes *z = &P->z;
    const step_layout *L = &P->L;
    memcpy(base + L->sys_start, g->sys_start, sizeof(int64_t) * (size_t)(z->ns + 1));
    memcpy(base + L->species, g->species, sizeof(int32_t) * (size_t)z->n);
    int32_t rank[NNPOPS__MAX_SPECIES];
    nnpops__species_ranks(P->ds.species_present, m->n_species, rank);
    int32_t *ranks = (int32_t *)(base + L->species_rank);
    for (int64_t i = 0; i < z->n; i++) ranks[i] = rank[g->species[i]];
    memcpy(base + L->batch, g->batch, sizeof(int32_t) * (size_t)z->n);
    memcpy(base + L->order, g->order, sizeof(int32_t) * (size_t)z->n);
    memcpy(base + L->pbc, g->pbc, 3 * (size_t)z->ns);
    int32_t *centers = (int32_t *)(base + L->centers);
    for (int64_t k = 0; k < z->n_cols; k++) centers[k] = -1;
    int64_t cursor[NNPOPS__MAX_SPECIES];
    for (int s = 0; s < m->n_species; s++) cursor[s] = P->ds.col_start[s];
    for (int64_t i = 0; i < z->n_local; i++) centers[cursor[g->species[i]]++] = (int32_t)i;
}

/* Device steps 3-5 on `stream`, reading and writing the arena at `d`: neighbor search, the
 * potential, the reductions (shared by both entries).  in_stage (or NULL): the host entry's
 * staging of steps 1-2, handed to the neighbor search (its one-block path does it itself, one
 * kernel fewer).  out_dst (or NULL): the host entry's pinned output buffer (its device pointer),
 * when the output block is small enough for the reductions' last block to copy it there
 * (nnpops__reduce_cuda's staging tail); *staged tells whether they did (they run only in
 * non-deterministic mode). */
static nnpops_status enqueue_core(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P,
                                  char *d, cudaStream_t stream, const nnpops__stage_job *in_stage,
                                  void *out_dst, int *staged) {
    const step_sizes *z = &P->z;
    const step_layout *L = &P->L;
    nnpops__dstep *ds = &P->ds;
    nnpops__dev_status *dstatus = (nnpops__dev_status *)(d + L->status);
    *staged = 0;

    /* 3: center lists */
    nnpops__nbr_in nin = {
        .n_atoms = z->n,
        .positions = (const double *)(d + L->pos),
        .n_systems = z->ns,
        .sys_start = (const int64_t *)(d + L->sys_start),
        .order = (const int32_t *)(d + L->order),
        .cells = (const double *)(d + L->cells),
        .pbc = (const uint8_t *)(d + L->pbc),
        .cutoff = m->cutoff,
        .skip_from = z->n_local,
        .max_images = P->max_images,
    };
    nnpops__center_out cout = {
        .capacity = z->capacity,
        .start = (int64_t *)(d + L->start),
        .pairs = (int32_t *)(d + L->pairs),
        .shifts = NULL,
        .vec = (double *)(d + L->vec),
        .dist = NULL,
        .status = dstatus,
    };
    TRY(nnpops__center_neighbors_staged_cuda(&nin, z->n_local, P->min_distance, &z->plan, &cout,
                                             d + L->nbr_work, L->nbr_work_bytes, in_stage,
                                             stream));

    /* 4: the potential */
    ds->positions = (const double *)(d + L->pos);
    ds->species = (const int32_t *)(d + L->species);
    ds->species_rank = (const int32_t *)(d + L->species_rank);
    ds->batch = (const int32_t *)(d + L->batch);
    ds->centers = (const int32_t *)(d + L->centers);
    ds->start = cout.start;
    ds->pairs = cout.pairs;
    ds->vec = cout.vec;
    ds->max_angular = P->max_angular;
    ds->status = dstatus;
    ds->need_grad = z->need_grad;
    ds->atom_energy = (double *)(d + L->atom_e);
    ds->member_atom_energy = z->want_member ? (double *)(d + L->member_ae) : NULL;
    ds->pair_grad = z->need_grad ? (double *)(d + L->grad) : NULL;
    ds->work = d + L->pot_work;
    ds->work_bytes = L->pot_work_bytes;
    ds->stream = stream;
    ds->blas = c->blas;
    ds->n_side = NNPOPS__SIDE_STREAMS;
    ds->fork_event = c->fork_event;
    for (int k = 0; k < NNPOPS__SIDE_STREAMS; k++) {
        ds->side_stream[k] = c->side[k];
        ds->side_blas[k] = c->side_blas[k];
        ds->join_event[k] = c->join_event[k];
    }
    TRY(m->vt->compute_cuda(m, ds));

    /* 5: force scatter, virials, energies */
    const int32_t *dbatch = ds->batch;
    if (z->det) {
        TRY(nnpops__center_reduce_det_cuda(
            z->n, z->n_local, z->ns, (const int64_t *)(d + L->sys_start),
            (const int32_t *)(d + L->order), cout.start, z->capacity, cout.pairs, cout.vec,
            z->need_grad ? ds->pair_grad : NULL, ds->atom_energy, ds->member_atom_energy, z->ens,
            z->want_forces ? (double *)(d + L->forces) : NULL,
            z->want_virials ? (double *)(d + L->virials) : NULL,
            z->want_atom_vir ? (double *)(d + L->atom_vir) : NULL,
            z->want_energies ? (double *)(d + L->energies) : NULL,
            z->want_member ? (double *)(d + L->member_e) : NULL, d + L->det_work,
            L->det_work_bytes, stream));
        return NNPOPS_OK;
    }
    /* one launch: pair reduction, energies, member energies (and the staging tail) */
    nnpops__reduce_args ra = {
        .n_atoms = z->n,
        .n_systems = z->ns,
        .batch = dbatch,
        .n_pairs = z->capacity,
        .n_pairs_dev = &dstatus->n_entries,
        .pairs = cout.pairs,
        .vec = cout.vec,
        .grad = z->need_grad ? ds->pair_grad : NULL,
        .forces = z->want_forces ? (double *)(d + L->forces) : NULL,
        .virials = z->want_virials ? (double *)(d + L->virials) : NULL,
        .atomic_virials = z->want_atom_vir ? (double *)(d + L->atom_vir) : NULL,
        .atom_energy = z->want_energies ? ds->atom_energy : NULL,
        .energies = z->want_energies ? (double *)(d + L->energies) : NULL,
        .member_atom_energy = z->want_member ? ds->member_atom_energy : NULL,
        .ensemble = z->ens,
        .member_energies = z->want_member ? (double *)(d + L->member_e) : NULL,
    };
    if (out_dst) {
        ra.stage_dst = out_dst;
        ra.stage_src = d + L->out0;
        ra.stage_bytes = L->d2h_end - L->out0;
        ra.ticket = (unsigned *)(d + L->ticket);
        *staged = 1;
    }
    return nnpops__reduce_cuda(&ra, stream);
}

/* Inputs and outputs of at most this many bytes move through the staging kernel (one kernel
 * node each way in a graph, instead of a memcpy and a memset node in, a memcpy node out); larger
 * ones through the copy engines. */
#define NNPOPS_STAGE_KERNEL_MAX (256 << 10)
/* Output blocks of at most this many bytes (on the staging-kernel path) are copied out by the last
 * block of the reductions (nnpops__reduce_cuda), one kernel fewer. */
#define NNPOPS_STAGE_TAIL_MAX (16 << 10)

/* The host entry's step, from the input copy to the output copy (what a graph holds). */
static nnpops_status enqueue_step(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P) {
    const step_layout *L = &P->L;
    char *d = c->dev;
    const size_t out_bytes = L->d2h_end - L->out0, zero_bytes = L->zero_end - L->out0;
    const int kern = c->pin_in_dev && c->pin_out_dev &&
                     L->in_bytes <= (size_t)NNPOPS_STAGE_KERNEL_MAX &&
                     out_bytes <= (size_t)NNPOPS_STAGE_KERNEL_MAX;
    /* 1-2: inputs in, outputs zeroed (the staging kernel: done by the neighbor search, first) */
    const nnpops__stage_job in_stage = {d, c->pin_in_dev, L->in_bytes, d + L->out0, zero_bytes};
    if (!kern) {
        NNPOPS__CUDA_CALL(
            cudaMemcpyAsync(d, c->pin_in, L->in_bytes, cudaMemcpyHostToDevice, c->stream));
        NNPOPS__CUDA_CALL(cudaMemsetAsync(d + L->out0, 0, zero_bytes, c->stream));
    }
    /* 3-5 (with a small output block, the reductions' last block copies it out) */
    int staged = 0;
    TRY(enqueue_core(c, m, P, d, c->stream, kern ? &in_stage : NULL,
                     kern && out_bytes <= (size_t)NNPOPS_STAGE_TAIL_MAX ? c->pin_out_dev : NULL,
                     &staged));
    /* 6: results out */
    if (staged) return NNPOPS_OK;
    if (kern)
        return nnpops__stage_cuda(c->pin_out_dev, d + L->out0, out_bytes, NULL, 0, c->stream);
    NNPOPS__CUDA_CALL(
        cudaMemcpyAsync(c->pin_out, d + L->out0, out_bytes, cudaMemcpyDeviceToHost, c->stream));
    return NNPOPS_OK;
}

/* A graph is valid for exactly the step it was captured from: same sizes, same buffers. */
static void graph_key_of(const nnpops__cuda_ctx *c, const step_plan *P, graph_key *k) {
    memset(k, 0, sizeof *k);
    k->z = P->z;
    k->ds_cols = P->ds.n_cols;
    memcpy(k->col_count, P->ds.col_count, sizeof k->col_count);
    k->member = P->ds.member;
    k->max_angular = P->max_angular;
    k->max_images = P->max_images;
    k->species_present = P->ds.species_present;
    k->pot_state = P->ds.pot_state;
    k->min_distance = P->min_distance;
    k->dev = c->dev;
    k->pin_in = c->pin_in;
    k->pin_out = c->pin_out;
    k->total = P->L.total;
}

/* Records why a capture failed (the step itself then runs eagerly and succeeds). */
static void capture_warning(const nnpops__cuda_args *g, const char *what, cudaError_t e,
                            nnpops_status st) {
    if (!g->warning || g->warning_size == 0) return;
    const char *why = st != NNPOPS_OK ? nnpops_last_error() : cudaGetErrorString(e);
    snprintf(g->warning, g->warning_size,
             "CUDA graph capture failed (%s: %s); this shape runs eagerly until the shape changes "
             "(counted in stats.eager_fallbacks)",
             what, why && *why ? why : "unknown reason");
}

static void graph_drop(nnpops__cuda_ctx *c) {
    if (c->graph_exec) cudaGraphExecDestroy(c->graph_exec);
    c->graph_exec = NULL;
    c->have_graph = 0;
}

/* Test hook (nnpops__cuda_test_break_next_capture), called right after cudaStreamBeginCapture:
 * synchronizing a capturing stream is forbidden, so CUDA fails the call and invalidates the
 * capture, and launch_step's ordinary failure path runs with CUDA's own reason. */
static nnpops_status break_capture(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P) {
    const cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess) return enqueue_step(c, m, P); /* not refused: capture as usual */
    (void)cudaGetLastError();
    return nnpops__fail(NNPOPS_ERROR_CUDA,
                        "%s:%d: cudaStreamSynchronize of the capturing stream (test hook "
                        "nnpops__cuda_test_break_next_capture): %s",
                        __FILE__, __LINE__, cudaGetErrorString(e));
}

/* Runs the enqueued step: replays the graph of this shape, captures one after enough eager steps of
 * the same shape, or runs eagerly.  A failed capture falls back to eager execution (counted). */
static nnpops_status launch_step(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P,
                                 const nnpops__cuda_args *g) {
    if (!g->cuda_graphs) return enqueue_step(c, m, P);
    graph_key key;
    graph_key_of(c, P, &key);
    const int same = c->have_key && memcmp(&key, &c->key, sizeof key) == 0;
    if (same && c->have_graph) {
        NNPOPS__CUDA_CALL(cudaGraphLaunch(c->graph_exec, c->stream));
        g->stats->graph_replays++;
        return NNPOPS_OK;
    }
    if (!same) {
        graph_drop(c);
        c->key = key;
        c->have_key = 1;
        c->same_steps = 0;
        c->capture_failed = 0;
    }
    if (c->same_steps < g->graph_warmup_steps || c->capture_failed) {
        c->same_steps++;
        return enqueue_step(c, m, P);
    }
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        capture_warning(g, "cudaStreamBeginCapture", e, NNPOPS_OK);
        c->capture_failed = 1;
        g->stats->eager_fallbacks++;
        return enqueue_step(c, m, P);
    }
    nnpops_status st;
    if (g->break_next_capture && *g->break_next_capture) {
        *g->break_next_capture = 0;
        st = break_capture(c, m, P);
    } else
        st = enqueue_step(c, m, P);
    cudaGraph_t graph = NULL;
    e = cudaStreamEndCapture(c->stream, &graph);
    const char *what = st != NNPOPS_OK ? "enqueueing the step" : "cudaStreamEndCapture";
    cudaGraphExec_t exec = NULL;
    if (st == NNPOPS_OK && e == cudaSuccess && graph) {
        e = cudaGraphInstantiate(&exec, graph, 0);
        what = "cudaGraphInstantiate";
    }
    if (graph) cudaGraphDestroy(graph);
    if (st != NNPOPS_OK || e != cudaSuccess || !exec) {
        capture_warning(g, what, e == cudaSuccess && st == NNPOPS_OK ? cudaErrorUnknown : e, st);
        nnpops__clear_error();
        (void)cudaGetLastError();
        if (exec) cudaGraphExecDestroy(exec);
        c->capture_failed = 1;
        g->stats->eager_fallbacks++;
        return enqueue_step(c, m, P);
    }
    c->graph_exec = exec;
    c->have_graph = 1;
    g->stats->graph_captures++;
    NNPOPS__CUDA_CALL(cudaGraphLaunch(c->graph_exec, c->stream));
    return NNPOPS_OK;
}

static nnpops_status run_step(nnpops__cuda_ctx *c, const nnpops_model *m,
                              const nnpops__cuda_args *g) {
    nnpops_outputs *out = g->out;
    step_plan P;
    const step_wants w = {out->energies != NULL,        out->member_energies != NULL,
                          out->virials != NULL,         out->forces != NULL,
                          out->atomic_energies != NULL, out->atomic_virials != NULL};
    plan_init(c, m, g, &w, &c->capacity, &P);
    TRY(prepare_potential(c, m, &P, g->stats, c->stream));
    step_sizes *z = &P.z;
    nnpops__dstep *ds = &P.ds;

    /* pinned inputs (their layout does not depend on the capacity) */
    layout_of(z, 0, 0, &P.L);
    const step_layout *L = &P.L;
    TRY(grow_pinned(&c->pin_in, &c->pin_in_dev, &c->pin_in_bytes, L->in_bytes,
                    "GPU input staging"));
    {
        char *p = c->pin_in;
        memcpy(p + L->pos, g->positions, sizeof(double) * 3 * (size_t)z->n);
        memcpy(p + L->cells, g->cells, sizeof(double) * 9 * (size_t)z->ns);
        pack_static(m, g, &P, p);
    }

    for (int attempt = 0;; attempt++) {
        z->capacity = c->capacity;
        ds->capacity = z->capacity;
        P.max_angular = c->max_angular;
        /* the potential's work space depends on the columns only */
        step_layout_of(m, z, ds, &P.L);
        TRY(grow_arena(&c->dev, &c->dev_bytes, L->total, c->stream, c->device, "GPU work space"));
        TRY(grow_pinned(&c->pin_out, &c->pin_out_dev, &c->pin_out_bytes, L->d2h_end - L->out0,
                        "GPU output staging"));
        if (c->blas_work != (char *)c->dev + L->blas_work || c->blas_sides != L->blas_sides) {
            TRY(set_workspaces(c, (char *)c->dev + L->blas_work, L->blas_sides));
            c->blas_work = (char *)c->dev + L->blas_work;
            c->blas_sides = L->blas_sides;
        }
        TRY(launch_step(c, m, &P, g));
        NNPOPS__CUDA_CALL(cudaStreamSynchronize(c->stream));

        const char *o = (const char *)c->pin_out - L->out0; /* arena offsets index the staging */
        nnpops__dev_status s;
        memcpy(&s, o + L->status, sizeof s);
        int retry = 0;
        TRY(settle_status(c, m, &s, g, z, &c->capacity, attempt, &retry));
        if (retry) continue;

        /* copy out, in the caller's units */
        g->stats->n_pairs = s.n_half;
        g->stats->pair_capacity = c->capacity;
        const double ef = g->e_factor, ff = g->f_factor;
        if (out->energies) {
            const double *e = (const double *)(o + L->energies);
            for (int64_t k = 0; k < z->ns; k++) out->energies[k] = e[k] * ef;
        }
        if (out->member_energies) {
            const double *e = (const double *)(o + L->member_e);
            for (int64_t k = 0; k < z->ns * z->ens; k++) out->member_energies[k] = e[k] * ef;
        }
        if (out->virials) {
            const double *v = (const double *)(o + L->virials);
            for (int64_t k = 0; k < 9 * z->ns; k++) out->virials[k] = v[k] * ef;
        }
        if (out->forces) {
            const double *f = (const double *)(o + L->forces);
            for (int64_t k = 0; k < 3 * z->n; k++) out->forces[k] = f[k] * ff;
        }
        if (out->atomic_virials) {
            const double *v = (const double *)(o + L->atom_vir);
            for (int64_t k = 0; k < 9 * z->n; k++) out->atomic_virials[k] = v[k] * ef;
        }
        if (out->atomic_energies) {
            const double *e = (const double *)(o + L->atom_e);
            for (int64_t k = 0; k < z->n; k++)
                out->atomic_energies[k] = k < z->n_local ? e[k] * ef : 0.0;
        }
        return NNPOPS_OK;
    }
}

nnpops_status nnpops__cuda_compute(nnpops__cuda_ctx **cctx, const nnpops_model *m,
                                   const nnpops__cuda_args *g) {
    if (!m->vt->compute_cuda || !m->device_data)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "model '%s' (type %s) has no GPU implementation", m->name, m->type);
    int prev;
    TRY(enter_device(m->device_index, &prev));
    nnpops_status st = NNPOPS_OK;
    if (!*cctx) st = ctx_create(m->device_index, cctx);
    if (st == NNPOPS_OK) st = run_step(*cctx, m, g);
    if (st != NNPOPS_OK && *cctx) {
        /* leave the stream idle and clear a sticky launch error for the next call */
        cudaStreamSynchronize((*cctx)->stream);
        (void)cudaGetLastError();
    }
    leave_device(m->device_index, prev);
    return st;
}

/* ==== the device-pointer entry (nnpops_compute_device) ========================================= */

static void dev_key_of(const nnpops__cuda_dev_args *a, dev_key *k) {
    memset(k, 0, sizeof *k);
    k->n = a->n_atoms;
    k->n_local = a->n_local;
    k->ns_given = a->n_systems_given;
    k->want_e = a->energies != NULL;
    k->want_f = a->forces != NULL;
    k->want_v = a->virials != NULL;
    k->has_cells = a->cells != NULL;
    k->has_pbc = a->pbc != NULL;
    k->max_images = a->max_images;
    k->member = a->member;
    k->det = a->deterministic != 0;
    k->tc = a->tensor_cores;
    k->max_neighbors = a->max_neighbors;
    k->to_A = a->to_A;
    k->e_factor = a->e_factor;
    k->f_factor = a->f_factor;
    k->min_distance = a->min_distance;
}

/* "" when the call matches the plan, else what differs (for the capture error). */
static void dev_key_diff(const dev_state *v, const nnpops__cuda_dev_args *a, char *why,
                         size_t size) {
    dev_key k;
    dev_key_of(a, &k);
    const dev_key *p = &v->key;
    why[0] = '\0';
#define DIFF(field, name)                                                                         \
    if (k.field != p->field) {                                                                    \
        snprintf(why, size, "%s: %lld when the plan was made, %lld now", name,                   \
                 (long long)p->field, (long long)k.field);                                        \
        return;                                                                                   \
    }
    DIFF(n, "n_atoms")
    DIFF(n_local, "n_local")
    DIFF(ns_given, "n_systems")
    DIFF(want_e, "energies asked")
    DIFF(want_f, "forces asked")
    DIFF(want_v, "virials asked")
    DIFF(has_cells, "cells given")
    DIFF(has_pbc, "pbc given")
    DIFF(max_images, "option max_images")
    DIFF(member, "option ensemble_member")
    DIFF(det, "option deterministic")
    DIFF(tc, "option tensor_cores")
    DIFF(max_neighbors, "option max_neighbors")
#undef DIFF
    if (k.to_A != p->to_A || k.e_factor != p->e_factor || k.f_factor != p->f_factor) {
        snprintf(why, size, "option length_unit or energy_unit changed");
        return;
    }
    if (k.min_distance != p->min_distance) {
        snprintf(why, size, "option min_distance: %g when the plan was made, %g now",
                 p->min_distance, k.min_distance);
        return;
    }
    if (a->pbc) {
        const int64_t ns = v->P.z.ns;
        for (int64_t q = 0; q < 3 * ns; q++) {
            if ((a->pbc[q] != 0) != (v->pbc[q] != 0)) {
                snprintf(why, size, "pbc of system %lld, axis %c: %d when the plan was made, %d now",
                         (long long)(q / 3), axis_name[q % 3], v->pbc[q] != 0, a->pbc[q] != 0);
                return;
            }
        }
    }
}

/* Whether `stream` is capturing (*capturing); an invalidated capture is an error. */
static nnpops_status capture_state(cudaStream_t stream, int *capturing) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing(stream, &cs);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cudaStreamIsCapturing: %s", __FILE__,
                            __LINE__, cudaGetErrorString(e));
    }
    if (cs == cudaStreamCaptureStatusInvalidated)
        return nnpops__fail(NNPOPS_ERROR_CAPTURE,
                            "the stream's CUDA graph capture was invalidated by an earlier "
                            "operation: end it (cudaStreamEndCapture) and capture again");
    *capturing = cs == cudaStreamCaptureStatusActive;
    return NNPOPS_OK;
}

/* A pointer the GPU of the model can dereference (device, managed or mapped pinned memory). */
static nnpops_status check_dev_ptr(const void *p, const char *what, int device) {
    if (!p) return NNPOPS_OK;
    struct cudaPointerAttributes at;
    memset(&at, 0, sizeof at);
    const cudaError_t e = cudaPointerGetAttributes(&at, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_compute_device: %s (%p) is not a CUDA pointer: %s", what, p,
                            cudaGetErrorString(e));
    }
    if (at.type == cudaMemoryTypeDevice && at.device != device)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_compute_device: %s is memory of CUDA device %d; the model is "
                            "on device %d",
                            what, at.device, device);
    if (at.type == cudaMemoryTypeUnregistered ||
        (at.type == cudaMemoryTypeHost && at.devicePointer != p))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_compute_device: %s (%p) is host memory; the device entry reads "
                            "and writes device arrays (use nnpops_compute for host arrays)",
                            what, p);
    return NNPOPS_OK;
}

/* cuBLAS on the caller's stream with the device arena's work spaces, for one call. */
static nnpops_status bind_blas(nnpops__cuda_ctx *c, cudaStream_t stream, void *work, int sides) {
    c->blas_work = NULL; /* the host entry sets its own work space again */
    cublasStatus_t b = cublasSetStream(c->blas, stream);
    if (b != CUBLAS_STATUS_SUCCESS)
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cublasSetStream: %s", __FILE__, __LINE__,
                            cublasGetStatusString(b));
    return set_workspaces(c, work, sides);
}

static void unbind_blas(nnpops__cuda_ctx *c) {
    cublasSetStream(c->blas, c->stream);
    c->blas_work = NULL;
}

/* The device entry's persistent allocations and event (once per context, non-capturing). */
static nnpops_status dev_init(nnpops__cuda_ctx *c, cudaStream_t stream) {
    dev_state *v = &c->dv;
    if (v->persist) return NNPOPS_OK;
    cudaError_t e = cudaMalloc(&v->persist, PERSIST_BYTES);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        v->persist = NULL;
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s:%d: cudaMalloc of %zu bytes: %s",
                            __FILE__, __LINE__, (size_t)PERSIST_BYTES, cudaGetErrorString(e));
    }
    NNPOPS__CUDA_CALL(cudaMemsetAsync(v->persist, 0, PERSIST_BYTES, stream));
    e = cudaMallocHost(&v->pin, PIN_BYTES);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        v->pin = NULL;
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s:%d: cudaMallocHost of %zu bytes: %s",
                            __FILE__, __LINE__, (size_t)PIN_BYTES, cudaGetErrorString(e));
    }
    memset(v->pin, 0, PIN_BYTES);
    v->pin_dev = pinned_device_pointer(v->pin);
    NNPOPS__CUDA_CALL(cudaEventCreateWithFlags(&v->done, cudaEventDisableTiming));
    return NNPOPS_OK;
}

/* Moves the current arena to the retired list (a graph the caller captured may still replay it). */
static nnpops_status retire_arena(dev_state *v) {
    if (v->n_retired == DEV_RETIRED_MAX) {
        /* the oldest goes: a graph captured on it must not be replayed any more */
        NNPOPS__CUDA_CALL(cudaDeviceSynchronize());
        cudaFree(v->retired[0]);
        memmove(v->retired, v->retired + 1, sizeof(void *) * (DEV_RETIRED_MAX - 1));
        v->n_retired--;
    }
    v->retired[v->n_retired++] = v->dev;
    v->dev = NULL;
    v->dev_bytes = 0;
    v->captured = 0;
    return NNPOPS_OK;
}

/* Enqueues one device-entry step on the caller's stream (see the header comment, steady call
 * 1-7); plan_call: the status and io words go to the pinned planning slots instead of the sticky
 * record.  Nothing here synchronizes, allocates or reads device data on the host. */
static nnpops_status dev_enqueue_body(nnpops__cuda_ctx *c, const nnpops_model *m,
                                      const nnpops__cuda_dev_args *a, step_plan *P,
                                      int plan_call) {
    dev_state *v = &c->dv;
    const step_sizes *z = &P->z;
    const step_layout *L = &P->L;
    char *d = v->dev;
    cudaStream_t stream = (cudaStream_t)a->stream;
    char *pin = v->pin, *persist = v->persist;

    /* the staging kernel where it may (a kernel node, see enqueue_step) */
    const size_t zero_bytes = L->zero_end - L->out0;
    const int kern = v->pin_dev && zero_bytes <= (size_t)NNPOPS_STAGE_KERNEL_MAX;
    if (kern) TRY(nnpops__stage_cuda(NULL, NULL, 0, d + L->out0, zero_bytes, stream));
    else NNPOPS__CUDA_CALL(cudaMemsetAsync(d + L->out0, 0, zero_bytes, stream));
    nnpops__io_prep_args pa;
    memset(&pa, 0, sizeof pa);
    pa.n_atoms = z->n;
    pa.n_systems = z->ns;
    pa.to_A = a->to_A;
    pa.positions = a->positions;
    pa.atomic_numbers = a->atomic_numbers;
    pa.batch = a->batch;
    pa.cells = a->cells;
    pa.species = (const int32_t *)(d + L->species);
    pa.plan_batch = (const int32_t *)(d + L->batch);
    pa.pos_out = (double *)(d + L->pos);
    pa.cells_out = (double *)(d + L->cells);
    pa.io = (nnpops__io_status *)(d + L->io);
    pa.generation = (const int64_t *)(persist + PERSIST_GEN);
    pa.expected_generation = v->generation;
    memcpy(pa.z_to_species, m->z_to_species, sizeof pa.z_to_species);
    TRY(nnpops__io_prepare_cuda(&pa, stream));

    int staged = 0;
    TRY(enqueue_core(c, m, P, d, stream, NULL, NULL, &staged));

    nnpops__io_finish_args fa;
    memset(&fa, 0, sizeof fa);
    fa.n_atoms = z->n;
    fa.n_systems = z->ns;
    fa.max_pairs = a->max_neighbors > 0 ? a->max_neighbors * z->n : 0;
    fa.e_factor = a->e_factor;
    fa.f_factor = a->f_factor;
    fa.status = (const nnpops__dev_status *)(d + L->status);
    fa.io = (const nnpops__io_status *)(d + L->io);
    fa.energies = z->want_energies ? (const double *)(d + L->energies) : NULL;
    fa.forces = z->want_forces ? (const double *)(d + L->forces) : NULL;
    fa.virials = z->want_virials ? (const double *)(d + L->virials) : NULL;
    fa.out_energies = z->want_energies ? a->energies : NULL;
    fa.out_forces = z->want_forces ? a->forces : NULL;
    fa.out_virials = z->want_virials ? a->virials : NULL;
    fa.sticky = plan_call ? NULL : (nnpops__io_sticky *)persist;
    TRY(nnpops__io_finish_cuda(&fa, stream));

    if (plan_call) {
        NNPOPS__CUDA_CALL(cudaMemcpyAsync(pin + PIN_STATUS, d + L->status,
                                          sizeof(nnpops__dev_status), cudaMemcpyDeviceToHost,
                                          stream));
        NNPOPS__CUDA_CALL(cudaMemcpyAsync(pin + PIN_IO, d + L->io, sizeof(nnpops__io_status),
                                          cudaMemcpyDeviceToHost, stream));
    } else if (kern) {
        TRY(nnpops__stage_cuda((char *)v->pin_dev + PIN_STICKY, persist,
                               sizeof(nnpops__io_sticky), NULL, 0, stream));
    } else {
        NNPOPS__CUDA_CALL(cudaMemcpyAsync(pin + PIN_STICKY, persist, sizeof(nnpops__io_sticky),
                                          cudaMemcpyDeviceToHost, stream));
    }
    return NNPOPS_OK;
}

static nnpops_status dev_enqueue(nnpops__cuda_ctx *c, const nnpops_model *m,
                                 const nnpops__cuda_dev_args *a, step_plan *P, int plan_call) {
    TRY(bind_blas(c, (cudaStream_t)a->stream, (char *)c->dv.dev + P->L.blas_work, P->L.blas_sides));
    const nnpops_status st = dev_enqueue_body(c, m, a, P, plan_call);
    unbind_blas(c);
    return st;
}

/* The problem a device step flagged, as the error of the host entry would name it.  `r` holds the
 * steps since the last check; `suffix` is appended to the message. */
static nnpops_status dev_problem(const nnpops__cuda_ctx *c, const nnpops_model *m,
                                 const nnpops__io_sticky *r, const char *suffix) {
    const dev_state *v = &c->dv;
    const int64_t n = v->P.z.n;
    const uint32_t io = r->io_flags, sf = r->step_flags;
    char msg[1024];
    nnpops_status st = NNPOPS_ERROR_INTERNAL;
    snprintf(msg, sizeof msg, "a device step reported flags 0x%x / 0x%x", (unsigned)sf,
             (unsigned)io);
    if (io & NNPOPS__IO_STALE) {
        st = NNPOPS_ERROR_CAPTURE;
        snprintf(msg, sizeof msg,
                 "a CUDA graph captured before the context's last re-plan (plan %lld now) was "
                 "replayed: it works on a retired work space and its outputs are NaN; capture it "
                 "again",
                 (long long)v->generation);
    } else if (sf & (NNPOPS__ST_OVERFLOW | NNPOPS__ST_ANGULAR)) {
        st = NNPOPS_ERROR_NEIGHBOR_OVERFLOW;
        if (sf & NNPOPS__ST_OVERFLOW)
            snprintf(msg, sizeof msg,
                     "a device step found %lld neighbor entries, more than the capacity %lld of "
                     "the plan; the capacity has been grown to %lld: make one nnpops_compute_device "
                     "call on a stream that is not capturing (it re-plans), then capture again "
                     "(graphs captured before that call are invalid)",
                     (long long)r->max_entries, (long long)v->P.z.capacity, (long long)v->capacity);
        else
            snprintf(msg, sizeof msg,
                     "a device step found a center with %d angular neighbors, more than the %d of "
                     "the plan; grown to %d: make one nnpops_compute_device call on a stream that "
                     "is not capturing (it re-plans), then capture again (graphs captured before "
                     "that call are invalid)",
                     (int)r->max_angular, (int)v->P.max_angular, (int)c->max_angular);
    } else if (io & NNPOPS__IO_BAD_POSITION) {
        st = NNPOPS_ERROR_BAD_POSITION;
        snprintf(msg, sizeof msg, "atom %lld has a non-finite position",
                 (long long)nnpops__io_key_atom(r->bad_position, n));
    } else if (io & NNPOPS__IO_SPECIES) {
        const int64_t i = nnpops__io_key_atom(r->bad_species, n);
        const int32_t zz = nnpops__io_key_value(r->bad_species);
        const int known = zz >= 1 && zz <= 118 && m->z_to_species[zz] >= 0;
        const char *sym = zz >= 1 && zz <= 118 ? nnpops__element_symbols[zz] : "?";
        if (!known) {
            st = NNPOPS_ERROR_UNKNOWN_ELEMENT;
            snprintf(msg, sizeof msg,
                     "atom %lld: element %s (atomic number %d) is not described by model '%s'",
                     (long long)i, sym, (int)zz, m->name);
        } else {
            st = NNPOPS_ERROR_INVALID_ARGUMENT;
            snprintf(msg, sizeof msg,
                     "atom %lld: atomic number %d (%s) differs from the one the plan was made "
                     "with; atomic numbers are fixed between plans: the next non-capturing "
                     "nnpops_compute_device call re-plans",
                     (long long)i, (int)zz, sym);
        }
    } else if (io & NNPOPS__IO_BATCH_RANGE) {
        st = NNPOPS_ERROR_INVALID_ARGUMENT;
        snprintf(msg, sizeof msg,
                 "atom %lld: batch index %d is outside 0..%lld, the system count of the plan%s; "
                 "the next non-capturing nnpops_compute_device call re-plans",
                 (long long)nnpops__io_key_atom(r->bad_batch_range, n),
                 (int)nnpops__io_key_value(r->bad_batch_range), (long long)v->P.z.ns - 1,
                 v->key.ns_given == 0 ? " (n_systems was not given: the plan computed it as "
                                        "max(batch) + 1 and keeps it)"
                                      : "");
    } else if (io & NNPOPS__IO_BATCH) {
        st = NNPOPS_ERROR_INVALID_ARGUMENT;
        snprintf(msg, sizeof msg,
                 "atom %lld: batch index %d differs from the one the plan was made with (the "
                 "grouping of atoms into systems is fixed between plans); the next non-capturing "
                 "nnpops_compute_device call re-plans",
                 (long long)nnpops__io_key_atom(r->bad_batch, n),
                 (int)nnpops__io_key_value(r->bad_batch));
    } else if (sf & NNPOPS__ST_GEOMETRY) {
        nnpops__cuda_args g;
        memset(&g, 0, sizeof g);
        g.min_distance = v->key.min_distance;
        g.max_images = v->key.max_images;
        st = check_status(&r->geometry, &g, m->cutoff);
        snprintf(msg, sizeof msg, "%s", nnpops_last_error());
    } else if (io & NNPOPS__IO_MAX_NEIGHBORS) {
        st = NNPOPS_ERROR_NEIGHBOR_OVERFLOW;
        snprintf(msg, sizeof msg,
                 "%lld neighbor pairs exceed the limit max_neighbors = %lld per atom (%lld atoms)",
                 (long long)r->max_half, (long long)v->key.max_neighbors, (long long)n);
    }
    if (st == NNPOPS_OK) st = NNPOPS_ERROR_INTERNAL;
    return nnpops__fail(st, "%s%s", msg, suffix);
}

/* ---- planning ------------------------------------------------------------------------------- */

static nnpops_status device_plan(nnpops__cuda_ctx *c, const nnpops_model *m,
                                 const nnpops__cuda_dev_args *a, const nnpops__cuda_args *g) {
    dev_state *v = &c->dv;
    cudaStream_t stream = (cudaStream_t)a->stream;
    v->ready = 0;
    TRY(check_dev_ptr(a->energies, "outputs->energies", c->device));
    TRY(check_dev_ptr(a->forces, "outputs->forces", c->device));
    TRY(check_dev_ptr(a->virials, "outputs->virials", c->device));
    TRY(dev_init(c, stream));
    /* the arena's last user may be another stream */
    if (v->have_done && v->last_stream != stream)
        NNPOPS__CUDA_CALL(cudaStreamWaitEvent(stream, v->done, 0));
    if (v->captured && v->dev) TRY(retire_arena(v));
    g->stats->device_plans++;
    v->generation++;
    memcpy((char *)v->pin + PIN_GEN, &v->generation, sizeof v->generation);

    const step_wants w = {a->energies != NULL, 0, a->virials != NULL, a->forces != NULL, 0, 0};
    step_plan P;
    plan_init(c, m, g, &w, &v->capacity, &P);
    TRY(prepare_potential(c, m, &P, g->stats, stream));
    P.z.dev_io = 1;
    step_sizes *z = &P.z;
    nnpops__dstep *ds = &P.ds;
    for (int attempt = 0;; attempt++) {
        z->capacity = v->capacity;
        ds->capacity = z->capacity;
        P.max_angular = c->max_angular;
        step_layout_of(m, z, ds, &P.L);
        const step_layout *L = &P.L;
        TRY(grow_arena(&v->dev, &v->dev_bytes, L->total, stream, c->device,
                       "GPU work space of the device entry"));
        /* the static inputs, once per plan (a pageable source: the copy has read it on return) */
        TRY(nnpops__buf_reserve(&v->stage, L->in_bytes, "device entry staging"));
        pack_static(m, g, &P, v->stage.ptr);
        NNPOPS__CUDA_CALL(cudaMemcpyAsync((char *)v->dev + L->sys_start,
                                          (const char *)v->stage.ptr + L->sys_start,
                                          L->in_bytes - L->sys_start, cudaMemcpyHostToDevice,
                                          stream));
        NNPOPS__CUDA_CALL(cudaMemcpyAsync((char *)v->persist + PERSIST_GEN,
                                          (const char *)v->pin + PIN_GEN, sizeof(int64_t),
                                          cudaMemcpyHostToDevice, stream));
        TRY(dev_enqueue(c, m, a, &P, 1));
        NNPOPS__CUDA_CALL(cudaStreamSynchronize(stream));

        nnpops__dev_status s;
        nnpops__io_status io;
        memcpy(&s, (const char *)v->pin + PIN_STATUS, sizeof s);
        memcpy(&io, (const char *)v->pin + PIN_IO, sizeof io);
        if (io.flags) {
            /* the host validated these very inputs: a bug, or inputs changed under the call */
            nnpops__io_sticky r;
            memset(&r, 0, sizeof r);
            r.io_flags = io.flags;
            r.bad_position = io.bad_position;
            r.bad_species = io.bad_species;
            r.bad_batch = io.bad_batch;
            r.bad_batch_range = io.bad_batch_range;
            v->P = P;
            return dev_problem(c, m, &r, " (planning step: the inputs changed while it ran?)");
        }
        int retry = 0;
        TRY(settle_status(c, m, &s, g, z, &v->capacity, attempt, &retry));
        if (retry) continue;

        v->P = P;
        dev_key_of(a, &v->key);
        const size_t pb = 3 * (size_t)z->ns;
        if (a->pbc) {
            if (v->pbc_bytes < pb) {
                uint8_t *p = realloc(v->pbc, pb);
                if (!p) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (pbc)");
                v->pbc = p;
                v->pbc_bytes = pb;
            }
            memcpy(v->pbc, g->pbc, pb);
        }
        v->ready = 1;
        v->captured = 0;
        g->stats->n_pairs = s.n_half;
        g->stats->pair_capacity = v->capacity;
        NNPOPS__CUDA_CALL(cudaEventRecord(v->done, stream));
        v->have_done = 1;
        v->last_stream = stream;
        return NNPOPS_OK;
    }
}

/* ---- entry points (context.c) ---------------------------------------------------------------- */

static nnpops_status device_try(nnpops__cuda_ctx **cctx, const nnpops_model *m,
                                const nnpops__cuda_dev_args *a, int *need_plan) {
    cudaStream_t stream = (cudaStream_t)a->stream;
    int capturing = 0;
    TRY(capture_state(stream, &capturing));
    if (a->n_atoms == 0) {
        /* nothing to plan: zero energies and virials of the systems given */
        const int64_t ns = a->n_systems_given;
        if (ns > 0 && a->energies)
            NNPOPS__CUDA_CALL(cudaMemsetAsync(a->energies, 0, sizeof(double) * (size_t)ns, stream));
        if (ns > 0 && a->virials)
            NNPOPS__CUDA_CALL(
                cudaMemsetAsync(a->virials, 0, sizeof(double) * 9 * (size_t)ns, stream));
        if (capturing) a->stats->device_captures++;
        return NNPOPS_OK;
    }
    nnpops__cuda_ctx *c = *cctx;
    char why[256] = "";
    if (!c || !c->dv.ready) {
        if (!capturing) {
            *need_plan = 1;
            return NNPOPS_OK;
        }
        if (!c || c->dv.generation == 0)
            return nnpops__fail(NNPOPS_ERROR_CAPTURE,
                                "nnpops_compute_device: the stream is capturing a CUDA graph, but "
                                "this context has no plan yet: make one call with the same inputs "
                                "and outputs on a stream that is not capturing first (it validates "
                                "the inputs on the host and builds the plan), then capture");
        return nnpops__fail(NNPOPS_ERROR_CAPTURE,
                            "nnpops_compute_device: the stream is capturing a CUDA graph, but the "
                            "context's plan must be rebuilt (after a failed call, or a problem "
                            "reported by nnpops_context_device_status such as a neighbor overflow "
                            "that grew the capacity): make one call on a stream that is not "
                            "capturing first, then capture again");
    }
    dev_key_diff(&c->dv, a, why, sizeof why);
    if (why[0]) {
        if (!capturing) {
            *need_plan = 1;
            return NNPOPS_OK;
        }
        return nnpops__fail(NNPOPS_ERROR_CAPTURE,
                            "nnpops_compute_device: the stream is capturing a CUDA graph, but the "
                            "call differs from the context's plan (%s): make one call with the new "
                            "shape on a stream that is not capturing first (it re-plans; graphs "
                            "captured before it become invalid), then capture",
                            why);
    }
    dev_state *v = &c->dv;
    if (!capturing && v->have_done && v->last_stream != stream)
        NNPOPS__CUDA_CALL(cudaStreamWaitEvent(stream, v->done, 0));
    TRY(dev_enqueue(c, m, a, &v->P, 0));
    if (capturing) {
        v->captured = 1;
        a->stats->device_captures++;
    } else {
        NNPOPS__CUDA_CALL(cudaEventRecord(v->done, stream));
        v->have_done = 1;
        v->last_stream = stream;
    }
    return NNPOPS_OK;
}

nnpops_status nnpops__cuda_device_try(nnpops__cuda_ctx **cctx, const nnpops_model *m,
                                      const nnpops__cuda_dev_args *a, int *need_plan) {
    *need_plan = 0;
    if (!m->vt->compute_cuda || !m->device_data)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "model '%s' (type %s) has no GPU implementation", m->name, m->type);
    int prev;
    TRY(enter_device(m->device_index, &prev));
    const nnpops_status st = device_try(cctx, m, a, need_plan);
    leave_device(m->device_index, prev);
    return st;
}

nnpops_status nnpops__cuda_device_fetch(const nnpops_model *m, void *stream, int count,
                                        void *const *dst, const void *const *src,
                                        const size_t *bytes, const char *const *what) {
    int prev;
    TRY(enter_device(m->device_index, &prev));
    nnpops_status st = NNPOPS_OK;
    for (int k = 0; k < count && st == NNPOPS_OK; k++) {
        if (!src[k] || bytes[k] == 0) continue;
        st = check_dev_ptr(src[k], what[k], m->device_index);
        if (st != NNPOPS_OK) break;
        const cudaError_t e = cudaMemcpyAsync(dst[k], src[k], bytes[k], cudaMemcpyDefault,
                                              (cudaStream_t)stream);
        if (e != cudaSuccess)
            st = nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: copying %s to the host: %s", __FILE__,
                              __LINE__, what[k], cudaGetErrorString(e));
    }
    const cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (st == NNPOPS_OK && e != cudaSuccess)
        st = nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cudaStreamSynchronize: %s", __FILE__,
                          __LINE__, cudaGetErrorString(e));
    if (st != NNPOPS_OK) (void)cudaGetLastError();
    leave_device(m->device_index, prev);
    return st;
}

nnpops_status nnpops__cuda_device_plan(nnpops__cuda_ctx **cctx, const nnpops_model *m,
                                       const nnpops__cuda_dev_args *a,
                                       const nnpops__cuda_args *g) {
    int prev;
    TRY(enter_device(m->device_index, &prev));
    nnpops_status st = NNPOPS_OK;
    if (!*cctx) st = ctx_create(m->device_index, cctx);
    if (st == NNPOPS_OK) st = device_plan(*cctx, m, a, g);
    if (st != NNPOPS_OK && *cctx) {
        (*cctx)->dv.ready = 0;
        cudaStreamSynchronize((cudaStream_t)a->stream);
        (void)cudaGetLastError();
    }
    leave_device(m->device_index, prev);
    return st;
}

static nnpops_status device_status(nnpops__cuda_ctx *c, const nnpops_model *m, void *stream_,
                                   nnpops_stats *stats) {
    dev_state *v = &c->dv;
    cudaStream_t stream = (cudaStream_t)stream_;
    int capturing = 0;
    TRY(capture_state(stream, &capturing));
    if (capturing)
        return nnpops__fail(NNPOPS_ERROR_CAPTURE,
                            "nnpops_context_device_status: the stream is capturing a CUDA graph; "
                            "check after cudaStreamEndCapture (and after replays of the graph)");
    NNPOPS__CUDA_CALL(cudaStreamSynchronize(stream));
    if (v->have_done) NNPOPS__CUDA_CALL(cudaEventSynchronize(v->done));
    nnpops__io_sticky r;
    memcpy(&r, (const char *)v->pin + PIN_STICKY, sizeof r);
    NNPOPS__CUDA_CALL(cudaMemsetAsync(v->persist, 0, sizeof r, stream));
    NNPOPS__CUDA_CALL(cudaStreamSynchronize(stream));
    memset((char *)v->pin + PIN_STICKY, 0, sizeof r);
    if (r.steps > 0) stats->n_pairs = r.last_n_half;
    if (r.flagged_steps == 0) return NNPOPS_OK;
    /* what needs a new plan: a capacity that grows, or inputs that differ from the plan's static
     * ones (bad positions, cells or limits leave the plan valid, and with it the caller's graphs) */
    if (r.step_flags & NNPOPS__ST_OVERFLOW) {
        const int64_t need = r.max_entries + r.max_entries / 8 + 64;
        if (need > v->capacity) v->capacity = need;
        stats->neighbor_rebuilds++;
        v->ready = 0;
    }
    if (r.step_flags & NNPOPS__ST_ANGULAR) {
        const int32_t want = (r.max_angular + 31) / 32 * 32;
        if (want > c->max_angular) c->max_angular = want;
        v->ready = 0;
    }
    if (r.io_flags & (NNPOPS__IO_SPECIES | NNPOPS__IO_BATCH | NNPOPS__IO_BATCH_RANGE)) v->ready = 0;
    char suffix[160];
    snprintf(suffix, sizeof suffix,
             " (%lld of the %lld device steps since the last check were flagged; their outputs "
             "are NaN)",
             (long long)r.flagged_steps, (long long)r.steps);
    return dev_problem(c, m, &r, suffix);
}

nnpops_status nnpops__cuda_device_status(nnpops__cuda_ctx *c, const nnpops_model *m, void *stream,
                                         nnpops_stats *stats) {
    if (!c || !c->dv.persist) return NNPOPS_OK; /* no device call yet */
    int prev;
    TRY(enter_device(m->device_index, &prev));
    const nnpops_status st = device_status(c, m, stream, stats);
    leave_device(m->device_index, prev);
    return st;
}
