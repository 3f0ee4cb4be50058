/*
 * test_gpu_model.c - the ANI models on the GPU through the public API (label gpu; exit 77 when
 * nnpops_cuda_device_count() == 0).  One CTest entry per case:
 *
 *   reference MODEL PREC  every system of $NNPOPS_SHARED_DIR/reference/MODEL-torchani.json
 *                         (torchani, float64) on device "cuda": float64 |dE|/N <= 1e-7 eV,
 *                         |dF| <= 1e-6 eV/A (+ 1e-7 |F|), |dstress| <= 1e-8 eV/A^3, |dE_atom| <=
 *                         1e-7 eV (+ 5e-9 A |F_atom|); float32 |dE|/N <= 1e-5 eV, |dF| <= 1e-3 eV/A
 *                         (stress 1e-5, atomic 1e-4).  The small force-proportional terms are the
 *                         CPU model tests' (tests/model/test_ani.c): the reference carries noise of
 *                         ~1e-8 relative that shows only on the high-force conformer 304_f0.
 *   cpu_match MODEL PREC  GPU against the CPU path of the same precision on every reference system:
 *                         energy, forces, virial, atomic energies, atomic virials, member energies
 *   fd                    float64 central differences of the GPU energy against the GPU forces
 *                         (a molecule, a small periodic box) and strain derivatives against the virial
 *                         (dE/d eps_ab = -W_ba)
 *   batch                 all reference systems in one call equal the systems one by one
 *   batch_f32             float32, all reference systems in one call (interleaved), each system
 *                         within case_reference's float32 tolerances of the reference: the batch's
 *                         597 H, 275 C and 135 O run on three concurrent cuBLAS branches (3xTF32),
 *                         N, S, F and Cl on the small-n path beside them -- the float32 path of a
 *                         protein-sized step, which no single reference system reaches
 *   ghosts                n_local < n_atoms against the CPU path, also with a species (N, O) only
 *                         among the ghosts: the step's species set (its restricted AEV) holds the
 *                         ghosts' species too (stats.descriptor_length 384 for H, C, N, O)
 *   member                ensemble_member k and member energies against the CPU path
 *   water_box             a 3000-atom periodic water box (emulated: 375) after a 13-atom molecule
 *                         in the same context: the neighbor capacity must grow (rebuild counted)
 *                         and the result equal the CPU path (float64; float32 within cpu_match's
 *                         tolerances: H and O on the 3xTF32 products, after three molecules of
 *                         it alone, so that the species set's stacked first layers are made
 *                         late); the AEV restricted to
 *                         the species present (stats.descriptor_length: 384 entries for alanine's
 *                         H, C, N, O, 128 for water's H, O, of ANI-2x's 1008), the molecule again
 *                         after the box (its set's state reused)
 *   species_sets          one context through the 15 species subsets of alanine's H, C, N, O (its
 *                         atoms of those species), each against the CPU path: the first 8 sets
 *                         run restricted (descriptor_length of the subset), later ones the full
 *                         AEV (1008: the context keeps 8 sets), an early set again restricted
 *   errors                too-close atoms, a singular cell, too many images; the context keeps
 *                         working afterwards; zero atoms and zero local atoms
 *   thread                the same context driven from another thread
 *   tensornet             a tensornet model (tn_a) on "cuda": a charged batch against the CPU;
 *                         an ensemble (tn_a_ens) refused at load
 * On the emulated GPU (tests/emu, emulated.h) the reference, cpu_match, batch, ghosts and member
 * cases take a subset of the reference systems (runs_system) and fd a smaller molecule.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "emulated.h"
#include "nnpops/nnpops.h"
#include "reference.h"
#include "structures.h"

typedef struct result {
    double energy, virial[9];
    double *forces, *atomic, *atomic_virials, *member;
} result;

static result *new_result(int64_t n, int ens) {
    result *r = calloc(1, sizeof *r);
    r->forces = calloc(3 * n + 3, sizeof(double));
    r->atomic = calloc(n + 1, sizeof(double));
    r->atomic_virials = calloc(9 * n + 9, sizeof(double));
    r->member = calloc(ens + 1, sizeof(double));
    return r;
}

static void free_result(result *r) {
    free(r->forces);
    free(r->atomic);
    free(r->atomic_virials);
    free(r->member);
    free(r);
}

static nnpops_status run(nnpops_context *ctx, int64_t n, int64_t n_local, const int32_t *z,
                         const double *x, const double *cell, const uint8_t *pbc, result *r,
                         int all) {
    nnpops_inputs in = {sizeof in, n, n_local, 1, z, x, NULL, cell, pbc};
    nnpops_outputs out = {sizeof out, &r->energy, r->forces, r->virial,
                          all ? r->atomic : NULL, all ? r->atomic_virials : NULL,
                          all ? r->member : NULL};
    return nnpops_compute(ctx, &in, &out);
}

static void load(const char *name, const char *device, nnpops_precision p, nnpops_model **m,
                 nnpops_context **c) {
    CHECK_OK(nnpops_model_load(name, device, p, m));
    CHECK_OK(nnpops_context_create(*m, c));
}

/* The same model on the GPU and on the CPU, a context each. */
typedef struct pair {
    nnpops_model *mg, *mc;
    nnpops_context *cg, *cc;
} pair;

