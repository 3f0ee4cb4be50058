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
 * registers: per k it broadcasts MB elements of A and loads NV vectors of row k of B (atoms), and
 * adds their products (no reassociation): every element of C is bias + sum over k in increasing
 * order.  In the 16-byte variants a multiply and an add per element, rounded after each
 * operation; in the 32- and 64-byte variants (AVX2 + FMA, AVX-512F: machines that have fused
 * multiply-adds) one fused multiply-add per element, rounded once (the FMA instructions, written
 * as intrinsics: no compiler's contraction choices involved; nnpops__dense_variant_fused_cpu says
 * which variants fuse).  Within each of the two kinds the result is the same bit for bit whatever
 * the vector width, and the dense kernels' own choice never mixes them on one machine (the
 * 16-byte variants only run where the machine has neither).  The fused form made a water box's
 * step 10 to 15 % faster in both precisions; the CELU and the AEV stay unfused.
 *
 * Columns are processed in whole vectors: the dense kernels may read the padding columns
 * n <= r < round_up(n, NNPOPS__DENSE_PAD) of B and write those of C (their values are meaningless
 * but must be readable/writable: every ld must be at least round_up(n, NNPOPS__DENSE_PAD)).
 *
 * Few columns (a block of a few atoms of one species: n <= ROWS_MAX_N) take a second kernel
 * that turns the vectors the other way (gemm_rows below): a vector holds consecutive ROWS of C and
 * the columns are broadcast one by one, so that no lane computes a padding column.  A's rows are
 * read in place where they are contiguous (the backward, A = W^T), else packed per chunk of k by
 * VL x VL transposes in registers (the forward, A = W: each row read along k).  Each element is
 * formed with the same operations in the same order, so both kernels give the same bits; on a
 * 13-atom molecule the step takes about half the time it takes with the blocked kernel alone.
 *
 * CELU: e^y - 1 (forward) and e^y (backward) in vectors of the same widths (exp_neg below: range
 * reduction by ln2 and a Taylor polynomial, within 2 units in the last place of libm's expm1 and
 * exp), in place of a libm call per element, which took about a third of a water box's step.
 *
 * Instruction sets: a baseline variant (16-byte vectors: SSE2 on x86-64, NEON/scalar elsewhere)
 * and, on x86-64 with GCC or Clang, 32-byte AVX and 64-byte AVX-512F variants chosen at run time
 * with __builtin_cpu_supports (same results, see above).  GCC vector extensions express the
 * vectors.
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

#if NNPOPS__CPU_X86
#include <immintrin.h>
int nnpops__cpu_isa(void) {
    if (__builtin_cpu_supports("avx512f")) return 2;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
}
#else
int nnpops__cpu_isa(void) { return 0; }
#endif

/* The few-column kernel (gemm_rows): in groups of at most ROWS_MAX_G columns by blocks of at most
 * ROWS_MAX_R vectors of rows.  It is chosen (gemm) for at most ROWS_MAX_N(isa) columns: about
 * where the blocked kernel catches up on ANI's layer shapes (forward and backward, first and later
 * layers; tests/bench/bench_dense_cpu.c times both). */
#define ROWS_MAX_N(isa) ((int64_t)(sizeof(REAL) == 4 ? 12 : (isa) == 2 ? 16 : 24))
#define ROWS_MAX_G 4
#define ROWS_MAX_R 8

/* A two-vector shuffle with constant indices (element k of the result: element idx_k of a ++ b). */
#if defined(__clang__)
#define NNPOPS__SHUF(ivec, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define NNPOPS__SHUF(ivec, a, b, ...) __builtin_shuffle(a, b, (ivec){__VA_ARGS__})
#endif

#define NNPOPS__MLP_LEVEL 1

#define REAL float
#define REAL_SIZE 4
#define FN(name) name##_f32
#define M(fn) fn##f /* the float version of a <math.h> function */
#include "mlp.c"
#undef REAL
#undef REAL_SIZE
#undef FN
#undef M

#define REAL double
#define REAL_SIZE 8
#define FN(name) name##_f64
#define M(fn) fn
#include "mlp.c"
#undef REAL
#undef REAL_SIZE
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

