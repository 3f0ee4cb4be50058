/*
 * lj_ops.h - the Lennard-Jones pair terms over center lists: the CPU twin (cpu/lj_centers.c) and
 * the CUDA twin (cuda/lj.cu) of the op the GPU step of an lj model runs.
 *
 * Center lists as the GPU step gives them (nnpops__center_out, kernels/cpu/kernels.h): for each
 * center c < n_centers, entries e = start[c] .. start[c+1]-1 with pairs[e] = {c, j} and
 * vec[e] = x_j - x_c + shift (angstrom).  A pair of two centers is two entries, one per center.
 * For an entry whose species pair (species[c], species[j]) is listed and whose distance r is below
 * the pair's cutoff rc:
 *     E = 4 eps ((sigma/r)^12 - (sigma/r)^6) - e_shift
 * Each entry gives half of E to its center when the center is local (c < n_local): the local
 * atoms' energy counts every local-local pair once and every local-ghost pair by half, as the
 * half-list CPU step does.  Outputs:
 *     atom_energy[c] = sum over c's entries of E / 2 (written for c < n_centers; 0 for c >= n_local)
 *     pair_grad[e]   = (c < n_local ? 1/2 : 0) dE/dr vec[e] / r  (0 beyond the cutoff), written for
 *                      every entry e < min(start[n_centers], capacity) when pair_grad != NULL
 * Entries at or above capacity are not read (a truncated list, whose results the step discards).
 * Everything in double.  Each center's entries are summed in order (one thread per center on the
 * GPU): the twins agree to rounding (the GPU may contract multiply-adds).
 */
#ifndef NNPOPS_POTENTIALS_LJ_OPS_H
#define NNPOPS_POTENTIALS_LJ_OPS_H

#include <stdint.h>

#include "kernels/base.h"

typedef struct nnpops__lj_pair {
    int32_t on;     /* the species pair interacts */
    double eps;     /* model energy unit */
    double sigma;   /* angstrom */
    double cutoff;  /* angstrom */
    double e_shift; /* energy at the cutoff (0 without shift) */
} nnpops__lj_pair;

/* Parameters per ordered species pair (symmetric): pair[a * n_species + b]. */
typedef struct nnpops__lj_table {
    int32_t n_species;
    nnpops__lj_pair pair[NNPOPS__MAX_SPECIES * NNPOPS__MAX_SPECIES];
} nnpops__lj_table;

/* E and dE/dr of one species pair at distance r (both 0 beyond the cutoff or when the pair is off):
 * the one formula of both twins and of the half-list CPU step. */
#if defined(__CUDACC__) || (defined(__cplusplus) && defined(NNPOPS_CUDA_EMULATION))
#define NNPOPS__LJ_FN static inline __host__ __device__
#else
#define NNPOPS__LJ_FN static inline
#endif
NNPOPS__LJ_FN double nnpops__lj_term(const nnpops__lj_pair *t, double r, double *dedr) {
    *dedr = 0.0;
    if (!t->on || !(r < t->cutoff)) return 0.0;
    const double sr2 = (t->sigma / r) * (t->sigma / r);
    const double sr6 = sr2 * sr2 * sr2;
    *dedr = 4.0 * t->eps * (-12.0 * sr6 * sr6 + 6.0 * sr6) / r;
    return 4.0 * t->eps * (sr6 * sr6 - sr6) - t->e_shift;
}

void nnpops__lj_centers_cpu(const nnpops__lj_table *table, int64_t n_centers, int64_t n_local,
                            const int64_t *start, const int32_t *pairs, const double *vec,
                            const int32_t *species, int64_t capacity, double *atom_energy,
                            double *pair_grad);
/* CUDA twin: every pointer a device pointer (table too); enqueued on stream. */
nnpops_status nnpops__lj_centers_cuda(const nnpops__lj_table *table, int64_t n_centers,
                                      int64_t n_local, const int64_t *start, const int32_t *pairs,
                                      const double *vec, const int32_t *species, int64_t capacity,
                                      double *atom_energy, double *pair_grad, void *stream);

#endif /* NNPOPS_POTENTIALS_LJ_OPS_H */
