#!/usr/bin/env bash
# One device call of the issue 16/17/18/22 benchmark gaps: run one named part and leave its
# result files in OUT, laid out as the repository's paths (benchmarks/results/<topic>/),
# so that after the call
#   cp -r <files_at>/benchmarks/results/. benchmarks/results/
# puts them where they are committed (docs/large-scaling.png too, where drawn).
#
# usage: bash benchmarks/gpu_session.sh PART [OUT]      (OUT defaults to $OUT)
#   quality-1e6-a        every shape family at 5,000 on the GPU; the families whose exact
#                        graph is kNN at 1e6 (default, exact, knn, k-means)
#   quality-1e6-b        the families whose exact graph is the ε-graph at 1e6 (default,
#                        exact bounded at 100 s, k-means)
#   quality-1e7          every family at 1e7 (default, k-means; exact on the kNN families)
#   large-landmarks-1e7  mode="landmarks" on infinite digits 125K-1e6 and 1e7 x 784, the
#                        exact pipeline once at 1e6 (ari_exact), merged into large.json
#   eigen-gpu-a          our GPU eigensolvers against cupyx's eigsh and lobpcg on Syn1M,
#                        Syn5M, Digits60K (issue 22)                 -> eigen-gpu.json
#   eigen-gpu-b          the same on Syn10M and Moons1M-knn          -> eigen-gpu-2.json
#   solver-cost-gpu      the GPU constants of eigen_solver="auto"'s cost model
#                                                                    -> solver-cost-gpu.json
#   reorder-5e7          syn4d 5e7 shuffled: the Jaccard order first, then spatial and
#                        none, one embedding each, merged into reorder.json (issue 18)
# The parts' sizes, families and bounds are benchmarks/quality.py's PARTS. Each part stops
# itself within its budget; HARD_TIMEOUT (default 570 s) is the last resort. Afterwards,
# on any machine: python benchmarks/quality.py --merge   (-> results/quality/quality-gpu.json)
#                 python benchmarks/scaling_plot.py large (-> docs/large-scaling.png)
set -u
PART=${1:?usage: benchmarks/gpu_session.sh PART [OUT]}
OUT=${2:-${OUT:?usage: benchmarks/gpu_session.sh PART [OUT] (or set OUT)}}
cd "$(dirname "$0")/.."
R="$OUT/benchmarks/results"
mkdir -p "$R/quality" "$R/large" "$R/eigen" "$R/reorder" "$OUT/docs"
export PYTHONUNBUFFERED=1
# A source checkout: explorer finds kernels/ and data/ itself (explorer/__init__.py).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=$(command -v python3 || command -v python)
LOG="$OUT/$PART.log"

{ date -u; nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
  git rev-parse HEAD 2>/dev/null; git status --short 2>/dev/null | head -n 20; } > "$LOG" 2>&1

case $PART in
  quality-1e6-a|quality-1e6-b|quality-1e7)
    timeout -k 10 "${HARD_TIMEOUT:-570}" "$PY" benchmarks/quality.py --gpu --part "$PART" \
      --out-dir "$R/quality" >> "$LOG" 2>&1
    echo "quality.py exit status $?" >> "$LOG"
    ;;
  large-landmarks-1e7)
    timeout -k 10 "${HARD_TIMEOUT:-570}" "$PY" benchmarks/large.py landmarks >> "$LOG" 2>&1
    echo "large.py exit status $?" >> "$LOG"
    # large.json is rewritten after the 1e6 rows and again after 1e7: whatever it holds
    cp benchmarks/results/large/large.json "$R/large/large.json"
    "$PY" benchmarks/scaling_plot.py large --out "$OUT/docs/large-scaling.png" >> "$LOG" 2>&1 \
      || echo "plot not drawn here: run python benchmarks/scaling_plot.py large" >> "$LOG"
    ;;
  eigen-gpu-a|eigen-gpu-b)
    if [ "$PART" = eigen-gpu-a ]; then SHAPES="Syn1M Syn5M Digits60K" NAME=eigen-gpu
    else SHAPES="Syn10M Moons1M-knn" NAME=eigen-gpu-2; fi
    # shellcheck disable=SC2086  # the shape names are separate arguments
    timeout -k 10 "${HARD_TIMEOUT:-570}" "$PY" benchmarks/eigen.py --shapes $SHAPES \
      --name "$NAME" --out "$R/eigen" >> "$LOG" 2>&1
    echo "eigen.py exit status $?" >> "$LOG"
    ;;
  solver-cost-gpu)
    timeout -k 10 "${HARD_TIMEOUT:-570}" "$PY" benchmarks/solver_cost.py --backend gpu \
      >> "$LOG" 2>&1
    echo "solver_cost.py exit status $?" >> "$LOG"
    cp benchmarks/results/eigen/solver-cost-gpu.json "$R/eigen/" 2>> "$LOG"
    ;;
  reorder-5e7)
    # The file is rewritten after every variant: a call cut short keeps those it ran.
    timeout -k 10 "${HARD_TIMEOUT:-570}" "$PY" benchmarks/reorder.py --shapes syn4d-5e7 \
      --variants jaccard spatial none --embed-repeats 1 \
      --merge benchmarks/results/reorder/reorder.json --out "$R/reorder" >> "$LOG" 2>&1
    echo "reorder.py exit status $?" >> "$LOG"
    ;;
  *)
    echo "unknown part $PART; use quality-1e6-a, quality-1e6-b, quality-1e7," \
      "large-landmarks-1e7, eigen-gpu-a, eigen-gpu-b, solver-cost-gpu or reorder-5e7" >&2
    exit 2
    ;;
esac

# The log's summary lines in the call's reply (its last 12,000 characters).
grep -vE "^  (knn|kmeans|epsilon)" "$LOG" | tail -n 60
ls -lR "$R" "$OUT/docs"
