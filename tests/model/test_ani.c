/*
 * test_ani.c - model tests of the ANI potential through the public API (one CTest entry per case):
 *
 *   reference MODEL PREC   every system of $NNPOPS_SHARED_DIR/reference/MODEL-torchani.json
 *                          (torchani float64): energy, forces, atomic energies, stress; PREC f64
 *                          (tight) or f32 (loose, and the float32 energy must differ from the
 *                          float64 one, proving the float32 path ran)
 *   fd_forces              central finite differences of the energy (ANI-1x, float64) against the
 *                          forces: a molecule and a small periodic box
 *   fd_stress              finite differences over strained cells against the virial
 *   invariance             translation, rotation, permutation
 *   batch                  three systems in one call equal the same systems one by one
 *   triclinic              an orthorhombic box and an equivalent triclinic description
 *   ghosts                 n_local < n_atoms, zero atoms, zero local atoms
 *   member                 ensemble_member k against member_energies, and their mean
 *   species_set            the AEV restricted to the species present: alanine (H, C, N, O; 384
 *                          AEV entries) against the same atoms with a far-away ghost of each of
 *                          ANI-2x's seven species (the full AEV, 1008 entries: no ghost is within
 *                          the cutoff, so the energies are the same to rounding), float64 and
 *                          float32; one context moving between species sets (H, C, N, O; H, O;
 *                          back) gives the bits of fresh contexts
 *   unknown_element        an element the model does not describe
 *
 * Structures come from the reference files (tests/common/reference.h reads them), so that the
 * tests run on real molecules; a missing reference file fails under CI=true and skips otherwise.
 * Models are loaded by name ("ani2x", "ani1x") from NNPOPS_MODEL_PATH (fixture model.convert).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reference.h"
#include "nnpops/nnpops.h"

#define MAX_ATOMS 4096 /* the largest system a result holds */

/* ---- evaluating -------------------------------------------------------------------------------- */

typedef struct result {
    double energy;
    double forces[3 * MAX_ATOMS];
    double virial[9];
    double atomic[MAX_ATOMS];
} result;

