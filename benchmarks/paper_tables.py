"""The paper's Tables 3, 5 and 6 measured on this GPU, beside the paper's RTX 3090 figures.

For each data set shape (Syn1M, Syn5M, MNIST60K/120K/240K, and MNIST240K* for the
clustering) this script builds the ε-neighbourhood graph with GPU CSR-1, CSR-2 at the
paper's three hypoMaxNnzRow values and CSR-3, times each build (CUDA events, after a
warm-up on a small slice of the same data that compiles every kernel), checks that all
builds give the same matrix, records the nnz statistics (Table 3), then runs the LOBPCG
eigensolver and k-means on the graph and scores them against the labels (Table 6).

Every variant of one shape runs in this one process; each shape's results are written to
the JSON file as soon as they exist, so a run stopped by its time budget keeps what it
measured. ``--budget`` seconds stops starting new work once spent (recorded as skipped).

Usage::

    python benchmarks/paper_tables.py --quick            # Syn1M, MNIST60K; 3 runs each
    python benchmarks/paper_tables.py --full             # every shape (< 9 min on an H100)
    python benchmarks/paper_tables.py --shapes Syn1M --repeats 5 --out /tmp/bench
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _common import device_name, environment_info

#: The paper's settings (Table 2) and figures (Tables 3, 5, 6; RTX 3090, CUDA 11.5).
SHAPES = {
    "Syn1M": {
        "data": "syn4d", "n": 1_000_000, "k": 4,
        "params": {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0008},
        "hypos": (16, 32, 54), "sp_max_nz_pct": 0.01, "eig_tol": 1e-3,
        "paper": {"csr1": 14.01, "csr2": {"16": 7.71, "32": 5.71, "54": 5.66}, "csr3": 17.62,
                  "nnz_max": 54, "nnz_mean": 23, "nnz_total_M": 23.4, "sparsity_pct": 99.998,
                  "eig_kmeans_s": 4.08, "ari": 1.00, "nmi": 1.00},
    },
    "MNIST60K": {
        "data": "infinite-digits", "n": 60_000, "k": 10,
        "params": {"metric": "cosine", "threshold_sim": 0.8},
        "hypos": (512, 1024, 2048), "sp_max_nz_pct": 1.0, "eig_tol": 5e-3,
        "paper": {"csr1": 5.53, "csr2": {"512": 3.91, "1024": 4.49, "2048": 5.42}, "csr3": 3.04,
                  "nnz_max": 2196, "nnz_mean": 251, "nnz_total_M": 15.1, "sparsity_pct": 99.581,
                  "eig_kmeans_s": 2.88, "ari": 0.44, "nmi": 0.66},
    },
    "MNIST120K": {
        "data": "infinite-digits", "n": 120_000, "k": 10,
        "params": {"metric": "cosine", "threshold_sim": 0.8},
        "hypos": (512, 1024, 2048), "sp_max_nz_pct": 1.0, "eig_tol": 5e-3,
        "paper": {"csr1": 22.27, "csr2": {"512": 17.12, "1024": 19.05, "2048": 21.09},
                  "csr3": 11.09, "nnz_max": 3310, "nnz_mean": 299, "nnz_total_M": 35.9,
                  "sparsity_pct": 99.751, "eig_kmeans_s": 3.95, "ari": 0.50, "nmi": 0.67},
    },
    "MNIST240K": {
        "data": "infinite-digits", "n": 240_000, "k": 10,
        "params": {"metric": "cosine", "threshold_sim": 0.8},
        "hypos": (512, 1024, 2048), "sp_max_nz_pct": 1.0, "eig_tol": None,
        "paper": {"csr1": 91.47, "csr2": {"512": 77.78, "1024": 83.07, "2048": 85.29},
                  "csr3": 43.84, "nnz_max": 5552, "nnz_mean": 478, "nnz_total_M": 114.8,
                  "sparsity_pct": 99.801},
    },
    "MNIST240K*": {
        "data": "infinite-digits", "n": 240_000, "k": 10,
        "params": {"metric": "cosine", "threshold_sim": 0.84},
        "hypos": (), "methods": ("csr3",), "sp_max_nz_pct": 1.0, "eig_tol": 5e-3,
        "paper": {"csr3": 43.56, "nnz_max": 3520, "nnz_mean": 199, "nnz_total_M": 47.8,
                  "sparsity_pct": 99.917, "eig_kmeans_s": 5.01, "ari": 0.56, "nmi": 0.73},
    },
    "Syn5M": {
        "data": "syn4d", "n": 5_000_000, "k": 4,
        "params": {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0004},
        "hypos": (16, 32, 64), "sp_max_nz_pct": 0.001, "eig_tol": 1e-4,
        "paper": {"csr1": 363.69, "csr2": {"16": 242.69, "32": 176.06, "64": 145.89},
                  "csr3": 435.76, "nnz_max": 64, "nnz_mean": 29, "nnz_total_M": 149.9,
                  "sparsity_pct": 99.999, "eig_kmeans_s": 18.25, "ari": 1.00, "nmi": 1.00},
    },
}

QUICK = ("Syn1M", "MNIST60K")

#: Rows of the warm-up slice: every kernel of every variant compiles on it.
WARMUP_ROWS = 4096


def _free_device_memory():
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


def timed(fn):
    """(seconds between CUDA events recorded around fn on the current stream, fn())."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3, out


