/*
 * internal.h - declarations shared by the files of the core (never installed; potentials include
 * core/src/potential_api.h instead, kernels kernels/base.h).
 *
 * Internal cross-file names use the prefix nnpops__.  Data flow of one nnpops_compute call:
 *
 *   context.c   validate inputs, convert to angstrom, map atomic numbers to species,
 *               group atoms by system
 *   neighbors   the pair list the potential asks for (vt->neighbor_lists: half or full, see
 *               potential_api.h) within the model cutoff (kernels/cpu/neighbors.c,
 *               center_neighbors.c)
 *   potential   vtable->compute_cpu: per-atom energies (model energy unit, float64, self energies
 *               included) and the gradient of the total energy w.r.t. every pair vector
 *               (potentials/<name>, found in the table of core/src/potentials.c)
 *   reduce      energies per system, forces, virials, per-atom virials from the pair gradients
 *               (kernels/cpu/reduce.c), then conversion to the caller's units
 */
#ifndef NNPOPS_INTERNAL_H
#define NNPOPS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "nnpops/nnpops.h"
#include "core/src/potential_api.h"
#include "kernels/cpu/kernels.h"

/* ---- model configuration and weights files: opening and freeing (the readers are in
 * potential_api.h) ---- */
nnpops_status nnpops__cfg_load(const char *path, nnpops__cfg **cfg);
/* Parses YAML/JSON text held in memory; `name` is used in messages. */
nnpops_status nnpops__cfg_parse(const char *name, const unsigned char *text, size_t len,
                                nnpops__cfg **cfg);
void nnpops__cfg_free(nnpops__cfg *cfg);
/* Reads the whole file, checks sha256 (lowercase hex, NULL = unchecked) and the header. */
nnpops_status nnpops__weights_load(const char *path, const char *sha256_hex,
                                   nnpops__weights **w);
void nnpops__weights_free(nnpops__weights *w);

/* sha256 (core/src/sha256.c): out = 64 lowercase hex chars + NUL. */
void nnpops__sha256_hex(const void *data, size_t len, char out[65]);

/* ---- the table of potentials (core/src/potentials.c) ---- */
/* The vtable of model type `type`, or NULL when no potential has that type. */
const nnpops__potential_vt *nnpops__potential_find(const char *type);
/* The number of potentials and the k-th one (k < count), in the table's order. */
int nnpops__potential_count(void);
const nnpops__potential_vt *nnpops__potential_at(int k);
/* The neighbor lists of a model's CPU steps (its vt->neighbor_lists, or the default half list). */
nnpops__nbr_choice nnpops__potential_lists(const nnpops_model *model);

/* The context's GPU state (core/src/cuda_step.c; a NULL pointer in CPU-only builds). */
typedef struct nnpops__cuda_ctx nnpops__cuda_ctx;

/* Test hook (tests link the static nnpops_internal; never exported): the next CUDA graph capture of
 * the context's own graphs (option cuda_graphs) does something CUDA forbids while capturing (it
 * synchronizes the capturing stream), so the capture fails with CUDA's own error and the step falls
 * back to eager execution.  A no-op in CPU-only builds and for NULL. */
void nnpops__cuda_test_break_next_capture(nnpops_context *context);

#ifdef NNPOPS_HAVE_CUDA
/* core/src/cuda_step.c: the context's GPU state and the GPU step. */
typedef struct nnpops__cuda_args {
    /* prepared host arrays (context.c, angstrom) */
    int64_t n_atoms, n_local, n_systems;
    const double *positions;
    const int32_t *species, *batch, *order;
    const int64_t *sys_start;
    const double *cells;
    const uint8_t *pbc;
    const double *charges;        /* [n_systems] total charges, or NULL (neutral; a model with
                                   * uses_charge only) */
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
#endif /* NNPOPS_HAVE_CUDA */

#endif /* NNPOPS_INTERNAL_H */
