/*
 * neighbors.c - half neighbor list on the CPU with a cell list: O(N) time and memory per system.
 *
 * What it computes.  For every system s of a batch (its atoms are order[sys_start[s] ..
 * sys_start[s+1]), with its own cell and periodic flags) every pair of atoms, or of an atom and
 * a periodic image of an atom (itself included), whose distance is strictly below `cutoff`:
 *     r = x_j - x_i + s . H,   |r|^2 < cutoff^2,
 * where H is the cell (rows a, b, c), x are the ORIGINAL positions (they may lie anywhere, not
 * only inside the cell) and s is an integer shift vector (zero along non-periodic axes).  Output
 * is a HALF list: each interacting pair appears exactly once, oriented by the rule
 *     s == 0:  i < j;
 *     s != 0:  s lexicographically positive (s_a > 0, or s_a == 0 and s_b > 0, or s_a == s_b == 0
 *              and s_c > 0),
 * so that an atom's interactions with its own images appear once per +-s pair, as (i, i, s).
 * Pairs whose two atoms are both >= skip_from (ghost-ghost) are omitted.  For each pair p:
 *     pairs[p] = {i, j} (global atom ids), shifts[p] = s, vec[p] = r, dist[p] = |r|,
 * with r evaluated in double from the original positions as (x_j - x_i) + (s_a a + s_b b + s_c c)
 * (for s = 0 the shift term is exactly zero and skipped), whatever path found the pair.  All pairs
 * are counted; the first `capacity` are written; if there are more, n_pairs is the total and the
 * status NNPOPS_ERROR_NEIGHBOR_OVERFLOW (no message).  Any of shifts, vec, dist may be NULL (not
 * written); pairs may be NULL only when capacity is 0.  The order of the pairs is unspecified (it
 * follows the cell list) but deterministic.
 *
 * Cells.  With no periodic axis the cell is ignored (it may be NULL, zero or singular) and the
 * search runs in Cartesian coordinates over the atoms' bounding box.  With at least one periodic
 * axis the WHOLE cell must be finite and non-singular, |det H| > 1e-10 |a| |b| |c| (left-handed
 * cells are fine), non-periodic axes included: the search then runs in fractional coordinates
 * along all three axes, one code path for full and mixed periodicity, so a mixed-pbc caller must
 * give its non-periodic axes a lattice vector independent of the other two (its length does not
 * matter).  Otherwise NNPOPS_ERROR_BAD_CELL names the system and the axis.  Along a periodic axis
 * k of perpendicular width w_k = |det H| / |a_l x a_m| the search needs ceil(cutoff / w_k) images
 * on each side; more than max_images is NNPOPS_ERROR_TOO_MANY_IMAGES.  Systems without atoms are
 * skipped (their cells are not validated).
 *
 * Method, per system.
 *  1. Fractional coordinates f = x H^-1 (H = I without periodicity).  Along periodic axes each
 *     atom is wrapped into [0, 1): n_k = floor(f_k), f_k -= n_k, and its wrapped position is
 *     xw = x - n . H.  A pair found in wrapped space as (i, j, s') has the original shift
 *     s = s' + n_i - n_j, because xw_j - xw_i + s' . H = x_j - x_i + (s' - n_j + n_i) . H.
 *  2. Bins.  Along axis k the bins are slabs between planes of constant f_k; a slab of fractional
 *     thickness df is df * w_k thick in Cartesian distance, so nb_k = floor(thickness_k / reach)
 *     bins (at least 1) are each at least `reach` thick, reach being the cutoff plus a rounding
 *     margin.  Periodic axes span f in [0, 1) (thickness w_k); non-periodic axes span the atoms'
 *     range of f_k.  The total number of bins is capped at 2 N + 27 by coarsening (bins only
 *     grow), so memory stays linear in N however sparse the atoms are.
 *  3. Two atoms closer than reach differ by less than reach / w_k in f_k, hence by at most
 *     r_k = ceil(reach / t_k) bins along axis k, t_k being the bin thickness (r_k = 1 for ordinary
 *     boxes; the image count when the cell is thinner than the cutoff).  The stencil is the box of
 *     offsets o in [-r, r]^3.  Along a periodic axis, bin b + o maps to bin (b + o) mod nb with
 *     image shift floor((b + o) / nb); offsets leaving the range of a non-periodic axis are
 *     dropped.  For a fixed source bin, o -> (target bin, image shift) is one-to-one, so every
 *     ordered (i, j, s') is met exactly once, small cells and self-images included, and its
 *     reverse (j, i, -s') is met through -o.  Visiting only the lexicographically positive half of
 *     the stencil, plus the pairs a < b of the bin's own atoms for o = 0, therefore meets each
 *     unordered pair exactly once; the pair is then oriented by the half-list rule above in terms
 *     of the original shift s.
 *  4. For each bin, the atoms of its half stencil are gathered, already moved by their image
 *     shift, into one buffer (in chunks of at most max(2 M, 512) atoms, M the most atoms in a
 *     bin), so that each atom of the bin makes one long pass over them: squared distances in a
 *     loop compilers vectorize, hits compacted without branches, and each hit tested against
 *     reach^2 and then recomputed from the original positions and kept if |r|^2 < cutoff^2.
 *
 * Data layout.  Inputs as in internal.h: positions [n_atoms][3], cells [n_systems][9] (rows a, b,
 * c), pbc [n_systems][3]; outputs pairs [capacity][2], shifts [capacity][3], vec [capacity][3],
 * dist [capacity].  Scratch slots 0..3 (reused across calls, grown, never shrunk), N being the
 * largest system's atom count:
 *     slot 0: nbr_atom [N], then double [3][N]: atoms sorted by bin (original position, id, wrap
 *             counts n) and their wrapped positions xw as three arrays
 *     slot 1: int32 [nbins + 1]: first sorted atom of each bin
 *     slot 2: nbr_tmp [N]: fractional coordinates, wrap counts and bin of each atom (input order)
 *     slot 3: the gather buffer, 56 bytes per entry
 * About 105 bytes per atom for large systems (tests/bench/bench_neighbors_cpu.c prints it).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/kernels.h"

/* One atom of the system, in bin order (its wrapped position is kept apart, in three arrays). */
typedef struct nbr_atom {
    double xo[3];   /* original position */
    int32_t id;     /* global atom id */
    int32_t wrap[3];
} nbr_atom;

