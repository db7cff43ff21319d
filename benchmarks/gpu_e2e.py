"""GPU end-to-end regression guard → ``gpu-e2e.json`` (one run on the device).

Every stage is timed the same way: one warm-up run (kernel compilation, memory-pool
growth) not counted, then ``--repeats`` runs between CUDA events with the end event
synchronised, the median reported with min, max and the runs
(:func:`_common.time_gpu`). The device's name is recorded with the environment.

Stages (a flat table, ``stages[name]``):

- ``kmeans.emb60k``: ``KMeans(10, n_init=10)`` on 60,000 × 10 float32 (an embedding's
  shape: 10 overlapping Gaussian blobs), the whole fit; beside it ``...seeding`` (the 10
  restarts' greedy k-means++ alone), ``...lloyd`` (our Lloyd iterations alone from
  those starts, with each restart's iteration count and the loop's steps) and
  ``...peer``, a plain PyTorch Lloyd (CuPy where PyTorch is missing) from the same
  starts, the restarts one after the other, each for its iteration count in
  ``...lloyd``, float32 sums (what a user would write: ``x² - 2 X Cᵀ + c²``,
  ``argmin``, ``index_add_``).
- ``kmeans.1m_8d``: ``KMeans(8, n_init=10)`` on 10⁶ × 8 blobs, same companions.
- ``kmeans.6m_128d_k1024``: one Lloyd iteration at 6·10⁶ × 128, k = 1024, one
  restart: ``(fit(max_iter=4) - fit(max_iter=1)) / 3`` from the same random rows as
  centres with ``tol=0`` (fixed costs cancel); beside it the float32 GEMM floor of
  the distance step (``X Cᵀ`` by cuBLAS in blocks of 2¹⁸ rows into one buffer), the
  TF32 one, the peer's iteration, and the parts of our step alone
  (``...assign_checked``: TF32 product, bound check and float64 re-check, with the
  rows re-checked; ``...sums``: the float64 cluster sums). The split ("3xTF32")
  product beside them: ``...split_prepare`` (forming the n × 3d data operand, once
  a fit), ``...gemm_split`` (its TF32 GEMM over 3d columns, blocks of 2¹⁸ rows, our
  cuBLAS call) with ``...gemm_tf32_ours`` (the plain TF32 product by the same call),
  ``...assign_split`` (split product, bound check and re-check, with the rows
  re-checked and ``rows_within_tf32_bound``, the estimate of the plain product's),
  and ``...iteration`` records the product each of four DeviceStarts steps used.
- ``syn1m.exact`` / ``syn1m.default`` / ``syn1m.given_rule``: Syn1M
  (``explorer.data.load("syn4d", n_samples=10**6)``), ``SpectralClustering(4,
  metric="gaussian", sigma=0.01, threshold_sqdist=0.0008, mode="exact")``, the default
  ``SpectralClustering(4)`` and the given rule with ``mode="auto"`` (the mode it took
  and why recorded), whole fits on the device array.
- ``app.moons1000`` / ``app.digits1797`` / ``app.moons5000``: default fits at the app's
  sizes (the last: the issue's 5,000 2-D points).
- ``e2e.syn5m`` / ``e2e.mnist60k`` / ``e2e.mnist240k``: the issue's other end-to-end
  shapes, Syn5M (syn4d, 5·10⁶, σ = 0.01, threshold_sqdist = 0.0004) and the MNIST
  shapes (infinite digits, 784-D, cosine s > 0.8), each ``.exact`` with the paper's rule
  and ``.default`` (``SpectralClustering(k)``), whole fits on the device array.
- ``knn.digits60k`` / ``knn.digits240k``: the kNN graph (k = 10, ``build_graph(...,
  graph="knn")``) of 60,000 / 240,000 infinite digits (784-D), uniform weights and
  (``.local``) self-tuning σ, with the build's timings and the rows its search decided
  again; the search alone on each tensor-core tile (``.search_fp16``,
  ``.search_tf32``: ``kernels.knn.knn_gemm(..., product=...)``, with its stages);
  beside them ``peer_fp32`` / ``peer_tf32``: PyTorch ``X[i:i+8192] @ X.T`` then
  ``topk`` (lists only, no graph), TF32 off and on.
- ``firstfit.digits100k``: the default ``SpectralClustering(10)`` of 10⁵ × 784 digits as
  the first fit of a fresh process: ``.cold`` on an empty kernel cache (a new
  machine), ``.after_warmup`` after ``spectral-explorer warmup --clusters 10`` filled
  another empty cache (``.warmup_command``: its seconds), ``.warm`` the process's
  second fit. One run each (a fresh process per measurement).

``--compare PATH`` reads an earlier result and lists (``comparison.slower``, and on
stdout) every stage present in both whose median is more than 10 % above the earlier
one; a stage that failed in this run is listed too.

Usage::

    python benchmarks/gpu_e2e.py --out /tmp/out [--repeats 5] [--compare results/gpu/gpu-e2e.json]
    python benchmarks/gpu_e2e.py --only kmeans          # stages whose name starts so
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, device_name, environment_info, plain, summary, time_gpu  # noqa: E402

#: A stage more than this much slower than in the compared run is named.
SLOWER = 1.10


def blobs(n, d, k, seed):
    """n rows of k unit Gaussian blobs with centres uniform in ±1 (float32): clusters
    that overlap, so Lloyd takes dozens of iterations as on an embedding (scikit-learn
    takes 91 at 60,000 × 10, k = 10; separated blobs stop after 2)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-1, 1, size=(k, d))
    return (centres[rng.integers(k, size=n)] + rng.standard_normal((n, d))).astype(np.float32)


