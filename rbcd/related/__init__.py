"""The related papers' systems: random Fourier features (Rahimi & Recht 2007), sparse random
features (Yen et al. 2014) and doubly stochastic empirical kernel learning (DSEKL)."""
from .dsekl import DoublyStochasticKernelClassifier
from .fourier import RandomFourier
from .sparse_rf import SparseRandomFeatures

__all__ = ["DoublyStochasticKernelClassifier", "RandomFourier", "SparseRandomFeatures"]
