# The losses of the coordinate descent solvers (docs/internals.md, "Solver objective and
# steps"), as inline C functions of the prediction p and the target y. The one definition:
# rbcd.solvers._cd (the local kernels) and rbcd.dask._kernels (the workers' grid step)
# cimport them, so both sides take the same steps bit for bit.
from libc.math cimport exp, log1p


cdef inline double logistic_value(double p, double y) noexcept nogil:
    # log(1 + exp(-y p)), stable for both signs of y p
    cdef double m = y * p
    if m > 0:
        return log1p(exp(-m))
    return -m + log1p(exp(m))


cdef inline double logistic_deriv(double p, double y) noexcept nogil:
    # -y / (1 + exp(y p))
    return -y / (1.0 + exp(y * p))


cdef inline double sqhinge_value(double p, double y) noexcept nogil:
    # max(0, 1 - y p)^2
    cdef double m = 1.0 - y * p
    return m * m if m > 0 else 0.0


cdef inline double sqhinge_deriv(double p, double y) noexcept nogil:
    # -2 y max(0, 1 - y p)
    cdef double m = 1.0 - y * p
    return -2.0 * y * m if m > 0 else 0.0
