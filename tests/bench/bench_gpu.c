/*
 * bench_gpu.c - GPU benchmark of nnpops (results: docs/performance.md).
 *
 * Part 1, ANI-2x (8 members) energy + forces, float32, device "cuda" (systems: alanine 13_f0, the
 * 98-atom molecule 98_f0, a batch of 1,000 copies of 13_f0 as 1,000 systems with 1,000 energies,
 * proteins and water boxes): per system the median wall
 * time of >= 20 nnpops_compute calls after 3 warm-up calls, host positions in and forces out (the
 * whole public call: validation, unit conversion, one H2D copy, the GPU step, one D2H copy, one
 * stream synchronization).  Device memory: cudaMemGetInfo after the steps minus before the model
 * was loaded (weights, the context's arena, the cuBLAS work space; the arena never shrinks, so
 * this is the peak).  Floor: the network FLOPs (GEMMs of the forward pass plus the input-gradient
 * GEMMs of the backward pass, 2 FLOPs per multiply-add; the first layers over the AEV entries of
 * the species present, stats.descriptor_length, since the others are zero) over FP32_RATE, or the
 * bytes that must move (weights of the species present, the AEV written once and read once in
 * float32, positions and forces) over HBM_RATE, whichever is larger.
 * Part 2, neighbor list alone: random uniform positions in a periodic cube at density 0.8, cutoff
 * cbrt(3 * 64 / (4 pi 0.8)) (64 neighbors per atom), full lists (the center lists hold both
 * directions: entries = full-list pairs), positions already on the device; mean of 50 launches of
 * the whole search (every kernel, scan and memset it enqueues), timed with CUDA events.  Written:
 * the center lists' pairs (int32) and vectors (float64); distances too (float64, "+dist" after
 * the algorithm) with NNPOPS_BENCH_NBR_DIST=1.  The algorithm column names the plan's choice
 * (small, brute, onepass, cell, cell-fast: kernels/cuda/neighbors.cu); NNPOPS_BENCH_NBR_ALG=<name> forces
 * one.
 *
 * Usage: bench_gpu [--quick] [--skip-million] [--no-neighbors] [--no-graphs] [--only NAME]
 *                  [--small] [--steps K] [--md FILE] [--tc-compare off|on] [--no-tc-compare]
 *                  [--nbr-only N [--nbr-open]] [--latency] [--tensornet [--f32]]
 * --only NAME: the system of that exact name, else every system whose name holds NAME.
 * --small: only the small rows (13 and 98 atoms, the 1,000 x 13 batch, 1hz5, water 10^3), no
 * neighbor-list part.  --latency: the small molecules' latency breakdown (bench_latency) only.
 * --nbr-only N [--nbr-open]: the neighbor list alone at one size (with
 * --nbr-open the same points without periodic axes, as a molecule is searched).
 * --tensornet: part 3 alone (TensorNet; see its comment), needs the model tn_bench made by
 * tests/bench/make_tensornet_bench.py in a directory of NNPOPS_MODEL_PATH; with it, --only NAME
 * keeps the systems whose names hold NAME and --f32 the float32 model alone.
 * (needs NNPOPS_MODEL_PATH with ani2x and NNPOPS_SHARED_DIR with reference/ and structures/)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "core/src/internal.h"
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani_ops.h"
#include "potentials/ani/ani.h"
#include "potentials/tensornet/tn_ops.h"
#include "reference.h"
#include "structures.h"

#define FP32_RATE 67.0e12 /* H200 SXM, FP32 (non-tensor) peak, FLOP/s */
#define HBM_RATE 4.8e12   /* H200 HBM3e, bytes/s */

static int g_no_graphs = 0;
static int g_no_tc_compare = 0; /* --no-tc-compare: skip the comparison column */
/* --tc-compare off|on: option tensor_cores of the comparison column (the main columns: auto) */
static int g_tc_compare = 0;
static const char *const g_tc_words[] = {"off", "on", "auto"};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t used_device_bytes(void) {
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    return tot - fr;
}

typedef struct bsys {
    const char *name;
    int64_t n;
    int32_t *z;
    double *x;
    int periodic;
    double cell[9];
    const char *peer;   /* torchani cuAEV + cell_list (benchmarks.md) */
    double target_ms;   /* 0 = none */
    int64_t ns;         /* systems (0 = 1) */
    int32_t *batch;     /* [n] system of each atom, or NULL */
} bsys;

/* Network FLOPs (forward + input gradients) and the minimal bytes of one step whose AEV has
 * aev_len entries (the first layers' inner dimension). */
