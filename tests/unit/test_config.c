/*
 * test_config.c - the YAML configuration reader of core/src/config.c: scalar conversions
 * (numbers, integers, booleans, strings) and their error messages with file and line, syntax
 * errors, empty documents, nesting and alias limits, duplicate keys, JSON text (the safetensors
 * header path) and file limits.
 *
 * Usage: test_config CASE, with CASE one of the names in the table at the end.  Files are written
 * to a fresh temporary directory that is removed at exit.
 */
#define _POSIX_C_SOURCE 200809L

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "tmpfiles.h"
#include "internal.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static nnpops__cfg *parse_ok(const char *text) {
    nnpops__cfg *cfg = NULL;
    CHECK_OK(nnpops__cfg_parse("t.yaml", (const unsigned char *)text, strlen(text), &cfg));
    CHECK(cfg != NULL);
    return cfg;
}

static nnpops_status parse(const char *text, nnpops__cfg **cfg) {
    return nnpops__cfg_parse("t.yaml", (const unsigned char *)text, strlen(text), cfg);
}

static nnpops__node get(const nnpops__cfg *cfg, const char *key) {
    nnpops__node n = 0;
    CHECK_OK(nnpops__cfg_get(cfg, nnpops__cfg_root(cfg), key, 1, &n));
    CHECK(n != 0);
    return n;
}

/* ---- cases ----------------------------------------------------------------------------------- */

static int case_doubles_ok(void) {
    nnpops__cfg *cfg = parse_ok("one: 1\n"
                                "neg: -0.5\n"
                                "small: 1e-3\n"
                                "conv: 1.0e-05\n"
                                "plus: +2.5E+2\n"
                                "dot: .5\n"
                                "trail: 5.\n"
                                "zero: -0.0\n"
                                "big: 1.7976931348623157e308\n");
    double v;
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "one"), "one", &v));
    CHECK(v == 1.0);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "neg"), "neg", &v));
    CHECK(v == -0.5);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "small"), "small", &v));
    CHECK(v == 1e-3);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "conv"), "conv", &v));
    CHECK(v == 1e-5);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "plus"), "plus", &v));
    CHECK(v == 250.0);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "dot"), "dot", &v));
    CHECK(v == 0.5);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "trail"), "trail", &v));
    CHECK(v == 5.0);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "zero"), "zero", &v));
    CHECK(v == 0.0);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "big"), "big", &v));
    CHECK(v == 1.7976931348623157e308);
    nnpops__cfg_free(cfg);
    return 0;
}

