/*
 * test_neighbors.c - nnpops_neighbor_pairs (public API) against a brute-force search over all
 * periodic images, one CTest entry per case: test_neighbors CASE.
 *
 * Cases: nonperiodic, orthorhombic, triclinic, left_handed, mixed_pbc, slab, half_width,
 * many_images, far_outside, tiny, overflow, bad_cell, too_many_images, invalid_argument,
 * random_mix.
 */
#include "test_neighbors_ref.c"

/* Runs the public search with enough capacity (growing after an overflow) into a ref_list. */
static void run_public(int64_t n, const double *x, const double *cell, const uint8_t *pbc,
                       double cutoff, ref_list *out) {
    int64_t cap = 16, n_pairs = -1;
    int64_t *pairs = NULL;
    int32_t *shifts = NULL;
    double *dist = NULL;
    for (;;) {
        pairs = realloc(pairs, sizeof(int64_t) * 2 * (size_t)cap);
        shifts = realloc(shifts, sizeof(int32_t) * 3 * (size_t)cap);
        dist = realloc(dist, sizeof(double) * (size_t)cap);
        CHECK(pairs && shifts && dist);
        nnpops_status st = nnpops_neighbor_pairs(n, x, cell, pbc, cutoff, cap, &n_pairs, pairs,
                                                 shifts, dist);
        if (st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW) {
            CHECK(n_pairs > cap);
            cap = n_pairs;
            continue;
        }
        CHECK_OK(st);
        break;
    }
    for (int64_t p = 0; p < n_pairs; p++) {
        ref_pair q;
        q.i = pairs[2 * p];
        q.j = pairs[2 * p + 1];
        for (int k = 0; k < 3; k++) q.s[k] = shifts[3 * p + k];
        q.d = dist[p];
        CHECK(q.i >= 0 && q.i < n && q.j >= 0 && q.j < n);
        ref_push(out, &q);
    }
    free(pairs);
    free(shifts);
    free(dist);
}

/* One comparison: public search vs reference. Returns the number of pairs. */
static int64_t compare_one(const char *label, int64_t n, const double *x, const double *cell,
                           const uint8_t *pbc, double cutoff) {
    ref_list got = {0}, want = {0};
    run_public(n, x, cell, pbc, cutoff, &got);
    ref_neighbors(n, NULL, x, cell, pbc, cutoff, n, &want);
    ref_compare(label, &got, &want, 0);
    const int64_t count = want.n;
    ref_free(&got);
    ref_free(&want);
    return count;
}

/* Skewed triclinic cell of scale L (rows a, b, c). */
static void skewed_cell(double L, double *cell) {
    const double c[9] = {L, 0, 0, 0.7 * L, 0.8 * L, 0, -0.4 * L, 0.3 * L, 0.9 * L};
    memcpy(cell, c, sizeof c);
}

/* A random general cell: diagonal L * [0.8, 1.2], off-diagonal L * [-0.5, 0.5]. */
static void random_cell(unsigned long long *seed, double L, double *cell) {
    for (int k = 0; k < 9; k++) {
        const double u = test_rand(seed);
        cell[k] = (k % 4 == 0) ? L * (0.8 + 0.4 * u) : L * (u - 0.5);
    }
}

/* Random trials of one periodic family: n atoms, fractional range [lo, hi). */
static void periodic_trials(const char *name, unsigned long long seed, int trials, int64_t n,
                            const double *cell_or_null, double L, const uint8_t *pbc,
                            double cutoff, double lo, double hi) {
    double *x = malloc(sizeof(double) * 3 * (size_t)n);
    CHECK(x);
    for (int t = 0; t < trials; t++) {
        double cell[9];
        if (cell_or_null) memcpy(cell, cell_or_null, sizeof cell);
        else random_cell(&seed, L, cell);
        ref_random_positions(&seed, n, cell, 0.0, lo, hi, x);
        char label[128];
        snprintf(label, sizeof label, "%s trial %d (n = %lld)", name, t, (long long)n);
        compare_one(label, n, x, cell, pbc, cutoff);
    }
    free(x);
}

