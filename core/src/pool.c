/*
 * pool.c - the worker threads of a context's CPU steps (option `threads`).
 *
 * A pool is made on the first parallel step of a context and kept until the context is destroyed:
 * nt - 1 workers wait on a condition variable; nnpops__pool_run hands them a job (a function, its
 * argument and a generation number), runs share 0 itself on the calling thread and returns when
 * every share is done.  The work of a share is fixed by its number (the caller splits its work
 * statically), so which thread runs what never depends on timing.
 *
 * A worker that cannot be started (pthread_create fails) leaves the pool smaller: the job then
 * runs on the threads there are (nnpops__pool_run returns their number), each thread taking the
 * shares t, t + nt, ...; such a pool is kept for later jobs that want no more workers than it was
 * made for (not made again at every step).  nnpops__pool_threads makes the pool a job would get
 * and says how many threads it runs on, so that a job of that many shares has one share per
 * thread, whose threads may then meet at barriers (nnpops__barrier: they all run at once).  After
 * fork() the child has none of the parent's workers: a pool made in another process is dropped
 * (not joined: its threads do not exist here) and a new one made.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct nnpops__pool {
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    pthread_t *tid;
    int n_workers;  /* started */
    int wanted;     /* workers asked for when the pool was made (n_workers or more) */
    int stop;
    unsigned long generation;
    int pending;    /* workers still running the current job */
    int n_shares;   /* shares of the current job */
    int n_threads;  /* threads of the current job: n_workers + 1 or fewer */
    nnpops__pool_fn fn;
    void *arg;
    pid_t pid;      /* the process that made the pool */
};

typedef struct worker_arg {
    nnpops__pool *pool;
    int index; /* 1 .. n_workers: thread index of the job */
} worker_arg;

/* Runs the shares t, t + nt, ... of the job. */
static void run_shares(nnpops__pool_fn fn, void *arg, int t, int nt, int n_shares) {
    for (int s = t; s < n_shares; s += nt) fn(arg, s, t);
}

static void *worker_main(void *p) {
    worker_arg wa = *(worker_arg *)p;
    free(p);
    nnpops__pool *pool = wa.pool;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->stop && pool->generation == seen) pthread_cond_wait(&pool->start, &pool->mu);
        if (pool->stop) break;
        seen = pool->generation;
        const nnpops__pool_fn fn = pool->fn;
        void *arg = pool->arg;
        const int nt = pool->n_threads, n_shares = pool->n_shares;
        pthread_mutex_unlock(&pool->mu);
        if (wa.index < nt) run_shares(fn, arg, wa.index, nt, n_shares);
        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

static void pool_free(nnpops__pool *pool, int join) {
    if (!pool) return;
    if (join) {
        pthread_mutex_lock(&pool->mu);
        pool->stop = 1;
        pthread_cond_broadcast(&pool->start);
        pthread_mutex_unlock(&pool->mu);
        for (int k = 0; k < pool->n_workers; k++) pthread_join(pool->tid[k], NULL);
        pthread_mutex_destroy(&pool->mu);
        pthread_cond_destroy(&pool->start);
        pthread_cond_destroy(&pool->done);
    }
    free(pool->tid);
    free(pool);
}

void nnpops__pool_destroy(nnpops__pool *pool) {
    pool_free(pool, pool && pool->pid == getpid());
}

/* Test hook (tests/unit/test_pool.c): when >= 0, the number of further workers that may start;
 * the starts past it fail as a failed pthread_create does. */
int nnpops__pool_test_starts = -1;

static int start_worker(pthread_t *tid, worker_arg *wa) {
    if (nnpops__pool_test_starts == 0) return -1;
    if (nnpops__pool_test_starts > 0) nnpops__pool_test_starts--;
    return pthread_create(tid, NULL, worker_main, wa);
}

