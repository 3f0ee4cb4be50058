/*
 * columns.c - the local atoms grouped by species into the networks' columns: the CPU twin of
 * nnpops__ani_columns_cuda (potentials/ani/ani_ops.h).  One pass over the atoms with a cursor per
 * species, then the padding of each species' columns.
 */
#include "potentials/ani/ani_ops.h"

void nnpops__ani_columns_cpu(const nnpops__ani_columns_args *a, const int32_t *species,
                             int32_t *centers, int32_t *rank) {
    int64_t cursor[NNPOPS__MAX_SPECIES];
    for (int32_t s = 0; s < a->n_species; s++) cursor[s] = a->start[s];
    for (int64_t i = 0; i < a->n_local; i++) {
        const int32_t s = species[i];
        if (cursor[s] < a->start[s + 1]) centers[cursor[s]++] = (int32_t)i;
    }
    for (int32_t s = 0; s < a->n_species; s++)
        for (int64_t c = cursor[s]; c < a->start[s + 1]; c++) centers[c] = -1;
    if (rank)
        for (int64_t i = 0; i < a->n_atoms; i++) rank[i] = a->rank_of[species[i]];
}