static const uint8_t PBC_ALL[3] = {1, 1, 1};

static int case_nonperiodic(void) {
    unsigned long long seed = 11;
    const int64_t n = 400;
    double *x = malloc(sizeof(double) * 3 * n);
    CHECK(x);
    /* a cube of atoms, no cell at all */
    ref_random_positions(&seed, n, NULL, 20.0, 0.0, 1.0, x);
    compare_one("no cell", n, x, NULL, NULL, 4.0);
    /* explicit pbc = false with a zero cell, and with a singular cell: both ignored */
    const uint8_t none[3] = {0, 0, 0};
    const double zero[9] = {0};
    compare_one("zero cell, pbc false", n, x, zero, none, 4.0);
    const double flat[9] = {1, 0, 0, 2, 0, 0, 0, 0, 0};
    compare_one("singular cell, pbc false", n, x, flat, none, 4.0);
    /* a flat molecule (all z = 0), a line, and two distant clusters (sparse bounding box) */
    for (int64_t a = 0; a < n; a++) x[3 * a + 2] = 0.0;
    compare_one("plane", n, x, NULL, NULL, 3.0);
    for (int64_t a = 0; a < n; a++) x[3 * a + 1] = 0.0;
    compare_one("line", n, x, NULL, NULL, 0.3);
    ref_random_positions(&seed, n, NULL, 10.0, 0.0, 1.0, x);
    for (int64_t a = n / 2; a < n; a++) x[3 * a] += 1.0e4;
    compare_one("two clusters", n, x, NULL, NULL, 3.5);
    /* negative coordinates, a long thin box */
    for (int64_t a = 0; a < n; a++) {
        x[3 * a] = -500.0 + 1000.0 * test_rand(&seed);
        x[3 * a + 1] = -2.0 * test_rand(&seed);
        x[3 * a + 2] = 3.0 * test_rand(&seed);
    }
    compare_one("thin box", n, x, NULL, NULL, 5.0);
    free(x);
    return 0;
}

static int case_orthorhombic(void) {
    const double cell[9] = {12, 0, 0, 0, 15, 0, 0, 0, 18};
    periodic_trials("orthorhombic", 21, 3, 300, cell, 0, PBC_ALL, 5.0, 0.0, 1.0);
    const double big[9] = {31, 0, 0, 0, 27, 0, 0, 0, 40};
    periodic_trials("orthorhombic big", 22, 2, 800, big, 0, PBC_ALL, 5.2, 0.0, 1.0);
    return 0;
}

static int case_triclinic(void) {
    double cell[9];
    skewed_cell(14.0, cell);
    periodic_trials("skewed", 31, 3, 300, cell, 0, PBC_ALL, 5.0, 0.0, 1.0);
    skewed_cell(25.0, cell);
    periodic_trials("skewed big", 32, 2, 600, cell, 0, PBC_ALL, 4.0, 0.0, 1.0);
    periodic_trials("random cells", 33, 6, 200, NULL, 13.0, PBC_ALL, 4.5, 0.0, 1.0);
    return 0;
}

static int case_left_handed(void) {
    double cell[9];
    skewed_cell(14.0, cell);
    for (int c = 0; c < 3; c++) cell[6 + c] = -cell[6 + c]; /* c -> -c: det < 0 */
    periodic_trials("left-handed skewed", 41, 3, 300, cell, 0, PBC_ALL, 5.0, 0.0, 1.0);
    const double swapped[9] = {0, 13, 0, 12, 0, 0, 1, 2, 14}; /* a and b swapped */
    periodic_trials("left-handed swapped", 42, 3, 300, swapped, 0, PBC_ALL, 5.0, -0.2, 1.2);
    return 0;
}

