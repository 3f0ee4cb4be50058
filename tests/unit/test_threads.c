/*
 * test_threads.c - one model shared by 8 threads (pthreads), each thread with its own context
 * computing its own small systems many times; every result must equal the serial result
 * bitwise.  Also: models loaded concurrently by 8 threads, and the thread-local error message
 * (an error in one thread is never seen in another).  .ci/sanitize.sh builds this file together
 * with the library's sources under ThreadSanitizer (target test_threads_tsan).
 *
 * Model: ANI-1x by name (NNPOPS_MODEL_PATH; a missing model fails under CI=true, else skips).
 * Usage: test_threads CASE [REPEATS]   (REPEATS: passes over each thread's systems, default 25)
 *   shared_model       float64 model shared by the threads
 *   shared_model_f32   the same with a float32 model
 *   concurrent_load    every thread loads its own model at the same moment, computes, destroys
 *   error_messages     half the threads fail (unknown element at an atom index of their own)
 *                      while the other half succeed; each sees only its own message
 *   step_threads       option threads: one context's step on 2, 3, 7, 12 and "all" threads gives
 *                      the same bits as on 1 (a batch of a periodic water box of 300 atoms and a
 *                      40-atom cluster: energies, forces, virials, atomic energies and virials,
 *                      member energies; also one ensemble member), and nnpops_stats.cpu_threads
 *                      shows how many threads ran; REPEATS steps each (the workers reused)
 *   step_threads_f32   the same with a float32 model
 *   step_threads_fork  a threaded step in a child process made by fork() after the parent's
 *                      threaded steps (the child has none of the parent's workers)
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "water.h"

enum { THREADS = 8, PER_THREAD = 4, MAX_ATOMS = 40 };

typedef struct system {
    int64_t n;
    int periodic;
    int32_t z[MAX_ATOMS];
    double x[3 * MAX_ATOMS];
    double cell[9];
    uint8_t pbc[3];
} system_t;

typedef struct result {
    double e, f[3 * MAX_ATOMS], w[9], ae[MAX_ATOMS];
} result;

static system_t systems[THREADS][PER_THREAD];
static result reference[THREADS][PER_THREAD];
static int repeats = 25;

/* Atoms on a jittered grid of 1.45 angstrom (no two closer than about 1 angstrom), periodic
 * systems in a box of whole grid cells (images as far apart as atoms). */
static void make_system(system_t *s, int t, int k) {
    unsigned long long seed = 0x9e3779b97f4a7c15ULL * (unsigned long long)(1 + t * PER_THREAD + k);
    static const int32_t elements[4] = {1, 6, 7, 8};
    s->n = 3 + (t * 7 + k * 11) % 34;
    s->periodic = (t + k) % 3 == 0;
    int g = 1;
    while (g * g * g < s->n) g++;
    if (s->periodic && g < 3) g = 3;
    const double a = 1.45;
    for (int64_t i = 0; i < s->n; i++) {
        const int gx = (int)(i % g), gy = (int)(i / g % g), gz = (int)(i / (g * g));
        s->z[i] = elements[(int)(test_rand(&seed) * 4) % 4];
        s->x[3 * i] = gx * a + 0.2 * (test_rand(&seed) - 0.5);
        s->x[3 * i + 1] = gy * a + 0.2 * (test_rand(&seed) - 0.5);
        s->x[3 * i + 2] = gz * a + 0.2 * (test_rand(&seed) - 0.5);
    }
    memset(s->cell, 0, sizeof s->cell);
    for (int d = 0; d < 3; d++) {
        s->cell[4 * d] = g * a;
        s->pbc[d] = (uint8_t)s->periodic;
    }
    s->cell[3] = 0.3; /* a little triclinic */
}

static nnpops_status compute(nnpops_context *ctx, const system_t *s, result *r) {
    memset(r, 0, sizeof *r);
    nnpops_inputs in = {sizeof in, s->n, -1, 1, s->z, s->x, NULL, s->periodic ? s->cell : NULL,
                        s->periodic ? s->pbc : NULL};
    nnpops_outputs out = {sizeof out, &r->e, r->f, r->w, r->ae, NULL, NULL};
    return nnpops_compute(ctx, &in, &out);
}

