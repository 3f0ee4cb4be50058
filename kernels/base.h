/*
 * base.h - what every op under kernels/ (and above it) may use: the error helper, growable host
 * buffers, the scratch buffers and worker threads of a CPU step, the device status word that the
 * neighbor searches and other ops fill, and the call-checking macros.  It includes only the public
 * header (for nnpops_status) and the C library: kernels/ is the ground floor of the library, and
 * nothing here knows of models, contexts or potentials.  The functions declared here are defined
 * by the library (core/src/error.c, util.c, pool.c).
 */
#ifndef NNPOPS_KERNELS_BASE_H
#define NNPOPS_KERNELS_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "nnpops/nnpops.h"

#define NNPOPS__HIDDEN __attribute__((visibility("hidden")))

/* Largest number of species of a model (species sets are bit masks of 32 bits). */
#define NNPOPS__MAX_SPECIES 32

/* ---- errors (core/src/error.c) ---- */
/* Records a printf-style detail as the thread's last error and returns status. */
nnpops_status nnpops__fail(nnpops_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current last error (keeps the status). */
nnpops_status nnpops__fail_prefix(nnpops_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void nnpops__clear_error(void);

/* ---- growable host buffers ---- */
typedef struct nnpops__buf {
    void *ptr;
    size_t bytes;
} nnpops__buf;
/* Ensures at least `bytes` (grows by at least 1.5x; never shrinks).  NNPOPS_ERROR_OUT_OF_MEMORY
 * on failure, with `what` in the message. */
nnpops_status nnpops__buf_reserve(nnpops__buf *b, size_t bytes, const char *what);
void nnpops__buf_free(nnpops__buf *b);

/* ---- worker threads of CPU steps (core/src/pool.c) ---- */
typedef struct nnpops__pool nnpops__pool;
typedef void (*nnpops__pool_fn)(void *arg, int share, int thread);
/* Runs fn(arg, s, t) for every share s < n_shares on up to nt threads (the calling thread, t = 0,
 * and the pool's workers, started on first use into *pool): thread t runs the shares t, t + nt',
 * ... in turn (nt' the threads it got), so a share never runs on two threads at once and a
 * thread's own buffers (by t) serve each of its shares.  Returns nt'. */
int nnpops__pool_run(nnpops__pool **pool, int nt, int n_shares, nnpops__pool_fn fn, void *arg);
void nnpops__pool_destroy(nnpops__pool *pool);
/* The threads a job of nt shares gets (the pool made or remade as nnpops__pool_run would); a job
 * of that many shares then has one share per thread, all running at once. */
int nnpops__pool_threads(nnpops__pool **pool, int nt);
/* A barrier of the n threads of such a job (spinning, then yielding the processor): each waits
 * until all n have arrived, and sees what the others wrote before they arrived.  *sense: the
 * calling thread's own flag, 0 before its first wait. */
typedef struct nnpops__barrier {
    int count, sense; /* (atomic: GCC / Clang __atomic built-ins) */
    int n;
} nnpops__barrier;
void nnpops__barrier_init(nnpops__barrier *b, int n);
void nnpops__barrier_wait(nnpops__barrier *b, int *sense);
extern int nnpops__pool_test_starts; /* test hook (pool.c) */

/* Scratch buffers of a context that potentials may use (slot numbers are potential-private). */
#define NNPOPS__SCRATCH_SLOTS 17
typedef struct nnpops__scratch {
    nnpops__buf slot[NNPOPS__SCRATCH_SLOTS];
    /* CPU threads (option threads, resolved by the context): the threads a step may use, the
     * threads its potential ran on (written by the potential), the pool, and the scratch of
     * shares 1 .. n_sub (share 0 uses this one; their own pool and sub are unused) */
    int32_t threads, threads_used;
    nnpops__pool *pool;
    struct nnpops__scratch *sub;
    int32_t n_sub;
} nnpops__scratch;
/* At least n share scratches in scratch->sub (grown, the old ones kept). */
nnpops_status nnpops__scratch_subs(nnpops__scratch *scratch, int32_t n);
void nnpops__scratch_free(nnpops__scratch *scratch);

/* ---- the device status word ----
 * Written by the GPU neighbor search and by ops that find a capacity exceeded, read back with the
 * results of a step (one D2H copy), and filled the same way by the CPU twins.  Flags: */
#define NNPOPS__ST_OVERFLOW 1u        /* more entries than capacity (n_entries is the total) */
#define NNPOPS__ST_TOO_CLOSE 2u       /* a pair closer than min_distance (close_*) */
#define NNPOPS__ST_BAD_CELL 4u        /* singular or non-finite cell (bad_system, bad_axis) */
#define NNPOPS__ST_TOO_MANY_IMAGES 8u /* images along bad_axis of bad_system exceed max_images */
#define NNPOPS__ST_POT_CAPACITY 16u   /* a potential's op needs more of its own capacity (pot_need) */
#define NNPOPS__ST_GEOM_SET 256u      /* internal: bad_system/bad_axis/images/bad_kind are written */
typedef struct nnpops__dev_status {
    int64_t n_entries;   /* entries (pairs) found; all are counted, the first `capacity` written */
    int64_t n_half;      /* center lists: how many distinct (half-list) pairs the entries are */
    uint32_t flags;
    int32_t bad_system;  /* a system with a bad cell / too many images (valid with ST_GEOM_SET) */
    int32_t bad_axis;
    int32_t images;      /* images needed along bad_axis */
    int32_t close_i, close_j; /* a too-close pair (close_i == close_j: an atom and its own image) */
    int32_t pot_need;    /* with ST_POT_CAPACITY: the largest capacity a potential's op asked for
                          * (ANI: angular entries of one center) */
    int32_t bad_kind;    /* NNPOPS__ST_BAD_CELL or _TOO_MANY_IMAGES: the error recorded in bad_* */
    double close_d;
} nnpops__dev_status;

/* Returns the status of x from the calling function when it is not NNPOPS_OK. */
#define NNPOPS__TRY(x)                                                                            \
    do {                                                                                          \
        nnpops_status s_ = (x);                                                                   \
        if (s_ != NNPOPS_OK) return s_;                                                           \
    } while (0)

#ifdef NNPOPS_HAVE_CUDA
#include <cuda_runtime_api.h>
/* Returns NNPOPS_ERROR_CUDA from the calling function when a CUDA runtime call fails, naming the
 * call site and CUDA's reason (host code of the GPU path, C and CUDA C++ alike). */
#define NNPOPS__CUDA_CALL(call)                                                                   \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess)                                                                    \
            return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #call,    \
                                cudaGetErrorString(e_));                                          \
    } while (0)
#endif

#endif /* NNPOPS_KERNELS_BASE_H */
