/*
 * test_bad_inputs.c - the bad-input matrix of the public API (docs/reliability.md): each bad
 * input gets the documented status AND a message that names what is wrong (atom index, element,
 * both atoms of a close pair, system and axis of a cell, option and range, file), and afterwards
 * the SAME context computes the next valid call exactly as a fresh context does (bitwise), with
 * its step counter untouched by the failed calls.
 *
 * Model: ANI-1x (H, C, N, O; cutoff 5.2 angstrom), found by name through NNPOPS_MODEL_PATH (the
 * model.convert fixture).  A missing model fails under CI=true and skips elsewhere.
 *
 * Usage: test_bad_inputs CASE (the names are in the table at the end).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

/* ---- the model and the reference call ---------------------------------------------------------- */

static nnpops_model *model;

static int load_model(void) {
    nnpops_status st = nnpops_model_load("ani1x", "cpu", NNPOPS_FLOAT64, &model);
    if (st == NNPOPS_ERROR_MODEL_NOT_FOUND) return test_missing_data("ani1x (NNPOPS_MODEL_PATH)");
    CHECK_OK(st);
    return 0;
}

/* A batch of two systems: methane (not periodic) and two waters in a triclinic periodic box. */
enum { REF_N = 11, REF_S = 2 };
static const int32_t ref_z[REF_N] = {6, 1, 1, 1, 1, 8, 1, 1, 8, 1, 1};
static const double ref_x[REF_N * 3] = {
    0.00, 0.00, 0.00,   0.63, 0.63, 0.63,   -0.63, -0.63, 0.63,  -0.63, 0.63, -0.63,
    0.63, -0.63, -0.63,
    1.00, 1.00, 1.00,   1.96, 1.00, 1.00,   0.76, 1.93, 1.00,
    4.00, 3.80, 3.90,   4.95, 3.75, 3.95,   3.70, 4.70, 3.85};
static const int32_t ref_batch[REF_N] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
static const double ref_cells[REF_S * 9] = {0, 0, 0, 0, 0, 0, 0, 0, 0,
                                            6.0, 0.0, 0.0, 0.4, 6.2, 0.0, -0.3, 0.5, 6.5};
static const uint8_t ref_pbc[REF_S * 3] = {0, 0, 0, 1, 1, 1};

typedef struct result {
    double e[REF_S], f[REF_N * 3], w[REF_S * 9], ae[REF_N];
} result;

static nnpops_inputs ref_inputs(void) {
    nnpops_inputs in = {sizeof(nnpops_inputs), REF_N, -1, REF_S, ref_z, ref_x, ref_batch,
                        ref_cells, ref_pbc};
    return in;
}

static nnpops_outputs outputs_of(result *r) {
    nnpops_outputs out = {sizeof(nnpops_outputs), r->e, r->f, r->w, r->ae, NULL, NULL};
    return out;
}

static int64_t steps_of(const nnpops_context *ctx) {
    nnpops_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(nnpops_context_stats(ctx, &s));
    return s.steps;
}

static void compute_ref(nnpops_context *ctx, result *r) {
    memset(r, 0xff, sizeof *r); /* NaN everywhere: nothing is left unwritten */
    nnpops_inputs in = ref_inputs();
    nnpops_outputs out = outputs_of(r);
    CHECK_OK(nnpops_compute(ctx, &in, &out));
}

/* The context computes the reference call exactly as a fresh context does. */
static void check_recovers(nnpops_context *ctx) {
    result a, b;
    compute_ref(ctx, &a);
    nnpops_context *fresh = NULL;
    CHECK_OK(nnpops_context_create(model, &fresh));
    compute_ref(fresh, &b);
    nnpops_context_destroy(fresh);
    if (memcmp(&a, &b, sizeof a) != 0) {
        for (int i = 0; i < REF_S; i++) fprintf(stderr, "E[%d] %.17g vs fresh %.17g\n", i, a.e[i], b.e[i]);
        CHECK(!"the context after the error differs from a fresh context");
    }
    CHECK(isfinite(a.e[0]) && isfinite(a.e[1]));
}

/* Runs `call`, expecting `status`, a message with each needle, and no step counted. */
#define EXPECT(ctx, call, status, ...)                                                      \
    do {                                                                                    \
        const int64_t steps0_ = (ctx) ? steps_of(ctx) : 0;                                  \
        CHECK_STATUS(call, status);                                                         \
        const char *needles_[] = {__VA_ARGS__, NULL};                                       \
        for (int k_ = 0; needles_[k_]; k_++) CHECK_ERROR_HAS(needles_[k_]);                 \
        printf("%-30s %s: %s\n", nnpops_status_name(status), #call, nnpops_last_error());   \
        if (ctx) CHECK(steps_of(ctx) == steps0_);                                           \
    } while (0)

/* A copy of the reference inputs that a case may modify. */
typedef struct inputs_copy {
    int32_t z[REF_N], batch[REF_N];
    double x[REF_N * 3], cells[REF_S * 9];
    uint8_t pbc[REF_S * 3];
    nnpops_inputs in;
} inputs_copy;

static void copy_ref(inputs_copy *c) {
    memcpy(c->z, ref_z, sizeof c->z);
    memcpy(c->batch, ref_batch, sizeof c->batch);
    memcpy(c->x, ref_x, sizeof c->x);
    memcpy(c->cells, ref_cells, sizeof c->cells);
    memcpy(c->pbc, ref_pbc, sizeof c->pbc);
    nnpops_inputs in = {sizeof(nnpops_inputs), REF_N, -1, REF_S, c->z, c->x, c->batch, c->cells,
                        c->pbc};
    c->in = in;
}

static nnpops_context *new_context(void) {
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(model, &ctx));
    result r;
    compute_ref(ctx, &r); /* warm: buffers sized, a step counted */
    return ctx;
}

