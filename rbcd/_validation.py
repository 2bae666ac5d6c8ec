"""The one validation layer of rbcd's estimators, and the input checks of the binning.

Parameters: every estimator declares ``_parameter_constraints`` with scikit-learn's
constraint machinery and decorates ``fit`` (and ``partial_fit``-like entry points) with
:func:`fit_context`, so a bad parameter raises scikit-learn's ``InvalidParameterError`` (a
``ValueError`` and a ``TypeError``) naming the parameter, the same way in every estimator.
Shared constraints live here (``N_JOBS``, ``RANDOM_STATE``, ``VERBOSE``, ``POSITIVE_INT``,
``NONNEG_REAL``, ``POSITIVE_REAL``, ``TOL``, ``SIGMA``, and ``RealInterval`` for other
real ranges): use them rather than writing new ones. Constraints that depend on the data (sigma's length against d, say) are checked in
``fit`` with a ValueError that names the parameter.

Data: every failure is a ``ValueError`` whose message names the offending parameter, or the
row and column of the offending value.

``rbcd_ref`` keeps its own checks (``rbcd_ref._checks``): the twin stays independent of the
code it is an oracle for.
"""
import functools
import numbers
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions  # noqa: F401 (re-exported)
from sklearn.utils.validation import _check_n_features, check_array, validate_data

# ---------------------------------------------------------------------------------------
# Shared parameter constraints (scikit-learn's _parameter_constraints vocabulary).
# ---------------------------------------------------------------------------------------
class IntInterval(Interval):
    """scikit-learn's ``Interval(Integral, ...)`` without the bools (an Integral to Python):
    ``max_iter=True`` is refused naming the parameter, not run as one iteration. Use it
    for every integer-valued parameter."""

    def __init__(self, left, right, *, closed):
        super().__init__(Integral, left, right, closed=closed)

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


#: n_jobs: None (OpenMP's default within threadpoolctl limits, less the cores other processes
#: keep busy: rbcd._threads.effective_n_threads), a positive count, or a negative
#: count back from the usable cores (-1 = all). 0 means nothing and is refused here, when the
#: parameters are validated, so that small fits, which never ask for threads, refuse it too.
N_JOBS = [IntInterval(None, -1, closed="right"), IntInterval(1, None, closed="left"), None]
#: random_state: what ``rbcd._random.make_generator`` takes (docs/design.md contract 2): None,
#: a RandomState, any non-negative int (numpy seeds of any size, not only < 2**32), a
#: numpy Generator or a SeedSequence. Negative ints and strings are refused by name.
#: (listed one by one: scikit-learn's "random_state" shorthand would name the ints twice,
#: as [0, 2**32 - 1] and [0, inf), in the error message)
RANDOM_STATE = [Interval(Integral, 0, None, closed="left"), np.random.RandomState, None,
                np.random.Generator, np.random.SeedSequence]
VERBOSE = ["verbose"]
POSITIVE_INT = [IntInterval(1, None, closed="left")]


class RealInterval(Interval):
    """scikit-learn's ``Interval(Real, ...)`` whose values must also convert to float64:
    a Python int beyond float64's range (``10**400``) is refused naming the parameter
    (InvalidParameterError) instead of raising OverflowError inside fit; a bool (a Real to
    Python) is refused too. Use it for every real-valued parameter."""

    def __init__(self, left, right, *, closed):
        super().__init__(Real, left, right, closed=closed)

    def is_satisfied_by(self, val):
        if isinstance(val, (bool, np.bool_)) or not super().is_satisfied_by(val):
            return False
        try:
            float(val)
        except OverflowError:
            return False
        return True

    def __str__(self):
        return super().__str__() + " (within float64's range)"


NONNEG_REAL = [RealInterval(0, None, closed="left")]
POSITIVE_REAL = [RealInterval(0, None, closed="neither")]
#: A stopping tolerance: >= 0 (0 runs to max_iter).
TOL = [RealInterval(0, None, closed="left")]
#: sigma: a positive scalar, an array of length d (checked against the data in fit by
#: :func:`check_sigma`), or "scale" (computed from the training rows).
SIGMA = [RealInterval(0, None, closed="neither"), "array-like", StrOptions({"scale"})]


