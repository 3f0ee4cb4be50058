/*
 * test_gpu_ops.c - every CUDA op against its CPU twin on random inputs (atol + rtol), all launches
 * on a non-default (non-blocking) stream.  One CTest entry per case (label gpu); exit 77 without a
 * GPU.
 *
 *   neighbors_center   center lists of a batch (non-periodic cluster, orthorhombic box with atoms
 *                      outside the cell, triclinic box, a cell thinner than the cutoff (images),
 *                      mixed periodicity, an empty system; ghosts; shuffled atom order), brute
 *                      force and cell list, against nnpops__center_neighbors_cpu: the same entries
 *                      per center (compared as sorted sets), vectors, distances, n_half
 *   neighbors_half     the half list (nnpops__neighbors_cuda) against nnpops__neighbors_cpu
 *   neighbors_overflow capacity below the need: flag, total count, complete start[]
 *   neighbors_errors   singular cell, too many images, too-close atoms
 *   center_lists       CSR center lists from a half list against nnpops__center_lists_cpu
 *   aev                AEV forward and backward (ANI-2x constants; float and double), in CSR mode
 *                      (center lists of a half list) and in center-list mode (entry == NULL)
 *   dense              dense forward / backward (cuBLAS) against the CPU GEMM
 *   celu               CELU forward / backward
 *   fused              bias + CELU, CELU' from activations, the ensemble output layer (mean,
 *                      one member among all, one member alone)
 *   small_gemm         the small-n grouped GEMM (fused epilogues) against its CPU twin
 *   reduce             pair reduction (forces, virials, per-atom virials) and energy reduction
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "core/src/internal.h"
#include "gpu_check.h"
#include "kernels/cpu/fused.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { return test_rand(&rng); }

/* ---- a batch of systems for the neighbor tests --------------------------------------------- */

typedef struct batchset {
    int64_t n, ns, n_centers;
    double *x;
    int64_t *sys_start;
    int32_t *order;
    double *cells;
    uint8_t *pbc;
    double cutoff;
} batchset;

static void cross(const double *u, const double *v, double *w) {
    w[0] = u[1] * v[2] - u[2] * v[1];
    w[1] = u[2] * v[0] - u[0] * v[2];
    w[2] = u[0] * v[1] - u[1] * v[0];
}

/* Appends a system: n atoms at random fractional positions of `cell` (rows), shifted by random
 * lattice vectors along periodic axes when `outside`. */
static void add_system(batchset *b, double *pos, int n, const double *cell, const uint8_t *pbc,
                       int outside) {
    const int64_t s = b->ns;
    b->sys_start[s + 1] = b->sys_start[s] + n;
    for (int k = 0; k < 9; k++) b->cells[9 * s + k] = cell[k];
    for (int k = 0; k < 3; k++) b->pbc[3 * s + k] = pbc[k];
    for (int i = 0; i < n; i++) {
        double f[3];
        for (int k = 0; k < 3; k++) {
            f[k] = urand();
            if (outside && pbc[k] && urand() < 0.3) f[k] += floor(urand() * 5) - 2;
        }
        double *p = pos + 3 * (b->sys_start[s] + i);
        for (int d = 0; d < 3; d++) p[d] = f[0] * cell[d] + f[1] * cell[3 + d] + f[2] * cell[6 + d];
    }
    b->ns++;
}

static batchset make_batch(void) {
    batchset b;
    memset(&b, 0, sizeof b);
    const int cap = 2000;
    double *pos = calloc(3 * cap, sizeof(double));
    b.sys_start = calloc(16, sizeof(int64_t));
    b.cells = calloc(9 * 16, sizeof(double));
    b.pbc = calloc(3 * 16, 1);
    b.cutoff = 5.2;
    const uint8_t none[3] = {0, 0, 0}, all[3] = {1, 1, 1}, mixed[3] = {1, 1, 0};
    const double cluster[9] = {12, 0, 0, 0, 12, 0, 0, 0, 12};
    add_system(&b, pos, 150, cluster, none, 0);
    const double ortho[9] = {16, 0, 0, 0, 17, 0, 0, 0, 18};
    add_system(&b, pos, 400, ortho, all, 1);
    const double tri[9] = {15, 0, 0, 4, 14, 0, -3, 2, 13};
    add_system(&b, pos, 300, tri, all, 1);
    const double thin[9] = {4, 0, 0, 0.5, 4.5, 0, 0.3, -0.2, 5};
    add_system(&b, pos, 6, thin, all, 1);
    const double slab[9] = {14, 0, 0, 2, 13, 0, 0, 0, 25};
    add_system(&b, pos, 200, slab, mixed, 1);
    add_system(&b, pos, 0, ortho, all, 0); /* empty */
    const double small[9] = {9, 0, 0, 0, 9, 0, 0, 0, 9};
    add_system(&b, pos, 40, small, all, 0);
    b.n = b.sys_start[b.ns];
    b.n_centers = b.n - 30;
    /* atom ids: a random permutation, so that order[] and the ghosts are scattered */
    int32_t *perm = malloc(sizeof(int32_t) * b.n);
    for (int64_t i = 0; i < b.n; i++) perm[i] = (int32_t)i;
    for (int64_t i = b.n - 1; i > 0; i--) {
        int64_t j = (int64_t)(urand() * (double)(i + 1));
        if (j > i) j = i;
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    b.order = perm;
    b.x = malloc(sizeof(double) * 3 * b.n);
    for (int64_t k = 0; k < b.n; k++)
        for (int d = 0; d < 3; d++) b.x[3 * perm[k] + d] = pos[3 * k + d];
    free(pos);
    return b;
}

typedef struct dbatch {
    double *x, *cells;
    int64_t *sys_start;
    int32_t *order;
    uint8_t *pbc;
} dbatch;

static dbatch upload_batch(const batchset *b) {
    dbatch d;
    d.x = dup_to_device(b->x, sizeof(double) * 3 * b->n);
    d.cells = dup_to_device(b->cells, sizeof(double) * 9 * b->ns);
    d.sys_start = dup_to_device(b->sys_start, sizeof(int64_t) * (b->ns + 1));
    d.order = dup_to_device(b->order, sizeof(int32_t) * b->n);
    d.pbc = dup_to_device(b->pbc, 3 * b->ns);
    return d;
}

static nnpops__nbr_in host_in(const batchset *b) {
    nnpops__nbr_in in = {b->n, b->x, b->ns, b->sys_start, b->order, b->cells, b->pbc, b->cutoff,
                         b->n, 64};
    return in;
}

static nnpops__nbr_in dev_in(const batchset *b, const dbatch *d) {
    nnpops__nbr_in in = {b->n, d->x, b->ns, d->sys_start, d->order, d->cells, d->pbc, b->cutoff,
                         b->n, 64};
    return in;
}

typedef struct ent {
    int32_t i, j, s[3];
    double v[3], d;
} ent;

static int ent_cmp(const void *pa, const void *pb) {
    const ent *a = pa, *b = pb;
    if (a->i != b->i) return a->i < b->i ? -1 : 1;
    if (a->j != b->j) return a->j < b->j ? -1 : 1;
    for (int k = 0; k < 3; k++)
        if (a->s[k] != b->s[k]) return a->s[k] < b->s[k] ? -1 : 1;
    return 0;
}

static ent *gather(int64_t n, const int32_t *pairs, const int32_t *shifts, const double *vec,
                   const double *dist) {
    ent *e = malloc(sizeof(ent) * (n ? n : 1));
    for (int64_t k = 0; k < n; k++) {
        e[k].i = pairs[2 * k];
        e[k].j = pairs[2 * k + 1];
        for (int a = 0; a < 3; a++) {
            e[k].s[a] = shifts[3 * k + a];
            e[k].v[a] = vec[3 * k + a];
        }
        e[k].d = dist ? dist[k] : 0;
    }
    qsort(e, n, sizeof(ent), ent_cmp);
    return e;
}

static void compare_entries(const char *what, const ent *a, const ent *b, int64_t n) {
    double worst = 0;
    for (int64_t k = 0; k < n; k++) {
        if (ent_cmp(a + k, b + k) != 0) {
            fprintf(stderr, "%s: entry %lld differs: (%d %d %d %d %d) vs (%d %d %d %d %d)\n", what,
                    (long long)k, a[k].i, a[k].j, a[k].s[0], a[k].s[1], a[k].s[2], b[k].i, b[k].j,
                    b[k].s[0], b[k].s[1], b[k].s[2]);
            exit(1);
        }
        for (int x = 0; x < 3; x++) worst = fmax(worst, fabs(a[k].v[x] - b[k].v[x]));
        worst = fmax(worst, fabs(a[k].d - b[k].d));
    }
    printf("  %-40s %lld entries equal, worst vector difference %.3g\n", what, (long long)n, worst);
    CHECK(worst <= 1e-12);
}

/* CPU center lists of the batch: start, and sorted entries */
typedef struct cl_ref {
    int64_t total, n_half;
    int64_t *start;
    ent *e;
} cl_ref;

static cl_ref cpu_center_lists(const batchset *b, double min_d) {
    nnpops__scratch sc;
    memset(&sc, 0, sizeof sc);
    nnpops__nbr_in in = host_in(b);
    const int64_t cap = 200 * b->n;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap), *shifts = malloc(sizeof(int32_t) * 3 * cap);
    double *vec = malloc(sizeof(double) * 3 * cap), *dist = malloc(sizeof(double) * cap);
    cl_ref r;
    r.start = malloc(sizeof(int64_t) * (b->n_centers + 1));
    nnpops__dev_status st;
    nnpops__center_out out = {cap, r.start, pairs, shifts, vec, dist, &st};
    CHECK_OK(nnpops__center_neighbors_cpu(&in, b->n_centers, min_d, &sc, &out));
    CHECK(!(st.flags & NNPOPS__ST_OVERFLOW));
    r.total = st.n_entries;
    r.n_half = st.n_half;
    r.e = gather(r.total, pairs, shifts, vec, dist);
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&sc.slot[k]);
    free(pairs);
    free(shifts);
    free(vec);
    free(dist);
    return r;
}

