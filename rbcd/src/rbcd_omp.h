/* OpenMP shim: every OpenMP call in rbcd goes through here, with serial
 * fallbacks when the extension is built without OpenMP (RBCD_OPENMP == 0). */
#ifndef RBCD_OMP_H
#define RBCD_OMP_H

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

#endif
