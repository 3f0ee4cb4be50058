/*
 * reduce.cu - per-system reductions and the force scatter on the GPU: twins of kernels/cpu/reduce.c.
 *
 * Pair reduction (force scatter and virials): a thread per pair p = (i, j) with vector r_p and
 * gradient g_p = dE/dr_p (all double):
 *     forces[i] += g_p, forces[j] -= g_p                      ([n_atoms][3])
 *     virials[batch[i]] -= r_p (x) g_p                        ([n_systems][9], row-major)
 *     atomic_virials[i], [j] each -= 0.5 r_p (x) g_p          ([n_atoms][9])
 * Consecutive pairs usually share their first atom (center lists: a center's entries are
 * contiguous) and their system, so the i-side terms and the virials are first summed over runs of
 * equal keys inside a warp (warp_runs in common.cuh) and the first lane of each run issues the
 * atomicAdd; the j-side terms are one atomicAdd per pair.
 * Energy reduction: energies[s][w] += atom_energy[i][w] over the atoms i of system s, a thread per
 * atom with the same run summation over batch indices.  Sums are double; their order depends on
 * the atomics, so results match the CPU to rounding, not bitwise.
 */
#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

__global__ void pair_reduce_kernel(int64_t n_pairs, const int64_t *n_pairs_dev,
                                   const int32_t *batch, const int32_t *pairs, const double *vec,
                                   const double *grad, double *forces, double *virials,
                                   double *atomic_virials) {
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t np = n_pairs;
    if (n_pairs_dev) {
        const int64_t d = *n_pairs_dev;
        np = d < np ? d : np;
    }
    const bool valid = p < np;
    int32_t i = -1, j = -1;
    double g[3] = {0, 0, 0}, r[3] = {0, 0, 0};
    if (valid) {
        i = pairs[2 * p];
        j = pairs[2 * p + 1];
        for (int x = 0; x < 3; x++) {
            g[x] = grad[3 * p + x];
            r[x] = vec[3 * p + x];
        }
    }
    const warp_runs ri(valid ? (int64_t)i : -1 - (int64_t)(threadIdx.x & 31));
    if (forces) {
        for (int x = 0; x < 3; x++) {
            const double s = ri.sum(g[x]);
            if (valid && ri.head) atomic_add_f64(forces + 3 * (int64_t)i + x, s);
            if (valid) atomic_add_f64(forces + 3 * (int64_t)j + x, -g[x]);
        }
    }
    if (virials || atomic_virials) {
        double w[9];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) w[3 * a + b] = -r[a] * g[b];
        if (virials) {
            const int64_t key = valid ? (int64_t)batch[i] : -1 - (int64_t)(threadIdx.x & 31);
            const warp_runs rs(key);
            for (int k = 0; k < 9; k++) {
                const double s = rs.sum(w[k]);
                if (valid && rs.head) atomic_add_f64(virials + 9 * key + k, s);
            }
        }
        if (atomic_virials) {
            for (int k = 0; k < 9; k++) {
                const double s = ri.sum(0.5 * w[k]);
                if (valid && ri.head) atomic_add_f64(atomic_virials + 9 * (int64_t)i + k, s);
                if (valid) atomic_add_f64(atomic_virials + 9 * (int64_t)j + k, 0.5 * w[k]);
            }
        }
    }
}

__global__ void energy_reduce_kernel(int64_t n_atoms, const int32_t *batch, const double *e,
                                     int64_t width, double *out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = i < n_atoms;
    const int64_t key = valid ? (int64_t)batch[i] : -1 - (int64_t)(threadIdx.x & 31);
    const warp_runs rs(key);
    for (int64_t w = 0; w < width; w++) {
        const double s = rs.sum(valid ? e[i * width + w] : 0.0);
        if (valid && rs.head) atomic_add_f64(out + key * width + w, s);
    }
}

