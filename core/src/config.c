/*
 * config.c - model configuration: one YAML document read with libyaml's document API.
 *
 * nnpops__cfg_load reads a YAML file (at most 64 MiB) and nnpops__cfg_parse parses text held in
 * memory (the safetensors JSON header goes through the same path: JSON objects are YAML flow
 * mappings).  The first document of the stream is kept; later documents are ignored; an empty
 * stream is an error.  Nesting deeper than NNPOPS__CFG_MAX_DEPTH levels is rejected twice: by a
 * first pass over the parser's events, which stops at the limit (libyaml's scanner is quadratic
 * in the flow nesting depth, so "[[[[..." must not reach the document loader), and by a walk of
 * the loaded document graph, which also counts depth reached through aliases and rejects
 * recursive aliases (an anchor used inside its own node) and duplicate keys of a mapping.
 * Aliases are shared nodes in libyaml's document, so the walk visits every node once (memoised)
 * and cannot blow up on "billion laughs" input.
 *
 * Nodes are libyaml node ids (1-based; 0 = none).  Accessors are total: a wrong node id or type
 * yields 0 / false instead of crashing.  Scalar conversions are strict and report
 * "<file>:<line>: <what>: ..." with 1-based lines:
 *   str     any scalar except a plain empty/null one (~, null); no embedded NUL bytes
 *   double  plain decimal numbers ([+-]digits[.digits][e[+-]digits], ".5", "5."), finite and in
 *           range (strtod ERANGE is an error); .inf, .nan, hex and quoted numbers are errors
 *   int     plain [+-]digits without leading zeros, within int64; a number written with a
 *           fraction or exponent is accepted only when its value is an exact integer
 *   bool    true/false, yes/no, on/off (any letter case)
 * Numbers are converted in the "C" locale whatever LC_NUMERIC the host program has set.
 * libyaml rejects implicit mapping keys longer than 1024 characters (a YAML rule), so neither a
 * model file nor a safetensors header can have keys that long.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "internal.h"

#define NNPOPS__CFG_MAX_DEPTH 64
#define NNPOPS__CFG_MAX_FILE_BYTES ((long)64 * 1024 * 1024)

struct nnpops__cfg {
    yaml_document_t doc;
    char *file;
};

/* ---- helpers --------------------------------------------------------------------------------- */

