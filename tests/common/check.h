/* check.h - minimal assertions for the C tests: a failed CHECK prints where and exits 1. */
#ifndef NNPOPS_TEST_CHECK_H
#define NNPOPS_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnpops/nnpops.h"

#define SKIP_RETURN 77

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* Asserts a status, printing the library's last error when it differs. */
#define CHECK_STATUS(call, expected)                                                     \
    do {                                                                                 \
        nnpops_status s_ = (call);                                                       \
        if (s_ != (expected)) {                                                          \
            fprintf(stderr, "%s:%d: %s returned %s (expected %s): %s\n", __FILE__,        \
                    __LINE__, #call, nnpops_status_name(s_), nnpops_status_name(expected), \
                    nnpops_last_error());                                                \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, NNPOPS_OK)

/* The last error message must contain `needle`. */
#define CHECK_ERROR_HAS(needle)                                                          \
    do {                                                                                 \
        if (!strstr(nnpops_last_error(), (needle))) {                                    \
            fprintf(stderr, "%s:%d: last error \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, \
                    nnpops_last_error(), (needle));                                      \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define CHECK_NEAR(a, b, atol, rtol)                                                     \
    do {                                                                                 \
        double a_ = (a), b_ = (b);                                                       \
        if (!(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_))) {                            \
            fprintf(stderr, "%s:%d: %s = %.17g, %s = %.17g differ by %.3g\n", __FILE__,   \
                    __LINE__, #a, a_, #b, b_, fabs(a_ - b_));                            \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* Deterministic random numbers for tests (xorshift64*). */
static inline double test_rand(unsigned long long *state) {
    unsigned long long x = *state;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *state = x;
    return (double)((x * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* n positions uniform in a cube of side `side` (atom 0 at its center when center0), each at least
 * dmin from the ones before it: rejection, at most 100,000 draws an atom (a failed CHECK past that). */
static inline void test_scatter(int n, double side, double dmin, int center0,
                                unsigned long long *state, double *x) {
    for (int i = 0; i < n; i++) {
        for (int tries = 0;; tries++) {
            CHECK(tries < 100000);
            for (int k = 0; k < 3; k++)
                x[3 * i + k] = center0 && i == 0 ? 0.5 * side : side * test_rand(state);
            int ok = 1;
            for (int j = 0; j < i && ok; j++) {
                double r2 = 0;
                for (int k = 0; k < 3; k++) {
                    const double dx = x[3 * i + k] - x[3 * j + k];
                    r2 += dx * dx;
                }
                ok = r2 > dmin * dmin;
            }
            if (ok) break;
        }
    }
}

/* The cases of a test program: main() runs the one its only argument names ("all": each in turn,
 * up to the first that does not pass). */
typedef struct test_case {
    const char *name;
    int (*fn)(void);
} test_case;

static inline int test_main(int argc, char **argv, const test_case *cases, size_t n) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE|all\n", argv[0]);
        return 2;
    }
    const int all = strcmp(argv[1], "all") == 0;
    for (size_t i = 0; i < n; i++) {
        if (!all && strcmp(argv[1], cases[i].name) != 0) continue;
        const int rc = cases[i].fn();
        if (!all || rc != 0) return rc;
    }
    if (all) return 0;
    fprintf(stderr, "unknown case '%s'\n", argv[1]);
    return 2;
}

/* Reference data: under CI=true a missing file is a failure, elsewhere a skip. */
static inline int test_missing_data(const char *path) {
    const char *ci = getenv("CI");
    fprintf(stderr, "reference data missing: %s\n", path);
    return (ci && strcmp(ci, "true") == 0) ? 1 : SKIP_RETURN;
}

#endif
