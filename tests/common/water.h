/* water.h - water boxes of the tests and benchmarks, the lattice recipe of the GPU benchmarks:
 * rigid molecules (O-H 0.9572 A, H-O-H 104.52 degrees) with uniformly random orientations on a
 * cubic lattice of spacing 3.104 A (0.0334 molecules per cubic angstrom, liquid density), each
 * coordinate optionally jittered. */
#ifndef NNPOPS_TEST_WATER_H
#define NNPOPS_TEST_WATER_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TEST_WATER_SPACING 3.104

/* Deterministic uniform numbers in [0, 1) (splitmix64). */
static inline double test_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* x[0..9): O, H, H of a molecule whose oxygen (before the jitter) is at o, in a random
 * orientation (a random unit quaternion, by rejection) drawn from *s, every coordinate then moved
 * by a uniform amount in [-jitter, jitter). */
static inline void test_water_molecule(const double o[3], double jitter, uint64_t *s,
                                       double x[9]) {
    const double roh = 0.9572, half = 104.52 * 3.14159265358979323846 / 360.0;
    double q[4], nq;
    do {
        nq = 0;
        for (int t = 0; t < 4; t++) {
            q[t] = 2 * test_splitmix(s) - 1;
            nq += q[t] * q[t];
        }
    } while (nq > 1 || nq < 1e-6);
    nq = sqrt(nq);
    for (int t = 0; t < 4; t++) q[t] /= nq;
    const double w = q[0], qx = q[1], qy = q[2], qz = q[3];
    const double R[9] = {1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - w * qz),
                         2 * (qx * qz + w * qy),      2 * (qx * qy + w * qz),
                         1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - w * qx),
                         2 * (qx * qz - w * qy),      2 * (qy * qz + w * qx),
                         1 - 2 * (qx * qx + qy * qy)};
    const double body[3][3] = {{0, 0, 0},
                               {roh * sin(half), roh * cos(half), 0},
                               {-roh * sin(half), roh * cos(half), 0}};
    for (int t = 0; t < 3; t++)
        for (int d = 0; d < 3; d++) {
            double v = o[d];
            for (int e = 0; e < 3; e++) v += R[3 * d + e] * body[t][e];
            x[3 * t + d] = v + jitter * (2 * test_splitmix(s) - 1);
        }
}

/* Molecules on the first nmol sites (all nx ny nz when nmol <= 0) of an nx x ny x nz lattice,
 * sites in the order (i, j, l), l fastest, each oxygen at the site's center; z [3 nmol] (O, H, H
 * per molecule), x [3 nmol][3], cell the lattice's box (rows a, b, c: diagonal).  Returns the
 * atom count. */
static inline int64_t test_water_box(int nx, int ny, int nz, int64_t nmol, uint64_t seed,
                                     double jitter, int32_t *z, double *x, double cell[9]) {
    const double a = TEST_WATER_SPACING;
    const int64_t sites = (int64_t)nx * ny * nz;
    if (nmol <= 0 || nmol > sites) nmol = sites;
    uint64_t s = seed;
    for (int64_t m = 0; m < nmol; m++) {
        const int64_t i = m / ((int64_t)ny * nz), j = m / nz % ny, l = m % nz;
        const double o[3] = {(i + 0.5) * a, (j + 0.5) * a, (l + 0.5) * a};
        test_water_molecule(o, jitter, &s, x + 9 * m);
        z[3 * m] = 8;
        z[3 * m + 1] = z[3 * m + 2] = 1;
    }
    memset(cell, 0, sizeof(double) * 9);
    cell[0] = a * nx;
    cell[4] = a * ny;
    cell[8] = a * nz;
    return 3 * nmol;
}

#endif
