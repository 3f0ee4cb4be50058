/*
 * test_neighbors_internal.c - nnpops__neighbors_cpu (the kernel behind nnpops_compute) against the
 * brute-force reference, one CTest entry per case: test_neighbors_internal CASE.
 *
 * Cases: batch (3 systems with different cells in one call, atoms of the systems interleaved),
 * skip_from (ghost-ghost pairs dropped), overflow (count, no message, retry), errors (messages name
 * the system), sparse (memory stays linear for a sparse bounding box), empty.
 */
#include "test_neighbors_ref.c"

#include "core/src/internal.h"

/* A batch of systems: atom ids interleaved at random, grouped by `order`. */
typedef struct batch {
    int64_t n_atoms, n_systems;
    double *x;
    int32_t *sys_of;   /* [n_atoms] */
    int64_t *start;    /* [n_systems + 1] */
    int32_t *order;    /* [n_atoms] */
    double cells[8][9];
    uint8_t pbc[8][3];
} batch;

static void batch_group(batch *b) {
    b->start = calloc((size_t)b->n_systems + 1, sizeof(int64_t));
    b->order = malloc(sizeof(int32_t) * (size_t)(b->n_atoms ? b->n_atoms : 1));
    CHECK(b->start && b->order);
    for (int64_t a = 0; a < b->n_atoms; a++) b->start[b->sys_of[a] + 1]++;
    for (int64_t s = 0; s < b->n_systems; s++) b->start[s + 1] += b->start[s];
    int64_t *fill = malloc(sizeof(int64_t) * (size_t)b->n_systems);
    CHECK(fill);
    memcpy(fill, b->start, sizeof(int64_t) * (size_t)b->n_systems);
    for (int64_t a = 0; a < b->n_atoms; a++) b->order[fill[b->sys_of[a]]++] = (int32_t)a;
    free(fill);
}

static void batch_free(batch *b) {
    free(b->x);
    free(b->sys_of);
    free(b->start);
    free(b->order);
}

/* Reference for the whole batch: each system's brute-force list with global ids. */
static void batch_reference(const batch *b, double cutoff, int64_t skip_from, ref_list *want) {
    for (int64_t s = 0; s < b->n_systems; s++) {
        const int64_t m = b->start[s + 1] - b->start[s];
        int64_t *ids = malloc(sizeof(int64_t) * (size_t)(m ? m : 1));
        CHECK(ids);
        for (int64_t a = 0; a < m; a++) ids[a] = b->order[b->start[s] + a];
        ref_neighbors(m, ids, b->x, b->cells[s], b->pbc[s], cutoff, skip_from, want);
        free(ids);
    }
}

/* Runs the kernel, growing capacity on overflow; checks vec against dist and returns the list. */
static void batch_run(const batch *b, double cutoff, int64_t skip_from, int32_t max_images,
                      nnpops__scratch *scratch, ref_list *got) {
    const nnpops__nbr_in in = {
        .n_atoms = b->n_atoms,
        .positions = b->x,
        .n_systems = b->n_systems,
        .sys_start = b->start,
        .order = b->order,
        .cells = &b->cells[0][0],
        .pbc = &b->pbc[0][0],
        .cutoff = cutoff,
        .skip_from = skip_from,
        .max_images = max_images,
    };
    int64_t cap = 8;
    for (;;) {
        nnpops__nbr_out out = {.capacity = cap};
        out.pairs = malloc(sizeof(int32_t) * 2 * (size_t)cap);
        out.shifts = malloc(sizeof(int32_t) * 3 * (size_t)cap);
        out.vec = malloc(sizeof(double) * 3 * (size_t)cap);
        out.dist = malloc(sizeof(double) * (size_t)cap);
        CHECK(out.pairs && out.shifts && out.vec && out.dist);
        nnpops_status st = nnpops__neighbors_cpu(&in, scratch, &out);
        if (st == NNPOPS_OK) {
            for (int64_t p = 0; p < out.n_pairs; p++) {
                ref_pair q;
                q.i = out.pairs[2 * p];
                q.j = out.pairs[2 * p + 1];
                for (int k = 0; k < 3; k++) {
                    q.s[k] = out.shifts[3 * p + k];
                    q.v[k] = out.vec[3 * p + k];
                }
                q.d = out.dist[p];
                CHECK(b->sys_of[q.i] == b->sys_of[q.j]);
                ref_push(got, &q);
            }
        }
        free(out.pairs);
        free(out.shifts);
        free(out.vec);
        free(out.dist);
        if (st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW) {
            CHECK(out.n_pairs > cap);
            cap = out.n_pairs;
            continue;
        }
        CHECK_OK(st);
        return;
    }
}

