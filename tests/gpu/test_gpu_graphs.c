/*
 * test_gpu_graphs.c - CUDA graphs and deterministic mode of the GPU step, through the public API
 * (label gpu; exit 77 when nnpops_cuda_device_count() == 0).  One CTest entry per case:
 *
 *   replay PREC [MODEL]  ANI-2x (or MODEL: tn_a, TensorNet) on device "cuda", a molecule and a
 *                   periodic water box, 8 steps with moving
 *                   positions each, in a context with cuda_graphs on (set by name, as pair_style and
 *                   the Python keyword arguments do) and in an eager one: every output of every step
 *                   equal (normwise: max|a - b| <= tol max|b|; float64 tol 1e-12; float32 1e-6 with
 *                   deterministic on in both contexts, and printed, with a 1e-5 check, when off);
 *                   the warm-up rule: no capture during the first graph_warmup_steps steps of a shape,
 *                   exactly one capture after many equal steps, replays counted
 *   warmup          graph_warmup_steps 5 (by name): captures stay 0 for 5 steps, 1 after the 6th and
 *                   after 40 steps; replays = 34
 *   shape           molecule A, molecule B (emulated: a smaller one), a two-system batch, A
 *                   again (4 steps each): every shape change drops the graph and captures a new
 *                   one (captures increase, replays happen), results equal an eager context
 *   overflow        a water box replayed from a graph, then compressed to 0.8 of its size (the
 *                   neighbor count doubles, same atom count): the replay's overflow flag makes the
 *                   step recompute with grown buffers (rebuild counted), the result equals an eager
 *                   context, and the new shape is captured again and replayed
 *   deterministic   float32, a 12,288-atom water box: deterministic on, 100 steps (graphs on, so
 *                   mostly replays): bitwise identical energy and forces; printed (not asserted):
 *                   how many of 20 steps with deterministic off differ from the first, and the cost
 *                   of deterministic (median ms/step on and off).  Float64 deterministic on against
 *                   off for a molecule, a box with ghosts (n_local < n_atoms) and a batch: every
 *                   output within 1e-7 normwise (the fixed-point sums of deterministic mode
 *                   resolve 2^-40 per term, ~1e-10 hartree/A in forces after summation).
 * Capture failure: no portable way to make cudaStreamBeginCapture / EndCapture fail from outside
 * the library was found, so the fallback (eager step, eager_fallbacks, nnpops_context_last_warning)
 * is not provoked here; the warning is only checked to be "" after successful captures.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "emulated.h"
#include "nnpops/nnpops.h"
#include "reference.h"
#include "structures.h"

typedef struct sysin {
    int64_t n, n_local, ns;
    int32_t *z, *batch;
    double *x;
    double cells[2 * 9];
    uint8_t pbc[2 * 3];
    int periodic;
} sysin;

typedef struct outs {
    int64_t n, ns;
    double e[2], v[18], me[16];
    double *f, *ae, *av;
} outs;

static void outs_init(outs *o, int64_t n, int64_t ns) {
    memset(o, 0, sizeof *o);
    o->n = n;
    o->ns = ns;
    o->f = calloc(3 * n + 3, sizeof(double));
    o->ae = calloc(n + 1, sizeof(double));
    o->av = calloc(9 * n + 9, sizeof(double));
}

static void outs_free(outs *o) {
    free(o->f);
    free(o->ae);
    free(o->av);
}

static void step(nnpops_context *ctx, const sysin *s, const double *x, outs *o, int all) {
    nnpops_inputs in = {sizeof in, s->n, s->n_local, s->ns, s->z, x, s->batch,
                        s->periodic ? s->cells : NULL, s->periodic ? s->pbc : NULL};
    nnpops_outputs out = {sizeof out, o->e, o->f, o->v, all ? o->ae : NULL, all ? o->av : NULL,
                          all ? o->me : NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
}

/* max |a - b| / max |b| (0 when both are 0) */
static double normwise(const double *a, const double *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t k = 0; k < n; k++) {
        d = fmax(d, fabs(a[k] - b[k]));
        m = fmax(m, fabs(b[k]));
    }
    return m > 0 ? d / m : d;
}

/* Worst normwise difference over every output. */
static double outs_diff(const outs *a, const outs *b, int all, int ens) {
    double w = normwise(a->e, b->e, a->ns);
    w = fmax(w, normwise(a->f, b->f, 3 * a->n));
    w = fmax(w, normwise(a->v, b->v, 9 * a->ns));
    if (all) {
        w = fmax(w, normwise(a->ae, b->ae, a->n));
        w = fmax(w, normwise(a->av, b->av, 9 * a->n));
        w = fmax(w, normwise(a->me, b->me, a->ns * ens));
    }
    return w;
}

