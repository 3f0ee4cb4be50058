/*
 * test_model.c - nnpops_model_load and the model accessors (core/src/model.c): resolution of
 * names and paths (NNPOPS_MODEL_PATH, the cache directory), the common keys of a model file and
 * their errors (with file and line), devices and precision, and the weights file of an ANI model
 * (checksum, missing file, wrong tensor shape).
 *
 * Usage: test_model CASE, with CASE one of the names in the table at the end.  Every model is
 * written by the test into a fresh temporary directory that is removed at exit: a Lennard-Jones
 * model (no weights) for loader errors, a tiny ANI model (species H, one member, AEV length 4,
 * widths [4, 3, 1]) with its safetensors file for weights errors.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "tmpfiles.h"
#include "internal.h"

/* ---- model texts ----------------------------------------------------------------------------- */

/* The LJ model, line by line (line k of the file is lj_lines[k - 1]). */
static const char *const lj_lines[] = {
    "# a test model",                                                      /* 1 */
    "format: nnpops-model",                                                /* 2 */
    "format_version: 1",                                                   /* 3 */
    "name: lj-argon",                                                      /* 4 */
    "type: lj",                                                            /* 5 */
    "units: {length: angstrom, energy: eV}",                               /* 6 */
    "species: [Ar]",                                                       /* 7 */
    "lj:",                                                                 /* 8 */
    "  pairs:",                                                            /* 9 */
    "    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: 3.40, cutoff: 8.5}", /* 10 */
    NULL,
};

/* The LJ text with line `line` (1-based) replaced by `text` (NULL: removed; 0: no change). */
static char *lj_text(int line, const char *text) {
    static char buf[4096];
    size_t o = 0;
    for (int i = 0; lj_lines[i]; i++) {
        const char *l = i + 1 == line ? text : lj_lines[i];
        if (!l) continue;
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s\n", l);
    }
    CHECK(o < sizeof buf);
    return buf;
}

static const char *write_lj(const char *name, int line, const char *text) {
    return test_write_text(name, lj_text(line, text));
}

/* Loads `path` expecting `status` and a message holding `needle` (and, for files, the path). */
static void expect_fail(const char *path, nnpops_status status, const char *needle) {
    nnpops_model *m = (nnpops_model *)1;
    CHECK_STATUS(nnpops_model_load(path, "cpu", NNPOPS_FLOAT64, &m), status);
    CHECK(m == NULL);
    CHECK_ERROR_HAS(needle);
}

static void expect_lj_fail(int line, const char *text, nnpops_status status, const char *needle,
                           int error_line) {
    static int counter;
    char name[64];
    snprintf(name, sizeof name, "variant%d.yaml", counter++);
    const char *path = write_lj(name, line, text);
    expect_fail(path, status, needle);
    CHECK_ERROR_HAS(path);
    if (error_line > 0) {
        char where[1100];
        snprintf(where, sizeof where, "%s:%d:", path, error_line);
        CHECK_ERROR_HAS(where);
    }
}

/* ---- the tiny ANI model ---------------------------------------------------------------------- */

typedef struct tensor_spec {
    const char *name;
    int ndim;
    int64_t shape[2];
} tensor_spec;

static const tensor_spec tiny_tensors[] = {
    {"m0.H.l0.weight", 2, {3, 4}},
    {"m0.H.l0.bias", 1, {3, 0}},
    {"m0.H.l1.weight", 2, {1, 3}},
    {"m0.H.l1.bias", 1, {1, 0}},
};

/* Writes a safetensors file of the tensors (float32, values i * 0.01); returns its path and sha. */
static const char *write_weights(const char *name, const tensor_spec *t, int n, char sha[65]) {
    char header[2048];
    size_t o = 0;
    int64_t offset = 0;
    o += (size_t)snprintf(header + o, sizeof header - o,
                          "{\"__metadata__\":{\"format\":\"nnpops\"}");
    for (int i = 0; i < n; i++) {
        int64_t count = t[i].ndim == 2 ? t[i].shape[0] * t[i].shape[1] : t[i].shape[0];
        char shape[64];
        if (t[i].ndim == 2) {
            snprintf(shape, sizeof shape, "%lld,%lld", (long long)t[i].shape[0],
                     (long long)t[i].shape[1]);
        } else {
            snprintf(shape, sizeof shape, "%lld", (long long)t[i].shape[0]);
        }
        o += (size_t)snprintf(header + o, sizeof header - o,
                              ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],"
                              "\"data_offsets\":[%lld,%lld]}",
                              t[i].name, shape, (long long)offset,
                              (long long)(offset + 4 * count));
        offset += 4 * count;
    }
    o += (size_t)snprintf(header + o, sizeof header - o, "}");
    CHECK(o < sizeof header);
    size_t total = 8 + o + (size_t)offset;
    unsigned char *buf = calloc(1, total);
    CHECK(buf != NULL);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)o >> (8 * i));
    memcpy(buf + 8, header, o);
    for (int64_t k = 0; k < offset / 4; k++) {
        float v = 0.01f * (float)k;
        memcpy(buf + 8 + o + 4 * k, &v, 4);
    }
    const char *path = test_write_bytes(name, buf, total);
    nnpops__sha256_hex(buf, total, sha);
    free(buf);
    return path;
}

