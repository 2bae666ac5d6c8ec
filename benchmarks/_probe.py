"""Time the compiled kernels inside a fit, without changing what the fit computes.

``KernelProbe`` replaces, for the length of a ``with`` block, every public function of the
extension modules that the Python layer calls through their module attribute
(``rbcd.binning._binning``, ``rbcd.solvers._sparse``, ``rbcd.solvers._cd``) by a wrapper that
records the wall time of each call, and ``_cd.CDProblem`` by a proxy that records each
``epoch`` (and each convergence check and intercept step). The fit runs the same kernels
on the same arrays; only a ``perf_counter`` pair is added around each call (microseconds
against calls of milliseconds at the benchmark's sizes).

What it gives (benchmarks/compare_threads.py uses both):

* ``totals()``: kernel name -> (calls, seconds), the time a stage spends in each kernel;
  the rest of the stage's wall time is the Python/numpy glue between the kernels;
* ``events``: (name, start, end) of every call in order, so that one iteration of a loop can
  be cut out exactly, e.g. a CG iteration as the time between the ends of two successive
  ``cg_direction`` calls, or a CD epoch as one ``CDProblem.epoch`` call.
"""
import time

MODULES = ("rbcd.binning._binning", "rbcd.solvers._sparse", "rbcd.solvers._cd")


def _public_functions(module):
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if callable(obj) and not isinstance(obj, type):
            yield name, obj


class _ProblemProxy:
    """Stands in for a ``_cd.CDProblem``: builds the real one, times the methods that
    run a pass over the data (TIMED)."""

    TIMED = ("epoch", "convergence", "intercept_step")

    def __init__(self, probe, cls, *args, **kwargs):
        object.__setattr__(self, "_probe", probe)
        object.__setattr__(self, "_real", cls(*args, **kwargs))

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if name not in self.TIMED:
            return attr
        probe = self._probe

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                probe._record("CDProblem." + name, t0, time.perf_counter())
        return timed

    def __setattr__(self, name, value):
        setattr(self._real, name, value)


class KernelProbe:
    """``with KernelProbe() as p: fit(...)``; then ``p.totals()``, ``p.events``."""

    def __init__(self, modules=MODULES):
        import importlib

        self.modules = [importlib.import_module(m) for m in modules]
        self.events = []
        self._saved = []

    def _record(self, name, t0, t1):
        self.events.append((name, t0, t1))

    def _wrap(self, name, fn):
        probe = self

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                probe._record(name, t0, time.perf_counter())

        timed.__wrapped__ = fn
        return timed

    def __enter__(self):
        for mod in self.modules:
            for name, fn in list(_public_functions(mod)):
                self._saved.append((mod, name, fn))
                setattr(mod, name, self._wrap(name, fn))
            cls = getattr(mod, "CDProblem", None)
            if cls is not None:
                self._saved.append((mod, "CDProblem", cls))
                probe = self
                setattr(mod, "CDProblem",
                        lambda *a, _cls=cls, **k: _ProblemProxy(probe, _cls, *a, **k))
        return self

    def __exit__(self, *exc):
        for mod, name, fn in reversed(self._saved):
            setattr(mod, name, fn)
        self._saved = []
        return False

    def totals(self):
        """name -> [calls, seconds], largest time first."""
        out = {}
        for name, t0, t1 in self.events:
            c = out.setdefault(name, [0, 0.0])
            c[0] += 1
            c[1] += t1 - t0
        return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))

    def durations(self, name):
        """Durations (s) of every call of ``name``, in order."""
        return [t1 - t0 for n, t0, t1 in self.events if n == name]

    def periods(self, name):
        """Times (s) between the ends of successive calls of ``name``: one loop iteration
        each, where ``name`` is called once per iteration at the same point."""
        ends = [t1 for n, _, t1 in self.events if n == name]
        return [b - a for a, b in zip(ends, ends[1:])]
