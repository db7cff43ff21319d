"""The fast path on the paper's shapes: graph build, then eigensolver + k-means, against
floors and against the paper, all in one process.

For Syn1M and Syn5M (4-D, gaussian σ = 0.01, squared-distance thresholds 0.0008 and
0.0004) the grid builder, for MNIST60K and MNIST240K shapes (infinite digits, 784-D,
cosine > 0.8) the GEMM builder: build time (CUDA events around the whole call, one
warm-up excluded, median of ``--repeats``), stage times, nnz statistics. Then, on that
graph, the partition the paper times after it: ``explorer.spectral_embedding`` (the
Laplacian, then the Chebyshev solver at its default tolerance) and ``explorer.KMeans``
(k-means++, 10 restarts) on the unit rows, timed the same way, with ARI / NMI against
the data set's labels (isolated vertices -1). In the same process, on the smaller
shape of each pair, the paper's best method there (CSR-2 with hypoMaxNnzRow 54 on
Syn1M, CSR-3 on MNIST60K: Table 5) is timed for the speed-up and its graph compared
with ours, and the partition is repeated with our LOBPCG (``solver="lobpcg"``, the
paper's kind of solver) on the same graph.

Floors, measured in this run: a device-to-device copy gives the memory bandwidth, a
cuBLAS fp16 GEMM (fp32 accumulation) the tensor-core rate. The grid's floor is its
compulsory traffic (read X once, write the CSR once) over that bandwidth; the GEMM
builder's the larger of n²·d multiply-adds (the upper block triangle) over the GEMM
rate and its compulsory traffic. The eigensolver's floor is the traffic of the block
products it made (each reads the float32 CSR once and the n×b block, writes n×b) over
the bandwidth: the floor of that method at that iteration count, not of the problem.
k-means' floor is one read of its input per Lloyd iteration of every restart. Each
time is reported with ``floor / time``.

A last section times k-means alone: at n = 5·10⁶ with k = d in {4, 16, 64} (the
fused step; the issue asks it to vanish from the profile) and at k in the thousands
(a later issue's representatives): whole fits, and one Lloyd step against its floor.

Writes ``<out>/fast.json`` (default ``benchmarks/results/gpu``) after every step.

Usage::

    python benchmarks/fast.py                       # all four shapes, 3 runs each
    python benchmarks/fast.py --shapes Syn1M MNIST60K --repeats 5 --out /tmp/bench
    python benchmarks/fast.py --skip-kmeans         # shapes only
    python benchmarks/fast.py --only-kmeans         # k-means alone
    python benchmarks/fast.py --shapes Syn5M --skip-kmeans --k-sweep 16 64 --name fast-k
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment_info  # noqa: E402

SHAPES = {
    "Syn1M": {"data": "syn4d", "n": 1_000_000, "method": "grid", "target_s": 0.05,
              "k": 4, "partition_target_s": 0.3, "paper_partition_3090_s": 4.08,
              "params": {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0008},
              "paper_best": ("csr2", {"hypo_max_nnz_row": 54}), "paper_best_3090_s": 5.66},
    "Syn5M": {"data": "syn4d", "n": 5_000_000, "method": "grid", "target_s": 0.5,
              "k": 4, "partition_target_s": 1.5, "paper_partition_3090_s": 18.25,
              "params": {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0004},
              "paper_best_3090_s": 145.89},
    "MNIST60K": {"data": "infinite-digits", "n": 60_000, "method": "gemm", "target_s": 0.05,
                 "k": 10, "partition_target_s": 0.3, "paper_partition_3090_s": 2.88,
                 "params": {"metric": "cosine", "threshold_sim": 0.8},
                 "paper_best": ("csr3", {"sp_max_nz_pct": 1.0}), "paper_best_3090_s": 3.04},
    "MNIST240K": {"data": "infinite-digits", "n": 240_000, "method": "gemm", "target_s": 0.5,
                  "k": 10, "partition_target_s": 1.0, "paper_partition_3090_s": None,
                  "params": {"metric": "cosine", "threshold_sim": 0.8},
                  "paper_best_3090_s": 43.84},
}


def timed(fn):
    """(seconds between CUDA events recorded around ``fn()``, its result)."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3, out


def median_time(fn, repeats: int):
    """Warm-up call, then the median of `repeats` timed calls; also the last result."""
    fn()
    times, out = [], None
    for _ in range(repeats):
        del out
        t, out = timed(fn)
        times.append(t)
    return statistics.median(times), times, out


