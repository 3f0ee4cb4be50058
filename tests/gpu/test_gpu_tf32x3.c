/*
 * test_gpu_tf32x3.c - the 3xTF32 GEMMs (kernels/cuda/tf32x3.cu) against a float64 CPU GEMM.
 * One CTest entry per case (label gpu); exit 77 without a GPU.
 *
 *   stack  hi has no bits below TF32's 10 explicit mantissa bits, hi + lo == x exactly,
 *          |lo| <= 2^-11 |x|, inf / nan pass through in hi; the three blocks land where the
 *          stacking puts them (along the columns and, by groups, along the rows), the 16-byte path
 *          equal to the scalar one bit for bit
 *   fused  bias + CELU and CELU' fused with the stacking equal the plain kernels followed by the
 *          stacking, bit for bit (16-byte and scalar paths)
 *   gemm   the shapes of the ANI networks (first layer 1008 -> 8 x 256 over a column block, hidden
 *          layers strided-batched over 8 members, the backward products with op(B) = B^T and in
 *          the model's K-major form (B not transposed: the hidden layers' 8 members interleaved
 *          in one matrix, the first layer's stacked by member); beta 0 and 1): error / sum of |terms| <= 2e-6 for
 *          every element, and a plain TF32 GEMM of the same inputs (cuBLAS
 *          CUBLAS_COMPUTE_32F_FAST_TF32) at least 20x worse, so the split is what gives float32
 *          accuracy
 *   model  ANI-2x float32 on a periodic box of 96 water molecules (192 H: the hydrogen networks run
 *          through cuBLAS) with option tensor_cores on and off, the ensemble mean and member 5
 *          alone: both within the float32 tolerances of the float64 model (|dE|/N <= 1e-5 eV,
 *          max |dF| <= 1e-3 eV/A), and the two float32 results differ (the 3xTF32 path ran)
 *   chunks a species over several network chunks: a batch of three identical 18,432-atom boxes
 *          (36,864 H), float64 and float32, every copy equal to the first to rounding
 *   auto   option tensor_cores auto (the default) puts every float32 species of the cuBLAS path
 *          (more than 96 atoms) on the tensor cores: bitwise equal to on, different from off, on
 *          the 96-molecule box and on a 12,288-molecule box, with option deterministic on
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "core/src/internal.h"
#include "gpu_check.h"
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani.h"
#include "water.h"

static unsigned long long rng = 0x243f6a8885a308d3ull;
static double urand(void) { return test_rand(&rng); }

/* x (rows x cols, ld ldx) stacked along the rows by groups of g, ld_out 3 rows: every element
 * where the stacking puts it, equal to hi / lo (ld ldh) */
static int check_row_stack(const float *out, const float *hi, const float *lo, int64_t rows,
                           int64_t cols, int64_t ldh, int64_t g) {
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++) {
            const int64_t base = j * 3 * rows + (i / g) * 3 * g + i % g;
            for (int b = 0; b < 3; b++)
                if (memcmp(&out[base + b * g], b == 1 ? &lo[j * ldh + i] : &hi[j * ldh + i], 4)) {
                    fprintf(stderr, "row stack (g %lld): element (%lld, %lld) block %d misplaced\n",
                            (long long)g, (long long)i, (long long)j, b);
                    return 1;
                }
        }
    return 0;
}