/* ---- cases: arguments -------------------------------------------------------------------------- */

/* The structs grow by struct_size: the 0.1.0 sizes (inputs up to pbc) and anything larger are
 * read as far as they reach; smaller ones are refused. */
static int case_struct_size(void) {
    nnpops_context *ctx = new_context();
    result r, ref;
    compute_ref(ctx, &ref);
    nnpops_inputs in = ref_inputs();
    nnpops_outputs out = outputs_of(&r);
    const size_t in_0_1 = offsetof(nnpops_inputs, charges);
    in.struct_size = in_0_1 - 8;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "nnpops_inputs.struct_size is", "expected at least");
    in.struct_size = 0;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "nnpops_inputs.struct_size is 0");
    in = ref_inputs();
    out.struct_size = sizeof out - 16;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "nnpops_outputs.struct_size is");
    nnpops_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = 8;
    EXPECT(ctx, nnpops_context_stats(ctx, &stats), NNPOPS_ERROR_INVALID_ARGUMENT,
           "nnpops_stats.struct_size is 8, expected at least");
    /* a caller of 0.1.0: the fields past its size are not read (a charge of 1 there would be an
     * error if it were), and the results are the reference's bits */
    const double one = 1.0;
    in = ref_inputs();
    in.charges = &one;
    in.struct_size = in_0_1;
    memset(&r, 0xff, sizeof r);
    out = outputs_of(&r);
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    CHECK(memcmp(&r, &ref, sizeof r) == 0);
    /* a caller built against a newer header: larger structs, the known fields read */
    struct {
        nnpops_inputs in;
        double future[4];
    } big_in;
    struct {
        nnpops_outputs out;
        double *future[4];
    } big_out;
    memset(&big_in, 0x5a, sizeof big_in);
    memset(&big_out, 0x5a, sizeof big_out);
    big_in.in = ref_inputs();
    big_in.in.struct_size = sizeof big_in;
    memset(&r, 0xff, sizeof r);
    big_out.out = outputs_of(&r);
    big_out.out.struct_size = sizeof big_out;
    CHECK_OK(nnpops_compute(ctx, &big_in.in, &big_out.out));
    CHECK(memcmp(&r, &ref, sizeof r) == 0);
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

/* Total charges: ANI uses none, so a zero charge is the neutral call (the same bits as NULL), a
 * nonzero one a named error, a non-finite one an invalid argument. */
