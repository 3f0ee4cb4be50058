/*
 * test_sha256.c - nnpops__sha256_hex against the FIPS 180-4 / NIST example vectors ("", "abc",
 * the 448-bit and 896-bit messages, one million 'a'), plus messages whose lengths sit on the
 * padding boundaries (55, 56, 63, 64, 65, 119, 120, 128 bytes; expected digests from an
 * independent implementation).
 *
 * Usage: test_sha256 CASE, with CASE one of the names in the table at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static void expect(const void *data, size_t len, const char *want) {
    char got[65];
    memset(got, 'x', sizeof got);
    nnpops__sha256_hex(data, len, got);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "sha256 of %zu bytes: got %s, want %s\n", len, got, want);
        exit(1);
    }
}

static int case_empty(void) {
    expect("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    return 0;
}

static int case_abc(void) {
    expect("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    return 0;
}

static int case_448bit(void) {
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(strlen(m) == 56);
    expect(m, strlen(m), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    return 0;
}

static int case_896bit(void) {
    const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                    "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    CHECK(strlen(m) == 112);
    expect(m, strlen(m), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    return 0;
}

static int case_million_a(void) {
    size_t n = 1000000;
    char *m = malloc(n);
    CHECK(m != NULL);
    memset(m, 'a', n);
    expect(m, n, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(m);
    return 0;
}

static int case_boundaries(void) {
    static const struct {
        size_t len;
        const char *hex;
    } v[] = {
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
        {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
    };
    unsigned char buf[128];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)((i * 7 + 3) & 0xff);
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) expect(buf, v[k].len, v[k].hex);
    return 0;
}

static const test_case cases[] = {
    {"empty", case_empty},         {"abc", case_abc},
    {"448bit", case_448bit},       {"896bit", case_896bit},
    {"million_a", case_million_a}, {"boundaries", case_boundaries},
};

int main(int argc, char **argv) {
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
