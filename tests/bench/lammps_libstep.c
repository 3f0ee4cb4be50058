/*
 * lammps_libstep.c - the library's own step time on the system of a LAMMPS data file: what one MD
 * step of pair_style nnpops asks of it (energy, forces, virial), without LAMMPS.  Beside LAMMPS's
 * time per step on the same system (tests/bench/lammps_gpu.py) it shows the cost of the LAMMPS
 * layer (ghost atoms, packing, integration, communication).
 *
 *   lammps_libstep DATA MODEL DEVICE PRECISION OPTIONS STEPS PERIODIC Z1 [Z2 ...]
 *
 * DATA: a data file of examples/lammps/make_water.py or make_molecule.py (atom_style atomic:
 * "N atoms", "xlo xhi" .. "zlo zhi", an orthogonal box, and an Atoms section of "id type x y z"
 * lines); Zk: the atomic number of atom type k; PERIODIC 1: the box is the periodic cell (the
 * library finds the images itself), 0: no cell (a molecule).  OPTIONS: context options as
 * NAME=VALUE[,NAME=VALUE...] (cuda_graphs=on, threads=8, ...), or - for none.  Positions do not
 * move: each timed step repeats the same computation (with the neighbour search), after 20
 * warm-up steps (graphs captured; 3 when STEPS < 20).  Prints one line:
 *   libstep: N atoms, STEPS steps, T ms/step, device D, energy E
 */
#define _POSIX_C_SOURCE 199309L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nnpops/nnpops.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, nnpops_status st) {
    fprintf(stderr, "lammps_libstep: %s: %s (%s)\n", what, nnpops_status_name(st),
            nnpops_last_error());
    return 1;
}

/* Reads atoms and the box of a data file; returns the atom count, or -1 with a message. */
static int64_t read_data(const char *path, int ntypes, const int32_t *type_z, int32_t **z_out,
                         double **x_out, double cell[9]) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "lammps_libstep: cannot open %s\n", path);
        return -1;
    }
    char line[512];
    int64_t n = -1, read = 0;
    int in_atoms = 0;
    int32_t *z = NULL;
    double *x = NULL;
    memset(cell, 0, 9 * sizeof(double));
    while (fgets(line, sizeof line, f)) {
        double lo, hi;
        long long count;
        char word[32];
        if (!in_atoms) {
            if (sscanf(line, "%lld %31s", &count, word) == 2 && !strcmp(word, "atoms")) {
                n = count;
                z = malloc((size_t)n * sizeof *z);
                x = malloc((size_t)n * 3 * sizeof *x);
                if (!z || !x) break;
            } else if (sscanf(line, "%lf %lf %31s", &lo, &hi, word) == 3 && word[1] == 'l' &&
                       word[0] >= 'x' && word[0] <= 'z') {
                cell[4 * (word[0] - 'x')] = hi - lo;
            } else if (!strncmp(line, "Atoms", 5)) {
                in_atoms = 1;
            }
            continue;
        }
        long long id;
        int type;
        double p[3];
        if (sscanf(line, "%lld %d %lf %lf %lf", &id, &type, &p[0], &p[1], &p[2]) != 5) {
            if (read > 0) break; /* the blank line after the section */
            continue;
        }
        if (n < 0 || read >= n || type < 1 || type > ntypes) {
            fprintf(stderr, "lammps_libstep: %s: atom %lld: type %d of %d types, or more atoms "
                    "than the header's %lld\n", path, id, type, ntypes, (long long)n);
            fclose(f);
            free(z);
            free(x);
            return -1;
        }
        z[read] = type_z[type - 1];
        memcpy(x + 3 * read, p, sizeof p);
        ++read;
    }
    fclose(f);
    if (n <= 0 || read != n) {
        fprintf(stderr, "lammps_libstep: %s: read %lld of %lld atoms\n", path, (long long)read,
                (long long)n);
        free(z);
        free(x);
        return -1;
    }
    *z_out = z;
    *x_out = x;
    return n;
}

int main(int argc, char **argv) {
    if (argc < 9) {
        fprintf(stderr, "usage: lammps_libstep DATA MODEL DEVICE PRECISION OPTIONS STEPS "
                        "PERIODIC Z1 [Z2 ...]\n");
        return 2;
    }
    const char *data = argv[1], *model_name = argv[2], *device = argv[3];
    const nnpops_precision precision = strcmp(argv[4], "float32") ? NNPOPS_FLOAT64 : NNPOPS_FLOAT32;
    char *options = argv[5];
    const int steps = atoi(argv[6]);
    const int periodic = atoi(argv[7]);
    const int ntypes = argc - 8;
    int32_t type_z[64];
    if (ntypes > 64 || steps < 1) {
        fprintf(stderr, "lammps_libstep: at most 64 atom types and at least 1 step\n");
        return 2;
    }
    for (int t = 0; t < ntypes; ++t) type_z[t] = atoi(argv[8 + t]);

    int32_t *z = NULL;
    double *x = NULL, cell[9];
    const int64_t n = read_data(data, ntypes, type_z, &z, &x, cell);
    if (n < 0) return 1;

    nnpops_model *model = NULL;
    nnpops_context *ctx = NULL;
    nnpops_status st = nnpops_model_load(model_name, device, precision, &model);
    if (st != NNPOPS_OK) return fail("model load", st);
    st = nnpops_context_create(model, &ctx);
    if (st != NNPOPS_OK) return fail("context", st);
    if (!strcmp(options, "-")) options[0] = '\0';
    for (char *item = strtok(options, ","); item; item = strtok(NULL, ",")) {
        char *eq = strchr(item, '=');
        if (!eq) {
            fprintf(stderr, "lammps_libstep: option '%s' is not NAME=VALUE\n", item);
            return 2;
        }
        *eq = '\0';
        st = nnpops_context_set_option_by_name(ctx, item, eq + 1);
        if (st != NNPOPS_OK) return fail(item, st);
    }

    double *forces = malloc((size_t)n * 3 * sizeof *forces);
    if (!forces) return 1;
    double energy = 0.0, virial[9];
    const uint8_t pbc[3] = {1, 1, 1};
    nnpops_inputs in;
    memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    in.n_atoms = n;
    in.n_local = n;
    in.n_systems = 1;
    in.atomic_numbers = z;
    in.positions = x;
    in.cells = periodic ? cell : NULL;
    in.pbc = periodic ? pbc : NULL;
    nnpops_outputs out;
    memset(&out, 0, sizeof out);
    out.struct_size = sizeof out;
    out.energies = &energy;
    out.forces = forces;
    out.virials = virial;

    const int warmup = steps < 20 ? 3 : 20;
    for (int k = 0; k < warmup; ++k) {
        st = nnpops_compute(ctx, &in, &out);
        if (st != NNPOPS_OK) return fail("compute", st);
    }
    const double t0 = now();
    for (int k = 0; k < steps; ++k) {
        st = nnpops_compute(ctx, &in, &out);
        if (st != NNPOPS_OK) return fail("compute", st);
    }
    const double ms = 1e3 * (now() - t0) / steps;
    printf("libstep: %lld atoms, %d steps, %.6g ms/step, device %s, energy %.10g\n", (long long)n,
           steps, ms, nnpops_model_device(model), energy);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(model);
    free(forces);
    free(z);
    free(x);
    return 0;
}
