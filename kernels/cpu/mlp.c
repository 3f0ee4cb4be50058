/*
 * mlp.c - dense layers and the CELU activation on the CPU (reference and fallback for the CUDA
 * twins in kernels/cuda/), in float and double.
 *
 * Layout (see kernels.h): activations are feature-major, X[f * ld + r] for atom column r, so one
 * layer over a block of atoms is the row-major product
 *     Y (out x n) = W (out x in) . X (in x n) + b
 * and its adjoint with respect to the input
 *     dX (in x n) = W^T (in x out) . dY (out x n).
 * Both are one blocked GEMM, C (m x n) = A (m x kk) . B (kk x n) (+ bias), with A addressed
 * through strides (A[i][k] = a[i * sa_i + k * sa_k]), so W serves untransposed (forward) and
 * transposed (backward) without a copy.  The micro-kernel keeps an MB x (NV vectors) block of C in
 * registers: per k it broadcasts MB elements of A and loads NV vectors of row k of B (atoms), a
 * multiply and an add per element (no FMA, no reassociation): every element of C is
 * bias + sum over k in increasing order, rounded after each operation, so the result is the same
 * bit for bit whatever the vector width.
 *
 * Columns are processed in whole vectors: the dense kernels read the padding columns
 * n <= r < round_up(n, NNPOPS__DENSE_PAD) of B and write those of C (their values are meaningless
 * but must be readable/writable: every ld must be at least round_up(n, NNPOPS__DENSE_PAD)).
 *
 * Instruction sets: a baseline variant (16-byte vectors: SSE2 on x86-64, NEON/scalar elsewhere)
 * and, on x86-64 with GCC or Clang, a 32-byte AVX variant chosen at run time with
 * __builtin_cpu_supports (same results, see above).  GCC vector extensions express the vectors.
 *
 * The file includes itself: level 1 once per precision (REAL = float -> *_f32, double -> *_f64),
 * level 2 once per instruction set inside each precision.
 */
#if !defined(NNPOPS__MLP_LEVEL)

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define NNPOPS__MLP_HAVE_AVX 1
static int nnpops__mlp_avx(void) { return __builtin_cpu_supports("avx"); }
#else
#define NNPOPS__MLP_HAVE_AVX 0
#endif

#define NNPOPS__MLP_LEVEL 1

#define REAL float
#define FN(name) name##_f32
#define M(fn) fn##f /* the float version of a <math.h> function */
#include "mlp.c"
#undef REAL
#undef FN
#undef M

#define REAL double
#define FN(name) name##_f64
#define M(fn) fn
#include "mlp.c"
#undef REAL
#undef FN
#undef M

#undef NNPOPS__MLP_LEVEL

#elif NNPOPS__MLP_LEVEL == 1 /* ---- one precision ---------------------------------------------- */

#undef NNPOPS__MLP_LEVEL
#define NNPOPS__MLP_LEVEL 2

#define VB 16
#define NM(name) FN(name##_base)
#define TARGET
#include "mlp.c"
#undef VB
#undef NM
#undef TARGET

#if NNPOPS__MLP_HAVE_AVX
#define VB 32
#define NM(name) FN(name##_avx)
#define TARGET __attribute__((target("avx")))
#include "mlp.c"
#undef VB
#undef NM
#undef TARGET
#endif

#undef NNPOPS__MLP_LEVEL
#define NNPOPS__MLP_LEVEL 1

