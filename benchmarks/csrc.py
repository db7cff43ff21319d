"""CSRC SpMM against cuSPARSE, and landmark spectral clustering against the exact pipeline.

Two parts, one result file (``benchmarks/results/gpu/csrc.json``):

``spmm``: the landmark affinity's shape (n × p, r entries per row, p = 1000, r = 5), n
from 10⁶ to 10⁷, block widths 8-32. For each: ``Y = Z V`` and ``W = Zᵀ U`` by the CSRC
kernels (one stored copy; the transposed product in both variants), by cuSPARSE CSR
SpMM (``csr @ dense``), with Zᵀ as an explicit CSR copy and implicitly (``csr.T @
dense``). Each with its bytes floor: the bytes the product must move (the matrix as
stored, the dense operand it streams, the result) over the HBM bandwidth, the nominal
one of the device (named) and a measured device-to-device copy. Conversion times
(CSR → CSRC, CSR → explicit transposed CSR) and the bytes of each storage.

``pipeline``: infinite digits (n × 784, generated on all host cores in chunks with their
own seeds, same distributions as ``explorer.data.load("infinite-digits")``; rendered on
the GPU by ``explorer.data.infinite_digits_gpu`` where the data package has it) clustered by
:func:`explorer.landmarks.landmark_partition` (gaussian and cosine weights) and, where
it fits, by the exact ε-graph pipeline (``SpectralClustering`` with the suggested
parameters): times per stage and ARI against the digit labels and against each other.

    python benchmarks/csrc.py spmm --n 1000000 10000000
    python benchmarks/csrc.py pipeline --n 1000000 --r 3 5 --exact
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from multiprocessing import get_context, shared_memory

import numpy as np
from _common import environment_info, plain, result_dir, summary, time_gpu, write_result

#: Nominal HBM bandwidth (bytes/s) by device name fragment: the floor's denominator.
NOMINAL_BANDWIDTH = {"H200": 4.8e12, "H100 PCIe": 2.0e12, "H100": 3.35e12, "A100": 2.0e12}

D = 784
#: The samples past this index are drawn with wider affine maps (data/_digits.py).
ORIGINALS = 60_000
SPREAD = 1.5
CHUNK = 50_000


# ------------------------------------------------------------------ data


def _generate(task):
    name, n_total, start, stop, seed = task
    os.environ["OMP_NUM_THREADS"] = "1"
    from explorer.data import load

    if start < ORIGINALS:
        opts = {"originals": None}
    else:  # the extra samples' distribution: the affine ranges times SPREAD
        opts = {"originals": None, "rotation": 10.0 * SPREAD, "scale": 0.1 * SPREAD,
                "shear": 0.2 * SPREAD, "translate": 2.25 * SPREAD}
    ds = load("infinite-digits", n_samples=max(2, stop - start), random_state=seed, **opts)
    shm = shared_memory.SharedMemory(name=name)
    X = np.ndarray((n_total, D), dtype=np.float32, buffer=shm.buf)
    X[start:stop] = ds.X[: stop - start]
    shm.close()
    return start, ds.y[: stop - start]


def digits(n: int, seed: int = 0):
    """n × 784 infinite digits made on every core, chunk by chunk (each chunk its own
    seed; chunks that start before 60 000 draw like the first 60 000 samples of
    ``load``, later ones like its extra samples)."""
    t0 = time.perf_counter()
    shm = shared_memory.SharedMemory(create=True, size=n * D * 4)
    try:
        edges = list(range(0, n, CHUNK)) + [n]
        bounds = []
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            if a < ORIGINALS < b:
                bounds += [(a, ORIGINALS), (ORIGINALS, b)]
            else:
                bounds.append((a, b))
        tasks = [(shm.name, n, a, b, seed * 100_003 + i) for i, (a, b) in enumerate(bounds)]
        y = np.empty(n, dtype=np.int64)
        with get_context("fork").Pool(os.cpu_count()) as pool:
            for start, labels in pool.imap_unordered(_generate, tasks):
                y[start : start + len(labels)] = labels
        X = np.ndarray((n, D), dtype=np.float32, buffer=shm.buf).copy()
    finally:
        shm.close()
        shm.unlink()
    return X, y, time.perf_counter() - t0


# ------------------------------------------------------------------ spmm


def nominal_bandwidth(device: str) -> tuple[float | None, str]:
    for key, value in NOMINAL_BANDWIDTH.items():
        if key in device:
            return value, f"{device}: nominal {value / 1e12:.2f} TB/s ({key})"
    return None, f"{device}: no nominal bandwidth on file"


def measured_bandwidth() -> float:
    """Bytes/s of a 4 GiB device-to-device copy (read + write), median of 5."""
    import cupy

    src = cupy.ones(2**30, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    times = time_gpu(lambda: dst.__setitem__(Ellipsis, src), repeats=5)
    return 2 * 4 * 2**30 / float(np.median(times))


def landmark_like(n: int, p: int, r: int, seed: int):
    """A random n × p CSR with r distinct sorted columns per row and positive values."""
    import cupy
    import cupyx.scipy.sparse as csp

    rs = cupy.random.RandomState(seed)
    c0 = rs.randint(0, p, size=(n, 1), dtype=cupy.int64)
    step = rs.randint(1, max(2, p // r), size=(n, 1), dtype=cupy.int64)
    cols = cupy.sort((c0 + cupy.arange(r)[None, :] * step) % p, axis=1).astype(cupy.int32)
    vals = rs.uniform(0.01, 1.0, size=(n, r)).astype(cupy.float32)
    indptr = cupy.arange(n + 1, dtype=cupy.int32) * r
    return csp.csr_matrix((vals.ravel(), cols.ravel(), indptr), shape=(n, p))


def bench_spmm(ns, p, r, widths, repeats, bandwidths):
    import cupy
    from explorer.kernels import csrc

    rows = []
    for n in ns:
        Z = landmark_like(n, p, r, seed=n)
        nnz = int(Z.nnz)
        cupy.cuda.Device().synchronize()
        t_csrc = summary(time_gpu(
            lambda Z=Z: csrc.from_csr(Z.indptr, Z.indices, Z.data, Z.shape), repeats=repeats))
        t_tr = summary(time_gpu(lambda Z=Z: Z.T.tocsr(), repeats=repeats))
        M = csrc.from_csr(Z.indptr, Z.indices, Z.data, Z.shape)
        Zt = Z.T.tocsr()
        csr_bytes = nnz * 8 + (n + 1) * 4
        storage = {"csrc": M.nbytes, "csr": csr_bytes,
                   "csr_plus_transposed": csr_bytes + nnz * 8 + (p + 1) * 4}
        for w in widths:
            V = cupy.asarray(np.random.default_rng(w).standard_normal((p, w)), cupy.float32)
            U = cupy.asarray(np.random.default_rng(w + 1).standard_normal((n, w)), cupy.float32)
            dense_n, dense_p = n * w * 4, p * w * 4
            ops = {"M": M, "Z": Z, "Zt": Zt, "U": U, "V": V}
            cases = {
                ("direct", "csrc"): (lambda o=ops: csrc.spmm(o["M"], o["V"]), M.nbytes),
                ("direct", "cusparse csr"): (lambda o=ops: o["Z"] @ o["V"], csr_bytes),
                ("transposed", "csrc shared"): (
                    lambda o=ops: csrc.spmm_t(o["M"], o["U"], "shared"), M.nbytes)
                if p * w * 4 <= csrc.SHARED_RESULT_MAX_BYTES else None,
                ("transposed", "csrc runs"): (
                    lambda o=ops: csrc.spmm_t(o["M"], o["U"], "runs"), M.nbytes),
                ("transposed", "cusparse explicit Zt"): (
                    lambda o=ops: o["Zt"] @ o["U"], nnz * 8 + (p + 1) * 4),
                ("transposed", "cusparse implicit Z.T"): (
                    lambda o=ops: o["Z"].T @ o["U"], csr_bytes),
            }
            ref = {"direct": (Z @ V).get().astype(np.float64),
                   "transposed": (Zt @ U).get().astype(np.float64)}
            for (direction, how), case in cases.items():
                if case is None:
                    continue
                fn, matrix_bytes = case
                out = fn().get().astype(np.float64)
                err = float(np.abs(out - ref[direction]).max() / np.abs(ref[direction]).max())
                t = summary(time_gpu(fn, repeats=repeats))
                moved = matrix_bytes + dense_n + dense_p
                row = {"n": n, "p": p, "r": r, "nnz": nnz, "width": w, "direction": direction,
                       "format": how, "seconds": t, "bytes_moved": moved,
                       "achieved_bandwidth_GBps": moved / t["median"] / 1e9,
                       "max_rel_diff_vs_cusparse": err}
                for label, bw in bandwidths.items():
                    if bw:
                        row[f"floor_s_{label}"] = moved / bw
                        row[f"x_floor_{label}"] = t["median"] / (moved / bw)
                rows.append(row)
                print(f"n={n:>9} w={w:>2} {direction:>10} {how:<24} "
                      f"{t['median'] * 1e3:8.3f} ms  {row['achieved_bandwidth_GBps']:7.0f} GB/s "
                      f" x{row.get('x_floor_nominal', float('nan')):5.2f} of floor",
                      flush=True)
            ops.clear()
        rows.append({"n": n, "p": p, "r": r, "nnz": nnz, "conversion_s": {
            "csr_to_csrc": t_csrc, "csr_to_explicit_transpose": t_tr}, "storage_bytes": storage})
        Z = Zt = M = None
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


# ------------------------------------------------------------------ pipeline


def gpu_digits(n: int, seed: int):
    """Infinite digits rendered on the GPU (``explorer.data.infinite_digits_gpu``, the
    generator's own draws), or None where this checkout's data package lacks it."""
    import explorer.data

    make = getattr(explorer.data, "infinite_digits_gpu", None)
    if make is None:
        return None
    import cupy

    t0 = time.perf_counter()
    X, y = make(n, np.random.default_rng(seed))
    cupy.cuda.Device().synchronize()
    return X, np.asarray(y), time.perf_counter() - t0


def landmark_run(Xg, y, k, p, r, metric, seed):
    import cupy
    from sklearn.metrics import adjusted_rand_score

    from explorer.landmarks import landmark_partition

    # Warm-up on enough rows that k-means seeds as on all of them (k-means|| from 10⁵
    # rows): kernel compilation and memory pools are not timed.
    landmark_partition(Xg[:200_000], k, n_landmarks=p, n_nearest=r, metric=metric,
                       backend="gpu", random_state=seed)
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    part = landmark_partition(Xg, k, n_landmarks=p, n_nearest=r, metric=metric,
                              backend="gpu", random_state=seed)
    cupy.cuda.Device().synchronize()
    wall = time.perf_counter() - t0
    labels = cupy.asnumpy(part.labels)
    rec = {"n_landmarks": p, "n_nearest": r, "metric": metric, "wall_s": wall,
           "timings": part.timings, "ari": adjusted_rand_score(y, labels),
           "svd_iterations": part.iterations, "block_size": part.svd.block_size,
           "converged": part.svd.converged, "max_residual": float(part.svd.residuals.max()),
           "singular_values": part.singular_values, "sigma": part.sigma,
           "isolated": int((labels < 0).sum()), "affinity_bytes": part.affinity.nbytes,
           "kmeans_iterations": int(part.kmeans.n_iter_)}
    print(f"landmarks p={p} r={r} {metric}: {wall:.2f} s "
          f"{ {k: round(v, 3) for k, v in part.timings.items()} } ARI {rec['ari']:.3f}",
          flush=True)
    return rec, labels


def exact_run(Xg, y, k, seed):
    import cupy
    from sklearn.metrics import adjusted_rand_score

    from explorer import SpectralClustering

    t0 = time.perf_counter()
    sc = SpectralClustering(k, backend="gpu", random_state=seed).fit(Xg)
    cupy.cuda.Device().synchronize()
    wall = time.perf_counter() - t0
    labels = cupy.asnumpy(cupy.asarray(sc.labels_))
    rec = {"wall_s": wall, "timings": sc.timings_, "ari": adjusted_rand_score(y, labels),
           "edge_rule": sc.edge_rule_.describe(), "nnz": int(sc.graph_stats_.nnz),
           "isolated": int((labels < 0).sum()), "eigen_solver": sc.eigen_solver_,
           "graph_method": sc.graph_.method}
    print(f"exact: {wall:.2f} s { {k: round(v, 3) for k, v in sc.timings_.items()} } "
          f"ARI {rec['ari']:.3f} nnz {rec['nnz']}", flush=True)
    return rec, labels


def bench_pipeline(n, exact, configs, seed, save):
    """Landmark runs (and the exact one) on n infinite digits; `save(record)` after each
    measurement, so a run cut short keeps what it measured."""
    import cupy
    from sklearn.metrics import adjusted_rand_score

    made = gpu_digits(n, seed)
    if made is None:
        X, y, t_gen = digits(n, seed)
        where = "host, all cores"
    else:
        X, y, t_gen = made
        where = "GPU (explorer.data.infinite_digits_gpu)"
    t0 = time.perf_counter()
    Xg = cupy.asarray(X)
    cupy.cuda.Device().synchronize()
    t_copy = time.perf_counter() - t0 if made is None else 0.0
    del X
    rec = {"n": n, "d": int(Xg.shape[1]), "generation_s": t_gen, "generated_on": where,
           "host_to_device_s": t_copy, "landmarks": []}
    print(f"n={n}: generated on the {where} in {t_gen:.1f} s", flush=True)
    labels = []
    for p, r, metric in configs:
        out, lab = landmark_run(Xg, y, 10, p, r, metric, seed)
        rec["landmarks"].append(out)
        labels.append(lab)
        save(rec)
    if exact:
        try:
            rec["exact"], lab = exact_run(Xg, y, 10, seed)
            for out, lab_l in zip(rec["landmarks"], labels, strict=True):
                out["ari_vs_exact"] = adjusted_rand_score(lab, lab_l)
                out["speedup_vs_exact"] = rec["exact"]["wall_s"] / out["wall_s"]
        except Exception as exc:  # noqa: BLE001  (recorded: memory, time)
            rec["exact"] = {"error": f"{type(exc).__name__}: {exc}"}
            print("exact failed:", exc, flush=True)
        save(rec)
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("spmm", "pipeline"))
    ap.add_argument("--n", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--p", type=int, nargs="+", default=[1000],
                    help="landmarks (pipeline: each with each --r and metric)")
    ap.add_argument("--r", type=int, nargs="+", default=[5])
    ap.add_argument("--metrics", nargs="+", default=["gaussian", "cosine"])
    ap.add_argument("--widths", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--exact", action="store_true", help="also run the exact pipeline")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="csrc", help="result name (merged into the file)")
    args = ap.parse_args(argv)

    path = result_dir(args.out) / f"{args.out}.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    if args.part == "pipeline":
        configs = [(p, r, m) for p in args.p for r in args.r for m in args.metrics]
        result.setdefault("pipeline", {})
        for n in args.n:
            def save(rec, n=n):
                result["environment"] = environment_info("gpu")
                result["pipeline"][str(n)] = rec
                write_result(args.out, plain(result))
            bench_pipeline(n, args.exact, configs, args.seed, save)
        print(path)
        return 0
    env = environment_info("gpu")
    result["environment"] = env
    nominal, named = nominal_bandwidth(env.get("gpu", {}).get("name", "unknown"))
    measured = measured_bandwidth()
    result["spmm"] = {
        "bandwidth": {"nominal_Bps": nominal, "nominal_source": named,
                      "measured_copy_Bps": measured},
        "protocol": "CUDA events, 1 warm-up, median of --repeats; bytes moved = matrix "
                    "as stored + the n x w dense operand (read or written) + p x w",
        "rows": bench_spmm(args.n, args.p[0], args.r[0], args.widths, args.repeats,
                           {"nominal": nominal, "measured": measured}),
    }
    print(write_result(args.out, plain(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
