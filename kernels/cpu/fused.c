/*
 * fused.c - CPU twins of the fused activation steps of the GPU path (definitions in fused.h): bias
 * + CELU in place, and the CELU adjoint from the activation.  The file includes itself twice: REAL = float
 * (*_f32) and REAL = double (*_f64).
 */
#ifndef NNPOPS__FUSED_BODY

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fused.h"


#define NNPOPS__FUSED_BODY 1

#define REAL float
#define FN(name) name##_f32
#define M(fn) fn##f
#include "fused.c"
#undef REAL
#undef FN
#undef M

#define REAL double
#define FN(name) name##_f64
#define M(fn) fn
#include "fused.c"
#undef REAL
#undef FN
#undef M

#else /* NNPOPS__FUSED_BODY */

void FN(nnpops__bias_celu_cpu)(int64_t n, int64_t width, double alpha, const REAL *b, REAL *Z,
                               int64_t ldz) {
    const REAL al = (REAL)alpha, inv = (REAL)(1.0 / alpha);
    for (int64_t f = 0; f < width; f++) {
        REAL *z = Z + f * ldz;
        const REAL bf = b ? b[f] : (REAL)0;
        for (int64_t r = 0; r < n; r++) {
            const REAL x = z[r] + bf;
            z[r] = x > 0 ? x : al * M(expm1)(x * inv);
        }
    }
}

void FN(nnpops__celu_backward_act_cpu)(int64_t n, int64_t width, double alpha, const REAL *dA,
                                       int64_t ldda, REAL *A, int64_t lda) {
    const REAL inv = (REAL)(1.0 / alpha);
    for (int64_t f = 0; f < width; f++) {
        const REAL *da = dA + f * ldda;
        REAL *a = A + f * lda;
        for (int64_t r = 0; r < n; r++) {
            const REAL x = a[r];
            a[r] = x > 0 ? da[r] : da[r] * (x * inv + (REAL)1);
        }
    }
}

#endif /* NNPOPS__FUSED_BODY */
