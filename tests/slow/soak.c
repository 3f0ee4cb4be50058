/*
 * soak.c - long runs that must not grow memory: many steps of one context, with the resident
 * set size (RSS, from /proc/self/statm) recorded after a warm-up and at the end; the end may
 * exceed the warm-up value by at most 5 % (buffers grow to the largest step seen and are then
 * reused: a leak or a buffer that grows with the step count fails this).
 *
 * Usage: soak small [STEPS [MODEL]]   a water cluster of 24 atoms (8 molecules), jittered every
 *                                     step; default 100000 steps
 *        soak large [STEPS [MODEL]]   a periodic water box of 10002 atoms at 1 g/cm^3 whose
 *                                     molecule count changes every step (90..100 %); default
 *                                     1000 steps
 *        soak KIND STEPS MODEL DEVICE [graphs]
 *                                     DEVICE cpu (default) or cuda / cuda:N; "graphs": option
 *                                     cuda_graphs on.  On a CUDA device the GPU memory in use
 *                                     (cudaMemGetInfo; builds with NNPOPS_ENABLE_CUDA) is recorded
 *                                     like the RSS and must not grow at all after the warm-up.
 * MODEL defaults to ani1x (NNPOPS_MODEL_PATH).  Every step computes energy, forces and virial
 * and checks that they are finite.  Warm-up: 1 % of the steps (at least 10), the first of them at
 * the largest size of the run, so that every buffer reaches its final size.  The log (stdout)
 * is summarised in docs/reliability.md.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "water.h"

#ifdef NNPOPS_SOAK_CUDA
#include <cuda_runtime.h>
/* GPU memory in use on the current device (MiB), or -1 when it cannot be read */
static double gpu_used_mib(void) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return -1.0;
    return (double)(total_b - free_b) / (1024.0 * 1024.0);
}
#else
static double gpu_used_mib(void) { return -1.0; }
#endif

static double rss_mib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    CHECK(f != NULL);
    CHECK(fscanf(f, "%ld %ld", &size, &resident) == 2);
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct run {
    const char *kind;
    long steps;
    int64_t max_atoms;
    int periodic;
    double cell[9];
    int32_t *z;
    double *x0, *x;         /* reference and jittered positions */
    double *f, w[9];
} run;

/* 8 water molecules (water.h) on a 2 x 2 x 2 lattice, open */
static void setup_small(run *r) {
    double cell[9];
    r->max_atoms = test_water_box(2, 2, 2, 0, 42, 0.0, r->z, r->x0, cell);
    r->periodic = 0;
}