def _torch():
    try:
        import torch

        return torch
    except ImportError:
        return None


def peer_lloyd(Xc, starts, n_iter, block=1 << 18):
    """A plain float32 Lloyd from each of `starts` (S × k × d) for ``n_iter[s]``
    iterations (an int: the same for all), the restarts one after the other; PyTorch
    where installed, else CuPy. Returns the last restart's centres (the work is what
    is timed)."""
    import cupy

    torch = _torch()
    n = Xc.shape[0]
    iters = [n_iter] * starts.shape[0] if isinstance(n_iter, int) else list(n_iter)
    if torch is not None:
        X = torch.from_dlpack(Xc)
        x_sq = (X * X).sum(1)
        C0 = torch.from_dlpack(cupy.ascontiguousarray(starts, dtype=cupy.float32))
        for s in range(C0.shape[0]):
            C = C0[s].clone()
            k = C.shape[0]
            for _ in range(iters[s]):
                labels = torch.empty(n, dtype=torch.int64, device=X.device)
                c_sq = (C * C).sum(1)
                for r in range(0, n, block):
                    D = x_sq[r : r + block, None] - 2.0 * (X[r : r + block] @ C.T) + c_sq[None]
                    labels[r : r + block] = D.argmin(1)
                sums = torch.zeros_like(C).index_add_(0, labels, X)
                counts = torch.bincount(labels, minlength=k).to(C.dtype)
                C = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], C)
        return C
    x_sq = (Xc * Xc).sum(1)
    for s in range(starts.shape[0]):
        C = starts[s].astype(cupy.float32)
        k = C.shape[0]
        for _ in range(iters[s]):
            labels = cupy.empty(n, dtype=cupy.int64)
            c_sq = (C * C).sum(1)
            for r in range(0, n, block):
                D = x_sq[r : r + block, None] - 2.0 * (Xc[r : r + block] @ C.T) + c_sq[None]
                labels[r : r + block] = D.argmin(1)
            sums = cupy.zeros_like(C)
            cupy.add.at(sums, labels, Xc)
            counts = cupy.bincount(labels, minlength=k).astype(C.dtype)
            C = cupy.where(counts[:, None] > 0, sums / cupy.maximum(counts, 1)[:, None], C)
    return C