def copy_bandwidth() -> float:
    """Bytes per second moved (read + write) by a 1 GiB device-to-device copy."""
    import cupy

    nbytes = 1 << 30
    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)

    def copy():
        dst.data.copy_from_device_async(src.data, nbytes)

    t, _, _ = median_time(copy, 5)
    return 2 * nbytes / t


def gemm_rate(k: int = 784) -> float:
    """Multiply-adds ×2 per second of the builder's own fp16 tile product (16384² × k)."""
    import cupy
    from explorer.kernels.gemm import TileGemm

    m = 16384
    H = cupy.asarray(np.random.default_rng(0).random((m, k)), dtype=cupy.float16)
    C = cupy.empty((m, m), dtype=cupy.float16)
    gemm = TileGemm()
    try:
        t, _, _ = median_time(lambda: gemm.tile(H, H, C, m), 5)
    finally:
        gemm.close()
    return 2.0 * m * m * k / t


def nnz_stats(csr) -> dict:
    import cupy

    n = csr.shape[0]
    per_row = cupy.diff(csr.indptr)
    nnz = int(csr.nnz)
    return {"nnz_total": nnz, "nnz_mean": round(nnz / n, 2), "nnz_max": int(per_row.max()),
            "nnz_min": int(per_row.min()), "isolated": int((per_row == 0).sum())}


def floors(spec: dict, n: int, d: int, nnz: int, bandwidth: float, rate: float) -> dict:
    """Compulsory bytes and (for gemm) flops of the build, and the times they take."""
    index = 4 if max(nnz, n) < 2**31 else 8
    moved = n * d * 4 + nnz * (4 + index) + (n + 1) * index  # read X, write the CSR
    out = {"bytes": moved, "bytes_s": moved / bandwidth}
    if spec["method"] == "gemm":
        flops = float(n) * n * d  # 2 n²d / 2: the upper block triangle only
        out.update({"flops": flops, "flops_s": flops / rate})
    out["floor_s"] = max(out["bytes_s"], out.get("flops_s", 0.0))
    return out


def same_graph(a, b) -> dict:
    """How two CSR graphs of the same data differ: entries in one only, and values."""
    import scipy.sparse as sp

    A, B = a.get(), b.get()

    def pattern(m):
        return sp.csr_matrix((np.ones(m.nnz, dtype=np.int8), m.indices, m.indptr), shape=m.shape)

    pa, pb = pattern(A), pattern(B)
    diff = (pa.astype(np.int16) - pb.astype(np.int16)).tocsr()
    diff.eliminate_zeros()
    common_a = A.multiply(pb).tocsr()
    common_b = B.multiply(pa).tocsr()
    gap = abs(common_a - common_b).max() if common_a.nnz else 0.0
    scale = abs(common_b).max() if common_b.nnz else 1.0
    return {"nnz": [int(A.nnz), int(B.nnz)], "only_in_ours": int((diff.data > 0).sum()),
            "only_in_theirs": int((diff.data < 0).sum()),
            "max_abs_value_difference": float(gap), "max_value": float(scale)}


def load_shape(spec):
    import cupy
    from explorer.data import load

    from explorer.graph import EdgeRule

    t0 = time.perf_counter()
    ds = load(spec["data"], n_samples=spec["n"], random_state=0)
    X = cupy.asarray(ds.X)
    return X, ds.y, EdgeRule.from_args(**spec["params"]), time.perf_counter() - t0


def builder(spec):
    """``build(X, params)``: the spec's launcher, given the edge rule in kernel terms."""
    from explorer.kernels.gemm import build_gemm
    from explorer.kernels.grid import build_grid

    from explorer.graph.gpu import kernel_rule

    launcher = build_grid if spec["method"] == "grid" else build_gemm

    def build(X, params):
        return launcher(X, kernel_rule(params))

    return build


