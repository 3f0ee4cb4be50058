/*
 * bench_tensornet_cpu.c - a TensorNet model's energy + forces on the CPU: the time of one step on
 * one structure, in one precision, with one thread count.
 *
 *   bench_tensornet_cpu MODEL SYSTEM f32|f64 THREADS [MIN_STEPS]
 *   bench_tensornet_cpu --dump FILE          writes the structures as JSON (for the peer script)
 *
 * SYSTEM: mol13, mol98 (mol_13_f0 and mol_98_f0 of $NNPOPS_SHARED_DIR/reference/tensornet/
 * reference.json, default ../shared), protein1hz5 ($NNPOPS_SHARED_DIR/structures/1hz5.pdb, 973
 * atoms, no cell) or water2199 (733 rigid waters on the lattice of tests/common/water.h, 0.05 A
 * jitter, 9 x 9 x 10 sites of 3.104 A, the last of the 9 planes partly filled; periodic).
 * THREADS is the context's option threads (0 = all; printed as the processor count).  One
 * warm-up step, then steps until MIN_STEPS (default 5) and at least 2 s; prints the median,
 * minimum and mean wall time of a step.  The same structures
 * go to tests/bench/peer_tensornet_torchmdnet.py through --dump.
 */
#define _POSIX_C_SOURCE 199309L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "nnpops/nnpops.h"
#include "reference.h"
#include "tensornet_reference.h"
#include "water.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct bsys {
    const char *name;
    int64_t n;
    int32_t *z;
    double *x;
    double cell[9];
    int periodic;
} bsys;

static const char *shared_dir(void) {
    const char *d = getenv("NNPOPS_SHARED_DIR");
    return d ? d : "../shared";
}

static void from_reference(const char *ref_name, bsys *s) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    tn_sys t;
    tn_sys_load(root, ref_name, &t);
    s->n = t.n;
    s->z = t.z;
    s->x = t.x;
    s->periodic = 0;
    jfree(root);
}

/* ATOM/HETATM records: coordinates (columns 31-54) and the element (77-78). */
static void from_pdb(const char *file, bsys *s) {
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/structures/%s", shared_dir(), file);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    int64_t cap = 1024;
    s->n = 0;
    s->z = malloc(sizeof(int32_t) * (size_t)cap);
    s->x = malloc(sizeof(double) * 3 * (size_t)cap);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "ATOM  ", 6) && strncmp(line, "HETATM", 6)) continue;
        if (strlen(line) < 78) continue;
        if (s->n == cap) {
            cap *= 2;
            s->z = realloc(s->z, sizeof(int32_t) * (size_t)cap);
            s->x = realloc(s->x, sizeof(double) * 3 * (size_t)cap);
        }
        char num[9], el[3] = {0};
        for (int k = 0; k < 3; k++) {
            memcpy(num, line + 30 + 8 * k, 8);
            num[8] = '\0';
            s->x[3 * s->n + k] = atof(num);
        }
        int e = 0;
        for (int c = 76; c < 78; c++) {
            if (line[c] == ' ') continue;
            el[e] = (char)(e == 0 ? line[c] : line[c] | 0x20); /* "CL" -> "Cl" */
            e++;
        }
        s->z[s->n++] = ref_z(el);
    }
    fclose(f);
    s->periodic = 0;
}

static void water(int64_t nmol, bsys *s) {
    const int nx = 9, nz = 10;
    s->n = 3 * nmol;
    s->z = malloc(sizeof(int32_t) * (size_t)s->n);
    s->x = malloc(sizeof(double) * 3 * (size_t)s->n);
    test_water_box(nx, nx, nz, nmol, 20240601ULL, 0.05, s->z, s->x, s->cell);
    s->periodic = 1;
}

static const char *const NAMES[] = {"mol13", "mol98", "protein1hz5", "water2199"};

static void make(const char *name, bsys *s) {
    memset(s, 0, sizeof *s);
    s->name = name;
    if (!strcmp(name, "mol13")) from_reference("mol_13_f0", s);
    else if (!strcmp(name, "mol98")) from_reference("mol_98_f0", s);
    else if (!strcmp(name, "protein1hz5")) from_pdb("1hz5.pdb", s);
    else if (!strcmp(name, "water2199")) water(733, s);
    else {
        fprintf(stderr, "unknown system %s (mol13, mol98, protein1hz5, water2199)\n", name);
        exit(2);
    }
}

