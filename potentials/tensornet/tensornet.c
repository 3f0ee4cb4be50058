/*
 * tensornet.c - TensorNet from torchmd-net checkpoints (`type: tensornet`, docs/model-format.md
 * section 9): the model file's keys and weights, and one CPU step over the core's neighbor lists.
 *
 * Lists.  The potential asks for full lists with every atom a center, ghosts included (so pairs of
 * two ghosts are there: a ghost's features feed the local atoms' energies through the layers).
 * From the entries of each center c it builds the directed edge list of the network (a self edge
 * (c, c) with a zero vector first, then every entry with cutoff_lower <= r < cutoff_upper, in list
 * order) and the pair list of the ZBL prior (every entry with r < its cutoff; the list holds no
 * zero-shift self entry).  The core's cutoff is the larger of the two cutoffs.
 *
 * Energies.  The network's per-atom terms (x_i std + atomref[z_i]) and half of each ZBL pair of the
 * atom come from potentials/tensornet/cpu; the model's `mean`, a constant per system, is shared
 * evenly over the atoms of the system in the call (local and ghost), so the local atoms' energies
 * of a context with ghosts carry their share of it and the shares of a split system add up to one
 * `mean`.  Ghost atoms get no energy.  Gradients: dE/d vec per edge of E = the local atoms'
 * energies (atom weights 1 for local atoms, 0 for ghosts), written to the entry each edge came
 * from (self edges carry none).  The total charge of each system is handed to its atoms.
 *
 * Ensembles.  A model file of M members (`ensemble_size`, tensors prefixed m{k}.) shares the
 * shape and the ZBL prior; each member has its weights, `mean` and `std`.  A step computes ZBL once
 * and every member over the same edges (only the chosen one with option ensemble_member, unless
 * the members' energies are wanted): member_atom_energy[i M + m] is member m's atomic energy (its
 * terms, its `mean` share, the ZBL halves), atom_energy their mean, and the gradients those of
 * the mean (each member's scaled by 1/M) or of the chosen member.
 *
 * Units.  The network runs in the model's length unit: vectors are scaled from angstrom on the way
 * in and gradients back on the way out when the units differ.
 *
 * Precision: float64 models keep double weights and call the _f64 functions; float32 models keep
 * float weights and call _f32 (vectors rounded once); per-atom energies are float64 in both.
 *
 * Threads.  A system's edges never leave it, so the step is shared out by system: each system is
 * computed alone (its atoms renumbered within it) by whichever thread takes it, which gives the
 * same bits for every thread count and whatever else is in the batch.  A single system runs on
 * one thread.
 *
 * GPU: the hooks of tensornet_cuda.c (the ops of tn_ops.h over the GPU step's center lists).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/src/potential_api.h"
#include "potentials/tensornet/cpu/tensornet_cpu.h"
#include "potentials/tensornet/tensornet.h"

#define TN_MAX_LAYERS 64
#define TN_MAX_TENSORS (40 + 9 * TN_MAX_LAYERS) /* of one member */

#define TN_MAX_MEMBERS 64

/* An ensemble member beyond the first: its shape (the members' shapes differ in std only), its
 * `mean` and its weights. */
typedef struct tn_member {
    nnpops__tn_shape shape;
    double mean;
    nnpops__tn_weights_f64 w64;
    nnpops__tn_weights_f32 w32;
    const double *ls64[3 * TN_MAX_LAYERS], *lb64[3 * TN_MAX_LAYERS], *lt64[6 * TN_MAX_LAYERS];
    const float *ls32[3 * TN_MAX_LAYERS], *lb32[3 * TN_MAX_LAYERS], *lt32[6 * TN_MAX_LAYERS];
} tn_member;

/* shape, mean and the weights are member 0's; members 1 .. n_members-1 are in more[]. */
typedef struct tn_impl {
    nnpops__tn_shape shape;
    double mean;
    int has_zbl;
    nnpops__tn_zbl zbl;
    int32_t *zbl_map;
    double *arena64; /* every tensor of every member, float64 */
    float *arena32;  /* float32 models: the same, rounded */
    nnpops__tn_weights_f64 w64;
    nnpops__tn_weights_f32 w32;
    const double *ls64[3 * TN_MAX_LAYERS], *lb64[3 * TN_MAX_LAYERS], *lt64[6 * TN_MAX_LAYERS];
    const float *ls32[3 * TN_MAX_LAYERS], *lb32[3 * TN_MAX_LAYERS], *lt32[6 * TN_MAX_LAYERS];
    int32_t n_members; /* the ensemble size, >= 1 */
    tn_member *more;   /* [n_members - 1] */
} tn_impl;

/* Where one member's numbers are (member 0: in tn_impl itself). */
typedef struct tn_view {
    nnpops__tn_shape *shape;
    double *mean;
    nnpops__tn_weights_f64 *w64;
    nnpops__tn_weights_f32 *w32;
    const double **ls64, **lb64, **lt64;
    const float **ls32, **lb32, **lt32;
} tn_view;

static tn_view tn_member_view(tn_impl *p, int m) {
    if (m == 0)
        return (tn_view){&p->shape, &p->mean, &p->w64, &p->w32, p->ls64, p->lb64, p->lt64,
                         p->ls32, p->lb32, p->lt32};
    tn_member *q = &p->more[m - 1];
    return (tn_view){&q->shape, &q->mean, &q->w64, &q->w32, q->ls64, q->lb64, q->lt64,
                     q->ls32, q->lb32, q->lt32};
}

static nnpops_status tn_error(const nnpops__cfg *cfg, nnpops__node node, const char *fmt,
                              const char *a, const char *b) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s", nnpops__cfg_file(cfg),
                        nnpops__cfg_line(cfg, node), msg);
}

/* A required integer key of the tensornet mapping, within [lo, hi]. */
static nnpops_status get_int(const nnpops__cfg *cfg, nnpops__node map, const char *key, int64_t lo,
                             int64_t hi, int32_t *out) {
    nnpops__node n;
    int64_t v;
    char what[96];
    snprintf(what, sizeof what, "tensornet.%s", key);
    nnpops_status st;
    if ((st = nnpops__cfg_get(cfg, map, key, 1, &n)) != NNPOPS_OK ||
        (st = nnpops__cfg_int(cfg, n, what, &v)) != NNPOPS_OK)
        return st;
    if (v < lo || v > hi)
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s = %lld is out of range [%lld, %lld]", nnpops__cfg_file(cfg),
                            nnpops__cfg_line(cfg, n), what, (long long)v, (long long)lo,
                            (long long)hi);
    *out = (int32_t)v;
    return NNPOPS_OK;
}

