"""Seeds for rbcd's random streams (docs/internals.md, "Random streams")."""
import numpy as np


def make_generator(random_state):
    """A numpy Generator from ``random_state`` (None, int, SeedSequence,
    Generator or RandomState), as docs/design.md contract 2 and docs/internals.md say."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    return np.random.default_rng(random_state)


def solver_seed(random_state):
    """The 64-bit seed of the solvers' SplitMix64 coordinate stream."""
    return int(make_generator(random_state).integers(0, 2**63 - 1))