static void step_cost(const nnpops_model *m, const bsys *s, int64_t aev_len, double *flops,
                      double *bytes) {
    const nnpops__ani *a = m->impl;
    int64_t count[NNPOPS__MAX_SPECIES] = {0};
    for (int64_t i = 0; i < s->n; i++) count[m->z_to_species[s->z[i]]]++;
    double f = 0, w = 0;
    for (int sp = 0; sp < a->n_species; sp++) {
        if (!count[sp]) continue;
        double fwd = 0, bwd = 0, params = 0;
        for (int l = 0; l < a->n_layers[sp]; l++) {
            const double in = l == 0 ? (double)aev_len : (double)a->width[sp][l];
            const double mac = in * a->width[sp][l + 1];
            fwd += 2 * mac;
            if (l + 1 < a->n_layers[sp]) bwd += 2 * mac;
            params += mac + a->width[sp][l + 1];
        }
        f += (double)count[sp] * a->ensemble * (fwd + bwd);
        w += 4.0 * a->ensemble * params;
    }
    *flops = f;
    *bytes = w + 2.0 * 4.0 * (double)aev_len * (double)s->n + 48.0 * (double)s->n;
}

/* Median of n times in seconds, in ms (sorts t). */
static double median_of(double *t, int n) {
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    return 1e3 * t[n / 2];
}

/* Median and best wall time of `steps` calls after 3 warm-up calls; -1 on an error. */
static double time_steps(nnpops_context *ctx, const nnpops_inputs *in, nnpops_outputs *out,
                         int steps, double *best) {
    for (int k = 0; k < 3; k++) {
        const nnpops_status st = nnpops_compute(ctx, in, out);
        if (st != NNPOPS_OK) {
            printf("  step: %s: %s\n", nnpops_status_name(st), nnpops_last_error());
            return -1;
        }
    }
    double *t = malloc(sizeof(double) * steps);
    for (int k = 0; k < steps; k++) {
        const double t0 = now();
        nnpops_compute(ctx, in, out);
        t[k] = now() - t0;
    }
    const double med = median_of(t, steps);
    *best = 1e3 * t[0];
    free(t);
    return med;
}

static void bench_system(const nnpops_model *m, const bsys *s, int steps, FILE *md) {
    size_t before = used_device_bytes();
    nnpops_context *ctx;
    if (nnpops_context_create(m, &ctx) != NNPOPS_OK) {
        printf("context: %s\n", nnpops_last_error());
        return;
    }
    const int64_t ns = s->ns > 0 ? s->ns : 1;
    double *e = calloc((size_t)ns, sizeof(double));
    double *f = malloc(sizeof(double) * 3 * s->n);
    const uint8_t pbc[3] = {1, 1, 1};
    nnpops_inputs in = {sizeof in, s->n, -1, ns, s->z, s->x, s->batch,
                        s->periodic ? s->cell : NULL, s->periodic ? pbc : NULL};
    nnpops_outputs out = {sizeof out, e, f, NULL, NULL, NULL, NULL};
    double best = 0, best_g = 0;
    const double med = time_steps(ctx, &in, &out, steps, &best);
    const size_t used = used_device_bytes();
    nnpops_stats st = {sizeof st};
    nnpops_context_stats(ctx, &st);
    nnpops_context_destroy(ctx);
    /* the same with the step captured into a CUDA graph (option cuda_graphs on) */
    double med_g = -1;
    nnpops_stats sg = {sizeof sg};
    if (!g_no_graphs && nnpops_context_create(m, &ctx) == NNPOPS_OK) {
        if (nnpops_context_set_option(ctx, NNPOPS_OPTION_CUDA_GRAPHS, 1) == NNPOPS_OK)
            med_g = time_steps(ctx, &in, &out, steps, &best_g);
        nnpops_context_stats(ctx, &sg);
        nnpops_context_destroy(ctx);
    }
    /* eager with option tensor_cores off (plain FP32 FMA GEMMs) or on, for the comparison */
    double med_p = -1, best_p = 0;
    if (!g_no_tc_compare && nnpops_context_create(m, &ctx) == NNPOPS_OK) {
        if (nnpops_context_set_option(ctx, NNPOPS_OPTION_TENSOR_CORES, g_tc_compare) == NNPOPS_OK)
            med_p = time_steps(ctx, &in, &out, steps, &best_p);
        nnpops_context_destroy(ctx);
    }
    if (med < 0) {
        free(f);
        free(e);
        return;
    }
    double flops, bytes;
    const nnpops__ani *ani = m->impl;
    step_cost(m, s, st.descriptor_length > 0 ? st.descriptor_length : ani->aev.aev_len, &flops,
              &bytes);
    const double floor_ms = 1e3 * fmax(flops / FP32_RATE, bytes / HBM_RATE);
    const double shown = med_g > 0 && med_g < med ? med_g : med;
    char target[40] = "-";
    if (s->target_ms > 0)
        snprintf(target, sizeof target, "%s %.2f", shown <= s->target_ms ? "met, <=" : "MISSED, >",
                 s->target_ms);
    char graphs[64] = "-";
    if (med_g > 0)
        snprintf(graphs, sizeof graphs, "%.3f (%lld replays)", med_g, (long long)sg.graph_replays);
    char plain[32] = "-";
    if (med_p > 0) snprintf(plain, sizeof plain, "%.3f", med_p);
    char line[640];
    snprintf(line, sizeof line,
             "| %s | %lld | %.3f | %s | %s | %.3f | %s | %s | %.1f | %.2f | %.3f | %.2f | %lld | "
             "%lld |",
             s->name, (long long)s->n, med, graphs, plain, best, target, s->peer,
             (double)(used - before) / 1e6, flops / 1e9, floor_ms, shown / floor_ms,
             (long long)st.n_pairs, (long long)st.descriptor_length);
    printf("%s\n", line);
    if (md) fprintf(md, "%s\n", line);
    fflush(stdout);
    free(f);
    free(e);
}

