/*
 * context.c - one simulation's workspace and the step sequence of nnpops_compute.
 *
 * A context holds the options (units, limits, ensemble member, GPU switches), growable buffers that
 * never shrink mid-run, and counters.  One step:
 *   1. validate the inputs (sizes, pointers, batch indices, finite coordinates, known elements)
 *   2. convert lengths to angstrom, map atomic numbers to model species, group atoms by system
 *   3. neighbor search (the list the potential asks for, half or full, within the model cutoff;
 *      grows its capacity and retries on overflow, so a truncated list is never used), then the
 *      minimum-distance check
 *   4. the potential's per-atom energies and pair gradients
 *   5. reductions (energies, forces, virials, per-atom terms) and conversion to the caller's units
 * On a GPU model, steps 3-5 run in core/src/cuda_step.c (the device entry: cuda_device.c).
 *
 * nnpops_compute_device (experimental; device arrays, the caller's CUDA stream): argument checks
 * here, then cuda_device.c either enqueues the step of the context's plan or asks for a plan; a
 * planning call copies the device inputs to the host, runs steps 1-2 above on them (so its errors
 * are nnpops_compute's), resolves n_systems = max(batch) + 1 when it is not given, and hands the
 * prepared arrays to nnpops__cuda_device_plan.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"

enum {
    BUF_POS, BUF_SPECIES, BUF_BATCH, BUF_ORDER, BUF_SYS_START, BUF_CELLS, BUF_PBC,
    BUF_PAIRS, BUF_VEC, BUF_DIST, BUF_CENTER_START, BUF_ATOM_E, BUF_GRAD, BUF_MEMBER_E, BUF_SYS_E,
    /* host copies of the device entry's inputs (planning calls) */
    BUF_DEV_Z, BUF_DEV_POS, BUF_DEV_BATCH, BUF_DEV_CELLS, BUF_DEV_Q, BUF_COUNT
};

struct nnpops_context {
    const nnpops_model *model;
    double option[NNPOPS_OPTION_COUNT_];
    nnpops_stats stats;
    int64_t pair_capacity;
    nnpops__buf buf[BUF_COUNT];
    nnpops__scratch scratch;
    nnpops__cuda_ctx *cuda; /* CUDA backend: stream, arena, staging (core/src/cuda_step.c) */
    char warning[512];      /* nnpops_context_last_warning ("" = none) */
    int32_t test_break_capture; /* nnpops__cuda_test_break_next_capture */
};

/* The sizes of the structs in 0.1.0: the smallest struct_size each call accepts. */
#define STATS_SIZE_0_1 offsetof(nnpops_stats, device_plans)
#define INPUTS_SIZE_0_1 offsetof(nnpops_inputs, charges)
#define OUTPUTS_SIZE_0_1 (offsetof(nnpops_outputs, member_energies) + sizeof(double *))
#define DEVICE_INPUTS_SIZE_0_1 offsetof(nnpops_device_inputs, charges)
#define DEVICE_OUTPUTS_SIZE_0_1 (offsetof(nnpops_device_outputs, virials) + sizeof(double *))

/* A caller's size-prefixed struct (its struct_size the first member) as this library's: the fields
 * its size covers, the others zero (absent); a size below the 0.1.0 one is an error. */
static nnpops_status take_struct(void *dst, size_t dst_size, const void *src, size_t min_size,
                                 const char *name) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size < min_size)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "%s.struct_size is %zu, expected at least %zu (set it to sizeof(%s))",
                            name, size, min_size, name);
    memset(dst, 0, dst_size);
    memcpy(dst, src, size < dst_size ? size : dst_size);
    memcpy(dst, &dst_size, sizeof dst_size);
    return NNPOPS_OK;
}

/* Total charges: finite, and zero for a model that does not use them. */
static nnpops_status check_charges(const nnpops_model *m, int64_t n_systems, const double *q) {
    for (int64_t s = 0; q && s < n_systems; s++) {
        if (!isfinite(q[s]))
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                "system %lld has a non-finite total charge", (long long)s);
        if (q[s] != 0.0 && !m->uses_charge)
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                                "system %lld has total charge %g, and model '%s' (type %s) does not "
                                "use a charge (it describes neutral systems only)",
                                (long long)s, q[s], m->name, m->type);
    }
    return NNPOPS_OK;
}

/* ---- options ---------------------------------------------------------------------------------- */

typedef struct option_info {
    const char *name;
    double def, lo, hi;
    int integral;
    const char *const *words; /* textual values (index = numeric value), NULL-terminated */
} option_info;

static const char *const length_words[] = {"angstrom", "nm", "bohr", NULL};
static const char *const energy_words[] = {"eV", "kcal/mol", "kJ/mol", "hartree", NULL};
static const char *const onoff_words[] = {"off", "on", NULL};
static const char *const onoffauto_words[] = {"off", "on", "auto", NULL};

static const option_info options[NNPOPS_OPTION_COUNT_] = {
    [NNPOPS_OPTION_LENGTH_UNIT] = {"length_unit", 0, 0, 2, 1, length_words},
    [NNPOPS_OPTION_ENERGY_UNIT] = {"energy_unit", 0, 0, 3, 1, energy_words},
    [NNPOPS_OPTION_MIN_DISTANCE] = {"min_distance", 0.1, 0, 10, 0, NULL},
    [NNPOPS_OPTION_MAX_NEIGHBORS] = {"max_neighbors", 0, 0, 1e6, 1, NULL},
    [NNPOPS_OPTION_MAX_IMAGES] = {"max_images", 64, 1, 1000, 1, NULL},
    [NNPOPS_OPTION_ENSEMBLE_MEMBER] = {"ensemble_member", -1, -1, 1e6, 1, NULL},
    [NNPOPS_OPTION_CUDA_GRAPHS] = {"cuda_graphs", 0, 0, 1, 1, onoff_words},
    [NNPOPS_OPTION_GRAPH_WARMUP_STEPS] = {"graph_warmup_steps", 2, 0, 1000, 1, NULL},
    [NNPOPS_OPTION_DETERMINISTIC] = {"deterministic", 0, 0, 1, 1, onoff_words},
    [NNPOPS_OPTION_TENSOR_CORES] = {"tensor_cores", 2, 0, 2, 1, onoffauto_words},
    [NNPOPS_OPTION_THREADS] = {"threads", 1, 0, 1024, 1, NULL},
};