static int case_mixed_pbc(void) {
    double cell[9];
    skewed_cell(14.0, cell);
    const uint8_t tft[3] = {1, 0, 1};
    /* atoms spread beyond the cell along the non-periodic axis b (and a little along a, c) */
    periodic_trials("pbc T F T", 51, 3, 300, cell, 0, tft, 5.0, -0.5, 1.5);
    const uint8_t fft[3] = {0, 0, 1}, ttf[3] = {1, 1, 0};
    periodic_trials("pbc F F T", 52, 2, 300, cell, 0, fft, 5.0, -0.3, 1.3);
    periodic_trials("pbc T T F", 53, 2, 300, NULL, 12.0, ttf, 5.0, 0.0, 1.0);
    /* small cell along the periodic axis: several images */
    const double thin[9] = {3.0, 0, 0, 0.5, 12, 0, 0.3, -1, 11};
    const uint8_t tff[3] = {1, 0, 0};
    periodic_trials("pbc T F F thin", 54, 2, 100, thin, 0, tff, 7.0, 0.0, 1.0);
    return 0;
}

static int case_slab(void) {
    /* wide along a and b, thinner than the cutoff along c: several bins and several images */
    const double cell[9] = {30, 0, 0, 4, 28, 0, 1, -1, 3.5};
    periodic_trials("slab", 61, 2, 300, cell, 0, PBC_ALL, 6.0, 0.0, 1.0);
    const double two_bins[9] = {11, 0, 0, 0, 11.5, 0, 2, 0, 10.6}; /* 2 bins per axis at 5.0 */
    periodic_trials("two bins", 62, 3, 200, two_bins, 0, PBC_ALL, 5.0, 0.0, 1.0);
    return 0;
}

static int case_half_width(void) {
    /* cutoff between half the width and the width: an atom meets two images of another */
    double cell[9];
    skewed_cell(9.0, cell);
    periodic_trials("half width skewed", 71, 3, 60, cell, 0, PBC_ALL, 5.0, 0.0, 1.0);
    periodic_trials("half width random", 72, 4, 40, NULL, 8.0, PBC_ALL, 5.0, 0.0, 1.0);
    return 0;
}

static int case_many_images(void) {
    /* cutoff larger than the whole width: many images and self-images */
    double cell[9];
    skewed_cell(3.0, cell);
    periodic_trials("many images skewed", 81, 3, 6, cell, 0, PBC_ALL, 7.0, 0.0, 1.0);
    periodic_trials("many images random", 82, 3, 5, NULL, 2.5, PBC_ALL, 6.0, 0.0, 1.0);
    /* one atom alone in a small cell: only self-images, each once */
    const double x[3] = {0.3, -0.2, 0.1};
    const double cubic[9] = {2, 0, 0, 0, 2, 0, 0, 0, 2};
    const int64_t n = compare_one("self images", 1, x, cubic, PBC_ALL, 4.5);
    /* |s| . 2 < 4.5 for s in [-2, 2]^3: count the s > 0 half of those with |s|^2 < 5.0625 */
    int64_t expect = 0;
    for (int a = -2; a <= 2; a++)
        for (int b = -2; b <= 2; b++)
            for (int c = -2; c <= 2; c++) {
                const int32_t s[3] = {a, b, c};
                if (ref_positive(s) && 4.0 * (a * a + b * b + c * c) < 4.5 * 4.5) expect++;
            }
    CHECK(n == expect);
    return 0;
}

static int case_far_outside(void) {
    double cell[9];
    skewed_cell(12.0, cell);
    periodic_trials("far outside skewed", 91, 3, 200, cell, 0, PBC_ALL, 5.0, -3.0, 4.0);
    periodic_trials("far outside random", 92, 3, 150, NULL, 10.0, PBC_ALL, 5.5, -3.0, 4.0);
    const uint8_t tft[3] = {1, 0, 1};
    periodic_trials("far outside mixed", 93, 2, 200, cell, 0, tft, 5.0, -3.0, 4.0);
    return 0;
}