static pair load_pair(const char *name, nnpops_precision p) {
    pair q;
    load(name, "cuda", p, &q.mg, &q.cg);
    load(name, "cpu", p, &q.mc, &q.cc);
    return q;
}

static void free_pair(pair *q) {
    nnpops_context_destroy(q->cg);
    nnpops_model_destroy(q->mg);
    nnpops_context_destroy(q->cc);
    nnpops_model_destroy(q->mc);
}

static int missing(const refset *set) { return test_missing_data(set->path); }

/* The reference systems a case runs: every one on a GPU; emulated, those that take every path of
 * the step between them (the set's other systems are more of the same atoms, and the reference
 * set as a whole is compared on the CPU path and on a GPU): a molecule of H, C, N, O (13_f0), one
 * of over 40 atoms (50_f0, the ghost case's), a periodic box with images (water8_pbc), and S, F,
 * Cl (mol_CH3SH, mol_CF2Cl2; ANI-2x only). */
static int runs_system(const refsys *s) {
    if (!TEST_EMULATED) return 1;
    static const char *const subset[] = {"13_f0", "50_f0", "water8_pbc", "mol_CH3SH", "mol_CF2Cl2"};
    for (size_t k = 0; k < sizeof subset / sizeof subset[0]; k++)
        if (!strcmp(s->name, subset[k])) return 1;
    return 0;
}

/* ---- reference ----------------------------------------------------------------------------- */

static int case_reference(const char *model, const char *prec) {
    static refset set;
    if (!ref_load(model, &set)) return missing(&set);
    const int f32 = !strcmp(prec, "f32");
    const ref_tol tol = ref_tolerances(f32);
    nnpops_model *m;
    nnpops_context *ctx;
    load(model, "cuda", f32 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64, &m, &ctx);
    printf("%s %s on %s against torchani float64 (%s)\n", model, prec, nnpops_model_device(m),
           set.path);
    ref_print_header();
    int failures = 0;
    ref_diff worst = {0};
    for (int k = 0; k < set.n; k++) {
        const refsys *s = &set.sys[k];
        if (!runs_system(s)) continue;
        result *r = new_result(s->n, 8);
        CHECK_OK(run(ctx, s->n, -1, s->z, s->x, s->periodic ? s->cell : NULL,
                     s->periodic ? s->pbc : NULL, r, 1));
        const ref_diff d = ref_compare(s, &tol, r->energy, r->forces, r->atomic, r->virial);
        ref_print_row(s, &d, &worst);
        failures += !d.ok;
        free_result(r);
    }
    ref_print_worst(set.n, &worst, &tol);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return failures ? 1 : 0;
}

/* ---- GPU against CPU --------------------------------------------------------------------- */

static double rel_worst(const double *a, const double *b, int64_t n, double atol, double rtol) {
    double w = 0;
    for (int64_t k = 0; k < n; k++) w = fmax(w, fabs(a[k] - b[k]) / (atol + rtol * fabs(b[k])));
    return w;
}

static int case_cpu_match(const char *model, const char *prec) {
    static refset set;
    if (!ref_load(model, &set)) return missing(&set);
    const int f32 = !strcmp(prec, "f32");
    const nnpops_precision p = f32 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64;
    pair q = load_pair(model, p);
    nnpops_context *cg = q.cg, *cc = q.cc;
    const int ens = nnpops_model_ensemble_size(q.mg);
    /* tolerances (absolute + relative): float64 agrees to rounding; float32 to float rounding of
     * the AEV and the GEMMs (different summation orders) */
    const double te = f32 ? 1e-5 : 1e-11, tf = f32 ? 5e-4 : 1e-9, tv = f32 ? 5e-4 : 1e-9;
    int failures = 0;
    printf("%s %s: GPU against CPU (ratio to tolerance; <= 1 passes)\n", model, prec);
    printf("%-18s %8s %8s %8s %8s %8s %8s\n", "system", "energy", "forces", "virial", "atomic",
           "at.vir", "members");
    for (int k = 0; k < set.n; k++) {
        const refsys *s = &set.sys[k];
        if (!runs_system(s)) continue;
        result *g = new_result(s->n, ens), *c = new_result(s->n, ens);
        const double *cell = s->periodic ? s->cell : NULL;
        const uint8_t *pbc = s->periodic ? s->pbc : NULL;
        CHECK_OK(run(cg, s->n, -1, s->z, s->x, cell, pbc, g, 1));
        CHECK_OK(run(cc, s->n, -1, s->z, s->x, cell, pbc, c, 1));
        const double n = s->n;
        const double re = fabs(g->energy - c->energy) / (te * n);
        const double rf = rel_worst(g->forces, c->forces, 3 * s->n, tf, tf);
        const double rv = rel_worst(g->virial, c->virial, 9, tv * n, tv);
        const double ra = rel_worst(g->atomic, c->atomic, s->n, te * 10, te);
        const double rav = rel_worst(g->atomic_virials, c->atomic_virials, 9 * s->n, tv, tv);
        const double rm = rel_worst(g->member, c->member, ens, te * n, te);
        const int ok = re <= 1 && rf <= 1 && rv <= 1 && ra <= 1 && rav <= 1 && rm <= 1;
        printf("%-18s %8.2g %8.2g %8.2g %8.2g %8.2g %8.2g %s\n", s->name, re, rf, rv, ra, rav, rm,
               ok ? "ok" : "FAIL");
        failures += !ok;
        free_result(g);
        free_result(c);
    }
    free_pair(&q);
    return failures ? 1 : 0;
}