static void skewed(double L, double *cell) {
    const double c[9] = {L, 0, 0, 0.7 * L, 0.8 * L, 0, -0.4 * L, 0.3 * L, 0.9 * L};
    memcpy(cell, c, sizeof c);
}

/* Three systems: skewed periodic (atoms partly outside), non-periodic cluster, mixed pbc with a
 * small cell (many images); atoms assigned to systems at random. */
static void make_batch3(unsigned long long seed, int64_t n, batch *b) {
    memset(b, 0, sizeof *b);
    b->n_atoms = n;
    b->n_systems = 3;
    b->x = malloc(sizeof(double) * 3 * (size_t)n);
    b->sys_of = malloc(sizeof(int32_t) * (size_t)n);
    CHECK(b->x && b->sys_of);
    skewed(13.0, b->cells[0]);
    memset(b->pbc[0], 1, 3);
    /* system 1: no periodicity; its cell is garbage on purpose (ignored) */
    for (int k = 0; k < 9; k++) b->cells[1][k] = 0.0;
    const double small[9] = {4.0, 0, 0, 1.0, 4.5, 0, -0.5, 0.7, 20.0};
    memcpy(b->cells[2], small, sizeof small);
    b->pbc[2][0] = 1;
    b->pbc[2][1] = 1;
    b->pbc[2][2] = 0;
    for (int64_t a = 0; a < n; a++) {
        const int s = (int)(3.0 * test_rand(&seed));
        b->sys_of[a] = s;
        double *x = b->x + 3 * a;
        if (s == 0) ref_random_positions(&seed, 1, b->cells[0], 0.0, -1.0, 2.0, x);
        else if (s == 1) ref_random_positions(&seed, 1, NULL, 18.0, 0.0, 1.0, x);
        else ref_random_positions(&seed, 1, b->cells[2], 0.0, 0.0, 1.0, x);
    }
    batch_group(b);
}

static int case_batch(void) {
    for (int t = 0; t < 3; t++) {
        batch b;
        make_batch3(1000 + t, 500, &b);
        nnpops__scratch scratch = {0};
        ref_list got = {0}, want = {0};
        batch_run(&b, 5.0, b.n_atoms, 64, &scratch, &got);
        batch_reference(&b, 5.0, b.n_atoms, &want);
        char label[64];
        snprintf(label, sizeof label, "batch of 3, trial %d", t);
        ref_compare(label, &got, &want, 1);
        /* the second call reuses the grown scratch: same answer */
        ref_list again = {0};
        batch_run(&b, 5.0, b.n_atoms, 64, &scratch, &again);
        ref_compare("batch of 3, scratch reused", &again, &want, 1);
        ref_free(&got);
        ref_free(&want);
        ref_free(&again);
        for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
        batch_free(&b);
    }
    return 0;
}

static int case_skip_from(void) {
    batch b;
    make_batch3(2000, 400, &b);
    nnpops__scratch scratch = {0};
    for (int t = 0; t < 3; t++) {
        const int64_t skip = t == 0 ? 0 : t == 1 ? 150 : 399;
        ref_list got = {0}, want = {0};
        batch_run(&b, 5.0, skip, 64, &scratch, &got);
        batch_reference(&b, 5.0, skip, &want);
        for (int64_t p = 0; p < got.n; p++) CHECK(got.p[p].i < skip || got.p[p].j < skip);
        char label[64];
        snprintf(label, sizeof label, "skip_from %lld", (long long)skip);
        ref_compare(label, &got, &want, 1);
        if (skip == 0) CHECK(want.n == 0);
        ref_free(&got);
        ref_free(&want);
    }
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
    batch_free(&b);
    return 0;
}

