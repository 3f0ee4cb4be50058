/*
 * reduce.c - per-system reductions on the CPU (the reference for kernels/cuda/reduce.cu).
 *
 * Pair reduction: from the gradient g_p = dE/dr_p of every half-list pair p = (i, j) with vector
 * r_p = x_j - x_i + shift:
 *     forces[i] += g_p,  forces[j] -= g_p  (= -dE/dx)     ([n_atoms][3])
 *     virials[batch[i]] -= r_p (x) g_p                      ([n_systems][9], row-major)
 *     atomic_virials[i] and [j] each -= 0.5 r_p (x) g_p     ([n_atoms][9])
 * Energy reduction: energies[s][w] = sum over atoms i of system s of atom_energy[i][w], in float64,
 * summed in atom order (deterministic).
 */
#include <string.h>

#include "kernels/cpu/kernels.h"

void nnpops__pair_reduce_cpu(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                             int64_t n_pairs, const int32_t *pairs, const double *pair_vec,
                             const double *pair_grad, double *forces, double *virials,
                             double *atomic_virials) {
    if (forces) memset(forces, 0, sizeof(double) * 3 * (size_t)n_atoms);
    if (virials) memset(virials, 0, sizeof(double) * 9 * (size_t)n_systems);
    if (atomic_virials) memset(atomic_virials, 0, sizeof(double) * 9 * (size_t)n_atoms);
    for (int64_t p = 0; p < n_pairs; p++) {
        const int32_t i = pairs[2 * p], j = pairs[2 * p + 1];
        const double *g = pair_grad + 3 * p;
        if (forces) {
            for (int k = 0; k < 3; k++) {
                forces[3 * i + k] += g[k];
                forces[3 * j + k] -= g[k];
            }
        }
        if (virials || atomic_virials) {
            const double *r = pair_vec + 3 * p;
            double w[9];
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) w[3 * a + b] = -r[a] * g[b];
            if (virials) {
                double *v = virials + 9 * (size_t)batch[i];
                for (int k = 0; k < 9; k++) v[k] += w[k];
            }
            if (atomic_virials) {
                for (int k = 0; k < 9; k++) {
                    atomic_virials[9 * (size_t)i + k] += 0.5 * w[k];
                    atomic_virials[9 * (size_t)j + k] += 0.5 * w[k];
                }
            }
        }
    }
}

void nnpops__energy_reduce_cpu(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                               const double *atom_energy, int64_t width, double *energies) {
    memset(energies, 0, sizeof(double) * (size_t)(n_systems * width));
    for (int64_t i = 0; i < n_atoms; i++) {
        double *e = energies + (size_t)batch[i] * (size_t)width;
        const double *a = atom_energy + (size_t)i * (size_t)width;
        for (int64_t w = 0; w < width; w++) e[w] += a[w];
    }
}
