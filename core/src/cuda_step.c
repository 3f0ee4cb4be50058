/*
 * cuda_step.c - the GPU step of nnpops_compute for a model loaded on "cuda" / "cuda:N", and the
 * context's GPU state (stream, cuBLAS handle, one device arena, pinned staging buffers).
 *
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
 *   host   ONE stream synchronization, then the status word: a neighbor overflow (more entries than
 *          capacity) or a center with more angular neighbors than the AEV kernels held grows the
 *          capacity and recomputes the whole step (a truncated result is never returned); bad
 *          cells, too many images and too-close atoms become the CPU path's errors; otherwise the
 *          outputs are copied to the caller's arrays with the unit factors applied.
 * Arena layout (each part 256-byte aligned): [inputs | outputs | member atom energies | center
 * lists: start, pairs, vectors, pair gradients | neighbor-search work | cuBLAS work space |
 * potential work | deterministic-reduction work].  The arena and the pinned buffers grow by at least
 * 1.5x and never shrink, so a run of same-sized steps allocates nothing after the first.  Every entry
 * point makes the model's device current and restores the caller's device on return (OpenMM calls
 * from its own thread).
 *
 * CUDA graphs (option cuda_graphs, launch_step): device steps 1-6 are exactly what a graph holds.
 * Capture safety: everything that allocates (arena, pinned staging), sets the cuBLAS work space
 * (cublasSetWorkspace on the arena, bound before the step, so cuBLAS never allocates while
 * capturing), reads the host inputs or the device status is OUTSIDE the enqueued region; inside it
 * there are only async copies from/to the pinned buffers, memsets, kernel launches, cub calls on
 * preallocated work space and cuBLAS GEMMs on the context's stream.  A graph is keyed by every
 * host-side value baked into it (sizes, column counts per species, neighbor plan, capacity,
 * max_angular, options, arena and staging addresses); a step with another key drops the graph and
 * runs eagerly until graph_warmup_steps steps of the new key have run, then captures again.  A
 * neighbor overflow seen after a replay grows the capacity, which changes the key: the step is
 * recomputed eagerly with the grown buffers and the new shape re-captured after its warm-up.  A
 * failed capture runs the step eagerly (it succeeds), counts stats.eager_fallbacks, writes CUDA's
 * reason to the context's warning (nnpops_context_last_warning) and keeps that key eager.
 * Option deterministic: the cell list orders the atoms of each bin, the AEV kernels sum in fixed
 * point, the output layer sums the members in order, and forces, virials and energies are gathered
 * (nnpops__center_reduce_det_cuda) instead of scattered with atomics: bitwise reproducible.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "internal.h"
#include "kernels/cuda/kernels_cuda.h"

#define CUBLAS_WORK_BYTES ((size_t)32 << 20)

/* ---- layout -------------------------------------------------------------------------------- */

typedef struct step_layout {
    /* inputs (offsets inside the pinned input buffer and the arena alike) */
    size_t pos, cells, sys_start, species, batch, order, centers, pbc, in_bytes;
    /* outputs: [status | energies | member energies | virials | forces | atomic virials | atom
     * energies] copied back up to d2h_end; then member atom energies, zeroed with the rest */
    size_t out0, status, energies, member_e, virials, forces, atom_vir, atom_e, d2h_end, member_ae,
        zero_end;
    size_t start, pairs, vec, grad, nbr_work, nbr_work_bytes, blas_work, pot_work, pot_work_bytes,
        det_work, det_work_bytes, total;
} step_layout;

typedef struct step_sizes {
    int64_t n, n_local, ns, ens, n_cols, capacity;
    int want_energies, want_member, want_virials, want_forces, want_atom_e, want_atom_vir;
    int need_grad;
    int det;                   /* option deterministic */
    nnpops__nbr_plan plan;
} step_sizes;


typedef struct graph_key {
    step_sizes z;
    int64_t ds_cols;
    int64_t col_count[NNPOPS__MAX_SPECIES];
    int32_t member, max_angular, max_images, pad;
    double min_distance;
    void *dev, *pin_in, *pin_out;
    size_t total;
} graph_key;

