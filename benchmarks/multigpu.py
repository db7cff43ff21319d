"""Strong scaling of the distributed mode over several GPUs (issues 20 and 33).

One run on one machine, a ``dask_cuda.LocalCUDACluster`` of w workers (one per GPU)
for each w in ``--workers`` (those the machine has), against the one-process path on
one GPU in the same run (variants ``single-gpu``, ``dask-1``, ``dask-2``, ``dask-4``):

- **k-means** at 6·10⁶ × 128, k = 1024 and 4096: blobs of float32 generated on the
  workers' GPUs, one row block per worker. Every variant starts from the same k
  centres (an array ``init``: seeding is not timed) with ``tol=0``. The Lloyd loop
  runs on the workers (:mod:`explorer.distributed._resident`: one task per worker,
  the float64 partial sums all-reduced by NCCL each iteration).
  **Per iteration** is the marginal cost: (t(I₂) − t(I₁)) / (n_iter₂ − n_iter₁), the
  medians of whole fits run for I₁ and I₂ iterations, so the per-fit costs (placing
  the blocks, centring, NCCL set-up, the final inertia) cancel; each fit's own
  figures are kept too. Those fixed costs vary from fit to fit on a cluster (NCCL's
  set-up, the tasks' start), so the loop's own figure is kept beside it:
  ``step_median``, the median seconds of one iteration on the workers (the slowest
  worker's each time; the workers first wait for each other, ``start_wait``) and
  ``speedup_in_loop`` against the one-process marginal. The **communication share**
  is read on the workers: the seconds inside the all-reduce (after a device sync, so
  waiting for the slower worker counts as communication) over the Lloyd loop's seconds
  (``allreduce_share``); ``communication_share`` is issue 20's figure,
  1 − (one-process time per iteration on the n/w rows a worker holds) / (time per
  iteration). **Memory per GPU**: device memory in use on each worker after the fit
  (``cudaMemGetInfo``, the CuPy pool's cache included) and the pool's bytes in use.
- **Representatives mode** on data larger than one GPU (``--reps-n`` × ``--reps-d``
  float32, default 1.2·10⁹ × 32 ≈ 154 GB, on the ``--reps-workers`` GPUs):
  ``SpectralClustering(mode="representatives")`` of blobs generated on the workers,
  the whole fit timed once, the ARI against the blobs computed on the workers
  (contingency tables per block).
- **SpectralClustering** on ``syn4d`` (only with ``--fit-n`` / ``--lobpcg-n``): the
  whole exact fit on the Dask array against the one-process fit on one GPU, same data
  and parameters. With ``--fit-n`` (``eigen_solver="auto"``) the eigensolver is the
  worker-resident Chebyshev iteration (:mod:`explorer.distributed._exact`: rows in the
  points' Morton order per GPU, halo rows by NCCL send/recv, Gram matrices
  all-reduced); each variant records its stages (graph, embedding, k-means), the
  solver's set-up, solve, halo-exchange and all-reduce seconds (slowest rank), the
  halo rows and bytes per product, the communication share and the solver's reason
  (``seconds_by_stage``, ``solver_why``).

Timings are wall clock (the distributed path spans processes, so CUDA events cannot
time it), after a warm-up, medians of ``--repeats``.

NVLink multicast stays off: NCCL_NVLS_ENABLE=0 is set (unless given) before any
cluster starts, so every worker inherits it.

Usage (on a machine with several GPUs; the wheels of dask, distributed and dask_cuda
travel with the tree)::

    python benchmarks/multigpu.py                          # -> results/dask/multigpu.json
    python benchmarks/multigpu.py --quick                  # small shapes, a smoke run
    python benchmarks/multigpu.py --reps-n 600000000       # a smaller representatives fit
    python benchmarks/multigpu.py --workers 1 2 4 --fit-n 10000000 --skip-kmeans \
        --reps-n 0 --name multigpu_exact                   # the exact fit only

Sections run k = 1024 first, then the representatives fit, then the other k; a section
that fails is recorded with its error and the run goes on; none starts after
``--budget-s`` seconds (recorded as skipped), so a run fits its time slot.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment_info, write_result  # noqa: E402

from explorer.graph import dataset_params  # noqa: E402

for _var, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_var, _value)


def blob_block(index, rows, d, k, seed):
    """Rows of a blob mixture on this worker's GPU: k centres drawn from one stream
    (the same on every worker), each row a centre plus unit noise from stream
    ``(seed, index)``."""
    import cupy

    centres = cupy.asarray(np.random.default_rng(seed).normal(0.0, 6.0, (k, d)), cupy.float32)
    rng = cupy.random.default_rng([seed, index])
    labels = rng.integers(0, k, rows)
    return centres[labels] + rng.standard_normal((rows, d), dtype=cupy.float32)


def timed(fn, repeats):
    """Warm-up, then the median of `repeats` wall-clock runs (the function syncs)."""
    fn()
    runs, last = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        last = fn()
        runs.append(time.perf_counter() - t0)
    return {"median": statistics.median(runs), "runs": runs}, last


def cluster_for(workers):
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    # No spilling (device_memory_limit=0, memory_limit=0): the blocks stay on the GPUs.
    # Dask counts a block and the input stage's unconverted key (the same CuPy array)
    # twice, so the default limits would spill the representatives fit's data to host.
    cluster = LocalCUDACluster(n_workers=workers, threads_per_worker=1,
                               CUDA_VISIBLE_DEVICES=",".join(map(str, range(workers))),
                               dashboard_address=":0", device_memory_limit=0,
                               memory_limit=0)
    return cluster, Client(cluster)


def pinned_array(client, blocks, rows, d, dtype):
    """A Dask array of futures, one row block on each worker in turn."""
    import cupy
    import dask.array as da

    addresses = sorted(client.scheduler_info(n_workers=-1)["workers"])
    futures = [client.submit(*b, workers=[addresses[i % len(addresses)]], pure=False)
               for i, b in enumerate(blocks)]
    parts = [da.from_delayed(f, (r, d), dtype=dtype, meta=cupy.empty((0, d), dtype))
             for f, r in zip(futures, rows, strict=True)]
    return da.concatenate(parts, axis=0), futures


def gpu_memory():
    """Device memory of this process's GPU: bytes in use (``cudaMemGetInfo``) and held by
    the CuPy pool, in GB."""
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    pool = cupy.get_default_memory_pool()
    return {"device_used_gb": (total - free) / 1e9, "pool_used_gb": pool.used_bytes() / 1e9,
            "pool_held_gb": pool.total_bytes() / 1e9, "device_total_gb": total / 1e9}


def free_pool():
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


def marginal(short, long):
    """Per-iteration time from fits of two lengths (medians and their n_iter); the
    longer fit's time per iteration when both stopped at the same iteration."""
    di = long["n_iter"] - short["n_iter"]
    if di > 0:
        return (long["median"] - short["median"]) / di
    return long["median"] / long["n_iter"]


