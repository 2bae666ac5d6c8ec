/* A barrier for the threads of one OpenMP parallel region that spins briefly before it
 * sleeps (rbcd/solvers/_cd.pyx: the grid mode's streamed epoch, one region per epoch).
 *
 * Why not OpenMP's own regions and barriers: rbcd loads libgomp with the passive wait
 * policy (rbcd/_openmp_env.py, the busy-machine rule), so a thread that waits at a barrier
 * or between regions sleeps at once, and every region or barrier pays the wake-up of the
 * sleeping threads. On the project's 2-vCPU VM that is about 64 us per region, against
 * about 2 us with spinning threads (a region of no work, docs/benchmarks/threads.md); a
 * grid-mode epoch has two phases per grid (the pass over the rows, then the new weights),
 * about 128 at R = 64, so the wake-ups alone cost about 8 ms an epoch.
 *
 * rbcd_team_wait spins for at most RBCD_TEAM_SPIN_NS, about what a sleep and a wake-up
 * cost (so a wait costs at most about twice what the better of spinning and sleeping would
 * have cost, known in hindsight), then sleeps (a futex on Linux; on other POSIX systems
 * naps of 20 us until the barrier opens). The last thread to arrive opens the barrier and wakes the
 * sleepers, if any. A phase's writes before the barrier are visible to every thread after
 * it (the arrivals release, the opening is acquired). The spin does not yield the core:
 * with a busy-loop process on each of the 2 vCPUs and n_jobs=2, a spin that called
 * sched_yield after 2 us made grid-mode CD fits 2.6-2.7x slower than n_jobs=1 (the
 * yielding thread stays runnable and loses its wake-up priority), where this barrier and
 * the passive OpenMP regions took 0.9-1.3x.
 *
 * Contract: every thread of the team calls rbcd_team_wait the same number of times, with
 * the same n (the team's size, omp_get_num_threads()); the barrier is zeroed by
 * rbcd_team_init before the region. Without the GNU atomic builtins it falls back to
 * `#pragma omp barrier` (the same synchronisation, with the runtime's wake-ups).
 */
#ifndef RBCD_TEAM_H
#define RBCD_TEAM_H

#include <limits.h>
#include <string.h>
#include <time.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
/* after the spin, off Linux: sleep in short naps (not sched_yield: a yielding thread stays
   runnable and competes with the thread it waits for, see above) */
#if !defined(__linux__) && (defined(__unix__) || defined(__APPLE__))
#define RBCD_TEAM_NAP() do { struct timespec nap_ = {0, 20000}; nanosleep(&nap_, NULL); } while (0)
#else
#define RBCD_TEAM_NAP() RBCD_TEAM_PAUSE()
#endif

#if defined(__x86_64__) || defined(__i386__)
#define RBCD_TEAM_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define RBCD_TEAM_PAUSE() __asm__ __volatile__("yield")
#else
#define RBCD_TEAM_PAUSE() ((void)0)
#endif

#if defined(__GNUC__) || defined(__clang__)
#define RBCD_TEAM_NATIVE 1
#else
#define RBCD_TEAM_NATIVE 0
#endif

#define RBCD_TEAM_SPIN_NS 50000L   /* spin at most this long, then sleep */

/* Each counter on a cache line of its own: the arrivals' adds do not disturb the threads
 * that watch the phase number. */
typedef struct {
    char pad0[64];
    int count;            /* threads arrived in the current phase */
    char pad1[64 - sizeof(int)];
    int phase;            /* phases completed */
    int sleepers;         /* threads asleep (or about to sleep) on phase */
    char pad2[64 - 2 * sizeof(int)];
} rbcd_team_barrier;

static inline void rbcd_team_init(rbcd_team_barrier *b) { memset(b, 0, sizeof(*b)); }

static inline long rbcd_team_elapsed_ns(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)(t.tv_sec - t0->tv_sec) * 1000000000L + (long)(t.tv_nsec - t0->tv_nsec);
}

static inline void rbcd_team_wait(rbcd_team_barrier *b, int n) {
#if RBCD_TEAM_NATIVE
    int phase, k;
    struct timespec t0;
    if (n <= 1)
        return;
    phase = __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == n) {
        /* the last arrival: reset the count, open the barrier, wake the sleepers */
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->phase, phase + 1, __ATOMIC_SEQ_CST);
#if defined(__linux__)
        if (__atomic_load_n(&b->sleepers, __ATOMIC_SEQ_CST) > 0)
            syscall(SYS_futex, &b->phase, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        for (k = 0; k < 64; k++) {
            if (__atomic_load_n(&b->phase, __ATOMIC_ACQUIRE) != phase)
                return;
            RBCD_TEAM_PAUSE();
        }
        if (rbcd_team_elapsed_ns(&t0) >= RBCD_TEAM_SPIN_NS)
            break;
    }
#if defined(__linux__)
    /* sleep: registered before the phase is read again, so that the opener either sees a
       sleeper (and wakes it) or opened the barrier before this thread's last look (the
       futex returns at once when the phase has moved) */
    __atomic_add_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&b->phase, __ATOMIC_SEQ_CST) == phase)
        syscall(SYS_futex, &b->phase, FUTEX_WAIT_PRIVATE, phase, NULL, NULL, 0);
    __atomic_sub_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
#else
    while (__atomic_load_n(&b->phase, __ATOMIC_ACQUIRE) == phase)
        RBCD_TEAM_NAP();
#endif
#else
    (void)b;
    (void)n;
#if RBCD_OPENMP
#pragma omp barrier
#endif
#endif
}

#endif