static const char *errno_text(int err, char *buf, size_t n) {
    if (strerror_r(err, buf, n) != 0) snprintf(buf, n, "error %d", err);
    return buf;
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static yaml_node_t *node_at(const nnpops__cfg *cfg, nnpops__node id) {
    if (!cfg || id <= 0) return NULL;
    if ((ptrdiff_t)id > cfg->doc.nodes.top - cfg->doc.nodes.start) return NULL;
    return cfg->doc.nodes.start + (id - 1);
}

static int node_line(const yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }

/* A short printable excerpt of a scalar for messages (truncated, control bytes replaced). */
static const char *excerpt(const yaml_node_t *n, char *buf, size_t cap) {
    size_t len = n->data.scalar.length, o = 0;
    const unsigned char *s = n->data.scalar.value;
    for (size_t i = 0; i < len && o + 4 < cap; i++) {
        buf[o++] = (s[i] < 0x20 || s[i] == 0x7f) ? '?' : (char)s[i];
    }
    if (o < len) {
        if (o + 4 > cap) o = cap - 4;
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* Scalar node or an error naming what was found instead. */
static nnpops_status want_scalar(const nnpops__cfg *cfg, nnpops__node id, const char *what,
                                 const char *expected, yaml_node_t **out) {
    yaml_node_t *n = node_at(cfg, id);
    const char *file = nnpops__cfg_file(cfg);
    if (!n) return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: %s: missing", file, what);
    if (n->type != YAML_SCALAR_NODE) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s: expected %s, got a %s", file,
                            node_line(n), what, expected,
                            n->type == YAML_MAPPING_NODE ? "mapping" : "sequence");
    }
    *out = n;
    return NNPOPS_OK;
}

static int is_plain(const yaml_node_t *n) {
    return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int is_null_text(const char *s, size_t len) {
    return len == 0 || (len == 1 && s[0] == '~') ||
           (len == 4 && (!strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")));
}

static int equal_nocase(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    }
    return *a == *b;
}

/* Checks the decimal number syntax; sets *integral when there is no fraction and no exponent. */
static int number_syntax(const char *s, int *integral) {
    const char *p = s;
    int digits = 0, frac_digits = 0;
    if (*p == '+' || *p == '-') p++;
    while (isdigit((unsigned char)*p)) p++, digits++;
    *integral = 1;
    if (*p == '.') {
        *integral = 0;
        p++;
        while (isdigit((unsigned char)*p)) p++, frac_digits++;
    }
    if (digits + frac_digits == 0) return 0;
    if (*p == 'e' || *p == 'E') {
        int exp_digits = 0;
        *integral = 0;
        p++;
        if (*p == '+' || *p == '-') p++;
        while (isdigit((unsigned char)*p)) p++, exp_digits++;
        if (!exp_digits) return 0;
    }
    return *p == '\0';
}

/* strtod in the "C" locale (a host program may have set LC_NUMERIC to one whose decimal point
 * is ','); *err receives errno as strtod left it. */
static locale_t c_numeric;
static pthread_once_t c_numeric_once = PTHREAD_ONCE_INIT;

static void make_c_numeric(void) { c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

static double strtod_c(const char *s, char **end, int *err) {
    pthread_once(&c_numeric_once, make_c_numeric);
    locale_t old = c_numeric ? uselocale(c_numeric) : (locale_t)0;
    errno = 0;
    double v = strtod(s, end);
    *err = errno;
    if (old) uselocale(old);
    return v;
}

static int is_nonfinite_text(const char *s) {
    if (*s == '+' || *s == '-') s++;
    if (*s == '.') s++;
    return equal_nocase(s, "inf") || equal_nocase(s, "nan") || equal_nocase(s, "infinity");
}

/* ---- loading --------------------------------------------------------------------------------- */

typedef struct walk_state {
    const nnpops__cfg *cfg;
    unsigned char *state;   /* per node: 0 unvisited, 1 on the current path, 2 done */
    int *height;            /* per node, when done: levels below and including it */
} walk_state;

static int compare_keys(const void *pa, const void *pb) {
    const yaml_node_t *a = *(const yaml_node_t *const *)pa;
    const yaml_node_t *b = *(const yaml_node_t *const *)pb;
    size_t la = a->data.scalar.length, lb = b->data.scalar.length;
    int c = memcmp(a->data.scalar.value, b->data.scalar.value, la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    /* equal keys: order by position so the first occurrence comes first */
    return a->start_mark.index < b->start_mark.index ? -1
                                                     : a->start_mark.index > b->start_mark.index;
}

static int same_key(const yaml_node_t *a, const yaml_node_t *b) {
    return a->data.scalar.length == b->data.scalar.length &&
           memcmp(a->data.scalar.value, b->data.scalar.value, a->data.scalar.length) == 0;
}

static nnpops_status duplicate_key_error(const nnpops__cfg *cfg, const yaml_node_t *first,
                                         const yaml_node_t *second) {
    char buf[80];
    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: duplicate key '%s' (first at line %d)",
                        cfg->file, node_line(second), excerpt(second, buf, sizeof buf),
                        node_line(first));
}

/* Rejects a mapping that has the same scalar key twice. */
static nnpops_status check_duplicate_keys(const nnpops__cfg *cfg, const yaml_node_t *map) {
    yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs);
    if (n < 2) return NNPOPS_OK;
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            yaml_node_t *ki = node_at(cfg, pairs[i].key);
            if (!ki || ki->type != YAML_SCALAR_NODE) continue;
            for (size_t j = 0; j < i; j++) {
                yaml_node_t *kj = node_at(cfg, pairs[j].key);
                if (kj && kj->type == YAML_SCALAR_NODE && same_key(ki, kj)) {
                    return duplicate_key_error(cfg, kj, ki);
                }
            }
        }
        return NNPOPS_OK;
    }
    const yaml_node_t **keys = malloc(n * sizeof *keys);
    if (!keys) {
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory checking %zu keys",
                            cfg->file, n);
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *k = node_at(cfg, pairs[i].key);
        if (k && k->type == YAML_SCALAR_NODE) keys[m++] = k;
    }
    qsort(keys, m, sizeof *keys, compare_keys);
    nnpops_status st = NNPOPS_OK;
    for (size_t i = 1; i < m; i++) {
        if (same_key(keys[i - 1], keys[i])) {
            st = duplicate_key_error(cfg, keys[i - 1], keys[i]);
            break;
        }
    }
    free(keys);
    return st;
}