/* ---- finite differences -------------------------------------------------------------------- */

static double energy_of(nnpops_context *ctx, int64_t n, const int32_t *z, const double *x,
                        const double *cell, const uint8_t *pbc) {
    double e;
    nnpops_inputs in = {sizeof in, n, -1, 1, z, x, NULL, cell, pbc};
    nnpops_outputs out = {sizeof out, &e, NULL, NULL, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    return e;
}

static int case_fd(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load("ani2x", "cuda", NNPOPS_FLOAT64, &m, &ctx);
    int failures = 0;
    /* (emulated: the 13-atom molecule and every seventh atom, O and H among them; every strain
     * derivative) */
    const char *names[2] = {GPU_OR_EMU("50_f0", "13_f0"), "water8_pbc"};
    for (int q = 0; q < 2; q++) {
        const refsys *s = NULL;
        for (int k = 0; k < set.n; k++)
            if (!strcmp(set.sys[k].name, names[q])) s = &set.sys[k];
        CHECK(s != NULL);
        const double *cell = s->periodic ? s->cell : NULL;
        const uint8_t *pbc = s->periodic ? s->pbc : NULL;
        result *r = new_result(s->n, 8);
        CHECK_OK(run(ctx, s->n, -1, s->z, s->x, cell, pbc, r, 0));
        double *x = malloc(sizeof(double) * 3 * s->n);
        const double h = 1e-4;
        double worst = 0;
        for (int i = 0; i < s->n; i += GPU_OR_EMU(s->n > 12 ? 5 : 1, 7)) {
            for (int a = 0; a < 3; a++) {
                memcpy(x, s->x, sizeof(double) * 3 * s->n);
                x[3 * i + a] += h;
                const double ep = energy_of(ctx, s->n, s->z, x, cell, pbc);
                x[3 * i + a] -= 2 * h;
                const double em = energy_of(ctx, s->n, s->z, x, cell, pbc);
                worst = fmax(worst, fabs(-(ep - em) / (2 * h) - r->forces[3 * i + a]));
            }
        }
        printf("%s: forces against central differences (h = %g A): worst %.3e eV/A\n", s->name, h,
               worst);
        failures += !(worst < 2e-5);
        if (s->periodic) {
            /* E(eps): positions and cell deformed by (I + eps); dE/deps_ab = -W_ab */
            double worst_w = 0;
            double c2[9];
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) {
                    double e[2];
                    for (int sg = 0; sg < 2; sg++) {
                        const double eps = sg ? -h : h;
                        for (int i = 0; i < s->n; i++) {
                            memcpy(x + 3 * i, s->x + 3 * i, sizeof(double) * 3);
                            x[3 * i + a] += eps * s->x[3 * i + b];
                        }
                        memcpy(c2, s->cell, sizeof c2);
                        for (int v = 0; v < 3; v++) c2[3 * v + a] += eps * s->cell[3 * v + b];
                        e[sg] = energy_of(ctx, s->n, s->z, x, c2, pbc);
                    }
                    const double de = (e[0] - e[1]) / (2 * h);
                    worst_w = fmax(worst_w, fabs(de + r->virial[3 * b + a]));
                }
            printf("%s: virial against strain differences: worst %.3e eV\n", s->name, worst_w);
            failures += !(worst_w < 1e-4);
        }
        free(x);
        free_result(r);
    }
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return failures ? 1 : 0;
}

/* ---- batch ----------------------------------------------------------------------------------- */

