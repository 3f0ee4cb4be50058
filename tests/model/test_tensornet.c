/* test_tensornet.c - TensorNet models through the public API (nnpops_model_load, nnpops_compute)
 * against torchmd-net 3.1.0's values and against the API's own finite differences.
 *
 *   test_tensornet reference MODEL f64|f32  every system of MODEL's reference set: energies
 *                                           (|dE|/N), forces, stress, atomic energies, each batch
 *                                           member with its total charge; the model's range and
 *                                           charge flag
 *   test_tensornet fd MODEL                 forces (an open molecule, a triclinic 8 A cell
 *                                           smaller than twice the cutoff) and the virial
 *                                           (strain) against central differences of the energy
 *   test_tensornet replica MODEL            water8_pbc is 1/8 of its 2x2x2 replica water8_x2_pbc
 *                                           (energy less `mean`, atomic energies less their
 *                                           share of it, forces) and matches the replica's value
 *   test_tensornet batch MODEL              a batch of three systems with charges 0, 1, -1
 *                                           equals the systems one by one (energies the same
 *                                           bits; on the GPU to rounding); threads 1 and 3 give
 *                                           the same bits
 *   test_tensornet ghosts MODEL             a molecule split in two halves, each computed with
 *                                           the other half as ghosts: the two energies add up to
 *                                           the whole, the local atoms' energies and the forces
 *                                           (ghosts' included) add up to the whole call's
 *   test_tensornet bad_files MODEL          named errors (file, YAML line) for broken copies of
 *                                           the model file
 *   test_tensornet units MODEL              the model file in nm, in kcal/mol: the same results
 *                                           in the caller's units
 *   test_tensornet ensemble MODEL f64|f32   an ensemble model (the reference set's "ensembles"
 *                                           entry of that name's members): the energy and forces
 *                                           are the members' means, member_energies each
 *                                           member's reference, ensemble_member k gives member
 *                                           k's energies and forces; an inconsistent ensemble
 *                                           file is a named error
 *
 * An optional fourth argument names the device (default cpu): `reference tn_a f32 cuda` runs the
 * same checks on the GPU (tests/gpu/tests.cmake, tests/emu/tests.cmake register those).
 *
 * Models: the converted ones (NAME.yaml in NNPOPS_MODEL_PATH, fixture model.convert_tensornet);
 * reference: $NNPOPS_SHARED_DIR/reference/tensornet/reference.json (a missing file fails under
 * CI=true and skips elsewhere).
 *
 * Tolerances, as tests/model/test_tensornet_cpu.c argues them (it checks the functions under
 * potentials/tensornet/cpu directly): float64 |dE|/N <= 1e-8 eV, |dF| <= 1e-7 eV/A + 1e-7 |F|
 * per component, atomic energies (less nnpops' share of `mean` and of ZBL) against the
 * reference's per-atom network terms <= 5e-8 eV, stress (-W / V) 1e-8 eV/A^3, each plus, with a
 * ZBL prior, the change of that prior under a one-ulp float32 change of torchmd-net's screening
 * length (computed here by a direct sum over periodic images); float32 |dE|/N <= max(5e-6, 2 x
 * torchmd-net's own float32 deviation), max |dF| <= max(5e-4, 2 x its own), the stress's
 * diagonal 1e-5 eV/A^3, atomic energies max(5e-5, 10 x the energy bound) eV.  The
 * off-diagonal stress is compared after torchmd-net's reading of the box (its neighbor kernel
 * reads only the box's lower triangle: docs/model-format.md 9.2): its strain derivative misses
 * sum_{row < d} dE/dH[row][d] H[row][c] in component (d, c), where dE/dH is the derivative of the
 * energy with respect to the cell at fixed Cartesian positions, taken here by central
 * differences of the API's energy (float64). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nnpops/nnpops.h"
#include "reference.h"
#include "tensornet_reference.h"

/* ---- the model file's scalars the test needs (mean, ZBL) ------------------------------------- */

typedef struct tn_info {
    double mean, cutoff, zbl_cutoff, ds, es;
    int layers, has_zbl, map_len;
    int32_t map[256];
    char yaml_path[4096];
} tn_info;

static const char *yaml_after(const char *text, const char *pat) {
    const char *p = strstr(text, pat);
    if (!p) {
        fprintf(stderr, "model YAML: no '%s'\n", pat);
        exit(1);
    }
    return p + strlen(pat);
}

static void read_info(const nnpops_model *m, tn_info *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->yaml_path, sizeof t->yaml_path, "%s", nnpops_model_path(m));
    size_t len;
    char *y = read_text(t->yaml_path, &len);
    CHECK(y != NULL);
    t->mean = strtod(yaml_after(y, "\n  mean: "), NULL);
    t->cutoff = strtod(yaml_after(y, "\n  cutoff_upper: "), NULL);
    t->layers = atoi(yaml_after(y, "\n  num_layers: "));
    const char *zb = strstr(y, "{type: ZBL, cutoff_distance: ");
    if (zb) {
        t->has_zbl = 1;
        t->zbl_cutoff = strtod(zb + strlen("{type: ZBL, cutoff_distance: "), NULL);
        t->ds = strtod(yaml_after(zb, "distance_scale: "), NULL);
        t->es = strtod(yaml_after(zb, "energy_scale: "), NULL);
        const char *p = yaml_after(zb, "atomic_number: [");
        while (*p && *p != ']') {
            char *end;
            CHECK(t->map_len < 256);
            t->map[t->map_len++] = (int32_t)strtol(p, &end, 10);
            p = end;
            while (*p == ',' || *p == ' ' || *p == '\n') p++;
        }
    }
    free(y);
}

/* ---- one API call over a batch --------------------------------------------------------------- */

typedef struct result {
    double e[8];
    double w[8][9];
    double *f, *ae, *av;
} result;

