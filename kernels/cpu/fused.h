/*
 * fused.h - CPU twins of the fused network ops of the GPU path (kernels/cuda/mlp.cu): the reference
 * that the GPU kernels are tested against.  Layout as in kernels.h: feature-major matrices,
 * X[f * ld + r] for atom column r < n.  _f32 / _f64 as in kernels.h (REAL = float / double).
 *
 * bias_celu:          Z[f][r] <- celu(Z[f][r] + b[f])   in place: the layer's pre-activation buffer
 *                     becomes its activation (the backward needs only the activation, below).
 * celu_backward_act:  A[f][r] <- dA[f][r] * celu'(A)   with celu'(A) = 1 for A > 0, else A/alpha + 1
 *                     (= exp(Z/alpha) since A = alpha (exp(Z/alpha) - 1)); A is the activation and
 *                     becomes dE/dZ in place.
 * ani_output:         the output layer of `members` ensemble members over the n columns, the
 *                     ensemble mean (or one member) and self energy per atom, and the seed of the
 *                     backward pass, in one sweep:
 *                       y_m[r] = b[m] + sum_k w[m][k] A[m*width + k][r]          (REAL, k in order)
 *                       atom_energy[centers[r]] = self + (member < 0 ? sum_m y_m / ensemble
 *                                                                    : y_{member - member_offset})
 *                       member_energy[centers[r] * ensemble + member_offset + m] = self + y_m
 *                       need_grad: A[m*width + k][r] <- coef_m w[m][k] celu'(A[m*width + k][r])
 *                     with coef_m = 1/ensemble (member < 0) or [member_offset + m == member]; the
 *                     members of one call are members member_offset .. member_offset+members-1 of
 *                     the model (w [members][width], b [members]).  The CUDA twin ADDS each
 *                     member's share to atom_energy (atomics), so there it must be zero on entry;
 *                     its sums run in another order (equal to rounding).
 */
#ifndef NNPOPS_KERNELS_CPU_FUSED_H
#define NNPOPS_KERNELS_CPU_FUSED_H

#include <stddef.h>
#include <stdint.h>

typedef struct nnpops__ani_output_args {
    int64_t n;               /* columns */
    int32_t members;         /* members in this call */
    int32_t width;           /* width of the last hidden layer */
    double alpha;            /* CELU alpha */
    int64_t lda;
    int32_t need_grad;
    int32_t member_offset;   /* model index of the first member of this call */
    int32_t ensemble;        /* members of the model */
    int32_t member;          /* -1: ensemble mean (then members == ensemble); else that member */
    double self_energy;      /* of this species, model energy unit */
    const int32_t *centers;  /* [n] atom of each column */
    double *atom_energy;     /* [n_atoms] */
    double *member_energy;   /* [n_atoms][ensemble] or NULL */
    int32_t deterministic;   /* GPU only: 1 = members summed in order by one thread per column,
                              * atom_energy written (no atomics); the CPU twin always is */
} nnpops__ani_output_args;

void nnpops__bias_celu_cpu_f32(int64_t n, int64_t width, double alpha, const float *b, float *Z,
                               int64_t ldz);
void nnpops__bias_celu_cpu_f64(int64_t n, int64_t width, double alpha, const double *b, double *Z,
                               int64_t ldz);
void nnpops__celu_backward_act_cpu_f32(int64_t n, int64_t width, double alpha, const float *dA,
                                       int64_t ldda, float *A, int64_t lda);
void nnpops__celu_backward_act_cpu_f64(int64_t n, int64_t width, double alpha, const double *dA,
                                       int64_t ldda, double *A, int64_t lda);
void nnpops__ani_output_cpu_f32(const nnpops__ani_output_args *args, const float *w, const float *b,
                                float *A);
void nnpops__ani_output_cpu_f64(const nnpops__ani_output_args *args, const double *w,
                                const double *b, double *A);

