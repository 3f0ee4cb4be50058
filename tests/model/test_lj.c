/*
 * test_lj.c - model tests of the Lennard-Jones potential (`type: lj`) through the public API,
 * against energies and forces computed here independently by direct loops over atom pairs
 * (and periodic images).  One CTest entry per case:
 *
 *   two_atoms      analytic E(r) and F(r) of an Ar dimer, shift off and on, and beyond the cutoff
 *   cluster        random two-species cluster (three pair types with their own cutoffs), shift off
 *                  and on: energies, forces, per-atom energies, virial; float32 model = float64
 *   ghosts         n_local < n_atoms: each pair's energy split half to each local atom, forces
 *                  from the local energy only, ghost-ghost pairs ignored
 *   periodic       a small periodic box (cutoff larger than half the box) against a direct sum
 *                  over images: energy, forces, virial
 *   bad_files      malformed lj sections are NNPOPS_ERROR_MODEL_FORMAT naming file and line
 *
 * The model files are written into a fresh temporary directory.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nnpops/nnpops.h"

static char tmpdir[256];

static void make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nnpops-lj-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(tmpdir) != NULL);
}

/* Writes NAME.yaml with the given lj section and returns its path (static buffer). */
static const char *write_model(const char *name, const char *species, const char *lj_section) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.yaml", tmpdir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f,
            "format: nnpops-model\n"
            "format_version: 1\n"
            "name: %s\n"
            "type: lj\n"
            "units: {length: angstrom, energy: eV}\n"
            "species: %s\n"
            "%s",
            name, species, lj_section);
    fclose(f);
    return path;
}

static void cleanup(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* ---- the reference: pair parameters and direct sums ----------------------------------------- */

typedef struct lj_params {
    int n_species;
    int32_t z[4];
    double eps[4][4], sigma[4][4], cutoff[4][4];
    int on[4][4];
    int shift;
} lj_params;

static int species_of(const lj_params *p, int32_t z) {
    for (int s = 0; s < p->n_species; s++)
        if (p->z[s] == z) return s;
    return -1;
}

static double phi(const lj_params *p, int a, int b, double r, double *dphi) {
    *dphi = 0;
    if (!p->on[a][b] || r >= p->cutoff[a][b]) return 0;
    const double s6 = pow(p->sigma[a][b] / r, 6);
    double e = 4 * p->eps[a][b] * (s6 * s6 - s6);
    if (p->shift) {
        const double c6 = pow(p->sigma[a][b] / p->cutoff[a][b], 6);
        e -= 4 * p->eps[a][b] * (c6 * c6 - c6);
    }
    *dphi = 4 * p->eps[a][b] * (-12 * s6 * s6 + 6 * s6) / r;
    return e;
}

/* Energy of the local atoms (each pair's energy split half to each local atom), its gradient
 * (as forces) for all atoms, per-atom energies and the virial -sum r (x) dE/dr, by a direct loop
 * over atom pairs and the images n in [-nimg, nimg]^3 along periodic axes. */
static double reference(const lj_params *p, int n, int n_local, const int32_t *z, const double *x,
                        const double *cell, int nimg, double *forces, double *atomic,
                        double *virial) {
    double e = 0;
    memset(forces, 0, sizeof(double) * 3 * (size_t)n);
    memset(atomic, 0, sizeof(double) * (size_t)n);
    memset(virial, 0, sizeof(double) * 9);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            for (int a = -nimg; a <= nimg; a++)
                for (int b = -nimg; b <= nimg; b++)
                    for (int c = -nimg; c <= nimg; c++) {
                        if (i == j && a == 0 && b == 0 && c == 0) continue;
                        double r[3];
                        for (int k = 0; k < 3; k++) {
                            r[k] = x[3 * j + k] - x[3 * i + k];
                            if (cell) r[k] += a * cell[k] + b * cell[3 + k] + c * cell[6 + k];
                        }
                        const double d = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
                        double dphi;
                        const double v =
                            phi(p, species_of(p, z[i]), species_of(p, z[j]), d, &dphi);
                        /* ordered (i, j, n): this term is half of the pair's energy and it
                         * belongs to atom i only (the other half is the term (j, i, -n)) */
                        if (i >= n_local) continue;
                        e += 0.5 * v;
                        atomic[i] += 0.5 * v;
                        for (int k = 0; k < 3; k++) {
                            const double g = 0.5 * dphi * r[k] / d; /* d(0.5 v)/dr */
                            forces[3 * i + k] += g;                 /* r = x_j - x_i */
                            forces[3 * j + k] -= g;
                            for (int l = 0; l < 3; l++) virial[3 * l + k] -= r[l] * g;
                        }
                    }
        }
    }
    return e;
}