/* Depth-first walk from node id at nesting level `level` (root = 1); recursion is bounded by the
 * depth limit because it stops as soon as the path is too long. */
static nnpops_status walk(walk_state *ws, nnpops__node id, int level, int parent_line) {
    const nnpops__cfg *cfg = ws->cfg;
    yaml_node_t *n = node_at(cfg, id);
    if (!n) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: corrupt YAML document (node %d)",
                            cfg->file, id);
    }
    if (ws->state[id] == 1) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: recursive alias (a node that contains itself)", cfg->file,
                            node_line(n));
    }
    if (ws->state[id] == 2) {
        /* a node seen before (through an alias): its height is known; report where it is used */
        if (level - 1 + ws->height[id] > NNPOPS__CFG_MAX_DEPTH) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%d: nesting deeper than %d levels (through an alias of the "
                                "node at line %d)",
                                cfg->file, parent_line ? parent_line : node_line(n),
                                NNPOPS__CFG_MAX_DEPTH, node_line(n));
        }
        return NNPOPS_OK;
    }
    if (level > NNPOPS__CFG_MAX_DEPTH) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: nesting deeper than %d levels",
                            cfg->file, node_line(n), NNPOPS__CFG_MAX_DEPTH);
    }
    ws->state[id] = 1;
    int height = 1;
    nnpops_status st = NNPOPS_OK;
    if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if ((st = walk(ws, *it, level + 1, node_line(n))) != NNPOPS_OK) return st;
            if (ws->height[*it] + 1 > height) height = ws->height[*it] + 1;
        }
    } else if (n->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            if ((st = walk(ws, p->key, level + 1, node_line(n))) != NNPOPS_OK) return st;
            if (ws->height[p->key] + 1 > height) height = ws->height[p->key] + 1;
            if ((st = walk(ws, p->value, level + 1, node_line(n))) != NNPOPS_OK) return st;
            if (ws->height[p->value] + 1 > height) height = ws->height[p->value] + 1;
        }
        if ((st = check_duplicate_keys(cfg, n)) != NNPOPS_OK) return st;
    }
    ws->state[id] = 2;
    ws->height[id] = height;
    return NNPOPS_OK;
}

static nnpops_status validate(const nnpops__cfg *cfg) {
    size_t count = (size_t)(cfg->doc.nodes.top - cfg->doc.nodes.start);
    walk_state ws = {cfg, calloc(count + 1, 1), calloc(count + 1, sizeof(int))};
    nnpops_status st;
    if (!ws.state || !ws.height) {
        st = nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory checking %zu YAML nodes",
                          cfg->file, count);
    } else {
        st = walk(&ws, 1, 1, 0);
    }
    free(ws.state);
    free(ws.height);
    return st;
}

static nnpops_status parse_error(const char *name, const yaml_parser_t *parser) {
    const char *problem = parser->problem ? parser->problem : "unknown problem";
    switch (parser->error) {
    case YAML_MEMORY_ERROR:
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory parsing YAML", name);
    case YAML_READER_ERROR:
        if (parser->problem_value != -1) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s: invalid text at byte offset %zu: %s (byte 0x%02x)", name,
                                parser->problem_offset, problem, parser->problem_value & 0xff);
        }
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: invalid text at byte offset %zu: %s",
                            name, parser->problem_offset, problem);
    default:
        if (parser->context) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%zu:%zu: YAML syntax error: %s (%s at line %zu)", name,
                                parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                                problem, parser->context, parser->context_mark.line + 1);
        }
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%zu:%zu: YAML syntax error: %s", name,
                            parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                            problem);
    }
}

