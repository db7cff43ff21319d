"""Past the n² wall (issue 17): exact vs representatives (vs landmarks) on large sets,
and k-means at k = 4096.

Usage (on a GPU machine, from the repository root)::

    PYTHONPATH=. python benchmarks/large.py kmeans [--tag NAME]   # k-means at k = 4096
    PYTHONPATH=. python benchmarks/large.py large                 # the pipelines
    PYTHONPATH=. python benchmarks/large.py blobs                 # easy 1e6 x 784 set
    PYTHONPATH=. python benchmarks/large.py landmarks             # landmarks, into large.json
    PYTHONPATH=. python benchmarks/large.py landmarks --smoke     # its CPU check, tiny sizes
    PYTHONPATH=. python benchmarks/large.py plot                  # docs/large-scaling.png

``kmeans`` times ``KMeans(4096, n_init=1, max_iter=1).fit`` (seeding, one Lloyd step,
the inertia) once, and one Lloyd step (``assign_nearest`` with sums, median of 3), on
1e6 × 784 and 1e7 × 4 blobs; run it from another checkout (``--tag before``) to time
the code before a change. ``large`` runs: infinite-digits 1e6 × 784 exact,
representatives and landmarks (ARI against the exact labels and the truth); the
scaling of each mode over n (slices of that set); 1e7 × 784 end to end with
representatives; syn4d 1e8 end to end with representatives. Data are generated on the
GPU (``explorer.data.infinite_digits_gpu``; syn4d's boxes drawn by CuPy's generator,
the same distribution as ``data/_syn4d.py`` from another stream). Landmark rows are
skipped, with the reason printed, while ``mode="landmarks"`` is not accepted.
``landmarks`` runs the landmark mode alone on the same sets (the 125K-1e6 slices, 1e7;
the exact pipeline once more at 1e6 for ``ari_exact``, ``--no-exact`` skips it) and
merges its rows into large.json (``landmarks_run`` holds its environment). ``plot``
draws docs/large-scaling.png (``scaling_plot.py large``).

Writes benchmarks/results/large/large.json (``large``) and large-kmeans-<tag>.json.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import environment_info, summary, time_gpu, write_result


def _sync(backend="gpu"):
    if backend != "gpu":
        return
    import cupy

    cupy.cuda.Device().synchronize()


def _blobs(n, d, k, seed, labels=False):
    """k unit-variance gaussian blobs, centres uniform in [-10, 10]^d, drawn on the GPU."""
    import cupy

    rs = cupy.random.RandomState(seed)
    centres = rs.uniform(-10, 10, size=(k, d), dtype=cupy.float32)
    y = rs.randint(0, k, size=n)
    X = centres[y]
    X += rs.standard_normal((n, d), dtype=cupy.float32)
    return (X, cupy.asnumpy(y)) if labels else X


def bench_kmeans(tag):
    import cupy

    from explorer.kmeans import KMeans, assign_nearest, row_sq_norms

    k = 4096
    KMeans(64, n_init=1, max_iter=2, random_state=0).fit(_blobs(20_000, 4, 64, 1))  # compile
    rows = []
    for n, d in ((10**6, 784), (10**7, 4)):
        X = _blobs(n, d, k, 0)
        _sync()
        KMeans(k, n_init=1, max_iter=1, random_state=0).fit(X[:50_000])  # this d compiled
        _sync()
        t0 = time.perf_counter()
        km = KMeans(k, n_init=1, max_iter=1, random_state=0).fit(X)
        _sync()
        fit1 = time.perf_counter() - t0
        Xc = X - X.mean(axis=0)
        x_sq = row_sq_norms(Xc, cupy)
        C = km.cluster_centers_.astype(cupy.float64) - X.mean(axis=0).astype(cupy.float64)
        chunk = max(1024, (1 << 26) // max(k, d))
        step = time_gpu(lambda Xc=Xc, x_sq=x_sq, C=C, chunk=chunk: assign_nearest(
            Xc, x_sq, C, chunk, cupy, want_sums=True))
        row = {"n": n, "d": d, "k": k, "fit_max_iter_1_s": fit1,
               "lloyd_step_s": summary(step), "inertia_after_1_step": km.inertia_}
        print(tag, row, flush=True)
        rows.append(row)
        del X, Xc, x_sq
        cupy.get_default_memory_pool().free_all_blocks()
    write_result(f"large-kmeans-{tag}", {"environment": environment_info("gpu"), "tag": tag,
                                         "rows": rows})


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _ari(a, b):
    from explorer.metrics import adjusted_rand_score

    return adjusted_rand_score(_host(a), _host(b))


def _fit(X, mode, k, seed=0, backend="gpu", **kw):
    from explorer import SpectralClustering

    _sync(backend)
    t0 = time.perf_counter()
    sc = SpectralClustering(k, mode=mode, backend=backend, random_state=seed, **kw).fit(X)
    _sync(backend)
    return sc, time.perf_counter() - t0


def _landmarks_accepted():
    from explorer import SpectralClustering

    try:
        SpectralClustering(2, mode="landmarks")._check_params()
    except (ValueError, TypeError) as exc:
        return f"mode='landmarks' is not accepted here ({exc})"
    return None


def _row(sc, seconds, y, exact_labels=None):
    row = {"seconds": seconds, "mode": sc.mode_, "mode_why": sc.mode_why_,
           "timings": dict(sc.timings_), "ari_truth": _ari(y, sc.labels_)}
    if sc.edge_rule_ is not None:  # the landmark mode builds no n × n graph
        row.update(affinity=sc.affinity_, affinity_why=sc.affinity_why_,
                   edge_rule=sc.edge_rule_.describe(), graph_n=sc.graph_stats_.n,
                   graph_nnz=sc.graph_stats_.nnz)
    else:
        part = sc.landmark_partition_
        row.update(n_landmarks=len(sc.landmarks_), n_nearest=part.n_nearest, metric=sc.metric_,
                   sigma=sc.sigma_, svd_iterations=sc.eigen_iterations_,
                   n_unclustered=int((_host(sc.labels_) < 0).sum()))
    if exact_labels is not None:
        row["ari_exact"] = _ari(exact_labels, sc.labels_)
    return row


#: data/_syn4d.py's shape: boxes of side SIDE at these corners of [0, 1]⁴.
SYN4D_SIDE = 0.421
SYN4D_CORNERS = [[0, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]]


def _syn4d_gpu(n, seed):
    """data/_syn4d.py's four boxes, drawn by CuPy (same distribution, other stream)."""
    import cupy

    rs = cupy.random.RandomState(seed)
    y = rs.randint(0, 4, size=n).astype(cupy.int32)
    X = rs.random_sample((n, 4), dtype=cupy.float32) * SYN4D_SIDE
    X += cupy.asarray(SYN4D_CORNERS, dtype=cupy.float32)[y] * (1.0 - SYN4D_SIDE)
    X -= X.min(axis=0)
    X /= X.max(axis=0)
    return X, y