static nnpops_status get_double(const nnpops__cfg *cfg, nnpops__node map, const char *key,
                                const char *what, double *out) {
    nnpops__node n;
    nnpops_status st;
    if ((st = nnpops__cfg_get(cfg, map, key, 1, &n)) != NNPOPS_OK ||
        (st = nnpops__cfg_double(cfg, n, what, out)) != NNPOPS_OK)
        return st;
    if (!isfinite(*out))
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s must be finite",
                            nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, n), what);
    return NNPOPS_OK;
}

/* A string key that must be one of words[] (NULL-terminated); *index its position. */
static nnpops_status get_word(const nnpops__cfg *cfg, nnpops__node map, const char *key,
                              const char *const *words, int *index) {
    nnpops__node n;
    const char *s;
    char what[96];
    snprintf(what, sizeof what, "tensornet.%s", key);
    nnpops_status st;
    if ((st = nnpops__cfg_get(cfg, map, key, 1, &n)) != NNPOPS_OK ||
        (st = nnpops__cfg_str(cfg, n, what, &s)) != NNPOPS_OK)
        return st;
    char list[256] = "";
    for (int k = 0; words[k]; k++) {
        if (!strcmp(words[k], s)) {
            *index = k;
            return NNPOPS_OK;
        }
        strncat(list, k ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, words[k], sizeof list - strlen(list) - 1);
    }
    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                        "%s:%d: %s '%.64s' is not supported (supported: %s)",
                        nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, n), what, s, list);
}

/* ---- weights --------------------------------------------------------------------------------- */

typedef struct tn_tensor {
    char name[128];
    int ndim;
    int64_t shape[2];
    const double **dst64; /* where its float64 pointer goes */
    const float **dst32;
    size_t offset;        /* in the arenas, values */
} tn_tensor;

typedef struct tn_list {
    tn_tensor t[TN_MAX_TENSORS];
    int n;
    size_t total;
} tn_list;

