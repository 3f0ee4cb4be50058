/*
 * test_gpu_device.c - the experimental device-pointer entry (nnpops_compute_device,
 * nnpops_context_device_status) and the provoked capture failure of the library's own CUDA graphs
 * (label gpu; exit 77 when nnpops_cuda_device_count() == 0, except case cpu_model).  Links the
 * static nnpops_internal for the test hook nnpops__cuda_test_break_next_capture.  One CTest entry
 * per case; "equal" below is normwise, max|a - b| <= tol max|b| per output (energies, forces,
 * virials), tol 1e-12 for float64 and 1e-6 for float32 (deterministic on in both contexts, as in
 * test_gpu_graphs.c: without it float32 atomics vary in the last bits from run to run).
 *
 *   match MODEL PREC  alanine (13_f0) and a periodic water box of 192 atoms, nm + kJ/mol, on the
 *                     test's non-blocking stream: 5 steps with moving positions, the device entry
 *                     equal to the host entry (nnpops_compute in another context) at every step;
 *                     one plan, no captures, nnpops_context_device_status OK.
 *   capture [MODEL]   (ANI-2x, or MODEL: tn_a, TensorNet) warm-up call, then the test captures
 *                     nnpops_compute_device into its own graph
 *                     (cudaStreamCaptureModeGlobal, its own stream) and replays it 6 times with new
 *                     positions written into the input buffer, then once with a 1% larger cell:
 *                     each replay equal to a fresh host-entry computation; device_plans 1,
 *                     device_captures 1, steps 2, the library's own graph counters 0; tn_a:
 *                     the captured step took its side stream (nnpops__tn_side_steps).
 *   batch             two molecules as a batch with n_systems = 0 (not given): capture before any
 *                     warm-up -> NNPOPS_ERROR_CAPTURE ("no plan"), the caller's capture still valid;
 *                     warm-up computes 2 systems; the captured graph replays with the cached count,
 *                     equal to the host entry; a capture with another shape (no forces) ->
 *                     NNPOPS_ERROR_CAPTURE naming it; a replay with a batch index 2 (>= the cached
 *                     count) -> every output NaN and the status call names the batch index and the
 *                     range; batch restored -> the replay is right again; a changed batch index in
 *                     range -> NaN and "differs"; the next non-capturing call re-plans.
 *   errors            planning (synchronous) calls with an unknown element, a NaN position, atoms
 *                     too close, a batch index out of range: the same status and message as
 *                     nnpops_compute; a host pointer -> INVALID_ARGUMENT; recovery; steady-state
 *                     NaN position -> NaN outputs + BAD_POSITION from the status call, the plan
 *                     kept; steady-state unknown element -> NaN + UNKNOWN_ELEMENT, and the next
 *                     call re-plans and fails like nnpops_compute; struct_size checks.
 *   overflow          a water box (375 atoms; emulated 81) captured and replayed, then
 *                     compressed to 0.8 (twice the neighbors): the replay gives NaN, the status
 *                     call NEIGHBOR_OVERFLOW with "grown" (neighbor_rebuilds counted);
 *                     capturing again right away ->
 *                     NNPOPS_ERROR_CAPTURE; one non-capturing call re-plans (device_plans 2) and is
 *                     right; the re-captured graph is right; the stale first graph replayed -> NaN
 *                     and NNPOPS_ERROR_CAPTURE from the status call; the new graph still right.
 *   capture_failure   hook B: cuda_graphs on, the next capture made to fail inside CUDA
 *                     (synchronizing the capturing stream): 5 steps all equal to an eager context,
 *                     eager_fallbacks 1, no capture, the warning holds "capture failed", the call
 *                     and CUDA's reason; then another molecule captures and replays normally.
 *   cpu_model         (no GPU needed) a model on "cpu": UNSUPPORTED from both device calls; NULL
 *                     context; nnpops_stats of the 0.1.0 size still accepted, nothing written past
 *                     it.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/src/internal.h"
#include "potentials/tensornet/tn_ops.h" /* nnpops__tn_side_steps */
#include "emulated.h"
#include "gpu_check.h"
#include "reference.h"
#include "structures.h"

/* ---- systems --------------------------------------------------------------------------------- */

typedef struct sys {
    int64_t n, ns;            /* atoms, systems (true count) */
    int32_t *z, *batch;       /* host; batch may be NULL */
    double *x;                /* host reference positions, angstrom */
    double cell[2 * 9];       /* angstrom */
    uint8_t pbc[2 * 3];
    int periodic;
    /* device copies */
    int32_t *dz, *dbatch;
    double *dx, *dcell, *de, *df, *dv;
} sys;

static void sys_device(sys *s) {
    s->dz = dup_to_device(s->z, sizeof(int32_t) * s->n);
    s->dbatch = s->batch ? dup_to_device(s->batch, sizeof(int32_t) * s->n) : NULL;
    s->dx = dalloc(sizeof(double) * 3 * s->n);
    s->dcell = dalloc(sizeof(double) * 9 * s->ns);
    s->de = dalloc(sizeof(double) * s->ns);
    s->df = dalloc(sizeof(double) * 3 * s->n);
    s->dv = dalloc(sizeof(double) * 9 * s->ns);
}

static void sys_free(sys *s) {
    cudaFree(s->dz);
    if (s->dbatch) cudaFree(s->dbatch);
    cudaFree(s->dx);
    cudaFree(s->dcell);
    cudaFree(s->de);
    cudaFree(s->df);
    cudaFree(s->dv);
}

static sys molecule(const refsys *r) {
    sys s;
    memset(&s, 0, sizeof s);
    s.n = r->n;
    s.ns = 1;
    s.z = malloc(sizeof(int32_t) * s.n);
    s.x = malloc(sizeof(double) * 3 * s.n);
    memcpy(s.z, r->z, sizeof(int32_t) * s.n);
    memcpy(s.x, r->x, sizeof(double) * 3 * s.n);
    sys_device(&s);
    return s;
}