static int case_batch(int f32) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load("ani2x", "cuda", f32 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64, &m, &ctx);
    if (!f32) { /* (float32 keeps every system, emulated too: its species counts are the point) */
        int kept = 0;
        for (int k = 0; k < set.n; k++)
            if (runs_system(&set.sys[k])) set.sys[kept++] = set.sys[k];
        set.n = kept;
    }
    int64_t n = 0;
    for (int k = 0; k < set.n; k++) n += set.sys[k].n;
    const int ns = set.n;
    int32_t *z = malloc(sizeof(int32_t) * n), *batch = malloc(sizeof(int32_t) * n);
    double *x = malloc(sizeof(double) * 3 * n), *cells = calloc(9 * ns, sizeof(double));
    uint8_t *pbc = calloc(3 * ns, 1);
    /* interleave the systems' atoms (batch indices need not be sorted) */
    int64_t *where = malloc(sizeof(int64_t) * n);
    {
        int64_t k = 0, *left = calloc(ns, sizeof(int64_t));
        for (int s = 0; s < ns; s++) left[s] = set.sys[s].n;
        int s = 0;
        while (k < n) {
            if (left[s] > 0) {
                const refsys *r = &set.sys[s];
                const int i = r->n - (int)left[s]--;
                z[k] = r->z[i];
                batch[k] = s;
                memcpy(x + 3 * k, r->x + 3 * i, sizeof(double) * 3);
                where[k] = i;
                k++;
            }
            s = (s + 1) % ns;
        }
        free(left);
    }
    for (int s = 0; s < ns; s++)
        if (set.sys[s].periodic) {
            memcpy(cells + 9 * s, set.sys[s].cell, sizeof(double) * 9);
            memcpy(pbc + 3 * s, set.sys[s].pbc, 3);
        }
    double *e = malloc(sizeof(double) * ns), *f = malloc(sizeof(double) * 3 * n),
           *v = malloc(sizeof(double) * 9 * ns);
    nnpops_inputs in = {sizeof in, n, -1, ns, z, x, batch, cells, pbc};
    nnpops_outputs out = {sizeof out, e, f, v, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    double worst = 0;
    for (int s = 0; s < ns && f32; s++) {
        /* float32: each system of the batch against the reference (case_reference's tolerances) */
        const refsys *r = &set.sys[s];
        const double de = fabs(e[s] - r->energy) / r->n;
        double df = 0, ds = 0;
        for (int64_t k = 0; k < n; k++)
            if (batch[k] == s)
                for (int a = 0; a < 3; a++)
                    df = fmax(df, fabs(f[3 * k + a] - r->forces[3 * where[k] + a]));
        if (r->has_stress)
            for (int k = 0; k < 9; k++)
                ds = fmax(ds, fabs(-v[9 * s + k] / ref_volume(r->cell) - r->stress[k]));
        printf("%-18s %5d |dE|/N %.3e eV, max|dF| %.3e eV/A, max|dS| %.3e eV/A^3\n", r->name, r->n,
               de, df, ds);
        worst = fmax(worst, fmax(de / 1e-5, fmax(df / 1e-3, ds / 1e-5)));
    }
    for (int s = 0; s < ns && !f32; s++) {
        const refsys *r = &set.sys[s];
        result *one = new_result(r->n, 8);
        CHECK_OK(run(ctx, r->n, -1, r->z, r->x, r->periodic ? r->cell : NULL,
                     r->periodic ? r->pbc : NULL, one, 0));
        worst = fmax(worst, fabs(e[s] - one->energy) / (1e-10 * r->n));
        for (int k = 0; k < 9; k++) worst = fmax(worst, fabs(v[9 * s + k] - one->virial[k]) / 1e-8);
        for (int64_t k = 0; k < n; k++)
            if (batch[k] == s)
                for (int a = 0; a < 3; a++)
                    worst = fmax(worst, fabs(f[3 * k + a] - one->forces[3 * where[k] + a]) / 1e-9);
        free_result(one);
    }
    printf("batch of %d systems (%lld atoms, interleaved) against %s: worst ratio %.3g\n", ns,
           (long long)n, f32 ? "the reference (float32 tolerances)" : "one by one", worst);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return worst <= 1 ? 0 : 1;
}

/* ---- ghosts, members --------------------------------------------------------------------- */

static int compare_gpu_cpu(const char *label, nnpops_context *cg, nnpops_context *cc, int64_t n,
                           int64_t n_local, const int32_t *z, const double *x, const double *cell,
                           const uint8_t *pbc, int ens, double tol) {
    result *g = new_result(n, ens), *c = new_result(n, ens);
    CHECK_OK(run(cg, n, n_local, z, x, cell, pbc, g, 1));
    CHECK_OK(run(cc, n, n_local, z, x, cell, pbc, c, 1));
    double w = fabs(g->energy - c->energy) / (tol * n);
    w = fmax(w, rel_worst(g->forces, c->forces, 3 * n, tol, tol));
    w = fmax(w, rel_worst(g->virial, c->virial, 9, tol * n, tol));
    w = fmax(w, rel_worst(g->atomic, c->atomic, n, tol, tol));
    w = fmax(w, rel_worst(g->atomic_virials, c->atomic_virials, 9 * n, tol, tol));
    w = fmax(w, rel_worst(g->member, c->member, ens, tol * n, tol));
    printf("%-40s worst ratio to tolerance %.3g\n", label, w);
    free_result(g);
    free_result(c);
    return w <= 1 ? 0 : 1;
}

