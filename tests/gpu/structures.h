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

#include "water.h"

/* The benchmarks' water box: m^3 molecules (water.h), 0.05 A jitter per coordinate; box = 3.104 m
 * (cubic, periodic).  *z and *x are malloc'ed ([3 m^3] and [3 m^3][3]); returns the atom count. */
static int64_t water_box(int m, uint64_t seed, int32_t **z, double **x, double cell[9]) {
    const int64_t n = 3 * (int64_t)m * m * m;
    *z = malloc(sizeof(int32_t) * n);
    *x = malloc(sizeof(double) * 3 * n);
    return test_water_box(m, m, m, 0, seed, 0.05, *z, *x, cell);
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
