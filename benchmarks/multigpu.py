"""Strong scaling of the distributed mode over several GPUs (issue 20).

One run on one machine, a ``dask_cuda.LocalCUDACluster`` of w workers (one per GPU)
for each w in ``--workers``, against the one-process path on one GPU in the same run:

- **k-means** (paper 001's shapes): blobs of n × d float32 generated on the workers'
  GPUs, one row block per worker, k clusters. Every variant starts from the same k
  centres (an array ``init``, so seeding is not timed) and runs exactly
  ``--iterations`` Lloyd iterations (``tol=0``), so the time per iteration compares
  like with like. The single-process baseline is :class:`explorer.KMeans` on the same
  rows on GPU 0.
- **SpectralClustering** on ``syn4d`` (the data set's suggested edge rule, k = 4):
  the whole fit on the Dask array against the one-process fit, with the solver a user
  gets (``eigen_solver="auto"``: syn4d's graph has exactly k components, so the
  embedding is their indicator vectors, computed per row block on the workers, and no
  eigensolver iterates) and, at a smaller n, with LOBPCG forced (every product a round
  trip through the client). ``same_labels_as_single`` compares numbers: past 10⁵ rows
  the distributed k-means|| draws per block, so compare ``ari`` (1.0: same clusters).

Figures per variant: median wall-clock time of ``--repeats`` runs after a warm-up
(the distributed path spans processes, so CUDA events cannot time it), the speed-up
against one GPU in one process and against the one-worker cluster, and the
**communication share**: 1 − t_compute / t, with t_compute the one-process time on
the n/w rows one worker holds (the work a worker does if nothing else cost time).
The rest is the scheduler's round trips and the bytes through the client and the
workers' TCP links (no UCX on that machine). For the fit, each stage's time
(``timings_``) shows where the time goes.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and the rest are set in the
environment of that machine; this script starts no NCCL communicator).

Usage (on a machine with several GPUs; the wheels of dask, distributed and dask_cuda
travel with the tree)::

    python benchmarks/multigpu.py --workers 1 2            # -> results/dask/multigpu.json
    python benchmarks/multigpu.py --quick --workers 1 2    # small shapes, a smoke run
    # the whole fit only, on one GPU (one worker against one process):
    python benchmarks/multigpu.py --workers 1 --skip-kmeans --fit-n 10000000 \
        --lobpcg-n 200000 --name multigpu-fit-1gpu
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
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

    cluster = LocalCUDACluster(n_workers=workers, threads_per_worker=1,
                               CUDA_VISIBLE_DEVICES=",".join(map(str, range(workers))),
                               dashboard_address=":0")
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


def kmeans_scaling(shape, workers_list, iterations, repeats):
    import cupy
    from distributed import wait

    from explorer import KMeans
    from explorer.distributed import kmeans_fit

    n, d, k = shape
    seed = 0
    init = np.random.default_rng(1).normal(0.0, 6.0, (k, d))
    sync = cupy.cuda.Device().synchronize
    out = {"n": n, "d": d, "k": k, "iterations": iterations, "variants": {}}

    def single(rows):
        X = cupy.concatenate([blob_block(i, r, d, k, seed)
                              for i, r in enumerate(split(rows, max(workers_list)))])
        km = KMeans(k, init=init, n_init=1, max_iter=iterations, tol=0.0, random_state=0)

        def fit():
            km.fit(X)
            sync()
            return km
        t, km = timed(fit, repeats)
        X = None  # noqa: F841  (free the device copy before the next variant)
        cupy.get_default_memory_pool().free_all_blocks()
        return {**t, "per_iteration": t["median"] / km.n_iter_, "n_iter": km.n_iter_}

    # One-process times on n rows and on each worker's share, for the communication share.
    base = {w: single(-(-n // w)) for w in sorted({1, *workers_list})}
    out["variants"]["single-gpu"] = base[1]
    for w in workers_list:
        cluster, client = cluster_for(w)
        try:
            rows = split(n, w)
            Xd, futures = pinned_array(
                client, [(blob_block, i, r, d, k, seed) for i, r in enumerate(rows)],
                rows, d, np.float32)
            wait(futures)

            def fit(Xd=Xd, client=client):
                return kmeans_fit(Xd, k, init=init, n_init=1, max_iter=iterations, tol=0.0,
                                  client=client)
            t, res = timed(fit, repeats)
            # The median run's time per iteration (seeding and the row-block preparation,
            # ~25 ms, are in the run: the same in each variant's count).
            per_iter = t["median"] / res.n_iter
            out["variants"][f"dask-{w}"] = {
                **t, "per_iteration": per_iter, "n_iter": res.n_iter,
                "last_run_timings": res.timings,
                "single_gpu_on_one_share": base[w]["median"],
                "speedup_vs_single_gpu": base[1]["median"] / t["median"],
                "communication_share": max(0.0, 1.0 - base[w]["median"] / t["median"]),
            }
            print(f"k-means {n}x{d} k={k}: {w} GPU(s) {t['median']:.3f} s "
                  f"({per_iter * 1e3:.1f} ms/iteration) vs one process "
                  f"{base[1]['median']:.3f} s", flush=True)
        finally:
            client.close()
            cluster.close()
    d1 = out["variants"].get("dask-1")
    for w in workers_list:
        v = out["variants"][f"dask-{w}"]
        if d1:
            v["speedup_vs_dask_1"] = d1["median"] / v["median"]
    return out


def split(n, parts):
    """`n` rows in `parts` blocks as even as can be."""
    return [n // parts + (i < n % parts) for i in range(parts)]


def fit_scaling(n, solver, workers_list, repeats):
    import cupy
    from distributed import wait
    from sklearn.metrics import adjusted_rand_score

    from explorer import EdgeRule, SpectralClustering, datasets

    ds = datasets.load("syn4d", n_samples=n, random_state=0)
    rule = EdgeRule.suggest(ds.X, suggestion=dataset_params(ds))
    params = dict(n_clusters=4, metric=rule.metric, sigma=rule.sigma,
                  threshold_sqdist=rule.threshold_sqdist, eigen_solver=solver, n_init=3,
                  random_state=0)
    sync = cupy.cuda.Device().synchronize
    out = {"dataset": "syn4d", "n": n, "d": int(ds.X.shape[1]), "edge_rule": rule.describe(),
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
                                     "iterations": sc.eigen_iterations_,
                                     "ari": adjusted_rand_score(ds.y, ref)}
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
                "iterations": scd.eigen_iterations_,
                "ari": adjusted_rand_score(ds.y, labels),
                "same_labels_as_single": bool((labels == ref).all()),
                "speedup_vs_single_gpu": out["variants"]["single-gpu"]["median"] / t["median"],
            }
            stages = {k: round(v, 3) for k, v in scd.timings_.items()}
            print(f"fit syn4d {n} ({solver}): {w} GPU(s) {t['median']:.2f} s vs one process "
                  f"{out['variants']['single-gpu']['median']:.2f} s; stages {stages}",
                  flush=True)
        finally:
            client.close()
            cluster.close()
    return out


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
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--fit-n", type=int, nargs="+",
                   help="syn4d sizes for the whole fit with eigen_solver='auto'")
    p.add_argument("--lobpcg-n", type=int, nargs="+",
                   help="syn4d sizes for the whole fit with LOBPCG forced")
    p.add_argument("--skip-kmeans", action="store_true")
    p.add_argument("--name", default="multigpu")
    p.add_argument("--plot", help="also draw the speed-ups into this PNG (matplotlib)")
    args = p.parse_args(argv)

    import cupy

    gpus = cupy.cuda.runtime.getDeviceCount()
    workers = [w for w in args.workers if w <= gpus]
    if workers != args.workers:
        print(f"only {gpus} GPU(s): running workers {workers}", flush=True)
    if args.quick:
        shapes, fit_n, lobpcg_n = [(200_000, 32, 64)], [200_000], [50_000]
    else:
        shapes = [(6_000_000, 128, 1024), (6_000_000, 128, 64), (1_000_000, 128, 1024)]
        fit_n, lobpcg_n = [10_000_000], [200_000]
    fit_n, lobpcg_n = args.fit_n or fit_n, args.lobpcg_n or lobpcg_n
    if args.skip_kmeans:
        shapes = []
    payload = {"benchmark": "multigpu", "issue": 20, "environment": environment_info("gpu"),
               "gpus": gpus, "cluster": "dask_cuda.LocalCUDACluster, one worker per GPU, TCP",
               "timing": "wall clock (perf_counter), warm-up excluded, median of repeats",
               "repeats": args.repeats, "kmeans": [], "fit": []}
    for shape in shapes:
        payload["kmeans"].append(kmeans_scaling(shape, workers, args.iterations, args.repeats))
        write_result(args.name, payload)
    for n, solver in [(n, "auto") for n in fit_n] + [(n, "lobpcg") for n in lobpcg_n]:
        payload["fit"].append(fit_scaling(n, solver, workers, max(1, args.repeats - 1)))
        write_result(args.name, payload)
    print("wrote", write_result(args.name, payload))
    if args.plot:
        plot(payload, args.plot)


if __name__ == "__main__":
    main()
