"""Random binning features (Rahimi & Recht 2007; Wu et al., KDD 2016).

Each of R random grids cuts input dimension j into intervals of width
delta[r, j] ~ Gamma(2, sigma_j) shifted by u[r, j] ~ Uniform(0, delta[r, j]);
a point's bin in grid r is ``floor((x - u[r]) / delta[r])``. Z has one column
per non-empty bin, value 1/sqrt(R) where the point falls, so
z(x) . z(y) = (number of grids where x and y share a bin) / R, an unbiased
estimate of the Laplacian kernel exp(-||x - y||_1 / sigma).

This module holds the estimator; each stage lives in its own module, in the order a
fit runs them:

- ``_draw``: the checked parameters, sigma, the grid draw (docs/design.md contract 2)
  and the features constant over the training rows; the degenerate-grid warning;
- ``_input``: X's column extremes and dense column copies, the int64 range check of
  the bins;
- ``_plan``: the code paths, per-grid keys and tables (thresholds, direct tables, the
  dense index), the split of the grids among threads, memory estimates;
- ``_binning`` (Cython): the nogil kernels that fit the tables and bin rows;
- ``_transform``: Z (CSR) of the training rows and of new rows from the kernels' output;
- ``columns``: :class:`RBColumns`, Z's column-major structure for the solvers, built in
  O(nnz), never by a sort.
"""
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted

from . import _binning
from .._scale import median_l1_distance
from .._threads import effective_n_threads
from .._validation import (
    N_JOBS,
    POSITIVE_INT,
    IntInterval,
    RANDOM_STATE,
    SIGMA,
    check_int,
    check_output_dtype,
    check_sample_weight,
    check_X,
    fit_context,
    index_dtype,
)
from .._integrity import ChecksummedState
# The stages' names stay importable from here: callers and tests import them from this
# module, and pickles of earlier releases name it for _GridDraw, _ConstantColumns and
# _restore_grid_tables (GridTables.__reduce__).
from ._draw import (  # noqa: F401
    DEGENERATE_MIN_ROWS,
    DRAW_BLOCK,
    KAPPA_HIGH_FRACTION,
    KAPPA_LOW,
    MAX_DRAW_ENTRIES,
    DegenerateBinningWarning,
    _constant_spans,
    _ConstantColumns,
    _GridDraw,
    _warn_if_degenerate,
    check_params,
    draw_grids,
    resolve_sigma,
)
from ._input import (  # noqa: F401
    _bin_range,
    _describe_sigma,
    _extremes,
    _raise_bad_bins,
    _sparse_extremes,
    _sparse_take,
    _take_columns,
)
from ._plan import (  # noqa: F401
    COST_DIRECT,
    COST_DIRECT_L2,
    COST_DIVISION_COLUMN,
    COST_GRID,
    COST_HASH,
    COST_L2_BYTES,
    DIRECT_BYTES_PER_ENTRY,
    DIRECT_MAX_BITS,
    DIRECT_PER_ROW,
    GRID_BYTES_PER_ENTRY,
    INDEX_MAX_BITS,
    INDEX_PER_BIN,
    MEMORY_CHECK_FLOOR,
    SMALL_WORK,
    THRESHOLDS_PER_COLUMN,
    _available_memory,
    _bit_length,
    _check_memory,
    _DEFAULT_PATHS,
    _dense_bits,
    _direct_bits,
    _drop_constants,
    _fit_memory,
    _fit_ranges,
    _fit_team,
    _grid_bounds,
    _grid_costs,
    _grid_layout,
    _jobs_for,
    _key_bits,
    _Paths,
    _range_bounds,
    _restore_grid_tables,
    _threads_for,
    _thresholds,
    _use_thresholds,
    check_transform_memory,
)
from ._transform import (  # noqa: F401
    _constant_data,
    _drop_entries,
    columns_of_training,
    exact_input,
    training_Z,
    transform_exact,
    transform_hashed,
)
from .columns import RBColumns, _check_grid_ptr, column_structure, structure_difference  # noqa: F401

__all__ = ["RandomBinning", "RBColumns", "column_structure", "DegenerateBinningWarning",
           "median_l1_distance"]

