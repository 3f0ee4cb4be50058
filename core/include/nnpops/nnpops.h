/*
 * nnpops.h - the public C interface of nnpops.
 *
 * nnpops evaluates machine-learned interatomic potentials (ANI-2x, ANI-1x, and a Lennard-Jones
 * reference potential) on the CPU and on NVIDIA GPUs.  This is the only public header.
 *
 * Conventions
 *  - Every fallible call returns an nnpops_status; NNPOPS_OK is 0.  On failure a human-readable
 *    detail (file, YAML line, tensor name, atom index, element, ...) is available from
 *    nnpops_last_error() in the calling thread until the next failing call in that thread.
 *  - Objects are created through an out-parameter; *_destroy(p) returns nothing and accepts NULL.
 *  - Host arrays are float64 in and out whatever the compute precision; arrays are C-contiguous.
 *    The experimental nnpops_compute_device takes device arrays instead (see there).
 *  - A model is immutable after loading and may be shared by threads.  A context (one simulation's
 *    workspace) is used by one thread at a time.
 *  - The library never prints, never exits and never aborts.
 *
 * Units: positions, cells and outputs are in the context's units (option length_unit /
 * energy_unit; default angstrom and eV).  Virial (per system, row-major 3x3):
 *     W = - sum_pairs r_ij (x) dE/dr_ij,   r_ij = x_j - x_i (+ image shift),
 * in energy units, so that P = (N k T + tr(W)/3) / V (LAMMPS's sign) and the stress is -W / V
 * (ASE's sign).  A per-atom virial gives each atom of a pair half of the pair's term.
 *
 * Growing structs.  Every struct that crosses the interface starts with struct_size, which the
 * caller sets to sizeof the struct of the header it was built with.  A call accepts any size from
 * the struct's size in 0.1.0 up: it reads the fields that size covers and treats the others as
 * absent (NULL, 0), so a caller built against an older header keeps working; fields added after
 * 0.1.0 say since which version.
 *
 * This header includes only <stddef.h>, <stdint.h> and its version macros (nnpops/version.h,
 * installed beside it); everything between the "cdef" markers is plain C declarations that cffi
 * can parse after preprocessing lines are removed.
 */
#ifndef NNPOPS_NNPOPS_H
#define NNPOPS_NNPOPS_H

#include <stddef.h>
#include <stdint.h>

/* NNPOPS_VERSION_MAJOR, _MINOR, _PATCH and NNPOPS_VERSION_NUMBER (major * 10000 + minor * 100 +
 * patch), written by the build from the project's one version (CMakeLists.txt). */
#include "nnpops/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* cdef-begin */

/* Status codes; the values are part of the ABI and never change. */
typedef enum nnpops_status {
    NNPOPS_OK = 0,
    NNPOPS_ERROR_INVALID_ARGUMENT = 1,   /* NULL pointer, negative count, bad option value, ... */
    NNPOPS_ERROR_OUT_OF_MEMORY = 2,
    NNPOPS_ERROR_IO = 3,                 /* a file cannot be opened or read */
    NNPOPS_ERROR_MODEL_NOT_FOUND = 4,    /* a model name that is on no search path */
    NNPOPS_ERROR_MODEL_FORMAT = 5,       /* malformed YAML, safetensors, shapes, dtypes, names */
    NNPOPS_ERROR_CHECKSUM = 6,           /* weights file sha256 differs from the model file */
    NNPOPS_ERROR_UNKNOWN_ELEMENT = 7,    /* an atomic number the model does not describe */
    NNPOPS_ERROR_BAD_POSITION = 8,       /* NaN or infinite coordinate */
    NNPOPS_ERROR_ATOMS_TOO_CLOSE = 9,    /* two atoms closer than option min_distance */
    NNPOPS_ERROR_BAD_CELL = 10,          /* singular or non-finite cell along a periodic axis */
    NNPOPS_ERROR_TOO_MANY_IMAGES = 11,   /* cell so small that the image count exceeds max_images */
    NNPOPS_ERROR_NEIGHBOR_OVERFLOW = 12, /* more pairs than the capacity allowed */
    NNPOPS_ERROR_DEVICE_NOT_BUILT = 13,  /* device "cuda" asked of a library built without CUDA */
    NNPOPS_ERROR_NO_DEVICE = 14,         /* CUDA built in, but no usable GPU (or driver) present */
    NNPOPS_ERROR_CUDA = 15,              /* a CUDA runtime or cuBLAS call failed */
    NNPOPS_ERROR_UNSUPPORTED = 16,       /* a valid request this build or model cannot serve */
    NNPOPS_ERROR_CAPTURE = 17,           /* CUDA graph capture failed (the context stays usable) */
    NNPOPS_ERROR_INTERNAL = 18
} nnpops_status;

