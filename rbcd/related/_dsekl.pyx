"""Nogil kernels of DoublyStochasticKernelClassifier (Steenbergen et al., Algorithms 1-2).

One call of ``dsekl_epoch`` runs every step of one epoch; the random draws (the
epoch permutation of the rows and the expansion blocks of every step) are made in
Python beforehand, so the kernels hold no random state. Inputs X are already
divided by sigma, so the kernels are exp(-0.5 ||x - z||^2) and exp(-||x - z||_1).

Per step, with B = perm[s:s + nI] (the gradient sample I) and the K disjoint
expansion blocks J_0..J_{K-1} of J rows each, for every output c (the paper's
Algorithm 1, line "compute gradient", with eq. 4's hinge gradient; no intercept):

    Kb[k, i, j] = k(x_{B[i]}, x_{J_k[j]})                           # the submatrix K_{I, J_k}
    f[c, k, i]  = sum_j A[c, J_k[j]] Kb[k, i, j]                    # empirical kernel map on J_k
    r[c, k, i]  = loss'(y f) y                                      # y = Y[c, B[i]]
    g[c, k, j]  = sum_i r[c, k, i] Kb[k, i, j] + lam A[c, J_k[j]]   # summed over I, as the paper
    A[c, J_k[j]] -= step * g                                        # blocks disjoint: no conflict

step: AdaGrad eta g / sqrt(G) (G = 1 + sum of past g^2, Algorithm 2 lines 4, 11, 14),
eta / t (t = step count, Algorithm 1) or eta / epoch (Section 4.2).

Phase 1 (kernel rows, f, r) is a prange over the K * nI sample rows, phase 2
(gradients and updates) a prange over the K * J expansion columns. Both read the
coefficients of the start of the step, so the result is the same for any number
of threads and equals the serial rbcd_ref loop up to floating-point summation order.
"""
from cython.parallel cimport prange
from libc.math cimport exp, fabs, sqrt

cdef enum:
    GAUSSIAN = 0
    LAPLACIAN = 1

cdef enum:
    HINGE = 0
    SQUARED_HINGE = 1

cdef enum:
    INVERSE_T = 0
    INVERSE_EPOCH = 1
    ADAGRAD = 2

KERNEL_CODES = {"gaussian": GAUSSIAN, "laplacian": LAPLACIAN}
LOSS_CODES = {"hinge": HINGE, "squared_hinge": SQUARED_HINGE}
STEP_CODES = {"inverse_t": INVERSE_T, "inverse_epoch": INVERSE_EPOCH, "adagrad": ADAGRAD}


cdef inline double kernel_value(const double *x, const double *z, Py_ssize_t d,
                                int kernel) noexcept nogil:
    """exp(-0.5 ||x - z||_2^2) or exp(-||x - z||_1) on sigma-scaled rows."""
    cdef double acc = 0.0, diff
    cdef Py_ssize_t m
    if kernel == GAUSSIAN:
        for m in range(d):
            diff = x[m] - z[m]
            acc += diff * diff
        return exp(-0.5 * acc)
    for m in range(d):
        acc += fabs(x[m] - z[m])
    return exp(-acc)


cdef inline double loss_derivative(double margin, int loss) noexcept nogil:
    """d loss / d margin: hinge -1 if margin < 1 else 0; squared hinge -2 max(0, 1 - margin)."""
    if loss == HINGE:
        return -1.0 if margin < 1.0 else 0.0
    if margin < 1.0:
        return -2.0 * (1.0 - margin)
    return 0.0


cdef void sample_row(const double[:, ::1] X, const double[:, ::1] Y, const double[:, ::1] A,
                     const long long[:, ::1] Jidx, Py_ssize_t it,
                     Py_ssize_t k, Py_ssize_t i, Py_ssize_t row, Py_ssize_t J, int kernel,
                     int loss, double[:, :, ::1] Kb, double[:, :, ::1] Rb) noexcept nogil:
    """Phase 1 for sample row i of block k: its kernel row, f and r for every output."""
    cdef Py_ssize_t j, c, d = X.shape[1]
    cdef double acc
    for j in range(J):
        # Kb[k, i, j] = k(x_row, x_{J_k[j]})
        Kb[k, i, j] = kernel_value(&X[row, 0], &X[Jidx[it, k * J + j], 0], d, kernel)
    for c in range(Y.shape[0]):
        acc = 0.0
        for j in range(J):
            acc = acc + A[c, Jidx[it, k * J + j]] * Kb[k, i, j]
        # f = A[c, J_k] @ Kb[k, i];  r = loss'(y f) y
        Rb[c, k, i] = loss_derivative(Y[c, row] * acc, loss) * Y[c, row]


cdef void expansion_column(double[:, ::1] A, double[:, ::1] G, const long long[:, ::1] Jidx,
                           Py_ssize_t it, Py_ssize_t k, Py_ssize_t j, Py_ssize_t J,
                           Py_ssize_t nI, int step_rule, double eta, double rate, double lam,
                           const double[:, :, ::1] Kb, const double[:, :, ::1] Rb) noexcept nogil:
    """Phase 2 for coefficient j of block k: its gradient and update, for every output."""
    cdef Py_ssize_t i, c, col = Jidx[it, k * J + j]
    cdef double acc, g
    for c in range(A.shape[0]):
        acc = 0.0
        for i in range(nI):
            acc = acc + Rb[c, k, i] * Kb[k, i, j]
        # g = r[c, k] @ Kb[k, :, j] + lam A[c, col]
        g = acc + lam * A[c, col]
        if step_rule == ADAGRAD:
            G[c, col] += g * g
            A[c, col] -= eta * g / sqrt(G[c, col])
        else:
            A[c, col] -= rate * g