static sys water(int m, uint64_t seed) {
    sys s;
    memset(&s, 0, sizeof s);
    s.n = water_box(m, seed, &s.z, &s.x, s.cell);
    s.ns = 1;
    s.periodic = 1;
    s.pbc[0] = s.pbc[1] = s.pbc[2] = 1;
    sys_device(&s);
    return s;
}

/* two molecules as one batch (the second shifted by 30 angstrom) */
static sys pair_batch(const refsys *a, const refsys *b) {
    sys s;
    memset(&s, 0, sizeof s);
    s.n = a->n + b->n;
    s.ns = 2;
    s.z = malloc(sizeof(int32_t) * s.n);
    s.batch = malloc(sizeof(int32_t) * s.n);
    s.x = malloc(sizeof(double) * 3 * s.n);
    for (int64_t i = 0; i < s.n; i++) {
        const int inA = i < a->n;
        const int64_t k = inA ? i : i - a->n;
        s.z[i] = inA ? a->z[k] : b->z[k];
        s.batch[i] = inA ? 0 : 1;
        for (int d = 0; d < 3; d++) s.x[3 * i + d] = (inA ? a->x : b->x)[3 * k + d] + (inA ? 0 : 30);
    }
    sys_device(&s);
    return s;
}

/* positions of step k in caller units: a deterministic small displacement of every atom */
static void moved(const sys *s, int k, double scale, double unit, double *x) {
    for (int64_t i = 0; i < 3 * s->n; i++)
        x[i] = (s->x[i] * scale + 0.01 * sin(0.7 * (double)i + 1.3 * k)) * unit;
}

