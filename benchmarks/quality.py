"""Clustering quality side by side: our default, kNN and ε modes, scikit-learn, k-means.

Every data set has ground truth; each method is scored by ARI and NMI (points our
estimator leaves unclustered, label -1, count as one more cluster, as any label would)
and timed. Sets (issue 16):

- the built-in 2-D shapes (``explorer.data.load``: moons, circles, blobs, aniso, varied,
  spirals) at 5,000 points with two noise levels; at 10⁵ (the CPU run: moons, circles
  and blobs at the lower level, :data:`LARGE_ON_CPU`; the GPU run: all) and 10⁶ (GPU);
- scikit-learn's iris, wine, breast cancer and digits (as shipped: features unscaled);
- the hard shapes of the issue, generated here with a fixed seed (:data:`HARD`): two
  thin crossing bands, a ring around a blob with uniform outliers, blobs whose
  features have units 1 to 1000 apart, 35 worm-like clusters of 100,000 points.

Methods (:data:`METHODS`): ``default`` = ``SpectralClustering(k)`` as shipped;
``knn`` = ``affinity="knn"``, ``sigma="local"``; ``epsilon`` = ``affinity="epsilon"``
with the suggested ε; scikit-learn's ``SpectralClustering(affinity="nearest_neighbors")``
(n ≤ 10⁵) and ``affinity="rbf"`` (n ≤ 5,000); ``kmeans`` (explorer.KMeans on the raw
features). The summary gives per method the mean and the worst ARI, and the issue's
targets: our default against scikit-learn's nearest_neighbors on every set (within
0.02), and each shape at 10⁵/10⁶ points against the same shape at 5,000 (within 0.01).

Usage::

    PYTHONPATH=. python benchmarks/quality.py            # CPU, ~10 min on 2 cores
    PYTHONPATH=. python benchmarks/quality.py --quick    # CI-size smoke (about a minute)
    PYTHONPATH=. python benchmarks/quality.py --gpu      # GPU rows, 10⁶ shapes too

writes ``benchmarks/results/quality.json`` (``quality-gpu.json`` with ``--gpu``,
``quality-quick.json`` with ``--quick``) unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment_info, write_result  # noqa: E402

from explorer import KMeans, SpectralClustering, datasets  # noqa: E402
from explorer.metrics import adjusted_rand_score, normalized_mutual_info_score  # noqa: E402

#: Seed of every generated set and of every method.
SEED = 0

#: Largest n scikit-learn's nearest_neighbors and rbf modes run at (rbf builds an n × n
#: dense matrix and solves it densely: 5,000 is the benchmark's largest set under 10⁴;
#: nearest_neighbors' eigensolver takes minutes beyond 10⁵ on a CPU).
SKLEARN_NN_MAX = 100_000
SKLEARN_RBF_MAX = 5_000

#: scikit-learn's rbf mode (gamma=1) runs on up to this many features, each of spread
#: (std) at most RBF_MAX_SPREAD: beyond, its affinity is nearly the identity and ARPACK
#: stalls (47 s for breast cancer's 569 rows, over 5 minutes for digits or mixed-units
#: on a shared 2-core machine).
RBF_MAX_D = 8
RBF_MAX_SPREAD = 10.0
RBF_SKIPPED = ("d > 8 or a feature std > 10: gamma=1 gives a near-identity affinity that "
               "ARPACK stalls on (breast cancer 47 s, ARI 0.0; digits, mixed-units > 5 min)")

#: ARI targets of issue 16.
VS_SKLEARN_TOL = 0.02
VS_SMALL_TOL = 0.01


# --- the hard shapes ---------------------------------------------------------------


def crossing_bands(n, rng):
    """Two thin straight bands (length 2, gaussian width 0.01) crossing at 60°, off
    their middles: band 1 crosses band 0 at 0.6 from band 0's centre, at -0.6 from
    its own, so a cut across both bands is cheaper than at the crossing alone."""
    y = rng.permutation(np.arange(n) % 2)
    t = rng.uniform(-1.0, 1.0, n)
    across = rng.normal(scale=0.01, size=n)
    angle = np.where(y == 0, 0.0, np.deg2rad(60.0))
    X = np.stack([t * np.cos(angle) - across * np.sin(angle),
                  t * np.sin(angle) + across * np.cos(angle)], axis=1)
    c = np.deg2rad(60.0)
    X[y == 1] += np.array([0.6 + 0.6 * np.cos(c), 0.6 * np.sin(c)])
    return X, y


def ring_outliers(n, rng, *, outliers=0.03):
    """A ring (radius 1, width 0.05) around a blob (std 0.15) and a share of uniform
    outliers in [-1.6, 1.6]², each labelled by the structure it is nearer to."""
    n_out = int(round(outliers * n))
    n_in = n - n_out
    y_in = rng.permutation(np.arange(n_in) % 2)
    angle = rng.uniform(0, 2 * np.pi, n_in)
    radius = np.where(y_in == 1, 1.0 + rng.normal(scale=0.05, size=n_in), 0.0)
    X_in = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    X_in[y_in == 0] = rng.normal(scale=0.15, size=(int((y_in == 0).sum()), 2))
    X_out = rng.uniform(-1.6, 1.6, size=(n_out, 2))
    y_out = (np.linalg.norm(X_out, axis=1) > 0.6).astype(int)
    return np.concatenate([X_in, X_out]), np.concatenate([y_in, y_out])


def mixed_units(n, rng):
    """Four gaussian blobs in 4-D (centres uniform in the unit cube, std 0.06) with the
    features then measured in units 1, 10, 100 and 1000 apart (a feature in grams next
    to one in kilograms): raw distances are the last feature's."""
    centers = np.random.default_rng(7).uniform(size=(4, 4))
    y = rng.permutation(np.arange(n) % 4)
    X = centers[y] + rng.normal(scale=0.06, size=(n, 4))
    return X * np.array([1.0, 10.0, 100.0, 1000.0]), y


