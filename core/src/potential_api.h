/*
 * potential_api.h - the interface between the core and the potentials: what a potential under
 * potentials/<name>/ implements (the vtable nnpops__potential_vt) and what it may use of the core
 * (the model record, the step it is handed, the YAML and weights readers, element symbols).  A
 * potential includes this header and headers of kernels/ and of its own folder, nothing else of
 * core/ (tests/unit/check_includes.py enforces it).
 *
 * Adding a potential: a folder potentials/<name>/ defining `const nnpops__potential_vt
 * nnpops__<name>_vt`, one entry in the table of core/src/potentials.c, and its sources in the
 * CMake lists (docs/design.md, "Adding a potential").
 *
 * Pair convention: pair (or entry) p = (i, j) with vector r_p = x_j - x_i + shift (angstrom).  The
 * potential's output grad[p] = dE/dr_p, E the total energy of the local atoms.  The core then
 * reduces F_i += grad, F_j -= grad, W(system) -= r_p (x) grad, and gives each atom of a pair half
 * of -r_p (x) grad as its per-atom virial.
 */
#ifndef NNPOPS_POTENTIAL_API_H
#define NNPOPS_POTENTIAL_API_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"

/* Periodic table symbols, index = atomic number (1..118); [0] = "". */
extern const char *const nnpops__element_symbols[119];
/* Atomic number of an element symbol (case-sensitive, "Cl"), or 0 when unknown. */
int nnpops__element_from_symbol(const char *symbol);

/* ---- model configuration (core/src/config.c, over libyaml's document API) ---- */
typedef struct nnpops__cfg nnpops__cfg; /* one parsed YAML document + its file name */
typedef int nnpops__node;               /* node id inside the document; 0 = none */

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
/* Finds a float32 tensor by name with exactly the given shape; errors name file and tensor.
 * *data points into the loaded file (little-endian float32, possibly unaligned: copy with memcpy). */
nnpops_status nnpops__weights_get_f32(const nnpops__weights *w, const char *name, int ndim,
                                      const int64_t *shape, const void **data);
/* Copies a float32 or float64 tensor of exactly the given shape into out[] as doubles (count =
 * the product of the shape); errors name file and tensor. */
nnpops_status nnpops__weights_read(const nnpops__weights *w, const char *name, int ndim,
                                   const int64_t *shape, double *out);
int64_t nnpops__weights_count(const nnpops__weights *w);

/* ---- devices ---- */
typedef enum nnpops__device_kind { NNPOPS__CPU = 0, NNPOPS__CUDA = 1 } nnpops__device_kind;

/* ---- the neighbor lists a potential asks for (vt->neighbor_lists) ----
 * half list: every pair of atoms (or atom and periodic image) within the cutoff once, as (i, j)
 *   with r = x_j - x_i + shift; ghost_pairs = 0 drops the pairs of two ghost atoms.
 * full list: center lists; every atom c < n_centers gets an entry (c, j) for every atom or image
 *   j within the cutoff (its own images included), so a pair of two centers is two entries, one
 *   per direction.  ghost_centers = 0: the centers are the local atoms (pairs of two ghosts are
 *   then absent); 1: every atom is a center, ghosts too (pairs of two ghosts included).
 * In both forms the potential writes the gradient of the local atoms' energy per pair or entry,
 * and the core reduces forces and virials the same way (F_i += g, F_j -= g, W -= r (x) g). */
typedef struct nnpops__nbr_choice {
    int32_t full;          /* 0: half list, 1: full (center) lists */
    int32_t ghost_pairs;   /* half list: 1 keeps pairs of two ghosts */
    int32_t ghost_centers; /* full lists: 1 gives ghosts center lists too */
} nnpops__nbr_choice;

/* ---- models (core/src/model.c) ---- */
/* Largest species list of a model file: every element (TensorNet models list each Z < max_z). */
#define NNPOPS__MAX_MODEL_SPECIES 118

/* host sizes a potential keeps per GPU step (nnpops__dstep.pot_sizes) */
#define NNPOPS__POT_SIZES 40

struct nnpops__potential_vt;
struct nnpops__dstep; /* CUDA backend, see below */

