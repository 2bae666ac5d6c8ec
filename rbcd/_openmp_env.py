"""How rbcd's OpenMP threads wait between parallel regions (the busy-machine rule).

GNU OpenMP (libgomp) lets a thread that has finished its share of a parallel region,
or waits at a barrier, spin on its core for a while before it sleeps (GOMP_SPINCOUNT,
300,000 spins by default). On an idle machine that saves a wake-up; on a machine whose
cores are busy with other processes the spinning threads take the time that the
thread doing the work needs. Measured on 2 vCPUs with other processes on both cores
(docs/internals.md, "Threads on a busy machine"; benchmarks/compare_sizes.py --busy),
RBClassifier fit + predict, n_jobs=None against n_jobs=1: breast cancer 120 against
61 ms with the default spinning, 90 ms with 10,000 spins, 33 ms with the passive
policy (threads sleep at once); wine 320 / 69 / 23 against 48 ms. rbcd therefore asks
for the passive policy (WAIT_POLICY).

libgomp reads its settings from the environment once, when it is loaded. So the
first import of rbcd (which loads libgomp with its first compiled module) sets
``OMP_WAIT_POLICY`` for that moment, loads the library, and puts the environment back
as it was: child processes see the user's environment, not ours. Nothing is changed
when the user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` (their choice stands), or
when the libgomp that rbcd links was already loaded by another library (its settings
are then already read; the renamed copies that wheels such as scikit-learn's carry
are separate libraries and do not count); ``rbcd.show_config()`` says which applied.
"""
import importlib
import os

#: how rbcd's waiting OpenMP threads wait (OMP_WAIT_POLICY): sleep at once
WAIT_POLICY = "PASSIVE"


def _libgomp_loaded():
    """True when the system's libgomp (libgomp.so.*, which rbcd's modules link; not a
    wheel's renamed libgomp-<hash>.so) is mapped in this process (Linux; elsewhere
    assume not)."""
    try:
        with open("/proc/self/maps") as f:
            return any(os.path.basename(line.split()[-1]).startswith("libgomp.so")
                       for line in f if line.strip())
    except OSError:
        return False


def set_wait_policy():
    """Load rbcd's OpenMP runtime with WAIT_POLICY; returns what happened, for
    show_config."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return "user environment"
    if _libgomp_loaded():
        return "libgomp already loaded by another library"
    os.environ["OMP_WAIT_POLICY"] = WAIT_POLICY
    try:
        importlib.import_module("rbcd._openmp_info")
    except ImportError:          # not built yet (an import of the source tree)
        return "not loaded"
    finally:
        del os.environ["OMP_WAIT_POLICY"]
    return f"OMP_WAIT_POLICY={WAIT_POLICY} (set by rbcd)"