static int case_stack(void) {
    const int64_t n = 100000;
    float *x = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * 3 * n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((2 * urand() - 1) * pow(10.0, 8 * urand() - 4));
    x[0] = INFINITY;
    x[1] = -0.0f;
    x[2] = 3.4e38f;
    float *dx = dup_to_device(x, sizeof(float) * n);
    float *dout = dalloc(sizeof(float) * 3 * n);
    /* as a 250 x 400 matrix with ld 250, stacked along the columns: [lo | hi | hi] */
    CHECK_OK(nnpops__tf32_stack_cuda(250, 400, 1, dx, 250, 0, dout, 250, 0, 400, 0, 0, g_stream));
    to_host(out, dout, sizeof(float) * 3 * n);
    const float *lo = out, *hi = out + n;
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; i++) {
        uint32_t u;
        memcpy(&u, &hi[i], 4);
        const int finite = isfinite(x[i]);
        if (memcmp(&hi[i], &out[2 * n + i], 4) != 0) {
            fprintf(stderr, "element %lld: the two hi blocks differ\n", (long long)i);
            bad++;
        }
        if (finite && (u & 0x1fffu) != 0) {
            fprintf(stderr, "element %lld: hi %.9g has bits below TF32\n", (long long)i, hi[i]);
            bad++;
        }
        if (finite && (double)hi[i] + (double)lo[i] != (double)x[i]) {
            fprintf(stderr, "element %lld: hi + lo = %.9g, x = %.9g\n", (long long)i,
                    (double)hi[i] + lo[i], x[i]);
            bad++;
        }
        if (finite && fabs(lo[i]) > ldexp(fabs(x[i]), -11)) {
            fprintf(stderr, "element %lld: |lo| = %g > 2^-11 |x| (x = %g)\n", (long long)i, lo[i],
                    x[i]);
            bad++;
        }
        if (!finite && !(hi[i] == x[i] && lo[i] == 0)) {
            fprintf(stderr, "element %lld: non-finite x not passed through\n", (long long)i);
            bad++;
        }
    }
    CHECK(bad == 0);
    printf("stack: %lld values, hi exact in TF32, hi + lo == x, blocks [lo | hi | hi]\n",
           (long long)n);
    /* hi / lo of x as a 248-row matrix (ld 248), from the scalar path (ld_out 250 keeps it
     * scalar), to compare the 16-byte paths with */
    float *hi8 = malloc(sizeof(float) * 248 * 400), *lo8 = malloc(sizeof(float) * 248 * 400);
    CHECK_OK(nnpops__tf32_stack_cuda(248, 400, 1, dx, 248, 0, dout, 250, 0, 400, 0, 0, g_stream));
    to_host(out, dout, sizeof(float) * 3 * 250 * 400);
    for (int64_t j = 0; j < 400; j++)
        for (int64_t i = 0; i < 248; i++) {
            lo8[j * 248 + i] = out[j * 250 + i];
            hi8[j * 248 + i] = out[(400 + j) * 250 + i];
        }
    /* along the columns, 16-byte path (ld 248; 248 and 246 rows: a scalar tail in every column) */
    for (int rows = 248; rows >= 246; rows -= 2) {
        CHECK_OK(nnpops__tf32_stack_cuda(rows, 400, 1, dx, 248, 0, dout, 248, 0, 400, 0, 0,
                                         g_stream));
        to_host(out, dout, sizeof(float) * 3 * 248 * 400);
        for (int64_t j = 0; j < 400; j++)
            for (int64_t i = 0; i < rows; i++) {
                const int64_t k = j * 248 + i;
                CHECK(memcmp(&out[k], &lo8[k], 4) == 0 && memcmp(&out[400 * 248 + k], &hi8[k], 4) == 0 &&
                      memcmp(&out[800 * 248 + k], &hi8[k], 4) == 0);
            }
    }
    /* along the rows by groups: g = 124 (16-byte path) and 62 (scalar), blocks [hi ; lo ; hi] */
    for (int64_t g = 124; g >= 62; g /= 2) {
        CHECK_OK(nnpops__tf32_stack_cuda(248, 400, 1, dx, 248, 0, dout, 3 * 248, 0, g, 1, 1,
                                         g_stream));
        to_host(out, dout, sizeof(float) * 3 * 248 * 400);
        CHECK(check_row_stack(out, hi8, lo8, 248, 400, 248, g) == 0);
    }
    printf("stack: the 16-byte paths equal the scalar path bit for bit; groups along the rows\n");
    cudaFree(dx);
    cudaFree(dout);
    free(x);
    free(out);
    free(hi8);
    free(lo8);
    return 0;
}

/* The elementwise steps fused with the stacking (bias + CELU forward, CELU' backward) against
 * the plain kernels followed by nnpops__tf32_stack_cuda: bit for bit, on the 16-byte path (ld 304)
 * and the scalar one (ld 301), 3 members of 40 columns. */
