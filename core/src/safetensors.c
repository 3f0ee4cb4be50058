/*
 * safetensors.c - reads the weights file of a model (the safetensors format).
 *
 * Layout of a safetensors file:
 *   bytes 0..7        N, the header length, unsigned 64-bit little-endian
 *   bytes 8..8+N-1    a JSON object, UTF-8:  { "name": {"dtype": "F32", "shape": [d0, d1, ...],
 *                     "data_offsets": [begin, end]}, ..., "__metadata__": {...} (optional) }
 *   bytes 8+N..       the data section; a tensor's bytes are [begin, end) relative to its start,
 *                     row-major, little-endian
 *
 * The whole file is read into memory (weights files are a few MB), its sha256 is compared with the
 * one the model YAML records, and the header is parsed with the YAML reader of config.c (a JSON
 * object is a YAML flow mapping) and validated completely before any tensor is handed out: known
 * dtype names, shapes of at most 8 non-negative dimensions, element and byte counts computed with
 * overflow checks, offsets inside the data section that match the byte count, no two tensors
 * sharing bytes, names valid UTF-8, non-empty and unique.  Lookups by name are binary searches over
 * the tensors sorted by name.  Tensors of any known dtype are accepted at load (ANI models hold
 * F32, TensorNet models F32 or F64); nnpops__weights_get_f32 rejects a tensor of another dtype by
 * name, nnpops__weights_read one that is neither F32 nor F64.  Gaps between
 * tensors and trailing bytes are allowed (the converter writes none).
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

#define NNPOPS__ST_MAX_HEADER ((uint64_t)100 * 1024 * 1024)
#define NNPOPS__ST_MAX_NDIM 8

typedef struct st_dtype {
    const char *name;
    int itemsize;
} st_dtype;

/* The dtype names of the safetensors format with a whole number of bytes per element. */
static const st_dtype st_dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},     {"C64", 8},
};
#define ST_N_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

typedef struct st_tensor {
    char *name;
    int dtype;          /* index into st_dtypes */
    int ndim;
    int64_t shape[NNPOPS__ST_MAX_NDIM];
    uint64_t begin, end; /* relative to the data section */
} st_tensor;

struct nnpops__weights {
    char *path;
    unsigned char *bytes; /* the whole file */
    size_t size;
    size_t data_start;    /* 8 + N */
    int64_t n;
    st_tensor *t;         /* sorted by name */
};

static const char *errno_text(int err, char *buf, size_t n) {
    if (strerror_r(err, buf, n) != 0) snprintf(buf, n, "error %d", err);
    return buf;
}

static void free_tensors(st_tensor *t, int64_t n) {
    if (!t) return;
    for (int64_t i = 0; i < n; i++) free(t[i].name);
    free(t);
}

void nnpops__weights_free(nnpops__weights *w) {
    if (!w) return;
    free_tensors(w->t, w->n);
    free(w->bytes);
    free(w->path);
    free(w);
}

int64_t nnpops__weights_count(const nnpops__weights *w) { return w ? w->n : 0; }

/* 1 when s[0..len) is well-formed UTF-8 (no overlong forms, surrogates or code points > 10FFFF). */
static int valid_utf8(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t extra;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            extra = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            extra = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            extra = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (len - i <= extra) return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += extra + 1;
    }
    return 1;
}

static int is_hex64(const char *s) {
    for (int i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)s[i])) return 0;
    }
    return s[64] == '\0';
}