def run_shape(spec, repeats, bandwidth, rate):
    """Our builder on one shape: median time, stages, nnz, floors; then the partition.

    Returns the JSON record, the graph and the labels (for partitions into other k)."""
    X, y, params, gen_s = load_shape(spec)
    n, d = X.shape
    build = builder(spec)
    med, times, (csr, stages, info) = median_time(lambda: build(X, params), repeats)
    stats = nnz_stats(csr)
    fl = floors(spec, n, d, stats["nnz_total"], bandwidth, rate)
    try:
        partition = run_partition(spec, csr, y, repeats, bandwidth)
    except Exception as exc:  # recorded; the build figures stand
        partition = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        default = run_default_partition(spec, csr, y, repeats)
    except Exception as exc:  # recorded; the Chebyshev figures stand
        default = {"error": f"{type(exc).__name__}: {exc}"}
    record = {
        "n": n, "d": d, "data": spec["data"], "params": spec["params"],
        "method": spec["method"], "build_s": med, "build_runs_s": times,
        "target_s": spec["target_s"], "meets_target": med <= spec["target_s"],
        "stages_s": stages, "info": info, "nnz": stats, "floor": fl,
        "floor_fraction": fl["floor_s"] / med if fl["floor_s"] else None,
        "data_generation_s": round(gen_s, 2),
        "paper_best_3090_s": spec["paper_best_3090_s"],
        "speedup_vs_paper_3090": spec["paper_best_3090_s"] / med,
        "partition": partition,
        "partition_default": default,
    }
    return record, csr, y


def run_paper_best(spec, repeats, ours_s, bandwidth):
    """The paper's best method on this shape, timed the same way, and the graphs compared;
    then the partition with our LOBPCG on our graph (the paper used nvGRAPH's LOBPCG)."""
    from explorer.graph.gpu import build_gpu

    X, y, params, _ = load_shape(spec)
    method, options = spec["paper_best"]
    pmed, ptimes, (pcsr, _, _) = median_time(
        lambda: build_gpu(X, params, method, **options), repeats)
    csr, _, _ = builder(spec)(X, params)
    out = {"method": method, "options": options, "build_s": pmed, "runs_s": ptimes,
           "speedup_of_ours": pmed / ours_s, "comparison": same_graph(csr, pcsr)}
    del pcsr
    try:
        out["partition_lobpcg"] = run_partition(spec, csr, y, repeats, bandwidth, "lobpcg")
    except Exception as exc:  # recorded; the build comparison stands
        out["partition_lobpcg"] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def partition_scores(y, labels, seconds, target_s) -> dict:
    """ARI / NMI of `labels` (-1: unclustered) against `y`, and the time against its
    target (None: no target)."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    return {"ari": float(adjusted_rand_score(y, labels)),
            "nmi": float(normalized_mutual_info_score(y, labels)),
            "target_s": target_s, "meets_target": seconds <= target_s if target_s else None}


def run_partition(spec, csr, y, repeats, bandwidth, solver="chebyshev"):
    """spectral_embedding + KMeans on the unit rows of `csr`: times, scores, floors."""
    import cupy

    from explorer import KMeans, spectral_embedding
    from explorer.embedding.chebyshev import default_block

    k, n = spec["k"], csr.shape[0]

    def once():
        marks = [cupy.cuda.Event() for _ in range(3)]
        marks[0].record()
        emb = spectral_embedding(csr, k, solver=solver, random_state=0)
        marks[1].record()
        km = KMeans(k, random_state=0).fit(emb.embedding[~emb.isolated])
        marks[2].record()
        marks[2].synchronize()
        pairs = zip(marks[:-1], marks[1:], strict=True)
        seconds = [cupy.cuda.get_elapsed_time(a, b) / 1e3 for a, b in pairs]
        return seconds, emb, km

    once()  # warm-up: compilation, memory pool growth
    runs = []
    for _ in range(repeats):
        seconds, emb, km = once()
        runs.append(seconds)
    labels = np.full(n, -1, dtype=np.int64)
    isolated = cupy.asnumpy(emb.isolated)
    labels[~isolated] = cupy.asnumpy(km.labels_)
    eig_s = statistics.median(r[0] for r in runs)
    kmeans_s = statistics.median(r[1] for r in runs)
    total_s = statistics.median(sum(r) for r in runs)
    kept, nnz = int((~isolated).sum()), int(csr.nnz)
    out = {
        "solver": emb.solver, "tol": emb.tol, "k": k, "eig_s": eig_s, "kmeans_s": kmeans_s,
        "eig_kmeans_s": total_s, "runs_s": runs, "eigen_iterations": emb.iterations,
        "eigen_stages_s": emb.timings, "max_residual": float(np.max(emb.residual_norms)),
        "eigenvalues": [float(v) for v in emb.eigenvalues], "kmeans_iterations": km.n_iter_,
        **partition_scores(y, labels, total_s, spec["partition_target_s"]),
    }
    if spec["paper_partition_3090_s"]:
        out["paper_3090_s"] = spec["paper_partition_3090_s"]
        out["speedup_vs_paper_3090"] = spec["paper_partition_3090_s"] / total_s
    if emb.solver == "chebyshev":
        # One block product reads the float32 CSR (values, column indices, row pointer)
        # and the n×b block, and writes n×b.
        b = default_block(k, kept)
        per_product = nnz * 8 + (kept + 1) * 4 + 2 * kept * b * 4
        eig_floor = emb.iterations * per_product / bandwidth
        out["eig_floor"] = {"products": emb.iterations, "block": b,
                            "bytes_per_product": per_product, "floor_s": eig_floor,
                            "fraction": eig_floor / eig_s}
    # Every Lloyd iteration of every restart reads the kept rows once (k float32 each).
    km_bytes = km.n_init * km.n_iter_ * kept * k * 4
    out["kmeans_floor"] = {"bytes": km_bytes, "floor_s": km_bytes / bandwidth,
                           "fraction": km_bytes / bandwidth / kmeans_s,
                           "note": "n_init × the kept run's iterations: an estimate"}
    return out


def run_default_partition(spec, csr, y, repeats):
    """``explorer.partition_graph(csr, k)`` with its defaults, as SpectralClustering runs
    it after its graph: the components rule (counting them, here uncounted before), the
    solver "auto" picks, k-means. CUDA events around the whole call."""
    import cupy

    from explorer import partition_graph

    k = spec["k"]

    def once():
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        part = partition_graph(csr, k, random_state=0)
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1e3, part

    once()  # warm-up
    runs = []
    for _ in range(repeats):
        seconds, part = once()
        runs.append(seconds)
    labels = cupy.asnumpy(part.labels).astype(np.int64)
    emb, total_s = part.clustered, statistics.median(runs)
    return {
        "solver": emb.solver, "k": k, "eig_kmeans_s": total_s, "runs_s": runs,
        "stages_host_clock_s": part.timings, "eigen_iterations": emb.iterations,
        "max_residual": float(np.max(emb.residual_norms)),
        "eigenvalues": [float(v) for v in emb.eigenvalues],
        "n_components": part.n_components, "n_dropped": part.n_dropped,
        **partition_scores(y, labels, total_s, spec["partition_target_s"]),
    }


def _fit_record(timing) -> dict:
    """A KMeans fit's (median, runs, last fit) as its JSON record."""
    median, runs, fitted = timing
    return {"s": median, "runs_s": runs, "inertia": fitted.inertia_,
            "n_iter_kept_run": fitted.n_iter_}


