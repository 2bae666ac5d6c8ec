#!/usr/bin/env bash
# The GPU checks of issue 32 as one script, run from the repository root on the GPU machine:
#     bash benchmarks/gpu_device_check.sh
# Builds in place, runs the GPU tests and the numpy-twin tests, the stage breakdown of a
# binning fit and a CG iteration (gpu_binning_stages.py, N 1e6 and 1e7), then compare_gpu.py on
# N 1e6, 1e7 (R 64, 256) and 5e7 (R 64): the CPU baseline (binning + CG) up to N R = 6.4e8
# rows x grids, Z checked against the CPU's binning alone at the other sizes, the RFF
# baseline up to 1e7 rows. Every step has a timeout; the whole run ends within TOTAL
# seconds (default 235: then the benchmark's budget ends before N = 1e7, R = 256; the H100
# run of 2026-11-26 with TOTAL=235 took 215 s, the benchmark 95 s of it).
# The 5e7 x R 256 cell needs an H200 (about 112 GB on the GPU): on one, BENCH_SIZES=5e7
# BENCH_MAX_WORK=1.3e10 runs it; its Z check then transforms the training rows on the CPU a
# block at a time (compare_gpu.py --check-whole-max: the whole CPU Z would be 154 GB).
# Writes to $OUT (default /tmp/rbcd_gpu_out): device_log.txt (everything printed),
# gpu_results.json and gpu.md (the benchmark's results), ncu.csv (the kernels' durations of
# one fit + CG at N 1e6, where Nsight Compute is installed).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/rbcd_gpu_out}
mkdir -p "$OUT"
LOG="$OUT/device_log.txt"
exec > >(tee -a "$LOG") 2>&1
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

stamp "environment"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1 | head -5
lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)" || true
python - <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("numpy", "scipy", "sklearn", "Cython", "threadpoolctl", "hypothesis", "pytest", "cupy"):
    try:
        print(f"  {m} {importlib.import_module(m).__version__}")
    except Exception as exc:
        print(f"  {m} MISSING ({exc})")
PY

stamp "build (python setup.py build_ext --inplace -j 16)"
timeout 90 python setup.py build_ext --inplace -j 16 > /tmp/rbcd_build.txt 2>&1
echo "build exit code $?"; tail -4 /tmp/rbcd_build.txt
python -c "import rbcd, rbcd.cuda; print('rbcd from', rbcd.__file__, '| cuda available:', rbcd.cuda.available())"

if [ "${GPU_TESTS:-1}" = 1 ]; then   # GPU_TESTS=0: skip (a run for one benchmark cell)
  stamp "GPU tests (tests/test_cuda_gpu.py)"
  timeout "${TEST_TIMEOUT:-150}" python -m pytest tests/test_cuda_gpu.py -q -p no:cacheprovider 2>&1 | tail -25
fi

if [ "${TWIN_TESTS:-1}" = 1 ]; then   # TWIN_TESTS=0: CI runs them; skip to save device time
  stamp "numpy-twin tests (tests/test_cuda_xp.py)"
  timeout 40 python -m pytest tests/test_cuda_xp.py -q -p no:cacheprovider 2>&1 | tail -8
fi

stamp "binning and CG stages (gpu_binning_stages.py at N ${STAGES_N:-1e6 1e7}, R 64)"
if [ "${BENCH_XP:-cupy}" = cupy ] && [ "${STAGES_N:-}" != none ]; then   # STAGES_N=none: skip
  for N in ${STAGES_N:-1e6 1e7}; do timeout 40 python benchmarks/gpu_binning_stages.py --n $N --grids 64 2>&1 | tail -60; done
fi

if [ "${BENCH_XP:-cupy}" = cupy ] && [ "${KERNEL_TIME:-1}" = 1 ]; then
  # KERNEL_TIME=0 skips: the GPU's share of a fit + CG at N 1e6 (the kernels' durations
  # under Nsight Compute against the wall time of the same run without it)
  stamp "GPU time of a fit + CG at N 1e6 (gpu_kernel_time.py; ncu if present)"
  timeout 40 python benchmarks/gpu_kernel_time.py --n 1e6 --grids 64 2>&1 | tail -2
  if command -v ncu > /dev/null; then
    timeout 120 ncu --profile-from-start off --clock-control none \
        --metrics gpu__time_duration.sum --csv \
        python benchmarks/gpu_kernel_time.py --n 1e6 --grids 64 > "$OUT/ncu.csv" 2> /dev/null
    echo "ncu exit code $?"
    python benchmarks/gpu_kernel_time.py --summarize "$OUT/ncu.csv" 2>&1 | head -30
  else
    echo "ncu not found"
  fi
fi

LEFT=$(( ${TOTAL:-235} - ($(date +%s) - T0) ))
if [ "$LEFT" -lt 30 ]; then LEFT=30; fi
BUDGET=$(( LEFT - 25 ))
if [ "$BUDGET" -lt 5 ]; then BUDGET=5; fi
stamp "benchmark (compare_gpu.py; ${LEFT} s left, no new configuration after ${BUDGET} s)"
# The RFF side fits 3 frequency draws per feature count and bisects between the ladder's rungs
# (compare_gpu.py): from the single-draw times of the 2026-11-26 runs, about 20 s at N 1e7,
# R 64 and 75 s at R 256 (estimates); with the ncu step (up to 160 s) give TOTAL about 480.
# BENCH_REPEAT (2): GPU fits per size, the fastest kept (single fits at N 1e6 gave a binning of
# 24 and 33 ms in two H100 runs of the same code path).
# BENCH_XP=numpy BENCH_SIZES="2000 5000" BENCH_NTEST=2000: a dry run of this script without a GPU
# BENCH_GRIDS (64 256): the R values of the benchmark
# BENCH_RFF_FEATURES (256 512 1024 2048 4096): the RFF ladder (8192 for RB at R 512)
# BENCH_GRAPH=1: the GPU's CG through solve_ridge's CUDA graph loop (compare_gpu.py --graph)
GRAPH_FLAG=""; if [ "${BENCH_GRAPH:-0}" = 1 ]; then GRAPH_FLAG="--graph"; fi
timeout "$LEFT" python benchmarks/compare_gpu.py --out "$OUT" --xp "${BENCH_XP:-cupy}" $GRAPH_FLAG \
    --n-test "${BENCH_NTEST:-200000}" --sizes ${BENCH_SIZES:-1e6 1e7 5e7} --grids ${BENCH_GRIDS:-64 256} \
    --gpu-max-work "${BENCH_MAX_WORK:-3.2e9}" --cpu-max "${BENCH_CPU_MAX:-1e7}" \
    --cpu-max-work 6.4e8 --check-max "${BENCH_CHECK_MAX:-5e7}" --rff-max "${BENCH_RFF_MAX:-1e7}" \
    --rff-features ${BENCH_RFF_FEATURES:-256 512 1024 2048 4096} --rff-seeds 3 --repeat "${BENCH_REPEAT:-2}" --budget "$BUDGET"
echo "benchmark exit code $?"
stamp "done"