/* Appends the atoms of s whose atomic number z has bit z set in zs (in their order) to z, x from
 * atom k on (at most 64 in all); returns the new atom count. */
static int pick_atoms(const refsys *s, uint64_t zs, int k, int32_t *z, double *x) {
    for (int i = 0; i < s->n; i++) {
        if (!((zs >> s->z[i]) & 1)) continue;
        CHECK(k < 64);
        z[k] = s->z[i];
        memcpy(x + 3 * k, s->x + 3 * i, sizeof(double) * 3);
        k++;
    }
    return k;
}

static int case_ghosts(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    pair q = load_pair("ani2x", NNPOPS_FLOAT64);
    nnpops_context *cg = q.cg, *cc = q.cc;
    int f = 0;
    for (int k = 0; k < set.n; k++) {
        const refsys *s = &set.sys[k];
        if (s->n < 40 || !runs_system(s)) continue;
        char label[96];
        snprintf(label, sizeof label, "%s, last %d atoms ghosts", s->name, s->n / 4);
        f += compare_gpu_cpu(label, cg, cc, s->n, s->n - s->n / 4, s->z, s->x,
                             s->periodic ? s->cell : NULL, s->periodic ? s->pbc : NULL, 8, 1e-9);
    }
    /* zero local atoms */
    f += compare_gpu_cpu("13_f0, no local atoms", cg, cc, set.sys[0].n, 0, set.sys[0].z,
                         set.sys[0].x, NULL, NULL, 8, 1e-9);
    /* 13_f0 with its N and O atoms last, as the only ghosts: the locals are H and C */
    {
        const refsys *s = &set.sys[0];
        int32_t z[64];
        double x[3 * 64];
        const uint64_t no = 1u << 7 | 1u << 8;
        const int n_local = pick_atoms(s, ~no, 0, z, x);
        CHECK(pick_atoms(s, no, n_local, z, x) == s->n);
        CHECK(n_local < s->n && n_local > 0);
        f += compare_gpu_cpu("13_f0, N and O only among the ghosts", cg, cc, s->n, n_local, z, x,
                             NULL, NULL, 8, 1e-9);
        nnpops_stats st = {sizeof st};
        CHECK_OK(nnpops_context_stats(cg, &st));
        printf("descriptor length %lld (H, C, N, O: 384)\n", (long long)st.descriptor_length);
        CHECK(st.descriptor_length == 384);
    }
    free_pair(&q);
    return f ? 1 : 0;
}

static int case_member(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    pair q = load_pair("ani2x", NNPOPS_FLOAT64);
    nnpops_context *cg = q.cg, *cc = q.cc;
    CHECK_OK(nnpops_context_set_option(cg, NNPOPS_OPTION_ENSEMBLE_MEMBER, 3));
    CHECK_OK(nnpops_context_set_option(cc, NNPOPS_OPTION_ENSEMBLE_MEMBER, 3));
    int f = 0;
    for (int k = 0; k < set.n; k++) {
        const refsys *s = &set.sys[k];
        if (!runs_system(s)) continue;
        char label[96];
        snprintf(label, sizeof label, "%s, member 3", s->name);
        f += compare_gpu_cpu(label, cg, cc, s->n, -1, s->z, s->x, s->periodic ? s->cell : NULL,
                             s->periodic ? s->pbc : NULL, 8, 1e-9);
        /* without member energies the GPU computes member 3 alone */
        result *g = new_result(s->n, 8), *c = new_result(s->n, 8);
        CHECK_OK(run(cg, s->n, -1, s->z, s->x, s->periodic ? s->cell : NULL,
                     s->periodic ? s->pbc : NULL, g, 0));
        CHECK_OK(run(cc, s->n, -1, s->z, s->x, s->periodic ? s->cell : NULL,
                     s->periodic ? s->pbc : NULL, c, 0));
        const double w = fmax(fabs(g->energy - c->energy) / (1e-9 * s->n),
                              rel_worst(g->forces, c->forces, 3 * s->n, 1e-9, 1e-9));
        if (!(w <= 1)) {
            printf("%s member 3 alone: ratio %.3g FAIL\n", s->name, w);
            f++;
        }
        free_result(g);
        free_result(c);
    }
    free_pair(&q);
    return f ? 1 : 0;
}

/* ---- water box: capacity growth --------------------------------------------------------------- */

