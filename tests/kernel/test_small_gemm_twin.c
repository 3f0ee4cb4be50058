/*
 * test_small_gemm_twin.c - the CPU twin of the grouped small-n GEMM (nnpops__small_gemm_cpu_f32,
 * potentials/ani/cpu/networks.c), which the GPU tests compare the CUDA kernels with: its k split
 * (nnpops__sg_problem.split) against the same problem unsplit, computed here in double.
 *
 * Case split: backward problems (trans 1, plain store) of several shapes, batches and slice
 * counts (k divisible by the slices or not; more slices than groups of 4 inner rows, so that a
 * last slice is empty); every slice covers the inner rows nnpops__sg_split_k gives it (checked
 * against a double-precision sum over exactly those rows), the slices add up to the unsplit
 * product, an empty slice is written as zeros, and nothing past column n or past the last slice
 * is written.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/fused.h"
#include "potentials/ani/ani_ops.h"

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_seed >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static void run(int64_t m, int64_t k, int64_t n, int64_t batch, int32_t split) {
    const int64_t lda = m + 3, ldb = n + 2, ldc = n + 5;
    const int64_t sa = k * lda + 7, sb = k * ldb + 1, sc = m * ldc + 3;
    const int64_t ss = batch * sc + 11; /* split_stride */
    const int64_t nc = split * ss + 4;
    float *A = malloc(sizeof(float) * (size_t)(batch * sa));
    float *B = malloc(sizeof(float) * (size_t)(batch * sb));
    float *C = malloc(sizeof(float) * (size_t)nc);
    CHECK(A && B && C);
    for (int64_t i = 0; i < batch * sa; i++) A[i] = frand();
    for (int64_t i = 0; i < batch * sb; i++) B[i] = frand();
    for (int64_t i = 0; i < nc; i++) C[i] = 12345.0f; /* sentinel */
    nnpops__sg_group g;
    memset(&g, 0, sizeof g);
    g.alpha = 0.1;
    g.count = 1;
    nnpops__sg_problem p = {1, NNPOPS__SG_STORE, m, k, n, batch, A, lda, sa, B, ldb, sb,
                            C, ldc, sc, NULL, split, ss};
    g.p[0] = p;
    nnpops__small_gemm_cpu_f32(&g);
    const int64_t kper = nnpops__sg_split_k(k, split);
    CHECK(kper % 4 == 0 && kper * split >= k);
    double worst_slice = 0, worst_sum = 0;
    int empty = 0;
    for (int64_t t = 0; t < batch; t++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t r = 0; r < ldc; r++) {
                double total = 0, sum = 0, scale = 0;
                for (int32_t j = 0; j < split; j++) {
                    const float got = C[j * ss + t * sc + i * ldc + r];
                    if (r >= n) { /* past column n: untouched */
                        CHECK(got == 12345.0f);
                        continue;
                    }
                    const int64_t j0 = j * kper, j1 = j0 + kper < k ? j0 + kper : k;
                    double want = 0, mag = 0;
                    for (int64_t q = j0; q < j1; q++) {
                        const double x = (double)A[t * sa + q * lda + i] * B[t * sb + q * ldb + r];
                        want += x;
                        mag += fabs(x);
                    }
                    if (j0 >= k) {
                        CHECK(got == 0.0f);
                        empty = 1;
                    }
                    worst_slice = fmax(worst_slice, fabs(got - want) / (mag + 1e-30));
                    sum += got;
                    scale += mag;
                }
                if (r >= n) continue;
                for (int64_t q = 0; q < k; q++)
                    total += (double)A[t * sa + q * lda + i] * B[t * sb + q * ldb + r];
                worst_sum = fmax(worst_sum, fabs(sum - total) / (scale + 1e-30));
            }
    /* nothing written between the slices' blocks or past the last one */
    for (int32_t j = 0; j < split; j++)
        for (int64_t i = j * ss + batch * sc; i < (j + 1 < split ? (j + 1) * ss : nc); i++)
            CHECK(C[i] == 12345.0f);
    printf("split %lldx%lldx%lld b%lld into %d (%lld rows each%s): slice error %.2e, sum error "
           "%.2e (relative to the sums of |terms|)\n",
           (long long)m, (long long)k, (long long)n, (long long)batch, (int)split, (long long)kper,
           empty ? ", an empty last slice" : "", worst_slice, worst_sum);
    CHECK(worst_slice < 1e-5 && worst_sum < 1e-5);
    free(A);
    free(B);
    free(C);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "split") != 0) {
        fprintf(stderr, "usage: %s split\n", argv[0]);
        return 2;
    }
    run(384, 2048, 7, 1, 4);  /* the adjoint onto a 384-entry AEV of 7 atoms */
    run(37, 130, 13, 2, 3);   /* k not divisible, a batch */
    run(20, 10, 5, 1, 4);     /* slices of 4 rows: the last one empty */
    run(64, 300, 16, 1, 1);   /* no split */
    run(50, 1001, 30, 3, 8);
    printf("split: ok\n");
    return 0;
}
