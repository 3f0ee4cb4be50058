/*
 * test_gpu_tensornet.c - TensorNet's ops over center lists (potentials/tensornet/tn_ops.h): every
 * CUDA op against its CPU twin on random inputs, and the composed step against the CPU pass.
 * One CTest entry per case (label gpu; emu on the emulated GPU); exit 77 without a GPU, except
 * the compose cases, which need none.
 *
 *   compose_f64, compose_f32  the step composed of the CPU twins (nnpops__tn_step, cuda 0) against
 *                             the CPU pass of cpu/tensornet_cpu.h plus its ZBL prior over the same
 *                             lists: energies per atom (mean shared per system), forces and virial
 *                             from the gradients per entry; a batch of two systems with charges 0 and -1, ghosts (weight
 *                             0), cutoff_lower 0 and > 0, expnorm and gauss, O(3) and SO(3), an
 *                             atom's own periodic images; each with a set of pre-activations per
 *                             layer and with one set for the layers (the work space tells which)
 *   ops_f64, ops_f32          each op's CUDA twin against its CPU twin on the same random inputs
 *                             (the products on the tensor cores where they fit, then on cuBLAS)
 *                             (per-atom tensors, messages, gradients; the pairs' numbering, exactly;
 *                             the real lists of a random batch with a capacity above the entries,
 *                             whose tail must come back zero); on a GPU also F = 300 (channels over several passes of a block)
 *   tiles_f64, tiles_f32      the per-atom ops (embedding gates, layer, readout and their
 *                             gradients) under forced tilings (atoms per block, chunks of the
 *                             output channels, weight buffers; F 40 and 70, partial tiles): each
 *                             against its CPU twin, and bitwise the same under every tiling
 *   step_f64, step_f32        the whole step with the CUDA ops against the CPU ops (energies, every
 *                             entry's gradient), twice on the GPU: bitwise the same; pre-activations
 *                             per layer, then one set for the layers; the edge networks' products
 *                             on cuBLAS, then on the tensor cores (float32)
 *   gemm_f32                  the float32 products on the tensor cores (tn_linear_act: forward
 *                             with the activation, transposed with its derivative, accumulating)
 *                             against float64 sums at float32 accuracy, over partial tiles and
 *                             steps; the shapes they do not take on cuBLAS; the path by size
 *   pairs                     the pairs' numbering (tn_pairs) on dense lists, each path (picked,
 *                             one block, three kernels) against the CPU twin, exactly: more
 *                             entries per center than a warp, more centers than the block's warps,
 *                             a truncated list, fewer pair numbers than pairs
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "core/src/internal.h"
#include "emulated.h"
#include "gpu_check.h"
#include "potentials/tensornet/tn_ops.h"

static unsigned long long g_seed = 0x5eed7e750123ULL;
static double urand(void) { return test_rand(&g_seed); }
static double srand1(void) { return 2.0 * urand() - 1.0; }

/* ---- a random model and a random batch with its center lists ---------------------------------- */

typedef struct fixture {
    nnpops__tn_shape s;
    double *arena64;
    float *arena32;
    nnpops__tn_weights_f64 w64;
    nnpops__tn_weights_f32 w32;
    const double *ls64[3 * 4], *lb64[3 * 4], *lt64[6 * 4];
    const float *ls32[3 * 4], *lb32[3 * 4], *lt32[6 * 4];
    int32_t n_species, species_z[4];
    nnpops__tn_zbl zbl;
    int32_t zmap[16];
    int has_zbl;
    double mean, ell;
    /* the batch */
    int64_t n, n_local, n_systems, capacity, n_entries;
    int32_t *species, *batch, *z;
    double *charges, *pos;
    int64_t *start;
    int32_t *pairs;
    double *vec;
} fixture;

/* variant bits: 1 cutoff_lower > 0, 2 gauss, 4 SO(3), 8 ghosts, 16 no ZBL, 32 no layers, 64 each
 * atom's own periodic images as entries */