def variants(spec: dict) -> list[tuple[str, str, dict]]:
    """(label, method, options) of every build of a shape, in the paper's column order."""
    out = []
    methods = spec.get("methods", ("csr1", "csr2", "csr3"))
    if "csr1" in methods:
        out.append(("csr1", "csr1", {}))
    if "csr2" in methods:
        out += [(f"csr2<{h}>", "csr2", {"hypo_max_nnz_row": h}) for h in spec["hypos"]]
    if "csr3" in methods:
        out.append(("csr3", "csr3", {"sp_max_nz_pct": spec["sp_max_nz_pct"]}))
    return out


def nnz_stats(csr) -> dict:
    import cupy

    n = csr.shape[0]
    per_row = cupy.diff(csr.indptr)
    nnz = int(csr.nnz)
    return {
        "nnz_total": nnz, "nnz_total_M": round(nnz / 1e6, 2),
        "nnz_mean": round(nnz / n, 1), "nnz_max": int(per_row.max()),
        "nnz_min": int(per_row.min()), "isolated": int((per_row == 0).sum()),
        "sparsity_pct": round(100.0 * (1.0 - nnz / (n * n)), 4),
    }


def fit_sp_max_nz_pct(X, params, options: dict) -> dict:
    """CSR-3's options with an spMaxNzPct that fits this data (untimed sizing run).

    The paper's value (Table 2) is tried first; when the graph is denser than the
    paper's (our generated digits are), the overflow error names the percentage that
    fits, and that one is used (both are recorded in the build's info).
    """
    from explorer.graph.gpu import build_gpu

    try:
        build_gpu(X, params, "csr3", **options)
        return options
    except ValueError as exc:
        found = re.search(r"use sp_max_nz_pct >= ([0-9.eE+-]+)", str(exc))
        if found is None:
            raise
        _free_device_memory()
        return {**options, "sp_max_nz_pct": float(found.group(1)),
                "paper_sp_max_nz_pct": options["sp_max_nz_pct"]}


def cluster(csr, k: int, tol, y) -> dict:
    """LOBPCG embedding + k-means on the graph (Table 6), scored against `y`."""
    import cupy
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    from explorer.embedding import spectral_embedding
    from explorer.kmeans import KMeans

    t0 = time.perf_counter()
    emb = spectral_embedding(csr, k, solver="lobpcg", tol=tol, random_state=0)
    cupy.cuda.Device().synchronize()
    t1 = time.perf_counter()
    keep = ~emb.isolated
    km = KMeans(n_clusters=k, random_state=0).fit(emb.embedding[keep])
    labels = cupy.full(csr.shape[0], -1, dtype=cupy.int64)
    labels[keep] = cupy.asarray(km.labels_)
    cupy.cuda.Device().synchronize()
    t2 = time.perf_counter()
    pred = cupy.asnumpy(labels)
    return {
        "eig_s": round(t1 - t0, 3), "kmeans_s": round(t2 - t1, 3),
        "eig_kmeans_s": round(t2 - t0, 3), "eig_iterations": emb.iterations,
        "ari": round(float(adjusted_rand_score(y, pred)), 4),
        "nmi": round(float(normalized_mutual_info_score(y, pred)), 4),
        "isolated": int(emb.isolated.sum()),
    }