static void format_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t o = 0;
    buf[0] = '\0';
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < ndim && o < cap; i++) {
        o += (size_t)snprintf(buf + o, cap - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    }
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static int compare_begin(const void *pa, const void *pb) {
    const st_tensor *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return 0;
}

static int compare_name(const void *pa, const void *pb) {
    const st_tensor *a = pa, *b = pb;
    return strcmp(a->name, b->name);
}

/* Reads the whole file; a file shorter than 8 bytes is not a safetensors file. */
static nnpops_status read_file(const char *path, unsigned char **bytes, size_t *size) {
    char ebuf[128];
    /* Only a regular file: a directory opens, and its "size" from fseek/ftell is LONG_MAX on
     * ext4 (an absurd allocation); a FIFO would block in fopen. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        return nnpops__fail(NNPOPS_ERROR_IO, "%s: the weights file is not a regular file (%s)",
                            path, S_ISDIR(sb.st_mode) ? "a directory" : "a device, FIFO or socket");
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int err = errno;
        return nnpops__fail(NNPOPS_ERROR_IO, "%s: cannot open the weights file: %s", path,
                            errno_text(err, ebuf, sizeof ebuf));
    }
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        int err = errno;
        fclose(f);
        return nnpops__fail(NNPOPS_ERROR_IO, "%s: cannot determine the file size: %s", path,
                            errno_text(err, ebuf, sizeof ebuf));
    }
    if (len < 8) {
        fclose(f);
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: truncated safetensors file (%ld bytes; the header length alone "
                            "takes 8)",
                            path, len);
    }
    unsigned char *buf = malloc((size_t)len);
    if (!buf) {
        fclose(f);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory reading %ld bytes",
                            path, len);
    }
    size_t got = fread(buf, 1, (size_t)len, f);
    int read_failed = ferror(f);
    int err = errno;
    fclose(f);
    if (read_failed || got != (size_t)len) {
        free(buf);
        if (read_failed) {
            return nnpops__fail(NNPOPS_ERROR_IO, "%s: read error: %s", path,
                                errno_text(err, ebuf, sizeof ebuf));
        }
        return nnpops__fail(NNPOPS_ERROR_IO, "%s: short read (%zu of %ld bytes)", path, got, len);
    }
    *bytes = buf;
    *size = (size_t)len;
    return NNPOPS_OK;
}

/* Parses one header entry "name": {dtype, shape, data_offsets} into t (t->name already set). */
static nnpops_status parse_entry(const nnpops__weights *w, const nnpops__cfg *cfg,
                                 nnpops__node value, st_tensor *t, uint64_t data_size) {
    const char *file = w->path;
    nnpops__node n_dtype, n_shape, n_offsets;
    const char *dtype;
    nnpops_status st;
    char what[256];

    if (!nnpops__cfg_is_map(cfg, value)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': header entry is not a JSON object", file, t->name);
    }
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    nnpops__node *nodes[3] = {&n_dtype, &n_shape, &n_offsets};
    for (int k = 0; k < 3; k++) {
        if ((st = nnpops__cfg_get(cfg, value, keys[k], 0, nodes[k])) != NNPOPS_OK) return st;
        if (!*nodes[k]) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: tensor '%s': no '%s' in its entry",
                                file, t->name, keys[k]);
        }
    }
    snprintf(what, sizeof what, "tensor '%.200s': dtype", t->name);
    if ((st = nnpops__cfg_str(cfg, n_dtype, what, &dtype)) != NNPOPS_OK) return st;
    t->dtype = -1;
    for (int k = 0; k < ST_N_DTYPES; k++) {
        if (strcmp(dtype, st_dtypes[k].name) == 0) t->dtype = k;
    }
    if (t->dtype < 0) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'",
                            file, t->name, dtype);
    }

    /* shape and element count */
    if (!nnpops__cfg_is_seq(cfg, n_shape)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': shape is not a list of integers", file, t->name);
    }
    int64_t ndim = nnpops__cfg_len(cfg, n_shape);
    if (ndim > NNPOPS__ST_MAX_NDIM) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': %lld dimensions (at most %d are supported)", file,
                            t->name, (long long)ndim, NNPOPS__ST_MAX_NDIM);
    }
    t->ndim = (int)ndim;
    uint64_t count = 1;
    int count_overflow = 0;
    for (int d = 0; d < t->ndim; d++) {
        snprintf(what, sizeof what, "tensor '%.200s': shape[%d]", t->name, d);
        st = nnpops__cfg_int(cfg, nnpops__cfg_item(cfg, n_shape, d), what, &t->shape[d]);
        if (st != NNPOPS_OK) return st;
        if (t->shape[d] < 0) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s: tensor '%s': negative dimension %lld in shape", file, t->name,
                                (long long)t->shape[d]);
        }
        uint64_t dim = (uint64_t)t->shape[d];
        if (dim != 0 && count > (uint64_t)INT64_MAX / dim) {
            count_overflow = 1;
        } else {
            count *= dim;
        }
    }
    char shape_text[256];
    format_shape(shape_text, sizeof shape_text, t->ndim, t->shape);
    int itemsize = st_dtypes[t->dtype].itemsize;
    /* a zero dimension makes the count 0 even when other dimensions multiply past int64 */
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) count_overflow = 0, count = 0;
    }
    if (count_overflow || count > (uint64_t)INT64_MAX / (uint64_t)itemsize) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': shape %s of %s is too large (its byte count "
                            "overflows a 64-bit integer)",
                            file, t->name, shape_text, st_dtypes[t->dtype].name);
    }
    uint64_t nbytes = count * (uint64_t)itemsize;

    /* data offsets */
    if (!nnpops__cfg_is_seq(cfg, n_offsets) || nnpops__cfg_len(cfg, n_offsets) != 2) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': data_offsets must be a list [begin, end]", file,
                            t->name);
    }
    int64_t off[2];
    for (int k = 0; k < 2; k++) {
        snprintf(what, sizeof what, "tensor '%.200s': data_offsets[%d]", t->name, k);
        st = nnpops__cfg_int(cfg, nnpops__cfg_item(cfg, n_offsets, k), what, &off[k]);
        if (st != NNPOPS_OK) return st;
        if (off[k] < 0) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s: tensor '%s': negative data offset %lld", file, t->name,
                                (long long)off[k]);
        }
    }
    t->begin = (uint64_t)off[0];
    t->end = (uint64_t)off[1];
    if (t->begin > t->end) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': data_offsets [%llu, %llu] has begin > end", file,
                            t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
    }
    if (t->end > data_size) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the "
                            "data section (%llu bytes; file truncated?)",
                            file, t->name, (unsigned long long)t->begin,
                            (unsigned long long)t->end, (unsigned long long)data_size);
    }
    if (t->end - t->begin != nbytes) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but "
                            "shape %s of %s needs %llu",
                            file, t->name, (unsigned long long)t->begin,
                            (unsigned long long)t->end, (unsigned long long)(t->end - t->begin),
                            shape_text, st_dtypes[t->dtype].name, (unsigned long long)nbytes);
    }
    return NNPOPS_OK;
}

