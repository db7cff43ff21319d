"""Row reordering before the eigensolver (explorer.graph.reorder): SpMM at the
eigensolver's block width and the whole embedding, on shuffled graphs, with no
reordering, each cheap order (Morton of the points, reverse Cuthill–McKee) and paper
003's Jaccard order, reordering cost included, against the bytes floor.

For each shape: generate the data (seed 0), shuffle its rows (seed 1), build the graph on
the GPU (the grid builder for syn4d, GEMM for infinite digits), then for each variant:

* ``order_s``: :func:`explorer.graph.reorder.row_order` (host-synchronised wall time;
  the kernels were compiled on a small graph first), ``permute_s``: P A Pᵀ (CUDA events);
* ``spmm_s``: ``B @ Y`` with Y n × b float32 (b = the Chebyshev solver's default block
  for k), median of ``--repeats`` after a warm-up, with the traffic model's bytes
  (:func:`explorer.graph.reorder.spmm_traffic`) and the floor's time at the measured
  device-to-device copy bandwidth;
* ``embedding_s``: :func:`explorer.spectral_embedding` (solver "auto": Chebyshev) on the
  reordered graph (``row_ids`` the order), median of ``--embed-repeats`` after a
  warm-up on the first variant;
  ``total_s`` = order + permute + embedding; the products it took;
* ``labels_equal``: k-means (n_init 1, seed 0) on the embedding brought back to the
  given order gives the labels of the unreordered run, cluster numbers included (the
  solver draws its random vectors in the given order: ``spectral_embedding(row_ids=)``);
  ``ari_vs_unreordered`` and ``ari_truth`` (scikit-learn's ARI on the host: 8 s a call
  at 5·10⁶ labels on 2 shared cores) are computed where the labels differ, copied where
  they are equal;
* what :func:`explorer.graph.reorder.choose_order` (``"auto"``) decides for the shuffled
  graph and why; ``shape_s``: the wall time of the whole shape (data to last variant).

RCM runs on the host (SciPy; cupyx has none) and is skipped above ``--rcm-max-rows``.
Writes ``<out>/reorder.json`` (``reorder-small.json`` with ``--small``,
``reorder-cpu.json`` with ``--cpu``; ``--name`` to choose) after every shape. ``--cpu``
runs everything with NumPy/SciPy (host clock; the CPU graph builder). Every shape
records the device, time and commit of the run that measured it (``run``) and is
written after every variant (``complete`` false until its last);
``--merge FILE`` starts from an earlier result file and replaces only the shapes run
now, so the shapes can be measured in separate calls.

Memory of the largest shape, syn4d 5·10⁷ (about 22.6 nonzeros per row at the suggested
threshold 1.1·10⁻⁴, so nnz ≈ 1.13·10⁹, int32 columns): the graph 9.4 GB (8 B per
nonzero and an int64 row pointer); permuting it 46 GB of work arrays (40 B per entry,
:func:`explorer.graph.reorder.check_reorder_memory`) and a Jaccard level 28 GB (24 B),
each with the graph, the points (0.8 GB) and the product block (1.6 GB) alive; the
embedding of the permuted graph holds both graphs (19 GB), the float64 and float32
values of A (13.5 GB) and about 35 GB of Chebyshev blocks: under 60 GB of the H200's
141 GB at any point.

Usage::

    python benchmarks/reorder.py                   # syn4d 1e7, 5e7, digits 240K
    python benchmarks/reorder.py --small --out /tmp/r              # 2e5 / 2e4 smoke run
    # one shape in its own call, merged into the earlier rows (syn4d 5e7: expected 3-5
    # min on an H200, scaled from the 10⁷ row; RCM is skipped at that size):
    python benchmarks/reorder.py --shapes syn4d-5e7 \\
        --merge benchmarks/results/reorder/reorder.json --out "$OUT"
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
from _common import RESULTS, device_name, environment_info, plain  # noqa: E402

from explorer.graph import dataset_params  # noqa: E402

SHAPES = {
    "syn4d-1e7": {"data": "syn4d", "n": 10_000_000, "method": "grid", "k": 4},
    "syn4d-5e7": {"data": "syn4d", "n": 50_000_000, "method": "grid", "k": 4},
    "digits-240k": {"data": "infinite-digits", "n": 240_000, "method": "gemm", "k": 10,
                    "params": {"metric": "cosine", "threshold_sim": 0.8}},
    # --small
    "syn4d-2e5": {"data": "syn4d", "n": 200_000, "method": "grid", "k": 4},
    "digits-20k": {"data": "infinite-digits", "n": 20_000, "method": "gemm", "k": 10,
                   "params": {"metric": "cosine", "threshold_sim": 0.8}},
    # --cpu smoke run
    "syn4d-5e4": {"data": "syn4d", "n": 50_000, "method": "grid", "k": 4},
    "digits-5k": {"data": "infinite-digits", "n": 5_000, "method": "gemm", "k": 10,
                  "params": {"metric": "cosine", "threshold_sim": 0.8}},
}
FULL = ("syn4d-1e7", "syn4d-5e7", "digits-240k")
SMALL = ("syn4d-2e5", "digits-20k")
VARIANTS = ("none", "spatial", "rcm", "jaccard", "jaccard-tau0.6")


#: The array module of the run: CuPy, or NumPy with ``--cpu``.
xp = None


def events(fn):
    """(seconds of ``fn()``: CUDA events on the GPU, the host clock with --cpu; its result)."""
    if xp is np:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out
    start, end = xp.cuda.Event(), xp.cuda.Event()
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return xp.cuda.get_elapsed_time(start, end) / 1e3, out


def median_of(fn, repeats, warmup=1):
    for _ in range(warmup):
        fn()
    times = [events(fn)[0] for _ in range(repeats)]
    return statistics.median(times), times


def copy_bandwidth() -> float:
    """Bytes per second (read + write) of a 1 GiB copy (device to device on the GPU)."""
    src = xp.ones(1 << 28, dtype=xp.float32)
    dst = xp.empty_like(src)
    t, _ = median_of(lambda: xp.copyto(dst, src), 5)
    return 2 * src.nbytes / t


def warm_kernels():
    """Compile the Jaccard kernels and the sorts on a small graph."""
    import scipy.sparse as sp

    from explorer._backend import sparse_module
    from explorer.graph.reorder import permute, row_order

    A = sp.random(2000, 2000, density=0.01, random_state=0, format="csr", dtype=np.float32)
    A = (A + A.T).tocsr()
    A.setdiag(0)
    A.eliminate_zeros()
    A.sort_indices()
    G = sparse_module(xp).csr_matrix(A)
    X = xp.asarray(np.random.default_rng(0).random((2000, 3), dtype=np.float32))
    for m in ("jaccard", "spatial"):
        permute(G, row_order(G, m, X=X).perm)


def free_memory() -> None:
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()


def run_shape(name, spec, args, bandwidth, save=None):
    """One shape's record; ``save(record)`` after each variant (``"complete": False``
    until the last), so a call cut off by its time limit keeps what it measured."""
    from explorer.data import load

    from explorer import KMeans, spectral_embedding
    from explorer._backend import to_numpy
    from explorer.embedding.chebyshev import default_block
    from explorer.graph import build_graph
    from explorer.graph.reorder import choose_order, permute, row_order, spmm_traffic
    from explorer.metrics import adjusted_rand_score

    out = {"spec": spec, "complete": False}
    t_shape = t0 = time.perf_counter()
    ds = load(spec["data"], n_samples=spec["n"], random_state=0)
    shuffle = np.random.default_rng(1).permutation(spec["n"])
    X = xp.asarray(ds.X[shuffle])
    y = None if ds.y is None else np.asarray(ds.y)[shuffle]
    params = spec.get("params") or {key: dataset_params(ds)[key] for key in
                                    ("metric", "sigma", "threshold_sqdist", "threshold_sim")
                                    if dataset_params(ds).get(key) is not None}
    del ds
    out["data_s"] = time.perf_counter() - t0
    out["params"] = params
    method = spec["method"] if xp is not np else "auto"
    backend = "gpu" if xp is not np else "cpu"
    t_graph, g = events(lambda: build_graph(X, method=method, backend=backend, **params))
    csr = g.csr
    n, nnz, k = csr.shape[0], int(csr.nnz), spec["k"]
    block = default_block(k, n)
    out.update(n=n, nnz=nnz, nnz_per_row=nnz / n, k=k, block=block, graph_s=t_graph)
    print(f"{name}: n={n} nnz={nnz} ({nnz / n:.1f}/row) graph {t_graph:.2f} s", flush=True)

    auto = choose_order(csr, "auto", X=X, block=block)
    out["auto"] = {"reordered": auto.reordered, "method": auto.method, "reason": auto.reason}
    print(f"  auto: {auto.reason}", flush=True)
    del auto

    variants, base_labels, base = {}, None, None
    out["variants"] = variants
    Y = xp.asarray(np.random.default_rng(0).random((n, block), dtype=np.float32))
    for i, variant in enumerate(args.variants):
        rec = {}
        method, tau = variant, None
        if variant.startswith("jaccard-tau"):
            method, tau = "jaccard", float(variant[len("jaccard-tau"):])
        if method == "rcm" and n > args.rcm_max_rows:
            variants[variant] = {"skipped": f"host RCM above --rcm-max-rows={args.rcm_max_rows}"}
            continue
        if method == "none":
            B, order = csr, None
            traffic = spmm_traffic(csr, block=block)
            rec.update(order_s=0.0, permute_s=0.0)
        else:
            kw = {} if tau is None else {"tau": tau}
            order = row_order(csr, method, X=X, block=block, **kw)
            rec.update(order_s=order.seconds, info=order.info,
                       traffic_before=order.before.as_dict())
            t_perm, B = events(lambda order=order: permute(csr, order.perm))
            rec["permute_s"] = t_perm
            traffic = order.after
        rec["traffic"] = traffic.as_dict()
        rec["floor_s"] = traffic.floor_bytes / bandwidth
        rec["model_s"] = traffic.bytes / bandwidth
        spmm, runs = median_of(lambda B=B: B @ Y, args.repeats)
        rec.update(spmm_s=spmm, spmm_runs=runs, spmm_over_floor=spmm / rec["floor_s"])
        emb_runs = []
        for r in range((1 if i == 0 else 0) + args.embed_repeats):
            t, emb = events(lambda B=B, ids=None if order is None else order.perm:
                            spectral_embedding(B, k, random_state=0, row_ids=ids))
            if i > 0 or r > 0:
                emb_runs.append(t)
        rec.update(embedding_s=statistics.median(emb_runs), embedding_runs=emb_runs,
                   products=emb.iterations, solver=emb.solver,
                   eigenvalues=emb.eigenvalues.tolist())
        rec["total_s"] = rec["order_s"] + rec["permute_s"] + rec["embedding_s"]
        # The random vectors are drawn in the given order, but the products' rounding
        # follows the new one and can move a convergence check by a filter: the time
        # per product compares the orders' products alone.
        rec["embedding_s_per_product"] = rec["embedding_s"] / max(1, rec["products"] or 1)
        U = emb.embedding if order is None else order.to_original(emb.embedding)
        keep = xp.flatnonzero(~xp.isnan(U[:, 0]))
        labels = xp.full(n, -1, dtype=xp.int32)
        labels[keep] = KMeans(k, n_init=1, random_state=0).fit(U[keep]).labels_
        labels = to_numpy(labels)
        if base is None:
            base_labels, base = labels, rec
        rec["labels_equal"] = bool(np.array_equal(labels, base_labels))
        # Equal labels have equal scores: the host ARI (sorts of n labels) only where
        # they differ.
        same = rec["labels_equal"] and rec is not base
        rec["ari_vs_unreordered"] = (1.0 if rec["labels_equal"]
                                     else float(adjusted_rand_score(base_labels, labels)))
        if y is not None:
            rec["ari_truth"] = (base["ari_truth"] if same
                                else float(adjusted_rand_score(y, labels)))
        variants[variant] = rec
        if save is not None:
            save(out)
        print(f"  {variant:>15}: order {rec['order_s']:.3f} s, permute {rec['permute_s']:.3f} s, "
              f"SpMM {spmm * 1e3:.2f} ms (floor {rec['floor_s'] * 1e3:.2f} ms, model ratio "
              f"{traffic.ratio:.2f}), embedding {rec['embedding_s']:.3f} s "
              f"({rec['products']} products), total {rec['total_s']:.3f} s, "
              f"labels equal {rec['labels_equal']}", flush=True)
        del B, emb, U
        free_memory()
    out["shape_s"] = time.perf_counter() - t_shape
    out["complete"] = True
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "reorder",
                        help="folder of the JSON file")
    parser.add_argument("--small", action="store_true", help="the small shapes (smoke run)")
    parser.add_argument("--shapes", nargs="+", choices=tuple(SHAPES))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--repeats", type=int, default=10, help="SpMM runs (median)")
    parser.add_argument("--embed-repeats", type=int, default=3, help="embedding runs (median)")
    parser.add_argument("--rcm-max-rows", type=int, default=12_000_000)
    parser.add_argument("--cpu", action="store_true",
                        help="NumPy/SciPy on the host (host-clock timings; a check of this "
                             "script without a GPU, or CPU figures)")
    parser.add_argument("--name", help="result file stem (default reorder, reorder-small, "
                                       "reorder-cpu)")
    parser.add_argument("--merge", type=Path, metavar="FILE",
                        help="an earlier result file: its shapes are kept (each with the "
                             "run that measured it) and those run now replace theirs")
    args = parser.parse_args(argv)
    earlier = None
    if args.merge is not None:
        if not args.merge.is_file():
            parser.error(f"--merge {args.merge}: no such file")
        earlier = json.loads(args.merge.read_text())
    global xp
    if args.cpu:
        xp = np
    else:
        import cupy

        xp = cupy
    shapes = args.shapes or (SMALL if args.small else FULL)
    env = environment_info("cpu" if args.cpu else "gpu")
    device = "CPU" if args.cpu else device_name(env)
    warm_kernels()
    bandwidth = copy_bandwidth()
    run = {"device": device, "timestamp": env["timestamp"],
           "commit": env.get("git", {}).get("commit"), "copy_bandwidth_Bps": bandwidth}
    result = {"benchmark": "reorder", "device": device, "environment": env,
              "protocol": __doc__, "copy_bandwidth_Bps": bandwidth,
              "shapes": {} if earlier is None else earlier_shapes(earlier)}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.name or ("reorder-cpu" if args.cpu else
                         "reorder-small" if args.small else "reorder")
    path = args.out / f"{stem}.json"
    def save(name, record):
        result["shapes"][name] = {"run": run, **record}
        devices = sorted({shape["run"]["device"] for shape in result["shapes"].values()})
        # The top level names every device; each shape's run says which measured it.
        result["device"] = " + ".join(devices)
        path.write_text(json.dumps(plain(result), indent=1, allow_nan=False) + "\n")

    for name in shapes:
        save(name, run_shape(name, SHAPES[name], args, bandwidth,
                             save=lambda record, name=name: save(name, record)))
    print(f"wrote {path}")
    return 0


def earlier_shapes(earlier: dict) -> dict:
    """The shapes of an earlier result file, each with the run that measured it (files
    written before shapes recorded their run get the file's device, time, commit and
    bandwidth)."""
    env = earlier.get("environment", {})
    run = {"device": earlier.get("device") or device_name(env),
           "timestamp": env.get("timestamp"), "commit": env.get("git", {}).get("commit"),
           "copy_bandwidth_Bps": earlier.get("copy_bandwidth_Bps")}
    return {name: shape if "run" in shape else {"run": run, **shape}
            for name, shape in earlier.get("shapes", {}).items()}


if __name__ == "__main__":
    sys.exit(main())
