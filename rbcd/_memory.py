"""Memory estimates that let a fit be refused before it starts, instead of swapping or
being killed half-way.

:func:`solver_memory` bounds the extra bytes the linear solver of ``RBRegressor`` /
``RBClassifier`` allocates on top of Z: per target (class of a one-vs-rest classifier, or
column of y), a few arrays of N rows and of D columns. Block CG keeps all targets'
iterates at once (X, R, P, A P, Z P of D x k and the N x k targets, products and
scratch); coordinate descent solves one target at a time but keeps every target's
coefficients (k x D) and the N x k targets. The constants are peaks measured with
tracemalloc on random binning features (N 2000-8000, D 277-476265, k 100-400; AMD EPYC):
CG 6.3-6.9 N k + 4.3 D k float64, CD 1.8-2.0 (N + D) k float64, rounded up.
"""
import os

__all__ = ["available_memory", "check_solver_memory", "solver_memory"]

#: float64 arrays of N and of D entries per target that each solver holds at its peak.
CG_ROW_ARRAYS, CG_COL_ARRAYS = 7.5, 5.0
CD_ROW_ARRAYS, CD_COL_ARRAYS = 2.5, 2.5


def available_memory():
    """Bytes of memory available to a new allocation: MemAvailable of /proc/meminfo where
    it exists, else the free physical pages, else None (unknown: nothing is refused)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def solver_memory(solver, n_rows, n_cols, n_targets):
    """Estimated peak bytes of the ``solver`` ("cg" or "cd") on an N x D Z with k targets."""
    rows, cols = (CG_ROW_ARRAYS, CG_COL_ARRAYS) if solver == "cg" else \
        (CD_ROW_ARRAYS, CD_COL_ARRAYS)
    return int(8 * n_targets * (rows * n_rows + cols * n_cols))


def check_solver_memory(owner, solver, n_rows, n_cols, n_targets, what="targets"):
    """ValueError, before the solver starts, when its estimated peak exceeds the memory
    available; the message gives the estimate and what it grows with."""
    need = solver_memory(solver, n_rows, n_cols, n_targets)
    avail = available_memory()
    if avail is not None and need > avail:
        raise ValueError(
            f"{owner} on {n_rows} rows, {n_cols} random binning "
            f"features and {n_targets} {what} needs about {need / 2**30:.3g} GiB for the "
            f"solver (it grows with {what} x (rows + features)), more than the "
            f"{avail / 2**30:.3g} GiB of memory available: use fewer {what}, fewer rows, or "
            f"fewer features (a larger sigma or fewer n_grids)"
            + ("; solver='cd' holds one class's iterates at a time" if solver != "cd" else ""))
