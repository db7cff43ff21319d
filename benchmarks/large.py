"""Past the n² wall (issue 17): exact vs representatives (vs landmarks) on large sets,
and k-means at k = 4096.

Usage (on a GPU machine, from the repository root)::

    PYTHONPATH=. python benchmarks/large.py kmeans [--tag NAME]   # k-means at k = 4096
    PYTHONPATH=. python benchmarks/large.py large                 # the pipelines
    PYTHONPATH=. python benchmarks/large.py blobs                 # easy 1e6 x 784 set
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

Writes benchmarks/results/large.json (``large``) and large-kmeans-<tag>.json.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import environment_info, summary, time_gpu, write_result


def _sync():
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


def _ari(a, b):
    import cupy

    from explorer.metrics import adjusted_rand_score

    return adjusted_rand_score(cupy.asnumpy(cupy.asarray(a)), cupy.asnumpy(cupy.asarray(b)))


def _fit(X, mode, k, seed=0, **kw):
    from explorer import SpectralClustering

    _sync()
    t0 = time.perf_counter()
    sc = SpectralClustering(k, mode=mode, backend="gpu", random_state=seed, **kw).fit(X)
    _sync()
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
        row.update(n_landmarks=len(sc.landmarks_))
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
    for m in (125_000, 250_000, 500_000):
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
    """docs/large-scaling.png: seconds against n per mode, log-log, from large.json."""
    import json
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from _common import RESULTS, device_name

    result = json.loads((RESULTS / "large.json").read_text())
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for mode, marker in (("exact", "o"), ("representatives", "s"), ("landmarks", "^")):
        rows = sorted((r["n"], r["seconds"]) for r in result["scaling"] if r["mode"] == mode)
        if rows:
            ax.plot([r[0] for r in rows], [r[1] for r in rows], marker=marker, label=mode)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (infinite-digits, 784 features)")
    ax.set_ylabel("fit, seconds (end to end, data on the GPU)")
    ax.set_title(f"SpectralClustering(10, mode=...) on {device_name(result['environment'])}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    out = Path(__file__).resolve().parent.parent / "docs" / "large-scaling.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("kmeans", "large", "blobs", "plot"))
    parser.add_argument("--tag", default="after")
    args = parser.parse_args(argv)
    if args.part == "kmeans":
        bench_kmeans(args.tag)
    elif args.part == "plot":
        plot()
    elif args.part == "blobs":
        bench_blobs()
    else:
        bench_large()


if __name__ == "__main__":
    sys.exit(main())