/* 3334 water molecules (water.h) on a 15^3 lattice (46.56 A box), periodic */
static void setup_large(run *r) {
    r->max_atoms = test_water_box(15, 15, 15, 3334, 7, 0.0, r->z, r->x0, r->cell);
    r->periodic = 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "small") && strcmp(argv[1], "large"))) {
        fprintf(stderr, "usage: %s small|large [STEPS [MODEL [DEVICE [graphs]]]]\n", argv[0]);
        return 2;
    }
    run r;
    memset(&r, 0, sizeof r);
    r.kind = argv[1];
    const int large = strcmp(r.kind, "large") == 0;
    r.steps = argc > 2 ? atol(argv[2]) : (large ? 1000 : 100000);
    const char *model_name = argc > 3 ? argv[3] : "ani1x";
    const char *device = argc > 4 ? argv[4] : "cpu";
    const int graphs = argc > 5 && strcmp(argv[5], "graphs") == 0;
    const int on_gpu = strncmp(device, "cuda", 4) == 0;
    CHECK(r.steps >= 20);
    const int64_t cap = large ? 3 * 3334 : 24;
    r.z = malloc(sizeof(int32_t) * cap);
    r.x0 = malloc(sizeof(double) * 3 * cap);
    r.x = malloc(sizeof(double) * 3 * cap);
    r.f = malloc(sizeof(double) * 3 * cap);
    CHECK(r.z && r.x0 && r.x && r.f);
    if (large) setup_large(&r);
    else setup_small(&r);

    nnpops_model *m = NULL;
    nnpops_status st = nnpops_model_load(model_name, device, NNPOPS_FLOAT32, &m);
    if (st == NNPOPS_ERROR_MODEL_NOT_FOUND) return test_missing_data(model_name);
    CHECK_OK(st);
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(m, &ctx));
    if (graphs) CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_CUDA_GRAPHS, 1));
    double gpu_warm = -1.0, gpu_peak = -1.0;

    const long warmup = r.steps / 100 > 10 ? r.steps / 100 : 10;
    const uint8_t pbc[3] = {1, 1, 1};
    unsigned long long seed = 12345;
    double rss_start = rss_mib(), rss_warm = 0.0, rss_peak = 0.0, e_min = HUGE_VAL, e_max = -HUGE_VAL;
    double t0 = now(), t_warm = 0.0;
    int64_t atoms_min = r.max_atoms, atoms_sum = 0;
    printf("soak %s: model %s (float32) on %s%s, %ld steps, up to %lld atoms%s, warm-up %ld "
           "steps\n",
           r.kind, model_name, device, graphs ? " (cuda_graphs on)" : "", r.steps,
           (long long)r.max_atoms, r.periodic ? " (periodic)" : "", warmup);
    printf("  RSS before the first step: %.1f MiB\n", rss_start);
    fflush(stdout);
    for (long step = 0; step < r.steps; step++) {
        /* the atom count: whole molecules, 90..100 % of the largest (large runs only) */
        int64_t n = r.max_atoms;
        if (large && step > 0) {
            const int64_t mol = r.max_atoms / 3;
            n = 3 * (mol - (int64_t)(test_rand(&seed) * 0.1 * (double)mol));
        }
        if (n < atoms_min) atoms_min = n;
        atoms_sum += n;
        for (int64_t k = 0; k < 3 * n; k++) r.x[k] = r.x0[k] + 0.02 * (test_rand(&seed) - 0.5);
        double e = NAN;
        nnpops_inputs in = {sizeof in, n, -1, 1, r.z, r.x, NULL, r.periodic ? r.cell : NULL,
                            r.periodic ? pbc : NULL};
        nnpops_outputs out = {sizeof out, &e, r.f, r.w, NULL, NULL, NULL};
        st = nnpops_compute(ctx, &in, &out);
        if (st != NNPOPS_OK) {
            fprintf(stderr, "step %ld (%lld atoms): %s: %s\n", step, (long long)n,
                    nnpops_status_name(st), nnpops_last_error());
            return 1;
        }
        CHECK(isfinite(e) && isfinite(r.f[0]) && isfinite(r.w[0]));
        if (e < e_min) e_min = e;
        if (e > e_max) e_max = e;
        const double rss = rss_mib();
        if (rss > rss_peak) rss_peak = rss;
        /* GPU memory: read every 100th step (the call costs a driver round trip) and at the marks */
        const int mark = step + 1 == warmup || (step + 1 > warmup && (step + 1) % (r.steps / 10) == 0);
        const double gpu = on_gpu && (mark || step % 100 == 0) ? gpu_used_mib() : -1.0;
        if (gpu > gpu_peak) gpu_peak = gpu;
        if (step + 1 == warmup) {
            rss_warm = rss;
            gpu_warm = gpu;
            t_warm = now();
            printf("  after warm-up (step %ld): RSS %.1f MiB", step + 1, rss_warm);
            if (gpu >= 0) printf(", GPU memory in use %.1f MiB", gpu);
            printf("\n");
            fflush(stdout);
        }
        if (step + 1 > warmup && (step + 1) % (r.steps / 10) == 0) {
            printf("  step %7ld: RSS %.1f MiB", step + 1, rss);
            if (gpu >= 0) printf(", GPU %.1f MiB", gpu);
            printf(", %.3f ms/step\n", 1e3 * (now() - t_warm) / (double)(step + 1 - warmup));
            fflush(stdout);
        }
    }
    const double rss_end = rss_mib(), t_end = now();
    const double gpu_end = on_gpu ? gpu_used_mib() : -1.0;
    nnpops_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    CHECK_OK(nnpops_context_stats(ctx, &stats));
    const double growth = (rss_end - rss_warm) / rss_warm;
    printf("  atoms per step: %lld..%lld (mean %.0f); energies %.6f..%.6f eV\n",
           (long long)atoms_min, (long long)r.max_atoms, (double)atoms_sum / (double)r.steps, e_min,
           e_max);
    printf("  context: %lld steps, %lld neighbor-buffer growths, pair capacity %lld\n",
           (long long)stats.steps, (long long)stats.neighbor_rebuilds, (long long)stats.pair_capacity);
    if (on_gpu)
        printf("  graphs: %lld captures, %lld replays, %lld eager fallbacks\n",
               (long long)stats.graph_captures, (long long)stats.graph_replays,
               (long long)stats.eager_fallbacks);
    printf("  time: %.1f s in all, %.3f ms/step after warm-up\n", t_end - t0,
           1e3 * (t_end - t_warm) / (double)(r.steps - warmup));
    printf("  RSS: warm-up %.1f MiB, end %.1f MiB, peak %.1f MiB: growth %+.2f %% (limit +5 %%)\n",
           rss_warm, rss_end, rss_peak, 100.0 * growth);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    free(r.z);
    free(r.x0);
    free(r.x);
    free(r.f);
    int ok = growth <= 0.05;
    if (on_gpu) {
        /* the context's GPU buffers reach their final size in the warm-up (its first step is the
         * largest) and are reused: any growth after it is a leak */
        const int gpu_ok = gpu_warm >= 0 && gpu_end >= 0 && gpu_end <= gpu_warm;
        printf("  GPU memory in use: warm-up %.1f MiB, end %.1f MiB, peak %.1f MiB (limit: no growth)%s\n",
               gpu_warm, gpu_end, gpu_peak, gpu_warm < 0 ? " [not readable: build without CUDA]" : "");
        if (graphs) ok = ok && stats.graph_replays > 0;
        ok = ok && gpu_ok;
    }
    printf("soak %s: %s\n", r.kind, ok ? "PASS" : "FAIL (memory grew)");
    return ok ? 0 : 1;
}