typedef enum nnpops_precision {
    NNPOPS_FLOAT32 = 0,
    NNPOPS_FLOAT64 = 1
} nnpops_precision;

/* Context options.  Each has a name (the pair_style keyword and Python keyword argument) and a
 * numeric value; names and enumerated values are listed with nnpops_option_* below. */
typedef enum nnpops_option {
    NNPOPS_OPTION_LENGTH_UNIT = 0,        /* 0 angstrom (default), 1 nm, 2 bohr */
    NNPOPS_OPTION_ENERGY_UNIT = 1,        /* 0 eV (default), 1 kcal/mol, 2 kJ/mol, 3 hartree */
    NNPOPS_OPTION_MIN_DISTANCE = 2,       /* angstrom; closer atoms are an error (default 0.1) */
    NNPOPS_OPTION_MAX_NEIGHBORS = 3,      /* cap on pairs per atom, 0 = unlimited (default 0) */
    NNPOPS_OPTION_MAX_IMAGES = 4,         /* cap on periodic images per axis (default 64) */
    NNPOPS_OPTION_ENSEMBLE_MEMBER = 5,    /* -1 = ensemble mean (default), k = member k only */
    NNPOPS_OPTION_CUDA_GRAPHS = 6,        /* 0 off (default), 1 on */
    NNPOPS_OPTION_GRAPH_WARMUP_STEPS = 7, /* eager steps before capture (default 2) */
    NNPOPS_OPTION_DETERMINISTIC = 8,      /* 0 off (default), 1 on: bitwise reproducible */
    NNPOPS_OPTION_TENSOR_CORES = 9,       /* float32 on the GPU: the network GEMMs as 3xTF32
                                           * splits on the tensor cores (float32 accuracy).
                                           * 2 auto (default), 1 on: every species with more
                                           * than 96 atoms in a step (fewer take the small-n
                                           * kernels); 0 off: plain FP32 FMA.  Ignored elsewhere. */
    NNPOPS_OPTION_THREADS = 10,           /* CPU models: threads of a step's per-atom work, 1
                                           * (default) to 1024, 0 = the online processors.  The
                                           * results are the same bits for every count.  Ignored
                                           * on the GPU. */
    NNPOPS_OPTION_COUNT_ = 11
} nnpops_option;

typedef struct nnpops_model nnpops_model;
typedef struct nnpops_context nnpops_context;

/* Inputs of one compute call: borrowed arrays, all host memory, float64.
 * Atoms 0 .. n_local-1 are local; the rest are ghosts that receive forces but whose energy does
 * not count (LAMMPS domain decomposition).  Atoms of a batch are grouped by system: batch[i] is the
 * system of atom i (0 .. n_systems-1); NULL means every atom belongs to system 0. */
typedef struct nnpops_inputs {
    size_t struct_size;            /* sizeof(nnpops_inputs) (the 0.1.0 size, up to pbc, accepted) */
    int64_t n_atoms;
    int64_t n_local;               /* < 0 means n_atoms */
    int64_t n_systems;             /* >= 1; with batch == NULL it must be 1 */
    const int32_t *atomic_numbers; /* [n_atoms] */
    const double *positions;       /* [n_atoms][3] */
    const int32_t *batch;          /* [n_atoms] or NULL */
    const double *cells;           /* [n_systems][3][3], rows are lattice vectors a, b, c; or NULL */
    const uint8_t *pbc;            /* [n_systems][3] periodic flags; NULL = not periodic */
    /* since 0.2.0: */
    const double *charges;         /* [n_systems] total charge of each system in elementary
                                    * charges, or NULL = neutral.  A model that does not use a
                                    * charge (nnpops_model_uses_charge, ANI and LJ) refuses a
                                    * nonzero one with NNPOPS_ERROR_UNSUPPORTED. */
} nnpops_inputs;

/* Outputs: caller-allocated host arrays; NULL = not wanted. */
typedef struct nnpops_outputs {
    size_t struct_size;            /* sizeof(nnpops_outputs) (0.1.0 size and up accepted) */
    double *energies;              /* [n_systems] */
    double *forces;                /* [n_atoms][3] */
    double *virials;               /* [n_systems][9] row-major */
    double *atomic_energies;       /* [n_atoms] (ghost atoms get 0) */
    double *atomic_virials;        /* [n_atoms][9] */
    double *member_energies;       /* [n_systems][ensemble_size]: each member's energy (ANI,
                                    * TensorNet ensembles); their mean is the energy */
} nnpops_outputs;