/* One atom of the system, in input order (before sorting). */
typedef struct nbr_tmp {
    double f[3];    /* fractional coordinates (wrapped along periodic axes) */
    int32_t wrap[3];
    int32_t bin;
} nbr_tmp;

/* Geometry of one system: the frame the bins live in (the cell, or the identity). */
typedef struct nbr_geom {
    int periodic[3];
    int any_periodic;
    double h[3][3];   /* rows: lattice vectors (identity without periodicity) */
    double rec[3][3]; /* rec[k]: f_k = x . rec[k] (rows of H^-T) */
    double width[3];  /* Cartesian thickness of a slab of unit fractional thickness along axis k */
} nbr_geom;

static const char nbr_axis_name[3] = {'a', 'b', 'c'};

static void cross3(const double *u, const double *v, double *w) {
    w[0] = u[1] * v[2] - u[2] * v[1];
    w[1] = u[2] * v[0] - u[0] * v[2];
    w[2] = u[0] * v[1] - u[1] * v[0];
}

static double norm3(const double *u) { return sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]); }

/* Sets up the frame of system s and validates its cell (see "Cells" above). */
static nnpops_status nbr_geometry(int64_t s, const double *cell, const uint8_t *pbc,
                                  double cutoff, int32_t max_images, nbr_geom *g) {
    memset(g, 0, sizeof *g);
    for (int k = 0; k < 3; k++) {
        g->periodic[k] = pbc ? (pbc[k] != 0) : 0;
        g->any_periodic |= g->periodic[k];
    }
    if (!g->any_periodic) {
        for (int k = 0; k < 3; k++) {
            g->h[k][k] = 1.0;
            g->rec[k][k] = 1.0;
            g->width[k] = 1.0;
        }
        return NNPOPS_OK;
    }
    if (!cell) {
        for (int k = 0; k < 3; k++)
            if (g->periodic[k])
                return nnpops__fail(NNPOPS_ERROR_BAD_CELL,
                                    "system %lld: axis %c is periodic but no cell was given",
                                    (long long)s, nbr_axis_name[k]);
    }
    for (int k = 0; k < 3; k++) {
        for (int d = 0; d < 3; d++) {
            const double v = cell[3 * k + d];
            if (!isfinite(v))
                return nnpops__fail(NNPOPS_ERROR_BAD_CELL,
                                    "system %lld: cell vector %c has a non-finite component (%g)",
                                    (long long)s, nbr_axis_name[k], v);
            g->h[k][d] = v;
        }
    }
    double cr[3][3], len[3], crlen[3];
    for (int k = 0; k < 3; k++) {
        cross3(g->h[(k + 1) % 3], g->h[(k + 2) % 3], cr[k]);
        len[k] = norm3(g->h[k]);
        crlen[k] = norm3(cr[k]);
    }
    const double det = g->h[0][0] * cr[0][0] + g->h[0][1] * cr[0][1] + g->h[0][2] * cr[0][2];
    const double vol = fabs(det);
    const double prod = len[0] * len[1] * len[2];
    if (!(vol > 1e-10 * prod)) {
        /* Name the culprit: a zero vector, else the vector with the least height above the plane of
         * the other two, relative to its length. */
        int bad = -1;
        double worst = HUGE_VAL;
        for (int k = 0; k < 3; k++) {
            double q;
            if (len[k] == 0.0) q = -1.0;
            else if (crlen[k] == 0.0) q = HUGE_VAL;
            else q = vol / (len[k] * crlen[k]);
            if (bad < 0 || q < worst || (q == worst && g->periodic[k] && !g->periodic[bad])) {
                bad = k;
                worst = q;
            }
        }
        if (g->periodic[bad])
            return nnpops__fail(NNPOPS_ERROR_BAD_CELL,
                                "system %lld: cell is singular along periodic axis %c "
                                "(|det| = %g, |a| |b| |c| = %g)",
                                (long long)s, nbr_axis_name[bad], vol, prod);
        return nnpops__fail(NNPOPS_ERROR_BAD_CELL,
                            "system %lld: cell is singular along non-periodic axis %c; when any "
                            "axis is periodic all three cell vectors must be independent "
                            "(|det| = %g, |a| |b| |c| = %g)",
                            (long long)s, nbr_axis_name[bad], vol, prod);
    }
    for (int k = 0; k < 3; k++) {
        for (int d = 0; d < 3; d++) g->rec[k][d] = cr[k][d] / det;
        g->width[k] = vol / crlen[k];
        if (g->periodic[k]) {
            const double need = ceil(cutoff / g->width[k]);
            if (need > (double)max_images)
                return nnpops__fail(NNPOPS_ERROR_TOO_MANY_IMAGES,
                                    "system %lld: cutoff %g needs %.0f periodic images along axis "
                                    "%c (cell width %g), more than max_images = %d",
                                    (long long)s, cutoff, need, nbr_axis_name[k], g->width[k],
                                    (int)max_images);
        }
    }
    return NNPOPS_OK;
}

