"""Helpers shared by the comparison scripts in benchmarks/ (not a public module).

Each script measures rbcd and its peers in the same run, on the same data, and prints
times and ratios; this module gives them the command line, the machine header, the
timer, the table, the data, a child-process peak-memory probe and atomic output files
(:func:`write_text`, :func:`write_json`, :func:`save_figure`: a failed write leaves the
previous file, never a truncated one).
"""
import argparse
import os
import platform
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------- command line
def parser(description, n=10**6, quick_n=10**5, d=16, grids=64, repeat=3):
    """An argparse parser with the options every script has.

    ``--quick`` replaces the defaults of --n (and of anything a script scales with it) by
    small ones; an explicit --n still wins.
    """
    p = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--n", type=int, default=None,
                   help=f"rows (default {n:,}; {quick_n:,} with --quick)")
    p.add_argument("--d", type=int, default=d, help=f"input features (default {d})")
    p.add_argument("--grids", type=int, default=grids, help=f"R, random grids (default {grids})")
    p.add_argument("--repeat", type=int, default=repeat,
                   help=f"timing repeats, best of (default {repeat})")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: small sizes (and shorter sweeps where a script "
                        "has them); --repeat and the pauses between timed calls are "
                        "unchanged, so it may take minutes, and its timings are not results")
    p.add_argument("--seed", type=int, default=0, help="data and grid seed (default 0)")
    p.set_defaults(_n_default=n, _n_quick=quick_n)
    return p


def resolve_n(args):
    if args.n is None:
        args.n = args._n_quick if args.quick else args._n_default
    return args.n


# ----------------------------------------------------------------------------- machine header
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def print_header(title, args=None):
    """Machine (nproc, CPU model), versions and OpenMP state, then the options."""
    import scipy
    import sklearn

    try:
        import rbcd

        rbcd_version = rbcd.__version__
        try:
            from rbcd._openmp_info import openmp_is_enabled

            omp = "on" if openmp_is_enabled() else "OFF (serial kernels)"
        except ImportError:
            omp = "unknown"
    except ImportError:
        rbcd_version, omp = "not importable", "unknown"
    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(sorted({f"{i.get('internal_api')} {i.get('num_threads')}t"
                                 for i in threadpool_info() if i.get("user_api") == "blas"}))
    except Exception:  # threadpoolctl is optional for the header
        blas = "?"
    print(f"== {title}")
    print(f"machine : {usable_cpus()} usable CPUs (nproc), {cpu_model()}, "
          f"{platform.system()} {platform.release()}")
    print(f"versions: python {platform.python_version()}, numpy {np.__version__}, "
          f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}, "
          f"rbcd {rbcd_version} (OpenMP {omp}), BLAS {blas or 'none found'}")
    env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
           if k in os.environ}
    if env:
        print(f"env     : {env}")
    if args is not None:
        opts = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        print(f"options : {opts}")
    if usable_cpus() < 2:
        print("NOTE    : fewer than 2 usable CPUs: the 2-thread numbers mean nothing here.")
    print(flush=True)


# ----------------------------------------------------------------------------- output files
def atomic_open(path, mode="w"):
    """A file object (context manager) that replaces ``path`` only once everything was
    written and synced; on failure the previous ``path`` stays (rbcd._io.atomic_write)."""
    from rbcd._io import atomic_write

    return atomic_write(path, mode)


def write_text(path, text):
    """Write ``text`` to ``path`` atomically."""
    with atomic_open(path, "w") as fh:
        fh.write(text)


def write_json(path, obj, **kwargs):
    """``json.dump(obj)`` to ``path`` atomically (kwargs go to json.dump)."""
    import json

    with atomic_open(path, "w") as fh:
        json.dump(obj, fh, **kwargs)


def save_figure(fig, path, **kwargs):
    """``fig.savefig`` to ``path`` atomically; the format comes from the extension."""
    fmt = kwargs.pop("format", None) or os.path.splitext(path)[1].lstrip(".").lower() or "png"
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format=fmt, **kwargs)