static int case_fused(void) {
    const int64_t w = 40, M = 3, width = M * w;
    for (int64_t ld = 304; ld >= 301; ld -= 3) {
        const int64_t n = 300, ld3 = nnpops__tf32_stack_ld(n), n3 = 3 * width * ld3;
        float *Z = malloc(sizeof(float) * ld * width), *G = malloc(sizeof(float) * ld * width);
        float *b = malloc(sizeof(float) * width);
        float *r1 = malloc(sizeof(float) * ld * width), *r2 = malloc(sizeof(float) * ld * width);
        float *s1 = malloc(sizeof(float) * n3), *s2 = malloc(sizeof(float) * n3);
        for (int64_t e = 0; e < ld * width; e++) {
            Z[e] = (float)(6 * urand() - 3);
            G[e] = (float)(2 * urand() - 1);
        }
        for (int64_t f = 0; f < width; f++) b[f] = (float)(urand() - 0.5);
        float *dZ1 = dup_to_device(Z, sizeof(float) * ld * width);
        float *dZ2 = dup_to_device(Z, sizeof(float) * ld * width);
        float *dG = dup_to_device(G, sizeof(float) * ld * width);
        float *db = dup_to_device(b, sizeof(float) * width);
        float *d31 = dalloc(sizeof(float) * n3), *d32 = dalloc(sizeof(float) * n3);
        CUDA_CHECK(cudaMemset(d31, 0, sizeof(float) * n3));
        CUDA_CHECK(cudaMemset(d32, 0, sizeof(float) * n3));
        /* forward: plain + stack vs fused */
        CHECK_OK(nnpops__bias_celu_cuda_f32(n, width, 1.7, db, dZ1, ld, g_stream));
        CHECK_OK(nnpops__tf32_stack_cuda(n, width, 1, dZ1, ld, 0, d31, ld3, 0, w, 0, 0, g_stream));
        CHECK_OK(nnpops__bias_celu_stack_cuda_f32(n, width, 1.7, db, dZ2, ld, w, d32, ld3,
                                                  g_stream));
        to_host(r1, dZ1, sizeof(float) * ld * width);
        to_host(r2, dZ2, sizeof(float) * ld * width);
        to_host(s1, d31, sizeof(float) * n3);
        to_host(s2, d32, sizeof(float) * n3);
        for (int64_t f = 0; f < width; f++)
            CHECK(memcmp(r1 + f * ld, r2 + f * ld, sizeof(float) * n) == 0);
        CHECK(memcmp(s1, s2, sizeof(float) * n3) == 0);
        /* backward from those activations: plain (in place) + stack vs fused (A unchanged) */
        CHECK_OK(nnpops__celu_backward_act_cuda_f32(n, width, 1.7, dG, ld, dZ1, ld, g_stream));
        CHECK_OK(nnpops__tf32_stack_cuda(n, width, 1, dZ1, ld, 0, d31, ld3, 0, w, 0, 0, g_stream));
        CHECK_OK(nnpops__celu_backward_act_stack_cuda_f32(n, width, 1.7, dG, ld, dZ2, ld, w, d32,
                                                          ld3, g_stream));
        to_host(r1, dZ2, sizeof(float) * ld * width);
        to_host(s1, d31, sizeof(float) * n3);
        to_host(s2, d32, sizeof(float) * n3);
        for (int64_t f = 0; f < width; f++)
            CHECK(memcmp(r1 + f * ld, r2 + f * ld, sizeof(float) * n) == 0); /* A unchanged */
        CHECK(memcmp(s1, s2, sizeof(float) * n3) == 0);
        printf("fused (ld %lld): bias + CELU and CELU' stacked equal plain + stack bit for bit\n",
               (long long)ld);
        cudaFree(dZ1);
        cudaFree(dZ2);
        cudaFree(dG);
        cudaFree(db);
        cudaFree(d31);
        cudaFree(d32);
        free(Z);
        free(G);
        free(b);
        free(r1);
        free(r2);
        free(s1);
        free(s2);
    }
    return 0;
}

