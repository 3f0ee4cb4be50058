/* sanitized.h - the inputs of the C tests under AddressSanitizer.
 *
 * The CPU tests also run in the ASan + UBSan build of .ci/sanitize.sh (-DNNPOPS_SANITIZE=ON),
 * where every memory access is checked and a case costs several times its Release time.  There
 * the checks that repeat one computation over many inputs of the same kind (finite differences
 * atom after atom, reference systems that only add atoms to a kind another system has) keep the
 * inputs that take each code path once; the Release run of the suite keeps them all, and so
 * keeps the numerical coverage. */
#ifndef NNPOPS_TEST_SANITIZED_H
#define NNPOPS_TEST_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif

/* FULL_OR_ASAN(a, b): a in the ordinary builds, b under AddressSanitizer */
#define FULL_OR_ASAN(full, asan) (TEST_SANITIZED ? (asan) : (full))

#endif