typedef struct lib_result {
    double energy, member;
    double *forces, *atomic, virial[9];
} lib_result;

static void compute(const char *path, nnpops_precision prec, int n, int64_t n_local,
                    const int32_t *z, const double *x, const double *cell, lib_result *r) {
    nnpops_model *m;
    nnpops_context *ctx;
    CHECK_OK(nnpops_model_load(path, "cpu", prec, &m));
    CHECK(nnpops_model_ensemble_size(m) == 1);
    CHECK_OK(nnpops_context_create(m, &ctx));
    const uint8_t pbc[3] = {1, 1, 1};
    nnpops_inputs in = {sizeof in, n, n_local, 1, z, x, NULL, cell, cell ? pbc : NULL};
    nnpops_outputs out = {sizeof out, &r->energy, r->forces, r->virial, r->atomic, NULL,
                          &r->member};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
}

/* Compares the library with the reference; returns the largest relative deviation. */
static double compare(const lj_params *p, const char *path, int n, int n_local, const int32_t *z,
                      const double *x, const double *cell, int nimg) {
    double *f = malloc(sizeof(double) * 3 * (size_t)n), *at = malloc(sizeof(double) * (size_t)n);
    lib_result r = {0, 0, malloc(sizeof(double) * 3 * (size_t)n), malloc(sizeof(double) * (size_t)n), {0}};
    CHECK(f && at && r.forces && r.atomic);
    double w[9];
    const double e = reference(p, n, n_local, z, x, cell, nimg, f, at, w);
    compute(path, NNPOPS_FLOAT64, n, n_local, z, x, cell, &r);
    double fscale = 1e-12, wscale = 1e-12;
    for (int i = 0; i < 3 * n; i++) fscale = fmax(fscale, fabs(f[i]));
    for (int k = 0; k < 9; k++) wscale = fmax(wscale, fabs(w[k]));
    double worst = fabs(r.energy - e) / fmax(1e-12, fabs(e));
    CHECK_NEAR(r.energy, e, 1e-13, 1e-11);
    CHECK_NEAR(r.member, e, 1e-13, 1e-11);
    for (int i = 0; i < 3 * n; i++) {
        CHECK_NEAR(r.forces[i], f[i], 1e-11 * fscale, 0);
        worst = fmax(worst, fabs(r.forces[i] - f[i]) / fscale);
    }
    for (int i = 0; i < n; i++) CHECK_NEAR(r.atomic[i], at[i], 1e-13, 1e-11);
    for (int k = 0; k < 9; k++) CHECK_NEAR(r.virial[k], w[k], 1e-11 * wscale, 0);
    /* the float32 model computes in double too: identical results */
    lib_result r32 = {0, 0, malloc(sizeof(double) * 3 * (size_t)n), malloc(sizeof(double) * (size_t)n), {0}};
    CHECK(r32.forces && r32.atomic);
    compute(path, NNPOPS_FLOAT32, n, n_local, z, x, cell, &r32);
    CHECK(r32.energy == r.energy);
    for (int i = 0; i < 3 * n; i++) CHECK(r32.forces[i] == r.forces[i]);
    free(f);
    free(at);
    free(r.forces);
    free(r.atomic);
    free(r32.forces);
    free(r32.atomic);
    return worst;
}

/* ---- cases --------------------------------------------------------------------------------------- */