static void make_fixture(fixture *fx, int F, int R, int n_per, int variant) {
    memset(fx, 0, sizeof *fx);
    nnpops__tn_shape *s = &fx->s;
    s->F = F, s->R = R, s->L = variant & 32 ? 0 : 2, s->max_z = 10;
    s->rbf = variant & 2 ? NNPOPS__TN_GAUSS : NNPOPS__TN_EXPNORM;
    s->activation = variant & 4 ? NNPOPS__TN_SILU : NNPOPS__TN_SSP;
    s->so3 = (variant & 4) != 0;
    s->n_out = 2;
    s->out_width[0] = F, s->out_width[1] = F / 2 > 0 ? F / 2 : 1, s->out_width[2] = 1;
    s->atomref_len = 10;
    s->cutoff_lower = variant & 1 ? 0.4 : 0.0;
    s->cutoff_upper = 4.0;
    s->std = 1.3;
    fx->ell = 1.0;
    fx->mean = -2.5;
    /* the tensors, in one double arena */
    const int L = s->L, W1 = s->out_width[1];
    size_t sizes[64], n_t = 0, total = 0;
#define SZ(x) (sizes[n_t++] = (size_t)(x), total += (size_t)(x))
    SZ(R), SZ(s->rbf == NNPOPS__TN_GAUSS ? 1 : R), SZ(10 * F), SZ(F * 2 * F), SZ(F);
    for (int k = 0; k < 3; k++) SZ(F * R), SZ(F), SZ(F * F);
    SZ(2 * F * F), SZ(6 * F * F), SZ(2 * F), SZ(3 * F), SZ(F), SZ(F);
    for (int l = 0; l < L; l++) {
        SZ(F * R), SZ(2 * F * F), SZ(6 * F * F), SZ(F), SZ(2 * F), SZ(3 * F);
        for (int k = 0; k < 6; k++) SZ(F * F);
    }
    SZ(3 * F * F), SZ(F), SZ(3 * F), SZ(3 * F), SZ(W1 * F), SZ(W1), SZ(W1), SZ(1), SZ(10);
#undef SZ
    fx->arena64 = malloc(sizeof(double) * total);
    fx->arena32 = malloc(sizeof(float) * total);
    size_t off = 0, t = 0;
    const double *ptr[64];
    for (size_t k = 0; k < n_t; k++) {
        ptr[k] = fx->arena64 + off;
        off += sizes[k];
    }
    /* fill: weights ~ U(-1, 1) / sqrt(fan-in) (fan-in guessed from the size) */
    for (size_t k = 0; k < total; k++) fx->arena64[k] = srand1() / sqrt((double)F);
    nnpops__tn_weights_f64 *w = &fx->w64;
    double *a = fx->arena64;
    /* radial basis: expnorm means and betas as torchmd-net makes them, or gauss offsets/coeff */
    double *rbf_a = a + (ptr[0] - a), *rbf_b = a + (ptr[1] - a);
    if (s->rbf == NNPOPS__TN_GAUSS) {
        for (int k = 0; k < R; k++)
            rbf_a[k] = s->cutoff_lower + (s->cutoff_upper - s->cutoff_lower) * k / (R - 1);
        const double sp = (s->cutoff_upper - s->cutoff_lower) / (R - 1);
        rbf_b[0] = -0.5 / (sp * sp);
    } else {
        const double e0 = exp(-s->cutoff_upper + s->cutoff_lower);
        for (int k = 0; k < R; k++) {
            rbf_a[k] = e0 + (1.0 - e0) * k / (R - 1);
            rbf_b[k] = pow(2.0 / R * (1.0 - e0), -2.0);
        }
    }
    w->rbf_a = ptr[t++], w->rbf_b = ptr[t++], w->emb = ptr[t++], w->emb2_w = ptr[t++];
    w->emb2_b = ptr[t++];
    for (int k = 0; k < 3; k++) w->dproj_w[k] = ptr[t++], w->dproj_b[k] = ptr[t++],
                                w->emb_lt[k] = ptr[t++];
    w->emb_ls_w[0] = ptr[t++], w->emb_ls_w[1] = ptr[t++], w->emb_ls_b[0] = ptr[t++];
    w->emb_ls_b[1] = ptr[t++], w->init_norm_w = ptr[t++], w->init_norm_b = ptr[t++];
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < 3; k++) fx->ls64[3 * l + k] = ptr[t++];
        for (int k = 0; k < 3; k++) fx->lb64[3 * l + k] = ptr[t++];
        for (int k = 0; k < 6; k++) fx->lt64[6 * l + k] = ptr[t++];
    }
    w->layer_ls_w = fx->ls64, w->layer_ls_b = fx->lb64, w->layer_lt = fx->lt64;
    w->linear_w = ptr[t++], w->linear_b = ptr[t++], w->out_norm_w = ptr[t++];
    w->out_norm_b = ptr[t++], w->out_w[0] = ptr[t++], w->out_b[0] = ptr[t++];
    w->out_w[1] = ptr[t++], w->out_b[1] = ptr[t++], w->atomref = ptr[t++];
    /* LayerNorm weights near 1 */
    for (int k = 0; k < F; k++) ((double *)w->init_norm_w)[k] = 1.0 + 0.2 * srand1();
    for (int k = 0; k < 3 * F; k++) ((double *)w->out_norm_w)[k] = 1.0 + 0.2 * srand1();
    for (size_t k = 0; k < total; k++) fx->arena32[k] = (float)fx->arena64[k];
    /* the float32 pointers: the same offsets */
    nnpops__tn_weights_f32 *v = &fx->w32;