/* Output state shared by the pair loops. */
typedef struct nbr_emit {
    double cut2;
    double h[3][3];
    int64_t skip_from;
    int64_t count;
    int64_t capacity;
    int32_t *pairs;
    int32_t *shifts;
    double *vec;
    double *dist;
} nbr_emit;

/* A candidate (p, q, image shift sp of q's bin) that passed the wrapped-space test: orient it by
 * the half-list rule, recompute it from the original positions and record it.  The only branch on
 * the data is s == 0, which is predictable; the orientation itself is a coin toss for random
 * pairs and is chosen by conditional moves. */
static inline void nbr_accept(nbr_emit *e, const nbr_atom *p, const nbr_atom *q, const int *sp) {
    const int s0 = sp[0] + p->wrap[0] - q->wrap[0];
    const int s1 = sp[1] + p->wrap[1] - q->wrap[1];
    const int s2 = sp[2] + p->wrap[2] - q->wrap[2];
    const nbr_atom *ai, *aj;
    int t0, t1, t2;
    double v[3];
    if ((s0 | s1 | s2) == 0) {
        /* the common case (a predictable branch): orient by id (a conditional move); the shift
         * term s . H is exactly zero */
        const int flip = p->id > q->id;
        ai = flip ? q : p;
        aj = flip ? p : q;
        t0 = t1 = t2 = 0;
        for (int d = 0; d < 3; d++) v[d] = aj->xo[d] - ai->xo[d];
    } else {
        /* orient so that the shift is lexicographically positive */
        const int flip = s0 != 0 ? s0 < 0 : s1 != 0 ? s1 < 0 : s2 < 0;
        ai = flip ? q : p;
        aj = flip ? p : q;
        const int sgn = 1 - 2 * flip;
        t0 = sgn * s0;
        t1 = sgn * s1;
        t2 = sgn * s2;
        for (int d = 0; d < 3; d++)
            v[d] = (aj->xo[d] - ai->xo[d]) + (t0 * e->h[0][d] + t1 * e->h[1][d] + t2 * e->h[2][d]);
    }
    const double d2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if (!(d2 < e->cut2)) return;
    if (ai->id >= e->skip_from && aj->id >= e->skip_from) return;
    const int64_t k = e->count++;
    if (k >= e->capacity) return;
    if (e->pairs) {
        e->pairs[2 * k] = ai->id;
        e->pairs[2 * k + 1] = aj->id;
    }
    if (e->shifts) {
        e->shifts[3 * k] = t0;
        e->shifts[3 * k + 1] = t1;
        e->shifts[3 * k + 2] = t2;
    }
    if (e->vec) {
        e->vec[3 * k] = v[0];
        e->vec[3 * k + 1] = v[1];
        e->vec[3 * k + 2] = v[2];
    }
    if (e->dist) e->dist[k] = sqrt(d2);
}