static int case_charges(void) {
    nnpops_context *ctx = new_context();
    CHECK(nnpops_model_uses_charge(model) == 0);
    result r, ref;
    compute_ref(ctx, &ref);
    const double zero[REF_S] = {0.0, 0.0}, charged[REF_S] = {0.0, -1.0},
                 bad[REF_S] = {NAN, 0.0};
    nnpops_inputs in = ref_inputs();
    in.charges = zero;
    memset(&r, 0xff, sizeof r);
    nnpops_outputs out = outputs_of(&r);
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    CHECK(memcmp(&r, &ref, sizeof r) == 0);
    in.charges = charged;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_UNSUPPORTED, "system 1",
           "total charge -1", "'ani1x'", "does not use a charge");
    in.charges = bad;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT, "system 0",
           "non-finite total charge");
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_null_pointers(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_inputs in = ref_inputs();
    nnpops_outputs out = outputs_of(&r);
    EXPECT(ctx, nnpops_compute(NULL, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT(ctx, nnpops_compute(ctx, NULL, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "inputs or outputs is NULL");
    EXPECT(ctx, nnpops_compute(ctx, &in, NULL), NNPOPS_ERROR_INVALID_ARGUMENT,
           "inputs or outputs is NULL");
    in.atomic_numbers = NULL;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "atomic_numbers or positions is NULL");
    in = ref_inputs();
    in.positions = NULL;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "atomic_numbers or positions is NULL");
    in = ref_inputs();
    in.cells = NULL;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "pbc given without cells");
    in = ref_inputs();
    in.batch = NULL;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "n_systems = 2 needs a batch array");
    /* the other entry points */
    nnpops_context *c2 = (nnpops_context *)&c2;
    EXPECT(ctx, nnpops_context_create(NULL, &c2), NNPOPS_ERROR_INVALID_ARGUMENT, "model is NULL");
    CHECK(c2 == NULL);
    EXPECT(ctx, nnpops_context_create(model, NULL), NNPOPS_ERROR_INVALID_ARGUMENT,
           "context out-pointer is NULL");
    EXPECT(ctx, nnpops_model_load("ani1x", "cpu", NNPOPS_FLOAT64, NULL),
           NNPOPS_ERROR_INVALID_ARGUMENT, "model is NULL");
    nnpops_model *m2 = (nnpops_model *)&m2;
    EXPECT(ctx, nnpops_model_load(NULL, "cpu", NNPOPS_FLOAT64, &m2), NNPOPS_ERROR_INVALID_ARGUMENT,
           "name_or_path is NULL or empty");
    CHECK(m2 == NULL);
    double v;
    EXPECT(ctx, nnpops_context_set_option(NULL, NNPOPS_OPTION_MIN_DISTANCE, 0.2),
           NNPOPS_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT(ctx, nnpops_context_get_option(ctx, NNPOPS_OPTION_MIN_DISTANCE, NULL),
           NNPOPS_ERROR_INVALID_ARGUMENT, "NULL argument");
    EXPECT(ctx, nnpops_context_get_option(NULL, NNPOPS_OPTION_MIN_DISTANCE, &v),
           NNPOPS_ERROR_INVALID_ARGUMENT, "NULL argument");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "min_distance", NULL),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option min_distance: value is NULL");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, NULL, "1"), NNPOPS_ERROR_INVALID_ARGUMENT,
           "option name is NULL");
    EXPECT(ctx, nnpops_context_stats(ctx, NULL), NNPOPS_ERROR_INVALID_ARGUMENT, "NULL argument");
    int64_t np = 7;
    EXPECT(ctx, nnpops_neighbor_pairs(2, NULL, NULL, NULL, 5.0, 0, &np, NULL, NULL, NULL),
           NNPOPS_ERROR_INVALID_ARGUMENT, "positions is NULL");
    CHECK(np == 0);
    EXPECT(ctx, nnpops_neighbor_pairs(REF_N, ref_x, NULL, NULL, 5.0, 0, NULL, NULL, NULL, NULL),
           NNPOPS_ERROR_INVALID_ARGUMENT, "n_pairs is NULL");
    EXPECT(ctx, nnpops_neighbor_pairs(REF_N, ref_x, NULL, NULL, 5.0, 4, &np, NULL, NULL, NULL),
           NNPOPS_ERROR_INVALID_ARGUMENT, "pairs is NULL with capacity = 4");
    /* NULL objects are harmless where the header says so */
    nnpops_context_destroy(NULL);
    nnpops_model_destroy(NULL);
    CHECK(nnpops_model_num_species(NULL) == 0 && nnpops_model_species(NULL, 0) == -1);
    CHECK(strcmp(nnpops_model_name(NULL), "") == 0 && nnpops_model_cutoff(NULL) == 0.0);
    CHECK(nnpops_option_name((nnpops_option)99) == NULL);
    CHECK(strcmp(nnpops_status_name((nnpops_status)1234), "NNPOPS_ERROR_UNKNOWN_STATUS") == 0);
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_counts(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    nnpops_inputs in = ref_inputs();
    in.n_atoms = -1;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "n_atoms = -1 is out of range");
    in = ref_inputs();
    in.n_atoms = (int64_t)1 << 40;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "n_atoms = 1099511627776 is out of range");
    in = ref_inputs();
    in.n_systems = 0;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "n_systems = 0 must be at least 1");
    in.n_systems = -3;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "n_systems = -3 must be at least 1");
    /* a system count no batch index can reach (batch is int32): once, its buffer sizes
     * overflowed size_t and the step wrote past them */
    in.n_systems = (int64_t)1 << 61;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "n_systems = 2305843009213693952 is out of range");
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_n_local(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    nnpops_inputs in = ref_inputs();
    in.n_local = REF_N + 1;
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "n_local = 12 exceeds n_atoms = 11");
    /* n_local < n_atoms is valid (ghosts): energies of local atoms only */
    in.n_local = 8;
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    CHECK(r.ae[8] == 0.0 && r.ae[9] == 0.0 && r.ae[10] == 0.0);
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_batch_index(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    c.batch[4] = 2;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "atom 4: batch index 2 is outside 0..1");
    copy_ref(&c);
    c.batch[0] = -1;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "atom 0: batch index -1 is outside 0..1");
    copy_ref(&c);
    c.batch[10] = INT32_MAX;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_INVALID_ARGUMENT,
           "atom 10: batch index 2147483647 is outside 0..1");
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

/* ---- cases: atoms ------------------------------------------------------------------------------ */