/* ---- latency of small steps (--latency) ------------------------------------------------------
 * Where a small step's wall time goes: the host entry with its own graph (the table's column), the
 * same step through the device entry captured into a graph of ours (no host preparation, no host
 * copies) replayed with a synchronization after each replay and back to back (the GPU's time per
 * step), and the floor of a host round trip: a graph of one memset node, and one with the host
 * entry's shape (H2D copy of 1 KB from pinned memory, memset, D2H copy of 1 KB), each replayed and
 * synchronized. */

/* Median ms of `steps` replays of exec, each followed by a synchronization of stream. */
static double replay_sync_ms(cudaGraphExec_t exec, cudaStream_t stream, int steps) {
    for (int k = 0; k < 3; k++) cudaGraphLaunch(exec, stream);
    cudaStreamSynchronize(stream);
    double *t = malloc(sizeof(double) * steps);
    for (int k = 0; k < steps; k++) {
        const double t0 = now();
        cudaGraphLaunch(exec, stream);
        cudaStreamSynchronize(stream);
        t[k] = now() - t0;
    }
    const double med = median_of(t, steps);
    free(t);
    return med;
}

/* Mean ms per replay of `reps` replays back to back (CUDA events around them). */
static double replay_pipelined_ms(cudaGraphExec_t exec, cudaStream_t stream, int reps) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0, stream);
    for (int k = 0; k < reps; k++) cudaGraphLaunch(exec, stream);
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms / reps;
}

/* The host round trip's floor: a captured graph of a memset (copies = 0) or of an H2D copy, a
 * memset and a D2H copy of 1 KB through pinned memory (copies = 1), replayed and synchronized. */
static double roundtrip_floor_ms(cudaStream_t stream, int copies, int steps) {
    void *d = NULL, *h = NULL;
    cudaMalloc(&d, 4096);
    cudaMallocHost(&h, 4096);
    double med = -1;
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        if (copies) cudaMemcpyAsync(d, h, 1024, cudaMemcpyHostToDevice, stream);
        cudaMemsetAsync((char *)d + 1024, 0, 1024, stream);
        if (copies) cudaMemcpyAsync((char *)h + 2048, (char *)d + 1024, 1024,
                                    cudaMemcpyDeviceToHost, stream);
        if (cudaStreamEndCapture(stream, &g) == cudaSuccess &&
            cudaGraphInstantiate(&exec, g, 0) == cudaSuccess)
            med = replay_sync_ms(exec, stream, steps);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    cudaFree(d);
    cudaFreeHost(h);
    return med;
}

