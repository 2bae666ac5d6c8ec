"""How much of a GPU fit is the GPU's work (issue 32): the wall time of one binning fit and
one CG solve, and, under Nsight Compute, the sum of their kernels' durations. Where the
wall time is well above the kernels' sum, the host (launches, synchronisations, Python)
is what a faster fit must cut; where they are close, the kernels are.

    # on a GPU machine with ncu (Nsight Compute), from the repository root:
    ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum \\
        --csv python benchmarks/gpu_kernel_time.py --n 1e6 > OUT/ncu.csv
    python benchmarks/gpu_kernel_time.py --summarize OUT/ncu.csv
    python benchmarks/gpu_kernel_time.py --n 1e6 --xp numpy      # dry run, no GPU

The profiled region (cupy.cuda.profiler.start / stop) is the second of two identical fit +
solve runs, after a warm-up (kernel compilation, the memory pool). Under ncu every kernel is
replayed for its metric, so the wall times printed there mean nothing: take them from a run
without ncu (the script prints both the fit's and the solve's wall time, synchronised).
"""
import argparse
import collections
import csv
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import compare_gpu  # noqa: E402 (its problem and sync)
from rbcd import RandomBinning  # noqa: E402
from rbcd.cuda import _ops, binning as cb, cg as ccg  # noqa: E402


def summarize(path, top=25):
    """Per kernel name: launches and total duration, from ncu's --csv output."""
    with open(path) as f:
        lines = [ln for ln in f if ln.startswith('"')]
    total = collections.defaultdict(float)
    count = collections.Counter()
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}.get(unit, 1e-9)
        name = row["Kernel Name"].split("(")[0]
        total[name] += value * scale
        count[name] += 1
    whole = sum(total.values())
    print(f"kernels: {sum(count.values())} launches, {1e3 * whole:.2f} ms of GPU time")
    for name, t in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {1e3 * t:9.3f} ms  {count[name]:6d}x  {name[:90]}")
    return whole


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e6)
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--grids", type=int, default=64)
    p.add_argument("--xp", choices=["cupy", "numpy"], default="cupy")
    p.add_argument("--summarize", help="an ncu --csv output to sum per kernel")
    a = p.parse_args()
    if a.summarize:
        summarize(a.summarize)
        return
    xp = np if a.xp == "numpy" else _ops.cupy_module()
    n = int(a.n)

    def sync():
        compare_gpu.sync(xp)

    X, y = compare_gpu.make_data(xp, n, a.d, 0)   # the benchmark's problem
    y = y.reshape(n, 1)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sync()
            t0 = time.perf_counter()
            layout = cb.fit_layout(RandomBinning(n_grids=a.grids, random_state=0), X, xp)
            sync()
            t1 = time.perf_counter()
            _, _, it, _ = ccg.solve_ridge(xp, layout, y, None, 1e-4 * n, True, 1e-3, None,
                                          "jacobi", structured=True)
            sync()
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1, int(it[0])

    run()                                   # warm-up: compilation, the memory pool
    prof = None if _ops.is_numpy(xp) else xp.cuda.profiler
    if prof is not None:
        prof.start()
    fit_s, cg_s, iters = run()
    if prof is not None:
        prof.stop()
    print(f"gpu_kernel_time: N = {n:,}, d = {a.d}, R = {a.grids}: fit {1e3 * fit_s:.2f} ms, "
          f"CG {1e3 * cg_s:.2f} ms ({iters} iterations), wall, synchronised (meaningless "
          f"under ncu)")


if __name__ == "__main__":
    main()