static const double length_to_A[] = {1.0, 10.0, 0.52917721092};
/* eV -> caller's energy unit */
static const double eV_to[] = {1.0, 23.060547830619, 96.48533212331002, 1.0 / 27.211386024367243};

const char *nnpops_option_name(nnpops_option option) {
    if ((int)option < 0 || option >= NNPOPS_OPTION_COUNT_) return NULL;
    return options[option].name;
}

nnpops_status nnpops_option_from_name(const char *name, nnpops_option *option) {
    if (!name || !option) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "option name is NULL");
    for (int k = 0; k < NNPOPS_OPTION_COUNT_; k++) {
        if (strcmp(options[k].name, name) == 0) {
            *option = (nnpops_option)k;
            return NNPOPS_OK;
        }
    }
    char list[512] = "";
    for (int k = 0; k < NNPOPS_OPTION_COUNT_; k++) {
        strncat(list, k ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, options[k].name, sizeof list - strlen(list) - 1);
    }
    return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "unknown option '%s' (known: %s)", name, list);
}

nnpops_status nnpops_context_set_option(nnpops_context *ctx, nnpops_option option, double value) {
    if (!ctx) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "context is NULL");
    if ((int)option < 0 || option >= NNPOPS_OPTION_COUNT_)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "unknown option number %d", (int)option);
    const option_info *o = &options[option];
    double hi = o->hi;
    if (option == NNPOPS_OPTION_ENSEMBLE_MEMBER) hi = ctx->model->ensemble_size - 1;
    if (!isfinite(value) || value < o->lo || value > hi || (o->integral && value != floor(value)))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "option %s: value %g is out of range [%g, %g]%s", o->name, value, o->lo,
                            hi, o->integral ? " or not an integer" : "");
    if (option == NNPOPS_OPTION_CUDA_GRAPHS && value != 0 && ctx->model->device != NNPOPS__CUDA)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "option cuda_graphs: CUDA graphs are not available for device %s",
                            ctx->model->device_name);
    ctx->option[option] = value;
    return NNPOPS_OK;
}

nnpops_status nnpops_context_get_option(const nnpops_context *ctx, nnpops_option option,
                                        double *value) {
    if (!ctx || !value) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "NULL argument");
    if ((int)option < 0 || option >= NNPOPS_OPTION_COUNT_)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "unknown option number %d", (int)option);
    *value = ctx->option[option];
    return NNPOPS_OK;
}

nnpops_status nnpops_context_set_option_by_name(nnpops_context *ctx, const char *name,
                                                const char *value) {
    nnpops_option option;
    nnpops_status st = nnpops_option_from_name(name, &option);
    if (st != NNPOPS_OK) return st;
    if (!value) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "option %s: value is NULL", name);
    const option_info *o = &options[option];
    if (o->words) {
        for (int k = 0; o->words[k]; k++) {
            if (strcasecmp(o->words[k], value) == 0) return nnpops_context_set_option(ctx, option, k);
        }
        if (o->words == onoff_words || o->words == onoffauto_words) {
            if (!strcasecmp(value, "true") || !strcasecmp(value, "yes"))
                return nnpops_context_set_option(ctx, option, 1);
            if (!strcasecmp(value, "false") || !strcasecmp(value, "no"))
                return nnpops_context_set_option(ctx, option, 0);
        }
        if (option == NNPOPS_OPTION_LENGTH_UNIT && !strcmp(value, "A"))
            return nnpops_context_set_option(ctx, option, 0);
    }
    char *end = NULL;
    double v = strtod(value, &end);
    if (end == value || *end != '\0') {
        char list[256] = "";
        for (int k = 0; o->words && o->words[k]; k++) {
            strncat(list, k ? "|" : " (one of ", sizeof list - strlen(list) - 1);
            strncat(list, o->words[k], sizeof list - strlen(list) - 1);
        }
        if (o->words) strncat(list, ")", sizeof list - strlen(list) - 1);
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "option %s: cannot read value '%s'%s",
                            name, value, list);
    }
    return nnpops_context_set_option(ctx, option, v);
}

/* ---- life cycle ------------------------------------------------------------------------------- */

nnpops_status nnpops_context_create(const nnpops_model *model, nnpops_context **context) {
    if (!context) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "context out-pointer is NULL");
    *context = NULL;
    if (!model) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "model is NULL");
    nnpops_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
    ctx->model = model;
    for (int k = 0; k < NNPOPS_OPTION_COUNT_; k++) ctx->option[k] = options[k].def;
    ctx->stats.struct_size = sizeof(nnpops_stats);
    *context = ctx;
    return NNPOPS_OK;
}

void nnpops_context_destroy(nnpops_context *ctx) {
    if (!ctx) return;
    for (int k = 0; k < BUF_COUNT; k++) nnpops__buf_free(&ctx->buf[k]);
    nnpops__scratch_free(&ctx->scratch);
#ifdef NNPOPS_HAVE_CUDA
    nnpops__cuda_ctx_destroy(ctx->cuda);
#endif
    free(ctx);
}

