/*
 * bench_neighbors_cpu.c - timing and memory of the CPU neighbor search (nnpops__neighbors_cpu).
 *
 * Random boxes at the number density of liquid water's atoms (0.1 atoms per cubic angstrom),
 * periodic, cutoff 5.2 angstrom (ANI-2x's radial cutoff), from 10^3 to 10^6 atoms, in a cubic cell
 * and in a skewed triclinic cell of the same volume.  For each size it prints the number of atoms,
 * the best wall and thread-CPU time of a few calls (scratch already grown, single thread; the CPU
 * time is the steadier number on a shared machine), the number of pairs
 * (half list), and the kernel's scratch bytes per atom, which stays flat when memory is linear
 * in N.  Output arrays (pairs, vectors, distances, as nnpops_compute requests them) belong to the
 * caller and are not counted.
 *
 * Usage: bench_neighbors_cpu [max_atoms]   (default 1000000)
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/src/internal.h"
#include "check.h"

static double clock_ms(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int run(int64_t n, int skewed, nnpops__scratch *scratch) {
    const double density = 0.1, cutoff = 5.2;
    const double L = cbrt((double)n / density);
    double cell[9] = {L, 0, 0, 0, L, 0, 0, 0, L};
    if (skewed) { /* same volume, strongly sheared: rows a, b, c */
        const double c[9] = {L, 0, 0, 0.35 * L, L, 0, -0.2 * L, 0.15 * L, L};
        memcpy(cell, c, sizeof c);
    }
    const uint8_t pbc[3] = {1, 1, 1};
    double *x = malloc(sizeof(double) * 3 * (size_t)n);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)n);
    if (!x || !order) return 1;
    unsigned long long seed = 12345 + (unsigned long long)n;
    for (int64_t a = 0; a < n; a++) {
        const double f[3] = {test_rand(&seed), test_rand(&seed), test_rand(&seed)};
        for (int d = 0; d < 3; d++)
            x[3 * a + d] = f[0] * cell[d] + f[1] * cell[3 + d] + f[2] * cell[6 + d];
        order[a] = (int32_t)a;
    }
    const int64_t sys_start[2] = {0, n};
    const nnpops__nbr_in in = {
        .n_atoms = n, .positions = x, .n_systems = 1, .sys_start = sys_start, .order = order,
        .cells = cell, .pbc = pbc, .cutoff = cutoff, .skip_from = n, .max_images = 64,
    };
    /* capacity from the expected count, grown once if needed (as nnpops_compute does) */
    const double sphere = 4.0 / 3.0 * 3.141592653589793 * cutoff * cutoff * cutoff;
    int64_t cap = (int64_t)(1.1 * 0.5 * density * sphere * (double)n) + 1024;
    nnpops__nbr_out out = {0};
    for (int attempt = 0; attempt < 2; attempt++) {
        out.capacity = cap;
        out.pairs = realloc(out.pairs, sizeof(int32_t) * 2 * (size_t)cap);
        out.vec = realloc(out.vec, sizeof(double) * 3 * (size_t)cap);
        out.dist = realloc(out.dist, sizeof(double) * (size_t)cap);
        if (!out.pairs || !out.vec || !out.dist) return 1;
        memset(out.pairs, 0, sizeof(int32_t) * 2 * (size_t)cap); /* fault the pages in */
        memset(out.vec, 0, sizeof(double) * 3 * (size_t)cap);
        memset(out.dist, 0, sizeof(double) * (size_t)cap);
        nnpops_status st = nnpops__neighbors_cpu(&in, scratch, &out);
        if (st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW) {
            cap = out.n_pairs;
            continue;
        }
        if (st != NNPOPS_OK) {
            fprintf(stderr, "neighbor search failed: %s: %s\n", nnpops_status_name(st),
                    nnpops_last_error());
            return 1;
        }
        break;
    }
    const int reps = n <= 10000 ? 20 : n <= 100000 ? 5 : 3;
    double best = HUGE_VAL, best_cpu = HUGE_VAL;
    for (int r = 0; r < reps; r++) {
        const double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        nnpops_status st = nnpops__neighbors_cpu(&in, scratch, &out);
        const double t = clock_ms(CLOCK_MONOTONIC) - t0;
        const double c = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
        if (st != NNPOPS_OK) return 1;
        if (t < best) best = t;
        if (c < best_cpu) best_cpu = c;
    }
    size_t bytes = 0;
    for (int k = 0; k < 4; k++) bytes += scratch->slot[k].bytes;
    printf("| %-9s | %9lld | %10.2f | %10.2f | %10lld | %7.1f | %14.1f |\n",
           skewed ? "triclinic" : "cubic", (long long)n, best, best_cpu, (long long)out.n_pairs,
           (double)out.n_pairs / (double)n, (double)bytes / (double)n);
    free(out.pairs);
    free(out.vec);
    free(out.dist);
    free(x);
    free(order);
    return 0;
}

int main(int argc, char **argv) {
    const int64_t max_atoms = argc > 1 ? atoll(argv[1]) : 1000000;
    printf("CPU neighbor search, density 0.1 / A^3, cutoff 5.2 A, periodic, one thread\n\n");
    printf("| cell      |         N |    wall ms |     CPU ms |      pairs | pairs/N "
           "| scratch B/atom |\n");
    printf("|-----------|-----------|------------|------------|------------|---------"
           "|----------------|\n");
    for (int skewed = 0; skewed < 2; skewed++) {
        for (int64_t n = 1000; n <= max_atoms; n *= 10) {
            /* a fresh scratch per size, so its size is this size's peak */
            nnpops__scratch scratch;
            memset(&scratch, 0, sizeof scratch);
            if (run(n, skewed, &scratch) != 0) return 1;
            for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
        }
    }
    return 0;
}
