"""The array module switch and the kernels of rbcd.cuda, each with its numpy twin.

Every function takes the array module ``xp`` (numpy or cupy). With numpy the twin runs (CI
checks the algorithms with it); with cupy the CUDA kernel of ``kernels.cu`` runs. Twin and
kernel compute the same values; sums may differ in the order of their additions (the CG
agrees to its tolerance), keys are identical bit for bit.
"""
import functools
import os

import numpy as np

#: threads per block of every kernel launch (a multiple of 32: rb_piece_sums needs full warps)
BLOCK = 256
#: targets per kernel pass (RB_KMAX of kernels.cu)
KMAX = 8
#: entries of the grid-sorted layout summed by one warp (rb_piece_sums)
PIECE = 2048

_INSTALL = ("device='cuda' needs CuPy and a CUDA GPU: install the rbcd[cuda] extra "
            "(pip install '.[cuda]' in a clone of rbcd, which installs cupy-cuda12x), or "
            "install CuPy directly (cupy-cuda12x, or cupy-cuda13x with a CUDA 13 driver)")


def cupy_module():
    """The cupy module with a usable GPU, or a clear ImportError."""
    try:
        import cupy
    except ImportError as exc:
        raise ImportError(f"{_INSTALL}; CuPy is not importable ({exc})") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device: CUDARuntimeError and friends
        raise ImportError(f"{_INSTALL}; no CUDA device is usable ({exc})") from None
    if n < 1:
        raise ImportError(f"{_INSTALL}; no CUDA device found")
    return cupy


def get_xp(device):
    """numpy for device "cpu", cupy for "cuda" (ImportError if unusable)."""
    if device == "cuda":
        return cupy_module()
    if device == "cpu":
        return np
    raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")


def is_numpy(xp):
    return xp is np


def on_gpu(a):
    """Whether ``a`` lives on the GPU: a CuPy array or sparse matrix, or any object with
    ``__cuda_array_interface__``. (Not duck typing on ``get``: a pandas object has a
    ``get`` method too.)"""
    if isinstance(a, np.ndarray):
        return False
    root = (type(a).__module__ or "").split(".")[0]
    return root in ("cupy", "cupyx") or hasattr(a, "__cuda_array_interface__")


def to_host(a):
    """A numpy array of ``a``: a device array (:func:`on_gpu`) is copied to the host, a
    numpy array passes through, anything else (pandas, lists, scalars) is np.asarray's.
    A scipy sparse matrix of cupyx's comes back as scipy's."""
    if isinstance(a, np.ndarray):
        return a
    if on_gpu(a):
        get = getattr(a, "get", None)
        if get is not None:
            return get()
        cupy = cupy_module()   # another library's device array: through CuPy
        return cupy.asnumpy(cupy.asarray(a))
    return np.asarray(a)


def host_value(a):
    """``a`` for the CPU's checks on the host: None and Python / numpy scalars as they
    are (a scalar sample_weight is a weight for every row there; to_host would make it a
    0-d array, which they refuse), anything else as :func:`to_host` gives it."""
    if a is None or (np.isscalar(a) and not isinstance(a, (str, bytes))):
        return a
    return to_host(a)


def on_device(xp, a, dtype=None):
    """``a`` as a C-contiguous array of ``xp`` (copies only when needed)."""
    if is_numpy(xp):
        return np.ascontiguousarray(to_host(a), dtype=dtype)
    return xp.ascontiguousarray(xp.asarray(a), dtype=dtype)


@functools.lru_cache(maxsize=None)
def _module():
    cupy = cupy_module()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels.cu")
    with open(path) as f:
        source = f.read()
    return cupy.RawModule(code=source)


def _kernel(name):
    return _module().get_function(name)


