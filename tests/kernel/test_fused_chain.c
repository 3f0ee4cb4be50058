/*
 * test_fused_chain.c - nnpops__sg_mid_cpu_f32 (kernels/cpu/fused.h), the CPU twin of the GPU's fused
 * chain after a small species' first layer, against the composition it replaces in the GPU step
 * (potentials/ani/ani_cuda.c): the grouped GEMMs of the later hidden layers
 * (nnpops__small_gemm_cpu_f32, bias + CELU), the output layer (nnpops__ani_output_cpu_f32) and the
 * backward GEMMs down to the first layer (CELU' from the activations).  Energies, member energies
 * and dZ_0 agree to float rounding (another summation order).  Cases:
 *   mean      ANI-2x's H widths (1008 -> 256 -> 192 -> 160 -> 1), 8 members, ensemble mean, 7 atoms
 *             with a padding column
 *   member    one member's energy among all 8 (the others' seeds zero), five layers
 *   alone     one member alone (members 1, the member offset into the weights)
 *   energy    no gradient: energies only, the activations untouched
 * The GPU twin is compared with this one in the GPU test gpu.ops.small_gemm.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/fused.h"

static uint64_t g_rng = 88172645463325252ull;
static double urand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}
static void fill(float *p, int64_t n, double lo, double hi) {
    for (int64_t k = 0; k < n; k++) p[k] = (float)(lo + (hi - lo) * urand());
}

/* worst |a - b| / (atol + rtol |b|) */
static double worst_ratio(const double *a, const double *b, int64_t n, double atol, double rtol) {
    double w = 0;
    for (int64_t k = 0; k < n; k++) w = fmax(w, fabs(a[k] - b[k]) / (atol + rtol * fabs(b[k])));
    return w;
}