static void bench_latency(const nnpops_model *m, const bsys *s, int steps, FILE *md) {
    const int64_t n = s->n;
    double *e = calloc(1, sizeof(double)), *f = malloc(sizeof(double) * 3 * n);
    nnpops_inputs in = {sizeof in, n, -1, 1, s->z, s->x, NULL, NULL, NULL};
    nnpops_outputs out = {sizeof out, e, f, NULL, NULL, NULL, NULL};
    double host_g = -1, best = 0, dev_sync = -1, dev_pipe = -1;
    nnpops_context *ctx;
    if (nnpops_context_create(m, &ctx) == NNPOPS_OK) {
        if (nnpops_context_set_option(ctx, NNPOPS_OPTION_CUDA_GRAPHS, 1) == NNPOPS_OK)
            host_g = time_steps(ctx, &in, &out, steps, &best);
        nnpops_context_destroy(ctx);
    }
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    void *dz, *dx, *de, *df;
    cudaMalloc(&dz, sizeof(int32_t) * n);
    cudaMalloc(&dx, sizeof(double) * 3 * n);
    cudaMalloc(&de, sizeof(double));
    cudaMalloc(&df, sizeof(double) * 3 * n);
    cudaMemcpy(dz, s->z, sizeof(int32_t) * n, cudaMemcpyHostToDevice);
    cudaMemcpy(dx, s->x, sizeof(double) * 3 * n, cudaMemcpyHostToDevice);
    nnpops_device_inputs din = {sizeof din, n, -1, 1, dz, dx, NULL, NULL, NULL};
    nnpops_device_outputs dout = {sizeof dout, de, df, NULL};
    if (nnpops_context_create(m, &ctx) == NNPOPS_OK) {
        cudaGraph_t g = NULL;
        cudaGraphExec_t exec = NULL;
        if (nnpops_compute_device(ctx, &din, &dout, stream) == NNPOPS_OK &&
            nnpops_context_device_status(ctx, stream) == NNPOPS_OK &&
            cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
            const nnpops_status st = nnpops_compute_device(ctx, &din, &dout, stream);
            if (cudaStreamEndCapture(stream, &g) == cudaSuccess && st == NNPOPS_OK &&
                cudaGraphInstantiate(&exec, g, 0) == cudaSuccess) {
                dev_sync = replay_sync_ms(exec, stream, steps);
                dev_pipe = replay_pipelined_ms(exec, stream, 10 * steps);
            }
        }
        if (nnpops_context_device_status(ctx, stream) != NNPOPS_OK) dev_sync = dev_pipe = -1;
        if (exec) cudaGraphExecDestroy(exec);
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        nnpops_context_destroy(ctx);
    }
    const double floor0 = roundtrip_floor_ms(stream, 0, steps);
    const double floor1 = roundtrip_floor_ms(stream, 1, steps);
    char line[320];
    snprintf(line, sizeof line, "| %s | %lld | %.4f | %.4f | %.4f | %.4f | %.4f |", s->name,
             (long long)n, host_g, dev_sync, dev_pipe, floor0, floor1);
    printf("%s\n", line);
    if (md) fprintf(md, "%s\n", line);
    fflush(stdout);
    cudaFree(dz);
    cudaFree(dx);
    cudaFree(de);
    cudaFree(df);
    cudaStreamDestroy(stream);
    free(e);
    free(f);
}

/* ---- neighbor list alone ------------------------------------------------------------------- */

static int g_nbr_open = 0; /* --nbr-open: the neighbor list alone without periodic axes */