/* The serial results: one context, every system in turn. */
static void serial_reference(const nnpops_model *m) {
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(m, &ctx));
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < PER_THREAD; k++) {
            CHECK_OK(compute(ctx, &systems[t][k], &reference[t][k]));
            CHECK(isfinite(reference[t][k].e));
        }
    nnpops_context_destroy(ctx);
}

typedef struct worker {
    int t;
    const nnpops_model *model; /* shared model, or NULL: load one (concurrent_load) */
    nnpops_precision precision;
    int fail_mode;             /* error_messages: 1 = this thread fails on purpose */
    long computed, mismatches, errors;
    char first_problem[512];
} worker;

static pthread_barrier_t start_line;

static void problem(worker *w, const char *what) {
    if (!w->first_problem[0]) snprintf(w->first_problem, sizeof w->first_problem, "%s", what);
}

static void *run_worker(void *arg) {
    worker *w = arg;
    const nnpops_model *m = w->model;
    nnpops_model *own = NULL;
    pthread_barrier_wait(&start_line);
    for (int rep = 0; rep < repeats; rep++) {
        if (!w->model) {
            nnpops_status st = nnpops_model_load("ani1x", "cpu", w->precision, &own);
            if (st != NNPOPS_OK) {
                w->errors++;
                problem(w, nnpops_last_error());
                return NULL;
            }
            m = own;
        }
        nnpops_context *ctx = NULL;
        if (nnpops_context_create(m, &ctx) != NNPOPS_OK) {
            w->errors++;
            problem(w, nnpops_last_error());
            break;
        }
        for (int j = 0; j < PER_THREAD; j++) {
            const int k = (j + rep) % PER_THREAD; /* a different order each pass */
            const system_t *s = &systems[w->t][k];
            result r;
            if (w->fail_mode) {
                system_t bad = *s;
                const int64_t atom = (w->t + rep) % s->n;
                bad.z[atom] = 92; /* uranium: not in ANI-1x */
                nnpops_status st = compute(ctx, &bad, &r);
                char want[96];
                snprintf(want, sizeof want, "atom %lld: element U (atomic number 92)", (long long)atom);
                if (st != NNPOPS_ERROR_UNKNOWN_ELEMENT || !strstr(nnpops_last_error(), want)) {
                    w->errors++;
                    char msg[400];
                    snprintf(msg, sizeof msg, "expected '%s', got %s: %s", want,
                             nnpops_status_name(st), nnpops_last_error());
                    problem(w, msg);
                }
            }
            nnpops_status st = compute(ctx, s, &r);
            w->computed++;
            if (st != NNPOPS_OK) {
                w->errors++;
                problem(w, nnpops_last_error());
            } else if (memcmp(&r, &reference[w->t][k], sizeof r) != 0) {
                w->mismatches++;
                char msg[200];
                snprintf(msg, sizeof msg, "system %d: E = %.17g, serial %.17g", k, r.e,
                         reference[w->t][k].e);
                problem(w, msg);
            }
            /* a thread that never failed has never seen a message */
            if (!w->fail_mode && nnpops_last_error()[0]) {
                w->errors++;
                char msg[400];
                snprintf(msg, sizeof msg, "another thread's message leaked in: %s", nnpops_last_error());
                problem(w, msg);
            }
        }
        nnpops_context_destroy(ctx);
        if (own) {
            nnpops_model_destroy(own);
            own = NULL;
        }
    }
    return NULL;
}