static int run(int nl, const int32_t *width, int64_t n, int member, int alone, int need_grad) {
    const int M = 8, Me = alone ? 1 : M, moff = alone ? member : 0;
    const int64_t ld = 32, n_atoms = n;
    const double alpha = 0.1, self = -38.1;
    int64_t rows = 0; /* hidden activations of all members, [Me * width][ld] per layer */
    for (int l = 1; l < nl; l++) rows += (int64_t)M * width[l];
    float *w[NNPOPS__SGM_MAX_LAYERS] = {0}, *b[NNPOPS__SGM_MAX_LAYERS] = {0};
    for (int l = 1; l < nl; l++) {
        const double sc = 1.5 / sqrt((double)width[l]);
        w[l] = malloc(sizeof(float) * M * width[l + 1] * width[l]);
        b[l] = malloc(sizeof(float) * M * width[l + 1]);
        fill(w[l], (int64_t)M * width[l + 1] * width[l], -sc, sc);
        fill(b[l], (int64_t)M * width[l + 1], -0.2, 0.2);
    }
    float *act = calloc((size_t)rows * ld, sizeof(float)); /* the composition's layers */
    float *act0 = malloc(sizeof(float) * M * width[1] * ld); /* the fused twin's first layer */
    fill(act, (int64_t)M * width[1] * ld, -1.5, 2.0);
    memcpy(act0, act, sizeof(float) * M * width[1] * ld);
    int32_t *centers = malloc(sizeof(int32_t) * n);
    for (int64_t r = 0; r < n; r++) centers[r] = (int32_t)(n - 1 - r);
    if (n > 3) centers[2] = -1;
    double *ae[2], *me[2];
    for (int k = 0; k < 2; k++) {
        ae[k] = calloc(n_atoms, sizeof(double));
        me[k] = calloc(n_atoms * M, sizeof(double));
    }
    nnpops__ani_output_args out = {n, Me, width[nl - 1], alpha, ld, need_grad, moff, M, member,
                                   self, centers, ae[0], me[0], 0};
    /* the composition */
    int64_t off[NNPOPS__SGM_MAX_LAYERS];
    {
        int64_t r = 0;
        for (int l = 0; l + 1 < nl; l++) {
            off[l] = r;
            r += (int64_t)Me * width[l + 1];
        }
    }
#define W_(l) (w[l] + (size_t)moff * width[(l) + 1] * width[l])
#define B_(l) (b[l] + (size_t)moff * width[(l) + 1])
    nnpops__sg_group g;
    for (int l = 1; l + 1 < nl; l++) {
        memset(&g, 0, sizeof g);
        g.alpha = alpha;
        g.count = 1;
        g.p[0] = (nnpops__sg_problem){0, NNPOPS__SG_BIAS_CELU, width[l + 1], width[l], n, Me,
                                      W_(l), width[l], (int64_t)width[l + 1] * width[l],
                                      act + off[l - 1] * ld, ld, (int64_t)width[l] * ld,
                                      act + off[l] * ld, ld, (int64_t)width[l + 1] * ld, B_(l)};
        nnpops__small_gemm_cpu_f32(&g);
    }
    nnpops__ani_output_cpu_f32(&out, W_(nl - 1), B_(nl - 1), act + off[nl - 2] * ld);
    if (need_grad)
        for (int l = nl - 2; l >= 1; l--) {
            memset(&g, 0, sizeof g);
            g.alpha = alpha;
            g.count = 1;
            g.p[0] = (nnpops__sg_problem){1, NNPOPS__SG_CELU_ACT, width[l], width[l + 1], n, Me,
                                          W_(l), width[l], (int64_t)width[l + 1] * width[l],
                                          act + off[l] * ld, ld, (int64_t)width[l + 1] * ld,
                                          act + off[l - 1] * ld, ld, (int64_t)width[l] * ld, NULL};
            nnpops__small_gemm_cpu_f32(&g);
        }
    /* the fused twin */
    nnpops__sg_mid_problem p;
    memset(&p, 0, sizeof p);
    p.n_layers = nl;
    for (int l = 0; l <= nl; l++) p.width[l] = width[l];
    for (int l = 1; l < nl; l++) {
        p.w[l] = W_(l);
        p.b[l] = B_(l);
    }
#undef W_
#undef B_
    p.act0 = act0;
    p.ld = ld;
    p.out = out;
    p.out.atom_energy = ae[1];
    p.out.member_energy = me[1];
    CHECK(nnpops__sg_mid_supported(&p));
    nnpops__sg_mid_cpu_f32(&p);
    /* compare: energies, member energies, dZ_0 of the real columns (padding keeps its input) */
    const double we = worst_ratio(ae[1], ae[0], n_atoms, 1e-5, 1e-6);
    const double wm = worst_ratio(me[1], me[0], n_atoms * M, 1e-5, 1e-6);
    double wz = 0, esum = 0;
    for (int64_t k = 0; k < (int64_t)Me * width[1]; k++)
        for (int64_t r = 0; r < n; r++) {
            if (centers[r] < 0) continue; /* the composition's backward GEMMs fill it regardless */
            const double x = act0[k * ld + r], y = act[k * ld + r];
            wz = fmax(wz, fabs(x - y) / (2e-6 + 2e-5 * fabs(y)));
        }
    for (int64_t k = 0; k < n_atoms; k++) esum += fabs(ae[1][k]);
    printf("%d layers, %lld columns, member %d%s, grad %d: worst ratios energy %.3g, member energy "
           "%.3g, dZ0 %.3g\n",
           nl, (long long)n, member, alone ? " alone" : "", need_grad, we, wm, wz);
    CHECK(we <= 1 && wm <= 1 && wz <= 1 && esum > 0);
    if (!need_grad) /* nothing written over the activations */
        CHECK(memcmp(act0, act, sizeof(float) * Me * width[1] * ld) == 0);
    for (int l = 1; l < nl; l++) {
        free(w[l]);
        free(b[l]);
    }
    free(act);
    free(act0);
    free(centers);
    for (int k = 0; k < 2; k++) {
        free(ae[k]);
        free(me[k]);
    }
    return 0;
}

static const int32_t ani_h[] = {1008, 256, 192, 160, 1}, five[] = {1008, 64, 48, 40, 24, 1},
                     odd[] = {1008, 70, 37, 1};

static int case_mean(void) { return run(4, ani_h, 7, -1, 0, 1) || run(3, odd, 1, -1, 0, 1); }
static int case_member(void) { return run(5, five, 20, 5, 0, 1); }
static int case_alone(void) { return run(4, ani_h, 13, 3, 1, 1); }
static int case_energy(void) { return run(4, ani_h, 7, -1, 0, 0) || run(5, five, 9, 2, 1, 0); }

int main(int argc, char **argv) {
    static const test_case cases[] = {
        {"mean", case_mean}, {"member", case_member}, {"alone", case_alone}, {"energy", case_energy}};
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