static void load(const char *name, nnpops_precision p, nnpops_model **m, nnpops_context **c) {
    CHECK_OK(nnpops_model_load(name, "cuda", p, m));
    CHECK_OK(nnpops_context_create(*m, c));
}

static nnpops_stats stats_of(const nnpops_context *c) {
    nnpops_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(nnpops_context_stats(c, &s));
    return s;
}

static sysin molecule(const refsys *r) {
    sysin s;
    memset(&s, 0, sizeof s);
    s.n = r->n;
    s.n_local = -1;
    s.ns = 1;
    s.z = r->z;
    s.x = r->x;
    return s;
}

static sysin water(int m, uint64_t seed) {
    sysin s;
    memset(&s, 0, sizeof s);
    s.n = water_box(m, seed, &s.z, &s.x, s.cells);
    s.n_local = -1;
    s.ns = 1;
    s.periodic = 1;
    s.pbc[0] = s.pbc[1] = s.pbc[2] = 1;
    return s;
}

/* positions of step k: a deterministic small displacement of every atom */
static void moved(const sysin *s, int k, double *x) {
    for (int64_t i = 0; i < 3 * s->n; i++) x[i] = s->x[i] + 0.01 * sin(0.7 * (double)i + 1.3 * k);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * t.tv_sec + 1e-6 * t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- replay equals eager, warm-up rule ------------------------------------------------------ */

/* The model of the replay case (argument 3; default ani2x). */
static const char *g_model = "ani2x";

static int replay_run(nnpops_precision p, int det, double tol, const char *label, const sysin *s) {
    nnpops_model *m;
    nnpops_context *cg, *ce;
    load(g_model, p, &m, &cg);
    CHECK_OK(nnpops_context_create(m, &ce));
    CHECK_OK(nnpops_context_set_option_by_name(cg, "cuda_graphs", "on"));
    CHECK_OK(nnpops_context_set_option_by_name(cg, "graph_warmup_steps", "2"));
    if (det) {
        CHECK_OK(nnpops_context_set_option_by_name(cg, "deterministic", "on"));
        CHECK_OK(nnpops_context_set_option_by_name(ce, "deterministic", "on"));
    }
    const int ens = nnpops_model_ensemble_size(m);
    double *x = malloc(sizeof(double) * 3 * s->n);
    outs a, b;
    outs_init(&a, s->n, s->ns);
    outs_init(&b, s->n, s->ns);
    double worst = 0;
    int fail = 0;
    const int steps = 8;
    int64_t rebuilds_warm = 0; /* neighbor capacity growths by the end of the first warm-up */
    for (int k = 0; k < steps; k++) {
        moved(s, k, x);
        step(cg, s, x, &a, 0);
        step(ce, s, x, &b, 0);
        worst = fmax(worst, outs_diff(&a, &b, 0, ens));
        const nnpops_stats st = stats_of(cg);
        if (k < 2 && st.graph_captures != 0) {
            fprintf(stderr, "%s: a capture during warm-up (step %d)\n", label, k + 1);
            fail = 1;
        }
        if (k == 1) rebuilds_warm = st.neighbor_rebuilds;
    }
    /* the same shape with every output (another key: captured again after its warm-up) */
    for (int k = 0; k < 5; k++) {
        moved(s, 10 + k, x);
        step(cg, s, x, &a, 1);
        step(ce, s, x, &b, 1);
        worst = fmax(worst, outs_diff(&a, &b, 1, ens));
    }
    const nnpops_stats st = stats_of(cg);
    printf("%-34s steps %lld, captures %lld, replays %lld, fallbacks %lld, worst normwise "
           "|graph - eager| %.3e (tolerance %.0e)\n",
           label, (long long)st.steps, (long long)st.graph_captures, (long long)st.graph_replays,
           (long long)st.eager_fallbacks, worst, tol);
    /* A growth of the neighbor capacity after the warm-up (the moved atoms need more entries) is
     * a new shape: its step is recomputed, and the new shape warms up and is captured again, two
     * replays fewer and one capture more per growth. */
    const int64_t regrown = st.neighbor_rebuilds - rebuilds_warm;
    const int64_t want_captures = 2 + regrown, want_replays = (steps - 3) + 2 - 2 * regrown;
    if (regrown) printf("%-34s %lld neighbor capacity growths after the warm-up\n", label,
                        (long long)regrown);
    if (st.graph_captures != want_captures || st.graph_replays != want_replays ||
        st.eager_fallbacks != 0) {
        fprintf(stderr,
                "%s: expected %lld captures, %lld replays, 0 fallbacks (warning \"%s\")\n",
                label, (long long)want_captures, (long long)want_replays,
                nnpops_context_last_warning(cg));
        fail = 1;
    }
    if (strcmp(nnpops_context_last_warning(cg), "") != 0) {
        fprintf(stderr, "%s: unexpected warning: %s\n", label, nnpops_context_last_warning(cg));
        fail = 1;
    }
    if (!(worst <= tol)) fail = 1;
    outs_free(&a);
    outs_free(&b);
    free(x);
    nnpops_context_destroy(cg);
    nnpops_context_destroy(ce);
    nnpops_model_destroy(m);
    return fail;
}

static int case_replay(const char *prec) {
    static refset set;
    if (!ref_load("ani2x", &set)) return test_missing_data(set.path);
    const refsys *mol = ref_find(&set, "13_f0");
    sysin s1 = molecule(mol), s2 = water(6, 7);
    int f = 0;
    if (!strcmp(prec, "f64")) {
        f += replay_run(NNPOPS_FLOAT64, 0, 1e-12, "f64 alanine 13_f0", &s1);
        f += replay_run(NNPOPS_FLOAT64, 0, 1e-12, "f64 water 6^3 (648, periodic)", &s2);
    } else {
        f += replay_run(NNPOPS_FLOAT32, 1, 1e-6, "f32 deterministic, alanine 13_f0", &s1);
        f += replay_run(NNPOPS_FLOAT32, 1, 1e-6, "f32 deterministic, water 6^3", &s2);
        /* with atomics the last bits vary run to run: printed, checked loosely */
        f += replay_run(NNPOPS_FLOAT32, 0, 1e-5, "f32 (deterministic off), alanine", &s1);
        f += replay_run(NNPOPS_FLOAT32, 0, 1e-5, "f32 (deterministic off), water 6^3", &s2);
    }
    free(s2.z);
    free(s2.x);
    return f ? 1 : 0;
}

static int case_warmup(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return test_missing_data(set.path);
    const refsys *mol = ref_find(&set, "13_f0");
    sysin s = molecule(mol);
    nnpops_model *m;
    nnpops_context *c;
    load("ani2x", NNPOPS_FLOAT32, &m, &c);
    /* warmup steps other than the default (2); emulated: 3 eager steps, the capture and two
     * replays (a replay after a replay), every step a step of the same code as on a GPU */
    const int warm = GPU_OR_EMU(5, 3), steps = GPU_OR_EMU(40, warm + 3);
    char warm_s[16];
    snprintf(warm_s, sizeof warm_s, "%d", warm);
    CHECK_OK(nnpops_context_set_option_by_name(c, "cuda_graphs", "on"));
    CHECK_OK(nnpops_context_set_option_by_name(c, "graph_warmup_steps", warm_s));
    double v = 0;
    CHECK_OK(nnpops_context_get_option(c, NNPOPS_OPTION_GRAPH_WARMUP_STEPS, &v));
    CHECK(v == warm);
    outs o;
    outs_init(&o, s.n, 1);
    double *x = malloc(sizeof(double) * 3 * s.n);
    int fail = 0;
    for (int k = 0; k < steps; k++) {
        moved(&s, k, x);
        step(c, &s, x, &o, 0);
        const nnpops_stats st = stats_of(c);
        const int64_t want_c = k < warm ? 0 : 1, want_r = k < warm + 1 ? 0 : k - warm;
        if (st.graph_captures != want_c || st.graph_replays != want_r) {
            fprintf(stderr, "step %d: captures %lld replays %lld, expected %lld and %lld\n", k + 1,
                    (long long)st.graph_captures, (long long)st.graph_replays, (long long)want_c,
                    (long long)want_r);
            fail = 1;
        }
    }
    const nnpops_stats st = stats_of(c);
    printf("graph_warmup_steps %d, %d equal steps: captures %lld, replays %lld\n", warm, steps,
           (long long)st.graph_captures, (long long)st.graph_replays);
    outs_free(&o);
    free(x);
    nnpops_context_destroy(c);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- shape changes ------------------------------------------------------------------------- */

static int case_shape(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return test_missing_data(set.path);
    /* (emulated: B the 28-atom molecule) */
    const refsys *ra = ref_find(&set, "13_f0"), *rb = ref_find(&set, GPU_OR_EMU("50_f0", "28_f0"));
    sysin A = molecule(ra), B = molecule(rb);
    /* a batch: A and B as two systems */
    sysin AB;
    memset(&AB, 0, sizeof AB);
    AB.n = A.n + B.n;
    AB.n_local = -1;
    AB.ns = 2;
    AB.z = malloc(sizeof(int32_t) * AB.n);
    AB.batch = malloc(sizeof(int32_t) * AB.n);
    AB.x = malloc(sizeof(double) * 3 * AB.n);
    for (int64_t i = 0; i < AB.n; i++) {
        const int inA = i < A.n;
        AB.z[i] = inA ? A.z[i] : B.z[i - A.n];
        AB.batch[i] = inA ? 0 : 1;
        for (int d = 0; d < 3; d++) AB.x[3 * i + d] = inA ? A.x[3 * i + d] : B.x[3 * (i - A.n) + d];
    }
    const sysin *seq[4] = {&A, &B, &AB, &A};
    const char *names[4] = {"A (13 atoms)", "B (50 atoms)", "batch A+B", "A again"};
    nnpops_model *m;
    nnpops_context *cg, *ce;
    load("ani2x", NNPOPS_FLOAT64, &m, &cg);
    CHECK_OK(nnpops_context_create(m, &ce));
    CHECK_OK(nnpops_context_set_option(cg, NNPOPS_OPTION_CUDA_GRAPHS, 1));
    int fail = 0;
    int64_t prev_c = 0, prev_r = 0;
    for (int q = 0; q < 4; q++) {
        const sysin *s = seq[q];
        outs a, b;
        outs_init(&a, s->n, s->ns);
        outs_init(&b, s->n, s->ns);
        double *x = malloc(sizeof(double) * 3 * s->n);
        double worst = 0;
        for (int k = 0; k < 5; k++) {
            moved(s, k, x);
            step(cg, s, x, &a, 0);
            step(ce, s, x, &b, 0);
            worst = fmax(worst, outs_diff(&a, &b, 0, 8));
        }
        const nnpops_stats st = stats_of(cg);
        printf("%-14s captures %lld (+%lld), replays %lld (+%lld), worst |graph - eager| %.3e\n",
               names[q], (long long)st.graph_captures, (long long)(st.graph_captures - prev_c),
               (long long)st.graph_replays, (long long)(st.graph_replays - prev_r), worst);
        if (st.graph_captures <= prev_c || st.graph_replays <= prev_r || !(worst <= 1e-12)) fail = 1;
        prev_c = st.graph_captures;
        prev_r = st.graph_replays;
        outs_free(&a);
        outs_free(&b);
        free(x);
    }
    free(AB.z);
    free(AB.batch);
    free(AB.x);
    nnpops_context_destroy(cg);
    nnpops_context_destroy(ce);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- neighbor overflow under graphs --------------------------------------------------------- */

static int case_overflow(void) {
    /* (emulated: 81 atoms in a box of 9.3 A, 7.4 A compressed: images from the start, the
     * same overflow and re-capture) */
    sysin s = water(GPU_OR_EMU(6, 3), 11), t = s;
    /* the same atoms compressed to 0.8 of the box: about twice the neighbors per atom */
    t.x = malloc(sizeof(double) * 3 * s.n);
    for (int64_t i = 0; i < 3 * s.n; i++) t.x[i] = 0.8 * s.x[i];
    for (int k = 0; k < 9; k++) t.cells[k] = 0.8 * s.cells[k];
    nnpops_model *m;
    nnpops_context *cg, *ce;
    load("ani2x", NNPOPS_FLOAT64, &m, &cg);
    CHECK_OK(nnpops_context_create(m, &ce));
    CHECK_OK(nnpops_context_set_option(cg, NNPOPS_OPTION_CUDA_GRAPHS, 1));
    outs a, b;
    outs_init(&a, s.n, 1);
    outs_init(&b, s.n, 1);
    double *x = malloc(sizeof(double) * 3 * s.n);
    double worst = 0;
    for (int k = 0; k < 5; k++) {
        moved(&s, k, x);
        step(cg, &s, x, &a, 0);
        step(ce, &s, x, &b, 0);
        worst = fmax(worst, outs_diff(&a, &b, 0, 8));
    }
    const nnpops_stats s0 = stats_of(cg);
    /* the jump: first step replays the old graph on the dense box, sees the overflow */
    double worst_jump = 0;
    for (int k = 0; k < 6; k++) {
        moved(&t, k, x);
        step(cg, &t, x, &a, 0);
        step(ce, &t, x, &b, 0);
        worst_jump = fmax(worst_jump, outs_diff(&a, &b, 0, 8));
    }
    const nnpops_stats s1 = stats_of(cg);
    printf("before: captures %lld replays %lld rebuilds %lld pairs %lld capacity %lld\n",
           (long long)s0.graph_captures, (long long)s0.graph_replays,
           (long long)s0.neighbor_rebuilds, (long long)s0.n_pairs, (long long)s0.pair_capacity);
    printf("after the jump: captures %lld replays %lld rebuilds %lld pairs %lld capacity %lld\n",
           (long long)s1.graph_captures, (long long)s1.graph_replays,
           (long long)s1.neighbor_rebuilds, (long long)s1.n_pairs, (long long)s1.pair_capacity);
    printf("worst |graph - eager| %.3e before, %.3e after the jump\n", worst, worst_jump);
    int fail = 0;
    if (s0.graph_replays < 1) fail = 1;
    if (s1.neighbor_rebuilds <= s0.neighbor_rebuilds) {
        fprintf(stderr, "no neighbor rebuild after the density jump\n");
        fail = 1;
    }
    if (s1.graph_captures <= s0.graph_captures || s1.graph_replays <= s0.graph_replays) {
        fprintf(stderr, "the grown shape was not re-captured and replayed\n");
        fail = 1;
    }
    if (!(worst <= 1e-12 && worst_jump <= 1e-12)) fail = 1;
    outs_free(&a);
    outs_free(&b);
    free(x);
    free(t.x);
    free(s.z);
    free(s.x);
    nnpops_context_destroy(cg);
    nnpops_context_destroy(ce);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- deterministic ------------------------------------------------------------------------- */

static double median_ms(nnpops_context *c, const sysin *s, outs *o, int steps) {
    double *t = malloc(sizeof(double) * steps);
    for (int k = 0; k < steps; k++) {
        const double t0 = now_ms();
        step(c, s, s->x, o, 0);
        t[k] = now_ms() - t0;
    }
    qsort(t, steps, sizeof(double), cmp_d);
    const double med = t[steps / 2];
    free(t);
    return med;
}

static int case_deterministic(void) {
    int fail = 0;
    /* float32, >= 10^4 atoms, 100 repeats, bitwise */
    {
        sysin s = water(16, 5); /* 12,288 atoms */
        nnpops_model *m;
        nnpops_context *cd, *cn;
        load("ani2x", NNPOPS_FLOAT32, &m, &cd);
        CHECK_OK(nnpops_context_create(m, &cn));
        CHECK_OK(nnpops_context_set_option_by_name(cd, "deterministic", "on"));
        CHECK_OK(nnpops_context_set_option_by_name(cd, "cuda_graphs", "on"));
        outs first, o;
        outs_init(&first, s.n, 1);
        outs_init(&o, s.n, 1);
        step(cd, &s, s.x, &first, 0);
        int differ = 0;
        for (int k = 1; k < 100; k++) {
            step(cd, &s, s.x, &o, 0);
            if (memcmp(o.e, first.e, sizeof(double)) || memcmp(o.f, first.f, sizeof(double) * 3 * s.n) ||
                memcmp(o.v, first.v, sizeof(double) * 9))
                differ++;
        }
        const nnpops_stats st = stats_of(cd);
        printf("deterministic on, f32, %lld atoms: %d of 99 repeats differ from the first "
               "(captures %lld, replays %lld)\n",
               (long long)s.n, differ, (long long)st.graph_captures, (long long)st.graph_replays);
        if (differ || st.graph_replays <= 0) fail = 1;
        /* deterministic off: printed only */
        outs f0, o2;
        outs_init(&f0, s.n, 1);
        outs_init(&o2, s.n, 1);
        step(cn, &s, s.x, &f0, 0);
        int differ_off = 0;
        double spread = 0;
        for (int k = 1; k < 20; k++) {
            step(cn, &s, s.x, &o2, 0);
            if (memcmp(o2.e, f0.e, sizeof(double)) || memcmp(o2.f, f0.f, sizeof(double) * 3 * s.n))
                differ_off++;
            spread = fmax(spread, normwise(o2.f, f0.f, 3 * s.n));
        }
        printf("deterministic off: %d of 19 repeats differ bitwise from the first (forces spread "
               "%.3e normwise)\n",
               differ_off, spread);
        /* on against off: the same physics */
        const double de = fabs(first.e[0] - f0.e[0]) / (double)s.n;
        const double df = normwise(first.f, f0.f, 3 * s.n);
        printf("on vs off: |dE|/N %.3e eV, forces %.3e normwise\n", de, df);
        if (!(de <= 1e-5 && df <= 1e-4)) fail = 1;
        /* cost */
        CHECK_OK(nnpops_context_set_option(cd, NNPOPS_OPTION_CUDA_GRAPHS, 0));
        const double t_on = median_ms(cd, &s, &o, 21), t_off = median_ms(cn, &s, &o2, 21);
        printf("cost, %lld atoms f32 eager: deterministic on %.3f ms/step, off %.3f ms/step "
               "(x%.2f)\n",
               (long long)s.n, t_on, t_off, t_on / t_off);
        outs_free(&first);
        outs_free(&o);
        outs_free(&f0);
        outs_free(&o2);
        free(s.z);
        free(s.x);
        nnpops_context_destroy(cd);
        nnpops_context_destroy(cn);
        nnpops_model_destroy(m);
    }
    /* float64: on against off, every output, ghosts and a batch */
    {
        static refset set;
        if (!ref_load("ani2x", &set)) return test_missing_data(set.path);
        const refsys *ra = ref_find(&set, "13_f0");
        sysin mol = molecule(ra), box = water(6, 9), gh = box, bat;
        gh.n_local = box.n - 40; /* the last 40 atoms are ghosts */
        gh.periodic = 0;         /* ghosts stand for the images */
        memset(&bat, 0, sizeof bat);
        bat.n = 2 * mol.n;
        bat.n_local = -1;
        bat.ns = 2;
        bat.z = malloc(sizeof(int32_t) * bat.n);
        bat.batch = malloc(sizeof(int32_t) * bat.n);
        bat.x = malloc(sizeof(double) * 3 * bat.n);
        for (int64_t i = 0; i < bat.n; i++) {
            const int64_t k = i % mol.n;
            bat.z[i] = mol.z[k];
            bat.batch[i] = (int32_t)(i / mol.n);
            for (int d = 0; d < 3; d++) bat.x[3 * i + d] = mol.x[3 * k + d] + (i >= mol.n ? 0.3 * d : 0);
        }
        const sysin *list[4] = {&mol, &box, &gh, &bat};
        const char *names[4] = {"alanine", "water 6^3", "water 6^3, 40 ghosts", "batch of 2"};
        nnpops_model *m;
        nnpops_context *cd, *cn;
        load("ani2x", NNPOPS_FLOAT64, &m, &cd);
        CHECK_OK(nnpops_context_create(m, &cn));
        CHECK_OK(nnpops_context_set_option(cd, NNPOPS_OPTION_DETERMINISTIC, 1));
        for (int q = 0; q < 4; q++) {
            outs a, b;
            outs_init(&a, list[q]->n, list[q]->ns);
            outs_init(&b, list[q]->n, list[q]->ns);
            step(cd, list[q], list[q]->x, &a, 1);
            step(cn, list[q], list[q]->x, &b, 1);
            const double w = outs_diff(&a, &b, 1, 8);
            printf("f64 deterministic on vs off, %-22s worst normwise %.3e\n", names[q], w);
            if (!(w <= 1e-7)) fail = 1;
            outs_free(&a);
            outs_free(&b);
        }
        free(bat.z);
        free(bat.batch);
        free(bat.x);
        free(box.z);
        free(box.x);
        nnpops_context_destroy(cd);
        nnpops_context_destroy(cn);
        nnpops_model_destroy(m);
    }
    return fail;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_graphs CASE [PREC [MODEL]]\n");
        return 2;
    }
    if (nnpops_cuda_device_count() == 0) {
        fprintf(stderr, "no CUDA device: skipped\n");
        return SKIP_RETURN;
    }
    const char *c = argv[1];
    int r = 2;
    if (argc > 3) g_model = argv[3];
    if (!strcmp(c, "replay") && argc > 2) r = case_replay(argv[2]);
    else if (!strcmp(c, "warmup")) r = case_warmup();
    else if (!strcmp(c, "shape")) r = case_shape();
    else if (!strcmp(c, "overflow")) r = case_overflow();
    else if (!strcmp(c, "deterministic")) r = case_deterministic();
    else fprintf(stderr, "unknown case %s\n", c);
    printf("%s\n", r == 0 ? "PASS" : "FAIL");
    return r;
}
