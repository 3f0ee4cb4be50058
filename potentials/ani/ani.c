/*
 * ani.c - the ANI potential (ANI-2x, ANI-1x, ...): loading a `type: ani` model and computing
 * one step on the CPU, torchani's model exactly (docs/model-format.md, section 3).
 *
 * Load: the `ani` mapping is validated key by key (errors name the YAML file and line), every
 * tensor m{member}.{element}.l{layer}.{weight,bias} is fetched with its exact shape and copied into
 * one weight arena in the compute precision (layout in ani.h: per species and layer the members'
 * weights are contiguous, [member][out][in]).  Lengths of a model not in angstrom are converted
 * once here (cutoffs and shifts times L, etas divided by L^2), so the AEV is unchanged.
 *
 * Compute (one step, inputs in angstrom, half pair list within the radial cutoff):
 *  1. per-center neighbor lists (CSR, kernels/cpu/center_neighbors.c) of the local atoms from the half list;
 *  2. local atoms grouped by species (counting sort, atom order kept inside a species);
 *  3. per species, blocks of up to ANI_BLOCK atoms: AEV block (feature-major [aev_len][block]),
 *     the first layer of all members as one GEMM, then per member the hidden layers with CELU
 *     and the linear output; per-atom member outputs are summed in double;
 *  4. backward (when gradients are wanted), per member: the output layer's seed (1/M for the
 *     ensemble mean, 1 for a single member), transposed layers and CELU', giving dE/dZ_0 of
 *     every member; then dE/dAEV = sum_m W_0,m^T dZ_0,m as one GEMM and the AEV adjoint adds
 *     dE/dr into the pair gradients (double).
 * The AEV restricted to the species present: a step whose atoms (ghosts included) lack some of
 * the model's species computes only the AEV entries of the present species (the others are
 * exactly zero, with no terms behind them; nnpops__aev_desc_restrict, with each atom's species
 * ranked among the present ones) and runs the first layers over that shorter input, with the
 * first layers' matching columns copied once per species set into the context's scratch (the last
 * set is kept; the GPU path does the same, potentials/ani/ani_cuda.c).
 * atom_energy[i] = (mean or chosen member of the outputs, double) + self energy (double);
 * member_atom_energy[i*M + m] = member m's output + self energy, so that each member's
 * system energy is comparable with the ensemble energy (their mean is the ensemble energy).
 * float32 models run the AEV, the layers and the backward in float; energies, the ensemble mean,
 * self energies and pair gradients are accumulated in double.  Both precisions come from one body
 * (the file includes itself with REAL = float, then double).  Scratch: slots 4..16 of the context
 * (grown, never shrunk; no allocation once the sizes are stable).
 */
#ifndef NNPOPS__ANI_BODY

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "potentials/ani/ani.h"

/* Atoms per block (columns of the feature-major matrices; whole vectors for the dense kernels). */
#define ANI_BLOCK 64
_Static_assert(ANI_BLOCK % NNPOPS__DENSE_PAD == 0, "ANI_BLOCK must be a multiple of the padding");

/* Scratch slots used by this potential. */
enum {
    SLOT_START = 4, /* CSR starts, int64 [n_local + 1] */
    SLOT_ENTRY = 5, /* CSR entries, int64 [2 n_pairs] */
    SLOT_ORDER = 6, /* local atoms sorted by species, int32 [n_local] */
    SLOT_WORK = 7,  /* AEV kernel work space */
    SLOT_AEV = 8,   /* AEV block, then dE/dAEV block: REAL [aev_len][ANI_BLOCK] */
    SLOT_MLP = 9,   /* layer buffers of one block (see mlp_layout) */
    SLOT_BLOCKS = 10, /* the step's blocks and their shares (ani_blk) */
    SLOT_ENERGY = 11, /* the members' outputs of one block, double [M][ANI_BLOCK] */
    SLOT_RANK = 12, /* species ranked among the present ones, int32 [n_atoms] */
    SLOT_SET = 13,  /* the restricted first layers of the last species set (ani_set_cpu) */
    SLOT_MAP = 14,  /* the restricted entries' indices in the full AEV, int32 [aev_len] */
    SLOT_PANEL = 15, /* float32: the model's first layers in panels (ani_panels_cpu) */
    SLOT_SPLIT = 16  /* split mode: every block's AEV, first layer and members' outputs */
};
_Static_assert(SLOT_SPLIT < NNPOPS__SCRATCH_SLOTS, "scratch slots");

/* ---- load ------------------------------------------------------------------------------------ */

static nnpops_status cfg_error(const nnpops__cfg *cfg, nnpops__node node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static nnpops_status cfg_error(const nnpops__cfg *cfg, nnpops__node node, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s", nnpops__cfg_file(cfg),
                        nnpops__cfg_line(cfg, node), msg);
}

/* A required positive finite number. */
static nnpops_status get_positive(const nnpops__cfg *cfg, nnpops__node map, const char *key,
                                  const char *what, double *out) {
    nnpops__node n;
    nnpops_status st = nnpops__cfg_get(cfg, map, key, 1, &n);
    if (st == NNPOPS_OK) st = nnpops__cfg_double(cfg, n, what, out);
    if (st != NNPOPS_OK) return st;
    if (!(*out > 0.0) || !isfinite(*out)) return cfg_error(cfg, n, "%s must be > 0", what);
    return NNPOPS_OK;
}

/* A required non-empty list of at most NNPOPS__AEV_MAX_TERMS numbers. */
static nnpops_status get_list(const nnpops__cfg *cfg, nnpops__node map, const char *key,
                              const char *what, double *out, int32_t *count) {
    nnpops__node n;
    int64_t len = 0;
    nnpops_status st = nnpops__cfg_get(cfg, map, key, 1, &n);
    if (st == NNPOPS_OK) st = nnpops__cfg_doubles(cfg, n, what, out, NNPOPS__AEV_MAX_TERMS, 0, &len);
    if (st != NNPOPS_OK) return st;
    if (len < 1) return cfg_error(cfg, n, "%s must hold at least one number", what);
    *count = (int32_t)len;
    return NNPOPS_OK;
}

