/*
 * center_neighbors.c - center lists on the CPU: the twin of the GPU step's neighbor search
 * (kernels/cuda/neighbors.cu, nnpops__center_neighbors_cuda), layout in kernels/cpu/kernels.h
 * (nnpops__center_out).
 *
 * What it computes: for every center c < n_centers (a local atom), every atom or periodic image
 * (its own images included, ghosts included) closer than the cutoff, as entries
 * pairs[e] = {c, j}, vec[e] = x_j - x_c + s . H, shifts[e] = s, dist[e] = |vec[e]|, grouped by
 * center in CSR form (start[c] .. start[c+1]).  A local-local pair is two entries, one per center.
 *
 * Method: the half list of kernels/cpu/neighbors.c with skip_from = n_centers (so ghost-ghost
 * pairs are dropped, and every remaining pair has at least one local atom), then each pair (i, j, s)
 * is expanded into the entry (i: j, +r, +s) when i is a center and (j: i, -r, -s) when j is a
 * center, in pair order (deterministic).  The half list lives in scratch slots 10 (pairs and
 * shifts) and 11 (vectors and distances) and grows until it holds every pair.
 *
 * Status as on the GPU: n_entries (all counted; the first `capacity` written; NNPOPS__ST_OVERFLOW
 * when more), n_half (the half-list pair count), NNPOPS__ST_TOO_CLOSE with the first pair closer
 * than min_distance (if min_distance > 0).  Errors of the search (bad cell, too many images) are
 * returned with their messages.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/kernels.h"

enum { SLOT_HALF_IDX = 10, SLOT_HALF_VEC = 11 };

nnpops_status nnpops__center_neighbors_cpu(const nnpops__nbr_in *in, int64_t n_centers,
                                           double min_distance, nnpops__scratch *scratch,
                                           nnpops__center_out *out) {
    nnpops__dev_status *st = out->status;
    memset(st, 0, sizeof *st);
    st->bad_system = -1;
    nnpops__nbr_in hin = *in;
    hin.skip_from = n_centers;
    int64_t cap = 32 * (in->n_atoms > 0 ? in->n_atoms : 1);
    nnpops__nbr_out h;
    for (;;) {
        nnpops_status s;
        /* pairs [cap][2] + shifts [cap][3] ints; vec [cap][3] + dist [cap] doubles */
        if ((s = nnpops__buf_reserve(&scratch->slot[SLOT_HALF_IDX], sizeof(int32_t) * 5 * (size_t)cap,
                                     "half pair list")) != NNPOPS_OK ||
            (s = nnpops__buf_reserve(&scratch->slot[SLOT_HALF_VEC], sizeof(double) * 4 * (size_t)cap,
                                     "half pair vectors")) != NNPOPS_OK)
            return s;
        int32_t *ib = scratch->slot[SLOT_HALF_IDX].ptr;
        double *vb = scratch->slot[SLOT_HALF_VEC].ptr;
        h = (nnpops__nbr_out){.capacity = cap, .pairs = ib, .shifts = ib + 2 * cap, .vec = vb,
                              .dist = vb + 3 * cap};
        s = nnpops__neighbors_cpu(&hin, scratch, &h);
        if (s == NNPOPS_ERROR_NEIGHBOR_OVERFLOW) {
            cap = h.n_pairs + h.n_pairs / 8 + 16;
            continue;
        }
        if (s != NNPOPS_OK) return s;
        break;
    }
    const int64_t np = h.n_pairs;
    int64_t *start = out->start;
    memset(start, 0, sizeof(int64_t) * (size_t)(n_centers + 1));
    for (int64_t p = 0; p < np; p++) {
        const int32_t i = h.pairs[2 * p], j = h.pairs[2 * p + 1];
        if (i < n_centers) start[i + 1]++;
        if (j < n_centers) start[j + 1]++;
    }
    for (int64_t c = 0; c < n_centers; c++) start[c + 1] += start[c];
    const int64_t total = start[n_centers];
    st->n_entries = total;
    st->n_half = np;
    if (total > out->capacity) st->flags |= NNPOPS__ST_OVERFLOW;
    /* fill with start[c] as the cursor of c, then shift back */
    for (int64_t p = 0; p < np; p++) {
        const int32_t ij[2] = {h.pairs[2 * p], h.pairs[2 * p + 1]};
        const double d = h.dist[p];
        if (min_distance > 0 && d < min_distance && !(st->flags & NNPOPS__ST_TOO_CLOSE)) {
            st->flags |= NNPOPS__ST_TOO_CLOSE;
            st->close_i = ij[0];
            st->close_j = ij[1];
            st->close_d = d;
        }
        for (int side = 0; side < 2; side++) {
            const int32_t c = ij[side], o = ij[1 - side];
            if (c >= n_centers) continue;
            const int64_t e = start[c]++;
            if (e >= out->capacity) continue;
            const double sg = side ? -1.0 : 1.0;
            out->pairs[2 * e] = c;
            out->pairs[2 * e + 1] = o;
            for (int k = 0; k < 3; k++) {
                if (out->vec) out->vec[3 * e + k] = sg * h.vec[3 * p + k];
                if (out->shifts) out->shifts[3 * e + k] = side ? -h.shifts[3 * p + k] : h.shifts[3 * p + k];
            }
            if (out->dist) out->dist[e] = d;
        }
    }
    for (int64_t c = n_centers; c > 0; c--) start[c] = start[c - 1];
    start[0] = 0;
    return NNPOPS_OK;
}

/* ---- CSR center lists from a half list (kernels.h: nnpops__center_lists_cpu) ---- */

int64_t nnpops__center_lists_cpu(int64_t n_centers, int64_t n_pairs, const int32_t *pairs,
                                 int64_t *start, int64_t *entry) {
    memset(start, 0, sizeof(int64_t) * (size_t)(n_centers + 1));
    for (int64_t p = 0; p < n_pairs; p++) {
        const int64_t i = pairs[2 * p], j = pairs[2 * p + 1];
        if (i < n_centers) start[i + 1]++;
        if (j < n_centers) start[j + 1]++;
    }
    int64_t max_count = 0;
    for (int64_t c = 0; c < n_centers; c++) {
        if (start[c + 1] > max_count) max_count = start[c + 1];
        start[c + 1] += start[c];
    }
    /* fill with start[c] as the cursor of c, then shift the cursors back into starts */
    for (int64_t p = 0; p < n_pairs; p++) {
        const int64_t i = pairs[2 * p], j = pairs[2 * p + 1];
        if (i < n_centers) entry[start[i]++] = 2 * p;
        if (j < n_centers) entry[start[j]++] = 2 * p + 1;
    }
    for (int64_t c = n_centers; c > 0; c--) start[c] = start[c - 1];
    start[0] = 0;
    return max_count;
}
