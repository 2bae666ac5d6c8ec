"""rbcd on one GPU (device="cuda", rbcd.cuda) against rbcd on the CPU cores of the same
machine and against a GPU random-Fourier-features + ridge baseline (issue 32).

    python benchmarks/compare_gpu.py --out OUT                       # N 1e5..5e7, R 64, 256
    python benchmarks/compare_gpu.py --sizes 1e5 1e6 1e7 --grids 64 --cpu-max 1e6 --out OUT
    python benchmarks/compare_gpu.py --xp numpy --sizes 2000 --grids 8 --out OUT  # dry run

Problem: X uniform in [0, 1]^d (d = 16), y = sin(2 pi x0) + 4 (x1 - 0.5)(x2 - 0.5)
+ |x2 - 0.5| + 0.1 noise; sigma="scale"; ridge with alpha = 1e-4 per row; CG to --tol
(1e-3); the preconditioner of RBRegressor's "auto" (projected Jacobi up to 8 bins per row). Accuracy:
R^2 on --n-test fresh rows. Stages, each timed after a device synchronisation: binning
(fit: keys, sort, numbering, layout), CG, predict (transform of the test rows + Z w).

Z is checked bit for bit against the CPU's wherever the CPU runs (its indices, indptr and
values), and the GPU's prediction path against the CPU's with the CPU's coefficients
("pred diff, same w": must be <= 1e-6). Up to --check-max rows, Z is also checked where
the CPU baseline does not run: the CPU's binning alone (all cores), compared with the
GPU's grid labels a block of rows at a time (the GPU's CSR is not built). The random-Fourier baseline (Laplacian kernel:
Cauchy frequencies of scale 1/sigma, the same sigma) grows its feature count through
--rff-features until its test R^2 reaches the GPU RB's (within --rff-slack), then bisects
on multiples of --rff-step down to the fewest features that reach it, up to --rff-max
rows; each feature count is fit with --rff-seeds frequency draws, its R^2 their mean (one
draw's R^2 varies by several points: the Cauchy frequencies are heavy-tailed), its time
their median. Sizes whose estimated GPU memory exceeds the free memory are skipped and
listed. Results: a table on stdout, OUT/gpu_results.json and OUT/gpu.md (written after each
configuration, so a run cut short keeps what it measured).
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout's rbcd first

import _common as C  # noqa: E402
import rbcd  # noqa: E402
from rbcd import RandomBinning, RidgeCG  # noqa: E402
from rbcd.models import _preconditioner  # noqa: E402
from rbcd.cuda import _ops, binning as cb, cg as ccg  # noqa: E402

ALPHA_PER_ROW = 1e-4


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7, 5e7])
    p.add_argument("--grids", type=int, nargs="+", default=[64, 256])
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--n-test", type=int, default=200_000)
    p.add_argument("--cpu-max", type=float, default=1e6, help="largest N run on the CPU")
    p.add_argument("--cpu-max-work", type=float, default=6.4e8,
                   help="largest N * R run on the CPU")
    p.add_argument("--check-max", type=float, default=0.0,
                   help="largest N whose Z is checked against the CPU's binning alone (no "
                        "CPU solve) where the CPU baseline does not run (default 0: none)")
    p.add_argument("--check-whole-max", type=float, default=6.4e9,
                   help="largest N * R whose CPU Z (--check-max) is built whole; above, the "
                        "CPU transforms the training rows a block at a time")
    p.add_argument("--gpu-max-work", type=float, default=float("inf"),
                   help="largest N * R run on the GPU (larger ones are skipped)")
    p.add_argument("--rff-max", type=float, default=1e6, help="largest N of the RFF baseline")
    p.add_argument("--rff-features", type=int, nargs="+", default=[256, 1024, 2048, 4096])
    p.add_argument("--rff-slack", type=float, default=0.002,
                   help="RFF counts as equal when its R^2 >= RB's R^2 - slack")
    p.add_argument("--rff-seeds", type=int, default=3,
                   help="RFF fits per feature count (frequency draws 0, 1, ...): its R^2 is "
                        "their mean, its time their median")
    p.add_argument("--rff-step", type=int, default=256,
                   help="feature counts between the last ladder rung short of RB's R^2 and "
                        "the first that reaches it are searched by bisection on multiples "
                        "of this")
    p.add_argument("--repeat", type=int, default=1, help="GPU fits per size (fastest kept)")
    p.add_argument("--budget", type=float, default=1e9,
                   help="seconds: no new configuration starts after this")
    p.add_argument("--xp", choices=["cupy", "numpy"], default="cupy",
                   help="numpy: a dry run of the same code on the numpy twins")
    p.add_argument("--graph", action="store_true",
                   help="GPU CG through solve_ridge's CUDA graph loop (graph=True)")
    p.add_argument("--out", required=True)
    return p.parse_args()


def target(xp, X, noise_rng=None):
    y = (xp.sin(2 * np.pi * X[:, 0]) + 4 * (X[:, 1] - 0.5) * (X[:, 2] - 0.5)
         + xp.abs(X[:, 2] - 0.5))
    if noise_rng is not None:
        y = y + 0.1 * noise_rng.standard_normal(X.shape[0])
    return y


def r2(y, p):
    y, p = np.asarray(y, dtype=np.float64), np.asarray(p, dtype=np.float64)
    return 1.0 - float(np.sum((y - p) ** 2)) / float(np.sum((y - y.mean()) ** 2))


def sync(xp):
    if not _ops.is_numpy(xp):
        xp.cuda.Device().synchronize()


def gpu_name(xp):
    if _ops.is_numpy(xp):
        return "none (numpy dry run)"
    props = xp.cuda.runtime.getDeviceProperties(xp.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def cpu_name():
    return C.cpu_model()


def free_memory(xp):
    if _ops.is_numpy(xp):
        return None
    free, _total = xp.cuda.runtime.memGetInfo()
    return int(free)


def gpu_bytes(n, d, R):
    """Estimated peak device bytes of one fit: X, labels and CSC rows (int32), the sort's
    keys and scratch, the CG's n-vectors, and a margin for the pool."""
    return 8 * n * d + 8 * n * R + 48 * n + (1 << 30)