typedef struct shape {
    const char *what;
    int trans_b;
    int64_t m, n, k, kg, batch; /* kg: the stacking group of the inner dimension */
    double beta;
    int interleave; /* batch entry t's B is rows t k .. of one (batch k x n) matrix (the model's
                     * backward weights, stk_b in potentials/ani/ani_cuda.c) */
} shape;

/* worst |C - ref| / (sum |a b| + |beta C0|) over all elements */
static double worst_rel(const shape *s, const float *A, const float *B, const float *C0,
                        const float *C, int64_t lda, int64_t ldb, int64_t ldc, int64_t sa,
                        int64_t sb, int64_t sc) {
    double worst = 0;
    for (int64_t t = 0; t < s->batch; t++)
        for (int64_t j = 0; j < s->n; j++)
            for (int64_t i = 0; i < s->m; i++) {
                double ref = s->beta * C0[t * sc + j * ldc + i], mag = fabs(ref);
                for (int64_t l = 0; l < s->k; l++) {
                    const double a = A[t * sa + l * lda + i];
                    const double b = s->trans_b ? B[t * sb + l * ldb + j] : B[t * sb + j * ldb + l];
                    ref += a * b;
                    mag += fabs(a * b);
                }
                const double r = fabs(C[t * sc + j * ldc + i] - ref) / (mag > 0 ? mag : 1);
                if (r > worst) worst = r;
            }
    return worst;
}

static int case_gemm(void) {
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    const shape shapes[] = {
        {"first layer forward (300 atoms, 1008 -> 8 x 256)", 0, 300, 2048, 1008, 1008, 1, 0.0},
        {"forward, inner groups of 504 (300 atoms, 1008 -> 64)", 0, 300, 64, 1008, 504, 1, 0.0},
        {"hidden layer forward, 8 members (200 atoms, 256 -> 192)", 0, 200, 192, 256, 256, 8, 0.0},
        {"hidden layer backward, 8 members (200 atoms, 192 -> 256, op(B) = B^T)", 1, 200, 256, 192,
         192, 8, 0.0},
        {"first layer backward (97 atoms, 8 x 256 -> 1008, op(B) = B^T, stacked by member), beta 1",
         1, 97, 1008, 2048, 256, 1, 1.0},
        {"hidden layer backward as the model runs it (200 atoms, 192 -> 256, 8 members' B "
         "interleaved in one K-major matrix)", 0, 200, 256, 192, 192, 8, 0.0, 1},
        {"first layer backward as the model runs it (97 atoms, 8 x 256 -> 1008, K-major B stacked "
         "by member)", 0, 97, 1008, 2048, 256, 1, 0.0},
    };
    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
        const shape *s = &shapes[q];
        const int64_t lda = s->m + 3, ldc = s->m + 5;
        const int64_t ldb = s->trans_b ? s->n : s->interleave ? s->batch * s->k : s->k;
        const int64_t sa = lda * s->k, sb = s->interleave ? s->k : ldb * (s->trans_b ? s->k : s->n),
                      sc = ldc * s->n;
        const size_t na = (size_t)(sa * s->batch),
                     nb = (size_t)(s->interleave ? ldb * s->n : sb * s->batch),
                     nc = (size_t)(sc * s->batch);
        float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb),
              *C0 = malloc(sizeof(float) * nc), *C = malloc(sizeof(float) * nc),
              *Ct = malloc(sizeof(float) * nc);
        for (size_t e = 0; e < na; e++) A[e] = (float)(4 * urand() - 1); /* activation-like */
        for (size_t e = 0; e < nb; e++) B[e] = (float)((2 * urand() - 1) * 0.1);
        for (size_t e = 0; e < nc; e++) C0[e] = (float)(2 * urand() - 1);
        float *dA = dup_to_device(A, sizeof(float) * na), *dB = dup_to_device(B, sizeof(float) * nb);
        /* B stacked as the model's weights are: along the inner dimension, [hi ; lo ; hi] */
        float *dB3 = dalloc(sizeof(float) * 3 * nb);
        float *dC = dup_to_device(C0, sizeof(float) * nc);
        const int64_t ldb3 = s->trans_b ? ldb : 3 * ldb;
        if (s->trans_b)
            CHECK_OK(nnpops__tf32_stack_cuda(s->n, s->k, s->batch, dB, ldb, sb, dB3, ldb3, 3 * sb,
                                             s->kg, 0, 1, g_stream));
        else if (s->interleave)
            CHECK_OK(nnpops__tf32_stack_cuda(ldb, s->n, 1, dB, ldb, 0, dB3, ldb3, 0, s->kg, 1, 1,
                                             g_stream));
        else
            CHECK_OK(nnpops__tf32_stack_cuda(s->k, s->n, s->batch, dB, ldb, sb, dB3, ldb3, 3 * sb,
                                             s->kg, 1, 1, g_stream));
        const size_t wb = nnpops__gemm_3xtf32_work_bytes(s->m, s->k, s->batch);
        void *work = dalloc(wb);
        CHECK_OK(nnpops__gemm_cuda_3xtf32(h, g_stream, 0, s->trans_b, s->m, s->n, s->k, s->kg, dA,
                                          lda, sa, dB3, ldb3, 3 * sb, s->beta, dC, ldc, sc,
                                          s->batch, work, wb));
        to_host(C, dC, sizeof(float) * nc);
        /* plain TF32 of the same inputs */
        CUDA_CHECK(cudaMemcpy(dC, C0, sizeof(float) * nc, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        cublasSetStream(h, g_stream);
        const float one = 1.0f, bet = (float)s->beta;
        const cublasOperation_t tb = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
        CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, tb, (int)s->m, (int)s->n, (int)s->k, &one,
                                         dA, CUDA_R_32F, (int)lda, sa, dB, CUDA_R_32F, (int)ldb, sb,
                                         &bet, dC, CUDA_R_32F, (int)ldc, sc, (int)s->batch,
                                         CUBLAS_COMPUTE_32F_FAST_TF32,
                                         CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
        to_host(Ct, dC, sizeof(float) * nc);
        const double e3 = worst_rel(s, A, B, C0, C, lda, ldb, ldc, sa, sb, sc);
        const double e1 = worst_rel(s, A, B, C0, Ct, lda, ldb, ldc, sa, sb, sc);
        printf("%s: 3xTF32 worst error / sum|terms| %.2e, plain TF32 %.2e (ratio %.0f)\n", s->what,
               e3, e1, e1 / (e3 > 0 ? e3 : 1e-300));
        CHECK(e3 <= 2e-6);
        CHECK(e1 >= 20 * e3);
        cudaFree(dA);
        cudaFree(dB);
        cudaFree(dB3);
        cudaFree(dC);
        cudaFree(work);
        free(A);
        free(B);
        free(C0);
        free(C);
        free(Ct);
    }
    cublasDestroy(h);
    return 0;
}