/* The tiny ANI YAML naming weights file `wfile` with checksum `sha` (NULL: no weights key). */
static const char *write_ani(const char *name, const char *wfile, const char *sha) {
    char text[4096], weights[512] = "";
    if (wfile) {
        snprintf(weights, sizeof weights, "weights:\n  file: %s\n  sha256: \"%s\"\n", wfile, sha);
    }
    snprintf(text, sizeof text,
             "format: nnpops-model\n"
             "format_version: 1\n"
             "name: tiny-ani\n"
             "type: ani\n"
             "description: \"one species, one member, AEV length 4\"\n"
             "units: {length: angstrom, energy: hartree}\n"
             "species: [H]\n"
             "%s"
             "ani:\n"
             "  radial:\n"
             "    cutoff: 5.199999809265137\n"
             "    eta: [16.0]\n"
             "    shifts: [0.8999999761581421, 1.5]\n"
             "  angular:\n"
             "    cutoff: 3.5\n"
             "    eta: [8.0]\n"
             "    zeta: [32.0]\n"
             "    shifts: [0.8999999761581421]\n"
             "    sections: [0.19634954631328583, 1.1780972480773926]\n"
             "  self_energies: [-0.60095298]\n"
             "  ensemble_size: 1\n"
             "  activation: {type: celu, alpha: 0.1}\n"
             "  networks:\n"
             "    H: [4, 3, 1]\n"
             "  tensors: \"m{member}.{element}.l{layer}.{kind}\"\n",
             weights);
    return test_write_text(name, text);
}

/* ---- cases: loading and resolution ----------------------------------------------------------- */

static int case_lj_ok(void) {
    const char *path = write_lj("lj.yaml", 0, NULL);
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(path, NULL, NNPOPS_FLOAT64, &m));
    CHECK(m != NULL);
    CHECK(strcmp(nnpops_model_name(m), "lj-argon") == 0);
    CHECK(strcmp(nnpops_model_type(m), "lj") == 0);
    CHECK(strcmp(nnpops_model_path(m), path) == 0);
    CHECK(strcmp(nnpops_model_device(m), "cpu") == 0);
    CHECK(nnpops_model_precision(m) == NNPOPS_FLOAT64);
    CHECK(nnpops_model_num_species(m) == 1);
    CHECK(nnpops_model_species(m, 0) == 18);
    CHECK(nnpops_model_species(m, 1) == -1);
    CHECK(nnpops_model_species(m, -1) == -1);
    CHECK(nnpops_model_ensemble_size(m) == 1);
    CHECK(nnpops_model_cutoff(m) == 8.5);
    CHECK(nnpops_model_interaction_range(m) == 8.5); /* LJ: the cutoff */
    CHECK(nnpops_model_uses_charge(m) == 0);
    CHECK(m->z_to_species[18] == 0 && m->z_to_species[1] == -1 && m->z_to_species[0] == -1);
    CHECK(m->energy_to_eV == 1.0 && m->length_to_A == 1.0);
    nnpops_model_destroy(m);

    /* block style, other units, float32, device "cpu" */
    path = test_write_text("lj2.yaml", "format: nnpops-model\n"
                                  "format_version: 1\n"
                                  "name: lj2\n"
                                  "type: lj\n"
                                  "units:\n"
                                  "  length: nm\n"
                                  "  energy: kJ/mol\n"
                                  "species:\n"
                                  "  - Ar\n"
                                  "  - \"Kr\"\n"
                                  "lj:\n"
                                  "  pairs:\n"
                                  "    - {elements: [Ar, Kr], epsilon: 1.0, sigma: 0.34, "
                                  "cutoff: 0.9}\n");
    CHECK_OK(nnpops_model_load(path, "cpu", NNPOPS_FLOAT32, &m));
    CHECK(nnpops_model_precision(m) == NNPOPS_FLOAT32);
    CHECK(nnpops_model_num_species(m) == 2);
    CHECK(nnpops_model_species(m, 1) == 36);
    CHECK(m->length_to_A == 10.0);
    CHECK_NEAR(m->energy_to_eV, 1.0 / 96.48533212331002, 0, 1e-15);
    CHECK_NEAR(nnpops_model_cutoff(m), 9.0, 1e-12, 0);
    nnpops_model_destroy(m);
    return 0;
}