static void upload(void *d, const void *h, size_t bytes, cudaStream_t st) {
    CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

static void download(void *h, const void *d, size_t bytes, cudaStream_t st) {
    CUDA_CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

/* caller-unit cells of s scaled by `scale` */
static void cells_of(const sys *s, double scale, double unit, double *c) {
    for (int k = 0; k < 9 * s->ns; k++) c[k] = s->cell[k] * scale * unit;
}

/* ---- results ---------------------------------------------------------------------------------- */

typedef struct res {
    int64_t n, ns;
    double *e, *f, *v;
} res;

static res res_new(const sys *s) {
    res r = {s->n, s->ns, calloc(s->ns, sizeof(double)), calloc(3 * s->n, sizeof(double)),
             calloc(9 * s->ns, sizeof(double))};
    return r;
}

static void res_free(res *r) {
    free(r->e);
    free(r->f);
    free(r->v);
}

/* host entry at positions x / cells c (caller units) */
static void host_compute(nnpops_context *ctx, const sys *s, const double *x, const double *c,
                         res *r) {
    nnpops_inputs in = {sizeof in, s->n, -1, s->ns, s->z, x, s->batch,
                        s->periodic ? c : NULL, s->periodic ? s->pbc : NULL};
    nnpops_outputs out = {sizeof out, r->e, r->f, r->v, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
}

static nnpops_device_inputs dev_inputs(const sys *s, int64_t ns_given) {
    nnpops_device_inputs in = {sizeof in, s->n, -1, ns_given, s->dz, s->dx, s->dbatch,
                               s->periodic ? s->dcell : NULL, s->periodic ? s->pbc : NULL};
    return in;
}

static nnpops_device_outputs dev_outputs(const sys *s) {
    nnpops_device_outputs out = {sizeof out, s->de, s->df, s->dv};
    return out;
}

static void fetch(const sys *s, res *r, cudaStream_t st) {
    download(r->e, s->de, sizeof(double) * s->ns, st);
    download(r->f, s->df, sizeof(double) * 3 * s->n, st);
    download(r->v, s->dv, sizeof(double) * 9 * s->ns, st);
}

/* max |a - b| / max |b| (0 when both are 0); NaN propagates */
static double normwise(const double *a, const double *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t k = 0; k < n; k++) {
        const double x = fabs(a[k] - b[k]);
        if (!(x <= d)) d = x;
        m = fmax(m, fabs(b[k]));
    }
    return m > 0 ? d / m : d;
}

static double res_diff(const res *a, const res *b) {
    double w = normwise(a->e, b->e, a->ns);
    const double wf = normwise(a->f, b->f, 3 * a->n), wv = normwise(a->v, b->v, 9 * a->ns);
    if (!(wf <= w)) w = wf;
    if (!(wv <= w)) w = wv;
    return w;
}

static int all_nan(const res *r) {
    for (int64_t k = 0; k < r->ns; k++)
        if (!isnan(r->e[k])) return 0;
    for (int64_t k = 0; k < 3 * r->n; k++)
        if (!isnan(r->f[k])) return 0;
    for (int64_t k = 0; k < 9 * r->ns; k++)
        if (!isnan(r->v[k])) return 0;
    return 1;
}

static int expect_equal(const char *what, const res *dev, const res *host, double tol) {
    const double w = res_diff(dev, host);
    const int ok = w <= tol;
    printf("  %-52s E %.12g, worst normwise |device - host| %.3e (tol %.0e)%s\n", what, dev->e[0],
           w, tol, ok ? "" : "  FAIL");
    return ok ? 0 : 1;
}

static nnpops_stats stats_of(const nnpops_context *c) {
    nnpops_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(nnpops_context_stats(c, &s));
    return s;
}

static void load(const char *name, nnpops_precision p, nnpops_model **m) {
    CHECK_OK(nnpops_model_load(name, "cuda", p, m));
}

static nnpops_context *context(const nnpops_model *m, int nm_kj, int det) {
    nnpops_context *c;
    CHECK_OK(nnpops_context_create(m, &c));
    if (nm_kj) {
        CHECK_OK(nnpops_context_set_option_by_name(c, "length_unit", "nm"));
        CHECK_OK(nnpops_context_set_option_by_name(c, "energy_unit", "kJ/mol"));
    }
    if (det) CHECK_OK(nnpops_context_set_option_by_name(c, "deterministic", "on"));
    return c;
}

/* Captures one nnpops_compute_device call on `st`; *status receives its status (the capture is
 * ended either way).  Returns the instantiated graph, or NULL when the call failed. */
static cudaGraphExec_t capture(nnpops_context *ctx, const nnpops_device_inputs *in,
                               nnpops_device_outputs *out, cudaStream_t st,
                               enum cudaStreamCaptureMode mode, nnpops_status *status,
                               char *msg, size_t msg_size) {
    CUDA_CHECK(cudaStreamBeginCapture(st, mode));
    *status = nnpops_compute_device(ctx, in, out, st);
    if (msg) snprintf(msg, msg_size, "%s", nnpops_last_error());
    cudaGraph_t g = NULL;
    const cudaError_t e = cudaStreamEndCapture(st, &g);
    if (e != cudaSuccess) {
        fprintf(stderr, "cudaStreamEndCapture: %s (library status %s: %s)\n", cudaGetErrorString(e),
                nnpops_status_name(*status), msg ? msg : "");
        exit(1);
    }
    cudaGraphExec_t exec = NULL;
    if (*status == NNPOPS_OK) CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    if (g) cudaGraphDestroy(g);
    return exec;
}

#define CHECK_HAS(msg, needle)                                                                     \
    do {                                                                                           \
        if (!strstr((msg), (needle))) {                                                            \
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, (msg),     \
                    (needle));                                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int load_ref(refset *set, const char *model) {
    if (!ref_load(model, set)) return test_missing_data(set->path);
    return 0;
}

/* ---- 1. device entry == host entry -------------------------------------------------------------- */

static int match_run(const nnpops_model *m, int det, double tol, sys *s, const char *label) {
    const double nm = 0.1;
    nnpops_context *ch = context(m, 1, det), *cd = context(m, 1, det);
    res rh = res_new(s), rd = res_new(s);
    double *x = malloc(sizeof(double) * 3 * s->n), c[18];
    int fail = 0;
    cells_of(s, 1.0, nm, c);
    upload(s->dcell, c, sizeof(double) * 9 * s->ns, g_stream);
    nnpops_device_inputs in = dev_inputs(s, s->ns);
    nnpops_device_outputs out = dev_outputs(s);
    for (int k = 0; k < 5; k++) {
        moved(s, k, 1.0, nm, x);
        upload(s->dx, x, sizeof(double) * 3 * s->n, g_stream);
        CHECK_OK(nnpops_compute_device(cd, &in, &out, g_stream));
        fetch(s, &rd, g_stream);
        host_compute(ch, s, x, c, &rh);
        char what[128];
        snprintf(what, sizeof what, "%s, step %d", label, k);
        fail |= expect_equal(what, &rd, &rh, tol);
    }
    CHECK_OK(nnpops_context_device_status(cd, g_stream));
    const nnpops_stats st = stats_of(cd);
    printf("  stats: steps %lld, device_plans %lld, device_captures %lld, n_pairs %lld\n",
           (long long)st.steps, (long long)st.device_plans, (long long)st.device_captures,
           (long long)st.n_pairs);
    if (st.steps != 5 || st.device_plans != 1 || st.device_captures != 0 || st.n_pairs <= 0) {
        fprintf(stderr, "%s: unexpected counters\n", label);
        fail = 1;
    }
    res_free(&rh);
    res_free(&rd);
    free(x);
    nnpops_context_destroy(ch);
    nnpops_context_destroy(cd);
    return fail;
}

static int case_match(const char *model, const char *prec) {
    refset *set = calloc(1, sizeof *set);
    int r = load_ref(set, model);
    if (r) return r;
    const refsys *ra = ref_find(set, "13_f0");
    const int f64 = !strcmp(prec, "f64");
    nnpops_model *m;
    load(model, f64 ? NNPOPS_FLOAT64 : NNPOPS_FLOAT32, &m);
    sys mol = molecule(ra), box = water(4, 3);
    int fail = 0;
    fail |= match_run(m, !f64, f64 ? 1e-12 : 1e-6, &mol, "alanine 13_f0, nm + kJ/mol");
    fail |= match_run(m, !f64, f64 ? 1e-12 : 1e-6, &box, "water 4^3 (192, periodic), nm + kJ/mol");
    sys_free(&mol);
    sys_free(&box);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- 2. the caller captures the device entry --------------------------------------------------- */

static int case_capture(const char *model) {
    nnpops_model *m;
    load(model, NNPOPS_FLOAT64, &m);
    const double nm = 0.1;
    sys s = water(GPU_OR_EMU(4, 3), 5); /* (emulated: 81 atoms, a cell with images) */
    nnpops_context *ch = context(m, 1, 0), *cd = context(m, 1, 0);
    res rh = res_new(&s), rd = res_new(&s);
    double *x = malloc(sizeof(double) * 3 * s.n), c[9];
    cudaStream_t cs;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    int fail = 0;
    cells_of(&s, 1.0, nm, c);
    upload(s.dcell, c, sizeof c, cs);
    nnpops_device_inputs in = dev_inputs(&s, 1);
    nnpops_device_outputs out = dev_outputs(&s);
    /* warm-up (plans) */
    moved(&s, 0, 1.0, nm, x);
    upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
    CHECK_OK(nnpops_compute_device(cd, &in, &out, cs));
    fetch(&s, &rd, cs);
    host_compute(ch, &s, x, c, &rh);
    fail |= expect_equal("warm-up call", &rd, &rh, 1e-12);
    /* the test's own graph */
    nnpops_status st;
    char msg[2048];
    const int sides0 = nnpops__tn_side_steps();
    cudaGraphExec_t exec = capture(cd, &in, &out, cs, cudaStreamCaptureModeGlobal, &st, msg,
                                   sizeof msg);
    if (st != NNPOPS_OK) {
        fprintf(stderr, "capture: %s: %s\n", nnpops_status_name(st), msg);
        return 1;
    }
    /* TensorNet: the captured step ran its edge networks on its side stream, which joined the
     * caller's graph */
    if (strcmp(model, "tn_a") == 0) {
        const int sides = nnpops__tn_side_steps() - sides0;
        printf("  TensorNet steps with the side stream in the capture: %d\n", sides);
        if (sides != 1) fail = 1;
    }
    int replays = 0;
    /* (emulated: two replays, a replay after a replay; every further one the same launch) */
    for (int k = 1; k <= GPU_OR_EMU(6, 2); k++) {
        moved(&s, k, 1.0, nm, x);
        upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
        CUDA_CHECK(cudaGraphLaunch(exec, cs));
        replays++;
        fetch(&s, &rd, cs);
        host_compute(ch, &s, x, c, &rh);
        char what[64];
        snprintf(what, sizeof what, "replay %d", k);
        fail |= expect_equal(what, &rd, &rh, 1e-12);
    }
    /* a larger cell (positions scaled with it): the graph reads the cell buffer every replay */
    moved(&s, 7, 1.01, nm, x);
    cells_of(&s, 1.01, nm, c);
    upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
    upload(s.dcell, c, sizeof c, cs);
    CUDA_CHECK(cudaGraphLaunch(exec, cs));
    replays++;
    fetch(&s, &rd, cs);
    host_compute(ch, &s, x, c, &rh);
    fail |= expect_equal("replay with a 1% larger cell", &rd, &rh, 1e-12);
    CHECK_OK(nnpops_context_device_status(cd, cs));
    const nnpops_stats t = stats_of(cd);
    printf("  caller replays %d; stats: steps %lld, device_plans %lld, device_captures %lld, "
           "graph_captures %lld, graph_replays %lld, n_pairs %lld\n",
           replays, (long long)t.steps, (long long)t.device_plans, (long long)t.device_captures,
           (long long)t.graph_captures, (long long)t.graph_replays, (long long)t.n_pairs);
    if (replays <= 0 || t.steps != 2 || t.device_plans != 1 || t.device_captures != 1 ||
        t.graph_captures != 0 || t.graph_replays != 0 || t.n_pairs <= 0) {
        fprintf(stderr, "unexpected counters\n");
        fail = 1;
    }
    cudaGraphExecDestroy(exec);
    CUDA_CHECK(cudaStreamDestroy(cs));
    res_free(&rh);
    res_free(&rd);
    free(x);
    sys_free(&s);
    nnpops_context_destroy(ch);
    nnpops_context_destroy(cd);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- 3. batch with n_systems not given --------------------------------------------------------- */

static int case_batch(void) {
    refset *set = calloc(1, sizeof *set);
    int r = load_ref(set, "ani2x");
    if (r) return r;
    const refsys *ra = ref_find(set, "13_f0"), *rb = ref_find(set, "50_f0");
    nnpops_model *m;
    load("ani2x", NNPOPS_FLOAT64, &m);
    sys s = pair_batch(ra, rb);
    nnpops_context *ch = context(m, 0, 0), *cd = context(m, 0, 0);
    res rh = res_new(&s), rd = res_new(&s);
    double *x = malloc(sizeof(double) * 3 * s.n);
    cudaStream_t cs;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    int fail = 0;
    nnpops_device_inputs in = dev_inputs(&s, 0); /* n_systems not given */
    nnpops_device_outputs out = dev_outputs(&s);
    nnpops_status st;
    char msg[2048];

    /* capture before any warm-up */
    moved(&s, 0, 1.0, 1.0, x);
    upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
    cudaGraphExec_t exec = capture(cd, &in, &out, cs, cudaStreamCaptureModeThreadLocal, &st, msg,
                                   sizeof msg);
    printf("  capture before warm-up: %s: %s\n", nnpops_status_name(st), msg);
    CHECK(st == NNPOPS_ERROR_CAPTURE && exec == NULL);
    CHECK_HAS(msg, "no plan");
    CHECK_HAS(msg, "not capturing");

    /* warm-up: max(batch) + 1 = 2 systems */
    CHECK_OK(nnpops_compute_device(cd, &in, &out, cs));
    fetch(&s, &rd, cs);
    host_compute(ch, &s, x, NULL, &rh);
    fail |= expect_equal("warm-up, n_systems = 0 -> 2", &rd, &rh, 1e-12);
    fail |= expect_equal("  (second system)", &(res){1, 1, rd.e + 1, rd.f, rd.v},
                         &(res){1, 1, rh.e + 1, rh.f, rh.v}, 1e-12);

    /* captured with the cached count */
    exec = capture(cd, &in, &out, cs, cudaStreamCaptureModeThreadLocal, &st, msg, sizeof msg);
    if (st != NNPOPS_OK) {
        fprintf(stderr, "capture: %s: %s\n", nnpops_status_name(st), msg);
        return 1;
    }
    int replays = 0;
    /* (emulated: two replays, a replay after a replay) */
    for (int k = 1; k <= GPU_OR_EMU(3, 2); k++) {
        moved(&s, k, 1.0, 1.0, x);
        upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
        CUDA_CHECK(cudaGraphLaunch(exec, cs));
        replays++;
        fetch(&s, &rd, cs);
        host_compute(ch, &s, x, NULL, &rh);
        fail |= expect_equal("replay, cached n_systems", &rd, &rh, 1e-12);
    }
    CHECK_OK(nnpops_context_device_status(cd, cs));

    /* another shape while capturing */
    nnpops_device_outputs no_f = out;
    no_f.forces = NULL;
    cudaGraphExec_t bad = capture(cd, &in, &no_f, cs, cudaStreamCaptureModeThreadLocal, &st, msg,
                                  sizeof msg);
    printf("  capture of another shape: %s: %s\n", nnpops_status_name(st), msg);
    CHECK(st == NNPOPS_ERROR_CAPTURE && bad == NULL);
    CHECK_HAS(msg, "forces asked");

    /* a batch index >= the cached count during a replay */
    int32_t *b2 = malloc(sizeof(int32_t) * s.n);
    memcpy(b2, s.batch, sizeof(int32_t) * s.n);
    b2[s.n - 1] = 2;
    upload(s.dbatch, b2, sizeof(int32_t) * s.n, cs);
    CUDA_CHECK(cudaGraphLaunch(exec, cs));
    replays++;
    fetch(&s, &rd, cs);
    if (!all_nan(&rd)) {
        fprintf(stderr, "batch index 2 of 2 systems: outputs are not all NaN\n");
        fail = 1;
    }
    st = nnpops_context_device_status(cd, cs);
    printf("  batch index 2 >= 2 systems: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_INVALID_ARGUMENT);
    snprintf(msg, sizeof msg, "atom %lld: batch index 2 is outside 0..1", (long long)s.n - 1);
    CHECK_HAS(nnpops_last_error(), msg);
    CHECK_HAS(nnpops_last_error(), "n_systems was not given");
    CHECK_HAS(nnpops_last_error(), "1 of the 1 device steps");
    /* restored: the same graph is right again */
    upload(s.dbatch, s.batch, sizeof(int32_t) * s.n, cs);
    CUDA_CHECK(cudaGraphLaunch(exec, cs));
    replays++;
    fetch(&s, &rd, cs);
    fail |= expect_equal("replay after the batch is restored", &rd, &rh, 1e-12);
    CHECK_OK(nnpops_context_device_status(cd, cs));
    /* a changed index in range */
    memcpy(b2, s.batch, sizeof(int32_t) * s.n);
    b2[0] = 1;
    upload(s.dbatch, b2, sizeof(int32_t) * s.n, cs);
    CUDA_CHECK(cudaGraphLaunch(exec, cs));
    replays++;
    fetch(&s, &rd, cs);
    if (!all_nan(&rd)) {
        fprintf(stderr, "changed batch index: outputs are not all NaN\n");
        fail = 1;
    }
    st = nnpops_context_device_status(cd, cs);
    printf("  changed batch index: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_HAS(nnpops_last_error(), "atom 0: batch index 1 differs");
    upload(s.dbatch, s.batch, sizeof(int32_t) * s.n, cs);
    /* the next non-capturing call re-plans */
    CHECK_OK(nnpops_compute_device(cd, &in, &out, cs));
    fetch(&s, &rd, cs);
    fail |= expect_equal("non-capturing call after the reports (re-plan)", &rd, &rh, 1e-12);
    const nnpops_stats t = stats_of(cd);
    printf("  caller replays %d; stats: steps %lld, device_plans %lld, device_captures %lld\n",
           replays, (long long)t.steps, (long long)t.device_plans, (long long)t.device_captures);
    if (replays <= 0 || t.device_plans != 2 || t.device_captures != 1) {
        fprintf(stderr, "unexpected counters (device_plans 2, device_captures 1 expected)\n");
        fail = 1;
    }
    free(b2);
    cudaGraphExecDestroy(exec);
    CUDA_CHECK(cudaStreamDestroy(cs));
    res_free(&rh);
    res_free(&rd);
    free(x);
    sys_free(&s);
    nnpops_context_destroy(ch);
    nnpops_context_destroy(cd);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- 4. errors ---------------------------------------------------------------------------------- */

/* The planning call and nnpops_compute on the same (bad) inputs: same status, same message (when
 * `exact`; a too-close pair may be named in either order, whichever GPU thread saw it first). */
static void same_error(const nnpops_model *m, sys *s, const int32_t *batch, nnpops_status want,
                       const char *needle, int exact) {
    nnpops_context *ch = context(m, 0, 0), *cd = context(m, 0, 0);
    res r = res_new(s);
    upload(s->dz, s->z, sizeof(int32_t) * s->n, g_stream);
    upload(s->dx, s->x, sizeof(double) * 3 * s->n, g_stream);
    int32_t *db = NULL;
    if (batch) db = dup_to_device(batch, sizeof(int32_t) * s->n);
    nnpops_device_inputs in = dev_inputs(s, 1);
    in.batch = db;
    nnpops_device_outputs out = dev_outputs(s);
    const nnpops_status sd = nnpops_compute_device(cd, &in, &out, g_stream);
    char md[2048];
    snprintf(md, sizeof md, "%s", nnpops_last_error());
    nnpops_inputs hin = {sizeof hin, s->n, -1, 1, s->z, s->x, batch, NULL, NULL};
    nnpops_outputs hout = {sizeof hout, r.e, r.f, r.v, NULL, NULL, NULL};
    const nnpops_status sh = nnpops_compute(ch, &hin, &hout);
    const char *mh = nnpops_last_error();
    printf("  device: %s: %s\n  host:   %s: %s\n", nnpops_status_name(sd), md,
           nnpops_status_name(sh), mh);
    CHECK(sd == want && sh == want);
    if (exact) CHECK(strcmp(md, mh) == 0);
    CHECK_HAS(md, needle);
    CHECK_HAS(mh, needle);
    if (db) cudaFree(db);
    res_free(&r);
    nnpops_context_destroy(ch);
    nnpops_context_destroy(cd);
}

static int case_errors(void) {
    refset *set = calloc(1, sizeof *set);
    int r = load_ref(set, "ani2x");
    if (r) return r;
    const refsys *ra = ref_find(set, "13_f0");
    nnpops_model *m;
    load("ani2x", NNPOPS_FLOAT64, &m);
    sys s = molecule(ra);
    int fail = 0;

    /* planning calls: nnpops_compute's errors */
    const int32_t z3 = s.z[3];
    s.z[3] = 92;
    same_error(m, &s, NULL, NNPOPS_ERROR_UNKNOWN_ELEMENT, "atom 3: element U", 1);
    s.z[3] = z3;
    const double x5 = s.x[16];
    s.x[16] = NAN;
    same_error(m, &s, NULL, NNPOPS_ERROR_BAD_POSITION, "atom 5 has a non-finite position", 1);
    s.x[16] = x5;
    double keep[3];
    memcpy(keep, s.x + 6, sizeof keep);
    for (int d = 0; d < 3; d++) s.x[6 + d] = s.x[3 + d] + (d == 0 ? 0.05 : 0.0);
    same_error(m, &s, NULL, NNPOPS_ERROR_ATOMS_TOO_CLOSE, "0.05 angstrom apart", 0);
    memcpy(s.x + 6, keep, sizeof keep);
    int32_t *b = calloc(s.n, sizeof(int32_t));
    b[4] = 1;
    same_error(m, &s, b, NNPOPS_ERROR_INVALID_ARGUMENT, "atom 4: batch index 1 is outside 0..0", 1);
    free(b);

    nnpops_context *ch = context(m, 0, 0), *cd = context(m, 0, 0);
    res rh = res_new(&s), rd = res_new(&s);
    nnpops_device_inputs in = dev_inputs(&s, 1);
    nnpops_device_outputs out = dev_outputs(&s);
    upload(s.dz, s.z, sizeof(int32_t) * s.n, g_stream);
    upload(s.dx, s.x, sizeof(double) * 3 * s.n, g_stream);
    /* host memory where device memory is expected */
    nnpops_device_inputs hostp = in;
    hostp.positions = s.x;
    nnpops_status st = nnpops_compute_device(cd, &hostp, &out, g_stream);
    printf("  host pointer: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_HAS(nnpops_last_error(), "inputs->positions");
    CHECK_HAS(nnpops_last_error(), "host memory");
    /* struct sizes */
    nnpops_device_inputs small = in;
    small.struct_size = offsetof(nnpops_device_inputs, charges) - 8; /* below the 0.1.0 size */
    CHECK_STATUS(nnpops_compute_device(cd, &small, &out, g_stream), NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("nnpops_device_inputs.struct_size");
    nnpops_device_outputs so = out;
    so.struct_size = 0;
    CHECK_STATUS(nnpops_compute_device(cd, &in, &so, g_stream), NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("nnpops_device_outputs.struct_size");
    CHECK_STATUS(nnpops_compute_device(NULL, &in, &out, g_stream), NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(nnpops_context_device_status(NULL, g_stream), NNPOPS_ERROR_INVALID_ARGUMENT);
    /* nothing computed yet: the status call has nothing to report */
    CHECK_OK(nnpops_context_device_status(cd, g_stream));

    /* recovery */
    CHECK_OK(nnpops_compute_device(cd, &in, &out, g_stream));
    fetch(&s, &rd, g_stream);
    host_compute(ch, &s, s.x, NULL, &rh);
    fail |= expect_equal("good call after the errors", &rd, &rh, 1e-12);

    /* a NaN position in steady state: NaN outputs, BAD_POSITION from the status call, plan kept */
    double *xb = malloc(sizeof(double) * 3 * s.n);
    memcpy(xb, s.x, sizeof(double) * 3 * s.n);
    xb[3 * 4 + 2] = INFINITY;
    upload(s.dx, xb, sizeof(double) * 3 * s.n, g_stream);
    CHECK_OK(nnpops_compute_device(cd, &in, &out, g_stream));
    fetch(&s, &rd, g_stream);
    if (!all_nan(&rd)) {
        fprintf(stderr, "steady NaN position: outputs are not all NaN\n");
        fail = 1;
    }
    st = nnpops_context_device_status(cd, g_stream);
    printf("  steady-state infinite coordinate: %s: %s\n", nnpops_status_name(st),
           nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_BAD_POSITION);
    CHECK_HAS(nnpops_last_error(), "atom 4 has a non-finite position");
    upload(s.dx, s.x, sizeof(double) * 3 * s.n, g_stream);
    CHECK_OK(nnpops_compute_device(cd, &in, &out, g_stream));
    fetch(&s, &rd, g_stream);
    fail |= expect_equal("after the position is fixed (no re-plan)", &rd, &rh, 1e-12);
    CHECK(stats_of(cd).device_plans == 1);

    /* an unknown element in steady state: NaN, then UNKNOWN_ELEMENT; the next call re-plans and
     * fails like nnpops_compute */
    int32_t *zb = malloc(sizeof(int32_t) * s.n);
    memcpy(zb, s.z, sizeof(int32_t) * s.n);
    zb[2] = 92;
    upload(s.dz, zb, sizeof(int32_t) * s.n, g_stream);
    CHECK_OK(nnpops_compute_device(cd, &in, &out, g_stream));
    fetch(&s, &rd, g_stream);
    if (!all_nan(&rd)) {
        fprintf(stderr, "steady unknown element: outputs are not all NaN\n");
        fail = 1;
    }
    st = nnpops_context_device_status(cd, g_stream);
    printf("  steady-state unknown element: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_UNKNOWN_ELEMENT);
    CHECK_HAS(nnpops_last_error(), "atom 2: element U");
    st = nnpops_compute_device(cd, &in, &out, g_stream);
    printf("  next call (re-plan): %s: %s\n", nnpops_status_name(st), nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_UNKNOWN_ELEMENT);
    CHECK_HAS(nnpops_last_error(), "atom 2: element U (atomic number 92) is not described");
    upload(s.dz, s.z, sizeof(int32_t) * s.n, g_stream);
    CHECK_OK(nnpops_compute_device(cd, &in, &out, g_stream));
    fetch(&s, &rd, g_stream);
    fail |= expect_equal("after the element is fixed (re-plan)", &rd, &rh, 1e-12);
    CHECK_OK(nnpops_context_device_status(cd, g_stream));
    printf("  device_plans %lld\n", (long long)stats_of(cd).device_plans);
    free(xb);
    free(zb);
    res_free(&rh);
    res_free(&rd);
    sys_free(&s);
    nnpops_context_destroy(ch);
    nnpops_context_destroy(cd);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- 5. neighbor overflow during a replay ------------------------------------------------------- */

static int case_overflow(void) {
    nnpops_model *m;
    load("ani2x", NNPOPS_FLOAT64, &m);
    /* (emulated: 81 atoms, whose compression also doubles the neighbors) */
    sys s = water(GPU_OR_EMU(5, 3), 11);
    nnpops_context *ch = context(m, 0, 0), *cd = context(m, 0, 0);
    res rh = res_new(&s), rd = res_new(&s);
    double *x = malloc(sizeof(double) * 3 * s.n), c[9];
    cudaStream_t cs;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    int fail = 0;
    nnpops_device_inputs in = dev_inputs(&s, 1);
    nnpops_device_outputs out = dev_outputs(&s);
    nnpops_status st;
    char msg[2048];
    cells_of(&s, 1.0, 1.0, c);
    upload(s.dcell, c, sizeof c, cs);
    moved(&s, 0, 1.0, 1.0, x);
    upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
    CHECK_OK(nnpops_compute_device(cd, &in, &out, cs));
    cudaGraphExec_t g1 = capture(cd, &in, &out, cs, cudaStreamCaptureModeThreadLocal, &st, msg,
                                 sizeof msg);
    if (st != NNPOPS_OK) {
        fprintf(stderr, "capture: %s: %s\n", nnpops_status_name(st), msg);
        return 1;
    }
    int replays = 0;
    moved(&s, 1, 1.0, 1.0, x);
    upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
    CUDA_CHECK(cudaGraphLaunch(g1, cs));
    replays++;
    fetch(&s, &rd, cs);
    host_compute(ch, &s, x, c, &rh);
    fail |= expect_equal("replay before the compression", &rd, &rh, 1e-12);
    CHECK_OK(nnpops_context_device_status(cd, cs));
    const nnpops_stats s0 = stats_of(cd);

    /* compressed to 0.8: about twice the neighbors, more than the plan's capacity */
    moved(&s, 2, 0.8, 1.0, x);
    cells_of(&s, 0.8, 1.0, c);
    upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
    upload(s.dcell, c, sizeof c, cs);
    CUDA_CHECK(cudaGraphLaunch(g1, cs));
    replays++;
    fetch(&s, &rd, cs);
    if (!all_nan(&rd)) {
        fprintf(stderr, "overflowing replay: outputs are not all NaN\n");
        fail = 1;
    }
    st = nnpops_context_device_status(cd, cs);
    printf("  overflowing replay: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW);
    CHECK_HAS(nnpops_last_error(), "grown");
    const nnpops_stats s1 = stats_of(cd);
    if (s1.neighbor_rebuilds <= s0.neighbor_rebuilds) {
        fprintf(stderr, "no neighbor rebuild counted\n");
        fail = 1;
    }
    /* capturing right away: the plan must be rebuilt first */
    cudaGraphExec_t bad = capture(cd, &in, &out, cs, cudaStreamCaptureModeThreadLocal, &st, msg,
                                  sizeof msg);
    printf("  capture before the re-plan: %s: %s\n", nnpops_status_name(st), msg);
    CHECK(st == NNPOPS_ERROR_CAPTURE && bad == NULL);
    CHECK_HAS(msg, "rebuilt");
    /* one non-capturing call re-plans with the grown capacity */
    CHECK_OK(nnpops_compute_device(cd, &in, &out, cs));
    fetch(&s, &rd, cs);
    host_compute(ch, &s, x, c, &rh);
    fail |= expect_equal("non-capturing call after the overflow", &rd, &rh, 1e-12);
    const nnpops_stats s2 = stats_of(cd);
    printf("  capacity %lld -> %lld, device_plans %lld\n", (long long)s0.pair_capacity,
           (long long)s2.pair_capacity, (long long)s2.device_plans);
    if (s2.device_plans != 2 || s2.pair_capacity <= s0.pair_capacity) fail = 1;
    cudaGraphExec_t g2 = capture(cd, &in, &out, cs, cudaStreamCaptureModeThreadLocal, &st, msg,
                                 sizeof msg);
    if (st != NNPOPS_OK) {
        fprintf(stderr, "re-capture: %s: %s\n", nnpops_status_name(st), msg);
        return 1;
    }
    moved(&s, 3, 0.8, 1.0, x);
    upload(s.dx, x, sizeof(double) * 3 * s.n, cs);
    CUDA_CHECK(cudaGraphLaunch(g2, cs));
    replays++;
    fetch(&s, &rd, cs);
    host_compute(ch, &s, x, c, &rh);
    fail |= expect_equal("replay of the re-captured graph", &rd, &rh, 1e-12);
    CHECK_OK(nnpops_context_device_status(cd, cs));
    /* the stale graph: NaN, reported, and harmless to the current one */
    CUDA_CHECK(cudaGraphLaunch(g1, cs));
    replays++;
    fetch(&s, &rd, cs);
    if (!all_nan(&rd)) {
        fprintf(stderr, "stale graph: outputs are not all NaN\n");
        fail = 1;
    }
    st = nnpops_context_device_status(cd, cs);
    printf("  stale graph replayed: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
    CHECK(st == NNPOPS_ERROR_CAPTURE);
    CHECK_HAS(nnpops_last_error(), "re-plan");
    CUDA_CHECK(cudaGraphLaunch(g2, cs));
    replays++;
    fetch(&s, &rd, cs);
    fail |= expect_equal("current graph after the stale one", &rd, &rh, 1e-12);
    CHECK_OK(nnpops_context_device_status(cd, cs));
    const nnpops_stats s3 = stats_of(cd);
    printf("  caller replays %d; device_plans %lld, device_captures %lld, rebuilds %lld\n", replays,
           (long long)s3.device_plans, (long long)s3.device_captures,
           (long long)s3.neighbor_rebuilds);
    if (s3.device_plans != 2 || s3.device_captures != 2 || replays <= 0) fail = 1;
    cudaGraphExecDestroy(g1);
    cudaGraphExecDestroy(g2);
    CUDA_CHECK(cudaStreamDestroy(cs));
    res_free(&rh);
    res_free(&rd);
    free(x);
    sys_free(&s);
    nnpops_context_destroy(ch);
    nnpops_context_destroy(cd);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- 6. a provoked capture failure of the library's own graphs --------------------------------- */

static int graph_steps(nnpops_context *cg, nnpops_context *ce, const sys *s, int steps,
                       const char *label) {
    res a = res_new(s), b = res_new(s);
    double *x = malloc(sizeof(double) * 3 * s->n);
    int fail = 0;
    for (int k = 0; k < steps; k++) {
        moved(s, k, 1.0, 1.0, x);
        host_compute(cg, s, x, NULL, &a);
        host_compute(ce, s, x, NULL, &b);
        char what[96];
        snprintf(what, sizeof what, "%s, step %d: graphs context vs eager", label, k + 1);
        fail |= expect_equal(what, &a, &b, 1e-12);
    }
    res_free(&a);
    res_free(&b);
    free(x);
    return fail;
}

static int case_capture_failure(void) {
    refset *set = calloc(1, sizeof *set);
    int r = load_ref(set, "ani2x");
    if (r) return r;
    const refsys *ra = ref_find(set, "13_f0"), *rb = ref_find(set, "50_f0");
    nnpops_model *m;
    load("ani2x", NNPOPS_FLOAT64, &m);
    sys A = molecule(ra), B = molecule(rb);
    nnpops_context *cg = context(m, 0, 0), *ce = context(m, 0, 0);
    CHECK_OK(nnpops_context_set_option_by_name(cg, "cuda_graphs", "on"));
    CHECK_OK(nnpops_context_set_option_by_name(cg, "graph_warmup_steps", "1"));
    nnpops__cuda_test_break_next_capture(cg);
    /* A: the warmup step, the broken capture (an eager fallback), then eager steps; B: the
     * warmup step, the capture, then replays.  Emulated: one eager step after the fallback and
     * two replays (a replay after a replay), the same code as more of them */
    const int na = GPU_OR_EMU(5, 3), nb = GPU_OR_EMU(5, 4);
    int fail = graph_steps(cg, ce, &A, na, "A");
    const nnpops_stats s1 = stats_of(cg);
    const char *w = nnpops_context_last_warning(cg);
    printf("  after A: captures %lld, replays %lld, eager_fallbacks %lld, steps %lld\n  warning: "
           "%s\n",
           (long long)s1.graph_captures, (long long)s1.graph_replays,
           (long long)s1.eager_fallbacks, (long long)s1.steps, w);
    if (s1.eager_fallbacks != 1 || s1.graph_captures != 0 || s1.graph_replays != 0 ||
        s1.steps != na) {
        fprintf(stderr, "expected 1 eager fallback, no capture, no replay, %d steps\n", na);
        fail = 1;
    }
    CHECK_HAS(w, "CUDA graph capture failed");
    CHECK_HAS(w, "cudaStreamSynchronize");
    const char *reasons[3] = {cudaGetErrorString(cudaErrorStreamCaptureUnsupported),
                              cudaGetErrorString(cudaErrorStreamCaptureInvalidated),
                              cudaGetErrorString(cudaErrorStreamCaptureImplicit)};
    if (!strstr(w, reasons[0]) && !strstr(w, reasons[1]) && !strstr(w, reasons[2])) {
        fprintf(stderr, "the warning lacks CUDA's reason (\"%s\", ...)\n", reasons[0]);
        fail = 1;
    }
    /* another shape captures and replays normally */
    fail |= graph_steps(cg, ce, &B, nb, "B");
    const nnpops_stats s2 = stats_of(cg);
    printf("  after B: captures %lld, replays %lld, eager_fallbacks %lld\n",
           (long long)s2.graph_captures, (long long)s2.graph_replays,
           (long long)s2.eager_fallbacks);
    if (s2.graph_captures != 1 || s2.graph_replays != nb - 2 || s2.eager_fallbacks != 1) {
        fprintf(stderr, "expected 1 capture, %d replays, still 1 eager fallback\n", nb - 2);
        fail = 1;
    }
    sys_free(&A);
    sys_free(&B);
    nnpops_context_destroy(cg);
    nnpops_context_destroy(ce);
    nnpops_model_destroy(m);
    return fail;
}

/* ---- CPU model, stats struct sizes (no GPU needed) ---------------------------------------------- */

static int case_cpu_model(void) {
    nnpops_model *m;
    nnpops_context *c;
    CHECK_OK(nnpops_model_load("ani2x", "cpu", NNPOPS_FLOAT64, &m));
    CHECK_OK(nnpops_context_create(m, &c));
    int32_t z[3] = {8, 1, 1};
    double x[9] = {0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0}, e = 0;
    nnpops_device_inputs in = {sizeof in, 3, -1, 1, z, x, NULL, NULL, NULL};
    nnpops_device_outputs out = {sizeof out, &e, NULL, NULL};
    CHECK(nnpops_cuda_built() == 1);
    CHECK_STATUS(nnpops_compute_device(c, &in, &out, NULL), NNPOPS_ERROR_UNSUPPORTED);
    CHECK_ERROR_HAS("needs a model loaded on a CUDA device");
    CHECK_STATUS(nnpops_context_device_status(c, NULL), NNPOPS_ERROR_UNSUPPORTED);
    CHECK_STATUS(nnpops_compute_device(NULL, &in, &out, NULL), NNPOPS_ERROR_INVALID_ARGUMENT);
    /* stats: the 0.1.0 struct (up to n_pairs) is still accepted; nothing is written past it */
    unsigned char buf[sizeof(nnpops_stats) + 16];
    memset(buf, 0xab, sizeof buf);
    nnpops_stats *st = (nnpops_stats *)buf;
    st->struct_size = offsetof(nnpops_stats, device_plans);
    CHECK_OK(nnpops_context_stats(c, st));
    for (size_t k = offsetof(nnpops_stats, device_plans); k < sizeof buf; k++) CHECK(buf[k] == 0xab);
    CHECK(st->struct_size == offsetof(nnpops_stats, device_plans));
    st->struct_size = offsetof(nnpops_stats, device_plans) - 8;
    CHECK_STATUS(nnpops_context_stats(c, st), NNPOPS_ERROR_INVALID_ARGUMENT);
    nnpops_context_destroy(c);
    nnpops_model_destroy(m);
    printf("  CPU model: UNSUPPORTED from both device calls; old nnpops_stats size accepted\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_device CASE [MODEL PREC]\n");
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "cpu_model")) {
        const int r = case_cpu_model();
        printf("%s\n", r == 0 ? "PASS" : "FAIL");
        return r;
    }
    gpu_init_or_skip();
    int r = 2;
    if (!strcmp(c, "match") && argc > 3) r = case_match(argv[2], argv[3]);
    else if (!strcmp(c, "capture")) r = case_capture(argc > 2 ? argv[2] : "ani2x");
    else if (!strcmp(c, "batch")) r = case_batch();
    else if (!strcmp(c, "errors")) r = case_errors();
    else if (!strcmp(c, "overflow")) r = case_overflow();
    else if (!strcmp(c, "capture_failure")) r = case_capture_failure();
    else fprintf(stderr, "unknown case %s\n", c);
    if (r == SKIP_RETURN) return r;
    printf("%s\n", r == 0 ? "PASS" : "FAIL");
    return r;
}