static int case_unknown_element(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    c.z[3] = 17;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_UNKNOWN_ELEMENT,
           "atom 3: element Cl (atomic number 17) is not described by model 'ani1x'",
           "(elements: H C N O)");
    copy_ref(&c);
    c.z[7] = 0;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_UNKNOWN_ELEMENT,
           "atom 7: element ? (atomic number 0)");
    copy_ref(&c);
    c.z[10] = 999;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_UNKNOWN_ELEMENT,
           "atom 10: element ? (atomic number 999)");
    copy_ref(&c);
    c.z[1] = -1;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_UNKNOWN_ELEMENT,
           "atom 1: element ? (atomic number -1)");
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_nonfinite_position(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    c.x[3 * 2 + 1] = NAN;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_POSITION,
           "atom 2 has a non-finite position");
    copy_ref(&c);
    c.x[3 * 10 + 2] = INFINITY;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_POSITION,
           "atom 10 has a non-finite position", "inf");
    copy_ref(&c);
    c.x[0] = -INFINITY;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_POSITION,
           "atom 0 has a non-finite position (-inf");
    /* finite but absurdly far in a periodic system: refused, not wrapped wrongly */
    copy_ref(&c);
    c.x[3 * 9] = 1e300;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_POSITION,
           "atom 9 lies", "cells away along axis a, too far to wrap");
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_atoms_too_close(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    /* atom 3 onto atom 1, 0.05 angstrom away */
    for (int k = 0; k < 3; k++) c.x[3 * 3 + k] = c.x[3 * 1 + k];
    c.x[3 * 3 + 2] += 0.05;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_ATOMS_TOO_CLOSE,
           "atoms 1 and 3 are 0.05", "angstrom apart (min_distance = 0.1 angstrom)");
    /* the threshold is an option, in angstrom whatever the length unit */
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MIN_DISTANCE, 0.04));
    CHECK_OK(nnpops_compute(ctx, &c.in, &out));
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MIN_DISTANCE, 0.1));
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_LENGTH_UNIT, 1)); /* nm */
    for (int k = 0; k < 3 * REF_N; k++) c.x[k] *= 0.1;
    for (int k = 0; k < 9 * REF_S; k++) c.cells[k] *= 0.1;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_ATOMS_TOO_CLOSE,
           "atoms 1 and 3 are 0.05", "min_distance = 0.1 angstrom");
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_LENGTH_UNIT, 0));
    /* identical positions */
    copy_ref(&c);
    for (int k = 0; k < 3; k++) c.x[3 * 6 + k] = c.x[3 * 5 + k];
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_ATOMS_TOO_CLOSE,
           "atoms 5 and 6 are 0 angstrom apart");
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_too_close_image(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    /* system 1, a cubic 6 angstrom box: atom 8 near x = 0, atom 9 near x = 6, 0.05 apart
     * through the boundary */
    const double cubic[9] = {6, 0, 0, 0, 6, 0, 0, 0, 6};
    memcpy(c.cells + 9, cubic, sizeof cubic);
    c.x[3 * 8] = 0.02;
    c.x[3 * 9] = 5.97;
    c.x[3 * 9 + 1] = c.x[3 * 8 + 1];
    c.x[3 * 9 + 2] = c.x[3 * 8 + 2];
    /* the pair is named in its half-list orientation, which follows the image shift */
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_ATOMS_TOO_CLOSE, "atoms ",
           " are 0.05", "angstrom apart");
    CHECK(strstr(nnpops_last_error(), "atoms 8 and 9") || strstr(nnpops_last_error(), "atoms 9 and 8"));
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

/* ---- cases: cells ------------------------------------------------------------------------------ */

