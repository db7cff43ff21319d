"""The embedding stage: :func:`spectral_embedding` and its result, :class:`Embedding`.

Given the similarity matrix S (symmetric, non-negative, CSR), the embedding stage

1. drops the isolated vertices (degree 0: they cannot be embedded),
2. forms A = D^-1/2 S D^-1/2 on the rest,
3. computes the k largest eigenpairs (μ, v) of A, which are the k smallest of the
   normalised Laplacian L_sym = I - A (λ = 1 - μ),
4. maps them to the eigenvectors of the random-walk Laplacian, U = D^-1/2 V (the
   advice of von Luxburg that the core paper follows), and
5. scales the rows of U to unit length: the points k-means clusters.

One code path serves NumPy/SciPy and CuPy/cupyx: the array module is the one of the
input matrix (:func:`explorer._backend.array_module`), and only the choice of the
sparse-linear-algebra module differs. Steps 1-2 are :mod:`explorer.embedding.laplacian`,
step 3 one of the solvers behind :func:`explorer.embedding.solvers.solve`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._backend import array_module, column_norms, to_numpy
from .._csr import matmul, row_sums, with_values
from .._validation import check_choice, check_float, check_int, check_random_state
from ..components import component_labels, label_counts
from ..graph.reorder import check_permutation
from . import laplacian, solvers
from .components import indicator_vectors
from .linalg import sign_flip, unit_rows
from .solvers import SOLVERS
from .start import solver_rows

__all__ = ["Embedding", "components_embedding", "spectral_embedding"]


@dataclass
class Embedding:
    """The spectral embedding of a graph and how it was computed.

    Arrays that have one entry per vertex live on the device of the input matrix
    (NumPy or CuPy); the per-eigenpair arrays are small and always NumPy.

    Attributes
    ----------
    embedding : ndarray of shape (n, k)
        Rows of U scaled to unit Euclidean length: the points k-means clusters.
        Rows of isolated vertices are NaN (they have no embedding; a NaN makes any
        accidental use of them fail loudly instead of clustering them at the origin).
        A non-isolated row that is all zero (possible only when the graph has more
        connected components than ``k``) stays zero.
    vectors : ndarray of shape (n, k)
        The raw U = D^-1/2 V, the eigenvectors of L_rw, before row scaling; column i
        belongs to ``eigenvalues[i]``. Each column of V has unit norm and the sign
        that makes its largest-magnitude entry positive. Isolated rows are NaN.
    eigenvalues : numpy.ndarray of shape (k,)
        Eigenvalues of L_sym, ascending (0 once per connected component).
    isolated : ndarray of bool, shape (n,)
        Vertices of degree 0, left out of the eigenproblem.
    solver : {"dense", "lanczos", "lobpcg", "chebyshev", "components"}
        The solver that ran ("auto" resolved; an iterative solver asked for on a graph
        too small for it runs densely).
    iterations : int or None
        Lanczos: matrix-vector products with A (counted through a LinearOperator).
        LOBPCG: iterations (one block product with A each). Dense, components: None.
    residual_norms : numpy.ndarray of shape (k,)
        ||A v - μ v|| of each unit eigenvector, recomputed in float64 after the solver
        returned (not the solver's own estimate).
    tol : float or None
        The stopping tolerance the iterative solver used; None for dense and components.
    timings : dict of str to float
        Seconds per step: ``"laplacian"`` (split into ``"laplacian.check"``: the
        float64 copy, symmetry check, degrees, dropping isolated vertices; and
        ``"laplacian.scale"``: forming A), ``"solve"``, ``"vectors"``, ``"total"``.
    solver_why : str
        Why this solver ran (:func:`explorer.embedding.solvers.solver_reason`,
        :func:`explorer.embedding.solvers.components_reason`).
    """

    embedding: object
    vectors: object
    eigenvalues: np.ndarray
    isolated: object
    solver: str
    iterations: int | None
    residual_norms: np.ndarray
    tol: float | None = None
    timings: dict = field(default_factory=dict)
    solver_why: str = ""

    @property
    def n_components(self) -> int:
        """k, the number of eigenpairs."""
        return int(self.eigenvalues.shape[0])

    def truncate(self, k: int) -> Embedding:
        """The embedding of the first `k` eigenpairs (rows re-scaled to unit length).

        Used after the eigengap heuristic picked ``k`` among more computed eigenpairs.
        The first `k` eigenvectors of a solution for more are a solution for `k`
        (unless eigenvalues ``k`` and ``k + 1`` coincide, where any split is valid).
        """
        k = check_int(k, "k", low=1, high=self.n_components)
        vectors = self.vectors[:, :k]
        return replace(
            self,
            embedding=unit_rows(vectors, array_module(vectors)),
            vectors=vectors,
            eigenvalues=self.eigenvalues[:k],
            residual_norms=self.residual_norms[:k],
        )


def spectral_embedding(
    csr, n_components, *, solver="auto", tol=None, max_iter=None, random_state=None,
    components=None, row_ids=None, points_dim=None,
) -> Embedding:
    """Embed the vertices of a similarity graph with the eigenvectors of its Laplacian.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)
        The similarity matrix S: symmetric, non-negative weights (normally float32
        CSR without a stored diagonal, as :func:`explorer.build_graph` returns it).
        A CuPy matrix keeps the whole computation on its GPU.
    n_components : int
        k, the number of eigenpairs: 1 <= k <= number of non-isolated vertices.
    solver : {"auto", "dense", "lanczos", "lobpcg", "chebyshev", "lu", "amg", \
"components"}, default "auto"
        ``"dense"``: full symmetric eigendecomposition of A as a dense matrix (exact;
        for small graphs). ``"lanczos"``: implicitly restarted Lanczos
        (``scipy.sparse.linalg.eigsh`` / ``cupyx.scipy.sparse.linalg.eigsh``,
        ``which="LA"``). ``"lobpcg"``: block LOBPCG for the largest eigenvalues, from
        a seeded random block (our implementation, on NumPy or CuPy; see Notes).
        ``"chebyshev"``: Chebyshev-filtered block subspace iteration
        (:func:`explorer.embedding.chebyshev.chebyshev_subspace`; float32 block products on the
        GPU, float64 Rayleigh-Ritz and residuals). ``"lu"`` (CPU only): LOBPCG
        preconditioned by the sparse LU factors of L + δI (:mod:`explorer.embedding.lu`;
        for graphs of low-dimensional points, whose factors stay sparse).
        Its factors' memory is not known before they are formed: on graphs of
        high-dimensional data (close to expanders) they fill in towards dense, so
        ``"auto"`` takes it for points in the plane only (fill measured 6-9× the
        graph's entries there, 34-86× for points in space). ``"amg"`` (CPU only):
        LOBPCG preconditioned by a two-grid cycle of aggregation multigrid whose
        coarse graph, a third of the size, is factored
        (:mod:`explorer.embedding.multigrid`): more iterations than "lu", far cheaper
        to set up; the CPU's ``"auto"`` for large graphs of points in the plane.
        ``"components"``: only for a graph
        with exactly `n_components` connected components among its non-isolated
        vertices, whose k eigenvalues 0 have the components' indicators as
        eigenvectors (exact, no iteration; see Notes). ``"auto"``: dense or Chebyshev,
        whichever the measured cost model predicts faster (the GPU: dense up to
        :data:`~explorer.embedding.solvers.DENSE_MAX_N` vertices); on the CPU "amg"
        for a large graph of points in few dimensions (`points_dim`), and a checked
        Lanczos on a connected graph of more than ``DENSE_MAX_N`` vertices (see
        Notes;
        :func:`explorer.embedding.solvers.resolve_solver`).
    tol : float, optional
        Stopping tolerance of the iterative solvers on the residual norm of each unit
        eigenvector; default :data:`~explorer.embedding.solvers.DEFAULT_TOL` (Chebyshev:
        :data:`explorer.embedding.chebyshev.DEFAULT_TOL`, 1e-4). Ignored by ``"dense"`` and
        ``"components"``.
    max_iter : int, optional
        Lanczos: maximum number of restarts (SciPy) or Lanczos steps (CuPy), solver
        default when None. LOBPCG: maximum iterations, default
        :data:`~explorer.embedding.lobpcg.DEFAULT_MAX_ITER`. Chebyshev: budget of block
        products, default :data:`explorer.embedding.chebyshev.DEFAULT_MAX_ITER`.
        Ignored by ``"dense"`` and ``"components"``.
    random_state : int, numpy.random.RandomState or None
        Seeds the starting vector (Lanczos) or block (LOBPCG, Chebyshev).
    components : int array of shape (n,), optional
        The connected component of every vertex, when the caller has labelled them
        (:func:`explorer.partition_graph` has, for a graph with at least k components).
        Their indicators D^1/2 1_c are exact eigenvectors of eigenvalue 1: LOBPCG and
        Chebyshev start from them, and Lanczos returns them without iterating when
        they are all that is asked for (ignored when there are more than
        `n_components` of them). Without them, a graph of exactly k components
        made the iterative solvers resolve a k-fold eigenvalue from the next ones
        (within 1e-6 of it on path-like clusters): LOBPCG took 178 iterations (40 s)
        on moons 2·10⁴ and Lanczos found one of the two zeros.
    row_ids : int array of shape (n,), optional
        When `csr` is a symmetric permutation P S Pᵀ of the user's graph
        (:func:`explorer.graph.reorder.permute`), the user's index of each of its rows
        (:attr:`explorer.graph.reorder.RowOrder.perm`). The random vectors are then
        drawn in the user's order (:mod:`explorer.embedding.start`): each vertex
        starts from what it starts from in the unpermuted solve with the same
        `random_state`, so the embedding, brought back to the user's order, is the
        unpermuted one up to the rounding of the products' summation order, and so are
        the k-means labels after it.
    points_dim : int, optional
        The dimension of the points the graph was built from, for ``solver="auto"``'s
        rule (:func:`explorer.embedding.solvers.resolve_solver`).

    Returns
    -------
    Embedding

    Raises
    ------
    TypeError
        If `csr` is not a SciPy or CuPy sparse matrix.
    ValueError
        If `csr` is not square, has negative or non-finite weights, is not symmetric,
        has no edge at all, or an argument is out of range; or ``solver="components"``
        on a graph whose number of components is not `n_components`; or
        ``solver="lu"`` or ``"amg"`` on a CuPy matrix.
    ConvergenceError
        (A ValueError and a RuntimeError) if SciPy's Lanczos (ARPACK) does not
        converge within `max_iter`.

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        When an iterative solver stops with a residual norm above ``2 * tol``.

    Notes
    -----
    **Repeated eigenvalues.** Eigenvalue 1 of A (0 of L_sym) has the multiplicity of
    the number of connected components, and a clustered graph often has several.
    Single-vector Lanczos builds one Krylov space, which in exact arithmetic holds one
    vector per distinct eigenvalue: it finds the extra copies only through rounding
    and may return a converged but *incomplete* set. On blob graphs with 3 and 6
    components (n = 3000, k = 8) SciPy's ``eigsh`` returned 2 of 3 and 3 of 6 zero
    eigenvalues, all with residuals below 1e-10, and on two-moons graphs with two
    components it found one zero every time, while LOBPCG found them all.
    A block method sees a whole multiplicity at once, which is also why the core paper
    chose nvGRAPH's LOBPCG. Hence ``"auto"`` uses a block method (Chebyshev-filtered
    subspace iteration), and ``"lanczos"`` is best kept for graphs known to be
    connected. On the CPU ``"auto"`` does try it on a graph it finds connected (more
    than :data:`~explorer.embedding.solvers.DENSE_MAX_N` vertices), and keeps its k
    pairs only when the k-th lies well apart from the (k+1)-th and the k from each
    other (:data:`~explorer.embedding.solvers.LANCZOS_EDGE_GAP_TOLS`,
    :data:`~explorer.embedding.solvers.LANCZOS_INNER_GAP_TOLS`); otherwise
    the block method runs and `solver_why` says what Lanczos found
    (:func:`explorer.embedding.solvers.resolve_solver`).

    **LOBPCG.** The block holds ``k + extra`` vectors, ``extra = min(k, max(2, k //
    4))``: convergence of the k-th eigenpair is governed by its gap to eigenvalue
    ``block + 1``, and a few extra vectors turn a tiny gap (a repeated or clustered
    eigenvalue at the edge of the wanted set) into a larger one. SciPy's and CuPy's
    ``lobpcg`` then iterate until the extra vectors have converged too, which is
    the slowest part (5x the iterations on a 100 000-point graph), so the solver here
    is our own LOBPCG that stops on the k wanted pairs alone
    (:func:`explorer.embedding.lobpcg.lobpcg_eigenpairs`).
    The first block vector is D^1/2 1, an exact eigenvector of A for eigenvalue 1
    whatever the components, so one wanted vector is known from the start. No
    preconditioner: the diagonal of L_sym is 1, so Jacobi preconditioning is the
    identity. Graphs with ``n <= 5 * block`` (and Lanczos with k close to n) are
    solved densely instead.

    **Precision.** Everything is float64, on the GPU too: eigenvalues of A near 1
    are often closer together than float32 resolves (1 - 1e-7 rounds to 1), which
    would blur the eigengap and stall convergence. The matrix-vector products are
    memory-bound, so float64 values cost about 1.5x the float32 time.

    **Memory.** Besides `csr`, the stage holds the float64 values of A (8 B per
    nonzero; A shares `csr`'s index arrays, so int64 indices stay int64 and are not
    copied) and, for Chebyshev on the GPU, their float32 copy (4 B per nonzero); the
    passes that need each entry's row work on blocks of :data:`~explorer._csr.ENTRY_BLOCK` entries.
    Isolated vertices cost a matrix without them; when their rows store nothing (as
    the builders' rows do) it shares the values, and only the column indices are
    renumbered into a new array (4 or 8 B per nonzero).

    **Exactly k components.** Then the k smallest eigenvalues of L_sym are 0 and
    the vectors D^1/2 1_c of the components c span their eigenspace, so
    ``solver="components"`` returns those, and the rows of U are constant on each
    component. An iterative solver must instead separate the zeros from the next
    eigenvalues, which on path-like clusters lie within 10⁻⁶ of them: on two moons of
    10⁶ points Chebyshev stopped at its tolerance with the vectors mixed (ARI 0.37,
    benchmarks/README.md). :func:`explorer.partition_graph` (and so
    :class:`explorer.SpectralClustering`) takes this solver under ``"auto"`` when the
    graph it embeds has exactly k components.

    **More components than k.** Then the k smallest eigenvalues are all 0 and any k
    vectors of the span of the component indicators are a valid answer; the
    embedding separates components, not geometry. Raise the threshold (or σ) until
    the graph has at most k components outside the isolated vertices.
    """
    t_start = _now(None)
    csr = laplacian.check_affinity(csr)
    check_choice(solver, "solver", SOLVERS)
    tol = check_float(tol, "tol", low=0.0, low_inclusive=False, allow_none=True)
    max_iter = check_int(max_iter, "max_iter", low=1, allow_none=True)
    rng = check_random_state(random_state)
    if solver == "components":
        return components_embedding(csr, n_components)
    xp = array_module(csr)
    points_dim = check_int(points_dim, "points_dim", low=1, allow_none=True)
    n = csr.shape[0]

    t0 = _now(xp)
    # S (float64) is the one copy of the matrix the stage makes, later scaled in place
    # into A.
    S, degree, isolated, keep = _embedded_vertices(csr, xp)
    m = int(keep.shape[0])
    n_components = check_int(n_components, "n_components", low=1, high=m)
    if m < n:
        S = laplacian.submatrix(S, keep, xp)
        degree = degree[keep]
    rows = None
    if row_ids is not None:  # the solver's rows' ranks in the user's order
        rows = solver_rows(check_permutation(row_ids, n, xp, "row_ids"), keep, xp)
    t_checked = _now(xp)
    dinv = 1.0 / xp.sqrt(degree)
    A = laplacian.scale_symmetric(S, dinv, xp, inplace=True)
    t1 = _now(xp)

    found = None if components is None else int(label_counts(components[keep])[0].shape[0])
    # The CPU's "auto" may try Lanczos first on a connected graph (fallback: the cost
    # model's choice; solvers.resolve_solver, Notes).
    used, fallback = solvers.plan_solver(solver, A, n_components, xp, points_dim=points_dim,
                                         n_components=found)
    solvers.check_memory(used, m, n_components, xp)
    start = None
    if found is not None and found <= n_components:  # more would not fit the block
        start = indicator_vectors(components[keep], found, degree, xp)[1]
        start = start / column_norms(start, xp)
    pairs = solvers.solve(used, A, n_components, degree=degree, tol=tol, max_iter=max_iter,
                          rng=rng, xp=xp, start=start, rows=rows, fallback=fallback)
    mu, V, iterations, tol_used = pairs.values, pairs.vectors, pairs.iterations, pairs.tol
    why = solvers.solver_reason(solver, used, m, n_components, xp, int(A.nnz), points_dim)
    if pairs.fell_back_to is not None:
        used = pairs.fell_back_to
        why = (f"{pairs.why}; then "
               + solvers.solver_reason(solver, used, m, n_components, xp, int(A.nnz),
                                       points_dim))
    t2 = _now(xp)

    embedding, vectors, residuals = finish_eigenvectors(A, mu, V, dinv, keep, n, xp, used,
                                                        iterations, tol_used, stacklevel=3)
    t3 = _now(xp)

    return Embedding(
        embedding=embedding,
        vectors=vectors,
        eigenvalues=1.0 - to_numpy(mu),
        isolated=isolated,
        solver=used,
        iterations=iterations,
        residual_norms=residuals,
        tol=tol_used,
        timings={"laplacian": t1 - t0, "laplacian.check": t_checked - t0,
                 "laplacian.scale": t1 - t_checked, "solve": t2 - t1, "vectors": t3 - t2,
                 "total": t3 - t_start},
        solver_why=why,
    )


def components_embedding(csr, n_components, *, labels=None, kept=None):
    """The embedding of a graph with exactly `n_components` components, without
    forming A: ``solver="components"``'s own path.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)
        The similarity matrix (as :func:`spectral_embedding`).
    n_components : int
        k: the number of components among the vertices embedded.
    labels : int array of shape (n,), optional
        The component label of every vertex (:func:`explorer.components.component_labels`),
        when already found; labelled here otherwise.
    kept : bool array of shape (n,), optional
        Embed only these vertices (a union of whole components:
        :attr:`explorer.components.ComponentSplit.kept`); the others are left out as
        isolated vertices are. All vertices with an edge when None.

    Returns
    -------
    Embedding
        ``solver="components"``; the same eigenpairs as :func:`spectral_embedding`
        with that solver on the graph restricted to `kept`.

    Raises
    ------
    ValueError
        If the embedded vertices do not hold exactly `n_components` components.

    Notes
    -----
    The eigenvectors are D^1/2 1_c (:func:`explorer.embedding.components.indicator_vectors`),
    so nothing of A is needed but its degrees: the path costs the degrees, the
    symmetry check, one labelling (none when `labels` is given) and one product with
    `csr` for the residual norms, where forming A on the restricted graph first cost
    a float64 copy, a second labelling and (with components dropped) a compaction of
    every entry: on moons 10⁵ (2.7·10⁷ nonzeros, 48 components) 6.3 s of the
    embedding's 7.0 s, now about as long as SciPy's ``connected_components`` on it.
    """
    t_start = _now(None)
    csr = laplacian.check_affinity(csr)
    xp = array_module(csr)
    n = csr.shape[0]
    t0 = _now(xp)
    # S (float64) serves the symmetry check and the residuals' product, which would
    # otherwise each widen a copy of their own (cuSPARSE wants one dtype).
    S, degree, isolated, keep = _embedded_vertices(csr, xp, kept)
    m = int(keep.shape[0])
    k = check_int(n_components, "n_components", low=1, high=m)
    degree = degree[keep]
    dinv = 1.0 / xp.sqrt(degree)
    t1 = _now(xp)
    labels = component_labels(csr) if labels is None else labels
    mu, V = indicator_vectors(labels[keep], k, degree, xp)
    t2 = _now(xp)
    A = _ScaledGraph(S, dinv, keep)
    embedding, vectors, residuals = finish_eigenvectors(A, mu, V, dinv, keep, n, xp,
                                                        "components", None, None)
    t3 = _now(xp)
    return Embedding(
        embedding=embedding, vectors=vectors, eigenvalues=1.0 - to_numpy(mu),
        isolated=isolated, solver="components", iterations=None,
        residual_norms=residuals, tol=None,
        timings={"laplacian": t1 - t0, "laplacian.check": t1 - t0, "laplacian.scale": 0.0,
                 "solve": t2 - t1, "vectors": t3 - t2, "total": t3 - t_start},
        solver_why=solvers.components_reason("components", k),
    )


def _embedded_vertices(csr, xp, kept=None):
    """The prologue both embeddings share: ``(S, degree, isolated, keep)``.

    S is `csr`'s values in float64 on its own index arrays (8 B per nonzero: the
    stage's one copy of the matrix), checked symmetric; `degree` its row sums (all n);
    `isolated` the vertices of degree 0, and those outside `kept` when given; `keep`
    the others' indices. A ValueError when nothing is left to embed.
    """
    S = with_values(csr, csr.data.astype(xp.float64))
    laplacian.check_symmetric(S, xp)
    degree = row_sums(S, xp)
    isolated = degree <= 0
    if kept is not None:
        isolated |= ~kept
    keep = xp.flatnonzero(~isolated)
    if keep.shape[0] == 0:
        raise ValueError(
            f"csr has no edge with positive weight: all n={csr.shape[0]} vertices are "
            "isolated, nothing can be embedded; use a larger threshold (or sigma)"
        )
    return S, degree, isolated, keep


class _ScaledGraph:
    """A = D^-1/2 S D^-1/2 on the vertices `keep` as an operator (``A @ X``) over `S`
    itself: the residual norms of :func:`components_embedding` without forming A. The
    vertices left out have no edge to the kept ones (isolated, or whole components)."""

    def __init__(self, S, dinv, keep):
        self.S, self.dinv, self.keep = S, dinv, keep
        self.shape = (int(keep.shape[0]),) * 2

    def __matmul__(self, X):
        xp = array_module(X)
        scale = self.dinv if X.ndim == 1 else self.dinv[:, None]
        full = xp.zeros((self.S.shape[0],) + tuple(X.shape[1:]), dtype=xp.float64)
        full[self.keep] = X * scale
        return matmul(self.S, full)[self.keep] * scale


def finish_eigenvectors(A, mu, V, dinv, keep, n, xp, solver, iterations, tol,
                        *, stacklevel=2, residuals=None):
    """From the solver's eigenpairs of A to the embedding's arrays: unit columns, the
    float64 residual norms (with a warning above ``2 * tol``), signs fixed, U = D^-1/2 V
    and its unit rows, NaN rows for the vertices left out.

    Parameters
    ----------
    A : CSR matrix or operator of shape (m, m)
        Anything :func:`explorer._csr.matmul` multiplies (the distributed row-block
        operator too).
    mu : ndarray of shape (k,)
    V : ndarray of shape (m, k)
    dinv : float64 ndarray of shape (m,)
    keep : int ndarray of shape (m,)
        The vertex of each row of A among the `n`.
    n : int
    xp : module
        The array module of V.
    solver : str
    iterations : int or None
    tol : float or None
        The tolerance the solver used (None: no warning).
    residuals : ndarray of shape (k,), optional
        The float64 residual norms of V's (orthonormal) columns when the solver
        measured them where A is (the workers' resident solve): then A is not used.

    Returns
    -------
    embedding, vectors : ndarrays of shape (n, k)
    residuals : numpy.ndarray of shape (k,)
    """
    k = V.shape[1]
    V = V / column_norms(V, xp)
    if residuals is None:
        residuals = to_numpy(column_norms(matmul(A, V) - V * mu, xp))
    residuals = np.asarray(residuals, dtype=np.float64)
    if tol is not None and float(residuals.max()) > 2 * tol:
        warnings.warn(
            f"eigensolver {solver!r} stopped with residual norm {float(residuals.max()):.2e} "
            f"above 2*tol={2 * tol:.1e} ({iterations} iterations); raise max_iter, "
            "loosen tol, or try another solver",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )
    V = sign_flip(V, xp)
    U_kept = V * dinv[:, None]
    vectors = xp.full((n, k), xp.nan, dtype=xp.float64)
    vectors[keep] = U_kept
    embedding = xp.full((n, k), xp.nan, dtype=xp.float64)
    embedding[keep] = unit_rows(U_kept, xp)
    return embedding, vectors, residuals


def _now(xp) -> float:
    """Wall clock after the GPU (if any) has finished the queued work."""
    if xp is not None and xp is not np:
        xp.cuda.get_current_stream().synchronize()
    return time.perf_counter()
