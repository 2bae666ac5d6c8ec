"""Seeds for rbcd's random streams (docs/internals.md, "Random streams")."""
import numpy as np


def make_generator(random_state):
    """A numpy Generator from ``random_state`` (None, int, SeedSequence,
    Generator or RandomState), as docs/design.md contract 2 and docs/internals.md say."""
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
    """The 64-bit seed of the solvers' SplitMix64 coordinate stream."""
    return int(make_generator(random_state).integers(0, 2**63 - 1))