static nnpops_status parse_descriptor(nnpops_model *model, const nnpops__cfg *cfg,
                                      nnpops__node ani, nnpops__aev_desc *d) {
    static const char *const radial_keys[] = {"cutoff", "eta", "shifts", NULL};
    static const char *const angular_keys[] = {"cutoff", "eta", "zeta", "shifts", "sections",
                                               NULL};
    nnpops__node radial, angular;
    nnpops_status st;
    memset(d, 0, sizeof *d);
    d->n_species = model->n_species;

    if ((st = nnpops__cfg_get(cfg, ani, "radial", 1, &radial)) != NNPOPS_OK) return st;
    st = nnpops__cfg_check_keys(cfg, radial, "ani.radial", radial_keys);
    if (st != NNPOPS_OK) return st;
    if ((st = get_positive(cfg, radial, "cutoff", "ani.radial.cutoff", &d->rc_r)) != NNPOPS_OK ||
        (st = get_list(cfg, radial, "eta", "ani.radial.eta", d->eta_r, &d->n_eta_r)) != NNPOPS_OK ||
        (st = get_list(cfg, radial, "shifts", "ani.radial.shifts", d->shf_r, &d->n_shf_r)) !=
            NNPOPS_OK) {
        return st;
    }

    if ((st = nnpops__cfg_get(cfg, ani, "angular", 1, &angular)) != NNPOPS_OK) return st;
    st = nnpops__cfg_check_keys(cfg, angular, "ani.angular", angular_keys);
    if (st != NNPOPS_OK) return st;
    if ((st = get_positive(cfg, angular, "cutoff", "ani.angular.cutoff", &d->rc_a)) != NNPOPS_OK ||
        (st = get_list(cfg, angular, "eta", "ani.angular.eta", d->eta_a, &d->n_eta_a)) !=
            NNPOPS_OK ||
        (st = get_list(cfg, angular, "zeta", "ani.angular.zeta", d->zeta, &d->n_zeta)) !=
            NNPOPS_OK ||
        (st = get_list(cfg, angular, "shifts", "ani.angular.shifts", d->shf_a, &d->n_shf_a)) !=
            NNPOPS_OK ||
        (st = get_list(cfg, angular, "sections", "ani.angular.sections", d->shf_z,
                       &d->n_shf_z)) != NNPOPS_OK) {
        return st;
    }
    if (d->rc_a > d->rc_r) {
        nnpops__node n;
        nnpops__cfg_get(cfg, angular, "cutoff", 1, &n);
        return cfg_error(cfg, n,
                         "ani.angular.cutoff (%.17g) must not exceed ani.radial.cutoff (%.17g)",
                         d->rc_a, d->rc_r);
    }
    for (int z = 0; z < d->n_zeta; z++) {
        if (!(d->zeta[z] > 0.0)) {
            nnpops__node n;
            nnpops__cfg_get(cfg, angular, "zeta", 1, &n);
            return cfg_error(cfg, n, "ani.angular.zeta[%d] must be > 0", z);
        }
    }

    const int64_t S = model->n_species;
    const int64_t R = (int64_t)d->n_eta_r * d->n_shf_r;
    const int64_t A = (int64_t)d->n_eta_a * d->n_zeta * d->n_shf_a * d->n_shf_z;
    const int64_t L = S * R + S * (S + 1) / 2 * A;
    if (L > (1 << 20)) {
        return cfg_error(cfg, ani, "the AEV would have %lld values (at most %d supported)",
                         (long long)L, 1 << 20);
    }
    d->radial_len = (int32_t)R;
    d->angular_len = (int32_t)A;
    d->aev_len = (int32_t)L;

    /* lengths to angstrom */
    const double ell = model->length_to_A;
    if (ell != 1.0) {
        d->rc_r *= ell;
        d->rc_a *= ell;
        for (int i = 0; i < d->n_shf_r; i++) d->shf_r[i] *= ell;
        for (int i = 0; i < d->n_shf_a; i++) d->shf_a[i] *= ell;
        for (int i = 0; i < d->n_eta_r; i++) d->eta_r[i] /= ell * ell;
        for (int i = 0; i < d->n_eta_a; i++) d->eta_a[i] /= ell * ell;
    }
    return NNPOPS_OK;
}

static nnpops_status parse_networks(nnpops_model *model, const nnpops__cfg *cfg,
                                    nnpops__node ani, nnpops__ani *a) {
    nnpops__node nets;
    nnpops_status st;
    if ((st = nnpops__cfg_get(cfg, ani, "networks", 1, &nets)) != NNPOPS_OK) return st;
    if (!nnpops__cfg_is_map(cfg, nets)) {
        return cfg_error(cfg, nets, "ani.networks must be a mapping {element: [widths]}");
    }
    int seen[NNPOPS__MAX_SPECIES] = {0};
    const int64_t n = nnpops__cfg_len(cfg, nets);
    for (int64_t i = 0; i < n; i++) {
        nnpops__node key = nnpops__cfg_key(cfg, nets, i), val = nnpops__cfg_value(cfg, nets, i);
        const char *sym;
        if ((st = nnpops__cfg_str(cfg, key, "ani.networks key", &sym)) != NNPOPS_OK) return st;
        const int z = nnpops__element_from_symbol(sym);
        const int s = (z > 0 && z < 119) ? model->z_to_species[z] : -1;
        if (s < 0) {
            return cfg_error(cfg, key, "ani.networks: element '%.32s' is not in species", sym);
        }
        if (seen[s]) return cfg_error(cfg, key, "ani.networks: element '%s' appears twice", sym);
        seen[s] = 1;
        const int64_t len = nnpops__cfg_len(cfg, val);
        if (!nnpops__cfg_is_seq(cfg, val) || len < 2 || len > NNPOPS__ANI_MAX_LAYERS + 1) {
            return cfg_error(cfg, val,
                             "ani.networks.%s must be a list of 2 to %d layer widths", sym,
                             NNPOPS__ANI_MAX_LAYERS + 1);
        }
        for (int64_t l = 0; l < len; l++) {
            nnpops__node item = nnpops__cfg_item(cfg, val, l);
            char what[64];
            int64_t w;
            snprintf(what, sizeof what, "ani.networks.%s[%lld]", sym, (long long)l);
            if ((st = nnpops__cfg_int(cfg, item, what, &w)) != NNPOPS_OK) return st;
            if (l == 0 && w != a->aev.aev_len) {
                return cfg_error(cfg, item, "%s is %lld, but the AEV has %d values", what,
                                 (long long)w, (int)a->aev.aev_len);
            }
            if (l == len - 1 && w != 1) {
                return cfg_error(cfg, item, "%s (the output layer) must be 1, not %lld", what,
                                 (long long)w);
            }
            if (w < 1 || w > NNPOPS__ANI_MAX_WIDTH) {
                return cfg_error(cfg, item, "%s must be between 1 and %d, not %lld", what,
                                 NNPOPS__ANI_MAX_WIDTH, (long long)w);
            }
            a->width[s][l] = (int32_t)w;
        }
        a->n_layers[s] = (int32_t)(len - 1);
    }
    for (int s = 0; s < model->n_species; s++) {
        if (!seen[s]) {
            return cfg_error(cfg, nets, "ani.networks has no network for species %s",
                             nnpops__element_symbols[model->species_z[s]]);
        }
    }
    return NNPOPS_OK;
}

