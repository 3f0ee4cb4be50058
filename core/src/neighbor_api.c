/*
 * neighbor_api.c - the public standalone neighbor search, nnpops_neighbor_pairs().
 *
 * A thin wrapper over nnpops__neighbors_cpu (kernels/cpu/neighbors.c) for one system: it
 * validates the arguments, runs the search with scratch buffers of its own (freed before
 * returning, max_images 64), and widens the kernel's int32 atom pairs into the caller's int64
 * [capacity][2] array.  Shifts ([capacity][3] int32) and distances ([capacity] double) are
 * written by the kernel directly into the caller's arrays.  The half-list orientation and the
 * shift convention are the kernel's: shift-0 pairs have i < j, other pairs have a
 * lexicographically positive shift s, and r_ij = x_j - x_i + s . cell with the positions as given
 * (not wrapped).  With any periodic axis the whole cell must be non-singular (see neighbors.c).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/src/internal.h"

#define NNPOPS__NEIGHBOR_API_MAX_IMAGES 64

/* Scratch slots: 0..3 belong to the kernel; the wrapper uses the two after them. */
enum { SLOT_ORDER = 4, SLOT_PAIRS = 5 };

static nnpops_status check_arguments(int64_t n_atoms, const double *positions, const double *cell,
                                     const uint8_t *pbc, double cutoff, int64_t capacity,
                                     const int64_t *n_pairs, const int64_t *pairs,
                                     const int32_t *shifts, const double *distances) {
    if (!n_pairs)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_neighbor_pairs: n_pairs is NULL");
    if (n_atoms < 0 || n_atoms > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_neighbor_pairs: n_atoms = %lld is outside [0, 2^31 - 1]",
                            (long long)n_atoms);
    if (n_atoms > 0 && !positions)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_neighbor_pairs: positions is NULL (n_atoms = %lld)",
                            (long long)n_atoms);
    if (!(cutoff > 0.0) || !isfinite(cutoff))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_neighbor_pairs: cutoff = %g must be positive and finite",
                            cutoff);
    if (capacity < 0 || (uint64_t)capacity > SIZE_MAX / (2 * sizeof(int64_t)))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_neighbor_pairs: capacity = %lld is negative or too large",
                            (long long)capacity);
    if (capacity > 0 && (!pairs || !shifts || !distances))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_neighbor_pairs: %s is NULL with capacity = %lld",
                            !pairs ? "pairs" : !shifts ? "shifts" : "distances",
                            (long long)capacity);
    if (pbc && !cell) {
        for (int k = 0; k < 3; k++)
            if (pbc[k])
                return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                    "nnpops_neighbor_pairs: cell is NULL but axis %c is periodic",
                                    "abc"[k]);
    }
    for (int64_t i = 0; i < n_atoms; i++) {
        const double *x = positions + 3 * i;
        if (!isfinite(x[0]) || !isfinite(x[1]) || !isfinite(x[2]))
            return nnpops__fail(NNPOPS_ERROR_BAD_POSITION,
                                "nnpops_neighbor_pairs: atom %lld has a non-finite coordinate "
                                "(%g, %g, %g)",
                                (long long)i, x[0], x[1], x[2]);
    }
    return NNPOPS_OK;
}

nnpops_status nnpops_neighbor_pairs(int64_t n_atoms, const double *positions, const double *cell,
                                    const uint8_t *pbc, double cutoff, int64_t capacity,
                                    int64_t *n_pairs, int64_t *pairs, int32_t *shifts,
                                    double *distances) {
    nnpops_status st = check_arguments(n_atoms, positions, cell, pbc, cutoff, capacity, n_pairs,
                                       pairs, shifts, distances);
    if (st != NNPOPS_OK) {
        if (n_pairs) *n_pairs = 0;
        return st;
    }
    *n_pairs = 0;

    nnpops__scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    st = nnpops__buf_reserve(&scratch.slot[SLOT_ORDER], sizeof(int32_t) * (size_t)(n_atoms + 1),
                             "neighbor atom order");
    if (st == NNPOPS_OK && capacity > 0)
        st = nnpops__buf_reserve(&scratch.slot[SLOT_PAIRS], sizeof(int32_t) * 2 * (size_t)capacity,
                                 "neighbor pairs");
    if (st == NNPOPS_OK) {
        int32_t *order = scratch.slot[SLOT_ORDER].ptr;
        for (int64_t i = 0; i < n_atoms; i++) order[i] = (int32_t)i;
        const int64_t sys_start[2] = {0, n_atoms};
        const nnpops__nbr_in in = {
            .n_atoms = n_atoms,
            .positions = positions,
            .n_systems = 1,
            .sys_start = sys_start,
            .order = order,
            .cells = cell,
            .pbc = pbc,
            .cutoff = cutoff,
            .skip_from = n_atoms,
            .max_images = NNPOPS__NEIGHBOR_API_MAX_IMAGES,
        };
        nnpops__nbr_out out = {
            .capacity = capacity,
            .n_pairs = 0,
            .pairs = capacity > 0 ? scratch.slot[SLOT_PAIRS].ptr : NULL,
            .shifts = capacity > 0 ? shifts : NULL,
            .vec = NULL,
            .dist = capacity > 0 ? distances : NULL,
        };
        st = nnpops__neighbors_cpu(&in, &scratch, &out);
        if (st == NNPOPS_OK || st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW) {
            const int64_t written = out.n_pairs < capacity ? out.n_pairs : capacity;
            for (int64_t p = 0; p < 2 * written; p++) pairs[p] = out.pairs[p];
            *n_pairs = out.n_pairs;
            if (st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW)
                st = nnpops__fail(NNPOPS_ERROR_NEIGHBOR_OVERFLOW,
                                  "nnpops_neighbor_pairs: %lld pairs found, more than the "
                                  "capacity %lld; call again with arrays for %lld pairs",
                                  (long long)out.n_pairs, (long long)capacity,
                                  (long long)out.n_pairs);
        } else {
            st = nnpops__fail_prefix(st, "nnpops_neighbor_pairs");
        }
    }
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
    return st;
}
