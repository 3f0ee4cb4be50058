/*
 * test_hostile.c - hostile model files through the public loader (nnpops_model_load), each
 * rejected with a clear status and message: weights files that are directories, FIFOs or devices;
 * safetensors headers with offsets past the end, overlapping tensors, shapes whose byte count
 * overflows, wrong and unknown dtypes, non-UTF-8 names, non-finite values, truncations; YAML with
 * deep nesting, alias bombs, recursive aliases and huge numbers; a network far larger than its
 * weights (must be refused from the weights' shapes, before any large allocation).
 *
 * The reader-level cases of the same inputs are in tests/unit/test_safetensors.c and
 * test_config.c; these go through the whole loader, with a sha256 that matches, so that each
 * hostile part is what the loader meets, and they check the message a user sees (YAML file and
 * line, weights file, tensor).  The tiny ANI model is the fuzz targets' (fuzz_common.h); case
 * tiny_ok also checks that it agrees with the corpus generator (gen_corpus.py) through the file
 * in $NNPOPS_FUZZ_WEIGHTS.
 *
 * Usage: test_hostile CASE (the names are in the table at the end).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fuzz_common.h"
#include "internal.h"

/* ---- temporary files ------------------------------------------------------------------------- */

static char root[512];
static char files[64][700];
static int n_files;

static void remove_files(void) {
    for (int i = n_files - 1; i >= 0; i--) remove(files[i]);
    rmdir(root);
}

static const char *tmp(const char *name) {
    if (!root[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(root, sizeof root, "%s/nnpops-hostile-XXXXXX", base && *base ? base : "/tmp");
        CHECK(mkdtemp(root) != NULL);
        atexit(remove_files);
    }
    CHECK(n_files < 64);
    snprintf(files[n_files], sizeof files[0], "%s/%s", root, name);
    return files[n_files++];
}

static const char *put(const char *name, const void *data, size_t size) {
    const char *path = tmp(name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
    return path;
}

/* ---- the tiny ANI weights, with variants ------------------------------------------------------ */

enum variant {
    V_OK, V_WRONG_DTYPE, V_UNKNOWN_DTYPE, V_PAST_END, V_OFFSET_HUGE, V_OVERLAP, V_HUGE_SHAPE,
    V_NON_UTF8, V_NAN, V_EXTRA, V_HEADER_CUT
};

typedef struct tensor {
    char name[32];
    int64_t rows, cols; /* cols 0: a vector */
} tensor;

/* The tensors in the order of gen_corpus.py: member, species H then C, layer, weight then bias. */
static int tiny_tensors(tensor *t) {
    static const char *const el[2] = {"H", "C"};
    static const int64_t widths[2][3] = {{10, 3, 1}, {10, 2, 1}};
    int n = 0;
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++)
            for (int l = 0; l < 2; l++) {
                snprintf(t[n].name, sizeof t[n].name, "m%d.%s.l%d.weight", m, el[s], l);
                t[n].rows = widths[s][l + 1];
                t[n].cols = widths[s][l];
                n++;
                snprintf(t[n].name, sizeof t[n].name, "m%d.%s.l%d.bias", m, el[s], l);
                t[n].rows = widths[s][l + 1];
                t[n].cols = 0;
                n++;
            }
    return n;
}

/* Writes the weights (variant v) as NAME and returns the path; sha receives its sha256. */
static const char *write_weights(const char *name, enum variant v, char sha[65]) {
    tensor t[16];
    const int n = tiny_tensors(t);
    char header[8192];
    size_t o = 0;
    int64_t off = 0, starts[17];
    o += (size_t)snprintf(header + o, sizeof header - o,
                          "{\"__metadata__\":{\"format\":\"nnpops\",\"model\":\"tiny\"}");
    for (int i = 0; i < n; i++) {
        const int64_t count = t[i].rows * (t[i].cols ? t[i].cols : 1);
        char shape[64], offsets[96];
        const char *dtype = "F32";
        if (t[i].cols) snprintf(shape, sizeof shape, "%lld,%lld", (long long)t[i].rows, (long long)t[i].cols);
        else snprintf(shape, sizeof shape, "%lld", (long long)t[i].rows);
        starts[i] = off;
        snprintf(offsets, sizeof offsets, "%lld,%lld", (long long)off, (long long)(off + 4 * count));
        if (i == 0 && v == V_WRONG_DTYPE) dtype = "I32";
        if (i == 0 && v == V_UNKNOWN_DTYPE) dtype = "F31";
        if (i == 0 && v == V_HUGE_SHAPE) snprintf(shape, sizeof shape, "4611686018427387904,4");
        if (i == n - 1 && v == V_OFFSET_HUGE)
            snprintf(offsets, sizeof offsets, "9223372036854775800,9223372036854775804");
        if (i == 9 && v == V_OVERLAP) /* m1.H.l0.bias onto m0.H.l0.bias */
            snprintf(offsets, sizeof offsets, "%lld,%lld", (long long)starts[1],
                     (long long)(starts[1] + 4 * count));
        o += (size_t)snprintf(header + o, sizeof header - o,
                              ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%s]}",
                              t[i].name, dtype, shape, offsets);
        off += 4 * count;
    }
    if (v == V_NON_UTF8 || v == V_EXTRA) {
        o += (size_t)snprintf(header + o, sizeof header - o,
                              ",\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%lld,%lld]}",
                              v == V_NON_UTF8 ? "bad\xff\xfename" : "extra", (long long)off,
                              (long long)(off + 4));
        off += 4;
    }
    o += (size_t)snprintf(header + o, sizeof header - o, "}");
    CHECK(o < sizeof header);
    size_t total = 8 + o + (size_t)off;
    unsigned char *buf = calloc(1, total);
    CHECK(buf != NULL);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)o >> (8 * i));
    memcpy(buf + 8, header, o);
    for (int64_t k = 0; k < off / 4; k++) {
        float x = (float)((double)((k * 37) % 19 - 9) * 0.01); /* as gen_corpus.py */
        memcpy(buf + 8 + o + 4 * k, &x, 4);
    }
    if (v == V_NAN) { /* m0.C.l0.weight (tensor 4) value 5 */
        float x = NAN;
        memcpy(buf + 8 + o + starts[4] + 4 * 5, &x, 4);
    }
    if (v == V_PAST_END) total -= 4;
    if (v == V_HEADER_CUT) total = 8 + o / 2;
    const char *path = put(name, buf, total);
    nnpops__sha256_hex(buf, total, sha);
    free(buf);
    return path;
}