/* Counters that show which path a context took. */
typedef struct nnpops_stats {
    size_t struct_size;            /* sizeof(nnpops_stats) (0.1.0 size, up to n_pairs, and up) */
    int64_t steps;                 /* compute calls that succeeded */
    int64_t neighbor_rebuilds;     /* neighbor buffer growths */
    int64_t graph_captures;
    int64_t graph_replays;
    int64_t eager_fallbacks;       /* steps run eagerly because a capture failed */
    int64_t pair_capacity;         /* current neighbor pair capacity */
    int64_t n_pairs;               /* pairs found by the last step */
    /* since 0.2.0 (a caller built against the older header passes the smaller struct_size and
     * receives the fields above only): */
    int64_t device_plans;          /* plans made by nnpops_compute_device: each one invalidates the
                                    * CUDA graphs a caller captured before it */
    int64_t device_captures;       /* nnpops_compute_device calls made while the caller's stream
                                    * was capturing a CUDA graph */
    int64_t descriptor_length;     /* per-atom descriptor entries of the last step (GPU: of the
                                    * last planned one); ANI: the AEV entries of the species
                                    * present among its atoms, ghosts included (the full AEV has
                                    * them for every species) */
    int64_t cpu_threads;           /* threads the last CPU step's per-atom work ran on (option
                                    * threads; fewer when the step had less work to share, or
                                    * where the system would not start more) */
} nnpops_stats;

/* EXPERIMENTAL (may change in a minor version): the device-pointer entry nnpops_compute_device.
 * Inputs: the arrays marked DEVICE are CUDA device memory (cudaMalloc, managed, or mapped pinned)
 * of the model's GPU; pbc is HOST memory (it is part of the plan's shape, see below). */
typedef struct nnpops_device_inputs {
    size_t struct_size;            /* sizeof(nnpops_device_inputs) (0.1.0 size and up) */
    int64_t n_atoms;
    int64_t n_local;               /* < 0 means n_atoms */
    int64_t n_systems;             /* >= 1, or 0 = not given: max(batch) + 1, computed by the call
                                    * that makes the plan and kept until the next plan */
    const int32_t *atomic_numbers; /* DEVICE [n_atoms] */
    const double *positions;       /* DEVICE [n_atoms][3], context length unit */
    const int32_t *batch;          /* DEVICE [n_atoms] or NULL (every atom in system 0) */
    const double *cells;           /* DEVICE [n_systems][3][3] rows a, b, c, or NULL */
    const uint8_t *pbc;            /* HOST [n_systems][3] periodic flags, or NULL */
    /* since 0.2.0: */
    const double *charges;         /* DEVICE [n_systems] total charges, or NULL = neutral; part of
                                    * the plan like the atomic numbers: read when a plan is made,
                                    * and a model that does not use a charge refuses a nonzero
                                    * one there (NNPOPS_ERROR_UNSUPPORTED) */
} nnpops_device_inputs;

/* Outputs of nnpops_compute_device: DEVICE arrays in the context's units; NULL = not wanted. */
typedef struct nnpops_device_outputs {
    size_t struct_size;            /* sizeof(nnpops_device_outputs) (0.1.0 size and up) */
    double *energies;              /* DEVICE [n_systems] */
    double *forces;                /* DEVICE [n_atoms][3] */
    double *virials;               /* DEVICE [n_systems][9] row-major */
} nnpops_device_outputs;

/* ---- library ---- */
const char *nnpops_status_name(nnpops_status status);
const char *nnpops_last_error(void);
int32_t nnpops_version_number(void);
const char *nnpops_version_string(void);
/* 1 if the library was built with CUDA, else 0. */
int32_t nnpops_cuda_built(void);
/* Number of usable CUDA devices (0 when not built or no driver/GPU). */
int32_t nnpops_cuda_device_count(void);

/* ---- models ----
 * name_or_path: a path to a model YAML file, or a model name (such as "ani2x") searched as
 * NAME.yaml in the directories of NNPOPS_MODEL_PATH (colon separated), then in
 * ${XDG_CACHE_HOME:-~/.cache}/nnpops/models.  device: "cpu", "cuda" or "cuda:N" (NULL = "cpu"). */
