"""The binning's key kernel and sort, A/B in one process on one GPU (issue 32):

* rb_batch_keys32 as built (rb_floor_quot: the product by 1 / w, the division only near
  an integer) against the same kernel compiled with the plain true division
  (``floor((x - u) / w)``, the code before), on the same inputs; the outputs must be equal;
* CuPy's sort of the batch's words as uint64 (wide) and as uint32 (narrow).

    python benchmarks/gpu_keys_ab.py --n 1e6 1e7 --grids 16 --rounds 7     # on a GPU

The kernels alternate, each launch timed by CUDA events; the medians are printed.
"""
import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from rbcd import RandomBinning  # noqa: E402
from rbcd.cuda import _ops, binning as cb  # noqa: E402

DIVISION = """__device__ __forceinline__ long long rb_floor_quot(double x, double u, double w, double rw)
{
    return (long long)floor((x - u) / w);
}
"""


def division_source(source):
    """kernels.cu with rb_floor_quot's body replaced by the plain true division."""
    start = source.index("__device__ __forceinline__ long long rb_floor_quot(")
    end = source.index("\n}\n", start) + 3
    return source[:start] + DIVISION + source[end:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, nargs="+", default=[1e6, 1e7])
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--grids", type=int, default=16)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()
    cp = _ops.cupy_module()
    path = os.path.join(os.path.dirname(HERE), "rbcd", "cuda", "kernels.cu")
    with open(path) as f:
        source = f.read()
    mods = {"product (as built)": cp.RawModule(code=source),
            "division": cp.RawModule(code=division_source(source))}
    G, d = a.grids, a.d
    start, stop = cp.cuda.Event(), cp.cuda.Event()

    def clock(f):
        start.record()
        f()
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)

    for n in (int(v) for v in a.n):
        X = cp.random.RandomState(0).random_sample((n, d), dtype=cp.float64)  # compare_gpu's X
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            X, widths, offsets, lo, hi, cmin, cmax, _, _ = cb._prepare(
                RandomBinning(n_grids=G, random_state=0), X, cp)
        tables = cb.CudaTables(widths, offsets, lo, hi, cmin, cmax, None, None)
        dev = tables.device_arrays(cp)
        top = tables.layout()[3]
        row_bits = cb._row_bits(n)
        g = G
        while g > 1 and cb._narrow(list(range(g)), top, row_bits) is None:
            g -= 1                            # the first grids whose narrow words fit
        base = cb._narrow(list(range(g)), top, row_bits)
        if base is None:
            print(f"N = {n:,}: grid 0's words do not fit 32 bits; skipped")
            continue
        base_d = cp.asarray(base)
        outs = {k: cp.empty((g, n), dtype=cp.uint32) for k in mods}
        times = {k: [] for k in mods}

        def launch(k):
            mods[k].get_function("rb_batch_keys32")(
                ((n + 255) // 256,), (256,),
                (X, np.int64(n), np.int32(d), np.int32(g), dev["u"][:g], dev["w"][:g],
                 dev["rw"][:g], dev["lo"][:g], dev["shift"][:g], np.int32(row_bits), base_d,
                 outs[k]))

        for k in mods:
            launch(k)
        for _ in range(a.rounds):
            for k in mods:
                times[k].append(clock(lambda: launch(k)))
        same = all(bool((outs[k] == outs["division"]).all()) for k in mods)
        print(f"N = {n:,}, d = {d}, {g} grids: rb_batch_keys32, medians of {a.rounds} "
              f"(ms): " + ", ".join(f"{k} {np.median(v):.3f}" for k, v in times.items())
              + f"; outputs equal: {same}")
        wide = cp.random.RandomState(1).randint(0, 2**62, size=g * n, dtype=cp.int64).view(
            cp.uint64)
        narrow = outs["division"].reshape(-1)
        st = {"uint64": [], "uint32": []}
        cp.sort(wide)
        cp.sort(narrow)
        for _ in range(a.rounds):
            st["uint64"].append(clock(lambda: cp.sort(wide)))
            st["uint32"].append(clock(lambda: cp.sort(narrow)))
        print(f"  cupy.sort of {g * n:,} words, medians (ms): "
              + ", ".join(f"{k} {np.median(v):.3f}" for k, v in st.items()))


if __name__ == "__main__":
    main()