static nnpops_status ani_load(nnpops_model *model, const nnpops__cfg *cfg, nnpops__node root,
                              const nnpops__weights *weights) {
    static const char *const ani_keys[] = {"radial",     "angular",  "self_energies",
                                           "ensemble_size", "activation", "networks",
                                           "tensors",    NULL};
    static const char *const act_keys[] = {"type", "alpha", NULL};
    static const char *const pattern = "m{member}.{element}.l{layer}.{kind}";
    const char *file = nnpops__cfg_file(cfg);
    nnpops__node ani, n;
    nnpops_status st;

    if (model->n_species > NNPOPS__MAX_SPECIES) {
        /* its per-species tables hold at most NNPOPS__MAX_SPECIES */
        nnpops__node sp;
        if ((st = nnpops__cfg_get(cfg, root, "species", 1, &sp)) != NNPOPS_OK) return st;
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: species must be a list of 1 to %d element symbols for an ani "
                            "model (it has %d)",
                            nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, sp), NNPOPS__MAX_SPECIES,
                            (int)model->n_species);
    }
    if ((st = nnpops__cfg_get(cfg, root, "ani", 1, &ani)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_check_keys(cfg, ani, "ani", ani_keys)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_get(cfg, root, "lj", 0, &n)) != NNPOPS_OK) return st;
    if (n) return cfg_error(cfg, n, "an ani model must not have an 'lj' mapping");
    if (!weights) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: ANI model needs a weights file (a 'weights: {file, sha256}' "
                            "mapping)",
                            file);
    }

    nnpops__ani *a = calloc(1, sizeof *a);
    if (!a) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for an ANI model");
    model->impl = a; /* destroyable from here on */
    a->n_species = model->n_species;
    a->precision = model->precision;
    a->elem_size = model->precision == NNPOPS_FLOAT32 ? sizeof(float) : sizeof(double);

    if ((st = parse_descriptor(model, cfg, ani, &a->aev)) != NNPOPS_OK) return st;

    /* self energies */
    if ((st = nnpops__cfg_get(cfg, ani, "self_energies", 1, &n)) != NNPOPS_OK ||
        (st = nnpops__cfg_doubles(cfg, n, "ani.self_energies", a->self_energy, model->n_species,
                                  1, NULL)) != NNPOPS_OK) {
        return st;
    }
    /* ensemble size */
    int64_t ens;
    if ((st = nnpops__cfg_get(cfg, ani, "ensemble_size", 1, &n)) != NNPOPS_OK ||
        (st = nnpops__cfg_int(cfg, n, "ani.ensemble_size", &ens)) != NNPOPS_OK) {
        return st;
    }
    if (ens < 1 || ens > NNPOPS__ANI_MAX_ENSEMBLE) {
        return cfg_error(cfg, n, "ani.ensemble_size must be between 1 and %d, not %lld",
                         NNPOPS__ANI_MAX_ENSEMBLE, (long long)ens);
    }
    a->ensemble = (int32_t)ens;

    /* activation */
    nnpops__node act, type_node;
    const char *type;
    if ((st = nnpops__cfg_get(cfg, ani, "activation", 1, &act)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_check_keys(cfg, act, "ani.activation", act_keys)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_get(cfg, act, "type", 1, &type_node)) != NNPOPS_OK ||
        (st = nnpops__cfg_str(cfg, type_node, "ani.activation.type", &type)) != NNPOPS_OK) {
        return st;
    }
    if (strcmp(type, "celu") != 0) {
        return cfg_error(cfg, type_node,
                         "ani.activation.type '%.64s' is not supported (only celu)", type);
    }
    if ((st = get_positive(cfg, act, "alpha", "ani.activation.alpha", &a->alpha)) != NNPOPS_OK) {
        return st;
    }

    /* networks, tensor names */
    if ((st = parse_networks(model, cfg, ani, a)) != NNPOPS_OK) return st;
    const char *tensors;
    if ((st = nnpops__cfg_get(cfg, ani, "tensors", 1, &n)) != NNPOPS_OK ||
        (st = nnpops__cfg_str(cfg, n, "ani.tensors", &tensors)) != NNPOPS_OK) {
        return st;
    }
    if (strcmp(tensors, pattern) != 0) {
        return cfg_error(cfg, n, "ani.tensors must be \"%s\" (format version 1), not \"%.100s\"",
                         pattern, tensors);
    }

    /* arena layout */
    size_t cur = 0, n_tensors = 0;
    for (int s = 0; s < a->n_species; s++) {
        int64_t hidden_sum = 0;
        for (int l = 0; l < a->n_layers[s]; l++) {
            const size_t in = (size_t)a->width[s][l], out = (size_t)a->width[s][l + 1];
            a->w_off[s][l] = cur;
            cur += (a->ensemble * out * in + 15) & ~(size_t)15;
            a->b_off[s][l] = cur;
            cur += (a->ensemble * out + 15) & ~(size_t)15;
            n_tensors += 2 * (size_t)a->ensemble;
            if (l + 1 < a->n_layers[s]) {
                if ((int32_t)out > a->max_width) a->max_width = (int32_t)out;
                if (l == 0 && (int32_t)out > a->max_width1) a->max_width1 = (int32_t)out;
                if (l >= 1) hidden_sum += (int64_t)out;
            }
        }
        if (hidden_sum > a->max_hidden_sum) a->max_hidden_sum = (int32_t)hidden_sum;
    }
    if (a->max_width < 1) a->max_width = 1;
    if (a->max_width1 < 1) a->max_width1 = 1;
    const int64_t have = nnpops__weights_count(weights);
    if (have != (int64_t)n_tensors) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: the weights file holds %lld tensors, but the model describes "
                            "%zu (%d members, %d species)",
                            file, (long long)have, n_tensors, (int)a->ensemble,
                            (int)a->n_species);
    }
    /* Every tensor's presence and shape first: the arena's size comes from the YAML, and a YAML
     * that does not match its weights (widths far larger than the tensors) must be refused from
     * the weights file, whose size bounds the real need, before a huge allocation is tried. */
    for (int32_t m = 0; m < a->ensemble; m++) {
        for (int s = 0; s < a->n_species; s++) {
            for (int l = 0; l < a->n_layers[s]; l++) {
                for (int kind = 0; kind < 2; kind++) {
                    char name[128];
                    snprintf(name, sizeof name, "m%d.%s.l%d.%s", (int)m,
                             nnpops__element_symbols[model->species_z[s]], l,
                             kind ? "bias" : "weight");
                    const int64_t shape[2] = {a->width[s][l + 1], a->width[s][l]};
                    const void *data;
                    st = nnpops__weights_get_f32(weights, name, kind ? 1 : 2, shape, &data);
                    if (st != NNPOPS_OK) return st;
                }
            }
        }
    }
    a->arena_elems = cur;
    const size_t bytes = ((cur ? cur : 1) * a->elem_size + 63) & ~(size_t)63;
    a->arena = aligned_alloc(64, bytes);
    if (!a->arena) {
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY,
                            "out of memory allocating %zu bytes of ANI weights", bytes);
    }
    memset(a->arena, 0, bytes);

    /* tensors */
    for (int32_t m = 0; m < a->ensemble; m++) {
        for (int s = 0; s < a->n_species; s++) {
            const char *el = nnpops__element_symbols[model->species_z[s]];
            for (int l = 0; l < a->n_layers[s]; l++) {
                const int64_t in = a->width[s][l], out = a->width[s][l + 1];
                for (int kind = 0; kind < 2; kind++) {
                    char name[128];
                    snprintf(name, sizeof name, "m%d.%s.l%d.%s", (int)m, el, l,
                             kind ? "bias" : "weight");
                    const int64_t shape[2] = {out, in};
                    const void *data;
                    st = nnpops__weights_get_f32(weights, name, kind ? 1 : 2, shape, &data);
                    if (st != NNPOPS_OK) return st;
                    const size_t count = (size_t)(kind ? out : out * in);
                    const size_t off = kind ? a->b_off[s][l] + (size_t)m * (size_t)out
                                            : a->w_off[s][l] + (size_t)m * (size_t)(out * in);
                    const unsigned char *src = data;
                    for (size_t k = 0; k < count; k++) {
                        float v;
                        memcpy(&v, src + 4 * k, 4);
                        if (!isfinite(v)) {
                            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                                "%s: tensor %s: value %zu is not finite", file,
                                                name, k);
                        }
                        if (a->precision == NNPOPS_FLOAT32)
                            ((float *)a->arena)[off + k] = v;
                        else
                            ((double *)a->arena)[off + k] = (double)v;
                    }
                }
            }
        }
    }

    model->cutoff = a->aev.rc_r > a->aev.rc_a ? a->aev.rc_r : a->aev.rc_a;
    model->ensemble_size = a->ensemble;
    return NNPOPS_OK;
}

static void ani_destroy(nnpops_model *model) {
    nnpops__ani *a = model->impl;
    if (a) {
        free(a->arena);
        free(a);
    }
    model->impl = NULL;
}

/* ---- compute --------------------------------------------------------------------------------- */

/* Offsets (in values) of the layer buffers of one block inside SLOT_MLP:
 *   z0    [M * max_width1][B]   first-layer pre-activations of all members, then dE/dZ_0
 *   zh    [max_hidden_sum][B]   pre-activations of the hidden layers 2.. of the current member
 *   act   [2][max_width][B]     activations (ping-pong)
 *   grad  [2][max_width][B]     dE/dA, dE/dZ (ping-pong)
 *   y     [B]                   outputs / output seed */
typedef struct mlp_layout {
    size_t z0, zh, act, grad, y, total;
} mlp_layout;