typedef struct gpu_cl {
    int64_t cap;
    int64_t *start;
    int32_t *pairs, *shifts;
    double *vec, *dist;
    nnpops__dev_status *st;
    void *work;
    size_t work_bytes;
} gpu_cl;

static nnpops__dev_status run_gpu_center_lists(const batchset *b, const dbatch *d, int algorithm,
                                               int64_t cap, double min_d, int64_t *start_h,
                                               ent **entries) {
    nnpops__nbr_plan plan;
    nnpops__nbr_cuda_plan(b->ns, b->sys_start, b->cells, b->pbc, b->cutoff, algorithm, &plan);
    CHECK(plan.algorithm == algorithm);
    gpu_cl g;
    g.cap = cap;
    g.start = dalloc(sizeof(int64_t) * (b->n_centers + 1));
    g.pairs = dalloc(sizeof(int32_t) * 2 * cap);
    g.shifts = dalloc(sizeof(int32_t) * 3 * cap);
    g.vec = dalloc(sizeof(double) * 3 * cap);
    g.dist = dalloc(sizeof(double) * cap);
    g.st = dalloc(sizeof(nnpops__dev_status));
    g.work_bytes = nnpops__nbr_cuda_work_bytes(b->n, b->ns, b->n_centers, &plan);
    g.work = dalloc(g.work_bytes);
    nnpops__nbr_in in = dev_in(b, d);
    nnpops__center_out out = {cap, g.start, g.pairs, g.shifts, g.vec, g.dist, g.st};
    CHECK_OK(nnpops__center_neighbors_cuda(&in, b->n_centers, min_d, &plan, &out, g.work,
                                           g.work_bytes, g_stream));
    nnpops__dev_status st;
    to_host(&st, g.st, sizeof st);
    to_host(start_h, g.start, sizeof(int64_t) * (b->n_centers + 1));
    if (entries) {
        const int64_t n = st.n_entries < cap ? st.n_entries : cap;
        int32_t *pairs = malloc(sizeof(int32_t) * 2 * (n + 1)), *shifts = malloc(sizeof(int32_t) * 3 * (n + 1));
        double *vec = malloc(sizeof(double) * 3 * (n + 1)), *dist = malloc(sizeof(double) * (n + 1));
        to_host(pairs, g.pairs, sizeof(int32_t) * 2 * n);
        to_host(shifts, g.shifts, sizeof(int32_t) * 3 * n);
        to_host(vec, g.vec, sizeof(double) * 3 * n);
        to_host(dist, g.dist, sizeof(double) * n);
        /* every entry must lie in its center's range */
        for (int64_t c = 0; c < b->n_centers; c++)
            for (int64_t e = start_h[c]; e < start_h[c + 1]; e++) CHECK(pairs[2 * e] == c);
        *entries = gather(n, pairs, shifts, vec, dist);
        free(pairs);
        free(shifts);
        free(vec);
        free(dist);
    }
    cudaFree(g.start);
    cudaFree(g.pairs);
    cudaFree(g.shifts);
    cudaFree(g.vec);
    cudaFree(g.dist);
    cudaFree(g.st);
    cudaFree(g.work);
    return st;
}

static int case_neighbors_center(void) {
    batchset b = make_batch();
    dbatch d = upload_batch(&b);
    cl_ref ref = cpu_center_lists(&b, 0.0);
    printf("batch of %lld systems, %lld atoms (%lld centers), CPU: %lld entries, %lld pairs\n",
           (long long)b.ns, (long long)b.n, (long long)b.n_centers, (long long)ref.total,
           (long long)ref.n_half);
    nnpops__nbr_plan auto_plan;
    nnpops__nbr_cuda_plan(b.ns, b.sys_start, b.cells, b.pbc, b.cutoff, NNPOPS__NBR_AUTO, &auto_plan);
    printf("  automatic choice: %s\n", auto_plan.algorithm == NNPOPS__NBR_BRUTE ? "brute" : "cell");
    for (int alg = NNPOPS__NBR_BRUTE; alg <= NNPOPS__NBR_CELL; alg++) {
        int64_t *start = malloc(sizeof(int64_t) * (b.n_centers + 1));
        ent *e = NULL;
        nnpops__dev_status st = run_gpu_center_lists(&b, &d, alg, ref.total + 100, 0.0, start, &e);
        const char *name = alg == NNPOPS__NBR_BRUTE ? "brute force" : "cell list";
        printf("  %s: %lld entries, %lld pairs, flags %u\n", name, (long long)st.n_entries,
               (long long)st.n_half, st.flags);
        CHECK(st.flags == 0);
        CHECK(st.n_entries == ref.total);
        CHECK(st.n_half == ref.n_half);
        for (int64_t c = 0; c <= b.n_centers; c++) CHECK(start[c] == ref.start[c]);
        compare_entries(name, e, ref.e, ref.total);
        free(start);
        free(e);
    }
    return 0;
}