#define F32(p) ((p) ? fx->arena32 + ((const double *)(p) - fx->arena64) : NULL)
    v->rbf_a = F32(w->rbf_a), v->rbf_b = F32(w->rbf_b), v->emb = F32(w->emb);
    v->emb2_w = F32(w->emb2_w), v->emb2_b = F32(w->emb2_b);
    for (int k = 0; k < 3; k++)
        v->dproj_w[k] = F32(w->dproj_w[k]), v->dproj_b[k] = F32(w->dproj_b[k]),
        v->emb_lt[k] = F32(w->emb_lt[k]);
    for (int k = 0; k < 2; k++) v->emb_ls_w[k] = F32(w->emb_ls_w[k]), v->emb_ls_b[k] = F32(w->emb_ls_b[k]);
    v->init_norm_w = F32(w->init_norm_w), v->init_norm_b = F32(w->init_norm_b);
    for (int k = 0; k < 3 * L; k++) fx->ls32[k] = F32(fx->ls64[k]), fx->lb32[k] = F32(fx->lb64[k]);
    for (int k = 0; k < 6 * L; k++) fx->lt32[k] = F32(fx->lt64[k]);
    v->layer_ls_w = fx->ls32, v->layer_ls_b = fx->lb32, v->layer_lt = fx->lt32;
    v->linear_w = F32(w->linear_w), v->linear_b = F32(w->linear_b);
    v->out_norm_w = F32(w->out_norm_w), v->out_norm_b = F32(w->out_norm_b);
    for (int k = 0; k < 2; k++) v->out_w[k] = F32(w->out_w[k]), v->out_b[k] = F32(w->out_b[k]);
    v->atomref = F32(w->atomref);