static mlp_layout mlp_layout_of(const nnpops__ani *a) {
    const size_t B = ANI_BLOCK;
    mlp_layout o;
    size_t cur = 0;
    o.z0 = cur;
    cur += (size_t)a->ensemble * (size_t)a->max_width1 * B;
    o.zh = cur;
    cur += (size_t)a->max_hidden_sum * B;
    o.act = cur;
    cur += 2 * (size_t)a->max_width * B;
    o.grad = cur;
    cur += 2 * (size_t)a->max_width * B;
    o.y = cur;
    cur += B;
    o.total = cur;
    return o;
}

/* The AEV and first layers one step uses: the model's, or those restricted to its species set.
 * In SLOT_SET: this header, then per present species its first layer, all members, [M out][Lr],
 * and in float32 the same in panels (ani_panels_cpu) (each 64-byte aligned, model precision). */
typedef struct ani_set_cpu {
    uint32_t present; /* the set; 0: none held (never made, or being made again) */
    nnpops__aev_desc desc;
    size_t off[NNPOPS__MAX_SPECIES];  /* bytes from the header's start */
    size_t poff[NNPOPS__MAX_SPECIES]; /* the panels (float32; else 0) */
} ani_set_cpu;
#define ANI_SET_HEAD (((sizeof(ani_set_cpu)) + 63) & ~(size_t)63)

/* Float32: the first layers (all members stacked) also in the few-column kernel's panels
 * (nnpops__dense_pack_panels_cpu), so that its forward (a block of at most 12 atoms of a species:
 * small molecules, a species' last block) reads vectors of output rows with no packing, and in
 * 64-byte vectors where the machine has them (it packs in 32-byte ones).  The 13-atom alanine's
 * float32 step takes 10 % less time; in float64 the extra weights read per step cost
 * more than the packing saves (+5 to +15 % there), and the panels of the later layers gained
 * nothing: neither is made.  The restricted first layers' panels live in SLOT_SET beside them;
 * the model's own (every species present) in SLOT_PANEL: this header, then a buffer of the arena's
 * shape, a first layer's panels at its arena offset (the pages of the rest never touched), made
 * at the first step that uses them. */
typedef struct ani_panels_cpu {
    uint32_t made; /* 1: every species' first layer is in panels */
} ani_panels_cpu;
#define ANI_PANELS_HEAD (((sizeof(ani_panels_cpu)) + 63) & ~(size_t)63)

typedef struct ani_inputs {
    const nnpops__aev_desc *desc;
    const int32_t *species;               /* the species as the AEV kernels take them */
    const void *w0[NNPOPS__MAX_SPECIES];  /* first layers, [M out][desc->aev_len] */
    const void *w0p[NNPOPS__MAX_SPECIES]; /* float32: the same in panels (else NULL) */
} ani_inputs;

/* The model's own first layers in panels (float32; see ani_panels_cpu), made at the first call. */
static nnpops_status ani_panels_of(const nnpops__ani *a, nnpops__scratch *scratch,
                                   ani_inputs *in) {
    nnpops__buf *b = &scratch->slot[SLOT_PANEL];
    const void *before = b->ptr;
    nnpops_status st = nnpops__buf_reserve(b, ANI_PANELS_HEAD + sizeof(float) * a->arena_elems,
                                           "ANI first layers in panels");
    if (st != NNPOPS_OK) return st;
    ani_panels_cpu *h = b->ptr;
    float *base = (float *)((char *)b->ptr + ANI_PANELS_HEAD);
    if (b->ptr != before) memset(h, 0, sizeof *h);
    for (int s = 0; s < a->n_species; s++) {
        const size_t o = a->w_off[s][0];
        if (!h->made)
            nnpops__dense_pack_panels_cpu_f32(a->aev.aev_len, (int64_t)a->ensemble * a->width[s][1],
                                              (const float *)a->arena + o, base + o);
        in->w0p[s] = base + o;
    }
    h->made = 1;
    return NNPOPS_OK;
}

void nnpops__ani_restricted_first_layer(const nnpops__ani *a, int s, const int32_t *map,
                                        int64_t Lr, int transposed, void *dst) {
    const size_t es = a->elem_size;
    const int64_t L = a->aev.aev_len, rows = (int64_t)a->ensemble * a->width[s][1];
    const char *w = (const char *)a->arena + es * a->w_off[s][0];
    char *d = dst;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < Lr; t++)
            memcpy(d + es * (size_t)(transposed ? t * rows + r : r * Lr + t),
                   w + es * (size_t)(r * L + map[t]), es);
}

/* The step's AEV and first layers (see the header): the restricted ones when some species is
 * absent (the set's first layers made when the set differs from the last one). */
static nnpops_status ani_inputs_of(const nnpops__ani *a, nnpops__scratch *scratch,
                                   nnpops__step *step, ani_inputs *in) {
    const uint32_t all = nnpops__species_all(a->n_species);
    const uint32_t present = nnpops__species_present(step->species, step->n_atoms);
    in->desc = &a->aev;
    in->species = step->species;
    step->descriptor_length = a->aev.aev_len;
    const int panels = a->precision == NNPOPS_FLOAT32;
    nnpops_status st;
    for (int s = 0; s < a->n_species; s++) {
        in->w0[s] = (const char *)a->arena + a->elem_size * a->w_off[s][0];
        in->w0p[s] = NULL;
    }
    if (present == all && panels && (st = ani_panels_of(a, scratch, in)) != NNPOPS_OK) return st;
    if (present == all || present == 0) return NNPOPS_OK;
    if ((st = nnpops__buf_reserve(&scratch->slot[SLOT_RANK],
                                  sizeof(int32_t) * (size_t)step->n_atoms, "ANI species ranks")) !=
        NNPOPS_OK)
        return st;
    int32_t rank[NNPOPS__MAX_SPECIES];
    nnpops__species_ranks(present, a->n_species, rank);
    int32_t *ranks = scratch->slot[SLOT_RANK].ptr;
    for (int64_t i = 0; i < step->n_atoms; i++) ranks[i] = rank[step->species[i]];
    in->species = ranks;
    ani_set_cpu *set = scratch->slot[SLOT_SET].ptr;
    if (!set || set->present != present) {
        const int64_t L = a->aev.aev_len, M = a->ensemble;
        const size_t es = a->elem_size;
        if ((st = nnpops__buf_reserve(&scratch->slot[SLOT_MAP], sizeof(int32_t) * (size_t)L,
                                      "ANI restricted AEV map")) != NNPOPS_OK)
            return st;
        int32_t *map = scratch->slot[SLOT_MAP].ptr;
        ani_set_cpu head;
        memset(&head, 0, sizeof head);
        const int64_t Lr = nnpops__aev_desc_restrict(&a->aev, present, &head.desc, rank, map);
        size_t total = ANI_SET_HEAD;
        for (int s = 0; s < a->n_species; s++) {
            if (rank[s] < 0) continue;
            const size_t bytes = ((size_t)(M * a->width[s][1] * Lr) * es + 63) & ~(size_t)63;
            head.off[s] = total;
            total += bytes;
            if (panels) {
                head.poff[s] = total;
                total += bytes;
            }
        }
        if (set) set->present = 0; /* until it is made again */
        if ((st = nnpops__buf_reserve(&scratch->slot[SLOT_SET], total,
                                      "ANI restricted first layers")) != NNPOPS_OK)
            return st;
        set = scratch->slot[SLOT_SET].ptr;
        for (int s = 0; s < a->n_species; s++)
            if (head.off[s]) {
                char *w0 = (char *)set + head.off[s];
                nnpops__ani_restricted_first_layer(a, s, map, Lr, 0, w0);
                if (panels)
                    nnpops__dense_pack_panels_cpu_f32(Lr, M * a->width[s][1], (const float *)w0,
                                                      (float *)((char *)set + head.poff[s]));
            }
        head.present = present;
        memcpy(set, &head, sizeof head);
    }
    in->desc = &set->desc;
    step->descriptor_length = set->desc.aev_len;
    for (int s = 0; s < a->n_species; s++) {
        in->w0[s] = set->off[s] ? (const char *)set + set->off[s] : NULL;
        in->w0p[s] = set->poff[s] ? (const char *)set + set->poff[s] : NULL;
    }
    return NNPOPS_OK;
}