#if NNPOPS__CPU_X86
#define MLP_FUSE 1
#define VB 32
#define NM(name) FN(name##_avx)
#define TARGET __attribute__((target("avx2,fma")))
#include "mlp.c"
#undef VB
#undef NM
#undef TARGET

#define VB 64
#define NM(name) FN(name##_avx512)
#define TARGET __attribute__((target("avx512f")))
#include "mlp.c"
#undef VB
#undef NM
#undef TARGET
#undef MLP_FUSE
#endif

#undef NNPOPS__MLP_LEVEL
#define NNPOPS__MLP_LEVEL 1

/* A vector of columns never passes the padding: 64-byte vectors hold 16 floats. */
_Static_assert(NNPOPS__DENSE_PAD % 16 == 0, "NNPOPS__DENSE_PAD must hold a 64-byte float vector");

/* The variants of the GEMM (nnpops__dense_gemm_variant_cpu_*): each with the vector width it needs
 * (isa: the machine's, nnpops__cpu_isa); 0 when it is not available. */
typedef void (*FN(gemm_fn))(int64_t m, int64_t n, int64_t kk, const REAL *a, int64_t sa_i,
                            int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias, REAL *c,
                            int64_t ldc);
static int FN(gemm_variant)(int isa, int variant, int64_t m, int64_t n, int64_t kk,
                            const REAL *a, int64_t sa_i, int64_t sa_k, const REAL *b, int64_t ldb,
                            const REAL *bias, REAL *c, int64_t ldc) {
    static const struct {
        FN(gemm_fn) fn;
        int isa;
    } table[] = {
        [NNPOPS__GEMM_BLOCKED_BASE] = {FN(gemm_base), 0},
        [NNPOPS__GEMM_ROWS_BASE] = {FN(gemm_rows_base), 0},
#if NNPOPS__CPU_X86
        [NNPOPS__GEMM_BLOCKED_AVX] = {FN(gemm_avx), 1},
        [NNPOPS__GEMM_ROWS_AVX] = {FN(gemm_rows_avx), 1},
        [NNPOPS__GEMM_BLOCKED_AVX512] = {FN(gemm_avx512), 2},
        [NNPOPS__GEMM_ROWS_AVX512] = {FN(gemm_rows_avx512), 2},
#endif
    };
    if (variant < 0 || variant >= (int)(sizeof table / sizeof *table) || !table[variant].fn ||
        table[variant].isa > isa)
        return 0;
    table[variant].fn(m, n, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
    return 1;
}

/* The dense kernels' choice (timed by bench_dense_cpu): few columns (at most
 * ROWS_MAX_N) in rows (gemm_rows), else blocked; the widest vectors the machine runs, but 16 bytes
 * for a block of at most one 16-byte vector of columns (less waste), and 32 for the few-column
 * kernel where it packs floats (it has no 16 x 16 transposes). */
static void FN(gemm)(int64_t m, int64_t n, int64_t kk, const REAL *a, int64_t sa_i, int64_t sa_k,
                     const REAL *b, int64_t ldb, const REAL *bias, REAL *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    const int isa = nnpops__cpu_isa();
    int variant;
    if (n <= ROWS_MAX_N(isa))
        variant = isa == 2 && (sizeof(REAL) == 8 || sa_i == 1) ? NNPOPS__GEMM_ROWS_AVX512
                  : isa >= 1                                  ? NNPOPS__GEMM_ROWS_AVX
                                                              : NNPOPS__GEMM_ROWS_BASE;
    else if (isa == 2)
        variant = NNPOPS__GEMM_BLOCKED_AVX512;
    else
        variant = isa == 1 && n * (int64_t)sizeof(REAL) > 16 ? NNPOPS__GEMM_BLOCKED_AVX
                                                              : NNPOPS__GEMM_BLOCKED_BASE;
    FN(gemm_variant)(isa, variant, m, n, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}

int FN(nnpops__dense_variant_fused_cpu)(int variant) {
    /* the 32- and 64-byte variants (built on x86 only) fuse their products (the header) */
    return NNPOPS__CPU_X86 &&
           (variant == NNPOPS__GEMM_BLOCKED_AVX || variant == NNPOPS__GEMM_ROWS_AVX ||
            variant == NNPOPS__GEMM_BLOCKED_AVX512 || variant == NNPOPS__GEMM_ROWS_AVX512 ||
            (variant == NNPOPS__GEMM_AUTO && nnpops__cpu_isa() >= 1));
}

int FN(nnpops__dense_gemm_variant_cpu)(int variant, int64_t m, int64_t n, int64_t kk,
                                       const REAL *a, int64_t sa_i, int64_t sa_k, const REAL *b,
                                       int64_t ldb, const REAL *bias, REAL *c, int64_t ldc) {
    if (variant == NNPOPS__GEMM_AUTO) {
        FN(gemm)(m, n, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
        return 1;
    }
    if (m <= 0 || n <= 0) return 1;
    return FN(gemm_variant)(nnpops__cpu_isa(), variant, m, n, kk, a, sa_i, sa_k, b, ldb, bias, c,
                            ldc);
}

void FN(nnpops__dense_forward_cpu)(int64_t n, int64_t in, int64_t out, const REAL *W,
                                   const REAL *b, const REAL *X, int64_t ldx, REAL *Y,
                                   int64_t ldy) {
    FN(gemm)(out, n, in, W, in, 1, X, ldx, b, Y, ldy);
}

void FN(nnpops__dense_pack_panels_cpu)(int64_t in, int64_t out, const REAL *W, REAL *Wp) {
    for (int64_t p = 0; p < out; p += NNPOPS__DENSE_PANEL) {
        const int64_t pw = out - p < NNPOPS__DENSE_PANEL ? out - p : NNPOPS__DENSE_PANEL;
        REAL *d = Wp + p * in;
        for (int64_t k = 0; k < in; k++)
            for (int64_t i = 0; i < pw; i++) d[k * pw + i] = W[(p + i) * in + k];
    }
}

/* Panel by panel, A = the panel's [in][pw] (rows contiguous: read in place, no packing). */
void FN(nnpops__dense_forward_packed_cpu)(int64_t n, int64_t in, int64_t out, const REAL *W,
                                          const REAL *Wp, const REAL *b, const REAL *X,
                                          int64_t ldx, REAL *Y, int64_t ldy) {
    if (!Wp || n > ROWS_MAX_N(nnpops__cpu_isa())) {
        FN(nnpops__dense_forward_cpu)(n, in, out, W, b, X, ldx, Y, ldy);
        return;
    }
    for (int64_t p = 0; p < out; p += NNPOPS__DENSE_PANEL) {
        const int64_t pw = out - p < NNPOPS__DENSE_PANEL ? out - p : NNPOPS__DENSE_PANEL;
        FN(gemm)(pw, n, in, Wp + p * in, 1, pw, X, ldx, b ? b + p : NULL, Y + p * ldy, ldy);
    }
}

void FN(nnpops__dense_backward_cpu)(int64_t n, int64_t in, int64_t out, const REAL *W,
                                    const REAL *dY, int64_t ldy, REAL *dX, int64_t ldx) {
    FN(gemm)(in, n, out, W, 1, in, dY, ldy, NULL, dX, ldx);
}

/* The CELU kernels in vectors of 16, 32 or 64 bytes (isa 0, 1, 2; the same bits: element-wise
 * operations only). */
static void FN(celu)(int isa, int backward, int64_t n, int64_t width, double alpha, const REAL *Z,
                     int64_t ldz, const REAL *dA, int64_t ldda, REAL *out, int64_t ldo) {
#if NNPOPS__CPU_X86
    if (isa == 2) {
        FN(celu_avx512)(backward, n, width, alpha, Z, ldz, dA, ldda, out, ldo);
        return;
    }
    if (isa == 1) {
        FN(celu_avx)(backward, n, width, alpha, Z, ldz, dA, ldda, out, ldo);
        return;
    }
#else
    (void)isa;
#endif
    FN(celu_base)(backward, n, width, alpha, Z, ldz, dA, ldda, out, ldo);
}

void FN(nnpops__celu_forward_cpu)(int64_t n, int64_t width, double alpha, const REAL *Z,
                                  int64_t ldz, REAL *A, int64_t lda) {
    FN(celu)(nnpops__cpu_isa(), 0, n, width, alpha, Z, ldz, NULL, 0, A, lda);
}

void FN(nnpops__celu_backward_cpu)(int64_t n, int64_t width, double alpha, const REAL *Z,
                                   int64_t ldz, const REAL *dA, int64_t ldda, REAL *dZ,
                                   int64_t lddz) {
    FN(celu)(nnpops__cpu_isa(), 1, n, width, alpha, Z, ldz, dA, ldda, dZ, lddz);
}

int FN(nnpops__celu_variant_cpu)(int isa, int backward, int64_t n, int64_t width, double alpha,
                                 const REAL *Z, int64_t ldz, const REAL *dA, int64_t ldda,
                                 REAL *out, int64_t ldo) {
    if (isa < 0 || isa > nnpops__cpu_isa()) return 0;
    FN(celu)(isa, backward, n, width, alpha, Z, ldz, dA, ldda, out, ldo);
    return 1;
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
/* VL integers of REAL's size: shuffle indices; VLP: VL for the preprocessor */
#define VLP (VB / REAL_SIZE)
#if REAL_SIZE == 4
typedef int32_t NM(ivec) __attribute__((vector_size(VB)));
#else
typedef int64_t NM(ivec) __attribute__((vector_size(VB)));
#endif

/* acc + a b: one fused multiply-add in the fused variants (see the header), else a multiply and
 * an add. */
static inline __attribute__((always_inline)) TARGET NM(vec) NM(madd)(NM(vec) acc, NM(vec) a,
                                                                     NM(vec) b) {
#if defined(MLP_FUSE) && VB == 64 && REAL_SIZE == 4
    return (NM(vec))_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)acc);
#elif defined(MLP_FUSE) && VB == 64
    return (NM(vec))_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)acc);
#elif defined(MLP_FUSE) && REAL_SIZE == 4
    return (NM(vec))_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)acc);