static void add_tensor(tn_list *l, const double **d64, const float **d32, int64_t d0, int64_t d1,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void add_tensor(tn_list *l, const double **d64, const float **d32, int64_t d0, int64_t d1,
                       const char *fmt, ...) {
    tn_tensor *t = &l->t[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->dst64 = d64;
    t->dst32 = d32;
    t->offset = l->total;
    l->total += (size_t)(d0 * (d1 > 0 ? d1 : 1));
}

/* The tensors of docs/model-format.md 9.3 for the model's shape, with where each pointer goes:
 * one member's, named with its prefix (`m{k}.` in an ensemble, else none), placed in the arenas
 * from offset `base` on. */
static void list_tensors(tn_view v, const char *pre, size_t base, const char *atomref_name,
                         tn_list *l) {
    const nnpops__tn_shape *s = v.shape;
    const int64_t F = s->F, R = s->R;
    char P[64];
    snprintf(P, sizeof P, "%srepresentation_model.", pre);
    nnpops__tn_weights_f64 *a = v.w64;
    nnpops__tn_weights_f32 *b = v.w32;
    l->n = 0;
    l->total = base;
    if (s->rbf == NNPOPS__TN_GAUSS) {
        add_tensor(l, &a->rbf_a, &b->rbf_a, R, 0, "%sdistance_expansion.offset", P);
        add_tensor(l, &a->rbf_b, &b->rbf_b, 1, 0, "%sdistance_expansion.coeff", P);
    } else {
        add_tensor(l, &a->rbf_a, &b->rbf_a, R, 0, "%sdistance_expansion.means", P);
        add_tensor(l, &a->rbf_b, &b->rbf_b, R, 0, "%sdistance_expansion.betas", P);
    }
    add_tensor(l, &a->emb, &b->emb, s->max_z, F, "%stensor_embedding.emb.weight", P);
    add_tensor(l, &a->emb2_w, &b->emb2_w, F, 2 * F, "%stensor_embedding.emb2.weight", P);
    add_tensor(l, &a->emb2_b, &b->emb2_b, F, 0, "%stensor_embedding.emb2.bias", P);
    for (int k = 0; k < 3; k++) {
        add_tensor(l, &a->dproj_w[k], &b->dproj_w[k], F, R,
                   "%stensor_embedding.distance_proj%d.weight", P, k + 1);
        add_tensor(l, &a->dproj_b[k], &b->dproj_b[k], F, 0,
                   "%stensor_embedding.distance_proj%d.bias", P, k + 1);
        add_tensor(l, &a->emb_lt[k], &b->emb_lt[k], F, F,
                   "%stensor_embedding.linears_tensor.%d.weight", P, k);
    }
    add_tensor(l, &a->emb_ls_w[0], &b->emb_ls_w[0], 2 * F, F,
               "%stensor_embedding.linears_scalar.0.weight", P);
    add_tensor(l, &a->emb_ls_b[0], &b->emb_ls_b[0], 2 * F, 0,
               "%stensor_embedding.linears_scalar.0.bias", P);
    add_tensor(l, &a->emb_ls_w[1], &b->emb_ls_w[1], 3 * F, 2 * F,
               "%stensor_embedding.linears_scalar.1.weight", P);
    add_tensor(l, &a->emb_ls_b[1], &b->emb_ls_b[1], 3 * F, 0,
               "%stensor_embedding.linears_scalar.1.bias", P);
    add_tensor(l, &a->init_norm_w, &b->init_norm_w, F, 0, "%stensor_embedding.init_norm.weight", P);
    add_tensor(l, &a->init_norm_b, &b->init_norm_b, F, 0, "%stensor_embedding.init_norm.bias", P);
    const int64_t in_w[3] = {R, F, 2 * F}, out_w[3] = {F, 2 * F, 3 * F};
    for (int ly = 0; ly < s->L; ly++) {
        for (int k = 0; k < 3; k++) {
            add_tensor(l, &v.ls64[3 * ly + k], &v.ls32[3 * ly + k], out_w[k], in_w[k],
                       "%slayers.%d.linears_scalar.%d.weight", P, ly, k);
            add_tensor(l, &v.lb64[3 * ly + k], &v.lb32[3 * ly + k], out_w[k], 0,
                       "%slayers.%d.linears_scalar.%d.bias", P, ly, k);
        }
        for (int k = 0; k < 6; k++)
            add_tensor(l, &v.lt64[6 * ly + k], &v.lt32[6 * ly + k], F, F,
                       "%slayers.%d.linears_tensor.%d.weight", P, ly, k);
    }
    add_tensor(l, &a->linear_w, &b->linear_w, F, 3 * F, "%slinear.weight", P);
    add_tensor(l, &a->linear_b, &b->linear_b, F, 0, "%slinear.bias", P);
    add_tensor(l, &a->out_norm_w, &b->out_norm_w, 3 * F, 0, "%sout_norm.weight", P);
    add_tensor(l, &a->out_norm_b, &b->out_norm_b, 3 * F, 0, "%sout_norm.bias", P);
    for (int k = 0; k < s->n_out; k++) {
        add_tensor(l, &a->out_w[k], &b->out_w[k], s->out_width[k + 1], s->out_width[k],
                   "%soutput_model.output_network.layers.%d.weight", pre, 2 * k);
        add_tensor(l, &a->out_b[k], &b->out_b[k], s->out_width[k + 1], 0,
                   "%soutput_model.output_network.layers.%d.bias", pre, 2 * k);
    }
    if (atomref_name)
        add_tensor(l, &a->atomref, &b->atomref, s->atomref_len, 1, "%s%s", pre, atomref_name);
}

/* ---- loading --------------------------------------------------------------------------------- */

/* The priors sequence: Atomref (enabled: *atomref_name is its tensor) and at most one ZBL. */
static nnpops_status load_priors(nnpops_model *model, tn_impl *p, const nnpops__cfg *cfg,
                                 nnpops__node tn, const char **atomref_name) {
    static const char *const atomref_keys[] = {"type", "enable", "max_z", "tensor", NULL};
    static const char *const zbl_keys[] = {"type",          "cutoff_distance", "distance_scale",
                                           "energy_scale", "atomic_number",   NULL};
    nnpops__node priors, n;
    nnpops_status st;
    *atomref_name = NULL;
    if ((st = nnpops__cfg_get(cfg, tn, "priors", 1, &priors)) != NNPOPS_OK) return st;
    if (!nnpops__cfg_is_seq(cfg, priors))
        return tn_error(cfg, priors, "tensornet.priors must be a list (empty: no prior)%s%s", 0, 0);
    const int64_t np = nnpops__cfg_len(cfg, priors);
    for (int64_t k = 0; k < np; k++) {
        nnpops__node item = nnpops__cfg_item(cfg, priors, k);
        const char *type;
        char what[64];
        snprintf(what, sizeof what, "tensornet.priors[%lld]", (long long)k);
        if (!nnpops__cfg_is_map(cfg, item))
            return tn_error(cfg, item, "%s must be a mapping {type: ..., ...}%s", what, 0);
        if ((st = nnpops__cfg_get(cfg, item, "type", 1, &n)) != NNPOPS_OK ||
            (st = nnpops__cfg_str(cfg, n, what, &type)) != NNPOPS_OK)
            return st;
        if (!strcmp(type, "Atomref")) {
            int enable;
            int64_t mz;
            const char *tname;
            if ((st = nnpops__cfg_check_keys(cfg, item, what, atomref_keys)) != NNPOPS_OK)
                return st;
            if ((st = nnpops__cfg_get(cfg, item, "enable", 1, &n)) != NNPOPS_OK ||
                (st = nnpops__cfg_bool(cfg, n, "Atomref enable", &enable)) != NNPOPS_OK ||
                (st = nnpops__cfg_get(cfg, item, "max_z", 1, &n)) != NNPOPS_OK ||
                (st = nnpops__cfg_int(cfg, n, "Atomref max_z", &mz)) != NNPOPS_OK)
                return st;
            if (mz < 1 || mz > 100000)
                return tn_error(cfg, n, "%s: max_z must be 1 .. 100000%s", what, 0);
            if ((st = nnpops__cfg_get(cfg, item, "tensor", 1, &n)) != NNPOPS_OK ||
                (st = nnpops__cfg_str(cfg, n, "Atomref tensor", &tname)) != NNPOPS_OK)
                return st;
            if (!enable) continue; /* adds nothing, as in torchmd-net */
            if (*atomref_name)
                return tn_error(cfg, item, "%s: a second enabled Atomref prior%s", what, 0);
            if (strlen(tname) >= 120)
                return tn_error(cfg, n, "%s: tensor name too long%s", what, 0);
            *atomref_name = tname;
            p->shape.atomref_len = (int32_t)mz;
            for (int sp = 0; sp < model->n_species; sp++)
                if (model->species_z[sp] >= mz)
                    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                        "%s:%d: %s: element %s (Z = %d) is in species but not "
                                        "below the prior's max_z = %lld",
                                        nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, item), what,
                                        nnpops__element_symbols[model->species_z[sp]],
                                        (int)model->species_z[sp], (long long)mz);
        } else if (!strcmp(type, "ZBL")) {
            if (p->has_zbl) return tn_error(cfg, item, "%s: a second ZBL prior%s", what, 0);
            if ((st = nnpops__cfg_check_keys(cfg, item, what, zbl_keys)) != NNPOPS_OK) return st;
            nnpops__tn_zbl *z = &p->zbl;
            if ((st = get_double(cfg, item, "cutoff_distance", "ZBL cutoff_distance",
                                 &z->cutoff)) != NNPOPS_OK ||
                (st = get_double(cfg, item, "distance_scale", "ZBL distance_scale",
                                 &z->distance_scale)) != NNPOPS_OK ||
                (st = get_double(cfg, item, "energy_scale", "ZBL energy_scale",
                                 &z->energy_scale)) != NNPOPS_OK)
                return st;
            if (!(z->cutoff > 0) || !(z->distance_scale > 0) || !(z->energy_scale > 0))
                return tn_error(cfg, item,
                                "%s: cutoff_distance, distance_scale and energy_scale must be "
                                "positive%s",
                                what, 0);
            nnpops__node map;
            if ((st = nnpops__cfg_get(cfg, item, "atomic_number", 1, &map)) != NNPOPS_OK) return st;
            const int64_t len = nnpops__cfg_len(cfg, map);
            if (!nnpops__cfg_is_seq(cfg, map) || len < 1 || len > 100000)
                return tn_error(cfg, map, "%s: atomic_number must be a list of 1 .. 100000 "
                                "integers%s", what, 0);
            p->zbl_map = malloc(sizeof(int32_t) * (size_t)len);
            if (!p->zbl_map)
                return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for a ZBL map");
            for (int64_t t = 0; t < len; t++) {
                int64_t v;
                nnpops__node e = nnpops__cfg_item(cfg, map, t);
                if ((st = nnpops__cfg_int(cfg, e, "ZBL atomic_number", &v)) != NNPOPS_OK) return st;
                if (v < 0 || v > 1000)
                    return tn_error(cfg, e, "%s: atomic_number entries must be 0 .. 1000%s", what,
                                    0);
                p->zbl_map[t] = (int32_t)v;
            }
            z->map_len = (int32_t)len;
            z->atomic_number = p->zbl_map;
            p->has_zbl = 1;
            for (int sp = 0; sp < model->n_species; sp++)
                if (model->species_z[sp] >= len)
                    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                        "%s:%d: %s: element %s (Z = %d) is in species but not in "
                                        "the ZBL prior's atomic_number map (%lld entries)",
                                        nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, map), what,
                                        nnpops__element_symbols[model->species_z[sp]],
                                        (int)model->species_z[sp], (long long)len);
        } else {
            return tn_error(cfg, n, "%s: prior type '%.64s' is not supported (supported: Atomref, "
                            "ZBL)", what, type);
        }
    }
    return NNPOPS_OK;
}