static int case_water_box(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    pair q = load_pair("ani2x", NNPOPS_FLOAT64);
    nnpops_context *cg = q.cg, *cc = q.cc;
    result *r = new_result(set.sys[0].n, 8);
    CHECK_OK(run(cg, set.sys[0].n, -1, set.sys[0].z, set.sys[0].x, NULL, NULL, r, 0));
    free_result(r);
    nnpops_stats st0 = {sizeof st0}, st1 = {sizeof st1};
    CHECK_OK(nnpops_context_stats(cg, &st0));
    printf("13_f0: descriptor length %lld (H, C, N, O: 384)\n", (long long)st0.descriptor_length);
    CHECK(st0.descriptor_length == 384);
    int32_t *z;
    double *x, cell[9];
    /* emulated: 375 atoms, whose 250 H and 125 O still take the 3xTF32 products in float32 (more
     * than 96 atoms of a species) and need more neighbor capacity than the molecule */
    const int64_t n = water_box(GPU_OR_EMU(10, 5), 42, &z, &x, cell);
    const uint8_t pbc[3] = {1, 1, 1};
    int f = compare_gpu_cpu("water box", cg, cc, n, -1, z, x, cell, pbc, 8, 1e-9);
    CHECK_OK(nnpops_context_stats(cg, &st1));
    printf("neighbor rebuilds %lld -> %lld, capacity %lld, pairs %lld, descriptor length %lld\n",
           (long long)st0.neighbor_rebuilds, (long long)st1.neighbor_rebuilds,
           (long long)st1.pair_capacity, (long long)st1.n_pairs,
           (long long)st1.descriptor_length);
    CHECK(st1.neighbor_rebuilds > st0.neighbor_rebuilds);
    CHECK(st1.descriptor_length == 128);
    nnpops_stats sc = {sizeof sc};
    CHECK_OK(nnpops_context_stats(cc, &sc));
    printf("CPU pairs %lld\n", (long long)sc.n_pairs);
    CHECK(sc.n_pairs == st1.n_pairs);
    /* and the same step again (no growth) gives the same numbers */
    f += compare_gpu_cpu("water box, again", cg, cc, n, -1, z, x, cell, pbc, 8, 1e-9);
    nnpops_stats st2 = {sizeof st2};
    CHECK_OK(nnpops_context_stats(cg, &st2));
    CHECK(st2.neighbor_rebuilds == st1.neighbor_rebuilds);
    /* the molecule again, in the same contexts: its species set's state is reused */
    const refsys *m0 = &set.sys[0];
    f += compare_gpu_cpu("13_f0 after the box", cg, cc, m0->n, -1, m0->z, m0->x, NULL, NULL, 8,
                         1e-9);
    CHECK_OK(nnpops_context_stats(cg, &st2));
    CHECK(st2.descriptor_length == 384);
    /* float32: H and O (2,000 and 1,000; emulated 250 and 125) on the 3xTF32 products with the
     * restricted first layers */
    {
        pair q32 = load_pair("ani2x", NNPOPS_FLOAT32);
        nnpops_context *cg32 = q32.cg, *cc32 = q32.cc;
        result *g = new_result(n, 8), *c = new_result(n, 8);
        /* first three molecules alone (the small-n path): the {H, O} set is made without the
         * stacked first layers, which the box then adds */
        CHECK_OK(run(cg32, 9, -1, z, x, NULL, NULL, g, 0));
        CHECK_OK(run(cc32, 9, -1, z, x, NULL, NULL, c, 0));
        const double r9 = fmax(fabs(g->energy - c->energy) / (1e-5 * 9),
                               rel_worst(g->forces, c->forces, 27, 5e-4, 5e-4));
        printf("three waters float32: worst ratio to tolerance %.3g\n", r9);
        f += !(r9 <= 1);
        CHECK_OK(run(cg32, n, -1, z, x, cell, pbc, g, 0));
        CHECK_OK(run(cc32, n, -1, z, x, cell, pbc, c, 0));
        const double re = fabs(g->energy - c->energy) / (1e-5 * n);
        const double rf = rel_worst(g->forces, c->forces, 3 * n, 5e-4, 5e-4);
        nnpops_stats s32 = {sizeof s32};
        CHECK_OK(nnpops_context_stats(cg32, &s32));
        printf("water box float32: energy %.3g, forces %.3g (ratios to tolerance), descriptor "
               "length %lld\n", re, rf, (long long)s32.descriptor_length);
        f += !(re <= 1 && rf <= 1);
        CHECK(s32.descriptor_length == 128);
        free_result(g);
        free_result(c);
        free_pair(&q32);
    }
    free(z);
    free(x);
    free_pair(&q);
    return f ? 1 : 0;
}

/* ---- species sets ---------------------------------------------------------------------------- */