def fit_context(fit):
    """Decorate an estimator's ``fit``: validate ``_parameter_constraints`` first, and keep
    the previous fit when this one fails.

    scikit-learn's own ``_fit_context``; nested estimators built inside ``fit`` from
    already-validated parameters skip their validation. A fit that raises (bad y or
    sample_weight found after X's feature count was recorded, a solver error, Ctrl-C)
    leaves the estimator's attributes as they were before it: a fitted model still
    predicts as before (a shallow restore: nested estimators that the failed fit
    replaced are put back; arrays and objects it changed in place are not).
    """
    checked = _fit_context(prefer_skip_nested_validation=True)(fit)

    @functools.wraps(fit)
    def fit_or_keep(self, *args, **kwargs):
        before = dict(self.__dict__)
        try:
            return checked(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    return fit_or_keep

INT64_LOW = -(2.0**63)
INT64_HIGH = 2.0**63  # exclusive


def check_int(value, name, low=None):
    """``value`` as a Python int, at least ``low``; bools and floats are rejected."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def check_sigma(sigma, n_features_in):
    """sigma as a float, or a float64 array of length d; positive and finite."""
    if isinstance(sigma, (bool, np.bool_)):
        raise ValueError(f"sigma must be a positive number or array, got {sigma!r}")
    arr = np.asarray(sigma)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"sigma must be a positive number or array, got {sigma!r}")
    arr = arr.astype(np.float64)
    if arr.ndim == 0:
        value = float(arr)
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"sigma must be positive and finite, got {value}")
        return value
    if arr.ndim != 1 or arr.shape[0] != n_features_in:
        raise ValueError(
            f"sigma must be a scalar or an array of length n_features_in_={n_features_in}, "
            f"got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(f"sigma must be positive and finite in every entry, got {arr}")
    return arr


def check_kernel(kernel):
    if not (isinstance(kernel, str) and kernel == "laplacian"):
        raise ValueError(
            f"kernel must be 'laplacian' (the only supported kernel), got {kernel!r}"
        )
    return kernel


def check_output_dtype(dtype):
    """numpy.float32 or numpy.float64 (the dtype of Z's values)."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"dtype must be numpy.float32 or numpy.float64, got {dtype!r}") from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be numpy.float32 or numpy.float64, got {dt}")
    return dt


def plain_float_array(X):
    """X is a numpy float64 C-ordered 2-D array with a row and a column: what
    validate_data(dtype=np.float64, order="C") returns unchanged."""
    return (type(X) is np.ndarray and X.ndim == 2 and X.dtype == np.float64
            and X.flags.c_contiguous and X.shape[0] >= 1 and X.shape[1] >= 1)


def plain_checked(estimator, X, reset, names=True):
    """What validate_data does for an array of :func:`plain_float_array` (or a float64 CSR
    matrix, :func:`plain_csr`), without its data-frame probes (they cost as much as
    binning a few hundred rows, or as a prediction of one row): no feature names, a
    feature count. Finiteness is the caller's (validate_data's is not done here).
    names=False: rows whose feature names the caller has checked (see
    :func:`validate_rows`), so no warning that X has none."""
    _check_n_features(estimator, X, reset=reset)
    if reset:
        if hasattr(estimator, "feature_names_in_"):
            delattr(estimator, "feature_names_in_")
    elif names and getattr(estimator, "feature_names_in_", None) is not None:
        warnings.warn("X does not have valid feature names, but"
                      f" {estimator.__class__.__name__} was fitted with feature names",
                      UserWarning)
    return X


def plain_csr(X):
    """X is a scipy CSR matrix of float64 with at least one row and column and int32 or
    int64 indices: what validate_data(accept_sparse="csr", dtype=np.float64) returns
    unchanged (finiteness aside)."""
    return (type(X) in _CSR_TYPES and X.dtype == np.float64 and X.ndim == 2
            and X.shape[0] >= 1 and X.shape[1] >= 1
            and X.indices.dtype in _INDEX_TYPES and X.indptr.dtype in _INDEX_TYPES)


def built_here(Z):
    """Mark a sparse matrix that rbcd built and passes to its own solver, never to the
    user (a model's features of new rows): :func:`check_sparse_structure` skips its
    O(nnz) pass (a few percent of a large prediction). A slice or copy is unmarked."""
    Z._rbcd_built_here = True
    return Z


def check_sparse_structure(X, name="X"):
    """For a scipy CSR or CSC matrix (or array): its index arrays describe a matrix of
    its shape, else a ValueError naming what is wrong. scipy's conversions and rbcd's
    kernels read them unchecked, so an index out of range (a matrix whose arrays were
    edited in place) would read or write outside the arrays. O(nnz), no copy; other
    inputs pass untouched."""
    if not sp.issparse(X) or X.format not in ("csr", "csc") or \
            X.__dict__.get("_rbcd_built_here", False):
        return X
    n_major, n_minor = X.shape if X.format == "csr" else X.shape[::-1]
    indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
    what = "row" if X.format == "csr" else "column"
    if (indptr.ndim != 1 or indptr.shape[0] != n_major + 1 or indptr[0] != 0
            or indptr[-1] > indices.shape[0] or np.any(indptr[1:] < indptr[:-1])):
        raise ValueError(f"{name} is a malformed sparse matrix: its indptr does not give "
                         f"{n_major} {what}s of non-decreasing offsets into its "
                         f"{indices.shape[0]} stored indices")
    stored = indices[:int(indptr[-1])]
    # one pass: as unsigned, a negative index is larger than any shape
    unsigned = stored.view(np.dtype(f"u{stored.dtype.itemsize}")) if stored.dtype.kind == "i" \
        else stored
    if stored.shape[0] and int(unsigned.max()) >= n_minor:
        bad = int(stored.min()) if stored.min() < 0 else int(stored.max())
        raise ValueError(f"{name} is a malformed sparse matrix: a stored index {bad} lies "
                         f"outside 0..{n_minor - 1} (its shape is {X.shape})")
    return X


def validate_rows(estimator, X, names=True, **kwargs):
    """validate_data(estimator, X, reset=False, **kwargs); with names=False the same
    without the feature-name check, for rows whose names the caller has checked already:
    a model's predict passes its validated rows to its own ``binning_``, a search passes
    its validated rows to its ``best_estimator_``, and both of those record the names of
    the fit (so that they check a user's data frame), which the validated array lacks."""
    if names:
        return validate_data(estimator, X, reset=False, **kwargs)
    X = check_array(X, input_name="X", estimator=estimator, **kwargs)
    _check_n_features(estimator, X, reset=False)
    return X


def check_predict_csr(estimator, X, **kwargs):
    """validate_data(estimator, X, reset=False, **kwargs) (kwargs accepting CSR of
    float64 and checking finiteness), with the short way of :func:`plain_checked` for a
    float64 CSR matrix of finite values: the features a model built for its solver.
    A malformed CSR or CSC matrix is refused first (:func:`check_sparse_structure`)."""
    check_sparse_structure(X)
    if plain_csr(X) and np.isfinite(X.data).all():
        return plain_checked(estimator, X, reset=False)
    return validate_data(estimator, X, reset=False, **kwargs)


_CSR_TYPES = (sp.csr_matrix, getattr(sp, "csr_array", sp.csr_matrix))
_INDEX_TYPES = (np.dtype(np.int32), np.dtype(np.int64))


def check_dense_X(estimator, X, reset, names=True):
    """X as a C-ordered float64 2-D array (copied only when needed).

    Dense only: sparse input is rejected. Finiteness is not checked here: the
    binning kernel's first pass finds the first non-finite entry (see
    :func:`raise_non_finite`). names=False (with reset=False): no feature-name check
    (:func:`validate_rows`).
    """
    if sp.issparse(X):
        raise ValueError(
            f"{type(estimator).__name__} needs dense X: sparse input is not supported "
            "(random binning of sparse data would bin every zero; use X.toarray())"
        )
    if plain_float_array(X):
        return plain_checked(estimator, X, reset, names)
    return _validated(
        estimator,
        X,
        reset,
        names,
        accept_sparse=False,
        dtype=np.float64,
        order="C",
        ensure_all_finite=False,
        ensure_2d=True,
        ensure_min_samples=1,
        ensure_min_features=1,
    )


def _validated(estimator, X, reset, names, **kwargs):
    """validate_data(estimator, X, reset=reset, **kwargs), or :func:`validate_rows`
    without the name check (names=False, reset=False)."""
    if reset or names:
        return validate_data(estimator, X, reset=reset, **kwargs)
    return validate_rows(estimator, X, names=False, **kwargs)


def check_X(estimator, X, reset, names=True):
    """X as a C-ordered float64 2-D array, or (scipy sparse CSR or CSC input) as a
    float64 CSR matrix in canonical form (sorted indices, no duplicates: duplicates
    are summed, as ``toarray`` does; the caller's matrix is not modified).

    An implicit zero of sparse X is the value 0. Finiteness: dense X is checked by
    the binning kernel's first pass (:func:`raise_non_finite`); sparse X here, with
    the same message naming the first (row-major) row and column. names=False (with
    reset=False): rows whose feature names the caller has checked (:func:`validate_rows`).
    """
    if not sp.issparse(X):
        return check_dense_X(estimator, X, reset, names)
    check_sparse_structure(X)
    X = _validated(
        estimator,
        X,
        reset,
        names,
        accept_sparse=["csr", "csc"],
        dtype=np.float64,
        ensure_all_finite=False,
        ensure_2d=True,
        ensure_min_samples=1,
        ensure_min_features=1,
    )
    X = canonical_csr(X)
    found = first_non_finite_csr(X)
    if found is not None:
        i, j, value = found
        raise ValueError(f"X contains NaN or infinity ({value!r}) at row {i}, column {j}")
    return X


def canonical_csr(X):
    """Sparse X as a float64 scipy CSR matrix in canonical form (sorted indices, duplicates
    summed, as ``toarray`` sums them); the caller's matrix is not modified."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=X.format != "csr")  # csr_matrix: the
    if not X.has_canonical_format:                                   # interface of scipy's
        X = X.copy()
        X.sum_duplicates()
    return X


def first_non_finite_csr(X):
    """(row, column, value) of the first non-finite stored value of CSR matrix X in
    row-major order (its indices need not be sorted), or None."""
    bad = np.flatnonzero(~np.isfinite(X.data))
    if not bad.shape[0]:
        return None
    rows = np.searchsorted(X.indptr, bad, side="right") - 1
    k = bad[np.lexsort((X.indices[bad], rows))[0]]
    i = int(np.searchsorted(X.indptr, k, side="right") - 1)
    return i, int(X.indices[k]), float(X.data[k])


def raise_non_finite(X, flat_index, name="X"):
    """Raise the ValueError for the first non-finite entry (flat row-major index)."""
    d = X.shape[1]
    i, j = divmod(int(flat_index), d)
    raise ValueError(
        f"{name} contains NaN or infinity ({float(X[i, j])!r}) at row {i}, column {j}"
    )


def raise_too_large(i, j, r, value):
    """Raise the ValueError for a bin that does not fit in int64."""
    raise ValueError(
        f"X values too large to bin at row {i}, column {j} "
        f"(grid {r}: bin {float(value)!r} does not fit in int64)"
    )


def index_dtype(n_columns, nnz):
    """int32 for both CSR index arrays unless the column count or nnz needs int64."""
    if n_columns >= 2**31 or nnz >= 2**31:
        return np.dtype(np.int64)
    return np.dtype(np.int32)


# ---------------------------------------------------------------------------------------
# Weights and targets: one set of checks and messages for every estimator (local, the
# models and rbcd.dask), each failure naming the parameter.
# ---------------------------------------------------------------------------------------
def first_non_finite(a):
    """(index, value) of the first NaN or inf of float array ``a`` in row-major order (the
    index an int for 1-D, a tuple of ints otherwise), or None."""
    bad = ~np.isfinite(a)
    if not bad.any():
        return None
    first = np.argwhere(bad)[0]
    where = int(first[0]) if a.ndim == 1 else tuple(int(b) for b in first)
    return where, float(a[tuple(first)])


def non_finite_message(name, found):
    """The message for :func:`first_non_finite`'s answer in ``name`` (y, sample_weight)."""
    where, value = found
    return f"{name} contains NaN or inf ({value!r} at index {where})"


def wrong_length(name, n_other, n_rows, matrix="X"):
    """The message for y (rows) or sample_weight (entries) of another length than X."""
    unit = "entries" if name == "sample_weight" else "rows"
    return f"{name} has {int(n_other)} {unit} but {matrix} has {int(n_rows)} rows"


def check_sample_weight(sample_weight, n_samples):
    """``sample_weight`` as float64 (n_samples,), finite, >= 0, with a positive sum; None
    stays None (unit weights). A scalar is that weight for every row. Every failure is a
    ValueError naming ``sample_weight`` (a wrong shape too, rather than numpy's broadcast
    error)."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Real) and not isinstance(sample_weight, (bool, np.bool_)):
        s = np.full(n_samples, float(sample_weight))
    else:
        if sp.issparse(sample_weight):
            raise ValueError("sample_weight must be a 1-D array, got a sparse matrix")
        s = np.asarray(sample_weight)
        if s.dtype.kind not in "biuf":
            raise ValueError(f"sample_weight must be numeric, got dtype {s.dtype}")
        s = np.ascontiguousarray(s, dtype=np.float64)
        if s.ndim != 1:
            raise ValueError(f"sample_weight must be 1-D with one weight per row, got shape "
                             f"{s.shape}")
        if s.shape[0] != n_samples:
            raise ValueError(wrong_length("sample_weight", s.shape[0], n_samples))
    found = first_non_finite(s)
    if found is not None:
        raise ValueError(non_finite_message("sample_weight", found))
    if np.any(s < 0):
        i = int(np.flatnonzero(s < 0)[0])
        raise ValueError(negative_weight_message(i, float(s[i])))
    if not s.sum() > 0:
        raise ValueError("sample_weight must have a positive sum (the weights are all zero)")
    if not np.isfinite(s.sum()):
        raise ValueError(WEIGHT_SUM_OVERFLOW)
    return s


def negative_weight_message(i, value):
    """The message of a negative sample weight ``value`` at row ``i``."""
    return f"sample_weight must be non-negative, got {value!r} at index {i}"


#: the message for weights whose sum overflows float64 (every weight finite)
WEIGHT_SUM_OVERFLOW = ("sample_weight sums past the float64 range (each weight is finite, "
                       "their sum is inf): divide the weights by a constant, e.g. their "
                       "largest")


def check_class_weight(class_weight):
    """A ``class_weight`` dict's weights must be finite non-negative reals ("balanced" and
    None pass; anything else is for the estimator's parameter constraints). Returns it."""
    if isinstance(class_weight, dict):
        for label, weight in class_weight.items():
            if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, numbers.Real):
                raise ValueError(f"class_weight must map each class to a number, got "
                                 f"{weight!r} for class {label!r}")
            if not (np.isfinite(float(weight)) and float(weight) >= 0):
                raise ValueError(f"class_weight must be finite and non-negative, got "
                                 f"{weight!r} for class {label!r}")
    return class_weight


def dict_class_weight_rows(class_weight, y):
    """Each row's weight under a ``class_weight`` dict, computed over all the labels of y
    (scikit-learn's compute_sample_weight: the labels a dict leaves out weigh 1, and it
    may name labels y lacks only when it names every label y has); None for None or
    "balanced". For fits on a subset of the classes (one-vs-one pairs): a dict's weights
    do not depend on which rows are present, but scikit-learn's rule applied to a pair's
    two labels refuses a dict that names other labels and leaves one of the pair out,
    although the dict is valid for y. ("balanced" stays the pair's own.)"""
    if not isinstance(class_weight, dict):
        return None
    from sklearn.utils.class_weight import compute_sample_weight

    return compute_sample_weight(check_class_weight(class_weight), y)


def first_bad_object(y, regression):
    """(index, value) of the first entry of an object-dtype y, in row-major order, that the
    checks below refuse, or None (None too for other dtypes): a regression target that is
    not a real number (None, a bool, a string), a class label that is None or a non-finite
    number. The index is an int for 1-D y, numpy's unravel_index tuple else."""
    if y.dtype.kind != "O":
        return None
    for i, v in enumerate(y.ravel()):
        if regression:
            bad = v is None or isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real)
        else:
            bad = v is None or (isinstance(v, numbers.Real) and not np.isfinite(float(v)))
        if bad:
            return (np.unravel_index(i, y.shape) if y.ndim > 1 else i), v
    return None


