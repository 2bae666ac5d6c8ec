"""rbcd_ref: the slow, plain-Python twin of rbcd, written for clarity.

Same public names as rbcd. With the same inputs and ``random_state`` it gives
the same grids, the same Z bit for bit, and the same serial solver iterates:
it is the oracle the fast kernels are tested against (see docs/internals.md).
"""
import importlib

_PUBLIC = {
    "RandomBinning": "binning",
    "CDRegressor": "solvers.cd",
    "CDClassifier": "solvers.cd",
    "cd_path": "solvers.cd",
    "alpha_max": "solvers.cd",
    "RidgeCG": "solvers.cg",
    "RidgeCGClassifier": "solvers.cg",
    "RBRegressor": "models",
    "RBClassifier": "models",
    "RandomFourier": "related.fourier",
    "SparseRandomFeatures": "related.sparse_rf",
    "DoublyStochasticKernelClassifier": "related.dsekl",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        module = importlib.import_module("." + _PUBLIC[name], __name__)
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rbcd_ref' has no attribute {name!r}")


def __dir__():
    return list(__all__)