/* `ensemble_size` (optional, default 1) and each member's `mean` and `std`: numbers for one
 * member, lists of one number per member for an ensemble. */
static nnpops_status get_ensemble(const nnpops__cfg *cfg, nnpops__node tn, tn_impl *p) {
    nnpops__node n;
    nnpops_status st;
    int32_t M = 1;
    if ((st = nnpops__cfg_get(cfg, tn, "ensemble_size", 0, &n)) != NNPOPS_OK) return st;
    if (n && (st = get_int(cfg, tn, "ensemble_size", 1, TN_MAX_MEMBERS, &M)) != NNPOPS_OK)
        return st;
    p->n_members = M;
    if (M == 1)
        return (st = get_double(cfg, tn, "mean", "tensornet.mean", &p->mean)) != NNPOPS_OK
                   ? st
                   : get_double(cfg, tn, "std", "tensornet.std", &p->shape.std);
    p->more = calloc((size_t)(M - 1), sizeof *p->more);
    if (!p->more)
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for a TensorNet ensemble");
    static const char *const keys[] = {"mean", "std"};
    for (int k = 0; k < 2; k++) {
        double v[TN_MAX_MEMBERS];
        char what[64];
        snprintf(what, sizeof what, "tensornet.%s (one per ensemble member)", keys[k]);
        if ((st = nnpops__cfg_get(cfg, tn, keys[k], 1, &n)) != NNPOPS_OK ||
            (st = nnpops__cfg_doubles(cfg, n, what, v, M, 1, NULL)) != NNPOPS_OK)
            return st;
        for (int m = 0; m < M; m++) {
            if (!isfinite(v[m]))
                return tn_error(cfg, n, "%s must be finite%s", what, 0);
            double *dst = k == 0 ? (m ? &p->more[m - 1].mean : &p->mean)
                                 : (m ? &p->more[m - 1].shape.std : &p->shape.std);
            *dst = v[m];
        }
    }
    return NNPOPS_OK;
}

static void tn_destroy(nnpops_model *model) {
    tn_impl *p = model->impl;
    if (!p) return;
    free(p->zbl_map);
    free(p->arena64);
    free(p->arena32);
    free(p->more);
    free(p);
    model->impl = NULL;
}

