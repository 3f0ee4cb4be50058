/*
 * fuzz_common.h - shared pieces of the fuzz targets (fuzz_yaml.c, fuzz_safetensors.c) and of the
 * tests that use the same tiny ANI model (test_hostile.c).
 *
 * Every target is a libFuzzer entry point (LLVMFuzzerInitialize + LLVMFuzzerTestOneInput).  Built
 * with `clang -fsanitize=fuzzer,address,undefined` it fuzzes; built with any compiler together
 * with replay_main.c it replays files (the seed corpus and tests/fuzz/regressions/) as an
 * ordinary test.  A broken invariant calls FUZZ_FAIL, which prints and aborts, so that libFuzzer
 * records the input as a crash.
 *
 * Files: each process writes its inputs into a private temporary directory (made once, removed
 * at exit) under $NNPOPS_FUZZ_TMPDIR, else /dev/shm when writable, else $TMPDIR, else /tmp.  The YAML target needs the fixed weights file of the tiny ANI model: the path comes
 * from the environment variable NNPOPS_FUZZ_WEIGHTS (tests/fuzz/gen_corpus.py writes it as
 * OUTDIR/tiny.safetensors) and it is copied into the temporary directory as tiny.safetensors.
 */
#ifndef NNPOPS_FUZZ_COMMON_H
#define NNPOPS_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nnpops/nnpops.h"

#define FUZZ_FAIL(...)                                                                     \
    do {                                                                                   \
        fprintf(stderr, "fuzz invariant broken at %s:%d: ", __FILE__, __LINE__);           \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                             \
        abort();                                                                           \
    } while (0)

/* The tiny ANI model of gen_corpus.py (ani_yaml()); %s: weights file name, then its sha256. */
#define FUZZ_TINY_ANI_YAML                                                                 \
    "format: nnpops-model\n"                                                               \
    "format_version: 1\n"                                                                  \
    "name: tiny-ani\n"                                                                     \
    "type: ani\n"                                                                          \
    "description: \"fuzz seed: two species, two members\"\n"                               \
    "units: {length: angstrom, energy: hartree}\n"                                         \
    "species: [H, C]\n"                                                                    \
    "weights:\n"                                                                           \
    "  file: %s\n"                                                                         \
    "  sha256: \"%s\"\n"                                                                   \
    "ani:\n"                                                                               \
    "  radial:\n"                                                                          \
    "    cutoff: 4.0\n"                                                                    \
    "    eta: [16.0]\n"                                                                    \
    "    shifts: [0.9, 1.7]\n"                                                             \
    "  angular:\n"                                                                         \
    "    cutoff: 3.5\n"                                                                    \
    "    eta: [8.0]\n"                                                                     \
    "    zeta: [32.0]\n"                                                                   \
    "    shifts: [0.9]\n"                                                                  \
    "    sections: [0.2, 1.2]\n"                                                           \
    "  self_energies: [-0.5, -38.0]\n"                                                     \
    "  ensemble_size: 2\n"                                                                 \
    "  activation: {type: celu, alpha: 0.1}\n"                                             \
    "  networks:\n"                                                                        \
    "    H: [10, 3, 1]\n"                                                                  \
    "    C: [10, 2, 1]\n"                                                                  \
    "  tensors: \"m{member}.{element}.l{layer}.{kind}\"\n"

static char fuzz_dir[512];

static inline void fuzz_cleanup(void) {
    static const char *const names[] = {"model.yaml", "w.safetensors", "tiny.safetensors", NULL};
    char path[640];
    for (int i = 0; names[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", fuzz_dir, names[i]);
        unlink(path);
    }
    rmdir(fuzz_dir);
}

/* Makes the private temporary directory (once). */
static inline const char *fuzz_tmpdir(void) {
    if (!fuzz_dir[0]) {
        /* a RAM file system when there is one: rewriting a file per input on ext4 (whose
         * auto_da_alloc flushes a truncated-and-rewritten file on close) costs 4x the speed */
        const char *base = getenv("NNPOPS_FUZZ_TMPDIR");
        if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        if (!base || !*base) base = "/tmp";
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/nnpops-fuzz-XXXXXX", base);
        if (!mkdtemp(fuzz_dir)) FUZZ_FAIL("cannot make a temporary directory %s", fuzz_dir);
        atexit(fuzz_cleanup);
    }
    return fuzz_dir;
}

/* dir/name, in a static buffer per slot (0..3). */
static inline const char *fuzz_path(int slot, const char *name) {
    static char buf[4][640];
    snprintf(buf[slot], sizeof buf[slot], "%s/%s", fuzz_tmpdir(), name);
    return buf[slot];
}

static inline void fuzz_write(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) FUZZ_FAIL("cannot write %s", path);
    if (size && fwrite(data, 1, size, f) != size) FUZZ_FAIL("short write to %s", path);
    if (fclose(f) != 0) FUZZ_FAIL("cannot close %s", path);
}