static int dump(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "{");
    for (int k = 0; k < 4; k++) {
        bsys s;
        make(NAMES[k], &s);
        fprintf(f, "%s\n \"%s\": {\"numbers\": [", k ? "," : "", s.name);
        for (int64_t i = 0; i < s.n; i++) fprintf(f, "%s%d", i ? ", " : "", (int)s.z[i]);
        fprintf(f, "],\n  \"positions_A\": [");
        for (int64_t i = 0; i < 3 * s.n; i++) fprintf(f, "%s%.17g", i ? ", " : "", s.x[i]);
        fprintf(f, "],\n  \"cell_A\": ");
        if (s.periodic) {
            fprintf(f, "[");
            for (int i = 0; i < 9; i++) fprintf(f, "%s%.17g", i ? ", " : "", s.cell[i]);
            fprintf(f, "]}");
        } else {
            fprintf(f, "null}");
        }
        free(s.z), free(s.x);
    }
    fprintf(f, "\n}\n");
    return fclose(f) ? 1 : 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump")) return dump(argv[2]);
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL SYSTEM f32|f64 THREADS [MIN_STEPS] | --dump FILE\n",
                argv[0]);
        return 2;
    }
    const char *model_name = argv[1];
    const int f32 = !strcmp(argv[3], "f32");
    const int threads = atoi(argv[4]);
    const int min_steps = argc > 5 ? atoi(argv[5]) : 5;
    bsys s;
    make(argv[2], &s);
    nnpops_model *m;
    nnpops_context *ctx;
    nnpops_status st = nnpops_model_load(model_name, "cpu", f32 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64,
                                         &m);
    if (st == NNPOPS_OK) st = nnpops_context_create(m, &ctx);
    if (st == NNPOPS_OK) st = nnpops_context_set_option(ctx, NNPOPS_OPTION_THREADS, threads);
    if (st != NNPOPS_OK) {
        fprintf(stderr, "cannot load %s: %s: %s\n", model_name, nnpops_status_name(st),
                nnpops_last_error());
        return 1;
    }
    uint8_t pbc[3] = {1, 1, 1};
    double e, *f = malloc(sizeof(double) * 3 * (size_t)s.n);
    nnpops_inputs in = {.struct_size = sizeof in, .n_atoms = s.n, .n_local = -1, .n_systems = 1,
                        .atomic_numbers = s.z, .positions = s.x,
                        .cells = s.periodic ? s.cell : NULL, .pbc = s.periodic ? pbc : NULL};
    nnpops_outputs out = {.struct_size = sizeof out, .energies = &e, .forces = f};
    CHECK_OK(nnpops_compute(ctx, &in, &out)); /* warm-up: buffers grow here */
    int cap = 1024, steps = 0;
    double *t = malloc(sizeof(double) * (size_t)cap), t0 = now();
    while ((steps < min_steps || now() - t0 < 2.0) && steps < cap) {
        const double a = now();
        CHECK_OK(nnpops_compute(ctx, &in, &out));
        t[steps++] = now() - a;
    }
    double mean = 0;
    for (int k = 0; k < steps; k++) mean += t[k] / steps;
    qsort(t, (size_t)steps, sizeof *t, cmp_double);
    nnpops_stats stats = {.struct_size = sizeof stats};
    nnpops_context_stats(ctx, &stats);
    const int shown = threads ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    printf("nnpops %s %s atoms %lld %s threads %d (ran on %lld): median %.3f ms, min %.3f ms, "
           "mean %.3f ms over %d steps; energy %.10f eV\n",
           model_name, s.name, (long long)s.n, f32 ? "float32" : "float64", shown,
           (long long)stats.cpu_threads, 1e3 * t[steps / 2], 1e3 * t[0], 1e3 * mean, steps, e);
    free(t), free(f), free(s.z), free(s.x);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return 0;
}