static int case_two_atoms(void) {
    const double eps = 0.0104, sigma = 3.4, rc = 8.5;
    for (int shift = 0; shift < 2; shift++) {
        char section[256];
        snprintf(section, sizeof section,
                 "lj:\n  shift: %s\n  pairs:\n    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: "
                 "3.40, cutoff: 8.5}\n",
                 shift ? "true" : "false");
        const char *path = write_model(shift ? "ar_shift" : "ar", "[Ar]", section);
        const double rs[4] = {3.0, 3.8164, 6.0, 9.0}; /* the last one beyond the cutoff */
        for (int t = 0; t < 4; t++) {
            const double r = rs[t];
            const int32_t z[2] = {18, 18};
            const double x[6] = {0.1, 0.2, 0.3, 0.1 + r * 0.6, 0.2 + r * 0.8, 0.3};
            double f[6], at[2];
            lib_result res = {0, 0, f, at, {0}};
            compute(path, NNPOPS_FLOAT64, 2, -1, z, x, NULL, &res);
            double e = 0, dedr = 0;
            if (r < rc) {
                const double s6 = pow(sigma / r, 6), c6 = pow(sigma / rc, 6);
                e = 4 * eps * (s6 * s6 - s6) - (shift ? 4 * eps * (c6 * c6 - c6) : 0);
                dedr = 4 * eps * (-12 * s6 * s6 + 6 * s6) / r;
            }
            /* F_1 = -dE/dx_1 = dE/dr * (x_1 - x_0) / r ... F on atom 1 along the bond */
            const double u[3] = {0.6, 0.8, 0.0};
            CHECK_NEAR(res.energy, e, 1e-15, 1e-12);
            CHECK_NEAR(at[0], 0.5 * e, 1e-15, 1e-12);
            CHECK_NEAR(at[1], 0.5 * e, 1e-15, 1e-12);
            for (int k = 0; k < 3; k++) {
                CHECK_NEAR(f[3 + k], -dedr * u[k], 1e-15, 1e-12);
                CHECK_NEAR(f[k], dedr * u[k], 1e-15, 1e-12);
            }
            printf("shift %d r %.4f: E %.10e eV (analytic %.10e), F %.6e eV/A\n", shift, r,
                   res.energy, e, -dedr);
        }
    }
    return 0;
}

static lj_params cluster_params(int shift) {
    lj_params p;
    memset(&p, 0, sizeof p);
    p.n_species = 2;
    p.z[0] = 18; /* Ar */
    p.z[1] = 36; /* Kr */
    p.shift = shift;
    const double e[3] = {0.0104, 0.0125, 0.0141}, s[3] = {3.40, 3.50, 3.65}, c[3] = {7.0, 8.0, 6.5};
    const int pa[3][2] = {{0, 0}, {0, 1}, {1, 1}};
    for (int k = 0; k < 3; k++) {
        const int a = pa[k][0], b = pa[k][1];
        p.eps[a][b] = p.eps[b][a] = e[k];
        p.sigma[a][b] = p.sigma[b][a] = s[k];
        p.cutoff[a][b] = p.cutoff[b][a] = c[k];
        p.on[a][b] = p.on[b][a] = 1;
    }
    return p;
}

static const char *cluster_model(int shift) {
    char section[512];
    snprintf(section, sizeof section,
             "lj:\n  shift: %s\n  pairs:\n"
             "    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: 3.40, cutoff: 7.0}\n"
             "    - {elements: [Kr, Ar], epsilon: 0.0125, sigma: 3.50, cutoff: 8.0}\n"
             "    - elements: [Kr, Kr]\n      epsilon: 0.0141\n      sigma: 3.65\n"
             "      cutoff: 6.5\n",
             shift ? "true" : "false");
    return write_model(shift ? "arkr_shift" : "arkr", "[Ar, Kr]", section);
}

/* n atoms at least 3 A apart inside a cube of side `box` (test_scatter), Ar or Kr. */
static void random_cluster(int n, double box, unsigned long long seed, int32_t *z, double *x) {
    test_scatter(n, box, 3.0, 0, &seed, x);
    for (int i = 0; i < n; i++) z[i] = test_rand(&seed) < 0.5 ? 18 : 36;
}

static int case_cluster(void) {
    enum { N = 24 };
    int32_t z[N];
    double x[3 * N];
    random_cluster(N, 12.0, 99, z, x);
    for (int shift = 0; shift < 2; shift++) {
        lj_params p = cluster_params(shift);
        const double worst = compare(&p, cluster_model(shift), N, N, z, x, NULL, 0);
        printf("cluster of %d atoms (Ar/Kr), shift %d: worst relative deviation %.3e\n", N,
               shift, worst);
    }
    return 0;
}

