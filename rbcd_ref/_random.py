"""Random streams of rbcd_ref, written out exactly as docs/internals.md specifies.

Three things live here:

* ``make_generator`` / ``solver_seed``: turn ``random_state`` into the numpy Generator that
  draws the grids (docs/design.md contract 2) and into the 64-bit seed of the solvers' coordinate
  stream (contract 10). Same semantics as ``rbcd/_random.py``; rbcd_ref never imports rbcd,
  so the few lines are repeated here.
* ``SplitMix64``: the small portable generator the coordinate-descent solvers draw their
  coordinates from. Python integers are unbounded, so every step is masked to 64 bits.
* ``mix64`` / ``hash_bin_vector``: the documented 64-bit hash of (grid r, bin vector) used by
  the hashed mode (contract 5, ``n_features=m``).
"""
import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
MIX_MUL1 = 0xBF58476D1CE4E5B9
MIX_MUL2 = 0x94D049BB133111EB


def make_generator(random_state):
    """A ``numpy.random.Generator`` from ``random_state``.

    A Generator is used as is; a legacy ``RandomState`` seeds a fresh Generator with
    ``random_state.randint(0, 2**31 - 1)``; anything else (None, int, SeedSequence) goes to
    ``numpy.random.default_rng``.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError) as exc:     # numpy's message does not name the parameter
        raise ValueError(f"random_state must be None, a non-negative int, a SeedSequence, "
                         f"a numpy Generator or RandomState, got {random_state!r}") from exc


def solver_seed(random_state):
    """The seed of the solvers' SplitMix64 stream: one draw in [0, 2**63 - 1).

    Called once per ``fit``, so ``random_state=None`` differs from run to run while an int
    gives the same seed every time.
    """
    return int(make_generator(random_state).integers(0, 2**63 - 1))


def mix64(z):
    """The finalizer of SplitMix64 (its last three lines), on a 64-bit unsigned integer."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * MIX_MUL1) & MASK64
    z = ((z ^ (z >> 27)) * MIX_MUL2) & MASK64
    return z ^ (z >> 31)


class SplitMix64:
    """SplitMix64 (Steele, Lea & Flood 2014), arithmetic modulo 2**64.

    ``next()`` advances the state by the golden-ratio constant and returns ``mix64(state)``;
    ``randbelow(n)`` is ``(next() * n) >> 64``, the high word of the 128-bit product (bias at
    most n / 2**64, negligible here).
    """

    def __init__(self, seed):
        self.state = int(seed) & MASK64

    def next(self):
        self.state = (self.state + GOLDEN_GAMMA) & MASK64
        return mix64(self.state)

    def randbelow(self, n):
        n = int(n)
        if n < 1:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        return (self.next() * n) >> 64


def hash_bin_vector(r, bins, n_features):
    """Column of bin vector ``bins`` of grid ``r`` in hashed mode (docs/internals.md).

        h = mix64(r + GOLDEN_GAMMA)
        for each bin b_j:  h = mix64((h ^ (b_j mod 2**64)) + GOLDEN_GAMMA)
        column = h % n_features

    ``b_j mod 2**64`` is the two's-complement bit pattern of the int64 bin (Python's ``&``
    with the 64-bit mask gives exactly that for negative integers).
    """
    h = mix64(int(r) + GOLDEN_GAMMA)
    for b in bins:
        h = mix64(((h ^ (int(b) & MASK64)) + GOLDEN_GAMMA) & MASK64)
    return h % int(n_features)


def problem_stream(seed, k):
    """The coordinate stream of one-vs-rest problem / regression target k: SplitMix64(seed + k)."""
    return SplitMix64((int(seed) + int(k)) & MASK64)