static int case_overflow(void) {
    batch b;
    make_batch3(3000, 300, &b);
    nnpops__scratch scratch = {0};
    ref_list want = {0};
    batch_reference(&b, 5.0, b.n_atoms, &want);
    CHECK(want.n > 20);
    const nnpops__nbr_in in = {
        .n_atoms = b.n_atoms, .positions = b.x, .n_systems = b.n_systems,
        .sys_start = b.start, .order = b.order, .cells = &b.cells[0][0],
        .pbc = &b.pbc[0][0], .cutoff = 5.0, .skip_from = b.n_atoms, .max_images = 64,
    };
    int32_t pairs[2 * 20];
    double vec[3 * 20], dist[20];
    nnpops__fail(NNPOPS_ERROR_INTERNAL, "sentinel");
    nnpops__nbr_out out = {.capacity = 20, .pairs = pairs, .shifts = NULL, .vec = vec,
                           .dist = dist};
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &out), NNPOPS_ERROR_NEIGHBOR_OVERFLOW);
    CHECK(out.n_pairs == want.n);
    CHECK(strcmp(nnpops_last_error(), "sentinel") == 0); /* no message on overflow */
    for (int p = 0; p < 20; p++) {
        const double *v = vec + 3 * p;
        CHECK_NEAR(dist[p], sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), 1e-14, 1e-14);
        CHECK(dist[p] < 5.0);
    }
    /* capacity 0 and no arrays: a pure count */
    nnpops__nbr_out count = {.capacity = 0};
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &count), NNPOPS_ERROR_NEIGHBOR_OVERFLOW);
    CHECK(count.n_pairs == want.n);
    /* exactly enough: OK */
    ref_list got = {0};
    batch_run(&b, 5.0, b.n_atoms, 64, &scratch, &got);
    ref_compare("overflow retry", &got, &want, 1);
    ref_free(&got);
    ref_free(&want);
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
    batch_free(&b);
    return 0;
}

static int case_errors(void) {
    batch b;
    make_batch3(4000, 60, &b);
    nnpops__scratch scratch = {0};
    int32_t pairs[2 * 4096];
    nnpops__nbr_in in = {
        .n_atoms = b.n_atoms, .positions = b.x, .n_systems = b.n_systems,
        .sys_start = b.start, .order = b.order, .cells = &b.cells[0][0],
        .pbc = &b.pbc[0][0], .cutoff = 5.0, .skip_from = b.n_atoms, .max_images = 64,
    };
    nnpops__nbr_out out = {.capacity = 4096, .pairs = pairs};
    CHECK_OK(nnpops__neighbors_cpu(&in, &scratch, &out));
    /* system 2 needs 2 images along a (width < 5 / 1): max_images 1 is too few */
    in.max_images = 1;
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &out), NNPOPS_ERROR_TOO_MANY_IMAGES);
    CHECK_ERROR_HAS("system 2");
    CHECK_ERROR_HAS("max_images = 1");
    in.max_images = 64;
    /* system 1 becomes periodic along b with its zero cell: singular */
    b.pbc[1][1] = 1;
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &out), NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("system 1: cell is singular along periodic axis b");
    b.pbc[1][1] = 0;
    /* system 0 gets a non-finite cell entry */
    b.cells[0][4] = INFINITY;
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &out), NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("system 0");
    CHECK_ERROR_HAS("non-finite");
    skewed(13.0, b.cells[0]);
    /* cells NULL with a periodic system */
    in.cells = NULL;
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &out), NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("system 0: axis a is periodic but no cell");
    /* cells and pbc NULL: all systems non-periodic */
    in.pbc = NULL;
    CHECK_OK(nnpops__neighbors_cpu(&in, &scratch, &out));
    /* a non-finite position */
    in.cells = &b.cells[0][0];
    in.pbc = &b.pbc[0][0];
    const int32_t victim = b.order[b.start[2]];
    b.x[3 * victim + 1] = NAN;
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &out), NNPOPS_ERROR_BAD_POSITION);
    CHECK_ERROR_HAS("system 2");
    /* a negative cutoff */
    b.x[3 * victim + 1] = 0.0;
    in.cutoff = -1.0;
    CHECK_STATUS(nnpops__neighbors_cpu(&in, &scratch, &out), NNPOPS_ERROR_INVALID_ARGUMENT);
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
    batch_free(&b);
    return 0;
}