/* Reads a whole file (NULL when it cannot be read); *size receives its length. */
static inline unsigned char *fuzz_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        unsigned char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    *size = n;
    return buf;
}

/* The status contract of every failing call: a known status, a message, the out-pointer NULL. */
static inline void fuzz_check_failure(const char *call, nnpops_status st, const void *out) {
    if ((int)st < 0 || (int)st > (int)NNPOPS_ERROR_INTERNAL) FUZZ_FAIL("%s: status %d", call, st);
    if (st == NNPOPS_OK) return;
    if (st == NNPOPS_ERROR_INTERNAL)
        FUZZ_FAIL("%s returned NNPOPS_ERROR_INTERNAL: %s", call, nnpops_last_error());
    const char *msg = nnpops_last_error();
    if (!msg || !msg[0]) FUZZ_FAIL("%s failed with %s and no message", call, nnpops_status_name(st));
    if (out) FUZZ_FAIL("%s failed with %s but set its out-pointer", call, nnpops_status_name(st));
}

/* Exercises a model that loaded: accessors, and one small step, non-periodic then periodic.  The
 * step may fail (an LJ model with a cutoff far larger than the cell needs too many images), but
 * only with a known status and a message. */
static inline void fuzz_exercise_model(nnpops_model *m) {
    const int32_t ns = nnpops_model_num_species(m);
    if (ns < 1 || ns > 118) FUZZ_FAIL("num_species %d", (int)ns);
    if (nnpops_model_species(m, ns) != -1) FUZZ_FAIL("species(n_species) is not -1");
    const int32_t ens = nnpops_model_ensemble_size(m);
    if (ens < 1) FUZZ_FAIL("ensemble size %d", (int)ens);
    const double cutoff = nnpops_model_cutoff(m);
    if (!(cutoff > 0.0)) FUZZ_FAIL("cutoff %g", cutoff);
    (void)nnpops_model_name(m);
    (void)nnpops_model_type(m);
    (void)nnpops_model_path(m);
    (void)nnpops_model_device(m);

    nnpops_context *ctx = NULL;
    nnpops_status st = nnpops_context_create(m, &ctx);
    fuzz_check_failure("nnpops_context_create", st, st == NNPOPS_OK ? NULL : ctx);
    if (st != NNPOPS_OK) return;
    /* a small step: a model whose cutoff spans hundreds of cell images (the text may say
     * "cutoff: 490") would otherwise build millions of pairs; past 512 per atom the step stops
     * with NEIGHBOR_OVERFLOW after the count, which is the path exercised then */
    st = nnpops_context_set_option_by_name(ctx, "max_neighbors", "512");
    if (st != NNPOPS_OK) FUZZ_FAIL("max_neighbors 512: %s", nnpops_last_error());
    enum { N = 5 };
    int32_t z[N];
    for (int i = 0; i < N; i++) z[i] = nnpops_model_species(m, i % ns);
    const double x[N * 3] = {0.0, 0.0, 0.0, 1.1, 0.0, 0.0, 0.0, 1.2, 0.2,
                             -0.9, -0.4, 0.8, 0.3, -1.0, -0.7};
    const double cell[9] = {7.0, 0.0, 0.0, 0.5, 7.5, 0.0, -0.3, 0.2, 8.0};
    const uint8_t pbc[3] = {1, 1, 1};
    double e[1], f[N * 3], w[9], *me = calloc((size_t)ens, sizeof(double));
    if (!me) FUZZ_FAIL("out of memory");
    for (int periodic = 0; periodic < 2; periodic++) {
        nnpops_inputs in = {sizeof in, N, -1, 1, z, x, NULL, periodic ? cell : NULL,
                            periodic ? pbc : NULL};
        nnpops_outputs out = {sizeof out, e, f, w, NULL, NULL, me};
        st = nnpops_compute(ctx, &in, &out);
        fuzz_check_failure("nnpops_compute", st, NULL);
    }
    free(me);
    nnpops_context_destroy(ctx);
}

#endif