def kmeans_restarts(stages, name, X, k, n_init, repeats):
    """Our whole fit, the seeding alone, and the peer from the same starts."""
    import cupy

    from explorer import kmeans as km

    Xg = cupy.asarray(X)
    fit = km.KMeans(k, n_init=n_init, random_state=0).fit(Xg)
    stages[name] = {**summary(time_gpu(lambda: km.KMeans(k, n_init=n_init, random_state=0)
                                       .fit(Xg), repeats=repeats)),
                    "n": X.shape[0], "d": X.shape[1], "k": k, "n_init": n_init,
                    "n_iter_kept": fit.n_iter_, "inertia": fit.inertia_}
    Xc, _, _ = km.centre(Xg)
    x_sq = km.row_sq_norms(Xc, cupy)

    def seeding():
        return km._initial_centers_starts(Xc, x_sq, k, "k-means++", n_init,
                                          np.random.RandomState(0), cupy, None)

    stages[name + ".seeding"] = summary(time_gpu(seeding, repeats=repeats))
    starts = seeding()
    tol_abs = km.variance_tolerance(1e-4, float(x_sq.sum(dtype=cupy.float64)),
                                    cupy.asnumpy(Xc.sum(axis=0, dtype=cupy.float64)),
                                    *Xc.shape)
    record = {}
    km._lloyd_starts(Xc, x_sq, starts, 300, tol_abs, cupy, record=record)
    lloyd = summary(time_gpu(lambda: km._lloyd_starts(Xc, x_sq, starts, 300, tol_abs, cupy),
                             repeats=repeats))
    stages[name + ".lloyd"] = {**lloyd, "starts": "greedy k-means++ (random_state 0)",
                               "n_iter": record["n_iter"], "steps": record["steps"],
                               "per_step": lloyd["median"] / record["steps"]}
    stages[name + ".peer"] = {
        **summary(time_gpu(lambda: peer_lloyd(Xc, starts, record["n_iter"]),
                           repeats=repeats)),
        "what": ("torch" if _torch() else "cupy") + " float32 Lloyd from the starts of "
                "...lloyd, one after the other, each for its iterations there"}


def gemm_floor(Xc, C, tf32, block=1 << 18):
    """Seconds function of ``X Cᵀ`` over all rows in blocks (float32 or TF32)."""
    import cupy

    torch = _torch()
    n = Xc.shape[0]
    if torch is None:
        if tf32:
            return None
        out = cupy.empty((block, C.shape[0]), dtype=cupy.float32)
        Ct = cupy.ascontiguousarray(C.T)

        def run():
            for r in range(0, n, block):
                m = min(block, n - r)
                cupy.matmul(Xc[r : r + m], Ct, out=out[:m])
        return run
    X = torch.from_dlpack(Xc)
    Ct = torch.from_dlpack(cupy.ascontiguousarray(C)).T
    out = torch.empty((block, C.shape[0]), dtype=torch.float32, device=X.device)

    def run():
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            for r in range(0, n, block):
                m = min(block, n - r)
                torch.matmul(X[r : r + m], Ct, out=out[:m])
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    return run