static int run(nnpops_precision precision, int shared, int with_failures) {
    nnpops_model *m = NULL;
    nnpops_status st = nnpops_model_load("ani1x", "cpu", precision, &m);
    if (st == NNPOPS_ERROR_MODEL_NOT_FOUND) return test_missing_data("ani1x (NNPOPS_MODEL_PATH)");
    CHECK_OK(st);
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < PER_THREAD; k++) make_system(&systems[t][k], t, k);
    serial_reference(m);

    worker w[THREADS];
    pthread_t tid[THREADS];
    CHECK(pthread_barrier_init(&start_line, NULL, THREADS) == 0);
    for (int t = 0; t < THREADS; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].t = t;
        w[t].model = shared ? m : NULL;
        w[t].precision = precision;
        w[t].fail_mode = with_failures && (t % 2 == 0);
        CHECK(pthread_create(&tid[t], NULL, run_worker, &w[t]) == 0);
    }
    long computed = 0, bad = 0;
    for (int t = 0; t < THREADS; t++) {
        CHECK(pthread_join(tid[t], NULL) == 0);
        computed += w[t].computed;
        bad += w[t].mismatches + w[t].errors;
        if (w[t].first_problem[0])
            fprintf(stderr, "thread %d: %ld mismatches, %ld errors; first: %s\n", t,
                    w[t].mismatches, w[t].errors, w[t].first_problem);
    }
    pthread_barrier_destroy(&start_line);
    printf("%d threads, %ld steps (%d passes over %d systems each, 3..36 atoms): %ld problems\n",
           THREADS, computed, repeats, PER_THREAD, bad);
    nnpops_model_destroy(m);
    return bad == 0 && computed == (long)THREADS * PER_THREAD * repeats ? 0 : 1;
}

/* ---- option threads: one context's step on several threads ---------------------------------- */

enum { NW = 100, NCL = 40, NB = 3 * NW + NCL, ENS_MAX = 16 };

typedef struct batch_t {
    int32_t z[NB], batch[NB];
    double x[3 * NB], cells[18];
    uint8_t pbc[6];
} batch_t;

typedef struct batch_result {
    double e[2], f[3 * NB], w[18], ae[NB], av[9 * NB], me[2 * ENS_MAX];
} batch_result;

/* System 0: 5 x 5 x 4 water molecules (water.h, no jitter) in a slightly triclinic periodic cell;
 * system 1: a 40-atom cluster of H, C, N, O atoms at least 1 A apart (test_scatter), not
 * periodic. */
static void make_batch(batch_t *b) {
    unsigned long long seed = 20261205;
    test_water_box(5, 5, 4, 0, seed, 0.0, b->z, b->x, b->cells);
    for (int i = 0; i < 3 * NW; i++) b->batch[i] = 0;
    b->cells[3] = 0.4;
    memset(b->cells + 9, 0, sizeof(double) * 9);
    b->pbc[0] = b->pbc[1] = b->pbc[2] = 1;
    b->pbc[3] = b->pbc[4] = b->pbc[5] = 0;
    static const int32_t el[4] = {1, 6, 7, 8};
    test_scatter(NCL, 7.0, 1.0, 0, &seed, b->x + 3 * 3 * NW);
    for (int i = 3 * NW; i < NB; i++) {
        b->z[i] = el[(int)(test_rand(&seed) * 4) % 4];
        b->batch[i] = 1;
    }
}

static nnpops_inputs batch_inputs(const batch_t *b) {
    return (nnpops_inputs){sizeof(nnpops_inputs), NB,       -1,       2,
                           b->z,                  b->x,     b->batch, b->cells, b->pbc};
}

static void batch_compute(nnpops_context *ctx, const batch_t *b, batch_result *r) {
    memset(r, 0, sizeof *r);
    const nnpops_inputs in = batch_inputs(b);
    nnpops_outputs out = {sizeof out, r->e, r->f, r->w, r->ae, r->av, r->me};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
}

/* ANI-1x, the batch and two result buffers; 0, or the status of a missing model (a skip or, under
 * CI=true, a failure). */
typedef struct fixture {
    nnpops_model *m;
    batch_t *b;
    batch_result *ref, *r;
} fixture;

static int fixture_open(fixture *fx, nnpops_precision precision) {
    memset(fx, 0, sizeof *fx);
    nnpops_status st = nnpops_model_load("ani1x", "cpu", precision, &fx->m);
    if (st == NNPOPS_ERROR_MODEL_NOT_FOUND) return test_missing_data("ani1x (NNPOPS_MODEL_PATH)");
    CHECK_OK(st);
    fx->b = malloc(sizeof *fx->b);
    fx->ref = malloc(sizeof *fx->ref);
    fx->r = malloc(sizeof *fx->r);
    CHECK(fx->b && fx->ref && fx->r);
    make_batch(fx->b);
    return 0;
}