nnpops_status nnpops_context_stats(const nnpops_context *ctx, nnpops_stats *stats) {
    if (!ctx || !stats) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "NULL argument");
    /* a caller built against an older header passes its smaller struct: copy what it holds */
    if (stats->struct_size < STATS_SIZE_0_1)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_stats.struct_size is %zu, expected at least %zu",
                            stats->struct_size, (size_t)STATS_SIZE_0_1);
    const size_t size = stats->struct_size;
    const size_t n = size < sizeof(nnpops_stats) ? size : sizeof(nnpops_stats);
    memcpy(stats, &ctx->stats, n);
    stats->struct_size = size;
    return NNPOPS_OK;
}

nnpops_status nnpops_context_system_energy(const nnpops_context *ctx, int32_t member,
                                           double *energy) {
    if (!ctx || !energy) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "NULL argument");
    const nnpops_model *m = ctx->model;
    if (member < -1 || member >= m->ensemble_size)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_context_system_energy: member %d of model '%s', which has %d "
                            "(-1: the ensemble)",
                            (int)member, m->name, (int)m->ensemble_size);
    const double e = m->vt->system_energy ? m->vt->system_energy(m, member) : 0.0;
    *energy = e * m->energy_to_eV * eV_to[(int)ctx->option[NNPOPS_OPTION_ENERGY_UNIT]];
    return NNPOPS_OK;
}

const char *nnpops_context_last_warning(const nnpops_context *ctx) {
    return ctx ? ctx->warning : "";
}

/* ---- the step --------------------------------------------------------------------------------- */

#define RESERVE(ctx, which, count, type, what)                                                  \
    do {                                                                                        \
        nnpops_status st_ = nnpops__buf_reserve(&(ctx)->buf[which],                             \
                                                sizeof(type) * (size_t)((count) > 0 ? (count) : 1), \
                                                what);                                          \
        if (st_ != NNPOPS_OK) return st_;                                                       \
    } while (0)

static const char *element_name(int32_t z) {
    return (z >= 1 && z <= 118) ? nnpops__element_symbols[z] : "?";
}

/* The checks both entry points make after their own n_atoms / n_systems range checks: a batch
 * array for more than one system, n_local (< 0: all atoms) within n_atoms, the per-atom arrays,
 * cells with pbc.  *n_local_out is the resolved local count. */
static nnpops_status check_arrays(int64_t n_atoms, int64_t n_systems, int64_t n_local_in,
                                  const void *batch, const void *atomic_numbers,
                                  const void *positions, const void *pbc, const void *cells,
                                  int64_t *n_local_out) {
    if (!batch && n_systems > 1)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "n_systems = %lld needs a batch array (system of each atom)",
                            (long long)n_systems);
    const int64_t n_local = n_local_in < 0 ? n_atoms : n_local_in;
    if (n_local > n_atoms)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "n_local = %lld exceeds n_atoms = %lld",
                            (long long)n_local, (long long)n_atoms);
    if (n_atoms > 0 && (!atomic_numbers || !positions))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "atomic_numbers or positions is NULL");
    if (pbc && !cells)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "pbc given without cells");
    *n_local_out = n_local;
    return NNPOPS_OK;
}

/* Checks counts, pointers and charges of inputs and outputs of this library's size (take_struct);
 * *n_local_out is the resolved local count. */
static nnpops_status validate(const nnpops_context *ctx, const nnpops_inputs *in,
                              const nnpops_outputs *out, int64_t *n_local_out) {
    if (in->n_atoms < 0 || in->n_atoms > INT32_MAX - 1)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "n_atoms = %lld is out of range",
                            (long long)in->n_atoms);
    if (in->n_systems < 1 && !(in->n_systems == 0 && in->n_atoms == 0))
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "n_systems = %lld must be at least 1",
                            (long long)in->n_systems);
    /* batch indices are int32; a larger count would also overflow the buffer sizes below */
    if (in->n_systems > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "n_systems = %lld is out of range (at most 2^31 - 1)",
                            (long long)in->n_systems);
    nnpops_status st = check_arrays(in->n_atoms, in->n_systems, in->n_local, in->batch,
                                    in->atomic_numbers, in->positions, in->pbc, in->cells,
                                    n_local_out);
    if (st != NNPOPS_OK) return st;
    if ((st = check_charges(ctx->model, in->n_systems, in->charges)) != NNPOPS_OK) return st;
    if (out->member_energies && ctx->model->ensemble_size < 1)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "member energies need an ensemble model");
    return NNPOPS_OK;
}

/* Units, species, batch grouping.  Fills BUF_POS, BUF_SPECIES, BUF_BATCH, BUF_ORDER, BUF_SYS_START,
 * BUF_CELLS, BUF_PBC. */