# ----------------------------------------------------------------------------- timing
def best_of(fn, repeat=3, settle=0.0):
    """(smallest wall time of ``repeat`` calls of fn(), the last return value).

    The previous return value is dropped before each call, so that a call does
    not run while an earlier output (possibly hundreds of MB) is still held.
    ``settle``: seconds to sleep before each call, untimed. A BLAS call (scikit-learn's
    solvers make them) leaves OpenBLAS's threads busy-waiting for about 0.1 s on the
    cores; a multi-threaded fit timed inside that window measures the contention.
    """
    best, out = float("inf"), None
    for _ in range(max(1, repeat)):
        out = None
        if settle:
            time.sleep(settle)
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def csr_digest(Z):
    """SHA-256 of a CSR matrix's shape, indptr, indices and data (to compare
    outputs without holding both)."""
    import hashlib

    h = hashlib.sha256(repr((Z.shape, Z.indices.dtype.str, Z.data.dtype.str)).encode())
    for a in (Z.indptr, Z.indices, Z.data):
        h.update(np.ascontiguousarray(a).view(np.uint8).data)
    return h.hexdigest()


def quiet():
    """Ignore ConvergenceWarnings: fixed-epoch runs stop early on purpose."""
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.filterwarnings("ignore", message=".*converge.*")


def fmt_time(t):
    if t != t:  # nan
        return "n/a"
    if t >= 1.0:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.1f} ms"
    return f"{t * 1e6:.0f} us"


def ratio(a, b):
    """a / b, or nan when either is not a positive number (timer noise at tiny sizes)."""
    if not (a > 0 and b > 0):
        return float("nan")
    return a / b


def fmt_ratio(r):
    return "n/a" if r != r else f"{r:.2f}x"


def fmt_bytes(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(b) < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024.0


def check(value, target, higher_is_better):
    """'ok' / 'MISSED' beside a target (a ratio compared with its bound)."""
    if value != value or target is None:
        return ""
    ok = value >= target if higher_is_better else value <= target
    return "ok" if ok else "MISSED"


def table(rows, headers):
    """Print a plain fixed-width table (rows: lists of already formatted cells)."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print(flush=True)


def note(text):
    print(textwrap.fill(text, 100, initial_indent="note: ", subsequent_indent="      "))


# ----------------------------------------------------------------------------- data
def make_X(n, d, seed=0):
    """Uniform data on [0, 1)^d, float64 C-contiguous (same as asv_benches/common.py)."""
    return np.random.default_rng([seed, n, d]).random((n, d))


def make_regression_target(X, seed=0):
    rng = np.random.default_rng([seed, 7, X.shape[0]])
    k = min(4, X.shape[1])
    return np.sin(2.0 * np.pi * X[:, :k]).sum(axis=1) + 0.1 * rng.standard_normal(X.shape[0])


def rb_matrix(n, d, grids, sigma=1.0, seed=0, n_jobs=None):
    """(fitted rbcd.RandomBinning, Z CSR, X) for make_X(n, d, seed)."""
    import rbcd

    X = make_X(n, d, seed)
    rb = rbcd.RandomBinning(n_grids=grids, sigma=sigma, n_jobs=n_jobs, random_state=seed)
    Z = rb.fit_transform(X)
    return rb, Z, X


def sparse_nbytes(Z):
    return Z.data.nbytes + Z.indices.nbytes + Z.indptr.nbytes


def predicted_speedup(tau, nnz_per_row, n_columns):
    """Paper eq. 29: tau / (1 + (R - 1)(tau - 1) / (D - 1)), R = non-zeros per row."""
    if n_columns <= 1:
        return 1.0
    return tau / (1.0 + (nnz_per_row - 1.0) * (tau - 1.0) / (n_columns - 1.0))


# ----------------------------------------------------------------------------- peak memory
_CHILD = r"""
import resource, sys, json
import numpy as np
sys.path.insert(0, {here!r})
import _common
{imports}
X = _common.make_X({n}, {d}, {seed})
{code}
print("RESULT " + json.dumps({{"peak": _common.own_peak_rss(), "extra": locals().get("extra", None)}}))
"""


def own_peak_rss():
    """Peak resident memory (bytes) of this process's own address space.

    VmHWM from /proc/self/status: it starts afresh at exec. ru_maxrss does not (on Linux
    a child started by fork + exec keeps the parent's high-water mark as a floor, so a
    probe launched from a big parent would read the parent's size); it is only the
    fallback where /proc is missing.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def child_maxrss(n, d, seed, code, imports="", env=None):
    """Peak resident memory (bytes) of a fresh interpreter that builds make_X(n, d, seed),
    then runs ``code`` (which may set a JSON-able ``extra``). Returns (bytes, extra).

    Measured inside the child (its own high-water mark, see own_peak_rss), so neither this
    process nor any other counts.
    """
    import json

    src = _CHILD.format(here=HERE, imports=imports, n=n, d=d, seed=seed, code=code)
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                          env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"memory probe failed:\n{proc.stderr[-2000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    res = json.loads(line[len("RESULT "):])
    return res["peak"], res["extra"]