/* Systems S[0..ns) as one batch (charges q or NULL), with n_local local atoms (-1: all). */
static nnpops_status run(nnpops_context *ctx, const tn_sys *S, int ns, const double *q,
                         int64_t n_local, result *r) {
    int N = 0;
    for (int k = 0; k < ns; k++) N += S[k].n;
    int32_t *z = malloc(sizeof(int32_t) * (size_t)N), *b = malloc(sizeof(int32_t) * (size_t)N);
    double *x = malloc(sizeof(double) * 3 * (size_t)N), cells[8 * 9];
    uint8_t pbc[8 * 3];
    int any_pbc = 0, o = 0;
    for (int k = 0; k < ns; k++) {
        memcpy(z + o, S[k].z, sizeof(int32_t) * (size_t)S[k].n);
        memcpy(x + 3 * o, S[k].x, sizeof(double) * 3 * (size_t)S[k].n);
        for (int i = 0; i < S[k].n; i++) b[o + i] = k;
        memcpy(cells + 9 * k, S[k].cell, sizeof(double) * 9);
        for (int d = 0; d < 3; d++) pbc[3 * k + d] = (uint8_t)S[k].periodic;
        any_pbc |= S[k].periodic;
        o += S[k].n;
    }
    r->f = calloc(3 * (size_t)N, sizeof(double));
    r->ae = calloc((size_t)N, sizeof(double));
    r->av = calloc(9 * (size_t)N, sizeof(double));
    nnpops_inputs in = {.struct_size = sizeof in, .n_atoms = N, .n_local = n_local,
                        .n_systems = ns, .atomic_numbers = z, .positions = x, .batch = b,
                        .cells = any_pbc ? cells : NULL, .pbc = any_pbc ? pbc : NULL,
                        .charges = q};
    nnpops_outputs out = {.struct_size = sizeof out, .energies = r->e, .forces = r->f,
                          .virials = &r->w[0][0], .atomic_energies = r->ae,
                          .atomic_virials = r->av};
    nnpops_status st = nnpops_compute(ctx, &in, &out);
    free(z), free(b), free(x);
    return st;
}

static void result_free(result *r) {
    free(r->f), free(r->ae), free(r->av);
}

static double energy_of(nnpops_context *ctx, const tn_sys *s, const double *q) {
    int N = s->n;
    double e;
    uint8_t pbc[3] = {1, 1, 1};
    nnpops_inputs in = {.struct_size = sizeof in, .n_atoms = N, .n_local = -1, .n_systems = 1,
                        .atomic_numbers = s->z, .positions = s->x,
                        .cells = s->periodic ? s->cell : NULL, .pbc = s->periodic ? pbc : NULL,
                        .charges = q};
    nnpops_outputs out = {.struct_size = sizeof out, .energies = &e};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    return e;
}

/* ---- ZBL by a direct sum (for the shares and the allowance) ---------------------------------- */

/* Per-atom shares (half of each pair) of the ZBL energy of atoms first .. first+n-1 and its forces
 * (added to f), with the screening length scaled by (1 + bump). */
static void zbl_direct(const tn_info *t, const tn_sys *s, double bump, double *share, double *f) {
    const double a0 = 5.29177210903e-11;
    const double pref = 2.30707755e-28 / (t->es * t->ds);
    int rep[3] = {0, 0, 0};
    if (s->periodic)
        for (int k = 0; k < 3; k++) {
            const double *b = s->cell + 3 * ((k + 1) % 3), *c = s->cell + 3 * ((k + 2) % 3);
            double cr[3] = {b[1] * c[2] - b[2] * c[1], b[2] * c[0] - b[0] * c[2],
                            b[0] * c[1] - b[1] * c[0]};
            double vol = fabs(ref_volume(s->cell));
            rep[k] = (int)ceil(t->zbl_cutoff / (vol / sqrt(cr[0] * cr[0] + cr[1] * cr[1] +
                                                           cr[2] * cr[2]))) + 1;
        }
    for (int i = 0; i < s->n; i++)
        for (int j = 0; j < s->n; j++)
            for (int na = -rep[0]; na <= rep[0]; na++)
                for (int nb = -rep[1]; nb <= rep[1]; nb++)
                    for (int nc = -rep[2]; nc <= rep[2]; nc++) {
                        if (i == j && !na && !nb && !nc) continue;
                        double v[3];
                        for (int k = 0; k < 3; k++) {
                            v[k] = s->x[3 * j + k] - s->x[3 * i + k];
                            if (s->periodic)
                                v[k] += na * s->cell[k] + nb * s->cell[3 + k] + nc * s->cell[6 + k];
                        }
                        const double r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
                        if (!(r < t->zbl_cutoff)) continue;
                        const double Zi = t->map[s->z[i]], Zj = t->map[s->z[j]];
                        const float sa = (float)pow(Zi, 0.23) + (float)pow(Zj, 0.23);
                        const double a = (double)((1.0f / sa) * (float)(0.8854 * a0)) * (1 + bump);
                        const double k_ = t->ds / a, d = r * k_;
                        const double c[4] = {0.1818, 0.5099, 0.2802, 0.02817};
                        const double ex[4] = {3.2, 0.9423, 0.4029, 0.2016};
                        double phi = 0, dphi = 0;
                        for (int m = 0; m < 4; m++) {
                            phi += c[m] * exp(-ex[m] * d);
                            dphi -= ex[m] * c[m] * exp(-ex[m] * d) * k_;
                        }
                        const double pi = 3.14159265358979323846;
                        const double fc = 0.5 * (cos(pi * r / t->zbl_cutoff) + 1);
                        const double dfc = -0.5 * pi / t->zbl_cutoff * sin(pi * r / t->zbl_cutoff);
                        const double e = pref * Zi * Zj * phi * fc / r;
                        const double de = pref * Zi * Zj * (dphi * fc / r + phi * dfc / r -
                                                            phi * fc / (r * r));
                        share[i] += 0.5 * e;
                        /* half of the pair's energy belongs to i's entry: F_i += 0.5 dE/dr u */
                        for (int k = 0; k < 3; k++) {
                            f[3 * i + k] += 0.5 * de * v[k] / r;
                            f[3 * j + k] -= 0.5 * de * v[k] / r;
                        }
                    }
}

/* dE/dH[row][d] at fixed Cartesian positions (central differences, float64 context). */
static double dE_dcell(nnpops_context *ctx, tn_sys *s, int row, int d) {
    const double h = 1e-4, c0 = s->cell[3 * row + d];
    s->cell[3 * row + d] = c0 + h;
    double ep = energy_of(ctx, s, NULL);
    s->cell[3 * row + d] = c0 - h;
    double em = energy_of(ctx, s, NULL);
    s->cell[3 * row + d] = c0;
    return (ep - em) / (2 * h);
}

/* ---- cases ----------------------------------------------------------------------------------- */

static const char *g_model;
static int g_f32;
static const char *g_device = "cpu";

/* On the emulated GPU (tests/emu: every GPU thread a fiber on one core) the reference case keeps
 * its smallest systems: a 13-atom molecule and the batch with charges. */
static int emulated_skip(const char *system) {
#ifdef NNPOPS_CUDA_EMULATION
    return strcmp(system, "mol_13_f0") != 0 && strcmp(system, "batch_q0_q1_qm1") != 0;
#else
    (void)system;
    return 0;
#endif
}

static int open_model_on(const char *device, int f32, nnpops_model **m, nnpops_context **ctx) {
    nnpops_status st = nnpops_model_load(g_model, device, f32 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64, m);
    if (st != NNPOPS_OK) {
        fprintf(stderr, "loading %s: %s: %s\n", g_model, nnpops_status_name(st),
                nnpops_last_error());
        return 0;
    }
    CHECK_OK(nnpops_context_create(*m, ctx));
    return 1;
}