def kmeans_alone(repeats, bandwidth):
    """k-means at n = 5·10⁶ and 2.4·10⁵, k = d <= 64, and at k in the thousands.

    Per case: a whole fit with the default seeding (k-means|| at these sizes) and,
    where it is not too slow to repeat, with greedy k-means++; one Lloyd step
    (assignment, distances and float64 cluster sums: the function the fit calls each
    iteration), with the step's compulsory traffic (read X and the row norms, write
    labels and distances) over the bandwidth as its floor; and the step by each path:
    the fused kernel (where it fits), the GEMM path's kernels, and the CPU's code run
    on CuPy (the GPU's GEMM path before these kernels).
    """
    import cupy
    from explorer.kernels.kmeans import fused_step_fits, fused_step_pays, gemm_step, kmeans_step

    from explorer import KMeans
    from explorer._backend import chunk_rows
    from explorer.kmeans import assign_nearest, assign_nearest_by_products

    rng = cupy.random.RandomState(0)
    out = {}
    # (n, d, k, n_init, max_iter, greedy too): embedding-like rows at n = 5·10⁶
    # (10 restarts, as the pipeline), then k in the thousands (one run, 20 iterations).
    cases = [(5_000_000, 4, 4, 10, 100, False), (5_000_000, 10, 10, 10, 100, False),
             (5_000_000, 16, 16, 10, 100, True), (5_000_000, 24, 24, 10, 100, False),
             (5_000_000, 32, 32, 10, 100, False), (240_000, 10, 10, 10, 100, False),
             (5_000_000, 64, 64, 10, 100, True), (1_000_000, 4, 1024, 1, 20, True),
             (1_000_000, 4, 4096, 1, 20, False), (240_000, 64, 4096, 1, 20, False)]
    for n, d, k, n_init, max_iter, greedy in cases:
        # k well-separated blobs (the shape of an embedding's rows, or of data to summarise).
        centres = rng.uniform(-10.0, 10.0, size=(k, d)).astype(cupy.float32)
        X = centres[rng.randint(0, k, size=n)] + rng.standard_normal((n, d), dtype=cupy.float32)
        x_sq = (X * X).sum(axis=1)
        C = X[:k].astype(cupy.float64)
        chunk = chunk_rows(cupy, max(k, d))
        step = median_time(lambda X=X, x_sq=x_sq, C=C, chunk=chunk: assign_nearest(
            X, x_sq, C, chunk, cupy, want_sums=True), repeats)
        fit = median_time(lambda X=X, k=k, n_init=n_init, max_iter=max_iter: KMeans(
            k, n_init=n_init, max_iter=max_iter, random_state=0).fit(X), repeats)
        km = fit[2]
        fits = {"auto": _fit_record(fit)}
        if greedy:
            fits["k-means++"] = _fit_record(median_time(
                lambda X=X, k=k, n_init=n_init, max_iter=max_iter: KMeans(
                    k, init="k-means++", n_init=n_init, max_iter=max_iter,
                    random_state=0).fit(X), repeats))
        step_bytes = n * d * 4 + n * 4 + n * 8
        both = {}
        if fused_step_fits(k, d):
            both["fused"] = median_time(lambda X=X, x_sq=x_sq, C=C: kmeans_step(
                X, x_sq, C, want_sums=True), repeats)[0]
        both["gemm"] = median_time(lambda X=X, x_sq=x_sq, C=C, chunk=chunk: gemm_step(
            X, x_sq, C, want_sums=True, chunk=chunk), repeats)[0]
        both["products"] = median_time(
            lambda X=X, x_sq=x_sq, C=C, chunk=chunk: assign_nearest_by_products(
                X, x_sq, C, chunk, cupy, want_sums=True), repeats)[0]
        name = f"n{n}_d{d}_k{k}"
        out[name] = {
            "n": n, "d": d, "k": k, "n_init": n_init, "max_iter": max_iter,
            "path": "fused" if fused_step_pays(k, d) else "gemm",
            "fit_s": fit[0], "fit_runs_s": fit[1], "n_iter_kept_run": km.n_iter_,
            "fit_by_seeding": fits,
            "step_s": step[0], "step_runs_s": step[1],
            "step_floor_s": step_bytes / bandwidth,
            "step_floor_fraction": step_bytes / bandwidth / step[0],
            "step_by_path_s": both,
        }
        print(f"k-means {name}: fit {fit[0] * 1e3:.1f} ms (n_init {n_init}, {km.n_iter_} "
              f"iterations in the kept run)" + "".join(
                  f"; {init} {f['s'] * 1e3:.1f} ms inertia ratio "
                  f"{f['inertia'] / km.inertia_:.4f}" for init, f in fits.items()
                  if init != "auto") +
              f"; one step {step[0] * 1e3:.3f} ms ({out[name]['path']}, "
              f"{100 * out[name]['step_floor_fraction']:.0f}% of the bytes floor)" + "".join(
                  f"; {path} {t * 1e3:.3f} ms" for path, t in both.items()), flush=True)
        del X, x_sq, C, centres, fit, step, km
        cupy.get_default_memory_pool().free_all_blocks()
    return out


