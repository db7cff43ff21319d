"""CPU pipeline against scikit-learn, side by side in one process.

    python benchmarks/cpu.py              # -> benchmarks/results/cpu/cpu.json
    python benchmarks/cpu.py --quick      # 5·10³ rows and the digits only (a smoke run)
    python benchmarks/cpu.py --sizes 5000 20000 --out cpu-small

Rows: the built-in shapes ``moons``, ``circles``, ``blobs`` at 5·10³, 2·10⁴, 10⁵ and
10⁶ points and scikit-learn's digits (1797 × 64), each with its true k. Columns:

* ``ours``: :class:`explorer.SpectralClustering` with its defaults on the CPU backend
  (the parameters suggested from the data, the suggestion's time included), as a user
  who gives only k runs it;
* ``ours-knn``: the same with ``affinity="knn", n_neighbors=10`` (skipped, with the
  reason printed and recorded, while the estimator has no ``affinity`` parameter);
* ``sklearn-arpack`` and ``sklearn-amg``: scikit-learn's
  ``SpectralClustering(affinity="nearest_neighbors", n_neighbors=10)`` with
  ``eigen_solver="arpack"`` and ``"amg"`` (the latter only where pyamg is installed;
  arpack only up to ``--arpack-max-n`` rows, past which it takes minutes);
* ``kmeans-ours`` and ``kmeans-sklearn``: k-means on the raw data (the true k, 10
  restarts, seed 0), :class:`explorer.KMeans` against scikit-learn's ``KMeans``, with
  the Lloyd steps of the best restart and its inertia;
* ``app-run`` (moons 10⁵ only): the app's Run, ``SpectralClustering(**keywords).fit``
  with the keywords the app's state hands it for that data set with every sidebar
  value at its default (explorer/ui/_run.py; the keywords are recorded), after one
  uncounted Run (on the CPU the app opens 10⁵ points on the kNN graph,
  explorer.ui._graph.opening_graph); ``app-run-epsilon`` the same with the ε-graph
  picked by hand (its sliders at the suggestion); ``app-run-auto`` with the sidebar's
  "Let the library choose the graph" checked (``auto_affinity``: the library's default
  graph, no σ or threshold from the ε sliders); ``app-run-whole`` the whole Run
  with the default sidebar in this process, median of 3: the fit, the k-means
  comparison on the raw data and the scores (explorer.ui._run.execute; the served
  app adds the hand-over to its worker process).

Each cell: wall time (median of ``--repeats`` runs; one run from 10⁵ rows) and the
adjusted Rand index against the true labels (label -1, points left unclustered,
counts as a cluster of its own). Protocol: one process; one uncounted warm-up of every
column on the first row (imports, caches, first-touch allocation). The JSON names the
cores this process may use and the load average before and after each row: on a
shared machine the times are noisy, and the lead re-runs this on a quiet one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np
from _common import environment_info, plain, write_result
from sklearn.cluster import KMeans as SKKMeans
from sklearn.metrics import adjusted_rand_score

import explorer
from explorer import SpectralClustering, datasets

SHAPES = ("moons", "circles", "blobs")
SIZES = (5_000, 20_000, 100_000, 1_000_000)
#: The app's Run is timed on this data set at this size (issue 22: <= 1 s on 2 cores).
APP_RUN_DATA, APP_RUN_N = "moons", 100_000


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def has_knn_mode() -> bool:
    params = SpectralClustering().get_params()
    return "affinity" in params and "n_neighbors" in params


def has_pyamg() -> bool:
    try:
        import pyamg  # noqa: F401
    except ImportError:
        return False
    return True


def ours(X, k):
    sc = SpectralClustering(n_clusters=k, random_state=0, backend="cpu").fit(X)
    return sc.labels_, {"timings": dict(sc.timings_), "solver": sc.eigen_solver_,
                        "suggested": {p: getattr(sc, p + "_", None)
                                      for p in ("metric", "sigma", "threshold_sqdist",
                                                "threshold_sim")},
                        "nnz": int(sc.affinity_matrix_.nnz)}


def ours_knn(X, k):
    sc = SpectralClustering(n_clusters=k, affinity="knn", n_neighbors=10, random_state=0,
                            backend="cpu").fit(X)
    return sc.labels_, {"timings": dict(sc.timings_), "solver": sc.eigen_solver_,
                        "nnz": int(sc.affinity_matrix_.nnz)}


def sklearn_solver(solver):
    def run(X, k):
        from sklearn.cluster import SpectralClustering as SK

        sc = SK(n_clusters=k, affinity="nearest_neighbors", n_neighbors=10,
                eigen_solver=solver, random_state=0).fit(X)
        return sc.labels_, {}
    return run


def app_spec(name, n, **graph_settings):
    """The run the app's Run button starts (:class:`explorer.ui._run.RunSpec`: the
    estimator's keywords, the data, the k-means comparison) for the built-in data set
    `name` of `n` points with every sidebar value at its default (the app's state,
    :mod:`explorer.ui.state`, without Panel); None where the app's packages (param)
    are not installed."""
    try:
        from explorer.ui.state import ExplorerState
    except ImportError:
        return None
    state = ExplorerState()
    state.data.param.update(dataset=name, n_samples=n)
    if not state.load():
        raise RuntimeError(f"the app could not load {name} n={n}: {state.data.error}")
    state.graph.param.update(**graph_settings)
    return state.run_state.spec(state.run_state.snapshot())


def app_keywords(name, n, **graph_settings):
    """The keywords the app's Run hands :class:`explorer.SpectralClustering` (see
    :func:`app_spec`); None without the app's packages."""
    spec = app_spec(name, n, **graph_settings)
    return None if spec is None else spec.estimator


