/*
 * cuda_step.c - the GPU step of nnpops_compute for a model loaded on "cuda" / "cuda:N" (the
 * context's GPU state is in cuda_arena.c, the device-pointer entry in cuda_device.c).
 *
 * ---- host entry (nnpops_compute) ----
 * context.c validates and prepares the inputs on the host (units, species, grouping by system) and
 * hands them here.  One step:
 *   host   choose the neighbor algorithm (system sizes and cells), let the potential prepare its
 *          state and sizes for the step (vt->cuda_prepare), lay out the arena, grow it if needed,
 *          pack every input into ONE pinned buffer;
 *   device (all on the context's stream, in order)
 *          1. ONE host-to-device copy of the packed inputs;
 *          2. ONE memset of the output block (status word, energies, virials, forces, per-atom
 *             terms: everything that is accumulated);
 *          3. neighbor search: center lists of the local atoms, or of every atom when the
 *             potential asks for ghost centers (vt->neighbor_lists; kernels/cuda/neighbors.cu);
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
 *          capacity) or a potential's op that held less than it needed (NNPOPS__ST_POT_CAPACITY,
 *          vt->cuda_capacity) grows that capacity and recomputes the whole step (a truncated
 *          result is never returned); bad cells, too many images and too-close atoms become the
 *          CPU path's errors; otherwise the outputs are copied to the caller's arrays with the
 *          unit factors applied.
 * Arena layout (each part 256-byte aligned): [inputs: positions, cells | static inputs: sys_start,
 * species, batch, order, pbc | outputs | member atom energies |
 * device-entry io word | center lists: start, pairs, vectors, pair gradients | neighbor-search
 * work | cuBLAS work space | potential work | deterministic-reduction work].  The arena and the
 * pinned buffers grow by at least 1.5x and never shrink, so a run of same-sized steps allocates
 * nothing after the first.  Every entry point makes the model's device current and restores the
 * caller's device on return (OpenMM calls from its own thread).
 *
 * CUDA graphs (option cuda_graphs, launch_step): device steps 1-6 are exactly what a graph holds.
 * Capture safety: everything that allocates (arena, pinned staging), sets the cuBLAS work space
 * (cublasSetWorkspace on the arena, bound before the step, so cuBLAS never allocates while
 * capturing), creates what the potential needs (vt->cuda_prepare), reads the host inputs or the
 * device status is OUTSIDE the enqueued region; inside it there are only async copies from/to the
 * pinned buffers, memsets, kernel launches, cub calls on preallocated work space and cuBLAS GEMMs
 * on the context's stream, and whatever the potential enqueues (ANI forks work onto streams of
 * its own and joins it back with events, which a capture records as parallel branches of the
 * graph).  A graph is keyed by every host-side value baked into it (sizes, neighbor plan,
 * capacity, the potential's state, sizes and capacity, options, arena and staging addresses); a
 * step with another key drops the graph and
 * runs eagerly until graph_warmup_steps steps of the new key have run, then captures again.  A
 * neighbor overflow seen after a replay grows the capacity, which changes the key: the step is
 * recomputed eagerly with the grown buffers and the new shape re-captured after its warm-up.  A
 * failed capture runs the step eagerly (it succeeds), counts stats.eager_fallbacks once, writes
 * CUDA's reason to the context's warning (nnpops_context_last_warning) and keeps that key eager.
 * The internal test hook nnpops__cuda_test_break_next_capture makes the next capture synchronize
 * the capturing stream (which CUDA forbids), so that this failure path runs with CUDA's own error.
 * The potential's state: before the step is sized, vt->cuda_prepare sees the atoms' species on the
 * host and builds or finds its per-context state and writes its host sizes for the step
 * (ANI: atoms per species and a species set, see potentials/ani/ani_cuda.c), outside any capture;
 * both are part of the graph key.  The state lives until the context is destroyed.
 * Option deterministic: the cell list orders the atoms of each bin, the reductions gather forces,
 * virials and energies (nnpops__center_reduce_det_cuda) instead of scattering them with atomics,
 * and the potential uses its order-independent kernels (step->deterministic): bitwise
 * reproducible.
 *
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_step.h"

/* ---- the step ------------------------------------------------------------------------------ */


