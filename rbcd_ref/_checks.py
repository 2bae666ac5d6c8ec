"""Small input checks shared by the rbcd_ref estimators.

Every failure is a ``ValueError`` whose message names the offending parameter or the
offending row and column, as the project's contract asks.
"""
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d


def check_int(value, name, low=None):
    """``value`` as a Python int, at least ``low``; bools are rejected."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def check_real(value, name, low=None, high=None, low_open=False):
    """``value`` as a finite float within [low, high] (``(low, high]`` with ``low_open``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None:
        if low_open and value <= low:
            raise ValueError(f"{name} must be > {low}, got {value}")
        if not low_open and value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def check_choice(value, name, choices):
    """``value`` must be one of ``choices`` (compared with ==, so None may be a choice)."""
    for choice in choices:
        if value is choice or (isinstance(value, str) and value == choice):
            return value
    raise ValueError(f"{name} must be one of {list(choices)!r}, got {value!r}")


def first_non_finite(X):
    """(row, column) of the first non-finite entry of dense ``X`` in row-major order, or None."""
    bad = np.argwhere(~np.isfinite(X))
    if bad.shape[0] == 0:
        return None
    return int(bad[0, 0]), int(bad[0, 1])


def check_finite_matrix(X, name="X"):
    """Raise a ValueError naming the first row and column holding NaN or inf."""
    where = first_non_finite(X)
    if where is not None:
        i, j = where
        raise ValueError(
            f"{name} contains NaN or infinity ({float(X[i, j])}) at row {i}, column {j}"
        )


def check_y_given(y, estimator_name):
    """A clear error when fit gets y=None."""
    if y is None:
        raise ValueError(f"{estimator_name} requires y to be passed, but the target y is None")


def check_target(y, n_samples, name="y", allow_2d=True):
    """Float64 target of ``n_samples`` rows, 1-D (or 2-D when allowed), finite."""
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be numeric, got dtype {y.dtype}") from exc
    y = y.astype(np.float64)
    if y.ndim == 0:
        raise ValueError(f"{name} must be 1-D (or 2-D), got a scalar")
    if y.ndim > 2 or (y.ndim == 2 and not allow_2d):
        raise ValueError(f"{name} must be 1-D{' or 2-D' if allow_2d else ''}, got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {y.shape[0]} rows but the feature matrix has {n_samples} rows"
        )
    if y.ndim == 2 and y.shape[1] == 0:
        raise ValueError(f"{name} has no columns (shape {y.shape})")
    if not np.all(np.isfinite(y)):
        bad = np.argwhere(~np.isfinite(y))[0]
        raise ValueError(f"{name} contains NaN or inf (first at index {tuple(int(b) for b in bad)})")
    return y


def check_sample_weight(sample_weight, n_samples):
    """Float64 weights s_i >= 0, finite, of length ``n_samples``, with a positive sum."""
    if sample_weight is None:
        return np.ones(n_samples, dtype=np.float64)
    if isinstance(sample_weight, numbers.Real) and not isinstance(sample_weight, (bool, np.bool_)):
        sample_weight = np.full(n_samples, float(sample_weight))
    s = np.asarray(sample_weight)
    if s.dtype.kind not in "biuf":
        raise ValueError(f"sample_weight must be numeric, got dtype {s.dtype}")
    s = s.astype(np.float64)
    if s.ndim != 1:
        raise ValueError(f"sample_weight must be 1-D, got shape {s.shape}")
    if s.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight has {s.shape[0]} entries but the feature matrix has {n_samples} rows"
        )
    if not np.all(np.isfinite(s)):
        raise ValueError("sample_weight contains NaN or inf")
    if np.any(s < 0):
        raise ValueError("sample_weight must be non-negative")
    if not s.sum() > 0:
        raise ValueError("sample_weight: all weights are zero; they must have a positive sum")
    if not np.isfinite(s.sum()):
        raise ValueError("sample_weight sums past the float64 range (each weight is finite, "
                         "their sum is inf): divide the weights by a constant, e.g. their "
                         "largest")
    return s


def check_feature_matrix(Z, name="Z"):
    """Z (dense or any scipy sparse) as a float64 CSC matrix with sorted row indices.

    The solvers walk the rows of column j in increasing row order, so the CSC copy has
    canonical (sorted, duplicate-free) indices.
    """
    if sp.issparse(Z):
        Zc = sp.csc_matrix(Z, dtype=np.float64, copy=True)
        Zc.sum_duplicates()
        Zc.sort_indices()
        if not np.all(np.isfinite(Zc.data)):
            k = int(np.argwhere(~np.isfinite(Zc.data))[0, 0])
            col = int(np.searchsorted(Zc.indptr, k, side="right") - 1)
            raise ValueError(f"{name} contains NaN or infinity at row {int(Zc.indices[k])}, column {col}")
    else:
        arr = np.asarray(Z)
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
        check_finite_matrix(arr, name)
        Zc = sp.csc_matrix(arr)
        Zc.sort_indices()
    if Zc.shape[0] == 0:
        raise ValueError(f"{name} has 0 rows; at least one is required")
    if Zc.shape[1] == 0:
        raise ValueError(f"{name} has 0 columns; at least one is required")
    return Zc


def check_class_labels(y, n_samples, estimator_name):
    """Class labels of a classifier: (y as 1-D array, classes_, index of each label).

    At least two classes; a column vector (N, 1) is accepted with scikit-learn's
    DataConversionWarning.
    """
    check_y_given(y, estimator_name)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D for {estimator_name}, got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"y has {y.shape[0]} rows but the feature matrix has {n_samples} rows")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or inf")
    check_classification_targets(y)
    classes, index = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            f"{estimator_name} needs samples of at least 2 classes in y, got only one class: "
            f"{classes[0]!r}"
        )
    return y, classes, index


def apply_class_weight(s, class_weight, y, classes):
    """Sample weights s_i times the weight of sample i's class (dict or "balanced")."""
    if class_weight is None:
        return s
    if not (isinstance(class_weight, dict) or (isinstance(class_weight, str) and class_weight == "balanced")):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
    # scikit-learn's rule: a dict may name absent labels when it names every present one
    return s * compute_sample_weight(class_weight, y)


def check_sparse_indices(X, name="X"):
    """A scipy CSR / CSC matrix whose index arrays fit its shape (scipy reads them
    unchecked); anything else passes as it is."""
    if not sp.issparse(X) or X.format not in ("csr", "csc"):
        return X
    n_major, n_minor = X.shape if X.format == "csr" else X.shape[::-1]
    indptr = np.asarray(X.indptr)
    if (len(indptr) != n_major + 1 or indptr[0] != 0 or indptr[-1] > len(X.indices)
            or any(indptr[k + 1] < indptr[k] for k in range(n_major))):
        raise ValueError(f"{name} is a malformed sparse matrix: its indptr does not fit its shape")
    for index in np.asarray(X.indices)[:indptr[-1]]:
        if not 0 <= index < n_minor:
            raise ValueError(f"{name} is a malformed sparse matrix: a stored index {int(index)} "
                             f"lies outside 0..{n_minor - 1} (its shape is {X.shape})")
    return X
