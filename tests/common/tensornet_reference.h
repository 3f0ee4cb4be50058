/* tensornet_reference.h - the TensorNet reference set of the C tests and benchmarks:
 * $NNPOPS_SHARED_DIR/reference/tensornet/reference.json (default ../shared), torchmd-net 3.1.0's
 * values, read with the JSON reader of reference.h.  tn_ref_load reads the file; tn_sys_load
 * takes one of its "systems" (symbols, positions_A, cell_A: null for a molecule), tn_entry_load
 * the systems of one of a model's entries (a system or a batch of them), tn_entry_energies and
 * tn_f32_bounds its values and float32 bounds; tn_sys_load_sheared and tn_sys_strain make the
 * strained cells of the virial checks; tn_ref_asan_skip names the systems left out under ASan. */
#ifndef NNPOPS_TEST_TENSORNET_REFERENCE_H
#define NNPOPS_TEST_TENSORNET_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reference.h"
#include "sanitized.h"

/* One system of the set: n atoms, their atomic numbers and positions (angstrom), the cell's
 * rows a, b, c when periodic. */
typedef struct tn_sys {
    int n;
    int32_t *z;
    double *x;
    int periodic;
    double cell[9];
} tn_sys;

/* Under ASan (sanitized.h) the reference cases leave out two molecules of the kinds the others
 * have (50 atoms; the 264-atom protein, whose bins the 98-atom molecule's take too): the systems
 * kept take every line and branch of the library and of the TensorNet functions that the whole
 * set takes (the capacity growth of the neighbor lists included).  1: leave `system` out. */
static int tn_ref_asan_skip(const char *system) {
    static const char *const skipped[] = {"mol_50_f0", "mol_pdb_small"};
    for (size_t k = 0; TEST_SANITIZED && k < sizeof skipped / sizeof skipped[0]; k++)
        if (!strcmp(system, skipped[k])) return 1;
    return 0;
}

/* The parsed reference file, its path in path[cap] either way; NULL when it cannot be read. */
static jval *tn_ref_load(char *path, size_t cap) {
    const char *dir = getenv("NNPOPS_SHARED_DIR");
    snprintf(path, cap, "%s/reference/tensornet/reference.json", dir ? dir : "../shared");
    size_t len;
    char *text = read_text(path, &len);
    if (!text) return NULL;
    jparser p = {text, 0, len};
    jval *root = jparse(&p);
    free(text);
    return root;
}

/* The system NAME of the set into s (release it with tn_sys_free). */
static void tn_sys_load(const jval *root, const char *name, tn_sys *s) {
    const jval *j = jget(jget(root, "systems"), name);
    CHECK(j != NULL);
    const jval *sy = jget(j, "symbols");
    s->n = sy->n;
    s->z = malloc(sizeof(int32_t) * (size_t)s->n);
    for (int i = 0; i < s->n; i++) s->z[i] = ref_z(sy->items[i]->str);
    s->x = ref_numbers(j, "positions_A", 3 * s->n);
    const jval *c = jget(j, "cell_A");
    s->periodic = c && c->type == J_ARR;
    if (s->periodic) CHECK(jnumbers(c, s->cell, 9) == 9);
}

static void tn_sys_free(tn_sys *s) {
    free(s->z);
    free(s->x);
}

/* The systems of the reference entry ref (named name): the system itself, or the batch of its
 * "members" with their total charges in q (q zero for a single system).  Returns their number
 * (at most 8). */
static int tn_entry_load(const jval *root, const char *name, const jval *ref, tn_sys S[8],
                         double q[8]) {
    for (int k = 0; k < 8; k++) q[k] = 0;
    const jval *members = jget(ref, "members");
    if (!members) {
        tn_sys_load(root, name, &S[0]);
        return 1;
    }
    const int ns = members->n;
    CHECK(ns <= 8);
    for (int k = 0; k < ns; k++) tn_sys_load(root, members->items[k]->str, &S[k]);
    CHECK(jnumbers(jget(ref, "charges"), q, ns) == ns);
    return ns;
}

/* torchmd-net's energies of the entry's ns systems (eV). */
static void tn_entry_energies(const jval *ref, int ns, double eref[8]) {
    if (jget(ref, "members"))
        CHECK(jnumbers(jget(ref, "energies_eV"), eref, ns) == ns);
    else
        eref[0] = jget(ref, "energy_eV")->num;
}

/* The float32 bounds of an entry: |dE|/N <= max(5e-6, 2 x torchmd-net's own float32 deviation),
 * max |dF| <= max(5e-4, 2 x its own). */
static void tn_f32_bounds(const jval *ref, double *tol_e, double *tol_f) {
    const jval *te = jget(ref, "torch_float32_dE_per_atom");
    const jval *tf = jget(ref, "torch_float32_dF_max");
    *tol_e = fmax(5e-6, te ? 2 * te->num : 0);
    *tol_f = fmax(5e-4, tf ? 2 * tf->num : 0);
}

/* The sheared (triclinic) copy of water8_pbc that the finite-difference cases use: an 8 A cell,
 * smaller than twice the cutoff, so atoms see their own images.  Cell rows and positions are
 * mapped by x' = A x with A = {1, 0, 0; 0.15, 1, 0; -0.1, 0.2, 1}. */
static void tn_sys_load_sheared(const jval *root, tn_sys *s) {
    static const double A[9] = {1, 0, 0, 0.15, 1, 0, -0.1, 0.2, 1};
    tn_sys_load(root, "water8_pbc", s);
    double c0[9];
    memcpy(c0, s->cell, sizeof c0);
    for (int row = 0; row < 3; row++)
        for (int d = 0; d < 3; d++) {
            double v = 0;
            for (int k = 0; k < 3; k++) v += A[3 * d + k] * c0[3 * row + k];
            s->cell[3 * row + d] = v;
        }
    for (int i = 0; i < s->n; i++) {
        double x0[3];
        memcpy(x0, s->x + 3 * i, sizeof x0);
        for (int d = 0; d < 3; d++) {
            double v = 0;
            for (int k = 0; k < 3; k++) v += A[3 * d + k] * x0[k];
            s->x[3 * i + d] = v;
        }
    }
}

/* s's cell rows and positions set to c0 and x0 (s->n positions) under a strain: component p of
 * each vector plus eps times its component q. */
static void tn_sys_strain(tn_sys *s, const double c0[9], const double *x0, int p, int q,
                          double eps) {
    for (int row = 0; row < 3; row++) {
        memcpy(s->cell + 3 * row, c0 + 3 * row, sizeof(double) * 3);
        s->cell[3 * row + p] += eps * c0[3 * row + q];
    }
    for (int i = 0; i < s->n; i++) {
        memcpy(s->x + 3 * i, x0 + 3 * i, sizeof(double) * 3);
        s->x[3 * i + p] += eps * x0[3 * i + q];
    }
}

#endif