static nnpops_status prepare(nnpops_context *ctx, const nnpops_inputs *in, double to_A) {
    const nnpops_model *m = ctx->model;
    const int64_t n = in->n_atoms, ns = in->n_systems;
    RESERVE(ctx, BUF_POS, 3 * n, double, "positions");
    RESERVE(ctx, BUF_SPECIES, n, int32_t, "species");
    RESERVE(ctx, BUF_BATCH, n, int32_t, "batch");
    RESERVE(ctx, BUF_ORDER, n, int32_t, "batch order");
    RESERVE(ctx, BUF_SYS_START, ns + 1, int64_t, "batch offsets");
    RESERVE(ctx, BUF_CELLS, 9 * ns, double, "cells");
    RESERVE(ctx, BUF_PBC, 3 * ns, uint8_t, "pbc");
    double *pos = ctx->buf[BUF_POS].ptr;
    int32_t *species = ctx->buf[BUF_SPECIES].ptr;
    int32_t *batch = ctx->buf[BUF_BATCH].ptr;
    int32_t *order = ctx->buf[BUF_ORDER].ptr;
    int64_t *start = ctx->buf[BUF_SYS_START].ptr;
    double *cells = ctx->buf[BUF_CELLS].ptr;
    uint8_t *pbc = ctx->buf[BUF_PBC].ptr;

    for (int64_t i = 0; i < n; i++) {
        const double *x = in->positions + 3 * i;
        if (!isfinite(x[0]) || !isfinite(x[1]) || !isfinite(x[2]))
            return nnpops__fail(NNPOPS_ERROR_BAD_POSITION,
                                "atom %lld has a non-finite position (%g, %g, %g)", (long long)i,
                                x[0], x[1], x[2]);
        for (int k = 0; k < 3; k++) pos[3 * i + k] = x[k] * to_A;
        const int32_t z = in->atomic_numbers[i];
        const int32_t s = (z >= 1 && z <= 118) ? m->z_to_species[z] : -1;
        if (s < 0) {
            char list[256] = "";
            for (int k = 0; k < m->n_species; k++) {
                strncat(list, k ? " " : "", sizeof list - strlen(list) - 1);
                strncat(list, element_name(m->species_z[k]), sizeof list - strlen(list) - 1);
            }
            return nnpops__fail(NNPOPS_ERROR_UNKNOWN_ELEMENT,
                                "atom %lld: element %s (atomic number %d) is not described by model "
                                "'%s' (elements: %s)",
                                (long long)i, element_name(z), (int)z, m->name, list);
        }
        species[i] = s;
        const int32_t b = in->batch ? in->batch[i] : 0;
        if (b < 0 || b >= ns)
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                "atom %lld: batch index %d is outside 0..%lld", (long long)i, (int)b,
                                (long long)ns - 1);
        batch[i] = b;
    }
    /* counting sort of atoms by system */
    memset(start, 0, sizeof(int64_t) * (size_t)(ns + 1));
    for (int64_t i = 0; i < n; i++) start[batch[i] + 1]++;
    for (int64_t s = 0; s < ns; s++) start[s + 1] += start[s];
    for (int64_t i = 0; i < n; i++) {
        /* uses start[b] as a cursor, restored below */
        order[start[batch[i]]++] = (int32_t)i;
    }
    for (int64_t s = ns; s > 0; s--) start[s] = start[s - 1];
    start[0] = 0;

    for (int64_t s = 0; s < ns; s++) {
        int periodic = 0;
        for (int k = 0; k < 3; k++) {
            pbc[3 * s + k] = in->pbc ? (in->pbc[3 * s + k] != 0) : 0;
            periodic |= pbc[3 * s + k];
        }
        for (int k = 0; k < 9; k++) {
            const double c = in->cells ? in->cells[9 * s + k] : 0.0;
            if (periodic && !isfinite(c))
                return nnpops__fail(NNPOPS_ERROR_BAD_CELL, "system %lld: cell has a non-finite entry",
                                    (long long)s);
            cells[9 * s + k] = c * to_A;
        }
    }
    return NNPOPS_OK;
}

/* Neighbor search with grow-and-retry: never returns a truncated list.  The list is the one the
 * potential asks for (nnpops__potential_lists): a half list, with or without the pairs of two
 * ghosts, or full (center) lists of the local atoms or of every atom; *n_centers is the number of
 * centers of full lists (their CSR starts in BUF_CENTER_START), 0 for a half list. */
static nnpops_status find_pairs(nnpops_context *ctx, const nnpops_inputs *in, int64_t n_local,
                                const nnpops__nbr_choice *lists, int64_t *n_centers) {
    const int64_t n = in->n_atoms;
    nnpops__nbr_in nin = {
        .n_atoms = n,
        .positions = ctx->buf[BUF_POS].ptr,
        .n_systems = in->n_systems,
        .sys_start = ctx->buf[BUF_SYS_START].ptr,
        .order = ctx->buf[BUF_ORDER].ptr,
        .cells = ctx->buf[BUF_CELLS].ptr,
        .pbc = ctx->buf[BUF_PBC].ptr,
        .cutoff = ctx->model->cutoff,
        .skip_from = lists->ghost_pairs ? n : n_local,
        .max_images = (int32_t)ctx->option[NNPOPS_OPTION_MAX_IMAGES],
    };
    *n_centers = lists->full ? (lists->ghost_centers ? n : n_local) : 0;
    if (lists->full) RESERVE(ctx, BUF_CENTER_START, *n_centers + 1, int64_t, "center list starts");
    const int64_t max_per_atom = (int64_t)ctx->option[NNPOPS_OPTION_MAX_NEIGHBORS];
    if (ctx->pair_capacity < 1) ctx->pair_capacity = 64 * (n > 0 ? n : 1);
    if (max_per_atom > 0 && ctx->pair_capacity > max_per_atom * (n > 0 ? n : 1))
        ctx->pair_capacity = max_per_atom * (n > 0 ? n : 1);
    for (int attempt = 0;; attempt++) {
        RESERVE(ctx, BUF_PAIRS, 2 * ctx->pair_capacity, int32_t, "neighbor pairs");
        RESERVE(ctx, BUF_VEC, 3 * ctx->pair_capacity, double, "pair vectors");
        RESERVE(ctx, BUF_DIST, ctx->pair_capacity, double, "pair distances");
        nnpops_status st;
        int64_t found;
        if (lists->full) {
            nnpops__dev_status status;
            nnpops__center_out cout = {
                .capacity = ctx->pair_capacity,
                .start = ctx->buf[BUF_CENTER_START].ptr,
                .pairs = ctx->buf[BUF_PAIRS].ptr,
                .shifts = NULL,
                .vec = ctx->buf[BUF_VEC].ptr,
                .dist = ctx->buf[BUF_DIST].ptr,
                .status = &status,
            };
            /* min_distance is checked below, on the list, as for half lists */
            st = nnpops__center_neighbors_cpu(&nin, *n_centers, 0.0, &ctx->scratch, &cout);
            found = status.n_entries;
            if (st == NNPOPS_OK && (status.flags & NNPOPS__ST_OVERFLOW))
                st = NNPOPS_ERROR_NEIGHBOR_OVERFLOW;
        } else {
            nnpops__nbr_out nout = {
                .capacity = ctx->pair_capacity,
                .pairs = ctx->buf[BUF_PAIRS].ptr,
                .shifts = NULL,
                .vec = ctx->buf[BUF_VEC].ptr,
                .dist = ctx->buf[BUF_DIST].ptr,
            };
            st = nnpops__neighbors_cpu(&nin, &ctx->scratch, &nout);
            found = nout.n_pairs;
        }
        if (st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW && attempt < 2) {
            if (max_per_atom > 0 && found > max_per_atom * n)
                return nnpops__fail(NNPOPS_ERROR_NEIGHBOR_OVERFLOW,
                                    "%lld neighbor pairs exceed the limit max_neighbors = %lld per "
                                    "atom (%lld atoms)",
                                    (long long)found, (long long)max_per_atom, (long long)n);
            ctx->pair_capacity = found + found / 8 + 16;
            ctx->stats.neighbor_rebuilds++;
            continue;
        }
        if (st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW)
            return nnpops__fail(NNPOPS_ERROR_INTERNAL, "neighbor search overflowed after growing");
        if (st != NNPOPS_OK) return st;
        ctx->stats.n_pairs = found;
        ctx->stats.pair_capacity = ctx->pair_capacity;
        return NNPOPS_OK;
    }
}