def bench_large():
    import cupy
    from explorer.data import infinite_digits_gpu

    free, total = cupy.cuda.runtime.memGetInfo()
    print(f"GPU memory free {free / 2**30:.1f} of {total / 2**30:.1f} GiB", flush=True)
    result = {"environment": environment_info("gpu"), "gpu_memory_gib": total / 2**30}
    skip_landmarks = _landmarks_accepted()
    if skip_landmarks:
        print("landmarks skipped:", skip_landmarks, flush=True)
        result["landmarks_skipped"] = skip_landmarks
    modes = ["exact", "representatives"] + ([] if skip_landmarks else ["landmarks"])

    # Warm-up (compilation) of every mode on a small set.
    Xw, yw = infinite_digits_gpu(20_000, np.random.default_rng(1))
    for mode in modes:
        _fit(Xw, mode, 10)
    del Xw

    n = 10**6
    t0 = time.perf_counter()
    X, y = infinite_digits_gpu(n, np.random.default_rng(0))
    _sync()
    result["digits_1e6_generate_s"] = time.perf_counter() - t0
    print("generated 1e6 digits in", result["digits_1e6_generate_s"], flush=True)
    runs = {}
    exact, seconds = _fit(X, "exact", 10)
    runs["exact"] = _row(exact, seconds, y)
    print("exact 1e6", runs["exact"], flush=True)
    exact_labels = cupy.asnumpy(cupy.asarray(exact.labels_))
    del exact
    for mode in modes[1:]:
        times = []
        for seed in range(3):
            sc, seconds = _fit(X, mode, 10, seed=seed)
            times.append(seconds)
        runs[mode] = _row(sc, float(np.median(times)), y, exact_labels)
        runs[mode]["runs_s"] = times
        runs[mode]["speedup_vs_exact"] = runs["exact"]["seconds"] / runs[mode]["seconds"]
        print(mode, "1e6", runs[mode], flush=True)
        del sc
    result["digits_1e6"] = runs
    write_result("large", result)

    scaling = []
    for m in _slices(n):
        for mode in modes:
            sc, seconds = _fit(X[:m], mode, 10)
            scaling.append({"n": m, "mode": mode, "seconds": seconds,
                            "ari_truth": _ari(y[:m], sc.labels_)})
            print(scaling[-1], flush=True)
            del sc
    for mode in modes:
        scaling.append({"n": n, "mode": mode, "seconds": runs[mode]["seconds"],
                        "ari_truth": runs[mode]["ari_truth"]})
    del X
    cupy.get_default_memory_pool().free_all_blocks()

    n = 10**7
    t0 = time.perf_counter()
    X, y = infinite_digits_gpu(n, np.random.default_rng(0))
    _sync()
    result["digits_1e7_generate_s"] = time.perf_counter() - t0
    print("generated 1e7 digits in", result["digits_1e7_generate_s"], flush=True)
    big = {}
    for mode in modes[1:]:
        sc, seconds = _fit(X, mode, 10)
        big[mode] = _row(sc, seconds, y)
        scaling.append({"n": n, "mode": mode, "seconds": seconds,
                        "ari_truth": big[mode]["ari_truth"]})
        print(mode, "1e7", big[mode], flush=True)
        del sc
    result["digits_1e7"] = big
    result["scaling"] = scaling
    write_result("large", result)
    del X
    cupy.get_default_memory_pool().free_all_blocks()

    n = 10**8
    X, y = _syn4d_gpu(n, 0)
    _fit(_syn4d_gpu(10**6, 1)[0], "representatives", 4)  # warm-up at d = 4
    sc, seconds = _fit(X, "representatives", 4)
    result["syn4d_1e8"] = _row(sc, seconds, cupy.asnumpy(y))
    print("syn4d 1e8 representatives", result["syn4d_1e8"], flush=True)
    path = write_result("large", result)
    print("wrote", path)