class Budget:
    def __init__(self, seconds: float):
        self.t0 = time.perf_counter()
        self.seconds = seconds

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.t0)


def run_shape(name: str, spec: dict, X_host, y, repeats: int, budget: Budget) -> dict:
    import cupy

    from explorer.graph import EdgeRule
    from explorer.graph.gpu import build_gpu

    params = EdgeRule.from_args(**spec["params"])
    X = cupy.asarray(X_host)
    n = X.shape[0]
    result = {"n": n, "d": int(X.shape[1]), "k": spec["k"], "params": spec["params"],
              "paper": spec["paper"], "repeats": repeats, "builds": {}}
    todo = variants(spec)
    warm = cupy.ascontiguousarray(X[: min(n, WARMUP_ROWS)])
    for _, method, options in todo:  # compile every kernel outside the timed runs
        # A slice is denser than the whole set: give CSR-3 room for any density there.
        warm_options = {**options, "sp_max_nz_pct": 100.0} if method == "csr3" else options
        build_gpu(warm, params, method, **warm_options)
    reference = None
    for label, method, options in todo:
        if budget.left() <= 0:
            result["builds"][label] = {"skipped": "time budget spent"}
            continue
        runs, stages = [], []
        try:
            if method == "csr3":
                options = fit_sp_max_nz_pct(X, params, options)
            for _ in range(repeats):
                _free_device_memory()
                build_options = {k: v for k, v in options.items() if k != "paper_sp_max_nz_pct"}
                seconds, (csr, st, info) = timed(
                    lambda m=method, o=build_options: build_gpu(X, params, m, **o))
                runs.append(seconds)
                stages.append(st)
                if reference is None:
                    reference = (cupy.asnumpy(csr.indptr), nnz_stats(csr))
                    keep = csr
                same = bool(np.array_equal(cupy.asnumpy(csr.indptr), reference[0]))
                del csr
        except Exception as exc:  # record and go on: one failure must not lose the table
            result["builds"][label] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        med = statistics.median(runs)
        entry = {
            "median_s": round(med, 4), "runs_s": [round(r, 4) for r in runs],
            "stages_median_s": {k: round(statistics.median(s.get(k, 0.0) for s in stages), 4)
                                for k in stages[0]},
            "same_rowptr_as_first": same,
            "pair_evaluations": int(info["pair_evaluations"]),
            "pair_evaluations_per_s": float(f"{info['pair_evaluations'] / med:.4g}"),
            "info": {k: v for k, v in info.items() if k != "pair_evaluations"},
        }
        if "paper_sp_max_nz_pct" in options:
            entry["paper_sp_max_nz_pct_overflowed"] = options["paper_sp_max_nz_pct"]
        result["builds"][label] = entry
        print(f"  {name:10s} {label:12s} {med:9.3f} s  (runs {entry['runs_s']})", flush=True)
    if reference is not None:
        result["nnz"] = reference[1]
        if spec.get("eig_tol") is not None and y is not None and budget.left() > 0:
            try:
                result["clustering"] = cluster(keep, spec["k"], spec["eig_tol"], y)
            except Exception as exc:
                result["clustering"] = {"error": f"{type(exc).__name__}: {exc}"}
        del keep
    _free_device_memory()
    return result