/* Atoms of the stencil bins around one bin, each already moved by its image shift. */
typedef struct nbr_chunk {
    double *x, *y, *z;  /* [cap] shifted wrapped positions */
    double *d2;         /* [cap] squared distances to the current atom */
    int32_t *idx;       /* [cap] sorted atom index */
    int32_t *shift_of;  /* [cap] index into shifts */
    int32_t *hits;      /* [cap] */
    int32_t *shifts;    /* [cap][3] image shifts of the gathered bins */
    int64_t n, n_shifts;
} nbr_chunk;

/* Pairs every atom ia0 .. ia1-1 of a bin with the gathered atoms, then empties the chunk. */
static void nbr_flush(nbr_emit *e, nbr_chunk *ch, const nbr_atom *atoms, const double *wx,
                      const double *wy, const double *wz, int32_t ia0, int32_t ia1,
                      double reach2) {
    const int64_t m = ch->n;
    if (m == 0) return;
    nbr_emit le = *e; /* a local copy the compiler keeps in registers */
    for (int32_t ia = ia0; ia < ia1; ia++) {
        const double px = wx[ia], py = wy[ia], pz = wz[ia];
        /* squared distances (a loop compilers vectorize), then the hits gathered without
         * branches, then recorded */
        for (int64_t k = 0; k < m; k++) {
            const double dx = ch->x[k] - px, dy = ch->y[k] - py, dz = ch->z[k] - pz;
            ch->d2[k] = dx * dx + dy * dy + dz * dz;
        }
        int32_t nh = 0;
        int64_t k = 0;
        for (; k + 1 < m; k += 2) { /* unrolled once: half the loop overhead */
            ch->hits[nh] = (int32_t)k;
            nh += ch->d2[k] < reach2;
            ch->hits[nh] = (int32_t)k + 1;
            nh += ch->d2[k + 1] < reach2;
        }
        if (k < m) {
            ch->hits[nh] = (int32_t)k;
            nh += ch->d2[k] < reach2;
        }
        for (int32_t h = 0; h < nh; h++) {
            const int32_t c = ch->hits[h];
            nbr_accept(&le, atoms + ia, atoms + ch->idx[c], ch->shifts + 3 * ch->shift_of[c]);
        }
    }
    e->count = le.count;
    ch->n = 0;
    ch->n_shifts = 0;
}