/* The tiny ANI model file naming `wfile` (relative to the model's directory) with `sha`. */
static const char *write_model(const char *name, const char *wfile, const char *sha) {
    char text[4096];
    int n = snprintf(text, sizeof text, FUZZ_TINY_ANI_YAML, wfile, sha);
    CHECK(n > 0 && (size_t)n < sizeof text);
    return put(name, text, (size_t)n);
}

static const char *const zero_sha = "0000000000000000000000000000000000000000000000000000000000000000";

/* Loads `path` expecting `status` and a message holding each of the needles (NULL-terminated). */
static void expect(const char *path, nnpops_status status, ...) {
    nnpops_model *m = (nnpops_model *)&m;
    CHECK_STATUS(nnpops_model_load(path, "cpu", NNPOPS_FLOAT64, &m), status);
    CHECK(m == NULL);
    va_list ap;
    va_start(ap, status);
    for (const char *needle = va_arg(ap, const char *); needle; needle = va_arg(ap, const char *))
        CHECK_ERROR_HAS(needle);
    va_end(ap);
    printf("%s: %s\n", nnpops_status_name(status), nnpops_last_error());
}

/* A variant of the weights behind a model file with the matching sha256.  The message starts
 * with where the problem was found: the weights reader ("model.yaml:9: weights: w.safetensors: "),
 * its JSON parser ("... w.safetensors (JSON header): "), the ANI loader's tensor lookup
 * ("w.safetensors: ") or its value check ("model.yaml: "). */
enum where { BY_READER, BY_JSON, BY_LOOKUP, BY_VALUES };
static void expect_weights(enum variant v, nnpops_status status, enum where by, const char *n1,
                           const char *n2) {
    char sha[65], wname[64], yname[64];
    snprintf(wname, sizeof wname, "w%d.safetensors", (int)v);
    snprintf(yname, sizeof yname, "m%d.yaml", (int)v);
    const char *wpath = write_weights(wname, v, sha);
    const char *ypath = write_model(yname, wname, sha);
    char where[800];
    if (by == BY_READER) snprintf(where, sizeof where, "%s:9: weights: %s: ", ypath, wpath);
    else if (by == BY_JSON) snprintf(where, sizeof where, "%s:9: weights: %s (JSON header): ", ypath, wpath);
    else if (by == BY_LOOKUP) snprintf(where, sizeof where, "%s: tensor '", wpath);
    else snprintf(where, sizeof where, "%s: tensor ", ypath);
    expect(ypath, status, where, n1, n2, (const char *)NULL);
}