#elif defined(MLP_FUSE)
    return (NM(vec))_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)acc);
#else
    return acc + a * b;
#endif
}
/* x in every element, exactly (x - (+0) is x for every x, -0 included: a broadcast) */
static inline __attribute__((always_inline)) TARGET NM(vec) NM(splat)(REAL x) {
    return x - (NM(vec)){0};
}

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
            const NM(vec) ai = NM(splat)(a[i * sa_i + k * sa_k]);
            for (int v = 0; v < nv; v++) acc[i][v] = NM(madd)(acc[i][v], ai, bv[v]);
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

/* Rows [i0, m) of C, one at a time (the 1-row micro-kernels, vectors along the columns). */
static TARGET void NM(single_rows)(int64_t i0, int64_t m, int64_t n, int acc, int64_t kk,
                                   const REAL *a, int64_t sa_i, int64_t sa_k, const REAL *b,
                                   int64_t ldb, const REAL *bias, REAL *c, int64_t ldc) {
    const int64_t nvec = (n + VL - 1) / VL;
    for (int64_t i = i0; i < m; i++) {
        const REAL *ap = a + i * sa_i;
        const REAL *biasp = bias ? bias + i : NULL;
        for (int64_t v0 = 0; v0 < nvec; v0 += NVMAX) {
            const int64_t nv = nvec - v0 < NVMAX ? nvec - v0 : NVMAX;
            const REAL *bp = b + v0 * VL;
            REAL *cp = c + i * ldc + v0 * VL;
            if (nv == 3) NM(micro_1x3)(acc, kk, ap, sa_i, sa_k, bp, ldb, biasp, cp, ldc);
            else if (nv == 2) NM(micro_1x2)(acc, kk, ap, sa_i, sa_k, bp, ldb, biasp, cp, ldc);
            else NM(micro_1x1)(acc, kk, ap, sa_i, sa_k, bp, ldb, biasp, cp, ldc);
        }
    }
}
/* C (m x n) = A . B + bias over whole vectors of columns (see the padding rule above).  The
 * k range is cut into chunks of KC; per chunk, each block of MB rows of A is packed into a
 * contiguous [k][MB] tile (whatever the strides of A, so W^T costs no more than W) and swept over
 * all column panels of B.  C is reloaded between chunks (the first adds the bias), so each element
 * is still summed in k order.  Rows beyond the last full block use the 1-row kernels. */