/* nx * ny * nz water molecules (water.h, no jitter), a new random box at every call */
static int64_t water_box(int nx, int ny, int nz, int32_t *z, double *x, double *cell) {
    const uint64_t seed = (uint64_t)(urand() * 9007199254740992.0);
    return test_water_box(nx, ny, nz, 0, seed, 0.0, z, x, cell);
}

static const char *const tc_words[] = {"off", "on", "auto"};

/* tc: 0 off, 1 on, 2 auto; det: option deterministic; member: option ensemble_member (-1: the
 * ensemble mean) */
static void run_member(const char *prec_name, nnpops_precision prec, int tc, int det, int member,
                       int64_t n, const int32_t *z, const double *x, const double *cell, double *e,
                       double *f) {
    nnpops_model *m;
    CHECK_OK(nnpops_model_load("ani2x", "cuda", prec, &m));
    nnpops_context *ctx;
    CHECK_OK(nnpops_context_create(m, &ctx));
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "tensor_cores", tc_words[tc]));
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "deterministic", det ? "on" : "off"));
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_ENSEMBLE_MEMBER, member));
    const uint8_t pbc[3] = {1, 1, 1};
    nnpops_inputs in = {sizeof in, n, -1, 1, z, x, NULL, cell, pbc};
    nnpops_outputs out = {sizeof out, e, f, NULL, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    printf("ani2x %s, %lld atoms, tensor_cores %s, deterministic %s, member %d: energy %.9f eV\n",
           prec_name, (long long)n, tc_words[tc], det ? "on" : "off", member, *e);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
}
static void run_model(const char *prec_name, nnpops_precision prec, int tc, int det, int64_t n,
                      const int32_t *z, const double *x, const double *cell, double *e,
                      double *f) {
    run_member(prec_name, prec, tc, det, -1, n, z, x, cell, e, f);
}