static int case_search_path(void) {
    const char *a = test_make_dir("a");
    const char *b = test_make_dir("b");
    const char *cache = test_make_dir("cache");
    test_make_dir("cache/nnpops");
    const char *cache_models = test_make_dir("cache/nnpops/models");
    test_make_dir("home");
    test_make_dir("home/.cache");
    test_make_dir("home/.cache/nnpops");
    const char *home_models = test_make_dir("home/.cache/nnpops/models");
    const char *in_b = write_lj("b/mylj.yaml", 0, NULL);
    const char *in_a = write_lj("a/both.yaml", 4, "name: from-a");
    write_lj("b/both.yaml", 4, "name: from-b");
    const char *in_cache = write_lj("cache/nnpops/models/cached.yaml", 0, NULL);
    const char *in_home = write_lj("home/.cache/nnpops/models/homed.yaml", 0, NULL);
    (void)cache_models;
    (void)home_models;

    char env[4096];
    snprintf(env, sizeof env, ":%s::%s:", a, b); /* empty entries are skipped */
    CHECK(setenv("NNPOPS_MODEL_PATH", env, 1) == 0);
    CHECK(setenv("XDG_CACHE_HOME", cache, 1) == 0);

    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load("mylj", "cpu", NNPOPS_FLOAT64, &m));
    CHECK(strcmp(nnpops_model_path(m), in_b) == 0);
    nnpops_model_destroy(m);
    CHECK_OK(nnpops_model_load("both", "cpu", NNPOPS_FLOAT64, &m));
    CHECK(strcmp(nnpops_model_path(m), in_a) == 0);
    CHECK(strcmp(nnpops_model_name(m), "from-a") == 0);
    nnpops_model_destroy(m);
    CHECK_OK(nnpops_model_load("cached", "cpu", NNPOPS_FLOAT64, &m));
    CHECK(strcmp(nnpops_model_path(m), in_cache) == 0);
    nnpops_model_destroy(m);
    expect_fail("homed", NNPOPS_ERROR_MODEL_NOT_FOUND, "homed");

    /* an empty XDG_CACHE_HOME means $HOME/.cache */
    char home[1100];
    snprintf(home, sizeof home, "%s/home", test_tmp_root);
    CHECK(setenv("HOME", home, 1) == 0);
    CHECK(setenv("XDG_CACHE_HOME", "", 1) == 0);
    CHECK_OK(nnpops_model_load("homed", "cpu", NNPOPS_FLOAT64, &m));
    CHECK(strcmp(nnpops_model_path(m), in_home) == 0);
    nnpops_model_destroy(m);
    CHECK(unsetenv("XDG_CACHE_HOME") == 0);
    CHECK_OK(nnpops_model_load("homed", "cpu", NNPOPS_FLOAT64, &m));
    nnpops_model_destroy(m);

    /* a name is never looked up relative to the working directory */
    CHECK(unsetenv("NNPOPS_MODEL_PATH") == 0);
    expect_fail("mylj", NNPOPS_ERROR_MODEL_NOT_FOUND, "mylj");
    return 0;
}

static int case_not_found_ani(void) {
    const char *a = test_make_dir("x");
    char env[2048], cache[1100];
    snprintf(env, sizeof env, "%s::/nonexistent/dir", a);
    snprintf(cache, sizeof cache, "%s/xdg", test_tmp_root);
    CHECK(setenv("NNPOPS_MODEL_PATH", env, 1) == 0);
    CHECK(setenv("XDG_CACHE_HOME", cache, 1) == 0);
    expect_fail("ani2x", NNPOPS_ERROR_MODEL_NOT_FOUND, "model 'ani2x' not found");
    CHECK_ERROR_HAS("convert it with: python3 -m nnpops convert ani2x");
    CHECK_ERROR_HAS(a);
    CHECK_ERROR_HAS("/nonexistent/dir");
    CHECK_ERROR_HAS("/xdg/nnpops/models");
    CHECK_ERROR_HAS("ani2x.yaml");
    expect_fail("ani1x", NNPOPS_ERROR_MODEL_NOT_FOUND, "python3 -m nnpops convert ani1x");
    expect_fail("ani2x-m3", NNPOPS_ERROR_MODEL_NOT_FOUND,
                "python3 -m nnpops convert ani2x --member 3");
    CHECK_ERROR_HAS("no ani2x-m3.yaml in");
    return 0;
}