nnpops_status nnpops__gpu_check_status(const nnpops__dev_status *s, const nnpops__cuda_args *g,
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
 * per center statistic, and growth: *retry = 1 when the capacity or the potential's own capacity
 * grew (vt->cuda_capacity; the step must
 * be recomputed; an error after a few rounds). */
nnpops_status nnpops__gpu_settle_status(nnpops__cuda_ctx *c, const nnpops_model *m,
                                        const nnpops__dev_status *s, const nnpops__cuda_args *g,
                                        const step_sizes *z, int64_t *capacity, int attempt,
                                        int *retry) {
    *retry = 0;
    TRY(nnpops__gpu_check_status(s, g, m->cutoff));
    if (g->max_neighbors > 0 && s->n_half > g->max_neighbors * z->n)
        return nnpops__fail(NNPOPS_ERROR_NEIGHBOR_OVERFLOW,
                            "%lld neighbor pairs exceed the limit max_neighbors = %lld per "
                            "atom (%lld atoms)",
                            (long long)s->n_half, (long long)g->max_neighbors, (long long)z->n);
    if (z->n_centers > 0) {
        const double ratio = (double)s->n_entries / (double)z->n_centers;
        if (ratio > c->entries_per_center) c->entries_per_center = ratio;
    }
    if (s->flags & NNPOPS__ST_OVERFLOW) {
        *capacity = s->n_entries + s->n_entries / 8 + 64;
        g->stats->neighbor_rebuilds++;
        *retry = 1;
    }
    if (s->flags & NNPOPS__ST_POT_CAPACITY) {
        /* the potential's op held less than it needed: the potential grows its capacity */
        if (!m->vt->cuda_capacity)
            return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                                "GPU step: the %s potential reported a capacity it cannot grow",
                                m->type);
        c->pot_capacity = m->vt->cuda_capacity(m, s->pot_need);
        *retry = 1;
    }
    if (*retry && attempt >= 3)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "GPU step: neighbor buffers still too small after growing");
    return NNPOPS_OK;
}

/* The host-side plan of a step: sizes, the centers of the lists the potential chose, neighbor plan,
 * and the capacity (*capacity grows when the entries per center seen so far need
 * it).  The layout is left to the caller (it depends on the capacity and the work spaces). */
void nnpops__gpu_plan_init(nnpops__cuda_ctx *c, const nnpops_model *m, const nnpops__cuda_args *g,
                           const step_wants *w, int64_t *capacity, step_plan *P) {
    memset(P, 0, sizeof *P);
    step_sizes *z = &P->z;
    nnpops__dstep *ds = &P->ds;
    P->min_distance = g->min_distance;
    P->max_images = g->max_images;
    if (c->pot_capacity == 0 && m->vt->cuda_capacity)
        c->pot_capacity = m->vt->cuda_capacity(m, 0); /* the first capacity */
    P->pot_capacity = c->pot_capacity;
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

    /* the GPU step hands every potential center lists: of the local atoms, or of every atom when
     * it asks for ghost centers (and with them the pairs of two ghosts) */
    nnpops__nbr_choice lists = {0, 0, 0};
    if (m->vt->neighbor_lists) m->vt->neighbor_lists(m, &lists);
    ds->lists.full = 1;
    ds->lists.ghost_centers = lists.ghost_centers != 0;
    ds->lists.ghost_pairs = ds->lists.ghost_centers;
    z->n_centers = ds->lists.ghost_centers ? z->n : z->n_local;
    ds->n_atoms = z->n;
    ds->n_local = z->n_local;
    ds->n_systems = z->ns;
    ds->n_centers = z->n_centers;
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
        const int64_t need = (int64_t)(per * (double)z->n_centers);
        const int64_t guess = (int64_t)(per * 1.125 * (double)z->n_centers) + 64;
        if (*capacity < need) *capacity = guess;
        const int64_t nn = z->n > 0 ? z->n : 1;
        if (g->max_neighbors > 0 && *capacity > 2 * g->max_neighbors * nn + 64)
            *capacity = 2 * g->max_neighbors * nn + 64;
    }
    z->capacity = *capacity;
    ds->capacity = *capacity;
}

/* The potential's state and sizes for the plan's step (vt->cuda_prepare, with the species on the
 * host; outside any capture), and the descriptor length it reports in the context's statistics. */
