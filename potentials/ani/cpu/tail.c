/*
 * tail.c - the CPU twin of the tails of small species' networks (potentials/ani/ani_ops.h,
 * nnpops__sg_tail_cpu_f32; the CUDA twin is potentials/ani/cuda/tail.cu): hidden layers 1 .. h-1,
 * the output layer and the backward pass down to dE/dZ of hidden layer 0, as a sequence of the
 * small grouped GEMMs of potentials/ani/cpu/networks.c.
 */
#include <stddef.h>
#include <stdint.h>

#include "potentials/ani/ani_ops.h"

void nnpops__sg_tail_cpu_f32(const nnpops__sg_tail *t, double alpha, float *work) {
    const int32_t h = t->hidden;
    const int64_t ld = t->out.lda, n = t->out.n, Me = t->out.members;
    float *act[NNPOPS__SG_TAIL_MAX_HIDDEN];
    act[0] = t->A;
    for (int32_t l = 1; l < h; l++) {
        act[l] = work;
        work += Me * t->width[l] * ld;
    }
    nnpops__sg_group g = {.count = 1, .alpha = alpha};
    for (int32_t l = 1; l < h; l++) {
        const int64_t m = t->width[l], k = t->width[l - 1];
        g.p[0] = (nnpops__sg_problem){.trans = 0, .epilogue = NNPOPS__SG_BIAS_CELU, .m = m, .k = k,
                                      .n = n, .batch = Me, .A = t->W[l], .lda = k,
                                      .stride_a = m * k, .B = act[l - 1], .ldb = ld,
                                      .stride_b = k * ld, .C = act[l], .ldc = ld,
                                      .stride_c = m * ld, .bias = t->b[l]};
        if (l == h - 1) {
            g.p[0].epilogue = NNPOPS__SG_BIAS_CELU_OUT;
            g.p[0].out = t->out;
            g.p[0].out_w = t->W[h];
            g.p[0].out_b = t->b[h];
        }
        nnpops__small_gemm_cpu_f32(&g);
    }
    if (!t->out.need_grad) return;
    for (int32_t l = h - 1; l >= 1; l--) {
        const int64_t m = t->width[l - 1], k = t->width[l];
        g.p[0] = (nnpops__sg_problem){.trans = 1, .epilogue = NNPOPS__SG_CELU_ACT, .m = m, .k = k,
                                      .n = n, .batch = Me, .A = t->W[l], .lda = m,
                                      .stride_a = m * k, .B = act[l], .ldb = ld,
                                      .stride_b = k * ld, .C = act[l - 1], .ldc = ld,
                                      .stride_c = m * ld};
        nnpops__small_gemm_cpu_f32(&g);
    }
}