static int case_tiny(void) {
    double cell[9];
    skewed_cell(10.0, cell);
    const double one[3] = {1.0, 2.0, 3.0};
    CHECK(compare_one("1 atom, no cell", 1, one, NULL, NULL, 5.0) == 0);
    CHECK(compare_one("1 atom, large cell", 1, one, cell, PBC_ALL, 5.0) == 0);
    const double two[6] = {0.0, 0.0, 0.0, 1.0, 1.0, 1.0};
    CHECK(compare_one("2 atoms, no cell", 2, two, NULL, NULL, 5.0) == 1);
    CHECK(compare_one("2 atoms, far apart", 2, two, NULL, NULL, 1.5) == 0);
    compare_one("2 atoms, periodic", 2, two, cell, PBC_ALL, 5.0);
    /* exactly at the cutoff: not a pair (strict), just inside: a pair */
    const double edge[6] = {0.0, 0.0, 0.0, 3.0, 0.0, 0.0};
    CHECK(compare_one("2 atoms at the cutoff", 2, edge, NULL, NULL, 3.0) == 0);
    CHECK(compare_one("2 atoms inside the cutoff", 2, edge, NULL, NULL, nextafter(3.0, 4.0)) == 1);
    const double cubic[9] = {3, 0, 0, 0, 3, 0, 0, 0, 3};
    CHECK(compare_one("self image at the cutoff", 1, edge, cubic, PBC_ALL, 3.0) == 0);
    const double same[6] = {4.0, 4.0, 4.0, 4.0, 4.0, 4.0}; /* coincident atoms: distance 0 */
    CHECK(compare_one("2 coincident atoms", 2, same, NULL, NULL, 1.0) == 1);
    /* zero atoms: valid, no pairs, arrays may be NULL with capacity 0 */
    int64_t n_pairs = -1;
    CHECK_OK(nnpops_neighbor_pairs(0, NULL, NULL, NULL, 5.0, 0, &n_pairs, NULL, NULL, NULL));
    CHECK(n_pairs == 0);
    CHECK_OK(nnpops_neighbor_pairs(0, NULL, cell, PBC_ALL, 5.0, 0, &n_pairs, NULL, NULL, NULL));
    CHECK(n_pairs == 0);
    return 0;
}

static int case_overflow(void) {
    unsigned long long seed = 111;
    double cell[9];
    skewed_cell(12.0, cell);
    const int64_t n = 150;
    double x[3 * 150];
    ref_random_positions(&seed, n, cell, 0.0, 0.0, 1.0, x);
    ref_list want = {0};
    ref_neighbors(n, NULL, x, cell, PBC_ALL, 5.0, n, &want);
    CHECK(want.n > 10);
    /* capacity 0 with NULL arrays: a count */
    int64_t n_pairs = -1;
    CHECK_STATUS(nnpops_neighbor_pairs(n, x, cell, PBC_ALL, 5.0, 0, &n_pairs, NULL, NULL, NULL),
                 NNPOPS_ERROR_NEIGHBOR_OVERFLOW);
    CHECK(n_pairs == want.n);
    CHECK_ERROR_HAS("capacity");
    /* capacity 10: the first 10 are written, each a true pair */
    int64_t pairs[2 * 10];
    int32_t shifts[3 * 10];
    double dist[10];
    n_pairs = -1;
    CHECK_STATUS(nnpops_neighbor_pairs(n, x, cell, PBC_ALL, 5.0, 10, &n_pairs, pairs, shifts, dist),
                 NNPOPS_ERROR_NEIGHBOR_OVERFLOW);
    CHECK(n_pairs == want.n);
    qsort(want.p, (size_t)want.n, sizeof(ref_pair), ref_cmp);
    for (int p = 0; p < 10; p++) {
        ref_pair key = {.i = pairs[2 * p], .j = pairs[2 * p + 1]};
        memcpy(key.s, shifts + 3 * p, sizeof key.s);
        const ref_pair *hit = bsearch(&key, want.p, (size_t)want.n, sizeof(ref_pair), ref_cmp);
        CHECK(hit != NULL);
        CHECK_NEAR(dist[p], hit->d, 1e-12, 1e-12);
    }
    /* retry with the reported count: success, same set */
    const int64_t total = n_pairs;
    int64_t *pairs2 = malloc(sizeof(int64_t) * 2 * total);
    int32_t *shifts2 = malloc(sizeof(int32_t) * 3 * total);
    double *dist2 = malloc(sizeof(double) * total);
    CHECK(pairs2 && shifts2 && dist2);
    CHECK_OK(nnpops_neighbor_pairs(n, x, cell, PBC_ALL, 5.0, total, &n_pairs, pairs2, shifts2,
                                   dist2));
    CHECK(n_pairs == total);
    ref_list got = {0};
    for (int64_t p = 0; p < total; p++) {
        ref_pair q = {.i = pairs2[2 * p], .j = pairs2[2 * p + 1], .d = dist2[p]};
        memcpy(q.s, shifts2 + 3 * p, sizeof q.s);
        ref_push(&got, &q);
    }
    ref_compare("overflow retry", &got, &want, 0);
    ref_free(&got);
    ref_free(&want);
    free(pairs2);
    free(shifts2);
    free(dist2);
    return 0;
}

