/*
 * fuzz_safetensors.c - fuzz target of the safetensors reader (core/src/safetensors.c) and of the
 * ANI loader's use of it (potentials/ani: tensor lookups, shapes, dtypes, finite values).
 *
 * One input = the bytes of a weights file.  It is written as w.safetensors into the process's
 * temporary directory, then
 *  1. loaded with nnpops__weights_load without a checksum; on success the count is read and the
 *     tensors of the tiny ANI model (and a few other names) are looked up with
 *     nnpops__weights_get_f32 under their true shapes and a wrong one;
 *  2. loaded again with its true sha256, which must give the same status (the checksum passes),
 *     and once with a wrong sha256, which must give NNPOPS_ERROR_CHECKSUM;
 *  3. named, with its true sha256, by the tiny ANI model file (fuzz_common.h) and loaded with
 *     nnpops_model_load, so that the ANI loader reads hostile weights; a model that loads is
 *     exercised with one small step.
 * Invariants as in fuzz_yaml.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "fuzz_common.h"
#include "internal.h"

typedef struct lookup {
    const char *name;
    int ndim;
    int64_t shape[2];
} lookup;

static const lookup lookups[] = {
    {"m0.H.l0.weight", 2, {3, 10}}, {"m0.H.l0.bias", 1, {3, 0}},  {"m1.C.l1.weight", 2, {1, 2}},
    {"m1.C.l1.bias", 1, {1, 0}},    {"a", 1, {4, 0}},             {"a", 2, {2, 2}},
    {"f32", 2, {2, 2}},             {"", 0, {0, 0}},              {"__metadata__", 0, {0, 0}},
};

static volatile unsigned fuzz_sink;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    (void)fuzz_tmpdir();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path(0, "w.safetensors");
    fuzz_write(path, data, size);

    /* 1. without a checksum */
    nnpops__weights *w = NULL;
    nnpops_status st = nnpops__weights_load(path, NULL, &w);
    fuzz_check_failure("nnpops__weights_load", st, st == NNPOPS_OK ? NULL : w);
    if (st == NNPOPS_OK) {
        if (!w) FUZZ_FAIL("weights_load succeeded without weights");
        if (nnpops__weights_count(w) < 0) FUZZ_FAIL("negative tensor count");
        for (size_t k = 0; k < sizeof lookups / sizeof lookups[0]; k++) {
            const void *p = NULL;
            nnpops_status s2 = nnpops__weights_get_f32(w, lookups[k].name, lookups[k].ndim,
                                                       lookups[k].shape, &p);
            fuzz_check_failure("nnpops__weights_get_f32", s2, s2 == NNPOPS_OK ? NULL : p);
            if (s2 == NNPOPS_OK) {
                /* the tensor's bytes lie inside the file: read them all */
                int64_t count = 1;
                for (int d = 0; d < lookups[k].ndim; d++) count *= lookups[k].shape[d];
                const unsigned char *b = p;
                unsigned sum = 0;
                for (int64_t i = 0; i < 4 * count; i++) sum += b[i];
                fuzz_sink += sum;
            }
        }
        nnpops__weights_free(w);
    }

    /* 2. with the true and a wrong checksum */
    char sha[65], wrong[65];
    nnpops__sha256_hex(data, size, sha);
    memcpy(wrong, sha, sizeof wrong);
    wrong[0] = wrong[0] == '0' ? '1' : '0';
    nnpops__weights *w2 = NULL;
    nnpops_status st2 = nnpops__weights_load(path, sha, &w2);
    fuzz_check_failure("nnpops__weights_load(sha)", st2, st2 == NNPOPS_OK ? NULL : w2);
    if (st2 != st)
        FUZZ_FAIL("status %s with the true sha256, %s without", nnpops_status_name(st2),
                  nnpops_status_name(st));
    nnpops__weights_free(w2);
    w2 = NULL;
    if (size >= 8) {
        st2 = nnpops__weights_load(path, wrong, &w2);
        if (st2 != NNPOPS_ERROR_CHECKSUM)
            FUZZ_FAIL("a wrong sha256 gave %s", nnpops_status_name(st2));
        fuzz_check_failure("nnpops__weights_load(wrong sha)", st2, w2);
    }

    /* 3. through the ANI loader */
    char yaml[4096];
    int n = snprintf(yaml, sizeof yaml, FUZZ_TINY_ANI_YAML, "w.safetensors", sha);
    if (n < 0 || (size_t)n >= sizeof yaml) FUZZ_FAIL("model text too long");
    const char *ypath = fuzz_path(1, "model.yaml");
    fuzz_write(ypath, yaml, (size_t)n);
    nnpops_model *m = NULL;
    const nnpops_precision prec = (size & 1) ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64;
    nnpops_status st3 = nnpops_model_load(ypath, "cpu", prec, &m);
    fuzz_check_failure("nnpops_model_load", st3, st3 == NNPOPS_OK ? NULL : m);
    if (st3 == NNPOPS_OK) {
        if (st != NNPOPS_OK) FUZZ_FAIL("a model loaded weights that nnpops__weights_load rejects");
        fuzz_exercise_model(m);
        nnpops_model_destroy(m);
    }
    return 0;
}
