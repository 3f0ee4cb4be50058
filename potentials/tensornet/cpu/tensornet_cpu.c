/*
 * tensornet_cpu.c - the TensorNet forward pass and hand-written backward on the CPU (see
 * tensornet_cpu.h for the interface, docs/model-format.md section 9 for the maths).
 *
 * The body lives in tensornet_cpu_impl.h and is compiled twice, once per compute precision
 * (REAL = double, suffix _f64; REAL = float, suffix _f32), and so are the CPU twins of the GPU
 * step's ops (tn_ops_cpu_impl.h, declared in potentials/tensornet/tn_ops.h), which use its pieces.
 */
#include "potentials/tensornet/cpu/tensornet_cpu.h"
#include "potentials/tensornet/tn_ops.h"

#include "kernels/cpu/kernels.h"

#include <tgmath.h>
#include <string.h>

#define REAL double
#define SUF _f64
#include "potentials/tensornet/cpu/tensornet_cpu_impl.h"
#include "potentials/tensornet/cpu/tn_ops_cpu_impl.h"
#undef REAL
#undef SUF

#define REAL float
#define SUF _f32
#include "potentials/tensornet/cpu/tensornet_cpu_impl.h"
#include "potentials/tensornet/cpu/tn_ops_cpu_impl.h"
#undef REAL
#undef SUF

void nnpops__tn_count_cpu(int64_t n, int64_t n_systems, const int32_t *batch, int32_t *sys_count) {
    for (int64_t s = 0; s < n_systems; s++) sys_count[s] = 0;
    for (int64_t i = 0; i < n; i++) sys_count[batch[i]]++;
}

/* The entry holds its pair: j > c, or an own image with v > 0 lexicographically. */
static int tn_holds_pair(int32_t c, int32_t j, const double *v) {
    if (j != c) return j > c;
    return v[0] > 0 || (v[0] == 0 && (v[1] > 0 || (v[1] == 0 && v[2] > 0)));
}

void nnpops__tn_pairs_cpu(int64_t n_centers, const int64_t *start, const int32_t *pairs,
                          int64_t capacity, const double *vec, const uint8_t *mask,
                          int64_t n_pairs, int32_t *slot, int32_t *pentry, int32_t *pmirror,
                          int32_t *count) {
    const int64_t ne = start[n_centers] < capacity ? start[n_centers] : capacity;
    (void)count;
    int64_t p = 0;
    for (int64_t e = 0; e < capacity; e++) slot[e] = -1;
    for (int64_t c = 0; c < n_centers; c++) {
        const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
        for (int64_t e = start[c]; e < e1; e++)
            if ((mask[e] & NNPOPS__TN_EDGE) &&
                tn_holds_pair((int32_t)c, pairs[2 * e + 1], vec + 3 * e) && p < n_pairs) {
                slot[e] = (int32_t)p;
                pentry[p++] = (int32_t)e;
            }
    }
    for (int64_t q = p; q < n_pairs; q++) pentry[q] = -1;
    for (int64_t q = 0; q < n_pairs; q++) pmirror[q] = -1;
    /* the other direction: the mirror's pair */
    for (int64_t e = 0; e < ne; e++) {
        const int32_t c = pairs[2 * e], j = pairs[2 * e + 1];
        const double *v = vec + 3 * e;
        if (!(mask[e] & NNPOPS__TN_EDGE) || tn_holds_pair(c, j, v)) continue;
        double best = INFINITY;
        const int64_t f1 = start[j + 1] < capacity ? start[j + 1] : capacity;
        for (int64_t f = start[j]; f < f1; f++) {
            if (pairs[2 * f + 1] != c || !(mask[f] & NNPOPS__TN_EDGE)) continue;
            const double *w = vec + 3 * f;
            const double dx = v[0] + w[0], dy = v[1] + w[1], dz = v[2] + w[2];
            const double d2 = dx * dx + dy * dy + dz * dz;
            if (d2 < best) {
                best = d2;
                slot[e] = slot[f];
            }
        }
        if (slot[e] >= 0) pmirror[slot[e]] = (int32_t)e;
    }
}