/* Parses and validates the header of w (bytes already read); fills w->t and w->n. */
static nnpops_status parse_header(nnpops__weights *w) {
    const char *file = w->path;
    uint64_t n_header = 0;
    for (int i = 7; i >= 0; i--) n_header = (n_header << 8) | w->bytes[i];
    uint64_t available = (uint64_t)w->size - 8;
    if (n_header > available) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: header length %llu runs past the end of the file (%zu bytes; "
                            "truncated or not a safetensors file)",
                            file, (unsigned long long)n_header, w->size);
    }
    if (n_header > NNPOPS__ST_MAX_HEADER) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: header length %llu exceeds the limit of 100 MiB", file,
                            (unsigned long long)n_header);
    }
    const unsigned char *header = w->bytes + 8;
    size_t first = 0;
    while (first < n_header && (header[first] == ' ' || header[first] == '\t' ||
                                header[first] == '\n' || header[first] == '\r')) {
        first++;
    }
    if (first == n_header || header[first] != '{') {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: the safetensors header is not a JSON object", file);
    }
    w->data_start = 8 + (size_t)n_header;
    uint64_t data_size = (uint64_t)(w->size - w->data_start);

    size_t name_len = strlen(file) + 32;
    char *cfg_name = malloc(name_len);
    if (!cfg_name) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory", file);
    snprintf(cfg_name, name_len, "%s (JSON header)", file);
    nnpops__cfg *cfg = NULL;
    nnpops_status st = nnpops__cfg_parse(cfg_name, header, (size_t)n_header, &cfg);
    free(cfg_name);
    if (st != NNPOPS_OK) return st;

    nnpops__node root = nnpops__cfg_root(cfg);
    if (!nnpops__cfg_is_map(cfg, root)) {
        nnpops__cfg_free(cfg);
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: the safetensors header is not a JSON object", file);
    }
    int64_t n_entries = nnpops__cfg_len(cfg, root);
    st_tensor *t = calloc(n_entries > 0 ? (size_t)n_entries : 1, sizeof *t);
    if (!t) {
        nnpops__cfg_free(cfg);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory for %lld tensors", file,
                            (long long)n_entries);
    }
    int64_t n = 0;
    for (int64_t i = 0; i < n_entries && st == NNPOPS_OK; i++) {
        nnpops__node key = nnpops__cfg_key(cfg, root, i);
        nnpops__node value = nnpops__cfg_value(cfg, root, i);
        const char *name;
        if (!nnpops__cfg_is_scalar(cfg, key)) {
            st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                              "%s: a key of the safetensors header is not a string", file);
            break;
        }
        if ((st = nnpops__cfg_str(cfg, key, "tensor name", &name)) != NNPOPS_OK) break;
        if (strcmp(name, "__metadata__") == 0) {
            if (!nnpops__cfg_is_map(cfg, value)) {
                st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                  "%s: __metadata__ of the safetensors header is not an object",
                                  file);
            }
            continue;
        }
        size_t len = strlen(name);
        if (len == 0) {
            st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: a tensor has an empty name", file);
            break;
        }
        if (!valid_utf8((const unsigned char *)name, len)) {
            st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                              "%s: tensor name number %lld is not valid UTF-8", file,
                              (long long)i);
            break;
        }
        t[n].name = malloc(len + 1);
        if (!t[n].name) {
            st = nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory", file);
            break;
        }
        memcpy(t[n].name, name, len + 1);
        n++;
        st = parse_entry(w, cfg, value, &t[n - 1], data_size);
    }
    nnpops__cfg_free(cfg);
    if (st != NNPOPS_OK) {
        free_tensors(t, n);
        return st;
    }

    /* no two tensors may share bytes (empty tensors share none) */
    qsort(t, (size_t)n, sizeof *t, compare_begin);
    int64_t last = -1; /* the non-empty tensor reaching furthest so far */
    for (int64_t i = 0; i < n; i++) {
        if (t[i].begin == t[i].end) continue;
        if (last >= 0 && t[i].begin < t[last].end) {
            st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                              "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", file,
                              t[last].name, (unsigned long long)t[last].begin,
                              (unsigned long long)t[last].end, t[i].name,
                              (unsigned long long)t[i].begin, (unsigned long long)t[i].end);
            free_tensors(t, n);
            return st;
        }
        if (last < 0 || t[i].end > t[last].end) last = i;
    }
    qsort(t, (size_t)n, sizeof *t, compare_name);
    for (int64_t i = 1; i < n; i++) {
        if (strcmp(t[i - 1].name, t[i].name) == 0) {
            st = nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: tensor '%s' appears twice", file,
                              t[i].name);
            free_tensors(t, n);
            return st;
        }
    }
    w->t = t;
    w->n = n;
    return NNPOPS_OK;
}

