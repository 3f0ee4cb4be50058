/*
 * bench_cpu.c - ANI-2x energy + forces on the CPU: milliseconds per step in float32 and float64
 * for the 13-atom alanine of the reference set (13_f0 of $NNPOPS_SHARED_DIR/reference/
 * ani2x-torchani.json, default ../shared, as in bench_gpu; the row is left out when the file is
 * missing) and periodic water boxes of about 264, 1,000, 10,000 and 100,000 atoms.
 *
 *   bench_cpu [MAX_ATOMS [MODEL [THREADS]]]   (defaults: 100000, ani2x, 1; the model is found by
 *                                              name on NNPOPS_MODEL_PATH, as for the tests;
 *                                              THREADS: the contexts' option threads, 0 = all)
 *
 * Water boxes (the setup of ../shared/notes/benchmarks.md): rigid molecules, O-H 0.9572 A,
 * H-O-H 104.52 degrees, on a cubic lattice of spacing 3.104 A with random orientations and 0.05 A
 * jitter.  For N atoms, N/3 molecules fill the sites of an nx x nx x nz lattice in order (nx =
 * ceil(cbrt(N/3)), nz = ceil(N/3 / nx^2)), and the periodic box is nx x nx x nz spacings, so the
 * density is the lattice's except in a partly filled last layer.  Each size runs one warm-up step,
 * then steps until at least 2 s (or 3 steps) have passed (one step when a step takes over 20 s);
 * the table shows the mean wall time, and the process CPU time per step (which shows the cost on
 * a machine shared with other work).  GFLOP/s (from the wall time) counts the dense layers only
 * (forward and input-gradient backward, all 8 members; the first layers over the AEV entries of
 * the species present, the only ones computed).
 */
#define _POSIX_C_SOURCE 199309L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nnpops/nnpops.h"
#include "reference.h"
#include "water.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of this process (shows the cost on a machine shared with other work). */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct system_t {
    int64_t n;
    int32_t *z;
    double *x;
    double cell[9];
    uint8_t pbc[3];
    int periodic;
} system_t;

/* About target_atoms atoms of water (water.h, 0.05 A jitter): nmol molecules on an nz x nx x nx
 * lattice, the last plane partly filled; periodic. */