struct nnpops__cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *dev;
    size_t dev_bytes;
    void *pin_in, *pin_out;
    size_t pin_in_bytes, pin_out_bytes;
    int64_t capacity;          /* center-list entries */
    double entries_per_center; /* largest ratio seen, for the first capacity of a new size */
    int32_t max_angular;
    void *blas_work;           /* where cuBLAS's work space was last set */
    /* CUDA graph of the last shape (option cuda_graphs) */
    cudaGraphExec_t graph_exec;
    int have_graph, have_key, same_steps, capture_failed;
    graph_key key;
};

#define TRY(x)                                                                                    \
    do {                                                                                          \
        nnpops_status s_ = (x);                                                                   \
        if (s_ != NNPOPS_OK) return s_;                                                           \
    } while (0)

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

static void ctx_free(nnpops__cuda_ctx *c) {
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->graph_exec) cudaGraphExecDestroy(c->graph_exec);
    if (c->dev) cudaFree(c->dev);
    if (c->pin_in) cudaFreeHost(c->pin_in);
    if (c->pin_out) cudaFreeHost(c->pin_out);
    if (c->blas) cublasDestroy(c->blas);
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
    cublasStatus_t b = cublasCreate(&c->blas);
    if (b != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        ctx_free(c);
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cublasCreate: %s", __FILE__, __LINE__,
                            cublasGetStatusString(b));
    }
    /* plain FP32 / FP64 arithmetic (no TF32); the compute type of every GEMM says so too */
    cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH);
    *out = c;
    return NNPOPS_OK;
}

static nnpops_status grow_device(nnpops__cuda_ctx *c, size_t bytes) {
    if (bytes <= c->dev_bytes) return NNPOPS_OK;
    size_t want = c->dev_bytes + c->dev_bytes / 2;
    if (want < bytes) want = bytes;
    want = (want + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    NNPOPS__CUDA_CALL(cudaStreamSynchronize(c->stream));
    if (c->dev) cudaFree(c->dev);
    c->dev = NULL;
    c->dev_bytes = 0;
    cudaError_t e = cudaMalloc(&c->dev, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        c->dev = NULL;
        return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                           : NNPOPS_ERROR_CUDA,
                            "%s:%d: cudaMalloc of %zu bytes (GPU work space) on device %d: %s",
                            __FILE__, __LINE__, want, c->device, cudaGetErrorString(e));
    }
    c->dev_bytes = want;
    return NNPOPS_OK;
}

static nnpops_status grow_pinned(void **p, size_t *have, size_t bytes, const char *what) {
    if (bytes <= *have) return NNPOPS_OK;
    size_t want = *have + *have / 2;
    if (want < bytes) want = bytes;
    if (*p) cudaFreeHost(*p);
    *p = NULL;
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
    return NNPOPS_OK;
}