nnpops_status pair_reduce(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                          int64_t n_pairs, const int32_t *pairs, const double *pair_vec,
                          const double *pair_grad, double *forces, double *virials,
                          double *atomic_virials, const int64_t *n_pairs_dev, void *stream,
                          bool zero) {
    cudaStream_t st = as_stream(stream);
    if (zero) {
        if (forces) NNPOPS__CUDA_CALL(cudaMemsetAsync(forces, 0, sizeof(double) * 3 * (size_t)n_atoms, st));
        if (virials)
            NNPOPS__CUDA_CALL(cudaMemsetAsync(virials, 0, sizeof(double) * 9 * (size_t)n_systems, st));
        if (atomic_virials)
            NNPOPS__CUDA_CALL(cudaMemsetAsync(atomic_virials, 0, sizeof(double) * 9 * (size_t)n_atoms, st));
    }
    if (n_pairs <= 0 || !(forces || virials || atomic_virials)) return NNPOPS_OK;
    pair_reduce_kernel<<<grid_for(n_pairs, 256), 256, 0, st>>>(
        n_pairs, n_pairs_dev, batch, pairs, pair_vec, pair_grad, forces, virials, atomic_virials);
    NNPOPS__LAUNCH_CHECK("pair reduction");
    return NNPOPS_OK;
}

nnpops_status energy_reduce(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                            const double *atom_energy, int64_t width, double *energies,
                            void *stream, bool zero) {
    cudaStream_t st = as_stream(stream);
    if (zero)
        NNPOPS__CUDA_CALL(cudaMemsetAsync(energies, 0, sizeof(double) * (size_t)(n_systems * width), st));
    if (n_atoms <= 0 || width <= 0) return NNPOPS_OK;
    energy_reduce_kernel<<<grid_for(n_atoms, 256), 256, 0, st>>>(n_atoms, batch, atom_energy,
                                                                 width, energies);
    NNPOPS__LAUNCH_CHECK("energy reduction");
    return NNPOPS_OK;
}

} /* namespace */

extern "C" nnpops_status nnpops__pair_reduce_cuda(int64_t n_atoms, int64_t n_systems,
                                                  const int32_t *batch, int64_t n_pairs,
                                                  const int32_t *pairs, const double *pair_vec,
                                                  const double *pair_grad, double *forces,
                                                  double *virials, double *atomic_virials,
                                                  const int64_t *n_pairs_dev, void *stream) {
    return pair_reduce(n_atoms, n_systems, batch, n_pairs, pairs, pair_vec, pair_grad, forces,
                       virials, atomic_virials, n_pairs_dev, stream, true);
}

extern "C" nnpops_status nnpops__pair_reduce_cuda_acc(int64_t n_atoms, int64_t n_systems,
                                                      const int32_t *batch, int64_t n_pairs,
                                                      const int32_t *pairs,
                                                      const double *pair_vec,
                                                      const double *pair_grad, double *forces,
                                                      double *virials, double *atomic_virials,
                                                      const int64_t *n_pairs_dev, void *stream) {
    return pair_reduce(n_atoms, n_systems, batch, n_pairs, pairs, pair_vec, pair_grad, forces,
                       virials, atomic_virials, n_pairs_dev, stream, false);
}

extern "C" nnpops_status nnpops__energy_reduce_cuda(int64_t n_atoms, int64_t n_systems,
                                                    const int32_t *batch,
                                                    const double *atom_energy, int64_t width,
                                                    double *energies, void *stream) {
    return energy_reduce(n_atoms, n_systems, batch, atom_energy, width, energies, stream, true);
}

extern "C" nnpops_status nnpops__energy_reduce_cuda_acc(int64_t n_atoms, int64_t n_systems,
                                                        const int32_t *batch,
                                                        const double *atom_energy, int64_t width,
                                                        double *energies, void *stream) {
    return energy_reduce(n_atoms, n_systems, batch, atom_energy, width, energies, stream, false);
}