nnpops_status nnpops_model_load(const char *name_or_path, const char *device,
                                nnpops_precision precision, nnpops_model **model);
void nnpops_model_destroy(nnpops_model *model);
const char *nnpops_model_name(const nnpops_model *model);
const char *nnpops_model_type(const nnpops_model *model);   /* "ani", "lj", "tensornet" */
const char *nnpops_model_path(const nnpops_model *model);   /* resolved YAML path */
const char *nnpops_model_device(const nnpops_model *model); /* "cpu" or "cuda:N" */
nnpops_precision nnpops_model_precision(const nnpops_model *model);
int32_t nnpops_model_num_species(const nnpops_model *model);
/* Atomic number of species index i, or -1 when i is out of range. */
int32_t nnpops_model_species(const nnpops_model *model, int32_t i);
int32_t nnpops_model_ensemble_size(const nnpops_model *model); /* 1 for lj */
/* Interaction cutoff in angstrom (ANI: the radial cutoff): the longest pair distance the model's
 * neighbor lists hold. */
double nnpops_model_cutoff(const nnpops_model *model);
/* Since 0.2.0.  The interaction range in angstrom: the distance beyond which an atom cannot change
 * another atom's energy (ANI, LJ: the cutoff; a message-passing model: (layers + 1) x cutoff).
 * A domain decomposition needs ghost atoms this far out (the LAMMPS plugin's ghost shell). */
double nnpops_model_interaction_range(const nnpops_model *model);
/* Since 0.2.0.  1 if the model reads the total charge of each system (nnpops_inputs.charges),
 * else 0 (ANI, LJ: a nonzero charge is then an error). */
int32_t nnpops_model_uses_charge(const nnpops_model *model);

/* ---- contexts ---- */
nnpops_status nnpops_context_create(const nnpops_model *model, nnpops_context **context);
void nnpops_context_destroy(nnpops_context *context);
nnpops_status nnpops_context_set_option(nnpops_context *context, nnpops_option option, double value);
nnpops_status nnpops_context_get_option(const nnpops_context *context, nnpops_option option,
                                        double *value);
/* By name, with a textual value: "cuda_graphs" "on", "length_unit" "nm", "min_distance" "0.05". */
nnpops_status nnpops_context_set_option_by_name(nnpops_context *context, const char *name,
                                                const char *value);
nnpops_status nnpops_option_from_name(const char *name, nnpops_option *option);
const char *nnpops_option_name(nnpops_option option);
nnpops_status nnpops_context_stats(const nnpops_context *context, nnpops_stats *stats);
/* The context's most recent warning: something that went wrong without failing a call, such as a
 * CUDA graph capture that failed (the step then ran eagerly and succeeded, stats.eager_fallbacks
 * counts it), with CUDA's reason.  "" when there has been none; owned by the context. */
const char *nnpops_context_last_warning(const nnpops_context *context);

/* Energy and whichever of forces, virials, per-atom terms the outputs ask for. */
nnpops_status nnpops_compute(nnpops_context *context, const nnpops_inputs *inputs,
                             nnpops_outputs *outputs);

