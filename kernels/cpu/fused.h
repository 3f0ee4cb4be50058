/*
 * fused.h - CPU twins of the fused activation steps of the GPU path (kernels/cuda/mlp.cu): the
 * reference that the GPU kernels are tested against.  Layout as in kernels.h: feature-major matrices,
 * X[f * ld + r] for atom column r < n.  _f32 / _f64 as in kernels.h (REAL = float / double).
 *
 * bias_celu:          Z[f][r] <- celu(Z[f][r] + b[f])   in place: the layer's pre-activation buffer
 *                     becomes its activation (the backward needs only the activation, below).
 * celu_backward_act:  A[f][r] <- dA[f][r] * celu'(A)   with celu'(A) = 1 for A > 0, else A/alpha + 1
 *                     (= exp(Z/alpha) since A = alpha (exp(Z/alpha) - 1)); A is the activation and
 *                     becomes dE/dZ in place.
 */
#ifndef NNPOPS_KERNELS_CPU_FUSED_H
#define NNPOPS_KERNELS_CPU_FUSED_H

#include <stddef.h>
#include <stdint.h>

void nnpops__bias_celu_cpu_f32(int64_t n, int64_t width, double alpha, const float *b, float *Z,
                               int64_t ldz);
void nnpops__bias_celu_cpu_f64(int64_t n, int64_t width, double alpha, const double *b, double *Z,
                               int64_t ldz);
void nnpops__celu_backward_act_cpu_f32(int64_t n, int64_t width, double alpha, const float *dA,
                                       int64_t ldda, float *A, int64_t lda);
void nnpops__celu_backward_act_cpu_f64(int64_t n, int64_t width, double alpha, const double *dA,
                                       int64_t ldda, double *A, int64_t lda);

#endif /* NNPOPS_KERNELS_CPU_FUSED_H */
