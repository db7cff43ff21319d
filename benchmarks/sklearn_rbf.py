"""scikit-learn's ``affinity="rbf"`` against ours with the same keywords.

scikit-learn forms the dense n × n kernel exp(−γ‖xi − xj‖²); ours takes the same
keywords and forms it too up to ``explorer.pipeline.plan.RBF_DENSE_MAX_N`` points (the
same weights, exact), past that the kernel thresholded into a sparse ε-graph whose
dropped weight mass per row is bounded (``explorer.graph.pairwise.rbf_edge_rule``).

Per size: wall clock of ``fit`` (one warm-up run first, then the median of `--repeats`),
the peak of Python-tracked memory during one fit (``tracemalloc``: NumPy and SciPy
arrays; on the GPU the device pool's peak is not included), the ARI of each against the
truth and of ours against scikit-learn's labels.

    python benchmarks/sklearn_rbf.py                       # CPU, both, n up to 8,000
    python benchmarks/sklearn_rbf.py --gpu --sizes 1000000 --ours-only --out DIR
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from _common import environment_info, write_result

GAMMA = 50.0  # the width of the blobs below (σ = 0.1)


def blobs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 0.9]])
    y = rng.integers(0, 3, n)
    return (centres[y] + rng.normal(scale=0.1, size=(n, 2))).astype(np.float64), y


def _fit(make, X, repeats: int, gpu: bool):
    def sync():
        if gpu:
            import cupy

            cupy.cuda.get_current_stream().synchronize()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make().fit(X)  # warm-up: kernels compiled, caches filled
        sync()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            est = make().fit(X)
            sync()
            times.append(time.perf_counter() - t0)
        tracemalloc.start()
        make().fit(X)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return est, statistics.median(times), peak


def main(argv=None) -> None:
    from sklearn.cluster import SpectralClustering as SkSpectral
    from sklearn.metrics import adjusted_rand_score

    from explorer import SpectralClustering

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gpu", action="store_true", help="ours on the GPU")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--gamma", type=float, default=GAMMA,
                        help="the kernel's γ (default %(default)s; at 10⁶ points a "
                             "narrower kernel such as 1e6 keeps the graph sparse)")
    parser.add_argument("--out", type=Path, help="folder for the JSON (default: results/)")
    args = parser.parse_args(argv)
    backend = "gpu" if args.gpu else "cpu"
    rows = []
    for n in args.sizes:
        X, y = blobs(n)
        row = {"n": n, "d": 2, "k": 3, "gamma": args.gamma}
        ours, seconds, peak = _fit(
            lambda: SpectralClustering(3, affinity="rbf", gamma=args.gamma, random_state=0,
                                       backend=backend), X, args.repeats, args.gpu)
        labels = np.asarray(ours.labels_)
        row["ours"] = {"seconds": seconds, "peak_bytes": peak,
                       "ari_truth": adjusted_rand_score(y, labels),
                       "graph": ours.affinity_why_, "nnz": int(ours.graph_stats_.nnz)}
        if not args.ours_only:
            theirs, seconds, peak = _fit(
                lambda: SkSpectral(3, affinity="rbf", gamma=args.gamma, random_state=0), X,
                args.repeats, False)
            row["sklearn"] = {"seconds": seconds, "peak_bytes": peak,
                              "ari_truth": adjusted_rand_score(y, theirs.labels_)}
            row["ari_ours_vs_sklearn"] = adjusted_rand_score(theirs.labels_, labels)
        rows.append(row)
        print(row, flush=True)
    payload = {"benchmark": "sklearn-rbf", "environment": environment_info(backend),
               "rows": rows}
    name = f"sklearn-rbf-{backend}"
    if args.out is not None:
        import json

        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{name}.json").write_text(json.dumps(payload, indent=1, default=float))
    else:
        print("wrote", write_result(name, payload))


if __name__ == "__main__":
    main()