static int case_not_found_generic(void) {
    CHECK(setenv("NNPOPS_MODEL_PATH", "", 1) == 0);
    CHECK(setenv("XDG_CACHE_HOME", test_tmp_path("nothing"), 1) == 0);
    expect_fail("mymodel", NNPOPS_ERROR_MODEL_NOT_FOUND, "model 'mymodel' not found");
    CHECK_ERROR_HAS("pass the path of its YAML file");
    CHECK_ERROR_HAS("/nothing/nnpops/models");
    CHECK(strstr(nnpops_last_error(), "nnpops convert") == NULL);
    return 0;
}

static int case_path_missing(void) {
    const char *missing = test_tmp_path("nope.yaml");
    expect_fail(missing, NNPOPS_ERROR_IO, missing);
    CHECK_ERROR_HAS("not found");
    expect_fail("relative/nope.yml", NNPOPS_ERROR_IO, "relative/nope.yml");
    const char *dir = test_make_dir("dir.yaml");
    expect_fail(dir, NNPOPS_ERROR_IO, "is not a regular file");
    /* a '/' makes it a path, extension or not */
    const char *plain = write_lj("plainfile", 0, NULL);
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(plain, "cpu", NNPOPS_FLOAT64, &m));
    CHECK(strcmp(nnpops_model_path(m), plain) == 0);
    nnpops_model_destroy(m);
    return 0;
}

/* ---- cases: the common keys ------------------------------------------------------------------ */

static int case_malformed_yaml(void) {
    expect_lj_fail(5, "type: lj: x", NNPOPS_ERROR_MODEL_FORMAT, "YAML syntax error", 5);
    expect_lj_fail(7, "species: [Ar", NNPOPS_ERROR_MODEL_FORMAT, "YAML syntax error", 8);
    expect_lj_fail(6, "units: {length: angstrom, energy: eV}}", NNPOPS_ERROR_MODEL_FORMAT,
                   "YAML syntax error", 6);
    expect_lj_fail(3, "  format_version: 1", NNPOPS_ERROR_MODEL_FORMAT, "YAML syntax error", 3);
    /* not a mapping at all */
    const char *path = test_write_text("list.yaml", "- format: nnpops-model\n");
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "not an nnpops model file");
    path = test_write_text("empty.yaml", "# nothing here\n");
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "empty YAML document");
    return 0;
}

static int case_truncated_yaml(void) {
    const char *full = lj_text(0, NULL);
    /* cut inside the flow mapping of the last line */
    const char *cut = strstr(full, "epsilon");
    CHECK(cut != NULL);
    char text[4096];
    snprintf(text, sizeof text, "%.*s", (int)(cut - full), full);
    const char *path = test_write_text("cut.yaml", text);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "YAML syntax error");
    CHECK_ERROR_HAS(path);
    /* cut at a line boundary: valid YAML that lacks what follows */
    cut = strstr(full, "lj:\n");
    CHECK(cut != NULL);
    snprintf(text, sizeof text, "%.*s", (int)(cut - full), full);
    path = test_write_text("cut2.yaml", text);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "'lj'");
    CHECK_ERROR_HAS(path);
    cut = strstr(full, "species:");
    snprintf(text, sizeof text, "%.*s", (int)(cut - full), full);
    path = test_write_text("cut3.yaml", text);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "missing required key 'species'");
    return 0;
}

static int case_unknown_element(void) {
    expect_lj_fail(7, "species: [Ar, Xx]", NNPOPS_ERROR_MODEL_FORMAT,
                   "unknown element symbol 'Xx' in species", 7);
    expect_lj_fail(7, "species: [ar]", NNPOPS_ERROR_MODEL_FORMAT, "unknown element symbol 'ar'",
                   7);
    expect_lj_fail(7, "species:\n  - Ar\n  - Zz", NNPOPS_ERROR_MODEL_FORMAT,
                   "unknown element symbol 'Zz'", 9);
    expect_lj_fail(7, "species: [Ar, [H]]", NNPOPS_ERROR_MODEL_FORMAT, "species[1]", 7);
    expect_lj_fail(7, "species: [Ar, ~]", NNPOPS_ERROR_MODEL_FORMAT, "species[1]", 7);
    return 0;
}

static int case_duplicate_species(void) {
    expect_lj_fail(7, "species: [Ar, Ne, Ar]", NNPOPS_ERROR_MODEL_FORMAT,
                   "element 'Ar' appears twice in species", 7);
    expect_lj_fail(7, "species: []", NNPOPS_ERROR_MODEL_FORMAT, "species must be a list of 1 to",
                   7);
    expect_lj_fail(7, "species: Ar", NNPOPS_ERROR_MODEL_FORMAT, "species must be a list", 7);
    char many[512] = "species: [H";
    for (int z = 2; z <= 33; z++) {
        strcat(many, ", ");
        strcat(many, nnpops__element_symbols[z]);
    }
    strcat(many, "]");
    expect_lj_fail(7, many, NNPOPS_ERROR_MODEL_FORMAT, "1 to 32 element symbols", 7);
    return 0;
}