static int case_neighbors_half(void) {
    batchset b = make_batch();
    b.n_centers = b.n;
    dbatch d = upload_batch(&b);
    nnpops__scratch sc;
    memset(&sc, 0, sizeof sc);
    nnpops__nbr_in in = host_in(&b);
    in.skip_from = b.n - 30;
    const int64_t cap = 100 * b.n;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap), *shifts = malloc(sizeof(int32_t) * 3 * cap);
    double *vec = malloc(sizeof(double) * 3 * cap), *dist = malloc(sizeof(double) * cap);
    nnpops__nbr_out out = {cap, 0, pairs, shifts, vec, dist};
    CHECK_OK(nnpops__neighbors_cpu(&in, &sc, &out));
    ent *ref = gather(out.n_pairs, pairs, shifts, vec, dist);
    printf("half list: CPU %lld pairs\n", (long long)out.n_pairs);
    for (int alg = NNPOPS__NBR_BRUTE; alg <= NNPOPS__NBR_CELL; alg++) {
        nnpops__nbr_plan plan;
        nnpops__nbr_cuda_plan(b.ns, b.sys_start, b.cells, b.pbc, b.cutoff, alg, &plan);
        nnpops__nbr_in din = dev_in(&b, &d);
        din.skip_from = in.skip_from;
        const size_t wb = nnpops__nbr_cuda_work_bytes(b.n, b.ns, b.n, &plan);
        void *work = dalloc(wb);
        nnpops__nbr_out dout = {cap, 0, dalloc(sizeof(int32_t) * 2 * cap),
                                dalloc(sizeof(int32_t) * 3 * cap), dalloc(sizeof(double) * 3 * cap),
                                dalloc(sizeof(double) * cap)};
        nnpops__dev_status *dst = dalloc(sizeof(nnpops__dev_status));
        CHECK_OK(nnpops__neighbors_cuda(&din, &plan, &dout, dst, work, wb, g_stream));
        nnpops__dev_status st;
        to_host(&st, dst, sizeof st);
        CHECK(st.flags == 0);
        CHECK(st.n_entries == out.n_pairs);
        const int64_t n = st.n_entries;
        int32_t *hp = malloc(sizeof(int32_t) * 2 * n), *hs = malloc(sizeof(int32_t) * 3 * n);
        double *hv = malloc(sizeof(double) * 3 * n), *hd = malloc(sizeof(double) * n);
        to_host(hp, dout.pairs, sizeof(int32_t) * 2 * n);
        to_host(hs, dout.shifts, sizeof(int32_t) * 3 * n);
        to_host(hv, dout.vec, sizeof(double) * 3 * n);
        to_host(hd, dout.dist, sizeof(double) * n);
        ent *e = gather(n, hp, hs, hv, hd);
        compare_entries(alg == NNPOPS__NBR_BRUTE ? "half list, brute force" : "half list, cell list",
                        e, ref, n);
        free(e);
        free(hp);
        free(hs);
        free(hv);
        free(hd);
        cudaFree(work);
        cudaFree(dout.pairs);
        cudaFree(dout.shifts);
        cudaFree(dout.vec);
        cudaFree(dout.dist);
        cudaFree(dst);
    }
    return 0;
}

static int case_neighbors_overflow(void) {
    batchset b = make_batch();
    dbatch d = upload_batch(&b);
    cl_ref ref = cpu_center_lists(&b, 0.0);
    for (int alg = NNPOPS__NBR_BRUTE; alg <= NNPOPS__NBR_CELL; alg++) {
        int64_t *start = malloc(sizeof(int64_t) * (b.n_centers + 1));
        nnpops__dev_status st = run_gpu_center_lists(&b, &d, alg, ref.total / 3, 0.0, start, NULL);
        printf("  capacity %lld: flags %u, %lld entries counted\n", (long long)(ref.total / 3),
               st.flags, (long long)st.n_entries);
        CHECK(st.flags & NNPOPS__ST_OVERFLOW);
        CHECK(st.n_entries == ref.total);
        for (int64_t c = 0; c <= b.n_centers; c++) CHECK(start[c] == ref.start[c]);
        free(start);
    }
    return 0;
}

static int case_neighbors_errors(void) {
    /* one good system, then a singular one; then a thin one with max_images 1; then close atoms */
    for (int which = 0; which < 3; which++) {
        batchset b;
        memset(&b, 0, sizeof b);
        double *pos = calloc(3 * 100, sizeof(double));
        b.sys_start = calloc(8, sizeof(int64_t));
        b.cells = calloc(72, sizeof(double));
        b.pbc = calloc(24, 1);
        b.cutoff = 5.2;
        const uint8_t all[3] = {1, 1, 1};
        const double good[9] = {12, 0, 0, 0, 12, 0, 0, 0, 12};
        add_system(&b, pos, 30, good, all, 0);
        if (which == 0) {
            const double bad[9] = {10, 0, 0, 10, 0, 0, 0, 0, 10};
            add_system(&b, pos, 10, bad, all, 0);
        } else if (which == 1) {
            const double thin[9] = {10, 0, 0, 0, 2, 0, 0, 0, 10};
            add_system(&b, pos, 10, thin, all, 0);
        } else {
            add_system(&b, pos, 10, good, all, 0);
            for (int d2 = 0; d2 < 3; d2++) pos[3 * 35 + d2] = pos[3 * 34 + d2] + (d2 == 0 ? 0.05 : 0);
        }
        b.n = b.sys_start[b.ns];
        b.n_centers = b.n;
        b.order = malloc(sizeof(int32_t) * b.n);
        for (int64_t i = 0; i < b.n; i++) b.order[i] = (int32_t)i;
        b.x = pos;
        dbatch d = upload_batch(&b);
        nnpops__nbr_in in = dev_in(&b, &d);
        in.max_images = which == 1 ? 1 : 64;
        for (int alg = NNPOPS__NBR_BRUTE; alg <= NNPOPS__NBR_CELL; alg++) {
            nnpops__nbr_plan plan;
            nnpops__nbr_cuda_plan(b.ns, b.sys_start, b.cells, b.pbc, b.cutoff, alg, &plan);
            const size_t wb = nnpops__nbr_cuda_work_bytes(b.n, b.ns, b.n, &plan);
            void *work = dalloc(wb);
            const int64_t cap = 100 * b.n;
            nnpops__dev_status *dst = dalloc(sizeof(nnpops__dev_status));
            nnpops__center_out out = {cap, dalloc(sizeof(int64_t) * (b.n + 1)),
                                      dalloc(sizeof(int32_t) * 2 * cap), NULL,
                                      dalloc(sizeof(double) * 3 * cap), NULL, dst};
            CHECK_OK(nnpops__center_neighbors_cuda(&in, b.n, 0.1, &plan, &out, work, wb, g_stream));
            nnpops__dev_status st;
            to_host(&st, dst, sizeof st);
            printf("  case %d %s: flags %u system %d axis %d images %d close %d-%d %.3g\n", which,
                   alg == NNPOPS__NBR_BRUTE ? "brute" : "cell", st.flags, st.bad_system,
                   st.bad_axis, st.images, st.close_i, st.close_j, st.close_d);
            if (which == 0) {
                CHECK(st.flags & NNPOPS__ST_BAD_CELL);
                CHECK(st.bad_system == 1 && st.bad_kind == (int)NNPOPS__ST_BAD_CELL);
            } else if (which == 1) {
                CHECK(st.flags & NNPOPS__ST_TOO_MANY_IMAGES);
                CHECK(st.bad_system == 1 && st.bad_axis == 1 && st.images == 3);
            } else {
                CHECK(st.flags == NNPOPS__ST_TOO_CLOSE);
                CHECK((st.close_i == 34 && st.close_j == 35) || (st.close_i == 35 && st.close_j == 34));
                CHECK(fabs(st.close_d - 0.05) < 1e-9);
            }
            cudaFree(work);
            cudaFree(dst);
            cudaFree(out.start);
            cudaFree(out.pairs);
            cudaFree(out.vec);
        }
    }
    return 0;
}

