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
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

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
    fprintf(stderr, "unknown case '%s'\n", argv[1]);
    return 2;
}
