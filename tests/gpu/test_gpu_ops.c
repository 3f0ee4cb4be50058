/*
 * test_gpu_ops.c - every CUDA op against its CPU twin on random inputs (atol + rtol), all launches
 * on a non-default (non-blocking) stream.  One CTest entry per case (label gpu); exit 77 without a
 * GPU.
 *
 *   neighbors_center   center lists against nnpops__center_neighbors_cpu, every algorithm forced
 *                      (small = one block, brute force, one pass, general cell list, fast cell
 *                      list): a
 *                      fixed batch (non-periodic cluster, orthorhombic box with atoms outside the
 *                      cell, triclinic box, a cell thinner than the cutoff (images), mixed
 *                      periodicity, an empty system; ghosts; shuffled atom order), random batches
 *                      (molecules, some far from the origin, rotated triclinic boxes, slabs, thin
 *                      cells, up to 30,000 atoms), 13-atom molecules, large periodic systems and
 *                      a cluster (both scans of the count kernels); the same entries per center
 *                      (compared as sorted sets), start[], vectors and distances (bitwise on
 *                      x86-64), n_half; with the deterministic option twice, bitwise the same
 *   neighbors_half     the half list (nnpops__neighbors_cuda) against nnpops__neighbors_cpu, every
 *                      plan (small, one pass and fast fall back to brute force and the general
 *                      cell list)
 *   neighbors_onepass  the one pass where the plan chooses it: a periodic box of 256 atoms (the
 *                      benchmark's size) in atom order and shuffled, with atoms far outside the
 *                      cell, a dense cluster (items above what the count pass records), a
 *                      triclinic box, a batch of molecules and boxes above 256 centers (several
 *                      centers a block), overflow, and two launches on one work space with
 *                      different counts (its published sums must not outlive a launch)
 *   neighbors_overflow capacity below the need, every algorithm: flag, total count, n_half,
 *                      complete start[], entries in range; then the retry with the reported total
 *   neighbors_errors   singular cell, too many images, too-close atoms, every algorithm
 *   center_lists       CSR center lists from a half list against nnpops__center_lists_cpu
 *   aev                AEV forward and backward (ANI-2x constants; float and double), in CSR mode
 *                      (center lists of a half list) and in center-list mode (entry == NULL);
 *                      90, 24 and 701 centers (blocks of 512 and of 128 threads)
 *   dense              dense forward / backward (cuBLAS) against the CPU GEMM
 *   celu               CELU forward / backward
 *   fused              bias + CELU, CELU' from activations, the ensemble output layer (mean,
 *                      one member among all, one member alone)
 *   small_gemm         the small-n grouped GEMM (fused epilogues, the k split of the backward
 *                      kind) against its CPU twin, and the grouped output layer against
 *                      nnpops__ani_output_cpu_f32
 *   sg_tail            the networks' tails in one launch (hidden layers past the first, output
 *                      layer, backward; thread block clusters) against nnpops__sg_tail_cpu_f32,
 *                      and the networks that path refuses
 *   reduce             pair reduction (forces, virials, per-atom virials) and energy reduction
 *   reduce_step        the step's one reduction launch (pairs, energies, member energies) and its
 *                      staging tail (the last block copies the output block to pinned memory)
 *   stage              the staging kernel (nnpops__stage_cuda) against memcpy / memset: pinned host
 *                      to device and device to pinned host through the device pointers, sizes
 *                      with and without 16-byte tails, zeroing alone and with a copy; bytes
 *                      outside the ranges untouched
 *   lj                 the Lennard-Jones pair terms over center lists (potentials/lj/cuda/lj.cu)
 *                      against their CPU twin: ghost centers, a truncating capacity
 *   lj_model           an lj model on "cuda" against the same model on "cpu" (public API):
 *                      ghosts, a batch with a periodic box narrower than twice the cutoff
 *   lj_ghost_centers   the GPU step with center lists of every atom (a potential choosing
 *                      ghost_centers, vt->neighbor_lists): an lj model whose table entry asks for
 *                      them against the same model on "cpu"; the step's pair count includes the
 *                      pairs of two ghosts then
 *   ani_columns        ANI's grouping of the local atoms by species into columns
 *                      (potentials/ani/cuda/columns.cu) against its CPU twin and the definition:
 *                      ghosts, absent species, empty steps, species with fewer columns than
 *                      atoms, the ranked species
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "core/src/internal.h"
#include "emulated.h"
#include "gpu_check.h"
#include "kernels/cpu/fused.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani_ops.h"
#include "potentials/ani/ani.h"
#include "potentials/lj/lj_ops.h"
#include "tmpfiles.h"

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

/* Scatters the atoms of a batch built in system order (pos) by a random permutation of the ids,
 * so that order[] and the ghosts (the last n_ghosts ids) are scattered over the systems. */
static void scatter_batch(batchset *b, double *pos, int64_t n_ghosts) {
    b->n = b->sys_start[b->ns];
    b->n_centers = b->n - n_ghosts;
    if (b->n_centers < 1) b->n_centers = b->n > 0 ? 1 : 0;
    int32_t *perm = malloc(sizeof(int32_t) * (b->n ? b->n : 1));
    for (int64_t i = 0; i < b->n; i++) perm[i] = (int32_t)i;
    for (int64_t i = b->n - 1; i > 0; i--) {
        int64_t j = (int64_t)(urand() * (double)(i + 1));
        if (j > i) j = i;
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    b->order = perm;
    b->x = malloc(sizeof(double) * 3 * (b->n ? b->n : 1));
    for (int64_t k = 0; k < b->n; k++)
        for (int d = 0; d < 3; d++) b->x[3 * perm[k] + d] = pos[3 * k + d];
    free(pos);
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
    scatter_batch(&b, pos, 30);
    return b;
}

/* A random cell (rows) with perpendicular widths of about `side`: lower-triangular with tilts up
 * to `tilt` of the side, then rotated at random (so no axis is aligned). */
static void random_cell(double side, double tilt, double *h) {
    double l[9] = {side * (0.8 + 0.4 * urand()), 0, 0, 0, side * (0.8 + 0.4 * urand()), 0, 0, 0,
                   side * (0.8 + 0.4 * urand())};
    l[3] = tilt * side * (2 * urand() - 1);
    l[6] = tilt * side * (2 * urand() - 1);
    l[7] = tilt * side * (2 * urand() - 1);
    /* a random rotation from a random unit quaternion */
    double q[4], nq = 0;
    for (int k = 0; k < 4; k++) {
        q[k] = 2 * urand() - 1;
        nq += q[k] * q[k];
    }
    nq = sqrt(nq);
    for (int k = 0; k < 4; k++) q[k] /= nq;
    const double w = q[0], x = q[1], y = q[2], z = q[3];
    const double R[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                         2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                         2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)};
    for (int r = 0; r < 3; r++)
        for (int d = 0; d < 3; d++)
            h[3 * r + d] = l[3 * r] * R[3 * d] + l[3 * r + 1] * R[3 * d + 1] + l[3 * r + 2] * R[3 * d + 2];
}

/* A random batch of n_sys systems holding about `atoms` atoms in all, at about `density`
 * atoms / A^3 (cutoff 5.2): molecules (no cell, a random offset up to `far` A), triclinic periodic
 * boxes (atoms up to two cells outside), slabs (periodic a, b), and with `thin` cells thinner than
 * the cutoff (images); ghosts: about 3% of the atoms. */
static batchset random_batch(int atoms, int n_sys, double density, int thin, double far) {
    batchset b;
    memset(&b, 0, sizeof b);
    double *pos = calloc(3 * (size_t)(atoms + 64 * n_sys), sizeof(double));
    b.sys_start = calloc((size_t)n_sys + 1, sizeof(int64_t));
    b.cells = calloc(9 * (size_t)n_sys, sizeof(double));
    b.pbc = calloc(3 * (size_t)n_sys, 1);
    b.cutoff = 5.2;
    for (int s = 0; s < n_sys; s++) {
        int n = (int)((double)atoms / n_sys * (0.5 + urand()));
        if (n < 1) n = 1;
        if (n > atoms / n_sys + 63) n = atoms / n_sys + 63;
        const double side = cbrt((double)n / density);
        const double kind = urand();
        double h[9];
        uint8_t pbc[3] = {1, 1, 1};
        if (kind < 0.3) { /* molecule */
            const double m[9] = {side, 0, 0, 0, side, 0, 0, 0, side};
            memcpy(h, m, sizeof m);
            pbc[0] = pbc[1] = pbc[2] = 0;
        } else if (thin && kind < 0.45) {
            random_cell(3.0 + 2.0 * urand(), 0.3, h); /* widths below the cutoff: images */
            if (n > 12) n = 12;
        } else {
            /* widths at least the cutoff: side >= 7 keeps a tilted cell wide enough */
            random_cell(side < 7.5 ? 7.5 : side, 0.25, h);
            if (kind > 0.85) pbc[2] = 0; /* slab */
        }
        const int64_t s0 = b.sys_start[b.ns];
        add_system(&b, pos, n, h, pbc, 1);
        if (!pbc[0] && far > 0) { /* a molecule far from the origin */
            const double off[3] = {far * (2 * urand() - 1), far * (2 * urand() - 1),
                                   far * (2 * urand() - 1)};
            for (int i = 0; i < n; i++)
                for (int d = 0; d < 3; d++) pos[3 * (s0 + i) + d] += off[d];
        }
    }
    scatter_batch(&b, pos, b.sys_start[b.ns] / 32);
    return b;
}

/* One large fully periodic system (`tilt` 0: orthorhombic), or with `pbc_on` 0 a cluster. */
static batchset big_system(int n, double density, double tilt, int pbc_on) {
    batchset b;
    memset(&b, 0, sizeof b);
    double *pos = calloc(3 * (size_t)n, sizeof(double));
    b.sys_start = calloc(2, sizeof(int64_t));
    b.cells = calloc(9, sizeof(double));
    b.pbc = calloc(3, 1);
    b.cutoff = 5.2;
    double h[9];
    random_cell(cbrt(n / density), tilt, h);
    const uint8_t pb[3] = {(uint8_t)pbc_on, (uint8_t)pbc_on, (uint8_t)pbc_on};
    add_system(&b, pos, n, h, pb, pbc_on);
    scatter_batch(&b, pos, n / 50);
    return b;
}