static int case_singular_cell(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    const double flat[9] = {6, 0, 0, 0, 6, 0, 6, 6, 0}; /* c in the plane of a and b */
    memcpy(c.cells + 9, flat, sizeof flat);
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_CELL,
           "system 1: cell is singular along periodic axis");
    const double zero_c[9] = {6, 0, 0, 0, 6, 0, 0, 0, 0};
    memcpy(c.cells + 9, zero_c, sizeof zero_c);
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_CELL,
           "system 1: cell is singular along periodic axis c");
    /* periodic along a and b only: c must still be independent (a slab needs a c vector) */
    c.pbc[5] = 0;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_CELL,
           "system 1: cell is singular along non-periodic axis c",
           "all three cell vectors must be independent");
    /* the cell of a system without periodic axes is ignored, even when singular */
    c.pbc[3] = c.pbc[4] = 0;
    CHECK_OK(nnpops_compute(ctx, &c.in, &out));
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_left_handed_cell(void) {
    nnpops_context *ctx = new_context();
    result right, left;
    compute_ref(ctx, &right);
    inputs_copy c;
    copy_ref(&c);
    /* rows a and b swapped: the same lattice, negative determinant */
    for (int k = 0; k < 3; k++) {
        c.cells[9 + k] = ref_cells[9 + 3 + k];
        c.cells[9 + 3 + k] = ref_cells[9 + k];
    }
    nnpops_outputs out = outputs_of(&left);
    CHECK_OK(nnpops_compute(ctx, &c.in, &out));
    /* c -> -c: also the same lattice */
    copy_ref(&c);
    for (int k = 0; k < 3; k++) c.cells[9 + 6 + k] = -ref_cells[9 + 6 + k];
    result mirrored;
    nnpops_outputs out2 = outputs_of(&mirrored);
    CHECK_OK(nnpops_compute(ctx, &c.in, &out2));
    for (int s = 0; s < REF_S; s++) {
        CHECK_NEAR(left.e[s], right.e[s], 1e-9, 1e-12);
        CHECK_NEAR(mirrored.e[s], right.e[s], 1e-9, 1e-12);
    }
    for (int k = 0; k < 3 * REF_N; k++) {
        CHECK_NEAR(left.f[k], right.f[k], 1e-9, 1e-9);
        CHECK_NEAR(mirrored.f[k], right.f[k], 1e-9, 1e-9);
    }
    for (int k = 0; k < 9 * REF_S; k++) CHECK_NEAR(left.w[k], right.w[k], 1e-9, 1e-9);
    printf("left-handed cell: E = %.12f eV (right-handed %.12f eV)\n", left.e[1], right.e[1]);
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_nonfinite_cell(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    c.cells[9 + 4] = NAN;
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_CELL,
           "system 1: cell has a non-finite entry");
    copy_ref(&c);
    c.cells[3] = INFINITY; /* system 0 is not periodic: its cell is not used */
    CHECK_OK(nnpops_compute(ctx, &c.in, &out));
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_too_many_images(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    /* a 3 angstrom box: the 5.2 angstrom cutoff needs 2 images per side */
    const double small[9] = {3, 0, 0, 0, 3, 0, 0, 0, 3};
    memcpy(c.cells + 9, small, sizeof small);
    for (int i = 5; i < REF_N; i++) /* keep the waters apart inside the small box */
        for (int k = 0; k < 3; k++) c.x[3 * i + k] = fmod(c.x[3 * i + k], 3.0);
    CHECK_OK(nnpops_compute(ctx, &c.in, &out)); /* 2 <= 64: fine */
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 1));
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_TOO_MANY_IMAGES,
           "system 1: cutoff 5.2", "needs 2 periodic images along axis a (cell width 3)",
           "more than max_images = 1");
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 64));
    /* a 0.05 angstrom thin cell along c: 104 images */
    const double thin[9] = {8, 0, 0, 0, 8, 0, 0, 0, 0.05};
    copy_ref(&c);
    memcpy(c.cells + 9, thin, sizeof thin);
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_TOO_MANY_IMAGES,
           "needs 104 periodic images along axis c", "more than max_images = 64");
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_own_image(void) {
    nnpops_context *ctx = new_context();
    result r;
    nnpops_outputs out = outputs_of(&r);
    inputs_copy c;
    copy_ref(&c);
    /* allowed that many images, the thin cell puts every atom 0.05 from its own image */
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 200));
    const double thin[9] = {8, 0, 0, 0, 8, 0, 0, 0, 0.5};
    memcpy(c.cells + 9, thin, sizeof thin);
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MIN_DISTANCE, 0.6));
    EXPECT(ctx, nnpops_compute(ctx, &c.in, &out), NNPOPS_ERROR_BAD_CELL,
           "angstrom from its own periodic image (cell too small; min_distance = 0.6 angstrom)");
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MIN_DISTANCE, 0.1));
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 64));
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_neighbor_overflow(void) {
    nnpops_context *ctx = new_context();
    result r, unlimited;
    compute_ref(ctx, &unlimited);
    nnpops_outputs out = outputs_of(&r);
    nnpops_inputs in = ref_inputs();
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_NEIGHBORS, 2));
    EXPECT(ctx, nnpops_compute(ctx, &in, &out), NNPOPS_ERROR_NEIGHBOR_OVERFLOW,
           "neighbor pairs exceed the limit max_neighbors = 2 per atom (11 atoms)");
    /* a cap that holds: the same result as no cap */
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_NEIGHBORS, 40));
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    CHECK(memcmp(&r, &unlimited, sizeof r) == 0);
    CHECK_OK(nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_NEIGHBORS, 0));
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

/* ---- cases: model files -------------------------------------------------------------------------- */

static char tmpdir[512];

static void rm_tmp(void) {
    char p[700];
    static const char *const names[] = {"ani1x.yaml", "ani1x.safetensors", NULL};
    for (int i = 0; names[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        unlink(p);
    }
    rmdir(tmpdir);
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    CHECK(a && b);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) CHECK(fwrite(buf, 1, n, b) == n);
    fclose(a);
    CHECK(fclose(b) == 0);
}

/* Copies ani1x.yaml and ani1x.safetensors into a fresh directory; returns the YAML path. */
static const char *copy_model(char *weights, size_t cap) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nnpops-bad-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(tmpdir) != NULL);
    atexit(rm_tmp);
    static char yaml[700];
    char src[4200];
    const char *p = nnpops_model_path(model);
    const char *slash = strrchr(p, '/');
    CHECK(slash != NULL);
    snprintf(yaml, sizeof yaml, "%s/ani1x.yaml", tmpdir);
    copy_file(p, yaml);
    snprintf(src, sizeof src, "%.*s/ani1x.safetensors", (int)(slash - p), p);
    snprintf(weights, cap, "%s/ani1x.safetensors", tmpdir);
    copy_file(src, weights);
    return yaml;
}