/* First pass over the events of the first document: only checks the nesting depth, and stops
 * as soon as it is exceeded.  libyaml's scanner costs O(flow depth) per token, so a document of
 * deeply nested flow collections ("[[[[...") would take time quadratic in its size to load; this
 * pass reaches the limit after a bounded amount of work and rejects it first.  Syntax errors
 * within the first document are reported here too. */
static nnpops_status check_depth(const char *name, const unsigned char *text, size_t len) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory starting libyaml", name);
    }
    yaml_parser_set_input_string(&parser, text, len);
    nnpops_status st = NNPOPS_OK;
    int depth = 0, done = 0;
    while (!done) {
        yaml_event_t event;
        if (!yaml_parser_parse(&parser, &event)) {
            st = parse_error(name, &parser);
            break;
        }
        int level = 0;
        switch (event.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: level = ++depth; break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT: level = depth + 1; break;
        case YAML_DOCUMENT_END_EVENT:
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        if (level > NNPOPS__CFG_MAX_DEPTH) {
            st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%zu: nesting deeper than %d levels",
                              name, event.start_mark.line + 1, NNPOPS__CFG_MAX_DEPTH);
            done = 1;
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    return st;
}

nnpops_status nnpops__cfg_parse(const char *name, const unsigned char *text, size_t len,
                                nnpops__cfg **cfg) {
    if (!cfg) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "nnpops__cfg_parse: cfg is NULL");
    *cfg = NULL;
    if (!name) name = "<memory>";
    if (!text && len) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "%s: no text to parse", name);
    }
    static const unsigned char empty[1] = {0};
    if (!text) text = empty;
    nnpops_status st = check_depth(name, text, len);
    if (st != NNPOPS_OK) return st;

    nnpops__cfg *c = calloc(1, sizeof *c);
    char *file = copy_string(name);
    if (!c || !file) {
        free(c);
        free(file);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    c->file = file;

    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        free(c->file);
        free(c);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory starting libyaml", name);
    }
    yaml_parser_set_input_string(&parser, text, len);
    if (!yaml_parser_load(&parser, &c->doc)) {
        st = parse_error(name, &parser);
        yaml_parser_delete(&parser);
        free(c->file);
        free(c);
        return st;
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = node_at(c, 1);
    if (!root || (root->type == YAML_SCALAR_NODE && is_plain(root) &&
                  is_null_text((const char *)root->data.scalar.value, root->data.scalar.length))) {
        nnpops__cfg_free(c);
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: empty YAML document", name);
    }
    st = validate(c);
    if (st != NNPOPS_OK) {
        nnpops__cfg_free(c);
        return st;
    }
    *cfg = c;
    return NNPOPS_OK;
}

nnpops_status nnpops__cfg_load(const char *path, nnpops__cfg **cfg) {
    char ebuf[128];
    if (!cfg) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "nnpops__cfg_load: cfg is NULL");
    *cfg = NULL;
    if (!path) return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "nnpops__cfg_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) {
        int err = errno;
        return nnpops__fail(NNPOPS_ERROR_IO, "%s: cannot open: %s", path,
                            errno_text(err, ebuf, sizeof ebuf));
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        int err = errno;
        fclose(f);
        return nnpops__fail(NNPOPS_ERROR_IO, "%s: cannot determine the file size: %s", path,
                            errno_text(err, ebuf, sizeof ebuf));
    }
    if (size > NNPOPS__CFG_MAX_FILE_BYTES) {
        fclose(f);
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: file of %ld bytes is too large for a model YAML (limit 64 MiB)",
                            path, size);
    }
    unsigned char *text = malloc((size_t)size + 1);
    if (!text) {
        fclose(f);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory reading %ld bytes", path,
                            size);
    }
    size_t got = size ? fread(text, 1, (size_t)size, f) : 0;
    int read_failed = ferror(f);
    int err = errno;
    fclose(f);
    if (read_failed || got != (size_t)size) {
        free(text);
        if (read_failed) {
            return nnpops__fail(NNPOPS_ERROR_IO, "%s: read error: %s", path,
                                errno_text(err, ebuf, sizeof ebuf));
        }
        return nnpops__fail(NNPOPS_ERROR_IO, "%s: short read (%zu of %ld bytes)", path, got, size);
    }
    nnpops_status st = nnpops__cfg_parse(path, text, (size_t)size, cfg);
    free(text);
    return st;
}

