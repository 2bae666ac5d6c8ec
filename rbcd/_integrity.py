"""A checksum of every estimator's pickled state, verified when it is unpickled.

A pickle or a model file whose bytes changed after it was written (a bad disk, a truncated
copy, an edit) would otherwise often load and predict something else, silently. rbcd's
estimators inherit :class:`ChecksummedState`: ``__getstate__`` adds the SHA-256 of the
state (:func:`state_digest`: every array's dtype, shape and bytes, every scalar's type
and repr, containers recursively) and ``__setstate__`` recomputes it and raises
:class:`CorruptedStateError` (a ValueError) on a mismatch, before the object is used.

This is an integrity check, not a security boundary: a pickle runs code when loaded, and
whoever can write one can write a matching checksum. Only load pickles you trust.

Nested estimators (``binning_``, ``solver_``) check their own states when they are
unpickled; the enclosing state records only their type. A state without a checksum
(written before rbcd 0.1.0 had one) loads unchecked, unless a key looks like a damaged
checksum key.
"""
import hashlib
import numbers

import numpy as np
import scipy.sparse as sp

__all__ = ["ChecksummedState", "CorruptedStateError", "state_digest"]

#: The key of the checksum in an estimator's state.
CHECKSUM_KEY = "_rbcd_state_sha256"
_MAX_DEPTH = 16


class CorruptedStateError(ValueError):
    """An unpickled state does not match the checksum written with it."""


def _name(obj):
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(obj))}"


def _feed(h, obj, depth, seen):
    """Add ``obj`` to the hash ``h``: a typed, length-prefixed encoding, so different
    states cannot encode to the same bytes by shifting a boundary."""
    if depth > _MAX_DEPTH:
        h.update(b"<deep>")
        return
    if obj is None or isinstance(obj, (bool, numbers.Number, str, bytes, np.generic)):
        text = f"{type(obj).__name__}:{obj!r}".encode()
        h.update(len(text).to_bytes(8, "little") + text)
        return
    if isinstance(obj, np.ndarray):
        h.update(f"ndarray:{obj.dtype.str}:{obj.shape}".encode())
        if obj.dtype.hasobject:
            _feed(h, obj.tolist(), depth + 1, seen)
        else:
            h.update(np.ascontiguousarray(obj).reshape(-1).view(np.uint8) if obj.size else b"")
        return
    if isinstance(obj, np.dtype):
        h.update(f"dtype:{obj.str}".encode())
        return
    if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
        h.update(f"callable:{_name(obj)}".encode())
        return
    if sp.issparse(obj):
        h.update(f"sparse:{obj.format}:{obj.shape}".encode())
        for part in ("data", "indices", "indptr", "row", "col", "offsets"):
            if hasattr(obj, part):
                _feed(h, getattr(obj, part), depth + 1, seen)
        return
    if isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}:{len(obj)}".encode())
        for x in obj:
            _feed(h, x, depth + 1, seen)
        return
    if isinstance(obj, dict):
        h.update(f"dict:{len(obj)}".encode())
        for k in sorted(obj, key=repr):
            _feed(h, k, depth + 1, seen)
            _feed(h, obj[k], depth + 1, seen)
        return
    if isinstance(obj, (set, frozenset)):
        h.update(f"set:{len(obj)}".encode())
        for x in sorted(obj, key=repr):
            _feed(h, x, depth + 1, seen)
        return
    h.update(f"object:{_name(type(obj))}".encode())
    if isinstance(obj, ChecksummedState) or id(obj) in seen:
        return  # checks itself when unpickled; or a cycle
    # keep the object alive with its id: a temporary (a __reduce_ex__ tuple) freed during
    # the walk would let a later temporary reuse its id and be skipped, so that two walks
    # of the same state could give different digests
    seen[id(obj)] = obj
    if hasattr(obj, "__dict__"):
        # what pickle saves of it: __getstate__ where the class leaves caches out
        getstate = getattr(obj, "__getstate__", None)
        state = getstate() if getstate is not None else vars(obj)
        _feed(h, state if state is not None else vars(obj), depth + 1, seen)
        return
    try:  # extension types (a Generator, the binning's tables): what pickle would save
        reduced = obj.__reduce_ex__(4)
    except Exception:
        return
    if isinstance(reduced, tuple):
        _feed(h, reduced[1:3], depth + 1, seen)


def state_digest(state):
    """Hex SHA-256 of an estimator's state (a dict), independent of dict order."""
    h = hashlib.sha256()
    _feed(h, state, 0, {})
    return h.hexdigest()


def _near_miss(key):
    """A str key of the checksum key's length that differs from it in a few characters:
    the checksum key with a damaged byte."""
    return (isinstance(key, str) and key != CHECKSUM_KEY and len(key) == len(CHECKSUM_KEY)
            and sum(a != b for a, b in zip(key, CHECKSUM_KEY)) <= 3)


class ChecksummedState:
    """Mixin (before ``BaseEstimator``): pickles carry a checksum of the state, checked
    when they are loaded (module docstring)."""

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop(CHECKSUM_KEY, None)
        state[CHECKSUM_KEY] = state_digest(state)
        return state

    def __setstate__(self, state):
        if isinstance(state, dict):
            state = dict(state)
            expected = state.pop(CHECKSUM_KEY, None)
            damaged = expected is None and any(_near_miss(k) for k in state)
            if damaged or (expected is not None and expected != state_digest(state)):
                raise CorruptedStateError(
                    f"the saved state of a {type(self).__name__} does not match the checksum "
                    f"written with it: the pickle or model file was damaged after it was "
                    f"written (fit and save the model again)")
        super().__setstate__(state)