def kmeans_large(stages, repeats, n=6_000_000, d=128, k=1024):
    import cupy

    from explorer import kmeans as km

    X = cupy.random.RandomState(0).standard_normal((n, d), dtype=cupy.float32)
    C0 = X[cupy.asarray(np.random.default_rng(0).choice(n, k, replace=False))]

    def fit(iters):
        return km.KMeans(k, init=C0, n_init=1, max_iter=iters, tol=0.0).fit(X)

    one = summary(time_gpu(lambda: fit(1), repeats=repeats))
    four = summary(time_gpu(lambda: fit(4), repeats=repeats))
    per_iter = (four["median"] - one["median"]) / 3
    Xc, _, _ = km.centre(X)
    C = (C0 - X.mean(axis=0)).astype(cupy.float32)
    fp32 = summary(time_gpu(gemm_floor(Xc, C, False), repeats=repeats))
    tf32_fn = gemm_floor(Xc, C, True)
    stages["kmeans.6m_128d_k1024.iteration"] = {
        "median": per_iter, "fit_1_iteration": one, "fit_4_iterations": four,
        "n": n, "d": d, "k": k,
        "per_gemm_floor_fp32": per_iter / fp32["median"],
        "target": "<= 1.3 x the float32 GEMM floor"}
    stages["kmeans.6m_128d_k1024.gemm_fp32"] = fp32
    if tf32_fn is not None:
        stages["kmeans.6m_128d_k1024.gemm_tf32"] = summary(time_gpu(tf32_fn, repeats=repeats))
    # Where a step's time goes: the checked TF32 assignment and the float64 sums alone.
    from explorer.kernels.kmeans import cluster_sums, nearest_checked

    x_sq = km.row_sq_norms(Xc, cupy)
    neg2c = cupy.ascontiguousarray(-2.0 * C)
    c_sq = (C * C).sum(axis=1)
    labels = cupy.full(n, -1, dtype=cupy.int32)
    mind = cupy.empty(n, dtype=cupy.float32)
    flagged = nearest_checked(Xc, x_sq, neg2c, c_sq, labels, mind)
    stages["kmeans.6m_128d_k1024.assign_checked"] = {
        **summary(time_gpu(lambda: nearest_checked(Xc, x_sq, neg2c, c_sq, labels, mind),
                           repeats=repeats)), "rows_rechecked": flagged}
    stages["kmeans.6m_128d_k1024.sums"] = summary(time_gpu(lambda: cluster_sums(Xc, labels, k),
                                                           repeats=repeats))
    split_parts(stages, Xc, x_sq, neg2c, c_sq, labels, mind, repeats)
    stages["kmeans.6m_128d_k1024.iteration"]["products"] = step_products(Xc, x_sq, C)
    peer = summary(time_gpu(lambda: peer_lloyd(Xc, C[None], 3), repeats=repeats))
    stages["kmeans.6m_128d_k1024.peer_iteration"] = {
        "median": peer["median"] / 3, "three_iterations": peer}


def split_parts(stages, Xc, x_sq, neg2c, c_sq, labels, mind, repeats, block=1 << 18):
    """The split product's stages of ``kmeans.6m_128d_k1024`` (see the module)."""
    import cupy
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas
    from explorer.kernels._tf32 import tf32_product
    from explorer.kernels.kmeans import nearest_checked, split_centres, split_rows

    name = "kmeans.6m_128d_k1024"
    n, d = Xc.shape
    k = neg2c.shape[0]
    Xs = cupy.empty((n, 3 * d), dtype=cupy.float32)
    stages[name + ".split_prepare"] = summary(time_gpu(lambda: split_rows(Xc, Xs),
                                                       repeats=repeats))
    Cs = split_centres(neg2c)
    out = cupy.empty((block, k), dtype=cupy.float32)

    def gemm(rows, centres):
        def run():
            handle = device.get_cublas_handle()
            mode = cublas.getPointerMode(handle)
            cublas.setPointerMode(handle, 0)
            try:
                for r in range(0, n, block):
                    m = min(block, n - r)
                    tf32_product(handle, cublas, centres, rows[r : r + m], out[:m])
            finally:
                cublas.setPointerMode(handle, mode)
        return run

    stages[name + ".gemm_split"] = summary(time_gpu(gemm(Xs, Cs), repeats=repeats))
    stages[name + ".gemm_tf32_ours"] = summary(time_gpu(gemm(Xc, neg2c), repeats=repeats))
    counts = {}
    nearest_checked(Xc, x_sq, neg2c, c_sq, labels, mind, split=Xs, counts=counts)
    stages[name + ".assign_split"] = {
        **summary(time_gpu(lambda: nearest_checked(Xc, x_sq, neg2c, c_sq, labels, mind,
                                                   split=Xs), repeats=repeats)),
        "rows_rechecked": counts["rechecked"],
        "rows_within_tf32_bound": counts["within_tf32"]}


def step_products(Xc, x_sq, C, steps=4):
    """The checked assignment's product at each of `steps` DeviceStarts steps."""
    import cupy
    from explorer.kernels.kmeans import DeviceStarts

    runner = DeviceStarts(Xc, x_sq, cupy.asarray(C, dtype=cupy.float64)[None])
    used = []
    for _ in range(steps):
        used.append(runner.product)
        runner.step([0])
    return used


