/*
 * test_nbr_plan.c - the host-side choice of the GPU neighbor search (nnpops__nbr_cuda_plan in
 * kernels/cuda/neighbors.cu), which needs no device.  The expected choices follow from the rules
 * stated there, worked out by hand in each case: a system's candidates per center are its atoms
 * times its image shifts ((2 ceil(cutoff / w_k) + 1) per periodic axis k), or its atoms alone in a
 * wide cell (every periodic width w_k >= 2 reach); its cost is atoms x candidates, x 3 with image
 * shifts, x 2 in a wide cell; the brute force's tests (in one pass: "onepass") when the largest
 * candidate count is <= 8192 and the largest cost <= 6e6, the one-block path below a total cost of
 * 2048 (<= 1024 atoms), otherwise the fast cell list (the general one when a periodic width is
 * below the reach).  Built with the CUDA backend only (label unit: no GPU needed).
 *
 *   wide_box        256 atoms in the neighbor bench's cube (6.84, cutoff 2.67): one pass, 8 slices
 *   wide_water      648 atoms, cube 18.62, cutoff 5.2 (water 6^3): one pass (27 images would be
 *                   17,496 candidates: the cell list)
 *   wide_mid        1,536 atoms, cube 24.83: cost 4.7e6 -> one pass
 *   wide_large      2,048 atoms, cube 27.33: cost 8.4e6 -> fast cell list
 *   thin            300 atoms, cube 7.2, cutoff 3.7 (not wide: 27 images, 8,100 candidates, cost
 *                   7.3e6) -> fast cell list
 *   triclinic_wide  600 atoms in a skewed cell with widths 18-19 (cutoff 5.2): one pass
 *   mixed           500 atoms, periodic x and y (15 x 15), z open: one pass (as images 9, cost
 *                   6.75e6: the cell list)
 *   batch           the 256-atom box beside the thin 300-atom one: the thin one decides (cell list)
 *   tiny            13 atoms, no cell: the one-block path
 *   very_thin       2,000 atoms, cube 3.0, cutoff 5.2 (a width below the reach): the general cell
 *                   list; forced algorithms are taken as they are
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "kernels/cuda/kernels_cuda.h"

#define MAXS 4

typedef struct plan_case {
    int ns;
    int64_t atoms[MAXS];
    double cells[MAXS][9];
    uint8_t pbc[MAXS][3];
    double cutoff;
} plan_case;

static nnpops__nbr_plan plan_of(const plan_case *pc, int32_t force) {
    int64_t ss[MAXS + 1] = {0};
    double cells[9 * MAXS];
    uint8_t pbc[3 * MAXS];
    for (int s = 0; s < pc->ns; s++) {
        ss[s + 1] = ss[s] + pc->atoms[s];
        memcpy(cells + 9 * s, pc->cells[s], sizeof pc->cells[s]);
        memcpy(pbc + 3 * s, pc->pbc[s], 3);
    }
    nnpops__nbr_plan p;
    memset(&p, 0x7f, sizeof p);
    nnpops__nbr_cuda_plan(pc->ns, ss, cells, pbc, pc->cutoff, force, &p);
    return p;
}

static plan_case cube(int64_t n, double L, double cutoff) {
    plan_case pc;
    memset(&pc, 0, sizeof pc);
    pc.ns = 1;
    pc.atoms[0] = n;
    pc.cells[0][0] = pc.cells[0][4] = pc.cells[0][8] = L;
    pc.pbc[0][0] = pc.pbc[0][1] = pc.pbc[0][2] = 1;
    pc.cutoff = cutoff;
    return pc;
}

static int expect(const plan_case *pc, int32_t alg) {
    const nnpops__nbr_plan p = plan_of(pc, NNPOPS__NBR_AUTO);
    if (p.algorithm != alg)
        fprintf(stderr, "plan: %s, expected %s\n", nnpops__nbr_cuda_algorithm_name(p.algorithm),
                nnpops__nbr_cuda_algorithm_name(alg));
    CHECK(p.algorithm == alg);
    CHECK(p.slices >= 1 && p.slices <= 32);
    return 0;
}

static int case_wide_box(void) {
    const double rho = 0.8, cutoff = cbrt(3.0 * 64 / (4 * 3.14159265358979323846 * rho));
    const plan_case pc = cube(256, cbrt(256 / rho), cutoff);
    if (expect(&pc, NNPOPS__NBR_ONEPASS)) return 1;
    /* 256 candidates a center: one slice by the candidates, 2048 warps wanted -> 8, at most
     * ceil(256 / 32) = 8 */
    CHECK(plan_of(&pc, NNPOPS__NBR_AUTO).slices == 8);
    return 0;
}