static void fixture_close(fixture *fx) {
    free(fx->b);
    free(fx->ref);
    free(fx->r);
    nnpops_model_destroy(fx->m);
}

static int64_t cpu_threads_of(const nnpops_context *ctx) {
    nnpops_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_OK(nnpops_context_stats(ctx, &st));
    return st.cpu_threads;
}

/* Steps of contexts with threads = 1, 2, 3, 7, 12 and 0 (all), `repeats` each, bitwise equal; each
 * ran on the threads expected.  The batch has 8 blocks (the atoms of a species, both systems
 * together, in blocks of at most 64): one thread runs them in turn, a few threads deal them (block
 * mode, at most one thread per block), and where that leaves threads idle (more threads than
 * blocks; blocks of unequal cost) each block's work is split into units (split mode: as many
 * threads as asked, up to one per block and member, so 12 threads show it).  The steps ask for
 * every member's energies, so every member runs, and split mode serves the chosen member too; a
 * chosen member without the members' energies runs that member alone, in block mode.  Where split
 * mode ran, a step of energies alone (no backward phases) gives the same energies too. */
static int step_threads(nnpops_precision precision) {
    fixture fx;
    const int rc = fixture_open(&fx, precision);
    if (rc) return rc;
    const nnpops_model *m = fx.m;
    const batch_t *b = fx.b;
    batch_result *ref = fx.ref, *r = fx.r;
    /* blocks of at most 64 atoms of a species, over the whole batch */
    int count[9] = {0}, blocks = 0;
    for (int i = 0; i < NB; i++) count[b->z[i]]++;
    for (int zz = 0; zz < 9; zz++) blocks += (count[zz] + 63) / 64;
    const long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    for (int member = -1; member <= 3; member += 4) {
        nnpops_context *c1 = NULL;
        CHECK_OK(nnpops_context_create(m, &c1));
        CHECK_OK(nnpops_context_set_option(c1, NNPOPS_OPTION_ENSEMBLE_MEMBER, member));
        batch_compute(c1, b, ref);
        CHECK(isfinite(ref->e[0]) && isfinite(ref->e[1]) && cpu_threads_of(c1) == 1);
        nnpops_context_destroy(c1);
        static const char *const counts[] = {"2", "3", "7", "12", "0"};
        for (int q = 0; q < 5; q++) {
            nnpops_context *ct = NULL;
            CHECK_OK(nnpops_context_create(m, &ct));
            CHECK_OK(nnpops_context_set_option(ct, NNPOPS_OPTION_ENSEMBLE_MEMBER, member));
            CHECK_OK(nnpops_context_set_option_by_name(ct, "threads", counts[q]));
            long want = atol(counts[q]);
            if (want == 0) want = nproc;
            const int split = want > blocks; /* (split mode shown by the thread count) */
            if (want > 8L * blocks) want = 8L * blocks; /* ANI-1x: 8 members */
            for (int rep = 0; rep < repeats; rep++) {
                batch_compute(ct, b, r);
                if (memcmp(r, ref, sizeof *r) != 0) {
                    fprintf(stderr, "threads %s, member %d, step %d: E = %.17g, %.17g; one "
                            "thread %.17g, %.17g\n", counts[q], member, rep, r->e[0], r->e[1],
                            ref->e[0], ref->e[1]);
                    return 1;
                }
                if (cpu_threads_of(ct) != want) {
                    fprintf(stderr, "threads %s: the step ran on %lld threads, expected %ld\n",
                            counts[q], (long long)cpu_threads_of(ct), want);
                    return 1;
                }
            }
            printf("%s, member %d: threads %s (%ld ran%s), %d steps: the same bits as one thread\n",
                   precision == NNPOPS_FLOAT32 ? "float32" : "float64", member, counts[q], want,
                   split ? ", split mode" : "", repeats);
            if (split) { /* energies alone: no backward phases (a chosen member: block mode) */
                double e[2];
                const nnpops_inputs in = batch_inputs(b);
                nnpops_outputs out = {sizeof out, e, NULL, NULL, NULL, NULL, NULL};
                CHECK_OK(nnpops_compute(ct, &in, &out));
                CHECK(memcmp(e, ref->e, sizeof e) == 0);
                CHECK(cpu_threads_of(ct) == (member < 0 ? want : blocks));
            }
            if (member >= 0 && split) { /* the member alone: block mode */
                const nnpops_inputs in = batch_inputs(b);
                nnpops_outputs out = {sizeof out, r->e, r->f, r->w, r->ae, r->av, NULL};
                CHECK_OK(nnpops_compute(ct, &in, &out));
                CHECK(cpu_threads_of(ct) == blocks);
                CHECK(memcmp(r->e, ref->e, sizeof r->e) == 0);
                CHECK(memcmp(r->f, ref->f, sizeof r->f) == 0);
                CHECK(memcmp(r->w, ref->w, sizeof r->w) == 0);
                CHECK(memcmp(r->ae, ref->ae, sizeof r->ae) == 0);
                CHECK(memcmp(r->av, ref->av, sizeof r->av) == 0);
            }
            nnpops_context_destroy(ct);
        }
    }
    /* the option's range */
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(m, &ctx));
    CHECK_STATUS(nnpops_context_set_option(ctx, NNPOPS_OPTION_THREADS, -1),
                 NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("threads");
    CHECK_STATUS(nnpops_context_set_option(ctx, NNPOPS_OPTION_THREADS, 1025),
                 NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(nnpops_context_set_option(ctx, NNPOPS_OPTION_THREADS, 2.5),
                 NNPOPS_ERROR_INVALID_ARGUMENT);
    nnpops_context_destroy(ctx);
    fixture_close(&fx);
    return 0;
}

/* A child made by fork() after threaded steps computes on threads of its own. */
static int step_threads_fork(void) {
    fixture fx;
    const int rc = fixture_open(&fx, NNPOPS_FLOAT64);
    if (rc) return rc;
    const batch_t *b = fx.b;
    batch_result *ref = fx.ref, *r = fx.r;
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(fx.m, &ctx));
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_THREADS, 3));
    batch_compute(ctx, b, ref);
    CHECK(cpu_threads_of(ctx) == 3);
    fflush(stdout);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        batch_compute(ctx, b, r);
        const int ok = memcmp(r, ref, sizeof *r) == 0 && cpu_threads_of(ctx) == 3;
        nnpops_context_destroy(ctx);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    batch_compute(ctx, b, r); /* the parent's workers still serve it */
    CHECK(memcmp(r, ref, sizeof *r) == 0 && cpu_threads_of(ctx) == 3);
    printf("fork: the child's threaded step and the parent's next one give the same bits\n");
    nnpops_context_destroy(ctx);
    fixture_close(&fx);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s CASE [REPEATS]\n", argv[0]);
        return 2;
    }
    if (argc == 3) repeats = atoi(argv[2]);
    CHECK(repeats >= 1);
    if (!strcmp(argv[1], "shared_model")) return run(NNPOPS_FLOAT64, 1, 0);
    if (!strcmp(argv[1], "shared_model_f32")) return run(NNPOPS_FLOAT32, 1, 0);
    if (!strcmp(argv[1], "concurrent_load")) return run(NNPOPS_FLOAT64, 0, 0);
    if (!strcmp(argv[1], "error_messages")) return run(NNPOPS_FLOAT64, 1, 1);
    if (!strcmp(argv[1], "step_threads")) return step_threads(NNPOPS_FLOAT64);
    if (!strcmp(argv[1], "step_threads_f32")) return step_threads(NNPOPS_FLOAT32);
    if (!strcmp(argv[1], "step_threads_fork")) return step_threads_fork();
    fprintf(stderr, "unknown case '%s'\n", argv[1]);
    return 2;
}