static void water_box(int64_t target_atoms, system_t *sys) {
    const int64_t nmol = target_atoms / 3 > 0 ? target_atoms / 3 : 1;
    int64_t nx = (int64_t)ceil(cbrt((double)nmol) - 1e-9);
    if (nx < 1) nx = 1;
    const int64_t nz = (nmol + nx * nx - 1) / (nx * nx);
    sys->n = 3 * nmol;
    sys->z = malloc(sizeof(int32_t) * (size_t)sys->n);
    sys->x = malloc(sizeof(double) * 3 * (size_t)sys->n);
    if (!sys->z || !sys->x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    test_water_box((int)nz, (int)nx, (int)nx, nmol, 20240601ULL, 0.05, sys->z, sys->x, sys->cell);
    sys->pbc[0] = sys->pbc[1] = sys->pbc[2] = 1;
    sys->periodic = 1;
}

/* Dense-layer flops of one step for ANI-2x (8 members): forward + input backward, the first
 * layers over the step's AEV entries (stats.descriptor_length: those of the species present). */
static double ani2x_flops(const system_t *s, double aev) {
    const double h = aev * 256 + 256 * 192 + 192 * 160 + 160;  /* H */
    const double c = aev * 224 + 224 * 192 + 192 * 160 + 160;  /* C */
    const double no = aev * 192 + 192 * 160 + 160 * 128 + 128; /* N, O */
    double total = 0;
    for (int64_t i = 0; i < s->n; i++)
        total += s->z[i] == 1 ? h : s->z[i] == 6 ? c : no;
    return 8 * 4 * total;
}

static double run(nnpops_context *ctx, const system_t *s, int *steps_out, double *cpu_out) {
    double e, *f = malloc(sizeof(double) * 3 * (size_t)s->n);
    if (!f) exit(1);
    nnpops_inputs in = {sizeof in, s->n, -1, 1, s->z, s->x, NULL,
                        s->periodic ? s->cell : NULL, s->periodic ? s->pbc : NULL};
    nnpops_outputs out = {sizeof out, &e, f, NULL, NULL, NULL, NULL};
    nnpops_status st = nnpops_compute(ctx, &in, &out); /* warm-up: buffers grow here */
    if (st != NNPOPS_OK) {
        fprintf(stderr, "nnpops_compute: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
        exit(1);
    }
    int steps = 0;
    const double c0 = cpu_now();
    const double t0 = now();
    double t = t0;
    while (steps < 3 || t - t0 < 2.0) {
        st = nnpops_compute(ctx, &in, &out);
        if (st != NNPOPS_OK) {
            fprintf(stderr, "nnpops_compute: %s\n", nnpops_last_error());
            exit(1);
        }
        steps++;
        t = now();
        if (t - t0 > 20.0) break; /* large systems: a few steps are enough */
    }
    free(f);
    *cpu_out = (cpu_now() - c0) / steps;
    *steps_out = steps;
    return (t - t0) / steps;
}

int main(int argc, char **argv) {
    const int64_t max_atoms = argc > 1 ? atoll(argv[1]) : 100000;
    const char *model_name = argc > 2 ? argv[2] : "ani2x";
    const int threads = argc > 3 ? atoi(argv[3]) : 1;
    const int64_t sizes[] = {13, 264, 1000, 10000, 100000};
    static refset set;
    const refsys *alanine = NULL;
    if (ref_load("ani2x", &set)) alanine = ref_find(&set, "13_f0");
    else fprintf(stderr, "no %s: the 13-atom row is left out\n", set.path);
    nnpops_model *models[2] = {NULL, NULL};
    nnpops_context *ctx[2] = {NULL, NULL};
    for (int p = 0; p < 2; p++) {
        nnpops_status st = nnpops_model_load(model_name, "cpu", p ? NNPOPS_FLOAT64 : NNPOPS_FLOAT32,
                                             &models[p]);
        if (st == NNPOPS_OK) st = nnpops_context_create(models[p], &ctx[p]);
        if (st == NNPOPS_OK) st = nnpops_context_set_option(ctx[p], NNPOPS_OPTION_THREADS, threads);
        if (st != NNPOPS_OK) {
            fprintf(stderr, "cannot load %s: %s: %s\n", model_name, nnpops_status_name(st),
                    nnpops_last_error());
            return 1;
        }
    }
    printf("%s energy + forces on the CPU (option threads %d), nnpops %s\n", model_name, threads,
           nnpops_version_string());
    printf("| system | atoms | float32 ms/step | float64 ms/step | float32 GFLOP/s | float64 GFLOP/s "
           "| float32 CPU ms | float64 CPU ms |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        if (sizes[k] > max_atoms) break;
        system_t s;
        if (sizes[k] == 13) {
            if (!alanine) continue;
            s.n = alanine->n;
            s.z = malloc(sizeof(int32_t) * (size_t)s.n);
            s.x = malloc(sizeof(double) * 3 * (size_t)s.n);
            if (!s.z || !s.x) return 1;
            memcpy(s.z, alanine->z, sizeof(int32_t) * (size_t)s.n);
            memcpy(s.x, alanine->x, sizeof(double) * 3 * (size_t)s.n);
            s.periodic = 0;
        } else {
            water_box(sizes[k], &s);
        }
        double ms[2], cpu[2];
        for (int p = 0; p < 2; p++) {
            int steps;
            ms[p] = 1e3 * run(ctx[p], &s, &steps, &cpu[p]);
        }
        nnpops_stats st = {sizeof st};
        nnpops_context_stats(ctx[0], &st);
        const double gf =
            strcmp(model_name, "ani2x") == 0 ? ani2x_flops(&s, (double)st.descriptor_length) * 1e-9
                                             : 0.0;
        printf("| %s | %lld | %.3f | %.3f | %.1f | %.1f | %.3f | %.3f |\n",
               s.periodic ? "water, periodic" : "alanine 13_f0", (long long)s.n, ms[0], ms[1],
               gf / (ms[0] * 1e-3), gf / (ms[1] * 1e-3), 1e3 * cpu[0], 1e3 * cpu[1]);
        fflush(stdout);
        free(s.z);
        free(s.x);
    }
    for (int p = 0; p < 2; p++) {
        nnpops_context_destroy(ctx[p]);
        nnpops_model_destroy(models[p]);
    }
    ref_free(&set);
    return 0;
}