struct nnpops_model {
    char path[4096];    /* resolved YAML path */
    char dir[4096];     /* directory of the YAML file */
    char name[128];
    char type[16];
    char device_name[32];
    nnpops__device_kind device;
    int device_index;
    nnpops_precision precision;
    int32_t n_species;     /* 1 .. NNPOPS__MAX_MODEL_SPECIES; a potential with per-species tables
                            * (ANI, LJ, the GPU step) refuses more than NNPOPS__MAX_SPECIES */
    int32_t species_z[NNPOPS__MAX_MODEL_SPECIES]; /* atomic number of each species */
    int32_t z_to_species[119];              /* -1 = not described by the model */
    double cutoff;          /* angstrom: the longest pair of the neighbor lists */
    double interaction_range; /* angstrom: beyond it an atom cannot change another's energy
                               * (0 after load(): the cutoff) */
    int32_t uses_charge;    /* 1: the potential reads step->charges (set by load()) */
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
    const double *charges;      /* [n_systems] total charges, or NULL = neutral (only for a
                                 * model with uses_charge; others never see a nonzero one) */
    /* the neighbor list the potential chose (vt->neighbor_lists; see nnpops__nbr_choice):
     * half: n_pairs pairs (i, j), each interacting pair once; full: n_pairs entries (c, j)
     * grouped by center, entries center_start[c] .. center_start[c+1]-1 of center c < n_centers,
     * each pair once per center that has a list */
    nnpops__nbr_choice lists;
    int64_t n_pairs;
    const int32_t *pairs;       /* [n_pairs][2] pairs within model->cutoff */
    const double *pair_vec;     /* [n_pairs][3] r = x_j - x_i + shift */
    const double *pair_dist;    /* [n_pairs] |r| */
    int64_t n_centers;          /* full lists: n_local, or n_atoms with ghost centers; else 0 */
    const int64_t *center_start; /* full lists: [n_centers + 1]; else NULL */
    int32_t member;             /* -1 = ensemble mean, else that member only */
    int need_grad;              /* forces or virials wanted */
    /* outputs, zeroed by the caller; the potential writes them */
    double *atom_energy;        /* [n_atoms] energy per atom, self energies included; 0 for ghosts */
    double *pair_grad;          /* [n_pairs][3] dE/dr_p of the local atoms' energy, per pair or
                                 * entry (only when need_grad) */
    double *member_atom_energy; /* [n_atoms][ensemble_size] or NULL: each member's energy of each
                                 * local atom, self energy included (so it sums like atom_energy) */
    int64_t descriptor_length;  /* written by the potential: per-atom descriptor entries */
} nnpops__step;

typedef struct nnpops__potential_vt {
    const char *type;
    /* Parses the type-specific part of the YAML and the weights; sets model->impl, cutoff,
     * ensemble_size, and where they differ from the defaults interaction_range (default: the
     * cutoff) and uses_charge (default 0) (species, units, device and precision are already
     * set). */
    nnpops_status (*load)(nnpops_model *model, const nnpops__cfg *cfg, nnpops__node root,
                          const nnpops__weights *weights);
    void (*destroy)(nnpops_model *model);
    /* Optional: the neighbor lists of the model's steps (NULL: a half list without the pairs of
     * two ghosts, what ANI and LJ use on the CPU).  The GPU step always hands compute_cuda full
     * (center) lists (nnpops__dstep): of the local atoms, or with ghost_centers = 1 of every
     * atom, ghosts too. */
    void (*neighbor_lists)(const nnpops_model *model, nnpops__nbr_choice *lists);
    /* Optional (NULL: 0): the energy (model unit) the potential adds once per system whatever
     * its atoms, which a step shares over the system's atoms; member -1: the ensemble's (the
     * members' mean), else that member's (0 <= member < ensemble_size, checked by the core). */
    double (*system_energy)(const nnpops_model *model, int32_t member);
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
    /* Device work space (bytes) that compute_cuda needs for this step's sizes (after
     * cuda_prepare: its pot_sizes and pot_state). */
    size_t (*cuda_work_bytes)(const nnpops_model *model, const struct nnpops__dstep *step);
    /* One step on the device: enqueues kernels on step->stream; never allocates or syncs. */
    nnpops_status (*compute_cuda)(const nnpops_model *model, const struct nnpops__dstep *step);
    /* Optional: before the step is sized and enqueued (never while a stream captures), with the
     * atoms' species on the host (step->species_host): the potential's per-context device state
     * and its host sizes for this step.  *state is the context's slot (NULL at first, kept between
     * steps); sets step->pot_state and step->pot_sizes (what cuda_work_bytes and compute_cuda then
     * read; the core's graph key holds both) and step->descriptor_length.  Here, not in
     * compute_cuda, the potential creates what it needs beyond the step's stream and cuBLAS handle
     * (streams of its own, their handles and events, copies of weights): nothing may be created
     * while a stream captures.  State a step used stays valid until cuda_release_state (a
     * caller's captured graph may refer to it). */
    nnpops_status (*cuda_prepare)(const nnpops_model *model, struct nnpops__dstep *step,
                                  void **state);
    /* Frees that state (never fails; the context's device is current, its work has finished). */
    void (*cuda_release_state)(void *state);
    /* Optional: the potential's own capacity, which the core keeps per context (and per device
     * entry plan) and hands to each step as step->pot_capacity.  need = 0: the first capacity;
     * need > 0: a step set NNPOPS__ST_POT_CAPACITY with status->pot_need = need (the step's
     * results are discarded); returns the grown capacity (>= need), and the core recomputes the
     * step with it (the host entry) or re-plans (the device entry). */
    int32_t (*cuda_capacity)(const nnpops_model *model, int32_t need);
} nnpops__potential_vt;

