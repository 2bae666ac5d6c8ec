"""Row-partitioned input for rbcd.dask: coercion, checks, and the worker-side helpers.

Every estimator of ``rbcd.dask`` works on data partitioned by rows. This module turns what a
user passes (numpy arrays, dask arrays, dask DataFrames or Series) into dask arrays with
known row chunks and a single column chunk, lines up X with y and the sample weights, and
finds the distributed ``Client`` the fits talk to.

Partition order is the row order: partition b holds rows ``offsets[b]:offsets[b + 1]`` of
the concatenated data. Every reduction in rbcd.dask adds per-partition results in this
order, never in the order workers answer, so results do not depend on timing or placement.
"""
import numbers

import numpy as np
import scipy.sparse as sp

from .. import _validation
from .._validation import non_finite_message, wrong_length  # (re-exported: the local messages)

try:
    import dask
    import dask.array as da
    from distributed import get_client
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "rbcd.dask needs dask and distributed: pip install '.[dask]' in rbcd's clone, "
        "or pip install 'dask[array,dataframe]>=2024.1' 'distributed>=2024.1'"
    ) from exc


def client_or_error():
    """The distributed Client of the current context (ValueError if there is none)."""
    try:
        return get_client()
    except ValueError:
        raise ValueError(
            "rbcd.dask needs a running distributed Client: start one with "
            "distributed.Client() (a LocalCluster) or Client('tcp://scheduler:8786')"
        ) from None


def n_workers(client):
    return max(1, len(client.scheduler_info(n_workers=-1)["workers"]))


def _is_dask_frame(obj):
    mod = type(obj).__module__ or ""
    return mod.startswith("dask") and hasattr(obj, "to_dask_array") and hasattr(obj, "npartitions")


def names_view(X):
    """What scikit-learn's feature-name checks read for X: a dask DataFrame's empty pandas
    meta (the same columns; scikit-learn does not recognize dask frames), else X itself."""
    return X._meta if _is_dask_frame(X) else X


def refuse_complex(dtype, name):
    """ValueError for complex data, from the dtype alone (nothing computed): the local
    estimators' message (scikit-learn's "Complex data not supported"), naming the input.
    numpy's float conversion would keep the real part with only a ComplexWarning."""
    if getattr(dtype, "kind", None) == "c":   # (a pandas extension dtype is not complex)
        raise ValueError(f"Complex data not supported: {name} has dtype {dtype} "
                         "(rbcd fits real data)")


def _frame_dtypes(frame):
    """The column dtypes of a dask DataFrame (or the dtype of a Series), from its meta."""
    meta = frame._meta
    dtypes = getattr(meta, "dtypes", None)
    if dtypes is not None and hasattr(dtypes, "__iter__"):
        return list(dtypes)
    return [getattr(meta, "dtype", None)]