#undef F32
    /* species H, C, N, O; ZBL with the identity map */
    fx->n_species = 4;
    const int32_t zs[4] = {1, 6, 7, 8};
    memcpy(fx->species_z, zs, sizeof zs);
    fx->has_zbl = !(variant & 16);
    for (int k = 0; k < 10; k++) fx->zmap[k] = k;
    fx->zbl.cutoff = 2.2;
    fx->zbl.distance_scale = 1e-10;
    fx->zbl.energy_scale = 1.602176634e-19;
    fx->zbl.map_len = 10;
    fx->zbl.atomic_number = fx->zmap;

    /* the batch: two molecules of n_per atoms, far apart; ghosts: the last 3 atoms */
    const int64_t n = 2 * n_per;
    fx->n = n, fx->n_systems = 2, fx->n_local = variant & 8 ? n - 3 : n;
    fx->species = malloc(sizeof(int32_t) * n), fx->batch = malloc(sizeof(int32_t) * n);
    fx->z = malloc(sizeof(int32_t) * n);
    fx->pos = malloc(sizeof(double) * 3 * n);
    fx->charges = malloc(sizeof(double) * 2);
    fx->charges[0] = 0.0, fx->charges[1] = -1.0;
    const double side = 1.6 * cbrt((double)n_per);
    for (int b = 0; b < 2; b++) {
        test_scatter(n_per, side, 0.9, 0, &g_seed, fx->pos + 3 * b * n_per);
        for (int64_t i = b * n_per; i < (b + 1) * n_per; i++) {
            fx->pos[3 * i] += 50.0 * b;
            fx->batch[i] = b;
            fx->species[i] = (int32_t)(urand() * 4) % 4;
            fx->z[i] = zs[fx->species[i]];
        }
    }
    /* a pair closer than the ZBL cutoff and one below cutoff_lower, in system 0 */
    for (int k = 0; k < 3; k++) fx->pos[3 * 1 + k] = fx->pos[k] + (k == 0 ? 0.35 : 0.0);
    const double rc = fmax(s->cutoff_upper, fx->has_zbl ? fx->zbl.cutoff : 0.0);
    fx->start = malloc(sizeof(int64_t) * (n + 1));
    int64_t cap = n * n + 2 * n + 37;
    fx->pairs = malloc(sizeof(int32_t) * 2 * cap);
    fx->vec = malloc(sizeof(double) * 3 * cap);
    int64_t e = 0;
    for (int64_t c = 0; c < n; c++) {
        fx->start[c] = e;
        for (int64_t j = 0; j < n; j++) {
            if (j == c || fx->batch[j] != fx->batch[c]) continue;
            double v3[3], r2 = 0;
            for (int k = 0; k < 3; k++) {
                v3[k] = fx->pos[3 * j + k] - fx->pos[3 * c + k];
                r2 += v3[k] * v3[k];
            }
            if (!(sqrt(r2) < rc)) continue;
            fx->pairs[2 * e] = (int32_t)c, fx->pairs[2 * e + 1] = (int32_t)j;
            memcpy(fx->vec + 3 * e, v3, sizeof v3);
            e++;
        }
        /* an atom's own periodic images (variant 64): shifts +-(3.7, 0.6, 0) */
        for (int sg = -1; (variant & 64) && sg <= 1; sg += 2) {
            fx->pairs[2 * e] = fx->pairs[2 * e + 1] = (int32_t)c;
            fx->vec[3 * e] = 3.7 * sg, fx->vec[3 * e + 1] = 0.6 * sg, fx->vec[3 * e + 2] = 0.0;
            e++;
        }
    }
    fx->start[n] = e;
    fx->n_entries = e;
    fx->capacity = e + 37; /* entries beyond the count: not read, zeros written */
}

static void free_fixture(fixture *fx) {
    free(fx->arena64), free(fx->arena32), free(fx->species), free(fx->batch), free(fx->z);
    free(fx->pos), free(fx->charges), free(fx->start), free(fx->pairs), free(fx->vec);
}

static int gpu_ready = 0;
static void need_gpu(void) {
    if (!gpu_ready) gpu_init_or_skip();
    gpu_ready = 1;
}

#define REAL double
#define SUF _f64
#define TOL_A 1e-10
#define TOL_R 1e-9
#include "tensornet_cases.h"
#undef REAL
#undef SUF
#undef TOL_A
#undef TOL_R

#define REAL float
#define SUF _f32
#define TOL_A 2e-4
#define TOL_R 2e-3
#include "tensornet_cases.h"
#undef REAL
#undef SUF
#undef TOL_A
#undef TOL_R

/* ---- gemm: the float32 products on the tensor cores against float64 sums ---- */

/* One product of n rows (tn_linear_act_cuda_f32: trans, beta, with its activation or without)
 * under the path `force` (nnpops__tn_gemm_path_cuda) against the same product summed in float64
 * from the same float32 inputs.  Each value must be within 1e-5 of the sum of the magnitudes of
 * its terms (float32 accuracy: a plain TF32 product is off by ~1e-3 of it), and the product must
 * have run on the tensor cores (the count of nnpops__tn_gemm_path_cuda grows) when tc is 1 and
 * on cuBLAS when it is 0. */