/* The model under test on the test's device (argument 4, default cpu). */
static int open_model(int f32, nnpops_model **m, nnpops_context **ctx) {
    return open_model_on(g_device, f32, m, ctx);
}

static int case_reference(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    nnpops_model *m, *m64;
    nnpops_context *ctx, *ctx64;
    /* (the float64 helper, for the cell derivatives of the stress's correction, on the CPU) */
    if (!open_model(g_f32, &m, &ctx) || !open_model_on("cpu", 0, &m64, &ctx64)) return 1;
    tn_info t;
    read_info(m, &t);
    CHECK(!strcmp(nnpops_model_type(m), "tensornet"));
    CHECK(nnpops_model_uses_charge(m) == 1);
    const double range = fmax((t.layers + 1) * t.cutoff, t.has_zbl ? t.zbl_cutoff : 0.0);
    CHECK(fabs(nnpops_model_interaction_range(m) - range) <= 1e-12 * range);
    CHECK(fabs(nnpops_model_cutoff(m) - fmax(t.cutoff, t.zbl_cutoff)) <= 1e-12);

    const jval *systems = jget(jget(jget(root, "models"), g_model), "systems");
    CHECK(systems != NULL);
    int fails = 0;
    double worst_e = 0, worst_f = 0, worst_a = 0, worst_s = 0;
    printf("%-22s %5s %12s %12s %12s %12s %12s\n", "system", "atoms", "|dE|/N", "max|dF|",
           "max|dEi|", "max|dstress|", "ZBL allow");
    for (int si = 0; si < systems->n; si++) {
        const char *name = systems->keys[si];
        const jval *ref = systems->items[si];
        if (emulated_skip(name) || tn_ref_asan_skip(name)) continue;
        tn_sys S[8];
        double q[8];
        const jval *members = jget(ref, "members");
        const int ns = tn_entry_load(root, name, ref, S, q);
        int N = 0;
        for (int k = 0; k < ns; k++) N += S[k].n;
        result r;
        CHECK_OK(run(ctx, S, ns, members ? q : NULL, -1, &r));
        /* ZBL: each atom's share, and the allowance of a one-ulp screening length */
        double *share = calloc((size_t)N, sizeof(double)), allow_e[8] = {0}, allow_f = 0;
        double *allow_a = calloc((size_t)N, sizeof(double));
        if (t.has_zbl) {
            double *f0 = calloc(3 * (size_t)N, sizeof(double));
            double *sb = calloc((size_t)N, sizeof(double));
            double *fb = calloc(3 * (size_t)N, sizeof(double));
            int o = 0;
            for (int k = 0; k < ns; k++) {
                zbl_direct(&t, &S[k], 0.0, share + o, f0 + 3 * o);
                for (int bsg = 0; bsg < 2; bsg++) {
                    memset(sb, 0, sizeof(double) * (size_t)N);
                    memset(fb, 0, sizeof(double) * 3 * (size_t)N);
                    zbl_direct(&t, &S[k], bsg ? -0x1p-23 : 0x1p-23, sb + o, fb + 3 * o);
                    double es = 0, eb = 0;
                    for (int i = o; i < o + S[k].n; i++) {
                        es += share[i], eb += sb[i];
                        allow_a[i] = fmax(allow_a[i], fabs(sb[i] - share[i]));
                        for (int d = 0; d < 3; d++)
                            allow_f = fmax(allow_f, fabs(fb[3 * i + d] - f0[3 * i + d]));
                    }
                    allow_e[k] = fmax(allow_e[k], fabs(eb - es));
                }
                o += S[k].n;
            }
            free(f0), free(sb), free(fb);
        }
        double *fref = ref_numbers(ref, "forces_eV_per_A", 3 * N);
        double *aref = ref_numbers(ref, "atomic_energies_eV", N);
        double eref[8];
        tn_entry_energies(ref, ns, eref);
        double tol_e = 1e-8, tol_f = 1e-7, tol_a = 5e-8, tol_s = 1e-8;
        if (g_f32) {
            tn_f32_bounds(ref, &tol_e, &tol_f);
            tol_a = fmax(5e-5, 10 * tol_e); /* a per-atom term, a float32 evaluation */
            tol_s = 1e-5;
        }
        int ok = 1, o = 0;
        double de = 0, df = 0, da = 0, dst = 0;
        for (int k = 0; k < ns; k++) {
            double d = fabs(r.e[k] - eref[k]) / S[k].n;
            de = fmax(de, d);
            if (d > tol_e + allow_e[k] / S[k].n) ok = 0;
            /* atomic energies: the network's term + mean / N + the ZBL share; they sum to E */
            double sum = 0;
            for (int i = o; i < o + S[k].n; i++) {
                sum += r.ae[i];
                double a = r.ae[i] - t.mean / S[k].n - share[i];
                da = fmax(da, fabs(a - aref[i]));
                if (fabs(a - aref[i]) > tol_a + allow_a[i]) ok = 0;
            }
            if (fabs(sum - r.e[k]) > 1e-9 * S[k].n) ok = 0;
            o += S[k].n;
        }
        for (int i = 0; i < 3 * N; i++) {
            double d = fabs(r.f[i] - fref[i]);
            df = fmax(df, d);
            if (d > tol_f + allow_f + (g_f32 ? 0.0 : 1e-7 * fabs(fref[i]))) ok = 0;
        }
        const jval *sref = jget(ref, "stress_eV_per_A3");
        if (!members && sref && sref->type == J_ARR) {
            double st[9], dh[3][3] = {{0}}, vol = fabs(ref_volume(S[0].cell));
            CHECK(jnumbers(sref, st, 9) == 9);
            /* float32: the diagonal only (the correction's differences need float64) */
            for (int row = 0; row < 3 && !g_f32; row++)
                for (int d = row + 1; d < 3; d++) dh[row][d] = dE_dcell(ctx64, &S[0], row, d);
            /* torchmd-net's virial: W[c][d] + sum_{row<d} dE/dH[row][d] H[row][c] at (d, c) */
            double tm[9];
            for (int d = 0; d < 3; d++)
                for (int c = 0; c < 3; c++) {
                    tm[3 * d + c] = r.w[0][3 * c + d];
                    for (int row = 0; row < d; row++)
                        tm[3 * d + c] += dh[row][d] * S[0].cell[3 * row + c];
                }
            for (int k = 0; k < 9; k++) {
                int a = k / 3, b = k % 3;
                double mine = a == b ? -r.w[0][k] / vol
                                     : -0.5 * (tm[3 * a + b] + tm[3 * b + a]) / vol;
                if (a == b || !g_f32) dst = fmax(dst, fabs(mine - st[k]));
                /* nnpops' virial is symmetric (the exact strain derivative) */
                if (fabs(r.w[0][3 * a + b] - r.w[0][3 * b + a]) / vol > (g_f32 ? 1e-6 : 1e-10))
                    ok = 0;
            }
            if (dst > tol_s) ok = 0;
            worst_s = fmax(worst_s, dst);
        }
        /* atomic virials sum to the virial */
        o = 0;
        for (int k = 0; k < ns; k++) {
            for (int c = 0; c < 9; c++) {
                double sum = 0;
                for (int i = o; i < o + S[k].n; i++) sum += r.av[9 * i + c];
                if (fabs(sum - r.w[k][c]) > 1e-9 * (1 + fabs(r.w[k][c]))) ok = 0;
            }
            o += S[k].n;
        }
        printf("%-22s %5d %12.3e %12.3e %12.3e %12.3e %12.3e %s\n", name, N, de, df, da, dst,
               allow_f, ok ? "" : "FAIL");
        worst_e = fmax(worst_e, de), worst_f = fmax(worst_f, df), worst_a = fmax(worst_a, da);
        if (!ok) fails++;
        result_free(&r);
        free(fref), free(aref), free(share), free(allow_a);
        for (int k = 0; k < ns; k++) tn_sys_free(&S[k]);
    }
    printf("worst %s %s: |dE|/N %.3e eV, max |dF| %.3e eV/A, max |dEi| %.3e eV, max |d stress| "
           "%.3e eV/A^3\n",
           g_model, g_f32 ? "float32" : "float64", worst_e, worst_f, worst_a, worst_s);
    nnpops_context_destroy(ctx), nnpops_context_destroy(ctx64);
    nnpops_model_destroy(m), nnpops_model_destroy(m64);
    jfree(root);
    return fails ? 1 : 0;
}

