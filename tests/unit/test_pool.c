/*
 * test_pool.c - the worker threads of CPU steps (core/src/pool.c, nnpops__pool_run).
 *   shares  every share of a job runs once, on the thread the static split gives it (thread t:
 *           shares t, t + nt', ..., with t passed to the share's function), for thread counts 1 .. 9 and share counts 1 .. 13; a job
 *           with fewer shares than threads runs on as many threads as shares; the pool is made
 *           once and kept while the jobs want no more threads than it has
 *   partial a worker that cannot be started (the test hook nnpops__pool_test_starts makes the
 *           second start fail) leaves a smaller pool: the jobs run on the threads there are, and
 *           the pool is kept (no new start is tried) until a job wants more threads than it was
 *           made for, which makes it again with every thread
 *   barrier a job of nnpops__pool_threads shares (one per thread, the threads running at once)
 *           whose threads meet at nnpops__barrier 2,000 times: after each meeting every thread
 *           sees the values all the others wrote before it (also with a smaller pool from a
 *           failed start, and with more threads than processors)
 *
 * Usage: test_pool CASE, with CASE one of the names in the table at the end.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

enum { MAX_SHARES = 16 };

typedef struct job {
    int runs[MAX_SHARES];
    pthread_t thread[MAX_SHARES];
    int index[MAX_SHARES]; /* the thread index fn was given */
} job;

static void share_fn(void *arg, int share, int thread) {
    job *j = arg;
    j->runs[share]++;
    j->thread[share] = pthread_self();
    j->index[share] = thread;
}

/* Runs a job of n_shares on up to nt threads; checks that every share ran once and that the
 * shares t, t + got, ... ran on one thread, distinct for distinct t.  Returns the thread count. */
static int run_job(nnpops__pool **pool, int nt, int n_shares) {
    job j;
    memset(&j, 0, sizeof j);
    const int got = nnpops__pool_run(pool, nt, n_shares, share_fn, &j);
    CHECK(got >= 1 && got <= nt && got <= n_shares);
    for (int s = 0; s < n_shares; s++) {
        CHECK(j.runs[s] == 1);
        CHECK(j.index[s] == s % got);
        CHECK(pthread_equal(j.thread[s], j.thread[s % got]));
        for (int t = 0; t < s && t < got; t++)
            if (s < got) CHECK(!pthread_equal(j.thread[s], j.thread[t]));
    }
    CHECK(pthread_equal(j.thread[0], pthread_self())); /* share 0: the calling thread */
    return got;
}

static int case_shares(void) {
    nnpops__pool *pool = NULL;
    for (int nt = 1; nt <= 9; nt++)
        for (int ns = 1; ns <= 13; ns++) CHECK(run_job(&pool, nt, ns) == (nt < ns ? nt : ns));
    /* nine threads were wanted last: jobs of fewer keep that pool */
    const nnpops__pool *kept = pool;
    CHECK(kept != NULL);
    for (int nt = 2; nt <= 9; nt++) {
        CHECK(run_job(&pool, nt, MAX_SHARES) == nt);
        CHECK(pool == kept);
    }
    nnpops__pool_destroy(pool);
    return 0;
}

static int case_partial(void) {
    nnpops__pool *pool = NULL;
    nnpops__pool_test_starts = 1; /* one worker starts, the next start fails */
    CHECK(run_job(&pool, 4, 8) == 2);
    nnpops__pool_test_starts = 0; /* a start tried now would fail: the pool must be kept */
    for (int k = 0; k < 5; k++) CHECK(run_job(&pool, 4, 8) == 2);
    CHECK(run_job(&pool, 3, 8) == 2);
    CHECK(run_job(&pool, 2, 8) == 2);
    CHECK(run_job(&pool, 1, 8) == 1);
    nnpops__pool_test_starts = -1; /* starts succeed again */
    CHECK(run_job(&pool, 4, 8) == 2); /* the pool was made for four threads: kept */
    CHECK(run_job(&pool, 5, 8) == 5); /* more than it was made for: made again */
    nnpops__pool_destroy(pool);
    return 0;
}

enum { ROUNDS = 2000, MAX_THREADS = 12 };
typedef struct meet {
    nnpops__barrier barrier;
    int nt;
    int value[MAX_THREADS];
    int bad_of[MAX_THREADS]; /* per thread: values it saw that were not the round's */
} meet;

static void meet_fn(void *arg, int share, int thread) {
    meet *m = arg;
    CHECK(share == thread);
    int sense = 0;
    for (int r = 1; r <= ROUNDS; r++) {
        m->value[thread] = r;
        nnpops__barrier_wait(&m->barrier, &sense);
        for (int t = 0; t < m->nt; t++)
            if (m->value[t] != r) m->bad_of[thread]++;
        nnpops__barrier_wait(&m->barrier, &sense); /* (before anyone writes round r + 1) */
    }
}

static int meet_run(nnpops__pool **pool, int want) {
    meet m;
    memset(&m, 0, sizeof m);
    m.nt = nnpops__pool_threads(pool, want);
    CHECK(m.nt >= 1 && m.nt <= want);
    nnpops__barrier_init(&m.barrier, m.nt);
    CHECK(nnpops__pool_run(pool, m.nt, m.nt, meet_fn, &m) == m.nt);
    for (int t = 0; t < m.nt; t++) CHECK(m.bad_of[t] == 0);
    return m.nt;
}

static int case_barrier(void) {
    nnpops__pool *pool = NULL;
    CHECK(meet_run(&pool, 1) == 1);
    CHECK(meet_run(&pool, 2) == 2);
    CHECK(meet_run(&pool, 5) == 5);
    CHECK(meet_run(&pool, MAX_THREADS) == MAX_THREADS); /* (more than this machine's processors) */
    nnpops__pool_destroy(pool);
    pool = NULL;
    nnpops__pool_test_starts = 2; /* two of five workers start */
    CHECK(meet_run(&pool, 6) == 3);
    nnpops__pool_test_starts = -1;
    CHECK(meet_run(&pool, 6) == 3); /* the pool is kept: still three threads */
    nnpops__pool_destroy(pool);
    return 0;
}

static const test_case cases[] = {
    {"shares", case_shares},
    {"partial", case_partial},
    {"barrier", case_barrier},
};

int main(int argc, char **argv) {
    return test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
