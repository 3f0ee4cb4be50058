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

#endif /* NNPOPS_KERNELS_CPU_FUSED_H */
