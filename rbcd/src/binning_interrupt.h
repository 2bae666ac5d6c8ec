/* Interrupting a binning kernel (Ctrl-C; issue 31 item 10).
 *
 * A fit kernel runs for minutes at large N x R with the GIL released, so Python cannot
 * run its SIGINT handler until the kernel returns. The contract: one thread (the team's
 * thread 0, the Python caller's own thread) looks at the signals with the GIL at most
 * every rbcd_interrupt.period seconds (the caller's poll, e.g. PyErr_CheckSignals) and,
 * when a handler raised, sets `stop`; every thread reads `stop` between its blocks of
 * work and leaves its loops, so the kernel returns within a block of work after the
 * signal. The state written before a stop is discarded by the caller: a stop never
 * changes a result, it only ends the call with the handler's exception.
 *
 * `stop` is written by one thread and read by all: relaxed atomics (a stale read costs
 * one more block of work, never a wrong result).
 */
#ifndef RBCD_BINNING_INTERRUPT_H
#define RBCD_BINNING_INTERRUPT_H

#include <time.h>
#ifdef _WIN32
#include <windows.h>
#endif

typedef struct {
    int stop;          /* set once a signal handler raised: every thread leaves */
    int enabled;       /* whether thread 0 looks at the signals (the caller is Python's
                          main thread, the only one that runs signal handlers) */
    double period;     /* seconds between two looks */
    double next_look;  /* monotonic time of thread 0's next look */
    int finished;      /* work chunks finished (see rbcd_chunk_done) */
} rbcd_interrupt;

static inline double rbcd_monotonic(void) {
#ifdef _WIN32
    return (double)GetTickCount64() * 1e-3;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
}

static inline int rbcd_stopped(const rbcd_interrupt *s) {
#if defined(__GNUC__) || defined(__clang__)
    return __atomic_load_n(&s->stop, __ATOMIC_RELAXED);
#else
    return *(volatile const int *)&s->stop;
#endif
}

static inline void rbcd_set_stop(rbcd_interrupt *s) {
#if defined(__GNUC__) || defined(__clang__)
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
#else
    *(volatile int *)&s->stop = 1;
#endif
}

/* Whether it is time for thread 0's next look at the signals (and if so, the one after
 * is scheduled). Called by thread 0 only. */
static inline int rbcd_look_due(rbcd_interrupt *s) {
    double now;
    if (!s->enabled)
        return 0;
    now = rbcd_monotonic();
    if (now < s->next_look)
        return 0;
    s->next_look = now + s->period;
    return 1;
}

/* One chunk of the kernel's work is done (any thread). */
static inline void rbcd_chunk_done(rbcd_interrupt *s) {
#if defined(__GNUC__) || defined(__clang__)
    __atomic_add_fetch(&s->finished, 1, __ATOMIC_RELEASE);
#else
#pragma omp atomic
    s->finished += 1;
#endif
}

static inline int rbcd_chunks_done(const rbcd_interrupt *s) {
#if defined(__GNUC__) || defined(__clang__)
    return __atomic_load_n(&s->finished, __ATOMIC_ACQUIRE);
#else
    return *(volatile const int *)&s->finished;
#endif
}

/* A short sleep of thread 0 while it waits for the other threads' chunks. */
static inline void rbcd_nap(void) {
#ifdef _WIN32
    Sleep(1);
#else
    struct timespec ts = {0, 1000000L};  /* 1 ms */
    nanosleep(&ts, NULL);
#endif
}

#endif
