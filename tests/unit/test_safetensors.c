/*
 * test_safetensors.c - the safetensors reader of core/src/safetensors.c: a valid file and every
 * rejection (truncation, header length past the end, offsets past the end, overlapping tensors,
 * byte counts that overflow int64, unknown and wrong dtypes, wrong shapes, missing tensors,
 * non-UTF-8 and duplicate names, sha256 mismatch), plus a header with thousands of tensors.
 *
 * Usage: test_safetensors CASE, with CASE one of the names in the table at the end.  Files are
 * written by hand (8-byte little-endian header length, JSON header, data) into a fresh temporary
 * directory that is removed at exit.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tmpfiles.h"
#include "internal.h"

/* A safetensors file: header length `n_header` (UINT64_MAX = the true length), header, data. */
static const char *write_st_len(const char *name, uint64_t n_header, const char *header,
                                const void *data, size_t data_len) {
    size_t hlen = strlen(header);
    size_t total = 8 + hlen + data_len;
    unsigned char *buf = malloc(total);
    CHECK(buf != NULL);
    uint64_t n = n_header == UINT64_MAX ? (uint64_t)hlen : n_header;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, header, hlen);
    if (data_len) memcpy(buf + 8 + hlen, data, data_len);
    const char *path = test_write_bytes(name, buf, total);
    free(buf);
    return path;
}

static const char *write_st(const char *name, const char *header, const void *data,
                            size_t data_len) {
    return write_st_len(name, UINT64_MAX, header, data, data_len);
}

static void file_sha256(const char *path, char out[65]) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0 && fseek(f, 0, SEEK_SET) == 0);
    unsigned char *buf = malloc((size_t)n + 1);
    CHECK(buf != NULL);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    nnpops__sha256_hex(buf, (size_t)n, out);
    free(buf);
}

static void expect_load_error(const char *path, nnpops_status status, const char *needle) {
    nnpops__weights *w = (nnpops__weights *)1;
    CHECK_STATUS(nnpops__weights_load(path, NULL, &w), status);
    CHECK(w == NULL);
    CHECK_ERROR_HAS(path);
    CHECK_ERROR_HAS(needle);
}

/* ---- a valid file ---------------------------------------------------------------------------- */

#define VALID_HEADER                                                                     \
    "{\"__metadata__\":{\"format\":\"nnpops\",\"model\":\"tiny\"},"                      \
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"                \
    "\"b\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[24,32]},"                  \
    "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[32,32]},"            \
    "\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[32,40]}}    "

static const char *write_valid(const char *name) {
    unsigned char data[40];
    float a[6] = {0.5f, -1.0f, 2.25f, 3.0f, -4.5f, 1e-3f};
    double b = 7.5;
    int64_t c = -3;
    memcpy(data, a, 24); /* the tests run on little-endian hosts, as the format is */
    memcpy(data + 24, &b, 8);
    memcpy(data + 32, &c, 8);
    return write_st(name, VALID_HEADER, data, sizeof data);
}

static int case_valid(void) {
    const char *path = write_valid("valid.safetensors");
    nnpops__weights *w = NULL;
    CHECK_OK(nnpops__weights_load(path, NULL, &w));
    CHECK(nnpops__weights_count(w) == 4);
    const void *data = NULL;
    int64_t shape[2] = {2, 3};
    CHECK_OK(nnpops__weights_get_f32(w, "a", 2, shape, &data));
    float a[6];
    memcpy(a, data, sizeof a);
    CHECK(a[0] == 0.5f && a[1] == -1.0f && a[2] == 2.25f && a[5] == 1e-3f);
    int64_t empty_shape[2] = {0, 5};
    CHECK_OK(nnpops__weights_get_f32(w, "empty", 2, empty_shape, &data));
    nnpops__weights_free(w);

    /* with its checksum, lower or upper case */
    char sha[65];
    file_sha256(path, sha);
    CHECK_OK(nnpops__weights_load(path, sha, &w));
    nnpops__weights_free(w);
    for (int i = 0; i < 64; i++) {
        if (sha[i] >= 'a' && sha[i] <= 'f') sha[i] = (char)(sha[i] - 'a' + 'A');
    }
    CHECK_OK(nnpops__weights_load(path, sha, &w));
    nnpops__weights_free(w);
    nnpops__weights_free(NULL);
    CHECK(nnpops__weights_count(NULL) == 0);
    return 0;
}