/* Forces of atoms [0, n_check) against central differences of the energy. */
static double fd_forces(nnpops_context *ctx, tn_sys *s, int n_check, const char *what) {
    result r;
    CHECK_OK(run(ctx, s, 1, NULL, -1, &r));
    const double h = 1e-5;
    double worst = 0;
    for (int i = 0; i < n_check; i++)
        for (int d = 0; d < 3; d++) {
            double x0 = s->x[3 * i + d];
            s->x[3 * i + d] = x0 + h;
            double ep = energy_of(ctx, s, NULL);
            s->x[3 * i + d] = x0 - h;
            double em = energy_of(ctx, s, NULL);
            s->x[3 * i + d] = x0;
            double fd = -(ep - em) / (2 * h), diff = fabs(fd - r.f[3 * i + d]);
            worst = fmax(worst, diff);
            if (diff > 1e-6 + 1e-6 * fabs(fd)) {
                fprintf(stderr, "%s atom %d dir %d: analytic %.10f, finite difference %.10f\n",
                        what, i, d, r.f[3 * i + d], fd);
                exit(1);
            }
        }
    result_free(&r);
    return worst;
}

static int case_fd(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    nnpops_model *m;
    nnpops_context *ctx;
    if (!open_model(0, &m, &ctx)) return 1;
    tn_sys s;
    tn_sys_load(root, "mol_mol_CH3SH", &s);
    printf("open CH3SH: worst |F - F_fd| %.3e eV/A\n", fd_forces(ctx, &s, s.n, "CH3SH"));
    tn_sys_free(&s);
    /* a sheared (triclinic) copy of water8_pbc: an 8 A cell, atoms see their own images */
    tn_sys t;
    tn_sys_load_sheared(root, &t);
    double c0[9], *x0 = malloc(sizeof(double) * 3 * (size_t)t.n);
    printf("triclinic water8: worst |F - F_fd| %.3e eV/A (first 6 atoms)\n",
           fd_forces(ctx, &t, 6, "triclinic water8"));
    memcpy(c0, t.cell, sizeof c0);
    memcpy(x0, t.x, sizeof(double) * 3 * (size_t)t.n);
    result r;
    CHECK_OK(run(ctx, &t, 1, NULL, -1, &r));
    const double hs = 1e-6;
    double worst = 0;
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++) {
            double ev[2];
            for (int sg = 0; sg < 2; sg++) {
                tn_sys_strain(&t, c0, x0, p, q, sg ? -hs : hs);
                ev[sg] = energy_of(ctx, &t, NULL);
            }
            const double dEde = (ev[0] - ev[1]) / (2 * hs); /* = -W_pq */
            const double diff = fabs(dEde + r.w[0][3 * p + q]);
            worst = fmax(worst, diff);
            if (diff > 1e-6 + 1e-6 * fabs(dEde)) {
                fprintf(stderr, "strain %d%d: -W %.10f, finite difference %.10f\n", p, q,
                        -r.w[0][3 * p + q], dEde);
                return 1;
            }
        }
    printf("triclinic water8: worst |W - W_fd| %.3e eV\n", worst);
    result_free(&r);
    free(x0);
    tn_sys_free(&t);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    jfree(root);
    return 0;
}

static int case_replica(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    nnpops_model *m;
    nnpops_context *ctx;
    if (!open_model(0, &m, &ctx)) return 1;
    tn_info t;
    read_info(m, &t);
    tn_sys a, b;
    tn_sys_load(root, "water8_pbc", &a);
    tn_sys_load(root, "water8_x2_pbc", &b);
    CHECK(b.n == 8 * a.n);
    result ra, rb;
    CHECK_OK(run(ctx, &a, 1, NULL, -1, &ra));
    CHECK_OK(run(ctx, &b, 1, NULL, -1, &rb));
    const double e8 = 8 * (ra.e[0] - t.mean) + t.mean;
    const jval *ref = jget(jget(jget(jget(root, "models"), g_model), "systems"), "water8_x2_pbc");
    printf("8 x water8_pbc %.10f, water8_x2_pbc %.10f, torchmd-net %.10f\n", e8, rb.e[0],
           ref ? jget(ref, "energy_eV")->num : NAN);
    CHECK(fabs(e8 - rb.e[0]) <= 1e-9 * b.n);
    if (ref) CHECK(fabs(e8 - jget(ref, "energy_eV")->num) <= 1e-8 * b.n);
    /* the replica's first atoms are the small cell's */
    for (int i = 0; i < a.n; i++)
        CHECK(fabs((ra.ae[i] - t.mean / a.n) - (rb.ae[i] - t.mean / b.n)) <= 1e-9);
    for (int i = 0; i < 3 * a.n; i++) CHECK(fabs(ra.f[i] - rb.f[i]) <= 1e-8);
    for (int k = 0; k < 9; k++) CHECK(fabs(8 * ra.w[0][k] - rb.w[0][k]) <= 1e-7);
    result_free(&ra), result_free(&rb);
    tn_sys_free(&a), tn_sys_free(&b);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    jfree(root);
    return 0;
}