nnpops_status nnpops__weights_load(const char *path, const char *sha256_hex,
                                   nnpops__weights **out) {
    if (!out) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "nnpops__weights_load: out is NULL");
    }
    *out = NULL;
    if (!path) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "nnpops__weights_load: path is NULL");
    }
    if (sha256_hex && !is_hex64(sha256_hex)) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "%s: the expected sha256 '%.80s' is not 64 hexadecimal digits", path,
                            sha256_hex);
    }
    nnpops__weights *w = calloc(1, sizeof *w);
    size_t plen = strlen(path) + 1;
    char *pcopy = malloc(plen);
    if (!w || !pcopy) {
        free(w);
        free(pcopy);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    memcpy(pcopy, path, plen);
    w->path = pcopy;

    nnpops_status st = read_file(path, &w->bytes, &w->size);
    if (st == NNPOPS_OK && sha256_hex) {
        char actual[65];
        nnpops__sha256_hex(w->bytes, w->size, actual);
        int same = 1;
        for (int i = 0; i < 64; i++) {
            if (tolower((unsigned char)sha256_hex[i]) != actual[i]) same = 0;
        }
        if (!same) {
            st = nnpops__fail(NNPOPS_ERROR_CHECKSUM,
                              "%s: sha256 mismatch: the model file expects %s, the file has %s "
                              "(a different or corrupted weights file; convert the model again)",
                              path, sha256_hex, actual);
        }
    }
    if (st == NNPOPS_OK) st = parse_header(w);
    if (st != NNPOPS_OK) {
        nnpops__weights_free(w);
        return st;
    }
    *out = w;
    return NNPOPS_OK;
}