static nnpops_status check_distances(const nnpops_context *ctx, int64_t n_pairs, double to_A) {
    const double dmin = ctx->option[NNPOPS_OPTION_MIN_DISTANCE];
    if (dmin <= 0) return NNPOPS_OK;
    const int32_t *pairs = ctx->buf[BUF_PAIRS].ptr;
    const double *dist = ctx->buf[BUF_DIST].ptr;
    for (int64_t p = 0; p < n_pairs; p++) {
        if (dist[p] < dmin) {
            const int32_t i = pairs[2 * p], j = pairs[2 * p + 1];
            if (i == j)
                return nnpops__fail(NNPOPS_ERROR_BAD_CELL,
                                    "atom %d is %g angstrom from its own periodic image (cell too "
                                    "small; min_distance = %g angstrom)",
                                    (int)i, dist[p], dmin);
            return nnpops__fail(NNPOPS_ERROR_ATOMS_TOO_CLOSE,
                                "atoms %d and %d are %g angstrom apart (min_distance = %g angstrom)",
                                (int)i, (int)j, dist[p], dmin);
        }
    }
    (void)to_A;
    return NNPOPS_OK;
}

/* The online processors, asked once per process (glibc reads a sysfs file for it: not per step). */
static long online_cpus;
static pthread_once_t online_once = PTHREAD_ONCE_INIT;
static void count_online_cpus(void) { online_cpus = sysconf(_SC_NPROCESSORS_ONLN); }

/* The threads of option `threads` (0: the online processors). */
static int32_t cpu_threads(double option) {
    long n = (long)option;
    if (n == 0) {
        pthread_once(&online_once, count_online_cpus);
        n = online_cpus;
    }
    return n < 1 ? 1 : n > 1024 ? 1024 : (int32_t)n;
}

nnpops_status nnpops_compute(nnpops_context *ctx, const nnpops_inputs *caller_in,
                             nnpops_outputs *caller_out) {
    if (!ctx) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "context is NULL");
    if (!caller_in || !caller_out)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "inputs or outputs is NULL");
    /* the caller's structs, of whichever version, as this library's */
    nnpops_inputs in_full;
    nnpops_outputs out_full;
    nnpops_status st;
    if ((st = take_struct(&in_full, sizeof in_full, caller_in, INPUTS_SIZE_0_1,
                          "nnpops_inputs")) != NNPOPS_OK ||
        (st = take_struct(&out_full, sizeof out_full, caller_out, OUTPUTS_SIZE_0_1,
                          "nnpops_outputs")) != NNPOPS_OK)
        return st;
    const nnpops_inputs *in = &in_full;
    nnpops_outputs *out = &out_full;
    int64_t n_local = 0;
    st = validate(ctx, in, out, &n_local);
    if (st != NNPOPS_OK) return st;
    const nnpops_model *m = ctx->model;
    if (m->device != NNPOPS__CPU && !nnpops_cuda_built())
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "model '%s' is loaded on %s, and this library computes on the CPU only",
                            m->name, m->device_name);
    const int64_t n = in->n_atoms, ns = in->n_systems;
    const int64_t ens = m->ensemble_size;
    const double to_A = length_to_A[(int)ctx->option[NNPOPS_OPTION_LENGTH_UNIT]];
    const double e_factor = m->energy_to_eV * eV_to[(int)ctx->option[NNPOPS_OPTION_ENERGY_UNIT]];

    if (n == 0) {
        if (out->energies) memset(out->energies, 0, sizeof(double) * (size_t)ns);
        if (out->virials) memset(out->virials, 0, sizeof(double) * 9 * (size_t)ns);
        if (out->member_energies) memset(out->member_energies, 0, sizeof(double) * (size_t)(ns * ens));
        ctx->stats.steps++;
        return NNPOPS_OK;
    }
    if ((st = prepare(ctx, in, to_A)) != NNPOPS_OK) return st;