static int case_batch(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    nnpops_model *m;
    nnpops_context *ctx;
    if (!open_model(g_f32, &m, &ctx)) return 1;
    const char *names[3] = {"mol_13_f0", "water8_pbc", "cluster_BSiPBrI_24"};
    const double q[3] = {0.0, 1.0, -1.0};
    const int cpu = !strcmp(g_device, "cpu");
    tn_sys S[3];
    for (int k = 0; k < 3; k++) tn_sys_load(root, names[k], &S[k]);
    result rb;
    CHECK_OK(run(ctx, S, 3, q, -1, &rb));
    int o = 0;
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        result r1;
        CHECK_OK(run(ctx, &S[k], 1, &q[k], -1, &r1));
        /* each system is computed alone in a batch too: the same bits on the CPU (the virial's
         * sums run over the batch's pair order, so to rounding); on the GPU the sums over a
         * system's atoms and pairs run in the batch's layout: to rounding */
        worst = fmax(worst, fabs(r1.e[0] - rb.e[k]));
        if (cpu)
            CHECK(r1.e[0] == rb.e[k]);
        else
            CHECK(fabs(r1.e[0] - rb.e[k]) <= 1e-12 * (1.0 + fabs(rb.e[k])));
        for (int c = 0; c < 9; c++) CHECK(fabs(r1.w[0][c] - rb.w[k][c]) <= 1e-9);
        for (int i = 0; i < 3 * S[k].n; i++) {
            worst = fmax(worst, fabs(r1.f[i] - rb.f[3 * o + i]));
            CHECK(fabs(r1.f[i] - rb.f[3 * o + i]) <= 1e-12);
        }
        for (int i = 0; i < S[k].n; i++)
            CHECK(cpu ? r1.ae[i] == rb.ae[o + i] : fabs(r1.ae[i] - rb.ae[o + i]) <= 1e-12);
        /* the charge matters */
        result r0;
        CHECK_OK(run(ctx, &S[k], 1, NULL, -1, &r0));
        if (q[k] != 0.0) CHECK(fabs(r0.e[0] - r1.e[0]) > 1e-6);
        result_free(&r0);
        result_free(&r1);
        o += S[k].n;
    }
    printf("batch vs one by one: worst %.3e\n", worst);
    /* option threads (the CPU's): the same bits */
    if (!cpu) {
        result_free(&rb);
        for (int k = 0; k < 3; k++) tn_sys_free(&S[k]);
        nnpops_context_destroy(ctx);
        nnpops_model_destroy(m);
        jfree(root);
        return 0;
    }
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "threads", "3"));
    result rt;
    CHECK_OK(run(ctx, S, 3, q, -1, &rt));
    nnpops_stats stats = {.struct_size = sizeof stats};
    CHECK_OK(nnpops_context_stats(ctx, &stats));
    printf("threads 3: %lld threads used\n", (long long)stats.cpu_threads);
    CHECK(stats.cpu_threads >= 1 && stats.cpu_threads <= 3);
    CHECK(memcmp(rt.e, rb.e, sizeof(double) * 3) == 0);
    CHECK(memcmp(rt.f, rb.f, sizeof(double) * 3 * (size_t)o) == 0);
    CHECK(memcmp(rt.ae, rb.ae, sizeof(double) * (size_t)o) == 0);
    CHECK(memcmp(rt.w, rb.w, sizeof(double) * 9 * 3) == 0);
    result_free(&rt);
    result_free(&rb);
    for (int k = 0; k < 3; k++) tn_sys_free(&S[k]);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    jfree(root);
    return 0;
}

/* A molecule split into halves A and B; call 1 has A local and B as ghosts, call 2 the reverse. */
static int case_ghosts(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    nnpops_model *m;
    nnpops_context *ctx;
    if (!open_model(0, &m, &ctx)) return 1;
    tn_sys s;
    tn_sys_load(root, "mol_50_f0", &s);
    result whole;
    CHECK_OK(run(ctx, &s, 1, NULL, -1, &whole));
    const int n = s.n, h = n / 2;
    /* atoms in an order: by x, so that each half is a slab */
    int *order = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (s.x[3 * order[j]] < s.x[3 * order[i]]) {
                int tmp = order[i];
                order[i] = order[j];
                order[j] = tmp;
            }
    double esum = 0, *fsum = calloc(3 * (size_t)n, sizeof(double));
    double wsum[9] = {0};
    for (int part = 0; part < 2; part++) {
        tn_sys p = s;
        p.z = malloc(sizeof(int32_t) * (size_t)n);
        p.x = malloc(sizeof(double) * 3 * (size_t)n);
        int *src = malloc(sizeof(int) * (size_t)n), nl = part ? n - h : h;
        for (int k = 0; k < n; k++) {
            /* local atoms first: part 0 the first h of the order, part 1 the rest */
            src[k] = part ? order[(h + k) % n] : order[k];
            p.z[k] = s.z[src[k]];
            memcpy(p.x + 3 * k, s.x + 3 * src[k], sizeof(double) * 3);
        }
        result r;
        CHECK_OK(run(ctx, &p, 1, NULL, nl, &r));
        esum += r.e[0];
        for (int k = 0; k < n; k++) {
            if (k < nl) CHECK(fabs(r.ae[k] - whole.ae[src[k]]) <= 1e-10);
            else CHECK(r.ae[k] == 0.0);
            for (int d = 0; d < 3; d++) fsum[3 * src[k] + d] += r.f[3 * k + d];
        }
        for (int c = 0; c < 9; c++) wsum[c] += r.w[0][c];
        result_free(&r);
        free(p.z), free(p.x), free(src);
    }
    double df = 0;
    for (int i = 0; i < 3 * n; i++) df = fmax(df, fabs(fsum[i] - whole.f[i]));
    printf("halves: E %.10f (whole %.10f), max |dF| %.3e\n", esum, whole.e[0], df);
    CHECK(fabs(esum - whole.e[0]) <= 1e-9 * n);
    CHECK(df <= 1e-9);
    for (int c = 0; c < 9; c++) CHECK(fabs(wsum[c] - whole.w[0][c]) <= 1e-8);
    free(fsum), free(order);
    result_free(&whole);
    tn_sys_free(&s);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    jfree(root);
    return 0;
}

/* ---- broken model files ---------------------------------------------------------------------- */

/* The model file with `from` (first occurrence) replaced by `to`, written next to a link to the
 * weights; loads it and checks the status and that the message holds `needle` and "FILE:LINE". */