static int case_model_truncated(void) {
    char weights[700];
    const char *yaml = copy_model(weights, sizeof weights);
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(yaml, "cpu", NNPOPS_FLOAT64, &m));
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(m, &ctx));
    result before, after;
    compute_ref(ctx, &before);
    /* the weights file cut to half while the model is in use */
    struct stat sb;
    CHECK(stat(weights, &sb) == 0);
    CHECK(truncate(weights, sb.st_size / 2) == 0);
    compute_ref(ctx, &after);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    nnpops_context *ctx2 = NULL; /* a new context of the loaded model too */
    CHECK_OK(nnpops_context_create(m, &ctx2));
    compute_ref(ctx2, &after);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    nnpops_context_destroy(ctx2);
    /* loading again reads the truncated file: refused */
    nnpops_model *m2 = (nnpops_model *)&m2;
    EXPECT(ctx, nnpops_model_load(yaml, "cpu", NNPOPS_FLOAT64, &m2), NNPOPS_ERROR_CHECKSUM,
           "ani1x.yaml:", "weights: ", "ani1x.safetensors: sha256 mismatch");
    CHECK(m2 == NULL);
    /* the YAML cut to half as well */
    CHECK(stat(yaml, &sb) == 0);
    CHECK(truncate(yaml, sb.st_size / 2) == 0);
    EXPECT(ctx, nnpops_model_load(yaml, "cpu", NNPOPS_FLOAT64, &m2), NNPOPS_ERROR_MODEL_FORMAT,
           "ani1x.yaml");
    CHECK(m2 == NULL);
    compute_ref(ctx, &after);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return 0;
}

static int case_model_replaced(void) {
    char weights[700];
    const char *yaml = copy_model(weights, sizeof weights);
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(yaml, "cpu", NNPOPS_FLOAT32, &m));
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(m, &ctx));
    result before, after;
    compute_ref(ctx, &before);
    /* the weights file replaced by one with other values (same size, rewritten in place) */
    size_t size = 0;
    FILE *f = fopen(weights, "rb");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    size = (size_t)ftell(f);
    rewind(f);
    unsigned char *bytes = malloc(size);
    CHECK(bytes && fread(bytes, 1, size, f) == size);
    fclose(f);
    for (size_t k = size - 4000; k < size; k += 4) bytes[k] ^= 0x01; /* low mantissa bits */
    f = fopen(weights, "wb");
    CHECK(f && fwrite(bytes, 1, size, f) == size);
    CHECK(fclose(f) == 0);
    free(bytes);
    compute_ref(ctx, &after);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    nnpops_model *m2 = (nnpops_model *)&m2;
    EXPECT(ctx, nnpops_model_load(yaml, "cpu", NNPOPS_FLOAT32, &m2), NNPOPS_ERROR_CHECKSUM,
           "ani1x.safetensors: sha256 mismatch", "convert the model again");
    /* both files removed */
    CHECK(unlink(weights) == 0);
    EXPECT(ctx, nnpops_model_load(yaml, "cpu", NNPOPS_FLOAT32, &m2), NNPOPS_ERROR_IO,
           "ani1x.safetensors: cannot open the weights file: No such file or directory");
    CHECK(unlink(yaml) == 0);
    EXPECT(ctx, nnpops_model_load(yaml, "cpu", NNPOPS_FLOAT32, &m2), NNPOPS_ERROR_IO,
           "ani1x.yaml' not found");
    compute_ref(ctx, &after);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    nnpops_context_destroy(ctx);
    nnpops_model_destroy(m);
    return 0;
}

/* ---- cases: options and loading --------------------------------------------------------------- */

/* All options of ctx, to check that a refused set changes nothing. */
static void options_of(const nnpops_context *ctx, double *v) {
    for (int k = 0; k < NNPOPS_OPTION_COUNT_; k++) CHECK_OK(nnpops_context_get_option(ctx, (nnpops_option)k, &v[k]));
}