/* Threads (scratch->threads > 1), two modes.  Block mode: the blocks of a step are dealt to the
 * shares, the largest first (cost: atoms times the first layer's width), each to the share with
 * the least work so far; a share runs its blocks in order on one thread with its own block buffers
 * (thread 0: the context's scratch, thread t: scratch->sub[t - 1]).  Split mode, when that would
 * leave threads idle (fewer blocks than threads, as a small molecule's one block per species, or
 * blocks of unequal cost) and every member runs: each block's work is cut into phases of units
 * that run on any thread, every block's intermediate results kept in SLOT_SPLIT between them:
 * the AEV (ANI_SPLIT_CENTERS atoms a unit); the first layer's rows (ANI_SPLIT_ROWS a unit); the
 * members (a unit each: the hidden layers, forward and backward); dE/dAEV's rows
 * (ANI_SPLIT_FEATURES a unit); the atom energies and the AEV adjoint (ANI_SPLIT_CENTERS atoms a
 * unit).  Every output is formed by the same operations in the same
 * order in both modes (each center's AEV and adjoint are its own; the dense kernels' outputs do not
 * depend on which rows a call covers, kernels/cpu/mlp.c; members' outputs are summed in member
 * order either way).  Blocks write disjoint atom energies, and the AEV adjoint adds to the shared
 * pair gradients atomically, in an order that does not change their bits
 * (nnpops__aev_backward_shared_cpu): the results are the same bits for any thread count. */
#define ANI_SPLIT_MAX_BLOCKS 12 /* split mode for at most this many blocks, */
#define ANI_SPLIT_SPREAD 1.15   /* when the blocks' shares are this uneven (ani_deal) */
#define ANI_SPLIT_ROWS 256      /* first-layer rows per unit (a multiple of the panels' rows) */
#define ANI_SPLIT_FEATURES 64   /* dE/dAEV rows per unit */
#define ANI_SPLIT_CENTERS 2     /* atoms per unit of the AEV and of the energies and AEV adjoint */
_Static_assert(ANI_SPLIT_ROWS % NNPOPS__DENSE_PANEL == 0, "split rows on panel boundaries");
enum {
    ANI_PHASE_AEV, /* split mode's phases, in order */
    ANI_PHASE_FIRST,
    ANI_PHASE_MEMBER,
    ANI_PHASE_DAEV,
    ANI_PHASE_FINISH
};
typedef struct ani_blk {
    int32_t s, share;
    int64_t b, n; /* atoms order[b .. b + n) of species s */
    int64_t cost;
} ani_blk;

typedef struct ani_job {
    const nnpops__ani *a;
    nnpops__scratch *scratch;
    const nnpops__step *step;
    const ani_inputs *in;
    const int64_t *start, *entry;
    const int32_t *order;
    const mlp_layout *lay;
    const ani_blk *blk;
    int64_t n_blk;
    int shared; /* pair gradients shared between threads */
    /* split mode (split: 1): the job's threads (one share each), the units of each phase, the
     * barrier the threads meet at between the phases; block k's AEV (then dE/dAEV) [L][B] at
     * split_aev + k split_aev_stride and first layer [M w1][B] at split_z0 + k split_z0_stride
     * (values of the model's precision), its members' outputs [M][B] at split_e + k M B */
    int split, nt;
    int64_t units[ANI_PHASE_FINISH + 1];
    nnpops__barrier *barrier;
    void *split_aev, *split_z0;
    int64_t split_aev_stride, split_z0_stride;
    double *split_e;
} ani_job;

/* Split mode: what a phase cuts block k into (first-layer rows, members, dE/dAEV rows, or atoms
 * for the AEV and the finish), and how many of them make a unit. */
static int64_t ani_extent(const ani_job *j, int phase, int64_t k) {
    const nnpops__ani *a = j->a;
    switch (phase) {
    case ANI_PHASE_FIRST: return (int64_t)a->ensemble * a->width[j->blk[k].s][1];
    case ANI_PHASE_MEMBER: return a->ensemble;
    case ANI_PHASE_DAEV: return j->in->desc->aev_len;
    default: return j->blk[k].n; /* AEV, FINISH */
    }
}
static int64_t ani_chunk(int phase) {
    switch (phase) {
    case ANI_PHASE_FIRST: return ANI_SPLIT_ROWS;
    case ANI_PHASE_MEMBER: return 1;
    case ANI_PHASE_DAEV: return ANI_SPLIT_FEATURES;
    default: return ANI_SPLIT_CENTERS;
    }
}

/* Split mode: the units of block k in phase `phase`. */
static int64_t ani_units_of(const ani_job *j, int phase, int64_t k) {
    return (ani_extent(j, phase, k) + ani_chunk(phase) - 1) / ani_chunk(phase);
}

/* Split mode: unit u of a phase as (block k, unit i of the block). */
static void ani_unit_of(const ani_job *j, int phase, int64_t u, int64_t *k, int64_t *i) {
    int64_t b = 0;
    for (int64_t c; u >= (c = ani_units_of(j, phase, b)); b++) u -= c;
    *k = b;
    *i = u;
}

#define NNPOPS__ANI_BODY 1

#define REAL float
#define FN(name) name##_f32
#include "ani.c"
#undef REAL
#undef FN

#define REAL double
#define FN(name) name##_f64
#include "ani.c"
#undef REAL
#undef FN

/* The buffers of one block's work (AEV work space, AEV block, layer buffers) in `scratch`. */
static nnpops_status ani_block_buffers(const nnpops__ani *a, nnpops__scratch *scratch,
                                       int64_t max_entries, const mlp_layout *lay) {
    const void *mlp_before = scratch->slot[SLOT_MLP].ptr;
    nnpops_status st;
    if ((st = nnpops__buf_reserve(&scratch->slot[SLOT_WORK],
                                  nnpops__aev_work_bytes(&a->aev, max_entries),
                                  "ANI AEV work space")) != NNPOPS_OK ||
        (st = nnpops__buf_reserve(&scratch->slot[SLOT_AEV],
                                  a->elem_size * (size_t)a->aev.aev_len * ANI_BLOCK,
                                  "ANI AEV block")) != NNPOPS_OK ||
        (st = nnpops__buf_reserve(&scratch->slot[SLOT_MLP], a->elem_size * lay->total,
                                  "ANI layer buffers")) != NNPOPS_OK ||
        (st = nnpops__buf_reserve(&scratch->slot[SLOT_ENERGY],
                                  sizeof(double) * (size_t)a->ensemble * ANI_BLOCK,
                                  "ANI member outputs")) != NNPOPS_OK) {
        return st;
    }
    /* A new layer buffer starts zeroed: the dense kernels read the padding columns of their
     * inputs (up to NNPOPS__DENSE_PAD), which must hold finite values, never uninitialised memory
     * (valgrind: "conditional jump depends on uninitialised value").  Every kernel then writes
     * finite values or nothing there, so they stay finite. */
    if (scratch->slot[SLOT_MLP].ptr != mlp_before)
        memset(scratch->slot[SLOT_MLP].ptr, 0, scratch->slot[SLOT_MLP].bytes);
    return NNPOPS_OK;
}