def make_data(xp, n, d, seed):
    """Training data on the module xp (generated there: no host copy of large X)."""
    if _ops.is_numpy(xp):
        rng = np.random.default_rng(seed)
        X = rng.uniform(size=(n, d))
        return X, target(np, X, rng)
    rng = xp.random.RandomState(seed)
    X = rng.random_sample((n, d), dtype=xp.float64)
    return X, target(xp, X, rng)


# ------------------------------------------------------------------------------- RB, GPU
def rb_gpu(xp, X, y, Xt, R, tol, graph=False):
    """(timings, model pieces) of one GPU fit + predict (``graph``: solve_ridge's CUDA
    graph loop, pairs of iterations replayed from one capture)."""
    n = X.shape[0]
    est = RandomBinning(n_grids=R, random_state=0)
    sync(xp)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layout = cb.fit_layout(est, X, xp)
    sync(xp)
    t1 = time.perf_counter()
    D = layout.n_columns
    pre = _preconditioner("auto", tol, (n, D), True)
    Y = y.reshape(n, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coef, intercept, n_iter, info = ccg.solve_ridge(
            xp, layout, Y, None, ALPHA_PER_ROW * n, True, tol, None, pre, structured=True,
            graph=graph)
    sync(xp)
    t2 = time.perf_counter()
    labels = cb.transform_labels(est, Xt, xp)
    pred = _ops.to_host(_ops.zdot(xp, labels, layout.grid_ptr, _ops.on_device(xp, coef.T),
                                  layout.value))[:, 0] + intercept[0]
    sync(xp)
    t3 = time.perf_counter()
    return dict(binning=t1 - t0, cg=t2 - t1, predict=t3 - t2, iters=int(n_iter[0]),
                graph=bool(info.get("graph", False)),
                D=int(D), converged=bool(info["converged"][0]),
                **time_products(xp, layout)), (est, layout, pred, labels)


def timed(xp, f, reps):
    """Seconds of one call of f (after one untimed call), the mean of reps."""
    f()
    sync(xp)
    t0 = time.perf_counter()
    for _ in range(reps):
        f()
    sync(xp)
    return (time.perf_counter() - t0) / reps


def time_products(xp, layout, reps=3):
    """The two label passes of a CG iteration, k = 1: Z p (rb_zdot) and Z^T u
    (GridLayout.tdot: rb_piece_sums + rb_segment_sums over the grid-sorted layout)."""
    P = xp.ones((layout.n_columns, 1))
    U = xp.ones((layout.n_rows, 1))
    return dict(t_zdot=timed(xp, lambda: layout.dot(P), reps),
                t_tdot=timed(xp, lambda: layout.tdot(U), reps))


def copy_bandwidth(xp):
    """Device memory bandwidth, bytes/s: a 1 GiB device-to-device copy (read + write),
    the best of 5 (numpy: 64 MiB on the host)."""
    n = (1 << 27) if not _ops.is_numpy(xp) else (1 << 23)
    a = xp.ones(n)
    b = xp.empty_like(a)
    best = min(timed(xp, lambda: b.__setitem__(Ellipsis, a), 1) for _ in range(5))
    del a, b
    return 2 * 8 * n / best


# ------------------------------------------------------------------------------- RB, CPU
def rb_cpu(X, y, Xt, R, tol):
    n = X.shape[0]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rb = RandomBinning(n_grids=R, random_state=0, n_jobs=-1)
        Z, cols = rb.fit_transform(X, return_columns=True)
    t1 = time.perf_counter()
    pre = _preconditioner("auto", tol, Z.shape, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ridge = RidgeCG(alpha=ALPHA_PER_ROW * n, tol=tol, preconditioner=pre, n_jobs=-1)
        ridge.fit(Z, y, columns=cols)
    t2 = time.perf_counter()
    pred = ridge.predict(rb.transform(Xt))
    t3 = time.perf_counter()
    return dict(binning=t1 - t0, cg=t2 - t1, predict=t3 - t2, iters=int(ridge.n_iter_[0]),
                D=int(Z.shape[1])), (rb, Z, ridge, pred)


def _host_all_equal(a, v, chunk=1 << 24):
    """Whether every entry of the host array ``a`` equals ``v``: chunks of ``a`` compared
    on all cores (numpy's comparisons release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor
    a = a.reshape(-1)
    v = a.dtype.type(v)
    starts = range(0, a.shape[0], chunk)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return all(pool.map(lambda s: bool(np.all(a[s:s + chunk] == v)), starts))


def z_check(xp, Xd, est, layout, R, block=1 << 20, whole_max=6.4e9):
    """Whether the CPU's Z of X (RandomBinning with the same parameters, all cores) equals
    the GPU's, bit for bit: indices against the GPU labels + grid offsets a block of rows
    at a time, indptr, and every value.

    Up to ``whole_max`` stored entries (N x R) the CPU's Z is its fit_transform. Above,
    where that Z would not fit the host (5 x 10^7 rows x 256 grids: 154 GB), the CPU fits
    its tables alone and transforms the training rows a block at a time: the transform
    of the training rows is the fit's Z bit for bit (docs/design.md), so each block is
    the fit's Z of those rows, and the check holds one block of it at a time.

    A block's indices are copied to the device and compared there with the labels (a
    transposed compare the GPU does at its bandwidth; on the host, the labels' copy, its
    transpose and the int64 sums took seconds a block); its indptr and values are checked
    on the host, the values on all cores."""
    X = _ops.to_host(Xd)
    n = X.shape[0]
    offsets = np.asarray(est.grid_ptr_[:-1], dtype=np.int64)
    value = np.asarray(est._value())
    rb = RandomBinning(n_grids=R, random_state=0, n_jobs=-1)

    def same_block(Zb, a, b):
        if not (Zb.shape == (b - a, est.n_features_out_) and Zb.nnz == (b - a) * R
                and np.array_equal(Zb.indptr, np.arange(0, (b - a) * R + 1, R))
                and _host_all_equal(Zb.data, value.astype(Zb.data.dtype))):
            return False
        idx = _ops.on_device(xp, Zb.indices.reshape(b - a, R))
        off = _ops.on_device(xp, offsets.astype(idx.dtype))  # every offset < D
        same = bool(((idx - off[None, :]) == layout.labels[:, a:b].T).all())
        del idx
        return same

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if n * R > whole_max:
            rb.fit(X)

            def rows(a, b):
                return rb.transform(X[a:b])
        else:
            Z = rb.fit_transform(X)

            def rows(a, b):
                return Z[a:b]
        if not np.array_equal(rb.grid_ptr_, est.grid_ptr_):
            return False
        for a in range(0, n, block):
            b = min(n, a + block)
            if not same_block(rows(a, b), a, b):
                return False
    return True


# ------------------------------------------------------------------------------- RFF, GPU
def rff(xp, X, y, Xt, m, sigma, seed=0, chunk=None):
    """Random Fourier features of the Laplacian kernel exp(-||x - y||_1 / sigma) (Cauchy
    frequencies of scale 1/sigma) + ridge (alpha 1e-4 per row) by the normal equations, in
    float32 feature chunks accumulated in float64. Returns (seconds fit, seconds predict, pred)."""
    n, d = X.shape
    if chunk is None:  # feature chunks of about 1 GiB
        chunk = max(4096, (1 << 30) // (4 * m))
    rng = np.random.default_rng(seed)
    W = _ops.on_device(xp, rng.standard_cauchy((d, m)) / sigma, np.float32)
    b = _ops.on_device(xp, rng.uniform(0, 2 * np.pi, m), np.float32)
    scale = np.float32(np.sqrt(2.0 / m))

    def feats(A):
        return xp.cos(A.astype(xp.float32) @ W + b) * scale

    sync(xp)
    t0 = time.perf_counter()
    G = xp.zeros((m, m))
    g = xp.zeros(m)
    s = xp.zeros(m)
    ysum = float(y.sum())
    for a in range(0, n, chunk):
        F = feats(X[a:a + chunk])
        G += (F.T @ F).astype(xp.float64)
        g += (F.T @ y[a:a + chunk].astype(xp.float32)).astype(xp.float64)
        s += F.sum(axis=0).astype(xp.float64)
    mean = s / n
    ybar = ysum / n
    A = G - n * xp.outer(mean, mean) + ALPHA_PER_ROW * n * xp.eye(m)
    rhs = g - n * mean * ybar
    w = xp.linalg.solve(A, rhs)
    b0 = ybar - float(mean @ w)
    sync(xp)
    t1 = time.perf_counter()
    pred = _ops.to_host(feats(_ops.on_device(xp, Xt)).astype(xp.float64) @ w) + b0
    sync(xp)
    return t1 - t0, time.perf_counter() - t1, pred


def rff_at(args, xp, Xd, yd, Xt_dev, yt, sigma, m):
    """RFF with m features over --rff-seeds frequency draws: mean R^2, median fit time."""
    fits, scores = [], []
    for seed in range(max(1, args.rff_seeds)):
        fit_s, _, fpred = rff(xp, Xd, yd, Xt_dev, m, sigma, seed=seed)
        fits.append(fit_s)
        scores.append(r2(yt, fpred))
    f = dict(m=int(m), fit=float(np.median(fits)), r2=float(np.mean(scores)),
             r2_min=float(np.min(scores)), r2_max=float(np.max(scores)), reached=False)
    print(f"  RFF m={m}: fit {f['fit']:.3f} s (median of {len(fits)}), R^2 {f['r2']:.4f} "
          f"(mean; {f['r2_min']:.4f}-{f['r2_max']:.4f})", flush=True)
    return f


def rff_search(args, xp, Xd, yd, Xt_dev, yt, sigma, target):
    """The fewest RFF features whose mean test R^2 reaches ``target``: up the
    --rff-features ladder, then by bisection on multiples of --rff-step between the last
    rung short of it and the first that reaches it (the RFF R^2 of one frequency draw
    varies by several points at a given m: Cauchy frequencies are heavy-tailed)."""
    lo, best, tried = None, None, []
    for m in args.rff_features:
        f = rff_at(args, xp, Xd, yd, Xt_dev, yt, sigma, m)
        tried.append((f["m"], f["r2"]))
        if f["r2"] >= target:
            best = f
            break
        lo = f
    if best is None:
        lo["tried"] = tried
        return lo
    step = max(1, int(args.rff_step))
    a, b = (lo["m"] if lo is not None else 0) // step, best["m"] // step
    while b - a > 1:
        mid = (a + b) // 2
        f = rff_at(args, xp, Xd, yd, Xt_dev, yt, sigma, mid * step)
        tried.append((f["m"], f["r2"]))
        if f["r2"] >= target:
            best, b = f, mid
        else:
            a = mid
    best["reached"] = True
    best["tried"] = tried
    return best


# ------------------------------------------------------------------------------- report
COLUMNS = ["N", "R", "D", "GPU binning", "GPU CG (it)", "GPU per it", "Z p", "Z^T u",
           "label bound", "GPU bin+CG",
           "GPU predict", "GPU R^2", "CPU bin+CG", "CPU R^2", "speedup", "Z equal",
           "pred diff, same w", "RFF m", "RFF fit", "RFF R^2", "RB vs RFF"]


def fmt(x, unit="s"):
    if x is None:
        return "-"
    if unit == "s":
        if x >= 0.1:
            return f"{x:.3f} s"
        return f"{1e3 * x:.1f} ms" if x >= 0.01 else f"{1e3 * x:.2f} ms"
    return str(x)


def row_of(r):
    g, c, f = r.get("gpu"), r.get("cpu"), r.get("rff")
    cells = [f"{int(r['N']):,}", str(r["R"])]
    if g is None:
        return cells + [r.get("skipped", "skipped")] + ["-"] * (len(COLUMNS) - 3)
    bc = g["binning"] + g["cg"]
    cells += [str(g["D"]), fmt(g["binning"]), f"{fmt(g['cg'])} ({g['iters']})",
              fmt(g["cg"] / max(g["iters"], 1)), fmt(g["t_zdot"]), fmt(g["t_tdot"]),
              fmt(g["bound"]), fmt(bc), fmt(g["predict"]),
              f"{g['r2']:.4f}"]
    if c is not None:
        cbc = c["binning"] + c["cg"]
        cells += [fmt(cbc), f"{c['r2']:.4f}", f"{cbc / bc:.1f}x",
                  "yes" if r.get("z_equal") else "NO", f"{r['pred_diff_same_w']:.1e}"]
    elif "z_equal" in r:  # checked against the CPU's binning alone (--check-max)
        cells += ["-", "-", "-", "yes (binning only)" if r["z_equal"] else "NO", "-"]
    else:
        cells += ["-", "-", "-", "-", "-"]
    if f is not None:
        spread = (f" ({f['r2_min']:.3f}-{f['r2_max']:.3f})" if "r2_min" in f else "")
        cells += [f"{f['m']}{'' if f['reached'] else ' (not reached)'}", fmt(f["fit"]),
                  f"{f['r2']:.4f}{spread}", f"{f['fit'] / bc:.1f}x"]
    else:
        cells += ["-", "-", "-", "-"]
    return cells


def write(out, meta, results):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "gpu_results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    lines = ["# rbcd on one GPU (generated by benchmarks/compare_gpu.py)", "",
             f"GPU: {meta['gpu']}; CPU: {meta['cpu']} ({meta['cpu_count']} logical cores); "
             f"CuPy {meta['cupy']}; rbcd {meta['rbcd']}; d = {meta['d']}, tol {meta['tol']}, "
             f"alpha 1e-4 per row, sigma='scale'; {meta['n_test']} test rows; measured "
             f"copy bandwidth {meta['copy_bw'] / 1e9:.0f} GB/s. "
             f"Command: `{meta['command']}`", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row_of(r)) + " |" for r in results]
    lines += ["", "GPU per it: CG time / iterations. Z p, Z^T u: one product each (k = 1; "
              "Z^T u: the gather over the grid-sorted layout). label bound: the labels read "
              "by one CG iteration (Z p and Z^T u: 2 x 4 R N bytes) at the measured copy "
              "bandwidth.",
              "", "speedup: CPU (binning + CG) / GPU (binning + CG). RB vs RFF: RFF fit time / "
              "GPU RB binning + CG at the fewest RFF features (the ladder, then bisection on "
              f"multiples of {meta.get('rff_step', '-')}) whose test R^2, the mean over "
              f"{meta.get('rff_seeds', 1)} frequency draws (their range in brackets), reached "
              f"RB's within {meta['rff_slack']}; RFF fit: the median of those draws' fit times. "
              "Z equal: GPU Z == CPU Z bit for bit. pred diff, "
              "same w: max |GPU predict - CPU predict| with the CPU's coefficients.", ""]
    skipped = [r for r in results if r.get("gpu") is None]
    if skipped:
        lines += ["Skipped: " + "; ".join(f"N={int(r['N']):,} R={r['R']}: {r['skipped']}"
                                          for r in skipped), ""]
    with open(os.path.join(out, "gpu.md"), "w") as f:
        f.write("\n".join(lines))
    return lines


def main():
    args = parse()
    xp = np if args.xp == "numpy" else _ops.cupy_module()
    start = time.perf_counter()
    meta = dict(gpu=gpu_name(xp), cpu=cpu_name(), cpu_count=os.cpu_count(),
                cupy=getattr(xp, "__version__", "-") if not _ops.is_numpy(xp) else "-",
                rbcd=rbcd.__version__ if hasattr(rbcd, "__version__") else "-", d=args.d,
                tol=args.tol, n_test=args.n_test, rff_slack=args.rff_slack,
                rff_seeds=args.rff_seeds, rff_step=args.rff_step,
                command=" ".join(sys.argv))
    meta["copy_bw"] = copy_bandwidth(xp)
    print(f"machine : GPU {meta['gpu']}; CPU {meta['cpu']} x {meta['cpu_count']}; copy "
          f"bandwidth {meta['copy_bw'] / 1e9:.0f} GB/s", flush=True)
    rng = np.random.default_rng(123)
    Xt = rng.uniform(size=(args.n_test, args.d))
    yt = target(np, Xt)
    Xt_dev = _ops.on_device(xp, Xt)
    # warm-up: kernel compilation and the memory pool
    Xw, yw = make_data(xp, 2000, args.d, 9)
    rb_gpu(xp, Xw, yw, Xt_dev[:100], 4, args.tol, args.graph)
    results = []
    for R in args.grids:
        for N in args.sizes:
            n = int(N)
            rec = dict(N=float(n), R=R)
            results.append(rec)
            if time.perf_counter() - start > args.budget:
                rec["skipped"] = "time budget spent"
                write(args.out, meta, results)
                continue
            if n * R > args.gpu_max_work:
                rec["skipped"] = f"N * R above --gpu-max-work {args.gpu_max_work:g}"
                write(args.out, meta, results)
                continue
            free = free_memory(xp)
            need = gpu_bytes(n, args.d, R)
            if free is not None and need > 0.9 * free:
                rec["skipped"] = (f"needs about {need / 2**30:.0f} GiB, "
                                  f"{free / 2**30:.0f} GiB free")
                print(f"N={n} R={R}: skipped ({rec['skipped']})", flush=True)
                write(args.out, meta, results)
                continue
            try:
                args.copy_bw = meta["copy_bw"]
                measure(args, xp, rec, n, R, Xt, yt, Xt_dev)
            except Exception as exc:  # out of memory, say: record it and go on
                rec.pop("gpu", None)
                rec["skipped"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
                print(f"N={n} R={R}: {rec['skipped']}", flush=True)
            if not _ops.is_numpy(xp):
                xp.get_default_memory_pool().free_all_blocks()
            write(args.out, meta, results)
    lines = write(args.out, meta, results)
    print("\n".join(lines[4:]))
    print(f"wrote {os.path.join(args.out, 'gpu_results.json')} and gpu.md "
          f"({time.perf_counter() - start:.0f} s)")


def measure(args, xp, rec, n, R, Xt, yt, Xt_dev):
    """One configuration: GPU fit + predict, the CPU's where it runs, the RFF baseline."""
    run_cpu = n <= args.cpu_max and n * R <= args.cpu_max_work
    if run_cpu:  # the same rows on both sides
        drng = np.random.default_rng(n)
        X = drng.uniform(size=(n, args.d))
        y = target(np, X, drng)
        Xd, yd = _ops.on_device(xp, X), _ops.on_device(xp, y)
    else:
        X = y = None
        Xd, yd = make_data(xp, n, args.d, n)
    best = None
    for _ in range(max(1, args.repeat)):
        g, (est, layout, pred, labels) = rb_gpu(xp, Xd, yd, Xt_dev, R, args.tol, args.graph)
        if best is None or g["binning"] + g["cg"] < best[0]["binning"] + best[0]["cg"]:
            best = (g, (est, layout, pred, labels))
    g, (est, layout, pred, labels) = best
    g["r2"] = r2(yt, pred)
    g["bound"] = 2 * 4 * R * n / args.copy_bw
    rec["gpu"] = g
    print(f"N={n} R={R}: GPU binning {g['binning']:.3f} s, CG {g['cg']:.3f} s "
          f"({g['iters']} it, {1e3 * g['cg'] / max(g['iters'], 1):.2f} ms per it), predict "
          f"{g['predict']:.3f} s, R^2 {g['r2']:.4f}", flush=True)
    print(f"  per label pass: Z p {1e3 * g['t_zdot']:.2f} ms, Z^T u {1e3 * g['t_tdot']:.2f} "
          f"ms; label bound per iteration {1e3 * g['bound']:.2f} ms", flush=True)
    if run_cpu:
        c, (rb, Z, ridge, cpred) = rb_cpu(X, y, Xt, R, args.tol)
        c["r2"] = r2(yt, cpred)
        rec["cpu"] = c
        data, indices, indptr = cb.csr_arrays(xp, layout.labels, est.grid_ptr_,
                                              est.n_features_out_, est._value(),
                                              est._dtype_)
        rec["z_equal"] = bool(
            _ops.to_host(indices).dtype == Z.indices.dtype
            and np.array_equal(_ops.to_host(indices), Z.indices)
            and np.array_equal(_ops.to_host(indptr), Z.indptr)
            and np.array_equal(_ops.to_host(data), Z.data))
        del data, indices, indptr
        same_w = _ops.to_host(_ops.zdot(xp, labels, layout.grid_ptr,
                                        _ops.on_device(xp, ridge.coef_[:, None]),
                                        layout.value))[:, 0] + ridge.intercept_
        rec["pred_diff_same_w"] = float(np.max(np.abs(same_w - cpred)))
        rec["pred_diff_fit"] = float(np.max(np.abs(pred - cpred)))
        print(f"  CPU binning {c['binning']:.3f} s, CG {c['cg']:.3f} s ({c['iters']} it), "
              f"R^2 {c['r2']:.4f}; Z equal {rec['z_equal']}; pred diff same w "
              f"{rec['pred_diff_same_w']:.1e}", flush=True)
        del Z, rb, ridge
    elif n <= args.check_max:
        t0 = time.perf_counter()
        rec["z_equal"] = z_check(xp, Xd, est, layout, R,
                                 whole_max=args.check_whole_max)
        rec["z_check_s"] = time.perf_counter() - t0
        print(f"  Z checked against the CPU's binning alone: equal {rec['z_equal']} "
              f"({rec['z_check_s']:.1f} s)", flush=True)
    if n <= args.rff_max:
        rec["rff"] = rff_search(args, xp, Xd, yd, Xt_dev, yt, float(est.sigma_),
                                g["r2"] - args.rff_slack)
    del layout, labels, est, Xd, yd, X, y


if __name__ == "__main__":
    main()