static int case_ghosts(void) {
    enum { N = 24, NLOCAL = 13 };
    int32_t z[N];
    double x[3 * N];
    random_cluster(N, 12.0, 7, z, x);
    lj_params p = cluster_params(1);
    const double worst = compare(&p, cluster_model(1), N, NLOCAL, z, x, NULL, 0);
    printf("cluster of %d atoms with %d local: worst relative deviation %.3e\n", N, NLOCAL, worst);
    /* zero local atoms: nothing counts */
    double f[3 * N], at[N];
    lib_result r = {0, 0, f, at, {0}};
    compute(cluster_model(1), NNPOPS_FLOAT64, N, 0, z, x, NULL, &r);
    CHECK(r.energy == 0.0);
    for (int i = 0; i < 3 * N; i++) CHECK(f[i] == 0.0);
    printf("zero local atoms: zero energy and forces\n");
    return 0;
}

static int case_periodic(void) {
    enum { N = 10 };
    int32_t z[N];
    double x[3 * N];
    /* a triclinic box of about 9 A: the 8 A Ar-Kr cutoff exceeds half of it */
    const double cell[9] = {9.0, 0, 0, 1.5, 9.2, 0, -0.7, 0.9, 9.4};
    random_cluster(N, 7.0, 3, z, x);
    lj_params p = cluster_params(0);
    const double worst = compare(&p, cluster_model(0), N, N, z, x, cell, 2);
    printf("periodic triclinic box, %d atoms, cutoffs up to 8 A: worst relative deviation %.3e\n",
           N, worst);
    return 0;
}

static void expect_format_error(const char *name, const char *section, const char *needle) {
    const char *path = write_model(name, "[Ar, Kr]", section);
    nnpops_model *m = NULL;
    CHECK_STATUS(nnpops_model_load(path, "cpu", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK(m == NULL);
    CHECK_ERROR_HAS(path);
    CHECK_ERROR_HAS(needle);
    printf("%-12s -> %s\n", name, nnpops_last_error());
}

static int case_bad_files(void) {
    expect_format_error("duplicate",
                        "lj:\n  pairs:\n    - {elements: [Ar, Kr], epsilon: 0.01, sigma: 3.4, "
                        "cutoff: 8}\n    - {elements: [Kr, Ar], epsilon: 0.01, sigma: 3.4, "
                        "cutoff: 8}\n",
                        "listed twice");
    expect_format_error("unknown_el",
                        "lj:\n  pairs:\n    - {elements: [Ar, Xe], epsilon: 0.01, sigma: 3.4, "
                        "cutoff: 8}\n",
                        "Xe");
    expect_format_error("neg_eps",
                        "lj:\n  pairs:\n    - {elements: [Ar, Ar], epsilon: -0.01, sigma: 3.4, "
                        "cutoff: 8}\n",
                        "epsilon");
    expect_format_error("zero_sigma",
                        "lj:\n  pairs:\n    - {elements: [Ar, Ar], epsilon: 0.01, sigma: 0.0, "
                        "cutoff: 8}\n",
                        "sigma");
    expect_format_error("zero_cut",
                        "lj:\n  pairs:\n    - {elements: [Ar, Ar], epsilon: 0.01, sigma: 3.4, "
                        "cutoff: 0}\n",
                        "cutoff");
    expect_format_error("three_el",
                        "lj:\n  pairs:\n    - {elements: [Ar, Ar, Kr], epsilon: 0.01, sigma: 3.4, "
                        "cutoff: 8}\n",
                        "two element");
    expect_format_error("unknown_key",
                        "lj:\n  pairs:\n    - {elements: [Ar, Ar], epsilon: 0.01, sigma: 3.4, "
                        "cutoff: 8, rmin: 1}\n",
                        "unknown key 'rmin' in lj.pairs[0] (expected elements, epsilon, sigma, cutoff)");
    expect_format_error("no_pairs", "lj:\n  shift: true\n  pairs: []\n", "at least one");
    expect_format_error("lj_key", "lj:\n  shft: true\n  pairs: []\n",
                        "unknown key 'shft' in lj (expected shift, pairs)");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    make_tmpdir();
    int rc = 2;
    if (!strcmp(argv[1], "two_atoms")) rc = case_two_atoms();
    else if (!strcmp(argv[1], "cluster")) rc = case_cluster();
    else if (!strcmp(argv[1], "ghosts")) rc = case_ghosts();
    else if (!strcmp(argv[1], "periodic")) rc = case_periodic();
    else if (!strcmp(argv[1], "bad_files")) rc = case_bad_files();
    else fprintf(stderr, "unknown case %s\n", argv[1]);
    cleanup();
    return rc;
}