static int expect_fail(const char *yaml, const char *wdir, const char *from, const char *to,
                       nnpops_status want, const char *needle, int line) {
    const char *p = strstr(yaml, from);
    CHECK(p != NULL);
    size_t a = (size_t)(p - yaml), lf = strlen(from), lt = strlen(to), ly = strlen(yaml);
    char *text = malloc(ly - lf + lt + 1);
    memcpy(text, yaml, a);
    memcpy(text + a, to, lt);
    memcpy(text + a + lt, p + lf, ly - a - lf + 1);
    static int k = 0;
    char name[64], full[4200];
    snprintf(name, sizeof name, "bad_tn_%d_%d.yaml", (int)getpid(), k++);
    snprintf(full, sizeof full, "%s/%s", wdir, name);
    FILE *f = fopen(full, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    free(text);
    nnpops_model *m = NULL;
    nnpops_status st = nnpops_model_load(full, "cpu", NNPOPS_FLOAT64, &m);
    const char *msg = nnpops_last_error();
    char where[64];
    snprintf(where, sizeof where, "%s:%d:", name, line);
    printf("%-44s -> %s: %s\n", to, nnpops_status_name(st), msg);
    remove(full);
    if (st != want || !strstr(msg, needle) || (line > 0 && !strstr(msg, where))) {
        fprintf(stderr, "expected %s with '%s' at %s\n", nnpops_status_name(want), needle, where);
        nnpops_model_destroy(m);
        return 1;
    }
    return 0;
}

static int line_of(const char *text, const char *needle) {
    const char *p = strstr(text, needle);
    CHECK(p != NULL);
    int line = 1;
    for (const char *c = text; c < p; c++) line += *c == '\n';
    return line;
}

static int case_bad_files(void) {
    nnpops_model *m;
    nnpops_context *ctx;
    if (!open_model(0, &m, &ctx)) return 1;
    tn_info t;
    read_info(m, &t);
    size_t len;
    char *yaml = read_text(t.yaml_path, &len);
    CHECK(yaml != NULL);
    /* a directory beside the model's, so that weights.file resolves: the model's own directory */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", t.yaml_path);
    *strrchr(dir, '/') = '\0';
    int fails = 0;
    fails += expect_fail(yaml, dir, "\n  activation: ", "\n  x_activation: ",
                         NNPOPS_ERROR_MODEL_FORMAT, "unknown key 'x_activation' in tensornet",
                         line_of(yaml, "\n  activation: ") + 1);
    fails += expect_fail(yaml, dir, "\n  activation: ", "\n  activation: gelu # ",
                         NNPOPS_ERROR_MODEL_FORMAT, "tensornet.activation 'gelu' is not supported",
                         line_of(yaml, "\n  activation: ") + 1);
    fails += expect_fail(yaml, dir, "\n  trainable_rbf: ", "\n  trainable_rbf: maybe # ",
                         NNPOPS_ERROR_MODEL_FORMAT, "tensornet.trainable_rbf",
                         line_of(yaml, "\n  trainable_rbf: ") + 1);
    fails += expect_fail(yaml, dir, "\n  box_vecs: ", "\n  box_vecs: [[1, 0, 0]] # ",
                         NNPOPS_ERROR_MODEL_FORMAT, "tensornet.box_vecs must be null or a 3x3",
                         line_of(yaml, "\n  box_vecs: ") + 1);
    fails += expect_fail(yaml, dir, "\n  std: ", "\n  # std: ", NNPOPS_ERROR_MODEL_FORMAT,
                         "std", -1);
    fails += expect_fail(yaml, dir, "\n  mean: ", "\n  mean: [1] # ", NNPOPS_ERROR_MODEL_FORMAT,
                         "tensornet.mean", line_of(yaml, "\n  mean: ") + 1);
    fails += expect_fail(yaml, dir, "\n  equivariance_invariance_group: \"O(3)\"",
                         "\n  equivariance_invariance_group: \"SE(3)\"", NNPOPS_ERROR_MODEL_FORMAT,
                         "'SE(3)' is not supported",
                         line_of(yaml, "\n  equivariance_invariance_group: ") + 1);
    fails += expect_fail(yaml, dir, "\n  embedding_dimension: ", "\n  embedding_dimension: 0 # ",
                         NNPOPS_ERROR_MODEL_FORMAT,
                         "tensornet.embedding_dimension = 0 is out of range",
                         line_of(yaml, "\n  embedding_dimension: ") + 1);
    fails += expect_fail(yaml, dir, "\n  priors:\n", "\n  priors:\n    - {type: D2, cutoff: 1}\n",
                         NNPOPS_ERROR_MODEL_FORMAT, "prior type 'D2' is not supported",
                         line_of(yaml, "\n  priors:\n") + 2);
    /* a wrong basis size: the weights' shapes name the tensor */
    char from[64], to[64];
    const int R = atoi(strstr(yaml, "\n  num_rbf: ") + strlen("\n  num_rbf: "));
    snprintf(from, sizeof from, "\n  num_rbf: %d\n", R);
    snprintf(to, sizeof to, "\n  num_rbf: %d\n", R + 1);
    char needle[64];
    snprintf(needle, sizeof needle, "' has shape [%d], expected [%d]", R, R + 1);
    fails += expect_fail(yaml, dir, from, to, NNPOPS_ERROR_MODEL_FORMAT, needle, -1);
    /* a species beyond the embedding table */
    const int max_z = atoi(strstr(yaml, "\n  max_z: ") + strlen("\n  max_z: "));
    snprintf(from, sizeof from, "\n  max_z: %d\n", max_z);
    fails += expect_fail(yaml, dir, from, "\n  max_z: 9\n", NNPOPS_ERROR_MODEL_FORMAT,
                         "is in species but not below tensornet.max_z = 9",
                         line_of(yaml, "\n  max_z: ") + 1);
    free(yaml);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return fails ? 1 : 0;
}

/* The model file of an expnorm model without ZBL with its units changed: lengths in nm (cutoffs
 * divided by 10; the basis lives in exp(-alpha r) space, the same function of the distance) gives
 * the same energies and forces; energies in kcal/mol (nothing else changed) gives the energies
 * divided by 23.06... eV per kcal/mol. */
static int case_units(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    nnpops_model *m;
    nnpops_context *ctx;
    if (!open_model(0, &m, &ctx)) return 1;
    tn_info t;
    read_info(m, &t);
    size_t len;
    char *yaml = read_text(t.yaml_path, &len);
    CHECK(yaml != NULL && !t.has_zbl && strstr(yaml, "\n  rbf_type: expnorm\n"));
    CHECK(strstr(yaml, "\n  cutoff_lower: 0.0\n") != NULL);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", t.yaml_path);
    *strrchr(dir, '/') = '\0';
    tn_sys s[2];
    tn_sys_load(root, "mol_mol_CH3SH", &s[0]);
    tn_sys_load(root, "water8_pbc", &s[1]);
    result r0[2];
    for (int k = 0; k < 2; k++) CHECK_OK(run(ctx, &s[k], 1, NULL, -1, &r0[k]));
    for (int variant = 0; variant < 2; variant++) {
        /* the YAML with one or two lines replaced */
        char *text = malloc(len + 256), *o = text;
        const char *units = "units: {length: angstrom, energy: eV}";
        const char *cut = "\n  cutoff_upper: ";
        const char *pu = strstr(yaml, units), *pc = strstr(yaml, cut);
        CHECK(pu && pc && pu < pc);
        memcpy(o, yaml, (size_t)(pu - yaml)), o += pu - yaml;
        o += sprintf(o, "%s", variant ? "units: {length: angstrom, energy: kcal/mol}"
                                      : "units: {length: nm, energy: eV}");
        const char *rest = pu + strlen(units);
        memcpy(o, rest, (size_t)(pc - rest)), o += pc - rest;
        o += sprintf(o, "%s%.17g", cut, variant ? t.cutoff : t.cutoff / 10);
        const char *eol = strchr(pc + strlen(cut), '\n');
        strcpy(o, eol);
        char full[4200];
        snprintf(full, sizeof full, "%s/units_tn_%d_%d.yaml", dir, (int)getpid(), variant);
        FILE *f = fopen(full, "w");
        CHECK(f != NULL);
        fputs(text, f);
        fclose(f);
        free(text);
        nnpops_model *mu;
        nnpops_context *cu;
        nnpops_status st = nnpops_model_load(full, "cpu", NNPOPS_FLOAT64, &mu);
        remove(full);
        if (st != NNPOPS_OK) {
            fprintf(stderr, "%s: %s\n", nnpops_status_name(st), nnpops_last_error());
            return 1;
        }
        CHECK(fabs(nnpops_model_cutoff(mu) - t.cutoff) <= 1e-12);
        CHECK_OK(nnpops_context_create(mu, &cu));
        const double scale = variant ? 1.0 / 23.060547830619 : 1.0;
        double de = 0, df = 0;
        for (int k = 0; k < 2; k++) {
            result r;
            CHECK_OK(run(cu, &s[k], 1, NULL, -1, &r));
            de = fmax(de, fabs(r.e[0] - scale * r0[k].e[0]) / s[k].n);
            for (int i = 0; i < 3 * s[k].n; i++)
                df = fmax(df, fabs(r.f[i] - scale * r0[k].f[i]));
            for (int c = 0; c < 9; c++)
                CHECK(fabs(r.w[0][c] - scale * r0[k].w[0][c]) <= 1e-9 * (1 + fabs(r0[k].w[0][c])));
            result_free(&r);
        }
        printf("%s: |dE|/N %.3e, max |dF| %.3e\n", variant ? "energy kcal/mol" : "length nm", de,
               df);
        CHECK(de <= 1e-12 && df <= 1e-10);
        nnpops_context_destroy(cu);
        nnpops_model_destroy(mu);
    }
    for (int k = 0; k < 2; k++) result_free(&r0[k]), tn_sys_free(&s[k]);
    free(yaml);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    jfree(root);
    return 0;
}

/* The ensemble model g_model (tn_a_ens: members tn_a, tn_a_member2, as reference.json's
 * "ensembles" entry "tn_a+tn_a_member2" lists them) against its members' reference values:
 * energies |dE|/N and forces at the reference bounds, for the mean, each member energy and each
 * member selected with option ensemble_member. */
static int case_ensemble(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    const jval *ens = jget(jget(root, "ensembles"), "tn_a+tn_a_member2");
    CHECK(ens != NULL);
    const jval *names = jget(ens, "members");
    CHECK(names != NULL && names->n == 2);
    enum { M = 2 };
    const jval *mref[M];
    for (int k = 0; k < M; k++) {
        mref[k] = jget(jget(jget(root, "models"), names->items[k]->str), "systems");
        CHECK(mref[k] != NULL);
    }
    nnpops_model *m;
    nnpops_context *ctx, *one[M];
    if (!open_model(g_f32, &m, &ctx)) return 1;
    CHECK(nnpops_model_ensemble_size(m) == M);
    CHECK(!strcmp(nnpops_model_type(m), "tensornet"));
    for (int k = 0; k < M; k++) {
        CHECK_OK(nnpops_context_create(m, &one[k]));
        CHECK_OK(nnpops_context_set_option(one[k], NNPOPS_OPTION_ENSEMBLE_MEMBER, k));
    }
    /* out of range */
    CHECK(nnpops_context_set_option(ctx, NNPOPS_OPTION_ENSEMBLE_MEMBER, M) ==
          NNPOPS_ERROR_INVALID_ARGUMENT);
    int fails = 0, compared = 0;
    double worst_e = 0, worst_f = 0;
    for (int si = 0; si < mref[0]->n; si++) {
        const char *name = mref[0]->keys[si];
        const jval *r[M] = {mref[0]->items[si], jget(mref[1], name)};
        if (!r[1] || jget(r[0], "members")) continue; /* systems of both members, no batches */
        if (tn_ref_asan_skip(name)) continue;
        tn_sys S;
        tn_sys_load(root, name, &S);
        const int N = S.n;
        double eref[M], *fref[M], tol_e = 1e-8, tol_f = 1e-7;
        for (int k = 0; k < M; k++) {
            eref[k] = jget(r[k], "energy_eV")->num;
            fref[k] = ref_numbers(r[k], "forces_eV_per_A", 3 * N);
            if (g_f32) {
                const jval *te = jget(r[k], "torch_float32_dE_per_atom");
                const jval *tf = jget(r[k], "torch_float32_dF_max");
                tol_e = fmax(tol_e, fmax(5e-6, te ? 2 * te->num : 0));
                tol_f = fmax(tol_f, fmax(5e-4, tf ? 2 * tf->num : 0));
            }
        }
        uint8_t pbc[3] = {1, 1, 1};
        nnpops_inputs in = {.struct_size = sizeof in, .n_atoms = N, .n_local = -1,
                            .n_systems = 1, .atomic_numbers = S.z, .positions = S.x,
                            .cells = S.periodic ? S.cell : NULL, .pbc = S.periodic ? pbc : NULL};
        double e, em[M], *f = calloc(3 * (size_t)N, sizeof(double));
        double *ae = calloc((size_t)N, sizeof(double));
        nnpops_outputs out = {.struct_size = sizeof out, .energies = &e, .forces = f,
                              .atomic_energies = ae, .member_energies = em};
        CHECK_OK(nnpops_compute(ctx, &in, &out));
        int ok = 1;
        double de = fabs(e - 0.5 * (eref[0] + eref[1])) / N, df = 0, sum = 0;
        for (int k = 0; k < M; k++) de = fmax(de, fabs(em[k] - eref[k]) / N);
        if (fabs(e - 0.5 * (em[0] + em[1])) > 1e-12 * (1 + fabs(e))) ok = 0;
        for (int i = 0; i < N; i++) sum += ae[i];
        if (fabs(sum - e) > 1e-9 * N) ok = 0;
        for (int i = 0; i < 3 * N; i++) {
            const double fm = 0.5 * (fref[0][i] + fref[1][i]), d = fabs(f[i] - fm);
            df = fmax(df, d);
            if (d > tol_f + (g_f32 ? 0.0 : 1e-7 * fabs(fm))) ok = 0;
        }
        for (int k = 0; k < M; k++) {
            nnpops_outputs o1 = {.struct_size = sizeof o1, .energies = &e, .forces = f};
            CHECK_OK(nnpops_compute(one[k], &in, &o1));
            de = fmax(de, fabs(e - eref[k]) / N);
            for (int i = 0; i < 3 * N; i++) {
                const double d = fabs(f[i] - fref[k][i]);
                df = fmax(df, d);
                if (d > tol_f + (g_f32 ? 0.0 : 1e-7 * fabs(fref[k][i]))) ok = 0;
            }
        }
        if (de > tol_e) ok = 0;
        printf("%-22s %5d |dE|/N %.3e  max|dF| %.3e %s\n", name, N, de, df, ok ? "" : "FAIL");
        worst_e = fmax(worst_e, de), worst_f = fmax(worst_f, df);
        fails += !ok;
        compared++;
        free(f), free(ae);
        for (int k = 0; k < M; k++) free(fref[k]);
        tn_sys_free(&S);
    }
    printf("worst %s %s over %d systems: |dE|/N %.3e eV, max |dF| %.3e eV/A\n", g_model,
           g_f32 ? "float32" : "float64", compared, worst_e, worst_f);
    CHECK(compared >= 5);
    if (!g_f32) { /* an ensemble file that does not hold together */
        size_t len;
        char *yaml = read_text(nnpops_model_path(m), &len);
        CHECK(yaml != NULL);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", nnpops_model_path(m));
        *strrchr(dir, '/') = '\0';
        fails += expect_fail(yaml, dir, "\n  ensemble_size: 2\n", "\n  ensemble_size: 3\n",
                             NNPOPS_ERROR_MODEL_FORMAT, "expected exactly 3 numbers", -1);
        fails += expect_fail(yaml, dir, "\n  ensemble_size: 2\n", "\n  ensemble_size: 0\n",
                             NNPOPS_ERROR_MODEL_FORMAT, "tensornet.ensemble_size = 0 is out of range",
                             line_of(yaml, "\n  ensemble_size: ") + 1);
        fails += expect_fail(yaml, dir, "\n  ensemble_size: 2\n", "\n  ensemble_size: 1\n",
                             NNPOPS_ERROR_MODEL_FORMAT, "tensornet.mean", -1);
        free(yaml);
    }
    for (int k = 0; k < M; k++) nnpops_context_destroy(one[k]);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    jfree(root);
    return fails ? 1 : 0;
}

/* nnpops_context_system_energy: the energy each system gets once (the model's `mean`), for the
 * ensemble and each member, against what a step does with it: an atom alone gets e + c, the
 * same atom beside a ghost far out of range e + c / 2 (the constant is shared over the atoms of
 * the call, ghosts counted), so c = 2 (E1 - E2); in kcal/mol too; a member out of range is an
 * error. */
static int case_system_energy(void) {
    nnpops_model *m;
    nnpops_context *ctx;
    if (!open_model(0, &m, &ctx)) return 1;
    const int ens = nnpops_model_ensemble_size(m);
    CHECK(ens >= 1 && ens <= 8);
    const double far = 4.0 * nnpops_model_interaction_range(m) + 10.0;
    const double x[6] = {0, 0, 0, far, 0, 0};
    const int32_t z[2] = {8, 8};
    double e[2], me[2][8];
    for (int unit = 0; unit < 2; unit++) {
        CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_ENERGY_UNIT, unit));
        for (int k = 0; k < 2; k++) {
            nnpops_inputs in = {sizeof in, 1 + k, 1, 1, z, x, NULL, NULL, NULL, NULL};
            nnpops_outputs out = {sizeof out, &e[k], NULL, NULL, NULL, NULL, NULL};
            out.member_energies = ens > 1 ? me[k] : NULL;
            CHECK_OK(nnpops_compute(ctx, &in, &out));
        }
        double c;
        CHECK_OK(nnpops_context_system_energy(ctx, -1, &c));
        printf("%s: system energy %.12g (%s), from the step %.12g\n", g_model, c,
               unit ? "kcal/mol" : "eV", 2 * (e[0] - e[1]));
        CHECK(c != 0.0 && fabs(c - 2 * (e[0] - e[1])) <= 1e-9 * (1 + fabs(c)));
        double sum = 0.0;
        for (int k = 0; k < ens && ens > 1; k++) {
            double ck;
            CHECK_OK(nnpops_context_system_energy(ctx, k, &ck));
            CHECK(fabs(ck - 2 * (me[0][k] - me[1][k])) <= 1e-9 * (1 + fabs(ck)));
            sum += ck;
        }
        if (ens > 1) CHECK(fabs(sum / ens - c) <= 1e-12 * (1 + fabs(c)));
        if (unit == 0) {
            double c_eV = c;
            CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_ENERGY_UNIT, 1));
            CHECK_OK(nnpops_context_system_energy(ctx, -1, &c));
            CHECK(fabs(c - 23.060547830619 * c_eV) <= 1e-12 * fabs(c));
        }
    }
    double c;
    CHECK(nnpops_context_system_energy(ctx, ens, &c) == NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK(nnpops_context_system_energy(ctx, -2, &c) == NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK(nnpops_context_system_energy(ctx, -1, NULL) == NNPOPS_ERROR_INVALID_ARGUMENT);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s reference|fd|replica|batch|ghosts|bad_files|units|ensemble|system_energy MODEL "
                "[f64|f32 [DEVICE]]\n",
                argv[0]);
        return 2;
    }
    g_model = argv[2];
    g_f32 = argc > 3 && !strcmp(argv[3], "f32");
    if (argc > 4) g_device = argv[4];
    if (strcmp(g_device, "cpu") != 0 && nnpops_cuda_device_count() == 0) {
        fprintf(stderr, "no CUDA device: skipped\n");
        return SKIP_RETURN;
    }
    if (!strcmp(argv[1], "reference")) return case_reference();
    if (!strcmp(argv[1], "fd")) return case_fd();
    if (!strcmp(argv[1], "replica")) return case_replica();
    if (!strcmp(argv[1], "batch")) return case_batch();
    if (!strcmp(argv[1], "ghosts")) return case_ghosts();
    if (!strcmp(argv[1], "bad_files")) return case_bad_files();
    if (!strcmp(argv[1], "units")) return case_units();
    if (!strcmp(argv[1], "ensemble")) return case_ensemble();
    if (!strcmp(argv[1], "system_energy")) return case_system_energy();
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