static int case_options_range(void) {
    nnpops_context *ctx = new_context();
    double v0[NNPOPS_OPTION_COUNT_], v1[NNPOPS_OPTION_COUNT_];
    options_of(ctx, v0);
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_MIN_DISTANCE, -1.0),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option min_distance: value -1 is out of range [0, 10]");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_MIN_DISTANCE, NAN),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option min_distance: value nan is out of range");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 0),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option max_images: value 0 is out of range [1, 1000]");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_IMAGES, 1.5),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option max_images: value 1.5", "or not an integer");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_MAX_NEIGHBORS, INFINITY),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option max_neighbors: value inf is out of range");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_ENSEMBLE_MEMBER, 8),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option ensemble_member: value 8 is out of range [-1, 7]");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_LENGTH_UNIT, 3),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option length_unit: value 3 is out of range [0, 2]");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_ENERGY_UNIT, -1),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option energy_unit: value -1 is out of range [0, 3]");
    EXPECT(ctx, nnpops_context_set_option(ctx, (nnpops_option)99, 1),
           NNPOPS_ERROR_INVALID_ARGUMENT, "unknown option number 99");
    EXPECT(ctx, nnpops_context_set_option(ctx, (nnpops_option)-1, 1),
           NNPOPS_ERROR_INVALID_ARGUMENT, "unknown option number -1");
    double v;
    EXPECT(ctx, nnpops_context_get_option(ctx, NNPOPS_OPTION_COUNT_, &v),
           NNPOPS_ERROR_INVALID_ARGUMENT, "unknown option number 11");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_THREADS, 1025),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option threads: value 1025 is out of range [0, 1024]");
    if (!nnpops_cuda_built() || strcmp(nnpops_model_device(model), "cpu") == 0)
        EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_CUDA_GRAPHS, 1),
               NNPOPS_ERROR_UNSUPPORTED, "option cuda_graphs: CUDA graphs are not available for device cpu");
    options_of(ctx, v1);
    CHECK(memcmp(v0, v1, sizeof v0) == 0);
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_option_names(void) {
    nnpops_context *ctx = new_context();
    double v0[NNPOPS_OPTION_COUNT_], v1[NNPOPS_OPTION_COUNT_];
    options_of(ctx, v0);
    nnpops_option o = NNPOPS_OPTION_COUNT_;
    EXPECT(ctx, nnpops_option_from_name("bogus", &o), NNPOPS_ERROR_INVALID_ARGUMENT,
           "unknown option 'bogus' (known: length_unit, energy_unit, min_distance, max_neighbors, "
           "max_images, ensemble_member, cuda_graphs, graph_warmup_steps, deterministic, "
           "tensor_cores, threads)");
    CHECK(o == NNPOPS_OPTION_COUNT_);
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "Length_Unit", "nm"),
           NNPOPS_ERROR_INVALID_ARGUMENT, "unknown option 'Length_Unit'");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "", "1"), NNPOPS_ERROR_INVALID_ARGUMENT,
           "unknown option ''");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "length_unit", "furlong"),
           NNPOPS_ERROR_INVALID_ARGUMENT,
           "option length_unit: cannot read value 'furlong' (one of angstrom|nm|bohr)");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "energy_unit", "kcal"),
           NNPOPS_ERROR_INVALID_ARGUMENT,
           "option energy_unit: cannot read value 'kcal' (one of eV|kcal/mol|kJ/mol|hartree)");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "min_distance", "0.05x"),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option min_distance: cannot read value '0.05x'");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "min_distance", ""),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option min_distance: cannot read value ''");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "min_distance", "nan"),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option min_distance: value nan is out of range");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "max_images", "1e9"),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option max_images: value 1e+09 is out of range");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "deterministic", "maybe"),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option deterministic: cannot read value 'maybe' (one of off|on)");
    EXPECT(ctx, nnpops_context_set_option_by_name(ctx, "tensor_cores", "sometimes"),
           NNPOPS_ERROR_INVALID_ARGUMENT,
           "option tensor_cores: cannot read value 'sometimes' (one of off|on|auto)");
    EXPECT(ctx, nnpops_context_set_option(ctx, NNPOPS_OPTION_TENSOR_CORES, 3),
           NNPOPS_ERROR_INVALID_ARGUMENT, "option tensor_cores: value 3 is out of range [0, 2]");
    options_of(ctx, v1);
    CHECK(memcmp(v0, v1, sizeof v0) == 0);
    /* the accepted spellings */
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "length_unit", "NM"));
    CHECK_OK(nnpops_context_get_option(ctx, NNPOPS_OPTION_LENGTH_UNIT, &v1[0]));
    CHECK(v1[0] == 1.0);
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "length_unit", "A"));
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "deterministic", "yes"));
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "deterministic", "off"));
    CHECK(v0[NNPOPS_OPTION_TENSOR_CORES] == 2.0); /* auto by default */
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "tensor_cores", "on"));
    CHECK_OK(nnpops_context_get_option(ctx, NNPOPS_OPTION_TENSOR_CORES, &v1[0]));
    CHECK(v1[0] == 1.0);
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "tensor_cores", "no"));
    CHECK_OK(nnpops_context_get_option(ctx, NNPOPS_OPTION_TENSOR_CORES, &v1[0]));
    CHECK(v1[0] == 0.0);
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "tensor_cores", "AUTO"));
    CHECK_OK(nnpops_context_get_option(ctx, NNPOPS_OPTION_TENSOR_CORES, &v1[0]));
    CHECK(v1[0] == 2.0);
    CHECK_OK(nnpops_context_set_option_by_name(ctx, "min_distance", "0.1"));
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_load_arguments(void) {
    nnpops_model *m = (nnpops_model *)&m;
    EXPECT(NULL, nnpops_model_load("ani1x", "cpu", (nnpops_precision)7, &m),
           NNPOPS_ERROR_INVALID_ARGUMENT, "precision 7 is neither NNPOPS_FLOAT32 (0) nor NNPOPS_FLOAT64 (1)");
    CHECK(m == NULL);
    EXPECT(NULL, nnpops_model_load("ani1x", "gpu", NNPOPS_FLOAT64, &m),
           NNPOPS_ERROR_INVALID_ARGUMENT, "unknown device 'gpu' (expected \"cpu\", \"cuda\" or \"cuda:N\")");
    EXPECT(NULL, nnpops_model_load("ani1x", "cuda:x", NNPOPS_FLOAT64, &m),
           NNPOPS_ERROR_INVALID_ARGUMENT, "unknown device 'cuda:x'");
    EXPECT(NULL, nnpops_model_load("ani1x", "cuda:-1", NNPOPS_FLOAT64, &m),
           NNPOPS_ERROR_INVALID_ARGUMENT, "unknown device 'cuda:-1'");
    if (!nnpops_cuda_built())
        EXPECT(NULL, nnpops_model_load("ani1x", "cuda", NNPOPS_FLOAT64, &m),
               NNPOPS_ERROR_DEVICE_NOT_BUILT, "built without CUDA");
    else if (nnpops_cuda_device_count() == 0)
        EXPECT(NULL, nnpops_model_load("ani1x", "cuda", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_NO_DEVICE,
               "no usable CUDA device");
    EXPECT(NULL, nnpops_model_load("", "cpu", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_INVALID_ARGUMENT,
           "name_or_path is NULL or empty");
    EXPECT(NULL, nnpops_model_load("no-such-model", "cpu", NNPOPS_FLOAT64, &m),
           NNPOPS_ERROR_MODEL_NOT_FOUND, "model 'no-such-model' not found: no no-such-model.yaml in");
    EXPECT(NULL, nnpops_model_load("ani3x", "cpu", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_MODEL_NOT_FOUND,
           "convert it with: python3 -m nnpops convert ani3x");
    EXPECT(NULL, nnpops_model_load("/nonexistent/dir/model.yaml", "cpu", NNPOPS_FLOAT64, &m),
           NNPOPS_ERROR_IO, "model file '/nonexistent/dir/model.yaml' not found");
    EXPECT(NULL, nnpops_model_load("/tmp/", "cpu", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_IO,
           "model file '/tmp/' is not a regular file");
    CHECK(m == NULL);
    /* the shared model is untouched by all this */
    nnpops_context *ctx = new_context();
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

/* The device-pointer entry where it cannot run: a library built without CUDA, or a model on the
 * CPU.  A clear refusal naming the reason; nothing computed. */
static int case_device_entry(void) {
    nnpops_context *ctx = new_context();
    double e[REF_S] = {0};
    nnpops_device_inputs din = {sizeof din, REF_N, -1, REF_S, ref_z, ref_x, ref_batch, ref_cells,
                                ref_pbc};
    nnpops_device_outputs dout = {sizeof dout, e, NULL, NULL};
    EXPECT(NULL, nnpops_compute_device(NULL, &din, &dout, NULL), NNPOPS_ERROR_INVALID_ARGUMENT,
           "context is NULL");
    EXPECT(NULL, nnpops_context_device_status(NULL, NULL), NNPOPS_ERROR_INVALID_ARGUMENT,
           "context is NULL");
    if (!nnpops_cuda_built()) {
        EXPECT(ctx, nnpops_compute_device(ctx, &din, &dout, NULL), NNPOPS_ERROR_DEVICE_NOT_BUILT,
               "built without CUDA", "use nnpops_compute");
        EXPECT(ctx, nnpops_context_device_status(ctx, NULL), NNPOPS_ERROR_DEVICE_NOT_BUILT,
               "built without CUDA");
    } else if (strcmp(nnpops_model_device(model), "cpu") == 0) {
        EXPECT(ctx, nnpops_compute_device(ctx, &din, &dout, NULL), NNPOPS_ERROR_UNSUPPORTED,
               "loaded on a CUDA device");
        EXPECT(ctx, nnpops_context_device_status(ctx, NULL), NNPOPS_ERROR_UNSUPPORTED,
               "loaded on a CUDA device");
    }
    CHECK(e[0] == 0 && e[1] == 0);
    nnpops_context_destroy(ctx);
    return 0;
}

static int case_zero_atoms(void) {
    nnpops_context *ctx = new_context();
    double e[3] = {1, 2, 3}, w[27];
    memset(w, 0xff, sizeof w);
    int32_t batch[1] = {0};
    nnpops_inputs in = {sizeof in, 0, -1, 3, NULL, NULL, batch, NULL, NULL};
    nnpops_outputs out = {sizeof out, e, NULL, w, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    CHECK(e[0] == 0.0 && e[1] == 0.0 && e[2] == 0.0 && w[26] == 0.0);
    in.n_systems = 0;
    in.batch = NULL;
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    check_recovers(ctx);
    nnpops_context_destroy(ctx);
    return 0;
}

static const test_case cases[] = {
    {"struct_size", case_struct_size},
    {"charges", case_charges},
    {"null_pointers", case_null_pointers},
    {"counts", case_counts},
    {"n_local", case_n_local},
    {"batch_index", case_batch_index},
    {"unknown_element", case_unknown_element},
    {"nonfinite_position", case_nonfinite_position},
    {"atoms_too_close", case_atoms_too_close},
    {"too_close_image", case_too_close_image},
    {"singular_cell", case_singular_cell},
    {"left_handed_cell", case_left_handed_cell},
    {"nonfinite_cell", case_nonfinite_cell},
    {"too_many_images", case_too_many_images},
    {"own_image", case_own_image},
    {"neighbor_overflow", case_neighbor_overflow},
    {"model_truncated", case_model_truncated},
    {"model_replaced", case_model_replaced},
    {"options_range", case_options_range},
    {"option_names", case_option_names},
    {"load_arguments", case_load_arguments},
    {"zero_atoms", case_zero_atoms},
    {"device_entry", case_device_entry},
};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            int rc = load_model();
            if (rc) return rc;
            rc = cases[i].fn();
            nnpops_model_destroy(model);
            return rc;
        }
    }
    fprintf(stderr, "unknown case '%s'\n", argv[1]);
    return 2;
}
