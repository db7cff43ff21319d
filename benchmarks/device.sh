#!/usr/bin/env bash
# One device call: check the environment, run the GPU tests, run a benchmark, and
# leave every result file in OUT (at most 7 files, flat):
#   env.txt  install.log  gpu-tests.log  gpu-tests.xml  bench.log  <benchmark>.json
#
# usage: benchmarks/device.sh OUT [--quick | --full | --fast] [--no-tests] [--no-bench]
#   --quick (default)  paper tables: Syn1M and MNIST60K, 3 runs each, plus the
#                      counting-pass and denseToCSR measurements
#   --full             paper tables: every shape of Tables 3, 5, 6 (< 9 minutes on an H100)
#   --fast             benchmarks/fast.py: grid/gemm builds, eigensolver + k-means on
#                      the four shapes, k-means alone (fast.json; ~4 minutes)
# Time limits (seconds): TEST_TIMEOUT (default 300), BENCH_BUDGET (default 420, the
# benchmark stops starting new work past it), BENCH_TIMEOUT (default 540, hard stop).
# TEST_K: a pytest -k expression to run only some GPU tests; PYTEST_ARGS: more pytest
# options (e.g. "-n 3 --dist loadfile": pytest-xdist is on the device image); BENCH_ARGS: more options
# for benchmarks/paper_tables.py (e.g. "--shapes Syn5M --name paper-tables-syn5m").
set -u
OUT=${1:?usage: benchmarks/device.sh OUT [--quick|--full|--fast] [--no-tests] [--no-bench]}
shift
MODE=--quick TESTS=1 BENCH=1
for arg in "$@"; do
  case $arg in
    --quick|--full|--fast) MODE=$arg ;;
    --no-tests) TESTS=0 ;;
    --no-bench) BENCH=0 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PY=$(command -v python3 || command -v python)

{
  date -u
  nvidia-smi
  "$PY" - <<'PYEOF'
import cupy, numpy, scipy, sklearn
dev = cupy.cuda.Device()
props = cupy.cuda.runtime.getDeviceProperties(dev.id)
print("device:", props["name"].decode(), "SMs:", props["multiProcessorCount"],
      "memory GiB:", round(dev.mem_info[1] / 2**30, 1))
print("cupy", cupy.__version__, "cuda runtime", cupy.cuda.runtime.runtimeGetVersion(),
      "driver", cupy.cuda.runtime.driverGetVersion())
print("numpy", numpy.__version__, "scipy", scipy.__version__, "sklearn", sklearn.__version__)
PYEOF
} > "$OUT/env.txt" 2>&1

# explorer.kernels and explorer.data are mapped onto kernels/ and data/ by pyproject.toml:
# install the checkout (editable, no network, no build isolation), else onto a path.
if ! "$PY" -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1; then
  "$PY" -m pip install -q --no-deps --no-build-isolation --target /tmp/se-site . \
    >> "$OUT/install.log" 2>&1 && export PYTHONPATH=/tmp/se-site
fi
"$PY" -c "import explorer.kernels, explorer.data; print('explorer.kernels at', explorer.kernels.__file__)" \
  >> "$OUT/install.log" 2>&1
# The app-state tests (a GPU run in a worker process) need param, which the device lacks
# and cannot download: carry a folder made here with
# `pip install --no-deps --target .device-site param` (git-ignored), and it is used.
if [[ -d .device-site ]]; then export PYTHONPATH="$PWD/.device-site${PYTHONPATH:+:$PYTHONPATH}"; fi

if [[ $TESTS == 1 ]]; then
  # shellcheck disable=SC2086  # PYTEST_ARGS is a list of options
  timeout -k 10 "${TEST_TIMEOUT:-300}" "$PY" -m pytest -m gpu -q -rfE -p no:cacheprovider --continue-on-collection-errors \
    --durations=15 --junitxml="$OUT/gpu-tests.xml" ${TEST_K:+-k "$TEST_K"} ${PYTEST_ARGS:-} tests \
    > "$OUT/gpu-tests.log" 2>&1
  echo "pytest exit status $?" >> "$OUT/gpu-tests.log"
fi
if [[ $BENCH == 1 ]]; then
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  if [[ $MODE == --fast ]]; then
    timeout -k 10 "${BENCH_TIMEOUT:-540}" "$PY" benchmarks/fast.py --out "$OUT" \
      ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  else
    timeout -k 10 "${BENCH_TIMEOUT:-540}" "$PY" benchmarks/paper_tables.py "$MODE" \
      --budget "${BENCH_BUDGET:-420}" --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  fi
  echo "benchmark exit status $?" >> "$OUT/bench.log"
fi

echo "== environment"; grep -E "^device:|^cupy" "$OUT/env.txt"
if [[ $TESTS == 1 ]]; then
  echo "== GPU tests"; grep -E "passed|failed|error|FAILED|ERROR|exit status" "$OUT/gpu-tests.log" | tail -n 40
fi
if [[ $BENCH == 1 ]]; then
  echo "== benchmark"
  if [[ $MODE == --fast ]]; then cat "$OUT/bench.log"
  else sed -n '/^== paper tables/,$p' "$OUT/bench.log"; tail -n 3 "$OUT/bench.log"; fi
fi
