/*
 * lj.h - the Lennard-Jones potential's files among themselves: its parameter table (lj.c) and
 * its GPU hooks (lj_cuda.c), listed in nnpops__lj_vt.
 */
#ifndef NNPOPS_POTENTIALS_LJ_H
#define NNPOPS_POTENTIALS_LJ_H

#include <stddef.h>

#include "core/src/potential_api.h"
#include "potentials/lj/lj_ops.h"

/* The model's parameter table (host; model->impl of a `type: lj` model). */
const nnpops__lj_table *nnpops__lj_table_of(const nnpops_model *model);

#ifdef NNPOPS_HAVE_CUDA
nnpops_status nnpops__lj_upload(nnpops_model *model);
void nnpops__lj_release_device(nnpops_model *model);
size_t nnpops__lj_cuda_work_bytes(const nnpops_model *model, const nnpops__dstep *step);
nnpops_status nnpops__lj_compute_cuda(const nnpops_model *model, const nnpops__dstep *step);
#endif

#endif /* NNPOPS_POTENTIALS_LJ_H */