def count_rows_1m(X_host) -> dict:
    """The counting pass over all rows of Syn1M (the live-statistics figure)."""
    import cupy

    from explorer.graph import EdgeRule
    from explorer.graph.gpu import count_rows_gpu

    params = EdgeRule.from_args(**SHAPES["Syn1M"]["params"])
    X = cupy.asarray(X_host)
    count_rows_gpu(X, params, cupy.arange(1024))
    runs = []
    for _ in range(3):
        seconds, (counts, _) = timed(lambda: count_rows_gpu(X, params))
        runs.append(seconds)
    n = X.shape[0]
    med = statistics.median(runs)
    sample = [timed(lambda: count_rows_gpu(X, params, cupy.arange(0, n, n // 2000)))[0]
              for _ in range(3)]
    return {"n": n, "all_rows_median_s": round(med, 4), "runs_s": [round(r, 4) for r in runs],
            "pairs_per_s": float(f"{n * n / med:.4g}"), "nnz": int(counts.sum()),
            "sample_2000_rows_median_s": round(statistics.median(sample), 5)}


def dense_to_csr_comparison() -> dict:
    """CSR-3's compaction: our kernel (NaN = no edge) against cuSPARSE's dense-to-CSR.

    One chunk at Syn1M's and one at MNIST's density; counts come free from chkPass in our
    pipeline, so ours is timed as scan + fill. cuSPARSE (through cupyx) keeps nonzero
    values, so it would drop zero-valued edges: it is timed for speed only.
    """
    import cupy
    import cupyx.scipy.sparse as cps
    from explorer.kernels import launch, scan

    out = {}
    rng = cupy.random.default_rng(0)
    for label, rows, cols, density in (("syn1m_like", 1024, 1 << 20, 2.3e-5),
                                       ("mnist_like", 4096, 1 << 17, 4.2e-3)):
        dense = cupy.full((rows, cols), cupy.nan, dtype=cupy.float32)
        hits = rng.random((rows, cols), dtype=cupy.float32) < density
        dense[hits] = rng.random(int(hits.sum()), dtype=cupy.float32) + 0.5
        counts = hits.sum(axis=1, dtype=cupy.int32)
        del hits
        nnz = int(counts.sum())
        col = cupy.empty(nnz, dtype=cupy.int32)
        val = cupy.empty(nnz, dtype=cupy.float32)

        def ours(dense=dense, counts=counts, col=col, val=val, rows=rows, cols=cols):
            rowptr = scan(counts)
            launch("convert", "dense_to_csr", (), (-(-rows // 8),), (32, 8),
                   (dense, np.int32(cols), np.int32(rows), np.int32(0), rowptr, col, val))
            return rowptr

        ours()
        t_ours = statistics.median(timed(ours)[0] for _ in range(3))
        zeros = cupy.nan_to_num(dense, nan=0.0)
        del dense
        cps.csr_matrix(zeros)
        t_cusparse = statistics.median(timed(lambda z=zeros: cps.csr_matrix(z))[0]
                                       for _ in range(3))
        out[label] = {"rows": rows, "cols": cols, "nnz": nnz, "ours_s": round(t_ours, 5),
                      "cusparse_s": round(t_cusparse, 5),
                      "chunk_GB": round(rows * cols * 4 / 1e9, 2)}
        del zeros, col, val
        _free_device_memory()
    return out


def load(spec: dict, n: int):
    from explorer import datasets

    t0 = time.perf_counter()
    ds = datasets.load(spec["data"], n_samples=n, random_state=0)
    return ds.X, ds.y, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help=f"shapes {', '.join(QUICK)}")
    mode.add_argument("--full", action="store_true", help="every shape")
    ap.add_argument("--shapes", help=f"comma-separated, from {', '.join(SHAPES)}")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per build (median)")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds before skipping work")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "paper"))
    ap.add_argument("--name", default="paper-tables", help="JSON file name (without .json)")
    args = ap.parse_args(argv)
    names = (args.shapes.split(",") if args.shapes else list(SHAPES) if args.full else list(QUICK))
    unknown = [s for s in names if s not in SHAPES]
    if unknown:
        ap.error(f"unknown shapes {unknown}; choose from {list(SHAPES)}")

    budget = Budget(args.budget)
    out_path = Path(args.out) / f"{args.name}.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "environment": environment_info("gpu"),
        "protocol": (
            "CUDA events around each build_gpu call (operand layout, every pass, scans, "
            "allocations and the CSR hand-over; data already on the device); all kernels "
            f"compiled first on a {WARMUP_ROWS}-row slice; median of `repeats` runs; all "
            "variants of a shape in one process. Syn5M and MNIST240K use fewer runs (see "
            "each shape's `repeats`). Clustering: explorer.embedding LOBPCG (paper's tol) "
            "+ explorer.kmeans, wall-clock with device syncs."
        ),
        "paper_device": "NVIDIA GeForce RTX 3090 (CUDA 11.5)",
        "shapes": {},
    }

    def save():
        out_path.write_text(json.dumps(report, indent=1, default=str))

    cache = {}
    extras = args.shapes is None  # the counting-pass and denseToCSR figures
    if extras and "Syn1M" in names:
        X, y, secs = load(SHAPES["Syn1M"], SHAPES["Syn1M"]["n"])
        cache[("syn4d", 1_000_000)] = (X, y, secs)
        report["count_rows_1M"] = count_rows_1m(X)
        save()
    if extras:
        report["dense_to_csr"] = dense_to_csr_comparison()
        save()
    digits = None
    for name in names:
        spec = SHAPES[name]
        if budget.left() <= 0:
            report["shapes"][name] = {"skipped": "time budget spent"}
            save()
            continue
        key = (spec["data"], spec["n"])
        if key in cache:
            X, y, secs = cache[key]
        elif spec["data"] == "infinite-digits":
            # One draw of the largest size serves every MNIST shape (prefixes of it).
            if digits is None:
                biggest = max(SHAPES[s]["n"] for s in names
                              if SHAPES[s]["data"] == "infinite-digits")
                digits = load(spec, biggest)
            Xd, yd, secs = digits
            X, y = Xd[: spec["n"]], yd[: spec["n"]]
        else:
            X, y, secs = load(spec, spec["n"])
        # Syn5M and the MNIST240K shapes take minutes per run on a 3090-class budget:
        # fewer runs there, stated in each shape's "repeats".
        if spec["n"] > 1_000_000 or name == "MNIST240K*":
            repeats = 1
        elif name == "MNIST240K":
            repeats = min(args.repeats, 2)
        else:
            repeats = args.repeats
        print(f"{name}: n={spec['n']} d={X.shape[1]} (data {secs:.1f} s)", flush=True)
        res = run_shape(name, spec, np.ascontiguousarray(X), y, repeats, budget)
        res["data_seconds"] = round(secs, 2)
        report["shapes"][name] = res
        save()
    report["total_seconds"] = round(time.perf_counter() - budget.t0, 1)
    save()
    print_summary(report)
    return 0