/* Blocks by cost, the costliest first (ties: species, then first atom). */
static int ani_blk_cmp(const void *x, const void *y) {
    const ani_blk *p = x, *q = y;
    if (p->cost != q->cost) return p->cost > q->cost ? -1 : 1;
    if (p->s != q->s) return p->s < q->s ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

/* The blocks of every species and their shares (at most nt); returns the shares used, and in
 * *spread the largest share's cost over the mean cost per thread (1: even). */
static int ani_deal(const nnpops__ani *a, const int64_t *species_start, int nt, ani_blk *blk,
                    int64_t *n_blk, double *spread) {
    int64_t k = 0;
    for (int s = 0; s < a->n_species; s++)
        for (int64_t b = species_start[s]; b < species_start[s + 1]; b += ANI_BLOCK) {
            const int64_t n = species_start[s + 1] - b < ANI_BLOCK ? species_start[s + 1] - b
                                                                    : ANI_BLOCK;
            blk[k++] = (ani_blk){s, 0, b, n, n * a->width[s][1]};
        }
    *n_blk = k;
    *spread = 1.0;
    const int threads = nt;
    if (nt > k) nt = (int)k;
    if (nt <= 1) return 1;
    qsort(blk, (size_t)k, sizeof *blk, ani_blk_cmp);
    int64_t load[1024] = {0}, most = 0, total = 0;
    for (int64_t q = 0; q < k; q++) {
        int t = 0;
        for (int u = 1; u < nt; u++)
            if (load[u] < load[t]) t = u;
        blk[q].share = t;
        load[t] += blk[q].cost;
        total += blk[q].cost;
        if (load[t] > most) most = load[t];
    }
    *spread = (double)most * threads / (double)total;
    return nt;
}

static nnpops_status ani_compute_cpu(const nnpops_model *model, nnpops__scratch *scratch,
                                     nnpops__step *step) {
    const nnpops__ani *a = model->impl;
    if (step->member < -1 || step->member >= a->ensemble) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "ensemble_member %d is out of range (-1 or 0..%d for model %s)",
                            (int)step->member, (int)a->ensemble - 1, model->name);
    }
    const int64_t n_local = step->n_local < step->n_atoms ? step->n_local : step->n_atoms;
    if (n_local <= 0) return NNPOPS_OK;

    /* neighbor lists of the local atoms and their order by species */
    nnpops_status st;
    if ((st = nnpops__buf_reserve(&scratch->slot[SLOT_START],
                                  sizeof(int64_t) * (size_t)(n_local + 1),
                                  "ANI neighbor list starts")) != NNPOPS_OK ||
        (st = nnpops__buf_reserve(&scratch->slot[SLOT_ENTRY],
                                  sizeof(int64_t) * (size_t)(2 * step->n_pairs + 1),
                                  "ANI neighbor list entries")) != NNPOPS_OK ||
        (st = nnpops__buf_reserve(&scratch->slot[SLOT_ORDER], sizeof(int32_t) * (size_t)n_local,
                                  "ANI atom order")) != NNPOPS_OK) {
        return st;
    }
    int64_t *start = scratch->slot[SLOT_START].ptr;
    int64_t *entry = scratch->slot[SLOT_ENTRY].ptr;
    int32_t *order = scratch->slot[SLOT_ORDER].ptr;
    const int64_t max_entries =
        nnpops__center_lists_cpu(n_local, step->n_pairs, step->pairs, start, entry);

    int64_t species_start[NNPOPS__MAX_SPECIES + 1] = {0};
    for (int64_t i = 0; i < n_local; i++) species_start[step->species[i] + 1]++;
    for (int s = 0; s < a->n_species; s++) species_start[s + 1] += species_start[s];
    {
        int64_t cursor[NNPOPS__MAX_SPECIES];
        for (int s = 0; s < a->n_species; s++) cursor[s] = species_start[s];
        for (int64_t i = 0; i < n_local; i++) order[cursor[step->species[i]]++] = (int32_t)i;
    }

    const mlp_layout lay = mlp_layout_of(a);
    if ((st = ani_block_buffers(a, scratch, max_entries, &lay)) != NNPOPS_OK) return st;
    ani_inputs in;
    if ((st = ani_inputs_of(a, scratch, step, &in)) != NNPOPS_OK) return st;

    /* the blocks and their shares (one share: every block in order on this thread) */
    if ((st = nnpops__buf_reserve(&scratch->slot[SLOT_BLOCKS],
                                  sizeof(ani_blk) * (size_t)(n_local / ANI_BLOCK + a->n_species),
                                  "ANI block list")) != NNPOPS_OK) {
        return st;
    }
    ani_blk *blk = scratch->slot[SLOT_BLOCKS].ptr;
    /* split mode where dealing the blocks would leave threads idle (few blocks, or blocks of
     * unequal cost) and every member runs (see ani_blk) */
    int64_t n_blk;
    double spread;
    const int dealt = ani_deal(a, species_start, scratch->threads, blk, &n_blk, &spread);
    ani_job job = {.a = a, .scratch = scratch, .step = step, .in = &in, .start = start,
                   .entry = entry, .order = order, .lay = &lay, .blk = blk, .n_blk = n_blk};
    job.split = scratch->threads > 1 && spread > ANI_SPLIT_SPREAD &&
                n_blk <= ANI_SPLIT_MAX_BLOCKS && a->ensemble > 1 &&
                (step->member < 0 || step->member_atom_energy != NULL);
    int nt = dealt;
    if (job.split) { /* no more threads than the most units of a phase */
        int64_t most = 1;
        for (int phase = ANI_PHASE_AEV; phase <= ANI_PHASE_FINISH; phase++) {
            for (int64_t k = 0; k < n_blk; k++)
                if (phase != ANI_PHASE_DAEV || step->need_grad)
                    job.units[phase] += ani_units_of(&job, phase, k);
            if (job.units[phase] > most) most = job.units[phase];
        }
        nt = nnpops__pool_threads(&scratch->pool,
                                  scratch->threads < most ? scratch->threads : (int)most);
    }
    if (nt > 1) {
        if ((st = nnpops__scratch_subs(scratch, nt - 1)) != NNPOPS_OK) return st;
        for (int t = 1; t < nt; t++)
            if ((st = ani_block_buffers(a, &scratch->sub[t - 1], max_entries, &lay)) != NNPOPS_OK)
                return st;
    }
    job.shared = nt > 1;
    nnpops__pool_fn fn = a->precision == NNPOPS_FLOAT32 ? ani_share_f32 : ani_share_f64;
    if (!job.split) {
        scratch->threads_used = nnpops__pool_run(&scratch->pool, nt, nt, fn, &job);
        return NNPOPS_OK;
    }
    /* split mode: every block's buffers, then one share per thread, the threads meeting at a
     * barrier between the phases */
    const int64_t B = ANI_BLOCK, M = a->ensemble;
    const size_t es = a->elem_size;
    job.nt = nt;
    job.split_aev_stride = ((int64_t)in.desc->aev_len * B + 15) & ~(int64_t)15;
    job.split_z0_stride = (M * a->max_width1 * B + 15) & ~(int64_t)15;
    const size_t per_blk = es * (size_t)(job.split_aev_stride + job.split_z0_stride) +
                           sizeof(double) * (size_t)(M * B);
    nnpops__buf *sb = &scratch->slot[SLOT_SPLIT];
    const void *before = sb->ptr;
    if ((st = nnpops__buf_reserve(sb, (size_t)n_blk * per_blk, "ANI split-mode blocks")) !=
        NNPOPS_OK)
        return st;
    char *p = sb->ptr;
    if (p != before) memset(p, 0, sb->bytes); /* (padding columns: see ani_block_buffers) */
    job.split_aev = p;
    job.split_z0 = p + es * (size_t)(n_blk * job.split_aev_stride);
    job.split_e = (double *)(p + es * (size_t)(n_blk * (job.split_aev_stride +
                                                        job.split_z0_stride)));
    nnpops__barrier barrier;
    nnpops__barrier_init(&barrier, nt);
    job.barrier = &barrier;
    scratch->threads_used = nnpops__pool_run(&scratch->pool, nt, nt, fn, &job);
    return NNPOPS_OK;
}