void nnpops__cfg_free(nnpops__cfg *cfg) {
    if (!cfg) return;
    yaml_document_delete(&cfg->doc);
    free(cfg->file);
    free(cfg);
}

const char *nnpops__cfg_file(const nnpops__cfg *cfg) {
    return cfg && cfg->file ? cfg->file : "<config>";
}

nnpops__node nnpops__cfg_root(const nnpops__cfg *cfg) { return node_at(cfg, 1) ? 1 : 0; }

int nnpops__cfg_line(const nnpops__cfg *cfg, nnpops__node node) {
    return node_line(node_at(cfg, node));
}

/* ---- structure ------------------------------------------------------------------------------- */

int nnpops__cfg_is_map(const nnpops__cfg *cfg, nnpops__node node) {
    yaml_node_t *n = node_at(cfg, node);
    return n && n->type == YAML_MAPPING_NODE;
}

nnpops_status nnpops__cfg_check_keys(const nnpops__cfg *cfg, nnpops__node map, const char *what,
                                     const char *const *allowed) {
    if (!nnpops__cfg_is_map(cfg, map)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s must be a mapping",
                            nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, map), what);
    }
    const int64_t n = nnpops__cfg_len(cfg, map);
    for (int64_t i = 0; i < n; i++) {
        const nnpops__node key = nnpops__cfg_key(cfg, map, i);
        const char *k;
        nnpops_status st = nnpops__cfg_str(cfg, key, what, &k);
        if (st != NNPOPS_OK) return st;
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++) known = strcmp(k, *a) == 0;
        if (known) continue;
        char list[512] = "";
        for (const char *const *a = allowed; *a; a++) {
            const size_t o = strlen(list);
            snprintf(list + o, sizeof list - o, "%s%s", a == allowed ? "" : ", ", *a);
        }
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: unknown key '%.64s' in %s (expected %s)",
                            nnpops__cfg_file(cfg), nnpops__cfg_line(cfg, key), k, what, list);
    }
    return NNPOPS_OK;
}

int nnpops__cfg_is_seq(const nnpops__cfg *cfg, nnpops__node node) {
    yaml_node_t *n = node_at(cfg, node);
    return n && n->type == YAML_SEQUENCE_NODE;
}

int nnpops__cfg_is_scalar(const nnpops__cfg *cfg, nnpops__node node) {
    yaml_node_t *n = node_at(cfg, node);
    return n && n->type == YAML_SCALAR_NODE;
}

