"""Which eigensolver runs, and the one interface through which the embedding calls it.

:func:`explorer.embedding.spectral_embedding` resolves the user's ``solver`` with
:func:`resolve_solver` (``"auto"``, and graphs too small for an iterative solver) and
calls :func:`solve`, which applies the solver's defaults and returns
:class:`Eigenpairs` whatever the solver. One module per solver family holds the
algorithm:

==============  ==============================================================
``dense``       :func:`explorer.embedding.dense.dense_eigenpairs`
``lanczos``     :func:`explorer.embedding.lanczos.lanczos_eigenpairs`
``lobpcg``      :func:`explorer.embedding.lobpcg.lobpcg_eigenpairs`
``chebyshev``   :func:`explorer.embedding.chebyshev.chebyshev_subspace`
``lu``          :func:`explorer.embedding.lobpcg.lobpcg_eigenpairs`, preconditioned
                by :func:`explorer.embedding.lu.lu_preconditioner` (CPU only)
``amg``         :func:`explorer.embedding.lobpcg.lobpcg_eigenpairs`, preconditioned by
                :func:`explorer.embedding.multigrid.multigrid_preconditioner` (CPU
                only)
``components``  :func:`explorer.embedding.components.indicator_eigenpairs`
==============  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from threadpoolctl import threadpool_limits

from ..components import count_components
from ..memory import CPU_MEMORY_FRACTION, available_host_bytes
from . import chebyshev, lobpcg, lu, multigrid
from .components import indicator_eigenpairs
from .dense import dense_eigenpairs
from .lanczos import ConvergenceError, lanczos_eigenpairs

__all__ = [
    "DEFAULT_TOL",
    "CPU_COSTS",
    "DENSE_MAX_N",
    "DENSE_MEMORY_MAX_N",
    "LANCZOS_AUTO_RESTARTS",
    "LANCZOS_EDGE_GAP_TOLS",
    "LANCZOS_INNER_GAP_TOLS",
    "SOLVERS",
    "Eigenpairs",
    "SolverCosts",
    "auto_costs",
    "check_solver_backend",
    "components_reason",
    "plan_solver",
    "resolve_solver",
    "solve",
    "solver_reason",
]

SOLVERS = ("auto", "dense", "lanczos", "lobpcg", "chebyshev", "lu", "amg", "components")

#: ``solver="auto"`` solves densely up to this many (non-isolated) vertices where the
#: cost model below does not apply: on the GPU, and where the caller does not give the
#: graph's nonzeros (the distributed fit). The dense solver is exact whatever the
#: multiplicities, but its O(n^3) cost overtakes the iterative ones early.
DENSE_MAX_N = 1000

#: Past this many vertices the CPU cost model does not consider the dense solver: its
#: m × m float64 matrix (and LAPACK's workspace) would take over 300 MB.
DENSE_MEMORY_MAX_N = 6000


@dataclass(frozen=True)
class SolverCosts:
    """The constants of ``solver="auto"``'s cost model on one backend (seconds).

    dense ``c_dense · m³``; Chebyshev ``products · (nnz · (alpha + beta · b) +
    gamma · m · b)`` with b = :func:`explorer.embedding.chebyshev.default_block`.
    """

    #: Dense eigendecomposition, per m³.
    c_dense: float
    #: One sparse block product: per stored entry ...
    alpha: float
    #: ... and per stored entry and block column.
    beta: float
    #: The filter's update of the block, per row and block column.
    gamma: float
    #: Block products of a Chebyshev solve (the calibration's upper quartile).
    products: float
    #: Where the numbers come from.
    source: str

    def dense_seconds(self, m: int) -> float:
        return self.c_dense * float(m) ** 3

    def chebyshev_seconds(self, m: int, k: int, nnz: int) -> float:
        b = chebyshev.default_block(k, m)
        return self.products * (nnz * (self.alpha + self.beta * b) + self.gamma * m * b)


#: Fitted by ``python benchmarks/solver_cost.py`` on 2 CPU cores (one BLAS thread for
#: the dense fit): dense eigendecompositions of 400-2400 rows and Chebyshev's k + 1
#: pairs on 13 small kNN and ε-graphs, `products` their median count. `source` names the
#: committed fit, which a test compares these constants with and ``solver_why`` cites.
CPU_COSTS = SolverCosts(c_dense=7.77e-11, alpha=0.0, beta=6.74e-10, gamma=4.89e-9,
                        products=144.0, source="benchmarks/results/eigen/solver-cost-cpu.json")


#: Default stopping tolerance of the Lanczos and LOBPCG solvers: the residual norm
#: ||A v - μ v|| of each unit eigenvector (||A|| <= 1, so it is also relative). The
#: eigenvalues are then accurate to about tol²/gap (zeros come out below 1e-9), the
#: vectors to about tol/gap. On syn4d, moons, circles and digits graphs, 1e-6 cost
#: LOBPCG 15-30 % more iterations and 1e-4 saved 15-25 %, with the same ARI to four
#: digits. The core paper ran nvGRAPH's LOBPCG at 1e-3 to 1e-4. (Chebyshev has its
#: own, :data:`explorer.embedding.chebyshev.DEFAULT_TOL`.)
DEFAULT_TOL = 1e-5


#: ``"auto"`` on the CPU keeps its Lanczos attempt on a connected graph when the k-th
#: and (k+1)-th largest Ritz values lie at least this many times the tolerance apart:
#: the span of the k vectors, which is what k-means of the unit rows sees (a rotation
#: within it changes no distance), is then accurate to about tol / gap <= 1 %...
LANCZOS_EDGE_GAP_TOLS = 100.0

#: ...and every two of the k at least this many: eigenvalues closer than a few times
#: the tolerance are ones Lanczos cannot tell apart, and may return one copy of, or a
#: mixture (benchmarks/README.md, "The eigensolver's rule"). Mixtures of resolved pairs
#: inside the span are harmless to the clustering.
LANCZOS_INNER_GAP_TOLS = 10.0

#: ARPACK restarts of that attempt: past them the spectrum is crowded and the block
#: solver is the better road (the digits' ε-graph converged in 1-2).
LANCZOS_AUTO_RESTARTS = 20


class Eigenpairs(NamedTuple):
    """What every solver returns through :func:`solve`."""

    #: The k largest eigenvalues μ of A, descending, on A's device.
    values: object
    #: Eigenvectors (m, k), column i for ``values[i]``, on A's device; unit norm except
    #: the components solver's (the caller normalises).
    vectors: object
    #: Lanczos: vectors A was applied to; LOBPCG: iterations; Chebyshev: block
    #: products. None for dense and components.
    iterations: int | None
    #: The stopping tolerance applied; None for dense and components.
    tol: float | None
    #: The solver that gave the pairs when it is not the one asked for ("auto"'s
    #: Lanczos attempt fell back, :func:`solve`'s `fallback`), and why; else None.
    fell_back_to: str | None = None
    why: str | None = None


def resolve_solver(solver: str, m: int, k: int, xp=np, nnz: int | None = None,
                   points_dim: int | None = None, connected: bool | None = None) -> str:
    """The solver that runs for `solver` on a graph of `m` non-isolated vertices.

    Parameters
    ----------
    solver : str
        One of :data:`SOLVERS` (validated by the caller).
    m : int
        Non-isolated vertices.
    k : int
        Eigenpairs wanted, 1 <= k <= m.
    xp : module, default numpy
        The array module of the run.
    nnz : int, optional
        Stored entries of A: with it, ``"auto"`` on the CPU compares the measured
        costs (:func:`auto_costs`).
    points_dim : int, optional
        The dimension of the points the graph was built from, when it was: ``"auto"``
        on the CPU takes ``"amg"`` for points in at most
        :data:`explorer.embedding.lu.LU_MAX_DIM` dimensions.
    connected : bool, optional
        Whether the graph (its non-isolated vertices) is one connected component:
        then ``"auto"`` on the CPU tries Lanczos first (see Notes).

    Returns
    -------
    str
        ``"auto"`` resolved; ``"dense"`` in place of an iterative solver on a graph
        too small for it.

    Raises
    ------
    ValueError
        ``"lu"`` or ``"amg"`` asked for on the GPU.

    Notes
    -----
    ``"auto"`` chooses between the dense solver (exact, O(m³)) and Chebyshev-filtered
    subspace iteration, the fastest iterative solver that finds repeated eigenvalues:

    * **CPU, nnz known**: the one of smaller predicted time by :data:`CPU_COSTS`
      (dense only up to :data:`DENSE_MEMORY_MAX_N`). On 2 cores, through
      SpectralClustering with the same ARI, Chebyshev took 0.72 s on moons 10⁴ against
      LOBPCG's 1.3 s, 0.29 / 0.36 s on the digits (benchmarks/README.md, "CPU:
      Chebyshev"); ARPACK's Lanczos was faster on some graphs but found one zero of
      two to four, so it is never the automatic choice on a graph of several
      components.
    * **GPU, or nnz unknown**: dense up to :data:`DENSE_MAX_N` vertices, Chebyshev
      beyond. On the GPU Chebyshev is the fastest solver that returns every zero (one
      host sync per filter; cupyx's eigsh is faster but finds one zero of several).
      The dense crossover is the CPU's count until ``benchmarks/solver_cost.py
      --backend gpu`` has measured the GPU's.

    * **CPU, graph of points in at most** :data:`~explorer.embedding.lu.LU_MAX_DIM`
      **dimensions, from** :data:`~explorer.embedding.lu.LU_MIN_ROWS` **vertices**:
      ``"amg"``, LOBPCG preconditioned by a two-grid cycle whose coarse graph is
      factored. There the smallest eigenvalues crowd near 0 and Chebyshev's product
      count, which the cost model takes as typical, grows without bound (1025 block
      products, 16.0 s, on circles 10⁵, where "lu" took 6 iterations;
      :mod:`explorer.embedding.lu`). "amg" takes a few more iterations than "lu" but
      forms a third of its factors: 0.42 against 0.68 s there
      (:mod:`explorer.embedding.multigrid`).

    * **CPU, connected graph of more than** :data:`DENSE_MAX_N` **vertices** (not the
      case above): ``"lanczos"``, checked. ARPACK's Lanczos is the fastest solver where
      the spectrum is not crowded (benchmarks/README.md, "The eigensolver's rule"),
      and its two failures are kept out: a repeated eigenvalue 1 (one per component:
      the graph is connected) and pairs closer than its tolerance resolves, which it
      returns mixed or one copy of. :func:`solve` asks it for k + 1 pairs within
      :data:`LANCZOS_AUTO_RESTARTS` restarts and keeps the first k when the k-th and
      (k+1)-th eigenvalues lie at least :data:`LANCZOS_EDGE_GAP_TOLS` × tol apart and
      every two of the k at least :data:`LANCZOS_INNER_GAP_TOLS` × tol; otherwise the
      cost model's solver runs (`fallback`).

    Chebyshev needs ``k < m - 1``, ARPACK ``k < m - 2`` with room for its Krylov
    basis, LOBPCG (and "lu", "amg") ``m > 5 * block``.
    """
    check_solver_backend(solver, xp)
    if solver == "auto":
        solver = _auto(m, k, xp, nnz, points_dim, connected)
    if solver == "chebyshev" and m <= k + 1:
        return "dense"
    if solver == "lanczos" and k >= m - 2:
        return "dense"
    if solver in ("lobpcg", "lu", "amg") and m <= 5 * (k + lobpcg.extra_vectors(k)):
        return "dense"
    return solver


def plan_solver(solver: str, A, k: int, xp=np, points_dim: int | None = None,
                n_components: int | None = None) -> tuple[str, str | None]:
    """:func:`resolve_solver` for the matrix `A`, with the CPU's Lanczos attempt.

    Where ``"auto"`` on the CPU resolves to dense or Chebyshev on more than
    :data:`DENSE_MAX_N` vertices, the graph's components are counted (`n_components`
    when the caller has) and a connected graph is tried with Lanczos first.

    Returns
    -------
    used : str
        The solver to run.
    fallback : str or None
        What runs if the Lanczos attempt fails its check (:func:`solve`'s `fallback`).
    """
    m, nnz = A.shape[0], int(A.nnz)
    used = resolve_solver(solver, m, k, xp, nnz=nnz, points_dim=points_dim)
    if not (solver == "auto" and xp is np and used in ("dense", "chebyshev")
            and _lanczos_candidate(m, k)):
        return used, None
    connected = (count_components(A) if n_components is None else n_components) == 1
    tried = resolve_solver(solver, m, k, xp, nnz=nnz, points_dim=points_dim,
                           connected=connected)
    return tried, (used if tried != used else None)


#: Vectors of m float64 values an iterative solver holds per eigenpair asked for, at
#: most: LOBPCG keeps X, AX, P, AP, R, AR and the Rayleigh-Ritz blocks; Chebyshev its
#: filtered block, the product and the basis; ARPACK about 2k + 1 Lanczos vectors.
ITERATIVE_VECTORS_PER_PAIR = 8


def estimate_bytes(solver: str, m: int, k: int) -> float:
    """Peak bytes of solving for k eigenpairs of an m × m matrix with `solver` (what
    ``solve`` allocates besides the matrix): the dense matrix, its eigenvectors and
    LAPACK's workspace for ``"dense"``; blocks of m-vectors for the iterative ones."""
    if solver == "dense":
        return 3.0 * m * m * 8
    if solver == "components":
        return 2.0 * m * k * 8
    return ITERATIVE_VECTORS_PER_PAIR * float(m) * k * 8 + 4.0 * (3 * k) ** 2 * 8


def check_memory(solver: str, m: int, k: int, xp) -> None:
    """Refuse, before allocating, an eigensolve that will not fit in the memory of the
    device the graph is on (:func:`estimate_bytes`).

    Raises
    ------
    explorer.memory.MemoryEstimateError
    """
    from .. import memory

    need = estimate_bytes(solver, m, k)
    what = f"the {solver} eigensolver for {k} eigenpairs of {m:,} vertices"
    advice = ("ask for fewer eigenpairs (n_clusters, n_eigenpairs)"
              + (" or an iterative solver (eigen_solver='lobpcg')" if solver == "dense" else ""))
    if xp is np:
        memory.check_allocation(need, what, advice)
    else:
        memory.check_gpu_allocation(need, what, advice)


def check_solver_backend(solver: str, xp) -> None:
    """Raise a ValueError for a solver the backend of `xp` does not have ("lu" and
    "amg": the CPU)."""
    if solver in ("lu", "amg") and xp is not np:
        raise ValueError(f"eigen_solver={solver!r} runs on the CPU only (SciPy's SuperLU "
                         "factors); on the GPU use 'auto', 'chebyshev', 'lobpcg' or "
                         "'lanczos', or backend='cpu'")


def auto_costs(m: int, k: int, nnz: int, costs: SolverCosts = CPU_COSTS) -> dict:
    """Predicted seconds of ``{"dense": ..., "chebyshev": ...}`` for k eigenpairs of
    A with `m` rows and `nnz` stored entries (:class:`SolverCosts`); dense is None
    past :data:`DENSE_MEMORY_MAX_N` rows."""
    dense = costs.dense_seconds(m) if m <= DENSE_MEMORY_MAX_N else None
    return {"dense": dense, "chebyshev": costs.chebyshev_seconds(m, k, nnz)}


def _auto(m, k, xp, nnz, points_dim=None, connected=None) -> str:
    if xp is not np or nnz is None:
        return "dense" if m <= DENSE_MAX_N else "chebyshev"
    if _takes_multigrid(m, points_dim, nnz):
        return "amg"
    if connected and _lanczos_candidate(m, k):
        return "lanczos"
    cost = auto_costs(m, k, nnz)
    return "dense" if cost["dense"] is not None and cost["dense"] <= cost["chebyshev"] \
        else "chebyshev"


def _lanczos_candidate(m: int, k: int) -> bool:
    """Whether "auto" on the CPU tries Lanczos on a connected graph of `m` vertices
    for `k` pairs (it asks for k + 1, which ARPACK needs below m - 1)."""
    return m > DENSE_MAX_N and k + 1 < m - 2


def _takes_multigrid(m, points_dim, nnz) -> bool:
    """Whether the CPU's "auto" takes "amg": points of few dimensions, a graph not
    small, and coarse factors estimated to fit in the memory available (bounded by
    those of a graph of A's `nnz` entries: the coarse graph has fewer)."""
    if points_dim is None or points_dim > lu.LU_MAX_DIM or m < lu.LU_MIN_ROWS:
        return False
    available = available_host_bytes()
    return available is None or lu.factor_bytes(nnz) <= CPU_MEMORY_FRACTION * available


def solver_reason(solver: str, used: str, m: int, k: int, xp=np,
                  nnz: int | None = None, points_dim: int | None = None) -> str:
    """Why `used` ran when `solver` was asked for, on `m` vertices, `nnz` stored entries
    and `k` eigenpairs: the sentence :attr:`explorer.embedding.Embedding.solver_why`
    carries."""
    if solver not in ("auto", used):
        if used == "dense":
            return (f"{m} vertices: solved densely (eigen_solver={solver!r} needs more room "
                    f"than k={k} leaves)")
        return f"eigen_solver={solver!r} asked for"
    if solver != "auto":
        return f"eigen_solver={solver!r} asked for"
    if xp is not np or nnz is None:
        if used == "dense":
            return (f"auto: {m} vertices <= {DENSE_MAX_N}: solved densely (exact; the count "
                    "rule of the GPU and of graphs of unknown size)")
        return (f"auto: {m} vertices > {DENSE_MAX_N}: Chebyshev-filtered subspace iteration "
                "(the fastest solver that finds repeated eigenvalues on the GPU, one host "
                "sync per filter)")
    if used == "lanczos":
        return (f"auto: {m} vertices, one connected component: Lanczos (ARPACK), kept "
                f"because its k-th and (k+1)-th eigenvalues lie at least "
                f"{LANCZOS_EDGE_GAP_TOLS:g} × tol apart and its k = {k} at least "
                f"{LANCZOS_INNER_GAP_TOLS:g} × tol (the fastest solver where the spectrum "
                "is not crowded; a connected graph has no repeated eigenvalue 1, which "
                "Lanczos misses)")
    if used == "amg":
        return (f"auto: {m} vertices >= {lu.LU_MIN_ROWS} of points in {points_dim} <= "
                f"{lu.LU_MAX_DIM} dimensions: LOBPCG preconditioned by a two-grid cycle "
                "(the smallest eigenvalues of such graphs crowd near 0, where Chebyshev's "
                "products grow; the sparse LU of the coarse graph stays sparse and is a "
                "third of the whole graph's)")
    cost = auto_costs(m, k, nnz)
    dense = ("not considered (m > "f"{DENSE_MEMORY_MAX_N}: its matrix alone is "
             f"{8 * m * m / 1e9:.1f} GB)" if cost["dense"] is None
             else f"{cost['dense']:.2g} s")
    head = (f"auto: {m} vertices, {nnz} nonzeros, k={k}: predicted dense {dense}, Chebyshev "
            f"{cost['chebyshev']:.2g} s (cost model of {CPU_COSTS.source}): ")
    if used == "dense":
        return head + "solved densely (exact, and cheaper here)"
    return head + ("Chebyshev-filtered subspace iteration (a block method finds repeated "
                   "eigenvalues, which ARPACK's Lanczos misses)")


def components_reason(solver: str, k: int) -> str:
    """Why the components' indicators were the answer when `solver` was asked for."""
    if solver == "components":
        return f"eigen_solver='components' asked for: the k={k} components' indicators"
    return (f"the embedded graph has exactly k={k} components: their indicators are the "
            f"k eigenvectors of eigenvalue 0, exact and without iterations (eigen_solver="
            f"{solver!r} would have to resolve a {k}-fold eigenvalue from the next ones, "
            "which on path-like clusters lie within 1e-6 of it: LOBPCG took 178 "
            "iterations, 40 s, on moons 2·10⁴, and Lanczos found one of the two zeros)")


def solve(solver, A, k, *, degree, tol, max_iter, rng, xp, start=None, rows=None,
          fallback=None) -> Eigenpairs:
    """The k largest eigenpairs of A by the resolved `solver`, with its defaults.

    Parameters
    ----------
    solver : {"dense", "lanczos", "lobpcg", "chebyshev", "components"}
        As :func:`resolve_solver` returns it.
    A : scipy.sparse or cupyx.scipy.sparse CSR matrix of shape (m, m)
        A = D^-1/2 S D^-1/2 on the non-isolated vertices, float64.
    k : int
        Number of eigenpairs.
    degree : float64 ndarray of shape (m,)
        The degrees of A's vertices: D^1/2 1 is an exact eigenvector of A for
        eigenvalue 1, the iterative solvers' first start vector.
    tol : float or None
        Stopping tolerance; None for the solver's default (:data:`DEFAULT_TOL`;
        Chebyshev: :data:`explorer.embedding.chebyshev.DEFAULT_TOL`).
    max_iter : int or None
        Iteration limit; None for the solver's default.
    rng : numpy.random.RandomState
        Each iterative solver draws one seed from it.
    xp : module
        The array module of `A`.
    start : ndarray of shape (m, j), optional
        Known orthonormal eigenvectors of eigenvalue 1 (the components' indicators,
        see :func:`explorer.embedding.spectral_embedding`'s `components`): LOBPCG and
        Chebyshev start their block from them, and Lanczos, which cannot find a
        repeated eigenvalue's copies, returns them without iterating when ``j >= k``
        (otherwise it ignores them). Dense and components ignore them.
    rows : int array of shape (m,), optional
        The original position of each row of `A` when `A` is a reordered graph's
        (:func:`explorer.embedding.start.solver_rows`): the iterative solvers draw
        their random vectors in that order, so the result does not depend on it.
    fallback : str, optional
        With ``solver="lanczos"``: "auto"'s checked attempt (:func:`resolve_solver`,
        Notes). Lanczos is asked for k + 1 pairs within :data:`LANCZOS_AUTO_RESTARTS`
        restarts (`max_iter` ignored); when it does not converge, or its eigenvalues
        are closer than :data:`LANCZOS_EDGE_GAP_TOLS` × tol at the k-th and
        :data:`LANCZOS_INNER_GAP_TOLS` × tol among the k, `fallback` runs instead and
        the result says so (``fell_back_to``, ``why``).

    Returns
    -------
    Eigenpairs
    """
    kwargs = dict(degree=degree, tol=tol, max_iter=max_iter, rng=rng, xp=xp, start=start,
                  rows=rows)
    if solver == "lanczos" and fallback is not None:
        return _checked_lanczos(A, k, fallback, **kwargs)
    return _SOLVE[solver](A, k, **kwargs)


def _checked_lanczos(A, k, fallback, *, degree, tol, max_iter, rng, xp, start, rows):
    asked_tol, tol = tol, DEFAULT_TOL if tol is None else tol
    try:
        mu, V, products = lanczos_eigenpairs(A, k + 1, tol, LANCZOS_AUTO_RESTARTS, rng, xp,
                                             rows)
    except ConvergenceError:
        why = f"it did not converge within {LANCZOS_AUTO_RESTARTS} restarts"
    else:
        gaps = -np.diff(np.asarray(mu))  # gaps[i]: eigenvalue i against i + 1
        edge, inner = float(gaps[k - 1]), float(gaps[: k - 1].min(initial=np.inf))
        if edge >= LANCZOS_EDGE_GAP_TOLS * tol and inner >= LANCZOS_INNER_GAP_TOLS * tol:
            return Eigenpairs(mu[:k], V[:, :k], products, tol)
        if edge < LANCZOS_EDGE_GAP_TOLS * tol:
            why = (f"its k-th and (k+1)-th eigenvalues lie {edge:.2g} apart, under "
                   f"{LANCZOS_EDGE_GAP_TOLS:g} × tol = {LANCZOS_EDGE_GAP_TOLS * tol:.2g}")
        else:
            why = (f"two of its k = {k} eigenvalues lie {inner:.2g} apart, under "
                   f"{LANCZOS_INNER_GAP_TOLS:g} × tol = {LANCZOS_INNER_GAP_TOLS * tol:.2g}")
        why += (f" (a crowded spectrum, whose pairs Lanczos may return mixed; {products} "
                "products spent)")
    pairs = _SOLVE[fallback](A, k, degree=degree, tol=asked_tol, max_iter=max_iter, rng=rng,
                             xp=xp, start=start, rows=rows)
    return pairs._replace(fell_back_to=fallback, why=f"auto tried Lanczos first: {why}")


def _dense(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    if xp is not np:
        return Eigenpairs(*dense_eigenpairs(A, k, xp), None, None)
    # One BLAS thread, as CPU_COSTS.c_dense was measured: on a machine whose cores are
    # busy, OpenBLAS' threads stall each other (eigh at m = 800: 9 s with two threads
    # beside 12 busy processes, 0.07 s with one; the digits' ε-graph, m = 1797, 24 s);
    # on an idle one a second thread saves at most half.
    with threadpool_limits(limits=1, user_api="blas"):
        return Eigenpairs(*dense_eigenpairs(A, k, xp), None, None)


def _components(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    return Eigenpairs(*indicator_eigenpairs(A, k, degree, xp), None, None)


def _lanczos(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    tol = DEFAULT_TOL if tol is None else tol
    if start is not None and start.shape[1] >= k:
        # Every pair asked for is known: nothing is left for the Krylov space to find.
        return Eigenpairs(xp.ones(k, dtype=xp.float64), start[:, :k], 0, tol)
    return Eigenpairs(*lanczos_eigenpairs(A, k, tol, max_iter, rng, xp, rows), tol)


def _lobpcg(A, k, *, degree, tol, max_iter, rng, xp, start, rows, precondition=None):
    tol = DEFAULT_TOL if tol is None else tol
    max_iter = lobpcg.DEFAULT_MAX_ITER if max_iter is None else max_iter
    return Eigenpairs(*lobpcg.lobpcg_eigenpairs(A, k, degree, tol, max_iter, rng, xp,
                                                start=start, rows=rows,
                                                precondition=precondition), tol)


def _chebyshev(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    tol = chebyshev.DEFAULT_TOL if tol is None else tol
    mu, V, products, _ = chebyshev.chebyshev_subspace(
        A, k, tol=tol, max_iter=max_iter,
        random_state=rng.randint(2**31 - 1), v0=xp.sqrt(degree) if start is None else start,
        rows=rows,
    )
    # The eigenvalues come back on the host; V stays on A's device.
    return Eigenpairs(xp.asarray(mu), V, products, tol)


def _lu(A, k, **kwargs):
    return _lobpcg(A, k, precondition=lu.lu_preconditioner(A), **kwargs)


def _amg(A, k, **kwargs):
    return _lobpcg(A, k, precondition=multigrid.multigrid_preconditioner(A, kwargs["degree"]),
                   **kwargs)


_SOLVE = {
    "dense": _dense,
    "lanczos": _lanczos,
    "lobpcg": _lobpcg,
    "chebyshev": _chebyshev,
    "lu": _lu,
    "amg": _amg,
    "components": _components,
}