static void compute_one(nnpops_context *ctx, int n, const int32_t *z, const double *x,
                        const double *cell, const uint8_t *pbc, int64_t n_local, result *r) {
    CHECK(n <= MAX_ATOMS);
    nnpops_inputs in = {sizeof in, n, n_local, 1, z, x, NULL, cell, pbc};
    nnpops_outputs out = {sizeof out, &r->energy, r->forces, r->virial, r->atomic, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
}

static double energy_only(nnpops_context *ctx, int n, const int32_t *z, const double *x,
                          const double *cell, const uint8_t *pbc) {
    double e;
    nnpops_inputs in = {sizeof in, n, -1, 1, z, x, NULL, cell, pbc};
    nnpops_outputs out = {sizeof out, &e, NULL, NULL, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    return e;
}

static void load_model(const char *name, nnpops_precision prec, nnpops_model **m,
                       nnpops_context **ctx) {
    CHECK_OK(nnpops_model_load(name, "cpu", prec, m));
    CHECK_OK(nnpops_context_create(*m, ctx));
}

static int missing(const refset *set) { return test_missing_data(set->path); }

/* ---- reference --------------------------------------------------------------------------------- */

static int case_reference(const char *model, const char *prec_name) {
    refset set;
    if (!ref_load(model, &set)) return missing(&set);
    const int f32 = !strcmp(prec_name, "f32");
    CHECK(f32 || !strcmp(prec_name, "f64"));
    const ref_tol tol = ref_tolerances(f32);

    nnpops_model *m, *m64 = NULL;
    nnpops_context *ctx, *ctx64 = NULL;
    load_model(model, f32 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64, &m, &ctx);
    if (f32) load_model(model, NNPOPS_FLOAT64, &m64, &ctx64);
    result *r = malloc(sizeof *r);
    CHECK(r != NULL);
    int failures = 0;
    ref_diff worst = {0};
    printf("%s %s against torchani float64 (%s)\n", model, prec_name, set.path);
    ref_print_header();
    for (int k = 0; k < set.n; k++) {
        const refsys *s = &set.sys[k];
        compute_one(ctx, s->n, s->z, s->x, s->periodic ? s->cell : NULL,
                    s->periodic ? s->pbc : NULL, -1, r);
        const ref_diff d = ref_compare(s, &tol, r->energy, r->forces, r->atomic, r->virial);
        ref_print_row(s, &d, &worst);
        if (!d.ok) failures++;
        if (f32) {
            const double e64 = energy_only(ctx64, s->n, s->z, s->x, s->periodic ? s->cell : NULL,
                                           s->periodic ? s->pbc : NULL);
            if (e64 == r->energy) {
                printf("  float32 energy equals the float64 energy bit for bit: float32 path did "
                       "not run\n");
                failures++;
            }
        }
    }
    ref_print_worst(set.n, &worst, &tol);
    free(r);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    nnpops_context_destroy(ctx64);
    nnpops_model_destroy(m64);
    ref_free(&set);
    return failures ? 1 : 0;
}

/* ---- finite differences ----------------------------------------------------------------------- */

static double fd_forces_on(nnpops_context *ctx, const refsys *s) {
    const double h = 1e-4;
    result *r = malloc(sizeof *r);
    CHECK(r != NULL);
    const double *cell = s->periodic ? s->cell : NULL;
    const uint8_t *pbc = s->periodic ? s->pbc : NULL;
    compute_one(ctx, s->n, s->z, s->x, cell, pbc, -1, r);
    double *x = malloc(sizeof(double) * 3 * (size_t)s->n);
    CHECK(x != NULL);
    memcpy(x, s->x, sizeof(double) * 3 * (size_t)s->n);
    double worst = 0, fmax_ = 0;
    for (int i = 0; i < 3 * s->n; i++) {
        x[i] = s->x[i] + h;
        const double ep = energy_only(ctx, s->n, s->z, x, cell, pbc);
        x[i] = s->x[i] - h;
        const double em = energy_only(ctx, s->n, s->z, x, cell, pbc);
        x[i] = s->x[i];
        const double fd = -(ep - em) / (2 * h);
        const double err = fabs(fd - r->forces[i]) / fmax(1.0, fabs(r->forces[i]));
        worst = fmax(worst, err);
        fmax_ = fmax(fmax_, fabs(r->forces[i]));
    }
    printf("%-18s %3d atoms: max |F| %.3f eV/A, worst |F_fd - F| / max(1, |F|) = %.3e\n",
           s->name, s->n, fmax_, worst);
    free(x);
    free(r);
    return worst;
}

static int case_fd_forces(void) {
    refset set;
    if (!ref_load("ani1x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani1x", NNPOPS_FLOAT64, &m, &ctx);
    const double w1 = fd_forces_on(ctx, ref_find(&set, "28_f0"));
    const double w2 = fd_forces_on(ctx, ref_find(&set, "water8_pbc"));
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    CHECK(w1 < 1e-5);
    CHECK(w2 < 1e-5);
    ref_free(&set);
    return 0;
}

/* x' = (I + eps) x for positions and cell rows. */
static void strain(const double *e, int n, const double *x, double *out) {
    for (int i = 0; i < n; i++)
        for (int a = 0; a < 3; a++)
            out[3 * i + a] = x[3 * i + a] + e[3 * a + 0] * x[3 * i + 0] +
                             e[3 * a + 1] * x[3 * i + 1] + e[3 * a + 2] * x[3 * i + 2];
}

static int case_fd_stress(void) {
    refset set;
    if (!ref_load("ani1x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani1x", NNPOPS_FLOAT64, &m, &ctx);
    const char *names[2] = {"water8_pbc", "water16_triclinic"};
    result *r = malloc(sizeof *r);
    double *x = malloc(sizeof(double) * 3 * MAX_ATOMS);
    CHECK(r && x);
    double worst = 0;
    for (int t = 0; t < 2; t++) {
        const refsys *s = ref_find(&set, names[t]);
        compute_one(ctx, s->n, s->z, s->x, s->cell, s->pbc, -1, r);
        const double h = 1e-5;
        double wmax = 0;
        for (int k = 0; k < 9; k++) wmax = fmax(wmax, fabs(r->virial[k]));
        for (int a = 0; a < 3; a++) {
            for (int b = 0; b < 3; b++) {
                double e[9] = {0}, cell[9], ep, em;
                e[3 * a + b] = h;
                strain(e, s->n, s->x, x);
                strain(e, 3, s->cell, cell);
                ep = energy_only(ctx, s->n, s->z, x, cell, s->pbc);
                e[3 * a + b] = -h;
                strain(e, s->n, s->x, x);
                strain(e, 3, s->cell, cell);
                em = energy_only(ctx, s->n, s->z, x, cell, s->pbc);
                /* dE/deps_ab = -W_ba */
                const double fd = (ep - em) / (2 * h);
                const double err = fabs(fd + r->virial[3 * b + a]) / fmax(1.0, wmax);
                worst = fmax(worst, err);
            }
        }
        printf("%-18s: max |W| %.4f eV, worst |dE/deps + W^T| / max(1, max|W|) = %.3e\n",
               s->name, wmax, worst);
    }
    free(r);
    free(x);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    CHECK(worst < 1e-5);
    ref_free(&set);
    return 0;
}

/* ---- invariance --------------------------------------------------------------------------------- */

static int case_invariance(void) {
    refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani2x", NNPOPS_FLOAT64, &m, &ctx);
    const refsys *s = ref_find(&set, "28_f0");
    const int n = s->n;
    result *r0 = malloc(sizeof *r0), *r1 = malloc(sizeof *r1);
    double *x = malloc(sizeof(double) * 3 * (size_t)n);
    int32_t *z = malloc(sizeof(int32_t) * (size_t)n);
    int *perm = malloc(sizeof(int) * (size_t)n);
    CHECK(r0 && r1 && x && z && perm);
    compute_one(ctx, n, s->z, s->x, NULL, NULL, -1, r0);
    double fscale = 0;
    for (int i = 0; i < 3 * n; i++) fscale = fmax(fscale, fabs(r0->forces[i]));
    const double ftol = 1e-9 * fmax(1.0, fscale);

    /* translation */
    for (int i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) x[3 * i + a] = s->x[3 * i + a] + (a + 1) * 13.37;
    compute_one(ctx, n, s->z, x, NULL, NULL, -1, r1);
    CHECK_NEAR(r1->energy, r0->energy, 0, 1e-10);
    for (int i = 0; i < 3 * n; i++) CHECK_NEAR(r1->forces[i], r0->forces[i], ftol, 0);

    /* rotation: a proper rotation built from an axis and an angle */
    const double ax[3] = {0.48, -0.6, 0.64}, ang = 1.234; /* unit axis */
    const double c = cos(ang), sn = sin(ang), t = 1 - c;
    const double R[9] = {t * ax[0] * ax[0] + c,         t * ax[0] * ax[1] - sn * ax[2],
                         t * ax[0] * ax[2] + sn * ax[1], t * ax[0] * ax[1] + sn * ax[2],
                         t * ax[1] * ax[1] + c,         t * ax[1] * ax[2] - sn * ax[0],
                         t * ax[0] * ax[2] - sn * ax[1], t * ax[1] * ax[2] + sn * ax[0],
                         t * ax[2] * ax[2] + c};
    for (int i = 0; i < n; i++)
        for (int a = 0; a < 3; a++)
            x[3 * i + a] = R[3 * a] * s->x[3 * i] + R[3 * a + 1] * s->x[3 * i + 1] +
                           R[3 * a + 2] * s->x[3 * i + 2];
    compute_one(ctx, n, s->z, x, NULL, NULL, -1, r1);
    CHECK_NEAR(r1->energy, r0->energy, 0, 1e-10);
    for (int i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            const double f = R[3 * a] * r0->forces[3 * i] + R[3 * a + 1] * r0->forces[3 * i + 1] +
                             R[3 * a + 2] * r0->forces[3 * i + 2];
            CHECK_NEAR(r1->forces[3 * i + a], f, ftol, 0);
        }

    /* permutation: a fixed shuffle */
    unsigned long long seed = 12345;
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        const int j = (int)(test_rand(&seed) * (i + 1));
        const int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int i = 0; i < n; i++) {
        z[i] = s->z[perm[i]];
        for (int a = 0; a < 3; a++) x[3 * i + a] = s->x[3 * perm[i] + a];
    }
    compute_one(ctx, n, z, x, NULL, NULL, -1, r1);
    CHECK_NEAR(r1->energy, r0->energy, 0, 1e-10);
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++)
            CHECK_NEAR(r1->forces[3 * i + a], r0->forces[3 * perm[i] + a], ftol, 0);
        CHECK_NEAR(r1->atomic[i], r0->atomic[perm[i]], 1e-10, 0);
    }
    printf("translation, rotation and permutation of %s (%d atoms): energy to 1e-10 relative, "
           "forces to %.1e eV/A\n",
           s->name, n, ftol);
    free(r0);
    free(r1);
    free(x);
    free(z);
    free(perm);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    ref_free(&set);
    return 0;
}

/* ---- batch --------------------------------------------------------------------------------------- */

static int case_batch(void) {
    refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani2x", NNPOPS_FLOAT64, &m, &ctx);
    const refsys *sys[3] = {ref_find(&set, "13_f0"), ref_find(&set, "water8_pbc"),
                               ref_find(&set, "mol_CH3Cl")};
    int total = 0;
    for (int k = 0; k < 3; k++) total += sys[k]->n;
    int32_t *z = malloc(sizeof(int32_t) * (size_t)total), *batch = malloc(sizeof(int32_t) * (size_t)total);
    double *x = malloc(sizeof(double) * 3 * (size_t)total), *f = malloc(sizeof(double) * 3 * (size_t)total);
    CHECK(z && batch && x && f);
    double cells[27] = {0}, energies[3], virials[27];
    uint8_t pbc[9] = {0};
    for (int k = 0, o = 0; k < 3; k++) {
        for (int i = 0; i < sys[k]->n; i++, o++) {
            z[o] = sys[k]->z[i];
            batch[o] = k;
            for (int a = 0; a < 3; a++) x[3 * o + a] = sys[k]->x[3 * i + a];
        }
        if (sys[k]->periodic) {
            memcpy(cells + 9 * k, sys[k]->cell, sizeof(double) * 9);
            memcpy(pbc + 3 * k, sys[k]->pbc, 3);
        }
    }
    nnpops_inputs in = {sizeof in, total, -1, 3, z, x, batch, cells, pbc};
    nnpops_outputs out = {sizeof out, energies, f, virials, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    result *r = malloc(sizeof *r);
    CHECK(r != NULL);
    for (int k = 0, o = 0; k < 3; k++) {
        const refsys *s = sys[k];
        compute_one(ctx, s->n, s->z, s->x, s->periodic ? s->cell : NULL,
                    s->periodic ? s->pbc : NULL, -1, r);
        CHECK_NEAR(energies[k], r->energy, 0, 1e-12);
        double fs = 0, ws = 0;
        for (int i = 0; i < 3 * s->n; i++) fs = fmax(fs, fabs(r->forces[i]));
        for (int i = 0; i < 9; i++) ws = fmax(ws, fabs(r->virial[i]));
        for (int i = 0; i < 3 * s->n; i++) CHECK_NEAR(f[3 * o + i], r->forces[i], 1e-12 * fs, 0);
        for (int i = 0; i < 9; i++) CHECK_NEAR(virials[9 * k + i], r->virial[i], 1e-12 * ws, 0);
        o += s->n;
        printf("system %d (%s, %d atoms): batched energy %.12f eV equals the single call\n", k,
               s->name, s->n, energies[k]);
    }
    free(r);
    free(z);
    free(batch);
    free(x);
    free(f);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    ref_free(&set);
    return 0;
}

/* ---- triclinic description of an orthorhombic box -------------------------------------------- */

static int case_triclinic(void) {
    refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani2x", NNPOPS_FLOAT64, &m, &ctx);
    const refsys *s = ref_find(&set, "water8_pbc");
    result *r0 = malloc(sizeof *r0), *r1 = malloc(sizeof *r1);
    CHECK(r0 && r1);
    compute_one(ctx, s->n, s->z, s->x, s->cell, s->pbc, -1, r0);
    double cell[9];
    const double *a = s->cell, *b = s->cell + 3, *c = s->cell + 6;
    for (int k = 0; k < 3; k++) {
        cell[k] = a[k];
        cell[3 + k] = b[k] + a[k];
        cell[6 + k] = c[k] + a[k] + b[k];
    }
    compute_one(ctx, s->n, s->z, s->x, cell, s->pbc, -1, r1);
    printf("%s: orthorhombic %.12f eV, triclinic (b+a, c+a+b) %.12f eV\n", s->name, r0->energy,
           r1->energy);
    CHECK_NEAR(r1->energy, r0->energy, 0, 1e-11);
    for (int i = 0; i < 3 * s->n; i++) CHECK_NEAR(r1->forces[i], r0->forces[i], 1e-9, 0);
    for (int i = 0; i < 9; i++) CHECK_NEAR(r1->virial[i], r0->virial[i], 1e-9, 0);
    free(r0);
    free(r1);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    ref_free(&set);
    return 0;
}

/* ---- ghosts ------------------------------------------------------------------------------------- */

static int case_ghosts(void) {
    refset set;
    if (!ref_load("ani1x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani1x", NNPOPS_FLOAT64, &m, &ctx);
    const refsys *s = ref_find(&set, "28_f0");
    const int n = s->n, n_local = 17;
    result *full = malloc(sizeof *full), *part = malloc(sizeof *part);
    double *x = malloc(sizeof(double) * 3 * (size_t)n);
    CHECK(full && part && x);
    compute_one(ctx, n, s->z, s->x, NULL, NULL, -1, full);
    compute_one(ctx, n, s->z, s->x, NULL, NULL, n_local, part);
    double sum = 0;
    for (int i = 0; i < n_local; i++) sum += full->atomic[i];
    printf("%s with %d local atoms of %d: energy %.10f eV, sum of the local atomic energies "
           "%.10f eV\n",
           s->name, n_local, n, part->energy, sum);
    CHECK_NEAR(part->energy, sum, 0, 1e-12);
    for (int i = 0; i < n_local; i++) CHECK_NEAR(part->atomic[i], full->atomic[i], 1e-9, 0);
    for (int i = n_local; i < n; i++) CHECK(part->atomic[i] == 0.0);
    /* forces are -d(local energy)/dx for every atom, ghosts included: finite differences of the
     * energy with n_local fixed */
    const double h = 1e-4;
    double worst = 0;
    memcpy(x, s->x, sizeof(double) * 3 * (size_t)n);
    result *tmp = malloc(sizeof *tmp);
    CHECK(tmp != NULL);
    for (int i = 0; i < 3 * n; i++) {
        x[i] = s->x[i] + h;
        compute_one(ctx, n, s->z, x, NULL, NULL, n_local, tmp);
        const double ep = tmp->energy;
        x[i] = s->x[i] - h;
        compute_one(ctx, n, s->z, x, NULL, NULL, n_local, tmp);
        const double em = tmp->energy;
        x[i] = s->x[i];
        worst = fmax(worst, fabs(-(ep - em) / (2 * h) - part->forces[i]) /
                                fmax(1.0, fabs(part->forces[i])));
    }
    printf("ghost forces against finite differences: worst relative error %.3e\n", worst);
    CHECK(worst < 1e-5);

    /* zero atoms; zero local atoms */
    double e = 123.0, virial[9] = {1};
    nnpops_inputs in0 = {sizeof in0, 0, -1, 1, NULL, NULL, NULL, NULL, NULL};
    nnpops_outputs out0 = {sizeof out0, &e, NULL, virial, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in0, &out0));
    CHECK(e == 0.0);
    for (int k = 0; k < 9; k++) CHECK(virial[k] == 0.0);
    compute_one(ctx, n, s->z, s->x, NULL, NULL, 0, part);
    CHECK(part->energy == 0.0);
    for (int i = 0; i < 3 * n; i++) CHECK(part->forces[i] == 0.0);
    for (int i = 0; i < n; i++) CHECK(part->atomic[i] == 0.0);
    for (int k = 0; k < 9; k++) CHECK(part->virial[k] == 0.0);
    printf("zero atoms and zero local atoms give zeros\n");
    free(full);
    free(part);
    free(tmp);
    free(x);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    ref_free(&set);
    return 0;
}

/* ---- the species set -------------------------------------------------------------------------- */

static int64_t descriptor_length(const nnpops_context *ctx) {
    nnpops_stats st = {sizeof st};
    CHECK_OK(nnpops_context_stats(ctx, &st));
    return st.descriptor_length;
}

static int case_species_set(void) {
    refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    const refsys *s = ref_find(&set, "13_f0");
    const int n = s->n, nf = n + 7;
    static const int32_t far_z[7] = {1, 6, 7, 8, 16, 9, 17};
    int32_t z[64];
    double x[3 * 64];
    CHECK(nf <= 64);
    memcpy(z, s->z, sizeof(int32_t) * (size_t)n);
    memcpy(x, s->x, sizeof(double) * 3 * (size_t)n);
    for (int k = 0; k < 7; k++) { /* 40 A apart, 100 A from the molecule */
        z[n + k] = far_z[k];
        x[3 * (n + k)] = 100.0 + 40.0 * k;
        x[3 * (n + k) + 1] = -50.0;
        x[3 * (n + k) + 2] = 30.0;
    }
    result *a = malloc(sizeof *a), *b = malloc(sizeof *b), *c = malloc(sizeof *c);
    CHECK(a && b && c);
    for (int f32 = 0; f32 < 2; f32++) {
        nnpops_model *m;
        nnpops_context *ctx;
        load_model("ani2x", f32 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64, &m, &ctx);
        compute_one(ctx, n, z, x, NULL, NULL, -1, a);
        const int64_t la = descriptor_length(ctx);
        compute_one(ctx, nf, z, x, NULL, NULL, n, b);
        const int64_t lb = descriptor_length(ctx);
        const double te = f32 ? 1e-5 : 1e-12, tf = f32 ? 1e-4 : 1e-10;
        double df = 0, da = 0;
        for (int i = 0; i < 3 * n; i++) df = fmax(df, fabs(a->forces[i] - b->forces[i]));
        for (int i = 0; i < n; i++) da = fmax(da, fabs(a->atomic[i] - b->atomic[i]));
        printf("%s: AEV entries %lld (alanine) / %lld (with far ghosts of every species); "
               "|dE| %.3g eV, max |dF| %.3g eV/A, max |dE_atom| %.3g eV\n",
               f32 ? "float32" : "float64", (long long)la, (long long)lb,
               fabs(a->energy - b->energy), df, da);
        CHECK(la == 384 && lb == 1008);
        CHECK(fabs(a->energy - b->energy) <= te * n && df <= tf && da <= te);
        for (int i = 3 * n; i < 3 * nf; i++) CHECK(b->forces[i] == 0.0);
        for (int k = 0; k < 9; k++) CHECK(fabs(a->virial[k] - b->virial[k]) <= tf);
        /* moving between sets: alanine, its H and O atoms alone, alanine again */
        int32_t zho[64];
        double xho[3 * 64];
        int nho = 0;
        for (int i = 0; i < n; i++) {
            if (z[i] != 1 && z[i] != 8) continue;
            zho[nho] = z[i];
            memcpy(xho + 3 * nho, x + 3 * i, sizeof(double) * 3);
            nho++;
        }
        compute_one(ctx, nho, zho, xho, NULL, NULL, -1, b);
        CHECK(descriptor_length(ctx) == 128);
        compute_one(ctx, n, z, x, NULL, NULL, -1, c);
        CHECK(descriptor_length(ctx) == 384);
        CHECK(memcmp(&a->energy, &c->energy, sizeof(double)) == 0);
        CHECK(memcmp(a->forces, c->forces, sizeof(double) * 3 * (size_t)n) == 0);
        nnpops_context *fresh;
        CHECK_OK(nnpops_context_create(m, &fresh));
        compute_one(fresh, nho, zho, xho, NULL, NULL, -1, c);
        CHECK(memcmp(&b->energy, &c->energy, sizeof(double)) == 0);
        CHECK(memcmp(b->forces, c->forces, sizeof(double) * 3 * (size_t)nho) == 0);
        printf("%s: alanine, its %d H and O atoms, alanine again in one context: the bits of "
               "fresh contexts\n", f32 ? "float32" : "float64", nho);
        nnpops_context_destroy(fresh);
        nnpops_context_destroy(ctx);
        nnpops_model_destroy(m);
    }
    free(a);
    free(b);
    free(c);
    ref_free(&set);
    return 0;
}

/* ---- ensemble members -------------------------------------------------------------------------- */

static int case_member(void) {
    refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani2x", NNPOPS_FLOAT64, &m, &ctx);
    const int ens = nnpops_model_ensemble_size(m);
    CHECK(ens == 8);
    const refsys *s = ref_find(&set, "mol_CH3SH");
    double e, members[8];
    nnpops_inputs in = {sizeof in, s->n, -1, 1, s->z, s->x, NULL, NULL, NULL};
    nnpops_outputs out = {sizeof out, &e, NULL, NULL, NULL, NULL, members};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    double mean = 0, spread = 0;
    for (int k = 0; k < ens; k++) mean += members[k] / ens;
    for (int k = 0; k < ens; k++) spread = fmax(spread, fabs(members[k] - mean));
    printf("%s: energy %.10f eV, mean of the %d member energies %.10f eV (spread %.4f eV)\n",
           s->name, e, ens, mean, spread);
    CHECK_NEAR(mean, e, 0, 1e-12);
    CHECK(spread > 1e-6); /* the members differ */
    result *r = malloc(sizeof *r);
    CHECK(r != NULL);
    for (int k = 0; k < ens; k++) {
        CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_ENSEMBLE_MEMBER, k));
        double ek, mk[8];
        nnpops_outputs outk = {sizeof outk, &ek, NULL, NULL, NULL, NULL, mk};
        CHECK_OK(nnpops_compute(ctx, &in, &outk));
        CHECK_NEAR(ek, members[k], 0, 1e-12);
        for (int j = 0; j < ens; j++) CHECK_NEAR(mk[j], members[j], 0, 1e-12);
        /* forces of the single member are its own gradient: check against finite differences
         * on one coordinate */
        compute_one(ctx, s->n, s->z, s->x, NULL, NULL, -1, r);
        double x[3 * 16];
        CHECK(s->n <= 16);
        memcpy(x, s->x, sizeof(double) * 3 * (size_t)s->n);
        const int i = k % (3 * s->n);
        x[i] += 1e-4;
        const double ep = energy_only(ctx, s->n, s->z, x, NULL, NULL);
        x[i] -= 2e-4;
        const double em = energy_only(ctx, s->n, s->z, x, NULL, NULL);
        CHECK_NEAR(-(ep - em) / 2e-4, r->forces[i], 1e-5 * fmax(1.0, fabs(r->forces[i])), 0);
    }
    /* a member index beyond the ensemble is refused (by the option or by the potential) */
    nnpops_status st = nnpops_context_set_option(ctx, NNPOPS_OPTION_ENSEMBLE_MEMBER, ens);
    if (st == NNPOPS_OK) st = nnpops_compute(ctx, &in, &out);
    CHECK(st == NNPOPS_ERROR_INVALID_ARGUMENT);
    printf("ensemble_member k gives member k's energy for k = 0..%d\n", ens - 1);
    free(r);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    ref_free(&set);
    return 0;
}

