"""Latency of the library call behind the app's live statistics, without Panel.

Times ``explorer.graph_stats`` as the app calls it on a slider move: every row counted
without components (``components=False``), and a 4,096-row sample (what the app does
above 50,000 points), on the paper's Syn1M shape (σ = 0.01, t = 0.0008). GPU: the
data already on the device, warm-up excluded, wall clock around the call (it returns
host statistics, so it synchronises), median of 5. Writes
``benchmarks/results/gpu/live-stats-<backend>.json``.

Usage::

    python benchmarks/live_stats.py [--backend gpu|cpu] [--n 1000000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import explorer
from explorer.environment import environment_info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gpu")
    args = ap.parse_args(argv)

    ds = explorer.datasets.load("syn4d", n_samples=args.n, random_state=0)
    X = ds.X
    if args.backend == "gpu":
        import cupy

        X = cupy.asarray(X)
    rule = dict(metric="gaussian", sigma=0.01, threshold_sqdist=0.0008)
    cases = {"all_rows": dict(components=False), "sample_4096": dict(sample_rows=4096)}
    report = {"benchmark": "live statistics (explorer.graph_stats)", "n": args.n,
              "data": "syn4d", "params": rule, "backend": args.backend,
              "environment": environment_info(args.backend), "cases": {}}
    for name, extra in cases.items():
        explorer.graph_stats(X, **rule, backend=args.backend, **extra)  # warm-up
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            st = explorer.graph_stats(X, **rule, backend=args.backend, **extra)
            runs.append(time.perf_counter() - t0)
        report["cases"][name] = {"median_s": statistics.median(runs), "runs_s": runs,
                                 "nnz": st.nnz, "nnz_row_mean": st.nnz_row_mean,
                                 "estimated": st.estimated}
        print(f"{name}: median {statistics.median(runs) * 1e3:.1f} ms, nnz {st.nnz:,}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"live-stats-{args.backend}.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
