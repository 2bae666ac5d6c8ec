# The one place rbcd reaches OpenMP. A bare ``cimport openmp`` links but fails
# at import when the build has no OpenMP; these wrappers fall back to serial.
cdef extern from "rbcd_omp.h" nogil:
    int omp_max_threads "rbcd_omp_max_threads"() noexcept
    int omp_thread_num "rbcd_omp_thread_num"() noexcept
    int omp_num_threads "rbcd_omp_num_threads"() noexcept  # of the current team
    void atomic_add "rbcd_atomic_add"(double *p, double v) noexcept
    int openmp_enabled "rbcd_openmp_enabled"() noexcept
    double thread_cpu_seconds "rbcd_thread_cpu_seconds"() noexcept