def spectral(stages, repeats):
    import cupy
    from explorer.data import load

    from explorer import SpectralClustering

    X = cupy.asarray(load("syn4d", n_samples=10**6, random_state=0).X)
    given = {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0008}
    for label, kw in (("syn1m.exact", {**given, "mode": "exact"}), ("syn1m.default", {}),
                      ("syn1m.given_rule", given)):
        times, sc = timed_fits(lambda kw=kw: SpectralClustering(4, random_state=0, **kw).fit(X),
                               repeats)
        stages[label] = {**summary(times), "keywords": kw, **fit_record(sc)}
    for label, name, n in (("app.moons1000", "moons", 1000), ("app.digits1797", "digits", 1797),
                           ("app.moons5000", "moons", 5000)):
        ds = load(name, n_samples=n, random_state=0)
        k = int(len(np.unique(ds.y)))
        Xg = cupy.asarray(ds.X)
        times, sc = timed_fits(lambda Xg=Xg, k=k: SpectralClustering(
            k, random_state=0).fit(Xg), repeats)
        stages[label] = {**summary(times), "k": k, **fit_record(sc)}


def timed_fits(fit, repeats):
    """:func:`_common.time_gpu` of `fit`, and the estimator of its last timed call (so
    that the stage timings recorded are a warm fit's, not the compiling one's)."""
    last = [None]  # only the latest estimator held: each keeps its graph on the device

    def run():
        last[0] = fit()

    times = time_gpu(run, repeats=repeats)
    return times, last[0]


def fit_record(sc) -> dict:
    """The mode a fit took and why, its stage timings and its graph build's."""
    graph = getattr(sc, "graph_", None)
    return {"mode": sc.plan_.mode, "mode_why": sc.plan_.mode_why,
            "timings": dict(getattr(sc, "timings_", {})),
            "graph_timings": dict(getattr(graph, "timings", None) or {})}


def end_to_end(stages, repeats, label, data, n, k, given):
    """One of the issue's end-to-end shapes: `SpectralClustering(k)` with the paper's rule
    (``mode="exact"``) and with the defaults, each fit timed whole."""
    import cupy
    from explorer.data import load

    from explorer import SpectralClustering

    X = cupy.asarray(np.ascontiguousarray(load(data, n_samples=n, random_state=0).X,
                                          dtype=np.float32))
    for name, kw in ((f"{label}.exact", {**given, "mode": "exact"}), (f"{label}.default", {})):
        times, sc = timed_fits(lambda kw=kw: SpectralClustering(k, random_state=0, **kw).fit(X),
                               repeats)
        stages[name] = {**summary(times), "keywords": kw, **fit_record(sc)}