static nnpops_status tn_load(nnpops_model *model, const nnpops__cfg *cfg, nnpops__node root,
                             const nnpops__weights *weights) {
    static const char *const tn_keys[] = {
        "source", "dtype", "embedding_dimension", "num_layers", "num_rbf", "rbf_type",
        "trainable_rbf", "activation", "cutoff_lower", "cutoff_upper", "max_z",
        "equivariance_invariance_group", "output_model", "reduce_op", "output_widths", "mean",
        "std", "box_vecs", "old_layout_remapped", "priors", "hyper_parameters", "ensemble_size",
        NULL};
    static const char *const rbf_words[] = {"expnorm", "gauss", NULL};
    static const char *const act_words[] = {"ssp", "silu", "tanh", "sigmoid", "swish", "mish",
                                            NULL};
    static const int act_kind[] = {NNPOPS__TN_SSP, NNPOPS__TN_SILU, NNPOPS__TN_TANH,
                                   NNPOPS__TN_SIGMOID, NNPOPS__TN_SILU, NNPOPS__TN_MISH};
    static const char *const group_words[] = {"O(3)", "SO(3)", NULL};
    static const char *const output_words[] = {"Scalar", NULL};
    static const char *const reduce_words[] = {"sum", NULL};
    static const char *const dtype_words[] = {"float32", "float64", NULL};
    const char *file = nnpops__cfg_file(cfg);
    nnpops__node tn, n;
    nnpops_status st;

    if ((st = nnpops__cfg_get(cfg, root, "tensornet", 1, &tn)) != NNPOPS_OK) return st;
    if (!nnpops__cfg_is_map(cfg, tn))
        return tn_error(cfg, tn, "tensornet must be a mapping%s%s", 0, 0);
    if ((st = nnpops__cfg_check_keys(cfg, tn, "tensornet", tn_keys)) != NNPOPS_OK) return st;
    if (!weights)
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: a tensornet model needs a weights file (a 'weights: {file, "
                            "sha256}' mapping)",
                            file);

    tn_impl *p = calloc(1, sizeof *p);
    if (!p) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for a TensorNet model");
    model->impl = p; /* destroyable from here on */
    nnpops__tn_shape *s = &p->shape;
    int word;
    if ((st = get_word(cfg, tn, "dtype", dtype_words, &word)) != NNPOPS_OK ||
        (st = get_int(cfg, tn, "embedding_dimension", 1, 4096, &s->F)) != NNPOPS_OK ||
        (st = get_int(cfg, tn, "num_layers", 0, TN_MAX_LAYERS, &s->L)) != NNPOPS_OK ||
        (st = get_int(cfg, tn, "num_rbf", 1, 4096, &s->R)) != NNPOPS_OK ||
        (st = get_int(cfg, tn, "max_z", 1, 100000, &s->max_z)) != NNPOPS_OK)
        return st;
    if ((st = get_word(cfg, tn, "rbf_type", rbf_words, &word)) != NNPOPS_OK) return st;
    s->rbf = word == 1 ? NNPOPS__TN_GAUSS : NNPOPS__TN_EXPNORM;
    if ((st = get_word(cfg, tn, "activation", act_words, &word)) != NNPOPS_OK) return st;
    s->activation = act_kind[word];
    if ((st = get_word(cfg, tn, "equivariance_invariance_group", group_words, &word)) != NNPOPS_OK)
        return st;
    s->so3 = word == 1;
    if ((st = get_word(cfg, tn, "output_model", output_words, &word)) != NNPOPS_OK ||
        (st = get_word(cfg, tn, "reduce_op", reduce_words, &word)) != NNPOPS_OK)
        return st;
    if ((st = get_double(cfg, tn, "cutoff_lower", "tensornet.cutoff_lower", &s->cutoff_lower)) !=
            NNPOPS_OK ||
        (st = get_double(cfg, tn, "cutoff_upper", "tensornet.cutoff_upper", &s->cutoff_upper)) !=
            NNPOPS_OK ||
        (st = get_ensemble(cfg, tn, p)) != NNPOPS_OK)
        return st;
    if (!(s->cutoff_lower >= 0) || !(s->cutoff_upper > s->cutoff_lower)) {
        nnpops__cfg_get(cfg, tn, "cutoff_upper", 1, &n);
        return tn_error(cfg, n, "tensornet: need 0 <= cutoff_lower < cutoff_upper%s%s", 0, 0);
    }
    /* the readout widths: F, ..., 1 */
    nnpops__node ow;
    if ((st = nnpops__cfg_get(cfg, tn, "output_widths", 1, &ow)) != NNPOPS_OK) return st;
    double widths[NNPOPS__TN_MAX_OUT + 1];
    int64_t nw = 0;
    if ((st = nnpops__cfg_doubles(cfg, ow, "tensornet.output_widths", widths,
                                  NNPOPS__TN_MAX_OUT + 1, 0, &nw)) != NNPOPS_OK)
        return st;
    if (nw < 2 || widths[0] != s->F || widths[nw - 1] != 1)
        return tn_error(cfg, ow, "tensornet.output_widths must run from embedding_dimension to 1 "
                        "(%s2 .. 17 widths)%s", "", 0);
    s->n_out = (int32_t)(nw - 1);
    for (int64_t k = 0; k < nw; k++) {
        if (!(widths[k] >= 1 && widths[k] <= 65536 && widths[k] == floor(widths[k])))
            return tn_error(cfg, ow, "tensornet.output_widths must be positive integers%s%s", 0, 0);
        s->out_width[k] = (int32_t)widths[k];
    }
    /* records of the conversion, checked for their form: two flags, torchmd-net's default cell
     * (callers pass their own cells), the checkpoint's name and sha256 */
    static const char *const flags[] = {"trainable_rbf", "old_layout_remapped"};
    for (int k = 0; k < 2; k++) {
        int flag;
        char what[64];
        snprintf(what, sizeof what, "tensornet.%s", flags[k]);
        if ((st = nnpops__cfg_get(cfg, tn, flags[k], 0, &n)) != NNPOPS_OK) return st;
        if (n && (st = nnpops__cfg_bool(cfg, n, what, &flag)) != NNPOPS_OK) return st;
    }
    if ((st = nnpops__cfg_get(cfg, tn, "box_vecs", 0, &n)) != NNPOPS_OK) return st;
    if (n && !nnpops__cfg_is_scalar(cfg, n)) {
        int ok = nnpops__cfg_is_seq(cfg, n) && nnpops__cfg_len(cfg, n) == 3;
        for (int64_t r = 0; ok && r < 3; r++) {
            double row[3];
            int64_t got = 0;
            ok = nnpops__cfg_doubles(cfg, nnpops__cfg_item(cfg, n, r), "tensornet.box_vecs", row,
                                     3, 1, &got) == NNPOPS_OK;
        }
        if (!ok)
            return tn_error(cfg, n, "tensornet.box_vecs must be null or a 3x3 list of numbers%s%s",
                            0, 0);
    }
    if ((st = nnpops__cfg_get(cfg, tn, "source", 0, &n)) != NNPOPS_OK) return st;
    if (n && p->n_members == 1 && !nnpops__cfg_is_map(cfg, n))
        return tn_error(cfg, n, "tensornet.source must be a mapping {file, sha256}%s%s", 0, 0);
    if (n && p->n_members > 1) {
        int ok = nnpops__cfg_is_seq(cfg, n) && nnpops__cfg_len(cfg, n) == p->n_members;
        for (int64_t k = 0; ok && k < p->n_members; k++)
            ok = nnpops__cfg_is_map(cfg, nnpops__cfg_item(cfg, n, k));
        if (!ok)
            return tn_error(cfg, n, "tensornet.source of an ensemble must be a list of one "
                            "mapping {file, sha256} per member%s%s", 0, 0);
    }
    if ((st = nnpops__cfg_get(cfg, tn, "max_z", 1, &n)) != NNPOPS_OK) return st;
    for (int sp = 0; sp < model->n_species; sp++)
        if (model->species_z[sp] >= s->max_z)
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%d: element %s (Z = %d) is in species but not below "
                                "tensornet.max_z = %d",
                                file, nnpops__cfg_line(cfg, n),
                                nnpops__element_symbols[model->species_z[sp]],
                                (int)model->species_z[sp], (int)s->max_z);
    const char *atomref_name = NULL;
    if ((st = load_priors(model, p, cfg, tn, &atomref_name)) != NNPOPS_OK) return st;

    /* the weights of every member, read into one float64 arena (and rounded once for a float32
     * model); an ensemble's members share the shape (their files' tensors must have it) and
     * differ in their weights, `mean` and `std` */
    const int M = p->n_members;
    for (int m = 1; m < M; m++) {
        const double std_m = p->more[m - 1].shape.std;
        p->more[m - 1].shape = p->shape;
        p->more[m - 1].shape.std = std_m;
    }
    tn_list *l = malloc(sizeof *l);
    if (!l) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for a TensorNet model");
    size_t total = 0;
    for (int m = 0; m < M; m++) { /* the sizes first */
        char pre[16] = "";
        if (M > 1) snprintf(pre, sizeof pre, "m%d.", m);
        list_tensors(tn_member_view(p, m), pre, total, atomref_name, l);
        total = l->total;
    }
    p->arena64 = malloc(sizeof(double) * (total ? total : 1));
    if (!p->arena64) {
        free(l);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for TensorNet weights");
    }
    if (model->precision == NNPOPS_FLOAT32) {
        p->arena32 = malloc(sizeof(float) * (total ? total : 1));
        if (!p->arena32) {
            free(l);
            return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for TensorNet weights");
        }
    }
    total = 0;
    for (int m = 0; m < M; m++) {
        char pre[16] = "";
        if (M > 1) snprintf(pre, sizeof pre, "m%d.", m);
        tn_view v = tn_member_view(p, m);
        list_tensors(v, pre, total, atomref_name, l);
        total = l->total;
        for (int k = 0; k < l->n; k++) {
            const tn_tensor *t = &l->t[k];
            if ((st = nnpops__weights_read(weights, t->name, t->ndim, t->shape,
                                           p->arena64 + t->offset)) != NNPOPS_OK) {
                free(l);
                return st;
            }
            const int64_t count = t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
            for (int64_t c = 0; c < count; c++)
                if (!isfinite(p->arena64[t->offset + c])) {
                    st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: tensor '%s' has a "
                                      "non-finite value", file, t->name);
                    free(l);
                    return st;
                }
            *t->dst64 = p->arena64 + t->offset;
            if (p->arena32) {
                for (int64_t c = 0; c < count; c++)
                    p->arena32[t->offset + c] = (float)p->arena64[t->offset + c];
                *t->dst32 = p->arena32 + t->offset;
            }
        }
        v.w64->layer_ls_w = v.ls64, v.w64->layer_ls_b = v.lb64, v.w64->layer_lt = v.lt64;
        v.w32->layer_ls_w = v.ls32, v.w32->layer_ls_b = v.lb32, v.w32->layer_lt = v.lt32;
    }
    free(l);

    const double ell = model->length_to_A;
    const double zcut = p->has_zbl ? p->zbl.cutoff : 0.0;
    model->cutoff = fmax(s->cutoff_upper, zcut) * ell;
    model->interaction_range = fmax((s->L + 1) * s->cutoff_upper, zcut) * ell;
    model->uses_charge = 1;
    model->ensemble_size = M;
    return NNPOPS_OK;
}

