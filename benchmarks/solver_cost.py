"""Calibration of ``eigen_solver="auto"``'s cost model (explorer.embedding.solvers).

    python benchmarks/solver_cost.py                 # CPU -> results/eigen/solver-cost-cpu.json
    python benchmarks/solver_cost.py --backend gpu   # GPU -> results/eigen/solver-cost-gpu.json

The rule compares two predicted times for the k largest eigenpairs of A (m rows, nnz
stored entries, block of b vectors, :func:`explorer.embedding.chebyshev.default_block`):

* dense: ``c_dense · m³`` (:func:`explorer.embedding.dense.dense_eigenpairs`);
* Chebyshev: ``P · (nnz · (α + β·b) + γ · m · b)``: P block products, each a sparse
  product (α per stored entry, β per entry and block column) and the filter's fused
  update and orthogonalisation (γ per row and block column).

Measured here, on this machine, one process (median of ``--repeats`` after a warm-up):

1. ``dense``: dense_eigenpairs on A of the moons kNN graph at m = 400 ... 2400 rows
   (on the CPU with one BLAS thread, see dense_costs); ``c_dense`` is the
   least-squares fit of t = c m³.
2. ``products`` (for the record): one ``A @ Y`` (float64) for b in 1, 4, 8, 16, 32
   and one filter step of degree 4 on the digits' kNN graph and the kNN and ε-graphs
   of moons 5·10³ (graphs of the sizes where the rule chooses).
3. ``chebyshev``: chebyshev_subspace (default tolerance, k + 1 pairs: the spectrum the
   eigengap reads past k) on the kNN and ε-graphs of moons, circles, blobs at 2·10³
   and 5·10³ rows and the digits: its block products P and seconds. P of the model is
   the median; α, β, γ are the non-negative least-squares fit of each solve's seconds
   per block product (relative error), so that they hold the whole solve's work
   (filter updates and Rayleigh-Ritz too), not the sparse product alone.

The constants that explorer.embedding.solvers uses are this file's fit, restated there
with the date of the run; a run on a quiet machine is what they should come from.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment_info, plain, write_result  # noqa: E402
from eigen import laplacian  # noqa: E402  (A = D^-1/2 S D^-1/2, as eigen.py measures it)

DENSE_SIZES = (400, 800, 1200, 1600, 2000, 2400)
BLOCKS = (1, 4, 8, 16, 32)
#: Graphs of the sizes where the choice is made (past DENSE_MEMORY_MAX_N rows dense is
#: not considered): products cost less per entry on a graph that fits in cache, so
#: constants fitted on 10⁵-row graphs overstate Chebyshev here (7x on the digits).
PRODUCT_GRAPHS = (("digits", None, "knn"), ("moons", 5_000, "knn"), ("moons", 5_000, "epsilon"))
CHEB_GRAPHS = tuple((name, n, kind) for name in ("moons", "circles", "blobs")
                    for n in (2_000, 5_000) for kind in ("knn", "epsilon")) + (
                        ("digits", None, "knn"),)
QUICK_CHEB = (("moons", 2_000, "knn"), ("digits", None, "knn"))


def _sync(xp):
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def timed(fn, xp, repeats):
    fn()
    _sync(xp)
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        _sync(xp)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), out




def graph_of(name, n, kind, backend, xp):
    from explorer import EdgeRule, build_graph, datasets

    ds = datasets.load(name, n_samples=n, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rule = EdgeRule.suggest(ds.X, n_clusters=ds.n_classes, graph=kind)
        csr = build_graph(ds.X, rule, backend=backend).csr
    A, degree, _, _ = laplacian(csr, xp)
    return ds, A, degree


def dense_costs(backend, xp, repeats, sizes):
    from explorer.embedding.dense import dense_eigenpairs

    _, A, _ = graph_of("moons", max(sizes), "knn", backend, xp)
    rows = []
    for m in sizes:
        sub = A[:m][:, :m].tocsr()
        if xp is np:
            # One BLAS thread: on a loaded machine OpenBLAS' threads stall each other
            # (eigh at m = 800 took 9 s with two threads beside 12 busy processes,
            # 0.07 s with one); on a quiet one two threads are no slower than one, so
            # this is the upper bound of the quiet time, as SciPy's sparse products
            # (one thread) are measured.
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1):
                t, _ = timed(lambda sub=sub: dense_eigenpairs(sub, 3, xp), xp, repeats)
        else:
            t, _ = timed(lambda sub=sub: dense_eigenpairs(sub, 3, xp), xp, repeats)
        rows.append({"m": m, "seconds": t})
        print(f"dense m={m:5d} {t:8.4f} s", flush=True)
    m3 = np.array([r["m"] ** 3 for r in rows], dtype=np.float64)
    t = np.array([r["seconds"] for r in rows])
    c = float(m3 @ t / (m3 @ m3))
    return {"rows": rows, "c_dense": c}


def product_costs(backend, xp, repeats, quick):
    from explorer.embedding.chebyshev import ChebyshevBlock

    rows = []
    for name, n, kind in PRODUCT_GRAPHS[:1] if quick else PRODUCT_GRAPHS:
        _, A, _ = graph_of(name, n, kind, backend, xp)
        m, nnz = A.shape[0], int(A.nnz)
        for b in BLOCKS:
            ops = ChebyshevBlock(A, xp, np.dtype("float64"), "row", 0)
            Y = ops.random(m, b)
            Z = ops.random(m, b)
            t_prod, _ = timed(lambda ops=ops, Y=Y: ops.product(Y), xp, repeats)
            # One filter step of degree 4 (4 products and 4 fused updates) minus its
            # products: the per-row work of a step.
            t_filter, _ = timed(lambda ops=ops, Z=Z: ops.filter(Z, 4, 0.5), xp, repeats)
            rows.append({"graph": f"{name}-{n}-{kind}", "m": m, "nnz": nnz, "b": b,
                         "product_s": t_prod, "filter4_s": t_filter})
            print(f"product {name}-{n}-{kind} b={b:2d} {t_prod * 1e3:8.3f} ms, "
                  f"filter(4) {t_filter * 1e3:8.3f} ms", flush=True)
    return {"rows": rows}


def chebyshev_costs(backend, xp, quick):
    from explorer.embedding.chebyshev import chebyshev_subspace, default_block

    rows = []
    for name, n, kind in QUICK_CHEB if quick else CHEB_GRAPHS:
        ds, A, degree = graph_of(name, n, kind, backend, xp)
        k = ds.n_classes + 1
        t0 = time.perf_counter()
        _, _, products, _ = chebyshev_subspace(A, k, random_state=0, v0=xp.sqrt(degree))
        _sync(xp)
        seconds = time.perf_counter() - t0
        rows.append({"graph": f"{name}-{ds.n}-{kind}", "m": A.shape[0], "nnz": int(A.nnz),
                     "k": k, "b": default_block(k, A.shape[0]), "products": products,
                     "seconds": seconds})
        print(f"chebyshev {name}-{ds.n}-{kind} k={k} {products} products {seconds:.3f} s",
              flush=True)
    products = [r["products"] for r in rows]
    # Seconds per block product of the whole solve (products, filter updates, the
    # Rayleigh-Ritz of each outer iteration): nnz α + nnz b β + m b γ, non-negative
    # least squares relative to each solve's time.
    M = np.array([[r["nnz"], r["nnz"] * r["b"], r["m"] * r["b"]] for r in rows], dtype=float)
    t = np.array([r["seconds"] / r["products"] for r in rows])
    alpha, beta, gamma = nnls(M / t[:, None], np.ones_like(t))[0]
    return {"rows": rows, "products_median": float(np.median(products)),
            "products_upper_quartile": float(np.percentile(products, 75)),
            "alpha": float(alpha), "beta": float(beta), "gamma": float(gamma)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--quick", action="store_true", help="smaller graphs (a smoke run)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.backend == "gpu":
        import cupy as xp
    else:
        xp = np
    sizes = DENSE_SIZES[:3] if args.quick else DENSE_SIZES
    t0 = time.perf_counter()
    payload = {
        "benchmark": "solver-cost",
        "command": " ".join(["solver_cost.py"] + (argv if argv is not None else sys.argv[1:])),
        "environment": environment_info(args.backend),
        "dense": dense_costs(args.backend, xp, args.repeats, sizes),
        "products": product_costs(args.backend, xp, args.repeats, args.quick),
        "chebyshev": chebyshev_costs(args.backend, xp, args.quick),
    }
    c = payload["chebyshev"]
    model = []
    for r in payload["chebyshev"]["rows"]:
        step = r["nnz"] * (c["alpha"] + c["beta"] * r["b"]) + c["gamma"] * r["m"] * r["b"]
        model.append({"graph": r["graph"], "measured_s": r["seconds"],
                      "predicted_s": c["products_median"] * step,
                      "predicted_with_its_products_s": r["products"] * step})
    payload["model_check"] = model
    payload["elapsed_s"] = time.perf_counter() - t0
    out = args.out or (f"solver-cost-{args.backend}" + ("-quick" if args.quick else ""))
    print("constants:", {"c_dense": payload["dense"]["c_dense"], "alpha": c["alpha"],
                         "beta": c["beta"], "gamma": c["gamma"],
                         "P": payload["chebyshev"]["products_median"]})
    print("wrote", write_result(out, plain(payload)))


if __name__ == "__main__":
    main()