static int case_bad_cell(void) {
    const double x[6] = {0.0, 0.0, 0.0, 1.0, 1.0, 1.0};
    int64_t n_pairs = -1, pairs[2 * 8];
    int32_t shifts[3 * 8];
    double dist[8];
    /* b parallel to a */
    const double parallel[9] = {5, 0, 0, 10, 0, 0, 0, 0, 5};
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, parallel, PBC_ALL, 3.0, 8, &n_pairs, pairs, shifts,
                                       dist),
                 NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("system 0: cell is singular along periodic axis a");
    CHECK(n_pairs == 0);
    /* c is zero */
    const double zero_c[9] = {5, 0, 0, 0, 5, 0, 0, 0, 0};
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, zero_c, PBC_ALL, 3.0, 8, &n_pairs, pairs, shifts,
                                       dist),
                 NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("cell is singular along periodic axis c");
    /* a, b, c coplanar but pairwise independent */
    const double coplanar[9] = {5, 0, 0, 0, 5, 0, 5, 5, 0};
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, coplanar, PBC_ALL, 3.0, 8, &n_pairs, pairs, shifts,
                                       dist),
                 NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("cell is singular along periodic axis");
    /* nearly singular: relative |det| below 1e-10 */
    const double nearly[9] = {5, 0, 0, 0, 5, 0, 1, 1, 1e-10};
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, nearly, PBC_ALL, 3.0, 8, &n_pairs, pairs, shifts,
                                       dist),
                 NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("cell is singular along periodic axis c");
    /* mixed periodicity: the non-periodic axis must still be independent */
    const uint8_t ttf[3] = {1, 1, 0};
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, zero_c, ttf, 3.0, 8, &n_pairs, pairs, shifts, dist),
                 NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("cell is singular along non-periodic axis c");
    /* a non-finite cell entry */
    const double nan_cell[9] = {5, 0, 0, 0, NAN, 0, 0, 0, 5};
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, nan_cell, PBC_ALL, 3.0, 8, &n_pairs, pairs, shifts,
                                       dist),
                 NNPOPS_ERROR_BAD_CELL);
    CHECK_ERROR_HAS("non-finite");
    /* the same singular cells are fine without periodicity */
    const uint8_t none[3] = {0, 0, 0};
    CHECK_OK(nnpops_neighbor_pairs(2, x, parallel, none, 3.0, 8, &n_pairs, pairs, shifts, dist));
    CHECK(n_pairs == 1);
    CHECK_OK(nnpops_neighbor_pairs(2, x, nan_cell, none, 3.0, 8, &n_pairs, pairs, shifts, dist));
    CHECK(n_pairs == 1);
    return 0;
}