static void expect_double_error(const nnpops__cfg *cfg, const char *key, const char *needle) {
    double v = 42.0;
    CHECK_STATUS(nnpops__cfg_double(cfg, get(cfg, key), key, &v), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK(v == 42.0);
    CHECK_ERROR_HAS(needle);
    CHECK_ERROR_HAS(key);
}

static int case_double_errors(void) {
    nnpops__cfg *cfg = parse_ok("inf: .inf\n"                 /* line 1 */
                                "ninf: -.Inf\n"               /* line 2 */
                                "nan: .nan\n"                 /* line 3 */
                                "garbage: 1.0abc\n"           /* line 4 */
                                "range: 1e999\n"              /* line 5 */
                                "quoted: \"1.5\"\n"           /* line 6 */
                                "hex: 0x10\n"                 /* line 7 */
                                "word: abc\n"                 /* line 8 */
                                "list: [1, 2]\n"              /* line 9 */
                                "empty:\n"                    /* line 10 */
                                "under: 1e-400\n"             /* line 11 */
                                "bare_e: 1e\n"                /* line 12 */
                                "infinity: inf\n");           /* line 13 */
    expect_double_error(cfg, "inf", "t.yaml:1: inf: '.inf' is not a finite number");
    expect_double_error(cfg, "ninf", "t.yaml:2:");
    expect_double_error(cfg, "nan", "t.yaml:3: nan: '.nan' is not a finite number");
    expect_double_error(cfg, "garbage", "t.yaml:4: garbage: expected a number, got '1.0abc'");
    expect_double_error(cfg, "range", "t.yaml:5: range: '1e999' is out of the range");
    expect_double_error(cfg, "quoted",
                        "t.yaml:6: quoted: expected a number, got the quoted string '1.5'");
    expect_double_error(cfg, "hex", "t.yaml:7:");
    expect_double_error(cfg, "word", "t.yaml:8: word: expected a number, got 'abc'");
    expect_double_error(cfg, "list", "t.yaml:9: list: expected a number, got a sequence");
    expect_double_error(cfg, "empty", "t.yaml:10:");
    expect_double_error(cfg, "under", "t.yaml:11: under: '1e-400' is out of the range");
    expect_double_error(cfg, "bare_e", "t.yaml:12:");
    expect_double_error(cfg, "infinity", "t.yaml:13:");
    nnpops__cfg_free(cfg);
    return 0;
}

static int case_ints(void) {
    nnpops__cfg *cfg = parse_ok("a: 0\n"
                                "b: -17\n"
                                "max: 9223372036854775807\n"
                                "min: -9223372036854775808\n"
                                "f: 3.0\n"
                                "e: 1e3\n"
                                "frac: 1.5\n"               /* line 7 */
                                "over: 9223372036854775808\n" /* line 8 */
                                "lead: 010\n"               /* line 9 */
                                "word: ten\n"               /* line 10 */
                                "quoted: '3'\n"             /* line 11 */
                                "huge: 1e300\n"             /* line 12 */
                                "inf: .inf\n");             /* line 13 */
    int64_t v;
    CHECK_OK(nnpops__cfg_int(cfg, get(cfg, "a"), "a", &v));
    CHECK(v == 0);
    CHECK_OK(nnpops__cfg_int(cfg, get(cfg, "b"), "b", &v));
    CHECK(v == -17);
    CHECK_OK(nnpops__cfg_int(cfg, get(cfg, "max"), "max", &v));
    CHECK(v == INT64_MAX);
    CHECK_OK(nnpops__cfg_int(cfg, get(cfg, "min"), "min", &v));
    CHECK(v == INT64_MIN);
    CHECK_OK(nnpops__cfg_int(cfg, get(cfg, "f"), "f", &v));
    CHECK(v == 3);
    CHECK_OK(nnpops__cfg_int(cfg, get(cfg, "e"), "e", &v));
    CHECK(v == 1000);
    CHECK_STATUS(nnpops__cfg_int(cfg, get(cfg, "frac"), "frac", &v), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:7: frac: expected an integer, got '1.5'");
    CHECK_STATUS(nnpops__cfg_int(cfg, get(cfg, "over"), "over", &v), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:8: over: '9223372036854775808' is out of the range of a 64-bit");
    CHECK_STATUS(nnpops__cfg_int(cfg, get(cfg, "lead"), "lead", &v), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:9: lead:");
    CHECK_STATUS(nnpops__cfg_int(cfg, get(cfg, "word"), "word", &v), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:10: word: expected an integer, got 'ten'");
    CHECK_STATUS(nnpops__cfg_int(cfg, get(cfg, "quoted"), "quoted", &v),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:11: quoted: expected an integer, got the quoted string '3'");
    CHECK_STATUS(nnpops__cfg_int(cfg, get(cfg, "huge"), "huge", &v), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:12:");
    CHECK_STATUS(nnpops__cfg_int(cfg, get(cfg, "inf"), "inf", &v), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:13: inf: expected an integer, got '.inf'");
    nnpops__cfg_free(cfg);
    return 0;
}

static int case_bools(void) {
    nnpops__cfg *cfg = parse_ok("seq: [true, false, on, off, yes, no, True, OFF, Yes]\n"
                                "bad: maybe\n"
                                "one: 1\n");
    static const int want[] = {1, 0, 1, 0, 1, 0, 1, 0, 1};
    nnpops__node seq = get(cfg, "seq");
    CHECK(nnpops__cfg_len(cfg, seq) == 9);
    for (int i = 0; i < 9; i++) {
        int b = -1;
        CHECK_OK(nnpops__cfg_bool(cfg, nnpops__cfg_item(cfg, seq, i), "seq item", &b));
        CHECK(b == want[i]);
    }
    int b;
    CHECK_STATUS(nnpops__cfg_bool(cfg, get(cfg, "bad"), "bad", &b), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:2: bad: expected a boolean");
    CHECK_STATUS(nnpops__cfg_bool(cfg, get(cfg, "one"), "one", &b), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:3:");
    nnpops__cfg_free(cfg);
    return 0;
}

static int case_strings(void) {
    nnpops__cfg *cfg = parse_ok("plain: hello world\n"
                                "quoted: \"a\\tb\"\n"
                                "single: 'it''s'\n"
                                "empty_quoted: \"\"\n"
                                "null1: ~\n"        /* line 5 */
                                "null2:\n"          /* line 6 */
                                "nul: \"a\\0b\"\n"  /* line 7 */
                                "map: {a: 1}\n");   /* line 8 */
    const char *s;
    CHECK_OK(nnpops__cfg_str(cfg, get(cfg, "plain"), "plain", &s));
    CHECK(strcmp(s, "hello world") == 0);
    CHECK_OK(nnpops__cfg_str(cfg, get(cfg, "quoted"), "quoted", &s));
    CHECK(strcmp(s, "a\tb") == 0);
    CHECK_OK(nnpops__cfg_str(cfg, get(cfg, "single"), "single", &s));
    CHECK(strcmp(s, "it's") == 0);
    CHECK_OK(nnpops__cfg_str(cfg, get(cfg, "empty_quoted"), "empty_quoted", &s));
    CHECK(strcmp(s, "") == 0);
    CHECK_STATUS(nnpops__cfg_str(cfg, get(cfg, "null1"), "null1", &s), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:5: null1: expected a string, got null");
    CHECK_STATUS(nnpops__cfg_str(cfg, get(cfg, "null2"), "null2", &s), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:6:");
    CHECK_STATUS(nnpops__cfg_str(cfg, get(cfg, "nul"), "nul", &s), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:7: nul: string contains a NUL");
    CHECK_STATUS(nnpops__cfg_str(cfg, get(cfg, "map"), "map", &s), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:8: map: expected a string, got a mapping");
    nnpops__cfg_free(cfg);
    return 0;
}

static int case_structure(void) {
    nnpops__cfg *cfg = parse_ok("# comment\n"
                                "top:\n"                 /* line 2 */
                                "  list: [1, 2.5, 3]\n"  /* line 3 */
                                "  inner:\n"             /* line 4 */
                                "    x: 1\n"             /* line 5 */
                                "scalar: s\n");          /* line 6 */
    nnpops__node root = nnpops__cfg_root(cfg);
    CHECK(root != 0);
    CHECK(nnpops__cfg_is_map(cfg, root));
    CHECK(nnpops__cfg_len(cfg, root) == 2);
    CHECK(strcmp(nnpops__cfg_file(cfg), "t.yaml") == 0);
    nnpops__node top = get(cfg, "top");
    CHECK(nnpops__cfg_line(cfg, top) == 3); /* a block mapping starts at its first key */
    nnpops__node key0 = nnpops__cfg_key(cfg, root, 0);
    const char *s;
    CHECK_OK(nnpops__cfg_str(cfg, key0, "key", &s));
    CHECK(strcmp(s, "top") == 0);
    CHECK(nnpops__cfg_line(cfg, key0) == 2);
    CHECK(nnpops__cfg_value(cfg, root, 0) == top);
    CHECK(nnpops__cfg_key(cfg, root, 2) == 0);
    CHECK(nnpops__cfg_value(cfg, root, -1) == 0);
    nnpops__node list;
    CHECK_OK(nnpops__cfg_get(cfg, top, "list", 1, &list));
    CHECK(nnpops__cfg_is_seq(cfg, list) && !nnpops__cfg_is_map(cfg, list));
    CHECK(nnpops__cfg_len(cfg, list) == 3);
    CHECK(nnpops__cfg_is_scalar(cfg, nnpops__cfg_item(cfg, list, 2)));
    CHECK(nnpops__cfg_item(cfg, list, 3) == 0);
    CHECK(nnpops__cfg_item(cfg, top, 0) == 0); /* not a sequence */
    CHECK(nnpops__cfg_len(cfg, get(cfg, "scalar")) == 0);
    CHECK(!nnpops__cfg_is_map(cfg, 0) && !nnpops__cfg_is_seq(cfg, 12345));
    CHECK(nnpops__cfg_line(cfg, 0) == 0);

    /* optional and required lookups */
    nnpops__node n = 99;
    CHECK_OK(nnpops__cfg_get(cfg, top, "absent", 0, &n));
    CHECK(n == 0);
    CHECK_STATUS(nnpops__cfg_get(cfg, top, "absent", 1, &n), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:3: missing required key 'absent'");
    CHECK_STATUS(nnpops__cfg_get(cfg, list, "x", 1, &n), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:3: expected a mapping");

    /* sequences of numbers */
    double v[4];
    int64_t count = -1;
    CHECK_OK(nnpops__cfg_doubles(cfg, list, "list", v, 4, 0, &count));
    CHECK(count == 3 && v[0] == 1.0 && v[1] == 2.5 && v[2] == 3.0);
    CHECK_OK(nnpops__cfg_doubles(cfg, list, "list", v, 3, 1, &count));
    CHECK(count == 3);
    CHECK_STATUS(nnpops__cfg_doubles(cfg, list, "list", v, 4, 1, &count),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:3: list: expected exactly 4 numbers, got 3");
    CHECK_STATUS(nnpops__cfg_doubles(cfg, list, "list", v, 2, 0, &count),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("expected at most 2 numbers, got 3");
    CHECK_STATUS(nnpops__cfg_doubles(cfg, get(cfg, "scalar"), "scalar", v, 2, 0, &count),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:6: scalar: expected a sequence of numbers");
    nnpops__cfg_free(cfg);

    cfg = parse_ok("l: [1, x, 3]\n");
    CHECK_STATUS(nnpops__cfg_doubles(cfg, get(cfg, "l"), "l", v, 3, 1, &count),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:1: l[1]: expected a number, got 'x'");
    nnpops__cfg_free(cfg);
    return 0;
}

static int case_syntax_error(void) {
    nnpops__cfg *cfg = (nnpops__cfg *)1;
    CHECK_STATUS(parse("a: 1\n"
                       "b: [1, 2\n"
                       "c: 3\n"
                       "d: }\n",
                       &cfg),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK(cfg == NULL);
    CHECK_ERROR_HAS("t.yaml:");
    CHECK_ERROR_HAS("YAML syntax error");
    CHECK_STATUS(parse("key: value\n"
                       "  bad: indent\n",
                       &cfg),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:2:");
    CHECK_ERROR_HAS("mapping values are not allowed");
    /* an alias to an anchor never defined */
    CHECK_STATUS(parse("a: *nowhere\n", &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:1:");
    /* invalid UTF-8 */
    CHECK_STATUS(parse("a: \xff\xfe\n", &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("UTF-8");
    return 0;
}

static int case_truncated(void) {
    nnpops__cfg *cfg = NULL;
    CHECK_STATUS(parse("name: x\n"
                       "species: [H, C,\n",
                       &cfg),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:");
    CHECK_ERROR_HAS("t.yaml:3:1: YAML syntax error");
    CHECK_STATUS(parse("s: \"unterminated\n", &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:");
    return 0;
}

static int case_empty(void) {
    nnpops__cfg *cfg = NULL;
    CHECK_STATUS(parse("", &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml: empty YAML document");
    CHECK_STATUS(parse("# only a comment\n\n", &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("empty YAML document");
    CHECK_STATUS(parse("---\n", &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("empty YAML document");
    CHECK_STATUS(nnpops__cfg_parse("mem", NULL, 0, &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK(cfg == NULL);
    /* later documents are ignored */
    cfg = parse_ok("a: 1\n---\nb: 2\n");
    nnpops__node n;
    CHECK_OK(nnpops__cfg_get(cfg, nnpops__cfg_root(cfg), "b", 0, &n));
    CHECK(n == 0);
    nnpops__cfg_free(cfg);
    return 0;
}

static char *nested(int depth) {
    char *s = malloc(2 * (size_t)depth + 8);
    CHECK(s != NULL);
    size_t o = 0;
    for (int i = 0; i < depth; i++) s[o++] = '[';
    s[o++] = '1';
    for (int i = 0; i < depth; i++) s[o++] = ']';
    s[o++] = '\n';
    s[o] = '\0';
    return s;
}

static int case_depth(void) {
    nnpops__cfg *cfg = NULL;
    /* 63 sequences around a scalar: 64 levels, the limit */
    char *ok = nested(63);
    cfg = parse_ok(ok);
    nnpops__cfg_free(cfg);
    free(ok);
    char *deep = nested(64);
    CHECK_STATUS(parse(deep, &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:1: nesting deeper than 64 levels");
    free(deep);
    char *very = nested(100000);
    CHECK_STATUS(parse(very, &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("nesting deeper than 64 levels");
    free(very);
    /* depth through aliases counts too: an alias adds the anchored node's height */
    char *inner = nested(40), *outer = nested(31);
    char *star = strchr(outer, '1');
    CHECK(star != NULL);
    *star = '\0';
    char text[512];
    snprintf(text, sizeof text, "a: &x %sb: %s*x%s", inner, outer, star + 1);
    CHECK_STATUS(parse(text, &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:2: nesting deeper than 64 levels");
    free(inner);
    free(outer);
    return 0;
}

static int case_aliases(void) {
    /* "billion laughs": shared nodes, so loading and walking stay cheap */
    const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                       "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
                       "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
                       "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n"
                       "j: &j [*i, *i, *i, *i, *i, *i, *i, *i, *i, *i]\n"
                       "k: &k [*j, *j, *j, *j, *j, *j, *j, *j, *j, *j]\n";
    clock_t t0 = clock();
    nnpops__cfg *cfg = parse_ok(bomb);
    CHECK(nnpops__cfg_len(cfg, get(cfg, "k")) == 10);
    nnpops__cfg_free(cfg);
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 5.0);

    /* a plain alias reads like a copy */
    cfg = parse_ok("base: &v 2.5\nother: *v\n");
    double v;
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "other"), "other", &v));
    CHECK(v == 2.5);
    nnpops__cfg_free(cfg);

    /* a node that contains itself: an error, whether libyaml or the walk catches it */
    nnpops__cfg *bad = NULL;
    CHECK_STATUS(parse("a: &r [1, *r]\n", &bad), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK(bad == NULL);
    CHECK_ERROR_HAS("t.yaml:1");
    return 0;
}

static int case_duplicate_keys(void) {
    nnpops__cfg *cfg = NULL;
    CHECK_STATUS(parse("a: 1\n"
                       "b: 2\n"
                       "a: 3\n",
                       &cfg),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:3: duplicate key 'a' (first at line 1)");
    /* a large mapping takes the sorting path */
    char text[4096];
    size_t o = 0;
    for (int i = 0; i < 40; i++) {
        o += (size_t)snprintf(text + o, sizeof text - o, "k%d: %d\n", i, i);
    }
    snprintf(text + o, sizeof text - o, "k17: again\n");
    CHECK_STATUS(parse(text, &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("t.yaml:41: duplicate key 'k17' (first at line 18)");
    /* the same key in different mappings is fine */
    cfg = parse_ok("x: {a: 1}\ny: {a: 2}\n");
    nnpops__cfg_free(cfg);
    return 0;
}

static int case_json(void) {
    /* the shape of a safetensors header: one line, no spaces after ':' and ',' */
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"m0.H.l0.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],"
                       "\"data_offsets\":[0,48]},"
                       "\"b\\u00e9\\/x\":{\"dtype\":\"F64\",\"shape\":[],"
                       "\"data_offsets\":[48,56]}}   ";
    nnpops__cfg *cfg = parse_ok(json);
    nnpops__node root = nnpops__cfg_root(cfg);
    CHECK(nnpops__cfg_len(cfg, root) == 3);
    nnpops__node t, shape;
    CHECK_OK(nnpops__cfg_get(cfg, root, "m0.H.l0.weight", 1, &t));
    CHECK_OK(nnpops__cfg_get(cfg, t, "shape", 1, &shape));
    int64_t d;
    CHECK_OK(nnpops__cfg_int(cfg, nnpops__cfg_item(cfg, shape, 1), "shape[1]", &d));
    CHECK(d == 4);
    const char *s;
    CHECK_OK(nnpops__cfg_str(cfg, nnpops__cfg_key(cfg, root, 2), "name", &s));
    CHECK(strcmp(s, "b\xc3\xa9/x") == 0);
    nnpops__cfg_free(cfg);

    /* many keys and a long single line (about 600 kB) */
    int n = 8000;
    size_t cap = (size_t)n * 96 + 16;
    char *big = malloc(cap);
    CHECK(big != NULL);
    size_t o = 0;
    big[o++] = '{';
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(big + o, cap - o,
                              "%s\"model.layer%06d.weight\":{\"dtype\":\"F32\",\"shape\":[1],"
                              "\"data_offsets\":[%d,%d]}",
                              i ? "," : "", i, 4 * i, 4 * i + 4);
    }
    big[o++] = '}';
    big[o] = '\0';
    cfg = parse_ok(big);
    root = nnpops__cfg_root(cfg);
    CHECK(nnpops__cfg_len(cfg, root) == n);
    CHECK_OK(nnpops__cfg_get(cfg, root, "model.layer007999.weight", 1, &t));
    nnpops__node offs;
    CHECK_OK(nnpops__cfg_get(cfg, t, "data_offsets", 1, &offs));
    CHECK_OK(nnpops__cfg_int(cfg, nnpops__cfg_item(cfg, offs, 1), "end", &d));
    CHECK(d == 32000);
    nnpops__cfg_free(cfg);
    free(big);
    return 0;
}

static int case_load_file(void) {
    const char *path = test_write_text("ok.yaml", "x: 1\n"
                                             "y: [a, b]\n"
                                             "z: oops: no\n");
    nnpops__cfg *cfg = NULL;
    CHECK_STATUS(nnpops__cfg_load(path, &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS(path);
    CHECK_ERROR_HAS(":3:");

    path = test_write_text("good.yaml", "x: 1\ny: [a, b]\n");
    CHECK_OK(nnpops__cfg_load(path, &cfg));
    CHECK(strcmp(nnpops__cfg_file(cfg), path) == 0);
    CHECK(nnpops__cfg_len(cfg, get(cfg, "y")) == 2);
    nnpops__cfg_free(cfg);

    const char *missing = test_tmp_path("missing.yaml");
    CHECK_STATUS(nnpops__cfg_load(missing, &cfg), NNPOPS_ERROR_IO);
    CHECK(cfg == NULL);
    CHECK_ERROR_HAS(missing);
    CHECK_ERROR_HAS("No such file");
    return 0;
}

static int case_too_large(void) {
    const char *path = test_tmp_path("huge.yaml");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fputs("a: 1\n", f) >= 0);
    CHECK(fseek(f, 64L * 1024 * 1024, SEEK_SET) == 0); /* a sparse file of 64 MiB + 1 byte */
    CHECK(fputc('\n', f) != EOF);
    CHECK(fclose(f) == 0);
    nnpops__cfg *cfg = NULL;
    CHECK_STATUS(nnpops__cfg_load(path, &cfg), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK(cfg == NULL);
    CHECK_ERROR_HAS("too large");
    CHECK_ERROR_HAS(path);
    return 0;
}

/* Numbers read the same when the host program uses a locale whose decimal point is ','. */
static int case_locale(void) {
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8",
                                        "de_DE", "fr_FR", "nl_NL.UTF-8", "ru_RU.UTF-8"};
    const char *set = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !set; i++) {
        set = setlocale(LC_NUMERIC, names[i]);
    }
    if (!set || strcmp(localeconv()->decimal_point, ",") != 0) {
        fprintf(stderr, "no locale with a decimal comma is installed\n");
        return SKIP_RETURN;
    }
    CHECK(strtod("1.5", NULL) == 1.0); /* the locale is in effect for the process */
    nnpops__cfg *cfg = parse_ok("a: 1.5\nb: -2.5e-3\nc: 4.0\nd: 1,5\n");
    double v;
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "a"), "a", &v));
    CHECK(v == 1.5);
    CHECK_OK(nnpops__cfg_double(cfg, get(cfg, "b"), "b", &v));
    CHECK(v == -2.5e-3);
    int64_t i;
    CHECK_OK(nnpops__cfg_int(cfg, get(cfg, "c"), "c", &i));
    CHECK(i == 4);
    CHECK_STATUS(nnpops__cfg_double(cfg, get(cfg, "d"), "d", &v), NNPOPS_ERROR_MODEL_FORMAT);
    nnpops__cfg_free(cfg);
    return 0;
}

static const test_case cases[] = {
    {"doubles_ok", case_doubles_ok},
    {"double_errors", case_double_errors},
    {"ints", case_ints},
    {"bools", case_bools},
    {"strings", case_strings},
    {"structure", case_structure},
    {"syntax_error", case_syntax_error},
    {"truncated", case_truncated},
    {"empty", case_empty},
    {"depth", case_depth},
    {"aliases", case_aliases},
    {"duplicate_keys", case_duplicate_keys},
    {"json", case_json},
    {"load_file", case_load_file},
    {"too_large", case_too_large},
    {"locale", case_locale},
};

int main(int argc, char **argv) {
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