#ifdef NNPOPS_HAVE_CUDA
    if (m->device == NNPOPS__CUDA) {
        /* the rest of the step on the GPU (core/src/cuda_step.c) */
        const nnpops__cuda_args ga = {
            .n_atoms = n, .n_local = n_local, .n_systems = ns,
            .positions = ctx->buf[BUF_POS].ptr, .species = ctx->buf[BUF_SPECIES].ptr,
            .batch = ctx->buf[BUF_BATCH].ptr, .order = ctx->buf[BUF_ORDER].ptr,
            .sys_start = ctx->buf[BUF_SYS_START].ptr, .cells = ctx->buf[BUF_CELLS].ptr,
            .pbc = ctx->buf[BUF_PBC].ptr, .charges = m->uses_charge ? in->charges : NULL,
            .min_distance = ctx->option[NNPOPS_OPTION_MIN_DISTANCE],
            .max_neighbors = (int64_t)ctx->option[NNPOPS_OPTION_MAX_NEIGHBORS],
            .max_images = (int32_t)ctx->option[NNPOPS_OPTION_MAX_IMAGES],
            .member = (int32_t)ctx->option[NNPOPS_OPTION_ENSEMBLE_MEMBER],
            .cuda_graphs = (int32_t)ctx->option[NNPOPS_OPTION_CUDA_GRAPHS],
            .graph_warmup_steps = (int32_t)ctx->option[NNPOPS_OPTION_GRAPH_WARMUP_STEPS],
            .deterministic = (int32_t)ctx->option[NNPOPS_OPTION_DETERMINISTIC],
            .tensor_cores = (int32_t)ctx->option[NNPOPS_OPTION_TENSOR_CORES],
            .warning = ctx->warning, .warning_size = sizeof ctx->warning,
            .break_next_capture = &ctx->test_break_capture,
            .e_factor = e_factor, .f_factor = e_factor * to_A,
            .out = out, .stats = &ctx->stats,
        };
        if ((st = nnpops__cuda_compute(&ctx->cuda, m, &ga)) != NNPOPS_OK) return st;
        ctx->stats.steps++;
        return NNPOPS_OK;
    }
#endif
    const nnpops__nbr_choice lists = nnpops__potential_lists(m);
    int64_t n_centers = 0;
    if ((st = find_pairs(ctx, in, n_local, &lists, &n_centers)) != NNPOPS_OK) return st;
    const int64_t n_pairs = ctx->stats.n_pairs;
    if ((st = check_distances(ctx, n_pairs, to_A)) != NNPOPS_OK) return st;

    const int need_grad = out->forces || out->virials || out->atomic_virials;
    RESERVE(ctx, BUF_ATOM_E, n, double, "atomic energies");
    RESERVE(ctx, BUF_GRAD, 3 * n_pairs, double, "pair gradients");
    RESERVE(ctx, BUF_SYS_E, ns * (ens > 1 ? ens : 1), double, "system energies");
    if (out->member_energies) RESERVE(ctx, BUF_MEMBER_E, n * ens, double, "member energies");
    double *atom_e = ctx->buf[BUF_ATOM_E].ptr;
    double *grad = ctx->buf[BUF_GRAD].ptr;
    double *member_e = out->member_energies ? ctx->buf[BUF_MEMBER_E].ptr : NULL;
    memset(atom_e, 0, sizeof(double) * (size_t)n);
    if (need_grad) memset(grad, 0, sizeof(double) * 3 * (size_t)n_pairs);
    if (member_e) memset(member_e, 0, sizeof(double) * (size_t)(n * ens));

    nnpops__step step = {
        .n_atoms = n,
        .n_local = n_local,
        .n_systems = ns,
        .species = ctx->buf[BUF_SPECIES].ptr,
        .positions = ctx->buf[BUF_POS].ptr,
        .batch = ctx->buf[BUF_BATCH].ptr,
        .charges = m->uses_charge ? in->charges : NULL,
        .lists = lists,
        .n_pairs = n_pairs,
        .pairs = ctx->buf[BUF_PAIRS].ptr,
        .pair_vec = ctx->buf[BUF_VEC].ptr,
        .pair_dist = ctx->buf[BUF_DIST].ptr,
        .n_centers = n_centers,
        .center_start = lists.full ? ctx->buf[BUF_CENTER_START].ptr : NULL,
        .member = (int32_t)ctx->option[NNPOPS_OPTION_ENSEMBLE_MEMBER],
        .need_grad = need_grad,
        .atom_energy = atom_e,
        .pair_grad = grad,
        .member_atom_energy = member_e,
    };
    ctx->scratch.threads = cpu_threads(ctx->option[NNPOPS_OPTION_THREADS]);
    ctx->scratch.threads_used = 1;
    if ((st = m->vt->compute_cpu(m, &ctx->scratch, &step)) != NNPOPS_OK) return st;
    ctx->stats.descriptor_length = step.descriptor_length;
    ctx->stats.cpu_threads = ctx->scratch.threads_used;

    const int32_t *batch = ctx->buf[BUF_BATCH].ptr;
    double *sys_e = ctx->buf[BUF_SYS_E].ptr;
    if (out->energies) {
        nnpops__energy_reduce_cpu(n, ns, batch, atom_e, 1, sys_e);
        for (int64_t s = 0; s < ns; s++) out->energies[s] = sys_e[s] * e_factor;
    }
    if (out->member_energies) {
        nnpops__energy_reduce_cpu(n, ns, batch, member_e, ens, out->member_energies);
        for (int64_t k = 0; k < ns * ens; k++) out->member_energies[k] *= e_factor;
    }
    if (out->atomic_energies) {
        for (int64_t i = 0; i < n; i++) out->atomic_energies[i] = i < n_local ? atom_e[i] * e_factor : 0.0;
    }
    if (need_grad) {
        nnpops__pair_reduce_cpu(n, ns, batch, n_pairs, step.pairs, step.pair_vec, grad, out->forces,
                                out->virials, out->atomic_virials);
        /* the reduction gives F_i = +g, F_j = -g (model energy per angstrom); x is in caller
         * lengths, so dE/dx_caller = dE/dx_angstrom * to_A */
        const double f_factor = e_factor * to_A;
        if (out->forces)
            for (int64_t k = 0; k < 3 * n; k++) out->forces[k] *= f_factor;
        if (out->virials)
            for (int64_t k = 0; k < 9 * ns; k++) out->virials[k] *= e_factor;
        if (out->atomic_virials)
            for (int64_t k = 0; k < 9 * n; k++) out->atomic_virials[k] *= e_factor;
    }
    ctx->stats.steps++;
    return NNPOPS_OK;
}

