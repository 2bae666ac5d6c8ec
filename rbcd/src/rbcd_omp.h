/* OpenMP shim: every OpenMP call in rbcd goes through here, with serial
 * fallbacks when the extension is built without OpenMP (RBCD_OPENMP == 0). */
#ifndef RBCD_OMP_H
#define RBCD_OMP_H

#include <time.h>

#if RBCD_OPENMP
#include <omp.h>
static inline int rbcd_omp_max_threads(void) { return omp_get_max_threads(); }
static inline int rbcd_omp_thread_num(void) { return omp_get_thread_num(); }
static inline int rbcd_omp_num_threads(void) { return omp_get_num_threads(); }
#else
static inline int rbcd_omp_max_threads(void) { return 1; }
static inline int rbcd_omp_thread_num(void) { return 0; }
static inline int rbcd_omp_num_threads(void) { return 1; }
#endif

/* *p += v, atomically when several threads may add to the same address
 * (Hogwild: shared predictions). No update is lost. */
static inline void rbcd_atomic_add(double *p, double v) {
#if RBCD_OPENMP
#pragma omp atomic
    *p += v;
#else
    *p += v;
#endif
}

static inline int rbcd_openmp_enabled(void) { return RBCD_OPENMP; }

/* CPU seconds the calling thread has run so far (POSIX CLOCK_THREAD_CPUTIME_ID), or -1
 * where the platform has no per-thread CPU clock. For diagnostics (the fit's work per
 * thread chunk, _binning.fit_tables): a thread's own work, whatever the other threads
 * do, also when more threads than cores take turns. */
static inline double rbcd_thread_cpu_seconds(void) {
#if defined(CLOCK_THREAD_CPUTIME_ID)
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
    return -1.0;
}

#endif