static int case_unknown_type(void) {
    expect_lj_fail(5, "type: mace", NNPOPS_ERROR_MODEL_FORMAT,
                   "unknown model type 'mace' (expected ani, lj or tensornet)", 5);
    expect_lj_fail(5, "type: LJ", NNPOPS_ERROR_MODEL_FORMAT, "unknown model type 'LJ'", 5);
    expect_lj_fail(5, "type: [lj]", NNPOPS_ERROR_MODEL_FORMAT, "type: expected a string", 5);
    return 0;
}

static int case_missing_key(void) {
    /* the line reported is where the mapping that lacks the key starts */
    expect_lj_fail(4, NULL, NNPOPS_ERROR_MODEL_FORMAT, "missing required key 'name'", 2);
    expect_lj_fail(5, NULL, NNPOPS_ERROR_MODEL_FORMAT, "missing required key 'type'", 2);
    expect_lj_fail(6, NULL, NNPOPS_ERROR_MODEL_FORMAT, "missing required key 'units'", 2);
    expect_lj_fail(7, NULL, NNPOPS_ERROR_MODEL_FORMAT, "missing required key 'species'", 2);
    expect_lj_fail(3, NULL, NNPOPS_ERROR_MODEL_FORMAT, "missing required key 'format_version'",
                   2);
    expect_lj_fail(6, "units: {length: angstrom}", NNPOPS_ERROR_MODEL_FORMAT,
                   "missing required key 'energy'", 6);
    expect_lj_fail(4, "name:", NNPOPS_ERROR_MODEL_FORMAT, "name: expected a string, got null", 4);
    return 0;
}

static int case_not_nnpops(void) {
    expect_lj_fail(2, "format: other-model", NNPOPS_ERROR_MODEL_FORMAT,
                   "not an nnpops model file (format is 'other-model'", 2);
    expect_lj_fail(2, NULL, NNPOPS_ERROR_MODEL_FORMAT,
                   "not an nnpops model file (no 'format: nnpops-model' key)", 0);
    const char *path = test_write_text("other.yaml", "just: some\nother: yaml\n");
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "not an nnpops model file");
    return 0;
}

static int case_format_version(void) {
    expect_lj_fail(3, "format_version: 2", NNPOPS_ERROR_UNSUPPORTED,
                   "format_version 2 is newer than this library reads (1)", 3);
    /* a newer version is reported even when its keys are unknown to this version */
    expect_lj_fail(8, "future_key: 1\nlj:", NNPOPS_ERROR_MODEL_FORMAT, "unknown key 'future_key'",
                   8);
    const char *path = test_write_text("v2.yaml", "format: nnpops-model\nformat_version: 2\n"
                                             "future_key: 1\n");
    expect_fail(path, NNPOPS_ERROR_UNSUPPORTED, "format_version 2");
    expect_lj_fail(3, "format_version: 0", NNPOPS_ERROR_MODEL_FORMAT, "invalid format_version 0",
                   3);
    expect_lj_fail(3, "format_version: 1.5", NNPOPS_ERROR_MODEL_FORMAT,
                   "format_version: expected an integer", 3);
    expect_lj_fail(3, "format_version: \"1\"", NNPOPS_ERROR_MODEL_FORMAT,
                   "format_version: expected an integer", 3);
    return 0;
}

static int case_unknown_key(void) {
    expect_lj_fail(5, "type: lj\ncolour: red", NNPOPS_ERROR_MODEL_FORMAT,
                   "unknown key 'colour' in the model file", 6);
    expect_lj_fail(6, "units: {length: angstrom, energy: eV, time: fs}", NNPOPS_ERROR_MODEL_FORMAT,
                   "unknown key 'time' in units", 6);
    expect_lj_fail(4, "name: lj-argon\nname: again", NNPOPS_ERROR_MODEL_FORMAT,
                   "duplicate key 'name' (first at line 4)", 5);
    /* description is optional and must be a string */
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(write_lj("desc.yaml", 5, "type: lj\ndescription: argon, \"liquid\""),
                               "cpu", NNPOPS_FLOAT64, &m));
    nnpops_model_destroy(m);
    expect_lj_fail(5, "type: lj\ndescription: [a, b]", NNPOPS_ERROR_MODEL_FORMAT,
                   "description: expected a string", 6);
    return 0;
}