static void tn_lists(const nnpops_model *model, nnpops__nbr_choice *lists) {
    (void)model;
    lists->full = 1;
    lists->ghost_centers = 1;
    lists->ghost_pairs = 1;
}

/* ---- the step -------------------------------------------------------------------------------- */

/* Scratch slots: per thread (the context's scratch for thread 0, scratch->sub[t - 1] for thread t)
 * SLOT_EDGE_IDX .. SLOT_WORK, sized for the largest system of the step; in the context's scratch
 * also SLOT_SYSTEMS (the atoms grouped by system and the per-system counts). */
enum {
    SLOT_EDGE_IDX = 0, /* entry of each edge [n_edges] (int64), then center, neighbor (int32) */
    SLOT_EDGE_VEC,     /* vec [3 n_edges] and dist [n_edges] (REAL) */
    SLOT_EDGE_GRAD,    /* [3 n_edges] (REAL) */
    SLOT_ZBL_IDX,      /* the same for the ZBL pairs */
    SLOT_ZBL_VEC,
    SLOT_ZBL_GRAD,
    SLOT_ATOM,         /* weight, charge, energy (double), z (int32) per atom of the system */
    SLOT_WORK,         /* the network's workspace */
    SLOT_SYSTEMS       /* context scratch only */
};
#define TN_THREAD_SLOTS SLOT_SYSTEMS

/* One step, shared out by system: a system's edges never leave it, so each system is one share
 * computed alone (the same bits whichever thread runs it, and whatever else is in the batch). */
typedef struct tn_job {
    const nnpops_model *model;
    nnpops__step *step;
    nnpops__scratch *scratch;
    int f32;
    double lo, hi, zcut, inv_ell;
    const int64_t *sys_start; /* [n_systems + 1] into order */
    const int32_t *order;     /* atoms grouped by system, in atom order within a system */
    const int32_t *loc;       /* [n_atoms] an atom's index within its system */
    const int64_t *sys_edges, *sys_zbl; /* [n_systems] network edges and ZBL pairs */
    int32_t *rc;              /* [n_systems] the functions' status */
    int64_t *bad;             /* [n_systems] their bad index (an atom of the step) */
} tn_job;

/* Stores v (angstrom) as the model's length unit in REAL at dst[k]. */
static void put_real(void *dst, int f32, int64_t k, double v) {
    if (f32) ((float *)dst)[k] = (float)v;
    else ((double *)dst)[k] = v;
}