static int case_species_sets(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    pair q = load_pair("ani2x", NNPOPS_FLOAT64);
    nnpops_context *cg = q.cg, *cc = q.cc;
    const refsys *s = &set.sys[0];
    static const int32_t elem[4] = {1, 6, 7, 8};
    int f = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int mask = 1; mask < 16; mask++) {
            if (pass == 1 && mask > 1) break; /* again: the first set, still kept */
            int32_t z[64];
            double x[3 * 64];
            int nsp = 0;
            uint64_t zs = 0;
            for (int e = 0; e < 4; e++)
                if ((mask >> e) & 1) {
                    nsp++;
                    zs |= (uint64_t)1 << elem[e];
                }
            const int n = pick_atoms(s, zs, 0, z, x);
            char label[64];
            snprintf(label, sizeof label, "13_f0, species set %#x (%d atoms)", mask, n);
            f += compare_gpu_cpu(label, cg, cc, n, -1, z, x, NULL, NULL, 8, 1e-9);
            nnpops_stats st = {sizeof st};
            CHECK_OK(nnpops_context_stats(cg, &st));
            const int64_t want = pass == 0 && mask > 8 ? 1008 : nsp * 16 + nsp * (nsp + 1) / 2 * 32;
            printf("  descriptor length %lld (want %lld)\n", (long long)st.descriptor_length,
                   (long long)want);
            CHECK(st.descriptor_length == want);
        }
    free_pair(&q);
    return f ? 1 : 0;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static int case_errors(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load("ani2x", "cuda", NNPOPS_FLOAT32, &m, &ctx);
    const refsys *s = &set.sys[0];
    result *r = new_result(s->n + 10, 8);
    double *x = malloc(sizeof(double) * 3 * s->n);
    memcpy(x, s->x, sizeof(double) * 3 * s->n);
    x[3] = x[0] + 0.05;
    x[4] = x[1];
    x[5] = x[2];
    CHECK_STATUS(run(ctx, s->n, -1, s->z, x, NULL, NULL, r, 0), NNPOPS_ERROR_ATOMS_TOO_CLOSE);
    printf("too close: %s\n", nnpops_last_error());
    CHECK_ERROR_HAS("apart");
    const double sing[9] = {10, 0, 0, 10, 0, 0, 0, 0, 10};
    const uint8_t pbc[3] = {1, 1, 1};
    CHECK_STATUS(run(ctx, s->n, -1, s->z, s->x, sing, pbc, r, 0), NNPOPS_ERROR_BAD_CELL);
    printf("singular cell: %s\n", nnpops_last_error());
    const double thin[9] = {30, 0, 0, 0, 1, 0, 0, 0, 30};
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 2));
    CHECK_STATUS(run(ctx, s->n, -1, s->z, s->x, thin, pbc, r, 0), NNPOPS_ERROR_TOO_MANY_IMAGES);
    printf("too many images: %s\n", nnpops_last_error());
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 64));
    /* still usable, and equal to a fresh context */
    CHECK_OK(run(ctx, s->n, -1, s->z, s->x, NULL, NULL, r, 0));
    const double e1 = r->energy;
    nnpops_context *fresh;
    CHECK_OK(nnpops_context_create(m, &fresh));
    CHECK_OK(run(fresh, s->n, -1, s->z, s->x, NULL, NULL, r, 0));
    CHECK_NEAR(e1, r->energy, 1e-5, 0);
    /* zero atoms */
    double e = 1;
    nnpops_inputs in = {sizeof in, 0, -1, 1, s->z, s->x, NULL, NULL, NULL};
    nnpops_outputs out = {sizeof out, &e, NULL, NULL, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    CHECK(e == 0);
    nnpops_context_destroy(fresh);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    free(x);
    free_result(r);
    return 0;
}

/* A tensornet model on "cuda" (its GPU path, potentials/tensornet/tensornet_cuda.c): loads, and
 * a batch of two molecules with total charges 0 and -1 equals the CPU model (float64 1e-10
 * relative, float32 1e-5); the charge changes the energy.  An ensemble file is refused. */