static int case_bad_units(void) {
    expect_lj_fail(6, "units: {length: furlong, energy: eV}", NNPOPS_ERROR_MODEL_FORMAT,
                   "unknown length unit 'furlong' (expected angstrom, nm or bohr)", 6);
    expect_lj_fail(6, "units: {length: angstrom, energy: ev}", NNPOPS_ERROR_MODEL_FORMAT,
                   "unknown energy unit 'ev'", 6);
    expect_lj_fail(6, "units: angstrom", NNPOPS_ERROR_MODEL_FORMAT, "units must be a mapping", 6);
    static const struct {
        const char *text;
        double length, energy;
    } ok[] = {
        {"units: {length: bohr, energy: hartree}", 0.52917721092, 27.211386024367243},
        {"units: {length: angstrom, energy: kcal/mol}", 1.0, 1.0 / 23.060547830619},
        {"units: {energy: eV, length: nm}", 10.0, 1.0},
    };
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "units%d.yaml", i);
        nnpops_model *m = NULL;
        CHECK_OK(nnpops_model_load(write_lj(name, 6, ok[i].text), "cpu", NNPOPS_FLOAT64, &m));
        CHECK_NEAR(m->length_to_A, ok[i].length, 0, 1e-15);
        CHECK_NEAR(m->energy_to_eV, ok[i].energy, 0, 1e-15);
        nnpops_model_destroy(m);
    }
    return 0;
}

static int case_bad_name(void) {
    expect_lj_fail(4, "name: \"two words\"", NNPOPS_ERROR_MODEL_FORMAT,
                   "name 'two words' may only contain", 4);
    expect_lj_fail(4, "name: \"\"", NNPOPS_ERROR_MODEL_FORMAT, "name must have 1 to 127", 4);
    char longname[200] = "name: ";
    for (int i = 0; i < 128; i++) strcat(longname, "x");
    expect_lj_fail(4, longname, NNPOPS_ERROR_MODEL_FORMAT, "it has 128", 4);
    longname[6 + 127] = '\0';
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(write_lj("long.yaml", 4, longname), "cpu", NNPOPS_FLOAT64, &m));
    CHECK(strlen(nnpops_model_name(m)) == 127);
    nnpops_model_destroy(m);
    return 0;
}

/* ---- cases: arguments ------------------------------------------------------------------------ */

static int case_device_not_built(void) {
    if (nnpops_cuda_built()) {
        fprintf(stderr, "CUDA is built in: nothing to test\n");
        return SKIP_RETURN;
    }
    const char *path = write_lj("lj.yaml", 0, NULL);
    nnpops_model *m = (nnpops_model *)1;
    CHECK_STATUS(nnpops_model_load(path, "cuda", NNPOPS_FLOAT32, &m),
                 NNPOPS_ERROR_DEVICE_NOT_BUILT);
    CHECK(m == NULL);
    CHECK_ERROR_HAS("this nnpops library was built without CUDA (NNPOPS_ENABLE_CUDA=OFF)");
    CHECK_STATUS(nnpops_model_load(path, "cuda:0", NNPOPS_FLOAT64, &m),
                 NNPOPS_ERROR_DEVICE_NOT_BUILT);
    CHECK_STATUS(nnpops_model_load(path, "cuda:7", NNPOPS_FLOAT64, &m),
                 NNPOPS_ERROR_DEVICE_NOT_BUILT);
    CHECK_ERROR_HAS("cuda:7");
    /* the device is checked before the file is looked for */
    CHECK_STATUS(nnpops_model_load("no-such-model", "cuda", NNPOPS_FLOAT64, &m),
                 NNPOPS_ERROR_DEVICE_NOT_BUILT);
    return 0;
}