/* ---- cases ----------------------------------------------------------------------------------- */

static void compute_ok(nnpops_model *m) {
    nnpops_context *ctx = NULL;
    CHECK_OK(nnpops_context_create(m, &ctx));
    const int32_t z[3] = {6, 1, 1};
    const double x[9] = {0, 0, 0, 1.09, 0, 0, -0.36, 1.03, 0};
    double e = NAN, f[9];
    nnpops_inputs in = {sizeof in, 3, -1, 1, z, x, NULL, NULL, NULL};
    nnpops_outputs out = {sizeof out, &e, f, NULL, NULL, NULL, NULL};
    CHECK_OK(nnpops_compute(ctx, &in, &out));
    CHECK(isfinite(e));
    nnpops_context_destroy(ctx);
}

static int case_tiny_ok(void) {
    char sha[65];
    write_weights("tiny.safetensors", V_OK, sha);
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(write_model("tiny.yaml", "tiny.safetensors", sha), "cpu",
                               NNPOPS_FLOAT64, &m));
    CHECK(nnpops_model_ensemble_size(m) == 2 && nnpops_model_num_species(m) == 2);
    compute_ok(m);
    nnpops_model_destroy(m);
    /* the corpus generator writes the same bytes (fuzz seeds reach the ANI loader) */
    const char *corpus = getenv("NNPOPS_FUZZ_WEIGHTS");
    if (!corpus) return test_missing_data("$NNPOPS_FUZZ_WEIGHTS");
    size_t size = 0;
    unsigned char *bytes = fuzz_read(corpus, &size);
    if (!bytes) return test_missing_data(corpus);
    char sha2[65];
    nnpops__sha256_hex(bytes, size, sha2);
    free(bytes);
    if (strcmp(sha, sha2) != 0) {
        fprintf(stderr, "%s has sha256 %s, this test's tiny weights %s: gen_corpus.py and "
                        "test_hostile.c / fuzz_common.h disagree\n", corpus, sha2, sha);
        return 1;
    }
    return 0;
}

static int case_weights_directory(void) {
    char sha[65];
    write_weights("tiny.safetensors", V_OK, sha);
    const char *y = write_model("dir.yaml", ".", sha);
    expect(y, NNPOPS_ERROR_IO, "dir.yaml:9: weights:", "is not a regular file (a directory)",
           (const char *)NULL);
    return 0;
}

static int case_weights_fifo(void) {
    const char *fifo = tmp("fifo.safetensors");
    CHECK(mkfifo(fifo, 0600) == 0);
    /* before the fix, fopen blocked here for ever (no writer) */
    expect(write_model("fifo.yaml", "fifo.safetensors", zero_sha), NNPOPS_ERROR_IO,
           "fifo.safetensors: the weights file is not a regular file (a device, FIFO or socket)",
           (const char *)NULL);
    return 0;
}

static int case_weights_device(void) {
    expect(write_model("dev.yaml", "/dev/null", zero_sha), NNPOPS_ERROR_IO,
           "/dev/null: the weights file is not a regular file", (const char *)NULL);
    return 0;
}

static int case_st_wrong_dtype(void) {
    expect_weights(V_WRONG_DTYPE, NNPOPS_ERROR_MODEL_FORMAT, BY_LOOKUP,
                   "tensor 'm0.H.l0.weight' has dtype I32, expected F32", NULL);
    return 0;
}

static int case_st_unknown_dtype(void) {
    expect_weights(V_UNKNOWN_DTYPE, NNPOPS_ERROR_MODEL_FORMAT, BY_READER,
                   "tensor 'm0.H.l0.weight': unknown dtype 'F31'", NULL);
    return 0;
}

static int case_st_past_end(void) {
    expect_weights(V_PAST_END, NNPOPS_ERROR_MODEL_FORMAT, BY_READER, "tensor 'm1.C.l1.bias'",
                   "run past the end of the data section");
    return 0;
}