const nnpops__potential_vt nnpops__ani_vt = {
    .type = "ani",
    .load = ani_load,
    .destroy = ani_destroy,
    .compute_cpu = ani_compute_cpu,
#ifdef NNPOPS_HAVE_CUDA
    /* GPU hooks: potentials/ani/ani_cuda.c */
    .upload = nnpops__ani_upload,
    .release_device = nnpops__ani_release_device,
    .cuda_work_bytes = nnpops__ani_cuda_work_bytes,
    .compute_cuda = nnpops__ani_compute_cuda,
    .cuda_prepare = nnpops__ani_cuda_prepare,
    .cuda_release_state = nnpops__ani_cuda_release_state,
    .cuda_capacity = nnpops__ani_cuda_capacity,
#endif
};

#else /* NNPOPS__ANI_BODY: the precision-generic body */

/* Kernel names of this precision. */
#define AEV_FORWARD FN(nnpops__aev_forward_cpu)
#define AEV_BACKWARD FN(nnpops__aev_backward_cpu)
#define AEV_BACKWARD_SHARED FN(nnpops__aev_backward_shared_cpu)
#define DENSE_FORWARD FN(nnpops__dense_forward_cpu)
#define DENSE_FORWARD_PACKED FN(nnpops__dense_forward_packed_cpu)
#define DENSE_BACKWARD FN(nnpops__dense_backward_cpu)
#define CELU_FORWARD FN(nnpops__celu_forward_cpu)
#define CELU_BACKWARD FN(nnpops__celu_backward_cpu)
#define GEMM_AUTO FN(nnpops__dense_gemm_variant_cpu)

/* The pieces of a block's work (block q: n <= ANI_BLOCK atoms of species q->s); ts: the scratch of
 * the thread that runs the piece (its AEV work space and layer buffers).  Block mode runs them in
 * turn on one thread (ani_block); split mode runs each as units of its own phase (ani_unit). */

/* AEV of the block's atoms c0 .. c1 into columns c0 .. c1 of aev [L][B] (each center's AEV is
 * its own: the same bits whichever centers a call covers); the call that ends the block also zeroes
 * its padding columns (the dense kernels may run over whole vectors of columns; the element-wise
 * kernels run over the n columns only, and the padding columns of the layer buffers hold finite
 * values, see ani_block_buffers). */
static void FN(ani_aev)(const ani_job *j, const ani_blk *q, nnpops__scratch *ts, REAL *aev,
                        int64_t c0, int64_t c1) {
    const int64_t B = ANI_BLOCK, L = j->in->desc->aev_len, n = q->n;
    const nnpops__step *step = j->step;
    AEV_FORWARD(j->in->desc, c1 - c0, j->order + q->b + c0, j->start, j->entry, step->pairs,
                step->pair_vec, j->in->species, aev + c0, B, ts->slot[SLOT_WORK].ptr);
    if (c1 < n) return;
    const int64_t np = (n + NNPOPS__DENSE_PAD - 1) / NNPOPS__DENSE_PAD * NNPOPS__DENSE_PAD;
    for (int64_t f = 0; f < L; f++)
        for (int64_t r = n; r < np; r++) aev[f * B + r] = 0;
}

/* Rows r0 .. r1 of the first layer (all members stacked, [M w1][L]) into z0 [M w1][B].  Every
 * output is formed by the same operations whichever rows a call covers and whether it reads the
 * panels (kernels/cpu/mlp.c), so splitting the rows does not change a bit; the panels serve rows
 * that start and end on panel boundaries (or at the last row). */
static void FN(ani_first)(const ani_job *j, const ani_blk *q, const REAL *aev, REAL *z0,
                          int64_t r0, int64_t r1) {
    const int64_t B = ANI_BLOCK, L = j->in->desc->aev_len, P = NNPOPS__DENSE_PANEL;
    const int s = q->s;
    const int64_t rows = (int64_t)j->a->ensemble * j->a->width[s][1];
    const REAL *W0 = j->in->w0[s], *W0p = j->in->w0p[s];
    const REAL *b0 = (const REAL *)j->a->arena + j->a->b_off[s][0];
    if (W0p && r0 % P == 0 && (r1 % P == 0 || r1 == rows))
        DENSE_FORWARD_PACKED(q->n, L, r1 - r0, W0 + r0 * L, W0p + r0 * L, b0 + r0, aev, B,
                             z0 + r0 * B, B);
    else
        DENSE_FORWARD(q->n, L, r1 - r0, W0 + r0 * L, b0 + r0, aev, B, z0 + r0 * B, B);
}

/* Member m of the block after the first layer (its rows of z0): the hidden layers with CELU and
 * the output layer, the outputs into e[0..n) (double) and, with member energies, each atom's
 * member energy; when the member counts and gradients are wanted, the backward pass down to
 * dE/dZ_0, written over the member's rows of z0.  ts: the layer buffers. */
static void FN(ani_member)(const ani_job *j, const ani_blk *q, nnpops__scratch *ts, REAL *z0,
                           int32_t m, double *e) {
    const nnpops__ani *a = j->a;
    const nnpops__step *step = j->step;
    const int64_t B = ANI_BLOCK, M = a->ensemble, n = q->n, s = q->s;
    const int64_t np = (n + NNPOPS__DENSE_PAD - 1) / NNPOPS__DENSE_PAD * NNPOPS__DENSE_PAD;
    const int nl = a->n_layers[s];
    const int32_t *w = a->width[s];
    const REAL *arena = a->arena;
    const mlp_layout *lay = j->lay;
    REAL *buf = ts->slot[SLOT_MLP].ptr;
    REAL *zh = buf + lay->zh, *y = buf + lay->y;
    REAL *act[2] = {buf + lay->act, buf + lay->act + (size_t)a->max_width * B};
    REAL *grad[2] = {buf + lay->grad, buf + lay->grad + (size_t)a->max_width * B};
    const int32_t member = step->member;
    const int counts = member < 0 || m == member;
    const REAL seed = member < 0 ? (REAL)(1.0 / (double)M) : (REAL)1;
    REAL *z0m = z0 + (size_t)m * w[1] * B;

    /* forward: z of layer l (l >= 1) is stored at zh (hidden) or y (output) */
    const REAL *x = z0m; /* pre-activation of the layer being activated */
    size_t zoff = 0;
    int ping = 0;
    for (int l = 1; l < nl; l++) {
        const int64_t in = w[l], out = w[l + 1];
        CELU_FORWARD(n, in, a->alpha, x, B, act[ping], B);
        const REAL *Wl = arena + a->w_off[s][l] + (size_t)m * out * in;
        const REAL *bl = arena + a->b_off[s][l] + (size_t)m * out;
        REAL *z = (l + 1 < nl) ? zh + zoff * B : y;
        DENSE_FORWARD(n, in, out, Wl, bl, act[ping], B, z, B);
        if (l + 1 < nl) zoff += (size_t)out;
        x = z;
        ping ^= 1;
    }
    /* nl == 1: a linear network, the output is z0m */
    const REAL *out_row = nl == 1 ? z0m : y;
    const int32_t *centers = j->order + q->b;
    for (int64_t r = 0; r < n; r++) {
        e[r] = (double)out_row[r];
        if (step->member_atom_energy)
            step->member_atom_energy[(size_t)centers[r] * M + m] = e[r] + a->self_energy[s];
    }
    if (!step->need_grad || !counts) return;

    /* backward: dE/dZ of the output = seed; down to dE/dZ_0, written over z0m */
    if (nl == 1) {
        for (int64_t r = 0; r < np; r++) z0m[r] = r < n ? seed : 0;
        return;
    }
    for (int64_t r = 0; r < np; r++) y[r] = r < n ? seed : 0;
    const REAL *dz = y;
    int gp = 0;
    for (int l = nl - 1; l >= 1; l--) {
        const int64_t in = w[l], out = w[l + 1];
        const REAL *Wl = arena + a->w_off[s][l] + (size_t)m * out * in;
        DENSE_BACKWARD(n, in, out, Wl, dz, B, grad[gp], B); /* dE/dA_{l-1} */
        /* pre-activation of layer l-1: z0m for l == 1, else the hidden slot */
        const REAL *zprev;
        REAL *dzprev;
        if (l == 1) {
            zprev = z0m;
            dzprev = z0m;
        } else {
            size_t o = 0;
            for (int k = 1; k < l - 1; k++) o += (size_t)w[k + 1];
            zprev = zh + o * B;
            dzprev = grad[gp];
        }
        CELU_BACKWARD(n, in, a->alpha, zprev, B, grad[gp], B, dzprev, B);
        dz = dzprev;
        gp ^= 1;
    }
}