#ifdef NNPOPS_HAVE_CUDA
/* One step on the device as a potential sees it: every pointer is a device pointer unless marked
 * (host).  Lengths angstrom, energies model unit. */
typedef struct nnpops__dstep {
    int64_t n_atoms, n_local, n_systems;
    const double *positions;      /* [n_atoms][3] */
    const int32_t *species;       /* [n_atoms] */
    const int32_t *species_host;  /* (host) [n_atoms], during vt->cuda_prepare only, else NULL */
    const int32_t *batch;         /* [n_atoms] */
    const double *charges;        /* [n_systems] total charges (0 = neutral) for a model with
                                   * uses_charge, else NULL */
    /* full (center) lists (see nnpops__center_out): the entries of center c < n_centers are
     * start[c] .. start[c+1]-1, each (c, j) with vec = x_j - x_c + shift.  n_centers = n_local,
     * or n_atoms when the potential chose ghost_centers (vt->neighbor_lists: every atom is a
     * center, and the pairs of two ghosts are kept) */
    nnpops__nbr_choice lists;
    int64_t n_centers;
    int64_t capacity;
    const int64_t *start;         /* [n_centers + 1] */
    const int32_t *pairs;         /* [capacity][2] */
    const double *vec;            /* [capacity][3] */
    int32_t pot_capacity;         /* the potential's own capacity (vt->cuda_capacity; ANI: the
                                   * angular entries per center the AEV kernels hold), 0 without */
    nnpops__dev_status *status;
    int32_t member;               /* -1 = ensemble mean */
    int need_grad;
    int deterministic;            /* 1: bitwise reproducible kernels (no order-dependent float
                                   * atomics; option deterministic) */
    int tensor_cores;             /* float32 products on the tensor cores (option tensor_cores:
                                   * 0 off, 1 on, 2 auto) */
    /* outputs (zeroed by the caller): atom_energy [n_atoms] (self energies included),
     * member_atom_energy [n_atoms][ensemble] or NULL, pair_grad [capacity][3] = dE/dvec[e]
     * (written, not accumulated, for every entry) when need_grad */
    double *atom_energy, *member_atom_energy, *pair_grad;
    /* set by vt->cuda_prepare (host): the potential's own state and sizes of this step (a graph
     * the core captured is valid for the same state and sizes only; unused sizes stay 0) */
    void *pot_state;
    int64_t pot_sizes[NNPOPS__POT_SIZES];
    int64_t descriptor_length;    /* set by vt->cuda_prepare: per-atom descriptor entries */
    void *work;                   /* vt->cuda_work_bytes(...) bytes, 256-byte aligned */
    size_t work_bytes;
    void *stream;                 /* cudaStream_t */
    void *blas;                   /* cublasHandle_t bound to the device and `stream` */
} nnpops__dstep;
#endif /* NNPOPS_HAVE_CUDA */

#endif /* NNPOPS_POTENTIAL_API_H */