/* rows of a k chunk, tuned on AMD EPYC (Zen 4) */
#define KC ((int64_t)(sizeof(REAL) == 4 ? 64 : 256))
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
        NM(single_rows)(i0, m, n, acc, kc, ak, sa_i, sa_k, bk, ldb, bias, c, ldc);
    }
}
#undef KC


/* ---- few columns: a vector of rows, the columns broadcast (see the header) ----
 * rows_micro: C[0 .. R VL) x [0 .. G) from A read as vectors of consecutive rows, a[i + k lda]
 * (the rows of A contiguous: A = W^T in place, or a packed tile), the G columns of B broadcast
 * from row k; per k: R loads, G broadcasts, G R multiplications and additions into G R
 * accumulator chains.  The first k chunk starts from the bias (0 + bias, as the blocked kernel),
 * later ones from C; C is read and written element by element (feature-major: a vector of rows
 * is a strided column of C), once per chunk. */
static inline __attribute__((always_inline)) TARGET void NM(rows_micro)(
    const int R, const int G, int accumulate, int64_t kk, const REAL *a, int64_t lda,
    const REAL *b, int64_t ldb, const REAL *bias, REAL *c, int64_t ldc) {
    NM(vec) acc[ROWS_MAX_G][ROWS_MAX_R];
    for (int g = 0; g < G; g++)
        for (int j = 0; j < R; j++) {
            NM(vec) v = {0};
            for (int l = 0; l < VL; l++) {
                const int64_t i = (int64_t)j * VL + l;
                v[l] = accumulate ? c[i * ldc + g] : bias ? bias[i] : (REAL)0;
            }
            acc[g][j] = accumulate ? v : (NM(vec)){0} + v;
        }
    for (int64_t k = 0; k < kk; k++) {
        const REAL *ak = a + k * lda, *bk = b + k * ldb;
        NM(vec) av[ROWS_MAX_R];
        for (int j = 0; j < R; j++) av[j] = *(const NM(uvec) *)(ak + j * VL);
        for (int g = 0; g < G; g++) {
            const NM(vec) bg = NM(splat)(bk[g]);
            for (int j = 0; j < R; j++) acc[g][j] = NM(madd)(acc[g][j], av[j], bg);
        }
    }
    for (int g = 0; g < G; g++)
        for (int j = 0; j < R; j++)
            for (int l = 0; l < VL; l++) c[((int64_t)j * VL + l) * ldc + g] = acc[g][j][l];
}