static int case_tensornet(void) {
    for (int prec = 0; prec < 2; prec++) {
        const nnpops_precision p = prec ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64;
        nnpops_model *mg = NULL, *mc = NULL;
        nnpops_status st = nnpops_model_load("tn_a", "cuda", p, &mg);
        if (st == NNPOPS_ERROR_MODEL_NOT_FOUND) {
            fprintf(stderr, "converted model tn_a not found: %s\n", nnpops_last_error());
            return getenv("CI") && !strcmp(getenv("CI"), "true") ? 1 : SKIP_RETURN;
        }
        CHECK_OK(st);
        CHECK_OK(nnpops_model_load("tn_a", "cpu", p, &mc));
        CHECK(!strcmp(nnpops_model_type(mg), "tensornet") && nnpops_model_uses_charge(mg) == 1);
        /* two waters and a methane-like fragment, as two systems */
        const int32_t z[8] = {8, 1, 1, 6, 1, 1, 1, 1};
        const double x[24] = {0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0, 3.0, 0.2, 0.1, 4.05, 0.2,
                              0.1, 2.65, 1.2, 0.1, 2.65, -0.3, 0.95, 2.65, -0.3, -0.75};
        const int32_t batch[8] = {0, 0, 0, 1, 1, 1, 1, 1};
        const double q[2] = {0.0, -1.0};
        double eg[2], ec[2], fg[24], fc[24], e0[2];
        nnpops_context *cg, *cc;
        CHECK_OK(nnpops_context_create(mg, &cg));
        CHECK_OK(nnpops_context_create(mc, &cc));
        nnpops_inputs in = {sizeof in, 8, -1, 2, z, x, batch, NULL, NULL, q};
        nnpops_outputs og = {sizeof og, eg, fg, NULL, NULL, NULL, NULL};
        nnpops_outputs oc = {sizeof oc, ec, fc, NULL, NULL, NULL, NULL};
        CHECK_OK(nnpops_compute(cg, &in, &og));
        CHECK_OK(nnpops_compute(cc, &in, &oc));
        const double tol = prec ? 1e-5 : 1e-10;
        for (int k = 0; k < 2; k++) CHECK(fabs(eg[k] - ec[k]) <= tol * (1 + fabs(ec[k])));
        for (int k = 0; k < 24; k++) CHECK(fabs(fg[k] - fc[k]) <= tol * 10);
        in.charges = NULL;
        nnpops_outputs o0 = {sizeof o0, e0, NULL, NULL, NULL, NULL, NULL};
        CHECK_OK(nnpops_compute(cg, &in, &o0));
        CHECK(e0[0] == eg[0] && fabs(e0[1] - eg[1]) > 1e-6);
        printf("tn_a %s on cuda: E %.10f %.10f (cpu %.10f %.10f)\n", prec ? "f32" : "f64", eg[0],
               eg[1], ec[0], ec[1]);
        nnpops_context_destroy(cg);
        nnpops_context_destroy(cc);
        nnpops_model_destroy(mg);
        nnpops_model_destroy(mc);
    }
    /* an ensemble file has no GPU path: a named error, not member 0's numbers */
    nnpops_model *me = NULL;
    const nnpops_status se = nnpops_model_load("tn_a_ens", "cuda", NNPOPS_FLOAT64, &me);
    if (se == NNPOPS_ERROR_MODEL_NOT_FOUND) {
        printf("tn_a_ens not converted here: ensemble refusal not checked\n");
        if (getenv("CI") && !strcmp(getenv("CI"), "true")) return 1;
    } else {
        CHECK(se == NNPOPS_ERROR_UNSUPPORTED && me == NULL);
        CHECK(strstr(nnpops_last_error(), "ensemble") != NULL);
    }
    return 0;
}

/* ---- another thread ------------------------------------------------------------------------ */

typedef struct thread_job {
    nnpops_context *ctx;
    const refsys *s;
    double energy;
    nnpops_status st;
} thread_job;

static void *thread_main(void *p) {
    thread_job *j = p;
    result *r = new_result(j->s->n, 8);
    j->st = run(j->ctx, j->s->n, -1, j->s->z, j->s->x, NULL, NULL, r, 0);
    j->energy = r->energy;
    free_result(r);
    return NULL;
}

static int case_thread(void) {
    static refset set;
    if (!ref_load("ani2x", &set)) return missing(&set);
    nnpops_model *m;
    nnpops_context *ctx;
    load("ani2x", "cuda", NNPOPS_FLOAT64, &m, &ctx);
    const refsys *s = &set.sys[1];
    result *r = new_result(s->n, 8);
    CHECK_OK(run(ctx, s->n, -1, s->z, s->x, NULL, NULL, r, 0));
    thread_job j = {ctx, s, 0, NNPOPS_ERROR_INTERNAL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, &j) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(j.st);
    printf("energy on the main thread %.12f, on another thread %.12f\n", r->energy, j.energy);
    CHECK_NEAR(j.energy, r->energy, 1e-9, 0);
    free_result(r);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE [MODEL PREC]\n", argv[0]);
        return 2;
    }
    if (nnpops_cuda_device_count() == 0) {
        fprintf(stderr, "no CUDA device: skipped\n");
        return SKIP_RETURN;
    }
    const char *c = argv[1];
    if (!strcmp(c, "reference") && argc >= 4) return case_reference(argv[2], argv[3]);
    if (!strcmp(c, "cpu_match") && argc >= 4) return case_cpu_match(argv[2], argv[3]);
    if (!strcmp(c, "fd")) return case_fd();
    if (!strcmp(c, "batch")) return case_batch(0);
    if (!strcmp(c, "batch_f32")) return case_batch(1);
    if (!strcmp(c, "ghosts")) return case_ghosts();
    if (!strcmp(c, "member")) return case_member();
    if (!strcmp(c, "water_box")) return case_water_box();
    if (!strcmp(c, "errors")) return case_errors();
    if (!strcmp(c, "species_sets")) return case_species_sets();
    if (!strcmp(c, "thread")) return case_thread();
    if (!strcmp(c, "tensornet")) return case_tensornet();
    fprintf(stderr, "unknown case %s\n", c);
    return 2;
}
