/*
 * internal.h - declarations shared by the files of the library (never installed).
 *
 * Internal cross-file names use the prefix nnpops__.  Data flow of one nnpops_compute call:
 *
 *   context.c   validate inputs, convert to angstrom, map atomic numbers to species,
 *               group atoms by system
 *   neighbors   half pair list within the model cutoff (kernels/cpu/neighbors.c)
 *   potential   vtable->compute: per-atom energies (model energy unit, float64, self energies
 *               included) and the gradient of the total energy w.r.t. every pair vector
 *               (potentials/ani, potentials/lj)
 *   reduce      energies per system, forces, virials, per-atom virials from the pair gradients
 *               (kernels/cpu/reduce.c), then conversion to the caller's units
 *
 * Pair convention: pair p = (i, j) with vector r_p = x_j - x_i + shift (angstrom).  The potential's
 * output grad[p] = dE/dr_p (the total energy of local atoms).  Then F_i += grad, F_j -= grad,
 * W(system) -= r_p (x) grad, and each atom of the pair gets half of -r_p (x) grad as its per-atom
 * virial.
 */
#ifndef NNPOPS_INTERNAL_H
#define NNPOPS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "nnpops/nnpops.h"

#define NNPOPS__HIDDEN __attribute__((visibility("hidden")))

/* Periodic table symbols, index = atomic number (1..118); [0] = "". */
extern const char *const nnpops__element_symbols[119];
/* Atomic number of an element symbol (case-sensitive, "Cl"), or 0 when unknown. */
int nnpops__element_from_symbol(const char *symbol);