/* Rows [0, rb) (a multiple of VL) by columns [0, n) of one k chunk: groups of G columns, each over
 * row blocks of R(G) vectors (G R accumulators: about 8 to 12 of the 16 vector registers), the
 * block's last rows in single vectors. */
#define NNPOPS__ROWS_BLOCKS(G, R)                                                                  \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        for (; i + (R) * VL <= rb; i += (R) * VL)                                                 \
            NM(rows_micro)(R, G, acc, kc, a + i, lda, b + g0, ldb, bias ? bias + i : NULL,         \
                           c + i * ldc + g0, ldc);                                                 \
        for (; i < rb; i += VL)                                                                    \
            NM(rows_micro)(1, G, acc, kc, a + i, lda, b + g0, ldb, bias ? bias + i : NULL,         \
                           c + i * ldc + g0, ldc);                                                 \
    } while (0)
static TARGET void NM(rows_panel)(int64_t rb, int64_t n, int acc, int64_t kc, const REAL *a,
                                  int64_t lda, const REAL *b, int64_t ldb, const REAL *bias,
                                  REAL *c, int64_t ldc) {
    for (int64_t g0 = 0; g0 < n; g0 += ROWS_MAX_G) {
        switch (n - g0 < ROWS_MAX_G ? n - g0 : ROWS_MAX_G) {
        case 1: NNPOPS__ROWS_BLOCKS(1, 8); break;
        case 2: NNPOPS__ROWS_BLOCKS(2, 4); break;
        case 3: NNPOPS__ROWS_BLOCKS(3, 4); break;
        default: NNPOPS__ROWS_BLOCKS(4, 2); break;
        }
    }
}
#undef NNPOPS__ROWS_BLOCKS

/* tile[k][i] = ap[i sa_i + k sa_k] for i < rb (a multiple of VL), k < kc: when A's rows are
 * contiguous along k (sa_k == 1, A = W), by VL x VL blocks, each VL row loads turned into VL
 * column vectors by log2(VL) rounds of shuffles (one or two instructions each); the rest
 * element by element. */