/* Rows f0 .. f1 of dE/dAEV = sum over the counted members of W_0,m^T dZ_0,m (z0 after the
 * members' backward passes) into aev [L][B]: one product over the counted members' rows, each
 * output summed in the same order whichever rows a call covers (kernels/cpu/mlp.c). */
static void FN(ani_daev)(const ani_job *j, const ani_blk *q, const REAL *z0, REAL *aev,
                         int64_t f0, int64_t f1) {
    const int64_t B = ANI_BLOCK, L = j->in->desc->aev_len, M = j->a->ensemble;
    const int64_t w1 = j->a->width[q->s][1];
    const int32_t member = j->step->member;
    const int64_t row0 = member < 0 ? 0 : member * w1, kk = member < 0 ? M * w1 : w1;
    const REAL *W0 = (const REAL *)j->in->w0[q->s] + row0 * L;
    GEMM_AUTO(NNPOPS__GEMM_AUTO, f1 - f0, q->n, kk, W0 + f0, 1, L, z0 + row0 * B, B, NULL,
              aev + f0 * B, B);
}

/* The energies of the block's atoms c0 .. c1 from its members' outputs e [M][B] (the counted ones
 * summed in member order), then with gradients the AEV adjoint of their dE/dAEV (columns c0 .. c1
 * of aev) into the pair gradients (with j->shared: other threads add to them at the same time). */
static void FN(ani_finish)(const ani_job *j, const ani_blk *q, nnpops__scratch *ts,
                           const double *e, const REAL *aev, int64_t c0, int64_t c1) {
    const nnpops__ani *a = j->a;
    const nnpops__step *step = j->step;
    const int64_t B = ANI_BLOCK, M = a->ensemble;
    const int32_t member = step->member, *centers = j->order + q->b;
    for (int64_t r = c0; r < c1; r++) {
        double sum = 0.0;
        for (int32_t m = 0; m < M; m++)
            if (member < 0 || m == member) sum += e[m * B + r];
        step->atom_energy[centers[r]] = (member < 0 ? sum / (double)M : sum) + a->self_energy[q->s];
    }
    if (!step->need_grad) return;
    void *work = ts->slot[SLOT_WORK].ptr;
    if (j->shared)
        AEV_BACKWARD_SHARED(j->in->desc, c1 - c0, centers + c0, j->start, j->entry, step->pairs,
                            step->pair_vec, j->in->species, aev + c0, B, step->pair_grad, work);
    else
        AEV_BACKWARD(j->in->desc, c1 - c0, centers + c0, j->start, j->entry, step->pairs,
                     step->pair_vec, j->in->species, aev + c0, B, step->pair_grad, work);
}

/* Block mode: one block on one thread, its buffers the thread's. */
static void FN(ani_block)(const ani_job *j, const ani_blk *q, nnpops__scratch *ts) {
    const nnpops__ani *a = j->a;
    const int64_t M = a->ensemble, w1 = a->width[q->s][1];
    const int32_t member = j->step->member;
    REAL *aev = ts->slot[SLOT_AEV].ptr;
    REAL *z0 = (REAL *)ts->slot[SLOT_MLP].ptr + j->lay->z0;
    double *e = (double *)ts->slot[SLOT_ENERGY].ptr;
    FN(ani_aev)(j, q, ts, aev, 0, q->n);
    /* first layer: all members in one product, or the chosen member alone */
    const int all = member < 0 || j->step->member_atom_energy != NULL;
    if (all) FN(ani_first)(j, q, aev, z0, 0, M * w1);
    else FN(ani_first)(j, q, aev, z0, member * w1, (member + 1) * w1);
    for (int32_t m = 0; m < M; m++)
        if (all || m == member) FN(ani_member)(j, q, ts, z0, m, e + m * ANI_BLOCK);
    if (j->step->need_grad) FN(ani_daev)(j, q, z0, aev, 0, j->in->desc->aev_len);
    FN(ani_finish)(j, q, ts, e, aev, 0, q->n);
}

/* Split mode: unit u of a phase (ani_units_of), ts the scratch of the thread that runs it: the
 * pieces lo .. hi of its block (ani_extent, ani_chunk). */
static void FN(ani_unit)(const ani_job *j, int phase, int64_t u, nnpops__scratch *ts) {
    int64_t k, i;
    ani_unit_of(j, phase, u, &k, &i);
    const ani_blk *q = &j->blk[k];
    REAL *aev = (REAL *)j->split_aev + k * j->split_aev_stride;
    REAL *z0 = (REAL *)j->split_z0 + k * j->split_z0_stride;
    double *e = j->split_e + k * j->a->ensemble * ANI_BLOCK;
    const int64_t size = ani_chunk(phase), end = ani_extent(j, phase, k);
    const int64_t lo = i * size, hi = lo + size < end ? lo + size : end;
    switch (phase) {
    case ANI_PHASE_AEV: FN(ani_aev)(j, q, ts, aev, lo, hi); break;
    case ANI_PHASE_FIRST: FN(ani_first)(j, q, aev, z0, lo, hi); break;
    case ANI_PHASE_MEMBER: FN(ani_member)(j, q, ts, z0, (int32_t)lo, e + lo * ANI_BLOCK); break;
    case ANI_PHASE_DAEV: FN(ani_daev)(j, q, z0, aev, lo, hi); break;
    default: FN(ani_finish)(j, q, ts, e, aev, lo, hi); break;
    }
}

/* The pool's function: block mode, the blocks of share `share` in order; split mode (one share
 * per thread), the thread's units of each phase in turn (units t, t + nt, ...), the threads
 * meeting at the barrier after each phase. */
static void FN(ani_share)(void *arg, int share, int thread) {
    const ani_job *j = arg;
    nnpops__scratch *ts = thread == 0 ? j->scratch : &j->scratch->sub[thread - 1];
    if (!j->split) {
        for (int64_t k = 0; k < j->n_blk; k++)
            if (j->blk[k].share == share) FN(ani_block)(j, &j->blk[k], ts);
        return;
    }
    int sense = 0;
    for (int phase = ANI_PHASE_AEV; phase <= ANI_PHASE_FINISH; phase++) {
        if (j->units[phase] == 0) continue; /* (dE/dAEV without gradients) */
        for (int64_t u = thread; u < j->units[phase]; u += j->nt) FN(ani_unit)(j, phase, u, ts);
        if (phase < ANI_PHASE_FINISH) nnpops__barrier_wait(j->barrier, &sense);
    }
}

#undef AEV_FORWARD
#undef AEV_BACKWARD
#undef AEV_BACKWARD_SHARED
#undef DENSE_FORWARD
#undef DENSE_FORWARD_PACKED
#undef DENSE_BACKWARD
#undef CELU_FORWARD
#undef CELU_BACKWARD
#undef GEMM_AUTO

#endif /* NNPOPS__ANI_BODY */