static int gemm_one(int64_t n, int in, int out, int trans, int beta, int with_act, int force,
                    int tc, void *blas) {
    const int wy = trans ? in : out, wx = trans ? out : in, act = NNPOPS__TN_SILU;
    const size_t ny = (size_t)n * wy, nx = (size_t)n * wx, nw = (size_t)in * out;
    float *x = malloc(sizeof(float) * (nx ? nx : 1)), *w = malloc(sizeof(float) * nw);
    float *y0 = malloc(sizeof(float) * (ny ? ny : 1)), *zg = malloc(sizeof(float) * (ny ? ny : 1));
    float *b = malloc(sizeof(float) * wy), *y = malloc(sizeof(float) * (ny ? ny : 1));
    float *a = malloc(sizeof(float) * (ny ? ny : 1));
    for (size_t k = 0; k < nx; k++) x[k] = (float)srand1();
    for (size_t k = 0; k < nw; k++) w[k] = (float)(srand1() / sqrt((double)wx));
    for (size_t k = 0; k < ny; k++) y0[k] = (float)srand1(), zg[k] = (float)(3.0 * srand1());
    for (int k = 0; k < wy; k++) b[k] = (float)srand1();
    float *dx = dup_to_device(x, sizeof(float) * nx), *dw = dup_to_device(w, sizeof(float) * nw);
    float *dy = dup_to_device(y0, sizeof(float) * ny), *dzg = dup_to_device(zg, sizeof(float) * ny);
    float *db = dup_to_device(b, sizeof(float) * wy), *da = dalloc(sizeof(float) * ny);
    const int before = nnpops__tn_gemm_path_cuda(force);
    CHECK_OK(nnpops__tn_linear_act_cuda_f32(act, n, in, out, trans, dw, dx, beta, dy, db,
                                            trans && with_act ? dzg : NULL,
                                            !trans && with_act ? da : NULL, blas,
                                            (void *)g_stream));
    const int ran_tc = nnpops__tn_gemm_path_cuda(0) > before;
    to_host(y, dy, sizeof(float) * ny);
    if (!trans && with_act) to_host(a, da, sizeof(float) * ny);
    double worst = 0, worst_a = 0;
    for (int64_t c = 0; c < n; c++)
        for (int o = 0; o < wy; o++) {
            double sum = beta ? y0[c * wy + o] : 0.0, mag = fabs(sum);
            for (int i = 0; i < wx; i++) {
                const double t = (double)x[c * wx + i] *
                                 (trans ? w[(size_t)i * in + o] : w[(size_t)o * in + i]);
                sum += t, mag += fabs(t);
            }
            const size_t k = (size_t)c * wy + o;
            double ref = sum;
            if (trans && with_act) { /* silu'(z) */
                const double z = (double)zg[k] + b[o], sg = 1.0 / (1.0 + exp(-z));
                ref *= sg * (1.0 + z * (1.0 - sg)), mag *= 1.1;
            }
            worst = fmax(worst, fabs(y[k] - ref) / (mag + 1e-30));
            if (!trans && with_act) {
                const double z = sum + b[o];
                const double silu = z / (1.0 + exp(-z));
                worst_a = fmax(worst_a, fabs(a[k] - silu) / (mag + fabs(b[o]) + 1.0));
            }
        }
    const int bad = !(worst <= 1e-5) || !(worst_a <= 1e-5) || ran_tc != tc;
    printf("  %5lld x %3d -> %3d, trans %d, beta %d, activation %d, %s: %s, worst %.2e "
           "(activation %.2e) of the terms' magnitude%s\n",
           (long long)n, trans ? out : in, wy, trans, beta, with_act,
           force == 1 ? "tensor cores forced" : "path by size",
           ran_tc ? "tensor cores" : "cuBLAS", worst, worst_a, bad ? "  FAIL" : "");
    cudaFree(dx), cudaFree(dw), cudaFree(dy), cudaFree(dzg), cudaFree(db), cudaFree(da);
    free(x), free(w), free(y0), free(zg), free(b), free(y), free(a);
    return bad;
}

/* The tensor cores forced: rows over one tile and over several with a partial last one; inner
 * dimensions below, at and over a step of the kernel (32) and not a multiple of it; widths below
 * and over a tile (64); shapes they do not take (an inner dimension or a width not a multiple of
 * 4).  The path by size: cuBLAS below a block per multiprocessor, the tensor cores from it. */
