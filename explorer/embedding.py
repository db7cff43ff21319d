"""Spectral embedding of a similarity graph: Laplacian, eigensolvers, eigengap.

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
sparse-linear-algebra module differs.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from . import _subspace
from ._backend import array_module, column_norms, sparse_module, to_numpy
from ._csr import (
    block_rows,
    csr_from_arrays,
    matmul,
    rmatmul,
    row_blocks,
    row_slabs,
    row_sums,
    with_values,
)
from ._validation import check_choice, check_float, check_int
from .components import component_labels

SOLVERS = ("auto", "dense", "lanczos", "lobpcg", "chebyshev", "components")

#: ``solver="auto"`` solves densely up to this many (non-isolated) vertices. The dense
#: solver is exact whatever the multiplicities, but its O(n^3) cost overtakes LOBPCG's
#: early: on 2 CPU cores, for ε-graphs of 50-100 nonzeros per row and k = 2..20,
#: dense took 0.1-0.3 s at n = 800 (LOBPCG about the same), 1.6-2.3 s at n = 1500
#: (LOBPCG 0.2-0.8 s) and 3.5-4.9 s at n = 2000 (LOBPCG 0.3-2 s).
DENSE_MAX_N = 1000

#: Default stopping tolerance of the iterative solvers: the residual norm
#: ||A v - μ v|| of each unit eigenvector (||A|| <= 1, so it is also relative). The
#: eigenvalues are then accurate to about tol²/gap (zeros come out below 1e-9), the
#: vectors to about tol/gap. On syn4d, moons, circles and digits graphs, 1e-6 cost
#: LOBPCG 15-30 % more iterations and 1e-4 saved 15-25 %, with the same ARI to four
#: digits. The core paper ran nvGRAPH's LOBPCG at 1e-3 to 1e-4.
DEFAULT_TOL = 1e-5

#: Default LOBPCG iteration limit. Graph Laplacians converge slowly without a
#: preconditioner: up to a few hundred iterations on the graphs we tried.
DEFAULT_LOBPCG_MAX_ITER = 1000

#: Tolerance for a solve whose eigenvalues choose k (``n_clusters="auto"``) when the
#: user gave none. A "zero" eigenvalue comes out near tol²/gap: on Syn1M (gap 2e-3)
#: the Chebyshev solver's default 1e-4 left zeros up to 2.1e-6, above
#: :func:`eigengap_k`'s zero test (1e-6), which could count too few components;
#: 1e-5 keeps them below 1e-7 for about 15 % more products.
EIGENGAP_TOL = 1e-5

#: Upper bound on the eigenpairs ``n_clusters="auto"`` computes before the eigengap
#: heuristic picks k among them.
AUTO_K_MAX = 20



class ConvergenceError(ValueError, RuntimeError):
    """An eigensolver gave up before finding the eigenpairs asked for.

    A ValueError, because the user's settings (``max_iter``, ``tol``, the solver) are
    what to change, and the CLI and the app report ValueErrors as messages; a
    RuntimeError, as SciPy's ``ArpackNoConvergence`` is, for callers catching that.
    """


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
            embedding=_unit_rows(vectors, array_module(vectors)),
            vectors=vectors,
            eigenvalues=self.eigenvalues[:k],
            residual_norms=self.residual_norms[:k],
        )


def isolated_vertices(csr):
    """Boolean mask of the vertices of degree 0 (no edge of positive weight).

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)

    Returns
    -------
    ndarray of bool, shape (n,)
        NumPy or CuPy, like `csr`.
    """
    csr = _check_affinity(csr)
    return row_sums(csr, array_module(csr)) <= 0


def spectral_embedding(
    csr, n_components, *, solver="auto", tol=None, max_iter=None, random_state=None
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
    solver : {"auto", "dense", "lanczos", "lobpcg", "chebyshev", "components"}, default "auto"
        ``"dense"``: full symmetric eigendecomposition of A as a dense matrix (exact;
        for small graphs). ``"lanczos"``: implicitly restarted Lanczos
        (``scipy.sparse.linalg.eigsh`` / ``cupyx.scipy.sparse.linalg.eigsh``,
        ``which="LA"``). ``"lobpcg"``: block LOBPCG for the largest eigenvalues, from
        a seeded random block (our implementation, on NumPy or CuPy; see Notes).
        ``"chebyshev"``: Chebyshev-filtered block subspace iteration
        (:func:`explorer._subspace.chebyshev_subspace`; float32 block products on the
        GPU, float64 Rayleigh-Ritz and residuals). ``"components"``: only for a graph
        with exactly `n_components` connected components among its non-isolated
        vertices, whose k eigenvalues 0 have the components' indicators as
        eigenvectors (exact, no iteration; see Notes). ``"auto"``: dense up to
        :data:`DENSE_MAX_N` non-isolated vertices, Chebyshev beyond.
    tol : float, optional
        Stopping tolerance of the iterative solvers on the residual norm of each unit
        eigenvector; default :data:`DEFAULT_TOL` (Chebyshev:
        :data:`explorer._subspace.DEFAULT_TOL`, 1e-4). Ignored by ``"dense"`` and
        ``"components"``.
    max_iter : int, optional
        Lanczos: maximum number of restarts (SciPy) or Lanczos steps (CuPy), solver
        default when None. LOBPCG: maximum iterations, default
        :data:`DEFAULT_LOBPCG_MAX_ITER`. Ignored by ``"dense"`` and ``"components"``.
    random_state : int, numpy.random.RandomState or None
        Seeds the starting vector (Lanczos) or block (LOBPCG).

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
        on a graph whose number of components is not `n_components`.
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
    connected.

    **LOBPCG.** The block holds ``k + extra`` vectors, ``extra = min(k, max(2, k //
    4))``: convergence of the k-th eigenpair is governed by its gap to eigenvalue
    ``block + 1``, and a few extra vectors turn a tiny gap (a repeated or clustered
    eigenvalue at the edge of the wanted set) into a larger one. SciPy's and CuPy's
    ``lobpcg`` then iterate until the extra vectors have converged too, which is
    the slowest part (5x the iterations on a 100 000-point graph), so the solver here
    is our own LOBPCG that stops on the k wanted pairs alone (see ``_solve_lobpcg``).
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
    csr = _check_affinity(csr)
    check_choice(solver, "solver", SOLVERS)
    tol = check_float(tol, "tol", low=0.0, low_inclusive=False, allow_none=True)
    max_iter = check_int(max_iter, "max_iter", low=1, allow_none=True)
    rng = check_random_state(random_state)
    xp = array_module(csr)
    n = csr.shape[0]

    t0 = _now(xp)
    # float64 values on csr's own index arrays: the one copy of the matrix the stage
    # makes (8 B per nonzero), later scaled in place into A.
    S = with_values(csr, csr.data.astype(xp.float64))
    _check_symmetric(S, xp)
    degree = row_sums(S, xp)
    isolated = degree <= 0
    keep = xp.flatnonzero(~isolated)
    m = int(keep.shape[0])
    if m == 0:
        raise ValueError(
            f"csr has no edge with positive weight: all n={n} vertices are isolated, "
            "nothing can be embedded; use a larger threshold (or sigma)"
        )
    n_components = check_int(n_components, "n_components", low=1, high=m)
    if m < n:
        S = _submatrix(S, keep, xp)
        degree = degree[keep]
    t_checked = _now(xp)
    dinv = 1.0 / xp.sqrt(degree)
    A = _scale_symmetric(S, dinv, xp, inplace=True)
    t1 = _now(xp)

    used = _resolve_solver(solver, m, n_components, xp)
    mu, V, iterations, tol_used = _solve(A, n_components, used, tol, max_iter, degree, rng, xp)
    t2 = _now(xp)

    V = V / column_norms(V, xp)
    residuals = to_numpy(column_norms(matmul(A, V) - V * mu, xp))
    if tol_used is not None and float(residuals.max()) > 2 * tol_used:
        warnings.warn(
            f"eigensolver {used!r} stopped with residual norm {float(residuals.max()):.2e} "
            f"above 2*tol={2 * tol_used:.1e} ({iterations} iterations); raise max_iter, "
            "loosen tol, or try another solver",
            ConvergenceWarning,
            stacklevel=2,
        )
    V = _sign_flip(V, xp)
    U_kept = V * dinv[:, None]
    vectors = xp.full((n, n_components), xp.nan, dtype=xp.float64)
    vectors[keep] = U_kept
    embedding = xp.full((n, n_components), xp.nan, dtype=xp.float64)
    embedding[keep] = _unit_rows(U_kept, xp)
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
    )


def eigengap_k(eigenvalues, k_max=None, *, zero_tol=1e-6, atol=1e-8) -> int:
    """Propose a number of clusters from the eigengap of the Laplacian spectrum.

    With the eigenvalues of L_sym sorted ascending, λ_1 <= λ_2 <= ..., and only the
    first `k_max` considered:

    1. If at least two of them are zero (<= `zero_tol`), the graph has that many
       connected components (outside its isolated vertices) and k is their count z:
       a gap from exactly 0 to a positive λ_{z+1} is infinite in relative terms, and
       no absolute comparison with later gaps should override a disconnection.
    2. Otherwise k is the index of the largest gap λ_{k+1} - λ_k (von Luxburg's
       eigengap heuristic: k well-separated clusters give k eigenvalues near 0 and a
       jump after them).

    Rule 1 matters on elongated clusters (moons, circles): their ε-graphs are
    path-like, with eigenvalues growing like j² inside each cluster, so later gaps
    outgrow the first one and rule 2 alone would pick a large k even when every
    cluster is its own component.

    Parameters
    ----------
    eigenvalues : array-like of shape (m,)
        Eigenvalues of L_sym (any order; NumPy or CuPy).
    k_max : int, optional
        Consider only the `k_max` smallest eigenvalues, 1 <= k_max <= m; default m.
    zero_tol : float, default 1e-6
        Eigenvalues at or below this are zero. A solve at tolerance
        :data:`EIGENGAP_TOL` returns zero eigenvalues below 1e-7 (their error is about
        the squared residual over the gap), while the smallest nonzero eigenvalue of
        an ε-graph on a few hundred thousand points is still above 1e-5.
    atol : float, default 1e-8
        Gaps within `atol` of the largest count as equally large.

    Returns
    -------
    int
        k in [1, k_max]. Under rule 2, ties go to the smallest k; when every gap is
        within `atol` of zero the answer is `k_max`. A single eigenvalue gives 1.

    Raises
    ------
    ValueError
        If `eigenvalues` is empty, not 1-D or not finite, or an argument is out of
        range.
    """
    lam = np.asarray(to_numpy(eigenvalues), dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError(f"eigenvalues must be a non-empty 1-D array; got shape {tuple(lam.shape)}")
    if not np.isfinite(lam).all():
        raise ValueError("eigenvalues must be finite; got NaN or inf")
    k_max = check_int(k_max, "k_max", low=1, high=lam.size, allow_none=True) or lam.size
    zero_tol = check_float(zero_tol, "zero_tol", low=0.0)
    atol = check_float(atol, "atol", low=0.0)
    lam = np.sort(lam)[:k_max]
    zeros = int(np.count_nonzero(lam <= zero_tol))
    if zeros >= 2:
        return zeros
    if lam.size == 1:
        return 1
    gaps = np.diff(lam)
    best = float(gaps.max())
    if best <= atol:
        return int(lam.size)
    return int(np.flatnonzero(gaps >= best - atol)[0]) + 1


def auto_k_max(n_vertices: int) -> int:
    """How many eigenpairs ``n_clusters="auto"`` computes: ``min(20, n_vertices)``."""
    return max(1, min(AUTO_K_MAX, int(n_vertices)))


# --------------------------------------------------------------------------- helpers


def _now(xp) -> float:
    """Wall clock after the GPU (if any) has finished the queued work."""
    if xp is not None and xp is not np:
        xp.cuda.get_current_stream().synchronize()
    return time.perf_counter()


def _linalg_module(xp):
    if xp is np:
        import scipy.sparse.linalg as sl
    else:
        import cupyx.scipy.sparse.linalg as sl
    return sl


def _check_affinity(csr):
    """Validate the similarity matrix and return it as canonical CSR (same device).

    Symmetry is checked later, on the float64 values the embedding computes with. The
    result shares the caller's arrays when they are canonical already (the builders'
    are); otherwise it is a canonical copy with the same index dtype.
    """
    xp = array_module(csr)
    if not sparse_module(xp).issparse(csr):
        raise TypeError(
            "csr must be a scipy.sparse or cupyx.scipy.sparse matrix; "
            f"got {type(csr).__module__}.{type(csr).__name__}"
        )
    if len(csr.shape) != 2 or csr.shape[0] != csr.shape[1] or csr.shape[0] < 2:
        raise ValueError(f"csr must be a square n×n matrix with n >= 2; got shape {csr.shape}")
    csr = csr.tocsr()
    if csr.nnz:
        # min and max propagate NaN and reach ±inf: two reductions, where
        # isfinite(data) would first make a mask of 1 B per nonzero (2.2 GB at 2.2·10⁹).
        low, high = float(csr.data.min()), float(csr.data.max())
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError("csr contains non-finite weights (NaN or inf)")
        if low < 0:
            raise ValueError(
                f"csr has negative weights (min {low:g}); similarity weights must be >= 0 "
                "(with metric='cosine' use threshold_sim >= 0)"
            )
    if not csr.has_canonical_format:
        # Sorted, duplicate-free rows: what cuSPARSE's products require and what lets
        # the passes below share the index arrays. Summed on a copy, so the caller's
        # matrix stays as given; the copy keeps the caller's index dtype, which
        # sum_duplicates may have narrowed.
        fixed = csr.copy()
        fixed.sum_duplicates()
        idx = csr.indices.dtype
        csr = csr_from_arrays(fixed.data, fixed.indices.astype(idx, copy=False),
                              fixed.indptr.astype(idx, copy=False), csr.shape, canonical=True)
    return csr


def _check_symmetric(S, xp) -> None:
    """Randomised symmetry check of a float64 matrix: S r == S^T r for a random r.

    O(nnz) and no transpose is formed; an asymmetric S passes only if the random r
    happens to be orthogonal to the rows of S - S^T, which has probability zero.
    """
    r = xp.random.RandomState(12345).standard_normal(S.shape[0])
    left = matmul(S, r)
    right = rmatmul(S, r)
    scale = float(xp.linalg.norm(left)) or 1.0
    err = float(xp.linalg.norm(left - right))
    if err > 1e-5 * scale:
        raise ValueError(
            f"csr is not symmetric (||S r - S^T r|| / ||S r|| = {err / scale:.2e} for a random "
            "r); a similarity matrix must be symmetric"
        )


def _submatrix(S, keep, xp):
    """S restricted to rows and columns `keep` (ascending vertex ids), canonical, with
    S's index dtype.

    Dropped vertices have degree 0, so their stored entries (if any) are zeros, and so
    are the entries of kept rows in their columns: all are left out. Two passes over
    blocks of rows (count, then fill) keep the scratch to one block whatever nnz is.
    """
    n = S.shape[0]
    m = int(keep.shape[0])
    idx = S.indices.dtype
    new_id = xp.full(n, -1, dtype=idx)
    new_id[keep] = xp.arange(m, dtype=idx)

    if int((S.indptr[keep + 1] - S.indptr[keep]).sum(dtype=xp.int64)) == S.nnz:
        # The kept rows hold every stored entry (the dropped rows store nothing, as
        # the builders' isolated rows): unless a kept row stores an explicit zero in a
        # dropped column, A is S's values with the columns renumbered and the row
        # offsets of the kept rows, one gather pass instead of two compacting ones
        # (those were most of forming A on MNIST-shaped graphs).
        cols = new_id[S.indices]
        if not S.nnz or int(cols.min()) >= 0:
            return csr_from_arrays(S.data, cols, S.indptr[xp.append(keep, n)], (m, m),
                                   canonical=S.has_canonical_format)

    def kept_entries(r0, r1, e0, e1):
        rows = block_rows(S, r0, r1, e0, e1, xp)
        return (new_id[rows] >= 0) & (new_id[S.indices[e0:e1]] >= 0), rows

    counts = xp.zeros(n, dtype=idx)
    for r0, r1, e0, e1 in row_blocks(S.indptr):
        ok, rows = kept_entries(r0, r1, e0, e1)
        rel = rows[ok] - r0
        if rel.shape[0]:  # CuPy's bincount cannot size an empty input
            counts[r0:r1] = xp.bincount(rel, minlength=r1 - r0)
    indptr = xp.zeros(m + 1, dtype=idx)
    indptr[1:] = xp.cumsum(counts[keep], dtype=idx)
    nnz = int(indptr[-1])
    indices = xp.empty(nnz, dtype=idx)
    data = xp.empty(nnz, dtype=S.dtype)
    at = 0
    for r0, r1, e0, e1 in row_blocks(S.indptr):
        ok, _ = kept_entries(r0, r1, e0, e1)
        cols = new_id[S.indices[e0:e1][ok]]
        size = int(cols.shape[0])
        indices[at : at + size] = cols
        data[at : at + size] = S.data[e0:e1][ok]
        at += size
    # Renumbering keeps the order of the columns, so rows stay sorted and distinct.
    return csr_from_arrays(data, indices, indptr, (m, m), canonical=S.has_canonical_format)


def _scale_symmetric(S, dinv, xp, *, inplace=False):
    """A = D^-1/2 S D^-1/2 as a CSR matrix sharing S's index arrays.

    Computed over blocks of rows, so the scratch (row ids, gathered factors) stays near
    :data:`~explorer._csr.ENTRY_BLOCK` entries' worth whatever nnz is. With `inplace`,
    S's own float64 values are overwritten and S is returned: for a matrix whose values
    are the caller's to give up.
    """
    if inplace and S.dtype != xp.float64:
        raise ValueError(f"inplace scaling needs float64 values; got {S.dtype}")
    data = S.data if inplace else xp.empty(S.data.shape, dtype=xp.float64)
    for r0, r1, e0, e1 in row_blocks(S.indptr):
        block = S.data[e0:e1] * dinv[block_rows(S, r0, r1, e0, e1, xp)]
        block *= dinv[S.indices[e0:e1]]
        data[e0:e1] = block
    return S if inplace else with_values(S, data)


def _solve(A, k, used, tol, max_iter, degree, rng, xp):
    """The k largest eigenpairs of A by solver `used`: eigenvalues (device), vectors,
    iterations and the tolerance applied. `degree`: the degrees of A's vertices
    (D^1/2 1 is an exact eigenvector of A for eigenvalue 1, the iterative solvers'
    first start vector)."""
    if used == "dense":
        return _solve_dense(A, k, xp)
    if used == "components":
        return _solve_components(A, k, degree, xp)
    if used == "lanczos":
        tol_used = DEFAULT_TOL if tol is None else tol
        return (*_solve_lanczos(A, k, tol_used, max_iter, rng, xp), tol_used)
    if used == "chebyshev":
        tol_used = _subspace.DEFAULT_TOL if tol is None else tol
        mu, V, iterations, _ = _subspace.chebyshev_subspace(
            A, k, tol=tol_used, max_iter=max_iter,
            random_state=rng.randint(2**31 - 1), v0=xp.sqrt(degree),
        )
        # The eigenvalues come back on the host; V stays on A's device.
        return xp.asarray(mu), V, iterations, tol_used
    tol_used = DEFAULT_TOL if tol is None else tol
    iters = DEFAULT_LOBPCG_MAX_ITER if max_iter is None else max_iter
    return (*_solve_lobpcg(A, k, degree, tol_used, iters, rng, xp), tol_used)


def _resolve_solver(solver: str, m: int, k: int, xp=np) -> str:
    if solver == "auto":
        # Chebyshev-filtered subspace iteration on both backends. On the GPU it needs
        # one host sync per filter instead of LOBPCG's several per iteration (6x
        # faster on Syn1M, benchmarks/results/fast.json); on 2 CPU cores, through
        # SpectralClustering with the same ARI: moons 10⁴ 0.72 s against LOBPCG's
        # 1.3 s, digits 0.29 / 0.36 s, infinite-digits 10⁴ 2.7 / 3.5 s, moons 10⁵ 36 s
        # (ARI 0.985) against 152 s (benchmarks/README.md, "CPU: Chebyshev").
        solver = "dense" if m <= DENSE_MAX_N else "chebyshev"
    if solver == "chebyshev" and m <= k + 1:
        return "dense"
    # ARPACK needs k < m - 1 with room for its Krylov basis; LOBPCG needs m > 5 * block.
    if solver == "lanczos" and k >= m - 2:
        return "dense"
    if solver == "lobpcg" and m <= 5 * (k + _lobpcg_extra(k)):
        return "dense"
    return solver


def _lobpcg_extra(k: int) -> int:
    return min(k, max(2, k // 4))


def _solve_dense(A, k, xp):
    """The k largest eigenpairs of A by a full dense eigendecomposition."""
    M = A.toarray()
    m = M.shape[0]
    mu = None
    if xp is np:
        import scipy.linalg

        # Only the wanted eigenpairs (LAPACK's MRRR driver skips the rest, 2-3x
        # faster); but MRRR may return fewer than asked for inside a tight cluster of
        # eigenvalues, such as the zeros of several components, and then the full
        # decomposition decides.
        mu, V = scipy.linalg.eigh(M, subset_by_index=[m - k, m - 1], driver="evr")
        if mu.shape[0] != k:
            mu = None
    if mu is None:
        mu, V = xp.linalg.eigh(M)
        mu, V = mu[m - k :], V[:, m - k :]
    order = xp.argsort(-mu)
    return mu[order], V[:, order], None, None


def _solve_components(A, k, degree, xp):
    """The eigenpairs of eigenvalue 1 of A when it has exactly k connected components:
    V's column c is D^1/2 times the indicator of component c (components in order of
    their first vertex), exact whatever the gap to the next eigenvalue."""
    found, column = xp.unique(component_labels(A), return_inverse=True)
    n_found = int(found.shape[0])
    if n_found != k:
        raise ValueError(
            f"solver='components' needs exactly n_components={k} connected components "
            f"among the non-isolated vertices, the graph has {n_found}; use another solver"
        )
    m = A.shape[0]
    V = xp.zeros((m, k), dtype=xp.float64)
    V[xp.arange(m), column.ravel()] = xp.sqrt(degree)
    return xp.ones(k, dtype=xp.float64), V, None, None


class _CountingOperator:
    """``A`` as a LinearOperator that counts how many vectors it has been applied to."""

    def __init__(self, A, xp):
        self.A = A
        self._slabs = row_slabs(A)
        self.products = 0
        self.vectors = 0
        sl = _linalg_module(xp)
        self.op = sl.LinearOperator(A.shape, matvec=self._apply, matmat=self._apply, dtype=A.dtype)

    def _apply(self, x):
        self.products += 1
        self.vectors += 1 if x.ndim == 1 else x.shape[1]
        return matmul(self.A, x, self._slabs)


def _solve_lanczos(A, k, tol, max_iter, rng, xp):
    sl = _linalg_module(xp)
    counter = _CountingOperator(A, xp)
    m = A.shape[0]
    v0 = xp.random.RandomState(rng.randint(2**31 - 1)).standard_normal(m)
    # SciPy raises ArpackNoConvergence; CuPy has no such error and stops at maxiter.
    no_convergence = getattr(sl, "ArpackNoConvergence", ())
    try:
        mu, V = sl.eigsh(counter.op, k=k, which="LA", v0=v0, tol=tol, maxiter=max_iter)
    except no_convergence as exc:
        raise ConvergenceError(
            f"Lanczos (ARPACK) did not converge: {len(exc.eigenvalues)} of {k} eigenpairs "
            f"after {counter.vectors} matrix-vector products (max_iter={max_iter}, "
            f"tol={tol:g}); raise max_iter, loosen tol, or use solver='lobpcg'"
        ) from None
    order = xp.argsort(-mu)
    return mu[order], V[:, order], counter.vectors


def _solve_lobpcg(A, k, degree, tol, max_iter, rng, xp):
    """The k largest eigenpairs of A by block LOBPCG (Knyazev 2001), our own.

    SciPy's and CuPy's ``lobpcg`` stop only when *every* block vector has converged,
    the extra ones included, and those converge slowest (their gap to the next
    eigenvalue is the smallest): on a 100 000-point, 4-component graph the wanted 4
    vectors converged in 90 iterations and the 2 extras took 470. Here only the k
    wanted pairs decide when to stop.

    Each iteration: the residuals R = AX - XΘ of the unconverged vectors (soft
    locking) are orthogonalised to X and orthonormalised; Rayleigh-Ritz on the basis
    [X, R, P] (P: the previous search directions, orthonormalised) gives the new X
    and P. One block product with A per iteration (AP is carried along). The small
    Gram eigenproblems go to LAPACK on the host, as CuPy's own Lanczos does; when P
    has become nearly dependent on X and R (the classic LOBPCG breakdown near
    convergence), the step is taken without it.
    """
    m = A.shape[0]
    block = k + _lobpcg_extra(k)
    X = xp.random.RandomState(rng.randint(2**31 - 1)).standard_normal((m, block))
    X[:, 0] = xp.sqrt(degree)
    X = _svqb(X, xp)
    slabs = row_slabs(A)  # once: past 2**30 entries each product goes slab by slab
    AX = matmul(A, X, slabs)
    theta, C, _, _ = _ritz([X], [AX], block, xp)
    X, AX = X @ C, AX @ C
    P = AP = None
    iterations = 0
    while True:
        R = AX - X * xp.asarray(theta)
        residual_norms = to_numpy(column_norms(R, xp))
        if (residual_norms[:k] <= tol).all():
            # AX was carried along through the updates; confirm with a fresh product.
            AX = matmul(A, X, slabs)
            R = AX - X * xp.asarray(theta)
            residual_norms = to_numpy(column_norms(R, xp))
            if (residual_norms[:k] <= tol).all():
                break
            P = AP = None
        if iterations == max_iter:
            break
        iterations += 1
        W = R[:, xp.asarray(residual_norms > tol)]
        W = _svqb(W - X @ (X.T @ W), xp)
        AW = matmul(A, W, slabs)
        basis, images = [X, W], [AX, AW]
        if P is not None:
            P, AP = _svqb(P, xp, AP)
            basis, images = [X, W, P], [AX, AW, AP]
        found = _ritz(basis, images, block, xp)
        if found is None:  # P nearly dependent on [X, W]: restart the directions
            basis, images = [X, W], [AX, AW]
            found = _ritz(basis, images, block, xp)
        theta, C, S, AS = found
        X, AX = S @ C, AS @ C
        P, AP = S[:, block:] @ C[block:], AS[:, block:] @ C[block:]
    return xp.asarray(theta[:k]), X[:, :k], iterations


def _ritz(basis, images, b, xp):
    """The b largest Ritz pairs of A on the span of the blocks in `basis`.

    `images` holds A times each block. Returns the values (host), the coefficients
    (device) and the concatenated S and AS, solving (SᵀAS) c = θ (SᵀS) c; or None
    when SᵀS is too ill-conditioned for that (a block nearly dependent on the others).
    """
    import scipy.linalg

    S, AS = xp.concatenate(basis, axis=1), xp.concatenate(images, axis=1)
    G = to_numpy(S.T @ AS)
    M = to_numpy(S.T @ S)
    M = (M + M.T) / 2
    if np.linalg.eigvalsh(M)[0] < 1e-8 * M.shape[0]:
        return None
    theta, C = scipy.linalg.eigh((G + G.T) / 2, M)
    order = np.argsort(-theta)[:b]
    return theta[order], xp.asarray(C[:, order]), S, AS


def _svqb(W, xp, AW=None):
    """Orthonormalise the columns of W (SVQB: scaled Gram matrix, eigendecomposition),
    dropping directions that are numerically dependent; apply the same transform to
    AW when given. Two passes restore the orthogonality one pass loses to rounding.
    """
    for _ in range(2):
        G = to_numpy(W.T @ W)
        d = np.sqrt(np.clip(np.diag(G), 0, None))
        keep = d > 0
        d_keep = d[keep]
        G = G[np.ix_(keep, keep)] / np.outer(d_keep, d_keep)
        lam, V = np.linalg.eigh((G + G.T) / 2)
        good = lam > 1e-12 * max(float(lam.max(initial=0.0)), 1e-300)
        T = np.zeros((W.shape[1], int(good.sum())))
        T[keep] = (V[:, good] / np.sqrt(lam[good])) / d_keep[:, None]
        T = xp.asarray(T)
        W = W @ T
        if AW is not None:
            AW = AW @ T
    return W if AW is None else (W, AW)


def _sign_flip(V, xp):
    """Make the largest-magnitude entry of each column positive (deterministic signs)."""
    # Over a contiguous (k, n) copy: an axis-0 reduction of the (n, k) array runs in a
    # handful of GPU blocks (see explorer._backend.column_sums).
    rows = xp.argmax(xp.ascontiguousarray(xp.abs(V).T), axis=1)
    signs = xp.sign(V[rows, xp.arange(V.shape[1])])
    signs[signs == 0] = 1
    return V * signs


def _unit_rows(U, xp):
    """Rows scaled to unit length; zero rows stay zero, NaN rows stay NaN."""
    norms = xp.linalg.norm(U, axis=1, keepdims=True)
    return U / xp.where(norms > 0, norms, 1.0)
