"""Random binning: grids, bins, columns and the sparse feature matrix Z (docs/design.md 2-7).

The estimator is :class:`RandomBinning` (``random_binning``); its stages live in
``_draw`` (parameters, sigma, the grid draw), ``_input`` (X's columns), ``_plan`` (code
paths, tables, costs, memory), ``_binning`` (the kernels), ``_transform`` (Z) and
``columns`` (:class:`RBColumns`, Z's column-major structure for the solvers).
"""
from ._draw import DegenerateBinningWarning
from .columns import RBColumns, column_structure
from .random_binning import RandomBinning, median_l1_distance

__all__ = ["RandomBinning", "RBColumns", "column_structure", "DegenerateBinningWarning",
           "median_l1_distance"]