static int case_no_device(void) {
    if (!nnpops_cuda_built()) {
        fprintf(stderr, "CUDA is not built in: nothing to test\n");
        return SKIP_RETURN;
    }
    const char *path = write_lj("lj.yaml", 0, NULL);
    int32_t count = nnpops_cuda_device_count();
    char device[32];
    snprintf(device, sizeof device, "cuda:%d", (int)count);
    nnpops_model *m = (nnpops_model *)1;
    CHECK_STATUS(nnpops_model_load(path, device, NNPOPS_FLOAT64, &m), NNPOPS_ERROR_NO_DEVICE);
    CHECK(m == NULL);
    CHECK_ERROR_HAS(device);
    if (count == 0) {
        CHECK_STATUS(nnpops_model_load(path, "cuda", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_NO_DEVICE);
    }
    return 0;
}

static int case_bad_device(void) {
    const char *path = write_lj("lj.yaml", 0, NULL);
    static const char *const bad[] = {"gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1x",
                                      "cuda0", "", "cuda:99999999999", " cpu"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nnpops_model *m = (nnpops_model *)1;
        CHECK_STATUS(nnpops_model_load(path, bad[i], NNPOPS_FLOAT64, &m),
                     NNPOPS_ERROR_INVALID_ARGUMENT);
        CHECK(m == NULL);
        CHECK_ERROR_HAS("unknown device");
    }
    return 0;
}

static int case_bad_args(void) {
    const char *path = write_lj("lj.yaml", 0, NULL);
    nnpops_model *m = (nnpops_model *)1;
    CHECK_STATUS(nnpops_model_load(path, "cpu", NNPOPS_FLOAT64, NULL),
                 NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(nnpops_model_load(NULL, "cpu", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    m = (nnpops_model *)1;
    CHECK_STATUS(nnpops_model_load("", "cpu", NNPOPS_FLOAT64, &m), NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    m = (nnpops_model *)1;
    CHECK_STATUS(nnpops_model_load(path, "cpu", (nnpops_precision)7, &m),
                 NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK_ERROR_HAS("precision 7");
    CHECK_STATUS(nnpops_model_load(path, "cpu", (nnpops_precision)-1, &m),
                 NNPOPS_ERROR_INVALID_ARGUMENT);
    return 0;
}

static int case_accessors_null(void) {
    nnpops_model_destroy(NULL);
    CHECK(strcmp(nnpops_model_name(NULL), "") == 0);
    CHECK(strcmp(nnpops_model_type(NULL), "") == 0);
    CHECK(strcmp(nnpops_model_path(NULL), "") == 0);
    CHECK(strcmp(nnpops_model_device(NULL), "") == 0);
    CHECK(nnpops_model_num_species(NULL) == 0);
    CHECK(nnpops_model_species(NULL, 0) == -1);
    CHECK(nnpops_model_ensemble_size(NULL) == 0);
    CHECK(nnpops_model_cutoff(NULL) == 0.0);
    CHECK(nnpops_model_interaction_range(NULL) == 0.0);
    CHECK(nnpops_model_uses_charge(NULL) == 0);
    return 0;
}

/* ---- cases: weights (the tiny ANI model) ----------------------------------------------------- */

static int case_ani_ok(void) {
    char sha[65];
    write_weights("tiny.safetensors", tiny_tensors, 4, sha);
    /* a relative weights path is relative to the YAML's directory, not the working directory */
    const char *path = write_ani("tiny.yaml", "tiny.safetensors", sha);
    nnpops_model *m = NULL;
    CHECK_OK(nnpops_model_load(path, "cpu", NNPOPS_FLOAT32, &m));
    CHECK(strcmp(nnpops_model_type(m), "ani") == 0);
    CHECK(strcmp(nnpops_model_name(m), "tiny-ani") == 0);
    CHECK(nnpops_model_num_species(m) == 1 && nnpops_model_species(m, 0) == 1);
    CHECK(nnpops_model_ensemble_size(m) == 1);
    CHECK_NEAR(nnpops_model_cutoff(m), 5.199999809265137, 1e-12, 0);
    CHECK(nnpops_model_interaction_range(m) == nnpops_model_cutoff(m)); /* ANI: the cutoff */
    CHECK(nnpops_model_uses_charge(m) == 0);
    CHECK(m->energy_to_eV == 27.211386024367243);
    nnpops_model_destroy(m);
    /* an absolute weights path, and an upper-case digest */
    char abs_path[1100];
    snprintf(abs_path, sizeof abs_path, "%s/tiny.safetensors", test_tmp_root);
    for (int i = 0; i < 64; i++) {
        if (sha[i] >= 'a' && sha[i] <= 'f') sha[i] = (char)(sha[i] - 'a' + 'A');
    }
    CHECK_OK(nnpops_model_load(write_ani("abs.yaml", abs_path, sha), "cpu", NNPOPS_FLOAT64, &m));
    nnpops_model_destroy(m);
    return 0;
}

static int case_ani_no_weights(void) {
    const char *path = write_ani("noweights.yaml", NULL, NULL);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "weights");
    CHECK_ERROR_HAS(path);
    return 0;
}

static int case_weights_checksum(void) {
    char sha[65], wrong[65];
    write_weights("sum.safetensors", tiny_tensors, 4, sha);
    memcpy(wrong, sha, sizeof wrong);
    wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
    const char *path = write_ani("sum.yaml", "sum.safetensors", wrong);
    expect_fail(path, NNPOPS_ERROR_CHECKSUM, "sha256 mismatch");
    CHECK_ERROR_HAS(path);             /* the YAML file ... */
    CHECK_ERROR_HAS(":9: weights");    /* ... and the line of its weights mapping */
    CHECK_ERROR_HAS("sum.safetensors"); /* the weights file */
    CHECK_ERROR_HAS(wrong);
    CHECK_ERROR_HAS(sha);
    return 0;
}

static int case_weights_missing_file(void) {
    const char *zeros = "00000000000000000000000000000000"
                        "00000000000000000000000000000000";
    const char *path = write_ani("lost.yaml", "lost.safetensors", zeros);
    expect_fail(path, NNPOPS_ERROR_IO, "lost.safetensors: cannot open the weights file");
    CHECK_ERROR_HAS(test_tmp_root);
    CHECK_ERROR_HAS(path);
    return 0;
}

static int case_weights_bad_sha(void) {
    char sha[65];
    write_weights("w.safetensors", tiny_tensors, 4, sha);
    const char *path = write_ani("shortsha.yaml", "w.safetensors", "abc123");
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "weights.sha256 must be 64 hexadecimal digits");
    CHECK_ERROR_HAS(path);
    char text[4096];
    snprintf(text, sizeof text, "%s", lj_text(0, NULL));
    strcat(text, "weights: {file: w.safetensors}\n");
    path = test_write_text("nosha.yaml", text);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "missing required key 'sha256'");
    snprintf(text, sizeof text, "%s", lj_text(0, NULL));
    strcat(text, "weights: w.safetensors\n");
    path = test_write_text("scalarweights.yaml", text);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "weights must be a mapping");
    snprintf(text, sizeof text, "%s", lj_text(0, NULL));
    snprintf(text + strlen(text), sizeof text - strlen(text),
             "weights: {file: w.safetensors, sha256: \"%s\", size: 3}\n", sha);
    path = test_write_text("extraweights.yaml", text);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "unknown key 'size' in weights");
    return 0;
}

static int case_wrong_tensor_shape(void) {
    tensor_spec t[4];
    memcpy(t, tiny_tensors, sizeof t);
    t[0].shape[0] = 4; /* [4, 3] instead of [3, 4]: same byte count */
    t[0].shape[1] = 3;
    char sha[65];
    write_weights("shape.safetensors", t, 4, sha);
    const char *path = write_ani("shape.yaml", "shape.safetensors", sha);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "tensor 'm0.H.l0.weight' has shape [4, 3], "
                                                 "expected [3, 4]");
    CHECK_ERROR_HAS("shape.safetensors");
    return 0;
}