/* ---- errors (core/src/error.c) ---- */
/* Records a printf-style detail as the thread's last error and returns status. */
nnpops_status nnpops__fail(nnpops_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current last error (keeps the status). */
nnpops_status nnpops__fail_prefix(nnpops_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void nnpops__clear_error(void);

/* ---- growable host buffers ---- */
typedef struct nnpops__buf {
    void *ptr;
    size_t bytes;
} nnpops__buf;
/* Ensures at least `bytes` (grows by at least 1.5x; never shrinks).  NNPOPS_ERROR_OUT_OF_MEMORY
 * on failure, with `what` in the message. */
nnpops_status nnpops__buf_reserve(nnpops__buf *b, size_t bytes, const char *what);
void nnpops__buf_free(nnpops__buf *b);

/* ---- model configuration (core/src/config.c, over libyaml's document API) ---- */
typedef struct nnpops__cfg nnpops__cfg; /* one parsed YAML document + its file name */
typedef int nnpops__node;               /* node id inside the document; 0 = none */

nnpops_status nnpops__cfg_load(const char *path, nnpops__cfg **cfg);
/* Parses YAML/JSON text held in memory; `name` is used in messages. */
nnpops_status nnpops__cfg_parse(const char *name, const unsigned char *text, size_t len,
                                nnpops__cfg **cfg);
void nnpops__cfg_free(nnpops__cfg *cfg);
const char *nnpops__cfg_file(const nnpops__cfg *cfg);
nnpops__node nnpops__cfg_root(const nnpops__cfg *cfg);
int nnpops__cfg_line(const nnpops__cfg *cfg, nnpops__node node); /* 1-based */
/* Mapping lookup.  `required`: a missing key is an NNPOPS_ERROR_MODEL_FORMAT naming file, line of
 * the mapping and key; otherwise *out = 0 and NNPOPS_OK. */
nnpops_status nnpops__cfg_get(const nnpops__cfg *cfg, nnpops__node map, const char *key,
                              int required, nnpops__node *out);
int nnpops__cfg_is_map(const nnpops__cfg *cfg, nnpops__node node);
int nnpops__cfg_is_seq(const nnpops__cfg *cfg, nnpops__node node);
/* `map` is a mapping whose keys are all among `allowed` (NULL-terminated); the errors name file,
 * line, `what` and the allowed keys. */
nnpops_status nnpops__cfg_check_keys(const nnpops__cfg *cfg, nnpops__node map, const char *what,
                                     const char *const *allowed);
int nnpops__cfg_is_scalar(const nnpops__cfg *cfg, nnpops__node node);
/* Number of entries of a mapping or sequence (0 for scalars). */
int64_t nnpops__cfg_len(const nnpops__cfg *cfg, nnpops__node node);
nnpops__node nnpops__cfg_item(const nnpops__cfg *cfg, nnpops__node seq, int64_t i);
/* i-th key/value of a mapping. */
nnpops__node nnpops__cfg_key(const nnpops__cfg *cfg, nnpops__node map, int64_t i);
nnpops__node nnpops__cfg_value(const nnpops__cfg *cfg, nnpops__node map, int64_t i);
/* Scalar conversions; a wrong type is an error naming file, line and `what`. */
nnpops_status nnpops__cfg_str(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                              const char **out);
nnpops_status nnpops__cfg_double(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                                 double *out);
nnpops_status nnpops__cfg_int(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                              int64_t *out);
nnpops_status nnpops__cfg_bool(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                               int *out);
/* A sequence of numbers: at most `max` values, count in *n (exact count `max` when exact != 0). */
nnpops_status nnpops__cfg_doubles(const nnpops__cfg *cfg, nnpops__node seq, const char *what,
                                  double *out, int64_t max, int exact, int64_t *n);

/* ---- safetensors weights (core/src/safetensors.c) ---- */
typedef struct nnpops__weights nnpops__weights;
/* Reads the whole file, checks sha256 (lowercase hex, NULL = unchecked) and the header. */
nnpops_status nnpops__weights_load(const char *path, const char *sha256_hex,
                                   nnpops__weights **w);
void nnpops__weights_free(nnpops__weights *w);
/* Finds a float32 tensor by name with exactly the given shape; errors name file and tensor.
 * *data points into the loaded file (little-endian float32, possibly unaligned: copy with memcpy). */
nnpops_status nnpops__weights_get_f32(const nnpops__weights *w, const char *name, int ndim,
                                      const int64_t *shape, const void **data);
int64_t nnpops__weights_count(const nnpops__weights *w);

/* sha256 (core/src/sha256.c): out = 64 lowercase hex chars + NUL. */
void nnpops__sha256_hex(const void *data, size_t len, char out[65]);

/* ---- devices ---- */
typedef enum nnpops__device_kind { NNPOPS__CPU = 0, NNPOPS__CUDA = 1 } nnpops__device_kind;

/* ---- models (core/src/model.c) ---- */
#define NNPOPS__MAX_SPECIES 32
/* side streams of the GPU step (nnpops__dstep) */
#define NNPOPS__SIDE_STREAMS 3

struct nnpops__potential_vt;
struct nnpops__dstep; /* CUDA backend, see the end of this file */

struct nnpops_model {
    char path[4096];    /* resolved YAML path */
    char dir[4096];     /* directory of the YAML file */
    char name[128];
    char type[16];
    char device_name[32];
    nnpops__device_kind device;
    int device_index;
    nnpops_precision precision;
    int32_t n_species;
    int32_t species_z[NNPOPS__MAX_SPECIES]; /* atomic number of each species */
    int32_t z_to_species[119];              /* -1 = not described by the model */
    double cutoff;          /* angstrom: every interaction range <= cutoff */
    double energy_to_eV;    /* model energy unit -> eV */
    double length_to_A;     /* model length unit -> angstrom */
    int32_t ensemble_size;
    const struct nnpops__potential_vt *vt;
    void *impl;             /* potential-specific data (parameters, weight arena) */
    void *device_data;      /* CUDA backend: the potential's device copy (vt->upload), or NULL */
};

/* ---- one step as the potentials see it (all lengths angstrom, energies model unit) ---- */
typedef struct nnpops__step {
    int64_t n_atoms;
    int64_t n_local;            /* atoms >= n_local are ghosts: no energy of theirs counts */
    int64_t n_systems;
    const int32_t *species;     /* [n_atoms] species index */
    const double *positions;    /* [n_atoms][3] */
    const int32_t *batch;       /* [n_atoms] system index (never NULL) */
    int64_t n_pairs;
    const int32_t *pairs;       /* [n_pairs][2] half list within model->cutoff */
    const double *pair_vec;     /* [n_pairs][3] r = x_j - x_i + shift */
    const double *pair_dist;    /* [n_pairs] |r| */
    int32_t member;             /* -1 = ensemble mean, else that member only */
    int need_grad;              /* forces or virials wanted */
    /* outputs, zeroed by the caller; the potential writes them */
    double *atom_energy;        /* [n_atoms] energy per atom, self energies included; 0 for ghosts */
    double *pair_grad;          /* [n_pairs][3] dE/dr_p (only when need_grad) */
    double *member_atom_energy; /* [n_atoms][ensemble_size] or NULL: each member's energy of each
                                 * local atom, self energy included (so it sums like atom_energy) */
    int64_t descriptor_length;  /* written by the potential: per-atom descriptor entries */
} nnpops__step;

/* ---- worker threads of CPU steps (core/src/pool.c) ---- */
typedef struct nnpops__pool nnpops__pool;
typedef void (*nnpops__pool_fn)(void *arg, int share, int thread);
/* Runs fn(arg, s, t) for every share s < n_shares on up to nt threads (the calling thread, t = 0,
 * and the pool's workers, started on first use into *pool): thread t runs the shares t, t + nt',
 * ... in turn (nt' the threads it got), so a share never runs on two threads at once and a
 * thread's own buffers (by t) serve each of its shares.  Returns nt'. */
int nnpops__pool_run(nnpops__pool **pool, int nt, int n_shares, nnpops__pool_fn fn, void *arg);
void nnpops__pool_destroy(nnpops__pool *pool);
/* The threads a job of nt shares gets (the pool made or remade as nnpops__pool_run would); a job
 * of that many shares then has one share per thread, all running at once. */
int nnpops__pool_threads(nnpops__pool **pool, int nt);
/* A barrier of the n threads of such a job (spinning, then yielding the processor): each waits
 * until all n have arrived, and sees what the others wrote before they arrived.  *sense: the
 * calling thread's own flag, 0 before its first wait. */
typedef struct nnpops__barrier {
    int count, sense; /* (atomic: GCC / Clang __atomic built-ins) */
    int n;
} nnpops__barrier;
void nnpops__barrier_init(nnpops__barrier *b, int n);
void nnpops__barrier_wait(nnpops__barrier *b, int *sense);
extern int nnpops__pool_test_starts; /* test hook (pool.c) */

/* Scratch buffers of a context that potentials may use (slot numbers are potential-private). */
#define NNPOPS__SCRATCH_SLOTS 17
typedef struct nnpops__scratch {
    nnpops__buf slot[NNPOPS__SCRATCH_SLOTS];
    /* CPU threads (option threads, resolved by the context): the threads a step may use, the
     * threads its potential ran on (written by the potential), the pool, and the scratch of
     * shares 1 .. n_sub (share 0 uses this one; their own pool and sub are unused) */
    int32_t threads, threads_used;
    nnpops__pool *pool;
    struct nnpops__scratch *sub;
    int32_t n_sub;
} nnpops__scratch;
/* At least n share scratches in scratch->sub (grown, the old ones kept). */
nnpops_status nnpops__scratch_subs(nnpops__scratch *scratch, int32_t n);
void nnpops__scratch_free(nnpops__scratch *scratch);

typedef struct nnpops__potential_vt {
    const char *type;
    /* Parses the type-specific part of the YAML and the weights; sets model->impl, cutoff,
     * ensemble_size (species, units, device and precision are already set). */
    nnpops_status (*load)(nnpops_model *model, const nnpops__cfg *cfg, nnpops__node root,
                          const nnpops__weights *weights);
    void (*destroy)(nnpops_model *model);
    /* One step on the CPU (writes the step's outputs, descriptor_length among them).  Must not
     * keep pointers into `step` after returning. */
    nnpops_status (*compute_cpu)(const nnpops_model *model, nnpops__scratch *scratch,
                                 nnpops__step *step);
    /* ---- GPU hooks (CUDA backend; NULL for a potential without a GPU path; see the CUDA block
     * at the end of this file).  Called with the model's device current. ---- */
    /* Copies the parameters to the device once, at load, into model->device_data. */
    nnpops_status (*upload)(nnpops_model *model);
    /* Frees model->device_data (never fails; called before destroy). */
    void (*release_device)(nnpops_model *model);
    /* Device work space (bytes) that compute_cuda needs for this step's sizes, and in
     * *side_streams how many of the step's side streams (step->side_stream[0 ..]) it uses
     * (0 .. NNPOPS__SIDE_STREAMS): their cuBLAS handles get work space too. */
    size_t (*cuda_work_bytes)(const nnpops_model *model, const struct nnpops__dstep *step,
                              int *side_streams);
    /* One step on the device: enqueues kernels on step->stream; never allocates or syncs. */
    nnpops_status (*compute_cuda)(const nnpops_model *model, const struct nnpops__dstep *step);
    /* Optional: before the step is sized and enqueued (never while a stream captures), the
     * potential's per-context device state for the step's species set (step->species_present):
     * *state is the context's slot (NULL at first, kept between steps); sets step->pot_state
     * (what compute_cuda and cuda_work_bytes then read), step->descriptor_length, and may widen
     * step->species_present (the core ranks the species after this call).  State a step used
     * stays valid until cuda_release_state (a caller's captured graph may refer to it). */
    nnpops_status (*cuda_prepare)(const nnpops_model *model, struct nnpops__dstep *step,
                                  void **state);
    /* Frees that state (never fails; the context's device is current, its work has finished). */
    void (*cuda_release_state)(void *state);
} nnpops__potential_vt;

extern const nnpops__potential_vt nnpops__ani_vt;
extern const nnpops__potential_vt nnpops__lj_vt;

/* ---- neighbor search on the CPU (kernels/cpu/neighbors.c) ----
 * Half list of all pairs closer than `cutoff` among the atoms of each system, each system with its
 * own cell and periodicity; atoms of system s are order[sys_start[s] .. sys_start[s+1]).  Pairs
 * whose atoms are both >= skip_from are omitted (ghost-ghost pairs).  Shift-0 pairs have i < j.
 * If more than `capacity` pairs exist, *n_pairs is set to the total and the first `capacity`
 * are written, returning NNPOPS_ERROR_NEIGHBOR_OVERFLOW (without setting an error message: the
 * caller grows and retries).  Bad cells are NNPOPS_ERROR_BAD_CELL, too many images
 * NNPOPS_ERROR_TOO_MANY_IMAGES (with messages naming the system). */
typedef struct nnpops__nbr_in {
    int64_t n_atoms;
    const double *positions;    /* [n_atoms][3] */
    int64_t n_systems;
    const int64_t *sys_start;   /* [n_systems + 1] */
    const int32_t *order;       /* [n_atoms] atom ids grouped by system */
    const double *cells;        /* [n_systems][9] rows a, b, c; NULL = none */
    const uint8_t *pbc;         /* [n_systems][3]; NULL = none */
    double cutoff;
    int64_t skip_from;          /* n_atoms = keep everything */
    int32_t max_images;         /* per axis */
} nnpops__nbr_in;

typedef struct nnpops__nbr_out {
    int64_t capacity;
    int64_t n_pairs;
    int32_t *pairs;     /* [capacity][2] */
    int32_t *shifts;    /* [capacity][3] integer lattice shifts, or NULL */
    double *vec;        /* [capacity][3] */
    double *dist;       /* [capacity] */
} nnpops__nbr_out;

nnpops_status nnpops__neighbors_cpu(const nnpops__nbr_in *in, nnpops__scratch *scratch,
                                    nnpops__nbr_out *out);

/* ---- reductions on the CPU (kernels/cpu/reduce.c) ---- */
/* forces [n_atoms][3], virials [n_systems][9], atomic_virials [n_atoms][9]: each may be NULL;
 * they are overwritten (not accumulated). */
void nnpops__pair_reduce_cpu(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                             int64_t n_pairs, const int32_t *pairs, const double *pair_vec,
                             const double *pair_grad, double *forces, double *virials,
                             double *atomic_virials);
/* energies[s] = sum of atom_energy over the atoms of s (float64). */
void nnpops__energy_reduce_cpu(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                               const double *atom_energy, int64_t width, double *energies);

/* ==== CUDA backend =============================================================================
 * (kernels/cuda/<op>.cu, core/src/cuda_step.c, potentials/ani/ani_cuda.c; the CPU twins of the GPU-only
 * ops are kernels/cpu/center_neighbors.c and kernels/cpu/fused.c.)
 *
 * Device status word: written by the neighbor search and the AEV kernels, read back with the results
 * of a step (one D2H copy), and filled the same way by the CPU twins.  Flags: */
#define NNPOPS__ST_OVERFLOW 1u        /* more entries than capacity (n_entries is the total) */
#define NNPOPS__ST_TOO_CLOSE 2u       /* a pair closer than min_distance (close_*) */
#define NNPOPS__ST_BAD_CELL 4u        /* singular or non-finite cell (bad_system, bad_axis) */
#define NNPOPS__ST_TOO_MANY_IMAGES 8u /* images along bad_axis of bad_system exceed max_images */
#define NNPOPS__ST_ANGULAR 16u        /* a center has more angular entries than the AEV kernels hold */
#define NNPOPS__ST_GEOM_SET 256u      /* internal: bad_system/bad_axis/images/bad_kind are written */
typedef struct nnpops__dev_status {
    int64_t n_entries;   /* entries (pairs) found; all are counted, the first `capacity` written */
    int64_t n_half;      /* center lists: how many distinct (half-list) pairs the entries are */
    uint32_t flags;
    int32_t bad_system;  /* a system with a bad cell / too many images (valid with ST_GEOM_SET) */
    int32_t bad_axis;
    int32_t images;      /* images needed along bad_axis */
    int32_t close_i, close_j; /* a too-close pair (close_i == close_j: an atom and its own image) */
    int32_t max_angular; /* AEV: largest angular entry count seen when ST_ANGULAR is set */
    int32_t bad_kind;    /* NNPOPS__ST_BAD_CELL or _TOO_MANY_IMAGES: the error recorded in bad_* */
    double close_d;
} nnpops__dev_status;

/* Center lists (the "directed" neighbor layout of the GPU step): for every center c < n_centers
 * (local atom), its entries are e = start[c] .. start[c+1]-1 with pairs[e] = {c, j},
 * vec[e] = x_j - x_c + s . H (angstrom, double), shifts[e] = s, dist[e] = |vec[e]|: every atom
 * (or periodic image, own images included) within the cutoff, ghosts included.  A local-local
 * pair appears twice (once per center), so the list is also a valid pair list for
 * nnpops__pair_reduce_* whose pair p = entry e, and the CSR center lists of kernels.h are
 * start[] with entry[e] = 2 e.  CPU twin below; the CUDA version is in kernels/cuda. */
typedef struct nnpops__center_out {
    int64_t capacity;   /* entries the arrays hold */
    int64_t *start;     /* [n_centers + 1] (always complete, also on overflow) */
    int32_t *pairs;     /* [capacity][2] */
    int32_t *shifts;    /* [capacity][3] or NULL */
    double *vec;        /* [capacity][3] or NULL */
    double *dist;       /* [capacity] or NULL */
    nnpops__dev_status *status; /* n_entries, n_half, flags (TOO_CLOSE: min_distance > 0) */
} nnpops__center_out;
/* CPU twin: uses the half-list search (kernels/cpu/neighbors.c, scratch slots 0..2 and 10..11),
 * entries in pair order.  Errors of the half-list search are returned with their messages;
 * overflow and too-close pairs are reported in *status only (NNPOPS_OK). */
nnpops_status nnpops__center_neighbors_cpu(const nnpops__nbr_in *in, int64_t n_centers,
                                           double min_distance, nnpops__scratch *scratch,
                                           nnpops__center_out *out);

/* The context's GPU state (core/src/cuda_step.c; a NULL pointer in CPU-only builds). */
typedef struct nnpops__cuda_ctx nnpops__cuda_ctx;

/* Test hook (tests link the static nnpops_internal; never exported): the next CUDA graph capture of
 * the context's own graphs (option cuda_graphs) does something CUDA forbids while capturing (it
 * synchronizes the capturing stream), so the capture fails with CUDA's own error and the step falls
 * back to eager execution.  A no-op in CPU-only builds and for NULL. */
void nnpops__cuda_test_break_next_capture(nnpops_context *context);

#ifdef NNPOPS_HAVE_CUDA
/* One step on the device as a potential sees it: every pointer is a device pointer unless marked
 * (host).  Lengths angstrom, energies model unit. */
typedef struct nnpops__dstep {
    int64_t n_atoms, n_local, n_systems;
    const double *positions;      /* [n_atoms][3] */
    const int32_t *species;       /* [n_atoms] */
    /* the species among the step's atoms, ghosts included (host; bit s: species s), and each
     * atom's species ranked among them: species_rank[i] = the number of present species below
     * species[i] (device [n_atoms]) */
    uint32_t species_present;
    const int32_t *species_rank;
    const int32_t *batch;         /* [n_atoms] */
    /* local atoms grouped by species into columns: species s owns columns col_start[s] ..
     * col_start[s] + col_count[s] (col_start multiples of 32, host); centers[col] = atom or -1 */
    int64_t n_cols;
    int64_t col_start[NNPOPS__MAX_SPECIES + 1];
    int64_t col_count[NNPOPS__MAX_SPECIES];
    const int32_t *centers;       /* [n_cols] */
    /* center lists of the local atoms (see nnpops__center_out) */
    int64_t capacity;
    const int64_t *start;         /* [n_local + 1] */
    const int32_t *pairs;         /* [capacity][2] */
    const double *vec;            /* [capacity][3] */
    int32_t max_angular;          /* angular entries per center the AEV kernels hold */
    nnpops__dev_status *status;
    int32_t member;               /* -1 = ensemble mean */
    int need_grad;
    int deterministic;            /* 1: bitwise reproducible kernels (no order-dependent float
                                   * atomics; option deterministic) */
    int tensor_cores;             /* float32: 3xTF32 tensor-core GEMMs (option tensor_cores) */
    /* outputs (zeroed by the caller): atom_energy [n_atoms] (self energies included),
     * member_atom_energy [n_atoms][ensemble] or NULL, pair_grad [capacity][3] = dE/dvec[e]
     * (written, not accumulated, for every entry) when need_grad */
    double *atom_energy, *member_atom_energy, *pair_grad;
    void *pot_state;              /* set by vt->cuda_prepare (host; the potential's own) */
    int64_t descriptor_length;    /* set by vt->cuda_prepare: per-atom descriptor entries */
    void *work;                   /* vt->cuda_work_bytes(...) bytes, 256-byte aligned */
    size_t work_bytes;
    void *stream;                 /* cudaStream_t */
    void *blas;                   /* cublasHandle_t bound to the device */
    /* side streams for work that may run concurrently with `stream` (the ANI species networks):
     * n_side of them, each with its own cuBLAS handle (bound to that stream, its own work space);
     * a potential forks onto them by recording fork_event on `stream` and making the side stream
     * wait for it, and joins back by recording join_event[k] on side stream k and making `stream`
     * wait for it (inside a capture the side streams join the graph through these events) */
    int n_side;
    void *side_stream[NNPOPS__SIDE_STREAMS]; /* cudaStream_t */
    void *side_blas[NNPOPS__SIDE_STREAMS];   /* cublasHandle_t */
    void *fork_event;                        /* cudaEvent_t */
    void *join_event[NNPOPS__SIDE_STREAMS];  /* cudaEvent_t */
} nnpops__dstep;

/* core/src/cuda_step.c: the context's GPU state and the GPU step. */
typedef struct nnpops__cuda_args {
    /* prepared host arrays (context.c, angstrom) */
    int64_t n_atoms, n_local, n_systems;
    const double *positions;
    const int32_t *species, *batch, *order;
    const int64_t *sys_start;
    const double *cells;
    const uint8_t *pbc;
    /* options */
    double min_distance;
    int64_t max_neighbors;
    int32_t max_images;
    int32_t member;
    int32_t cuda_graphs;          /* 1: replay a captured graph of the step when shapes repeat */
    int32_t graph_warmup_steps;   /* eager steps of one shape before it is captured */
    int32_t deterministic;        /* 1: bitwise reproducible results (gathers, fixed-order sums) */
    int32_t tensor_cores;         /* 1: float32 network GEMMs as 3xTF32 on the tensor cores */
    /* a failed graph capture (the step then runs eagerly and succeeds) writes its reason here
     * (NUL-terminated, warning_size bytes); untouched otherwise */
    char *warning;
    size_t warning_size;
    /* test hook (nnpops__cuda_test_break_next_capture): when *break_next_capture is set, the next
     * capture of the library's own graph is made to fail, and the flag is cleared; may be NULL */
    int32_t *break_next_capture;
    /* model energy -> caller energy; model energy per angstrom -> caller force */
    double e_factor, f_factor;
    nnpops_outputs *out;
    nnpops_stats *stats;          /* neighbor_rebuilds, pair_capacity, n_pairs, graph_* updated */
} nnpops__cuda_args;
nnpops_status nnpops__cuda_compute(nnpops__cuda_ctx **cctx, const nnpops_model *model,
                                   const nnpops__cuda_args *args);
void nnpops__cuda_ctx_destroy(nnpops__cuda_ctx *cctx);

/* The device-pointer entry (nnpops_compute_device; core/src/cuda_step.c describes the plan, the
 * steady call and the status record).  context.c resolves options and units into: */
typedef struct nnpops__cuda_dev_args {
    void *stream;                  /* the caller's cudaStream_t */
    int64_t n_atoms, n_local;      /* n_local resolved (0 .. n_atoms) */
    int64_t n_systems_given;       /* as the caller gave it: 0 = not given (max(batch) + 1) */
    /* the caller's device arrays (batch and cells may be NULL) */
    const int32_t *atomic_numbers;
    const double *positions;
    const int32_t *batch;
    const double *cells;
    const uint8_t *pbc;            /* HOST [n_systems][3] or NULL */
    double *energies, *forces, *virials; /* device outputs, NULL = not wanted */
    double to_A, e_factor, f_factor;     /* caller length -> angstrom; model energy (per angstrom)
                                          * -> caller energy (force) */
    double min_distance;
    int64_t max_neighbors;
    int32_t max_images, member, deterministic, tensor_cores;
    nnpops_stats *stats;           /* steps are counted by context.c; device_* here */
} nnpops__cuda_dev_args;
/* The steady call: enqueues the step on args->stream when the context has a plan of this shape
 * (*need_plan = 0; also under the caller's graph capture); otherwise, on a stream that is not
 * capturing, enqueues nothing and sets *need_plan = 1 (context.c then fetches, validates and calls
 * nnpops__cuda_device_plan); while capturing, NNPOPS_ERROR_CAPTURE.  n_atoms == 0 zeroes the
 * energies and virials of the systems given. */
nnpops_status nnpops__cuda_device_try(nnpops__cuda_ctx **cctx, const nnpops_model *model,
                                      const nnpops__cuda_dev_args *args, int *need_plan);
/* Copies `count` caller arrays (device memory, each checked to be) into host buffers on `stream`,
 * then synchronizes it.  what[k] names array k in messages; NULL sources are skipped. */
nnpops_status nnpops__cuda_device_fetch(const nnpops_model *model, void *stream, int count,
                                        void *const *dst, const void *const *src,
                                        const size_t *bytes, const char *const *what);
/* Makes the plan of args' shape from the inputs context.c prepared on the host (`host`, whose
 * n_systems is resolved), uploads its static inputs, runs the step synchronously (capacity grown
 * and the step recomputed on overflow; the status word's errors as in nnpops__cuda_compute) and
 * writes the caller's outputs. */
nnpops_status nnpops__cuda_device_plan(nnpops__cuda_ctx **cctx, const nnpops_model *model,
                                       const nnpops__cuda_dev_args *args,
                                       const nnpops__cuda_args *host);
/* nnpops_context_device_status: synchronizes `stream`, reads and zeroes the record of the device
 * steps since the last check, and returns the first problem as the host entry's error (NNPOPS_OK
 * when none, or when the context has made no device call). */
nnpops_status nnpops__cuda_device_status(nnpops__cuda_ctx *cctx, const nnpops_model *model,
                                         void *stream, nnpops_stats *stats);
/* Model load / destroy glue: upload through vt->upload (UNSUPPORTED when the potential has no GPU
 * path), release through vt->release_device. */
nnpops_status nnpops__cuda_model_upload(nnpops_model *model);
void nnpops__cuda_model_release(nnpops_model *model);

/* potentials/ani/ani_cuda.c: the ANI GPU hooks (listed in nnpops__ani_vt). */
nnpops_status nnpops__ani_upload(nnpops_model *model);
void nnpops__ani_release_device(nnpops_model *model);
size_t nnpops__ani_cuda_work_bytes(const nnpops_model *model, const nnpops__dstep *step,
                                   int *side_streams);
nnpops_status nnpops__ani_compute_cuda(const nnpops_model *model, const nnpops__dstep *step);
nnpops_status nnpops__ani_cuda_prepare(const nnpops_model *model, nnpops__dstep *step,
                                       void **state);
void nnpops__ani_cuda_release_state(void *state);
#endif /* NNPOPS_HAVE_CUDA */
/* ==== end of the CUDA backend block ============================================================ */


/* Returns the status of x from the calling function when it is not NNPOPS_OK. */
#define NNPOPS__TRY(x)                                                                            \
    do {                                                                                          \
        nnpops_status s_ = (x);                                                                   \
        if (s_ != NNPOPS_OK) return s_;                                                           \
    } while (0)

#ifdef NNPOPS_HAVE_CUDA
#include <cuda_runtime_api.h>
/* Returns NNPOPS_ERROR_CUDA from the calling function when a CUDA runtime call fails, naming the
 * call site and CUDA's reason (host code of the GPU path, C and CUDA C++ alike). */
#define NNPOPS__CUDA_CALL(call)                                                                   \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess)                                                                    \
            return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #call,    \
                                cudaGetErrorString(e_));                                          \
    } while (0)
#endif

#endif /* NNPOPS_INTERNAL_H */