#: get_feature_names_out names at most this many columns (hashed mode may ask for 2**62).
MAX_FEATURE_NAMES = 1 << 26


def _weights(X, sample_weight):
    """``sample_weight`` checked against X's rows (None stays None)."""
    if sample_weight is None:
        return None
    from sklearn.utils.validation import _num_samples

    return check_sample_weight(sample_weight, _num_samples(X))


class RandomBinning(ChecksummedState, TransformerMixin, BaseEstimator):
    """Random binning features for the Laplacian kernel.

    The kernel is the L1 Laplacian ``k(x, y) = exp(-||x - y||_1 / sigma)``
    (scikit-learn's ``laplacian_kernel`` with ``gamma = 1 / sigma``), or with
    a per-feature sigma ``exp(-sum_j |x_j - y_j| / sigma_j)``. Z has exactly
    ``n_grids`` entries of value ``1/sqrt(n_grids)`` per training row and
    ``Z @ Z.T`` estimates the kernel matrix without bias.

    Parameters
    ----------
    n_grids : int, default=64
        R, the number of random grids.
    sigma : "scale", float or array of shape (n_features_in_,), default="scale"
        Kernel bandwidth, positive; one per input feature if an array. Widths
        are drawn ``delta[r, j] ~ Gamma(shape 2, scale sigma_j)``. ``"scale"``
        computes it from the training rows: a fixed multiple (0.5) of
        ``rbcd.median_l1_distance(X)``, the median L1 distance of sampled pairs of
        rows, the same for every ``random_state``. To tune
        around it, search a few multipliers of that distance::

            d = rbcd.median_l1_distance(X)
            for c in (0.25, 0.5, 1, 2, 4):
                RandomBinning(sigma=c * d)

        A smaller sigma gives finer grids (more, smaller bins: a narrower kernel);
        a larger one coarser grids. The value used is stored as ``sigma_``.
    kernel : {"laplacian"}, default="laplacian"
        The only kernel.
    n_features : int or None, default=None
        None: exact mode. One column per distinct non-empty bin of every grid
        on the training data, numbered by first appearance (grid by grid).
        In ``transform``, a bin never seen in fit contributes no entry, so a
        new row may have fewer than R entries (none if far from all training
        data). The fitted tables hold only the bin vectors (packed), no
        training rows: O(D) memory.
        m: hashed mode. Column = a fixed 64-bit hash of (grid, bin vector)
        modulo m (docs/design.md contract 5); stateless, every row of any data gets
        its R grids' columns, entries that collide within a row are summed
        (stored value k / sqrt(R)). For streaming and distributed use.
    dtype : numpy.float32 or numpy.float64, default=numpy.float64
        dtype of Z's values. Binning always runs in float64 (float32 input
        converts exactly).
    n_jobs : int or None, default=None
        Threads of the binning kernels (None: the OpenMP default, within threadpoolctl
        limits, less the cores that other processes keep busy at the time; -1: all
        cores). The output does not depend on it.
    random_state : None, int, SeedSequence, Generator or RandomState
        Seeds the grid draw.
    device : "cpu" or "cuda", default "cpu"
        "cuda": fit and transform on one GPU through CuPy (the ``rbcd[cuda]`` extra, exact
        mode only; docs/gpu.md): the same grids, the same Z bit for bit, returned as a
        cupyx.scipy.sparse CSR matrix; X may be numpy, CuPy or any array with
        ``__cuda_array_interface__``. ``to_cpu()`` gives the equal CPU binning.

    Attributes
    ----------
    widths_, offsets_ : ndarray (n_grids, n_features_in_)
        delta[r, j] and u[r, j].
    n_bins_ : int64 ndarray (n_grids,)
        Non-empty bins of each grid on the training data.
    grid_ptr_ : int64 ndarray (n_grids + 1,) or None
        Column boundaries of the grids, ``concatenate([[0], cumsum(n_bins_)])``
        (None in hashed mode, where grids share columns).
    n_features_out_ : int
        D, the number of columns of Z (m in hashed mode).
    kappa_per_grid_ : ndarray (n_grids,)
        kappa_r = 1 / nu_r, nu_r = (largest bin count) / N (paper, Def. 1).
    kappa_ : float
        Mean of ``kappa_per_grid_``. Near N (every training row alone in its
        bins) or near 1 (every row in one bin) the grids are degenerate and fit
        warns (:class:`DegenerateBinningWarning`).
    sigma_ : float or ndarray (n_features_in_,)
        The numeric sigma the grids were drawn with (the value ``"scale"`` gave,
        or the given number or array as float64).
    n_features_in_ : int
        d.

    Notes
    -----
    Bins are ``floor((x_j - u[r, j]) / delta[r, j])`` in float64 (true
    division semantics, bit for bit as ``rbcd_ref``); a non-finite value, or a
    bin outside int64, is a ValueError naming its row and column.

    ``fit_transform`` writes the CSR arrays directly (``indptr = R * arange(N + 1)``,
    int32 indices while nnz < 2**31) and is parallel over grids: each thread
    builds the hash tables of a block of grids, so Z does not depend on
    ``n_jobs``. ``transform`` is parallel over rows. With AVX-512 the bins are
    computed with a reciprocal multiply that is checked to have the same floor
    as the division (the few lanes near a bin edge are divided); the output is
    identical either way.

    Sparse and wide input: X may be a scipy sparse CSR or CSC matrix (an implicit
    zero is the value 0). In exact mode, features that are constant over the
    training rows (every all-zero column of sparse data, say) put every training row
    in the same bin, so the tables key on the varying features only and the fitted
    state, time and memory grow with their number, not with d: for the constant
    ones only the value, an interval around it inside its bin in every grid, and
    the generator's state are kept (``widths_`` and ``offsets_`` are drawn again
    when read). A new row that leaves such an interval has its bins in that
    feature computed again; in each grid where it left the training value's bin it
    gets no entry (a bin unseen in fit). Hashed mode keeps the (R, d) arrays (its
    hash covers every feature's bin).

    Memory: Z (12 bytes per entry in float64 / int32) plus, during fit, the
    tables: about 20 to 35 bytes per distinct bin (8 per 64-bit key word). With
    grids so fine that almost every training point has its own bin (D close
    to N * R, ``kappa_`` close to N) the tables are as large as Z; such grids
    also give a useless kernel estimate (fit warns, ``DegenerateBinningWarning``):
    increase sigma. A fit (or transform) whose estimated memory (grid arrays and each
    grid's objects, the dense copy of the varying features, the threads' scratch, Z; the
    tables of the bins found come on top) exceeds the memory available (MemAvailable of
    /proc/meminfo) is refused before the work starts.

    Examples
    --------
    >>> import numpy as np
    >>> from rbcd import RandomBinning
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> rb = RandomBinning(n_grids=32, sigma=2.0, random_state=0)
    >>> Z = rb.fit_transform(X)
    >>> Z.shape[0], Z.nnz == 100 * 32
    (100, True)
    """

    def __init__(self, n_grids=64, sigma="scale", kernel="laplacian", n_features=None,
                 dtype=np.float64, n_jobs=None, random_state=None, device="cpu"):
        self.n_grids = n_grids
        self.sigma = sigma
        self.kernel = kernel
        self.n_features = n_features
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.device = device

    _parameter_constraints = {
        "n_grids": POSITIVE_INT,
        "sigma": SIGMA,
        "kernel": [StrOptions({"laplacian"})],
        "n_features": [IntInterval(1, 2**63 - 1, closed="both"), None],
        "dtype": "no_validation",  # check_output_dtype: float32 or float64
        "n_jobs": N_JOBS,
        # what rbcd._random.make_generator takes (docs/design.md contract 2)
        "random_state": RANDOM_STATE,
        "device": [StrOptions({"cpu", "cuda"})],  # "cuda": rbcd.cuda (docs/gpu.md)
    }


    # ------------------------------------------------------------------ checks
    def _check_params(self, X):
        """The checked parameters (:func:`._draw.check_params`)."""
        return check_params(self, X)

    def _draw(self, X, paths, mode="fit", sample_weight=None):
        """Validate X and the parameters, draw the grids and bound the bins: a
        :class:`._draw.Drawn` (:func:`._draw.draw_grids`)."""
        return draw_grids(self, X, paths, mode, sample_weight)

    # ------------------------------------------------------------------ fit
    def _fit(self, X, mode, paths=None, sample_weight=None):
        """Fit; ``mode`` is "fit", "Z" (also return training ids) or "columns".
        ``paths``: a :class:`_Paths` (tests force a code path; None: the default);
        ``sample_weight``: checked weights for sigma="scale", or None.
        Returns the dense varying columns of X (what the kernels bin), the training ids,
        the column counts and the thread count."""
        paths = _DEFAULT_PATHS if paths is None else paths
        (X, widths, offsets, lo, hi, cmin, cmax, sigma, dtype, n_threads,
         constant) = self._draw(X, paths, mode, sample_weight)
        n_samples = X.shape[0]
        R = widths.shape[0]
        exact = self.n_features is None
        grids = _grid_layout(widths, offsets, lo, hi, cmin, cmax, exact, paths.thresholds)
        nnz = n_samples * R
        idx = index_dtype(0, nnz)  # D <= nnz for the training rows
        ids = _binning.empty(nnz if (exact and mode != "fit") else 0, idx)
        # bits of each single-word key: the bits used in its one word (pack_layout)
        key_bits = np.where(grids.n_words == 1, grids.top_bits, -1).astype(np.int64)
        n_ranges = _fit_ranges(n_threads, n_samples, paths)
        if n_ranges:  # row ranges: a direct table per range, sized for the range's rows
            direct = _direct_bits(lo, hi, grids.n_words, -(-n_samples // n_ranges), key_bits,
                                  paths.direct)
            bounds = np.array([0, R], dtype=np.int64)
        else:
            direct = _direct_bits(lo, hi, grids.n_words, n_samples, key_bits, paths.direct)
            bounds = _grid_bounds(_grid_costs(grids.thr_ptr, grids.use_thr, direct,
                                              grids.n_words, X.shape[1]), n_threads)
        n_bins, max_count, dirs, offs, ents, counts = _binning.fit_tables(
            X, grids, direct, ids, mode == "columns", bounds, paths, n_ranges, n_threads,
            paths.merge_pairs, team=not n_ranges and _fit_team(paths))
        self._constant_columns = constant
        self._widths, self._offsets = (None, None) if constant is not None else (widths, offsets)
        self.n_bins_ = n_bins
        nu = max_count / n_samples  # paper Definition 1: nu_r = largest bin count / N
        self.kappa_per_grid_ = 1.0 / nu
        self.kappa_ = float(np.mean(self.kappa_per_grid_))
        self.sigma_ = sigma
        self._dtype_ = dtype
        _warn_if_degenerate(self.kappa_, n_samples, sigma, self.sigma,
                            identical=bool(np.all(cmin == cmax)))
        if exact:
            self.grid_ptr_ = np.zeros(R + 1, dtype=np.int64)
            np.cumsum(n_bins, out=self.grid_ptr_[1:])
            self.n_features_out_ = int(self.grid_ptr_[-1])
            grids.set_tables(self.grid_ptr_, dirs, offs, ents, False)
            grids.build_index(_dense_bits(lo, hi, grids.n_words, n_bins, key_bits), n_threads)
            self._tables = grids
        else:
            self.grid_ptr_ = None
            self.n_features_out_ = int(self.n_features)
            self._tables = None
            del dirs, offs, ents
        return X, ids, counts, n_threads

    @fit_context
    def fit(self, X, y=None, sample_weight=None, *, _paths=None):
        """Draw the grids and build the per-grid bin tables of X.

        Parameters
        ----------
        X : array-like or scipy sparse CSR / CSC matrix (n_samples, n_features)
            Any real dtype; an implicit zero of sparse X is the value 0 (Z is the
            dense input's, bit for bit).
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the rows, used by ``sigma="scale"`` only: its pairs
            are drawn by weight (``rbcd.median_l1_distance``), so integer weights give
            the sigma of the rows repeated and a zero weight that of the row removed.
            The grids and tables do not depend on them.

        Returns
        -------
        self
        """
        if self.device == "cuda":
            from ..cuda import binning as cuda_binning
            return cuda_binning.fit(self, X, cuda_binning.get_xp("cuda"), sample_weight)
        self._fit(X, "fit", _paths, _weights(X, sample_weight))
        return self

    @fit_context

    def fit_transform(self, X, y=None, return_columns=False, sample_weight=None, *,
                      _paths=None):
        """Fit and return Z of the training rows (equal to ``fit(X).transform(X)``).

        In exact mode the CSR arrays are written directly: ``indptr = R * arange(N + 1)``
        and row i's columns at ``indices[i * R:(i + 1) * R]``.

        Parameters
        ----------
        X : array-like or scipy sparse CSR / CSC matrix (n_samples, n_features)
            Any real dtype; an implicit zero of sparse X is the value 0 (Z is the
            dense input's, bit for bit).
        y : ignored
        return_columns : bool, default=False
            Also return the :class:`RBColumns` of Z (exact mode only), built in the
            same pass: the column-major structure the solvers take (``columns=``).
        sample_weight : array-like of shape (n_samples,), default=None
            As in :meth:`fit`: for ``sigma="scale"`` only.

        Returns
        -------
        Z : scipy.sparse.csr_matrix (n_samples, n_features_out_)
        columns : RBColumns
            Only with ``return_columns=True``; describes exactly this Z.
        """
        if self.device == "cuda":  # Z as a cupyx CSR; the columns: a rbcd.cuda.GridLayout
            from ..cuda import binning as cuda_binning
            return cuda_binning.fit_transform(self, X, cuda_binning.get_xp("cuda"),
                                              return_columns, sample_weight)
        paths = _DEFAULT_PATHS if _paths is None else _paths
        sample_weight = _weights(X, sample_weight)
        if return_columns:
            return columns_of_training(self, X, paths, sample_weight)
        if self.n_features is not None:
            X, _, _, n_threads = self._fit(X, "fit", paths, sample_weight)
            return transform_hashed(self, X, n_threads, paths)
        X, ids, _, n_threads = self._fit(X, "Z", paths, sample_weight)
        return training_Z(self, X.shape[0], ids, n_threads)

    def _fit_transform_columns(self, X, *, _paths=None):
        """``fit_transform(X, return_columns=True)`` (kept for callers of the old name)."""
        return self.fit_transform(X, return_columns=True, _paths=_paths)

    def _value(self):
        return np.float64(1.0) / np.sqrt(np.float64(self.n_bins_.shape[0]))

    def to_cpu(self):
        """This binning with device="cpu": a device fit's tables rebuilt on the host (the
        same Z for any X); a CPU-fitted binning is returned as it is."""
        from ..cuda.binning import to_cpu
        return to_cpu(self)

    @property
    def widths_(self):
        """delta[r, j], shape (n_grids, n_features_in_) (drawn again on each access when
        some features are constant over the training rows: the fitted state keeps only
        how to draw them)."""
        return self._drawn_grids()[0]

    @property
    def offsets_(self):
        """u[r, j], shape (n_grids, n_features_in_) (see ``widths_``)."""
        return self._drawn_grids()[1]

    def _drawn_grids(self):
        state = self.__dict__
        constant = state.get("_constant_columns")
        if constant is not None:
            return constant.draw.columns()
        if state.get("_widths") is not None:
            return state["_widths"], state["_offsets"]
        if "widths_" in state:  # a pickle of an earlier version
            return state["widths_"], state["offsets_"]
        raise AttributeError("this RandomBinning is not fitted: no widths_ / offsets_")

    # ------------------------------------------------------------------ transform
    def transform(self, X, *, _paths=None):
        """Z, the CSR random binning features of X (sorted indices).

        Exact mode: a bin never seen in fit gives no entry. Hashed mode: the
        documented hash, duplicates within a row summed.
        """
        return self._transform(X, _paths)

    def _transform(self, X, paths=None, names=True):
        """transform; names=False for rows whose feature names the caller has checked (a
        model's rows for its ``binning_``, which records the names of the model's fit)."""
        check_is_fitted(self, "n_bins_")
        if "_cuda_tables" in self.__dict__:  # fitted with device="cuda": Z as a cupyx CSR
            from ..cuda import binning as cuda_binning
            return cuda_binning.transform(self, X, cuda_binning.get_xp("cuda"), names)
        paths = _DEFAULT_PATHS if paths is None else paths
        X = check_X(self, X, reset=False, names=names)
        n_threads = _jobs_for(self.n_jobs, X.shape[0] * X.shape[1] * self.n_bins_.shape[0],
                              paths)
        constant = self.__dict__.get("_constant_columns")
        n_copy = X.shape[1] if constant is None else max(constant.varying.shape[0], 1)
        check_transform_memory(X, self.n_bins_.shape[0], n_copy, n_threads)
        if self.grid_ptr_ is not None:  # the mode of the fit, not of later set_params
            return transform_exact(self, X, *self._extremes_of(X, n_threads), n_threads, paths)
        self._check_hashed(X, n_threads)
        return transform_hashed(self, _take_columns(X), n_threads, paths)

    def _extremes_of(self, X, n_threads):
        """Exact mode: dense X's column extremes, the non-finite check of every column
        (check_X did sparse X, whose extremes are those of its varying columns only:
        nothing of length d; (None, None) then)."""
        return (None, None) if sp.issparse(X) else _extremes(X, n_threads)

    def _check_hashed(self, X, n_threads):
        """Hashed mode: the non-finite check and every bin within int64."""
        cmin, cmax = _extremes(X, n_threads)
        widths, offsets = self._drawn_grids()
        _, _, bad = _bin_range(widths, offsets, cmin, cmax)
        if bad.any():
            cols = np.flatnonzero(bad)
            _raise_bad_bins(X, cols, widths[:, cols], offsets[:, cols])

    def _check_rows(self, X, names=True):
        """The checks transform makes of X, nothing built: X validated as transform takes
        it (returned), its non-finite values and its bins that do not fit int64 raising
        the errors that name X's own rows. A caller that then transforms X a block of rows
        at a time (the models' predict) reports X's row, not the block's. names: as in
        ``_transform``."""
        check_is_fitted(self, "n_bins_")
        X = check_X(self, X, reset=False, names=names)
        n_threads = effective_n_threads(self.n_jobs)
        if self.grid_ptr_ is not None:
            exact_input(self, X, *self._extremes_of(X, n_threads), n_threads)
        else:
            self._check_hashed(X, n_threads)
        return X


    # ------------------------------------------------------------------ feature names
    def get_feature_names_out(self, input_features=None):
        """Names of Z's columns, scikit-learn style: ``randombinning0``,
        ``randombinning1``, ... (``n_features_out_`` of them; a column is a bin of a grid,
        not a function of one input feature).

        Parameters
        ----------
        input_features : array-like of str or None
            Checked against ``feature_names_in_`` / ``n_features_in_`` when given.

        Returns
        -------
        ndarray of str objects (n_features_out_,)
        """
        check_is_fitted(self, "n_bins_")
        _check_feature_names_in(self, input_features, generate_names=False)
        n = int(self.n_features_out_)
        if n > MAX_FEATURE_NAMES:
            raise ValueError(
                f"Z has {n} columns (n_features={self.n_features}), more than the "
                f"{MAX_FEATURE_NAMES} this method names: use a smaller n_features"
            )
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(n)], dtype=object)

    # ------------------------------------------------------------------ diagnostics
    def predicted_speedup(self, n_threads):
        """Expected speedup of parallel randomized CD with tau threads (paper eq. 29):

            tau / (1 + (R - 1)(tau - 1) / (D - 1))

        R = n_grids non-zeros per row, D = n_features_out_ columns; 1.0 if D <= 1.
        """
        check_is_fitted(self, "n_bins_")
        tau = check_int(n_threads, "n_threads", low=1)
        R = self.n_bins_.shape[0]
        D = self.n_features_out_
        if D <= 1:
            return 1.0
        return tau / (1.0 + (R - 1) * (tau - 1) / (D - 1))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR / CSC, an implicit zero is the value 0
        try:
            tags.transformer_tags.preserves_dtype = [check_output_dtype(self.dtype).name]
        except ValueError:
            tags.transformer_tags.preserves_dtype = []
        return tags
