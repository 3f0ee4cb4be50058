/*
 * replay_main.c - runs a fuzz target (fuzz_yaml.c, fuzz_safetensors.c) over files, without
 * libFuzzer: the seed corpus and the regression inputs of tests/fuzz/regressions/ become an
 * ordinary test, built with the project's compiler (and, in .ci/sanitize.sh, under ASan+UBSan).
 *
 * Usage: fuzz_replay_X PATH...   (a PATH is a file or a directory, whose regular files are run in
 * name order; hidden files and README* are skipped).  A broken invariant or a sanitizer report
 * aborts; otherwise the program prints how many inputs it ran and exits 0.  A PATH that does not
 * exist is an error (exit 2), so a missing corpus cannot pass silently.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 0;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        unsigned char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
        }
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        exit(2);
    }
    /* an exact-size copy, so that ASan catches a read one past the end of the input */
    unsigned char *exact = malloc(n ? n : 1);
    if (!exact) exit(2);
    if (n) memcpy(exact, buf, n);
    free(buf);
    if (getenv("NNPOPS_REPLAY_VERBOSE")) fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    long count = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            fprintf(stderr, "replay: %s does not exist\n", argv[a]);
            return 2;
        }
        if (!S_ISDIR(sb.st_mode)) {
            count += run_file(argv[a]);
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "replay: cannot open directory %s\n", argv[a]);
            return 2;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.' || strncmp(e->d_name, "README", 6) == 0) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                char **grown = realloc(names, cap * sizeof *names);
                if (!grown) return 2;
                names = grown;
            }
            size_t len = strlen(argv[a]) + strlen(e->d_name) + 2;
            names[n] = malloc(len);
            if (!names[n]) return 2;
            snprintf(names[n], len, "%s/%s", argv[a], e->d_name);
            n++;
        }
        closedir(d);
        if (n > 1) qsort(names, n, sizeof *names, by_name);
        for (size_t i = 0; i < n; i++) {
            if (stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) count += run_file(names[i]);
            free(names[i]);
        }
        free(names);
    }
    printf("replay: %ld inputs ran without a failure\n", count);
    return 0;
}