static int case_missing_tensor(void) {
    tensor_spec t[4];
    memcpy(t, tiny_tensors, sizeof t);
    t[3].name = "m0.H.l1.b"; /* m0.H.l1.bias missing, the tensor count unchanged */
    char sha[65];
    write_weights("renamed.safetensors", t, 4, sha);
    const char *path = write_ani("renamed.yaml", "renamed.safetensors", sha);
    expect_fail(path, NNPOPS_ERROR_MODEL_FORMAT, "tensor 'm0.H.l1.bias' not found");
    CHECK_ERROR_HAS("renamed.safetensors");
    return 0;
}

/* A failure inside the potential's load frees everything (checked by the sanitizer build). */
static int case_potential_error(void) {
    expect_lj_fail(10, "    - {elements: [Ar, Ar], epsilon: -1.0, sigma: 3.40, cutoff: 8.5}",
                   NNPOPS_ERROR_MODEL_FORMAT, "epsilon", 10);
    expect_lj_fail(10, "    - {elements: [Ar, Ne], epsilon: 1.0, sigma: 3.40, cutoff: 8.5}",
                   NNPOPS_ERROR_MODEL_FORMAT, "Ne", 10);
    return 0;
}

static const test_case cases[] = {
    {"lj_ok", case_lj_ok},
    {"search_path", case_search_path},
    {"not_found_ani", case_not_found_ani},
    {"not_found_generic", case_not_found_generic},
    {"path_missing", case_path_missing},
    {"malformed_yaml", case_malformed_yaml},
    {"truncated_yaml", case_truncated_yaml},
    {"unknown_element", case_unknown_element},
    {"duplicate_species", case_duplicate_species},
    {"unknown_type", case_unknown_type},
    {"missing_key", case_missing_key},
    {"not_nnpops", case_not_nnpops},
    {"format_version", case_format_version},
    {"unknown_key", case_unknown_key},
    {"bad_units", case_bad_units},
    {"bad_name", case_bad_name},
    {"device_not_built", case_device_not_built},
    {"no_device", case_no_device},
    {"bad_device", case_bad_device},
    {"bad_args", case_bad_args},
    {"accessors_null", case_accessors_null},
    {"ani_ok", case_ani_ok},
    {"ani_no_weights", case_ani_no_weights},
    {"weights_checksum", case_weights_checksum},
    {"weights_missing_file", case_weights_missing_file},
    {"weights_bad_sha", case_weights_bad_sha},
    {"wrong_tensor_shape", case_wrong_tensor_shape},
    {"missing_tensor", case_missing_tensor},
    {"potential_error", case_potential_error},
};

int main(int argc, char **argv) {
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