static int case_center_lists(void) {
    batchset b = make_batch();
    nnpops__scratch sc;
    memset(&sc, 0, sizeof sc);
    nnpops__nbr_in in = host_in(&b);
    const int64_t cap = 100 * b.n;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap);
    nnpops__nbr_out out = {cap, 0, pairs, NULL, NULL, NULL};
    CHECK_OK(nnpops__neighbors_cpu(&in, &sc, &out));
    const int64_t np = out.n_pairs, nc = b.n_centers;
    int64_t *start = malloc(sizeof(int64_t) * (nc + 1)), *entry = malloc(sizeof(int64_t) * 2 * np);
    const int64_t maxc = nnpops__center_lists_cpu(nc, np, pairs, start, entry);
    int32_t *dp = dup_to_device(pairs, sizeof(int32_t) * 2 * np);
    int64_t *dstart = dalloc(sizeof(int64_t) * (nc + 1)), *dentry = dalloc(sizeof(int64_t) * 2 * np);
    int64_t *dmax = dalloc(sizeof(int64_t)), *dnp = dup_to_device(&np, sizeof np);
    const size_t wb = nnpops__center_lists_cuda_work_bytes(nc);
    void *work = dalloc(wb);
    CHECK_OK(nnpops__center_lists_cuda(nc, np + 1000, dp, dnp, dstart, dentry, dmax, work, wb,
                                       g_stream));
    int64_t *hs = malloc(sizeof(int64_t) * (nc + 1)), *he = malloc(sizeof(int64_t) * 2 * np), hmax;
    to_host(hs, dstart, sizeof(int64_t) * (nc + 1));
    to_host(he, dentry, sizeof(int64_t) * 2 * np);
    to_host(&hmax, dmax, sizeof hmax);
    CHECK(hmax == maxc);
    for (int64_t c = 0; c <= nc; c++) CHECK(hs[c] == start[c]);
    /* the entries of each center, as sets */
    int64_t *a = malloc(sizeof(int64_t) * (maxc + 1)), *r = malloc(sizeof(int64_t) * (maxc + 1));
    for (int64_t c = 0; c < nc; c++) {
        const int64_t k = start[c + 1] - start[c];
        memcpy(a, he + start[c], sizeof(int64_t) * k);
        memcpy(r, entry + start[c], sizeof(int64_t) * k);
        for (int64_t x = 1; x < k; x++)
            for (int64_t y = x; y > 0 && a[y - 1] > a[y]; y--) {
                int64_t t = a[y];
                a[y] = a[y - 1];
                a[y - 1] = t;
            }
        for (int64_t x = 0; x < k; x++) CHECK(a[x] == r[x]); /* the CPU lists are in pair order */
    }
    printf("  %lld centers, %lld pairs, largest list %lld: equal\n", (long long)nc, (long long)np,
           (long long)maxc);
    return 0;
}

/* ---- AEV ----------------------------------------------------------------------------------- */

static const nnpops__ani *load_ani(const char *name, nnpops_precision prec, nnpops_model **m) {
    CHECK_OK(nnpops_model_load(name, "cpu", prec, m));
    CHECK(!strcmp((*m)->type, "ani"));
    return (*m)->impl;
}

/* atoms at least dmin apart, uniform in a cube (rejection) */
static void random_cluster(int n, double side, double dmin, double *x) {
    for (int i = 0; i < n; i++) {
        for (int tries = 0;; tries++) {
            for (int d = 0; d < 3; d++) x[3 * i + d] = urand() * side;
            int ok = 1;
            for (int j = 0; j < i && ok; j++) {
                double r2 = 0;
                for (int d = 0; d < 3; d++) r2 += (x[3 * i + d] - x[3 * j + d]) * (x[3 * i + d] - x[3 * j + d]);
                ok = r2 > dmin * dmin;
            }
            if (ok || tries > 1000) break;
        }
    }
}

static int aev_one(const nnpops__aev_desc *desc, int f64, int n, const double *x, const double *cell,
                   const uint8_t *pbc, const char *label) {
    const int S = desc->n_species;
    int32_t *species = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) species[i] = (int32_t)(urand() * S) % S;
    int64_t sys_start[2] = {0, n};
    int32_t *order = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) order[i] = i;
    double cells[9] = {0};
    uint8_t pb[3] = {0, 0, 0};
    if (cell) {
        memcpy(cells, cell, sizeof cells);
        memcpy(pb, pbc, 3);
    }
    nnpops__nbr_in in = {n, x, 1, sys_start, order, cells, pb, desc->rc_r, n, 64};
    nnpops__scratch sc;
    memset(&sc, 0, sizeof sc);
    const int64_t cap = 400 * (int64_t)n;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap);
    double *vec = malloc(sizeof(double) * 3 * cap);
    const size_t es = f64 ? 8 : 4;
    const int64_t L = desc->aev_len, ld = n + 3;
    int32_t *centers = malloc(sizeof(int32_t) * n);
    for (int r = 0; r < n; r++) centers[r] = (int32_t)((r * 7) % n); /* a permutation (gcd(7, n) = 1) */
    int32_t *dspecies = dup_to_device(species, sizeof(int32_t) * n);
    int32_t *dcenters = dup_to_device(centers, sizeof(int32_t) * n);
    nnpops__dev_status *dst = dalloc(sizeof(nnpops__dev_status));
    double worst = 0;
    for (int mode = 0; mode < 2; mode++) {
        /* mode 0: CSR center lists of the half list; mode 1: directed center lists, entry NULL */
        int64_t np, max_entries;
        int64_t *start = malloc(sizeof(int64_t) * (n + 1)), *entry;
        if (mode == 0) {
            nnpops__nbr_out out = {cap, 0, pairs, NULL, vec, NULL};
            CHECK_OK(nnpops__neighbors_cpu(&in, &sc, &out));
            np = out.n_pairs;
            entry = malloc(sizeof(int64_t) * 2 * np);
            max_entries = nnpops__center_lists_cpu(n, np, pairs, start, entry);
        } else {
            nnpops__dev_status st;
            nnpops__center_out out = {cap, start, pairs, NULL, vec, NULL, &st};
            CHECK_OK(nnpops__center_neighbors_cpu(&in, n, 0.0, &sc, &out));
            np = st.n_entries;
            entry = malloc(sizeof(int64_t) * np);
            max_entries = 0;
            for (int64_t e = 0; e < np; e++) entry[e] = 2 * e;
            for (int c = 0; c < n; c++)
                if (start[c + 1] - start[c] > max_entries) max_entries = start[c + 1] - start[c];
        }
        void *work = malloc(nnpops__aev_work_bytes(desc, max_entries));
        void *aev_c = calloc(L * ld, es), *aev_g = malloc(L * ld * es);
        double *grad_c = calloc(3 * np, sizeof(double)), *grad_g = malloc(sizeof(double) * 3 * np);
        void *gin = malloc(L * ld * es);
        for (int64_t k = 0; k < L * ld; k++) {
            const double v = 2 * urand() - 1;
            if (f64) ((double *)gin)[k] = v;
            else ((float *)gin)[k] = (float)v;
        }
        if (f64) {
            nnpops__aev_forward_cpu_f64(desc, n, centers, start, entry, pairs, vec, species, aev_c, ld, work);
            nnpops__aev_backward_cpu_f64(desc, n, centers, start, entry, pairs, vec, species, gin, ld, grad_c, work);
        } else {
            nnpops__aev_forward_cpu_f32(desc, n, centers, start, entry, pairs, vec, species, aev_c, ld, work);
            nnpops__aev_backward_cpu_f32(desc, n, centers, start, entry, pairs, vec, species, gin, ld, grad_c, work);
        }
        int64_t *dstart = dup_to_device(start, sizeof(int64_t) * (n + 1));
        int64_t *dentry = mode == 0 ? dup_to_device(entry, sizeof(int64_t) * 2 * np) : NULL;
        int32_t *dpairs = dup_to_device(pairs, sizeof(int32_t) * 2 * np);
        double *dvec = dup_to_device(vec, sizeof(double) * 3 * np);
        void *daev = dalloc(L * ld * es), *dgin = dup_to_device(gin, L * ld * es);
        double *dgrad = dalloc(sizeof(double) * 3 * np);
        /* a small angular capacity first: the kernels must flag it */
        CUDA_CHECK(cudaMemsetAsync(dst, 0, sizeof(nnpops__dev_status), g_stream));
        const int32_t small = 4;
        if (f64)
            CHECK_OK(nnpops__aev_forward_cuda_f64(desc, n, dcenters, dstart, dentry, dpairs, dvec,
                                                  dspecies, daev, ld, np, small, dst, g_stream));
        else
            CHECK_OK(nnpops__aev_forward_cuda_f32(desc, n, dcenters, dstart, dentry, dpairs, dvec,
                                                  dspecies, daev, ld, np, small, dst, g_stream));
        nnpops__dev_status st;
        to_host(&st, dst, sizeof st);
        CHECK(st.flags & NNPOPS__ST_ANGULAR);
        const int32_t need = st.max_angular;
        CHECK(need > small);
        CUDA_CHECK(cudaMemsetAsync(dst, 0, sizeof(nnpops__dev_status), g_stream));
        if (f64) {
            CHECK_OK(nnpops__aev_forward_cuda_f64(desc, n, dcenters, dstart, dentry, dpairs, dvec,
                                                  dspecies, daev, ld, np, need, dst, g_stream));
            CHECK_OK(nnpops__aev_backward_cuda_f64(desc, n, dcenters, dstart, dentry, dpairs, dvec,
                                                   dspecies, dgin, ld, dgrad, np, need, dst, g_stream));
        } else {
            CHECK_OK(nnpops__aev_forward_cuda_f32(desc, n, dcenters, dstart, dentry, dpairs, dvec,
                                                  dspecies, daev, ld, np, need, dst, g_stream));
            CHECK_OK(nnpops__aev_backward_cuda_f32(desc, n, dcenters, dstart, dentry, dpairs, dvec,
                                                   dspecies, dgin, ld, dgrad, np, need, dst, g_stream));
        }
        to_host(&st, dst, sizeof st);
        CHECK(st.flags == 0);
        to_host(aev_g, daev, L * ld * es);
        to_host(grad_g, dgrad, sizeof(double) * 3 * np);
        /* compare the n written columns */
        const int64_t cnt = L * n;
        double *a = malloc(sizeof(double) * cnt), *b = malloc(sizeof(double) * cnt);
        for (int64_t f = 0; f < L; f++)
            for (int r = 0; r < n; r++) {
                a[f * n + r] = f64 ? ((double *)aev_g)[f * ld + r] : ((float *)aev_g)[f * ld + r];
                b[f * n + r] = f64 ? ((double *)aev_c)[f * ld + r] : ((float *)aev_c)[f * ld + r];
            }
        double gmax = 0;
        for (int64_t k = 0; k < 3 * np; k++) gmax = fmax(gmax, fabs(grad_c[k]));
        char what[160];
        snprintf(what, sizeof what, "%s %s AEV (%s)", label, f64 ? "f64" : "f32",
                 mode ? "center lists" : "CSR");
        worst = fmax(worst, compare(what, a, b, cnt, f64 ? 1e-12 : 2e-6, f64 ? 1e-11 : 1e-5));
        snprintf(what, sizeof what, "%s %s dE/dr (%s)", label, f64 ? "f64" : "f32",
                 mode ? "center lists" : "CSR");
        worst = fmax(worst, compare(what, grad_g, grad_c, 3 * np, (f64 ? 1e-11 : 2e-4) * (1 + gmax),
                                    f64 ? 1e-10 : 1e-4));
        free(a);
        free(b);
        free(work);
        free(aev_c);
        free(aev_g);
        free(grad_c);
        free(grad_g);
        free(gin);
        free(start);
        free(entry);
        cudaFree(dstart);
        cudaFree(dentry);
        cudaFree(dpairs);
        cudaFree(dvec);
        cudaFree(daev);
        cudaFree(dgin);
        cudaFree(dgrad);
    }
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&sc.slot[k]);
    free(species);
    free(order);
    free(pairs);
    free(vec);
    free(centers);
    cudaFree(dspecies);
    cudaFree(dcenters);
    cudaFree(dst);
    CHECK(worst <= 1.0);
    return 0;
}

