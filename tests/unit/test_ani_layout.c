/*
 * test_ani_layout.c - the host-side plan of the ANI GPU step (potentials/ani/ani_cuda.c), which
 * needs no device: its work space (nnpops__ani_cuda_work_bytes) and how many of ANI's side streams
 * the step runs branches on (nnpops__ani_cuda_side_streams), from the step's host sizes
 * (pot_sizes: the local atoms per species, what vt->cuda_prepare writes).
 * The networks have ANI-2x's widths (1008 inputs, 7 species, 8 members); the column counts are
 * those of the bench systems.  Built with the CUDA backend only (label unit: no GPU needed).
 *
 *   protein   float32, 1hz5's species (478 H, 314 C, 77 N, 103 O, 1 S): S and N on the small-n
 *             path, H, C and O on concurrent branches beside it: 3 side streams
 *   water     float32, 2,000 H and 1,000 O: 2 branches, 1 side stream
 *   small     float32, alanine (7 H, 3 C, 1 N, 2 O): every species on the small-n path, 0
 *   one_large float32, 100 H beside 40 C: the large species runs on a side stream beside the small
 *             species' networks on the step's stream: 1
 *   float64   float64 with 1hz5's species: no small-n path, five species on four branches: 3
 *   single    float64, one species: 0
 *   work      the work space grows with the columns and is the same for float32 with the tensor
 *             cores on or off only where no species uses them (at most 96 atoms each: the
 *             small-n path)
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "potentials/ani/ani.h"

static nnpops__ani g_ani;
static nnpops_model g_model;

/* ANI-2x's network widths (H, C, N, O, S, F, Cl), 8 members */
static void setup(nnpops_precision prec) {
    static const int32_t w[7][5] = {
        {1008, 256, 192, 160, 1}, {1008, 224, 192, 160, 1}, {1008, 192, 160, 128, 1},
        {1008, 192, 160, 128, 1}, {1008, 160, 128, 96, 1},  {1008, 160, 128, 96, 1},
        {1008, 160, 128, 96, 1},
    };
    memset(&g_ani, 0, sizeof g_ani);
    memset(&g_model, 0, sizeof g_model);
    g_ani.aev.aev_len = 1008;
    g_ani.n_species = 7;
    g_ani.ensemble = 8;
    g_ani.precision = prec;
    g_ani.elem_size = prec == NNPOPS_FLOAT64 ? 8 : 4;
    for (int s = 0; s < 7; s++) {
        g_ani.n_layers[s] = 4;
        for (int l = 0; l < 5; l++) g_ani.width[s][l] = w[s][l];
    }
    g_ani.max_width = 256;
    g_ani.max_width1 = 256;
    g_ani.max_hidden_sum = 352;
    g_model.impl = &g_ani;
}

/* A step with these local atoms per species (H, C, N, O, S, F, Cl), every species present (the
 * model's full AEV); tensor_cores auto. */
static nnpops__dstep step_of(const int64_t counts[7]) {
    nnpops__dstep st;
    memset(&st, 0, sizeof st);
    for (int s = 0; s < 7; s++) {
        st.pot_sizes[s] = counts[s];
        st.n_local += counts[s];
    }
    st.n_atoms = st.n_local;
    st.tensor_cores = 2;
    return st;
}

/* The side streams of a step of these atoms per species (H, C, N, O, S, F, Cl), against `want`. */
typedef struct plan_case {
    const char *name;
    nnpops_precision prec;
    int64_t counts[7];
    int want;
} plan_case;

static const plan_case plans[] = {
    {"protein", NNPOPS_FLOAT32, {478, 314, 77, 103, 1, 0, 0}, 3},
    {"water", NNPOPS_FLOAT32, {2000, 0, 0, 1000, 0, 0, 0}, 1},
    {"small", NNPOPS_FLOAT32, {7, 3, 1, 2, 0, 0, 0}, 0},
    {"one_large", NNPOPS_FLOAT32, {100, 40, 0, 0, 0, 0, 0}, 1},
    {"float64", NNPOPS_FLOAT64, {478, 314, 77, 103, 1, 0, 0}, 3},
    {"single", NNPOPS_FLOAT64, {0, 0, 0, 50, 0, 0, 0}, 0},
};

static int run_plan(const plan_case *p) {
    setup(p->prec);
    const nnpops__dstep st = step_of(p->counts);
    const int n = nnpops__ani_cuda_side_streams(&g_model, &st);
    const size_t bytes = nnpops__ani_cuda_work_bytes(&g_model, &st);
    const int64_t *c = p->counts;
    printf("%s, atoms per species %lld %lld %lld %lld %lld %lld %lld: %d side streams (want %d), "
           "%zu bytes of work space\n",
           p->prec == NNPOPS_FLOAT64 ? "float64" : "float32", (long long)c[0], (long long)c[1],
           (long long)c[2], (long long)c[3], (long long)c[4], (long long)c[5], (long long)c[6], n,
           p->want, bytes);
    CHECK(n == p->want);
    return 0;
}

static int case_work(void) {
    setup(NNPOPS_FLOAT32);
    const int64_t a[7] = {200, 100, 0, 0, 0, 0, 0}, b[7] = {2000, 1000, 0, 0, 0, 0, 0};
    nnpops__dstep sa = step_of(a), sb = step_of(b);
    const size_t wa = nnpops__ani_cuda_work_bytes(&g_model, &sa),
                 wb = nnpops__ani_cuda_work_bytes(&g_model, &sb);
    printf("work space: %zu bytes (200 H, 100 C), %zu bytes (2,000 H, 1,000 C)\n", wa, wb);
    CHECK(wa > 0 && wb > wa);
    /* species of at most 96 atoms take the small-n path, where tensor_cores auto uses no
     * stacked operands: equal to off */
    const int64_t c[7] = {40, 20, 0, 0, 0, 0, 0};
    nnpops__dstep sc = step_of(c), off = sc;
    off.tensor_cores = 0;
    CHECK(nnpops__ani_cuda_work_bytes(&g_model, &off) ==
          nnpops__ani_cuda_work_bytes(&g_model, &sc));
    /* above (the cuBLAS path), the stacked operands of the 3xTF32 products are extra work space */
    off = sa;
    off.tensor_cores = 0;
    CHECK(nnpops__ani_cuda_work_bytes(&g_model, &off) < wa);
    off = sb;
    off.tensor_cores = 0;
    CHECK(nnpops__ani_cuda_work_bytes(&g_model, &off) < wb);
    return 0;
}

static const test_case cases[] = {{"work", case_work}};

int main(int argc, char **argv) {
    for (size_t k = 0; argc == 2 && k < sizeof plans / sizeof plans[0]; k++)
        if (strcmp(argv[1], plans[k].name) == 0) return run_plan(&plans[k]);
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