int64_t nnpops__cfg_len(const nnpops__cfg *cfg, nnpops__node node) {
    yaml_node_t *n = node_at(cfg, node);
    if (!n) return 0;
    if (n->type == YAML_SEQUENCE_NODE) {
        return (int64_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    }
    if (n->type == YAML_MAPPING_NODE) {
        return (int64_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    }
    return 0;
}

nnpops__node nnpops__cfg_item(const nnpops__cfg *cfg, nnpops__node seq, int64_t i) {
    yaml_node_t *n = node_at(cfg, seq);
    if (!n || n->type != YAML_SEQUENCE_NODE || i < 0 || i >= nnpops__cfg_len(cfg, seq)) return 0;
    return n->data.sequence.items.start[i];
}

nnpops__node nnpops__cfg_key(const nnpops__cfg *cfg, nnpops__node map, int64_t i) {
    yaml_node_t *n = node_at(cfg, map);
    if (!n || n->type != YAML_MAPPING_NODE || i < 0 || i >= nnpops__cfg_len(cfg, map)) return 0;
    return n->data.mapping.pairs.start[i].key;
}

nnpops__node nnpops__cfg_value(const nnpops__cfg *cfg, nnpops__node map, int64_t i) {
    yaml_node_t *n = node_at(cfg, map);
    if (!n || n->type != YAML_MAPPING_NODE || i < 0 || i >= nnpops__cfg_len(cfg, map)) return 0;
    return n->data.mapping.pairs.start[i].value;
}

nnpops_status nnpops__cfg_get(const nnpops__cfg *cfg, nnpops__node map, const char *key,
                              int required, nnpops__node *out) {
    const char *file = nnpops__cfg_file(cfg);
    if (!out || !key) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "%s: nnpops__cfg_get: NULL argument",
                            file);
    }
    *out = 0;
    yaml_node_t *m = node_at(cfg, map);
    if (!m) {
        if (!required) return NNPOPS_OK;
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: missing required key '%s'", file, key);
    }
    if (m->type != YAML_MAPPING_NODE) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: expected a mapping (looking up key '%s'), got a %s", file,
                            node_line(m), key, m->type == YAML_SCALAR_NODE ? "scalar" : "sequence");
    }
    size_t klen = strlen(key);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(cfg, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == klen &&
            memcmp(k->data.scalar.value, key, klen) == 0) {
            *out = p->value;
            return NNPOPS_OK;
        }
    }
    if (!required) return NNPOPS_OK;
    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                        "%s:%d: missing required key '%s' in the mapping that starts here", file,
                        node_line(m), key);
}

/* ---- scalars --------------------------------------------------------------------------------- */

nnpops_status nnpops__cfg_str(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                              const char **out) {
    yaml_node_t *n = NULL;
    nnpops_status st = want_scalar(cfg, node, what, "a string", &n);
    if (st != NNPOPS_OK) return st;
    const char *s = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    if (is_plain(n) && is_null_text(s, len)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s: expected a string, got null",
                            nnpops__cfg_file(cfg), node_line(n), what);
    }
    if (strlen(s) != len) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s: string contains a NUL character",
                            nnpops__cfg_file(cfg), node_line(n), what);
    }
    *out = s;
    return NNPOPS_OK;
}

/* A plain scalar written as a number (noun: "a number" or "an integer", as the errors say what
 * was expected; finite: .inf and .nan get an error of their own): its node and whether it is
 * written as an integer. */
static nnpops_status number_scalar(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                                   const char *noun, int finite, yaml_node_t **np, int *integral) {
    yaml_node_t *n = NULL;
    char buf[80];
    nnpops_status st = want_scalar(cfg, node, what, noun, &n);
    if (st != NNPOPS_OK) return st;
    const char *file = nnpops__cfg_file(cfg);
    const char *s = (const char *)n->data.scalar.value;
    if (!is_plain(n)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: expected %s, got the quoted string '%s'", file,
                            node_line(n), what, noun, excerpt(n, buf, sizeof buf));
    }
    if (finite && is_nonfinite_text(s)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: '%s' is not a finite number", file, node_line(n), what,
                            excerpt(n, buf, sizeof buf));
    }
    if (strlen(s) != n->data.scalar.length || !number_syntax(s, integral)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s: expected %s, got '%s'", file,
                            node_line(n), what, noun, excerpt(n, buf, sizeof buf));
    }
    *np = n;
    return NNPOPS_OK;
}

nnpops_status nnpops__cfg_double(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                                 double *out) {
    yaml_node_t *n = NULL;
    char buf[80];
    int integral;
    nnpops_status st = number_scalar(cfg, node, what, "a number", 1, &n, &integral);
    if (st != NNPOPS_OK) return st;
    const char *file = nnpops__cfg_file(cfg);
    const char *s = (const char *)n->data.scalar.value;
    char *end = NULL;
    int err;
    double v = strtod_c(s, &end, &err);
    if (err == ERANGE || !isfinite(v)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: '%s' is out of the range of a double", file, node_line(n),
                            what, excerpt(n, buf, sizeof buf));
    }
    if (!end || *end != '\0') {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s: expected a number, got '%s'",
                            file, node_line(n), what, excerpt(n, buf, sizeof buf));
    }
    *out = v;
    return NNPOPS_OK;
}