def print_partition(name, part):
    if "error" in part:
        print(f"{name}: partition ERROR {part['error']}", flush=True)
        return
    floor = part.get("eig_floor", {}).get("fraction")
    print(f"{name}: {part['solver']} {part['eig_s'] * 1e3:.1f} ms ({part['eigen_iterations']} "
          f"products/iterations{f', {100 * floor:.0f}% of floor' if floor else ''}) + k-means "
          f"{part['kmeans_s'] * 1e3:.1f} ms = {part['eig_kmeans_s'] * 1e3:.1f} ms"
          + (f" (target {part['target_s'] * 1e3:.0f} ms)" if part["target_s"] else "")
          + f", ARI {part['ari']:.3f}", flush=True)


def main(argv=None) -> int:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gpu")
    parser.add_argument("--skip-kmeans", action="store_true",
                        help="leave out the k-means-alone section")
    parser.add_argument("--only-kmeans", action="store_true",
                        help="the k-means-alone section only (no shapes)")
    parser.add_argument("--k-sweep", type=int, nargs="+", default=[], metavar="K",
                        help="also partition each shape's graph into these numbers of "
                             "clusters (how the eigensolver's and k-means' shares grow)")
    parser.add_argument("--name", default="fast", help="result file name (default fast)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.json"
    if args.only_kmeans:
        args.shapes = []

    doc = {"benchmark": "fast path: grid / gemm builders, Chebyshev eigensolver, k-means",
           "environment": environment_info("gpu"), "argv": sys.argv[1:] if argv is None
           else list(argv), "repeats": args.repeats,
           "timing": "CUDA events around each whole library call, warm-up excluded, median",
           "shapes": {}}
    doc["memory_bandwidth_GBps"] = copy_bandwidth() / 1e9
    try:
        doc["gemm_fp16_TFLOPs"] = gemm_rate() / 1e12
    except Exception as exc:  # recorded; the grid figures need only the bandwidth
        doc["gemm_fp16_error"] = f"{type(exc).__name__}: {exc}"
        doc["gemm_fp16_TFLOPs"] = float("nan")
    print(f"device {doc['environment']['gpu']['name']}: copy "
          f"{doc['memory_bandwidth_GBps']:.0f} GB/s,"
          f" fp16 GEMM {doc['gemm_fp16_TFLOPs']:.0f} TFLOP/s", flush=True)

    def save():
        path.write_text(json.dumps(doc, indent=1, default=float) + "\n")

    # Our builders on every shape first, then the (much slower) paper methods.
    for name in args.shapes:
        csr = y = None
        try:
            res, csr, y = run_shape(SHAPES[name], args.repeats,
                                    doc["memory_bandwidth_GBps"] * 1e9,
                                    doc["gemm_fp16_TFLOPs"] * 1e12)
        except Exception as exc:  # recorded; the other shapes still run
            res = {"error": f"{type(exc).__name__}: {exc}"}
        cupy.get_default_memory_pool().free_all_blocks()
        doc["shapes"][name] = res
        save()
        if "error" in res:
            print(f"{name}: ERROR {res['error']}", flush=True)
            continue
        print(f"{name}: {res['method']} {res['build_s'] * 1e3:.2f} ms (target "
              f"{res['target_s'] * 1e3:.0f} ms), nnz {res['nnz']['nnz_total']:,} (mean "
              f"{res['nnz']['nnz_mean']}, max {res['nnz']['nnz_max']}), floor "
              f"{res['floor']['floor_s'] * 1e3:.2f} ms = {100 * res['floor_fraction']:.0f}%",
              flush=True)
        print_partition(name, res["partition"])
        default = res["partition_default"]
        print(f"{name}: default partition_graph " + (
            f"ERROR {default['error']}" if "error" in default else
            f"{default['solver']} (components {default['n_components']}) "
            f"{default['eig_kmeans_s'] * 1e3:.1f} ms, ARI {default['ari']:.3f}"), flush=True)
        for k in args.k_sweep:  # the same graph into k clusters
            spec = {**SHAPES[name], "k": k, "partition_target_s": None,
                    "paper_partition_3090_s": None}
            try:
                part = run_partition(spec, csr, y, args.repeats,
                                     doc["memory_bandwidth_GBps"] * 1e9)
            except Exception as exc:  # recorded; the other figures stand
                part = {"error": f"{type(exc).__name__}: {exc}"}
            res.setdefault("partition_by_k", {})[str(k)] = part
            save()
            print_partition(f"{name} k={k}", part)
        del csr, y
        cupy.get_default_memory_pool().free_all_blocks()
    for name in args.shapes:
        spec, res = SHAPES[name], doc["shapes"][name]
        if "paper_best" not in spec or "error" in res:
            continue
        try:
            pb = run_paper_best(spec, args.repeats, res["build_s"],
                                doc["memory_bandwidth_GBps"] * 1e9)
        except Exception as exc:  # recorded; our figures stand
            pb = {"method": spec["paper_best"][0], "error": f"{type(exc).__name__}: {exc}"}
        cupy.get_default_memory_pool().free_all_blocks()
        res["paper_best_here"] = pb
        save()
        if "error" in pb:
            print(f"{name}: {pb['method']} ERROR {pb['error']}", flush=True)
        else:
            print(f"{name}: {pb['method']} {pb['build_s']:.3f} s here, ours "
                  f"{pb['speedup_of_ours']:.0f}x faster; {pb['comparison']}", flush=True)
            print_partition(name, pb["partition_lobpcg"])
    if not args.skip_kmeans:
        try:
            doc["kmeans"] = kmeans_alone(args.repeats, doc["memory_bandwidth_GBps"] * 1e9)
        except Exception as exc:  # recorded; the shapes stand
            doc["kmeans"] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"k-means ERROR {doc['kmeans']['error']}", flush=True)
        save()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
