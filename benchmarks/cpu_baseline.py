"""CPU baseline: the graph builders and the whole pipeline on the CPU backend.

    python benchmarks/cpu_baseline.py            # -> benchmarks/results/cpu/cpu-baseline.json
    python benchmarks/cpu_baseline.py --quick    # small sizes only (a smoke run)

Cases: 2-D moons at n = 10⁴, 10⁵, 10⁶ with the kd-tree builder; scikit-learn's digits
(cosine > 0.8, the paper's MNIST threshold) and infinite-digits at n = 10⁴ with the
brute-force builder. For each: ``build_graph`` alone and ``SpectralClustering.fit``,
with per-stage times, nonzero statistics and ARI/NMI.

Protocol (benchmarks/README.md "Performance protocol", on the CPU): one process; one uncounted
warm-up run on the first case of each builder (it pays imports and caches), then the
median of ``--repeats`` (default 3) timed runs. Fewer, to stay within ten minutes on
two cores: the pipeline from 5·10⁴ rows and the 10⁶-row graph are timed once, and
the 10⁶-row pipeline runs only if its estimate (the graph time times the 10⁵ case's
pipeline/graph ratio) fits in what is left of ``--budget`` seconds. The JSON says what
was done for each case, and records the machine's load average: other work on a
2-core machine skews the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

from _common import environment_info, summary, timer, write_result

from explorer import SpectralClustering, build_graph, datasets
from explorer.graph import dataset_params  # noqa: E402
from explorer.metrics import clustering_scores

#: moons at this n and threshold has ~50 nonzeros per row; other n scale t by 1/n
#: (a 2-D density), so every size has about the same graph per point.
_MOONS_REF_N, _MOONS_REF_T = 10_000, 1.9e-4


_REPEAT_FIT_BELOW = 50_000


def moons_params(n: int) -> dict:
    """σ and the squared-distance threshold for ~50 nonzeros per row at any n."""
    t = float(f"{_MOONS_REF_T * _MOONS_REF_N / n:.2g}")
    return {"metric": "gaussian", "sigma": float(f"{(t / 8) ** 0.5:.2g}"), "threshold_sqdist": t}


def cases(quick: bool):
    sizes = (10_000,) if quick else (10_000, 100_000, 1_000_000)
    for n in sizes:
        yield {"case": f"moons-{n // 1000}k", "dataset": "moons", "n": n, "method": "kdtree",
               "n_clusters": 2, "graph": moons_params(n), "large": n >= 1_000_000}
    yield {"case": "digits", "dataset": "digits", "n": None, "method": "bruteforce",
           "n_clusters": 10, "graph": {"metric": "cosine", "threshold_sim": 0.8}, "large": False}
    n = 2_000 if quick else 10_000
    yield {"case": f"infinite-digits-{n // 1000}k", "dataset": "infinite-digits", "n": n,
           "method": "bruteforce", "n_clusters": 10, "graph": None, "large": False}


def run_case(spec, repeats, time_left, warm):
    ds = datasets.load(spec["dataset"], n_samples=spec["n"], random_state=0)
    graph = spec["graph"]
    if graph is None:  # the data's own suggestion (the threshold that suits this n)
        graph = {k: v for k, v in dataset_params(ds).items() if k != "n_clusters"}
    graph_runs = 1 if spec["large"] else repeats
    # The pipeline costs minutes from 5·10⁴ rows on two cores: one timed run there.
    fit_runs = repeats if ds.n < _REPEAT_FIT_BELOW else 1
    # Warm-up pays imports, caches and first-touch allocation: once per builder, on
    # the first (small) case that uses it.
    warmup = 0 if warm else 1
    out = {
        "case": spec["case"],
        "data": {"name": ds.name, "n": ds.n, "d": ds.d, "n_classes": ds.n_classes,
                 "generation_seconds": ds.params["generation_seconds"],
                 "options": {k: v for k, v in ds.params.items()
                             if k not in ("n_samples", "generation_seconds")}},
        "graph_params": graph,
        "method": spec["method"],
        "timed_runs": {"build_graph": graph_runs, "pipeline": fit_runs},
        "warmup_runs": warmup,
    }

    def build():
        return build_graph(ds.X, **graph, method=spec["method"], backend="cpu")

    walls, stages, g = [], [], None
    for i in range(warmup + graph_runs):
        with timer() as t:
            g = build()
        if i >= warmup:
            walls.append(t.seconds)
            stages.append(dict(g.timings))
    out["build_graph"] = {"wall": summary(walls), "stages": _stage_medians(stages)}
    st = g.stats
    out["stats"] = {k: getattr(st, k) for k in (
        "n", "nnz", "nnz_row_min", "nnz_row_mean", "nnz_row_max", "sparsity", "n_isolated",
        "n_components", "suggested_hypo_max_nnz_row", "bytes_csr")}
    del g

    # The pipeline costs several times the graph; at n = 10⁶ it runs only if the
    # estimate (scaled from the graph time by the smaller cases' ratio) fits.
    estimate = out["build_graph"]["wall"]["median"] * spec.get("pipeline_ratio", 1.0)
    if spec["large"] and estimate > time_left():
        out["pipeline"] = {"skipped": f"estimated {estimate:.0f} s, {time_left():.0f} s left "
                                      "in the budget"}
        return out

    def fit():
        sc = SpectralClustering(n_clusters=spec["n_clusters"], **graph, method=spec["method"],
                                random_state=0, backend="cpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sc.fit(ds.X)
        return sc, sorted({str(w.message) for w in caught})

    walls, stages = [], []
    for i in range(warmup + fit_runs):
        with timer() as t:
            sc, messages = fit()
        if i >= warmup:
            walls.append(t.seconds)
            stages.append(dict(sc.timings_))
    out["pipeline"] = {
        "wall": summary(walls),
        "stages": _stage_medians(stages),
        "eigen_solver": sc.eigen_solver_,
        "eigen_iterations": sc.eigen_iterations_,
        "max_residual": float(max(sc.eigen_residuals_)),
        "n_clusters": int(sc.n_clusters_),
        "scores": clustering_scores(sc.affinity_matrix_, sc.labels_, ds.y),
        "warnings": messages,
    }
    return out


def _stage_medians(runs) -> dict:
    keys = dict.fromkeys(k for run in runs for k in run)
    return {k: statistics.median(run[k] for run in runs if k in run) for k in keys}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case (>= 3)")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds the whole run may take (the 10⁶ pipeline is skipped "
                             "when it would not fit)")
    parser.add_argument("--name", default="cpu-baseline", help="result name (cpu-*.json)")
    args = parser.parse_args(argv)
    environment = environment_info("cpu")  # at the start: the load average before we add ours
    start = time.perf_counter()

    def time_left():
        return args.budget - (time.perf_counter() - start)

    results, ratio, warmed = [], 1.0, set()
    for spec in cases(args.quick):
        spec["pipeline_ratio"] = ratio
        print(f"{spec['case']} ...", end=" ", flush=True)
        res = run_case(spec, args.repeats, time_left, warm=spec["method"] in warmed)
        warmed.add(spec["method"])
        results.append(res)
        pipe = res.get("pipeline", {})
        if "wall" in pipe and spec["dataset"] == "moons":
            ratio = pipe["wall"]["median"] / res["build_graph"]["wall"]["median"]
        print(_line(res), flush=True)
    payload = {
        "name": args.name,
        "description": "CPU backend: build_graph and SpectralClustering.fit per case",
        "protocol": {
            "timer": "time.perf_counter wall clock around each call; stage times from the "
                     "library's own timings (Graph.timings, SpectralClustering.timings_)",
            "repeats": args.repeats,
            "warmup": "1 uncounted run (graph and pipeline) on the first case of each "
                      "builder",
            "timed_runs": "--repeats per case; 1 for the n = 10⁶ graph and for pipelines "
                          "from 5·10⁴ rows (each case lists its counts)",
            "statistic": "median of the timed runs (min, max and every run listed)",
        },
        "environment": environment,
        "total_seconds": time.perf_counter() - start,
        "load_average_at_end": list(os.getloadavg()),
        "cases": results,
    }
    path = write_result(args.name, payload)
    print(f"wrote {path}")
    return 0


def _line(res) -> str:
    st, bg = res["stats"], res["build_graph"]["wall"]["median"]
    text = f"graph {bg:.3f} s, nnz/row {st['nnz_row_mean']:.1f} (max {st['nnz_row_max']})"
    pipe = res.get("pipeline", {})
    if "skipped" in pipe:
        return text + f"; pipeline skipped ({pipe['skipped']})"
    scores = pipe["scores"]
    return (text + f"; pipeline {pipe['wall']['median']:.2f} s, ARI {scores['ari']:.3f}, "
            f"NMI {scores['nmi']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
