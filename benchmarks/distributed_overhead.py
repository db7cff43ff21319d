"""Overhead of the distributed mode (explorer.distributed) against the one-process path,
on one GPU (a LocalCUDACluster of one worker, CuPy chunks) or on the CPU (a LocalCluster,
NumPy chunks). Issue 19.

Both variants run in this process's session on the same data (``syn4d``, seed 0, the
data set's suggested edge rule) with the same estimator parameters and seed
(``--solver``, default ``"lobpcg"``: every product a round trip through the client;
``--solver auto``: syn4d's graph has exactly k components, so both paths take the
components embedding, which the distributed fit computes per row block on the
workers):

- ``single``: ``SpectralClustering(backend=...).fit(X)`` on the device array;
- ``dask-<b>``: ``SpectralClustering(...).fit(Xd)`` with the Client in scope, Xd the
  same data in b row blocks, persisted on the workers before timing;
- ``kmeans-single`` / ``kmeans-dask-<b>``: k-means alone on the raw data (k = 4).

Times are wall-clock (``perf_counter``; the single-process GPU run synchronises the
device at its end): the distributed path spans processes, so CUDA events cannot time
it. One warm-up run per variant (``--no-warmup``: none, for CPU runs of minutes), then the
median of ``--repeats``, with each fit's own stage timings (``timings_``: the
distributed fit splits its embedding into ``components.*`` and ``embedding.*``) and the
ARI against the labels and against ``single`` (from 10⁵ rows k-means|| draws its
candidates per row block, so the labels are the single-process clusters under other
numbers: ARI 1, not equality).

On the GPU, the distributed graph is built by the CPU row-block builders on the
worker's host (the GPU builders do not take a row range yet), so the ``graph`` stage
measures that, not a GPU builder; the ``embedding`` and ``kmeans`` stages compare like
with like (LOBPCG's products on the worker's GPU, k-means on the worker's GPU).

Usage::

    python benchmarks/distributed_overhead.py                  # GPU, n = 200 000: dask.json
    python benchmarks/distributed_overhead.py --cpu --n 20000  # CPU, 2 workers: dask-cpu.json
    # the components embedding on one GPU, one worker against one process (issue 20):
    python benchmarks/distributed_overhead.py --solver auto --n 10000000 --blocks 1 2 \
        --repeats 2 --name dask-components
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment_info, write_result  # noqa: E402

from explorer.graph import dataset_params  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="LocalCluster with NumPy chunks")
    p.add_argument("--n", type=int, help="rows (default 200000 on the GPU, 20000 on the CPU)")
    p.add_argument("--workers", type=int, default=2, help="CPU workers (GPU: one per GPU)")
    p.add_argument("--blocks", type=int, nargs="+", default=[1, 4], help="row blocks per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--name", help="result name (default dask / dask-cpu)")
    p.add_argument("--solver", default="lobpcg", choices=["lobpcg", "auto"],
                   help="eigen_solver of both paths (auto: the components embedding here)")
    p.add_argument("--no-warmup", action="store_true", help="no warm-up run per variant")
    p.add_argument("--skip-kmeans", action="store_true", help="no k-means-alone variants")
    args = p.parse_args(argv)

    import dask.array as da
    from distributed import Client, LocalCluster, wait
    from sklearn.metrics import adjusted_rand_score

    from explorer import EdgeRule, KMeans, SpectralClustering, datasets

    gpu = not args.cpu
    n = args.n or (200_000 if gpu else 20_000)
    ds = datasets.load("syn4d", n_samples=n, random_state=0)
    rule = EdgeRule.suggest(ds.X, suggestion=dataset_params(ds))
    params = dict(n_clusters=4, metric=rule.metric, sigma=rule.sigma,
                  threshold_sqdist=rule.threshold_sqdist, eigen_solver=args.solver, n_init=3,
                  random_state=0)
    if gpu:
        import cupy
        from dask_cuda import LocalCUDACluster

        xp = cupy
        cluster = LocalCUDACluster(n_workers=1, threads_per_worker=1)
        sync = cupy.cuda.Device().synchronize
    else:
        xp = np
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                               dashboard_address=":0")
        sync = lambda: None  # noqa: E731
    X = xp.asarray(ds.X)
    client = Client(cluster)
    backend = "gpu" if gpu else "cpu"

    def timed(fit, repeats):
        if not args.no_warmup:
            fit()
        runs, last = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            last = fit()
            sync()
            runs.append(time.perf_counter() - t0)
        return {"median": statistics.median(runs), "runs": runs}, last

    def host(labels):
        labels = labels.compute() if hasattr(labels, "compute") else labels
        return labels.get() if hasattr(labels, "get") else np.asarray(labels)

    variants = {}
    t, single = timed(lambda: SpectralClustering(**params, backend=backend).fit(X),
                      args.repeats)
    ref = host(single.labels_)
    variants["single"] = {**t, "stages": single.timings_, "solver": single.eigen_solver_,
                          "iterations": single.eigen_iterations_,
                          "ari": adjusted_rand_score(ds.y, ref), "nnz": single.graph_stats_.nnz}
    if not args.skip_kmeans:
        t, km = timed(lambda: KMeans(4, n_init=3, random_state=0).fit(X), args.repeats)
        km_ref = host(km.labels_)
        variants["kmeans-single"] = {**t, "n_iter": km.n_iter_, "inertia": km.inertia_}
    for blocks in args.blocks:
        rows = -(-n // blocks)
        Xd = da.from_array(ds.X, chunks=(rows, -1))
        if gpu:
            Xd = Xd.map_blocks(cupy.asarray)
        Xd = Xd.persist()
        wait(Xd)
        t, sc = timed(lambda Xd=Xd: SpectralClustering(**params).fit(Xd), args.repeats)
        labels = host(sc.labels_)
        variants[f"dask-{blocks}"] = {
            **t, "stages": sc.timings_, "graph_stages": sc.graph_.timings,
            "solver": sc.eigen_solver_, "iterations": sc.eigen_iterations_,
            "ari": adjusted_rand_score(ds.y, labels),
            "ari_vs_single": adjusted_rand_score(ref, labels),
            "same_labels_as_single": bool((labels == ref).all()), "nnz": sc.graph_stats_.nnz,
        }
        if not args.skip_kmeans:
            t, kmd = timed(lambda Xd=Xd: KMeans(4, n_init=3, random_state=0).fit(Xd),
                           args.repeats)
            kl = host(kmd.labels_)
            variants[f"kmeans-dask-{blocks}"] = {
                **t, "n_iter": kmd.n_iter_, "inertia": kmd.inertia_,
                "same_labels_as_single": bool((kl == km_ref).all()),
            }
        stages = {k: round(v, 3) for k, v in sc.timings_.items()}
        print(blocks, "blocks:", round(variants[f"dask-{blocks}"]["median"], 3), "s against",
              round(variants["single"]["median"], 3), "s; stages", stages, "; single",
              {k: round(v, 3) for k, v in single.timings_.items()}, flush=True)
    for name, v in variants.items():
        base = variants["kmeans-single" if name.startswith("kmeans") else "single"]["median"]
        v["overhead_vs_single"] = v["median"] / base
    from explorer.distributed import n_workers

    payload = {
        "benchmark": "dask", "issue": 19, "environment": environment_info(backend),
        "cluster": {"kind": type(cluster).__name__, "workers": n_workers(client),
                    "processes": True},
        "dataset": {"name": "syn4d", "n": n, "d": int(ds.X.shape[1]), "k": 4, "seed": 0},
        "edge_rule": rule.describe(), "parameters": params, "repeats": args.repeats,
        "timing": "wall clock (perf_counter), warm-up excluded, median of repeats",
        "variants": variants,
    }
    path = write_result(args.name or ("dask" if gpu else "dask-cpu"), payload)
    print("wrote", path)
    client.close()
    cluster.close()


if __name__ == "__main__":
    main()