def kmeans_scaling(shape, workers_list, iterations, repeats):
    import cupy
    from distributed import wait

    from explorer import KMeans
    from explorer.distributed import kmeans_fit

    n, d, k = shape
    seed = 0
    init = np.random.default_rng(1).normal(0.0, 6.0, (k, d))
    sync = cupy.cuda.Device().synchronize
    lengths = (iterations, 3 * iterations)
    out = {"n": n, "d": d, "k": k, "iterations": list(lengths), "variants": {}}

    def single(rows):
        X = cupy.concatenate([blob_block(i, r, d, k, seed)
                              for i, r in enumerate(split(rows, max(workers_list)))])
        fits = {}
        for it in lengths:
            km = KMeans(k, init=init, n_init=1, max_iter=it, tol=0.0, random_state=0)

            def fit(km=km):
                km.fit(X)
                sync()
                return km
            t, km = timed(fit, repeats)
            fits[it] = {**t, "n_iter": int(km.n_iter_)}
        memory = gpu_memory()
        X = None  # noqa: F841  (free the device copy before the next variant)
        free_pool()
        short, long = fits[lengths[0]], fits[lengths[1]]
        return {"per_iteration": marginal(short, long), "fits": fits, "memory_gb": memory,
                "median": long["median"], "n_iter": long["n_iter"]}

    # One-process times on n rows and on each worker's share, for issue 20's share.
    base = {w: single(-(-n // w)) for w in sorted({1, *workers_list})}
    out["variants"]["single-gpu"] = {**base[1], "gpus": 1}
    print(f"k-means {n}x{d} k={k}: one process {base[1]['per_iteration'] * 1e3:.1f} "
          "ms/iteration", flush=True)
    for w in workers_list:
        cluster, client = cluster_for(w)
        try:
            rows = split(n, w)
            Xd, futures = pinned_array(
                client, [(blob_block, i, r, d, k, seed) for i, r in enumerate(rows)],
                rows, d, np.float32)
            wait(futures)
            fits, last = {}, None
            for it in lengths:
                def fit(Xd=Xd, client=client, it=it):
                    return kmeans_fit(Xd, k, init=init, n_init=1, max_iter=it, tol=0.0,
                                      client=client)
                t, last = timed(fit, repeats)
                fits[it] = {**t, "n_iter": int(last.n_iter), "timings": last.timings}
            memory = client.run(gpu_memory)
            per_iter = marginal(fits[lengths[0]], fits[lengths[1]])
            tm = last.timings
            loop = tm.get("lloyd_compute", 0.0) + tm.get("lloyd_allreduce", 0.0)
            out["variants"][f"dask-{w}"] = {
                "gpus": w, "per_iteration": per_iter, "fits": fits, "lloyd": last.lloyd,
                "median": fits[lengths[1]]["median"], "n_iter": fits[lengths[1]]["n_iter"],
                "loop_per_iteration": tm["lloyd"] / max(1, tm.get("lloyd_iterations",
                                                                   last.n_iter)),
                "step_median": tm.get("lloyd_step_median"),
                "start_wait": tm.get("lloyd_start_wait"),
                "speedup_in_loop": (base[1]["per_iteration"] / tm["lloyd_step_median"]
                                    if tm.get("lloyd_step_median") else None),
                "allreduce_share": tm.get("lloyd_allreduce", 0.0) / loop if loop else None,
                "allreduce_per_iteration": tm.get("lloyd_allreduce", 0.0)
                / max(1, tm.get("lloyd_iterations", last.n_iter)),
                "single_gpu_per_iteration_on_one_share": base[w]["per_iteration"],
                "communication_share": max(0.0, 1.0 - base[w]["per_iteration"] / per_iter),
                "speedup_vs_single_gpu": base[1]["per_iteration"] / per_iter,
                "memory_gb": dict(sorted(memory.items())),
            }
            v = out["variants"][f"dask-{w}"]
            step = v["step_median"] or float("nan")
            print(f"k-means {n}x{d} k={k}: {w} GPU(s) {per_iter * 1e3:.1f} ms/iteration "
                  f"(x{v['speedup_vs_single_gpu']:.2f} vs one process; all-reduce "
                  f"{v['allreduce_share']:.1%} of the loop); in the loop {step * 1e3:.1f} "
                  f"ms/iteration (x{v['speedup_in_loop'] or float('nan'):.2f}), start wait "
                  f"{(v['start_wait'] or 0) * 1e3:.0f} ms [{last.lloyd}]", flush=True)
            del Xd, futures
        finally:
            client.close()
            cluster.close()
    d1 = out["variants"].get("dask-1")
    for w in workers_list:
        v = out["variants"][f"dask-{w}"]
        if d1:
            v["speedup_vs_dask_1"] = d1["per_iteration"] / v["per_iteration"]
    return out


def reps_blob_block(index, rows, d, k, seed, piece=20_000_000):
    """Blob rows on this worker's GPU and their blob (int32), made `piece` rows at a time
    so that the temporaries stay small: ``(X float32, y int32)``."""
    import cupy

    centres = cupy.asarray(np.random.default_rng(seed).normal(0.0, 6.0, (k, d)), cupy.float32)
    rng = cupy.random.default_rng([seed, index])
    X = cupy.empty((rows, d), cupy.float32)
    y = cupy.empty(rows, cupy.int32)
    for a in range(0, rows, piece):
        b = min(rows, a + piece)
        y[a:b] = rng.integers(0, k, b - a)
        X[a:b] = rng.standard_normal((b - a, d), dtype=cupy.float32)
        X[a:b] += centres[y[a:b]]
    return X, y


def contingency(y, labels, k, n_labels):
    """Counts of (blob, label) pairs of a block (host int64, k × n_labels); label −1
    (unclustered) in the last column."""
    import cupy

    lab = cupy.where(labels < 0, n_labels, labels).astype(cupy.int64)
    flat = y.astype(cupy.int64) * (n_labels + 1) + lab
    return cupy.bincount(flat, minlength=k * (n_labels + 1)).reshape(k, -1).get()


def ari_from_contingency(table):
    """Adjusted Rand index from a contingency table (as scikit-learn's formula)."""
    from math import comb

    table = np.asarray(table, dtype=np.int64)
    n = int(table.sum())
    pairs = sum(comb(int(v), 2) for v in table.ravel())
    rows = sum(comb(int(v), 2) for v in table.sum(axis=1))
    cols = sum(comb(int(v), 2) for v in table.sum(axis=0))
    expected = rows * cols / comb(n, 2)
    top = (rows + cols) / 2
    return 1.0 if top == expected else (pairs - expected) / (top - expected)


def reps_scaling(n, d, k, workers, block_rows):
    """SpectralClustering(mode="representatives") of n × d blobs made on `workers` GPUs."""
    import cupy
    import dask.array as da
    from distributed import wait

    from explorer import SpectralClustering

    seed = 7
    cluster, client = cluster_for(workers)
    out = {"n": n, "d": d, "blobs": k, "gpus": workers, "bytes": n * d * 4,
           "block_rows": block_rows}
    try:
        addresses = sorted(client.scheduler_info(n_workers=-1)["workers"])
        rows = split(n, max(workers, -(-n // block_rows)))
        t0 = time.perf_counter()
        made = [client.submit(reps_blob_block, i, r, d, k, seed,
                              workers=[addresses[i * workers // len(rows)]], pure=False)
                for i, r in enumerate(rows)]
        xs = [client.submit(lambda t: t[0], f, pure=False) for f in made]
        ys = [client.submit(lambda t: t[1], f, pure=False) for f in made]
        wait(xs + ys)
        del made
        out["generate_s"] = time.perf_counter() - t0
        out["memory_after_generate_gb"] = dict(sorted(client.run(gpu_memory).items()))
        Xd = da.concatenate([da.from_delayed(f, (r, d), dtype=np.float32,
                                             meta=cupy.empty((0, d), cupy.float32))
                             for f, r in zip(xs, rows, strict=True)])
        params = dict(n_clusters=k, mode="representatives", random_state=0)
        t0 = time.perf_counter()
        sc = SpectralClustering(**params).fit(Xd)
        out["fit_s"] = time.perf_counter() - t0
        out["memory_after_fit_gb"] = dict(sorted(client.run(gpu_memory).items()))
        labels = sc.labels_
        t0 = time.perf_counter()
        label_blocks = client.compute(list(labels.to_delayed().ravel()))
        parts = [client.submit(contingency, yf, lf, k, sc.n_clusters_, pure=False)
                 for yf, lf in zip(ys, label_blocks, strict=True)]
        out["ari"] = ari_from_contingency(sum(client.gather(parts)))
        out["ari_s"] = time.perf_counter() - t0
        out.update(parameters=params, mode_why=sc.mode_why_, backend_why=sc.backend_reason_,
                   edge_rule=sc.edge_rule_.describe(), n_representatives=int(
                       sc.representatives_.shape[0]), eigen_solver=sc.eigen_solver_,
                   labels_kind=type(labels).__name__, stages=sc.timings_)
        print(f"representatives fit {n}x{d} ({n * d * 4 / 1e9:.0f} GB) on {workers} GPUs: "
              f"{out['fit_s']:.1f} s, ARI {out['ari']:.4f}; stages "
              f"{ {key: round(v, 2) for key, v in sc.timings_.items()} }", flush=True)
    finally:
        client.close()
        cluster.close()
    return out


def split(n, parts):
    """`n` rows in `parts` blocks as even as can be."""
    return [n // parts + (i < n % parts) for i in range(parts)]


def fit_scaling(n, solver, workers_list, repeats, data="syn4d"):
    import cupy
    from distributed import wait
    from sklearn.metrics import adjusted_rand_score

    from explorer import EdgeRule, SpectralClustering, datasets

    ds = datasets.load(data, n_samples=n, random_state=0)
    rule = EdgeRule.suggest(ds.X, suggestion=dataset_params(ds))
    classes = 1 if ds.y is None else len(np.unique(ds.y))
    truth = (lambda labels: None) if ds.y is None else (  # noqa: E731
        lambda labels: adjusted_rand_score(ds.y, labels))
    params = dict(n_clusters=classes if classes > 1 else 4, metric=rule.metric, sigma=rule.sigma,
                  threshold_sqdist=rule.threshold_sqdist, eigen_solver=solver, n_init=3,
                  random_state=0)
    sync = cupy.cuda.Device().synchronize
    out = {"dataset": data, "n": n, "d": int(ds.X.shape[1]), "edge_rule": rule.describe(),
           "parameters": params, "variants": {}}

    def host(labels):
        labels = labels.compute() if hasattr(labels, "compute") else labels
        return labels.get() if hasattr(labels, "get") else np.asarray(labels)

    X = cupy.asarray(ds.X)

    def single():
        sc = SpectralClustering(**params, backend="gpu").fit(X)
        sync()
        return sc
    t, sc = timed(single, repeats)
    ref = host(sc.labels_)
    out["variants"]["single-gpu"] = {**t, "stages": sc.timings_, "solver": sc.eigen_solver_,
                                     "solver_why": sc.eigen_solver_why_,
                                     "iterations": sc.eigen_iterations_,
                                     "ari": truth(ref)}
    X = None  # noqa: F841
    for w in workers_list:
        cluster, client = cluster_for(w)
        try:
            rows = split(n, w)
            starts = np.concatenate([[0], np.cumsum(rows)])
            Xd, futures = pinned_array(
                client, [(cupy.asarray, ds.X[a:b]) for a, b in zip(starts[:-1], starts[1:],
                                                                   strict=True)],
                rows, ds.X.shape[1], ds.X.dtype)
            wait(futures)

            def fit(Xd=Xd):
                return SpectralClustering(**params).fit(Xd)
            t, scd = timed(fit, repeats)
            labels = host(scd.labels_)
            out["variants"][f"dask-{w}"] = {
                **t, "stages": scd.timings_, "solver": scd.eigen_solver_,
                "solver_why": scd.eigen_solver_why_, **exact_summary(scd.timings_),
                "iterations": scd.eigen_iterations_,
                "ari": truth(labels),
                "ari_vs_single": adjusted_rand_score(ref, labels),
                "same_labels_as_single": bool((labels == ref).all()),
                "speedup_vs_single_gpu": out["variants"]["single-gpu"]["median"] / t["median"],
            }
            stages = {k: round(v, 3) for k, v in scd.timings_.items()}
            print(f"fit {data} {n} ({solver}): {w} GPU(s) {t['median']:.2f} s vs one process "
                  f"{out['variants']['single-gpu']['median']:.2f} s; stages {stages}",
                  flush=True)
        finally:
            client.close()
            cluster.close()
    return out


def exact_summary(timings):
    """The figures of the exact fit's stages (explorer.distributed._exact): graph build,
    embedding (the resident eigensolver's set-up, solve, halo exchange and all-reduce
    seconds, the slowest rank's), k-means, halo bytes per product, communication share."""
    keys = ("graph", "embedding", "kmeans", "resident.setup", "resident.solve",
            "resident.exchange", "resident.allreduce", "resident.gather",
            "resident.halo_rows", "resident.halo_bytes_per_product",
            "resident.communication_share", "resident.exchanges", "resident.ranks")
    return {"seconds_by_stage": {k: timings[k] for k in keys if k in timings}}


def plot(payload, path):
    """Speed-up against one GPU in one process, by number of GPUs: one line per
    k-means shape and per fit (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    top = 1
    for rows, label in [(payload["kmeans"], "k-means {n:.0e}×{d}, k={k}"),
                        (payload["fit"], "fit syn4d {n:.0e} ({solver})")]:
        for r in rows:
            if "variants" not in r:  # a section that failed or was skipped
                continue
            ws = sorted(int(v.split("-")[1]) for v in r["variants"] if v.startswith("dask-"))
            if not ws:
                continue
            top = max(top, ws[-1])
            sp = [r["variants"][f"dask-{w}"]["speedup_vs_single_gpu"] for w in ws]
            solver = r.get("parameters", {}).get("eigen_solver", "")
            ax.plot(ws, sp, marker="o", label=label.format(**r, solver=solver))
    ax.plot([1, top], [1, top], color="grey", linestyle=":", label="linear")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("GPUs (Dask workers)")
    ax.set_ylabel("speed-up vs one GPU, one process")
    ax.set_yscale("log")
    ax.set_xticks(range(1, top + 1))
    gpu = payload["environment"].get("gpu", {}).get("name", "GPU")
    ax.set_title(f"Distributed mode, strong scaling ({gpu})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("wrote", path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4],
                   help="cluster sizes (those above the machine's GPUs are skipped)")
    p.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    p.add_argument("--iterations", type=int, default=5,
                   help="I1; the per-iteration time compares fits of I1 and 3·I1 iterations")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--k", type=int, nargs="+", help="k-means cluster counts (default 1024 "
                   "4096)")
    p.add_argument("--kmeans-n", type=float, nargs="+", default=[6e6],
                   help="k-means rows (128 features each; default 6e6)")
    p.add_argument("--reps-n", type=float, default=1.2e9,
                   help="rows of the representatives-mode fit (0: skip it)")
    p.add_argument("--reps-d", type=int, default=32)
    p.add_argument("--reps-blobs", type=int, default=16)
    p.add_argument("--reps-workers", type=int, help="GPUs for it (default: all)")
    p.add_argument("--reps-block-rows", type=int, default=50_000_000)
    p.add_argument("--fit-n", type=int, nargs="+", default=[],
                   help="syn4d sizes for the exact whole fit with eigen_solver='auto'")
    p.add_argument("--fit-data", default="syn4d",
                   help="data set of the whole fits (uniform: one connected graph)")
    p.add_argument("--lobpcg-n", type=int, nargs="+", default=[],
                   help="syn4d sizes for the exact whole fit with LOBPCG forced")
    p.add_argument("--skip-kmeans", action="store_true")
    p.add_argument("--budget-s", type=float, default=420.0,
                   help="start no section after this many seconds (recorded as skipped)")
    p.add_argument("--name", default="multigpu")
    p.add_argument("--plot", help="also draw the speed-ups into this PNG (matplotlib)")
    args = p.parse_args(argv)

    import cupy

    gpus = cupy.cuda.runtime.getDeviceCount()
    workers = [w for w in args.workers if w <= gpus]
    if workers != args.workers:
        print(f"only {gpus} GPU(s): running workers {workers}", flush=True)
    if args.quick:
        shapes = [(400_000, 32, k) for k in (args.k or [64, 256])]
        reps_n = min(int(args.reps_n), 20_000_000)
    else:
        shapes = [(int(n), 128, k) for n in args.kmeans_n for k in (args.k or [1024, 4096])]
        reps_n = int(args.reps_n)
    if args.skip_kmeans:
        shapes = []
    payload = {"benchmark": "multigpu", "issue": 33, "environment": environment_info("gpu"),
               "gpus": gpus, "cluster": "dask_cuda.LocalCUDACluster, one worker per GPU, "
               "TCP for Dask, NCCL for the Lloyd loop's all-reduce",
               "timing": "wall clock (perf_counter), warm-up excluded, median of repeats; "
               "per_iteration: marginal cost between fits of I1 and 3·I1 iterations",
               "nccl_env": {v: os.environ.get(v) for v in ("NCCL_NVLS_ENABLE",)},
               "repeats": args.repeats, "kmeans": [], "representatives": None, "fit": []}
    t_start = time.perf_counter()

    def section(what, fn):
        """Run one section; its error or a skip (past --budget-s) is recorded, not fatal."""
        elapsed = time.perf_counter() - t_start
        if elapsed > args.budget_s:
            print(f"skipped {what}: {elapsed:.0f} s past the {args.budget_s} s budget",
                  flush=True)
            return {"skipped": f"time budget ({elapsed:.0f} s > {args.budget_s} s)"}
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001  (kept in the result, the run goes on)
            traceback.print_exc()
            return {"error": f"{type(exc).__name__}: {exc}"}

    # The headline first: k = 1024 on 2 GPUs, then the fit larger than one GPU.
    kmeans_runs = [(f"k-means {shape}", lambda shape=shape: kmeans_scaling(
        shape, workers, args.iterations, args.repeats)) for shape in shapes]
    for what, fn in kmeans_runs[:1]:
        payload["kmeans"].append(section(what, fn))
        write_result(args.name, payload)
    if reps_n:
        payload["representatives"] = section("representatives", lambda: reps_scaling(
            reps_n, args.reps_d, args.reps_blobs, min(gpus, args.reps_workers or gpus),
            args.reps_block_rows))
        write_result(args.name, payload)
    for what, fn in kmeans_runs[1:]:
        payload["kmeans"].append(section(what, fn))
        write_result(args.name, payload)
    for n, solver in [(n, "auto") for n in args.fit_n] + [(n, "lobpcg") for n in args.lobpcg_n]:
        payload["fit"].append(section(f"fit {n} {solver}", lambda n=n, solver=solver: fit_scaling(
            n, solver, workers, max(1, args.repeats - 1), args.fit_data)))
        write_result(args.name, payload)
    payload["elapsed_s"] = time.perf_counter() - t_start
    print("wrote", write_result(args.name, payload))
    if args.plot:
        plot(payload, args.plot)


if __name__ == "__main__":
    main()