def app_run(keywords):
    """The app's Run: SpectralClustering(**the app's keywords).fit (explorer/ui/_run.py)."""
    def run(X, _k):
        sc = SpectralClustering(**keywords).fit(X)
        return sc.labels_, {"timings": dict(sc.timings_), "solver": sc.eigen_solver_,
                            "affinity": sc.affinity_, "keywords": keywords,
                            "nnz": int(sc.affinity_matrix_.nnz)}
    return run


def app_run_whole(spec):
    """The app's whole Run, in this process: the fit, k-means on the raw data (beside
    the fit on the CPU) and the scores (explorer.ui._run.execute; a served app adds
    the hand-over to its worker process)."""
    from explorer.ui._run import execute

    def run(_X, _k):
        result = execute(spec, lambda *_: None)
        return result.labels, {"timings": dict(result.timings), "compare": spec.compare}
    return run


def measure(fn, X, y, k, repeats):
    times, labels, info = [], None, {}
    for _ in range(repeats):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            labels, info = fn(X, k)
            times.append(time.perf_counter() - t0)
    labels = np.asarray(labels)
    return {"seconds": statistics.median(times), "runs": times,
            "ari": float(adjusted_rand_score(y, labels)),
            "unclustered": int(np.count_nonzero(labels == -1)), **info}


def columns(args, n):
    cols = {"ours": ours}
    if has_knn_mode():
        cols["ours-knn"] = ours_knn
    if n <= args.arpack_max_n:
        cols["sklearn-arpack"] = sklearn_solver("arpack")
    if has_pyamg():
        cols["sklearn-amg"] = sklearn_solver("amg")
    cols["kmeans-ours"] = kmeans_raw(explorer.KMeans)
    cols["kmeans-sklearn"] = kmeans_raw(SKKMeans)
    return cols


def kmeans_raw(cls):
    """k-means on the raw data with the true k, 10 restarts, seed 0: our
    :class:`explorer.KMeans` and scikit-learn's (the app's comparison, and the last
    stage of both pipelines, measured against its peer)."""
    def run(X, k):
        km = cls(k, n_init=10, random_state=0).fit(X)
        return km.labels_, {"n_iter": int(km.n_iter_), "inertia": float(km.inertia_)}
    return run