static int case_aev(void) {
    for (int f64 = 0; f64 < 2; f64++) {
        nnpops_model *m;
        const nnpops__ani *a = load_ani("ani2x", f64 ? NNPOPS_FLOAT64 : NNPOPS_FLOAT32, &m);
        const int n = 90;
        double *x = malloc(sizeof(double) * 3 * n);
        random_cluster(n, 10.0, 0.9, x);
        aev_one(&a->aev, f64, n, x, NULL, NULL, "cluster");
        const int nb = 24;
        const double cell[9] = {6.5, 0, 0, 0.4, 6.2, 0, -0.3, 0.2, 6.8};
        const uint8_t pbc[3] = {1, 1, 1};
        random_cluster(nb, 6.0, 0.9, x);
        aev_one(&a->aev, f64, nb, x, cell, pbc, "small periodic box");
        free(x);
        nnpops_model_destroy(m);
    }
    return 0;
}

/* ---- dense layers, CELU, fused ops ----------------------------------------------------------- */

static void fill(void *p, int f64, int64_t n, double lo, double hi) {
    for (int64_t k = 0; k < n; k++) {
        const double v = lo + (hi - lo) * urand();
        if (f64) ((double *)p)[k] = v;
        else ((float *)p)[k] = (float)v;
    }
}

static double cmp_any(const char *what, int f64, const void *a, const void *b, int64_t rows,
                      int64_t cols, int64_t ld, double atol, double rtol) {
    double *x = malloc(sizeof(double) * rows * cols), *y = malloc(sizeof(double) * rows * cols);
    for (int64_t f = 0; f < rows; f++)
        for (int64_t r = 0; r < cols; r++) {
            x[f * cols + r] = f64 ? ((const double *)a)[f * ld + r] : ((const float *)a)[f * ld + r];
            y[f * cols + r] = f64 ? ((const double *)b)[f * ld + r] : ((const float *)b)[f * ld + r];
        }
    const double w = compare(what, x, y, rows * cols, atol, rtol);
    free(x);
    free(y);
    return w;
}

static int case_dense(void) {
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    double worst = 0;
    const int64_t shapes[3][3] = {{1008, 2048, 300}, {256, 192, 77}, {160, 1, 33}};
    for (int f64 = 0; f64 < 2; f64++) {
        const size_t es = f64 ? 8 : 4;
        for (int s = 0; s < 3; s++) {
            const int64_t in = shapes[s][0], out = shapes[s][1], n = shapes[s][2];
            /* the CPU dense kernels touch columns up to round_up(n, NNPOPS__DENSE_PAD) */
            const int64_t npad = (n + NNPOPS__DENSE_PAD - 1) / NNPOPS__DENSE_PAD * NNPOPS__DENSE_PAD;
            const int64_t ldx = npad + 5, ldy = npad + 3;
            void *W = malloc(es * in * out), *b = malloc(es * out), *X = malloc(es * in * ldx);
            void *Yc = calloc(out * ldy, es), *Yg = malloc(es * out * ldy);
            void *dXc = calloc(in * ldx, es), *dXg = malloc(es * in * ldx);
            fill(W, f64, in * out, -0.1, 0.1);
            fill(b, f64, out, -1, 1);
            fill(X, f64, in * ldx, -1, 1);
            void *dW = dup_to_device(W, es * in * out), *db = dup_to_device(b, es * out);
            void *dX = dup_to_device(X, es * in * ldx), *dY = dalloc(es * out * ldy);
            void *ddX = dalloc(es * in * ldx);
            if (f64) {
                nnpops__dense_forward_cpu_f64(n, in, out, W, b, X, ldx, Yc, ldy);
                nnpops__dense_backward_cpu_f64(n, in, out, W, Yc, ldy, dXc, ldx);
                CHECK_OK(nnpops__dense_forward_cuda_f64(n, in, out, dW, db, dX, ldx, dY, ldy, h, g_stream));
                CHECK_OK(nnpops__dense_backward_cuda_f64(n, in, out, dW, dY, ldy, ddX, ldx, h, g_stream));
            } else {
                nnpops__dense_forward_cpu_f32(n, in, out, W, b, X, ldx, Yc, ldy);
                nnpops__dense_backward_cpu_f32(n, in, out, W, Yc, ldy, dXc, ldx);
                CHECK_OK(nnpops__dense_forward_cuda_f32(n, in, out, dW, db, dX, ldx, dY, ldy, h, g_stream));
                CHECK_OK(nnpops__dense_backward_cuda_f32(n, in, out, dW, dY, ldy, ddX, ldx, h, g_stream));
            }
            to_host(Yg, dY, es * out * ldy);
            to_host(dXg, ddX, es * in * ldx);
            char what[96];
            snprintf(what, sizeof what, "dense forward %s %lldx%lldx%lld", f64 ? "f64" : "f32",
                     (long long)in, (long long)out, (long long)n);
            worst = fmax(worst, cmp_any(what, f64, Yg, Yc, out, n, ldy, f64 ? 1e-12 : 1e-4, f64 ? 1e-12 : 1e-4));
            snprintf(what, sizeof what, "dense backward %s %lldx%lldx%lld", f64 ? "f64" : "f32",
                     (long long)in, (long long)out, (long long)n);
            worst = fmax(worst, cmp_any(what, f64, dXg, dXc, in, n, ldx, f64 ? 1e-11 : 1e-3, f64 ? 1e-12 : 1e-4));
            free(W);
            free(b);
            free(X);
            free(Yc);
            free(Yg);
            free(dXc);
            free(dXg);
            cudaFree(dW);
            cudaFree(db);
            cudaFree(dX);
            cudaFree(dY);
            cudaFree(ddX);
        }
    }
    cublasDestroy(h);
    CHECK(worst <= 1.0);
    return 0;
}