static int case_st_offset_huge(void) {
    expect_weights(V_OFFSET_HUGE, NNPOPS_ERROR_MODEL_FORMAT, BY_READER,
                   "tensor 'm1.C.l1.bias': data_offsets [9223372036854775800, 9223372036854775804]",
                   "run past the end of the data section");
    return 0;
}

static int case_st_overlap(void) {
    expect_weights(V_OVERLAP, NNPOPS_ERROR_MODEL_FORMAT, BY_READER, "tensors 'm0.H.l0.bias' [120, 132] and "
                   "'m1.H.l0.bias' [120, 132] overlap", NULL);
    return 0;
}

static int case_st_huge_shape(void) {
    expect_weights(V_HUGE_SHAPE, NNPOPS_ERROR_MODEL_FORMAT, BY_READER,
                   "tensor 'm0.H.l0.weight': shape [4611686018427387904, 4] of F32 is too large",
                   "overflows a 64-bit integer");
    return 0;
}

static int case_st_non_utf8(void) {
    expect_weights(V_NON_UTF8, NNPOPS_ERROR_MODEL_FORMAT, BY_JSON, "invalid text at byte offset",
                   "invalid leading UTF-8 octet (byte 0xff)");
    return 0;
}

static int case_st_nonfinite(void) {
    expect_weights(V_NAN, NNPOPS_ERROR_MODEL_FORMAT, BY_VALUES, "tensor m0.C.l0.weight: value 5 is not finite",
                   NULL);
    return 0;
}

static int case_st_extra_tensor(void) {
    char sha[65];
    write_weights("x.safetensors", V_EXTRA, sha);
    expect(write_model("x.yaml", "x.safetensors", sha), NNPOPS_ERROR_MODEL_FORMAT,
           "the weights file holds 17 tensors, but the model describes 16", (const char *)NULL);
    return 0;
}

static int case_st_header_cut(void) {
    expect_weights(V_HEADER_CUT, NNPOPS_ERROR_MODEL_FORMAT, BY_READER, "runs past the end of the file",
                   "truncated or not a safetensors file");
    return 0;
}

/* The tiny model text with one line replaced: `from` (a whole line of FUZZ_TINY_ANI_YAML
 * after formatting) becomes `to`. */
static const char *tiny_variant(const char *name, const char *from, const char *to) {
    char sha[65], text[1 << 16];
    write_weights("tiny.safetensors", V_OK, sha);
    int n = snprintf(text, sizeof text, FUZZ_TINY_ANI_YAML, "tiny.safetensors", sha);
    CHECK(n > 0 && (size_t)n < sizeof text);
    char *at = strstr(text, from);
    CHECK(at != NULL);
    size_t lf = strlen(from), lt = strlen(to);
    CHECK((size_t)n - lf + lt < sizeof text);
    memmove(at + lt, at + lf, strlen(at + lf) + 1);
    memcpy(at, to, lt);
    return put(name, text, strlen(text));
}

static int case_yaml_deep(void) {
    char deep[512];
    size_t o = 0;
    o += (size_t)snprintf(deep, sizeof deep, "description: ");
    for (int i = 0; i < 100; i++) deep[o++] = '[';
    for (int i = 0; i < 100; i++) deep[o++] = ']';
    deep[o++] = '\n';
    deep[o] = '\0';
    const char *y = tiny_variant("deep.yaml", "description: \"fuzz seed: two species, two members\"\n",
                                 deep);
    expect(y, NNPOPS_ERROR_MODEL_FORMAT, "deep.yaml:5: nesting deeper than 64 levels",
           (const char *)NULL);
    /* a deep block structure, one level per line */
    char block[8192];
    o = (size_t)snprintf(block, sizeof block, "description:\n");
    for (int i = 1; i <= 70; i++) {
        o += (size_t)snprintf(block + o, sizeof block - o, "%*s- \n", 2 * i, "");
    }
    y = tiny_variant("deep2.yaml", "description: \"fuzz seed: two species, two members\"\n", block);
    expect(y, NNPOPS_ERROR_MODEL_FORMAT, "nesting deeper than 64 levels", (const char *)NULL);
    return 0;
}

