"""Random binning: grids, bins, columns and the sparse feature matrix Z (DESIGN.md 2-7)."""
from .random_binning import RandomBinning, RBColumns, column_structure

__all__ = ["RandomBinning", "RBColumns", "column_structure"]