static void bench_neighbors(int64_t n, FILE *md) {
    const double rho = 0.8, cutoff = cbrt(3.0 * 64 / (4 * 3.14159265358979323846 * rho));
    const double L = cbrt((double)n / rho);
    double *x = malloc(sizeof(double) * 3 * n);
    uint64_t seed = 12345 + (uint64_t)n;
    for (int64_t k = 0; k < 3 * n; k++) x[k] = L * test_splitmix(&seed);
    int32_t *order = malloc(sizeof(int32_t) * n);
    for (int64_t i = 0; i < n; i++) order[i] = (int32_t)i;
    int64_t ss[2] = {0, n};
    double cell[9] = {L, 0, 0, 0, L, 0, 0, 0, L};
    uint8_t pbc[3] = {1, 1, 1};
    if (g_nbr_open) pbc[0] = pbc[1] = pbc[2] = 0; /* the same points as an open cluster */
    nnpops__nbr_plan plan;
    /* NNPOPS_BENCH_NBR_ALG=brute|cell|small|cell-fast|onepass forces an algorithm (comparisons) */
    int32_t force = NNPOPS__NBR_AUTO;
    const char *fa = getenv("NNPOPS_BENCH_NBR_ALG");
    for (int32_t k = NNPOPS__NBR_BRUTE; fa && k <= NNPOPS__NBR_ONEPASS; k++)
        if (!strcmp(fa, nnpops__nbr_cuda_algorithm_name(k))) force = k;
    nnpops__nbr_cuda_plan(1, ss, cell, pbc, cutoff, force, &plan);
    const int64_t cap = 80 * n;
    void *dx, *dorder, *dss, *dcell, *dpbc, *dstart, *dpairs, *dvec, *ddist = NULL, *dst, *work;
    const char *want_dist = getenv("NNPOPS_BENCH_NBR_DIST");
    const int with_dist = want_dist && atoi(want_dist);
    const size_t wb = nnpops__nbr_cuda_work_bytes(n, 1, n, &plan);
    cudaMalloc(&dx, sizeof(double) * 3 * n);
    cudaMalloc(&dorder, sizeof(int32_t) * n);
    cudaMalloc(&dss, sizeof ss);
    cudaMalloc(&dcell, sizeof cell);
    cudaMalloc(&dpbc, 3);
    cudaMalloc(&dstart, sizeof(int64_t) * (n + 1));
    cudaMalloc(&dpairs, sizeof(int32_t) * 2 * cap);
    cudaMalloc(&dvec, sizeof(double) * 3 * cap);
    if (with_dist) cudaMalloc(&ddist, sizeof(double) * cap);
    cudaMalloc(&dst, sizeof(nnpops__dev_status));
    cudaMalloc(&work, wb);
    cudaMemcpy(dx, x, sizeof(double) * 3 * n, cudaMemcpyHostToDevice);
    cudaMemcpy(dorder, order, sizeof(int32_t) * n, cudaMemcpyHostToDevice);
    cudaMemcpy(dss, ss, sizeof ss, cudaMemcpyHostToDevice);
    cudaMemcpy(dcell, cell, sizeof cell, cudaMemcpyHostToDevice);
    cudaMemcpy(dpbc, pbc, 3, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize(); /* the copies ran on the legacy stream; the search runs on another */
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    nnpops__nbr_in in = {n, dx, 1, dss, dorder, dcell, dpbc, cutoff, n, 64};
    nnpops__center_out out = {cap, dstart, dpairs, NULL, dvec, ddist, dst};
    for (int k = 0; k < 5; k++) {
        cudaMemsetAsync(dst, 0, sizeof(nnpops__dev_status), stream);
        if (nnpops__center_neighbors_cuda(&in, n, 0.0, &plan, &out, work, wb, stream) != NNPOPS_OK) {
            printf("neighbors: %s\n", nnpops_last_error());
            return;
        }
    }
    cudaStreamSynchronize(stream);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int reps = 50;
    cudaEventRecord(e0, stream);
    for (int k = 0; k < reps; k++) {
        cudaMemsetAsync(dst, 0, sizeof(nnpops__dev_status), stream);
        nnpops__center_neighbors_cuda(&in, n, 0.0, &plan, &out, work, wb, stream);
    }
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0, ms_graph = -1;
    cudaEventElapsedTime(&ms, e0, e1);
    /* the same, captured once into a CUDA graph and replayed (as the peer's numbers are) */
    {
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
            cudaMemsetAsync(dst, 0, sizeof(nnpops__dev_status), stream);
            nnpops__center_neighbors_cuda(&in, n, 0.0, &plan, &out, work, wb, stream);
            if (cudaStreamEndCapture(stream, &graph) == cudaSuccess &&
                cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
                for (int k = 0; k < 3; k++) cudaGraphLaunch(exec, stream);
                cudaEventRecord(e0, stream);
                for (int k = 0; k < reps; k++) cudaGraphLaunch(exec, stream);
                cudaEventRecord(e1, stream);
                cudaEventSynchronize(e1);
                cudaEventElapsedTime(&ms_graph, e0, e1);
                ms_graph /= reps;
            }
        }
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError();
    }
    nnpops__dev_status st;
    cudaMemcpy(&st, dst, sizeof st, cudaMemcpyDeviceToHost);
    const cudaError_t err = cudaGetLastError();
    char line[256];
    snprintf(line, sizeof line, "| %lld%s | %s%s | %.4f | %.4f | %lld | %.1f | %s |", (long long)n,
             g_nbr_open ? " (open)" : "", nnpops__nbr_cuda_algorithm_name(plan.algorithm),
             with_dist ? " +dist" : "", ms / reps, ms_graph,
             (long long)st.n_entries, (double)st.n_entries / (double)n,
             err != cudaSuccess ? cudaGetErrorString(err) : (st.flags ? "FLAGS" : "ok"));
    printf("%s\n", line);
    if (md) fprintf(md, "%s\n", line);
    fflush(stdout);
    cudaFree(dx);
    cudaFree(dorder);
    cudaFree(dss);
    cudaFree(dcell);
    cudaFree(dpbc);
    cudaFree(dstart);
    cudaFree(dpairs);
    cudaFree(dvec);
    cudaFree(ddist);
    cudaFree(dst);
    cudaFree(work);
    cudaStreamDestroy(stream);
    free(x);
    free(order);
}

/* ---- Part 3: TensorNet (--tensornet) ---------------------------------------------------------
 * The model tn_bench (tests/bench/make_tensornet_bench.py: F 128, 2 layers, 32 RBF, cutoff 5 A,
 * random weights) in float32 and float64, energy + forces, host arrays in and out, the step
 * captured into a CUDA graph (option cuda_graphs) and eager: median ms per call of >= 20 calls
 * after 3 warm-up calls; device memory as in part 1.  Systems as the peer's
 * (../shared/peers/tensornet_peer.py): the 13- and 98-atom molecules, 1hz5 (973 atoms), a periodic
 * water box of 2,187 atoms and one of 98,304.  Floor: FP32 FLOPs of forward + input gradients
 * counting each pair once, per layer 4 (R F + 8 F^2) per pair (edge network) and 80 F^2 per atom
 * (the channel linears), plus 60 F^2 per atom of the embedding's gates, over FP32_RATE. */
