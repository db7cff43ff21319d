"""GPU kNN graphs against the ε builders and a brute-force top-k peer → results/gpu/knn.json.

For each data set (moons 10⁶ × 2, infinite digits 6·10⁴ × 784 by default), on the GPU,
in one process, CUDA-event medians of ``--repeats`` runs after a warm-up:

- ``knn``: ``build_graph(X, graph="knn", n_neighbors=k, metric="uniform")`` (the
  search, the union and the CSR; ``method="auto"``: the grid for d <= 8, GEMM tiles
  beyond), and the same with self-tuning weights (``sigma="local"``);
- ``epsilon``: the ε builder ``method="auto"`` takes (grid or GEMM) on the data's
  suggested ε rule (:meth:`explorer.EdgeRule.suggest`);
- ``peer``: what a user without cuML would write: cuBLAS distance tiles and
  ``torch.topk`` (CuPy ``argpartition`` where PyTorch is missing) for the k nearest
  of every point, its lists only (no graph). Where that brute force is too long
  (n > ``--peer-full-max``) it runs on the first ``--peer-rows`` query rows and the
  time is scaled by n / rows (``extrapolated: true``);
- the recall of the peer's float32 lists against ours (same k).

``--cpu-stats N`` also times ``graph_stats`` of a kNN graph of N moons points on the
host's CPU (the app's live statistics).

Usage: ``python benchmarks/knn.py [--k 10] [--repeats 3] [--cpu-stats 100000]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _common import environment_info, summary, time_cpu, time_gpu, write_result
from explorer.data import load

from explorer.graph import EdgeRule, build_graph, graph_stats
from explorer.graph.knn import nearest_neighbors

CASES = (("moons", 1_000_000), ("infinite-digits", 60_000))


def _peer(Xd, k: int, rows: int):
    """Brute-force top-k of the first `rows` rows: (seconds fn, lists fn, name)."""
    import cupy

    n = Xd.shape[0]
    block = max(32, min(rows, (1 << 30) // (4 * n)))
    try:
        import torch

        Xt = torch.from_dlpack(Xd)
        sq = (Xt * Xt).sum(1)

        def run():
            out = []
            for r0 in range(0, rows, block):
                r1 = min(rows, r0 + block)
                D = sq[r0:r1, None] + sq[None, :] - 2.0 * (Xt[r0:r1] @ Xt.T)
                D[torch.arange(r1 - r0), torch.arange(r0, r1)] = float("inf")
                out.append(torch.topk(D, k, dim=1, largest=False).indices)
            torch.cuda.synchronize()
            return cupy.from_dlpack(torch.cat(out))

        return run, f"torch {torch.__version__} mm + topk"
    except ImportError:
        sq = (Xd * Xd).sum(axis=1)

        def run():
            out = []
            for r0 in range(0, rows, block):
                r1 = min(rows, r0 + block)
                D = sq[r0:r1, None] + sq[None, :] - 2.0 * (Xd[r0:r1] @ Xd.T)
                D[cupy.arange(r1 - r0), cupy.arange(r0, r1)] = cupy.inf
                part = cupy.argpartition(D, k, axis=1)[:, :k]
                out.append(part)
            return cupy.concatenate(out)

        return run, "cupy matmul + argpartition"


def _stats(g) -> dict:
    s = g.stats
    return {"nnz": s.nnz, "nnz_row_mean": s.nnz_row_mean, "nnz_row_max": s.nnz_row_max,
            "n_components": s.n_components, "method": g.method}


def run_case(name: str, n: int, k: int, repeats: int, peer_full_max: int,
             peer_rows: int) -> dict:
    import cupy

    ds = load(name, n_samples=n, random_state=0)
    X = np.ascontiguousarray(ds.X, dtype=np.float32)
    Xd = cupy.asarray(X)
    out = {"data": name, "n": int(X.shape[0]), "d": int(X.shape[1]), "k": k}

    plain = EdgeRule.from_args("uniform", graph="knn", n_neighbors=k)
    local = EdgeRule.from_args("gaussian", "local", graph="knn", n_neighbors=k)
    for label, rule in (("knn", plain), ("knn_local_sigma", local)):
        g = build_graph(Xd, rule, backend="gpu")
        out[label] = {"seconds": summary(time_gpu(lambda r=rule: build_graph(
            Xd, r, backend="gpu"), repeats=repeats)), **_stats(g),
            "stages": {key: v for key, v in g.timings.items() if key.startswith("build")},
            "search": g.info.get("stages")}
    ours = build_graph(Xd, plain, backend="gpu")  # the method auto took

    eps = EdgeRule.suggest(X)
    g = build_graph(Xd, eps, backend="gpu")
    out["epsilon"] = {"rule": eps.describe(), "seconds": summary(time_gpu(
        lambda: build_graph(Xd, eps, backend="gpu"), repeats=repeats)), **_stats(g)}

    rows = out["n"] if out["n"] <= peer_full_max else peer_rows
    fn, what = _peer(Xd, k, rows)
    lists = fn()
    times = time_gpu(fn, repeats=repeats)
    scale = out["n"] / rows
    ours_idx, _ = nearest_neighbors(Xd, k, method=ours.method, backend="gpu")
    a = cupy.sort(ours_idx[:rows], axis=1).get()
    b = cupy.sort(lists, axis=1).get()
    recall = float(np.mean([np.intersect1d(x, y).size / k for x, y in zip(a, b, strict=True)]))
    out["peer"] = {"what": what, "rows": rows, "extrapolated": rows < out["n"],
                   "seconds_measured": summary(times),
                   "seconds": float(np.median(times)) * scale,
                   "recall_vs_ours": recall}
    knn_s = out["knn"]["seconds"]["median"]
    out["speedup_knn_vs_peer"] = out["peer"]["seconds"] / knn_s
    out["knn_vs_epsilon"] = knn_s / out["epsilon"]["seconds"]["median"]
    return out


def cpu_stats(n: int, k: int, repeats: int) -> dict:
    X = load("moons", n_samples=n, random_state=0).X
    out = {"data": "moons", "n": n, "k": k, "cores": os.cpu_count()}
    for label, kw in (("knn", {"metric": "uniform"}),
                      ("knn_local_sigma", {"metric": "gaussian", "sigma": "local"})):
        times = time_cpu(lambda kw=kw: graph_stats(X, graph="knn", n_neighbors=k,
                                                   backend="cpu", **kw), repeats=repeats)
        out[label] = summary(times)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--peer-full-max", type=int, default=200_000)
    p.add_argument("--peer-rows", type=int, default=65_536)
    p.add_argument("--cpu-stats", type=int, default=0, metavar="N")
    p.add_argument("--case", action="append", default=[], metavar="NAME:N")
    args = p.parse_args(argv)
    cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.case] or list(CASES)
    t0 = time.perf_counter()
    results = []
    for name, n in cases:
        r = run_case(name, n, args.k, args.repeats, args.peer_full_max, args.peer_rows)
        print(r, flush=True)
        results.append(r)
    payload = {"benchmark": "knn", "environment": environment_info("gpu"), "argv": argv,
               "repeats": args.repeats, "cases": results}
    if args.cpu_stats:
        payload["cpu_graph_stats"] = cpu_stats(args.cpu_stats, args.k, args.repeats)
        print(payload["cpu_graph_stats"], flush=True)
    payload["wall_seconds"] = time.perf_counter() - t0
    print("wrote", write_result("knn", payload))


if __name__ == "__main__":
    main()