static int case_celu(void) {
    double worst = 0;
    const double alpha = 0.1;
    for (int f64 = 0; f64 < 2; f64++) {
        const size_t es = f64 ? 8 : 4;
        const int64_t w = 300, n = 517, ld = 520;
        void *Z = malloc(es * w * ld), *dA = malloc(es * w * ld);
        fill(Z, f64, w * ld, -3, 3);
        fill(dA, f64, w * ld, -1, 1);
        void *Ac = calloc(w * ld, es), *Ag = malloc(es * w * ld), *dZc = calloc(w * ld, es),
             *dZg = malloc(es * w * ld);
        void *dZ_ = dup_to_device(Z, es * w * ld), *ddA = dup_to_device(dA, es * w * ld);
        void *dAo = dalloc(es * w * ld), *ddZ = dalloc(es * w * ld);
        if (f64) {
            nnpops__celu_forward_cpu_f64(n, w, alpha, Z, ld, Ac, ld);
            nnpops__celu_backward_cpu_f64(n, w, alpha, Z, ld, dA, ld, dZc, ld);
            CHECK_OK(nnpops__celu_forward_cuda_f64(n, w, alpha, dZ_, ld, dAo, ld, g_stream));
            CHECK_OK(nnpops__celu_backward_cuda_f64(n, w, alpha, dZ_, ld, ddA, ld, ddZ, ld, g_stream));
        } else {
            nnpops__celu_forward_cpu_f32(n, w, alpha, Z, ld, Ac, ld);
            nnpops__celu_backward_cpu_f32(n, w, alpha, Z, ld, dA, ld, dZc, ld);
            CHECK_OK(nnpops__celu_forward_cuda_f32(n, w, alpha, dZ_, ld, dAo, ld, g_stream));
            CHECK_OK(nnpops__celu_backward_cuda_f32(n, w, alpha, dZ_, ld, ddA, ld, ddZ, ld, g_stream));
        }
        to_host(Ag, dAo, es * w * ld);
        to_host(dZg, ddZ, es * w * ld);
        worst = fmax(worst, cmp_any(f64 ? "CELU forward f64" : "CELU forward f32", f64, Ag, Ac, w, n, ld,
                                    f64 ? 1e-15 : 1e-7, f64 ? 1e-14 : 1e-6));
        worst = fmax(worst, cmp_any(f64 ? "CELU backward f64" : "CELU backward f32", f64, dZg, dZc, w, n,
                                    ld, f64 ? 1e-15 : 1e-7, f64 ? 1e-14 : 1e-6));
        free(Z);
        free(dA);
        free(Ac);
        free(Ag);
        free(dZc);
        free(dZg);
        cudaFree(dZ_);
        cudaFree(ddA);
        cudaFree(dAo);
        cudaFree(ddZ);
    }
    CHECK(worst <= 1.0);
    return 0;
}

static int case_fused(void) {
    double worst = 0;
    const double alpha = 0.1;
    for (int f64 = 0; f64 < 2; f64++) {
        const size_t es = f64 ? 8 : 4;
        /* bias + CELU and CELU' from activations */
        {
            const int64_t w = 200, n = 333, ld = 352;
            void *Z = malloc(es * w * ld), *b = malloc(es * w), *dA = malloc(es * w * ld);
            fill(Z, f64, w * ld, -3, 3);
            fill(b, f64, w, -1, 1);
            fill(dA, f64, w * ld, -1, 1);
            void *dZ_ = dup_to_device(Z, es * w * ld), *db = dup_to_device(b, es * w),
                 *ddA = dup_to_device(dA, es * w * ld);
            if (f64) {
                nnpops__bias_celu_cpu_f64(n, w, alpha, b, Z, ld);
                CHECK_OK(nnpops__bias_celu_cuda_f64(n, w, alpha, db, dZ_, ld, g_stream));
            } else {
                nnpops__bias_celu_cpu_f32(n, w, alpha, b, Z, ld);
                CHECK_OK(nnpops__bias_celu_cuda_f32(n, w, alpha, db, dZ_, ld, g_stream));
            }
            void *Zg = malloc(es * w * ld);
            to_host(Zg, dZ_, es * w * ld);
            worst = fmax(worst, cmp_any(f64 ? "bias + CELU f64" : "bias + CELU f32", f64, Zg, Z, w, n,
                                        ld, f64 ? 1e-15 : 1e-7, f64 ? 1e-14 : 1e-6));
            if (f64) {
                nnpops__celu_backward_act_cpu_f64(n, w, alpha, dA, ld, Z, ld);
                CHECK_OK(nnpops__celu_backward_act_cuda_f64(n, w, alpha, ddA, ld, dZ_, ld, g_stream));
            } else {
                nnpops__celu_backward_act_cpu_f32(n, w, alpha, dA, ld, Z, ld);
                CHECK_OK(nnpops__celu_backward_act_cuda_f32(n, w, alpha, ddA, ld, dZ_, ld, g_stream));
            }
            to_host(Zg, dZ_, es * w * ld);
            worst = fmax(worst, cmp_any(f64 ? "CELU' from activations f64" : "CELU' from activations f32",
                                        f64, Zg, Z, w, n, ld, f64 ? 1e-15 : 1e-7, f64 ? 1e-14 : 1e-6));
            free(Z);
            free(b);
            free(dA);
            free(Zg);
            cudaFree(dZ_);
            cudaFree(db);
            cudaFree(ddA);
        }
        /* the output layer: mean of 8, member 3 of 8, member 5 alone */
        for (int mode = 0; mode < 3; mode++) {
            const int M = 8, width = 160;
            const int members = mode == 2 ? 1 : M;
            const int64_t n = 301, lda = 320, n_atoms = 400;
            int32_t *centers = malloc(sizeof(int32_t) * n);
            for (int64_t r = 0; r < n; r++) centers[r] = (int32_t)((r * 37) % n_atoms);
            void *A = malloc(es * members * width * lda), *w = malloc(es * members * width),
                 *b = malloc(es * members);
            fill(A, f64, members * width * lda, -1.5, 2);
            fill(w, f64, members * width, -0.5, 0.5);
            fill(b, f64, members, -0.2, 0.2);
            double *ae_c = calloc(n_atoms, sizeof(double)), *me_c = calloc(n_atoms * M, sizeof(double));
            nnpops__ani_output_args oa = {n, members, width, alpha, lda, 1, mode == 2 ? 5 : 0, M,
                                          mode == 0 ? -1 : (mode == 1 ? 3 : 5), -0.5, centers, ae_c,
                                          me_c};
            void *dA_ = dup_to_device(A, es * members * width * lda), *dw = dup_to_device(w, es * members * width),
                 *db = dup_to_device(b, es * members);
            double *dae = dalloc(sizeof(double) * n_atoms), *dme = dalloc(sizeof(double) * n_atoms * M);
            int32_t *dc = dup_to_device(centers, sizeof(int32_t) * n);
            nnpops__ani_output_args og = oa;
            og.centers = dc;
            og.atom_energy = dae;
            og.member_energy = dme;
            if (f64) {
                nnpops__ani_output_cpu_f64(&oa, w, b, A);
                CHECK_OK(nnpops__ani_output_cuda_f64(&og, dw, db, dA_, g_stream));
            } else {
                nnpops__ani_output_cpu_f32(&oa, w, b, A);
                CHECK_OK(nnpops__ani_output_cuda_f32(&og, dw, db, dA_, g_stream));
            }
            double *ae_g = malloc(sizeof(double) * n_atoms), *me_g = malloc(sizeof(double) * n_atoms * M);
            void *Ag = malloc(es * members * width * lda);
            to_host(ae_g, dae, sizeof(double) * n_atoms);
            to_host(me_g, dme, sizeof(double) * n_atoms * M);
            to_host(Ag, dA_, es * members * width * lda);
            char what[96];
            snprintf(what, sizeof what, "output layer energies %s mode %d", f64 ? "f64" : "f32", mode);
            worst = fmax(worst, compare(what, ae_g, ae_c, n_atoms, f64 ? 1e-13 : 1e-5, f64 ? 1e-13 : 1e-6));
            snprintf(what, sizeof what, "output layer member energies %s mode %d", f64 ? "f64" : "f32", mode);
            worst = fmax(worst, compare(what, me_g, me_c, n_atoms * M, f64 ? 1e-13 : 1e-5, f64 ? 1e-13 : 1e-6));
            snprintf(what, sizeof what, "output layer seed %s mode %d", f64 ? "f64" : "f32", mode);
            worst = fmax(worst, cmp_any(what, f64, Ag, A, members * width, n, lda, f64 ? 1e-15 : 1e-7,
                                        f64 ? 1e-14 : 1e-6));
            free(centers);
            free(A);
            free(w);
            free(b);
            free(ae_c);
            free(me_c);
            free(ae_g);
            free(me_g);
            free(Ag);
            cudaFree(dA_);
            cudaFree(dw);
            cudaFree(db);
            cudaFree(dae);
            cudaFree(dme);
            cudaFree(dc);
        }
    }
    CHECK(worst <= 1.0);
    return 0;
}

