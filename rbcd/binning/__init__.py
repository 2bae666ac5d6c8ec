"""Random binning: grids, bins, columns and the sparse feature matrix Z (docs/design.md 2-7)."""
from .random_binning import (
    DegenerateBinningWarning,
    RandomBinning,
    RBColumns,
    column_structure,
    median_l1_distance,
)

__all__ = ["RandomBinning", "RBColumns", "column_structure", "DegenerateBinningWarning",
           "median_l1_distance"]
