"""Nogil kernel of RandomFourier: the cosine pass of z(x) = scale * cos(x W + b).

The projection ``P = X @ W`` is a dense matrix product that BLAS does best; this
module only turns P into features, in place, in parallel over rows.
"""
from cython.parallel cimport prange
from libc.math cimport cos

ctypedef fused floating:
    float
    double


def cos_features(floating[:, ::1] P,          # IN/OUT (n, D): projection, becomes features
                 const double[::1] offset,     # IN (D,): the phases b
                 double scale,                 # IN: sqrt(2 / n_components)
                 int n_threads):
    """In place: ``P[i, k] = scale * cos(float64(P[i, k]) + offset[k])``.

    The cosine is taken in float64 whatever the dtype of P; the result is rounded
    to P's dtype. Rows are split between ``n_threads`` OpenMP threads.
    """
    cdef Py_ssize_t n = P.shape[0]
    cdef Py_ssize_t D = P.shape[1]
    cdef Py_ssize_t i, k
    if offset.shape[0] != D:
        raise ValueError(f"offset has {offset.shape[0]} entries, P has {D} columns")
    if n_threads < 1:
        n_threads = 1
    with nogil:
        for i in prange(n, schedule="static", num_threads=n_threads):
            for k in range(D):
                # P[i] = scale * cos(P[i] + b)
                P[i, k] = <floating>(scale * cos(<double>P[i, k] + offset[k]))