static void layout_of(const step_sizes *z, size_t pot_work, step_layout *L) {
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
    L->zero_end = cur;
    TAKE(start, sizeof(int64_t) * (z->n_local + 1));
    TAKE(pairs, sizeof(int32_t) * 2 * z->capacity);
    TAKE(vec, sizeof(double) * 3 * z->capacity);
    TAKE(grad, z->need_grad ? sizeof(double) * 3 * z->capacity : 0);
    L->nbr_work_bytes = nnpops__nbr_cuda_work_bytes(z->n, z->ns, z->n_local, &z->plan);
    TAKE(nbr_work, L->nbr_work_bytes);
    TAKE(blas_work, CUBLAS_WORK_BYTES);
    L->pot_work_bytes = pot_work;
    TAKE(pot_work, pot_work);
    L->det_work_bytes = z->det ? nnpops__center_reduce_det_work_bytes(z->n, z->capacity) : 0;
    TAKE(det_work, L->det_work_bytes);
    L->total = cur;
#undef TAKE
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

/* Everything one step enqueues, from the input copy to the output copy (also what a graph holds). */
typedef struct step_plan {
    step_sizes z;
    step_layout L;
    nnpops__dstep ds;
    double min_distance;
    int32_t max_images;
} step_plan;

static nnpops_status enqueue_step(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P) {
    const step_sizes *z = &P->z;
    const step_layout *L = &P->L;
    nnpops__dstep *ds = &P->ds;
    char *d = c->dev;
    nnpops__dev_status *dstatus = (nnpops__dev_status *)(d + L->status);

    /* 1-2: inputs in, outputs zeroed */
    NNPOPS__CUDA_CALL(cudaMemcpyAsync(d, c->pin_in, L->in_bytes, cudaMemcpyHostToDevice, c->stream));
    NNPOPS__CUDA_CALL(cudaMemsetAsync(d + L->out0, 0, L->zero_end - L->out0, c->stream));

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
    TRY(nnpops__center_neighbors_cuda(&nin, z->n_local, P->min_distance, &z->plan, &cout,
                                      d + L->nbr_work, L->nbr_work_bytes, c->stream));

    /* 4: the potential */
    ds->positions = (const double *)(d + L->pos);
    ds->species = (const int32_t *)(d + L->species);
    ds->batch = (const int32_t *)(d + L->batch);
    ds->centers = (const int32_t *)(d + L->centers);
    ds->start = cout.start;
    ds->pairs = cout.pairs;
    ds->vec = cout.vec;
    ds->max_angular = c->max_angular;
    ds->status = dstatus;
    ds->need_grad = z->need_grad;
    ds->deterministic = z->det;
    ds->atom_energy = (double *)(d + L->atom_e);
    ds->member_atom_energy = z->want_member ? (double *)(d + L->member_ae) : NULL;
    ds->pair_grad = z->need_grad ? (double *)(d + L->grad) : NULL;
    ds->work = d + L->pot_work;
    ds->work_bytes = L->pot_work_bytes;
    ds->stream = c->stream;
    ds->blas = c->blas;
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
            L->det_work_bytes, c->stream));
    } else if (z->need_grad)
        TRY(nnpops__pair_reduce_cuda_acc(
            z->n, z->ns, dbatch, z->capacity, cout.pairs, cout.vec, ds->pair_grad,
            z->want_forces ? (double *)(d + L->forces) : NULL,
            z->want_virials ? (double *)(d + L->virials) : NULL,
            z->want_atom_vir ? (double *)(d + L->atom_vir) : NULL, &dstatus->n_entries, c->stream));
    if (z->want_energies && !z->det)
        TRY(nnpops__energy_reduce_cuda_acc(z->n, z->ns, dbatch, ds->atom_energy, 1,
                                           (double *)(d + L->energies), c->stream));
    if (z->want_member && !z->det)
        TRY(nnpops__energy_reduce_cuda_acc(z->n, z->ns, dbatch, ds->member_atom_energy, z->ens,
                                           (double *)(d + L->member_e), c->stream));

    /* 6: results out */
    NNPOPS__CUDA_CALL(cudaMemcpyAsync(c->pin_out, d + L->out0, L->d2h_end - L->out0, cudaMemcpyDeviceToHost,
                             c->stream));
    return NNPOPS_OK;
}

/* A graph is valid for exactly the step it was captured from: same sizes, same buffers. */
static void graph_key_of(const nnpops__cuda_ctx *c, const step_plan *P, graph_key *k) {
    memset(k, 0, sizeof *k);
    k->z = P->z;
    k->ds_cols = P->ds.n_cols;
    memcpy(k->col_count, P->ds.col_count, sizeof k->col_count);
    k->member = P->ds.member;
    k->max_angular = c->max_angular;
    k->max_images = P->max_images;
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
             "CUDA graph capture failed (%s: %s); this shape runs eagerly (eager_fallbacks counts "
             "its steps) until the shape changes",
             what, why && *why ? why : "unknown reason");
}

