/* Atomics and prefetch of the coordinate descent kernels (rbcd/solvers/_cd.pyx).
 * Each operation has its OpenMP form and the plain form it reduces to without OpenMP
 * (RBCD_OPENMP == 0: one thread, nothing to synchronise). */
#ifndef RBCD_CD_ATOMICS_H
#define RBCD_CD_ATOMICS_H

/* old = *p; *p = v; atomically. Hogwild coordinate writes: the change added to the
   predictions is measured against the value actually replaced, so p stays equal to
   Z w + b even when two threads update the same coordinate at once. */
static inline double rbcd_cd_exchange(double *p, double v) {
    double old;
#if RBCD_OPENMP
#pragma omp atomic capture
    { old = *p; *p = v; }
#else
    old = *p; *p = v;
#endif
    return old;
}

/* old = *p; *p += v; atomically: threads claim chunks of an epoch's work. */
static inline long long rbcd_cd_fetch_add(long long *p, long long v) {
    long long old;
#if RBCD_OPENMP
#pragma omp atomic capture
    { old = *p; *p += v; }
#else
    old = *p; *p += v;
#endif
    return old;
}

/* A hint to load the cache line of p ahead of use (no effect on results); _w: with the
   intent to write it (PREFETCHW on x86), so that the line arrives owned by this core. */
#if defined(__GNUC__) || defined(__clang__)
#define rbcd_cd_prefetch(p) __builtin_prefetch((const void *)(p))
#define rbcd_cd_prefetch_w(p) __builtin_prefetch((const void *)(p), 1)
#else
#define rbcd_cd_prefetch(p) ((void)0)
#define rbcd_cd_prefetch_w(p) ((void)0)
#endif

#endif