def worms(n, rng, *, count=35):
    """`count` worm-like clusters in the unit square: smooth random curves (a heading
    that turns by a random walk) of length 0.35, points spread along each with
    gaussian width 0.004 around it."""
    steps = 200
    y = rng.permutation(np.arange(n) % count)
    X = np.empty((n, 2))
    for c in range(count):
        start = rng.uniform(0.15, 0.85, 2)
        heading = rng.uniform(0, 2 * np.pi) + np.cumsum(rng.normal(scale=0.08, size=steps))
        path = start + np.cumsum(0.35 / steps * np.stack([np.cos(heading), np.sin(heading)], 1),
                                 axis=0)
        idx = np.flatnonzero(y == c)
        at = rng.uniform(0, steps - 1, idx.size)
        lo = np.floor(at).astype(int)
        frac = (at - lo)[:, None]
        X[idx] = path[lo] * (1 - frac) + path[lo + 1] * frac
        X[idx] += rng.normal(scale=0.004, size=(idx.size, 2))
    return X, y


#: Hard shapes: name -> (generator, n).
HARD = {
    "crossing-bands": (crossing_bands, 5000),
    "ring-outliers": (ring_outliers, 5000),
    "mixed-units": (mixed_units, 5000),
    "worms-35": (worms, 100_000),
}

#: Built-in shapes and their noise levels (the option that sets it, two values).
SHAPES = {
    "moons": ("noise", (0.05, 0.1)),
    "circles": ("noise", (0.05, 0.1)),
    "blobs": ("cluster_std", (0.15, 0.3)),
    "aniso": ("cluster_std", (0.15, 0.25)),
    "varied": (None, (None,)),
    "spirals": ("noise", (0.02, 0.05)),
}

TOY = ("iris", "wine", "breast_cancer", "digits")

#: ``--quick`` (a CI-size smoke of the script, about a minute on 2 cores): these shapes
#: and toy sets, every set at most this many points.
QUICK_SHAPES = ("moons", "circles")
QUICK_TOY = ("iris", "wine")
QUICK_N = 1000


#: The shapes the CPU run also scores at 10⁵ points (the lower noise level; a CPU
#: fit at 10⁵ takes 10 s to minutes on 2 cores); the GPU run scores every shape there.
LARGE_ON_CPU = ("moons noise=0.05", "circles noise=0.05", "blobs cluster_std=0.15")


def cases(sizes, *, quick=False, all_large=True):
    """The benchmark's data sets: dicts with ``name``, ``family``, ``n``, ``kind`` and a
    ``make()`` returning ``(X float32, y)``. Without `all_large`, sizes above 5,000
    are run for :data:`LARGE_ON_CPU` only."""
    out = []
    shapes = {k: v for k, v in SHAPES.items() if k in QUICK_SHAPES} if quick else SHAPES
    for n in sizes:
        for shape, (option, levels) in shapes.items():
            for level in levels:
                opts = {} if option is None else {option: level}
                label = shape if option is None else f"{shape} {option}={level:g}"
                if n > 5000 and not all_large and label not in LARGE_ON_CPU:
                    continue

                def make(shape=shape, n=n, opts=opts):
                    ds = datasets.load(shape, n_samples=n, random_state=SEED, **opts)
                    return ds.X, ds.y

                out.append({"name": f"{label} n={n:g}", "family": label, "n": n,
                            "kind": "shape", "make": make})
    for name in QUICK_TOY if quick else TOY:
        def make(name=name):
            import sklearn.datasets as skd

            bunch = getattr(skd, f"load_{name}")()
            return bunch.data.astype(np.float32), bunch.target

        out.append({"name": name, "family": name, "n": None, "kind": "toy", "make": make})
    for name, (gen, n) in HARD.items():
        n = min(n, QUICK_N) if quick else n

        def make(gen=gen, n=n):
            X, y = gen(n, np.random.default_rng(SEED))
            return X.astype(np.float32), y

        out.append({"name": name, "family": name, "n": n, "kind": "hard", "make": make})
    return out