def skipped(args, n):
    out = {}
    if not has_knn_mode():
        out["ours-knn"] = ("SpectralClustering has no n_neighbors parameter yet (the kNN mode "
                           "of issue 16 is not merged)")
    if n > args.arpack_max_n:
        out["sklearn-arpack"] = f"n={n} > --arpack-max-n={args.arpack_max_n}"
    if not has_pyamg():
        out["sklearn-amg"] = "pyamg is not installed (pip install pyamg)"
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5·10³ rows and the digits only")
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed runs per cell below 10⁵ rows (one from there)")
    ap.add_argument("--arpack-max-n", type=int, default=100_000)
    ap.add_argument("--out", default=None, help="result name (default cpu, cpu-quick)")
    ap.add_argument("--note", default=None, help="recorded as is (e.g. who shared the machine)")
    args = ap.parse_args(argv)
    sizes = args.sizes or ((5_000,) if args.quick else SIZES)
    rows = [(s, n) for n in sizes for s in args.shapes] + [("digits", None)]
    for name, why in skipped(args, 0).items():
        print(f"skip {name}: {why}", flush=True)

    out = args.out or ("cpu-quick" if args.quick else "cpu")
    results = []
    warm = False
    for name, n in rows:
        ds = datasets.load(name, n_samples=n, random_state=0)
        X, y, k = ds.X, ds.y, ds.n_classes
        cols = columns(args, ds.n)
        if not warm:  # one uncounted run of every column on the first (small) row
            for fn in cols.values():
                measure(fn, X, y, k, 1)
            warm = True
        repeats = args.repeats if ds.n < 100_000 else 1
        row = {"data": name, "n": ds.n, "d": ds.d, "k": k, "repeats": repeats,
               "load_before": os.getloadavg(), "skipped": skipped(args, ds.n), "cells": {}}
        for col, fn in cols.items():
            row["cells"][col] = cell = measure(fn, X, y, k, repeats)
            print(f"{name:8s} n={ds.n:>8d} {col:15s} {cell['seconds']:8.2f} s  "
                  f"ARI {cell['ari']:.3f}", flush=True)
        if ds.n == APP_RUN_N and name == APP_RUN_DATA:
            for col, settings in (("app-run", {}), ("app-run-epsilon", {"graph": "epsilon"}),
                                  ("app-run-auto", {"auto_affinity": True})):
                keywords = app_keywords(name, ds.n, **settings)
                if keywords is None:
                    row["skipped"][col] = "the app's packages (param) are not installed"
                    continue
                measure(app_run(keywords), X, y, k, 1)  # warm-up: the app's first Run
                row["cells"][col] = cell = measure(app_run(keywords), X, y, k, 1)
                print(f"{name:8s} n={ds.n:>8d} {col:15s} {cell['seconds']:8.2f} s  "
                      f"ARI {cell['ari']:.3f}", flush=True)
            spec = app_spec(name, ds.n)
            if spec is not None:
                col = "app-run-whole"
                measure(app_run_whole(spec), X, y, k, 1)  # warm-up, as above
                row["cells"][col] = cell = measure(app_run_whole(spec), X, y, k, 3)
                print(f"{name:8s} n={ds.n:>8d} {col:15s} {cell['seconds']:8.2f} s  "
                      f"ARI {cell['ari']:.3f}", flush=True)
        row["load_after"] = os.getloadavg()
        results.append(row)
        # After every row, marked partial: a run cut short keeps the rows it finished.
        write_result(out, plain(payload(args, argv, results, partial=True)))

    print("wrote", write_result(out, plain(payload(args, argv, results, partial=False))))


def payload(args, argv, results, *, partial):
    return {
        "benchmark": "cpu",
        "command": " ".join([os.path.basename(sys.argv[0])] + (argv or sys.argv[1:])),
        "cores": cores(),
        "environment": environment_info(),
        "explorer_version": getattr(explorer, "__version__", None),
        "pyamg": has_pyamg(),
        "knn_mode": has_knn_mode(),
        "protocol": ("one process; one uncounted warm-up of every column on the first row; "
                     "median of the timed runs; ARI against the true labels (-1 counts as a "
                     "label)"),
        "note": args.note,
        "partial": partial,
        "rows": results,
    }


if __name__ == "__main__":
    main()