static int case_model(void) {
    int32_t z[288];
    double x[3 * 288], cell[9];
    const int64_t n = water_box(6, 4, 4, z, x, cell);
    double e64, e_on, e_off;
    double *f64 = malloc(sizeof(double) * 3 * n), *f_on = malloc(sizeof(double) * 3 * n),
           *f_off = malloc(sizeof(double) * 3 * n);
    /* member: the ensemble mean, then one member alone (member 5: the stacked weights are read
     * from that member's block on) */
    for (int member = -1; member <= 5; member += 6) {
        run_member("float64", NNPOPS_FLOAT64, 1, 0, member, n, z, x, cell, &e64, f64);
        run_member("float32", NNPOPS_FLOAT32, 1, 0, member, n, z, x, cell, &e_on, f_on);
        run_member("float32", NNPOPS_FLOAT32, 0, 0, member, n, z, x, cell, &e_off, f_off);
        double df_on = 0, df_off = 0, differ = 0;
        for (int64_t k = 0; k < 3 * n; k++) {
            df_on = fmax(df_on, fabs(f_on[k] - f64[k]));
            df_off = fmax(df_off, fabs(f_off[k] - f64[k]));
            differ = fmax(differ, fabs(f_on[k] - f_off[k]));
        }
        printf("%lld atoms, member %d: |dE|/N on %.2e off %.2e eV; max |dF| on %.2e off %.2e eV/A; "
               "on vs off max |dF| %.2e\n",
               (long long)n, member, fabs(e_on - e64) / n, fabs(e_off - e64) / n, df_on, df_off,
               differ);
        CHECK(fabs(e_on - e64) / n <= 1e-5 && fabs(e_off - e64) / n <= 1e-5);
        CHECK(df_on <= 1e-3 && df_off <= 1e-3);
        CHECK(differ > 0 || e_on != e_off);
    }
    free(f64);
    free(f_on);
    free(f_off);
    return 0;
}

/* tensor_cores auto (the default) puts every float32 species with more than NNPOPS__SG_MAX_COLS
 * (96) atoms, the cuBLAS path, on the tensor cores: with option deterministic on (bitwise
 * reproducible), auto equals on bit for bit and differs from off, on the 288-atom box (192 H on the
 * cuBLAS path, 96 O on the small-n path, which the option does not touch) and on a 36,864-atom box
 * (24,576 H, 12,288 O) */
static int case_auto(void) {
    enum { NMAX = 36864 };
    CHECK(NNPOPS__SG_MAX_COLS < 192);
    int32_t *z = malloc(sizeof(int32_t) * NMAX);
    double *x = malloc(sizeof(double) * 3 * NMAX), cell[9];
    double *f[3];
    for (int k = 0; k < 3; k++) f[k] = malloc(sizeof(double) * 3 * NMAX);
    for (int big = 0; big < 2; big++) {
        const int64_t n = big ? water_box(32, 24, 16, z, x, cell) : water_box(6, 4, 4, z, x, cell);
        double e[3];
        for (int tc = 0; tc < 3; tc++) run_model("float32", NNPOPS_FLOAT32, tc, 1, n, z, x, cell, &e[tc], f[tc]);
        CHECK(e[2] == e[1]);
        CHECK(memcmp(f[2], f[1], sizeof(double) * 3 * (size_t)n) == 0);
        CHECK(e[2] != e[0] || memcmp(f[2], f[0], sizeof(double) * 3 * (size_t)n) != 0);
        printf("%lld atoms: auto equals %s bit for bit and differs from %s\n", (long long)n,
               tc_words[1], tc_words[0]);
    }
    for (int k = 0; k < 3; k++) free(f[k]);
    free(z);
    free(x);
    return 0;
}