static int case_yaml_aliases(void) {
    /* nine levels of ten-fold aliases: 10^9 leaves if expanded; must fail fast on the type */
    char bomb[4096];
    size_t o = (size_t)snprintf(bomb, sizeof bomb, "description: x\nl0: &l0 [a, a, a, a, a, a, a, a, a, a]\n");
    for (int i = 1; i <= 9; i++) {
        o += (size_t)snprintf(bomb + o, sizeof bomb - o, "l%d: &l%d [", i, i);
        for (int k = 0; k < 10; k++) o += (size_t)snprintf(bomb + o, sizeof bomb - o, "%s*l%d", k ? ", " : "", i - 1);
        o += (size_t)snprintf(bomb + o, sizeof bomb - o, "]\n");
    }
    const char *y = tiny_variant("bomb.yaml", "description: \"fuzz seed: two species, two members\"\n", bomb);
    const clock_t t0 = clock();
    expect(y, NNPOPS_ERROR_MODEL_FORMAT, "unknown key 'l0'", (const char *)NULL);
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 2.0);
    /* the same bomb inside a value that must be a string */
    o = (size_t)snprintf(bomb, sizeof bomb, "description: {l0: &l0 [a, a, a, a, a, a, a, a, a, a]");
    for (int i = 1; i <= 9; i++) {
        o += (size_t)snprintf(bomb + o, sizeof bomb - o, ", l%d: &l%d [", i, i);
        for (int k = 0; k < 10; k++) o += (size_t)snprintf(bomb + o, sizeof bomb - o, "%s*l%d", k ? ", " : "", i - 1);
        o += (size_t)snprintf(bomb + o, sizeof bomb - o, "]");
    }
    o += (size_t)snprintf(bomb + o, sizeof bomb - o, "}\n");
    y = tiny_variant("bomb2.yaml", "description: \"fuzz seed: two species, two members\"\n", bomb);
    expect(y, NNPOPS_ERROR_MODEL_FORMAT, "bomb2.yaml:5: description: expected a string, got a mapping",
           (const char *)NULL);
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 2.0);
    /* a recursive alias: a node that contains itself */
    y = tiny_variant("rec.yaml", "description: \"fuzz seed: two species, two members\"\n",
                     "description: &d [x, *d]\n");
    expect(y, NNPOPS_ERROR_MODEL_FORMAT, "rec.yaml:", (const char *)NULL);
    /* an alias of a valid value is still a valid value (shared node) */
    y = tiny_variant("alias_ok.yaml", "  self_energies: [-0.5, -38.0]\n",
                     "  self_energies: &se [-0.5, -38.0]\n");
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(y, "cpu", NNPOPS_FLOAT64, &m));
    nnpops_model_destroy(m);
    return 0;
}