static int case_too_many_images(void) {
    const double x[3] = {0.0, 0.0, 0.0};
    int64_t n_pairs = -1, pairs[2];
    int32_t shifts[3];
    double dist[1];
    /* width 0.05 along b, cutoff 5: 100 images > 64 */
    const double thin[9] = {5, 0, 0, 0, 0.05, 0, 0, 0, 5};
    CHECK_STATUS(nnpops_neighbor_pairs(1, x, thin, PBC_ALL, 5.0, 1, &n_pairs, pairs, shifts, dist),
                 NNPOPS_ERROR_TOO_MANY_IMAGES);
    CHECK_ERROR_HAS("along axis b");
    CHECK_ERROR_HAS("max_images = 64");
    /* width exactly 5/64 along c: 64 images is still allowed (count the pairs only) */
    const double edge[9] = {5, 0, 0, 0, 5, 0, 0, 0, 5.0 / 64.0 * 1.0000001};
    CHECK_STATUS(nnpops_neighbor_pairs(1, x, edge, PBC_ALL, 5.0, 0, &n_pairs, NULL, NULL, NULL),
                 NNPOPS_ERROR_NEIGHBOR_OVERFLOW);
    CHECK(n_pairs == 63); /* self-images s = (0, 0, 1 .. 63) */
    /* not periodic along the thin axis: fine */
    const uint8_t tft[3] = {1, 0, 1};
    CHECK_OK(nnpops_neighbor_pairs(1, x, thin, tft, 5.0, 1, &n_pairs, pairs, shifts, dist));
    CHECK(n_pairs == 0);
    return 0;
}

static int case_invalid_argument(void) {
    const double x[6] = {0.0, 0.0, 0.0, 1.0, 1.0, 1.0};
    const double cell[9] = {5, 0, 0, 0, 5, 0, 0, 0, 5};
    int64_t n_pairs = -1, pairs[2 * 4];
    int32_t shifts[3 * 4];
    double dist[4];
    const nnpops_status bad = NNPOPS_ERROR_INVALID_ARGUMENT;
    CHECK_STATUS(nnpops_neighbor_pairs(2, NULL, NULL, NULL, 3.0, 4, &n_pairs, pairs, shifts, dist),
                 bad);
    CHECK_ERROR_HAS("positions");
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, 3.0, 4, NULL, pairs, shifts, dist), bad);
    CHECK_ERROR_HAS("n_pairs");
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, 3.0, 4, &n_pairs, NULL, shifts, dist),
                 bad);
    CHECK_ERROR_HAS("pairs");
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, 3.0, 4, &n_pairs, pairs, NULL, dist),
                 bad);
    CHECK_ERROR_HAS("shifts");
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, 3.0, 4, &n_pairs, pairs, shifts, NULL),
                 bad);
    CHECK_ERROR_HAS("distances");
    CHECK_STATUS(nnpops_neighbor_pairs(-1, x, NULL, NULL, 3.0, 4, &n_pairs, pairs, shifts, dist),
                 bad);
    CHECK_ERROR_HAS("n_atoms");
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, 3.0, -1, &n_pairs, pairs, shifts, dist),
                 bad);
    CHECK_ERROR_HAS("capacity");
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, 0.0, 4, &n_pairs, pairs, shifts, dist),
                 bad);
    CHECK_ERROR_HAS("cutoff");
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, NAN, 4, &n_pairs, pairs, shifts, dist),
                 bad);
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, NULL, INFINITY, 4, &n_pairs, pairs, shifts,
                                       dist),
                 bad);
    CHECK_STATUS(nnpops_neighbor_pairs(2, x, NULL, PBC_ALL, 3.0, 4, &n_pairs, pairs, shifts, dist),
                 bad);
    CHECK_ERROR_HAS("cell is NULL");
    CHECK(n_pairs == 0);
    /* a non-finite position */
    const double nanx[6] = {0.0, 0.0, 0.0, 1.0, NAN, 1.0};
    CHECK_STATUS(nnpops_neighbor_pairs(2, nanx, cell, PBC_ALL, 3.0, 4, &n_pairs, pairs, shifts,
                                       dist),
                 NNPOPS_ERROR_BAD_POSITION);
    CHECK_ERROR_HAS("atom 1");
    /* and the valid call after all that */
    CHECK_OK(nnpops_neighbor_pairs(2, x, cell, PBC_ALL, 3.0, 4, &n_pairs, pairs, shifts, dist));
    CHECK(n_pairs == 1);
    CHECK(pairs[0] == 0 && pairs[1] == 1);
    CHECK(shifts[0] == 0 && shifts[1] == 0 && shifts[2] == 0);
    CHECK_NEAR(dist[0], sqrt(3.0), 1e-15, 0);
    return 0;
}