def as_rows(X, name, client, ndim=(2,), chunks=None, real=True):
    """X as a dask array partitioned by rows only, with known row chunks.

    numpy (or anything ``np.asarray`` takes) is cut into one partition per worker (or the
    given row ``chunks``); a scipy sparse matrix likewise, into CSR chunks (the binning
    takes them as the local RandomBinning takes sparse X). A DataFrame or Series is
    converted with its partition lengths computed. ValueError for complex data (``real``;
    from the dtype, before anything is computed), unknown chunk sizes or a wrong number of
    dimensions.
    """
    check = refuse_complex if real else (lambda dtype, name: None)
    if _is_dask_frame(X):
        for dtype in _frame_dtypes(X):
            check(dtype, name)
        X = X.to_dask_array(lengths=True)
    elif not isinstance(X, da.Array):
        if hasattr(X, "toarray") and hasattr(X, "nnz"):  # scipy sparse: keep sparse chunks
            check(X.dtype, name)
            Xs = sp.csr_matrix(X)
            n = Xs.shape[0]
            if chunks is None:
                step = max(1, -(-n // n_workers(client)))
                chunks = tuple(min(step, n - s) for s in range(0, n, step)) or (0,)
            bounds = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
            parts = [da.from_delayed(dask.delayed(Xs[int(a):int(b)]), shape=(int(b - a), Xs.shape[1]),
                                     dtype=Xs.dtype, meta=sp.csr_matrix((0, 0), dtype=Xs.dtype))
                     for a, b in zip(bounds[:-1], bounds[1:])]
            return da.concatenate(parts, axis=0)
        X = np.asarray(X)
        check(X.dtype, name)
        if X.ndim not in ndim:
            raise ValueError(f"{name} must be {' or '.join(f'{k}-D' for k in ndim)}, got shape {X.shape}")
        n = X.shape[0]
        if chunks is not None and int(np.sum(chunks)) != n:
            chunks = None   # not X's rows: align_rows names the mismatch
        if chunks is None:
            step = max(1, -(-n // n_workers(client)))
            chunks = (step,) + X.shape[1:]
        else:
            chunks = (tuple(chunks),) + X.shape[1:]
        return da.from_array(X, chunks=chunks)
    check(X.dtype, name)
    if X.ndim not in ndim:
        raise ValueError(f"{name} must be {' or '.join(f'{k}-D' for k in ndim)}, got shape {X.shape}")
    if any(not np.isfinite(c) for c in X.chunks[0]):
        raise ValueError(
            f"{name} has unknown chunk sizes (rows per partition): call "
            f"{name}.compute_chunk_sizes() first, or pass a DataFrame (rbcd.dask computes its "
            "partition lengths)"
        )
    if X.ndim == 2 and len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # rows only: every partition holds whole rows
    if sp.issparse(getattr(X, "_meta", None)) and X._meta.format != "csr":
        # COO, CSC, ... chunks as CSR, lazily: the binning gathers rows by indexing
        # (a COO chunk has none)
        X = X.map_blocks(sp.csr_matrix, dtype=X.dtype, meta=sp.csr_matrix((0, 0), dtype=X.dtype))
    return X


def align_rows(X, other, name):
    """``other`` (y or sample weights) with X's row chunks.

    ValueError when the numbers of rows differ, worded as the local estimators word it
    for y or weights in memory (rbcd._validation); different partition boundaries over
    the same rows are rechunked to X's (data moves once)."""
    if other.shape[0] != X.shape[0]:
        raise ValueError(wrong_length(name, other.shape[0], X.shape[0]))
    if other.chunks[0] != X.chunks[0]:
        other = other.rechunk({0: X.chunks[0]})
    if other.ndim == 2 and len(other.chunks[1]) > 1:
        other = other.rechunk({1: -1})
    return other


def _first_non_finite_block(block, offset):
    """(global index, value) of the first non-finite entry of one partition in row-major
    order (rbcd._validation.first_non_finite, its row shifted by ``offset``), or None."""
    b = np.asarray(block)
    if b.dtype.kind not in "fc" or b.size == 0:
        return None
    found = _validation.first_non_finite(b)
    if found is None:
        return None
    where, value = found
    return (where + offset if b.ndim == 1 else (where[0] + offset,) + where[1:]), value


def first_non_finite(v):
    """(index, value) of the first NaN or inf of the row-partitioned dask array ``v`` in row
    order, as the local checks name it (an int for 1-D, (row, column) for 2-D), or None.
    One pass: each partition returns its first one (or None), read in partition order;
    it replaces an ``isfinite(v).all()`` check at the same cost."""
    if v.dtype.kind not in "fc":
        return None
    offsets = row_offsets(v)
    found = dask.compute(*[dask.delayed(_first_non_finite_block, pure=True)(b, int(o))
                           for b, o in zip(v.to_delayed().ravel(), offsets[:-1])])
    return next((f for f in found if f is not None), None)


def _weight_summary(block, offset):
    """One partition's weights: (first NaN or inf, first negative weight, sum), each found
    as (global index, value) or None, in one task (``offset``: the partition's first row)."""
    s = np.asarray(block, dtype=np.float64)
    if s.size == 0:
        return None, None, 0.0
    bad = _validation.first_non_finite(s)
    if bad is not None:
        return (bad[0] + offset, bad[1]), None, np.nan
    negative = s < 0
    neg = None
    if negative.any():
        i = int(np.argmax(negative))
        neg = (offset + i, float(s[i]))
    return None, neg, float(s.sum())


def check_weights(X, sample_weight, client):
    """``sample_weight`` (a number, numpy or dask array) as a dask array with X's row chunks,
    and its sum, checked as the local estimators check it (rbcd._validation
    .check_sample_weight: finite, non-negative, a positive sum; each failure a ValueError
    naming sample_weight, and the first bad weight by its index in row order, as the local
    messages do). One pass over the weights on the workers: each partition returns its
    first NaN or inf, its first negative weight and its sum."""
    if isinstance(sample_weight, numbers.Real) and not isinstance(sample_weight, (bool, np.bool_)):
        sample_weight = np.full(X.shape[0], float(sample_weight))
    sw = align_rows(X, as_rows(sample_weight, "sample_weight", client, ndim=(1,),
                               chunks=X.chunks[0], real=False), "sample_weight")
    if sw.dtype.kind not in "biuf":
        raise ValueError(f"sample_weight must be numeric, got dtype {sw.dtype}")
    sw = sw.astype(np.float64)
    offsets = row_offsets(sw)
    parts = dask.compute(*[dask.delayed(_weight_summary, pure=True)(b, int(o))
                           for b, o in zip(sw.to_delayed().ravel(), offsets[:-1])])
    bad = next((p[0] for p in parts if p[0] is not None), None)
    if bad is not None:
        raise ValueError(non_finite_message("sample_weight", bad))
    neg = next((p[1] for p in parts if p[1] is not None), None)
    if neg is not None:   # the local words (rbcd._validation.check_sample_weight)
        raise ValueError(_validation.negative_weight_message(neg[0], neg[1]))
    total = float(np.sum(np.array([p[2] for p in parts], dtype=np.float64)))
    if not total > 0:
        raise ValueError("sample_weight must have a positive sum (the weights are all zero)")
    if not np.isfinite(total):
        raise ValueError(_validation.WEIGHT_SUM_OVERFLOW)
    return sw, total


def check_min_rows(X, owner):
    """ValueError for X (a row-partitioned dask array) without rows or columns, in
    scikit-learn's words (its check_array's ensure_min_samples / ensure_min_features), as
    the local estimators refuse it, before any work."""
    n, d = (int(v) for v in X.shape)
    if n < 1:
        raise ValueError(f"Found array with {n} sample(s) (shape={(n, d)}) while a minimum "
                         f"of 1 is required by {owner}.")
    if d < 1:
        raise ValueError(f"Found array with {d} feature(s) (shape={(n, d)}) while a minimum "
                         f"of 1 is required by {owner}.")


#: the local check's message of a bad entry of object-dtype y (index, value)
bad_object_message = _validation.bad_object_message


def first_bad_object_block(block, offset, regression):
    """(global index, value) of the first bad entry of one partition of an object-dtype y
    (rbcd._validation.first_bad_object, its row shifted by ``offset``), or None."""
    b = np.asarray(block)
    found = _validation.first_bad_object(b, regression)
    if found is None:
        return None
    where, v = found
    if b.ndim == 1:
        return offset + where, v
    return (where[0] + offset,) + tuple(where[1:]), v


def first_bad_object(y, regression):
    """The first bad entry of the row-partitioned object-dtype y (index, value), in row
    order, or None (nothing computed for other dtypes): one pass, each partition returning
    its first."""
    if y.dtype.kind != "O":
        return None
    offsets = row_offsets(y)
    found = dask.compute(*[dask.delayed(first_bad_object_block, pure=True)(b, int(o), regression)
                           for b, o in zip(y.to_delayed().ravel(), offsets[:-1])])
    return next((f for f in found if f is not None), None)


def float_dtype(dtype):
    """The dtype of a solver's coefficients for features of ``dtype``: float32 or float64
    as given, float64 for anything else (the local solvers' rule: they take Z as float32
    or float64, converting other dtypes to float64, and cast coef_ and intercept_ to it)."""
    dtype = np.dtype(dtype)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def row_offsets(X):
    """Start row of every partition, and the total: (n_partitions + 1,) int64."""
    return np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)


def float_rows(block):
    """A partition of X as the local binning takes it (rbcd._validation.check_X): a
    C-ordered float64 array, or, for a scipy sparse chunk, a float64 CSR matrix in
    canonical form (duplicates summed, as check_X sums them; an implicit zero is the value
    0, so the local kernels give the Z of the dense rows bit for bit). The caller's chunk
    is not modified."""
    if sp.issparse(block):
        return _validation.canonical_csr(block)
    return np.ascontiguousarray(block, dtype=np.float64)


def check_finite_block(block, offset, name="X"):
    """ValueError naming the GLOBAL row and column of the first non-finite entry, as the
    local estimators name it in the concatenated data. A sparse block (canonical CSR, see
    :func:`float_rows`) is searched among its stored values, first in row-major order, as
    the local check_X searches sparse X."""
    if sp.issparse(block):
        found = (_validation.first_non_finite_csr(block) if block.data.dtype.kind == "f"
                 else None)
        if found is not None:
            i, j, value = found
            raise ValueError(f"{name} contains NaN or infinity ({value!r}) at row "
                             f"{offset + i}, column {j}")
        return
    block = np.asarray(block)
    if block.dtype.kind == "f" and block.size and not np.isfinite(block).all():
        i, j = np.argwhere(~np.isfinite(block))[0]
        raise ValueError(
            f"{name} contains NaN or infinity ({float(block[i, j])!r}) at row {offset + int(i)}, "
            f"column {int(j)}"
        )


def worker_threads():
    """Threads of the worker running the current task (1 outside a worker).

    Dask workers start with OMP_NUM_THREADS=1, so ``n_jobs=None`` on a worker would run the
    kernels on one thread; tasks pass this count instead (as ``xgboost.dask`` does)."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ValueError, AttributeError, ImportError):
        return 1


def resolve_task_jobs(n_jobs, tasks_per_worker):
    """n_jobs of the kernels inside one task (see docs/dask.md, "Threads").

    None: the worker's threads divided among the partitions it runs at once (at least 1),
    so that a worker with t threads running t partitions does not start t * t threads. An
    explicit n_jobs is used as given in every task."""
    if n_jobs is not None:
        return n_jobs
    return max(1, worker_threads() // max(1, int(tasks_per_worker)))


def tasks_per_worker(X):
    """Partitions of X per worker (rounded up): how many tasks a worker runs at once."""
    return -(-X.numblocks[0] // n_workers(client_or_error()))


def check_n_jobs(n_jobs):
    if n_jobs is None:
        return None
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    return int(n_jobs)


def array_of_parts(parts, key, chunks, ncols, dtype, meta, prefix):
    """A dask array whose row block i is ``parts[i][key]`` (persisted delayed dicts), keeping
    empty partitions (``da.concatenate`` drops them, and the blocks must stay aligned with
    the partitions of X, y and the weights)."""
    import operator

    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    name = f"{prefix}-{tokenize(*[p.key for p in parts], key)}"
    dsk = {(name, i, 0): (operator.getitem, p.key, key) for i, p in enumerate(parts)}
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=list(parts))
    return da.Array(graph, name, chunks=(tuple(int(c) for c in chunks), (int(ncols),)),
                    dtype=dtype, meta=meta)


def ordered_sum(arrays):
    """Sum in list order (the partition order): a fixed order of float additions."""
    it = iter(arrays)
    total = np.array(next(it), dtype=np.float64, copy=True)
    for a in it:
        total += a
    return total