def knn(stages, repeats, n, k=10, block=8192):
    """The kNN graphs of n infinite digits: uniform weights (``knn.digits60k`` since the
    first runs) and self-tuning σ (``.local``), the build's own timings and the rows the
    search decided again beside them, and the PyTorch peers (lists only)."""
    import cupy
    from explorer.data import load

    from explorer.graph import EdgeRule, build_graph

    name = f"knn.digits{n // 1000}k"
    X = cupy.asarray(np.ascontiguousarray(load("infinite-digits", n_samples=n,
                                               random_state=0).X, dtype=np.float32))
    for label, rule in (("", EdgeRule.from_args("uniform", graph="knn", n_neighbors=k)),
                        (".local", EdgeRule.from_args("gaussian", "local", graph="knn",
                                                      n_neighbors=k))):
        g = build_graph(X, rule, backend="gpu")
        stages[name + label] = {
            **summary(time_gpu(lambda rule=rule: build_graph(X, rule, backend="gpu"),
                               repeats=repeats)),
            "method": getattr(g, "method", None), "k": k, "n": n, "d": X.shape[1],
            "timings": dict(getattr(g, "timings", {}) or {}),
            "info": dict(getattr(g, "info", {}) or {})}
    from explorer.kernels import StageTimer
    from explorer.kernels.knn import knn_gemm

    for product in ("fp16", "tf32"):  # the search alone, on each tile
        timer = StageTimer()
        info = knn_gemm(X, k, False, product=product, timer=timer)[2]
        stages[f"{name}.search_{product}"] = {
            **summary(time_gpu(lambda p=product: knn_gemm(X, k, False, product=p),
                               repeats=repeats)),
            "info": {**info, "stages": timer.seconds()}}
    torch = _torch()
    if torch is None:
        return
    Xt = torch.from_dlpack(X)
    sq = (Xt * Xt).sum(1)

    def peer(tf32):
        def run():
            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                for r in range(0, n, block):
                    D = sq[r : r + block, None] + sq[None, :] - 2.0 * (Xt[r : r + block] @ Xt.T)
                    m = D.shape[0]
                    D[torch.arange(m), torch.arange(r, r + m)] = float("inf")
                    torch.topk(D, k, dim=1, largest=False)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old
        return run

    stages[name + ".peer_fp32"] = summary(time_gpu(peer(False), repeats=repeats))
    stages[name + ".peer_tf32"] = summary(time_gpu(peer(True), repeats=repeats))


#: The first fit in a fresh process (``firstfit.*``): the data made, then one default fit
#: timed, then a second one (the warm fit), as JSON on the last line.
FIRST_FIT = """
import json, sys, time
import cupy, numpy as np
from explorer import SpectralClustering
from explorer.data import load
ds = load("infinite-digits", n_samples={n}, random_state=0)
X = cupy.asarray(np.ascontiguousarray(ds.X, dtype=np.float32))
cupy.cuda.get_current_stream().synchronize()
runs = []
for _ in range(2):
    t = time.perf_counter()
    SpectralClustering(10, backend="gpu", random_state=0).fit(X)
    cupy.cuda.get_current_stream().synchronize()
    runs.append(time.perf_counter() - t)
print(json.dumps(runs))
"""


def first_fit(stages, n=100_000):
    """The default fit of n × 784 digits in a fresh process on an empty kernel cache
    (``firstfit.digits100k.cold``, as on a new machine), the warm-up
    (``spectral-explorer warmup --clusters 10``) into another empty cache and the first
    fit in a fresh process after it (``...after_warmup``, the target: <= 2 s), and the
    second fit of a process (``...warm``)."""
    import os
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    name = f"firstfit.digits{n // 1000}k"

    def child(argv, cache):
        env = {**os.environ, "CUPY_CACHE_DIR": cache,
               "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        t = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[1:3]} exited {done.returncode}: {done.stderr[-2000:]}")
        return time.perf_counter() - t, done.stdout

    fit = [sys.executable, "-c", FIRST_FIT.format(n=n)]
    with tempfile.TemporaryDirectory() as cold, tempfile.TemporaryDirectory() as warmed:
        wall, out = child(fit, cold)
        cold_runs = json.loads(out.strip().splitlines()[-1])
        stages[name + ".cold"] = {**summary([cold_runs[0]]), "process_seconds": wall}
        stages[name + ".warm"] = summary([cold_runs[1]])
        wall, _ = child([sys.executable, "-m", "explorer.cli", "warmup", "--quiet",
                         "--clusters", "10"], warmed)
        stages[name + ".warmup_command"] = summary([wall])
        wall, out = child(fit, warmed)
        runs = json.loads(out.strip().splitlines()[-1])
        stages[name + ".after_warmup"] = {**summary([runs[0]]), "process_seconds": wall,
                                          "target": "<= 2 s"}