static int gemm_case(void) {
    need_gpu();
    cublasHandle_t blas;
    CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasSetStream(blas, g_stream) == CUBLAS_STATUS_SUCCESS);
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
    const int64_t many = 64 * (int64_t)((sms + 5) / 6); /* rows: sms blocks at a width of 384 */
    const struct {
        int64_t n;
        int in, out, force, tc;
    } shapes[] = {
        {1, 4, 4, 1, 1},
        {13, 32, 128, 1, 1},
        {GPU_OR_EMU(4099, 133), 128, 256, 1, 1},
        {GPU_OR_EMU(5000, 70), 256, 384, 1, 1},
        {GPU_OR_EMU(777, 65), 36, 68, 1, 1},
        {GPU_OR_EMU(3001, 67), 384, 32, 1, 1},
        {9, 5, 24, 1, 0},
        {9, 24, 6, 1, 0},
        {13, 32, 128, 0, 0},
        {many - 64, 8, 384, 0, 0},
        {many, 8, 384, 0, 1},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int trans = 0; trans <= 1; trans++)
            for (int v = 0; v < 3; v++) { /* plain, accumulating, with the activation */
                /* (the width, not the inner dimension, sets the blocks of the path by size) */
                const int in = trans && !shapes[k].force ? shapes[k].out : shapes[k].in;
                const int out = trans && !shapes[k].force ? shapes[k].in : shapes[k].out;
                bad |= gemm_one(shapes[k].n, in, out, trans, v == 1, v == 2, shapes[k].force,
                                shapes[k].tc, blas);
            }
    cublasDestroy(blas);
    return bad;
}

/* ---- pairs: the numbering's two paths against the CPU twin on dense lists ---- */

/* One list set: n atoms in a cube of side `side` (every entry within 4.0, two own images of every
 * third atom, the network edges those at 0.4 or more), the capacity `trim` below the entries (> 0: a truncated
 * list) or 37 above, and n_pairs = `pairs_of` pairs (0: (capacity + 1) / 2). */