static int case_sparse(void) {
    /* two clusters 1e5 angstrom apart, and a periodic box of low density: the bin count (and so the
     * scratch) must stay linear in N */
    batch b = {0};
    const int64_t n = 2000;
    unsigned long long seed = 5000;
    b.n_atoms = n;
    b.n_systems = 2;
    b.x = malloc(sizeof(double) * 3 * n);
    b.sys_of = malloc(sizeof(int32_t) * n);
    CHECK(b.x && b.sys_of);
    const double big[9] = {4000, 0, 0, 0, 3000, 0, 500, 0, 5000};
    memcpy(b.cells[1], big, sizeof big);
    memset(b.pbc[1], 1, 3);
    for (int64_t a = 0; a < n; a++) {
        b.sys_of[a] = a % 2;
        double *x = b.x + 3 * a;
        if (a % 2 == 0) {
            ref_random_positions(&seed, 1, NULL, 12.0, 0.0, 1.0, x);
            if (a % 4 == 0) x[0] += 1e5, x[1] -= 3e4, x[2] += 7e4;
        } else {
            ref_random_positions(&seed, 1, big, 0.0, 0.0, 1.0, x);
            if (a % 10 == 1 && a > 2) { /* a few close neighbors so there is something to find */
                x[0] = b.x[3 * (a - 2)] + 1.0;
                x[1] = b.x[3 * (a - 2) + 1];
                x[2] = b.x[3 * (a - 2) + 2];
            }
        }
    }
    batch_group(&b);
    nnpops__scratch scratch = {0};
    ref_list got = {0}, want = {0};
    batch_run(&b, 5.0, n, 64, &scratch, &got);
    batch_reference(&b, 5.0, n, &want);
    ref_compare("sparse", &got, &want, 1);
    size_t bytes = 0;
    for (int k = 0; k < 4; k++) bytes += scratch.slot[k].bytes;
    printf("sparse: scratch %zu bytes for %lld atoms per system\n", bytes, (long long)(n / 2));
    CHECK(bytes <= 300 * (size_t)n);
    ref_free(&got);
    ref_free(&want);
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
    batch_free(&b);
    return 0;
}

static int case_empty(void) {
    /* zero atoms, and systems without atoms between others */
    nnpops__scratch scratch = {0};
    const int64_t start0[3] = {0, 0, 0};
    nnpops__nbr_in in = {.n_atoms = 0, .n_systems = 2, .sys_start = start0, .cutoff = 5.0,
                         .skip_from = 0, .max_images = 64};
    nnpops__nbr_out out = {.capacity = 0};
    CHECK_OK(nnpops__neighbors_cpu(&in, &scratch, &out));
    CHECK(out.n_pairs == 0);
    const double x[6] = {0, 0, 0, 0, 0, 1.5};
    const int64_t start[4] = {0, 0, 2, 2};
    const int32_t order[2] = {1, 0};
    const double cells[27] = {0};
    const uint8_t pbc[9] = {1, 1, 1, 0, 0, 0, 1, 1, 1}; /* empty systems with singular cells */
    int32_t pairs[2];
    double dist[1];
    nnpops__nbr_in in2 = {.n_atoms = 2, .positions = x, .n_systems = 3, .sys_start = start,
                          .order = order, .cells = cells, .pbc = pbc, .cutoff = 2.0,
                          .skip_from = 2, .max_images = 64};
    nnpops__nbr_out out2 = {.capacity = 1, .pairs = pairs, .dist = dist};
    CHECK_OK(nnpops__neighbors_cpu(&in2, &scratch, &out2));
    CHECK(out2.n_pairs == 1 && pairs[0] == 0 && pairs[1] == 1);
    CHECK_NEAR(dist[0], 1.5, 0, 1e-15);
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch.slot[k]);
    return 0;
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        {"batch", case_batch},       {"skip_from", case_skip_from}, {"overflow", case_overflow},
        {"errors", case_errors},     {"sparse", case_sparse},       {"empty", case_empty},
    };
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