def print_summary(report: dict) -> None:
    env = report["environment"]
    print(f"\n== paper tables on {device_name(env)} (paper: RTX 3090) ==")
    print(f"{'shape':11s} {'build':12s} {'ours s':>9s} {'paper s':>9s} {'speed-up':>9s}"
          f" {'pairs/s':>10s}")
    for name, res in report["shapes"].items():
        for label, b in res.get("builds", {}).items():
            paper = res["paper"].get("csr2", {}).get(label[5:-1]) if label.startswith(
                "csr2") else res["paper"].get(label)
            ours = b.get("median_s")
            if ours is None:
                print(f"{name:11s} {label:12s} {str(b)[:60]}")
                continue
            ratio = f"{paper / ours:9.1f}" if paper else f"{'-':>9s}"
            print(f"{name:11s} {label:12s} {ours:9.3f} {paper or float('nan'):9.2f} {ratio}"
                  f" {b['pair_evaluations_per_s']:10.3g}")
        if "nnz" in res:
            z, p = res["nnz"], res["paper"]
            print(f"{name:11s} nnz mean/max {z['nnz_mean']}/{z['nnz_max']} total "
                  f"{z['nnz_total_M']}M (paper {p.get('nnz_mean')}/{p.get('nnz_max')} "
                  f"{p.get('nnz_total_M')}M)")
        c = res.get("clustering")
        if c:
            print(f"{name:11s} LOBPCG+k-means {c}")
    if "count_rows_1M" in report:
        c = report["count_rows_1M"]
        print(f"count_rows_gpu n=1M d=4: {c['all_rows_median_s']} s ({c['pairs_per_s']:.3g} "
              f"pairs/s); 2000 sampled rows {c['sample_2000_rows_median_s']} s")
    if "dense_to_csr" in report:
        for k, v in report["dense_to_csr"].items():
            print(f"denseToCSR {k}: ours {v['ours_s']} s, cuSPARSE {v['cusparse_s']} s")


if __name__ == "__main__":
    sys.exit(main())