nnpops_status nnpops__gpu_prepare_potential(nnpops__cuda_ctx *c, const nnpops_model *m,
                                            const nnpops__cuda_args *g, step_plan *P,
                                            cudaStream_t stream) {
    P->ds.pot_state = NULL;
    memset(P->ds.pot_sizes, 0, sizeof P->ds.pot_sizes);
    P->ds.descriptor_length = 0;
    P->ds.stream = stream; /* for the copies of the potential's state (synchronized) */
    P->ds.blas = c->blas;
    if (m->vt->cuda_prepare) {
        c->pot_release = m->vt->cuda_release_state;
        P->ds.species_host = g->species;
        const nnpops_status st = m->vt->cuda_prepare(m, &P->ds, &c->pot_state);
        P->ds.species_host = NULL;
        TRY(st);
    }
    g->stats->descriptor_length = P->ds.descriptor_length;
    return NNPOPS_OK;
}

/* Writes the static inputs (sys_start, species, batch, order, pbc, charges) at the layout's
 * offsets of `base` (an image of the arena's input block). */
void nnpops__gpu_pack_static(const nnpops_model *m, const nnpops__cuda_args *g, const step_plan *P,
                             char *base) {
    const step_sizes *z = &P->z;
    const step_layout *L = &P->L;
    memcpy(base + L->sys_start, g->sys_start, sizeof(int64_t) * (size_t)(z->ns + 1));
    memcpy(base + L->species, g->species, sizeof(int32_t) * (size_t)z->n);
    memcpy(base + L->batch, g->batch, sizeof(int32_t) * (size_t)z->n);
    memcpy(base + L->order, g->order, sizeof(int32_t) * (size_t)z->n);
    memcpy(base + L->pbc, g->pbc, 3 * (size_t)z->ns);
    if (g->charges)
        memcpy(base + L->charges, g->charges, sizeof(double) * (size_t)z->ns);
    else
        memset(base + L->charges, 0, sizeof(double) * (size_t)z->ns);
}

/* Device steps 3-5 on `stream`, reading and writing the arena at `d`: neighbor search, the
 * potential, the reductions (shared by both entries).  in_stage (or NULL): the host entry's
 * staging of steps 1-2, handed to the neighbor search (its one-block path does it itself, one
 * kernel fewer).  out_dst (or NULL): the host entry's pinned output buffer (its device pointer),
 * when the output block is small enough for the reductions' last block to copy it there
 * (nnpops__reduce_cuda's staging tail); *staged tells whether they did (they run only in
 * non-deterministic mode). */
