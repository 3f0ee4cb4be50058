/*
 * cuda_device.c - the experimental device-pointer entry (nnpops_compute_device,
 * nnpops_context_device_status); its step is the host entry's (cuda_step.c).
 *
 * The caller's inputs and outputs are device arrays and the step runs on the CALLER's stream.  The
 * entry has its own arena (the host entry's steps never touch it) and a PLAN: the sizes, the
 * potential's state and sizes (vt->cuda_prepare), neighbor plan, capacity and layout of one shape
 * (atom count, local count, system count as given, outputs asked, cells given, pbc, options),
 * plus the static inputs (species, batch, order, sys_start, pbc) uploaded into the arena ONCE,
 * when the plan is made.
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
 *          it, and turns the flags into the host entry's errors; a neighbor overflow (or a potential's
 *          op that held less than it needed) grows that capacity and marks the plan for a re-plan, as do changed
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

#include "cuda_step.h"

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

/* cuBLAS on the caller's stream with the device arena's work space, for one call. */
static nnpops_status bind_blas(nnpops__cuda_ctx *c, cudaStream_t stream, void *work) {
    c->blas_work = NULL; /* the host entry sets its own work space again */
    cublasStatus_t b = cublasSetStream(c->blas, stream);
    if (b != CUBLAS_STATUS_SUCCESS)
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cublasSetStream: %s", __FILE__, __LINE__,
                            cublasGetStatusString(b));
    return nnpops__gpu_set_workspace(c, work);
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
    v->pin_dev = nnpops__gpu_pinned_device_pointer(v->pin);
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
    TRY(nnpops__gpu_enqueue_core(c, m, P, d, stream, NULL, NULL, &staged));

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
    TRY(bind_blas(c, (cudaStream_t)a->stream, (char *)c->dv.dev + P->L.blas_work));
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
    } else if (sf & (NNPOPS__ST_OVERFLOW | NNPOPS__ST_POT_CAPACITY)) {
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
                     "a device step needed %d of the %s potential's own capacity, more than the "
                     "%d of the plan; grown to %d: make one nnpops_compute_device call on a stream "
                     "that is not capturing (it re-plans), then capture again (graphs captured "
                     "before that call are invalid)",
                     (int)r->pot_need, m->type, (int)v->P.pot_capacity, (int)c->pot_capacity);
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
        st = nnpops__gpu_check_status(&r->geometry, &g, m->cutoff);
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
    nnpops__gpu_plan_init(c, m, g, &w, &v->capacity, &P);
    TRY(nnpops__gpu_prepare_potential(c, m, g, &P, stream));
    P.z.dev_io = 1;
    step_sizes *z = &P.z;
    nnpops__dstep *ds = &P.ds;
    for (int attempt = 0;; attempt++) {
        z->capacity = v->capacity;
        ds->capacity = z->capacity;
        P.pot_capacity = c->pot_capacity;
        nnpops__gpu_step_layout_of(m, z, ds, &P.L);
        const step_layout *L = &P.L;
        TRY(nnpops__gpu_grow_arena(&v->dev, &v->dev_bytes, L->total, stream, c->device,
                                   "GPU work space of the device entry"));
        /* the static inputs, once per plan (a pageable source: the copy has read it on return) */
        TRY(nnpops__buf_reserve(&v->stage, L->in_bytes, "device entry staging"));
        nnpops__gpu_pack_static(m, g, &P, v->stage.ptr);
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
        TRY(nnpops__gpu_settle_status(c, m, &s, g, z, &v->capacity, attempt, &retry));
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
    TRY(nnpops__gpu_enter_device(m->device_index, &prev));
    const nnpops_status st = device_try(cctx, m, a, need_plan);
    nnpops__gpu_leave_device(m->device_index, prev);
    return st;
}

nnpops_status nnpops__cuda_device_fetch(const nnpops_model *m, void *stream, int count,
                                        void *const *dst, const void *const *src,
                                        const size_t *bytes, const char *const *what) {
    int prev;
    TRY(nnpops__gpu_enter_device(m->device_index, &prev));
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
    nnpops__gpu_leave_device(m->device_index, prev);
    return st;
}

nnpops_status nnpops__cuda_device_plan(nnpops__cuda_ctx **cctx, const nnpops_model *m,
                                       const nnpops__cuda_dev_args *a,
                                       const nnpops__cuda_args *g) {
    int prev;
    TRY(nnpops__gpu_enter_device(m->device_index, &prev));
    nnpops_status st = NNPOPS_OK;
    if (!*cctx) st = nnpops__gpu_ctx_create(m->device_index, cctx);
    if (st == NNPOPS_OK) st = device_plan(*cctx, m, a, g);
    if (st != NNPOPS_OK && *cctx) {
        (*cctx)->dv.ready = 0;
        cudaStreamSynchronize((cudaStream_t)a->stream);
        (void)cudaGetLastError();
    }
    nnpops__gpu_leave_device(m->device_index, prev);
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
    if ((r.step_flags & NNPOPS__ST_POT_CAPACITY) && m->vt->cuda_capacity) {
        const int32_t want = m->vt->cuda_capacity(m, r.pot_need);
        if (want > c->pot_capacity) c->pot_capacity = want;
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
    TRY(nnpops__gpu_enter_device(m->device_index, &prev));
    const nnpops_status st = device_status(c, m, stream, stats);
    nnpops__gpu_leave_device(m->device_index, prev);
    return st;
}
