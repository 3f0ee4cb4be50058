/* structures.h - test and benchmark systems of the GPU tests: water boxes (benchmarks.md's recipe)
 * and PDB files (elements in columns 77-78). */
#ifndef NNPOPS_TEST_STRUCTURES_H
#define NNPOPS_TEST_STRUCTURES_H

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic uniform numbers in [0, 1) (splitmix64). */
static double st_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* Rigid waters (O-H 0.9572 A, H-O-H 104.52 deg) on a cubic lattice of spacing 3.104 A, random
 * orientations, 0.05 A jitter per atom; m^3 molecules, box = 3.104 m (cubic, periodic).  *z and
 * *x are malloc'ed ([3 m^3] and [3 m^3][3]); returns the atom count. */
static int64_t water_box(int m, uint64_t seed, int32_t **z, double **x, double cell[9]) {
    const double a = 3.104, roh = 0.9572, half = 104.52 * 3.14159265358979323846 / 360.0;
    const int64_t nmol = (int64_t)m * m * m, n = 3 * nmol;
    *z = malloc(sizeof(int32_t) * n);
    *x = malloc(sizeof(double) * 3 * n);
    uint64_t s = seed;
    int64_t k = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++)
            for (int l = 0; l < m; l++) {
                /* random rotation: a random unit quaternion */
                double q[4], nq = 0;
                do {
                    nq = 0;
                    for (int t = 0; t < 4; t++) {
                        q[t] = 2 * st_rand(&s) - 1;
                        nq += q[t] * q[t];
                    }
                } while (nq > 1 || nq < 1e-6);
                nq = sqrt(nq);
                for (int t = 0; t < 4; t++) q[t] /= nq;
                const double w = q[0], qx = q[1], qy = q[2], qz = q[3];
                const double R[9] = {1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - w * qz), 2 * (qx * qz + w * qy),
                                     2 * (qx * qy + w * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - w * qx),
                                     2 * (qx * qz - w * qy), 2 * (qy * qz + w * qx), 1 - 2 * (qx * qx + qy * qy)};
                const double body[3][3] = {{0, 0, 0},
                                           {roh * sin(half), roh * cos(half), 0},
                                           {-roh * sin(half), roh * cos(half), 0}};
                const double c[3] = {(i + 0.5) * a, (j + 0.5) * a, (l + 0.5) * a};
                for (int t = 0; t < 3; t++) {
                    (*z)[k] = t == 0 ? 8 : 1;
                    for (int d = 0; d < 3; d++) {
                        double v = c[d];
                        for (int e = 0; e < 3; e++) v += R[3 * d + e] * body[t][e];
                        v += 0.05 * (2 * st_rand(&s) - 1);
                        (*x)[3 * k + d] = v;
                    }
                    k++;
                }
            }
    memset(cell, 0, sizeof(double) * 9);
    cell[0] = cell[4] = cell[8] = a * m;
    return n;
}

/* ATOM/HETATM records of a PDB file; elements from columns 77-78.  Returns the atom count or -1. */
static int64_t read_pdb(const char *path, int32_t **z, double **x) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static const char *const el[] = {"", "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne",
                                     "Na", "Mg", "Al", "Si", "P", "S", "Cl"};
    int64_t cap = 1024, n = 0;
    *z = malloc(sizeof(int32_t) * cap);
    *x = malloc(sizeof(double) * 3 * cap);
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "ATOM", 4) && strncmp(line, "HETATM", 6)) continue;
        if (strlen(line) < 78) continue;
        char sym[3] = {0, 0, 0};
        int o = 0;
        for (int col = 76; col < 78; col++)
            if (isalpha((unsigned char)line[col])) sym[o++] = line[col];
        if (o >= 1) sym[0] = (char)toupper((unsigned char)sym[0]);
        if (o == 2) sym[1] = (char)tolower((unsigned char)sym[1]);
        int zz = 0;
        for (int t = 1; t < (int)(sizeof el / sizeof *el); t++)
            if (!strcmp(el[t], sym)) zz = t;
        if (!zz) continue;
        if (n == cap) {
            cap *= 2;
            *z = realloc(*z, sizeof(int32_t) * cap);
            *x = realloc(*x, sizeof(double) * 3 * cap);
        }
        char buf[9];
        for (int d = 0; d < 3; d++) {
            memcpy(buf, line + 30 + 8 * d, 8);
            buf[8] = 0;
            (*x)[3 * n + d] = atof(buf);
        }
        (*z)[n++] = zz;
    }
    fclose(f);
    return n;
}

#endif