nnpops_status nnpops__gpu_enqueue_core(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P,
                                       char *d, cudaStream_t stream,
                                       const nnpops__stage_job *in_stage, void *out_dst,
                                       int *staged) {
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
        .skip_from = ds->lists.ghost_centers ? z->n : z->n_local,
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
    TRY(nnpops__center_neighbors_staged_cuda(&nin, z->n_centers, P->min_distance, &z->plan, &cout,
                                             d + L->nbr_work, L->nbr_work_bytes, in_stage,
                                             stream));

    /* 4: the potential */
    ds->positions = (const double *)(d + L->pos);
    ds->species = (const int32_t *)(d + L->species);
    ds->batch = (const int32_t *)(d + L->batch);
    ds->charges = m->uses_charge ? (const double *)(d + L->charges) : NULL;
    ds->start = cout.start;
    ds->pairs = cout.pairs;
    ds->vec = cout.vec;
    ds->pot_capacity = P->pot_capacity;
    ds->status = dstatus;
    ds->need_grad = z->need_grad;
    ds->atom_energy = (double *)(d + L->atom_e);
    ds->member_atom_energy = z->want_member ? (double *)(d + L->member_ae) : NULL;
    ds->pair_grad = z->need_grad ? (double *)(d + L->grad) : NULL;
    ds->work = d + L->pot_work;
    ds->work_bytes = L->pot_work_bytes;
    ds->stream = stream;
    ds->blas = c->blas;
    TRY(m->vt->compute_cuda(m, ds));

    /* 5: force scatter, virials, energies */
    const int32_t *dbatch = ds->batch;
    if (z->det) {
        TRY(nnpops__center_reduce_det_cuda(
            z->n, z->n_centers, z->ns, (const int64_t *)(d + L->sys_start),
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


/* The host entry's step, from the input copy to the output copy (what a graph holds). */
nnpops_status nnpops__gpu_enqueue_step(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P) {
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
    void *tail_dst = kern && out_bytes <= (size_t)NNPOPS_STAGE_TAIL_MAX ? c->pin_out_dev : NULL;
    TRY(nnpops__gpu_enqueue_core(c, m, P, d, c->stream, kern ? &in_stage : NULL, tail_dst,
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
    memcpy(k->pot_sizes, P->ds.pot_sizes, sizeof k->pot_sizes);
    k->member = P->ds.member;
    k->pot_capacity = P->pot_capacity;
    k->max_images = P->max_images;
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
    /* not refused: capture as usual */
    if (e == cudaSuccess) return nnpops__gpu_enqueue_step(c, m, P);
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
    if (!g->cuda_graphs) return nnpops__gpu_enqueue_step(c, m, P);
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
        return nnpops__gpu_enqueue_step(c, m, P);
    }
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        capture_warning(g, "cudaStreamBeginCapture", e, NNPOPS_OK);
        c->capture_failed = 1;
        g->stats->eager_fallbacks++;
        return nnpops__gpu_enqueue_step(c, m, P);
    }
    nnpops_status st;
    if (g->break_next_capture && *g->break_next_capture) {
        *g->break_next_capture = 0;
        st = break_capture(c, m, P);
    } else
        st = nnpops__gpu_enqueue_step(c, m, P);
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
        return nnpops__gpu_enqueue_step(c, m, P);
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
    nnpops__gpu_plan_init(c, m, g, &w, &c->capacity, &P);
    TRY(nnpops__gpu_prepare_potential(c, m, g, &P, c->stream));
    step_sizes *z = &P.z;
    nnpops__dstep *ds = &P.ds;

    /* pinned inputs (their layout does not depend on the capacity) */
    nnpops__gpu_layout_of(z, 0, &P.L);
    const step_layout *L = &P.L;
    TRY(nnpops__gpu_grow_pinned(&c->pin_in, &c->pin_in_dev, &c->pin_in_bytes, L->in_bytes,
                                "GPU input staging"));
    {
        char *p = c->pin_in;
        memcpy(p + L->pos, g->positions, sizeof(double) * 3 * (size_t)z->n);
        memcpy(p + L->cells, g->cells, sizeof(double) * 9 * (size_t)z->ns);
        nnpops__gpu_pack_static(m, g, &P, p);
    }

    for (int attempt = 0;; attempt++) {
        z->capacity = c->capacity;
        ds->capacity = z->capacity;
        P.pot_capacity = c->pot_capacity;
        /* the potential's work space depends on its sizes of the step */
        nnpops__gpu_step_layout_of(m, z, ds, &P.L);
        TRY(nnpops__gpu_grow_arena(&c->dev, &c->dev_bytes, L->total, c->stream, c->device,
                                   "GPU work space"));
        TRY(nnpops__gpu_grow_pinned(&c->pin_out, &c->pin_out_dev, &c->pin_out_bytes,
                                    L->d2h_end - L->out0, "GPU output staging"));
        if (c->blas_work != (char *)c->dev + L->blas_work) {
            TRY(nnpops__gpu_set_workspace(c, (char *)c->dev + L->blas_work));
            c->blas_work = (char *)c->dev + L->blas_work;
        }
        TRY(launch_step(c, m, &P, g));
        NNPOPS__CUDA_CALL(cudaStreamSynchronize(c->stream));

        const char *o = (const char *)c->pin_out - L->out0; /* arena offsets index the staging */
        nnpops__dev_status s;
        memcpy(&s, o + L->status, sizeof s);
        int retry = 0;
        TRY(nnpops__gpu_settle_status(c, m, &s, g, z, &c->capacity, attempt, &retry));
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
    TRY(nnpops__gpu_enter_device(m->device_index, &prev));
    nnpops_status st = NNPOPS_OK;
    if (!*cctx) st = nnpops__gpu_ctx_create(m->device_index, cctx);
    if (st == NNPOPS_OK) st = run_step(*cctx, m, g);
    if (st != NNPOPS_OK && *cctx) {
        /* leave the stream idle and clear a sticky launch error for the next call */
        cudaStreamSynchronize((*cctx)->stream);
        (void)cudaGetLastError();
    }
    nnpops__gpu_leave_device(m->device_index, prev);
    return st;
}
