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
``components``  :func:`explorer.embedding.components.indicator_eigenpairs`
==============  ==============================================================
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import chebyshev, lobpcg
from .components import indicator_eigenpairs
from .dense import dense_eigenpairs
from .lanczos import lanczos_eigenpairs

__all__ = [
    "DEFAULT_TOL",
    "DENSE_MAX_N",
    "SOLVERS",
    "Eigenpairs",
    "components_reason",
    "resolve_solver",
    "solve",
    "solver_reason",
]

SOLVERS = ("auto", "dense", "lanczos", "lobpcg", "chebyshev", "components")

#: ``solver="auto"`` solves densely up to this many (non-isolated) vertices. The dense
#: solver is exact whatever the multiplicities, but its O(n^3) cost overtakes LOBPCG's
#: early: on 2 CPU cores, for ε-graphs of 50-100 nonzeros per row and k = 2..20,
#: dense took 0.1-0.3 s at n = 800 (LOBPCG about the same), 1.6-2.3 s at n = 1500
#: (LOBPCG 0.2-0.8 s) and 3.5-4.9 s at n = 2000 (LOBPCG 0.3-2 s).
DENSE_MAX_N = 1000

#: Default stopping tolerance of the Lanczos and LOBPCG solvers: the residual norm
#: ||A v - μ v|| of each unit eigenvector (||A|| <= 1, so it is also relative). The
#: eigenvalues are then accurate to about tol²/gap (zeros come out below 1e-9), the
#: vectors to about tol/gap. On syn4d, moons, circles and digits graphs, 1e-6 cost
#: LOBPCG 15-30 % more iterations and 1e-4 saved 15-25 %, with the same ARI to four
#: digits. The core paper ran nvGRAPH's LOBPCG at 1e-3 to 1e-4. (Chebyshev has its
#: own, :data:`explorer.embedding.chebyshev.DEFAULT_TOL`.)
DEFAULT_TOL = 1e-5


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


def resolve_solver(solver: str, m: int, k: int, xp=np) -> str:
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
        The array module of the run (both backends choose alike).

    Returns
    -------
    str
        ``"auto"`` resolved; ``"dense"`` in place of an iterative solver on a graph
        too small for it.

    Notes
    -----
    ``"auto"`` is dense up to :data:`DENSE_MAX_N` vertices and Chebyshev-filtered
    subspace iteration beyond, on both backends. On the GPU it needs one host sync per
    filter instead of LOBPCG's several per iteration (6x faster on Syn1M,
    benchmarks/results/fast.json); on 2 CPU cores, through SpectralClustering with the
    same ARI: moons 10⁴ 0.72 s against LOBPCG's 1.3 s, digits 0.29 / 0.36 s,
    infinite-digits 10⁴ 2.7 / 3.5 s, moons 10⁵ 36 s (ARI 0.985) against 152 s
    (benchmarks/README.md, "CPU: Chebyshev"). Chebyshev needs ``k < m - 1``, ARPACK
    ``k < m - 2`` with room for its Krylov basis, LOBPCG ``m > 5 * block``.
    """
    if solver == "auto":
        solver = "dense" if m <= DENSE_MAX_N else "chebyshev"
    if solver == "chebyshev" and m <= k + 1:
        return "dense"
    if solver == "lanczos" and k >= m - 2:
        return "dense"
    if solver == "lobpcg" and m <= 5 * (k + lobpcg.extra_vectors(k)):
        return "dense"
    return solver


def solver_reason(solver: str, used: str, m: int, k: int) -> str:
    """Why `used` ran when `solver` was asked for, on `m` vertices and `k` eigenpairs:
    the sentence :attr:`explorer.embedding.Embedding.solver_why` carries."""
    if used == "dense" and solver != "dense":
        return (f"{m} vertices: solved densely (exact; an iterative solver pays off above "
                f"{DENSE_MAX_N} vertices or needs more room than k={k} leaves)")
    if solver != "auto":
        return f"eigen_solver={solver!r} asked for"
    return (f"auto: {m} vertices > {DENSE_MAX_N}, graph not known to have exactly k={k} "
            "components: Chebyshev-filtered subspace iteration (a block method finds "
            "repeated eigenvalues; fewest host syncs on the GPU)")


def components_reason(solver: str, k: int) -> str:
    """Why the components' indicators were the answer when `solver` was asked for."""
    if solver == "components":
        return f"eigen_solver='components' asked for: the k={k} components' indicators"
    return (f"the embedded graph has exactly k={k} components: their indicators are the "
            f"k eigenvectors of eigenvalue 0, exact and without iterations (eigen_solver="
            f"{solver!r} would have to resolve a {k}-fold eigenvalue from the next ones, "
            "which on path-like clusters lie within 1e-6 of it: LOBPCG took 178 "
            "iterations, 40 s, on moons 2·10⁴, and Lanczos found one of the two zeros)")


def solve(solver, A, k, *, degree, tol, max_iter, rng, xp, start=None, rows=None) -> Eigenpairs:
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

    Returns
    -------
    Eigenpairs
    """
    return _SOLVE[solver](A, k, degree=degree, tol=tol, max_iter=max_iter, rng=rng, xp=xp,
                          start=start, rows=rows)


def _dense(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    return Eigenpairs(*dense_eigenpairs(A, k, xp), None, None)


def _components(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    return Eigenpairs(*indicator_eigenpairs(A, k, degree, xp), None, None)


def _lanczos(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    tol = DEFAULT_TOL if tol is None else tol
    if start is not None and start.shape[1] >= k:
        # Every pair asked for is known: nothing is left for the Krylov space to find.
        return Eigenpairs(xp.ones(k, dtype=xp.float64), start[:, :k], 0, tol)
    return Eigenpairs(*lanczos_eigenpairs(A, k, tol, max_iter, rng, xp, rows), tol)


def _lobpcg(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    tol = DEFAULT_TOL if tol is None else tol
    max_iter = lobpcg.DEFAULT_MAX_ITER if max_iter is None else max_iter
    return Eigenpairs(*lobpcg.lobpcg_eigenpairs(A, k, degree, tol, max_iter, rng, xp,
                                                start=start, rows=rows), tol)


def _chebyshev(A, k, *, degree, tol, max_iter, rng, xp, start, rows):
    tol = chebyshev.DEFAULT_TOL if tol is None else tol
    mu, V, products, _ = chebyshev.chebyshev_subspace(
        A, k, tol=tol, max_iter=max_iter,
        random_state=rng.randint(2**31 - 1), v0=xp.sqrt(degree) if start is None else start,
        rows=rows,
    )
    # The eigenvalues come back on the host; V stays on A's device.
    return Eigenpairs(xp.asarray(mu), V, products, tol)


_SOLVE = {
    "dense": _dense,
    "lanczos": _lanczos,
    "lobpcg": _lobpcg,
    "chebyshev": _chebyshev,
    "components": _components,
}
