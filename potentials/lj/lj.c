/*
 * lj.c - the Lennard-Jones reference pair potential (`type: lj`, docs/model-format.md section 5).
 *
 * For each pair of atoms (i, j) of the half list whose species pair is listed, at distance r
 * below the pair's cutoff rc:
 *     E_ij = 4 eps ((sigma/r)^12 - (sigma/r)^6)  [- 4 eps ((sigma/rc)^12 - (sigma/rc)^6) if shift]
 * Half of E_ij goes to each LOCAL atom of the pair; the half of a ghost atom is dropped, which is
 * what makes a domain decomposition (LAMMPS) sum each pair exactly once over the ranks.  The pair
 * gradient is dE_ij/dr weighted by the share that counts (1 with both atoms local, 0.5 with one).
 * A pair of an atom with its own periodic image gives both halves to that atom.  The step may hand
 * full (center) lists instead (nnpops__nbr_choice): then entry (c, j) gives half of E_cj to c
 * when c is local, and its gradient weight is that half.
 *
 * Parameters are kept per unordered species pair in an S x S table (symmetric), converted to
 * angstrom at load.  Everything is computed in double whatever the model's precision: the
 * potential is a reference for tests and its cost is negligible.  No weights file.
 *
 * On a GPU model the step hands center lists of the local atoms instead, and the op of
 * potentials/lj/lj_ops.h computes the same terms (lj_cuda.c: the GPU hooks).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/src/potential_api.h"
#include "potentials/lj/lj.h"
#include "potentials/lj/lj_ops.h"

typedef nnpops__lj_pair lj_pair;

typedef struct lj_impl {
    int32_t n_species;
    int shift;
    nnpops__lj_table table; /* pair[a * n_species + b]; the GPU path's copy (lj_cuda.c) too */
} lj_impl;

static double lj_energy(double eps, double sigma, double r) {
    const double sr2 = (sigma / r) * (sigma / r);
    const double sr6 = sr2 * sr2 * sr2;
    return 4.0 * eps * (sr6 * sr6 - sr6);
}

static nnpops_status lj_error(const nnpops__cfg *cfg, nnpops__node node, const char *msg,
                              const char *detail) {
    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s%s", nnpops__cfg_file(cfg),
                        nnpops__cfg_line(cfg, node), msg, detail ? detail : "");
}

static nnpops_status lj_load(nnpops_model *model, const nnpops__cfg *cfg, nnpops__node root,
                             const nnpops__weights *weights) {
    static const char *const lj_keys[] = {"shift", "pairs", NULL};
    static const char *const pair_keys[] = {"elements", "epsilon", "sigma", "cutoff", NULL};
    const char *file = nnpops__cfg_file(cfg);
    nnpops__node lj, n, pairs;
    nnpops_status st;

    if (model->n_species > NNPOPS__MAX_SPECIES) {
        /* its per-species tables hold at most NNPOPS__MAX_SPECIES */
        nnpops__node sp;
        if ((st = nnpops__cfg_get(cfg, root, "species", 1, &sp)) != NNPOPS_OK) return st;
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: species must be a list of 1 to %d element symbols for an lj "
                            "model (it has %d)",
                            nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, sp), NNPOPS__MAX_SPECIES,
                            (int)model->n_species);
    }
    if ((st = nnpops__cfg_get(cfg, root, "lj", 1, &lj)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_check_keys(cfg, lj, "lj", lj_keys)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_get(cfg, root, "weights", 0, &n)) != NNPOPS_OK) return st;
    if (n || weights) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: an lj model has no weights file (remove the 'weights' key)",
                            file, n ? nnpops__cfg_line(cfg, n) : 1);
    }
    if ((st = nnpops__cfg_get(cfg, root, "ani", 0, &n)) != NNPOPS_OK) return st;
    if (n) return lj_error(cfg, n, "an lj model must not have an 'ani' mapping", NULL);

    lj_impl *p = calloc(1, sizeof *p);
    if (!p) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for an LJ model");
    model->impl = p;
    p->n_species = model->n_species;
    p->table.n_species = model->n_species;

    if ((st = nnpops__cfg_get(cfg, lj, "shift", 0, &n)) != NNPOPS_OK) return st;
    if (n && (st = nnpops__cfg_bool(cfg, n, "lj.shift", &p->shift)) != NNPOPS_OK) return st;

    if ((st = nnpops__cfg_get(cfg, lj, "pairs", 1, &pairs)) != NNPOPS_OK) return st;
    const int64_t np = nnpops__cfg_len(cfg, pairs);
    if (!nnpops__cfg_is_seq(cfg, pairs) || np < 1) {
        return lj_error(cfg, pairs, "lj.pairs must be a list of at least one pair", NULL);
    }
    const double ell = model->length_to_A;
    double max_cut = 0.0;
    for (int64_t k = 0; k < np; k++) {
        nnpops__node item = nnpops__cfg_item(cfg, pairs, k), el, v;
        char what[64];
        snprintf(what, sizeof what, "lj.pairs[%lld]", (long long)k);
        if ((st = nnpops__cfg_check_keys(cfg, item, what, pair_keys)) != NNPOPS_OK) return st;
        if ((st = nnpops__cfg_get(cfg, item, "elements", 1, &el)) != NNPOPS_OK) return st;
        if (!nnpops__cfg_is_seq(cfg, el) || nnpops__cfg_len(cfg, el) != 2) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%d: %s.elements must be a list of exactly two element "
                                "symbols",
                                file, nnpops__cfg_line(cfg, el), what);
        }
        int sp[2];
        for (int e = 0; e < 2; e++) {
            nnpops__node sym_node = nnpops__cfg_item(cfg, el, e);
            const char *sym;
            if ((st = nnpops__cfg_str(cfg, sym_node, what, &sym)) != NNPOPS_OK) return st;
            const int z = nnpops__element_from_symbol(sym);
            sp[e] = (z > 0 && z < 119) ? model->z_to_species[z] : -1;
            if (sp[e] < 0) {
                return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                    "%s:%d: %s: element '%.32s' is not in species", file,
                                    nnpops__cfg_line(cfg, sym_node), what, sym);
            }
        }
        lj_pair *t = &p->table.pair[sp[0] * p->n_species + sp[1]];
        if (t->on) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%d: %s: the pair %s-%s is listed twice", file,
                                nnpops__cfg_line(cfg, item), what,
                                nnpops__element_symbols[model->species_z[sp[0]]],
                                nnpops__element_symbols[model->species_z[sp[1]]]);
        }
        double eps, sigma, cut;
        if ((st = nnpops__cfg_get(cfg, item, "epsilon", 1, &v)) != NNPOPS_OK ||
            (st = nnpops__cfg_double(cfg, v, "epsilon", &eps)) != NNPOPS_OK) {
            return st;
        }
        if (!(eps >= 0.0)) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s.epsilon must be >= 0", file,
                                nnpops__cfg_line(cfg, v), what);
        }
        if ((st = nnpops__cfg_get(cfg, item, "sigma", 1, &v)) != NNPOPS_OK ||
            (st = nnpops__cfg_double(cfg, v, "sigma", &sigma)) != NNPOPS_OK) {
            return st;
        }
        if (!(sigma > 0.0)) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s.sigma must be > 0", file,
                                nnpops__cfg_line(cfg, v), what);
        }
        if ((st = nnpops__cfg_get(cfg, item, "cutoff", 1, &v)) != NNPOPS_OK ||
            (st = nnpops__cfg_double(cfg, v, "cutoff", &cut)) != NNPOPS_OK) {
            return st;
        }
        if (!(cut > 0.0)) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s.cutoff must be > 0", file,
                                nnpops__cfg_line(cfg, v), what);
        }
        t->on = 1;
        t->eps = eps;
        t->sigma = sigma * ell;
        t->cutoff = cut * ell;
        t->e_shift = p->shift ? lj_energy(t->eps, t->sigma, t->cutoff) : 0.0;
        p->table.pair[sp[1] * p->n_species + sp[0]] = *t;
        if (t->cutoff > max_cut) max_cut = t->cutoff;
    }
    model->cutoff = max_cut;
    model->ensemble_size = 1;
    return NNPOPS_OK;
}

