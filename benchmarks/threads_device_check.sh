#!/usr/bin/env bash
# Issue 33's scaling table on a lent many-core machine, in about 2 minutes of wall time.
#
#   bash benchmarks/threads_device_check.sh            # from the repository root
#
# Builds the extensions in place (-j = the usable CPUs), then runs
# benchmarks/compare_threads.py at N = 4e6, d = 16, R = 64, sigma = 1 on threads
# 1, 2, 4, 8, 16 (the usable CPUs where fewer), REPEAT rounds (1), writing threads.md and
# threads.json to $OUT (or ./threads_out without $OUT). The benchmark rewrites both
# files after every thread count, so a run cut short by a guard still leaves the
# counts it finished. Guards (seconds, overridable from the environment), together
# at most about 200 s:
#   BUILD_TIMEOUT (80)   the in-place build;
#   BENCH_BUDGET (100)   the benchmark starts no further thread count after this long;
#   BENCH_TIMEOUT (115)  hard limit of the benchmark process (timeout -k);
#   BALANCE=1 adds benchmarks/fit_balance.py (BALANCE_TIMEOUT, 60).
# The first run on the 16-core Intel Xeon (threads 1, 4, 16; commit 0cd054d): build
# 37 s, the benchmark 51 s, of which the 1-thread stages 28 s, 4 threads 12 s,
# 16 threads 7 s. Threads 2 and 8 add about 17 s and 8 s: about 80 s for the
# benchmark, about 2 minutes in all.
set -u
OUT=${OUT:-threads_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD_TIMEOUT=${BUILD_TIMEOUT:-80}
BENCH_BUDGET=${BENCH_BUDGET:-100}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-115}
N=${N:-4000000}
REPEAT=${REPEAT:-1}     # rounds (each time the best of them)
ITERS=${ITERS:-2}       # k: a fit of 1 + k CG iterations / CD epochs per measurement
STAGES=${STAGES:-}      # comma-separated stages (empty: compare_threads' default)
CORES=$(python -c "import os; print(len(os.sched_getaffinity(0)))")
THREADS=${THREADS:-$(python -c "
c = $CORES
print(','.join(str(t) for t in (1, 2, 4, 8, 16) if t <= c) if c >= 16 else
      ','.join(str(t) for t in sorted({1, 2, 4, 8, c}) if t <= c))")}
t0=$(date +%s)
{
  echo "== $(date -u +%FT%TZ) threads_device_check"
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread\(s\) per core|Socket|NUMA node\(s\)|L2 cache|L3 cache'
  echo "usable CPUs: $CORES; threads: $THREADS; N: $N"
  free -g | head -2
  git log -1 --format='commit %H %s' 2>/dev/null
} 2>&1 | tee "$OUT/machine.txt"

echo "== build (timeout ${BUILD_TIMEOUT}s)"
timeout -k 5 "$BUILD_TIMEOUT" python setup.py build_ext --inplace -j "$CORES" \
  > "$OUT/build.log" 2>&1
rc=$?
echo "build rc=$rc after $(( $(date +%s) - t0 )) s"
if [ $rc -ne 0 ]; then
  tail -30 "$OUT/build.log"
  exit $rc
fi
python -c "import rbcd, rbcd._openmp_info as o; print(rbcd.__file__, 'OpenMP', o.openmp_is_enabled())"

echo "== compare_threads (budget ${BENCH_BUDGET}s, timeout ${BENCH_TIMEOUT}s)"
cd benchmarks || exit 1
PYTHONPATH=.. timeout -k 5 "$BENCH_TIMEOUT" python compare_threads.py \
  --n-samples "$N" --d 16 --n-grids 64 --sigma 1 --threads "$THREADS" --repeat "$REPEAT" \
  --iters "$ITERS" ${STAGES:+--stages "$STAGES"} --budget "$BENCH_BUDGET" --out "$OUT" 2>&1 | tee "$OUT/compare_threads.log"
rc=${PIPESTATUS[0]}
cd ..
echo "compare_threads rc=$rc; total $(( $(date +%s) - t0 )) s"
[ -f "$OUT/threads.md" ] && cat "$OUT/threads.md"
if [ "${BALANCE:-0}" = 1 ]; then
  # BALANCE=1: the grid mode's split of the fit's work among the threads
  # (benchmarks/fit_balance.py; about 20 s at N = 4e6 on 16 cores, estimated)
  echo "== fit_balance (timeout ${BALANCE_TIMEOUT:-60}s)"
  PYTHONPATH=. timeout -k 5 "${BALANCE_TIMEOUT:-60}" python benchmarks/fit_balance.py \
    --n "$N" --threads "$THREADS" --json "$OUT/fit_balance.json" 2>&1 | tee "$OUT/fit_balance.log"
fi
exit $rc