nnpops_status nnpops__cfg_int(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                              int64_t *out) {
    yaml_node_t *n = NULL;
    char buf[80];
    int integral;
    nnpops_status st = number_scalar(cfg, node, what, "an integer", 0, &n, &integral);
    if (st != NNPOPS_OK) return st;
    const char *file = nnpops__cfg_file(cfg);
    const char *s = (const char *)n->data.scalar.value;
    if (!integral) {
        /* 3.0 or 1e3: accepted when the value is an exact integer that a double holds exactly */
        int err;
        char *end = NULL;
        double v = strtod_c(s, &end, &err);
        if (err == ERANGE || !end || *end != '\0' || !isfinite(v) || v != floor(v) ||
            fabs(v) > 9007199254740992.0) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%d: %s: expected an integer, got '%s'", file, node_line(n),
                                what, excerpt(n, buf, sizeof buf));
        }
        *out = (int64_t)v;
        return NNPOPS_OK;
    }
    const char *digits = s + (s[0] == '+' || s[0] == '-');
    if (digits[0] == '0' && digits[1] != '\0') {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: '%s' has a leading zero (ambiguous: octal in YAML 1.1)",
                            file, node_line(n), what, excerpt(n, buf, sizeof buf));
    }
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: '%s' is out of the range of a 64-bit integer", file,
                            node_line(n), what, excerpt(n, buf, sizeof buf));
    }
    if (!end || *end != '\0') {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: %s: expected an integer, got '%s'",
                            file, node_line(n), what, excerpt(n, buf, sizeof buf));
    }
    *out = (int64_t)v;
    return NNPOPS_OK;
}

nnpops_status nnpops__cfg_bool(const nnpops__cfg *cfg, nnpops__node node, const char *what,
                               int *out) {
    yaml_node_t *n = NULL;
    char buf[80];
    nnpops_status st = want_scalar(cfg, node, what, "a boolean", &n);
    if (st != NNPOPS_OK) return st;
    const char *s = (const char *)n->data.scalar.value;
    if (is_plain(n) && strlen(s) == n->data.scalar.length) {
        static const char *const yes[] = {"true", "yes", "on"};
        static const char *const no[] = {"false", "no", "off"};
        for (int i = 0; i < 3; i++) {
            if (equal_nocase(s, yes[i])) {
                *out = 1;
                return NNPOPS_OK;
            }
            if (equal_nocase(s, no[i])) {
                *out = 0;
                return NNPOPS_OK;
            }
        }
    }
    return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                        "%s:%d: %s: expected a boolean (true/false, yes/no, on/off), got '%s'",
                        nnpops__cfg_file(cfg), node_line(n), what, excerpt(n, buf, sizeof buf));
}

nnpops_status nnpops__cfg_doubles(const nnpops__cfg *cfg, nnpops__node seq, const char *what,
                                  double *out, int64_t max, int exact, int64_t *n) {
    const char *file = nnpops__cfg_file(cfg);
    yaml_node_t *s = node_at(cfg, seq);
    if (n) *n = 0;
    if (!s) return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: %s: missing", file, what);
    if (s->type != YAML_SEQUENCE_NODE) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: expected a sequence of numbers, got a %s", file,
                            node_line(s), what, s->type == YAML_SCALAR_NODE ? "scalar" : "mapping");
    }
    int64_t len = nnpops__cfg_len(cfg, seq);
    if (exact && len != max) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: expected exactly %lld numbers, got %lld", file,
                            node_line(s), what, (long long)max, (long long)len);
    }
    if (len > max) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: %s: expected at most %lld numbers, got %lld", file,
                            node_line(s), what, (long long)max, (long long)len);
    }
    for (int64_t i = 0; i < len; i++) {
        char item_what[160];
        snprintf(item_what, sizeof item_what, "%s[%lld]", what, (long long)i);
        nnpops_status st = nnpops__cfg_double(cfg, nnpops__cfg_item(cfg, seq, i), item_what,
                                              &out[i]);
        if (st != NNPOPS_OK) return st;
    }
    if (n) *n = len;
    return NNPOPS_OK;
}
