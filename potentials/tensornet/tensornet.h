/*
 * tensornet.h - the TensorNet potential's files among themselves: the loaded model (tensornet.c)
 * as its GPU hooks (tensornet_cuda.c) read it, and those hooks, listed in nnpops__tensornet_vt.
 */
#ifndef NNPOPS_POTENTIALS_TENSORNET_H
#define NNPOPS_POTENTIALS_TENSORNET_H

#include <stddef.h>

#include "core/src/potential_api.h"
#include "potentials/tensornet/cpu/tensornet_cpu.h"

/* The parts of a loaded `type: tensornet` model (host, owned by model->impl): its shape, its
 * weights in float64 and (float32 models) float32, the `mean` and the ZBL prior (NULL without);
 * of an ensemble, member 0's (n_members says how many there are). */
typedef struct nnpops__tn_parts {
    const nnpops__tn_shape *shape;
    const nnpops__tn_weights_f64 *w64;
    const nnpops__tn_weights_f32 *w32; /* NULL for a float64 model */
    double mean;
    const nnpops__tn_zbl *zbl;
    int32_t n_members;
} nnpops__tn_parts;
void nnpops__tn_parts_of(const nnpops_model *model, nnpops__tn_parts *parts);

#ifdef NNPOPS_HAVE_CUDA
nnpops_status nnpops__tn_upload(nnpops_model *model);
void nnpops__tn_release_device(nnpops_model *model);
size_t nnpops__tn_cuda_work_bytes(const nnpops_model *model, const nnpops__dstep *step);
nnpops_status nnpops__tn_compute_cuda(const nnpops_model *model, const nnpops__dstep *step);
nnpops_status nnpops__tn_cuda_prepare(const nnpops_model *model, nnpops__dstep *step,
                                      void **state);
void nnpops__tn_cuda_release_state(void *state);
#endif

#endif /* NNPOPS_POTENTIALS_TENSORNET_H */
