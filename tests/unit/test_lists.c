/*
 * test_lists.c - the neighbor lists a potential chooses (vt->neighbor_lists, core/src/
 * potential_api.h), on the CPU step of core/src/context.c.
 *
 * The Lennard-Jones potential reads whichever list the step hands it.  Its vtable is copied with a
 * neighbor_lists hook that asks for another list, and the copy is put on a loaded model; each
 * list must give the energies, forces, virials, per-atom energies and per-atom virials of the
 * default list (a half list without ghost-ghost pairs) to rounding:
 *
 *   half_ghost_pairs   half list keeping the pairs of two ghosts (they carry no energy)
 *   full_local         full (center) lists of the local atoms
 *   full_ghost         full lists of every atom, ghosts too
 *
 * on a cluster with ghosts (n_local < n_atoms) and a periodic batch of two systems whose cutoff
 * exceeds half the box (an atom's own images are neighbors).  The step's list must also be the
 * one asked for: the pair count of stats (n_pairs) is checked against the half list's.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "tmpfiles.h"

enum { N = 48 };

typedef struct result {
    double e[2], w[18], f[3 * N], a[N], av[9 * N];
    int64_t n_pairs;
} result;

static nnpops__nbr_choice wanted;
static void choose(const nnpops_model *m, nnpops__nbr_choice *lists) {
    (void)m;
    *lists = wanted;
}

static void compute(nnpops_model *m, int batched, result *r) {
    nnpops_context *ctx;
    CHECK_OK(nnpops_context_create(m, &ctx));
    int32_t z[N], batch[N];
    double x[3 * N];
    unsigned long long st = 99;
    for (int i = 0; i < N; i++) {
        z[i] = (i % 4) ? 18 : 36;
        batch[i] = batched ? i / (N / 2) : 0;
        for (int d = 0; d < 3; d++) x[3 * i + d] = test_rand(&st) * (batched ? 9.0 : 13.0);
    }
    const double cells[18] = {9, 0, 0, 0.8, 9.5, 0, -0.4, 0.3, 10, 10, 0, 0, 0, 10, 0, 0, 0, 10};
    const uint8_t pbc[6] = {1, 1, 1, 1, 1, 0};
    memset(r, 0, sizeof *r);
    nnpops_inputs in = {sizeof in, N, batched ? -1 : 30, batched ? 2 : 1, z, x,
                        batched ? batch : NULL, batched ? cells : NULL, batched ? pbc : NULL};
    nnpops_outputs out = {sizeof out, r->e, r->f, r->w, r->a, r->av, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    nnpops_stats stats = {.struct_size = sizeof stats};
    CHECK_OK(nnpops_context_stats(ctx, &stats));
    r->n_pairs = stats.n_pairs;
    nnpops_context_destroy(ctx);
}

static void same(const result *a, const result *b, int batched) {
    const int ns = batched ? 2 : 1;
    double scale = 0;
    for (int k = 0; k < 3 * N; k++) scale = fmax(scale, fabs(b->f[k]));
    CHECK(scale > 1e-3); /* the systems interact */
    for (int s = 0; s < ns; s++) CHECK_NEAR(a->e[s], b->e[s], 1e-12, 1e-12);
    for (int k = 0; k < 9 * ns; k++) CHECK_NEAR(a->w[k], b->w[k], 1e-12, 1e-11);
    for (int k = 0; k < 3 * N; k++) CHECK_NEAR(a->f[k], b->f[k], 1e-12 * scale, 0);
    for (int k = 0; k < N; k++) CHECK_NEAR(a->a[k], b->a[k], 1e-13, 1e-12);
    for (int k = 0; k < 9 * N; k++) CHECK_NEAR(a->av[k], b->av[k], 1e-12, 1e-11);
}

static int run(nnpops__nbr_choice lists, int64_t (*expected_pairs)(const result *half, int batched)) {
    const char *path = test_write_text(
        "arkr.yaml",
        "format: nnpops-model\nformat_version: 1\nname: arkr\ntype: lj\n"
        "units: {length: angstrom, energy: eV}\nspecies: [Ar, Kr]\n"
        "lj:\n  shift: true\n  pairs:\n"
        "    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: 3.40, cutoff: 6.0}\n"
        "    - {elements: [Kr, Ar], epsilon: 0.0125, sigma: 3.50, cutoff: 6.5}\n"
        "    - {elements: [Kr, Kr], epsilon: 0.0141, sigma: 3.65, cutoff: 5.5}\n");
    nnpops_model *m;
    CHECK_OK(nnpops_model_load(path, "cpu", NNPOPS_FLOAT64, &m));
    for (int batched = 0; batched < 2; batched++) {
        result half, other;
        compute(m, batched, &half);
        const nnpops__potential_vt *orig = m->vt;
        nnpops__potential_vt vt = *orig;
        vt.neighbor_lists = choose;
        wanted = lists;
        m->vt = &vt;
        compute(m, batched, &other);
        m->vt = orig;
        same(&other, &half, batched);
        const int64_t np = expected_pairs(&half, batched);
        if (np >= 0 && other.n_pairs != np) {
            fprintf(stderr, "n_pairs %lld, expected %lld\n", (long long)other.n_pairs, (long long)np);
            return 1;
        }
        if (np < 0) CHECK(other.n_pairs > half.n_pairs);
    }
    nnpops_model_destroy(m);
    return 0;
}

/* A full list of local centers has one entry per local atom of each pair: twice the half list's
 * pairs, less the local-ghost pairs; with no ghosts (the batch) exactly twice. */
static int64_t pairs_full_local(const result *half, int batched) {
    return batched ? 2 * half->n_pairs : -1;
}
static int64_t pairs_more(const result *half, int batched) {
    return batched ? half->n_pairs : -1;
}
static int64_t pairs_full_ghost(const result *half, int batched) {
    return batched ? 2 * half->n_pairs : -1;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *c = argv[1];
    if (!strcmp(c, "half_ghost_pairs"))
        return run((nnpops__nbr_choice){.full = 0, .ghost_pairs = 1}, pairs_more);
    if (!strcmp(c, "full_local"))
        return run((nnpops__nbr_choice){.full = 1, .ghost_centers = 0}, pairs_full_local);
    if (!strcmp(c, "full_ghost"))
        return run((nnpops__nbr_choice){.full = 1, .ghost_centers = 1}, pairs_full_ghost);
    fprintf(stderr, "unknown case %s\n", c);
    return 2;
}