/* Species spread over several network chunks (NNPOPS__ANI_CUDA_CHUNK atoms each): a batch of three
 * copies of one periodic box of 6,144 water molecules (36,864 H in all: two chunks, the third
 * copy's H straddling the boundary), float64 and float32 (tensor_cores auto: on for both species),
 * option deterministic on.  Each copy's energy and forces must equal the first copy's to rounding
 * (float64: |dE|/N <= 1e-10 eV, max |dF| <= 1e-8 eV/A; float32: 1e-6 eV, 1e-4 eV/A): a wrong chunk
 * offset or column range shows in the third copy. */
static int case_chunks(void) {
    enum { NW = 16 * 16 * 24, N1 = 3 * NW, N = 3 * N1 };
    CHECK(3 * 2 * NW > NNPOPS__ANI_CUDA_CHUNK && 2 * 2 * NW < NNPOPS__ANI_CUDA_CHUNK);
    int32_t *z = malloc(sizeof(int32_t) * N), *batch = malloc(sizeof(int32_t) * N);
    double *x = malloc(sizeof(double) * 3 * N), *f = malloc(sizeof(double) * 3 * N);
    double cells[27];
    uint8_t pbc[9];
    CHECK(water_box(16, 16, 24, z, x, cells) == N1);
    for (int c = 1; c < 3; c++) {
        memcpy(z + (size_t)c * N1, z, sizeof(int32_t) * N1);
        memcpy(x + (size_t)c * 3 * N1, x, sizeof(double) * 3 * N1);
        memcpy(cells + 9 * c, cells, sizeof(double) * 9);
    }
    for (int64_t i = 0; i < N; i++) batch[i] = (int32_t)(i / N1);
    memset(pbc, 1, sizeof pbc);
    for (int p = 0; p < 2; p++) {
        const nnpops_precision prec = p ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64;
        const double tol_e = p ? 1e-6 : 1e-10, tol_f = p ? 1e-4 : 1e-8;
        nnpops_model *m;
        CHECK_OK(nnpops_model_load("ani2x", "cuda", prec, &m));
        nnpops_context *ctx;
        CHECK_OK(nnpops_context_create(m, &ctx));
        CHECK_OK(nnpops_context_set_option_by_name(ctx, "deterministic", "on"));
        nnpops_inputs in = {sizeof in, N, -1, 3, z, x, batch, cells, pbc};
        double e[3];
        nnpops_outputs out = {sizeof out, e, f, NULL, NULL, NULL, NULL};
        CHECK_OK(nnpops_compute(ctx, &in, &out));
        double worst_f = 0;
        for (int c = 1; c < 3; c++)
            for (int64_t k = 0; k < 3 * N1; k++) {
                const double d = fabs(f[(size_t)c * 3 * N1 + k] - f[k]);
                if (d > worst_f) worst_f = d;
            }
        const double de = fmax(fabs(e[1] - e[0]), fabs(e[2] - e[0])) / N1;
        printf("%s, 3 x %d atoms (%d H: chunks of %d): energies %.9f %.9f %.9f eV; copies against "
               "the first: |dE|/N %.3e eV, max |dF| %.3e eV/A\n",
               p ? "float32" : "float64", (int)N1, 3 * 2 * NW, NNPOPS__ANI_CUDA_CHUNK, e[0], e[1],
               e[2], de, worst_f);
        CHECK(de <= tol_e);
        CHECK(worst_f <= tol_f);
        nnpops_context_destroy(ctx);
        nnpops_model_destroy(m);
    }
    free(z);
    free(batch);
    free(x);
    free(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s stack|fused|gemm|model|auto|chunks\n", argv[0]);
        return 2;
    }
    gpu_init_or_skip();
    if (!strcmp(argv[1], "stack")) return case_stack();
    if (!strcmp(argv[1], "fused")) return case_fused();
    if (!strcmp(argv[1], "gemm")) return case_gemm();
    if (!strcmp(argv[1], "model")) return case_model();
    if (!strcmp(argv[1], "auto")) return case_auto();
    if (!strcmp(argv[1], "chunks")) return case_chunks();
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
