/*
 * bench_dense_cpu.c - the GEMM of the CPU dense kernels (kernels/cpu/mlp.c) in each variant on the
 * layer shapes of an ANI-2x step, for 1 to 64 columns (atoms of one species in a block): where the
 * few-column kernel (rows in vectors) pays against the blocked one (columns in vectors), which
 * sets ROWS_MAX_N in mlp.c, and what each vector width gives.  Microseconds per call (the mean
 * over at least 0.15 s of calls on the same matrices, so they stay in the caches), one thread.
 *
 *   bench_dense_cpu            (no arguments; prints a markdown table per shape and precision)
 *
 * Shapes (m x kk, A = W or W^T as the dense kernels pass them): the first layer forward over all
 * 8 members of H (2048 outputs from 384 descriptor entries: alanine's restricted AEV) and its
 * adjoint (384 x 2048, A = W^T read in place), a hidden layer forward (192 x 256) and its adjoint
 * (256 x 192).
 */
#define _POSIX_C_SOURCE 199309L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define NNPOPS__BENCH_DENSE(REAL, SUFFIX)                                                          \
    static double time_##SUFFIX(int variant, int64_t m, int64_t n, int64_t kk, int backward) {   \
        const int64_t pad = NNPOPS__DENSE_PAD, ld = (n + pad - 1) / pad * pad;                   \
        REAL *a = malloc(sizeof(REAL) * (size_t)(m * kk));                                         \
        REAL *b = malloc(sizeof(REAL) * (size_t)(kk * ld));                                        \
        REAL *c = malloc(sizeof(REAL) * (size_t)(m * ld));                                         \
        REAL *bias = malloc(sizeof(REAL) * (size_t)m);                                             \
        if (!a || !b || !c || !bias) exit(1);                                                      \
        for (int64_t q = 0; q < m * kk; q++) a[q] = (REAL)((q % 7) - 3) * (REAL)0.01;             \
        for (int64_t q = 0; q < kk * ld; q++) b[q] = (REAL)0.5;                                    \
        for (int64_t q = 0; q < m; q++) bias[q] = 0;                                               \
        const int64_t sa_i = backward ? 1 : kk, sa_k = backward ? m : 1;                           \
        int calls = 0;                                                                             \
        double t0 = now(), t = t0;                                                                 \
        do {                                                                                       \
            if (!nnpops__dense_gemm_variant_cpu_##SUFFIX(variant, m, n, kk, a, sa_i, sa_k, b, ld, \
                                                         backward ? NULL : bias, c, ld))           \
                return -1;                                                                         \
            calls++;                                                                               \
            t = now();                                                                             \
        } while (t - t0 < 0.15);                                                                   \
        free(a);                                                                                   \
        free(b);                                                                                   \
        free(c);                                                                                   \
        free(bias);                                                                                \
        return 1e6 * (t - t0) / calls;                                                             \
    }
NNPOPS__BENCH_DENSE(float, f32)
NNPOPS__BENCH_DENSE(double, f64)

int main(void) {
    static const struct {
        const char *name;
        int64_t m, kk;
        int backward;
    } shapes[] = {{"first layer forward, 2048 x 384", 2048, 384, 0},
                  {"first layer adjoint, 384 x 2048 (W^T)", 384, 2048, 1},
                  {"hidden layer forward, 192 x 256", 192, 256, 0},
                  {"hidden layer adjoint, 256 x 192 (W^T)", 256, 192, 1}};
    static const int64_t cols[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 32, 48, 64};
    for (int p = 0; p < 2; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            printf("\n%s, %s: us per call\n\n", p ? "float64" : "float32", shapes[s].name);
            printf("| columns | blocked 16-byte | blocked 32-byte | rows 16-byte | rows 32-byte "
                   "| blocked 64-byte | rows 64-byte | chosen (auto) |\n"
                   "|---|---|---|---|---|---|---|---|\n");
            for (size_t q = 0; q < sizeof cols / sizeof *cols; q++) {
                printf("| %lld |", (long long)cols[q]);
                for (int v = NNPOPS__GEMM_BLOCKED_BASE; v <= NNPOPS__GEMM_ROWS_AVX512 + 1; v++) {
                    const int variant = v > NNPOPS__GEMM_ROWS_AVX512 ? NNPOPS__GEMM_AUTO : v;
                    const int64_t m = shapes[s].m, kk = shapes[s].kk;
                    const int bw = shapes[s].backward;
                    const double us = p ? time_f64(variant, m, cols[q], kk, bw)
                                        : time_f32(variant, m, cols[q], kk, bw);
                    if (us < 0) printf(" - |");
                    else printf(" %.1f |", us);
                }
                printf("\n");
                fflush(stdout);
            }
        }
    return 0;
}
