#!/usr/bin/env bash
# Paired A/B of this checkout's rbcd/cuda against another commit's, on a GPU machine
# (issue 32), in alternating processes (benchmarks/gpu_ab.py).
#
#   # here, where git is (the device machine gets the working tree, not the history):
#   mkdir -p ab_old && for f in __init__.py _ops.py binning.py cg.py estimators.py kernels.cu; do
#       git show REV:rbcd/cuda/$f > ab_old/$f; done
#   # there, from the repository root (ab_old/ travels as an untracked directory):
#   bash benchmarks/gpu_ab.sh
#
# The other tree is this checkout's rbcd (its compiled CPU modules included) with
# ab_old/'s files in rbcd/cuda: only the GPU path may differ. Environment: OUT (default
# /tmp/rbcd_gpu_ab), SIZES ("1e5 1e6 1e7"), REPS (5), ROUNDS (3), BATCH_WORDS (empty:
# each tree's own), BUILD=0 to skip the in-place build. Prints, per size, the medians of
# every process (binning and CG, ms), the iterations and the coefficients' L1 norms.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/rbcd_gpu_ab}
mkdir -p "$OUT"
if [ ! -d ab_old ]; then echo "ab_old/ missing (see the header)"; exit 2; fi
if [ "${BUILD:-1}" = 1 ]; then
  timeout 100 python setup.py build_ext --inplace -j "$(nproc)" > "$OUT/build.log" 2>&1
  echo "build rc $?"
fi
rm -rf /tmp/rbcd_ab_old && mkdir -p /tmp/rbcd_ab_old && cp -a rbcd /tmp/rbcd_ab_old/
cp ab_old/* /tmp/rbcd_ab_old/rbcd/cuda/
BW=""; if [ -n "${BATCH_WORDS:-}" ]; then BW="--batch-words $BATCH_WORDS"; fi
: > "$OUT/ab.jsonl"
for i in $(seq "${ROUNDS:-3}"); do
  for tree in /tmp/rbcd_ab_old .; do
    timeout 90 python benchmarks/gpu_ab.py --tree "$tree" --sizes ${SIZES:-1e5 1e6 1e7} \
      --reps "${REPS:-5}" $BW >> "$OUT/ab.jsonl" || echo "run failed: $tree"
  done
done
python - "$OUT/ab.jsonl" <<'PY'
import collections, json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
g = collections.defaultdict(list)
for r in rows:
    g[(r["n"], "old" if "rbcd_ab_old" in r["tree"] else "new")].append(r)
for n in sorted({k[0] for k in g}):
    o, w = g[(n, "old")], g[(n, "new")]
    f = lambda rs, key: " ".join(f"{1e3 * r[key]:.2f}" for r in rs)
    print(f"N = {n:,}: binning old {f(o, 'binning')} | new {f(w, 'binning')} ms; "
          f"CG old {f(o, 'cg')} | new {f(w, 'cg')} ms; iterations "
          f"{[r['iters'] for r in o][:1]} / {[r['iters'] for r in w][:1]}; coef L1 "
          f"{o[0]['coef_l1']:.12g} / {w[0]['coef_l1']:.12g}" if o and w else f"N = {n}: incomplete")
PY
