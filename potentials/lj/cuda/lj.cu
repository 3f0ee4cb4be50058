/*
 * lj.cu - the Lennard-Jones pair terms over center lists on the GPU: the twin of
 * nnpops__lj_centers_cpu (potentials/lj/lj_ops.h gives the definition).  One thread per center
 * walks its entries in order: each entry's gradient is written by the one thread that owns it and
 * the center's energy is summed in that thread, so no atomics and no order-dependent sums (the
 * results do not depend on option deterministic).
 */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/common.cuh"

extern "C" {
#include "potentials/lj/lj_ops.h"
}

using namespace nnpops_cuda;

namespace {

__global__ void lj_centers_kernel(const nnpops__lj_table *table, int64_t n_centers,
                                  int64_t n_local, const int64_t *start, const int32_t *pairs,
                                  const double *vec, const int32_t *species, int64_t capacity,
                                  double *atom_energy, double *pair_grad) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_centers) return;
    const int32_t S = table->n_species;
    const double share = c < n_local ? 0.5 : 0.0;
    const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    const nnpops__lj_pair *row = table->pair + (int64_t)species[c] * S;
    double energy = 0.0;
    for (int64_t e = start[c]; e < e1; e++) {
        const int32_t j = pairs[2 * e + 1];
        const double vx = vec[3 * e], vy = vec[3 * e + 1], vz = vec[3 * e + 2];
        const double r = sqrt(vx * vx + vy * vy + vz * vz);
        double dedr;
        energy += nnpops__lj_term(&row[species[j]], r, &dedr);
        if (pair_grad) {
            const double s = share * dedr / r;
            pair_grad[3 * e] = dedr != 0.0 ? s * vx : 0.0;
            pair_grad[3 * e + 1] = dedr != 0.0 ? s * vy : 0.0;
            pair_grad[3 * e + 2] = dedr != 0.0 ? s * vz : 0.0;
        }
    }
    atom_energy[c] = share * energy;
}

} // namespace

extern "C" nnpops_status nnpops__lj_centers_cuda(const nnpops__lj_table *table, int64_t n_centers,
                                                 int64_t n_local, const int64_t *start,
                                                 const int32_t *pairs, const double *vec,
                                                 const int32_t *species, int64_t capacity,
                                                 double *atom_energy, double *pair_grad,
                                                 void *stream) {
    if (n_centers <= 0) return NNPOPS_OK;
    lj_centers_kernel<<<grid_for(n_centers, 128), 128, 0, as_stream(stream)>>>(
        table, n_centers, n_local, start, pairs, vec, species, capacity, atom_energy, pair_grad);
    NNPOPS__LAUNCH_CHECK("nnpops__lj_centers_cuda");
    return NNPOPS_OK;
}