static int case_yaml_huge_numbers(void) {
    expect(tiny_variant("h1.yaml", "  ensemble_size: 2\n", "  ensemble_size: 99999999999999999999999\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h1.yaml:23: ani.ensemble_size:",
           "out of the range of a 64-bit integer", (const char *)NULL);
    expect(tiny_variant("h2.yaml", "  ensemble_size: 2\n", "  ensemble_size: 1e300\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h2.yaml:23: ani.ensemble_size: expected an integer",
           (const char *)NULL);
    expect(tiny_variant("h3.yaml", "  ensemble_size: 2\n", "  ensemble_size: 4294967298\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h3.yaml:23: ani.ensemble_size must be between 1 and",
           (const char *)NULL);
    expect(tiny_variant("h4.yaml", "    cutoff: 4.0\n", "    cutoff: 1e999\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h4.yaml:13: ani.radial.cutoff: '1e999' is out of the range of a double",
           (const char *)NULL);
    char nines[600];
    memset(nines, '9', 400);
    snprintf(nines + 400, sizeof nines - 400, ".5]\n");
    char line[700];
    snprintf(line, sizeof line, "  self_energies: [-0.5, %s", nines);
    expect(tiny_variant("h5.yaml", "  self_energies: [-0.5, -38.0]\n", line),
           NNPOPS_ERROR_MODEL_FORMAT, "h5.yaml:22: ani.self_energies[1]:", "is out of the range of a double",
           (const char *)NULL);
    expect(tiny_variant("h6.yaml", "    H: [10, 3, 1]\n", "    H: [10, 18446744073709551617, 1]\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h6.yaml:26: ani.networks.H[1]:", "out of the range of a 64-bit integer",
           (const char *)NULL);
    expect(tiny_variant("h7.yaml", "    H: [10, 3, 1]\n", "    H: [10, 2147483648, 1]\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h7.yaml:26: ani.networks.H[1] must be between 1 and 65536",
           (const char *)NULL);
    expect(tiny_variant("h8.yaml", "format_version: 1\n", "format_version: 99999999999999999999\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h8.yaml:2: format_version:", "64-bit integer", (const char *)NULL);
    expect(tiny_variant("h9.yaml", "    zeta: [32.0]\n", "    zeta: [1e-320]\n"),
           NNPOPS_ERROR_MODEL_FORMAT, "h9.yaml:19: ani.angular.zeta[0]:", "out of the range of a double", (const char *)NULL);
    return 0;
}

static int case_network_larger_than_weights(void) {
    /* An AEV of 24640 values (radial 1 x 32, angular 4 x 4 x 32 x 16) and first layers 65536 wide,
     * with the tiny weights file: the arena would need 2 x 2 x 65536 x 24640 values (52 GB in
     * float64).  The loader must refuse it from the tensors' shapes, not by trying to allocate
     * it.  Address space is capped at 4 GiB here (not under ASan, which reserves terabytes). */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#if defined(__has_feature)
#if !__has_feature(address_sanitizer) && !__has_feature(thread_sanitizer)
#define HOSTILE_LIMIT_AS 1
#endif
#else
#define HOSTILE_LIMIT_AS 1
#endif
#endif
#ifdef HOSTILE_LIMIT_AS
    struct rlimit rl = {(rlim_t)4 << 30, (rlim_t)4 << 30};
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
#endif
    char list32[400], list16[200];
    size_t o = 0;
    for (int i = 0; i < 32; i++) o += (size_t)snprintf(list32 + o, sizeof list32 - o, "%s%d.0", i ? ", " : "", i + 1);
    o = 0;
    for (int i = 0; i < 16; i++) o += (size_t)snprintf(list16 + o, sizeof list16 - o, "%s0.%d", i ? ", " : "", i + 1);
    char radial[600], angular[1200];
    snprintf(radial, sizeof radial, "  radial:\n    cutoff: 4.0\n    eta: [16.0]\n    shifts: [%s]\n", list32);
    snprintf(angular, sizeof angular,
             "  angular:\n    cutoff: 3.5\n    eta: [1.0, 2.0, 3.0, 4.0]\n    zeta: [1.0, 2.0, 3.0, 4.0]\n"
             "    shifts: [%s]\n    sections: [%s]\n", list32, list16);
    char sha[65], text[8192];
    write_weights("tiny.safetensors", V_OK, sha);
    int n = snprintf(text, sizeof text,
                     "format: nnpops-model\nformat_version: 1\nname: big\ntype: ani\n"
                     "units: {length: angstrom, energy: hartree}\nspecies: [H, C]\n"
                     "weights: {file: tiny.safetensors, sha256: \"%s\"}\n"
                     "ani:\n%s%s"
                     "  self_energies: [-0.5, -38.0]\n  ensemble_size: 2\n"
                     "  activation: {type: celu, alpha: 0.1}\n"
                     "  networks: {H: [24640, 65536, 1], C: [24640, 65536, 1]}\n"
                     "  tensors: \"m{member}.{element}.l{layer}.{kind}\"\n",
                     sha, radial, angular);
    CHECK(n > 0 && (size_t)n < sizeof text);
    expect(put("big.yaml", text, (size_t)n), NNPOPS_ERROR_MODEL_FORMAT,
           "tensor 'm0.H.l0.weight' has shape [3, 10], expected [65536, 24640]", (const char *)NULL);
    return 0;
}

static const test_case cases[] = {
    {"tiny_ok", case_tiny_ok},
    {"weights_directory", case_weights_directory},
    {"weights_fifo", case_weights_fifo},
    {"weights_device", case_weights_device},
    {"st_wrong_dtype", case_st_wrong_dtype},
    {"st_unknown_dtype", case_st_unknown_dtype},
    {"st_past_end", case_st_past_end},
    {"st_offset_huge", case_st_offset_huge},
    {"st_overlap", case_st_overlap},
    {"st_huge_shape", case_st_huge_shape},
    {"st_non_utf8", case_st_non_utf8},
    {"st_nonfinite", case_st_nonfinite},
    {"st_extra_tensor", case_st_extra_tensor},
    {"st_header_cut", case_st_header_cut},
    {"yaml_deep", case_yaml_deep},
    {"yaml_aliases", case_yaml_aliases},
    {"yaml_huge_numbers", case_yaml_huge_numbers},
    {"network_larger_than_weights", case_network_larger_than_weights},
};

int main(int argc, char **argv) {
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