/* ---- reductions ------------------------------------------------------------------------------ */

static int case_reduce(void) {
    const int64_t n = 1500, ns = 3;
    int32_t *batch = malloc(sizeof(int32_t) * n);
    for (int64_t i = 0; i < n; i++) batch[i] = i < 700 ? 0 : (i < 1100 ? 2 : 1);
    /* pairs: center-list-like runs of equal i (same system), then random pairs */
    int64_t np = 0;
    const int64_t cap = 60 * n;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap);
    for (int64_t i = 0; i < n; i++) {
        const int k = (int)(urand() * 40);
        for (int q = 0; q < k; q++) {
            int64_t j;
            do j = (int64_t)(urand() * n) % n;
            while (batch[j] != batch[i]);
            pairs[2 * np] = (int32_t)i;
            pairs[2 * np + 1] = (int32_t)j;
            np++;
        }
    }
    for (int q = 0; q < 5000; q++) {
        const int64_t i = (int64_t)(urand() * n) % n;
        int64_t j;
        do j = (int64_t)(urand() * n) % n;
        while (batch[j] != batch[i]);
        pairs[2 * np] = (int32_t)i;
        pairs[2 * np + 1] = (int32_t)j;
        np++;
    }
    double *vec = malloc(sizeof(double) * 3 * np), *grad = malloc(sizeof(double) * 3 * np);
    for (int64_t k = 0; k < 3 * np; k++) {
        vec[k] = 10 * urand() - 5;
        grad[k] = 2 * urand() - 1;
    }
    double *f_c = malloc(sizeof(double) * 3 * n), *v_c = malloc(sizeof(double) * 9 * ns),
           *av_c = malloc(sizeof(double) * 9 * n);
    nnpops__pair_reduce_cpu(n, ns, batch, np, pairs, vec, grad, f_c, v_c, av_c);
    int32_t *db = dup_to_device(batch, sizeof(int32_t) * n), *dp = dup_to_device(pairs, sizeof(int32_t) * 2 * np);
    double *dv = dup_to_device(vec, sizeof(double) * 3 * np), *dg = dup_to_device(grad, sizeof(double) * 3 * np);
    double *df = dalloc(sizeof(double) * 3 * n), *dvir = dalloc(sizeof(double) * 9 * ns),
           *dav = dalloc(sizeof(double) * 9 * n);
    /* garbage in the outputs: the overwriting launcher must clear it */
    CUDA_CHECK(cudaMemsetAsync(df, 0x7f, sizeof(double) * 3 * n, g_stream));
    int64_t *dnp = dup_to_device(&np, sizeof np);
    CHECK_OK(nnpops__pair_reduce_cuda(n, ns, db, np + 777, dp, dv, dg, df, dvir, dav, dnp, g_stream));
    double *f_g = malloc(sizeof(double) * 3 * n), *v_g = malloc(sizeof(double) * 9 * ns),
           *av_g = malloc(sizeof(double) * 9 * n);
    to_host(f_g, df, sizeof(double) * 3 * n);
    to_host(v_g, dvir, sizeof(double) * 9 * ns);
    to_host(av_g, dav, sizeof(double) * 9 * n);
    double worst = 0;
    worst = fmax(worst, compare("forces", f_g, f_c, 3 * n, 1e-12, 1e-12));
    worst = fmax(worst, compare("virials", v_g, v_c, 9 * ns, 1e-10, 1e-12));
    worst = fmax(worst, compare("atomic virials", av_g, av_c, 9 * n, 1e-12, 1e-12));
    /* energies, widths 1 and 8 */
    for (int width = 1; width <= 8; width += 7) {
        double *e = malloc(sizeof(double) * n * width), *ec = malloc(sizeof(double) * ns * width),
               *eg = malloc(sizeof(double) * ns * width);
        for (int64_t k = 0; k < n * width; k++) e[k] = urand() - 0.7;
        nnpops__energy_reduce_cpu(n, ns, batch, e, width, ec);
        double *de = dup_to_device(e, sizeof(double) * n * width), *dout = dalloc(sizeof(double) * ns * width);
        CHECK_OK(nnpops__energy_reduce_cuda(n, ns, db, de, width, dout, g_stream));
        to_host(eg, dout, sizeof(double) * ns * width);
        worst = fmax(worst, compare(width == 1 ? "energies" : "energies (width 8)", eg, ec, ns * width,
                                    1e-12, 1e-12));
        /* accumulate variant adds */
        CHECK_OK(nnpops__energy_reduce_cuda_acc(n, ns, db, de, width, dout, g_stream));
        to_host(eg, dout, sizeof(double) * ns * width);
        for (int64_t k = 0; k < ns * width; k++) ec[k] *= 2;
        worst = fmax(worst, compare("energies accumulated twice", eg, ec, ns * width, 1e-12, 1e-12));
        free(e);
        free(ec);
        free(eg);
        cudaFree(de);
        cudaFree(dout);
    }
    CHECK(worst <= 1.0);
    return 0;
}