/* ---- unknown element ------------------------------------------------------------------------- */

static int case_unknown_element(void) {
    nnpops_model *m;
    nnpops_context *ctx;
    load_model("ani1x", NNPOPS_FLOAT64, &m, &ctx);
    const int32_t z[3] = {8, 1, 17}; /* Cl is not an ANI-1x element */
    const double x[9] = {0, 0, 0, 0.96, 0, 0, 0, 1.5, 0.3};
    double e;
    nnpops_inputs in = {sizeof in, 3, -1, 1, z, x, NULL, NULL, NULL};
    nnpops_outputs out = {sizeof out, &e, NULL, NULL, NULL, NULL, NULL};
    CHECK_STATUS(nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_UNKNOWN_ELEMENT);
    CHECK_ERROR_HAS("atom 2");
    CHECK_ERROR_HAS("Cl");
    printf("unknown element: %s\n", nnpops_last_error());
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE [ARGS]\n", argv[0]);
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "reference") && argc == 4) return case_reference(argv[2], argv[3]);
    if (!strcmp(c, "fd_forces")) return case_fd_forces();
    if (!strcmp(c, "fd_stress")) return case_fd_stress();
    if (!strcmp(c, "invariance")) return case_invariance();
    if (!strcmp(c, "batch")) return case_batch();
    if (!strcmp(c, "triclinic")) return case_triclinic();
    if (!strcmp(c, "ghosts")) return case_ghosts();
    if (!strcmp(c, "member")) return case_member();
    if (!strcmp(c, "species_set")) return case_species_set();
    if (!strcmp(c, "unknown_element")) return case_unknown_element();
    fprintf(stderr, "unknown case %s\n", c);
    return 2;
}