def dsekl_epoch(const double[:, ::1] X,        # IN (N, d): training rows / sigma
                const double[:, ::1] Y,        # IN (n_out, N): targets in {-1, +1}
                double[:, ::1] A,              # IN/OUT (n_out, N): expansion coefficients
                double[:, ::1] G,              # IN/OUT (n_out, N): AdaGrad sums (start at 1)
                const long long[::1] perm,     # IN (N,): this epoch's row permutation
                const long long[:, ::1] Jidx,  # IN (n_steps, K * J): expansion blocks per step
                Py_ssize_t n_gradient,         # IN: I, rows per gradient sample
                Py_ssize_t n_expansion,        # IN: J, rows per expansion block
                Py_ssize_t n_blocks,           # IN: K, expansion blocks per step
                int kernel, int loss, int step_rule,
                double eta, double lam,
                long long t,                   # IN: steps taken before this epoch
                long long epoch,               # IN: 1-based epoch number (inverse_epoch rate)
                int n_threads,
                double[:, :, ::1] Kb,          # SCRATCH (K, I, J)
                double[:, :, ::1] Rb):         # SCRATCH (n_out, K, I)
    """Run one epoch (ceil(N / I) steps) in place. Returns the new step count t.

    Two schedules, with identical arithmetic (so identical results): with at least as
    many blocks as threads, each thread runs whole blocks (phase 1 then phase 2 of its
    block: the blocks are independent, one parallel region per step, Algorithm 2's
    workers); otherwise phase 1 runs in parallel over the K * nI sample rows, then
    phase 2 over the K * J coefficients (two regions per step).
    """
    cdef Py_ssize_t N = X.shape[0], n_out = Y.shape[0]
    cdef Py_ssize_t n_steps = Jidx.shape[0]
    cdef Py_ssize_t I = n_gradient, J = n_expansion, K = n_blocks
    cdef Py_ssize_t it, start, nI, idx, k, i, j, c
    cdef double rate = eta / epoch     # inverse_epoch: eta / epoch (the paper's Section 4.2)
    cdef bint by_block
    if Jidx.shape[1] != K * J or perm.shape[0] != N:
        raise ValueError("dsekl_epoch: inconsistent index arrays")
    if Kb.shape[0] < K or Kb.shape[1] < I or Kb.shape[2] < J or Rb.shape[0] < n_out:
        raise ValueError("dsekl_epoch: scratch buffers too small")
    if n_threads < 1:
        n_threads = 1
    if epoch < 1:
        raise ValueError("dsekl_epoch: epoch numbers start at 1")
    by_block = K > 1 and K >= n_threads
    with nogil:
        for it in range(n_steps):
            t += 1
            if step_rule == INVERSE_T:
                rate = eta / t             # inverse_t: eta / t (the paper's Algorithm 1)
            start = it * I
            nI = N - start
            if nI > I:
                nI = I
            if by_block:
                # block k reads and writes only the coefficients of J_k: independent workers
                for k in prange(K, schedule="static", num_threads=n_threads):
                    for i in range(nI):
                        sample_row(X, Y, A, Jidx, it, k, i, perm[start + i], J, kernel, loss, Kb, Rb)
                    for j in range(J):
                        expansion_column(A, G, Jidx, it, k, j, J, nI, step_rule, eta, rate, lam, Kb, Rb)
            else:
                # phase 1: kernel rows of the gradient sample, f and r, per (block, sample row)
                for idx in prange(K * nI, schedule="static", num_threads=n_threads):
                    sample_row(X, Y, A, Jidx, it, idx // nI, idx % nI, perm[start + idx % nI],
                               J, kernel, loss, Kb, Rb)
                # phase 2: gradient on every expansion coefficient, and its update
                for idx in prange(K * J, schedule="static", num_threads=n_threads):
                    expansion_column(A, G, Jidx, it, idx // J, idx % J, J, nI, step_rule, eta,
                                     rate, lam, Kb, Rb)
    return t


def dsekl_decision(const double[:, ::1] X,      # IN (n, d): rows / sigma
                   const double[:, ::1] S,      # IN (n_sv, d): support rows / sigma
                   const double[:, ::1] coef,   # IN (n_out, n_sv)
                   int kernel, int n_threads,
                   double[:, ::1] out):         # OUT (n, n_out)
    """out[i, c] = sum_s coef[c, s] k(x_i, S_s), parallel over rows."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], n_sv = S.shape[0], n_out = coef.shape[0]
    cdef Py_ssize_t i, s, c
    cdef double kv
    if n_threads < 1:
        n_threads = 1
    with nogil:
        for i in prange(n, schedule="static", num_threads=n_threads):
            for c in range(n_out):
                out[i, c] = 0.0
            for s in range(n_sv):
                kv = kernel_value(&X[i, 0], &S[s, 0], d, kernel)
                for c in range(n_out):
                    # out[i] += coef[:, s] * k(x_i, S_s)
                    out[i, c] += coef[c, s] * kv