/* The tensor `name`, checked to have the given shape (errors name file and tensor). */
static nnpops_status find_tensor(const nnpops__weights *w, const char *name, int ndim,
                                 const int64_t *shape, const char *fn, const char *dtype_want,
                                 const st_tensor **out) {
    if (!w || !name || ndim < 0 || (ndim > 0 && !shape)) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "%s: invalid argument (tensor '%s')",
                            fn, name ? name : "(null)");
    }
    st_tensor key;
    memset(&key, 0, sizeof key);
    key.name = (char *)name;
    const st_tensor *t = bsearch(&key, w->t, (size_t)w->n, sizeof *w->t, compare_name);
    if (!t) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s: tensor '%s' not found", w->path, name);
    }
    char want[256], have[256];
    format_shape(want, sizeof want, ndim, shape);
    format_shape(have, sizeof have, t->ndim, t->shape);
    const char *dt = st_dtypes[t->dtype].name;
    if (dtype_want ? strcmp(dt, dtype_want) != 0 : (strcmp(dt, "F32") && strcmp(dt, "F64"))) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s' has dtype %s, expected %s (shape %s)", w->path, name,
                            dt, dtype_want ? dtype_want : "F32 or F64", want);
    }
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: tensor '%s' has shape %s, expected %s", w->path, name, have,
                            want);
    }
    *out = t;
    return NNPOPS_OK;
}

nnpops_status nnpops__weights_get_f32(const nnpops__weights *w, const char *name, int ndim,
                                      const int64_t *shape, const void **data) {
    if (!data) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops__weights_get_f32: invalid argument (tensor '%s')",
                            name ? name : "(null)");
    }
    *data = NULL;
    const st_tensor *t;
    nnpops_status st = find_tensor(w, name, ndim, shape, "nnpops__weights_get_f32", "F32", &t);
    if (st != NNPOPS_OK) return st;
    *data = w->bytes + w->data_start + t->begin;
    return NNPOPS_OK;
}

nnpops_status nnpops__weights_read(const nnpops__weights *w, const char *name, int ndim,
                                   const int64_t *shape, double *out) {
    const st_tensor *t;
    nnpops_status st = find_tensor(w, name, ndim, shape, "nnpops__weights_read", NULL, &t);
    if (st != NNPOPS_OK) return st;
    if (!out) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops__weights_read: invalid argument (tensor '%s')", name);
    }
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) count *= shape[d];
    const unsigned char *src = w->bytes + w->data_start + t->begin;
    const int f64 = strcmp(st_dtypes[t->dtype].name, "F64") == 0;
    for (int64_t k = 0; k < count; k++) {
        if (f64) {
            memcpy(&out[k], src + 8 * k, 8);
        } else {
            float v;
            memcpy(&v, src + 4 * k, 4);
            out[k] = v;
        }
    }
    return NNPOPS_OK;
}