static int pairs_one(int64_t n, double side, int64_t trim, int64_t pairs_of) {
    double *pos = malloc(sizeof(double) * 3 * n);
    test_scatter((int)n, side, 0.8, 0, &g_seed, pos);
    const int64_t cap_max = n * (n + 2 < 400 ? n + 2 : 400) + 37; /* (400: above the density) */
    int64_t *start = malloc(sizeof(int64_t) * (n + 1));
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap_max);
    double *vec = malloc(sizeof(double) * 3 * cap_max);
    int64_t e = 0;
    for (int64_t c = 0; c < n; c++) {
        start[c] = e;
        for (int64_t j = 0; j < n; j++) {
            double v3[3], r2 = 0;
            for (int k = 0; k < 3; k++) {
                v3[k] = pos[3 * j + k] - pos[3 * c + k];
                r2 += v3[k] * v3[k];
            }
            if (j == c || !(r2 < 16.0) || e >= cap_max - 2) continue;
            pairs[2 * e] = (int32_t)c, pairs[2 * e + 1] = (int32_t)j;
            memcpy(vec + 3 * e, v3, sizeof v3);
            e++;
        }
        for (int sg = -1; c % 3 == 0 && sg <= 1; sg += 2) { /* own images, +-(3.1, 0.5, 0) */
            pairs[2 * e] = pairs[2 * e + 1] = (int32_t)c;
            vec[3 * e] = 3.1 * sg, vec[3 * e + 1] = 0.5 * sg, vec[3 * e + 2] = 0.0;
            e++;
        }
    }
    start[n] = e;
    const int64_t E = trim > 0 ? e - trim : e + 37;
    const int64_t P = pairs_of > 0 ? pairs_of : (E + 1) / 2;
    uint8_t *mask = calloc((size_t)(E > e ? E : e), 1);
    int64_t most = 0;
    for (int64_t c = 0; c < n; c++) {
        if (start[c + 1] - start[c] > most) most = start[c + 1] - start[c];
        for (int64_t q = start[c]; q < start[c + 1]; q++) {
            const double *v = vec + 3 * q;
            const double r2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
            mask[q] = r2 >= 0.16 ? NNPOPS__TN_EDGE : 0;
        }
    }
    printf(" %lld atoms, %lld entries (up to %lld per center), capacity %lld, %lld pairs\n",
           (long long)n, (long long)e, (long long)most, (long long)E, (long long)P);
    int32_t *slot = malloc(sizeof(int32_t) * E), *pentry = malloc(sizeof(int32_t) * P);
    int32_t *pmirror = malloc(sizeof(int32_t) * P), *cnt = malloc(sizeof(int32_t) * (n + 1));
    int32_t *slot_b = malloc(sizeof(int32_t) * E), *pentry_b = malloc(sizeof(int32_t) * P);
    int32_t *pmirror_b = malloc(sizeof(int32_t) * P);
    nnpops__tn_pairs_cpu(n, start, pairs, E, vec, mask, P, slot, pentry, pmirror, cnt);
    int64_t held = 0;
    for (int64_t p = 0; p < P; p++) held += pentry[p] >= 0;
    int64_t *dstart = dup_to_device(start, sizeof(int64_t) * (n + 1));
    int32_t *dpairs = dup_to_device(pairs, sizeof(int32_t) * 2 * e);
    double *dvec = dup_to_device(vec, sizeof(double) * 3 * e);
    uint8_t *dmask = dup_to_device(mask, (size_t)(E > e ? E : e));
    int32_t *dslot = dalloc(sizeof(int32_t) * E), *dpentry = dalloc(sizeof(int32_t) * P);
    int32_t *dpmirror = dalloc(sizeof(int32_t) * P), *dcnt = dalloc(sizeof(int32_t) * (n + 1));
    int bad = 0;
    for (int path = 0; path <= 2; path++) {
        /* (garbage first: each path writes every value) */
        CHECK(cudaMemset(dslot, 0x5a, sizeof(int32_t) * E) == cudaSuccess);
        CHECK(cudaMemset(dpentry, 0x5a, sizeof(int32_t) * P) == cudaSuccess);
        CHECK(cudaMemset(dpmirror, 0x5a, sizeof(int32_t) * P) == cudaSuccess);
        CHECK_OK(nnpops__tn_pairs_cuda(n, dstart, dpairs, E, dvec, dmask, P, dslot, dpentry,
                                       dpmirror, dcnt, path, (void *)g_stream));
        to_host(slot_b, dslot, sizeof(int32_t) * E);
        to_host(pentry_b, dpentry, sizeof(int32_t) * P);
        to_host(pmirror_b, dpmirror, sizeof(int32_t) * P);
        const int same = !memcmp(slot, slot_b, sizeof(int32_t) * E) &&
                         !memcmp(pentry, pentry_b, sizeof(int32_t) * P) &&
                         !memcmp(pmirror, pmirror_b, sizeof(int32_t) * P);
        printf("  path %d: %lld pairs held, %s\n", path, (long long)held,
               same ? "slots, entries and mirrors the same" : "DIFFERENT");
        bad |= !same;
    }
    CHECK(held > 0);
    cudaFree(dstart), cudaFree(dpairs), cudaFree(dvec), cudaFree(dmask), cudaFree(dslot);
    cudaFree(dpentry), cudaFree(dpmirror), cudaFree(dcnt);
    free(pos), free(start), free(pairs), free(vec), free(mask), free(slot), free(pentry);
    free(pmirror), free(cnt), free(slot_b), free(pentry_b), free(pmirror_b);
    return bad;
}

/* more than 32 entries per center (a warp's several rounds) and more centers than the one
 * block's warps (chunks of several centers); a truncated list; fewer pair numbers than pairs */
static int pairs_case(void) {
    need_gpu();
    int bad = pairs_one(GPU_OR_EMU(3000, 150), GPU_OR_EMU(22.0, 7.0), 0, 0);
    bad |= pairs_one(GPU_OR_EMU(400, 90), GPU_OR_EMU(9.0, 5.0), 101, 0);
    bad |= pairs_one(GPU_OR_EMU(400, 90), GPU_OR_EMU(9.0, 5.0), 0, 300);
    return bad;
}

int main(int argc, char **argv) {
    const test_case cases[] = {
        {"compose_f64", compose_f64}, {"compose_f32", compose_f32}, {"ops_f64", ops_f64},
        {"ops_f32", ops_f32},         {"step_f64", step_f64},       {"step_f32", step_f32},
        {"tiles_f64", tiles_f64},     {"tiles_f32", tiles_f32},
        {"gemm_f32", gemm_case},      {"pairs", pairs_case},
    };
    const int rc = test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
    if (rc == 0) printf("%s: ok\n", argv[1]);
    return rc;
}
