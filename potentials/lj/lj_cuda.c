/*
 * lj_cuda.c - the GPU hooks of the Lennard-Jones potential (nnpops__lj_vt): the parameter table
 * copied to the device at load, and the step's pair terms over the center lists of the local atoms
 * (potentials/lj/lj_ops.h; kernel in potentials/lj/cuda/lj.cu), or of every atom when the step
 * has ghost centers (only local centers' entries carry energy and gradient).  No work space, no
 * per-context state: every entry's gradient is written by the op, the atom energies too.
 */
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "potentials/lj/lj.h"

nnpops_status nnpops__lj_upload(nnpops_model *model) {
    const nnpops__lj_table *host = nnpops__lj_table_of(model);
    void *table = NULL;
    cudaError_t e = cudaMalloc(&table, sizeof *host);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                           : NNPOPS_ERROR_CUDA,
                            "%s:%d: cudaMalloc of the LJ parameters on %s: %s", __FILE__,
                            __LINE__, model->device_name, cudaGetErrorString(e));
    }
    e = cudaMemcpy(table, host, sizeof *host, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(table);
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: copying the LJ parameters to %s: %s",
                            __FILE__, __LINE__, model->device_name, cudaGetErrorString(e));
    }
    model->device_data = table;
    return NNPOPS_OK;
}

void nnpops__lj_release_device(nnpops_model *model) {
    if (model->device_data) cudaFree(model->device_data);
    model->device_data = NULL;
}

size_t nnpops__lj_cuda_work_bytes(const nnpops_model *model, const nnpops__dstep *step) {
    (void)model;
    (void)step;
    return 0;
}

nnpops_status nnpops__lj_compute_cuda(const nnpops_model *model, const nnpops__dstep *step) {
    if (step->member > 0)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "ensemble_member %d is out of range (an lj model has one member, 0)",
                            (int)step->member);
    NNPOPS__TRY(nnpops__lj_centers_cuda(model->device_data, step->n_centers, step->n_local,
                                        step->start, step->pairs, step->vec, step->species,
                                        step->capacity, step->atom_energy,
                                        step->need_grad ? step->pair_grad : NULL, step->stream));
    /* one member: its energies are the atoms' (ghosts' rows stay zero, as the caller set them) */
    if (step->member_atom_energy)
        NNPOPS__CUDA_CALL(cudaMemcpyAsync(step->member_atom_energy, step->atom_energy,
                                          sizeof(double) * (size_t)step->n_local,
                                          cudaMemcpyDeviceToDevice, (cudaStream_t)step->stream));
    return NNPOPS_OK;
}