static void graph_drop(nnpops__cuda_ctx *c) {
    if (c->graph_exec) cudaGraphExecDestroy(c->graph_exec);
    c->graph_exec = NULL;
    c->have_graph = 0;
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
    nnpops_status st = enqueue_step(c, m, P);
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
    memset(&P, 0, sizeof P);
    step_sizes *z = &P.z;
    nnpops__dstep *ds = &P.ds;
    P.min_distance = g->min_distance;
    P.max_images = g->max_images;
    z->n = g->n_atoms;
    z->n_local = g->n_local;
    z->ns = g->n_systems;
    z->ens = m->ensemble_size;
    z->want_energies = out->energies != NULL;
    z->want_member = out->member_energies != NULL;
    z->want_virials = out->virials != NULL;
    z->want_forces = out->forces != NULL;
    z->want_atom_e = out->atomic_energies != NULL;
    z->want_atom_vir = out->atomic_virials != NULL;
    z->need_grad = z->want_forces || z->want_virials || z->want_atom_vir;
    z->det = g->deterministic != 0;

    /* local atoms grouped by species into padded GEMM columns */
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
        if (c->capacity < need) c->capacity = guess;
        const int64_t nn = z->n > 0 ? z->n : 1;
        if (g->max_neighbors > 0 && c->capacity > 2 * g->max_neighbors * nn + 64)
            c->capacity = 2 * g->max_neighbors * nn + 64;
    }

    /* pinned inputs (their layout does not depend on the capacity) */
    z->capacity = c->capacity;
    layout_of(z, 0, &P.L);
    const step_layout *L = &P.L;
    TRY(grow_pinned(&c->pin_in, &c->pin_in_bytes, L->in_bytes, "GPU input staging"));
    {
        char *p = c->pin_in;
        memcpy(p + L->pos, g->positions, sizeof(double) * 3 * (size_t)z->n);
        memcpy(p + L->cells, g->cells, sizeof(double) * 9 * (size_t)z->ns);
        memcpy(p + L->sys_start, g->sys_start, sizeof(int64_t) * (size_t)(z->ns + 1));
        memcpy(p + L->species, g->species, sizeof(int32_t) * (size_t)z->n);
        memcpy(p + L->batch, g->batch, sizeof(int32_t) * (size_t)z->n);
        memcpy(p + L->order, g->order, sizeof(int32_t) * (size_t)z->n);
        memcpy(p + L->pbc, g->pbc, 3 * (size_t)z->ns);
        int32_t *centers = (int32_t *)(p + L->centers);
        for (int64_t k = 0; k < z->n_cols; k++) centers[k] = -1;
        int64_t cursor[NNPOPS__MAX_SPECIES];
        for (int s = 0; s < m->n_species; s++) cursor[s] = ds->col_start[s];
        for (int64_t i = 0; i < z->n_local; i++) centers[cursor[g->species[i]]++] = (int32_t)i;
    }

    for (int attempt = 0;; attempt++) {
        z->capacity = c->capacity;
        ds->capacity = z->capacity;
        /* the potential's work space depends on the columns only */
        const size_t pot = m->vt->cuda_work_bytes ? m->vt->cuda_work_bytes(m, ds) : 0;
        layout_of(z, pot, &P.L);
        TRY(grow_device(c, L->total));
        TRY(grow_pinned(&c->pin_out, &c->pin_out_bytes, L->d2h_end - L->out0,
                        "GPU output staging"));
        if (c->blas_work != (char *)c->dev + L->blas_work) {
            cublasStatus_t bs = cublasSetWorkspace(c->blas, (char *)c->dev + L->blas_work,
                                                   CUBLAS_WORK_BYTES);
            if (bs != CUBLAS_STATUS_SUCCESS)
                return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cublasSetWorkspace: %s", __FILE__,
                                    __LINE__, cublasGetStatusString(bs));
            c->blas_work = (char *)c->dev + L->blas_work;
        }
        TRY(launch_step(c, m, &P, g));
        NNPOPS__CUDA_CALL(cudaStreamSynchronize(c->stream));

        const char *o = (const char *)c->pin_out - L->out0; /* arena offsets index the staging */
        nnpops__dev_status s;
        memcpy(&s, o + L->status, sizeof s);
        TRY(check_status(&s, g, m->cutoff));
        if (g->max_neighbors > 0 && s.n_half > g->max_neighbors * z->n)
            return nnpops__fail(NNPOPS_ERROR_NEIGHBOR_OVERFLOW,
                                "%lld neighbor pairs exceed the limit max_neighbors = %lld per "
                                "atom (%lld atoms)",
                                (long long)s.n_half, (long long)g->max_neighbors, (long long)z->n);
        if (z->n_local > 0) {
            const double ratio = (double)s.n_entries / (double)z->n_local;
            if (ratio > c->entries_per_center) c->entries_per_center = ratio;
        }
        int retry = 0;
        if (s.flags & NNPOPS__ST_OVERFLOW) {
            c->capacity = s.n_entries + s.n_entries / 8 + 64;
            g->stats->neighbor_rebuilds++;
            retry = 1;
        }
        if (s.flags & NNPOPS__ST_ANGULAR) {
            /* the AEV launchers refuse (UNSUPPORTED) more than their shared memory holds */
            c->max_angular = (s.max_angular + 31) / 32 * 32;
            retry = 1;
        }
        if (retry) {
            if (attempt >= 3)
                return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                                    "GPU step: neighbor buffers still too small after growing");
            continue;
        }

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
