/*
 * cuda_step.h - what the files of the GPU step share (never included outside them): the step's
 * sizes, arena layout and plan, the graph key, the device entry's state, and the context's GPU
 * state (struct nnpops__cuda_ctx).
 *
 *   cuda_arena.c   the context's GPU state: device selection, streams, cuBLAS handles, the device
 *                  arena and pinned staging buffers, the arena layout; the model's upload
 *   cuda_step.c    the host entry's step (nnpops_compute on a GPU model): plan, enqueue, CUDA
 *                  graphs, the status word and capacity growth
 *   cuda_device.c  the device-pointer entry (nnpops_compute_device) and its plans
 */
#ifndef NNPOPS_CUDA_STEP_H
#define NNPOPS_CUDA_STEP_H

#include <stddef.h>
#include <stdint.h>

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
    size_t pos, cells, sys_start, species, batch, order, pbc, charges, in_bytes;
    /* outputs: [status | energies | member energies | virials | forces | atomic virials | atom
     * energies] copied back up to d2h_end; then member atom energies, the device entry's io word
     * and the reductions' ticket (nnpops__reduce_cuda's staging tail), zeroed with the rest */
    size_t out0, status, energies, member_e, virials, forces, atom_vir, atom_e, d2h_end, member_ae,
        io, ticket, zero_end;
    size_t start, pairs, vec, grad, nbr_work, nbr_work_bytes, blas_work, pot_work, pot_work_bytes,
        det_work, det_work_bytes, total;
} step_layout;

typedef struct step_sizes {
    int64_t n, n_local, ns, ens, capacity;
    int64_t n_centers;         /* atoms with center lists: n_local, or n with ghost centers */
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
    int32_t pot_capacity;      /* the potential's own capacity (vt->cuda_capacity) */
} step_plan;

typedef struct step_wants {
    int energies, member, virials, forces, atom_e, atom_vir;
} step_wants;

typedef struct graph_key {
    step_sizes z;
    int64_t pot_sizes[NNPOPS__POT_SIZES];
    int32_t member, pot_capacity, max_images;
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
    void *dev;
    size_t dev_bytes;
    void *pin_in, *pin_out;
    void *pin_in_dev, *pin_out_dev; /* their device pointers (NULL: not mapped) */
    size_t pin_in_bytes, pin_out_bytes;
    int64_t capacity;          /* center-list entries */
    double entries_per_center; /* largest ratio seen, for the first capacity of a new size */
    int32_t pot_capacity;      /* the potential's own capacity (0: not asked yet, or none) */
    void *blas_work;           /* where cuBLAS's work space was last set (NULL: set it again) */
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

static inline size_t al(size_t b) { return (b + 255) & ~(size_t)255; }

/* Names of the cell vectors in messages. */
static const char axis_name[3] __attribute__((unused)) = {'a', 'b', 'c'};

/* Inputs and outputs of at most this many bytes move through the staging kernel (one kernel
 * node each way in a graph, instead of a memcpy and a memset node in, a memcpy node out); larger
 * ones through the copy engines. */
#define NNPOPS_STAGE_KERNEL_MAX (256 << 10)
/* Output blocks of at most this many bytes (on the staging-kernel path) are copied out by the last
 * block of the reductions (nnpops__reduce_cuda), one kernel fewer. */
#define NNPOPS_STAGE_TAIL_MAX (16 << 10)

/* ---- cuda_arena.c ---- */
/* Makes `device` current; *prev receives the caller's (restore with nnpops__gpu_leave_device). */
nnpops_status nnpops__gpu_enter_device(int device, int *prev);
void nnpops__gpu_leave_device(int device, int prev);
nnpops_status nnpops__gpu_set_workspace(nnpops__cuda_ctx *c, char *work);
nnpops_status nnpops__gpu_ctx_create(int device, nnpops__cuda_ctx **out);
nnpops_status nnpops__gpu_grow_arena(void **p, size_t *have, size_t bytes, cudaStream_t stream,
                                     int device, const char *what);
void *nnpops__gpu_pinned_device_pointer(void *h);
nnpops_status nnpops__gpu_grow_pinned(void **p, void **dp, size_t *have, size_t bytes,
                                      const char *what);
void nnpops__gpu_layout_of(const step_sizes *z, size_t pot_work, step_layout *L);
void nnpops__gpu_step_layout_of(const nnpops_model *m, const step_sizes *z, const nnpops__dstep *ds,
                                step_layout *L);

/* ---- cuda_step.c (also used by the device entry) ---- */
nnpops_status nnpops__gpu_check_status(const nnpops__dev_status *s, const nnpops__cuda_args *g,
                                       double cutoff);
nnpops_status nnpops__gpu_settle_status(nnpops__cuda_ctx *c, const nnpops_model *m,
                                        const nnpops__dev_status *s, const nnpops__cuda_args *g,
                                        const step_sizes *z, int64_t *capacity, int attempt,
                                        int *retry);
void nnpops__gpu_plan_init(nnpops__cuda_ctx *c, const nnpops_model *m, const nnpops__cuda_args *g,
                           const step_wants *w, int64_t *capacity, step_plan *P);
nnpops_status nnpops__gpu_prepare_potential(nnpops__cuda_ctx *c, const nnpops_model *m,
                                            const nnpops__cuda_args *g, step_plan *P,
                                            cudaStream_t stream);
void nnpops__gpu_pack_static(const nnpops_model *m, const nnpops__cuda_args *g, const step_plan *P,
                             char *base);
nnpops_status nnpops__gpu_enqueue_core(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P,
                                       char *d, cudaStream_t stream,
                                       const nnpops__stage_job *in_stage, void *out_dst,
                                       int *staged);
nnpops_status nnpops__gpu_enqueue_step(nnpops__cuda_ctx *c, const nnpops_model *m, step_plan *P);

#endif /* NNPOPS_CUDA_STEP_H */