# --- the methods -------------------------------------------------------------------


def _ours(**params):
    def run(X, k, backend):
        sc = SpectralClustering(k, random_state=SEED, backend=backend, **params).fit(X)
        chosen = {"affinity": getattr(sc, "affinity_", params.get("affinity", "epsilon")),
                  "why": getattr(sc, "affinity_why_", None),
                  "edge_rule": None if sc.edge_rule_ is None else sc.edge_rule_.describe(),
                  "n_unclustered": int((_host(sc.labels_) < 0).sum()),
                  "components": sc.graph_stats_.n_components,
                  "eigen_solver": sc.eigen_solver_}
        return sc.labels_, chosen
    return run


def _sklearn(affinity):
    def run(X, k, backend):
        from sklearn.cluster import SpectralClustering as SK

        X = _host(X)
        return SK(k, affinity=affinity, random_state=SEED).fit_predict(X), {}
    return run


def _kmeans(X, k, backend):
    if backend == "gpu":
        import cupy

        X = cupy.asarray(X)
    return KMeans(k, random_state=SEED).fit(X).labels_, {}


#: name -> (runner, largest n it runs at or None).
METHODS = {
    "default": (_ours(), None),
    "knn": (_ours(affinity="knn", sigma="local"), None),
    "epsilon": (_ours(affinity="epsilon"), None),
    "sklearn_nn": (_sklearn("nearest_neighbors"), SKLEARN_NN_MAX),
    "sklearn_rbf": (_sklearn("rbf"), SKLEARN_RBF_MAX),
    "kmeans": (_kmeans, None),
}


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _time(fn, backend, repeats):
    """(result of the last call, median seconds): CUDA events on the GPU after one
    uncounted warm-up call, wall clock of `repeats` calls on the CPU."""
    if backend == "gpu" and repeats > 1:
        import cupy

        out = [fn()]  # warm-up
        times = []
        for _ in range(repeats):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            out[0] = fn()
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) / 1000.0)
        return out[0], float(np.median(times))
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return result, float(np.median(times))