/* ---- the device-pointer entry (experimental) -------------------------------------------------- */

void nnpops__cuda_test_break_next_capture(nnpops_context *ctx) {
    if (ctx) ctx->test_break_capture = 1;
}

/* What the device entry `fn` needs before anything else: a library built with CUDA and the
 * context's model on a CUDA device. */
static nnpops_status device_entry_ready(const nnpops_context *ctx, const char *fn) {
#ifndef NNPOPS_HAVE_CUDA
    (void)ctx;
    return nnpops__fail(NNPOPS_ERROR_DEVICE_NOT_BUILT,
                        "%s: this nnpops library was built without CUDA (NNPOPS_ENABLE_CUDA=OFF); "
                        "use nnpops_compute with host arrays",
                        fn);
#else
    const nnpops_model *m = ctx->model;
    if (m->device != NNPOPS__CUDA)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "%s needs a model loaded on a CUDA device; model '%s' is on %s (use "
                            "nnpops_compute)",
                            fn, m->name, m->device_name);
    return NNPOPS_OK;
#endif
}

#ifdef NNPOPS_HAVE_CUDA
/* Checks of the device entry's arguments (of this library's size, take_struct) that need no device
 * memory access. */
static nnpops_status validate_device(const nnpops_device_inputs *in,
                                     const nnpops_device_outputs *out, int64_t *n_local_out) {
    if (in->n_atoms < 0 || in->n_atoms > INT32_MAX - 1)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "n_atoms = %lld is out of range",
                            (long long)in->n_atoms);
    if (in->n_systems < 0 || in->n_systems > INT32_MAX)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "n_systems = %lld is out of range (0 = not given, else 1 .. 2^31 - 1)",
                            (long long)in->n_systems);
    return check_arrays(in->n_atoms, in->n_systems, in->n_local, in->batch, in->atomic_numbers,
                        in->positions, in->pbc, in->cells, n_local_out);
}
#endif

nnpops_status nnpops_compute_device(nnpops_context *ctx, const nnpops_device_inputs *caller_in,
                                    nnpops_device_outputs *caller_out, void *cuda_stream) {
    if (!ctx) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "context is NULL");
    nnpops_status st = device_entry_ready(ctx, "nnpops_compute_device");
#ifndef NNPOPS_HAVE_CUDA
    (void)caller_in;
    (void)caller_out;
    (void)cuda_stream;
    return st;