/* ---- small-n grouped GEMM (float32): the fused-ensemble layers of species with few atoms -------
 * A group of independent problems (at most NNPOPS__SG_MAX_PROBLEMS; the GPU launcher runs them in
 * launches of at most NNPOPS__SG_PER_LAUNCH problems of one kind, trans 0 or 1).  Problem p, batch
 * entry t < batch, rows i < m, columns r < n (n <= NNPOPS__SG_MAX_COLS), A_t = A + t stride_a,
 * B_t = B + t stride_b, C_t = C + t stride_c:
 *     s[i][r] = sum_j op(A_t)[i][j] B_t[j * ldb + r]      j < k (in order on the CPU)
 *               op(A)[i][j] = A[i * lda + j] (trans 0: W [m][k], a forward layer)
 *                           = A[j * lda + i] (trans 1: W [k][m], a backward layer)
 *     C_t[i * ldc + r] = NNPOPS__SG_STORE:      s
 *                        NNPOPS__SG_BIAS_CELU:  celu(s + bias[t * m + i])   (bias may be NULL)
 *                        NNPOPS__SG_CELU_ACT:   s * celu'(C_t[i * ldc + r])  (C holds the
 *                                               activation on entry, as nnpops__celu_backward_act)
 *                        NNPOPS__SG_BIAS_CELU_OUT: the activation as NNPOPS__SG_BIAS_CELU, then
 *                                               the output layer over it: exactly
 *                                               nnpops__ani_output_cpu_f32(&out, out_w, out_b, C)
 *                                               (trans 0, batch = out.members, stride_c =
 *                                               m * ldc: batch entry t is member
 *                                               out.member_offset + t; out.width = m, out.lda =
 *                                               ldc, out.n = n): the last hidden layer and the
 *                                               output layer in one launch
 * With a k split (split > 1) each slice of the inner dimension is summed into its own copy of C
 * (see the field).  Only columns r < n are read from B and written to C.  The CUDA twin
 * (kernels_cuda.h) sums each output within one block in a fixed order (no work space):
 * deterministic, equal to this twin to rounding. */
#define NNPOPS__SG_MAX_PROBLEMS 32
#define NNPOPS__SG_PER_LAUNCH 8
/* 96: a protein's nitrogen atoms (~80) still take the small path, which is faster for them than
 * the tensor-core GEMMs; 64 or 128 gave slower steps, other systems even */
#define NNPOPS__SG_MAX_COLS 96
enum {
    NNPOPS__SG_STORE = 0,
    NNPOPS__SG_BIAS_CELU = 1,
    NNPOPS__SG_CELU_ACT = 2,
    NNPOPS__SG_BIAS_CELU_OUT = 3
};

typedef struct nnpops__sg_problem {
    int32_t trans, epilogue;
    int64_t m, k, n, batch;
    const float *A;
    int64_t lda, stride_a;
    const float *B;
    int64_t ldb, stride_b;
    float *C;
    int64_t ldc, stride_c;
    const float *bias;
    /* k split (trans 1 with NNPOPS__SG_STORE only; 0 or 1: none): slice j < split of the inner
     * dimension, j kper <= j' < min(k, (j + 1) kper) with kper = nnpops__sg_split_k(k, split),
     * is summed into C_t + j split_stride (the caller adds the slices: more blocks, each with a
     * shorter chain of loads, for products with few outputs and a long inner dimension) */
    int32_t split;
    int64_t split_stride;
    /* NNPOPS__SG_BIAS_CELU_OUT: the output layer (its weights [members][m], biases [members]);
     * the CUDA twin ADDS the energies (atomics: out.atom_energy and out.member_energy zero on
     * entry) and needs out.deterministic = 0 */
    nnpops__ani_output_args out;
    const float *out_w, *out_b;
} nnpops__sg_problem;

/* Slices of a problem's k split (split 0 or 1: one). */
static inline int32_t nnpops__sg_slices(int32_t split) { return split > 1 ? split : 1; }

/* Inner rows per slice of a k split (a multiple of 4). */
static inline int64_t nnpops__sg_split_k(int64_t k, int32_t split) {
    return split > 1 ? ((k + split - 1) / split + 3) / 4 * 4 : k;
}

typedef struct nnpops__sg_group {
    int32_t count;
    double alpha; /* CELU alpha */
    nnpops__sg_problem p[NNPOPS__SG_MAX_PROBLEMS];
} nnpops__sg_group;

/* Bytes of GPU work space of the group: none since the CUDA twin sums every output within one
 * block (kept so that callers size and pass `work` as before; it may be NULL). */
static inline size_t nnpops__small_gemm_work_bytes(const nnpops__sg_group *g) {
    (void)g;
    return 0;
}

void nnpops__small_gemm_cpu_f32(const nnpops__sg_group *g);


#endif /* NNPOPS_KERNELS_CPU_FUSED_H */