/* ---- device pointers (EXPERIMENTAL: the interface may change in a minor version) ----
 * nnpops_compute_device computes energies, forces and virials from DEVICE arrays, with the whole
 * step enqueued on the caller's stream (cuda_stream: a cudaStream_t; NULL = the legacy default
 * stream) of the model's GPU.  A model on "cpu" gives NNPOPS_ERROR_UNSUPPORTED, a library built
 * without CUDA NNPOPS_ERROR_DEVICE_NOT_BUILT.
 *
 * Plans.  The context keeps one PLAN: the shape (n_atoms, n_local, n_systems as given, which outputs
 * are asked, whether cells are given, pbc, and the options) with the atomic numbers and batch
 * indices of the call that made it.  A call on a stream that is NOT capturing a CUDA graph makes a
 * plan when there is none, when the shape differs, or when nnpops_context_device_status asked for a
 * new one; that call synchronizes the stream: it copies the inputs to the host and validates them
 * with nnpops_compute's checks and errors (unknown element naming the atom, non-finite position,
 * atoms too close, bad cell, ...), computes n_systems = max(batch) + 1 when it is 0, allocates,
 * and runs the step to completion (growing the neighbor capacity and recomputing on overflow).
 * stats.device_plans counts plans.
 *
 * Steady state.  A call with the plan's shape only ENQUEUES work on cuda_stream: no
 * synchronization, no allocation, no host read of device data; on return the outputs are not
 * ready (order later work on the same stream, or synchronize it).  The device checks every step:
 * each coordinate finite, atomic numbers and batch indices equal to the plan's (a batch index
 * outside 0 .. n_systems-1 of the plan has its own report), cells, too-close atoms, neighbor
 * capacity, max_neighbors.  A step with any problem writes NaN into every element of every output
 * (never a silently wrong or truncated number) and records the problem for
 * nnpops_context_device_status.
 *
 * Caller's CUDA graphs.  When cuda_stream is capturing (cudaStreamBeginCapture), the call enqueues
 * the plan's step into the caller's graph (the same work as in steady state, no synchronization,
 * no allocation) and counts stats.device_captures.  It needs a plan of the same shape made before
 * by a call on a stream that was not capturing; otherwise it returns NNPOPS_ERROR_CAPTURE (with
 * what to do) and enqueues nothing.  The captured graph reads the input pointers and writes the
 * output pointers of the captured call, and refers to the context's GPU work space: a later plan
 * (a shape change, or the growth after an overflow reported by nnpops_context_device_status)
 * invalidates it; stats.device_plans tells.  Replaying a stale graph after a re-plan writes only
 * retired work space (the last 8 are kept until the context is destroyed), returns NaN and is
 * reported by nnpops_context_device_status as NNPOPS_ERROR_CAPTURE.  Destroy the context only after
 * the last replay has finished.
 *
 * The option cuda_graphs concerns nnpops_compute only.  The host and the device entries may be mixed
 * on one context (separate GPU work spaces); calls of one context must not overlap in time from
 * several threads, and replays of a captured graph on another stream are ordered by the caller. */
nnpops_status nnpops_compute_device(nnpops_context *context, const nnpops_device_inputs *inputs,
                                    nnpops_device_outputs *outputs, void *cuda_stream);
/* EXPERIMENTAL.  Synchronizes cuda_stream (the stream the device calls or the replays of a captured
 * graph ran on; it must not be capturing) and the context's last non-capturing device call, then
 * reports the problems flagged by device steps since the previous check (and forgets them):
 * NNPOPS_OK when there was none; otherwise the most important one (docs/device-api.md gives the
 * order) as the error nnpops_compute would give (BAD_POSITION,
 * UNKNOWN_ELEMENT, ATOMS_TOO_CLOSE, BAD_CELL, TOO_MANY_IMAGES, INVALID_ARGUMENT for a batch index
 * or an atomic number that differs from the plan's, NEIGHBOR_OVERFLOW for max_neighbors), with how
 * many steps were flagged.  A neighbor capacity overflow gives NNPOPS_ERROR_NEIGHBOR_OVERFLOW: the
 * capacity has then been grown and the next call on a stream that is not capturing makes a new
 * plan; re-capture graphs after it.  Changed atomic numbers or batch indices also make the next
 * such call re-plan; the other problems leave the plan (and captured graphs) valid. */
nnpops_status nnpops_context_device_status(nnpops_context *context, void *cuda_stream);

/* ---- neighbor pairs (standalone) ----
 * All pairs of distinct atoms (and atom/image pairs) closer than cutoff, as a HALF list: each
 * interacting pair appears once, as (i, j, s) with r_ij = x_j - x_i + s . cell (s an integer
 * shift vector of the lattice; shift 0 pairs have i < j).  An atom interacts with its own periodic
 * images when the cutoff exceeds the cell width; such pairs appear once, as (i, i, s).
 * cell: 3x3 row-major (rows a, b, c) or NULL; pbc: 3 flags or NULL (not periodic).  Positions may
 * lie outside the cell.  pairs [capacity][2], shifts [capacity][3] and distances [capacity] may be
 * NULL only when capacity is 0.  Order of pairs is unspecified.  *n_pairs receives the number of
 * pairs found; if it exceeds capacity, the first `capacity` are written and the call returns
 * NNPOPS_ERROR_NEIGHBOR_OVERFLOW so the caller can grow its arrays to *n_pairs and call again.
 * Lengths are in the caller's units (the same for positions, cell and cutoff). */
nnpops_status nnpops_neighbor_pairs(int64_t n_atoms, const double *positions, const double *cell,
                                    const uint8_t *pbc, double cutoff, int64_t capacity,
                                    int64_t *n_pairs, int64_t *pairs, int32_t *shifts,
                                    double *distances);

/* cdef-end */

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* NNPOPS_NNPOPS_H */