static void lj_destroy(nnpops_model *model) {
    free(model->impl);
    model->impl = NULL;
}

static nnpops_status lj_compute_cpu(const nnpops_model *model, nnpops__scratch *scratch,
                                    nnpops__step *step) {
    (void)scratch;
    const lj_impl *p = model->impl;
    if (step->member > 0) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "ensemble_member %d is out of range (an lj model has one member, 0)",
                            (int)step->member);
    }
    const int64_t n_local = step->n_local;
    const int full = step->lists.full;
    for (int64_t q = 0; q < step->n_pairs; q++) {
        const int32_t i = step->pairs[2 * q], j = step->pairs[2 * q + 1];
        const lj_pair *t = &p->table.pair[step->species[i] * p->n_species + step->species[j]];
        const double r = step->pair_dist[q];
        if (!t->on || !(r < t->cutoff)) continue;
        /* a half list gives each local atom of the pair half of E_ij; full lists have the pair
         * once per center, and each entry gives its center (when local) half */
        const double share_i = i < n_local ? 0.5 : 0.0;
        const double share_j = !full && j < n_local ? 0.5 : 0.0;
        if (share_i + share_j == 0.0) continue;
        const double sr2 = (t->sigma / r) * (t->sigma / r);
        const double sr6 = sr2 * sr2 * sr2;
        const double e = 4.0 * t->eps * (sr6 * sr6 - sr6) - t->e_shift;
        step->atom_energy[i] += share_i * e;
        step->atom_energy[j] += share_j * e;
        if (step->need_grad) {
            /* dE/dr = 4 eps (-12 sr12 + 6 sr6) / r, along r_vec / r */
            const double dedr = 4.0 * t->eps * (-12.0 * sr6 * sr6 + 6.0 * sr6) / r;
            const double s = (share_i + share_j) * dedr / r;
            const double *v = step->pair_vec + 3 * q;
            for (int x = 0; x < 3; x++) step->pair_grad[3 * q + x] += s * v[x];
        }
    }
    if (step->member_atom_energy) {
        for (int64_t i = 0; i < step->n_atoms; i++) step->member_atom_energy[i] = step->atom_energy[i];
    }
    return NNPOPS_OK;
}

const nnpops__potential_vt nnpops__lj_vt = {
    .type = "lj",
    .load = lj_load,
    .destroy = lj_destroy,
    .compute_cpu = lj_compute_cpu,
#ifdef NNPOPS_HAVE_CUDA
    .upload = nnpops__lj_upload,
    .release_device = nnpops__lj_release_device,
    .cuda_work_bytes = nnpops__lj_cuda_work_bytes,
    .compute_cuda = nnpops__lj_compute_cuda,
#endif
};

const nnpops__lj_table *nnpops__lj_table_of(const nnpops_model *model) {
    return &((const lj_impl *)model->impl)->table;
}