def compare(stages, previous, slower=SLOWER):
    """Stages of `previous` (an earlier payload) more than `slower` times slower now.

    Returns
    -------
    dict
        ``slower``: [{stage, before, now, ratio}] (a stage that failed now: ratio None),
        ``compared``: the number of stages in both, ``devices``: (before, now).
    """
    before = previous.get("stages", {})
    out = []
    compared = 0
    for name, old in before.items():
        if not isinstance(old, dict) or old.get("median") is None or name not in stages:
            continue
        new = stages[name]
        compared += 1
        if new.get("median") is None:
            out.append({"stage": name, "before": old["median"], "now": None, "ratio": None,
                        "error": new.get("error")})
            continue
        ratio = new["median"] / old["median"] if old["median"] > 0 else float("inf")
        if ratio > slower:
            out.append({"stage": name, "before": old["median"], "now": new["median"],
                        "ratio": ratio})
    return {"slower": out, "compared": compared, "threshold": slower}


def _release():
    """Give the memory pools' free blocks back between sections."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    torch = _torch()
    if torch is not None:
        torch.cuda.empty_cache()


SECTIONS = {
    "kmeans.emb60k": lambda st, r: kmeans_restarts(st, "kmeans.emb60k",
                                                   blobs(60_000, 10, 10, 0), 10, 10, r),
    "kmeans.1m_8d": lambda st, r: kmeans_restarts(st, "kmeans.1m_8d",
                                                  blobs(1_000_000, 8, 8, 1), 8, 10, r),
    "kmeans.6m_128d_k1024": lambda st, r: kmeans_large(st, max(3, r - 2)),  # ~7 GB
    "syn1m": lambda st, r: spectral(st, max(3, r - 2)),
    "e2e.syn5m": lambda st, r: end_to_end(st, max(3, r - 2), "e2e.syn5m", "syn4d", 5_000_000,
                                          4, {"metric": "gaussian", "sigma": 0.01,
                                              "threshold_sqdist": 0.0004}),
    "e2e.mnist60k": lambda st, r: end_to_end(st, r, "e2e.mnist60k", "infinite-digits",
                                             60_000, 10, {"metric": "cosine",
                                                          "threshold_sim": 0.8}),
    "e2e.mnist240k": lambda st, r: end_to_end(st, 3, "e2e.mnist240k", "infinite-digits",
                                              240_000, 10, {"metric": "cosine",
                                                            "threshold_sim": 0.8}),
    "knn.digits60k": lambda st, r: knn(st, r, 60_000),
    "knn.digits240k": lambda st, r: knn(st, r, 240_000),
    "firstfit": lambda st, r: first_fit(st),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--compare", type=Path, default=None, metavar="PATH")
    p.add_argument("--only", nargs="*", default=None, metavar="PREFIX")
    args = p.parse_args(argv)
    payload = {"benchmark": "gpu-e2e", "environment": environment_info("gpu"),
               "argv": sys.argv[1:] if argv is None else argv, "repeats": args.repeats,
               "stages": {}, "errors": {}}
    payload["device"] = device_name(payload["environment"])
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "gpu-e2e.json"
    t0 = time.perf_counter()
    for section, run in SECTIONS.items():
        if args.only and not any(section.startswith(o) for o in args.only):
            continue
        t = time.perf_counter()
        try:
            run(payload["stages"], args.repeats)
        except Exception as exc:  # a broken stage is recorded, the others still run
            payload["errors"][section] = "".join(traceback.format_exception_only(exc)).strip()
            payload["stages"].setdefault(section, {"median": None,
                                                   "error": payload["errors"][section]})
            traceback.print_exc()
        _release()
        print(f"{section}: {time.perf_counter() - t:.1f} s", flush=True)
        for name, rec in payload["stages"].items():
            if name.startswith(section):
                print(f"  {name}: {rec.get('median')}", flush=True)
        payload["wall_seconds"] = time.perf_counter() - t0
        path.write_text(json.dumps(plain(payload), indent=1, allow_nan=False) + "\n")
    if args.compare is not None:
        previous = json.loads(Path(args.compare).read_text())
        payload["comparison"] = {"against": str(args.compare),
                                 "device_before": previous.get("device"),
                                 **compare(payload["stages"], previous)}
        for row in payload["comparison"]["slower"]:
            print(f"SLOWER {row['stage']}: {row['before']} -> {row['now']}", flush=True)
        path.write_text(json.dumps(plain(payload), indent=1, allow_nan=False) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
