"""Solvers on a random binning matrix Z: coordinate descent (``cd``) and ridge by CG (``cg``)."""
from .cd import CDClassifier, CDRegressor, alpha_max, cd_path
from .cg import RidgeCG, RidgeCGClassifier

__all__ = ["CDClassifier", "CDRegressor", "RidgeCG", "RidgeCGClassifier", "alpha_max", "cd_path"]