static void bench_tn_system(const nnpops_model *m, const bsys *s, int steps, int F, int R, int L,
                            FILE *md) {
    size_t before = used_device_bytes();
    nnpops_context *ctx;
    if (nnpops_context_create(m, &ctx) != NNPOPS_OK) {
        printf("context: %s\n", nnpops_last_error());
        return;
    }
    double e = 0, *f = malloc(sizeof(double) * 3 * s->n);
    const uint8_t pbc[3] = {1, 1, 1};
    nnpops_inputs in = {sizeof in, s->n, -1, 1, s->z, s->x, NULL, s->periodic ? s->cell : NULL,
                        s->periodic ? pbc : NULL};
    nnpops_outputs out = {sizeof out, &e, f, NULL, NULL, NULL, NULL};
    double best = 0, best_g = 0, med_g = -1;
    nnpops_context_set_option(ctx, NNPOPS_OPTION_CUDA_GRAPHS, 1);
    med_g = time_steps(ctx, &in, &out, steps, &best_g);
    const size_t used = used_device_bytes();
    nnpops_stats st = {sizeof st};
    nnpops_context_stats(ctx, &st);
    nnpops_context_destroy(ctx);
    double med = -1;
    if (nnpops_context_create(m, &ctx) == NNPOPS_OK) {
        med = time_steps(ctx, &in, &out, steps, &best);
        nnpops_context_destroy(ctx);
    }
    const double pairs = (double)st.n_pairs, n = (double)s->n, FF = (double)F * F;
    const double flops = L * (pairs * 4.0 * (R * (double)F + 8.0 * FF) + n * 80.0 * FF) +
                         n * 60.0 * FF;
    const double floor_ms = 1e3 * flops / FP32_RATE;
    const double shown = med_g > 0 ? med_g : med;
    char target[40] = "-";
    if (s->target_ms > 0)
        snprintf(target, sizeof target, "%s %.2f", shown <= s->target_ms ? "met, <=" : "MISSED, >",
                 s->target_ms);
    char line[640];
    snprintf(line, sizeof line,
             "| %s | %s | %lld | %.3f | %.3f | %s | %s | %.1f | %.2f | %.3f | %lld |", s->name,
             nnpops_model_precision(m) == NNPOPS_FLOAT32 ? "float32" : "float64",
             (long long)s->n, med_g, med, target, s->peer, (double)(used - before) / 1e6,
             flops / 1e9, floor_ms, (long long)st.n_pairs);
    printf("%s\n", line);
    if (md) fprintf(md, "%s\n", line);
    fflush(stdout);
    free(f);
}

