/*
 * fuzz_yaml.c - fuzz target of the model reader: the YAML configuration reader
 * (nnpops__cfg_parse and every accessor of core/src/config.c) and the model loader
 * (nnpops_model_load: common keys, the weights file, the ANI and LJ potentials' keys).
 *
 * One input = the text of a model YAML file.  It is
 *  1. parsed in memory with nnpops__cfg_parse; on success every node of the document is visited
 *     once (by id) with every accessor: type tests, lengths, items, keys and values, mapping
 *     lookups of the keys the loaders use, and all scalar conversions;
 *  2. written as model.yaml into the process's temporary directory, next to tiny.safetensors (a
 *     copy of $NNPOPS_FUZZ_WEIGHTS, the fixed weights of the tiny ANI model of the seed corpus),
 *     and loaded with nnpops_model_load; a model that loads is exercised with one small step.
 * Invariants (a broken one aborts): every failure has a known status other than
 * NNPOPS_ERROR_INTERNAL, a message, and leaves the out-pointer NULL; a successful parse of the
 * same bytes is reproducible.  Memory errors, leaks and undefined behaviour are the sanitizers'.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "fuzz_common.h"
#include "internal.h"

static const char *const lookup_keys[] = {
    "format", "format_version", "name", "type", "units", "species", "weights", "ani", "lj",
    "radial", "angular", "cutoff", "eta", "zeta", "shifts", "sections", "networks", "pairs",
    "elements", "epsilon", "sigma", "dtype", "shape", "data_offsets", "__metadata__", "", NULL};

/* Visits every node of the document once, by id (ids are 1 .. count; line 0 = no such node). */
static void visit_all(const nnpops__cfg *cfg) {
    if (nnpops__cfg_root(cfg) != 1) FUZZ_FAIL("root of a parsed document is %d", nnpops__cfg_root(cfg));
    for (nnpops__node id = 1; nnpops__cfg_line(cfg, id) > 0; id++) {
        const int is_map = nnpops__cfg_is_map(cfg, id), is_seq = nnpops__cfg_is_seq(cfg, id);
        const int is_scalar = nnpops__cfg_is_scalar(cfg, id);
        if (is_map + is_seq + is_scalar != 1) FUZZ_FAIL("node %d has %d types", id, is_map + is_seq + is_scalar);
        const int64_t len = nnpops__cfg_len(cfg, id);
        if (len < 0 || (is_scalar && len != 0)) FUZZ_FAIL("node %d: length %lld", id, (long long)len);
        if (is_seq) {
            for (int64_t i = 0; i < len; i++)
                if (nnpops__cfg_item(cfg, id, i) <= 0) FUZZ_FAIL("node %d: item %lld", id, (long long)i);
            if (nnpops__cfg_item(cfg, id, len) != 0 || nnpops__cfg_item(cfg, id, -1) != 0)
                FUZZ_FAIL("node %d: item out of range", id);
            double vals[8];
            int64_t n = -1;
            nnpops_status st = nnpops__cfg_doubles(cfg, id, "seq", vals, 8, 0, &n);
            fuzz_check_failure("nnpops__cfg_doubles", st, NULL);
            if (st == NNPOPS_OK && (n != len || n > 8)) FUZZ_FAIL("cfg_doubles count %lld", (long long)n);
        }
        if (is_map) {
            for (int64_t i = 0; i < len; i++)
                if (nnpops__cfg_key(cfg, id, i) <= 0 || nnpops__cfg_value(cfg, id, i) <= 0)
                    FUZZ_FAIL("node %d: pair %lld", id, (long long)i);
            for (int k = 0; lookup_keys[k]; k++) {
                nnpops__node out = -1;
                nnpops_status st = nnpops__cfg_get(cfg, id, lookup_keys[k], k & 1, &out);
                fuzz_check_failure("nnpops__cfg_get", st, NULL);
                if (out < 0) FUZZ_FAIL("cfg_get left its output unset");
            }
        }
        const char *s = NULL;
        double d;
        int64_t i64;
        int b;
        nnpops_status st = nnpops__cfg_str(cfg, id, "str", &s);
        fuzz_check_failure("nnpops__cfg_str", st, NULL);
        if (st == NNPOPS_OK && !s) FUZZ_FAIL("cfg_str gave NULL");
        if (st == NNPOPS_OK) (void)nnpops__element_from_symbol(s);
        st = nnpops__cfg_double(cfg, id, "double", &d);
        fuzz_check_failure("nnpops__cfg_double", st, NULL);
        if (st == NNPOPS_OK && !isfinite(d)) FUZZ_FAIL("cfg_double gave %g", d);
        fuzz_check_failure("nnpops__cfg_int", nnpops__cfg_int(cfg, id, "int", &i64), NULL);
        fuzz_check_failure("nnpops__cfg_bool", nnpops__cfg_bool(cfg, id, "bool", &b), NULL);
    }
    /* accessors must be total on ids that are not nodes */
    const nnpops__node bad[] = {0, -1, 1 << 30};
    for (int k = 0; k < 3; k++) {
        if (nnpops__cfg_is_map(cfg, bad[k]) || nnpops__cfg_len(cfg, bad[k]) != 0 ||
            nnpops__cfg_line(cfg, bad[k]) != 0)
            FUZZ_FAIL("accessor on node id %d", bad[k]);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *src = getenv("NNPOPS_FUZZ_WEIGHTS");
    if (!src || !*src)
        FUZZ_FAIL("set NNPOPS_FUZZ_WEIGHTS to the tiny.safetensors written by tests/fuzz/gen_corpus.py");
    size_t size = 0;
    unsigned char *bytes = fuzz_read(src, &size);
    if (!bytes) FUZZ_FAIL("cannot read NNPOPS_FUZZ_WEIGHTS=%s", src);
    fuzz_write(fuzz_path(0, "tiny.safetensors"), bytes, size);
    free(bytes);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* 1. in memory */
    nnpops__cfg *cfg = NULL;
    nnpops_status st = nnpops__cfg_parse("fuzz.yaml", data, size, &cfg);
    fuzz_check_failure("nnpops__cfg_parse", st, st == NNPOPS_OK ? NULL : cfg);
    if (st == NNPOPS_OK) {
        if (!cfg) FUZZ_FAIL("cfg_parse succeeded without a document");
        visit_all(cfg);
        nnpops__cfg_free(cfg);
    }

    /* 2. through the model loader (even precision for even sizes, to cover both) */
    const char *path = fuzz_path(1, "model.yaml");
    fuzz_write(path, data, size);
    nnpops_model *m = NULL;
    const nnpops_precision prec = (size & 1) ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64;
    nnpops_status st2 = nnpops_model_load(path, "cpu", prec, &m);
    fuzz_check_failure("nnpops_model_load", st2, st2 == NNPOPS_OK ? NULL : m);
    if (st2 == NNPOPS_OK) {
        if (st != NNPOPS_OK) FUZZ_FAIL("the model loaded from text that does not parse");
        if (!m) FUZZ_FAIL("model_load succeeded without a model");
        fuzz_exercise_model(m);
        nnpops_model_destroy(m);
    }
    return 0;
}
