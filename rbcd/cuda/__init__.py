"""The GPU path of rbcd (optional extra ``rbcd[cuda]``: CuPy): binning, CG and prediction on
one GPU, behind ``device="cuda"`` of RandomBinning, RidgeCG / RidgeCGClassifier and
RBRegressor / RBClassifier (docs/gpu.md).

Every stage is written against an array module ``xp``: cupy on a GPU, numpy in CI, where
tests/test_cuda_xp.py checks the algorithms against the CPU binning and solver. Importing
this package never needs CuPy; using ``device="cuda"`` without it is a clear ImportError.
"""
from ._ops import cupy_module, get_xp, to_host
from .binning import GridLayout
from .cg import solve_ridge

__all__ = ["GridLayout", "cupy_module", "get_xp", "solve_ridge", "to_host", "available"]


def available():
    """Whether device="cuda" can run here (CuPy importable and a CUDA device present)."""
    try:
        cupy_module()
    except ImportError:
        return False
    return True