static int case_random_mix(void) {
    /* many small random configurations: any periodicity, skewed cells, cutoffs from a fifth of
     * the cell to more than twice its size, atoms inside or cells away from the cell */
    unsigned long long seed = 424242;
    double x[3 * 80];
    for (int t = 0; t < 300; t++) {
        double cell[9];
        const double L = 3.0 + 12.0 * test_rand(&seed);
        for (int k = 0; k < 9; k++) {
            const double u = test_rand(&seed);
            cell[k] = (k % 4 == 0) ? L * (0.7 + 0.6 * u) : L * 0.9 * (u - 0.5);
        }
        if (test_rand(&seed) < 0.2) /* a left-handed one now and then */
            for (int c = 0; c < 3; c++) cell[3 + c] = -cell[3 + c];
        uint8_t pbc[3];
        for (int k = 0; k < 3; k++) pbc[k] = test_rand(&seed) < 0.6;
        const int64_t n = 1 + (int64_t)(79.0 * test_rand(&seed));
        const double cutoff = L * (0.2 + 2.3 * test_rand(&seed));
        const double spread = test_rand(&seed) < 0.3 ? 3.0 : 0.0;
        ref_random_positions(&seed, n, cell, 0.0, -spread, 1.0 + spread, x);
        /* skip cells too thin for 64 images or too close to singular */
        double inv[9];
        const double det = ref_inverse(cell, inv);
        int ok = fabs(det) > 1e-3 * L * L * L;
        for (int k = 0; k < 3 && ok; k++) {
            const double *c = inv + k; /* column k: the reciprocal vector */
            const double rl = sqrt(c[0] * c[0] + c[3] * c[3] + c[6] * c[6]);
            if (pbc[k] && cutoff * rl > 20.0) ok = 0;
        }
        if (!ok) continue;
        char label[128];
        snprintf(label, sizeof label, "random %d: n = %lld, pbc %d%d%d, cutoff/L = %.2f", t,
                 (long long)n, pbc[0], pbc[1], pbc[2], cutoff / L);
        compare_one(label, n, x, cell, pbc, cutoff);
    }
    return 0;
}

int main(int argc, char **argv) {
    static const test_case cases[] = {
        {"nonperiodic", case_nonperiodic},   {"orthorhombic", case_orthorhombic},
        {"triclinic", case_triclinic},       {"left_handed", case_left_handed},
        {"mixed_pbc", case_mixed_pbc},       {"slab", case_slab},
        {"half_width", case_half_width},     {"many_images", case_many_images},
        {"far_outside", case_far_outside},   {"tiny", case_tiny},
        {"overflow", case_overflow},         {"bad_cell", case_bad_cell},
        {"too_many_images", case_too_many_images},
        {"invalid_argument", case_invalid_argument},
        {"random_mix", case_random_mix},
    };
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