static int bench_tensornet(int quick, int steps_opt, const char *only, int f32_only, FILE *md) {
    const char *dir = getenv("NNPOPS_SHARED_DIR");
    /* NNPOPS_BENCH_TN_TILES="atoms,chunks,scale" forces the per-atom kernels' tiles (comparisons;
     * 0 leaves a number to the launch) */
    const char *tiles = getenv("NNPOPS_BENCH_TN_TILES");
    if (tiles && *tiles) {
        int ta = 0, tc = 0, ts = 0;
        if (sscanf(tiles, "%d,%d,%d", &ta, &tc, &ts) >= 1) nnpops__tn_atom_tiles_cuda(ta, tc, ts);
        printf("per-atom tiles forced: atoms %d, chunks %d, scale %d\n", ta, tc, ts);
    }
    bsys list[8];
    int ns = 0;
    static refset set;
    if (ref_load("ani2x", &set)) {
        const refsys *r = ref_find(&set, "13_f0"), *r98 = ref_find(&set, "98_f0");
        list[ns++] = (bsys){"molecule 13_f0", r->n, r->z, r->x, 0, {0}, "2.06 ms", 0.08, 0, NULL};
        list[ns++] = (bsys){"molecule 98_f0", r98->n, r98->z, r98->x, 0, {0}, "3.07 ms", 0.15, 0,
                            NULL};
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/structures/1hz5.pdb", dir ? dir : "../shared");
    {
        bsys b = {"protein 1hz5", 0, NULL, NULL, 0, {0}, "17.2 ms", 0.8, 0, NULL};
        b.n = read_pdb(path, &b.z, &b.x);
        if (b.n > 0) list[ns++] = b;
    }
    const int sides[2] = {9, 32};
    const char *peers[2] = {"32.6 ms", "-"};
    const double targets[2] = {1.6, 0};
    for (int k = 0; k < 2; k++) {
        if (quick && sides[k] > 9) continue;
        if (only && sides[k] > 9 && !strstr("water 32^3 (periodic)", only)) continue;
        bsys b = {NULL, 0, NULL, NULL, 1, {0}, peers[k], targets[k], 0, NULL};
        char *name = malloc(32);
        b.n = water_box(sides[k], 1000 + sides[k], &b.z, &b.x, b.cell);
        snprintf(name, 32, "water %d^3 (periodic)", sides[k]);
        b.name = name;
        list[ns++] = b;
    }
    const char *hdr = "| system | precision | atoms | median ms/step (cuda_graphs on) | median "
                      "ms/step (eager) | target (graphs) | torchmd-net best (peer) | device MB | "
                      "network GFLOP | floor ms | pairs |\n"
                      "|---|---|---|---|---|---|---|---|---|---|---|";
    printf("\n%s\n", hdr);
    if (md) fprintf(md, "\n%s\n", hdr);
    for (int prec = 0; prec < (f32_only ? 1 : 2); prec++) {
        const size_t base = used_device_bytes();
        nnpops_model *m;
        const nnpops_precision p = prec ? NNPOPS_FLOAT64 : NNPOPS_FLOAT32;
        if (nnpops_model_load("tn_bench", "cuda", p, &m) != NNPOPS_OK) {
            printf("model tn_bench: %s (make it with tests/bench/make_tensornet_bench.py into a "
                   "directory of NNPOPS_MODEL_PATH)\n",
                   nnpops_last_error());
            return 1;
        }
        printf("model tn_bench %s: %.1f MB of device memory after loading\n",
               prec ? "float64" : "float32", (used_device_bytes() - base) / 1e6);
        for (int k = 0; k < ns; k++) {
            if (only && !strstr(list[k].name, only)) continue;
            const int steps = steps_opt > 0 ? steps_opt : (list[k].n > 50000 ? 20 : 50);
            bench_tn_system(m, &list[k], steps, 128, 32, 2, md);
        }
        nnpops_model_destroy(m);
    }
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0, skip_million = 0, no_nbr = 0, steps_opt = 0, small = 0, latency = 0;
    int tensornet = 0, f32_only = 0;
    int64_t nbr_only = 0;
    const char *md_path = NULL, *only = NULL;
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--quick")) quick = 1;
        else if (!strcmp(argv[k], "--skip-million")) skip_million = 1;
        else if (!strcmp(argv[k], "--no-neighbors")) no_nbr = 1;
        else if (!strcmp(argv[k], "--no-graphs")) g_no_graphs = 1;
        else if (!strcmp(argv[k], "--no-tc-compare")) g_no_tc_compare = 1;
        else if (!strcmp(argv[k], "--tc-compare") && k + 1 < argc)
            g_tc_compare = !strcmp(argv[++k], "on");
        else if (!strcmp(argv[k], "--small")) small = no_nbr = 1;
        else if (!strcmp(argv[k], "--md") && k + 1 < argc) md_path = argv[++k];
        else if (!strcmp(argv[k], "--only") && k + 1 < argc) only = argv[++k];
        else if (!strcmp(argv[k], "--steps") && k + 1 < argc) steps_opt = atoi(argv[++k]);
        else if (!strcmp(argv[k], "--nbr-only") && k + 1 < argc) nbr_only = atoll(argv[++k]);
        else if (!strcmp(argv[k], "--nbr-open")) g_nbr_open = 1;
        else if (!strcmp(argv[k], "--latency")) latency = 1;
        else if (!strcmp(argv[k], "--tensornet")) tensornet = 1;
        else if (!strcmp(argv[k], "--f32")) f32_only = 1;
    }
    if (nnpops_cuda_device_count() == 0) {
        printf("no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    cudaFree(0);
    FILE *md = md_path ? fopen(md_path, "w") : NULL;
    printf("GPU: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
           prop.totalGlobalMem / 1073741824.0);
    if (md) fprintf(md, "GPU: %s, %d SMs\n\n", prop.name, prop.multiProcessorCount);

    if (tensornet) { /* part 3 alone */
        const int rc = bench_tensornet(quick, steps_opt, only, f32_only, md);
        if (md) fclose(md);
        return rc;
    }
    if (nbr_only > 0) { /* the neighbor search alone at one size (profiling) */
        bench_neighbors(nbr_only, md);
        if (md) fclose(md);
        return 0;
    }
    const size_t base = used_device_bytes();
    nnpops_model *m;
    if (nnpops_model_load("ani2x", "cuda", NNPOPS_FLOAT32, &m) != NNPOPS_OK) {
        printf("model: %s\n", nnpops_last_error());
        return 1;
    }
    printf("model ani2x float32 on %s: %.1f MB of device memory after loading\n",
           nnpops_model_device(m), (used_device_bytes() - base) / 1e6);

    bsys list[20];
    int ns = 0;
    const char *dir = getenv("NNPOPS_SHARED_DIR");
    static refset set;
    if (ref_load("ani2x", &set)) {
        const refsys *r = ref_find(&set, "13_f0"), *r98 = ref_find(&set, "98_f0");
        list[ns++] = (bsys){"alanine 13_f0", r->n, r->z, r->x, 0, {0}, "23.6 ms", 0.05, 0, NULL};
        list[ns++] = (bsys){"molecule 98_f0", r98->n, r98->z, r98->x, 0, {0}, "-", 0.08, 0, NULL};
        /* a batch of 1,000 copies of 13_f0 (1,000 systems, 1,000 energies), 20 A apart */
        const int copies = 1000;
        bsys b = {"batch 1,000 x alanine 13_f0", (int64_t)copies * r->n, NULL, NULL, 0, {0}, "-",
                  3.0, copies, NULL};
        b.z = malloc(sizeof(int32_t) * b.n);
        b.x = malloc(sizeof(double) * 3 * b.n);
        b.batch = malloc(sizeof(int32_t) * b.n);
        for (int c = 0; c < copies; c++)
            for (int i = 0; i < r->n; i++) {
                const int64_t k = (int64_t)c * r->n + i;
                b.z[k] = r->z[i];
                b.batch[k] = c;
                const double off[3] = {20.0 * (c % 10), 20.0 * ((c / 10) % 10), 20.0 * (c / 100)};
                for (int d = 0; d < 3; d++) b.x[3 * k + d] = r->x[3 * i + d] + off[d];
            }
        list[ns++] = b;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/structures/1hz5.pdb", dir ? dir : "../shared");
    {
        bsys b = {"protein 1hz5", 0, NULL, NULL, 0, {0}, "30.4 ms", 0.5, 0, NULL};
        b.n = read_pdb(path, &b.z, &b.x);
        if (b.n > 0) list[ns++] = b;
    }
    const int sides[] = {6, 8, 10, 14, 18, 24, 69};
    const char *peers[] = {"24.7 ms", "22.2 ms", "19.0 ms", "23.5 ms", "24.8 ms", "33.9 ms", "-"};
    const double targets[] = {0, 0, 1.0, 0, 0, 10.0, 250.0};
    for (int k = 0; k < 7; k++) {
        if (quick && sides[k] > 24) continue;
        if (skip_million && sides[k] == 69) continue;
        bsys b = {NULL, 0, NULL, NULL, 1, {0}, peers[k], targets[k], 0, NULL};
        char *name = malloc(32);
        b.n = water_box(sides[k], 1000 + sides[k], &b.z, &b.x, b.cell);
        snprintf(name, 32, "water %d^3", sides[k]);
        b.name = name;
        list[ns++] = b;
    }
    snprintf(path, sizeof path, "%s/structures/1C17.pdb", dir ? dir : "../shared");
    {
        bsys b = {"protein 1C17 (no cell)", 0, NULL, NULL, 0, {0}, "38.2 ms", 0, 0, NULL};
        b.n = read_pdb(path, &b.z, &b.x);
        if (b.n > 0) list[ns++] = b;
    }

    if (latency) { /* the small molecules' latency breakdown only */
        const char *h = "| system | atoms | host entry, own graph: median ms per call | device "
                        "entry in a caller's graph: median ms per replay + sync | the same, mean "
                        "ms per replay back to back | floor: memset graph + sync | floor: H2D + "
                        "memset + D2H graph + sync |\n|---|---|---|---|---|---|---|";
        printf("\n%s\n", h);
        if (md) fprintf(md, "%s\n", h);
        for (int k = 0; k < ns; k++)
            if (list[k].n < 1000 && list[k].ns == 0 && !list[k].periodic)
                bench_latency(m, &list[k], steps_opt > 0 ? steps_opt : 200, md);
        nnpops_model_destroy(m);
        if (md) fclose(md);
        return 0;
    }
    char hdr[640];
    snprintf(hdr, sizeof hdr,
             "| system | atoms | median ms/step (eager) | median ms/step (cuda_graphs on) | median "
             "ms/step (eager, tensor_cores %s) | best ms (eager) | target (vs the faster) | torchani "
             "cuAEV+cell_list (peer, device-resident) | device MB | network GFLOP | floor ms | "
             "faster / floor | pairs | AEV entries |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
             g_tc_words[g_tc_compare]);
    printf("\n%s\n", hdr);
    if (md) fprintf(md, "%s\n", hdr);
    /* --only NAME: the system of that exact name when there is one, else every name holding it */
    int exact = 0;
    for (int k = 0; only && k < ns; k++) exact |= !strcmp(list[k].name, only);
    for (int k = 0; k < ns; k++) {
        if (only && (exact ? strcmp(list[k].name, only) != 0 : !strstr(list[k].name, only)))
            continue;
        if (small && list[k].n > 13000) continue;
        if (small && list[k].periodic && list[k].n != 3000) continue;
        const int steps = steps_opt > 0 ? steps_opt : (list[k].n > 500000 ? 20 : (quick ? 20 : 50));
        bench_system(m, &list[k], steps, md);
    }
    if (no_nbr || only) {
        nnpops_model_destroy(m);
        if (md) fclose(md);
        return 0;
    }

    const char *hdr2 = "\n| N | algorithm | ms eager (mean of 50) | ms graph replay (mean of 50) | "
                       "entries (full list) | per atom | status |\n"
                       "|---|---|---|---|---|---|---|";
    printf("%s\n", hdr2);
    if (md) fprintf(md, "%s\n", hdr2);
    for (int64_t n = 256; n <= 131072; n *= 2) bench_neighbors(n, md);
    if (!quick) bench_neighbors(1000000, md);
    nnpops_model_destroy(m);
    if (md) fclose(md);
    return 0;
}
