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

struct nnpops__potential_vt;

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
} nnpops__step;

/* Scratch buffers of a context that potentials may use (slot numbers are potential-private). */
#define NNPOPS__SCRATCH_SLOTS 16
typedef struct nnpops__scratch {
    nnpops__buf slot[NNPOPS__SCRATCH_SLOTS];
} nnpops__scratch;

typedef struct nnpops__potential_vt {
    const char *type;
    /* Parses the type-specific part of the YAML and the weights; sets model->impl, cutoff,
     * ensemble_size (species, units, device and precision are already set). */
    nnpops_status (*load)(nnpops_model *model, const nnpops__cfg *cfg, nnpops__node root,
                          const nnpops__weights *weights);
    void (*destroy)(nnpops_model *model);
    /* One step on the CPU.  Must not keep pointers into `step` after returning. */
    nnpops_status (*compute_cpu)(const nnpops_model *model, nnpops__scratch *scratch,
                                 const nnpops__step *step);
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

#endif /* NNPOPS_INTERNAL_H */
