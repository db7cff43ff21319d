"""Eigensolver + k-means on the paper's Syn1M / Syn5M graphs: Chebyshev-filtered subspace
iteration against LOBPCG and Lanczos, all in one process.

For each shape: generate the data set (seed 0), build its graph (``method="grid"`` on the
GPU, the CPU's ``"auto"`` on the CPU), form A = D^-1/2 S D^-1/2 on the non-isolated
vertices (timed once, ``laplacian_s``), time one block product A @ Y (b = 8, float32 and
float64; on the GPU in both block layouts), then time each solver variant as
[eigensolver, then unit rows of D^-1/2 V and k-means] — CUDA events on the GPU,
``perf_counter`` on the CPU; one warm-up run excluded (see ``warmup`` per variant), the
median of ``--repeats`` reported with every run. ARI and NMI against the data set's labels
(isolated vertices get label -1), and the float64 residual norms of what each solver
returned.

Variants: ``chebyshev`` (explorer.embedding.chebyshev at its default tolerance; on the GPU
float32 with the row-major block), ``chebyshev-col`` (GPU: column-major block),
``chebyshev-1e-5`` (tighter tolerance); ``lobpcg`` (explorer.embedding.lobpcg, our own
LOBPCG), ``lanczos`` (explorer.embedding.lanczos: ``cupyx``/``scipy`` ``eigsh``), ``lobpcg-cupyx``
/ ``lobpcg-scipy`` (the library LOBPCG, block k + 2, started like ours), ``eigsh-cupyx`` /
``eigsh-scipy`` (the library's Lanczos on A itself, no operator around it: issue 22's
GPU peer), and on the CPU our preconditioned LOBPCGs ``lu`` and ``amg``
(explorer.embedding.lu, explorer.embedding.multigrid) and scikit-learn's two solvers as
its SpectralClustering runs them:
``sklearn-arpack`` (shift-invert ARPACK about 1 on -L_sym) and ``sklearn-amg`` (LOBPCG
with pyamg's smoothed-aggregation preconditioner; only where pyamg is installed). The
GPU shapes: Syn1M, Syn5M, Syn10M (syn4d's ε-graphs), Digits60K (60 000 deformed digits
of 28×28 with their suggested cosine graph) and Moons1M-knn (the kNN graph of two moons,
10⁶ rows), issue 22's list; on the CPU also Circles100K-knn (results/cpu/cpu.json's circles
10⁵ graph, where "auto" takes "amg"). ``--variants`` runs some only. The baselines run
at the tolerance of benchmarks/paper_tables.py (1e-3 on Syn1M, 1e-4 on Syn5M). Past
``--budget`` seconds a baseline's remaining repeats are skipped (recorded as such).

The solvers are called below ``spectral_embedding`` on purpose (the public functions of
the solver modules of ``explorer.embedding`` on one A formed once): the variants compared
here — block layouts, the library LOBPCG, Lanczos without the default's checks — are not
choices ``spectral_embedding`` offers, and forming A per variant would blur the solve
times.

``ours-auto`` is what explorer's embedding runs on the graph: the components'
indicators where it has exactly k components (partition_graph's rule, the count
included in the time), else ``eigen_solver="auto"``'s pick
(explorer.embedding.solvers.resolve_solver), each at its default tolerance; the solver
is recorded. Issue 22's target: ``ours-auto`` no slower than ``eigsh-cupyx`` on every
GPU graph.

Writes ``<out>/<name>.json`` after every shape (default benchmarks/results/eigen/eigen-gpu.json
on the GPU, eigen-cpu.json / eigen-cpu-small.json on the CPU).

Usage::

    python benchmarks/eigen.py       # GPU: Syn1M, Syn5M, Syn10M, Digits60K, Moons1M-knn
    python benchmarks/eigen.py --backend cpu --quick        # CPU smoke test (~30 s)
    python benchmarks/eigen.py --cpu --shapes Moons20K Syn200K --repeats 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, _plain, environment_info  # noqa: E402

from explorer.graph import dataset_params  # noqa: E402

#: name -> data set, size, graph parameters (None: the data set's suggested ones), k,
#: and the tolerance the baselines run at.
SHAPES = {
    "Syn1M": {"data": "syn4d", "n": 1_000_000, "k": 4, "baseline_tol": 1e-3,
              "params": {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0008}},
    "Syn5M": {"data": "syn4d", "n": 5_000_000, "k": 4, "baseline_tol": 1e-4,
              "params": {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0004}},
    # CPU measurements: σ = 0.01 and a threshold giving ~22 nonzeros per row at 2·10⁵
    # (data/_syn4d.py: the mean count scales as n t² in 4-D).
    "Syn200K": {"data": "syn4d", "n": 200_000, "k": 4, "baseline_tol": 1e-4,
                "params": {"metric": "gaussian", "sigma": 0.01, "threshold_sqdist": 0.0018}},
    "Moons20K": {"data": "moons", "n": 20_000, "k": 2, "baseline_tol": 1e-4, "params": None},
    # --small: a smoke test of every code path in about 20 s on two cores.
    "Syn20K": {"data": "syn4d", "n": 20_000, "k": 4, "baseline_tol": 1e-4, "params": None},
    "Moons5K": {"data": "moons", "n": 5_000, "k": 2, "baseline_tol": 1e-4, "params": None},
    # Issue 22's GPU graph: 60 000 digits of 28×28 (MNIST's shape), the data's suggested
    # cosine graph, built by the GPU's "auto" (GEMM tiles); on the CPU the digits.
    "Digits60K": {"data": "infinite-digits", "n": 60_000, "k": 10, "baseline_tol": 1e-4,
                  "params": None, "method": "auto"},
    "Digits": {"data": "digits", "n": None, "k": 10, "baseline_tol": 1e-4, "params": None,
               "method": "auto"},
    # The GPU benchmarks' other graphs (issue 22): syn4d at 10⁷ rows with
    # benchmarks/reorder.py's suggested ε-graph (23 nonzeros per row there), and the
    # kNN graph (n_neighbors=10, self-tuning σ) of two moons at 10⁶ rows.
    "Syn10M": {"data": "syn4d", "n": 10_000_000, "k": 4, "baseline_tol": 1e-4,
               "params": {"metric": "gaussian", "sigma": 0.0056, "threshold_sqdist": 0.00025}},
    "Moons1M-knn": {"data": "moons", "n": 1_000_000, "k": 2, "baseline_tol": 1e-4,
                    "params": {"graph": "knn", "n_neighbors": 10, "sigma": "local",
                               "local_neighbor": 7}, "method": "auto"},
    "Moons5K-knn": {"data": "moons", "n": 5_000, "k": 2, "baseline_tol": 1e-4,
                    "params": {"graph": "knn", "n_neighbors": 10, "sigma": "local",
                               "local_neighbor": 7}, "method": "auto"},
    # The CPU's connected graph of points in the plane (results/cpu/cpu.json's circles 10⁵:
    # noise points bridge the rings; the smallest eigenvalues crowd near 0), where
    # "auto" takes "amg".
    "Circles100K-knn": {"data": "circles", "n": 100_000, "k": 2, "baseline_tol": 1e-4,
                        "params": {"graph": "knn", "n_neighbors": 10, "sigma": "local",
                                   "local_neighbor": 7}, "method": "auto"},
}
GPU_SHAPES = ("Syn1M", "Syn5M", "Syn10M", "Digits60K", "Moons1M-knn")
CPU_SHAPES = ("Moons20K", "Syn200K")
SMALL_SHAPES = ("Moons5K", "Syn20K", "Moons5K-knn")


# ----------------------------------------------------------------------------- timing


class Clock:
    """Marks on the GPU stream (CUDA events) or the host clock; seconds between marks."""

    def __init__(self, xp):
        self.gpu = xp is not np
        if self.gpu:
            import cupy

            self.cupy = cupy

    def mark(self):
        if self.gpu:
            event = self.cupy.cuda.Event()
            event.record()
            return event
        return time.perf_counter()

    def between(self, a, b) -> float:
        if self.gpu:
            b.synchronize()
            return self.cupy.cuda.get_elapsed_time(a, b) / 1e3
        return b - a

    def free(self):
        if self.gpu:
            self.cupy.get_default_memory_pool().free_all_blocks()


# ---------------------------------------------------------------------------- solvers


def variants(xp, gpu: bool, points_dim=None):
    """(label, solver callable, tolerance or None for the shape's baseline tolerance).

    `points_dim`: the dimension of the shape's points, which ``ours-auto``'s rule takes
    as :func:`explorer.partition_graph` gives it."""
    from explorer.embedding import chebyshev as cheb
    from explorer.embedding.lanczos import lanczos_eigenpairs
    from explorer.embedding.linalg import sparse_linalg
    from explorer.embedding.lobpcg import DEFAULT_MAX_ITER, lobpcg_eigenpairs

    sl = sparse_linalg(xp)
    dtype = None  # the solver's default: float32 on the GPU, float64 on the CPU

    def chebyshev(layout, dtype=dtype):
        def solve(A, k, degree, tol, seed):
            checks = []
            mu, V, products, _ = cheb.chebyshev_subspace(
                A, k, tol=tol, random_state=seed, layout=layout, dtype=dtype,
                callback=lambda *a: checks.append(a[0]))
            return xp.asarray(mu), V, {"products": products, "checks": len(checks)}
        return solve

    def lobpcg(A, k, degree, tol, seed):
        rng = np.random.RandomState(seed)
        mu, V, it = lobpcg_eigenpairs(A, k, degree, tol, DEFAULT_MAX_ITER, rng, xp)
        return mu, V, {"iterations": it}

    def lanczos(A, k, degree, tol, seed):
        mu, V, products = lanczos_eigenpairs(A, k, tol, None, np.random.RandomState(seed), xp)
        return mu, V, {"products": products}

    def library_lobpcg(A, k, degree, tol, seed):
        X0 = xp.random.RandomState(seed).standard_normal((A.shape[0], k + 2))
        X0[:, 0] = xp.sqrt(degree)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mu, V = sl.lobpcg(A, X0, tol=tol, maxiter=300, largest=True)
        order = xp.argsort(-mu)[:k]
        return mu[order], V[:, order], {"maxiter": 300}

    def ours(A, k, degree, tol, seed):
        # What explorer's embedding runs on this graph: the components' indicators when
        # it has exactly k components (partition_graph's rule), else eigen_solver="auto"
        # (explorer.embedding.solvers.resolve_solver), at the solver's own default tol.
        # One labelling, as components_embedding does it.
        from explorer.components import component_labels
        from explorer.embedding import solvers
        from explorer.embedding.components import indicator_vectors

        labels = component_labels(A)
        try:
            mu, V = indicator_vectors(labels, k, degree, xp)
        except ValueError:  # not exactly k components
            pass
        else:
            V = V / xp.linalg.norm(V, axis=0)  # the indicators come unscaled
            return mu, V, {"solver": "components"}
        # As spectral_embedding: the CPU's Lanczos attempt on a connected graph.
        used, fallback = solvers.plan_solver("auto", A, k, xp, points_dim=points_dim,
                                             n_components=int(xp.unique(labels).shape[0]))
        return through_solve(used, fallback)(A, k, degree, None, seed)

    def through_solve(used, fallback=None):
        # One of our solvers through the embedding's interface, at its default tol
        # (None) or the one given: "lu" and "amg" (CPU), or what "auto" resolved to.
        def solve(A, k, degree, tol, seed):
            from explorer.embedding import solvers

            pairs = solvers.solve(used, A, k, degree=degree, tol=tol, max_iter=None,
                                  rng=np.random.RandomState(seed), xp=xp, fallback=fallback)
            return pairs.values, pairs.vectors, {"solver": pairs.fell_back_to or used,
                                                 "products": pairs.iterations}
        return solve

    out = [("ours-auto", ours, cheb.DEFAULT_TOL), ("chebyshev", chebyshev("row"), cheb.DEFAULT_TOL)]
    if gpu:
        out.append(("chebyshev-col", chebyshev("col"), cheb.DEFAULT_TOL))
    else:
        out.append(("chebyshev-float32", chebyshev("row", "float32"), cheb.DEFAULT_TOL))
    def library_eigsh(A, k, degree, tol, seed):
        # The library's Lanczos on the matrix itself (no counting operator around it).
        v0 = xp.random.RandomState(seed).standard_normal(A.shape[0])
        mu, V = sl.eigsh(A, k=k, which="LA", tol=tol, v0=v0)
        order = xp.argsort(-mu)
        return mu[order], V[:, order], {}

    def sklearn_arpack(A, k, degree, tol, seed):
        # scikit-learn's eigen_solver="arpack": shift-invert ARPACK about 1 on -L_sym
        # (sklearn/manifold/_spectral_embedding.py), an LU factorisation of L + I first.
        import scipy.sparse as sps
        from scipy.sparse.linalg import eigsh

        L = sps.identity(A.shape[0], format="csr") - A
        v0 = np.random.RandomState(seed).uniform(-1, 1, A.shape[0])
        lam, V = eigsh(-L, k=k, sigma=1.0, which="LM", tol=tol, v0=v0)
        order = np.argsort(-lam)  # -λ descending: the smallest λ of L_sym first
        return 1.0 + lam[order], V[:, order], {}

    def sklearn_amg(A, k, degree, tol, seed):
        # scikit-learn's eigen_solver="amg": LOBPCG on L_sym + 1e-5 I preconditioned
        # by pyamg's smoothed aggregation, block k + 1 started from D^1/2 1.
        import scipy.sparse as sps
        from pyamg import smoothed_aggregation_solver
        from scipy.sparse.linalg import lobpcg as scipy_lobpcg

        L = (sps.identity(A.shape[0], format="csr") * (1 + 1e-5) - A).tocsr()
        M = smoothed_aggregation_solver(L).aspreconditioner()
        X = np.random.RandomState(seed).standard_normal((A.shape[0], k + 1))
        X[:, 0] = np.sqrt(degree)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lam, V = scipy_lobpcg(L, X, M=M, tol=tol, largest=False)
        order = np.argsort(lam)[:k]
        return 1.0 + 1e-5 - lam[order], V[:, order], {}

    out += [
        ("chebyshev-1e-5", chebyshev("row"), 1e-5),
        ("lobpcg", lobpcg, None),
        ("lanczos", lanczos, None),
        ("lobpcg-cupyx" if gpu else "lobpcg-scipy", library_lobpcg, None),
        ("eigsh-cupyx" if gpu else "eigsh-scipy", library_eigsh, None),
    ]
    if not gpu:
        out += [("lu", through_solve("lu"), None), ("amg", through_solve("amg"), None)]
        out.append(("sklearn-arpack", sklearn_arpack, None))
        try:
            import pyamg  # noqa: F401
        except ImportError:
            pass
        else:
            out.append(("sklearn-amg", sklearn_amg, None))
    return out


# ----------------------------------------------------------------------------- shapes


def load_shape(name, backend):
    from explorer import build_graph, data

    spec = SHAPES[name]
    t0 = time.perf_counter()
    ds = data.load(spec["data"], n_samples=spec["n"], random_state=0)
    params = spec["params"] or {key: value for key, value in dataset_params(ds).items()
                                if key != "n_clusters"}
    t1 = time.perf_counter()
    method = spec.get("method") or ("grid" if backend == "gpu" else "auto")
    graph = build_graph(ds.X, method=method, backend=backend, **params)
    t2 = time.perf_counter()
    return ds, params, graph, {"data_s": t1 - t0, "graph_s": t2 - t1, "method": graph.method}


def laplacian(csr, xp):
    """A = D^-1/2 S D^-1/2 on the non-isolated vertices (explorer.embedding.laplacian)."""
    from explorer._csr import row_sums
    from explorer.embedding import laplacian

    S = csr.astype(xp.float64)
    degree = row_sums(S, xp)
    keep = xp.flatnonzero(degree > 0)
    if int(keep.shape[0]) < S.shape[0]:
        S = laplacian.submatrix(S, keep, xp)
        degree = degree[keep]
    dinv = 1.0 / xp.sqrt(degree)
    return laplacian.scale_symmetric(S, dinv, xp), degree, dinv, keep


def product_times(A, xp, clock, gpu):
    """Milliseconds of one A @ Y (b = 8) per precision and layout: the unit of work."""
    from explorer.embedding.chebyshev import ChebyshevBlock

    out = {}
    for dtype in ("float32", "float64"):
        for layout in ("row", "col") if gpu else ("row",):
            ops = ChebyshevBlock(A, xp, np.dtype(dtype), layout, 0)
            Y = ops.random(A.shape[0], 8)
            ops.product(Y)
            runs = []
            for _ in range(10 if gpu else 3):
                a = clock.mark()
                ops.product(Y)
                runs.append(clock.between(a, clock.mark()) * 1e3)
            out[f"{dtype}-{layout}"] = statistics.median(runs)
            del ops, Y
            clock.free()
    return out


def one_run(solve, A, k, degree, dinv, tol, clock, xp):
    from explorer.embedding.linalg import unit_rows
    from explorer.kmeans import KMeans

    a = clock.mark()
    mu, V, info = solve(A, k, degree, tol, 0)
    b = clock.mark()
    U = unit_rows(V * dinv[:, None], xp)
    labels = KMeans(n_clusters=k, random_state=0).fit(U).labels_
    c = clock.mark()
    return clock.between(a, b), clock.between(b, c), (mu, V, labels, info)


def run_variant(label, solve, tol, A, k, degree, dinv, keep, y, clock, xp, args, deadline,
                warm):
    runs, result = [], None
    is_baseline = not label.startswith(("chebyshev", "ours"))
    # A warm-up pays compilation and memory-pool growth; a baseline already run on an
    # earlier shape has compiled everything, and its slow runs are timed directly.
    warmup = args.warmup and not (is_baseline and label in warm)
    if warmup:
        one_run(solve, A, k, degree, dinv, tol, clock, xp)
        clock.free()
    warm.add(label)
    skipped = 0
    for i in range(args.repeats):
        if i and is_baseline and time.perf_counter() > deadline:
            skipped = args.repeats - i
            break
        del result
        eig_s, kmeans_s, result = one_run(solve, A, k, degree, dinv, tol, clock, xp)
        runs.append((eig_s, kmeans_s))
        clock.free()
    mu, V, labels, info = result
    residuals = xp.linalg.norm(A @ V - V * xp.asarray(mu, dtype=V.dtype), axis=0)
    totals = [e + km for e, km in runs]
    return {
        "tol": tol,
        "eig_kmeans_s": statistics.median(totals),
        "eig_s": statistics.median(e for e, _ in runs),
        "kmeans_s": statistics.median(km for _, km in runs),
        "runs_s": [[round(e, 5), round(km, 5)] for e, km in runs],
        "warmup": warmup, "repeats_skipped_for_budget": skipped,
        "ari": score(y, labels, keep, xp, "ari"), "nmi": score(y, labels, keep, xp, "nmi"),
        "eigenvalues": [float(m) for m in _host(mu)],
        "residual_norms": [float(r) for r in _host(residuals)],
        **info,
    }


def score(y, labels, keep, xp, which):
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    pred = np.full(y.shape[0], -1, dtype=np.int64)
    pred[_host(keep)] = _host(labels)
    fn = adjusted_rand_score if which == "ari" else normalized_mutual_info_score
    return round(float(fn(y, pred)), 5)


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def run_shape(name, backend, xp, args, deadline, warm):
    clock = Clock(xp)
    spec = SHAPES[name]
    ds, params, graph, setup = load_shape(name, backend)
    csr = graph.csr
    a = clock.mark()
    A, degree, dinv, keep = laplacian(csr, xp)
    setup["laplacian_s"] = clock.between(a, clock.mark())
    del graph, csr
    clock.free()
    n_kept = int(keep.shape[0])
    result = {
        "data": spec["data"], "n": ds.n, "k": spec["k"], "params": params, **setup,
        "nnz": int(A.nnz), "nnz_per_row": A.nnz / n_kept, "isolated": ds.n - n_kept,
        "product_ms": product_times(A, xp, clock, clock.gpu), "variants": {},
    }
    for label, solve, tol in variants(xp, clock.gpu, points_dim=ds.X.shape[1]):
        if args.variants and label not in args.variants:
            continue
        tol = spec["baseline_tol"] if tol is None else tol
        try:
            res = run_variant(label, solve, tol, A, spec["k"], degree, dinv, keep, ds.y,
                              clock, xp, args, deadline, warm)
        except Exception as exc:  # recorded; the other variants still run
            res = {"tol": tol, "error": f"{type(exc).__name__}: {exc}"}
        clock.free()
        result["variants"][label] = res
        if "error" in res:
            print(f"  {name:9s} {label:18s} ERROR {res['error']}", flush=True)
        else:
            print(f"  {name:9s} {label:18s} eig {res['eig_s']:8.4f} s + k-means "
                  f"{res['kmeans_s']:7.4f} s = {res['eig_kmeans_s']:8.4f} s  ARI {res['ari']:.4f}"
                  f"  max residual {max(res['residual_norms']):.1e}  "
                  f"({res.get('products', res.get('iterations', ''))} products/iterations)",
                  flush=True)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--cpu", action="store_true", help="the same as --backend cpu")
    parser.add_argument("--quick", "--small", dest="small", action="store_true",
                        help=f"the smoke-test shapes {', '.join(SMALL_SHAPES)}, one run each")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES))
    parser.add_argument("--variants", nargs="+",
                        help="only these variants (labels as in the JSON: ours-auto, amg, "
                             "sklearn-amg, ...); default all")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--budget", type=float, default=130.0,
                        help="seconds after which baselines skip their remaining repeats")
    parser.add_argument("--out", type=Path, default=RESULTS / "eigen")
    parser.add_argument("--name")
    args = parser.parse_args(argv)
    args.cpu = args.cpu or args.backend == "cpu"
    backend = "cpu" if args.cpu else "gpu"
    shapes = args.shapes or (SMALL_SHAPES if args.small else CPU_SHAPES if args.cpu
                             else GPU_SHAPES)
    if args.repeats is None:
        args.repeats = 1 if args.small else 3
    args.warmup = not args.small
    name = args.name or (("eigen-gpu-small" if args.small else "eigen-gpu") if not args.cpu
                         else "eigen-cpu-small" if args.small else "eigen-cpu")
    if backend == "gpu":
        import cupy as xp
    else:
        xp = np

    doc = {
        "benchmark": "eigensolver + k-means: Chebyshev subspace iteration vs LOBPCG, Lanczos",
        "environment": environment_info(backend),
        "protocol": {
            "timer": "CUDA events" if backend == "gpu" else "time.perf_counter",
            "timed": "eigensolver on A = D^-1/2 S D^-1/2 (non-isolated vertices), then unit "
                     "rows of D^-1/2 V and explorer KMeans(n_clusters=k, random_state=0)",
            "repeats": args.repeats, "statistic": "median",
            "warmup": "one uncounted run per variant and shape, except baselines already "
                      "run on an earlier shape" if args.warmup else "none (--small)",
            "budget_s": args.budget,
        },
        "shapes": {},
    }
    doc["argv"] = sys.argv[1:] if argv is None else list(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{name}.json"
    started = time.perf_counter()
    deadline = started + args.budget
    warm: set[str] = set()
    for shape in shapes:
        print(f"== {shape}", flush=True)
        try:
            doc["shapes"][shape] = run_shape(shape, backend, xp, args, deadline, warm)
        except Exception as exc:  # recorded; the next shape still runs
            doc["shapes"][shape] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"  ERROR {doc['shapes'][shape]['error']}", flush=True)
        doc["elapsed_s"] = time.perf_counter() - started
        path.write_text(json.dumps(_plain(doc), indent=1, allow_nan=False) + "\n")
    print(f"wrote {path}")
    return 0 if all("error" not in s for s in doc["shapes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
