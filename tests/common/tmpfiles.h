/* tmpfiles.h - a fresh temporary directory per test process (removed at exit, with every file the
 * test made in it through these helpers), and small writers.  Include in one source per program. */
#ifndef NNPOPS_TEST_TMPFILES_H
#define NNPOPS_TEST_TMPFILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"

#define TEST_TMP_MAX 256

static char test_tmp_root[512];
static char test_tmp_created[TEST_TMP_MAX][1024];
static int test_tmp_count;

static void test_tmp_cleanup(void) {
    for (int i = test_tmp_count - 1; i >= 0; i--) remove(test_tmp_created[i]);
}

/* Path of `name` inside the test's temporary directory (made on first use). */
static const char *test_tmp_path(const char *name) {
    if (!test_tmp_root[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(test_tmp_root, sizeof test_tmp_root, "%s/nnpops-unit-XXXXXX",
                 base && *base ? base : "/tmp");
        CHECK(mkdtemp(test_tmp_root) != NULL);
        snprintf(test_tmp_created[test_tmp_count++], sizeof test_tmp_created[0], "%s",
                 test_tmp_root);
        atexit(test_tmp_cleanup);
    }
    CHECK(test_tmp_count < TEST_TMP_MAX);
    snprintf(test_tmp_created[test_tmp_count], sizeof test_tmp_created[0], "%s/%s", test_tmp_root,
             name);
    return test_tmp_created[test_tmp_count++];
}

static const char *test_make_dir(const char *name) {
    const char *path = test_tmp_path(name);
    CHECK(mkdir(path, 0700) == 0);
    return path;
}

static const char *test_write_bytes(const char *name, const void *bytes, size_t len) {
    const char *path = test_tmp_path(name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(len == 0 || fwrite(bytes, 1, len, f) == len);
    CHECK(fclose(f) == 0);
    return path;
}

static const char *test_write_text(const char *name, const char *text) {
    return test_write_bytes(name, text, strlen(text));
}

#endif