#else
    if (st != NNPOPS_OK) return st;
    if (!caller_in || !caller_out)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "inputs or outputs is NULL");
    nnpops_device_inputs in_full;
    nnpops_device_outputs out_full;
    if ((st = take_struct(&in_full, sizeof in_full, caller_in, DEVICE_INPUTS_SIZE_0_1,
                          "nnpops_device_inputs")) != NNPOPS_OK ||
        (st = take_struct(&out_full, sizeof out_full, caller_out, DEVICE_OUTPUTS_SIZE_0_1,
                          "nnpops_device_outputs")) != NNPOPS_OK)
        return st;
    const nnpops_device_inputs *in = &in_full;
    const nnpops_device_outputs *out = &out_full;
    const nnpops_model *m = ctx->model;
    int64_t n_local = 0;
    st = validate_device(in, out, &n_local);
    if (st != NNPOPS_OK) return st;
    const double to_A = length_to_A[(int)ctx->option[NNPOPS_OPTION_LENGTH_UNIT]];
    const double e_factor = m->energy_to_eV * eV_to[(int)ctx->option[NNPOPS_OPTION_ENERGY_UNIT]];
    const nnpops__cuda_dev_args da = {
        .stream = cuda_stream,
        .n_atoms = in->n_atoms, .n_local = n_local, .n_systems_given = in->n_systems,
        .atomic_numbers = in->atomic_numbers, .positions = in->positions, .batch = in->batch,
        .cells = in->cells, .pbc = in->pbc,
        .energies = out->energies, .forces = out->forces, .virials = out->virials,
        .to_A = to_A, .e_factor = e_factor, .f_factor = e_factor * to_A,
        .min_distance = ctx->option[NNPOPS_OPTION_MIN_DISTANCE],
        .max_neighbors = (int64_t)ctx->option[NNPOPS_OPTION_MAX_NEIGHBORS],
        .max_images = (int32_t)ctx->option[NNPOPS_OPTION_MAX_IMAGES],
        .member = (int32_t)ctx->option[NNPOPS_OPTION_ENSEMBLE_MEMBER],
        .deterministic = (int32_t)ctx->option[NNPOPS_OPTION_DETERMINISTIC],
        .tensor_cores = (int32_t)ctx->option[NNPOPS_OPTION_TENSOR_CORES],
        .stats = &ctx->stats,
    };
    int need_plan = 0;
    if ((st = nnpops__cuda_device_try(&ctx->cuda, m, &da, &need_plan)) != NNPOPS_OK) return st;
    if (!need_plan) {
        ctx->stats.steps++;
        return NNPOPS_OK;
    }

    /* a planning call: the inputs to the host (one synchronization of the caller's stream) */
    const int64_t n = in->n_atoms;
    RESERVE(ctx, BUF_DEV_Z, n, int32_t, "atomic numbers (host copy)");
    RESERVE(ctx, BUF_DEV_POS, 3 * n, double, "positions (host copy)");
    RESERVE(ctx, BUF_DEV_BATCH, n, int32_t, "batch (host copy)");
    {
        void *dst[3] = {ctx->buf[BUF_DEV_Z].ptr, ctx->buf[BUF_DEV_POS].ptr,
                        ctx->buf[BUF_DEV_BATCH].ptr};
        const void *src[3] = {in->atomic_numbers, in->positions, in->batch};
        const size_t bytes[3] = {sizeof(int32_t) * (size_t)n, sizeof(double) * 3 * (size_t)n,
                                 sizeof(int32_t) * (size_t)n};
        const char *what[3] = {"inputs->atomic_numbers", "inputs->positions", "inputs->batch"};
        if ((st = nnpops__cuda_device_fetch(m, cuda_stream, 3, dst, src, bytes, what)) != NNPOPS_OK)
            return st;
    }
    const int32_t *batch = in->batch ? ctx->buf[BUF_DEV_BATCH].ptr : NULL;
    int64_t ns = in->n_systems;
    if (ns == 0) {
        /* not given: max(batch) + 1 (at least 1, so that a negative index is reported as such) */
        int64_t top = 0;
        for (int64_t i = 0; batch && i < n; i++)
            if (batch[i] > top) top = batch[i];
        ns = top + 1;
        if (ns > INT32_MAX)
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                                "n_systems = max(batch) + 1 = %lld is out of range", (long long)ns);
    }
    const double *cells = NULL;
    if (in->cells) {
        RESERVE(ctx, BUF_DEV_CELLS, 9 * ns, double, "cells (host copy)");
        void *dst[1] = {ctx->buf[BUF_DEV_CELLS].ptr};
        const void *src[1] = {in->cells};
        const size_t bytes[1] = {sizeof(double) * 9 * (size_t)ns};
        const char *what[1] = {"inputs->cells"};
        if ((st = nnpops__cuda_device_fetch(m, cuda_stream, 1, dst, src, bytes, what)) != NNPOPS_OK)
            return st;
        cells = ctx->buf[BUF_DEV_CELLS].ptr;
    }
    const double *charges = NULL;
    if (in->charges) {
        RESERVE(ctx, BUF_DEV_Q, ns, double, "charges (host copy)");
        void *dst[1] = {ctx->buf[BUF_DEV_Q].ptr};
        const void *src[1] = {in->charges};
        const size_t bytes[1] = {sizeof(double) * (size_t)ns};
        const char *what[1] = {"inputs->charges"};
        if ((st = nnpops__cuda_device_fetch(m, cuda_stream, 1, dst, src, bytes, what)) != NNPOPS_OK)
            return st;
        charges = ctx->buf[BUF_DEV_Q].ptr;
    }
    /* nnpops_compute's checks and preparation, hence its errors */
    const nnpops_inputs hin = {sizeof hin, n, in->n_local, ns, ctx->buf[BUF_DEV_Z].ptr,
                               ctx->buf[BUF_DEV_POS].ptr, batch, cells, in->pbc, charges};
    nnpops_outputs hout = {sizeof hout, NULL, NULL, NULL, NULL, NULL, NULL};
    if ((st = validate(ctx, &hin, &hout, &n_local)) != NNPOPS_OK) return st;
    if ((st = prepare(ctx, &hin, to_A)) != NNPOPS_OK) return st;
    const nnpops__cuda_args ga = {
        .n_atoms = n, .n_local = n_local, .n_systems = ns,
        .positions = ctx->buf[BUF_POS].ptr, .species = ctx->buf[BUF_SPECIES].ptr,
        .batch = ctx->buf[BUF_BATCH].ptr, .order = ctx->buf[BUF_ORDER].ptr,
        .sys_start = ctx->buf[BUF_SYS_START].ptr, .cells = ctx->buf[BUF_CELLS].ptr,
        .pbc = ctx->buf[BUF_PBC].ptr, .charges = m->uses_charge ? charges : NULL,
        .min_distance = da.min_distance, .max_neighbors = da.max_neighbors,
        .max_images = da.max_images, .member = da.member,
        .deterministic = da.deterministic, .tensor_cores = da.tensor_cores,
        .warning = ctx->warning, .warning_size = sizeof ctx->warning,
        .e_factor = e_factor, .f_factor = e_factor * to_A,
        .out = NULL, .stats = &ctx->stats,
    };
    if ((st = nnpops__cuda_device_plan(&ctx->cuda, m, &da, &ga)) != NNPOPS_OK) return st;
    ctx->stats.steps++;
    return NNPOPS_OK;
#endif
}

nnpops_status nnpops_context_device_status(nnpops_context *ctx, void *cuda_stream) {
    if (!ctx) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "context is NULL");
    const nnpops_status st = device_entry_ready(ctx, "nnpops_context_device_status");
#ifndef NNPOPS_HAVE_CUDA
    (void)cuda_stream;
    return st;
#else
    if (st != NNPOPS_OK) return st;
    return nnpops__cuda_device_status(ctx->cuda, ctx->model, cuda_stream, &ctx->stats);
#endif
}
