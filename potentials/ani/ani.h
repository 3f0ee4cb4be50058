/*
 * ani.h - the parsed ANI model (model->impl of a `type: ani` model), shared by the CPU path
 * (ani.c) and the CUDA path.
 *
 * Weight arena: ONE allocation of `arena_elems` values of the model's compute precision (float
 * for NNPOPS_FLOAT32, the float32 file values widened to double for NNPOPS_FLOAT64), 64-byte
 * aligned; every block below starts at a multiple of 16 values (64 bytes in float32).  For species
 * s and layer l (0 .. n_layers[s]-1, widths n_l = width[s][l] -> n_{l+1} = width[s][l+1]):
 *     weights at arena + w_off[s][l]: [ensemble][n_{l+1}][n_l]   (each member's W_l row-major)
 *     biases  at arena + b_off[s][l]: [ensemble][n_{l+1}]
 * so the first layers of all members form one [ensemble * n_1][n_0] matrix (a fused GEMM over the
 * ensemble), and member m's block of layer l starts m * n_{l+1} * n_l values in.
 */
#ifndef NNPOPS_POTENTIALS_ANI_H
#define NNPOPS_POTENTIALS_ANI_H

#include <stddef.h>
#include <stdint.h>

#include "core/src/potential_api.h"
#include "potentials/ani/ani_ops.h"

#define NNPOPS__ANI_MAX_LAYERS 16    /* dense layers per network, output layer included */
#define NNPOPS__ANI_MAX_WIDTH 65536  /* largest layer width accepted */
#define NNPOPS__ANI_MAX_ENSEMBLE 1024
#define NNPOPS__ANI_CUDA_CHUNK 32768 /* GPU: columns (atoms of a species) per network chunk */

typedef struct nnpops__ani {
    nnpops__aev_desc aev;          /* descriptor constants, in angstrom */
    int32_t n_species;
    int32_t ensemble;              /* members M */
    double alpha;                  /* CELU alpha */
    double self_energy[NNPOPS__MAX_SPECIES];             /* model energy unit */
    int32_t n_layers[NNPOPS__MAX_SPECIES];               /* dense layers, output included */
    int32_t width[NNPOPS__MAX_SPECIES][NNPOPS__ANI_MAX_LAYERS + 1]; /* width[s][0] = aev_len */
    size_t w_off[NNPOPS__MAX_SPECIES][NNPOPS__ANI_MAX_LAYERS];      /* in values */
    size_t b_off[NNPOPS__MAX_SPECIES][NNPOPS__ANI_MAX_LAYERS];
    int32_t max_width;             /* largest hidden width over all species (layers 1..) */
    int32_t max_width1;            /* largest first hidden width n_1 */
    int32_t max_hidden_sum;        /* largest sum of the widths n_2 .. n_{L-1} of one network */
    nnpops_precision precision;
    size_t elem_size;              /* sizeof(float) or sizeof(double) */
    size_t arena_elems;
    void *arena;                   /* host arena */
} nnpops__ani;

/* Species s's first layer, all members, at the restricted AEV entries map[0 .. Lr) (see
 * nnpops__aev_desc_restrict), in the model's precision: into dst as [M out][Lr] (the arena's
 * layout), or transposed, [Lr][M out]. */
void nnpops__ani_restricted_first_layer(const nnpops__ani *a, int s, const int32_t *map,
                                        int64_t Lr, int transposed, void *dst);

#ifdef NNPOPS_HAVE_CUDA
/* The GPU hooks of nnpops__ani_vt (potentials/ani/ani_cuda.c). */
nnpops_status nnpops__ani_upload(nnpops_model *model);
void nnpops__ani_release_device(nnpops_model *model);
size_t nnpops__ani_cuda_work_bytes(const nnpops_model *model, const nnpops__dstep *step);
/* How many side streams of its own the step (after cuda_prepare: its pot_sizes) runs branches on
 * (0 .. 3; potentials/ani/ani_cuda.c). */
int nnpops__ani_cuda_side_streams(const nnpops_model *model, const nnpops__dstep *step);
nnpops_status nnpops__ani_compute_cuda(const nnpops_model *model, const nnpops__dstep *step);
nnpops_status nnpops__ani_cuda_prepare(const nnpops_model *model, nnpops__dstep *step,
                                       void **state);
void nnpops__ani_cuda_release_state(void *state);
/* vt->cuda_capacity: the angular entries per center the AEV kernels hold (64 at first; a need
 * rounded up to a multiple of 32; the AEV launchers refuse more than their shared memory holds). */
int32_t nnpops__ani_cuda_capacity(const nnpops_model *model, int32_t need);
#endif

#endif /* NNPOPS_POTENTIALS_ANI_H */