static void tn_share(void *arg, int share, int thread) {
    const tn_job *j = arg;
    const tn_impl *p = j->model->impl;
    nnpops__step *step = j->step;
    nnpops__scratch *ts = thread == 0 ? j->scratch : &j->scratch->sub[thread - 1];
    const int f32 = j->f32;
    const int64_t s0 = j->sys_start[share], na = j->sys_start[share + 1] - s0;
    const int64_t n_edges = na + j->sys_edges[share], n_zbl = j->sys_zbl[share];
    j->rc[share] = NNPOPS__TN_OK;
    if (na == 0) return;
    int64_t *e_entry = ts->slot[SLOT_EDGE_IDX].ptr;
    int32_t *e_i = (int32_t *)(e_entry + n_edges), *e_j = e_i + n_edges;
    int64_t *z_entry = ts->slot[SLOT_ZBL_IDX].ptr;
    int32_t *z_i = (int32_t *)(z_entry + n_zbl), *z_j = z_i + n_zbl;
    const int M = p->n_members;
    double *a_w = ts->slot[SLOT_ATOM].ptr;
    double *a_q = a_w + na, *a_zbl = a_q + na, *a_e = a_zbl + na; /* a_e: [M][na] */
    int32_t *a_z = (int32_t *)(a_e + (size_t)M * na);
    void *ev = ts->slot[SLOT_EDGE_VEC].ptr, *zv = ts->slot[SLOT_ZBL_VEC].ptr;
    void *eg = ts->slot[SLOT_EDGE_GRAD].ptr, *zg = ts->slot[SLOT_ZBL_GRAD].ptr;
    int any_ghost = 0;
    for (int64_t a = 0; a < na; a++) {
        const int32_t i = j->order[s0 + a];
        a_z[a] = j->model->species_z[step->species[i]];
        a_w[a] = i < step->n_local ? 1.0 : 0.0;
        any_ghost |= i >= step->n_local;
        a_q[a] = step->charges ? step->charges[step->batch[i]] : 0.0;
        a_zbl[a] = 0.0;
    }
    /* edges: per center its self edge, then its entries within the network's cutoffs */
    int64_t ne = 0, nz = 0;
    for (int64_t a = 0; a < na; a++) {
        const int32_t c = j->order[s0 + a];
        e_entry[ne] = -1;
        e_i[ne] = e_j[ne] = (int32_t)a;
        for (int k = 0; k < 3; k++) put_real(ev, f32, 3 * ne + k, 0.0);
        put_real(ev, f32, 3 * n_edges + ne, 0.0);
        ne++;
        for (int64_t e = step->center_start[c]; e < step->center_start[c + 1]; e++) {
            const double r = step->pair_dist[e];
            const double *x = step->pair_vec + 3 * e;
            const int32_t nb = j->loc[step->pairs[2 * e + 1]];
            if (r >= j->lo && r < j->hi) {
                e_entry[ne] = e;
                e_i[ne] = (int32_t)a;
                e_j[ne] = nb;
                for (int k = 0; k < 3; k++) put_real(ev, f32, 3 * ne + k, x[k] * j->inv_ell);
                put_real(ev, f32, 3 * n_edges + ne, r * j->inv_ell);
                ne++;
            }
            if (r < j->zcut) {
                z_entry[nz] = e;
                z_i[nz] = (int32_t)a;
                z_j[nz] = nb;
                for (int k = 0; k < 3; k++) put_real(zv, f32, 3 * nz + k, x[k] * j->inv_ell);
                put_real(zv, f32, 3 * n_zbl + nz, r * j->inv_ell);
                nz++;
            }
        }
    }
    const double *w = any_ghost ? a_w : NULL;
    const double *q = step->charges ? a_q : NULL;
    const int need_grad = step->need_grad;
    void *work = ts->slot[SLOT_WORK].ptr;
    int64_t bad = -1;
    int rc = NNPOPS__TN_OK;
    /* ZBL (the same for every member) once, then each member's network: all members when the
     * ensemble mean or the members' energies are wanted, else the chosen one; gradients of the
     * members that make the result (the mean: each with weight 1/M) */
    if (p->has_zbl)
        rc = f32 ? nnpops__tn_zbl_cpu_f32(&p->zbl, a_z, n_zbl, z_i, z_j, (const float *)zv,
                                          (const float *)zv + 3 * n_zbl, w, a_zbl,
                                          need_grad ? (float *)zg : NULL, &bad)
                 : nnpops__tn_zbl_cpu_f64(&p->zbl, a_z, n_zbl, z_i, z_j, (const double *)zv,
                                          (const double *)zv + 3 * n_zbl, w, a_zbl,
                                          need_grad ? (double *)zg : NULL, &bad);
    const int all = step->member < 0 || step->member_atom_energy != NULL;
    const double gscale = j->inv_ell / (step->member < 0 ? (double)M : 1.0);
    for (int m = 0; m < M && rc == NNPOPS__TN_OK; m++) {
        if (!all && m != step->member) continue;
        const int grad_m = need_grad && (step->member < 0 || m == step->member);
        tn_view v = tn_member_view((tn_impl *)p, m);
        double *e_m = a_e + (size_t)m * na;
        rc = f32 ? nnpops__tn_cpu_f32(v.shape, v.w32, na, a_z, q, n_edges, e_i, e_j,
                                      (const float *)ev, (const float *)ev + 3 * n_edges, w, e_m,
                                      grad_m ? (float *)eg : NULL, work, &bad)
                 : nnpops__tn_cpu_f64(v.shape, v.w64, na, a_z, q, n_edges, e_i, e_j,
                                      (const double *)ev, (const double *)ev + 3 * n_edges, w,
                                      e_m, grad_m ? (double *)eg : NULL, work, &bad);
        if (rc != NNPOPS__TN_OK || !grad_m) continue;
        /* gradients per entry (self edges carry none), back to angstrom; the entries of this
         * system's centers are written by this share only */
        for (int64_t e = 0; e < n_edges; e++) {
            if (e_entry[e] < 0) continue;
            double *g = step->pair_grad + 3 * e_entry[e];
            for (int k = 0; k < 3; k++)
                g[k] += gscale * (f32 ? (double)((const float *)eg)[3 * e + k]
                                      : ((const double *)eg)[3 * e + k]);
        }
    }
    j->rc[share] = rc;
    if (rc != NNPOPS__TN_OK) {
        j->bad[share] = rc == NNPOPS__TN_BAD_Z && bad >= 0 && bad < na ? j->order[s0 + bad] : -1;
        return;
    }
    /* energies: a member's are its terms plus its share of its `mean`, plus the ZBL halves; the
     * ensemble's their mean (summed in member order) */
    for (int64_t a = 0; a < na; a++) {
        const int32_t i = j->order[s0 + a];
        if (i >= step->n_local) continue;
        double sum = 0.0;
        for (int m = 0; m < M; m++) {
            if (!all && m != step->member) continue;
            const double mean_m = m ? p->more[m - 1].mean : p->mean;
            const double e = (a_e[(size_t)m * na + a] + a_zbl[a]) + mean_m / (double)na;
            if (step->member_atom_energy) step->member_atom_energy[(size_t)i * M + m] = e;
            if (m == step->member) step->atom_energy[i] = e;
            sum += e;
        }
        if (step->member < 0) step->atom_energy[i] = M == 1 ? sum : sum / M;
    }
    if (!need_grad || !p->has_zbl) return;
    for (int64_t e = 0; e < n_zbl; e++) {
        double *g = step->pair_grad + 3 * z_entry[e];
        for (int k = 0; k < 3; k++)
            g[k] += j->inv_ell * (f32 ? (double)((const float *)zg)[3 * e + k]
                                      : ((const double *)zg)[3 * e + k]);
    }
}

/* A thread's buffers for a system of up to na atoms, ne network edges (self edges included) and
 * nz ZBL pairs. */
static nnpops_status tn_thread_buffers(const tn_impl *p, int f32, nnpops__scratch *ts, int64_t na,
                                       int64_t ne, int64_t nz) {
    const size_t real = f32 ? sizeof(float) : sizeof(double);
    const size_t idx = 2 * sizeof(int32_t) + sizeof(int64_t);
    const size_t work = f32 ? nnpops__tn_cpu_workspace_f32(&p->shape, na, ne)
                            : nnpops__tn_cpu_workspace_f64(&p->shape, na, ne);
    const struct {
        int slot;
        size_t bytes;
        const char *what;
    } want[TN_THREAD_SLOTS] = {
        {SLOT_EDGE_IDX, idx * (size_t)ne, "TensorNet edges"},
        {SLOT_EDGE_VEC, real * 4 * (size_t)ne, "TensorNet edge vectors"},
        {SLOT_EDGE_GRAD, real * 3 * (size_t)ne, "TensorNet edge gradients"},
        {SLOT_ZBL_IDX, idx * (size_t)nz, "ZBL pairs"},
        {SLOT_ZBL_VEC, real * 4 * (size_t)nz, "ZBL pair vectors"},
        {SLOT_ZBL_GRAD, real * 3 * (size_t)nz, "ZBL pair gradients"},
        {SLOT_ATOM, ((size_t)(3 + p->n_members) * sizeof(double) + sizeof(int32_t)) * (size_t)na,
         "TensorNet atoms"},
        {SLOT_WORK, work, "TensorNet workspace"},
    };
    for (int k = 0; k < TN_THREAD_SLOTS; k++) {
        nnpops_status st = nnpops__buf_reserve(&ts->slot[want[k].slot],
                                               want[k].bytes ? want[k].bytes : 1, want[k].what);
        if (st != NNPOPS_OK) return st;
    }
    return NNPOPS_OK;
}