def run_case(case, methods, backend, repeats):
    X, y = case["make"]()
    n = X.shape[0]
    k = int(np.unique(y).size)
    row = {"name": case["name"], "family": case["family"], "kind": case["kind"], "n": int(n),
           "d": int(X.shape[1]), "k": k, "methods": {}}
    Xb = X
    if backend == "gpu":
        import cupy

        Xb = cupy.asarray(X)
    for name in methods:
        runner, limit = METHODS[name]
        if limit is not None and n > limit:
            row["methods"][name] = {"skipped": f"n={n} > {limit}"}
            continue
        if name == "sklearn_rbf" and (X.shape[1] > RBF_MAX_D
                                      or float(X.std(axis=0).max()) > RBF_MAX_SPREAD):
            row["methods"][name] = {"skipped": RBF_SKIPPED}
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = not name.startswith("sklearn")  # scikit-learn takes the host copy
                (labels, extra), seconds = _time(
                    lambda runner=runner, data=(Xb if ours else X): runner(data, k, backend),
                    backend, repeats if ours else 1)
        except Exception as exc:  # a method that fails on a set is a result, not a crash
            row["methods"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(f"  {name:12s} error {exc}", flush=True)
            continue
        labels = _host(labels)
        entry = {"ari": float(adjusted_rand_score(y, labels)),
                 "nmi": float(normalized_mutual_info_score(y, labels)),
                 "seconds": seconds, **extra}
        row["methods"][name] = entry
        print(f"  {name:12s} ARI {entry['ari']:.4f}  NMI {entry['nmi']:.4f}  {seconds:7.2f} s"
              + (f"  ({extra.get('affinity')})" if extra.get("affinity") else ""), flush=True)
    return row


def summarise(rows, methods):
    """Mean and worst ARI per method (over the sets it ran on) and the issue's targets."""
    per_method = {}
    for name in methods:
        scored = [(r["name"], r["methods"][name]["ari"]) for r in rows
                  if "ari" in r["methods"].get(name, {})]
        if not scored:
            continue
        worst = min(scored, key=lambda s: s[1])
        per_method[name] = {"sets": len(scored),
                            "mean_ari": float(np.mean([s[1] for s in scored])),
                            "worst_ari": worst[1], "worst_set": worst[0]}
    vs_sklearn = []
    for r in rows:
        m = r["methods"]
        if "ari" in m.get("default", {}) and "ari" in m.get("sklearn_nn", {}):
            gap = m["default"]["ari"] - m["sklearn_nn"]["ari"]
            vs_sklearn.append({"set": r["name"], "default": m["default"]["ari"],
                               "sklearn_nn": m["sklearn_nn"]["ari"], "gap": gap,
                               "ok": gap >= -VS_SKLEARN_TOL})
    small = {r["family"]: r["methods"].get("default", {}).get("ari") for r in rows
             if r["kind"] == "shape" and r["n"] == 5000}
    vs_small = []
    for r in rows:
        if r["kind"] == "shape" and r["n"] > 5000 and small.get(r["family"]) is not None:
            ari = r["methods"].get("default", {}).get("ari")
            if ari is not None:
                vs_small.append({"set": r["name"], "ari": ari, "ari_at_5000": small[r["family"]],
                                 "ok": ari >= small[r["family"]] - VS_SMALL_TOL})
    return {"per_method": per_method,
            "default_vs_sklearn_nn": {"tolerance": VS_SKLEARN_TOL,
                                      "all_ok": all(v["ok"] for v in vs_sklearn),
                                      "sets": vs_sklearn},
            "default_large_vs_5000": {"tolerance": VS_SMALL_TOL,
                                      "all_ok": all(v["ok"] for v in vs_small), "sets": vs_small}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpu", action="store_true", help="run our methods on the GPU, add 10⁶ rows")
    p.add_argument("--quick", action="store_true", help="CI-size smoke: a few sets of 1,000 points")
    p.add_argument("--methods", default=",".join(METHODS),
                   help=f"comma-separated subset of {', '.join(METHODS)}")
    p.add_argument("--only", help="run only the sets whose name contains this text")
    p.add_argument("--repeats", type=int, help="timed runs per method (default 1 CPU, 3 GPU)")
    p.add_argument("--out", help="result name under benchmarks/results (no .json)")
    args = p.parse_args(argv)
    backend = "gpu" if args.gpu else "cpu"
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        p.error(f"unknown method(s) {unknown}; use {', '.join(METHODS)}")
    if args.quick:
        sizes = (QUICK_N,)
    elif args.gpu:
        sizes = (5000, 100_000, 1_000_000)
    else:
        sizes = (5000, 100_000)
    repeats = args.repeats or (3 if args.gpu else 1)
    chosen = [c for c in cases(sizes, quick=args.quick, all_large=args.gpu)
              if args.only is None or args.only in c["name"]]
    env = environment_info(backend)
    rows = []
    t0 = time.perf_counter()
    name = args.out or ("quality-quick" if args.quick else
                        "quality-gpu" if args.gpu else "quality")
    for case in chosen:
        print(case["name"], flush=True)
        rows.append(run_case(case, methods, backend, repeats))
        # what is done so far, in case a time limit stops the run
        write_result(name + "-partial", {"rows": rows, "methods": methods,
                                         "backend": backend, "environment": env})
    result = {
        "benchmark": "quality",
        "about": "ARI/NMI against ground truth per data set and method (issue 16); "
                 "label -1 (unclustered) counts as a cluster. Times: median of `repeats` "
                 "runs (CUDA events after a warm-up on the GPU; wall clock on the CPU, "
                 "indicative on a shared machine).",
        "backend": backend, "repeats": repeats, "quick": args.quick,
        "device": env.get("gpu", {}).get("name") or env["host"].get("cpu"),
        "environment": env, "methods": methods, "rows": rows,
        "summary": summarise(rows, methods),
        "seconds_total": time.perf_counter() - t0,
    }
    path = write_result(name, result)
    (path.parent / f"{name}-partial.json").unlink(missing_ok=True)
    s = result["summary"]
    for m, v in s["per_method"].items():
        print(f"{m:12s} mean ARI {v['mean_ari']:.4f}  worst {v['worst_ari']:.4f} "
              f"({v['worst_set']})")
    print("default >= sklearn_nn - 0.02 everywhere:", s["default_vs_sklearn_nn"]["all_ok"])
    print("large shapes within 0.01 of 5000:", s["default_large_vs_5000"]["all_ok"])
    print("wrote", path)
    return 0 if math.isfinite(result["seconds_total"]) else 1


if __name__ == "__main__":
    sys.exit(main())