def _slices(n):
    """The first rows of the n-row set at which every mode is timed (the scaling
    curve): n/8, n/4, n/2 (125K, 250K, 500K of the 10⁶ set)."""
    return (n // 8, n // 4, n // 2)


def _landmark_runs(X, y, seeds, exact_labels=None, exact_seconds=None, backend="gpu"):
    """``mode="landmarks"`` once per seed on (X, y): the last fit's row, with the
    median seconds of all and each run's seconds (and ARI) listed."""
    times, aris = [], []
    for seed in seeds:
        sc, seconds = _fit(X, "landmarks", 10, seed=seed, backend=backend)
        times.append(seconds)
        aris.append(_ari(y, sc.labels_))
    row = _row(sc, float(np.median(times)), y, exact_labels)
    row.update(runs_s=times, runs_ari_truth=aris, seeds=list(seeds))
    if exact_seconds is not None:
        row["speedup_vs_exact"] = exact_seconds / row["seconds"]
    del sc
    return row


def bench_landmarks(n_small=10**6, n_big=10**7, seeds=(0, 1, 2), exact=True, smoke=False):
    """``mode="landmarks"`` on the infinite-digits sets of ``large`` (the same generator
    and seeds: 1e6 rows from ``default_rng(0)``, its first 125K/250K/500K rows, 1e7
    rows from ``default_rng(0)``), merged into large.json: ``digits_1e6.landmarks``,
    ``digits_1e7.landmarks``, the landmarks points of ``scaling``, and ``landmarks_run``
    (this run's environment). With `exact` the exact pipeline runs once more at 1e6 so
    that ``ari_exact`` and ``speedup_vs_exact`` compare within this run.

    `smoke`: a CPU check of this code at tiny sizes (the host generator, backend
    "cpu"), written to large-landmarks-smoke.json from a copy of large.json."""
    import json

    from _common import RESULTS

    backend = "cpu" if smoke else "gpu"
    if smoke:
        from explorer import datasets

        def make(n):
            ds = datasets.load("infinite-digits", n_samples=n, random_state=0)
            return ds.X, ds.y
    else:
        from explorer.data import infinite_digits_gpu

        def make(n):
            return infinite_digits_gpu(n, np.random.default_rng(0))

    name = "large-landmarks-smoke" if smoke else "large"
    path = RESULTS / "large" / "large.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    env = environment_info(backend)
    run = {"environment": env, "command": "python benchmarks/large.py landmarks",
           "n_small": n_small, "n_big": n_big, "seeds": list(seeds), "protocol":
           "SpectralClustering(10, mode='landmarks', backend=...) with its defaults "
           "(gaussian weights, p = 1000 landmarks, r = 5 nearest); data already on the "
           "device; wall clock to a device sync; median of the seeds' runs; one "
           "uncounted warm-up fit on 20,000 rows first"}
    if not smoke:
        import cupy

        free, total = cupy.cuda.runtime.memGetInfo()
        run["gpu_memory_gib"] = total / 2**30
        print(f"GPU memory free {free / 2**30:.1f} of {total / 2**30:.1f} GiB", flush=True)
    if "landmarks_skipped" in result:
        result["landmarks_skipped_in_first_run"] = result.pop("landmarks_skipped")
    result["landmarks_run"] = run
    scaling = [r for r in result.get("scaling", []) if r["mode"] != "landmarks"]

    t_start = t0 = time.perf_counter()
    Xw, _ = make(min(20_000, n_small))
    _fit(Xw, "landmarks", 10, backend=backend)  # warm-up: compilation
    if exact:
        _fit(Xw, "exact", 10, backend=backend)
    del Xw
    run["warm_up_s"] = time.perf_counter() - t0
    print(f"warm-up {run['warm_up_s']:.1f} s", flush=True)

    X, y = make(n_small)
    _sync(backend)
    exact_labels = exact_seconds = None
    if exact:
        sc, exact_seconds = _fit(X, "exact", 10, backend=backend)
        exact_labels = _host(sc.labels_)
        run["exact_1e6_rerun"] = _row(sc, exact_seconds, y)
        print("exact", n_small, run["exact_1e6_rerun"], flush=True)
        del sc
    row = _landmark_runs(X, y, seeds, exact_labels, exact_seconds, backend)
    result.setdefault("digits_1e6", {})["landmarks"] = row
    print("landmarks", n_small, row, flush=True)
    for m in _slices(n_small) + (n_small,):
        if m < n_small:
            sc, seconds = _fit(X[:m], "landmarks", 10, backend=backend)
            entry = {"n": m, "mode": "landmarks", "seconds": seconds,
                     "ari_truth": _ari(y[:m], sc.labels_)}
            del sc
        else:
            entry = {"n": m, "mode": "landmarks", "seconds": row["seconds"],
                     "ari_truth": row["ari_truth"]}
        scaling.append({**entry, "run": "landmarks_run"})
        print(scaling[-1], flush=True)
    result["scaling"] = scaling
    write_result(name, result)
    del X, y
    if not smoke:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()

    t0 = time.perf_counter()
    X, y = make(n_big)
    _sync(backend)
    run["digits_1e7_generate_s"] = time.perf_counter() - t0
    print(f"generated {n_big} digits in {run['digits_1e7_generate_s']:.1f} s", flush=True)
    row = _landmark_runs(X, y, seeds, backend=backend)
    result.setdefault("digits_1e7", {})["landmarks"] = row
    print("landmarks", n_big, row, flush=True)
    scaling.append({"n": n_big, "mode": "landmarks", "seconds": row["seconds"],
                    "ari_truth": row["ari_truth"], "run": "landmarks_run"})
    run["seconds_total"] = time.perf_counter() - t_start
    print("wrote", write_result(name, result))


def bench_blobs():
    """1e6 × 784 gaussian blobs (10, well apart): an easy set on which the exact
    pipeline works, exact against representatives, landmarks (and auto) with the
    gaussian metric; the median of 3 seeds for the approximate modes."""
    X, y = _blobs(10**6, 784, 10, 0, labels=True)
    result = {"environment": environment_info("gpu"), "data": "blobs 1e6 x 784, 10 centres "
              "uniform in [-10, 10]^784, unit variance", "metric": "gaussian"}
    for mode in ("exact", "representatives", "landmarks"):
        _fit(X[:20_000], mode, 10, metric="gaussian")  # warm-up
    exact, seconds = _fit(X, "exact", 10, metric="gaussian")
    runs = {"exact": _row(exact, seconds, y)}
    print("blobs exact", runs["exact"], flush=True)
    labels = exact.labels_
    del exact
    for mode in ("representatives", "landmarks"):
        times = []
        for seed in range(3):
            sc, seconds = _fit(X, mode, 10, seed=seed, metric="gaussian")
            times.append(seconds)
        runs[mode] = _row(sc, float(np.median(times)), y, labels)
        runs[mode]["runs_s"] = times
        runs[mode]["speedup_vs_exact"] = runs["exact"]["seconds"] / float(np.median(times))
        print("blobs", mode, runs[mode], flush=True)
    sc, seconds = _fit(X, "auto", 10, metric="gaussian")
    runs["auto"] = _row(sc, seconds, y, labels)
    print("blobs auto", runs["auto"], flush=True)
    result["runs"] = runs
    write_result("large-blobs", result)


def plot():
    """docs/large-scaling.png from large.json (``scaling_plot.large_scaling``)."""
    from scaling_plot import large_scaling

    large_scaling()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("kmeans", "large", "landmarks", "blobs", "plot"))
    parser.add_argument("--tag", default="after")
    parser.add_argument("--no-exact", action="store_true",
                        help="landmarks: skip the exact pipeline's re-run at 1e6 (ari_exact)")
    parser.add_argument("--smoke", action="store_true",
                        help="landmarks: a CPU check at tiny sizes (large-landmarks-smoke.json)")
    args = parser.parse_args(argv)
    if args.part == "kmeans":
        bench_kmeans(args.tag)
    elif args.part == "landmarks":
        if args.smoke:
            bench_landmarks(n_small=3000, n_big=6000, seeds=(0, 1), exact=not args.no_exact,
                            smoke=True)
        else:
            bench_landmarks(exact=not args.no_exact)
    elif args.part == "plot":
        plot()
    elif args.part == "blobs":
        bench_blobs()
    else:
        bench_large()


if __name__ == "__main__":
    sys.exit(main())