/* Pairs the atoms ia0 .. ia1-1 of one bin among themselves (a < b, no shift). */
static void nbr_own(nbr_emit *e, int32_t *hits, const nbr_atom *atoms, const double *wx,
                    const double *wy, const double *wz, int32_t ia0, int32_t ia1, double reach2) {
    static const int zero_shift[3] = {0, 0, 0};
    nbr_emit le = *e;
    for (int32_t ia = ia0; ia + 1 < ia1; ia++) {
        const double px = wx[ia], py = wy[ia], pz = wz[ia];
        int32_t nh = 0;
        for (int32_t jb = ia + 1; jb < ia1; jb++) {
            const double dx = wx[jb] - px, dy = wy[jb] - py, dz = wz[jb] - pz;
            hits[nh] = jb;
            nh += dx * dx + dy * dy + dz * dz < reach2;
        }
        for (int32_t h = 0; h < nh; h++) nbr_accept(&le, atoms + ia, atoms + hits[h], zero_shift);
    }
    e->count = le.count;
}

/* Largest number of bins a system of n atoms may use. */
static int64_t nbr_max_bins(int64_t n) {
    const int64_t cap = 2 * n + 27;
    return cap < INT32_MAX - 1 ? cap : INT32_MAX - 1;
}

/* Searches one system. */
static nnpops_status nbr_system(const nnpops__nbr_in *in, int64_t s, nnpops__scratch *scratch,
                                nbr_emit *e) {
    const int64_t first = in->sys_start[s];
    const int64_t n = in->sys_start[s + 1] - first;
    if (n <= 0) return NNPOPS_OK;
    nbr_geom g;
    nnpops_status st = nbr_geometry(s, in->cells ? in->cells + 9 * s : NULL,
                                    in->pbc ? in->pbc + 3 * s : NULL, in->cutoff, in->max_images,
                                    &g);
    if (st != NNPOPS_OK) return st;

    st = nnpops__buf_reserve(&scratch->slot[2], sizeof(nbr_tmp) * (size_t)n, "neighbor cell list");
    if (st != NNPOPS_OK) return st;
    st = nnpops__buf_reserve(&scratch->slot[0], (sizeof(nbr_atom) + 3 * sizeof(double)) * (size_t)n,
                             "neighbor cell list");
    if (st != NNPOPS_OK) return st;
    nbr_tmp *tmp = scratch->slot[2].ptr;
    nbr_atom *atoms = scratch->slot[0].ptr;

    /* 1. fractional coordinates, wrapping, ranges along non-periodic axes */
    double flo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, fhi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
    double xabs = 0.0;
    for (int64_t a = 0; a < n; a++) {
        const int32_t id = in->order[first + a];
        if (id < 0 || id >= in->n_atoms)
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                "system %lld: atom index %d out of range (%lld atoms)",
                                (long long)s, (int)id, (long long)in->n_atoms);
        const double *x = in->positions + 3 * (size_t)id;
        if (!isfinite(x[0]) || !isfinite(x[1]) || !isfinite(x[2]))
            return nnpops__fail(NNPOPS_ERROR_BAD_POSITION,
                                "system %lld: atom %d has a non-finite coordinate", (long long)s,
                                (int)id);
        for (int d = 0; d < 3; d++)
            if (fabs(x[d]) > xabs) xabs = fabs(x[d]);
        nbr_tmp *t = tmp + a;
        for (int k = 0; k < 3; k++) {
            double f = x[0] * g.rec[k][0] + x[1] * g.rec[k][1] + x[2] * g.rec[k][2];
            int32_t w = 0;
            if (g.periodic[k]) {
                double fl = floor(f);
                if (!(fabs(fl) < 536870912.0)) /* 2^29: shifts stay in int32 */
                    return nnpops__fail(NNPOPS_ERROR_BAD_POSITION,
                                        "system %lld: atom %d lies %g cells away along axis %c, "
                                        "too far to wrap",
                                        (long long)s, (int)id, fl, nbr_axis_name[k]);
                f -= fl;
                if (f >= 1.0) { /* f was a tiny negative number */
                    f = 0.0;
                    fl += 1.0;
                }
                w = (int32_t)fl;
            } else {
                if (f < flo[k]) flo[k] = f;
                if (f > fhi[k]) fhi[k] = f;
            }
            t->f[k] = f;
            t->wrap[k] = w;
        }
    }

    /* 2. bins: at least `reach` thick, at most 2 N + 27 in all */
    double hsum = 0.0;
    if (g.any_periodic)
        for (int k = 0; k < 3; k++) hsum += norm3(g.h[k]);
    const double reach = in->cutoff * (1.0 + 1e-9) + 64.0 * DBL_EPSILON * (xabs + hsum) + 1e-300;
    double nbd[3];
    for (int k = 0; k < 3; k++) {
        double thick = g.periodic[k] ? g.width[k] : (fhi[k] - flo[k]) * g.width[k];
        double q = thick / reach;
        nbd[k] = (isfinite(q) && q >= 1.0) ? floor(q) : 1.0;
        if (nbd[k] > 2.0 * (double)n + 27.0) nbd[k] = 2.0 * (double)n + 27.0;
    }
    const double max_bins = (double)nbr_max_bins(n);
    while (nbd[0] * nbd[1] * nbd[2] > max_bins) {
        int m = 0;
        for (int k = 0; k < 3; k++) m += nbd[k] > 1.0;
        const double alpha = pow(max_bins / (nbd[0] * nbd[1] * nbd[2]), 1.0 / m);
        for (int k = 0; k < 3; k++)
            if (nbd[k] > 1.0) nbd[k] = fmax(1.0, floor(nbd[k] * alpha));
        if (nbd[0] * nbd[1] * nbd[2] > max_bins) { /* rounding left it too fine: coarsen more */
            int largest = 0;
            for (int k = 1; k < 3; k++)
                if (nbd[k] > nbd[largest]) largest = k;
            nbd[largest] -= 1.0;
        }
    }
    int nb[3], r[3];
    double scale[3], lo[3];
    for (int k = 0; k < 3; k++) {
        nb[k] = (int)nbd[k];
        double extent = g.periodic[k] ? 1.0 : fhi[k] - flo[k];
        lo[k] = g.periodic[k] ? 0.0 : flo[k];
        scale[k] = (extent > 0.0 && isfinite(extent)) ? nb[k] / extent : 0.0;
        const double t = extent * g.width[k] / nb[k]; /* bin thickness */
        double rk = t > 0.0 ? ceil(reach / t * (1.0 - 1e-12)) : HUGE_VAL;
        if (rk < 1.0) rk = 1.0;
        if (!g.periodic[k] && rk > nb[k] - 1) rk = nb[k] - 1;
        r[k] = (int)rk; /* periodic: at most about max_images + 1 */
    }
    const int64_t nbins = (int64_t)nb[0] * nb[1] * nb[2];
    st = nnpops__buf_reserve(&scratch->slot[1], sizeof(int32_t) * (size_t)(nbins + 1),
                             "neighbor cell list");
    if (st != NNPOPS_OK) return st;
    int32_t *start = scratch->slot[1].ptr;
    memset(start, 0, sizeof(int32_t) * (size_t)(nbins + 1));
    for (int64_t a = 0; a < n; a++) {
        nbr_tmp *t = tmp + a;
        int b[3];
        for (int k = 0; k < 3; k++) {
            double u = (t->f[k] - lo[k]) * scale[k];
            int bk = u > 0.0 ? (int)u : 0;
            b[k] = bk < nb[k] ? bk : nb[k] - 1;
        }
        t->bin = (int32_t)(((int64_t)b[0] * nb[1] + b[1]) * nb[2] + b[2]);
        start[t->bin]++;
    }
    double *wx = (double *)(atoms + n), *wy = wx + n, *wz = wy + n;
    /* counting sort, stable: inclusive prefix sums, then fill each bin from its end */
    for (int64_t b = 1; b < nbins; b++) start[b] += start[b - 1];
    start[nbins] = (int32_t)n;
    for (int64_t a = n - 1; a >= 0; a--) {
        const nbr_tmp *t = tmp + a;
        const int32_t id = in->order[first + a];
        const int32_t k = --start[t->bin];
        nbr_atom *at = atoms + k;
        const double *x = in->positions + 3 * (size_t)id;
        double *w[3] = {wx + k, wy + k, wz + k};
        for (int d = 0; d < 3; d++) {
            at->xo[d] = x[d];
            *w[d] = x[d] - (t->wrap[0] * g.h[0][d] + t->wrap[1] * g.h[1][d] +
                            t->wrap[2] * g.h[2][d]);
            at->wrap[d] = t->wrap[d];
        }
        at->id = id;
    }

    /* 3. pairs: each bin against the non-negative half of its stencil.  The bin's own atoms are
     * paired directly (a < b); the atoms of the other stencil bins are first gathered, shifted by
     * their image, into one buffer (in chunks of at most `cap` atoms), so that each atom of the bin
     * runs one long loop over them. */
    int32_t most = 0;
    for (int64_t b = 0; b < nbins; b++)
        if (start[b + 1] - start[b] > most) most = start[b + 1] - start[b];
    const int64_t cap = 2 * (int64_t)most > 512 ? 2 * (int64_t)most : 512;
    st = nnpops__buf_reserve(&scratch->slot[3], (sizeof(double) * 4 + sizeof(int32_t) * 6) *
                                                    (size_t)cap, "neighbor cell list");
    if (st != NNPOPS_OK) return st;
    nbr_chunk ch;
    ch.x = scratch->slot[3].ptr;
    ch.y = ch.x + cap;
    ch.z = ch.y + cap;
    ch.d2 = ch.z + cap;
    ch.idx = (int32_t *)(ch.d2 + cap);
    ch.shift_of = ch.idx + cap;
    ch.hits = ch.shift_of + cap;
    ch.shifts = ch.hits + cap; /* [cap][3] */
    ch.n = 0;
    ch.n_shifts = 0;
    const double reach2 = reach * reach;
    for (int d = 0; d < 3; d++)
        for (int c = 0; c < 3; c++) e->h[d][c] = g.h[d][c];
    const nbr_atom *atoms_r = atoms;
    for (int b0 = 0; b0 < nb[0]; b0++)
    for (int b1 = 0; b1 < nb[1]; b1++)
    for (int b2 = 0; b2 < nb[2]; b2++) {
        const int64_t src = ((int64_t)b0 * nb[1] + b1) * nb[2] + b2;
        const int32_t ia0 = start[src], ia1 = start[src + 1];
        if (ia0 == ia1) continue;
        nbr_own(e, ch.hits, atoms_r, wx, wy, wz, ia0, ia1, reach2);
        /* the other bins of the half stencil: o > 0 lexicographically */
        for (int o0 = 0; o0 <= r[0]; o0++) {
            int t0 = b0 + o0, sh[3];
            if (g.periodic[0]) {
                sh[0] = t0 >= 0 ? t0 / nb[0] : -((-t0 + nb[0] - 1) / nb[0]);
                t0 -= sh[0] * nb[0];
            } else {
                if (t0 >= nb[0]) break;
                sh[0] = 0;
            }
            for (int o1 = (o0 == 0 ? 0 : -r[1]); o1 <= r[1]; o1++) {
                int t1 = b1 + o1;
                if (g.periodic[1]) {
                    sh[1] = t1 >= 0 ? t1 / nb[1] : -((-t1 + nb[1] - 1) / nb[1]);
                    t1 -= sh[1] * nb[1];
                } else {
                    if (t1 < 0) continue;
                    if (t1 >= nb[1]) break;
                    sh[1] = 0;
                }
                for (int o2 = (o0 == 0 && o1 == 0 ? 1 : -r[2]); o2 <= r[2]; o2++) {
                    int t2 = b2 + o2;
                    if (g.periodic[2]) {
                        sh[2] = t2 >= 0 ? t2 / nb[2] : -((-t2 + nb[2] - 1) / nb[2]);
                        t2 -= sh[2] * nb[2];
                    } else {
                        if (t2 < 0) continue;
                        if (t2 >= nb[2]) break;
                        sh[2] = 0;
                    }
                    const int64_t dst = ((int64_t)t0 * nb[1] + t1) * nb[2] + t2;
                    const int32_t jb0 = start[dst], jb1 = start[dst + 1];
                    if (jb0 == jb1) continue;
                    if (ch.n + (jb1 - jb0) > cap)
                        nbr_flush(e, &ch, atoms_r, wx, wy, wz, ia0, ia1, reach2);
                    double sv[3];
                    for (int d = 0; d < 3; d++)
                        sv[d] = sh[0] * g.h[0][d] + sh[1] * g.h[1][d] + sh[2] * g.h[2][d];
                    const int32_t si = ch.n_shifts++;
                    for (int k = 0; k < 3; k++) ch.shifts[3 * si + k] = sh[k];
                    for (int32_t jb = jb0; jb < jb1; jb++) {
                        const int64_t c = ch.n++;
                        ch.x[c] = wx[jb] + sv[0];
                        ch.y[c] = wy[jb] + sv[1];
                        ch.z[c] = wz[jb] + sv[2];
                        ch.idx[c] = jb;
                        ch.shift_of[c] = si;
                    }
                }
            }
        }
        nbr_flush(e, &ch, atoms_r, wx, wy, wz, ia0, ia1, reach2);
    }
    return NNPOPS_OK;
}