def _blocks(n, per_block=BLOCK):
    return (max(1, -(-int(n) // per_block)),)


# ------------------------------------------------------------------------------ keys
def grid_keys(xp, X, u, w, lo, hi, shift, row_bits, fit):
    """Packed single-word keys of one grid for the rows of X (kernels.cu, rb_grid_keys).

    fit: returns ``key << row_bits | row`` (uint64), every bin known to lie in [lo, hi].
    Otherwise returns ``(key, inside)``; key is meaningless where inside is False.
    u, w, lo, hi, shift: this grid's (d,) arrays (float64, float64, int64, int64, int64).
    """
    n, d = X.shape
    if is_numpy(xp):
        with np.errstate(all="ignore"):
            b = np.floor((X - u) / w)
        b = b.astype(np.int64)
        inside = np.all((b >= lo) & (b <= hi), axis=1)
        field = np.where((b >= lo) & (b <= hi), b - lo, 0).astype(np.uint64)
        key = np.sum(field << shift.astype(np.uint64), axis=1, dtype=np.uint64)  # disjoint bits
        if fit:
            return (key << np.uint64(row_bits)) | np.arange(n, dtype=np.uint64)
        return key, inside
    keys = xp.empty(n, dtype=xp.uint64)
    inside = xp.empty(n if not fit else 1, dtype=xp.uint8)
    if n:
        _kernel("rb_grid_keys")(
            _blocks(n), (BLOCK,),
            (X, np.int64(n), np.int32(d), u, w, lo, hi, shift, np.int32(row_bits),
             np.int32(1 if fit else 0), keys, inside))
    if fit:
        return keys
    return keys, inside.astype(xp.bool_)


# ------------------------------------------------------------------------------ sums
def col_sums(xp, A):
    """A.sum(axis=0) of an (m, k) array: (k,). On a GPU by a matrix-vector product
    (cuBLAS): cupy's own reduction over axis 0 of a tall array with few columns runs one
    thread block per column, which takes milliseconds at 10^7 rows. The sums run in
    another order than numpy's (equal to rounding)."""
    if is_numpy(xp):
        return A.sum(axis=0)
    return xp.ones(A.shape[0], dtype=A.dtype) @ A



def batch_keys(xp, X, u, w, lo, shift, row_bits, key_bits, base=None):
    """(G, n) uint64: the words ``q << (key_bits + row_bits) | key << row_bits | row`` of the
    G grids of a batch (rb_batch_keys; u, w, lo, shift the batch's (G, d) rows; a fit:
    every bin in range). Row q equals grid_keys(..., fit=True) of grid q with q on top;
    key_bits None: without q (grids whose words are sorted one by one).

    ``base`` (G,) int64 (rb_batch_keys32): instead (G, n) uint32, the narrow words
    ``(base[q] + key) << row_bits | row`` (the caller has checked that they fit 32 bits;
    key_bits is then ignored)."""
    n, d = X.shape
    G = u.shape[0]
    tag_shift = -1 if key_bits is None else int(key_bits) + int(row_bits)
    if is_numpy(xp):
        words = np.empty((G, n), dtype=np.uint64 if base is None else np.uint32)
        for q in range(G):
            wq = grid_keys(np, X, u[q], w[q], lo[q], np.full(d, np.iinfo(np.int64).max),
                           shift[q], row_bits, True)
            if base is not None:
                wq = wq + (np.uint64(base[q]) << np.uint64(row_bits))
            elif tag_shift >= 0:
                wq |= np.uint64(q) << np.uint64(tag_shift)
            words[q] = wq.astype(words.dtype)
        return words
    if base is not None:
        words = xp.empty((G, n), dtype=xp.uint32)
        if n:
            _kernel("rb_batch_keys32")(
                _blocks(n), (BLOCK,),
                (X, np.int64(n), np.int32(d), np.int32(G), u, w, lo, shift,
                 np.int32(row_bits), on_device(xp, base, np.int64), words))
        return words
    words = xp.empty((G, n), dtype=xp.uint64)
    if n:
        _kernel("rb_batch_keys")(
            _blocks(n), (BLOCK,),
            (X, np.int64(n), np.int32(d), np.int32(G), u, w, lo, shift, np.int32(row_bits),
             np.int32(tag_shift), words))
    return words


def widen_batch(xp, s, base, row_bits, key_bits):
    """The sorted narrow words s (m,) uint32 of batch_keys(base=...) as its wide words
    (m,) uint64, ``q << (key_bits + row_bits) | key << row_bits | row`` (rb_widen_batch;
    q: the last grid whose base is at most s >> row_bits). The same order."""
    m = s.shape[0]
    base = np.asarray(to_host(base), dtype=np.int64)
    if is_numpy(xp):
        k = (s >> np.uint32(row_bits)).astype(np.int64)
        q = np.searchsorted(base, k, side="right") - 1
        row = (s & np.uint32((1 << row_bits) - 1)).astype(np.uint64)
        return ((q.astype(np.uint64) << np.uint64(key_bits + row_bits))
                | ((k - base[q]).astype(np.uint64) << np.uint64(row_bits)) | row)
    out = xp.empty(m, dtype=xp.uint64)
    if m:
        _kernel("rb_widen_batch")(
            _blocks(m), (BLOCK,),
            (s, np.int64(m), np.int32(base.shape[0]), on_device(xp, base, np.int64),
             np.int32(row_bits), np.int32(key_bits), out))
    return out


def match_keys(xp, X, u, w, lo, hi, shift, single, skeys, sids, off, labels):
    """Labels (R, m) int32 of new rows X in the one-word grids (``single`` (R,) uint8), in
    place (rb_match_keys): each row's key as grid_keys(fit=False) computes it, looked up
    among grid r's fitted keys sorted, ``skeys[off[r]:off[r + 1]]`` (uint64) with their
    local ids ``sids`` (int32); -1 where there is no equal key or a bin is out of range.
    Rows of the other grids are not written."""
    m, d = X.shape
    R = u.shape[0]
    if is_numpy(xp):
        for r in np.flatnonzero(single):
            key, inside = grid_keys(np, X, u[r], w[r], lo[r], hi[r], shift[r], 0, False)
            seg = skeys[off[r]:off[r + 1]]
            labels[r] = -1
            if seg.shape[0] == 0:
                continue
            pos = np.searchsorted(seg, key)
            hit = inside & (pos < seg.shape[0])
            hit[hit] = seg[pos[hit]] == key[hit]
            labels[r][hit] = sids[off[r] + pos[hit]]
        return
    if m:
        _kernel("rb_match_keys")(
            _blocks(m), (BLOCK,),
            (X, np.int64(m), np.int32(d), np.int32(R), u, w, lo, hi, shift, single, skeys,
             sids, off, labels))

# ------------------------------------------------------------------------------ numbering
def seg_flags(xp, s, row_bits):
    """(n,) int32: 1 where a segment of equal keys starts in the sorted (key << row_bits |
    row) words s, else 0 (kernels.cu, rb_seg_flags)."""
    n = s.shape[0]
    if is_numpy(xp):
        flags = np.ones(n, dtype=np.int32)
        k = s >> np.uint64(row_bits)
        flags[1:] = k[1:] != k[:-1]
        return flags
    flags = xp.empty(n, dtype=xp.int32)
    if n:
        _kernel("rb_seg_flags")(_blocks(n), (BLOCK,), (s, np.int64(n), np.int32(row_bits), flags))
    return flags


class _Ready:
    """A value known on the host already (numpy)."""

    def __init__(self, value):
        self.value = int(value)

    def get(self):
        return self.value


class _Pending:
    """The last entry of a device int32 array, copied to pinned host memory behind the
    work queued so far; ``get`` waits for that work only, not for work queued later."""

    def __init__(self, cupy, a):
        self._mem = cupy.cuda.alloc_pinned_memory(4)
        self._host = np.frombuffer(self._mem, np.int32, 1)
        stream = cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memcpyAsync(self._host.ctypes.data, a.data.ptr + (a.size - 1) * 4,
                                      4, cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        self._event = cupy.cuda.Event(block=False, disable_timing=True)
        self._event.record(stream)

    def get(self):
        self._event.synchronize()
        return int(self._host[0])


def last_async(xp, a):
    """The last entry of a non-empty 1-D int32 array ``a`` of xp, as an object whose
    ``get()`` returns it: on a GPU without waiting for the work queued after this call
    (rbcd.cuda.binning queues the next grid's sort before it asks)."""
    if is_numpy(xp):
        return _Ready(a[-1])
    return _Pending(xp, a)


def seg_starts(xp, flags, seg, n_seg):
    """(n_seg,) int64: the position where each segment starts (rb_seg_starts)."""
    n = flags.shape[0]
    if is_numpy(xp):
        start = np.empty(n_seg, dtype=np.int64)
        hit = flags != 0
        start[seg[hit]] = np.flatnonzero(hit)
        return start
    start = xp.empty(n_seg, dtype=xp.int64)
    if n:
        _kernel("rb_seg_starts")(_blocks(n), (BLOCK,), (flags, seg, np.int64(n), start))
    return start


def seg_heads(xp, s, start, n, row_bits, key_bits):
    """Each segment's head (rb_seg_heads): segment b of the m = G n sorted words s starts at
    start[b] (increasing); its first word h = s[start[b]] (the segment's smallest row) holds
    grid g = h >> (key_bits + row_bits) (0 where that is 64), key (h >> row_bits) &
    (2^key_bits - 1) and row h & (2^row_bits - 1). Returns ``(order_key, g, key, length)``,
    (n_seg,) each: g n + row (int64: the columns' order, grid after grid and by first
    appearance in each), g (int64), key (uint64) and the segment's length (int64)."""
    m, n_seg = s.shape[0], start.shape[0]
    if is_numpy(xp):
        h = s[start]
        top = int(key_bits) + int(row_bits)
        g = (np.zeros(n_seg, dtype=np.int64) if top >= 64
             else (h >> np.uint64(top)).astype(np.int64))
        kmask = np.uint64((1 << int(key_bits)) - 1) if key_bits < 64 else ~np.uint64(0)
        key = (h >> np.uint64(row_bits)) & kmask
        first = (h & np.uint64((1 << int(row_bits)) - 1)).astype(np.int64)
        length = np.empty(n_seg, dtype=np.int64)
        length[:-1] = start[1:] - start[:-1]
        length[-1:] = m - start[-1:]
        return g * int(n) + first, g, key, length
    order_key = xp.empty(n_seg, dtype=xp.int64)
    g = xp.empty(n_seg, dtype=xp.int64)
    key = xp.empty(n_seg, dtype=xp.uint64)
    length = xp.empty(n_seg, dtype=xp.int64)
    if n_seg:
        _kernel("rb_seg_heads")(
            _blocks(n_seg), (BLOCK,),
            (s, start, np.int64(n_seg), np.int64(m), np.int64(n), np.int32(row_bits),
             np.int32(key_bits), order_key, g, key, length))
    return order_key, g, key, length


def seg_order(xp, order, g, key, length, G):
    """The columns from the segments' order (rb_seg_order): column t is segment order[t].
    Returns ``(rank, counts, keys, seg_off)``: rank (n_seg,) int64, the column of each
    segment (rank[order[t]] = t); counts (n_seg,) int64 and keys (n_seg,) uint64 in column
    order; seg_off (G + 1,) int64, grid q's columns seg_off[q] .. seg_off[q + 1] - 1 (every
    grid has a segment, and the order runs grid after grid)."""
    n_seg = order.shape[0]
    if is_numpy(xp):
        rank = np.empty(n_seg, dtype=np.int64)
        rank[order] = np.arange(n_seg, dtype=np.int64)
        gs = g[order]
        seg_off = np.empty(int(G) + 1, dtype=np.int64)
        new = np.ones(n_seg, dtype=bool)
        new[1:] = gs[1:] != gs[:-1]
        seg_off[gs[new]] = np.flatnonzero(new)
        seg_off[-1] = n_seg
        return rank, length[order], key[order], seg_off
    rank = xp.empty(n_seg, dtype=xp.int64)
    counts = xp.empty(n_seg, dtype=xp.int64)
    keys = xp.empty(n_seg, dtype=xp.uint64)
    seg_off = xp.empty(int(G) + 1, dtype=xp.int64)
    if n_seg:
        _kernel("rb_seg_order")(
            _blocks(n_seg), (BLOCK,),
            (order, np.int64(n_seg), np.int32(G), g, key, length, rank, counts, keys, seg_off))
    return rank, counts, keys, seg_off


def number_batch(xp, s, seg, start, rank, col_ptr, g_of_seg, seg_off, n, row_bits, labels,
                 rows):
    """Labels and CSC rows of a batch of grids from its sorted words (rb_number_batch):
    position p of the sorted words s (m = G n of them) holds row i of segment b = seg[p];
    labels (G n,) int32 gets labels[g n + i] = rank[b] - seg_off[g] (the bin's local id in
    its grid g = g_of_seg[b]), rows (m,) int32 gets i at col_ptr[rank[b]] + p - start[b].
    Written in place."""
    m = s.shape[0]
    if is_numpy(xp):
        b = seg.astype(np.int64)
        i = (s & np.uint64((1 << row_bits) - 1)).astype(np.int64)
        g = g_of_seg[b]
        labels[g * n + i] = (rank[b] - seg_off[g]).astype(np.int32)
        rows[col_ptr[rank[b]] + (np.arange(m, dtype=np.int64) - start[b])] = i.astype(np.int32)
        return
    if m:
        _kernel("rb_number_batch")(
            _blocks(m), (BLOCK,),
            (s, seg, start, rank, col_ptr, g_of_seg, seg_off, np.int64(m), np.int64(n),
             np.int32(row_bits), labels, rows))


# ------------------------------------------------------------------------------ extremes
#: entries of X per block of rb_column_extremes (about), and its most blocks
EXTREMES_PER_BLOCK = 1 << 16
EXTREMES_MAX_BLOCKS = 2048


def extremes_plan(n, d):
    """(n_blocks, rows_per_block) of rb_column_extremes for an (n, d) X: about
    EXTREMES_PER_BLOCK entries a block, at most EXTREMES_MAX_BLOCKS blocks, and the
    per-block results (n_blocks * d doubles, twice) at most 2**23 entries."""
    n_blocks = -(-int(n) * int(d) // EXTREMES_PER_BLOCK)
    n_blocks = max(1, min(n_blocks, EXTREMES_MAX_BLOCKS, (1 << 23) // max(1, int(d)), int(n)))
    return n_blocks, -(-int(n) // n_blocks)


def column_extremes(xp, X):
    """(cmin, cmax, finite) of a C-contiguous float64 (n, d) X, n >= 1: the column minima
    and maxima as host float64 arrays, and whether every entry is finite (where it is
    not, cmin and cmax are meaningless). One pass over X (kernels.cu, rb_column_extremes:
    per-block extremes, then the extremes of those); exact, as min and max are."""
    n, d = X.shape
    n_blocks, per = extremes_plan(n, d)
    if is_numpy(xp):
        bmin = np.full((n_blocks, d), np.inf)
        bmax = np.full((n_blocks, d), -np.inf)
        finite = True
        for b in range(n_blocks):
            blk = X[b * per:(b + 1) * per]
            if blk.shape[0]:
                finite &= bool(np.isfinite(blk).all())
                with np.errstate(invalid="ignore"):
                    bmin[b] = np.fmin.reduce(blk, axis=0)
                    bmax[b] = np.fmax.reduce(blk, axis=0)
        return np.fmin.reduce(bmin, axis=0), np.fmax.reduce(bmax, axis=0), finite
    bmin = xp.empty((n_blocks, d), dtype=xp.float64)
    bmax = xp.empty((n_blocks, d), dtype=xp.float64)
    bad = xp.zeros(1, dtype=xp.int32)
    _kernel("rb_column_extremes")(
        (n_blocks,), (BLOCK,), (X, np.int64(n), np.int32(d), np.int64(per), bmin, bmax, bad))
    # the (n_blocks, d) partials to the host: at most 2**23 entries each, usually a few
    # thousand (a reduction over the blocks' axis on the device would read it strided)
    cmin = np.fmin.reduce(to_host(bmin), axis=0)
    cmax = np.fmax.reduce(to_host(bmax), axis=0)
    return cmin, cmax, not bool(to_host(bad)[0])


# ------------------------------------------------------------------------------ products
def zdot(xp, labels, grid_ptr, W, value, out=None):
    """Z @ W for Z given by its grid labels: (R, n) int32 local bin ids (-1: no entry),
    grid_ptr (R + 1,) int64; W (D, k) float64. Returns (n, k) float64 (``out``, a
    C-contiguous (n, k) float64 array, when given: nothing is allocated on the device)."""
    R, n = labels.shape
    k = W.shape[1]
    if is_numpy(xp):
        if out is None:
            out = np.zeros((n, k))
        else:
            out[...] = 0.0
        for r in range(R):
            lab = labels[r]
            hit = lab >= 0
            out[hit] += W[grid_ptr[r] + lab[hit].astype(np.int64)]
        out *= value
        return out
    if out is None:
        out = xp.empty((n, k), dtype=xp.float64)
    if n == 0 or k == 0:
        return out
    W = xp.ascontiguousarray(W, dtype=xp.float64)
    f = _kernel("rb_zdot")
    for k0 in range(0, k, KMAX):
        kc = min(KMAX, k - k0)
        f(_blocks(n), (BLOCK,),
          (labels, np.int64(n), np.int32(R), grid_ptr, W, np.int32(k), np.int32(k0),
           np.int32(kc), np.float64(value), out))
    return out


def piece_sums(xp, rows, piece_start, piece_end, U, order=None, out=None):
    """partial[p] = sum over entries e of piece p of U[rows[e]]: (n_pieces, k). ``order``
    (n_pieces,) int64, a permutation: the order in which the kernel's warps take the pieces
    (the sums do not depend on it; None: piece order). ``out``: as zdot's."""
    n_pieces = piece_start.shape[0]
    k = U.shape[1]
    if is_numpy(xp):
        if out is None:
            out = np.zeros((n_pieces, k))
        else:
            out[...] = 0.0
        if n_pieces and rows.shape[0]:
            # each sum runs from its piece's start to its end, as the kernel's: reduceat
            # over (start, end) pairs, the (end, next start) gaps dropped; a zero row keeps
            # an end of len(rows) valid
            g = np.concatenate([U[rows], np.zeros((1, k))])
            nz = piece_end > piece_start
            idx = np.stack([piece_start[nz], piece_end[nz]], axis=1).ravel()
            if idx.shape[0]:
                out[nz] = np.add.reduceat(g, idx, axis=0)[::2]
        return out
    if out is None:
        out = xp.empty((n_pieces, k), dtype=xp.float64)
    if n_pieces == 0 or k == 0:
        return out
    U = xp.ascontiguousarray(U, dtype=xp.float64)
    if order is None:
        order = xp.arange(n_pieces, dtype=xp.int64)
    f = _kernel("rb_piece_sums")
    for k0 in range(0, k, KMAX):
        kc = min(KMAX, k - k0)
        f(_blocks(n_pieces * 32), (BLOCK,),
          (rows, piece_start, piece_end, order, np.int64(n_pieces), U, np.int32(k),
           np.int32(k0), np.int32(kc), out))
    return out


def segment_sums(xp, V, ptr, scale=1.0, out=None):
    """out[c] = scale * V[ptr[c]:ptr[c + 1]].sum(axis=0): (len(ptr) - 1, k). ``out``: as
    zdot's."""
    n_seg = ptr.shape[0] - 1
    k = V.shape[1]
    if is_numpy(xp):
        if out is None:
            out = np.zeros((n_seg, k))
        else:
            out[...] = 0.0
        starts = ptr[:-1]
        nz = ptr[1:] > starts
        if nz.any():
            out[nz] = np.add.reduceat(V, starts[nz], axis=0)
        out *= scale
        return out
    if out is None:
        out = xp.empty((n_seg, k), dtype=xp.float64)
    if n_seg == 0 or k == 0:
        return out
    V = xp.ascontiguousarray(V, dtype=xp.float64)
    _kernel("rb_segment_sums")(
        _blocks(n_seg), (BLOCK,),
        (V, ptr, np.int64(n_seg), np.int32(k), np.float64(scale), out))
    return out


# ------------------------------------------------------------------------------ CG steps
#: most thread blocks of a CG step kernel (kernels.cu: every block sums all the blocks'
#: partials, so their number is capped; the columns run in a grid-stride loop)
CG_MAX_BLOCKS = 1024


def cg_blocks(D):
    """Thread blocks of the CG step kernels for D columns: rows of their (nb, k) partials."""
    return max(1, min(-(-int(D) // BLOCK), CG_MAX_BLOCKS))


def _launch_cg(xp, name, D, k, args_before, args_after):
    """One launch per KMAX targets of a CG step kernel (arguments: args_before, then D, k,
    k0, kc, then args_after)."""
    f = _kernel(name)
    for k0 in range(0, k, KMAX):
        kc = min(KMAX, k - k0)
        f((cg_blocks(D),), (BLOCK,),
          tuple(args_before) + (np.int64(D), np.int32(k), np.int32(k0), np.int32(kc))
          + tuple(args_after))


def _put_total(partial, total):
    """A twin's partial sums: the whole total in row 0 (the kernels' rows are block sums)."""
    partial[...] = 0.0
    partial[0] = total


def cg_columns(xp, colsum, colsq, B, S, tiny, csY, alpha, use_diag):
    """The CG set-up's column statistics, generic array code (any xp, any operator): from
    the columns' weighted sums ``colsum`` and sums of squares ``colsq`` (D,), Z^T (s Yc)
    ``B`` (D, k), S = sum s (a 0-d array), ``tiny`` = n eps and, with an intercept
    (``csY`` (k,) the column sums of s Yc; None without), returns ``(zbar, keep, B, minv)``:
    zbar = colsum / S (None without an intercept), keep (D,) 0.0 on the numerically
    constant columns (diag <= tiny colsq and colsq > 0, with an intercept) and 1.0
    elsewhere, B - zbar csY^T times keep, and the Jacobi inverse 1 / (diag + alpha_t)
    where positive, else 1 (None unless ``use_diag``); diag = max(colsq - S zbar^2, 0),
    0 on the constant columns."""
    if csY is not None:
        zbar = colsum / S
        diag = colsq - S * zbar * zbar
    else:
        zbar = None
        diag = colsq
    diag = xp.maximum(diag, 0.0)
    if csY is not None:
        flat = (diag <= tiny * colsq) & (colsq > 0)
    else:
        flat = xp.zeros(colsq.shape[0], dtype=xp.bool_)
    keep = (~flat).astype(xp.float64)
    diag = xp.where(flat, 0.0, diag)
    if zbar is not None:
        B = B - zbar[:, None] * csY[None, :]
    B = B * keep[:, None]
    minv = None
    if use_diag:
        dd = diag[:, None] + alpha[None, :]
        minv = xp.where(dd > 0, 1.0 / xp.where(dd > 0, dd, 1.0), 1.0)
    return zbar, keep, B, minv


def cg_setup(xp, ZtU, value, S, tiny, csY, alpha, use_diag):
    """cg_columns on a GridLayout (rb_cg_setup, one thread per column instead of about
    twenty array operations): ZtU (D, 1 + k) = Z^T [s, s Yc], every stored value
    ``value``, so colsum = ZtU[:, 0], colsq = colsum value and B = ZtU[:, 1:]. Returns
    cg_columns' ``(zbar, keep, B, minv)`` as C-contiguous float64 arrays, the same bits:
    the kernel rounds every operation on its own, in the twin's order (no contraction)."""
    D, k1 = ZtU.shape
    k = k1 - 1
    if is_numpy(xp):
        colsum = ZtU[:, 0]
        zbar, keep, B, minv = cg_columns(np, colsum, colsum * value, ZtU[:, 1:], S, tiny,
                                         csY, alpha, use_diag)
        return (zbar, keep, np.ascontiguousarray(B, dtype=np.float64),
                None if minv is None else np.ascontiguousarray(minv, dtype=np.float64))
    ZtU = xp.ascontiguousarray(ZtU, dtype=xp.float64)
    zbar = xp.empty(D if csY is not None else 0, dtype=xp.float64)
    keep = xp.empty(D, dtype=xp.float64)
    B = xp.empty((D, k), dtype=xp.float64)
    minv = xp.empty((D, k) if use_diag else (0, k), dtype=xp.float64)
    if D:
        _kernel("rb_cg_setup")(
            _blocks(D), (BLOCK,),
            (ZtU, np.int64(D), np.int32(k), np.float64(value), S, np.int32(csY is not None),
             np.float64(tiny), csY if csY is not None else keep, alpha, np.int32(use_diag),
             zbar if csY is not None else keep, keep, B, minv if use_diag else keep))
    return (zbar if csY is not None else None), keep, B, (minv if use_diag else None)


def col_parts(xp, A, w, partial):
    """partial (cg_blocks(m), k): per-block sums of w_i A[i, :] over the rows of the (m, k)
    array A (w (m,), or None for ones), whose totals the next kernel sums (rb_col_parts):
    the CG products' dot products without the array library's reductions, which allocate
    (a CUDA graph replays them). The twin puts the whole total in row 0."""
    m, k = A.shape
    if is_numpy(xp):
        _put_total(partial, A.sum(axis=0) if w is None else (w[:, None] * A).sum(axis=0))
        return
    _launch_cg(xp, "rb_col_parts", m, k, (A, A if w is None else w, np.int32(w is not None)),
               (partial,))


def center_rows(xp, T, partial_c, s):
    """In place: T = (T - c) s, c (k,) the totals of partial_c (col_parts of zbar and P:
    the centred product; skipped where partial_c is None) and s (n,) the sample weights
    (where not None) (rb_center_rows). T (n, k)."""
    n, k = T.shape
    if is_numpy(xp):
        if partial_c is not None:
            T -= partial_c.sum(axis=0)[None, :]
        if s is not None:
            T *= s[:, None]
        return
    has_c, has_s = partial_c is not None, s is not None
    f = _kernel("rb_center_rows")
    for k0 in range(0, k, KMAX):
        f((cg_blocks(n),), (BLOCK,),
          (T, partial_c if has_c else T, np.int32(partial_c.shape[0] if has_c else 0),
           np.int32(has_c), s if has_s else T, np.int32(has_s), np.int64(n), np.int32(k),
           np.int32(k0), np.int32(min(KMAX, k - k0))))


def cg_q(xp, Q, zbar, partial_T, alpha, P, keep, partial):
    """In place: Q = (Q - zbar sumT + alpha P) keep, sumT the totals of partial_T (col_parts
    of T; the zbar term where zbar is not None); partial (nb, k): sums of P Q (kernels.cu,
    rb_cg_q). Q, P (D, k); keep (D,)."""
    D, k = Q.shape
    if is_numpy(xp):
        if zbar is not None:
            Q -= zbar[:, None] * partial_T.sum(axis=0)[None, :]
        Q += alpha[None, :] * P
        Q *= keep[:, None]
        _put_total(partial, (P * Q).sum(axis=0))
        return
    has = zbar is not None
    _launch_cg(xp, "rb_cg_q", D, k,
               (Q, zbar if has else keep, np.int32(has), partial_T if has else alpha,
                np.int32(partial_T.shape[0] if has else 0), alpha, P, keep),
               (partial,))


def cg_step(xp, partial_pq, rz, act, P, Q, X, Rr, minv, Zr, partial, summary):
    """The step along P (rb_cg_step): pq = the total of partial_pq; where act and pq > 0,
    step = rz / pq, else 0; where act: X += step P, Rr -= step Q (an inactive target's X
    and Rr are not written: a stopped target is frozen, whatever its P and Q hold); Zr = Rr
    minv (Rr where minv is None); partial: sums of Rr Rr; summary[1] = (pq > 0). act (k,)
    int32."""
    D, k = P.shape
    if is_numpy(xp):
        pq = partial_pq.sum(axis=0)
        ok = pq > 0
        a = act != 0
        step = np.where(a & ok, rz / np.where(ok, pq, 1.0), 0.0)
        X[:, a] += step[None, a] * P[:, a]
        Rr[:, a] -= step[None, a] * Q[:, a]
        Zr[...] = Rr * minv if minv is not None else Rr
        _put_total(partial, (Rr * Rr).sum(axis=0))
        summary[1] = ok
        return
    _launch_cg(xp, "rb_cg_step", D, k,
               (partial_pq, np.int32(partial_pq.shape[0]), rz, act, P, Q, X, Rr,
                minv if minv is not None else P, np.int32(minv is not None)),
               (Zr, partial, summary))


def cg_dir(xp, Zr, Rr, keep, proj, gsum, partial, placeholder=None):
    """The preconditioned residual's projection and constant columns (rb_cg_dir), in place:
    Zr = (Zr - m_g(j)) keep with gsum (R, k) the per-grid sums of Zr and proj a
    rbcd.cuda.cg.GridProjection (m as its means), or Zr = Zr keep where proj is None;
    partial: sums of Rr Zr. ``placeholder``: an empty int64 array of xp that stands for the
    grid arrays where proj is None (allocated here if not given)."""
    D, k = Zr.shape
    if is_numpy(xp):
        if proj is not None:
            means = gsum * proj.inv_sizes[:, None]
            if not proj.fit_intercept:
                c = means.sum(axis=0) * proj.inv_total
                means = means - proj.inv_sizes[:, None] * c[None, :]
            Zr -= means[proj.grid_of_col]
        Zr *= keep[:, None]
        _put_total(partial, (Rr * Zr).sum(axis=0))
        return
    if proj is None:
        # (mode 0 reads no grid arrays: an empty array stands for them)
        if placeholder is None:
            placeholder = xp.empty(0, dtype=xp.int64)
        args = (Zr, Rr, keep, placeholder, Zr, keep, np.int32(0),
                np.int32(0), np.float64(0.0))
    else:
        args = (Zr, Rr, keep, proj.grid_of_col, gsum, proj.inv_sizes,
                np.int32(proj.inv_sizes.shape[0]), np.int32(1 if proj.fit_intercept else 2),
                np.float64(proj.inv_total))
    _launch_cg(xp, "rb_cg_dir", D, k, args, (partial,))


def cg_p(xp, partial_rz, partial_rr, rz, act, Zr, P, rz_out, summary, thresh, act_out,
         counts):
    """The new direction and the stopping decision on the device (rb_cg_p): rz_new, rr =
    the totals of the partials; where act, P = Zr + beta P with beta = rz_new / rz (0 where
    rz <= 0) and rz_out = rz_new, else rz_out = rz. Then, target by target, what the host
    needs to stop the loop (rbcd.cuda.cg.solve_ridge), for the targets active in this
    iteration only: summary[0] = rn = sqrt(rr) (an inactive target's entry keeps the
    residual norm of its last iteration), counts[0] += 1 (the iterations it ran), counts[1]
    = 1 where summary[1] (this iteration's pq > 0, by cg_step) says the curvature check
    failed (breakdown). act_out = act and pq > 0 and not rn <= thresh: the targets that go
    on to the next iteration (a NaN rn goes on, as the host's test did). act, act_out (k,)
    int32 and counts (2, k) int32; rz_out is not rz and act_out is not act (every block
    reads rz and act)."""
    D, k = P.shape
    if is_numpy(xp):
        rz_new = partial_rz.sum(axis=0)
        rr = partial_rr.sum(axis=0)
        a = act != 0
        beta = np.where(rz > 0, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        P[:, a] = Zr[:, a] + beta[None, a] * P[:, a]
        rz_out[...] = np.where(a, rz_new, rz)
        rn = np.sqrt(rr)
        ok = summary[1] > 0
        summary[0] = np.where(a, rn, summary[0])
        counts[0] += a
        counts[1][a & ~ok] = 1
        act_out[...] = a & ok & ~(rn <= thresh)
        return
    _launch_cg(xp, "rb_cg_p", D, k,
               (partial_rz, partial_rr, np.int32(partial_rz.shape[0]), rz, act, Zr, P),
               (rz_out, summary, thresh, act_out, counts))


class HostCopies:
    """Copies of small device arrays to the host that the host reads later, without
    waiting for the work queued after them (rbcd.cuda.cg.solve_ridge reads an iteration's
    stopping state while the next iteration runs). ``put(slot, *arrays)`` queues the copies
    of C-contiguous device arrays into the slot's pinned host buffers behind the work
    queued so far; ``get(slot)`` waits for those copies only and returns the host arrays
    (valid until the slot's next put, which first waits for the slot's earlier copies);
    ``wait()`` waits for every copy (before the buffers may be dropped). numpy arrays (the
    numpy twin, or an emulation of cupy on numpy) are copied at once."""

    def __init__(self, xp, n_slots):
        self.xp = xp
        self._bufs = [None] * n_slots     # per slot: (pinned memories, host arrays)
        self._events = [None] * n_slots   # per slot: the event after its copies (cupy)
        self._host = [None] * n_slots     # per slot: the arrays get returns

    def put(self, slot, *arrays):
        if all(isinstance(a, np.ndarray) for a in arrays):
            self._host[slot] = [np.array(a) for a in arrays]
            return
        cupy = self.xp
        if self._events[slot] is not None:
            self._events[slot].synchronize()  # the slot's buffers are free again
        bufs = self._bufs[slot]
        if bufs is None or [(h.shape, h.dtype) for h in bufs[1]] != [
                (tuple(a.shape), a.dtype) for a in arrays]:
            mems = [cupy.cuda.alloc_pinned_memory(max(1, a.nbytes)) for a in arrays]
            hosts = [np.frombuffer(m, a.dtype, a.size).reshape(a.shape)
                     for m, a in zip(mems, arrays)]
            bufs = self._bufs[slot] = (mems, hosts)
            self._events[slot] = cupy.cuda.Event(block=False, disable_timing=True)
        stream = cupy.cuda.get_current_stream()
        for h, a in zip(bufs[1], arrays):
            if not a.flags.c_contiguous:
                raise ValueError("HostCopies.put needs C-contiguous arrays")
            if a.nbytes:
                cupy.cuda.runtime.memcpyAsync(h.ctypes.data, a.data.ptr, a.nbytes,
                                              cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        self._events[slot].record(stream)
        self._host[slot] = bufs[1]

    def get(self, slot):
        if self._events[slot] is not None:
            self._events[slot].synchronize()
        return self._host[slot]

    def wait(self):
        for e in self._events:
            if e is not None:
                e.synchronize()