def bad_object_message(found, regression):
    """The message of :func:`first_bad_object`'s answer."""
    where, v = found
    if regression:
        return f"y must be numeric for regression, got {v!r} at index {where}"
    return f"y contains {v!r} at index {where}: class labels must be finite numbers or strings"


def check_regression_target(y, n_samples=None, matrix="X"):
    """Regression ``y`` as float64 (1-D or 2-D), every entry finite: an object array
    holding None, inf or non-numbers is refused by name (numpy would turn None into NaN
    and scikit-learn's object-dtype check sees only NaN)."""
    y = np.asarray(y)
    if y.dtype.kind not in "biufO":
        raise ValueError(f"y must be numeric for regression, got dtype {y.dtype}")
    if y.dtype.kind == "O":
        found = first_bad_object(y, True)
        if found is not None:
            raise ValueError(bad_object_message(found, True))
        y = y.astype(np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 0 or y.ndim > 2:
        raise ValueError(f"y must be 1-D or 2-D, got shape {y.shape}")
    if n_samples is not None and y.shape[0] != n_samples:
        raise ValueError(wrong_length("y", y.shape[0], n_samples, matrix))
    if y.ndim == 2 and y.shape[1] == 0:
        raise ValueError(f"y has no columns (shape {y.shape})")
    found = first_non_finite(y)
    if found is not None:
        raise ValueError(non_finite_message("y", found))
    return y


def check_class_labels(y, n_samples, owner):
    """Classification ``y`` (1-D; a column vector is ravelled with scikit-learn's
    DataConversionWarning): labels of one kind, finite, at least two classes. ``owner``
    names the estimator in the messages (the one the user called). Returns y."""
    from sklearn.exceptions import DataConversionWarning
    from sklearn.utils.multiclass import check_classification_targets

    from ._warnings import warn

    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warn("A column-vector y was passed when a 1d array was expected; it is ravelled.",
             DataConversionWarning)
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D for {owner}, got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(wrong_length("y", y.shape[0], n_samples))
    if y.dtype.kind == "O":
        found = first_bad_object(y, False)
        if found is not None:
            raise ValueError(bad_object_message(found, False))
    elif y.dtype.kind == "f":
        found = first_non_finite(y)
        if found is not None:
            raise ValueError(non_finite_message("y", found))
    check_classification_targets(y)
    classes = np.unique(y)
    if classes.shape[0] < 2:
        got = (f"only one class: {classes[0].tolist()!r}" if classes.shape[0]
               else "no sample (y is empty)")
        raise ValueError(f"{owner} needs samples of at least 2 classes in y, got {got}")
    return y