/* A pool with up to n_workers workers (fewer where they cannot be started), or NULL. */
static nnpops__pool *pool_new(int n_workers) {
    nnpops__pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->tid = calloc((size_t)n_workers, sizeof(pthread_t));
    if (!pool->tid || pthread_mutex_init(&pool->mu, NULL) != 0) {
        free(pool->tid);
        free(pool);
        return NULL;
    }
    pthread_cond_init(&pool->start, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->pid = getpid();
    pool->wanted = n_workers;
    for (int k = 0; k < n_workers; k++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->pool = pool;
        wa->index = k + 1;
        if (start_worker(&pool->tid[k], wa) != 0) {
            free(wa);
            break;
        }
        pool->n_workers++;
    }
    return pool;
}

int nnpops__pool_threads(nnpops__pool **pp, int nt) {
    nnpops__pool *pool = *pp;
    if (pool && pool->pid != getpid()) { /* made before a fork(): its workers are not ours */
        pool_free(pool, 0);
        pool = *pp = NULL;
    }
    if (nt > 1 && (!pool || pool->wanted < nt - 1)) {
        /* (re)made with the workers this job wants; a pool made for fewer is joined first */
        nnpops__pool_destroy(pool);
        pool = *pp = pool_new(nt - 1);
    }
    const int have = pool ? pool->n_workers + 1 : 1;
    return nt < have ? (nt < 1 ? 1 : nt) : have;
}

int nnpops__pool_run(nnpops__pool **pp, int nt, int n_shares, nnpops__pool_fn fn, void *arg) {
    if (nt > n_shares) nt = n_shares;
    nt = nnpops__pool_threads(pp, nt);
    nnpops__pool *pool = *pp;
    if (nt <= 1) {
        run_shares(fn, arg, 0, 1, n_shares);
        return 1;
    }
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn;
    pool->arg = arg;
    pool->n_threads = nt;
    pool->n_shares = n_shares;
    pool->pending = pool->n_workers;
    pool->generation++;
    pthread_cond_broadcast(&pool->start);
    pthread_mutex_unlock(&pool->mu);
    run_shares(fn, arg, 0, nt, n_shares);
    pthread_mutex_lock(&pool->mu);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
    return nt;
}

void nnpops__barrier_init(nnpops__barrier *b, int n) {
    b->count = 0;
    b->sense = 0;
    b->n = n;
}

void nnpops__barrier_wait(nnpops__barrier *b, int *sense) {
    const int s = *sense = !*sense;
    if (__atomic_fetch_add(&b->count, 1, __ATOMIC_ACQ_REL) == b->n - 1) {
        /* the last to arrive: every other thread's work before the barrier is visible here (the
         * read-modify-writes of count form one release sequence); reset, then release them */
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->sense, s, __ATOMIC_RELEASE);
        return;
    }
    for (int spins = 0; __atomic_load_n(&b->sense, __ATOMIC_ACQUIRE) != s; spins++)
        if (spins >= 2000) sched_yield(); /* (more threads than processors: let the others run) */
}

nnpops_status nnpops__scratch_subs(nnpops__scratch *scratch, int32_t n) {
    if (n <= scratch->n_sub) return NNPOPS_OK;
    nnpops__scratch *sub = realloc(scratch->sub, sizeof *sub * (size_t)n);
    if (!sub) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory: thread scratch");
    memset(sub + scratch->n_sub, 0, sizeof *sub * (size_t)(n - scratch->n_sub));
    scratch->sub = sub;
    scratch->n_sub = n;
    return NNPOPS_OK;
}

void nnpops__scratch_free(nnpops__scratch *scratch) {
    for (int32_t k = 0; k < scratch->n_sub; k++) nnpops__scratch_free(&scratch->sub[k]);
    free(scratch->sub);
    for (int k = 0; k < NNPOPS__SCRATCH_SLOTS; k++) nnpops__buf_free(&scratch->slot[k]);
    nnpops__pool_destroy(scratch->pool);
    memset(scratch, 0, sizeof *scratch);
}
