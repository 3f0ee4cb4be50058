/*
 * test_neighbors_ref.c - brute-force reference for the neighbor tests (not a test by itself).
 *
 * Included by test_neighbors.c (public API) and test_neighbors_internal.c (kernel), because
 * each CTest helper builds one source file.  The reference loops over every pair of atoms
 * (i <= j) and every integer shift s in a box of images wide enough for the cutoff AND for the
 * spread of the atoms' fractional coordinates (positions may lie cells away from the cell), and
 * keeps the pairs with |x_j - x_i + s . cell| < cutoff, oriented by the half-list rule: s == 0 ->
 * i < j, otherwise s lexicographically positive; (i, i, s) only with s positive.  Lists are
 * compared as sorted sets of (i, j, s) with distances (and vectors, when given) to 1e-12.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct ref_pair {
    int64_t i, j;
    int32_t s[3];
    double v[3];
    double d;
} ref_pair;

typedef struct ref_list {
    ref_pair *p;
    int64_t n, cap;
} ref_list;

static void ref_push(ref_list *l, const ref_pair *p) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->p = realloc(l->p, sizeof(ref_pair) * (size_t)l->cap);
        CHECK(l->p != NULL);
    }
    l->p[l->n++] = *p;
}

static void ref_free(ref_list *l) {
    free(l->p);
    memset(l, 0, sizeof *l);
}

static int ref_positive(const int32_t *s) {
    if (s[0] != 0) return s[0] > 0;
    if (s[1] != 0) return s[1] > 0;
    return s[2] > 0;
}

/* Inverse of a 3x3 matrix m (row-major) by cofactors; returns the determinant. */
static double ref_inverse(const double *m, double *inv) {
    const double c00 = m[4] * m[8] - m[5] * m[7];
    const double c01 = m[5] * m[6] - m[3] * m[8];
    const double c02 = m[3] * m[7] - m[4] * m[6];
    const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
    inv[0] = c00 / det;
    inv[1] = (m[2] * m[7] - m[1] * m[8]) / det;
    inv[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    inv[3] = c01 / det;
    inv[4] = (m[0] * m[8] - m[2] * m[6]) / det;
    inv[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    inv[6] = c02 / det;
    inv[7] = (m[1] * m[6] - m[0] * m[7]) / det;
    inv[8] = (m[0] * m[4] - m[1] * m[3]) / det;
    return det;
}

/* Reference half list of atoms ids[0..n) (global ids; NULL = 0..n-1) of one system.  Pairs with
 * both ids >= skip_from are dropped. */
static void ref_neighbors(int64_t n, const int64_t *ids, const double *x, const double *cell,
                          const uint8_t *pbc, double cutoff, int64_t skip_from, ref_list *out) {
    int per[3] = {0, 0, 0};
    int range[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) per[k] = pbc ? pbc[k] != 0 : 0;
    if (per[0] || per[1] || per[2]) {
        double inv[9];
        ref_inverse(cell, inv);
        for (int k = 0; k < 3; k++) {
            if (!per[k]) continue;
            /* column k of inv is the reciprocal vector: f_k = x . inv[:, k], width 1/|inv[:, k]| */
            const double *c = inv + k;
            const double rl = sqrt(c[0] * c[0] + c[3] * c[3] + c[6] * c[6]);
            double fmin = HUGE_VAL, fmax = -HUGE_VAL;
            for (int64_t a = 0; a < n; a++) {
                const int64_t id = ids ? ids[a] : a;
                const double *p = x + 3 * id;
                const double f = p[0] * inv[k] + p[1] * inv[3 + k] + p[2] * inv[6 + k];
                if (f < fmin) fmin = f;
                if (f > fmax) fmax = f;
            }
            range[k] = (int)ceil(cutoff * rl + (fmax - fmin)) + 1;
        }
    }
    const double cut2 = cutoff * cutoff;
    for (int64_t a = 0; a < n; a++) {
        for (int64_t b = a; b < n; b++) {
            const int64_t ia = ids ? ids[a] : a, ib = ids ? ids[b] : b;
            if (ia >= skip_from && ib >= skip_from) continue;
            int32_t s[3];
            for (s[0] = -range[0]; s[0] <= range[0]; s[0]++)
            for (s[1] = -range[1]; s[1] <= range[1]; s[1]++)
            for (s[2] = -range[2]; s[2] <= range[2]; s[2]++) {
                const int zero = s[0] == 0 && s[1] == 0 && s[2] == 0;
                if (ia == ib && (zero || !ref_positive(s))) continue;
                ref_pair p;
                /* orient: s == 0 -> i < j; otherwise s positive */
                int flip = zero ? ia > ib : !ref_positive(s);
                p.i = flip ? ib : ia;
                p.j = flip ? ia : ib;
                for (int k = 0; k < 3; k++) p.s[k] = flip ? -s[k] : s[k];
                const double *xi = x + 3 * p.i, *xj = x + 3 * p.j;
                double d2 = 0.0;
                for (int c = 0; c < 3; c++) {
                    double sh = 0.0;
                    if (cell)
                        sh = p.s[0] * cell[c] + p.s[1] * cell[3 + c] + p.s[2] * cell[6 + c];
                    p.v[c] = (xj[c] - xi[c]) + sh;
                    d2 += p.v[c] * p.v[c];
                }
                if (!(d2 < cut2)) continue;
                p.d = sqrt(d2);
                ref_push(out, &p);
            }
        }
    }
}

static int ref_cmp(const void *pa, const void *pb) {
    const ref_pair *a = pa, *b = pb;
    if (a->i != b->i) return a->i < b->i ? -1 : 1;
    if (a->j != b->j) return a->j < b->j ? -1 : 1;
    for (int k = 0; k < 3; k++)
        if (a->s[k] != b->s[k]) return a->s[k] < b->s[k] ? -1 : 1;
    return 0;
}

static void ref_print(const char *what, const ref_pair *p) {
    fprintf(stderr, "  %s: (%lld, %lld, [%d %d %d]) d = %.17g\n", what, (long long)p->i,
            (long long)p->j, p->s[0], p->s[1], p->s[2], p->d);
}

/* Compares two lists as sets; `with_vec`: also compare the pair vectors.  Exits on mismatch. */
static void ref_compare(const char *label, ref_list *got, ref_list *want, int with_vec) {
    if (got->n > 1) qsort(got->p, (size_t)got->n, sizeof(ref_pair), ref_cmp);
    if (want->n > 1) qsort(want->p, (size_t)want->n, sizeof(ref_pair), ref_cmp);
    int64_t a = 0, b = 0, bad = 0;
    while (a < got->n || b < want->n) {
        const int c = a == got->n ? 1 : b == want->n ? -1 : ref_cmp(&got->p[a], &want->p[b]);
        if (c < 0) {
            if (bad++ < 10) ref_print("extra", &got->p[a]);
            a++;
        } else if (c > 0) {
            if (bad++ < 10) ref_print("missing", &want->p[b]);
            b++;
        } else {
            const ref_pair *g = &got->p[a], *w = &want->p[b];
            int ok = fabs(g->d - w->d) <= 1e-12 * (1.0 + w->d);
            if (with_vec)
                for (int k = 0; k < 3; k++) ok &= fabs(g->v[k] - w->v[k]) <= 1e-12 * (1.0 + w->d);
            if (a + 1 < got->n && ref_cmp(&got->p[a], &got->p[a + 1]) == 0) {
                if (bad++ < 10) ref_print("duplicate", g);
            }
            if (!ok && bad++ < 10) {
                ref_print("got", g);
                ref_print("want", w);
            }
            a++;
            b++;
        }
    }
    if (bad) {
        fprintf(stderr, "%s: %lld mismatches (got %lld pairs, want %lld)\n", label,
                (long long)bad, (long long)got->n, (long long)want->n);
        exit(1);
    }
    printf("%s: %lld pairs match\n", label, (long long)want->n);
}

/* Random atoms: fractional coordinates uniform in [lo, hi) along each axis, times the cell (or,
 * without a cell, Cartesian uniform in [lo, hi) * box). */
static void ref_random_positions(unsigned long long *seed, int64_t n, const double *cell,
                                 double box, double lo, double hi, double *x) {
    for (int64_t a = 0; a < n; a++) {
        double f[3];
        for (int k = 0; k < 3; k++) f[k] = lo + (hi - lo) * test_rand(seed);
        for (int c = 0; c < 3; c++) {
            if (cell)
                x[3 * a + c] = f[0] * cell[c] + f[1] * cell[3 + c] + f[2] * cell[6 + c];
            else
                x[3 * a + c] = f[c] * box;
        }
    }
}
