/* cluster.h - random open clusters for the AEV kernel tests: positions (test_scatter), the half pair
 * list within a cutoff (i < j, vectors x_j - x_i) and its center lists (nnpops__center_lists_cpu).
 * Include after check.h and kernels/cpu/kernels.h. */
#ifndef NNPOPS_TEST_CLUSTER_H
#define NNPOPS_TEST_CLUSTER_H

typedef struct test_cluster {
    int n;
    double *x;        /* [n][3] */
    int32_t *species; /* [n], drawn by the caller */
    int64_t n_pairs;
    int32_t *pairs;   /* [n_pairs][2] */
    double *vec;      /* [n_pairs][3] */
    int64_t *start, *entry, max_entries;
} test_cluster;

/* n atoms scattered in a cube of side `side` (test_scatter), species and pairs left to
 * test_cluster_pairs after the caller has drawn the species. */
static inline void test_cluster_new(test_cluster *c, int n, double side, double dmin, int center0,
                                    unsigned long long *state) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->x = malloc(sizeof(double) * 3 * (size_t)n);
    c->species = malloc(sizeof(int32_t) * (size_t)n);
    CHECK(c->x && c->species);
    test_scatter(n, side, dmin, center0, state, c->x);
}

/* The pairs closer than rc and the center lists. */
static inline void test_cluster_pairs(test_cluster *c, double rc) {
    const int n = c->n;
    const int64_t cap = (int64_t)n * (n - 1) / 2;
    c->pairs = malloc(sizeof(int32_t) * 2 * (size_t)(cap + 1));
    c->vec = malloc(sizeof(double) * 3 * (size_t)(cap + 1));
    c->start = malloc(sizeof(int64_t) * (size_t)(n + 1));
    c->entry = malloc(sizeof(int64_t) * 2 * (size_t)(cap + 1));
    CHECK(c->pairs && c->vec && c->start && c->entry);
    c->n_pairs = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double v[3], r2 = 0;
            for (int k = 0; k < 3; k++) {
                v[k] = c->x[3 * j + k] - c->x[3 * i + k];
                r2 += v[k] * v[k];
            }
            if (r2 >= rc * rc) continue;
            c->pairs[2 * c->n_pairs] = i;
            c->pairs[2 * c->n_pairs + 1] = j;
            memcpy(c->vec + 3 * c->n_pairs, v, sizeof v);
            c->n_pairs++;
        }
    c->max_entries = nnpops__center_lists_cpu(n, c->n_pairs, c->pairs, c->start, c->entry);
}

static inline void test_cluster_free(test_cluster *c) {
    free(c->x);
    free(c->species);
    free(c->pairs);
    free(c->vec);
    free(c->start);
    free(c->entry);
    memset(c, 0, sizeof *c);
}

#endif