static void FN(gemm)(int64_t m, int64_t n, int64_t kk, const REAL *a, int64_t sa_i, int64_t sa_k,
                     const REAL *b, int64_t ldb, const REAL *bias, REAL *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
#if NNPOPS__MLP_HAVE_AVX
    /* a block of at most one 16-byte vector of columns wastes less in the narrow variant */
    if (n * (int64_t)sizeof(REAL) > 16 && nnpops__mlp_avx()) {
        FN(gemm_avx)(m, n, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
        return;
    }
#endif
    FN(gemm_base)(m, n, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}

void FN(nnpops__dense_forward_cpu)(int64_t n, int64_t in, int64_t out, const REAL *W,
                                   const REAL *b, const REAL *X, int64_t ldx, REAL *Y,
                                   int64_t ldy) {
    FN(gemm)(out, n, in, W, in, 1, X, ldx, b, Y, ldy);
}

void FN(nnpops__dense_backward_cpu)(int64_t n, int64_t in, int64_t out, const REAL *W,
                                    const REAL *dY, int64_t ldy, REAL *dX, int64_t ldx) {
    FN(gemm)(in, n, out, W, 1, in, dY, ldy, NULL, dX, ldx);
}

void FN(nnpops__celu_forward_cpu)(int64_t n, int64_t width, double alpha, const REAL *Z,
                                  int64_t ldz, REAL *A, int64_t lda) {
    const REAL al = (REAL)alpha, inv = (REAL)(1.0 / alpha);
    for (int64_t f = 0; f < width; f++) {
        const REAL *z = Z + f * ldz;
        REAL *a = A + f * lda;
        for (int64_t r = 0; r < n; r++) {
            const REAL x = z[r];
            a[r] = x > 0 ? x : al * M(expm1)(x * inv);
        }
    }
}

void FN(nnpops__celu_backward_cpu)(int64_t n, int64_t width, double alpha, const REAL *Z,
                                   int64_t ldz, const REAL *dA, int64_t ldda, REAL *dZ,
                                   int64_t lddz) {
    const REAL inv = (REAL)(1.0 / alpha);
    for (int64_t f = 0; f < width; f++) {
        const REAL *z = Z + f * ldz;
        const REAL *da = dA + f * ldda;
        REAL *dz = dZ + f * lddz;
        for (int64_t r = 0; r < n; r++) {
            const REAL x = z[r];
            dz[r] = x > 0 ? da[r] : da[r] * M(exp)(x * inv);
        }
    }
}

#elif NNPOPS__MLP_LEVEL == 2 /* ---- one instruction set of one precision ---------------------- */

/* VL values per vector; MB rows by up to NVMAX vectors of C stay in registers (16 registers:
 * 4 x 3 accumulators, 3 loaded vectors, 1 broadcast). */
#define VL ((int)(VB / sizeof(REAL)))
#define MB 4
#define NVMAX 3

typedef REAL NM(vec) __attribute__((vector_size(VB)));
/* the same vector at element alignment, for loads and stores anywhere in the matrices */
typedef REAL NM(uvec) __attribute__((vector_size(VB), aligned(sizeof(REAL)), may_alias));

/* C[0..mb) x [0..nv vectors) of a column panel: mb, nv are compile-time constants after
 * inlining into the dispatch below, so the loops unroll and acc lives in registers. */
static inline __attribute__((always_inline)) TARGET void NM(micro)(
    const int mb, const int nv, int accumulate, int64_t kk, const REAL *a, int64_t sa_i,
    int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias, REAL *c, int64_t ldc) {
    NM(vec) acc[MB][NVMAX];
    if (accumulate) {
        for (int i = 0; i < mb; i++)
            for (int v = 0; v < nv; v++) acc[i][v] = *(const NM(uvec) *)(c + i * ldc + v * VL);
    } else {
        for (int i = 0; i < mb; i++) {
            const REAL init = bias ? bias[i] : (REAL)0;
            for (int v = 0; v < nv; v++) acc[i][v] = (NM(vec)){0} + init;
        }
    }
    for (int64_t k = 0; k < kk; k++) {
        NM(vec) bv[NVMAX];
        const REAL *brow = b + k * ldb;
        for (int v = 0; v < nv; v++) bv[v] = *(const NM(uvec) *)(brow + v * VL);
        for (int i = 0; i < mb; i++) {
            const REAL ai = a[i * sa_i + k * sa_k];
            for (int v = 0; v < nv; v++) acc[i][v] += ai * bv[v];
        }
    }
    for (int i = 0; i < mb; i++)
        for (int v = 0; v < nv; v++) *(NM(uvec) *)(c + i * ldc + v * VL) = acc[i][v];
}

static TARGET void NM(micro_4x1)(int accumulate, int64_t kk, const REAL *a, int64_t sa_i,
                                 int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias,
                                 REAL *c, int64_t ldc) {
    NM(micro)(4, 1, accumulate, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}
static TARGET void NM(micro_4x2)(int accumulate, int64_t kk, const REAL *a, int64_t sa_i,
                                 int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias,
                                 REAL *c, int64_t ldc) {
    NM(micro)(4, 2, accumulate, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}
static TARGET void NM(micro_4x3)(int accumulate, int64_t kk, const REAL *a, int64_t sa_i,
                                 int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias,
                                 REAL *c, int64_t ldc) {
    NM(micro)(4, 3, accumulate, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}
static TARGET void NM(micro_1x1)(int accumulate, int64_t kk, const REAL *a, int64_t sa_i,
                                 int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias,
                                 REAL *c, int64_t ldc) {
    NM(micro)(1, 1, accumulate, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}
static TARGET void NM(micro_1x2)(int accumulate, int64_t kk, const REAL *a, int64_t sa_i,
                                 int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias,
                                 REAL *c, int64_t ldc) {
    NM(micro)(1, 2, accumulate, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}
static TARGET void NM(micro_1x3)(int accumulate, int64_t kk, const REAL *a, int64_t sa_i,
                                 int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias,
                                 REAL *c, int64_t ldc) {
    NM(micro)(1, 3, accumulate, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}

/* C (m x n) = A . B + bias over whole vectors of columns (see the padding rule above).  The
 * k range is cut into chunks of KC; per chunk, each block of MB rows of A is packed into a
 * contiguous [k][MB] tile (whatever the strides of A, so W^T costs no more than W) and swept over
 * all column panels of B.  C is reloaded between chunks (the first adds the bias), so each element
 * is still summed in k order.  Rows beyond the last full block use the 1-row kernels. */
#define KC ((int64_t)(sizeof(REAL) == 4 ? 64 : 256)) /* rows of a k chunk, tuned on AMD EPYC (Zen 4) */
static TARGET void NM(gemm)(int64_t m, int64_t n, int64_t kk, const REAL *a, int64_t sa_i,
                            int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias, REAL *c,
                            int64_t ldc) {
    const int64_t nvec = (n + VL - 1) / VL;
    REAL tile[256 * MB] __attribute__((aligned(64))); /* KC * MB at most */
    for (int64_t k0 = 0; k0 < kk; k0 += KC) {
        const int64_t kc = kk - k0 < KC ? kk - k0 : KC;
        const int acc = k0 > 0;
        const REAL *ak = a + k0 * sa_k;
        const REAL *bk = b + k0 * ldb;
        int64_t i0 = 0;
        for (; i0 + MB <= m; i0 += MB) {
            const REAL *ap = ak + i0 * sa_i;
            if (sa_i == 1) {
                /* A = W^T: one cache line per k, lines far apart (a stride of a whole weight
                 * row), which hardware prefetchers do not follow: prefetch ahead by hand */
                for (int64_t k = 0; k < kc; k++) {
                    __builtin_prefetch(ap + (k + 16) * sa_k);
                    for (int i = 0; i < MB; i++) tile[k * MB + i] = ap[k * sa_k + i];
                }
            } else {
                for (int i = 0; i < MB; i++)
                    for (int64_t k = 0; k < kc; k++) tile[k * MB + i] = ap[i * sa_i + k * sa_k];
            }
            const REAL *biasp = bias ? bias + i0 : NULL;
            for (int64_t v0 = 0; v0 < nvec; v0 += NVMAX) {
                const int64_t nv = nvec - v0 < NVMAX ? nvec - v0 : NVMAX;
                const REAL *bp = bk + v0 * VL;
                REAL *cp = c + i0 * ldc + v0 * VL;
                if (nv == 3)
                    NM(micro_4x3)(acc, kc, tile, 1, MB, bp, ldb, biasp, cp, ldc);
                else if (nv == 2)
                    NM(micro_4x2)(acc, kc, tile, 1, MB, bp, ldb, biasp, cp, ldc);
                else
                    NM(micro_4x1)(acc, kc, tile, 1, MB, bp, ldb, biasp, cp, ldc);
            }
        }
        for (int64_t i = i0; i < m; i++) {
            const REAL *ap = ak + i * sa_i;
            const REAL *biasp = bias ? bias + i : NULL;
            for (int64_t v0 = 0; v0 < nvec; v0 += NVMAX) {
                const int64_t nv = nvec - v0 < NVMAX ? nvec - v0 : NVMAX;
                const REAL *bp = bk + v0 * VL;
                REAL *cp = c + i * ldc + v0 * VL;
                if (nv == 3)
                    NM(micro_1x3)(acc, kc, ap, sa_i, sa_k, bp, ldb, biasp, cp, ldc);
                else if (nv == 2)
                    NM(micro_1x2)(acc, kc, ap, sa_i, sa_k, bp, ldb, biasp, cp, ldc);
                else
                    NM(micro_1x1)(acc, kc, ap, sa_i, sa_k, bp, ldb, biasp, cp, ldc);
            }
        }
    }
}
#undef KC

#undef VL
#undef MB
#undef NVMAX

#endif /* NNPOPS__MLP_LEVEL */