static int case_wide_water(void) {
    const plan_case pc = cube(648, 6 * 3.104, 5.2);
    return expect(&pc, NNPOPS__NBR_ONEPASS);
}

static int case_wide_mid(void) {
    const plan_case pc = cube(1536, 8 * 3.104, 5.2);
    return expect(&pc, NNPOPS__NBR_ONEPASS);
}

static int case_wide_large(void) {
    const plan_case pc = cube(2048, 27.33, 5.2);
    return expect(&pc, NNPOPS__NBR_CELL_FAST);
}

static int case_thin(void) {
    const plan_case pc = cube(300, 7.2, 3.7);
    return expect(&pc, NNPOPS__NBR_CELL_FAST);
}

static int case_triclinic_wide(void) {
    plan_case pc = cube(600, 1.0, 5.2);
    const double h[9] = {20, 0, 0, 5, 19, 0, -3, 4, 18};
    memcpy(pc.cells[0], h, sizeof h);
    return expect(&pc, NNPOPS__NBR_ONEPASS);
}

static int case_mixed(void) {
    plan_case pc = cube(500, 15.0, 5.2);
    pc.cells[0][8] = 40.0;
    pc.pbc[0][2] = 0;
    return expect(&pc, NNPOPS__NBR_ONEPASS);
}

static int case_batch(void) {
    const double rho = 0.8, cutoff = 3.7;
    plan_case pc = cube(256, cbrt(256 / rho), cutoff);
    const plan_case thin = cube(300, 7.2, cutoff);
    pc.ns = 2;
    pc.atoms[1] = thin.atoms[0];
    memcpy(pc.cells[1], thin.cells[0], sizeof thin.cells[0]);
    memcpy(pc.pbc[1], thin.pbc[0], 3);
    /* the 256-atom box at cutoff 3.7 is thin too (6.84 < 7.4): 6,912 candidates, cost 5.3e6 alone;
     * with the 300-atom one the largest cost is 7.3e6 */
    if (expect(&pc, NNPOPS__NBR_CELL_FAST)) return 1;
    pc.ns = 1;
    return expect(&pc, NNPOPS__NBR_ONEPASS);
}

static int case_tiny(void) {
    plan_case pc;
    memset(&pc, 0, sizeof pc);
    pc.ns = 1;
    pc.atoms[0] = 13;
    pc.cutoff = 5.2;
    return expect(&pc, NNPOPS__NBR_SMALL);
}

static int case_very_thin(void) {
    const plan_case pc = cube(2000, 3.0, 5.2);
    if (expect(&pc, NNPOPS__NBR_CELL)) return 1;
    const int32_t forced[5] = {NNPOPS__NBR_BRUTE, NNPOPS__NBR_CELL, NNPOPS__NBR_SMALL,
                               NNPOPS__NBR_CELL_FAST, NNPOPS__NBR_ONEPASS};
    for (int k = 0; k < 5; k++) CHECK(plan_of(&pc, forced[k]).algorithm == forced[k]);
    return 0;
}

static const test_case cases[] = {
    {"wide_box", case_wide_box},   {"wide_water", case_wide_water},
    {"wide_mid", case_wide_mid},   {"wide_large", case_wide_large}, {"thin", case_thin},
    {"triclinic_wide", case_triclinic_wide}, {"mixed", case_mixed},
    {"batch", case_batch},         {"tiny", case_tiny},
    {"very_thin", case_very_thin},
};

int main(int argc, char **argv) { return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]); }
