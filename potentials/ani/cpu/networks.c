/*
 * networks.c - CPU twins of ANI's ensemble network ops (potentials/ani/ani_ops.h; CUDA twins in
 * cuda/networks.cu): the ensemble output layer with the energy per atom and the seed of the
 * backward pass, and the small-n grouped GEMM with its fused epilogues.  The file includes itself
 * twice for the output layer: REAL = float (*_f32) and REAL = double (*_f64).
 */
#ifndef NNPOPS__ANI_NETWORKS_BODY

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "potentials/ani/ani_ops.h"

void nnpops__small_gemm_cpu_f32(const nnpops__sg_group *g) {
    const float al = (float)g->alpha, inv = (float)(1.0 / g->alpha);
    for (int32_t q = 0; q < g->count; q++) {
        const nnpops__sg_problem *p = &g->p[q];
        const int32_t S = nnpops__sg_slices(p->split);
        const int64_t kper = nnpops__sg_split_k(p->k, S);
        for (int64_t t = 0; t < p->batch * S; t++) {
            const int64_t ks = t % S, j0 = ks * kper, j1 = j0 + kper < p->k ? j0 + kper : p->k;
            const float *A = p->A + (t / S) * p->stride_a, *B = p->B + (t / S) * p->stride_b;
            float *C = p->C + (t / S) * p->stride_c + ks * p->split_stride;
            for (int64_t i = 0; i < p->m; i++)
                for (int64_t r = 0; r < p->n; r++) {
                    float s = 0.0f;
                    for (int64_t j = j0; j < j1; j++) {
                        const float a = p->trans ? A[j * p->lda + i] : A[i * p->lda + j];
                        s += a * B[j * p->ldb + r];
                    }
                    float *c = C + i * p->ldc + r;
                    if (p->epilogue == NNPOPS__SG_BIAS_CELU ||
                        p->epilogue == NNPOPS__SG_BIAS_CELU_OUT) {
                        const float x = s + (p->bias ? p->bias[(t / S) * p->m + i] : 0.0f);
                        *c = x > 0 ? x : al * expm1f(x * inv);
                    } else if (p->epilogue == NNPOPS__SG_CELU_ACT) {
                        const float x = *c;
                        *c = x > 0 ? s : s * (x * inv + 1.0f);
                    } else {
                        *c = s;
                    }
                }
        }
        if (p->epilogue == NNPOPS__SG_BIAS_CELU_OUT)
            nnpops__ani_output_cpu_f32(&p->out, p->out_w, p->out_b, p->C);
    }
}

#define NNPOPS__ANI_NETWORKS_BODY 1

#define REAL float
#define FN(name) name##_f32
#include "networks.c"
#undef REAL
#undef FN

#define REAL double
#define FN(name) name##_f64
#include "networks.c"
#undef REAL
#undef FN

#else /* NNPOPS__ANI_NETWORKS_BODY */

void FN(nnpops__ani_output_cpu)(const nnpops__ani_output_args *g, const REAL *w, const REAL *b,
                                REAL *A) {
    const REAL inv = (REAL)(1.0 / g->alpha);
    for (int64_t r = 0; r < g->n; r++) {
        const int32_t c = g->centers[r];
        if (c < 0) continue;
        double esum = 0.0, chosen = 0.0;
        for (int32_t m = 0; m < g->members; m++) {
            const int32_t gm = g->member_offset + m;
            REAL *a = A + (int64_t)m * g->width * g->lda + r;
            const REAL *wm = w + (int64_t)m * g->width;
            REAL y = b[m];
            for (int32_t k = 0; k < g->width; k++) y += wm[k] * a[(int64_t)k * g->lda];
            esum += (double)y;
            if (gm == g->member) chosen = (double)y;
            if (g->member_energy)
                g->member_energy[(int64_t)c * g->ensemble + gm] = (double)y + g->self_energy;
            if (g->need_grad) {
                const REAL seed = g->member < 0 ? (REAL)(1.0 / (double)g->ensemble)
                                                : (gm == g->member ? (REAL)1 : (REAL)0);
                for (int32_t k = 0; k < g->width; k++) {
                    const REAL x = a[(int64_t)k * g->lda];
                    const REAL da = wm[k] * seed;
                    a[(int64_t)k * g->lda] = x > 0 ? da : da * (x * inv + (REAL)1);
                }
            }
        }
        const double e = g->member < 0 ? esum / (double)g->ensemble : chosen;
        g->atom_energy[c] = e + g->self_energy;
    }
}

#endif /* NNPOPS__ANI_NETWORKS_BODY */