static void free_batch(batchset *b) {
    free(b->x);
    free(b->sys_start);
    free(b->order);
    free(b->cells);
    free(b->pbc);
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

static void free_dbatch(dbatch *d) {
    cudaFree(d->x);
    cudaFree(d->cells);
    cudaFree(d->sys_start);
    cudaFree(d->order);
    cudaFree(d->pbc);
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

static const char *alg_name(int alg) { return nnpops__nbr_cuda_algorithm_name(alg); }

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

/* Same sorted entries; vectors and distances within 1e-12, and equal (as doubles) where the CPU
 * build does not contract multiply-adds (x86-64 without FMA: the GPU rounds every operation on its
 * own, as the CPU expression does). */
static void compare_entries(const char *what, const ent *a, const ent *b, int64_t n) {
    double worst = 0;
    int64_t same = 0;
    for (int64_t k = 0; k < n; k++) {
        if (ent_cmp(a + k, b + k) != 0) {
            fprintf(stderr, "%s: entry %lld differs: (%d %d %d %d %d) vs (%d %d %d %d %d)\n", what,
                    (long long)k, a[k].i, a[k].j, a[k].s[0], a[k].s[1], a[k].s[2], b[k].i, b[k].j,
                    b[k].s[0], b[k].s[1], b[k].s[2]);
            exit(1);
        }
        for (int x = 0; x < 3; x++) worst = fmax(worst, fabs(a[k].v[x] - b[k].v[x]));
        worst = fmax(worst, fabs(a[k].d - b[k].d));
        /* == (not memcmp): the CPU negates a vector for the second center of a pair, so a zero
         * component may be -0.0 there and +0.0 here */
        same += a[k].v[0] == b[k].v[0] && a[k].v[1] == b[k].v[1] && a[k].v[2] == b[k].v[2] &&
                a[k].d == b[k].d;
    }
    printf("  %-44s %lld entries equal, worst vector difference %.3g, %lld exactly\n", what,
           (long long)n, worst, (long long)same);
    CHECK(worst <= 1e-12);
#if defined(__x86_64__) && !defined(__FMA__)
    CHECK(same == n);
#endif
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
    int64_t cap = 200 * b->n + 16;
    int32_t *pairs = NULL, *shifts = NULL;
    double *vec = NULL, *dist = NULL;
    cl_ref r;
    r.start = malloc(sizeof(int64_t) * (b->n_centers + 1));
    nnpops__dev_status st;
    for (int attempt = 0; attempt < 2; attempt++) { /* (denser inputs: again with their total) */
        pairs = realloc(pairs, sizeof(int32_t) * 2 * cap);
        shifts = realloc(shifts, sizeof(int32_t) * 3 * cap);
        vec = realloc(vec, sizeof(double) * 3 * cap);
        dist = realloc(dist, sizeof(double) * cap);
        nnpops__center_out out = {cap, r.start, pairs, shifts, vec, dist, &st};
        CHECK_OK(nnpops__center_neighbors_cpu(&in, b->n_centers, min_d, &sc, &out));
        if (!(st.flags & NNPOPS__ST_OVERFLOW)) break;
        cap = st.n_entries;
    }
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

static void free_ref(cl_ref *r) {
    free(r->start);
    free(r->e);
}

/* The raw GPU center lists of one launch, copied to the host (entries up to min(total, cap)). */
typedef struct gpu_raw {
    nnpops__dev_status st;
    int64_t n; /* entries copied */
    int64_t *start;
    int32_t *pairs, *shifts;
    double *vec, *dist;
} gpu_raw;

static void free_raw(gpu_raw *r) {
    free(r->start);
    free(r->pairs);
    free(r->shifts);
    free(r->vec);
    free(r->dist);
}

/* Runs nnpops__center_neighbors_cuda with the plan forced to `algorithm` (deterministic option
 * `det`), on a work space and outputs filled with garbage first (0xa5 bytes: the launcher must
 * not rely on zeroed work space; the status is zeroed, as the contract asks).  staged: through
 * nnpops__center_neighbors_staged_cuda with the positions on the device and the status word
 * garbage, and a staging job that copies the positions in from pinned host memory and zeroes the
 * status (the one-block path does the job itself, the others launch the staging kernel first:
 * either way it must be done before the search reads them). */
static gpu_raw run_gpu_raw_ex(const batchset *b, const dbatch *d, int algorithm, int det,
                              int64_t cap, double min_d, int staged) {
    nnpops__nbr_plan plan;
    nnpops__nbr_cuda_plan(b->ns, b->sys_start, b->cells, b->pbc, b->cutoff, algorithm, &plan);
    CHECK(plan.algorithm == algorithm);
    plan.deterministic = det;
    const size_t wb = nnpops__nbr_cuda_work_bytes(b->n, b->ns, b->n_centers, &plan);
    void *work = dalloc(wb);
    int64_t *dstart = dalloc(sizeof(int64_t) * (b->n_centers + 1));
    int32_t *dpairs = dalloc(sizeof(int32_t) * 2 * (cap + 1)), *dshifts = dalloc(sizeof(int32_t) * 3 * (cap + 1));
    double *dvec = dalloc(sizeof(double) * 3 * (cap + 1)), *ddist = dalloc(sizeof(double) * (cap + 1));
    nnpops__dev_status *dst = dalloc(sizeof(nnpops__dev_status));
    CUDA_CHECK(cudaMemset(work, 0xa5, wb));
    CUDA_CHECK(cudaMemset(dstart, 0xa5, sizeof(int64_t) * (b->n_centers + 1)));
    CUDA_CHECK(cudaDeviceSynchronize());
    nnpops__nbr_in in = dev_in(b, d);
    nnpops__center_out out = {cap, dstart, dpairs, dshifts, dvec, ddist, dst};
    if (staged) {
        const size_t xb = sizeof(double) * 3 * (size_t)b->n;
        double *hx = NULL;
        void *hx_dev = NULL;
        CUDA_CHECK(cudaMallocHost((void **)&hx, xb));
        CUDA_CHECK(cudaHostGetDevicePointer(&hx_dev, hx, 0));
        memcpy(hx, b->x, xb);
        CUDA_CHECK(cudaMemset(d->x, 0xa5, xb));
        CUDA_CHECK(cudaMemset(dst, 0xa5, sizeof(nnpops__dev_status)));
        CUDA_CHECK(cudaDeviceSynchronize());
        const nnpops__stage_job job = {d->x, hx_dev, xb, dst, sizeof(nnpops__dev_status)};
        CHECK_OK(nnpops__center_neighbors_staged_cuda(&in, b->n_centers, min_d, &plan, &out, work,
                                                      wb, &job, g_stream));
        CUDA_CHECK(cudaStreamSynchronize(g_stream));
        cudaFreeHost(hx);
    } else {
        CHECK_OK(nnpops__center_neighbors_cuda(&in, b->n_centers, min_d, &plan, &out, work, wb,
                                               g_stream));
    }
    gpu_raw r;
    to_host(&r.st, dst, sizeof r.st);
    r.start = malloc(sizeof(int64_t) * (b->n_centers + 1));
    to_host(r.start, dstart, sizeof(int64_t) * (b->n_centers + 1));
    r.n = r.st.n_entries < cap ? r.st.n_entries : cap;
    if (r.n < 0) r.n = 0;
    r.pairs = malloc(sizeof(int32_t) * 2 * (r.n + 1));
    r.shifts = malloc(sizeof(int32_t) * 3 * (r.n + 1));
    r.vec = malloc(sizeof(double) * 3 * (r.n + 1));
    r.dist = malloc(sizeof(double) * (r.n + 1));
    to_host(r.pairs, dpairs, sizeof(int32_t) * 2 * r.n);
    to_host(r.shifts, dshifts, sizeof(int32_t) * 3 * r.n);
    to_host(r.vec, dvec, sizeof(double) * 3 * r.n);
    to_host(r.dist, ddist, sizeof(double) * r.n);
    cudaFree(work);
    cudaFree(dstart);
    cudaFree(dpairs);
    cudaFree(dshifts);
    cudaFree(dvec);
    cudaFree(ddist);
    cudaFree(dst);
    return r;
}

static gpu_raw run_gpu_raw(const batchset *b, const dbatch *d, int algorithm, int det, int64_t cap,
                           double min_d) {
    return run_gpu_raw_ex(b, d, algorithm, det, cap, min_d, 0);
}

/* The GPU lists against the CPU's: status, start[], every entry in its center's range, the sorted
 * entries. */
static void check_against(const char *what, const batchset *b, const cl_ref *ref, const gpu_raw *g) {
    if (g->st.flags != 0 || g->st.n_entries != ref->total || g->st.n_half != ref->n_half)
        fprintf(stderr, "%s: flags %u, %lld entries (CPU %lld), %lld pairs (CPU %lld)\n", what,
                g->st.flags, (long long)g->st.n_entries, (long long)ref->total,
                (long long)g->st.n_half, (long long)ref->n_half);
    CHECK(g->st.flags == 0);
    CHECK(g->st.n_entries == ref->total);
    CHECK(g->st.n_half == ref->n_half);
    for (int64_t c = 0; c <= b->n_centers; c++) CHECK(g->start[c] == ref->start[c]);
    for (int64_t c = 0; c < b->n_centers; c++)
        for (int64_t e = g->start[c]; e < g->start[c + 1]; e++) CHECK(g->pairs[2 * e] == c);
    ent *e = gather(g->n, g->pairs, g->shifts, g->vec, g->dist);
    compare_entries(what, e, ref->e, ref->total);
    free(e);
}

static int same_raw(const gpu_raw *x, const gpu_raw *y, int64_t n_centers) {
    return x->n == y->n && !memcmp(x->start, y->start, sizeof(int64_t) * (n_centers + 1)) &&
           !memcmp(x->pairs, y->pairs, sizeof(int32_t) * 2 * x->n) &&
           !memcmp(x->shifts, y->shifts, sizeof(int32_t) * 3 * x->n) &&
           !memcmp(x->vec, y->vec, sizeof(double) * 3 * x->n) &&
           !memcmp(x->dist, y->dist, sizeof(double) * x->n);
}

/* Every algorithm in `algs` (forced) against the CPU; with `det`, each twice with the
 * deterministic option, bitwise the same; without, batches of at most 1,024 atoms also staged
 * (run_gpu_raw_ex). */
static void check_batch(const char *label, const batchset *b, const int *algs, int n_algs, int det) {
    dbatch d = upload_batch(b);
    cl_ref ref = cpu_center_lists(b, 0.0);
    nnpops__nbr_plan auto_plan;
    nnpops__nbr_cuda_plan(b->ns, b->sys_start, b->cells, b->pbc, b->cutoff, NNPOPS__NBR_AUTO,
                          &auto_plan);
    printf("%s: %lld systems, %lld atoms (%lld centers), CPU %lld entries, %lld pairs; automatic "
           "choice %s\n",
           label, (long long)b->ns, (long long)b->n, (long long)b->n_centers, (long long)ref.total,
           (long long)ref.n_half, alg_name(auto_plan.algorithm));
    for (int k = 0; k < n_algs; k++) {
        char what[128];
        snprintf(what, sizeof what, "%s, %s%s", label, alg_name(algs[k]), det ? ", deterministic" : "");
        gpu_raw g = run_gpu_raw(b, &d, algs[k], det, ref.total + 100, 0.0);
        check_against(what, b, &ref, &g);
        if (!det && b->n <= 1024) {
            char sw[160];
            snprintf(sw, sizeof sw, "%s, staged", what);
            gpu_raw gs = run_gpu_raw_ex(b, &d, algs[k], 0, ref.total + 100, 0.0, 1);
            check_against(sw, b, &ref, &gs);
            free_raw(&gs);
        }
        if (det) {
            gpu_raw g2 = run_gpu_raw(b, &d, algs[k], det, ref.total + 100, 0.0);
            CHECK(same_raw(&g, &g2, b->n_centers));
            free_raw(&g2);
        }
        free_raw(&g);
    }
    free_ref(&ref);
    free_dbatch(&d);
}

static const int all_algs[5] = {NNPOPS__NBR_BRUTE, NNPOPS__NBR_CELL, NNPOPS__NBR_SMALL,
                                NNPOPS__NBR_CELL_FAST, NNPOPS__NBR_ONEPASS};

static int case_neighbors_center(void) {
    /* the fixed batch (1,096 atoms: the small path falls back to brute force), every algorithm,
     * also deterministic */
    batchset b = make_batch();
    check_batch("fixed batch", &b, all_algs, 5, 0);
    check_batch("fixed batch", &b, all_algs, 5, 1);
    free_batch(&b);
    /* random small batches (at most 1024 atoms: the one-block path runs), molecules far from the
     * origin, thin cells.  Emulated: trials 1, 3, 6 and 7 (thin cells, the deterministic option,
     * far molecules, two to eight systems), whose lines and branches of the library and kernels
     * include every one that the eight trials take */
    for (int trial = 0; trial < 8; trial++) {
        if (TEST_EMULATED && (trial == 0 || trial == 2 || trial == 4 || trial == 5)) continue;
        char label[64];
        snprintf(label, sizeof label, "random batch %d", trial);
        /* (emulated: a third of the atoms; the one-block and staged paths take any count up to
         * 1024) */
        const int atoms = (trial < 4 ? 300 : 900) / GPU_OR_EMU(1, 3);
        batchset r = random_batch(atoms, 1 + trial, 0.1, trial % 2, trial >= 6 ? 2e4 : 30);
        check_batch(label, &r, all_algs, 5, trial == 3);
        free_batch(&r);
    }
    /* tiny molecules (the ANI 13-atom case), one and many systems */
    for (int trial = 0; trial < 2; trial++) {
        batchset r = random_batch(trial ? 13 * 40 : 13, trial ? 40 : 1, 0.05, 0, 0);
        check_batch(trial ? "40 small molecules" : "one 13-atom molecule", &r, all_algs, 5, 0);
        free_batch(&r);
    }
    /* larger systems for the cell lists: fast with the last-block scan (< 8192 centers) and with
     * cub (more), triclinic and orthorhombic, dense (bins holding many atoms), and a cluster.
     * Emulated: the smallest systems on each side of 8192 centers (centers are 98 % of the
     * atoms), the one above it at a third of the density (fewer entries, the same passes) and
     * run both ways, deterministic or not; the dense one and the cluster below it. */
    const int cells2[2] = {NNPOPS__NBR_CELL, NNPOPS__NBR_CELL_FAST};
    {
        batchset r = big_system(GPU_OR_EMU(5000, 1500), 0.1, 0.3, 1);
        check_batch(GPU_OR_EMU("periodic triclinic 5,000", "periodic triclinic 1,500"), &r, cells2,
                    2, 0);
        free_batch(&r);
    }
    {
        batchset r = big_system(GPU_OR_EMU(20000, 8600), GPU_OR_EMU(0.1, 0.033), 0.0, 1);
        CHECK(r.n_centers > 8192);
        if (TEST_EMULATED) check_batch("periodic 8,600", &r, cells2, 2, 0);
        check_batch(GPU_OR_EMU("periodic 20,000", "periodic 8,600"), &r, cells2, 2, 1);
        free_batch(&r);
    }
    {
        batchset r = big_system(GPU_OR_EMU(12000, 2000), 0.3, 0.2, 1);
        check_batch(GPU_OR_EMU("dense periodic 12,000", "dense periodic 2,000"), &r, cells2, 2, 0);
        free_batch(&r);
    }
    {
        /* about 118 neighbors per center: the fast list's search pass keeps at most 128 codes per
         * center (its default), so some centers' entries come from their codes and the others'
         * from a second search in the emit pass; the mix is checked on the CPU's counts */
        /* (emulated: 3,000 atoms, denser, so that the mix is as certain in a smaller system) */
        batchset r = big_system(GPU_OR_EMU(12000, 3000), GPU_OR_EMU(0.2, 0.24), 0.1, 1);
        cl_ref ref = cpu_center_lists(&r, 0.0);
        int64_t above = 0;
        for (int64_t c = 0; c < r.n_centers; c++) above += ref.start[c + 1] - ref.start[c] > 128;
        printf("periodic %lld: %lld of %lld centers above 128 entries\n", (long long)r.n,
               (long long)above, (long long)r.n_centers);
        CHECK(above > 0 && above < r.n_centers / 2);
        free_ref(&ref);
        check_batch("periodic, some centers above 128 entries", &r, cells2, 2, 1);
        free_batch(&r);
    }
    {
        /* boxes one and two bins wide per axis (cutoff 5.2): the fast list's 27 stencil bins are
         * the same one or two bins with different image shifts, and its codes tell them apart.
         * 7.8 A: 40 atoms listed 27 times, 1,080 candidates per bin, which its search pass stages
         * in three chunks (of 512) while keeping codes (~50 entries per center); 12 A: 100
         * atoms, ~340 candidates per bin */
        batchset r = big_system(40, 40 / (7.8 * 7.8 * 7.8), 0.0, 1);
        check_batch("box of 7.8 A (one bin per axis)", &r, cells2, 2, 1);
        free_batch(&r);
        r = big_system(100, 100 / (12.0 * 12.0 * 12.0), 0.0, 1);
        check_batch("box of 12 A (two bins per axis)", &r, cells2, 2, 0);
        free_batch(&r);
    }
    {
        batchset r = big_system(GPU_OR_EMU(9000, 2500), 0.1, 0.0, 0);
        check_batch(GPU_OR_EMU("cluster 9,000 (no cell)", "cluster 2,500 (no cell)"), &r, cells2, 2,
                    0);
        free_batch(&r);
    }
    {
        /* (emulated: 3,000 atoms, above the one-block path's 1,024) */
        batchset r = random_batch(GPU_OR_EMU(30000, 3000), 12, 0.1, 1, 1e3);
        check_batch(GPU_OR_EMU("random batch 30,000", "random batch 3,000"), &r, all_algs, 5, 0);
        free_batch(&r);
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
    /* small, one-pass and fast plans run as brute force and the general cell list in half mode */
    for (int k = 0; k < 5; k++) {
        const int alg = all_algs[k];
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
        CHECK(st.n_half == out.n_pairs);
        const int64_t n = st.n_entries;
        int32_t *hp = malloc(sizeof(int32_t) * 2 * n), *hs = malloc(sizeof(int32_t) * 3 * n);
        double *hv = malloc(sizeof(double) * 3 * n), *hd = malloc(sizeof(double) * n);
        to_host(hp, dout.pairs, sizeof(int32_t) * 2 * n);
        to_host(hs, dout.shifts, sizeof(int32_t) * 3 * n);
        to_host(hv, dout.vec, sizeof(double) * 3 * n);
        to_host(hd, dout.dist, sizeof(double) * n);
        ent *e = gather(n, hp, hs, hv, hd);
        char what[64];
        snprintf(what, sizeof what, "half list, plan %s", alg_name(alg));
        compare_entries(what, e, ref, n);
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

/* Capacity below the need: the overflow flag, the total, a complete start[], the entries that fit
 * (each center's range below the capacity holds exactly its entries); then the retry with the
 * reported total gives the CPU's lists. */
static void overflow_one(const char *label, const batchset *b, int alg) {
    dbatch d = upload_batch(b);
    cl_ref ref = cpu_center_lists(b, 0.0);
    const int64_t cap = ref.total / 3;
    gpu_raw g = run_gpu_raw(b, &d, alg, 0, cap, 0.0);
    printf("  %s, %s: capacity %lld: flags %u, %lld entries counted\n", label, alg_name(alg),
           (long long)cap, g.st.flags, (long long)g.st.n_entries);
    CHECK(g.st.flags == NNPOPS__ST_OVERFLOW);
    CHECK(g.st.n_entries == ref.total);
    CHECK(g.st.n_half == ref.n_half);
    for (int64_t c = 0; c <= b->n_centers; c++) CHECK(g.start[c] == ref.start[c]);
    for (int64_t c = 0; c < b->n_centers; c++)
        for (int64_t e = g.start[c]; e < g.start[c + 1] && e < cap; e++) CHECK(g.pairs[2 * e] == c);
    const int64_t retry = g.st.n_entries;
    free_raw(&g);
    g = run_gpu_raw(b, &d, alg, 0, retry, 0.0);
    char what[96];
    snprintf(what, sizeof what, "%s, %s, retry", label, alg_name(alg));
    check_against(what, b, &ref, &g);
    free_raw(&g);
    free_ref(&ref);
    free_dbatch(&d);
}

static int case_neighbors_overflow(void) {
    batchset b = make_batch();
    for (int k = 0; k < 5; k++) overflow_one("fixed batch", &b, all_algs[k]);
    free_batch(&b);
    batchset r = random_batch(600, 5, 0.1, 1, 30);
    for (int k = 0; k < 5; k++) overflow_one("random batch", &r, all_algs[k]);
    free_batch(&r);
    /* above 8192 centers (the scan by cub); emulated at a third of the density */
    batchset big = big_system(GPU_OR_EMU(20000, 8600), GPU_OR_EMU(0.1, 0.033), 0.2, 1);
    CHECK(big.n_centers > 8192);
    overflow_one(GPU_OR_EMU("periodic 20,000", "periodic 8,600"), &big, NNPOPS__NBR_CELL_FAST);
    free_batch(&big);
    return 0;
}

/* The batch with its atoms renumbered in system order (order[] the identity, the one pass's fast
 * way to its centers' systems); the ghosts are the last ids. */
static void identity_order(batchset *b) {
    double *x = malloc(sizeof(double) * 3 * (b->n ? b->n : 1));
    for (int64_t k = 0; k < b->n; k++)
        for (int d = 0; d < 3; d++) x[3 * k + d] = b->x[3 * b->order[k] + d];
    for (int64_t k = 0; k < b->n; k++) b->order[k] = (int32_t)k;
    free(b->x);
    b->x = x;
}

/* Two launches of the one pass on one work space (garbage first): the first with a cutoff 1.2
 * times larger (other counts per block), the second with the batch's own, checked against the
 * CPU: a block must never take a sum the first launch published. */
static void onepass_reuse(const char *label, const batchset *b) {
    dbatch d = upload_batch(b);
    cl_ref ref = cpu_center_lists(b, 0.0);
    nnpops__nbr_plan plan;
    nnpops__nbr_cuda_plan(b->ns, b->sys_start, b->cells, b->pbc, b->cutoff, NNPOPS__NBR_ONEPASS,
                          &plan);
    const size_t wb = nnpops__nbr_cuda_work_bytes(b->n, b->ns, b->n_centers, &plan);
    void *work = dalloc(wb);
    const int64_t cap = 3 * ref.total + 100;
    int64_t *dstart = dalloc(sizeof(int64_t) * (b->n_centers + 1));
    int32_t *dpairs = dalloc(sizeof(int32_t) * 2 * cap), *dshifts = dalloc(sizeof(int32_t) * 3 * cap);
    double *dvec = dalloc(sizeof(double) * 3 * cap), *ddist = dalloc(sizeof(double) * cap);
    nnpops__dev_status *dst = dalloc(sizeof(nnpops__dev_status));
    CUDA_CHECK(cudaMemset(work, 0xa5, wb));
    int64_t first = 0;
    for (int pass = 0; pass < 2; pass++) {
        nnpops__nbr_in in = dev_in(b, &d);
        if (pass == 0) in.cutoff *= 1.2;
        CUDA_CHECK(cudaMemset(dst, 0, sizeof(nnpops__dev_status)));
        CUDA_CHECK(cudaDeviceSynchronize());
        nnpops__center_out out = {cap, dstart, dpairs, dshifts, dvec, ddist, dst};
        CHECK_OK(nnpops__center_neighbors_cuda(&in, b->n_centers, 0.0, &plan, &out, work, wb,
                                               g_stream));
        CUDA_CHECK(cudaStreamSynchronize(g_stream));
        if (pass == 0) {
            nnpops__dev_status st;
            to_host(&st, dst, sizeof st);
            first = st.n_entries;
        }
    }
    gpu_raw g;
    to_host(&g.st, dst, sizeof g.st);
    printf("  %s: %lld entries at 1.2 x the cutoff, then %lld (CPU %lld)\n", label,
           (long long)first, (long long)g.st.n_entries, (long long)ref.total);
    CHECK(first > ref.total);
    g.n = g.st.n_entries < cap && g.st.n_entries > 0 ? g.st.n_entries : 0;
    g.start = malloc(sizeof(int64_t) * (b->n_centers + 1));
    g.pairs = malloc(sizeof(int32_t) * 2 * (g.n + 1));
    g.shifts = malloc(sizeof(int32_t) * 3 * (g.n + 1));
    g.vec = malloc(sizeof(double) * 3 * (g.n + 1));
    g.dist = malloc(sizeof(double) * (g.n + 1));
    to_host(g.start, dstart, sizeof(int64_t) * (b->n_centers + 1));
    to_host(g.pairs, dpairs, sizeof(int32_t) * 2 * g.n);
    to_host(g.shifts, dshifts, sizeof(int32_t) * 3 * g.n);
    to_host(g.vec, dvec, sizeof(double) * 3 * g.n);
    to_host(g.dist, ddist, sizeof(double) * g.n);
    char what[128];
    snprintf(what, sizeof what, "%s, one pass, second launch", label);
    check_against(what, b, &ref, &g);
    free_raw(&g);
    cudaFree(work);
    cudaFree(dstart);
    cudaFree(dpairs);
    cudaFree(dshifts);
    cudaFree(dvec);
    cudaFree(ddist);
    cudaFree(dst);
    free_ref(&ref);
    free_dbatch(&d);
}

/* The inputs where the plan chooses the one pass (its rule: the brute force's; center lists). */
static int case_neighbors_onepass(void) {
    const int op[1] = {NNPOPS__NBR_ONEPASS};
    nnpops__nbr_plan p;
    /* a periodic box of 256 atoms with about 60 neighbors each (widths 13.7 >= 2 x 5.2: a wide
     * cell), shuffled and in atom order; 2 % ghosts */
    batchset box = big_system(256, 0.1, 0.0, 1);
    nnpops__nbr_cuda_plan(box.ns, box.sys_start, box.cells, box.pbc, box.cutoff, NNPOPS__NBR_AUTO,
                          &p);
    CHECK(p.algorithm == NNPOPS__NBR_ONEPASS);
    check_batch("box of 256, shuffled", &box, op, 1, 0);
    identity_order(&box);
    check_batch("box of 256, atom order", &box, op, 1, 1);
    overflow_one("box of 256", &box, NNPOPS__NBR_ONEPASS);
    onepass_reuse("box of 256", &box);
    /* two atoms 600 and 700 cells away: shifts beyond what the count pass records (10 bits a
     * component), so their centers' items run their tests again in the write pass */
    for (int d = 0; d < 3; d++) {
        box.x[3 * 5 + d] += 600.0 * box.cells[d];
        box.x[3 * 7 + d] -= 700.0 * box.cells[3 + d];
    }
    check_batch("box of 256, two atoms far away", &box, op, 1, 0);
    free_batch(&box);
    /* a dense cluster of 2,000 atoms (about 265 neighbors inside, 8 slices of 250 atoms, 8
     * centers and 64 items a block): an item may record 2048 / 64 = 32 entries, about what a
     * center inside has in a slice and more than those near the surface have, so both writes
     * run */
    batchset dense = big_system(2000, 0.45, 0.0, 0);
    nnpops__nbr_cuda_plan(dense.ns, dense.sys_start, dense.cells, dense.pbc, dense.cutoff,
                          NNPOPS__NBR_AUTO, &p);
    CHECK(p.algorithm == NNPOPS__NBR_ONEPASS && p.slices == 8);
    check_batch("dense cluster of 2,000", &dense, op, 1, 0);
    free_batch(&dense);
    /* a triclinic box (side 14.4, tilted: still at least twice the cutoff wide), ghosts */
    batchset tri = big_system(300, 0.1, 0.3, 1);
    nnpops__nbr_cuda_plan(tri.ns, tri.sys_start, tri.cells, tri.pbc, tri.cutoff, NNPOPS__NBR_AUTO,
                          &p);
    CHECK(p.algorithm == NNPOPS__NBR_ONEPASS);
    check_batch("triclinic box", &tri, op, 1, 0);
    free_batch(&tri);
    /* a batch of molecules and boxes (thin ones too: images) with 1,200 atoms and ghosts in both
     * orders: more centers than the one pass's 256 blocks, so blocks of several centers */
    batchset bat = random_batch(1200, 8, 0.1, 1, 30);
    nnpops__nbr_cuda_plan(bat.ns, bat.sys_start, bat.cells, bat.pbc, bat.cutoff, NNPOPS__NBR_AUTO,
                          &p);
    CHECK(p.algorithm == NNPOPS__NBR_ONEPASS);
    CHECK(bat.n_centers > 256);
    check_batch("batch of 8", &bat, op, 1, 0);
    overflow_one("batch of 8", &bat, NNPOPS__NBR_ONEPASS);
    identity_order(&bat);
    check_batch("batch of 8, system order", &bat, op, 1, 0);
    onepass_reuse("batch of 8", &bat);
    free_batch(&bat);
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
        for (int k = 0; k < 5; k++) {
            const int alg = all_algs[k];
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
            int64_t *start = malloc(sizeof(int64_t) * (b.n + 1));
            to_host(start, out.start, sizeof(int64_t) * (b.n + 1));
            printf("  case %d %s: flags %u system %d axis %d images %d close %d-%d %.3g\n", which,
                   alg_name(alg), st.flags, st.bad_system, st.bad_axis, st.images, st.close_i,
                   st.close_j, st.close_d);
            /* start[] is a complete CSR whatever went wrong; centers of a bad system have none */
            CHECK(start[0] == 0 && start[b.n] == st.n_entries);
            for (int64_t c = 0; c < b.n; c++) CHECK(start[c + 1] >= start[c]);
            if (which == 0) {
                CHECK(st.flags & NNPOPS__ST_BAD_CELL);
                CHECK(st.bad_system == 1 && st.bad_kind == (int)NNPOPS__ST_BAD_CELL);
                for (int64_t c = 30; c < b.n; c++) CHECK(start[c + 1] == start[c]);
            } else if (which == 1) {
                CHECK(st.flags & NNPOPS__ST_TOO_MANY_IMAGES);
                CHECK(st.bad_system == 1 && st.bad_axis == 1 && st.images == 3);
                for (int64_t c = 30; c < b.n; c++) CHECK(start[c + 1] == start[c]);
            } else {
                CHECK(st.flags == NNPOPS__ST_TOO_CLOSE);
                CHECK((st.close_i == 34 && st.close_j == 35) || (st.close_i == 35 && st.close_j == 34));
                CHECK(fabs(st.close_d - 0.05) < 1e-9);
            }
            free(start);
            cudaFree(work);
            cudaFree(dst);
            cudaFree(out.start);
            cudaFree(out.pairs);
            cudaFree(out.vec);
        }
        free_dbatch(&d);
        free_batch(&b);
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

/* atoms at least dmin apart, uniform in a cube (test_scatter) */
static void random_cluster(int n, double side, double dmin, double *x) {
    test_scatter(n, side, dmin, 0, &rng, x);
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
        CHECK(st.flags & NNPOPS__ST_POT_CAPACITY);
        const int32_t need = st.pot_need;
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
        /* more centers than AEV_SMALL_COLS (640): the launches of 128-thread blocks (701: the
         * centers' order r -> 7 r mod n must stay a permutation) */
        const int nl = 701;
        x = malloc(sizeof(double) * 3 * nl);
        random_cluster(nl, GPU_OR_EMU(16.0, 24.0), 0.9, x); /* (emulated: fewer neighbors) */
        aev_one(&a->aev, f64, nl, x, NULL, NULL, "large cluster");
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
        /* bias + CELU and CELU' from activations; ld 352: float columns 16-byte aligned (the
         * 4-row path, with a 1-row tail), ld 333: not (the scalar path) */
        for (int pass = 0; pass < 2; pass++) {
            const int64_t w = 200, n = 333, ld = pass ? 333 : 352;
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

/* Center-list-like pairs: for each atom i in turn, a run of fewer than `most` pairs (i, j) with
 * random partners j of its system; returns the count (pairs holds 2 x most x n). */
static int64_t random_runs(const int32_t *batch, int64_t n, int most, int32_t *pairs) {
    int64_t np = 0;
    for (int64_t i = 0; i < n; i++)
        for (int q = (int)(urand() * most); q > 0; q--) {
            int64_t j;
            do j = (int64_t)(urand() * n) % n;
            while (batch[j] != batch[i]);
            pairs[2 * np] = (int32_t)i;
            pairs[2 * np + 1] = (int32_t)j;
            np++;
        }
    return np;
}

static int case_reduce(void) {
    const int64_t n = 1500, ns = 3;
    int32_t *batch = malloc(sizeof(int32_t) * n);
    for (int64_t i = 0; i < n; i++) batch[i] = i < 700 ? 0 : (i < 1100 ? 2 : 1);
    /* pairs: center-list-like runs of equal i (same system), then random pairs */
    const int64_t cap = 60 * n;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap);
    int64_t np = random_runs(batch, n, 40, pairs);
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

/* nnpops__reduce_cuda (the GPU step's one launch): pair reduction, energies (width 1) and member
 * energies (width 8) at once, against the CPU twins, into one zeroed output block laid out as the
 * step's; with the staging tail, the pinned copy of the block must equal the block after the
 * launch (the last block copied it after every other block's sums: partial sums would differ
 * from the CPU values) and the ticket must end at the block count; run twice (the second adds:
 * doubled values copied); and a launch with nothing to reduce still copies. */
static int case_reduce_step(void) {
    const int64_t n = 1200, ns = 4, ens = 8;
    int32_t *batch = malloc(sizeof(int32_t) * n);
    for (int64_t i = 0; i < n; i++) batch[i] = (int32_t)(i * ns / n);
    const int64_t cap = 30 * n;
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap);
    const int64_t np = random_runs(batch, n, 30, pairs);
    double *vec = malloc(sizeof(double) * 3 * np), *grad = malloc(sizeof(double) * 3 * np),
           *ae = malloc(sizeof(double) * n), *mae = malloc(sizeof(double) * n * ens);
    for (int64_t k = 0; k < 3 * np; k++) {
        vec[k] = 10 * urand() - 5;
        grad[k] = 2 * urand() - 1;
    }
    for (int64_t k = 0; k < n; k++) ae[k] = urand() - 0.7;
    for (int64_t k = 0; k < n * ens; k++) mae[k] = urand() - 0.7;
    /* the block: energies | member energies | virials | forces | atomic virials (doubles) */
    const int64_t o_e = 0, o_m = ns, o_v = o_m + ns * ens, o_f = o_v + 9 * ns, o_a = o_f + 3 * n,
                  nb = o_a + 9 * n;
    double *want = malloc(sizeof(double) * nb), *got = malloc(sizeof(double) * nb);
    nnpops__pair_reduce_cpu(n, ns, batch, np, pairs, vec, grad, want + o_f, want + o_v, want + o_a);
    nnpops__energy_reduce_cpu(n, ns, batch, ae, 1, want + o_e);
    nnpops__energy_reduce_cpu(n, ns, batch, mae, ens, want + o_m);
    int32_t *db = dup_to_device(batch, sizeof(int32_t) * n);
    int32_t *dp = dup_to_device(pairs, sizeof(int32_t) * 2 * np);
    double *dv = dup_to_device(vec, sizeof(double) * 3 * np);
    double *dg = dup_to_device(grad, sizeof(double) * 3 * np);
    double *dae = dup_to_device(ae, sizeof(double) * n);
    double *dmae = dup_to_device(mae, sizeof(double) * n * ens);
    int64_t *dnp = dup_to_device(&np, sizeof np);
    double *dout = dalloc(sizeof(double) * nb);
    unsigned *dticket = dalloc(sizeof(unsigned));
    double *hpin = NULL;
    void *hpin_dev = NULL;
    CUDA_CHECK(cudaMallocHost((void **)&hpin, sizeof(double) * nb));
    CUDA_CHECK(cudaHostGetDevicePointer(&hpin_dev, hpin, 0));
    CUDA_CHECK(cudaMemsetAsync(dout, 0, sizeof(double) * nb, g_stream));
    nnpops__reduce_args a = {
        .n_atoms = n, .n_systems = ns, .batch = db, .n_pairs = np + 333, .n_pairs_dev = dnp,
        .pairs = dp, .vec = dv, .grad = dg, .forces = dout + o_f, .virials = dout + o_v,
        .atomic_virials = dout + o_a, .atom_energy = dae, .energies = dout + o_e,
        .member_atom_energy = dmae, .ensemble = ens, .member_energies = dout + o_m,
        .stage_dst = hpin_dev, .stage_src = dout, .stage_bytes = sizeof(double) * nb,
        .ticket = dticket,
    };
    const unsigned blocks = (unsigned)((np + 333 + 255) / 256 + 2 * ((n + 255) / 256));
    double worst = 0;
    for (int run = 1; run <= 2; run++) {
        for (int64_t k = 0; k < nb; k++) hpin[k] = -12345.0;
        CUDA_CHECK(cudaMemsetAsync(dticket, 0, sizeof(unsigned), g_stream));
        CHECK_OK(nnpops__reduce_cuda(&a, g_stream));
        gsync();
        to_host(got, dout, sizeof(double) * nb);
        CHECK(memcmp(got, hpin, sizeof(double) * nb) == 0);
        unsigned t = 0;
        to_host(&t, dticket, sizeof t);
        CHECK(t == blocks);
        const double *h = hpin, *w = want;
        worst = fmax(worst, compare("reduce_step energies", h + o_e, w + o_e, ns, 1e-12, 1e-12));
        worst = fmax(worst, compare("reduce_step member energies", h + o_m, w + o_m, ns * ens,
                                    1e-12, 1e-12));
        worst = fmax(worst,
                     compare("reduce_step virials", h + o_v, w + o_v, 9 * ns, 1e-10, 1e-12));
        worst = fmax(worst, compare("reduce_step forces", h + o_f, w + o_f, 3 * n, 1e-12, 1e-12));
        worst = fmax(worst, compare("reduce_step atomic virials", h + o_a, w + o_a, 9 * n, 1e-12,
                                    1e-12));
        for (int64_t k = 0; k < nb; k++) want[k] *= 2; /* the second run adds */
    }
    /* nothing to reduce: one block copies */
    nnpops__reduce_args c = {.n_atoms = n, .n_systems = ns, .batch = db, .stage_dst = hpin_dev,
                             .stage_src = dout, .stage_bytes = 8 * 7 + 3, .ticket = dticket};
    for (int64_t k = 0; k < nb; k++) hpin[k] = -1.0;
    CUDA_CHECK(cudaMemsetAsync(dticket, 0, sizeof(unsigned), g_stream));
    CHECK_OK(nnpops__reduce_cuda(&c, g_stream));
    gsync();
    CHECK(memcmp(got, hpin, 8 * 7 + 3) == 0);
    CHECK(hpin[8] == -1.0);
    /* a staging tail without a ticket is refused */
    c.ticket = NULL;
    CHECK(nnpops__reduce_cuda(&c, g_stream) == NNPOPS_ERROR_INTERNAL);
    printf("reduce_step: %lld pairs, %u blocks, staged copy equal, worst %.3g\n", (long long)np,
           blocks, worst);
    CHECK(worst <= 1.0);
    cudaFreeHost(hpin);
    cudaFree(db);
    cudaFree(dp);
    cudaFree(dv);
    cudaFree(dg);
    cudaFree(dae);
    cudaFree(dmae);
    cudaFree(dnp);
    cudaFree(dout);
    cudaFree(dticket);
    free(batch);
    free(pairs);
    free(vec);
    free(grad);
    free(ae);
    free(mae);
    free(want);
    free(got);
    return 0;
}

/* The small-n grouped GEMM against its CPU twin.  Shapes of every kind: forward (trans 0) with
 * bias + CELU (first-layer and strided-batched shapes, a NULL bias), CELU' and plain store;
 * backward (trans 1) with CELU' in place, plain store (dE/dAEV shapes) and bias + CELU; n from 1
 * to 64 (both column buckets, 8 and 16, and several column chunks), k from 1 to 2500 (one and
 * several staged k slices), batch 1 to 8, leading dimensions that break 16-byte alignment.  Run
 * three ways: all problems in one group (launches split by kind and NNPOPS__SG_PER_LAUNCH), the
 * problems with n <= 8 in one group (the 8-column kernels), and each problem alone.  The columns
 * n .. ld of B hold NaN (must not be read) and those of C a sentinel (must not be written); a
 * re-run of a group from the same inputs must give the same bits (fixed summation order). */
typedef struct sg_shape {
    int trans, epi;
    int64_t m, k, n, batch;
} sg_shape;

static double sg_run(const sg_shape *shapes, const int *sel, int count, const char *label) {
    nnpops__sg_group gh, gd;
    memset(&gh, 0, sizeof gh);
    memset(&gd, 0, sizeof gd);
    gh.alpha = gd.alpha = 0.1;
    float *hA[NNPOPS__SG_MAX_PROBLEMS], *hB[NNPOPS__SG_MAX_PROBLEMS], *hC[NNPOPS__SG_MAX_PROBLEMS],
        *hC0[NNPOPS__SG_MAX_PROBLEMS], *hb[NNPOPS__SG_MAX_PROBLEMS];
    float *dA[NNPOPS__SG_MAX_PROBLEMS], *dB[NNPOPS__SG_MAX_PROBLEMS], *dC[NNPOPS__SG_MAX_PROBLEMS],
        *db[NNPOPS__SG_MAX_PROBLEMS];
    int64_t nc[NNPOPS__SG_MAX_PROBLEMS];
    CHECK(count <= NNPOPS__SG_MAX_PROBLEMS);
    for (int q = 0; q < count; q++) {
        const sg_shape *h = &shapes[sel[q]];
        const int64_t m = h->m, k = h->k, n = h->n, bt = h->batch;
        const int64_t lda = (h->trans ? m : k) + 3, ldb = n + 5, ldc = n + 7;
        const int64_t sa = (h->trans ? k : m) * lda + 11, sb = k * ldb + 2, sc = m * ldc + 9;
        nc[q] = bt * sc;
        hA[q] = malloc(sizeof(float) * bt * sa);
        hB[q] = malloc(sizeof(float) * bt * sb);
        hC[q] = malloc(sizeof(float) * bt * sc);
        hC0[q] = malloc(sizeof(float) * bt * sc);
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
        memcpy(hC0[q], hC[q], sizeof(float) * bt * sc);
        dA[q] = dup_to_device(hA[q], sizeof(float) * bt * sa);
        dB[q] = dup_to_device(hB[q], sizeof(float) * bt * sb);
        dC[q] = dup_to_device(hC[q], sizeof(float) * bt * sc);
        db[q] = dup_to_device(hb[q], sizeof(float) * bt * m);
        const int nobias = h->m == 70; /* the 70-row forward shape runs without a bias */
        nnpops__sg_problem p = {h->trans, h->epi, m, k, n, bt, hA[q], lda, sa, hB[q], ldb, sb,
                                hC[q], ldc, sc, h->epi == NNPOPS__SG_BIAS_CELU && !nobias ? hb[q] : NULL};
        gh.p[gh.count++] = p;
        p.A = dA[q];
        p.B = dB[q];
        p.C = dC[q];
        p.bias = p.bias ? db[q] : NULL;
        gd.p[gd.count++] = p;
    }
    CHECK(nnpops__small_gemm_work_bytes(&gd) == 0);
    nnpops__small_gemm_cpu_f32(&gh);
    CHECK_OK(nnpops__small_gemm_cuda_f32(&gd, NULL, 0, g_stream));
    double worst = 0;
    float *g1[NNPOPS__SG_MAX_PROBLEMS];
    for (int q = 0; q < count; q++) {
        float *g = malloc(sizeof(float) * nc[q]);
        g1[q] = g;
        to_host(g, dC[q], sizeof(float) * nc[q]);
        const nnpops__sg_problem *p = &gh.p[q];
        int sentinel_ok = 1;
        for (int64_t t = 0; t < p->batch; t++)
            for (int64_t i = 0; i < p->m; i++)
                for (int64_t r = p->n; r < p->ldc; r++)
                    if (g[t * p->stride_c + i * p->ldc + r] != 12345.0f) sentinel_ok = 0;
        CHECK(sentinel_ok);
        char what[128];
        snprintf(what, sizeof what, "small GEMM %s %lldx%lldx%lld b%lld e%d (%s)", p->trans ? "T" : "N",
                 (long long)p->m, (long long)p->k, (long long)p->n, (long long)p->batch, p->epilogue,
                 label);
        const int64_t cnt = p->batch * p->m * p->n;
        double *x = malloc(sizeof(double) * cnt), *y = malloc(sizeof(double) * cnt);
        for (int64_t t = 0; t < p->batch; t++)
            for (int64_t i = 0; i < p->m; i++)
                for (int64_t r = 0; r < p->n; r++) {
                    const int64_t e = (t * p->m + i) * p->n + r, c = t * p->stride_c + i * p->ldc + r;
                    x[e] = g[c];
                    y[e] = hC[q][c];
                }
        worst = fmax(worst, compare(what, x, y, (size_t)cnt, 2e-4, 1e-4));
        free(x);
        free(y);
    }
    /* determinism: the same inputs again give the same bits */
    for (int q = 0; q < count; q++) {
        CUDA_CHECK(cudaMemcpy(dC[q], hC0[q], sizeof(float) * nc[q], cudaMemcpyHostToDevice));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(nnpops__small_gemm_cuda_f32(&gd, NULL, 0, g_stream));
    for (int q = 0; q < count; q++) {
        float *g2 = malloc(sizeof(float) * nc[q]);
        to_host(g2, dC[q], sizeof(float) * nc[q]);
        CHECK(memcmp(g1[q], g2, sizeof(float) * nc[q]) == 0);
        free(g2);
        free(g1[q]);
        free(hA[q]);
        free(hB[q]);
        free(hC[q]);
        free(hC0[q]);
        free(hb[q]);
        cudaFree(dA[q]);
        cudaFree(dB[q]);
        cudaFree(dC[q]);
        cudaFree(db[q]);
    }
    return worst;
}

/* The energy buffers of the output-layer cases: CPU and GPU copies, device arrays. */
static void free_energies(double *ae_c, double *me_c, double *ae_g, double *me_g, double *dae,
                          double *dme) {
    free(ae_c);
    free(me_c);
    free(ae_g);
    free(me_g);
    cudaFree(dae);
    cudaFree(dme);
}

/* The grouped output layer (nnpops__ani_output_group_cuda_f32) against the CPU twin of each entry:
 * three networks of different widths, column counts and leading dimensions, the ensemble mean and
 * one member, atomics and deterministic kernels. */
static double sg_output_run(int member, int det) {
    enum { NQ = 3 };
    const int M = 8, widths[NQ] = {160, 128, 96};
    const int64_t ns[NQ] = {7, 40, 1}, ldas[NQ] = {32, 64, 32}, n_atoms = 60;
    const double alpha = 0.1, self[NQ] = {-0.5, -38.1, -54.7};
    double *ae_c = calloc(n_atoms, sizeof(double)), *me_c = calloc(n_atoms * M, sizeof(double));
    double *dae = dalloc(sizeof(double) * n_atoms), *dme = dalloc(sizeof(double) * n_atoms * M);
    nnpops__ani_output_args oh[NQ], od[NQ];
    float *hA[NQ], *hw[NQ], *hb[NQ], *dA_[NQ];
    const float *dw[NQ], *dbv[NQ];
    int32_t *hc[NQ], *dc[NQ];
    int64_t off = 0;
    for (int q = 0; q < NQ; q++) {
        const int64_t n = ns[q], lda = ldas[q], w = widths[q];
        hc[q] = malloc(sizeof(int32_t) * n);
        for (int64_t r = 0; r < n; r++) hc[q][r] = (int32_t)(off + r);
        if (n > 3) hc[q][2] = -1; /* a padding column */
        off += n;
        hA[q] = malloc(sizeof(float) * M * w * lda);
        hw[q] = malloc(sizeof(float) * M * w);
        hb[q] = malloc(sizeof(float) * M);
        fill(hA[q], 0, M * w * lda, -1.5, 2);
        fill(hw[q], 0, M * w, -0.5, 0.5);
        fill(hb[q], 0, M, -0.2, 0.2);
        dA_[q] = dup_to_device(hA[q], sizeof(float) * M * w * lda);
        dw[q] = dup_to_device(hw[q], sizeof(float) * M * w);
        dbv[q] = dup_to_device(hb[q], sizeof(float) * M);
        dc[q] = dup_to_device(hc[q], sizeof(int32_t) * n);
        nnpops__ani_output_args a = {n, M, (int32_t)w, alpha, lda, 1, 0, M, member, self[q], hc[q],
                                     ae_c, me_c, det};
        oh[q] = a;
        a.centers = dc[q];
        a.atom_energy = dae;
        a.member_energy = dme;
        od[q] = a;
        nnpops__ani_output_cpu_f32(&oh[q], hw[q], hb[q], hA[q]);
    }
    CHECK_OK(nnpops__ani_output_group_cuda_f32(NQ, od, dw, dbv, dA_, g_stream));
    double *ae_g = malloc(sizeof(double) * n_atoms), *me_g = malloc(sizeof(double) * n_atoms * M);
    to_host(ae_g, dae, sizeof(double) * n_atoms);
    to_host(me_g, dme, sizeof(double) * n_atoms * M);
    char what[96];
    double worst = 0;
    snprintf(what, sizeof what, "grouped output energies member %d det %d", member, det);
    worst = fmax(worst, compare(what, ae_g, ae_c, n_atoms, 1e-5, 1e-6));
    snprintf(what, sizeof what, "grouped output member energies member %d det %d", member, det);
    worst = fmax(worst, compare(what, me_g, me_c, n_atoms * M, 1e-5, 1e-6));
    for (int q = 0; q < NQ; q++) {
        const int64_t w = widths[q], lda = ldas[q];
        float *Ag = malloc(sizeof(float) * M * w * lda);
        to_host(Ag, dA_[q], sizeof(float) * M * w * lda);
        snprintf(what, sizeof what, "grouped output seed %d member %d det %d", q, member, det);
        worst = fmax(worst, cmp_any(what, 0, Ag, hA[q], M * w, ns[q], lda, 1e-7, 1e-6));
        free(Ag);
        free(hA[q]);
        free(hw[q]);
        free(hb[q]);
        free(hc[q]);
        cudaFree(dA_[q]);
        cudaFree((void *)dw[q]);
        cudaFree((void *)dbv[q]);
        cudaFree(dc[q]);
    }
    free_energies(ae_c, me_c, ae_g, me_g, dae, dme);
    return worst;
}

/* The last hidden layer with the output layer fused (NNPOPS__SG_BIAS_CELU_OUT) against the CPU
 * twin (the plain layer followed by nnpops__ani_output_cpu_f32): two species' problems in one
 * launch (8-column chunks for one, 16 for the other; rows not a multiple of 32: several row
 * blocks add parts of one output), the ensemble mean or member 5 alone, with and without the
 * backward seed: the activations or seeds, the atom energies and the member energies.  The
 * atomic form only (deterministic entries are refused). */
static double sg_out_run(int member, int need_grad) {
    enum { NQ = 2 };
    const int64_t ms[NQ] = {160, 70}, ks[NQ] = {192, 130}, ns[NQ] = {7, 40}, n_atoms = 60;
    const int M = 8, Me = member < 0 ? M : 1, moff = member < 0 ? 0 : member;
    const double self[NQ] = {-0.6, -38.2};
    double *ae_c = calloc(n_atoms, sizeof(double)), *me_c = calloc(n_atoms * M, sizeof(double));
    double *dae = dalloc(sizeof(double) * n_atoms), *dme = dalloc(sizeof(double) * n_atoms * M);
    nnpops__sg_group gh, gd;
    memset(&gh, 0, sizeof gh);
    memset(&gd, 0, sizeof gd);
    gh.alpha = gd.alpha = 0.1;
    float *hC[NQ], *dC[NQ], *hA[NQ], *hB[NQ], *hbias[NQ], *hw[NQ], *hb[NQ];
    void *dev[NQ][6];
    int32_t *hc[NQ];
    int64_t nc[NQ];
    for (int q = 0; q < NQ; q++) {
        const int64_t m = ms[q], k = ks[q], n = ns[q], ldb = n + 1, ldc = n + 3;
        nc[q] = Me * m * ldc;
        hA[q] = malloc(sizeof(float) * Me * m * k);
        hB[q] = malloc(sizeof(float) * Me * k * ldb);
        hC[q] = malloc(sizeof(float) * nc[q]);
        hbias[q] = malloc(sizeof(float) * Me * m);
        hw[q] = malloc(sizeof(float) * Me * m);
        hb[q] = malloc(sizeof(float) * Me);
        hc[q] = malloc(sizeof(int32_t) * n);
        fill(hA[q], 0, Me * m * k, -0.1, 0.1);
        fill(hB[q], 0, Me * k * ldb, -1, 1);
        fill(hC[q], 0, nc[q], 5, 6);
        fill(hbias[q], 0, Me * m, -0.5, 0.5);
        fill(hw[q], 0, Me * m, -0.5, 0.5);
        fill(hb[q], 0, Me, -0.2, 0.2);
        for (int64_t r = 0; r < n; r++) /* distinct atoms of the two species, a padding column */
            hc[q][r] = r == 3 ? -1 : (int32_t)(q == 0 ? r : 10 + r);
        dev[q][0] = dup_to_device(hA[q], sizeof(float) * Me * m * k);
        dev[q][1] = dup_to_device(hB[q], sizeof(float) * Me * k * ldb);
        dev[q][2] = dC[q] = dup_to_device(hC[q], sizeof(float) * nc[q]);
        dev[q][3] = dup_to_device(hbias[q], sizeof(float) * Me * m);
        dev[q][4] = dup_to_device(hw[q], sizeof(float) * Me * m);
        dev[q][5] = dup_to_device(hb[q], sizeof(float) * Me);
        int32_t *dc = dup_to_device(hc[q], sizeof(int32_t) * n);
        nnpops__ani_output_args o = {n, Me, (int32_t)m, 0.1, ldc, need_grad, moff, M, member,
                                     self[q], hc[q], ae_c, me_c, 0};
        nnpops__sg_problem p = {0, NNPOPS__SG_BIAS_CELU_OUT, m, k, n, Me, hA[q], k, m * k,
                                hB[q], ldb, k * ldb, hC[q], ldc, m * ldc, hbias[q]};
        p.out = o;
        p.out_w = hw[q];
        p.out_b = hb[q];
        gh.p[gh.count++] = p;
        p.A = dev[q][0];
        p.B = dev[q][1];
        p.C = dC[q];
        p.bias = dev[q][3];
        p.out_w = dev[q][4];
        p.out_b = dev[q][5];
        p.out.centers = dc;
        p.out.atom_energy = dae;
        p.out.member_energy = dme;
        gd.p[gd.count++] = p;
    }
    nnpops__small_gemm_cpu_f32(&gh);
    CHECK_OK(nnpops__small_gemm_cuda_f32(&gd, NULL, 0, g_stream));
    double worst = 0;
    char what[128];
    for (int q = 0; q < NQ; q++) {
        float *g = malloc(sizeof(float) * nc[q]);
        to_host(g, dC[q], sizeof(float) * nc[q]);
        const int64_t m = ms[q], n = ns[q], ldc = n + 3, cnt = Me * m * n;
        double *x = malloc(sizeof(double) * cnt), *y = malloc(sizeof(double) * cnt);
        int sentinel_ok = 1;
        for (int64_t t = 0; t < Me; t++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t r = 0; r < ldc; r++) {
                    const int64_t c = (t * m + i) * ldc + r;
                    if (r >= n) {
                        sentinel_ok &= g[c] == hC[q][c];
                        continue;
                    }
                    x[(t * m + i) * n + r] = g[c];
                    y[(t * m + i) * n + r] = hC[q][c];
                }
        CHECK(sentinel_ok);
        snprintf(what, sizeof what, "fused output %lldx%lldx%lld, member %d, grad %d: %s",
                 (long long)m, (long long)ks[q], (long long)n, member, need_grad,
                 need_grad ? "seeds" : "activations");
        worst = fmax(worst, compare(what, x, y, (size_t)cnt, 2e-4, 1e-4));
        free(g);
        free(x);
        free(y);
    }
    double *ae_g = malloc(sizeof(double) * n_atoms), *me_g = malloc(sizeof(double) * n_atoms * M);
    to_host(ae_g, dae, sizeof(double) * n_atoms);
    to_host(me_g, dme, sizeof(double) * n_atoms * M);
    snprintf(what, sizeof what, "fused output, member %d: atom energies", member);
    worst = fmax(worst, compare(what, ae_g, ae_c, n_atoms, 1e-4, 1e-5));
    snprintf(what, sizeof what, "fused output, member %d: member energies", member);
    worst = fmax(worst, compare(what, me_g, me_c, n_atoms * M, 1e-4, 1e-5));
    /* the deterministic form is refused */
    gd.p[0].out.deterministic = 1;
    CHECK(nnpops__small_gemm_cuda_f32(&gd, NULL, 0, g_stream) == NNPOPS_ERROR_INVALID_ARGUMENT);
    for (int q = 0; q < NQ; q++) {
        for (int d = 0; d < 6; d++) cudaFree(dev[q][d]);
        cudaFree((void *)gd.p[q].out.centers);
        free(hA[q]);
        free(hB[q]);
        free(hC[q]);
        free(hbias[q]);
        free(hw[q]);
        free(hb[q]);
        free(hc[q]);
    }
    free_energies(ae_c, me_c, ae_g, me_g, dae, dme);
    return worst;
}

/* The k split of the backward kind (nnpops__sg_problem.split): every slice against the CPU
 * twin's slice, the slices' sum against the unsplit product (the split is a decomposition of the
 * same sums), an empty last slice written as zeros, in one grouped launch with an unsplit
 * problem. */
static double sg_split_run(void) {
    enum { NQ = 4 };
    const int64_t ms[NQ] = {384, 37, 100, 64}, ks[NQ] = {2048, 130, 10, 300},
                  ns[NQ] = {7, 13, 5, 16}, bts[NQ] = {1, 2, 1, 1};
    const int32_t splits[NQ] = {4, 3, 4, 1};
    nnpops__sg_group gh, gd, gu;
    memset(&gh, 0, sizeof gh);
    memset(&gd, 0, sizeof gd);
    memset(&gu, 0, sizeof gu);
    gh.alpha = gd.alpha = gu.alpha = 0.1;
    float *hA[NQ], *hB[NQ], *hC[NQ], *hU[NQ], *dA[NQ], *dB[NQ], *dC[NQ];
    int64_t cn[NQ];
    for (int q = 0; q < NQ; q++) {
        const int64_t m = ms[q], k = ks[q], n = ns[q], bt = bts[q], S = splits[q];
        const int64_t lda = m + 1, ldb = n + 3, ldc = n + 2, sa = k * lda, sb = k * ldb;
        const int64_t sc = m * ldc, ss = bt * sc + 5;
        cn[q] = S * ss;
        hA[q] = malloc(sizeof(float) * bt * sa);
        hB[q] = malloc(sizeof(float) * bt * sb);
        hC[q] = malloc(sizeof(float) * cn[q]);
        hU[q] = malloc(sizeof(float) * bt * sc);
        fill(hA[q], 0, bt * sa, -0.1, 0.1);
        fill(hB[q], 0, bt * sb, -1, 1);
        fill(hC[q], 0, cn[q], 7, 8); /* every element of a real column is written */
        dA[q] = dup_to_device(hA[q], sizeof(float) * bt * sa);
        dB[q] = dup_to_device(hB[q], sizeof(float) * bt * sb);
        dC[q] = dup_to_device(hC[q], sizeof(float) * cn[q]);
        nnpops__sg_problem p = {1, NNPOPS__SG_STORE, m, k, n, bt, hA[q], lda, sa, hB[q], ldb, sb,
                                hC[q], ldc, sc, NULL, (int32_t)S, ss};
        gh.p[gh.count++] = p;
        p.C = hU[q];
        p.split = 0;
        gu.p[gu.count++] = p;
        p.A = dA[q];
        p.B = dB[q];
        p.C = dC[q];
        p.split = (int32_t)S;
        gd.p[gd.count++] = p;
    }
    nnpops__small_gemm_cpu_f32(&gh);
    nnpops__small_gemm_cpu_f32(&gu);
    CHECK_OK(nnpops__small_gemm_cuda_f32(&gd, NULL, 0, g_stream));
    double worst = 0;
    for (int q = 0; q < NQ; q++) {
        const nnpops__sg_problem *p = &gh.p[q];
        float *g = malloc(sizeof(float) * cn[q]);
        to_host(g, dC[q], sizeof(float) * cn[q]);
        const int64_t cnt = p->batch * p->m * p->n;
        double *x = malloc(sizeof(double) * cnt), *y = malloc(sizeof(double) * cnt),
               *u = malloc(sizeof(double) * cnt), *v = malloc(sizeof(double) * cnt);
        for (int64_t e = 0; e < cnt; e++) u[e] = v[e] = 0;
        for (int32_t j = 0; j < splits[q]; j++) {
            for (int64_t t = 0; t < p->batch; t++)
                for (int64_t i = 0; i < p->m; i++)
                    for (int64_t r = 0; r < p->n; r++) {
                        const int64_t e = (t * p->m + i) * p->n + r;
                        const int64_t c = j * p->split_stride + t * p->stride_c + i * p->ldc + r;
                        x[e] = g[c];
                        y[e] = hC[q][c];
                        u[e] += g[c];
                        if (j == 0) v[e] = hU[q][t * p->stride_c + i * p->ldc + r];
                    }
            char what[96];
            snprintf(what, sizeof what, "k split %lldx%lldx%lld b%lld slice %d of %d",
                     (long long)p->m, (long long)p->k, (long long)p->n, (long long)p->batch,
                     (int)j, (int)splits[q]);
            worst = fmax(worst, compare(what, x, y, (size_t)cnt, 2e-4, 1e-4));
            if (q == 2 && j == 3) /* k = 10 in slices of 4: the last one is empty */
                for (int64_t e = 0; e < cnt; e++) CHECK(x[e] == 0.0);
        }
        char what[96];
        snprintf(what, sizeof what, "k split %lldx%lldx%lld: slices' sum against unsplit",
                 (long long)p->m, (long long)p->k, (long long)p->n);
        worst = fmax(worst, compare(what, u, v, (size_t)cnt, 2e-4, 1e-4));
        free(x);
        free(y);
        free(u);
        free(v);
        free(g);
        free(hA[q]);
        free(hB[q]);
        free(hC[q]);
        free(hU[q]);
        cudaFree(dA[q]);
        cudaFree(dB[q]);
        cudaFree(dC[q]);
    }
    /* a split on a forward problem is refused */
    gd.count = 1;
    gd.p[0].trans = 0;
    CHECK_STATUS(nnpops__small_gemm_cuda_f32(&gd, NULL, 0, g_stream),
                 NNPOPS_ERROR_INVALID_ARGUMENT);
    return worst;
}

static int case_small_gemm(void) {
    const sg_shape shapes[] = {
        {0, NNPOPS__SG_BIAS_CELU, 2048, 1008, 7, 1}, {0, NNPOPS__SG_BIAS_CELU, 192, 256, 45, 8},
        {0, NNPOPS__SG_BIAS_CELU, 70, 5, 1, 3},      {0, NNPOPS__SG_STORE, 33, 64, 7, 2},
        {0, NNPOPS__SG_BIAS_CELU, 160, 192, 50, 8},  {0, NNPOPS__SG_STORE, 37, 2100, 16, 1},
        {0, NNPOPS__SG_BIAS_CELU, 100, 130, 64, 2},  {0, NNPOPS__SG_STORE, 65, 1, 9, 1},
        {0, NNPOPS__SG_CELU_ACT, 50, 300, 8, 2},     {0, NNPOPS__SG_BIAS_CELU, 1536, 1008, 13, 1},
        {1, NNPOPS__SG_CELU_ACT, 256, 192, 64, 8},   {1, NNPOPS__SG_CELU_ACT, 100, 150, 32, 2},
        {1, NNPOPS__SG_STORE, 1008, 2048, 29, 1},    {1, NNPOPS__SG_STORE, 37, 130, 33, 1},
        {1, NNPOPS__SG_CELU_ACT, 31, 129, 64, 1},    {1, NNPOPS__SG_STORE, 1008, 2048, 3, 1},
        {1, NNPOPS__SG_STORE, 70, 2500, 5, 1},       {1, NNPOPS__SG_CELU_ACT, 160, 192, 8, 8},
        {1, NNPOPS__SG_BIAS_CELU, 45, 1100, 17, 2},  {1, NNPOPS__SG_STORE, 5, 3, 1, 1},
        {1, NNPOPS__SG_STORE, 1008, 1536, 40, 1},    {0, NNPOPS__SG_STORE, 40, 2100, 5, 1},
        {0, NNPOPS__SG_BIAS_CELU, 192, 256, 90, 8},  {1, NNPOPS__SG_CELU_ACT, 256, 192, 77, 8},
        {1, NNPOPS__SG_STORE, 1008, 1536, 96, 1},
    };
    const int np = (int)(sizeof shapes / sizeof shapes[0]);
    int all[NNPOPS__SG_MAX_PROBLEMS], few[NNPOPS__SG_MAX_PROBLEMS], nfew = 0;
    for (int q = 0; q < np; q++) {
        all[q] = q;
        if (shapes[q].n <= 8) few[nfew++] = q;
    }
    double worst = 0;
    worst = fmax(worst, sg_run(shapes, all, np, "one group"));
    worst = fmax(worst, sg_run(shapes, few, nfew, "n <= 8 group"));
    /* each problem alone (the one-problem launch); emulated, the first of each kind (trans,
     * epilogue): the group runs above took every shape */
    for (int q = 0; q < np; q++) {
        int seen = 0;
        for (int r = 0; r < q && TEST_EMULATED; r++)
            seen |= shapes[r].trans == shapes[q].trans && shapes[r].epi == shapes[q].epi;
        if (!seen) worst = fmax(worst, sg_run(shapes, &q, 1, "alone"));
    }
    /* the k split of the backward kind */
    worst = fmax(worst, sg_split_run());
    /* the fused output layer */
    for (int member = -1; member < 8; member += 6)
        for (int grad = 0; grad < 2; grad++) worst = fmax(worst, sg_out_run(member, grad));
    /* the grouped output layer */
    for (int det = 0; det < 2; det++)
        for (int member = -1; member < 8; member += 4) worst = fmax(worst, sg_output_run(member, det));
    CHECK(worst <= 1.0);
    return 0;
}

/* The networks' tails in one launch (nnpops__sg_tail_cuda_f32) against the CPU twin
 * (nnpops__sg_tail_cpu_f32: the small-n GEMM twin layer after layer): four networks (ANI-2x's
 * H and C shapes, four and five hidden layers of widths that are not multiples of 8 or 32), 7,
 * 40, 13 and 5 columns (8-, 16- and 32-column chunks, two chunks, a padding column; 8-column
 * chunks run the push exchange, the others the pull exchange), together, in pairs and each alone,
 * the ensemble mean and one member, with and without the backward pass: the atom and member
 * energies, dE/dZ0 over the first layer's activations, and the columns past n untouched. */
static double tail_run(const int *which, int count, int member, int need_grad) {
    enum { NQ = 4 };
    const int hid[NQ] = {3, 3, 4, 5};
    const int32_t widths[NQ][5] = {{256, 192, 160}, {224, 192, 160}, {100, 68, 36, 20},
                                   {100, 68, 36, 20, 12}};
    const int64_t ns[NQ] = {7, 40, 13, 5}, n_atoms = 80;
    const int M = 8, Me = member < 0 ? M : 1, moff = member < 0 ? 0 : member;
    const double alpha = 0.1, self[NQ] = {-0.6, -38.2, -54.7, -75.0};
    double *ae_c = calloc(n_atoms, sizeof(double)), *me_c = calloc(n_atoms * M, sizeof(double));
    double *dae = dalloc(sizeof(double) * n_atoms), *dme = dalloc(sizeof(double) * n_atoms * M);
    CUDA_CHECK(cudaMemset(dae, 0, sizeof(double) * n_atoms));
    CUDA_CHECK(cudaMemset(dme, 0, sizeof(double) * n_atoms * M));
    nnpops__sg_tail th[NQ], td[NQ];
    float *hA[NQ], *hA0[NQ], *dA[NQ];
    void *dev[NQ][2 * NNPOPS__SG_TAIL_MAX_HIDDEN + 2];
    int nd[NQ];
    int64_t na[NQ];
    for (int c = 0; c < count; c++) {
        const int q = which[c], h = hid[q];
        const int64_t n = ns[q], ld = (n + 31) / 32 * 32 + 2;
        memset(&th[c], 0, sizeof th[c]);
        th[c].hidden = h;
        for (int l = 0; l < h; l++) th[c].width[l] = widths[q][l];
        nd[c] = 0;
        td[c] = th[c];
        for (int l = 1; l <= h; l++) { /* layer l's weights and biases (l == h: the output) */
            const int64_t m = l < h ? widths[q][l] : 1, k = widths[q][l - 1];
            float *w = malloc(sizeof(float) * Me * m * k), *b = malloc(sizeof(float) * Me * m);
            const double sc = 1.5 / sqrt((double)k);
            fill(w, 0, Me * m * k, -sc, sc);
            fill(b, 0, Me * m, -0.3, 0.3);
            th[c].W[l] = w;
            th[c].b[l] = b;
            td[c].W[l] = dev[c][nd[c]++] = dup_to_device(w, sizeof(float) * Me * m * k);
            td[c].b[l] = dev[c][nd[c]++] = dup_to_device(b, sizeof(float) * Me * m);
        }
        na[c] = Me * widths[q][0] * ld;
        hA[c] = malloc(sizeof(float) * na[c]);
        hA0[c] = malloc(sizeof(float) * na[c]);
        fill(hA[c], 0, na[c], -0.1, 1.2);
        memcpy(hA0[c], hA[c], sizeof(float) * na[c]);
        dA[c] = dup_to_device(hA[c], sizeof(float) * na[c]);
        int32_t *hc = malloc(sizeof(int32_t) * n);
        const int32_t first[NQ] = {0, 10, 50, 70}; /* distinct atoms per network */
        for (int64_t r = 0; r < n; r++) hc[r] = r == 3 ? -1 : first[q] + (int32_t)r; /* 3: pad */
        int32_t *dc = dup_to_device(hc, sizeof(int32_t) * n);
        dev[c][nd[c]++] = dc;
        nnpops__ani_output_args o = {n, Me, widths[q][h - 1], alpha, ld, need_grad, moff, M,
                                     member, self[q], hc, ae_c, me_c, 0};
        th[c].out = o;
        th[c].A = hA[c];
        o.centers = dc;
        o.atom_energy = dae;
        o.member_energy = dme;
        td[c].out = o;
        td[c].A = dA[c];
        CHECK(nnpops__sg_tail_supported(&td[c]));
        float *work = malloc(sizeof(float) * nnpops__sg_tail_work_floats(&th[c]));
        nnpops__sg_tail_cpu_f32(&th[c], alpha, work);
        free(work);
    }
    CHECK_OK(nnpops__sg_tail_cuda_f32(td, count, alpha, g_stream));
    double worst = 0;
    char what[128];
    for (int c = 0; c < count; c++) {
        const int q = which[c];
        const int64_t n = ns[q], ld = (n + 31) / 32 * 32 + 2, rows = Me * widths[q][0];
        float *g = malloc(sizeof(float) * na[c]);
        to_host(g, dA[c], sizeof(float) * na[c]);
        int untouched = 1;
        for (int64_t f = 0; f < rows; f++)
            for (int64_t r = n; r < ld; r++) untouched &= g[f * ld + r] == hA0[c][f * ld + r];
        CHECK(untouched);
        snprintf(what, sizeof what, "tail %d (%d of %d), member %d, grad %d: %s", q, c, count,
                 member, need_grad, need_grad ? "dE/dZ0" : "layer 0 unchanged");
        worst = fmax(worst, cmp_any(what, 0, g, hA[c], rows, n, ld, 2e-5, 1e-4));
        if (!need_grad) CHECK(memcmp(g, hA0[c], sizeof(float) * na[c]) == 0);
        free(g);
    }
    double *ae_g = malloc(sizeof(double) * n_atoms), *me_g = malloc(sizeof(double) * n_atoms * M);
    to_host(ae_g, dae, sizeof(double) * n_atoms);
    to_host(me_g, dme, sizeof(double) * n_atoms * M);
    snprintf(what, sizeof what, "tail (%d networks), member %d: atom energies", count, member);
    worst = fmax(worst, compare(what, ae_g, ae_c, n_atoms, 1e-4, 1e-5));
    snprintf(what, sizeof what, "tail (%d networks), member %d: member energies", count, member);
    worst = fmax(worst, compare(what, me_g, me_c, n_atoms * M, 1e-4, 1e-5));
    for (int c = 0; c < count; c++) {
        for (int d = 0; d < nd[c]; d++) cudaFree(dev[c][d]);
        for (int l = 1; l <= th[c].hidden; l++) {
            free((void *)th[c].W[l]);
            free((void *)th[c].b[l]);
        }
        free((void *)th[c].out.centers);
        free(hA[c]);
        free(hA0[c]);
        cudaFree(dA[c]);
    }
    free_energies(ae_c, me_c, ae_g, me_g, dae, dme);
    return worst;
}

static int case_sg_tail(void) {
    const int all[4] = {0, 1, 2, 3}, small[2] = {0, 3}; /* small: one launch of 8-column chunks */
    double worst = 0;
    for (int member = -1; member < 8; member += 6)
        for (int grad = 0; grad < 2; grad++) {
            worst = fmax(worst, tail_run(all, 4, member, grad));
            worst = fmax(worst, tail_run(small, 2, member, grad));
            for (int q = 0; q < 4; q++) worst = fmax(worst, tail_run(&q, 1, member, grad));
        }
    CHECK(worst <= 1.0);
    /* networks the one-launch path refuses: nothing enqueued, a clear status */
    nnpops__sg_tail t;
    memset(&t, 0, sizeof t);
    int32_t cen = 0;
    float *w = dalloc(sizeof(float) * 4096);
    t.hidden = 3;
    t.width[0] = 64;
    t.width[1] = 32;
    t.width[2] = 16;
    t.W[1] = t.W[2] = t.W[3] = t.b[1] = t.b[2] = t.b[3] = w;
    t.A = w;
    t.out = (nnpops__ani_output_args){5, 1, 16, 0.1, 32, 1, 0, 8, 0, 0.0, &cen, NULL, NULL, 0};
    CHECK(nnpops__sg_tail_supported(&t));
    t.out.deterministic = 1;
    CHECK(!nnpops__sg_tail_supported(&t));
    CHECK(nnpops__sg_tail_cuda_f32(&t, 1, 0.1, g_stream) == NNPOPS_ERROR_UNSUPPORTED);
    t.out.deterministic = 0;
    t.width[1] = 260; /* wider than 256 */
    CHECK(!nnpops__sg_tail_supported(&t));
    t.width[1] = 30; /* not a multiple of 4 */
    CHECK(!nnpops__sg_tail_supported(&t));
    t.width[1] = 32;
    t.hidden = 1; /* no hidden layer past the first */
    CHECK(!nnpops__sg_tail_supported(&t));
    t.hidden = 3;
    t.out.n = NNPOPS__SG_MAX_COLS + 1;
    CHECK(!nnpops__sg_tail_supported(&t));
    cudaFree(w);
    printf("sg_tail: worst %.3g of the tolerance\n", worst);
    return 0;
}

/* nnpops__stage_cuda against memcpy / memset (its CPU twin): random bytes from pinned host memory
 * (through its device pointer) to the device and zeroing there; device to pinned host. */
static int case_stage(void) {
    const size_t sizes[] = {0, 1, 15, 16, 17, 1000, 4096, 70001, 262144};
    const size_t cap = 262144 + 64;
    unsigned char *hin, *hout, *want = malloc(cap), *got = malloc(cap);
    CUDA_CHECK(cudaMallocHost((void **)&hin, cap));
    CUDA_CHECK(cudaMallocHost((void **)&hout, cap));
    void *din = NULL, *dout = NULL;
    CUDA_CHECK(cudaHostGetDevicePointer(&din, hin, 0));
    CUDA_CHECK(cudaHostGetDevicePointer(&dout, hout, 0));
    unsigned char *dev = dalloc(2 * cap);
    for (size_t a = 0; a < sizeof sizes / sizeof sizes[0]; a++)
        for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b += 3) {
            const size_t nc = sizes[a], nz = sizes[b];
            /* in: pinned host -> device [0, nc), zero device [cap, cap + nz) */
            for (size_t k = 0; k < cap; k++) hin[k] = (unsigned char)(urand() * 256);
            unsigned char *fillv = malloc(2 * cap), *back = malloc(2 * cap);
            for (size_t k = 0; k < 2 * cap; k++) fillv[k] = (unsigned char)(urand() * 256);
            /* on the test's stream: a pageable cudaMemcpy may still be in flight when it returns */
            CUDA_CHECK(cudaMemcpyAsync(dev, fillv, 2 * cap, cudaMemcpyHostToDevice, g_stream));
            CHECK_OK(nnpops__stage_cuda(dev, din, nc, nz ? dev + cap : NULL, nz, g_stream));
            gsync();
            to_host(back, dev, 2 * cap);
            memcpy(fillv, hin, nc);
            memset(fillv + cap, 0, nz);
            CHECK(memcmp(back, fillv, 2 * cap) == 0);
            /* out: device [0, nc) -> pinned host */
            for (size_t k = 0; k < cap; k++) hout[k] = (unsigned char)(urand() * 256);
            memcpy(want, hout, cap);
            CHECK_OK(nnpops__stage_cuda(dout, dev + cap / 2, nc, NULL, 0, g_stream));
            gsync();
            memcpy(want, back + cap / 2, nc);
            memcpy(got, hout, cap);
            CHECK(memcmp(got, want, cap) == 0);
            free(fillv);
            free(back);
        }
    printf("stage: %zu copy sizes x %zu zero sizes, both directions, bytes equal\n",
           sizeof sizes / sizeof sizes[0], (sizeof sizes / sizeof sizes[0] + 2) / 3);
    cudaFree(dev);
    cudaFreeHost(hin);
    cudaFreeHost(hout);
    free(want);
    free(got);
    return 0;
}

/* ---- Lennard-Jones (potentials/lj) ----------------------------------------------------------- */

/* The pair terms over center lists against their CPU twin: the neighbor-test batch with two
 * species, every atom a center (the last ones ghosts: they get no energy and zero gradients), with
 * the whole list and with a capacity that cuts the last entries off (never read by either). */
static int case_lj(void) {
    batchset b = make_batch();
    const int64_t n = b.n, n_local = b.n_centers;
    nnpops__lj_table *tab = calloc(1, sizeof *tab);
    tab->n_species = 2;
    const double eps[3] = {0.0104, 0.0125, 0.0141}, sig[3] = {3.40, 3.50, 3.65},
                 cut[3] = {5.2, 4.8, 5.0};
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 2; c++) {
            const int k = a + c;
            nnpops__lj_pair *q = &tab->pair[a * 2 + c];
            q->on = 1;
            q->eps = eps[k];
            q->sigma = sig[k];
            q->cutoff = cut[k];
            const double s6 = pow(sig[k] / cut[k], 6);
            q->e_shift = k == 1 ? 0.0 : 4 * eps[k] * (s6 * s6 - s6); /* shifted and not */
        }
    int32_t *species = malloc(sizeof(int32_t) * n);
    for (int64_t i = 0; i < n; i++) species[i] = urand() < 0.4;
    nnpops__scratch sc;
    memset(&sc, 0, sizeof sc);
    nnpops__nbr_in in = host_in(&b);
    nnpops__dev_status st;
    int64_t cap = 200 * n;
    int64_t *start = malloc(sizeof(int64_t) * (n + 1));
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * cap);
    double *vec = malloc(sizeof(double) * 3 * cap);
    nnpops__center_out co = {cap, start, pairs, NULL, vec, NULL, &st};
    CHECK_OK(nnpops__center_neighbors_cpu(&in, n, 0.0, &sc, &co));
    CHECK(!(st.flags & NNPOPS__ST_OVERFLOW));
    const int64_t ne = start[n];
    int32_t *dsp = dup_to_device(species, sizeof(int32_t) * n);
    int64_t *dstart = dup_to_device(start, sizeof(int64_t) * (n + 1));
    int32_t *dpairs = dup_to_device(pairs, sizeof(int32_t) * 2 * ne);
    double *dvec = dup_to_device(vec, sizeof(double) * 3 * ne);
    nnpops__lj_table *dtab = dup_to_device(tab, sizeof *tab);
    double *e_cpu = malloc(sizeof(double) * n), *e_gpu = malloc(sizeof(double) * n);
    double *g_cpu = malloc(sizeof(double) * 3 * ne), *g_gpu = malloc(sizeof(double) * 3 * ne);
    double *de = dalloc(sizeof(double) * n), *dg = dalloc(sizeof(double) * 3 * ne);
    for (int trunc = 0; trunc < 2; trunc++) {
        const int64_t capacity = trunc ? ne - 37 : ne;
        for (int64_t k = 0; k < 3 * ne; k++) g_cpu[k] = g_gpu[k] = 7.0; /* beyond capacity: kept */
        CUDA_CHECK(cudaMemcpy(dg, g_gpu, sizeof(double) * 3 * ne, cudaMemcpyHostToDevice));
        nnpops__lj_centers_cpu(tab, n, n_local, start, pairs, vec, species, capacity, e_cpu, g_cpu);
        CHECK_OK(nnpops__lj_centers_cuda(dtab, n, n_local, dstart, dpairs, dvec, dsp, capacity, de,
                                         dg, g_stream));
        to_host(e_gpu, de, sizeof(double) * n);
        to_host(g_gpu, dg, sizeof(double) * 3 * ne);
        double emax = 0, gmax = 0, esum = 0;
        for (int64_t i = 0; i < n; i++) {
            emax = fmax(emax, fabs(e_cpu[i]));
            esum += e_cpu[i];
            if (i >= n_local) CHECK(e_cpu[i] == 0.0); /* a ghost center's energy does not count */
        }
        for (int64_t k = 0; k < 3 * capacity; k++) gmax = fmax(gmax, fabs(g_cpu[k]));
        for (int64_t k = 3 * capacity; k < 3 * ne; k++) CHECK(g_cpu[k] == 7.0 && g_gpu[k] == 7.0);
        for (int64_t e = start[n_local]; e < capacity; e++) /* ghost centers: zero gradients */
            CHECK(g_cpu[3 * e] == 0.0 && g_cpu[3 * e + 1] == 0.0 && g_cpu[3 * e + 2] == 0.0);
        CHECK(gmax > 0 && emax > 0);
        if (compare("lj atom energies", e_gpu, e_cpu, n, 1e-13 * emax, 1e-12) > 1.0) return 1;
        if (compare("lj entry gradients", g_gpu, g_cpu, 3 * capacity, 1e-13 * gmax, 1e-12) > 1.0)
            return 1;
        printf("  %lld entries (capacity %lld), %lld local of %lld centers, energy %.6g\n",
               (long long)ne, (long long)capacity, (long long)n_local, (long long)n, esum);
    }
    return 0;
}

/* An lj model on "cuda" (the GPU step with LJ's hooks) against the same model on "cpu" (the half
 * list of the CPU step): a cluster with ghosts, and a batch of a cluster and a periodic box whose
 * cutoff exceeds half its width; energies, forces, virials, per-atom energies. */
static int case_lj_model(void) {
    const char *path = test_write_text(
        "arkr.yaml",
        "format: nnpops-model\nformat_version: 1\nname: arkr\ntype: lj\n"
        "units: {length: angstrom, energy: eV}\nspecies: [Ar, Kr]\n"
        "lj:\n  shift: true\n  pairs:\n"
        "    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: 3.40, cutoff: 7.0}\n"
        "    - {elements: [Kr, Ar], epsilon: 0.0125, sigma: 3.50, cutoff: 8.0}\n"
        "    - {elements: [Kr, Kr], epsilon: 0.0141, sigma: 3.65, cutoff: 6.5}\n");
    enum { N = 120 };
    int32_t z[N], batch[N];
    double x[3 * N];
    for (int i = 0; i < N; i++) {
        z[i] = urand() < 0.3 ? 36 : 18;
        batch[i] = i < 70 ? 0 : 1;
        /* at least 2.9 angstrom apart: a jittered grid */
        const int g = i < 70 ? i : i - 70;
        x[3 * i] = 3.3 * (g % 5) + 0.4 * urand();
        x[3 * i + 1] = 3.3 * ((g / 5) % 5) + 0.4 * urand();
        x[3 * i + 2] = 3.3 * (g / 25) + 0.4 * urand();
    }
    const double cells[18] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 16.5, 0, 0, 0.5, 16.5, 0, 0, 0, 6.6};
    const uint8_t pbc[6] = {0, 0, 0, 1, 1, 1};
    double e[2][2], f[2][3 * N], w[2][18], a[2][N];
    for (int layout = 0; layout < 2; layout++) {
        for (int dev = 0; dev < 2; dev++) {
            nnpops_model *m;
            nnpops_context *ctx;
            CHECK_OK(nnpops_model_load(path, dev ? "cuda" : "cpu", NNPOPS_FLOAT64, &m));
            CHECK_OK(nnpops_context_create(m, &ctx));
            /* layout 0: the first system alone with its last 20 atoms ghosts; 1: the batch */
            nnpops_inputs in = {sizeof in, layout ? N : 70, layout ? -1 : 50, layout ? 2 : 1, z,
                                x, layout ? batch : NULL, layout ? cells : NULL,
                                layout ? pbc : NULL, NULL};
            nnpops_outputs out = {sizeof out, e[dev], f[dev], w[dev], a[dev], NULL, NULL};
            CHECK_OK(nnpops_compute(ctx, &in, &out));
            nnpops_context_destroy(ctx);
            nnpops_model_destroy(m);
        }
        const int n = layout ? N : 70, ns = layout ? 2 : 1;
        double fmaxv = 0;
        for (int k = 0; k < 3 * n; k++) fmaxv = fmax(fmaxv, fabs(f[0][k]));
        CHECK(fmaxv > 1e-4);
        if (compare("lj model energies", e[1], e[0], ns, 1e-12, 1e-12) > 1.0 ||
            compare("lj model forces", f[1], f[0], 3 * n, 1e-12 * fmaxv, 1e-11) > 1.0 ||
            compare("lj model virials", w[1], w[0], 9 * ns, 1e-12, 1e-11) > 1.0 ||
            compare("lj model atom energies", a[1], a[0], n, 1e-13, 1e-11) > 1.0)
            return 1;
    }
    return 0;
}

/* A potential that asks the GPU step for center lists of every atom (ghosts too): LJ's table
 * entry with a neighbor choice of ghost centers.  LJ's op counts only the local centers' entries,
 * so the results are those of the local centers' lists. */
static nnpops__potential_vt g_lj_ghost_vt;
static void ghost_center_lists(const nnpops_model *model, nnpops__nbr_choice *lists) {
    (void)model;
    lists->full = 1;
    lists->ghost_pairs = 1;
    lists->ghost_centers = 1;
}

static int case_lj_ghost_centers(void) {
    const char *path = test_write_text(
        "arkr_ghosts.yaml",
        "format: nnpops-model\nformat_version: 1\nname: arkr\ntype: lj\n"
        "units: {length: angstrom, energy: eV}\nspecies: [Ar, Kr]\n"
        "lj:\n  shift: true\n  pairs:\n"
        "    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: 3.40, cutoff: 7.0}\n"
        "    - {elements: [Kr, Ar], epsilon: 0.0125, sigma: 3.50, cutoff: 8.0}\n"
        "    - {elements: [Kr, Kr], epsilon: 0.0141, sigma: 3.65, cutoff: 6.5}\n");
    enum { N = 90, LOCAL = 50 };
    int32_t z[N];
    double x[3 * N];
    for (int i = 0; i < N; i++) {
        z[i] = urand() < 0.3 ? 36 : 18;
        x[3 * i] = 3.3 * (i % 5) + 0.4 * urand();
        x[3 * i + 1] = 3.3 * ((i / 5) % 5) + 0.4 * urand();
        x[3 * i + 2] = 3.3 * (i / 25) + 0.4 * urand();
    }
    /* run 0: cpu; 1: cuda with the model's own lists; 2: cuda with ghost centers */
    double e[3], f[3][3 * N], w[3][9], a[3][N];
    int64_t pairs[3] = {0, 0, 0};
    for (int run = 0; run < 3; run++) {
        nnpops_model *m;
        nnpops_context *ctx;
        CHECK_OK(nnpops_model_load(path, run ? "cuda" : "cpu", NNPOPS_FLOAT64, &m));
        if (run == 2) {
            g_lj_ghost_vt = *m->vt;
            g_lj_ghost_vt.neighbor_lists = ghost_center_lists;
            m->vt = &g_lj_ghost_vt;
        }
        CHECK_OK(nnpops_context_create(m, &ctx));
        nnpops_inputs in = {sizeof in, N, LOCAL, 1, z, x, NULL, NULL, NULL, NULL};
        nnpops_outputs out = {sizeof out, &e[run], f[run], w[run], a[run], NULL, NULL};
        CHECK_OK(nnpops_compute(ctx, &in, &out));
        nnpops_stats stats;
        memset(&stats, 0, sizeof stats);
        stats.struct_size = sizeof stats;
        CHECK_OK(nnpops_context_stats(ctx, &stats));
        pairs[run] = stats.n_pairs;
        nnpops_context_destroy(ctx);
        nnpops_model_destroy(m);
    }
    /* the pairs of two ghosts within the longest cutoff, counted here */
    int64_t gg = 0;
    for (int i = LOCAL; i < N; i++)
        for (int j = i + 1; j < N; j++) {
            double d2 = 0;
            for (int k = 0; k < 3; k++) {
                const double dk = x[3 * i + k] - x[3 * j + k];
                d2 += dk * dk;
            }
            gg += d2 < 8.0 * 8.0;
        }
    printf("  pairs: %lld with the local centers' lists, %lld with ghost centers (%lld of two "
           "ghosts)\n",
           (long long)pairs[1], (long long)pairs[2], (long long)gg);
    CHECK(gg > 0 && pairs[2] == pairs[1] + gg);
    double fmaxv = 0;
    for (int k = 0; k < 3 * N; k++) fmaxv = fmax(fmaxv, fabs(f[0][k]));
    CHECK(fmaxv > 1e-4);
    for (int run = 1; run < 3; run++)
        if (compare("lj ghost centers energy", &e[run], &e[0], 1, 1e-12, 1e-12) > 1.0 ||
            compare("lj ghost centers forces", f[run], f[0], 3 * N, 1e-12 * fmaxv, 1e-11) > 1.0 ||
            compare("lj ghost centers virial", w[run], w[0], 9, 1e-12, 1e-11) > 1.0 ||
            compare("lj ghost centers atom energies", a[run], a[0], N, 1e-13, 1e-11) > 1.0)
            return 1;
    return 0;
}

/* ANI's columns (nnpops__ani_columns_cuda) against the CPU twin, and both against the definition:
 * species s's columns start[s] .. start[s+1] hold its local atoms in increasing index, then -1. */
static int case_ani_columns(void) {
    static const struct {
        int64_t n, n_local;
        int32_t n_species;
        int truncate, ranks;
    } cases[] = {
        {13, 13, 4, 0, 0}, {40, 25, 7, 0, 1}, {1, 1, 1, 0, 0},    {300, 200, 7, 0, 1},
        {3000, 2500, 7, 0, 0}, {700, 600, 3, 1, 1}, {64, 0, 2, 0, 1}, {5000, 5000, 32, 0, 1},
    };
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        const int64_t n = cases[q].n, nl = cases[q].n_local;
        const int32_t S = cases[q].n_species;
        int32_t *species = malloc(sizeof(int32_t) * (size_t)n);
        int64_t count[NNPOPS__MAX_SPECIES] = {0};
        for (int64_t i = 0; i < n; i++) {
            /* species 1 absent when there are more than two */
            int32_t s = (int32_t)(urand() * S);
            if (s >= S) s = S - 1;
            if (S > 2 && s == 1) s = 0;
            species[i] = s;
            if (i < nl) count[s]++;
        }
        nnpops__ani_columns_args a;
        memset(&a, 0, sizeof a);
        a.n_atoms = n;
        a.n_local = nl;
        a.n_species = S;
        for (int32_t s = 0; s < S; s++) {
            int64_t c = (count[s] + 31) / 32 * 32;
            if (cases[q].truncate && s == 0 && c > 0) c -= 32; /* fewer columns than atoms */
            a.start[s + 1] = a.start[s] + c;
            a.rank_of[s] = S - 1 - s;
        }
        const int64_t nc = a.start[S];
        int32_t *c_cpu = malloc(sizeof(int32_t) * (size_t)(nc + 1));
        int32_t *c_gpu = malloc(sizeof(int32_t) * (size_t)(nc + 1));
        int32_t *r_cpu = malloc(sizeof(int32_t) * (size_t)n);
        int32_t *r_gpu = malloc(sizeof(int32_t) * (size_t)n);
        int32_t *dsp = dup_to_device(species, sizeof(int32_t) * (size_t)n);
        int32_t *dc = dalloc(sizeof(int32_t) * (size_t)(nc + 1));
        int32_t *dr = dalloc(sizeof(int32_t) * (size_t)n);
        CUDA_CHECK(cudaMemset(dc, 0x7f, sizeof(int32_t) * (size_t)(nc + 1)));
        nnpops__ani_columns_cpu(&a, species, c_cpu, cases[q].ranks ? r_cpu : NULL);
        CHECK_OK(nnpops__ani_columns_cuda(&a, dsp, dc, cases[q].ranks ? dr : NULL, g_stream));
        CUDA_CHECK(cudaStreamSynchronize(g_stream));
        to_host(c_gpu, dc, sizeof(int32_t) * (size_t)(nc + 1));
        CHECK(c_gpu[nc] == 0x7f7f7f7f); /* nothing past the columns */
        for (int64_t c = 0; c < nc; c++) CHECK(c_gpu[c] == c_cpu[c]);
        /* the definition */
        for (int32_t s = 0; s < S; s++) {
            int64_t c = a.start[s];
            for (int64_t i = 0; i < nl && c < a.start[s + 1]; i++)
                if (species[i] == s) CHECK(c_cpu[c++] == (int32_t)i);
            for (; c < a.start[s + 1]; c++) CHECK(c_cpu[c] == -1);
        }
        if (cases[q].ranks) {
            to_host(r_gpu, dr, sizeof(int32_t) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                CHECK(r_gpu[i] == S - 1 - species[i] && r_cpu[i] == r_gpu[i]);
        }
        printf("  %lld atoms (%lld local), %d species: %lld columns\n", (long long)n,
               (long long)nl, (int)S, (long long)nc);
        CUDA_CHECK(cudaFree(dsp));
        CUDA_CHECK(cudaFree(dc));
        CUDA_CHECK(cudaFree(dr));
        free(species);
        free(c_cpu);
        free(c_gpu);
        free(r_cpu);
        free(r_gpu);
    }
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
    else if (!strcmp(c, "neighbors_onepass")) r = case_neighbors_onepass();
    else if (!strcmp(c, "reduce_step")) r = case_reduce_step();
    else if (!strcmp(c, "neighbors_errors")) r = case_neighbors_errors();
    else if (!strcmp(c, "center_lists")) r = case_center_lists();
    else if (!strcmp(c, "aev")) r = case_aev();
    else if (!strcmp(c, "dense")) r = case_dense();
    else if (!strcmp(c, "celu")) r = case_celu();
    else if (!strcmp(c, "fused")) r = case_fused();
    else if (!strcmp(c, "reduce")) r = case_reduce();
    else if (!strcmp(c, "small_gemm")) r = case_small_gemm();
    else if (!strcmp(c, "sg_tail")) r = case_sg_tail();
    else if (!strcmp(c, "stage")) r = case_stage();
    else if (!strcmp(c, "lj")) r = case_lj();
    else if (!strcmp(c, "lj_model")) r = case_lj_model();
    else if (!strcmp(c, "lj_ghost_centers")) r = case_lj_ghost_centers();
    else if (!strcmp(c, "ani_columns")) r = case_ani_columns();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    CUDA_CHECK(cudaGetLastError());
    if (r == 0) printf("%s: ok\n", c);
    return r;
}