/* The small-n grouped GEMM against its CPU twin: one group of problems of every kind (forward
 * with bias + CELU, first-layer and strided-batched shapes; backward with CELU' in place; the
 * plain store of dE/dAEV), n from 1 to 64, k from 5 to 2048 (one and several k-slices), twice:
 * as one launch and split over two launches (more problems than NNPOPS__SG_PER_LAUNCH).  The
 * columns n .. ld of B hold NaN (must not be read) and those of C a sentinel (must not be
 * written). */
static int case_small_gemm(void) {
    const struct {
        int trans, epi;
        int64_t m, k, n, batch;
    } shapes[] = {
        {0, NNPOPS__SG_BIAS_CELU, 2048, 1008, 13, 1}, {0, NNPOPS__SG_BIAS_CELU, 192, 256, 45, 8},
        {0, NNPOPS__SG_BIAS_CELU, 70, 5, 1, 3},       {1, NNPOPS__SG_CELU_ACT, 256, 192, 64, 8},
        {1, NNPOPS__SG_CELU_ACT, 100, 150, 32, 2},    {1, NNPOPS__SG_STORE, 1008, 2048, 29, 1},
        {1, NNPOPS__SG_STORE, 37, 130, 33, 1},        {0, NNPOPS__SG_STORE, 33, 64, 7, 2},
        {0, NNPOPS__SG_BIAS_CELU, 160, 192, 50, 8},   {1, NNPOPS__SG_CELU_ACT, 31, 129, 64, 1},
    };
    const int np = (int)(sizeof shapes / sizeof shapes[0]);
    double worst = 0;
    for (int split = 0; split < 2; split++) {
        nnpops__sg_group gh, gd;
        memset(&gh, 0, sizeof gh);
        memset(&gd, 0, sizeof gd);
        gh.alpha = gd.alpha = 0.1;
        const int count = split ? np : NNPOPS__SG_PER_LAUNCH;
        float *hA[16], *hB[16], *hC[16], *hb[16], *dA[16], *dB[16], *dC[16], *db[16];
        int64_t nc[16];
        for (int q = 0; q < count; q++) {
            const int64_t m = shapes[q].m, k = shapes[q].k, n = shapes[q].n, bt = shapes[q].batch;
            const int64_t lda = (shapes[q].trans ? m : k) + 3, ldb = n + 5, ldc = n + 7;
            const int64_t sa = (shapes[q].trans ? k : m) * lda + 11, sb = k * ldb + 2,
                          sc = m * ldc + 9;
            nc[q] = bt * sc;
            hA[q] = malloc(sizeof(float) * bt * sa);
            hB[q] = malloc(sizeof(float) * bt * sb);
            hC[q] = malloc(sizeof(float) * bt * sc);
            hb[q] = malloc(sizeof(float) * bt * m);
            fill(hA[q], 0, bt * sa, -0.1, 0.1);
            fill(hB[q], 0, bt * sb, -1, 1);
            fill(hC[q], 0, bt * sc, -2, 2);
            fill(hb[q], 0, bt * m, -0.5, 0.5);
            for (int64_t t = 0; t < bt; t++)
                for (int64_t j = 0; j < k; j++)
                    for (int64_t r = n; r < ldb; r++) hB[q][t * sb + j * ldb + r] = NAN;
            for (int64_t t = 0; t < bt; t++)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t r = n; r < ldc; r++) hC[q][t * sc + i * ldc + r] = 12345.0f;
            dA[q] = dup_to_device(hA[q], sizeof(float) * bt * sa);
            dB[q] = dup_to_device(hB[q], sizeof(float) * bt * sb);
            dC[q] = dup_to_device(hC[q], sizeof(float) * bt * sc);
            db[q] = dup_to_device(hb[q], sizeof(float) * bt * m);
            nnpops__sg_problem p = {shapes[q].trans, shapes[q].epi, m, k, n, bt, hA[q], lda, sa,
                                    hB[q], ldb, sb, hC[q], ldc, sc,
                                    shapes[q].epi == NNPOPS__SG_BIAS_CELU && q != 2 ? hb[q] : NULL};
            gh.p[gh.count++] = p;
            p.A = dA[q];
            p.B = dB[q];
            p.C = dC[q];
            p.bias = p.bias ? db[q] : NULL;
            gd.p[gd.count++] = p;
        }
        const size_t wb = nnpops__small_gemm_work_bytes(&gd);
        void *work = wb ? dalloc(wb) : NULL;
        nnpops__small_gemm_cpu_f32(&gh);
        CHECK_OK(nnpops__small_gemm_cuda_f32(&gd, work, wb, g_stream));
        for (int q = 0; q < count; q++) {
            float *g = malloc(sizeof(float) * nc[q]);
            to_host(g, dC[q], sizeof(float) * nc[q]);
            const nnpops__sg_problem *p = &gh.p[q];
            int sentinel_ok = 1;
            for (int64_t t = 0; t < p->batch; t++)
                for (int64_t i = 0; i < p->m; i++)
                    for (int64_t r = p->n; r < p->ldc; r++)
                        if (g[t * p->stride_c + i * p->ldc + r] != 12345.0f) sentinel_ok = 0;
            CHECK(sentinel_ok);
            char what[96];
            snprintf(what, sizeof what, "small GEMM %s %lldx%lldx%lld batch %lld epi %d%s",
                     p->trans ? "T" : "N", (long long)p->m, (long long)p->k, (long long)p->n,
                     (long long)p->batch, p->epilogue, split ? " (2 launches)" : "");
            for (int64_t t = 0; t < p->batch; t++)
                worst = fmax(worst, cmp_any(what, 0, g + t * p->stride_c, hC[q] + t * p->stride_c,
                                            p->m, p->n, p->ldc, 2e-4, 1e-4));
            free(g);
        }
        if (!split) {
            /* deterministic: a re-run of problem 0 gives the same bits */
            float *g1 = malloc(sizeof(float) * nc[0]), *g2 = malloc(sizeof(float) * nc[0]);
            to_host(g1, dC[0], sizeof(float) * nc[0]);
            nnpops__sg_group one = gd;
            one.count = 1;
            CUDA_CHECK(cudaMemcpy(dC[0], hC[0], 4, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaDeviceSynchronize());
            CHECK_OK(nnpops__small_gemm_cuda_f32(&one, work, wb, g_stream));
            to_host(g2, dC[0], sizeof(float) * nc[0]);
            CHECK(memcmp(g1, g2, sizeof(float) * nc[0]) == 0);
            free(g1);
            free(g2);
        }
        for (int q = 0; q < count; q++) {
            free(hA[q]);
            free(hB[q]);
            free(hC[q]);
            free(hb[q]);
            cudaFree(dA[q]);
            cudaFree(dB[q]);
            cudaFree(dC[q]);
            cudaFree(db[q]);
        }
        if (work) cudaFree(work);
    }
    CHECK(worst <= 1.0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    gpu_init_or_skip();
    const char *c = argv[1];
    int r;
    if (!strcmp(c, "neighbors_center")) r = case_neighbors_center();
    else if (!strcmp(c, "neighbors_half")) r = case_neighbors_half();
    else if (!strcmp(c, "neighbors_overflow")) r = case_neighbors_overflow();
    else if (!strcmp(c, "neighbors_errors")) r = case_neighbors_errors();
    else if (!strcmp(c, "center_lists")) r = case_center_lists();
    else if (!strcmp(c, "aev")) r = case_aev();
    else if (!strcmp(c, "dense")) r = case_dense();
    else if (!strcmp(c, "celu")) r = case_celu();
    else if (!strcmp(c, "fused")) r = case_fused();
    else if (!strcmp(c, "reduce")) r = case_reduce();
    else if (!strcmp(c, "small_gemm")) r = case_small_gemm();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    CUDA_CHECK(cudaGetLastError());
    if (r == 0) printf("%s: ok\n", c);
    return r;
}