static inline TARGET void NM(pack_rows)(const REAL *ap, int64_t sa_i, int64_t sa_k, int64_t rb,
                                        int64_t kc, REAL *tile) {
    typedef NM(ivec) iv __attribute__((unused)); /* (clang's shuffle takes no index type) */
    int64_t kv = 0;
#if VLP <= 8 /* (no 16 x 16 transposes: 64-byte float vectors pack element by element) */
    if (sa_k == 1) {
        kv = kc / VL * VL;
        for (int64_t i = 0; i < rb; i += VL)
            for (int64_t k = 0; k < kv; k += VL) {
                NM(vec) r[VL];
                for (int j = 0; j < VL; j++) r[j] = *(const NM(uvec) *)(ap + (i + j) * sa_i + k);
#if VLP == 2
                const NM(vec) c0 = NNPOPS__SHUF(iv, r[0], r[1], 0, 2);
                const NM(vec) c1 = NNPOPS__SHUF(iv, r[0], r[1], 1, 3);
                const NM(vec) c[2] = {c0, c1};
#elif VLP == 4
                const NM(vec) t0 = NNPOPS__SHUF(iv, r[0], r[1], 0, 4, 1, 5);
                const NM(vec) t1 = NNPOPS__SHUF(iv, r[0], r[1], 2, 6, 3, 7);
                const NM(vec) t2 = NNPOPS__SHUF(iv, r[2], r[3], 0, 4, 1, 5);
                const NM(vec) t3 = NNPOPS__SHUF(iv, r[2], r[3], 2, 6, 3, 7);
                const NM(vec) c[4] = {NNPOPS__SHUF(iv, t0, t2, 0, 1, 4, 5),
                                      NNPOPS__SHUF(iv, t0, t2, 2, 3, 6, 7),
                                      NNPOPS__SHUF(iv, t1, t3, 0, 1, 4, 5),
                                      NNPOPS__SHUF(iv, t1, t3, 2, 3, 6, 7)};
#elif VLP == 8
                NM(vec) t[8], u[8];
                for (int j = 0; j < 8; j += 2) {
                    t[j] = NNPOPS__SHUF(iv, r[j], r[j + 1], 0, 8, 1, 9, 4, 12, 5, 13);
                    t[j + 1] = NNPOPS__SHUF(iv, r[j], r[j + 1], 2, 10, 3, 11, 6, 14, 7, 15);
                }
                for (int j = 0; j < 8; j += 4)
                    for (int h = 0; h < 2; h++) {
                        u[j + 2 * h] = NNPOPS__SHUF(iv, t[j + h], t[j + h + 2], 0, 1, 8, 9, 4, 5,
                                                    12, 13);
                        u[j + 2 * h + 1] = NNPOPS__SHUF(iv, t[j + h], t[j + h + 2], 2, 3, 10, 11,
                                                        6, 7, 14, 15);
                    }
                NM(vec) c[8];
                for (int j = 0; j < 4; j++) {
                    c[j] = NNPOPS__SHUF(iv, u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
                    c[j + 4] = NNPOPS__SHUF(iv, u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
                }
#endif
                for (int j = 0; j < VL; j++) *(NM(uvec) *)(tile + (k + j) * rb + i) = c[j];
            }
    }
#endif
    for (int64_t k = kv; k < kc; k++)
        for (int64_t i = 0; i < rb; i++) tile[k * rb + i] = ap[i * sa_i + k * sa_k];
}

/* The few-column GEMM: the rows in whole vectors by rows_panel, per block of ROWS_RB rows; A read
 * in place when its rows are contiguous (sa_i == 1, all of k at once), else packed per chunk of
 * ROWS_KC values of k into a [k][rows] tile; the last m mod VL rows by the blocked kernel's 1-row
 * micro-kernels (vectors along the columns: the same per-element operations). */
#define ROWS_RB ((int64_t)8 * VL)
#define ROWS_KC ((int64_t)64)
static TARGET void NM(gemm_rows)(int64_t m, int64_t n, int64_t kk, const REAL *a, int64_t sa_i,
                                 int64_t sa_k, const REAL *b, int64_t ldb, const REAL *bias,
                                 REAL *c, int64_t ldc) {
    const int64_t mv = m / VL * VL;
    REAL tile[ROWS_RB * ROWS_KC] __attribute__((aligned(64)));
    for (int64_t i0 = 0; i0 < mv; i0 += ROWS_RB) {
        const int64_t rb = mv - i0 < ROWS_RB ? mv - i0 : ROWS_RB;
        const REAL *biasp = bias ? bias + i0 : NULL;
        REAL *cp = c + i0 * ldc;
        for (int64_t k0 = 0; k0 < kk; k0 += ROWS_KC) {
            const int64_t kc = kk - k0 < ROWS_KC ? kk - k0 : ROWS_KC;
            const REAL *ap = a + i0 * sa_i + k0 * sa_k;
            if (sa_i == 1) { /* in place: the chunk stays in the L1 cache for every column group */
                NM(rows_panel)(rb, n, k0 > 0, kc, ap, sa_k, b + k0 * ldb, ldb, biasp, cp, ldc);
                continue;
            }
            NM(pack_rows)(ap, sa_i, sa_k, rb, kc, tile);
            NM(rows_panel)(rb, n, k0 > 0, kc, tile, rb, b + k0 * ldb, ldb, biasp, cp, ldc);
        }
    }
    NM(single_rows)(mv, m, n, 0, kk, a, sa_i, sa_k, b, ldb, bias, c, ldc);
}
#undef ROWS_RB
#undef ROWS_KC

/* ---- CELU: e^y - 1 and e^y in vectors (NM(exp_neg), vmath.h) ---- */
#include "vmath.h"

/* One vector of CELU (forward: A from Z; backward: dZ from Z and dA). */
static inline __attribute__((always_inline)) TARGET NM(vec) NM(celu_one)(
    int backward, NM(vec) x, NM(vec) da, REAL al, REAL inv) {
    const NM(ivec) pos = x > (NM(vec)){0};
    if (backward) return NM(blend)(pos, da, da * NM(exp_neg)(x * inv, 0));
    return NM(blend)(pos, x, al * NM(exp_neg)(x * inv, 1));
}

/* The CELU kernels over n columns of each of width rows: each row's whole vectors of columns, then
 * the last n mod VL columns of all rows together, gathered VL at a time into one vector (the
 * last one zero-padded): a value's bits do not depend on its lane.  out may be Z (forward) or dA
 * (backward): every value is read before it is written. */
static TARGET void NM(celu)(int backward, int64_t n, int64_t width, double alpha, const REAL *Z,
                            int64_t ldz, const REAL *dA, int64_t ldda, REAL *out, int64_t ldo) {
    const REAL al = (REAL)alpha, inv = (REAL)(1.0 / alpha);
    const int64_t nv = n / VL * VL;
    for (int64_t f = 0; f < width; f++) {
        const REAL *z = Z + f * ldz, *da = backward ? dA + f * ldda : NULL;
        REAL *o = out + f * ldo;
        for (int64_t r = 0; r < nv; r += VL) {
            const NM(vec) x = *(const NM(uvec) *)(z + r);
            NM(vec) g = {0};
            if (backward) g = *(const NM(uvec) *)(da + r);
            *(NM(uvec) *)(o + r) = NM(celu_one)(backward, x, g, al, inv);
        }
    }
    if (nv == n) return;
    NM(vec) x = {0}, g = {0};
    int64_t at[VL]; /* the gathered values' places: row * ldo + column */
    int cnt = 0;
    for (int64_t f = 0; f < width; f++)
        for (int64_t r = nv; r < n; r++) {
            x[cnt] = Z[f * ldz + r];
            if (backward) g[cnt] = dA[f * ldda + r];
            at[cnt++] = f * ldo + r;
            if (cnt < VL && (f + 1 < width || r + 1 < n)) continue;
            const NM(vec) v = NM(celu_one)(backward, x, g, al, inv);
            for (int q = 0; q < cnt; q++) out[at[q]] = v[q];
            x = (NM(vec)){0};
            g = (NM(vec)){0};
            cnt = 0;
        }
}
#undef VL
#undef VLP
#undef MB
#undef NVMAX

#endif /* NNPOPS__MLP_LEVEL */