static nnpops_status tn_compute_cpu(const nnpops_model *model, nnpops__scratch *scratch,
                                    nnpops__step *step) {
    const tn_impl *p = model->impl;
    if (step->member >= p->n_members)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "ensemble_member %d is out of range (-1 or 0..%d for model %s)",
                            (int)step->member, (int)p->n_members - 1, model->name);
    if (!step->lists.full || step->n_centers != step->n_atoms || !step->center_start)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "tensornet: the step has no full lists of "
                            "every atom");
    const int64_t n = step->n_atoms, ns = step->n_systems;
    const double ell = model->length_to_A;
    tn_job job = {
        .model = model,
        .step = step,
        .scratch = scratch,
        .f32 = model->precision == NNPOPS_FLOAT32,
        .lo = p->shape.cutoff_lower * ell,
        .hi = p->shape.cutoff_upper * ell,
        .zcut = p->has_zbl ? p->zbl.cutoff * ell : 0.0,
        .inv_ell = 1.0 / ell, /* angstrom -> model length */
    };
    step->descriptor_length = 0;

    /* the atoms grouped by system (counting sort, atom order kept within a system) */
    const size_t bytes = sizeof(int64_t) * (size_t)(4 * ns + 1) + sizeof(int32_t) *
                         (size_t)(2 * n + ns);
    nnpops_status st =
        nnpops__buf_reserve(&scratch->slot[SLOT_SYSTEMS], bytes, "TensorNet systems");
    if (st != NNPOPS_OK) return st;
    int64_t *start = scratch->slot[SLOT_SYSTEMS].ptr;
    int64_t *sys_edges = start + ns + 1, *sys_zbl = sys_edges + ns, *bad = sys_zbl + ns;
    int32_t *order = (int32_t *)(bad + ns), *loc = order + n, *rc = loc + n;
    memset(start, 0, sizeof(int64_t) * (size_t)(3 * ns + 1));
    for (int64_t i = 0; i < n; i++) start[step->batch[i] + 1]++;
    for (int64_t k = 0; k < ns; k++) start[k + 1] += start[k];
    for (int64_t i = 0; i < n; i++) {
        const int32_t b = step->batch[i];
        const int64_t at = start[b] + sys_edges[b]++; /* sys_edges as a cursor first */
        order[at] = (int32_t)i;
        loc[i] = (int32_t)(at - start[b]);
    }
    memset(sys_edges, 0, sizeof(int64_t) * (size_t)ns);
    /* each system's edges and ZBL pairs (an entry belongs to its center's system) */
    for (int64_t c = 0; c < n; c++) {
        const int32_t b = step->batch[c];
        for (int64_t e = step->center_start[c]; e < step->center_start[c + 1]; e++) {
            const double r = step->pair_dist[e];
            if (r >= job.lo && r < job.hi) sys_edges[b]++;
            if (r < job.zcut) sys_zbl[b]++;
        }
    }
    int64_t most_a = 0, most_e = 0, most_z = 0, busy = 0;
    for (int64_t k = 0; k < ns; k++) {
        const int64_t na = start[k + 1] - start[k];
        if (na > most_a) most_a = na;
        if (na + sys_edges[k] > most_e) most_e = na + sys_edges[k];
        if (sys_zbl[k] > most_z) most_z = sys_zbl[k];
        busy += na > 0;
    }
    /* threads: no more than the systems with atoms */
    int nt = scratch->threads < busy ? scratch->threads : (int)(busy > 0 ? busy : 1);
    if (nt > 1) nt = nnpops__pool_threads(&scratch->pool, nt);
    if (nt > 1 && (st = nnpops__scratch_subs(scratch, nt - 1)) != NNPOPS_OK) return st;
    for (int t = 0; t < nt; t++) {
        nnpops__scratch *ts = t == 0 ? scratch : &scratch->sub[t - 1];
        if ((st = tn_thread_buffers(p, job.f32, ts, most_a, most_e, most_z)) != NNPOPS_OK)
            return st;
    }
    job.sys_start = start;
    job.order = order;
    job.loc = loc;
    job.sys_edges = sys_edges;
    job.sys_zbl = sys_zbl;
    job.rc = rc;
    job.bad = bad;
    scratch->threads_used = nt > 1 ? nnpops__pool_run(&scratch->pool, nt, (int)ns, tn_share, &job)
                                   : 1;
    if (nt <= 1)
        for (int64_t k = 0; k < ns; k++) tn_share(&job, (int)k, 0);
    for (int64_t k = 0; k < ns; k++) {
        if (rc[k] == NNPOPS__TN_OK) continue;
        if (rc[k] == NNPOPS__TN_BAD_Z)
            return nnpops__fail(NNPOPS_ERROR_UNKNOWN_ELEMENT,
                                "atom %lld: its atomic number is outside the TensorNet model's "
                                "tables",
                                (long long)bad[k]);
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "tensornet: a bad edge in system %lld",
                            (long long)k);
    }
    return NNPOPS_OK;
}

/* The model's `mean` (member -1: the members' mean), the energy each system gets once. */
static double tn_system_energy(const nnpops_model *model, int32_t member) {
    tn_impl *p = model->impl;
    if (member >= 0) return *tn_member_view(p, member).mean;
    double sum = 0.0;
    for (int m = 0; m < p->n_members; m++) sum += *tn_member_view(p, m).mean;
    return sum / p->n_members;
}

void nnpops__tn_parts_of(const nnpops_model *model, nnpops__tn_parts *parts) {
    const tn_impl *p = model->impl;
    parts->shape = &p->shape;
    parts->w64 = &p->w64;
    parts->w32 = p->arena32 ? &p->w32 : NULL;
    parts->mean = p->mean;
    parts->zbl = p->has_zbl ? &p->zbl : NULL;
    parts->n_members = p->n_members;
}

const nnpops__potential_vt nnpops__tensornet_vt = {
    .type = "tensornet",
    .load = tn_load,
    .destroy = tn_destroy,
    .neighbor_lists = tn_lists,
    .system_energy = tn_system_energy,
    .compute_cpu = tn_compute_cpu,
#ifdef NNPOPS_HAVE_CUDA
    .upload = nnpops__tn_upload,
    .release_device = nnpops__tn_release_device,
    .cuda_work_bytes = nnpops__tn_cuda_work_bytes,
    .compute_cuda = nnpops__tn_compute_cuda,
    .cuda_prepare = nnpops__tn_cuda_prepare,
    .cuda_release_state = nnpops__tn_cuda_release_state,
#endif
};