static int case_wrong_dtype(void) {
    nnpops__weights *w = NULL;
    CHECK_OK(nnpops__weights_load(write_valid("dtype.safetensors"), NULL, &w));
    const void *data = (const void *)1;
    CHECK_STATUS(nnpops__weights_get_f32(w, "b", 0, NULL, &data), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK(data == NULL);
    CHECK_ERROR_HAS("dtype.safetensors: tensor 'b' has dtype F64, expected F32");
    int64_t one = 1;
    CHECK_STATUS(nnpops__weights_get_f32(w, "c", 1, &one, &data), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("tensor 'c' has dtype I64");
    nnpops__weights_free(w);
    return 0;
}

static int case_wrong_shape(void) {
    nnpops__weights *w = NULL;
    CHECK_OK(nnpops__weights_load(write_valid("shape.safetensors"), NULL, &w));
    const void *data;
    int64_t t[2] = {3, 2};
    CHECK_STATUS(nnpops__weights_get_f32(w, "a", 2, t, &data), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("shape.safetensors: tensor 'a' has shape [2, 3], expected [3, 2]");
    int64_t flat[1] = {6};
    CHECK_STATUS(nnpops__weights_get_f32(w, "a", 1, flat, &data), NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("has shape [2, 3], expected [6]");
    nnpops__weights_free(w);
    return 0;
}

static int case_missing_tensor(void) {
    nnpops__weights *w = NULL;
    const char *path = write_valid("missing.safetensors");
    CHECK_OK(nnpops__weights_load(path, NULL, &w));
    const void *data;
    int64_t shape[2] = {3, 4};
    CHECK_STATUS(nnpops__weights_get_f32(w, "m0.H.l0.weight", 2, shape, &data),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS(path);
    CHECK_ERROR_HAS(": tensor 'm0.H.l0.weight' not found");
    CHECK_STATUS(nnpops__weights_get_f32(w, "__metadata__", 0, NULL, &data),
                 NNPOPS_ERROR_MODEL_FORMAT);
    CHECK_ERROR_HAS("not found");
    nnpops__weights_free(w);
    return 0;
}

/* ---- rejected files -------------------------------------------------------------------------- */

static int case_truncated(void) {
    expect_load_error(test_write_bytes("five.safetensors", "\x02\0\0\0\0", 5), NNPOPS_ERROR_MODEL_FORMAT,
                      "truncated safetensors file (5 bytes");
    expect_load_error(test_write_bytes("zero.safetensors", "", 0), NNPOPS_ERROR_MODEL_FORMAT,
                      "truncated");
    /* a valid file cut in the middle of its data */
    const char *path = write_valid("cut_src.safetensors");
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    unsigned char buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(n > 20);
    expect_load_error(test_write_bytes("cut.safetensors", buf, n - 10), NNPOPS_ERROR_MODEL_FORMAT,
                      "run past the end of the data section");
    /* cut in the middle of its header */
    expect_load_error(test_write_bytes("cut_header.safetensors", buf, 40), NNPOPS_ERROR_MODEL_FORMAT,
                      "runs past the end of the file");
    /* no such file */
    expect_load_error(test_tmp_path("absent.safetensors"), NNPOPS_ERROR_IO, "No such file");
    return 0;
}

static int case_header_past_end(void) {
    expect_load_error(write_st_len("past.safetensors", 1000, "{}", NULL, 0),
                      NNPOPS_ERROR_MODEL_FORMAT,
                      "header length 1000 runs past the end of the file (10 bytes");
    expect_load_error(write_st_len("huge.safetensors", UINT64_MAX - 3, "{}", NULL, 0),
                      NNPOPS_ERROR_MODEL_FORMAT, "runs past the end of the file");
    return 0;
}

static int case_header_too_large(void) {
    /* a sparse file whose header length (just over 100 MiB) fits inside it */
    const char *path = test_tmp_path("bigheader.safetensors");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    uint64_t n = (uint64_t)100 * 1024 * 1024 + 1;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    CHECK(fwrite(len, 1, 8, f) == 8);
    CHECK(fputc('{', f) != EOF);
    CHECK(fseek(f, (long)(8 + n - 1), SEEK_SET) == 0);
    CHECK(fputc('}', f) != EOF);
    CHECK(fclose(f) == 0);
    expect_load_error(path, NNPOPS_ERROR_MODEL_FORMAT, "exceeds the limit of 100 MiB");
    return 0;
}

static int case_not_json(void) {
    expect_load_error(write_st("text.safetensors", "hello: world", NULL, 0),
                      NNPOPS_ERROR_MODEL_FORMAT, "header is not a JSON object");
    expect_load_error(write_st("list.safetensors", "  [1, 2]", NULL, 0),
                      NNPOPS_ERROR_MODEL_FORMAT, "header is not a JSON object");
    expect_load_error(write_st("blank.safetensors", "    ", NULL, 0), NNPOPS_ERROR_MODEL_FORMAT,
                      "header is not a JSON object");
    expect_load_error(write_st("broken.safetensors", "{\"a\":{\"dtype\":\"F32\",", NULL, 0),
                      NNPOPS_ERROR_MODEL_FORMAT, "(JSON header):2:1: YAML syntax error");
    expect_load_error(write_st("entry.safetensors", "{\"a\": 5}", NULL, 0),
                      NNPOPS_ERROR_MODEL_FORMAT, "tensor 'a': header entry is not a JSON object");
    expect_load_error(write_st("nokey.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}",
                               NULL, 0),
                      NNPOPS_ERROR_MODEL_FORMAT, "tensor 'a': no 'data_offsets' in its entry");
    return 0;
}

static int case_offsets_past_end(void) {
    float data[4] = {0};
    expect_load_error(
        write_st("offsets.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}", data, 16),
        NNPOPS_ERROR_MODEL_FORMAT,
        "tensor 'a': data_offsets [0, 24] run past the end of the data section (16 bytes");
    expect_load_error(
        write_st("order.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", data, 16),
        NNPOPS_ERROR_MODEL_FORMAT, "tensor 'a': data_offsets [8, 4] has begin > end");
    expect_load_error(
        write_st("count.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", data, 16),
        NNPOPS_ERROR_MODEL_FORMAT,
        "tensor 'a': data_offsets [0, 12] hold 12 bytes, but shape [2, 2] of F32 needs 16");
    expect_load_error(
        write_st("negative.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", data, 16),
        NNPOPS_ERROR_MODEL_FORMAT, "negative data offset");
    expect_load_error(
        write_st("three.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", data, 16),
        NNPOPS_ERROR_MODEL_FORMAT, "data_offsets must be a list [begin, end]");
    return 0;
}

static int case_overlap(void) {
    float data[8] = {0};
    expect_load_error(
        write_st("overlap.safetensors",
                 "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                 data, 32),
        NNPOPS_ERROR_MODEL_FORMAT, "tensors 'a' [0, 16] and 'b' [8, 16] overlap");
    /* one tensor inside a longer one that starts earlier */
    expect_load_error(
        write_st("inside.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                 "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[20,24]}}",
                 data, 32),
        NNPOPS_ERROR_MODEL_FORMAT, "overlap");
    /* adjacent tensors and empty ones at the same offset are fine */
    nnpops__weights *w = NULL;
    CHECK_OK(nnpops__weights_load(
        write_st("adjacent.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                 "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                 "\"f\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[8,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}",
                 data, 32),
        NULL, &w));
    CHECK(nnpops__weights_count(w) == 4);
    nnpops__weights_free(w);
    return 0;
}

static int case_overflow(void) {
    float data[1] = {0};
    /* 2^60 * 2 elements of 4 bytes: the element count fits in int64, the byte count does not */
    expect_load_error(
        write_st("bytes.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1152921504606846976,2],"
                 "\"data_offsets\":[0,4]}}",
                 data, 4),
        NNPOPS_ERROR_MODEL_FORMAT,
        "tensor 'a': shape [1152921504606846976, 2] of F32 is too large (its byte count "
        "overflows");
    /* the element count itself overflows */
    expect_load_error(
        write_st("count.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4],"
                 "\"data_offsets\":[0,4]}}",
                 data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "overflows");
    /* a dimension beyond int64 */
    expect_load_error(write_st("dim.safetensors",
                               "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
                               "\"data_offsets\":[0,4]}}",
                               data, 4),
                      NNPOPS_ERROR_MODEL_FORMAT, "out of the range of a 64-bit integer");
    /* a zero dimension makes any product empty */
    nnpops__weights *w = NULL;
    CHECK_OK(nnpops__weights_load(
        write_st("zero.safetensors",
                 "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,0],"
                 "\"data_offsets\":[0,0]}}",
                 data, 4),
        NULL, &w));
    nnpops__weights_free(w);
    expect_load_error(
        write_st("neg.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "negative dimension -1");
    expect_load_error(
        write_st("ndim.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
                 data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "9 dimensions (at most 8");
    expect_load_error(
        write_st("frac.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "tensor 'a': shape[0]: expected an integer");
    return 0;
}

static int case_unknown_dtype(void) {
    float data[1] = {0};
    expect_load_error(
        write_st("dtype.safetensors",
                 "{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "tensor 'a': unknown dtype 'Q7'");
    expect_load_error(
        write_st("lower.safetensors",
                 "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "unknown dtype 'f32'");
    return 0;
}

static int case_non_utf8_name(void) {
    float data[1] = {0};
    /* a raw 0xff byte inside the name */
    expect_load_error(
        write_st("utf8.safetensors",
                 "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "UTF-8");
    /* a truncated multi-byte sequence */
    expect_load_error(
        write_st("utf8b.safetensors",
                 "{\"a\xc3\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4),
        NNPOPS_ERROR_MODEL_FORMAT, "UTF-8");
    /* an escaped lone surrogate */
    expect_load_error(
        write_st("surrogate.safetensors",
                 "{\"a\\udc00\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data,
                 4),
        NNPOPS_ERROR_MODEL_FORMAT, "(JSON header)");
    /* an escaped NUL */
    expect_load_error(
        write_st("nul.safetensors",
                 "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data,
                 4),
        NNPOPS_ERROR_MODEL_FORMAT, "NUL");
    /* valid non-ASCII names are fine */
    nnpops__weights *w = NULL;
    CHECK_OK(nnpops__weights_load(
        write_st("ok.safetensors",
                 "{\"\xc3\xa9t\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                 data, 4),
        NULL, &w));
    int64_t one = 1;
    const void *p;
    CHECK_OK(nnpops__weights_get_f32(w, "\xc3\xa9t\xc3\xa9", 1, &one, &p));
    nnpops__weights_free(w);
    return 0;
}

static int case_duplicate_name(void) {
    float data[2] = {0};
    expect_load_error(
        write_st("dup.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 data, 8),
        NNPOPS_ERROR_MODEL_FORMAT, "duplicate key 'a'");
    expect_load_error(
        write_st("emptyname.safetensors",
                 "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 8),
        NNPOPS_ERROR_MODEL_FORMAT, "empty name");
    return 0;
}

static int case_sha256_mismatch(void) {
    const char *path = write_valid("sum.safetensors");
    char sha[65];
    file_sha256(path, sha);
    char wrong[65];
    memcpy(wrong, sha, sizeof wrong);
    wrong[10] = wrong[10] == '0' ? '1' : '0';
    nnpops__weights *w = (nnpops__weights *)1;
    CHECK_STATUS(nnpops__weights_load(path, wrong, &w), NNPOPS_ERROR_CHECKSUM);
    CHECK(w == NULL);
    CHECK_ERROR_HAS(path);
    CHECK_ERROR_HAS(wrong);
    CHECK_ERROR_HAS(sha);
    CHECK_ERROR_HAS("sha256 mismatch");
    CHECK_STATUS(nnpops__weights_load(path, "abc", &w), NNPOPS_ERROR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("not 64 hexadecimal digits");
    return 0;
}

static int case_many_tensors(void) {
    int n = 5000;
    size_t cap = (size_t)n * 100 + 64;
    char *header = malloc(cap);
    float *data = malloc(sizeof(float) * 2 * (size_t)n);
    CHECK(header && data);
    size_t o = 0;
    header[o++] = '{';
    for (int i = 0; i < n; i++) {
        /* in reverse order of offsets, so sorting matters */
        int k = n - 1 - i;
        o += (size_t)snprintf(header + o, cap - o,
                              "%s\"m%d.H.l%d.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],"
                              "\"data_offsets\":[%d,%d]}",
                              i ? "," : "", k / 10, k % 10, 8 * k, 8 * k + 8);
        data[2 * k] = (float)k;
        data[2 * k + 1] = -(float)k;
    }
    header[o++] = '}';
    header[o] = '\0';
    nnpops__weights *w = NULL;
    CHECK_OK(nnpops__weights_load(write_st("many.safetensors", header, data, 8 * (size_t)n),
                                  NULL, &w));
    CHECK(nnpops__weights_count(w) == n);
    int64_t shape[2] = {1, 2};
    for (int k = 0; k < n; k += 7) {
        char name[64];
        snprintf(name, sizeof name, "m%d.H.l%d.weight", k / 10, k % 10);
        const void *p;
        CHECK_OK(nnpops__weights_get_f32(w, name, 2, shape, &p));
        float v[2];
        memcpy(v, p, sizeof v);
        CHECK(v[0] == (float)k && v[1] == -(float)k);
    }
    nnpops__weights_free(w);
    free(header);
    free(data);
    return 0;
}

static const test_case cases[] = {
    {"valid", case_valid},
    {"wrong_dtype", case_wrong_dtype},
    {"wrong_shape", case_wrong_shape},
    {"missing_tensor", case_missing_tensor},
    {"truncated", case_truncated},
    {"header_past_end", case_header_past_end},
    {"header_too_large", case_header_too_large},
    {"not_json", case_not_json},
    {"offsets_past_end", case_offsets_past_end},
    {"overlap", case_overlap},
    {"overflow", case_overflow},
    {"unknown_dtype", case_unknown_dtype},
    {"non_utf8_name", case_non_utf8_name},
    {"duplicate_name", case_duplicate_name},
    {"sha256_mismatch", case_sha256_mismatch},
    {"many_tensors", case_many_tensors},
};

int main(int argc, char **argv) {
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