nnpops_status nnpops__neighbors_cpu(const nnpops__nbr_in *in, nnpops__scratch *scratch,
                                    nnpops__nbr_out *out) {
    out->n_pairs = 0;
    if (in->n_atoms < 0 || in->n_atoms > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "neighbor search: %lld atoms (at most 2^31 - 1 are supported)",
                            (long long)in->n_atoms);
    if (!(in->cutoff >= 0.0) || !isfinite(in->cutoff))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "neighbor search: cutoff %g must be finite and non-negative",
                            in->cutoff);
    if (out->capacity < 0 || (out->capacity > 0 && !out->pairs))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "neighbor search: capacity %lld without a pairs array",
                            (long long)out->capacity);
    if (in->n_systems > 0 && (!in->sys_start || (in->n_atoms > 0 && (!in->order ||
                                                                      !in->positions))))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "neighbor search: missing system ranges, atom order or positions");
    for (int64_t s = 0; s < in->n_systems; s++) {
        if (in->sys_start[s] < 0 || in->sys_start[s + 1] < in->sys_start[s] ||
            in->sys_start[s + 1] > in->n_atoms)
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                "system %lld: atom range [%lld, %lld) is not within [0, %lld)",
                                (long long)s, (long long)in->sys_start[s],
                                (long long)in->sys_start[s + 1], (long long)in->n_atoms);
    }

    nbr_emit e = {
        .cut2 = in->cutoff * in->cutoff,
        .skip_from = in->skip_from,
        .count = 0,
        .capacity = out->capacity,
        .pairs = out->pairs,
        .shifts = out->shifts,
        .vec = out->vec,
        .dist = out->dist,
    };
    for (int64_t s = 0; s < in->n_systems; s++) {
        nnpops_status st = nbr_system(in, s, scratch, &e);
        if (st != NNPOPS_OK) return st;
    }
    out->n_pairs = e.count;
    return e.count > e.capacity ? NNPOPS_ERROR_NEIGHBOR_OVERFLOW : NNPOPS_OK;
}
