/*
 * bits.c - prints what the library computes, in hexadecimal floats (%a), so that two builds can be
 * compared bit for bit: energies, virials, forces, atomic energies and atomic virials of every
 * ANI reference system ($NNPOPS_SHARED_DIR/reference/{ani2x,ani1x}-torchani.json; the molecules
 * also with their second half as ghosts), ANI-2x and ANI-1x in float32 and float64, and a
 * two-species Lennard-Jones cluster (with ghosts) and periodic box, on the CPU.  Outside the
 * library build: compile it against one build's header, then run it with each library and
 * compare the outputs (`cmp`); a program built against an older header also checks that the
 * newer library reads that header's structs.
 *
 *   cc -O2 -std=c11 -D_DEFAULT_SOURCE -Icore/include -Ibuild/include -Itests/common dev/bits.c \
 *      -Lbuild -lnnpops -lm -o bits
 *   NNPOPS_MODEL_PATH=... NNPOPS_SHARED_DIR=... LD_LIBRARY_PATH=build ./bits > after.txt
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "reference.h"
#include "nnpops/nnpops.h"

static void run(nnpops_context *ctx, const char *tag, int n, const int32_t *z, const double *x,
                const double *cell, const uint8_t *pbc, int64_t n_local) {
    double e, vir[9];
    double *f = calloc(3 * (size_t)n + 3, sizeof *f), *a = calloc((size_t)n + 1, sizeof *a);
    double *av = calloc(9 * (size_t)n + 9, sizeof *av);
    nnpops_inputs in = {sizeof in, n, n_local, 1, z, x, NULL, cell, pbc};
    nnpops_outputs out = {sizeof out, &e, f, vir, a, av, NULL};
    nnpops_status s = nnpops_compute(ctx, &in, &out);
    printf("%s status %d\n", tag, (int)s);
    if (s == NNPOPS_OK) {
        printf("%s E %a\n", tag, e);
        printf("%s W", tag);
        for (int k = 0; k < 9; k++) printf(" %a", vir[k]);
        printf("\n");
        for (int i = 0; i < n; i++) {
            printf("%s %d F %a %a %a A %a", tag, i, f[3 * i], f[3 * i + 1], f[3 * i + 2], a[i]);
            for (int k = 0; k < 9; k++) printf(" %a", av[9 * i + k]);
            printf("\n");
        }
    }
    free(f); free(a); free(av);
}

int main(void) {
    const char *models[2] = {"ani2x", "ani1x"};
    for (int m = 0; m < 2; m++) {
        refset set;
        if (!ref_load(models[m], &set)) { printf("missing %s\n", models[m]); return 1; }
        for (int p = 0; p < 2; p++) {
            nnpops_model *mod; nnpops_context *ctx;
            const nnpops_precision prec = p ? NNPOPS_FLOAT64 : NNPOPS_FLOAT32;
            CHECK_OK(nnpops_model_load(models[m], "cpu", prec, &mod));
            CHECK_OK(nnpops_context_create(mod, &ctx));
            for (int k = 0; k < set.n; k++) {
                const refsys *r = &set.sys[k];
                char tag[200];
                snprintf(tag, sizeof tag, "%s.%s.%s", models[m], p ? "f64" : "f32", r->name);
                run(ctx, tag, r->n, r->z, r->x, r->periodic ? r->cell : NULL,
                    r->periodic ? r->pbc : NULL, -1);
                if (!r->periodic && r->n > 3) {
                    snprintf(tag, sizeof tag, "%s.%s.%s.ghosts", models[m], p ? "f64" : "f32",
                             r->name);
                    run(ctx, tag, r->n, r->z, r->x, NULL, NULL, r->n / 2);
                }
            }
            nnpops_context_destroy(ctx);
            nnpops_model_destroy(mod);
        }
    }
    /* LJ: a two-species cluster, its ghosts, a periodic box */
    char path[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/nnpops-bits-arkr.yaml", tmp && *tmp ? tmp : "/tmp");
    FILE *fp = fopen(path, "w");
    fprintf(fp, "format: nnpops-model\nformat_version: 1\nname: arkr\ntype: lj\n"
                "units: {length: angstrom, energy: eV}\nspecies: [Ar, Kr]\n"
                "lj:\n  shift: true\n  pairs:\n"
                "    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: 3.40, cutoff: 7.0}\n"
                "    - {elements: [Kr, Ar], epsilon: 0.0125, sigma: 3.50, cutoff: 8.0}\n"
                "    - {elements: [Kr, Kr], epsilon: 0.0141, sigma: 3.65, cutoff: 6.5}\n");
    fclose(fp);
    enum { N = 60 };
    int32_t z[N]; double x[3 * N];
    unsigned long long st = 12345;
    for (int i = 0; i < N; i++) {
        z[i] = (i % 3) ? 18 : 36;
        for (int d = 0; d < 3; d++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            x[3 * i + d] = (double)(st >> 11) / 9007199254740992.0 * 14.0;
        }
    }
    const double cell[9] = {12, 0, 0, 1.5, 11, 0, -0.5, 0.7, 13};
    const uint8_t pbc[3] = {1, 1, 1};
    for (int p = 0; p < 2; p++) {
        nnpops_model *mod; nnpops_context *ctx;
        CHECK_OK(nnpops_model_load(path, "cpu", p ? NNPOPS_FLOAT64 : NNPOPS_FLOAT32, &mod));
        CHECK_OK(nnpops_context_create(mod, &ctx));
        char tag[64];
        snprintf(tag, sizeof tag, "lj.%s.cluster", p ? "f64" : "f32");
        run(ctx, tag, N, z, x, NULL, NULL, -1);
        snprintf(tag, sizeof tag, "lj.%s.ghosts", p ? "f64" : "f32");
        run(ctx, tag, N, z, x, NULL, NULL, 25);
        snprintf(tag, sizeof tag, "lj.%s.periodic", p ? "f64" : "f32");
        run(ctx, tag, 40, z, x, cell, pbc, -1);
        nnpops_context_destroy(ctx);
        nnpops_model_destroy(mod);
    }
    return 0;
}
