/*
 * lj_centers.c - the CPU twin of the Lennard-Jones pair terms over center lists
 * (potentials/lj/lj_ops.h; the CUDA twin is potentials/lj/cuda/lj.cu).
 */
#include <math.h>
#include <stdint.h>

#include "potentials/lj/lj_ops.h"

void nnpops__lj_centers_cpu(const nnpops__lj_table *table, int64_t n_centers, int64_t n_local,
                            const int64_t *start, const int32_t *pairs, const double *vec,
                            const int32_t *species, int64_t capacity, double *atom_energy,
                            double *pair_grad) {
    const int32_t S = table->n_species;
    for (int64_t c = 0; c < n_centers; c++) {
        const double share = c < n_local ? 0.5 : 0.0;
        const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
        double energy = 0.0;
        for (int64_t e = start[c]; e < e1; e++) {
            const int32_t j = pairs[2 * e + 1];
            const double *v = vec + 3 * e;
            const double r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
            double dedr;
            energy += nnpops__lj_term(&table->pair[species[c] * S + species[j]], r, &dedr);
            if (pair_grad) {
                const double s = share * dedr / r;
                for (int k = 0; k < 3; k++) pair_grad[3 * e + k] = dedr != 0.0 ? s * v[k] : 0.0;
            }
        }
        atom_energy[c] = share * energy;
    }
}
