"""The matrix the eigensolvers work on: A = D^-1/2 S D^-1/2 without the isolated vertices.

:func:`explorer.embedding.spectral_embedding` validates the similarity matrix S
(:func:`check_affinity`, :func:`check_symmetric`), finds the isolated vertices (degree
0, :func:`isolated_vertices`), restricts S to the others (:func:`submatrix`) and scales
it symmetrically by the degrees (:func:`scale_symmetric`). The k largest eigenpairs
of A are the k smallest of the normalised Laplacian L_sym = I - A.

Every function takes SciPy or cupyx matrices and works on their device; the passes
that need each entry's row go over blocks of rows (:func:`explorer._csr.row_blocks`),
so their scratch stays near :data:`~explorer._csr.ENTRY_BLOCK` entries whatever nnz
is, and index arrays keep their dtype (int64 stays int64, and is shared, not copied).
"""

from __future__ import annotations

import math

import numpy as np

from .._backend import array_module, sparse_module
from .._csr import block_rows, csr_from_arrays, matmul, rmatmul, row_blocks, row_sums, with_values

__all__ = [
    "check_affinity",
    "check_symmetric",
    "isolated_vertices",
    "scale_symmetric",
    "submatrix",
]


def isolated_vertices(csr):
    """Boolean mask of the vertices of degree 0 (no edge of positive weight).

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)

    Returns
    -------
    ndarray of bool, shape (n,)
        NumPy or CuPy, like `csr`.

    Raises
    ------
    TypeError, ValueError
        As :func:`check_affinity`.

    Notes
    -----
    An explicitly stored zero weight (a gaussian weight that underflowed in float32)
    is no edge: such a vertex has degree 0 and is isolated.
    """
    csr = check_affinity(csr)
    return row_sums(csr, array_module(csr)) <= 0


def check_affinity(csr):
    """Validate a similarity matrix and return it as canonical CSR on the same device.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)

    Returns
    -------
    CSR matrix
        `csr` itself (its arrays shared) when it is canonical CSR already, as the
        builders' matrices are; otherwise a canonical copy with the same index dtype.

    Raises
    ------
    TypeError
        If `csr` is not a SciPy or CuPy sparse matrix.
    ValueError
        If `csr` is not square with n >= 2, or has non-finite or negative weights.

    Notes
    -----
    Symmetry is checked later (:func:`check_symmetric`), on the float64 values the
    embedding computes with. Finiteness is checked by two reductions (min and max
    propagate NaN and reach ±inf), where ``isfinite(data)`` would first make a mask of
    1 B per nonzero (2.2 GB at 2.2·10⁹). A non-canonical matrix is summed on a copy,
    so the caller's matrix stays as given; SciPy's ``sum_duplicates`` may narrow int64
    indices, and the copy is widened back.
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
        # the passes below share the index arrays.
        fixed = csr.copy()
        fixed.sum_duplicates()
        idx = csr.indices.dtype
        csr = csr_from_arrays(fixed.data, fixed.indices.astype(idx, copy=False),
                              fixed.indptr.astype(idx, copy=False), csr.shape, canonical=True)
    return csr


def check_symmetric(S, xp) -> None:
    """Randomised symmetry check of a float64 matrix: S r == S^T r for a random r.

    Parameters
    ----------
    S : float64 CSR matrix of shape (n, n)
    xp : module
        The array module of `S` (numpy or cupy).

    Raises
    ------
    ValueError
        If ``||S r - S^T r|| > 1e-5 ||S r||``.

    Notes
    -----
    O(nnz) and no transpose is formed; an asymmetric S passes only if the random r
    (seeded: the same r every call) happens to be orthogonal to the rows of S - S^T,
    which has probability zero.
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


def submatrix(S, keep, xp):
    """S restricted to the rows and columns `keep`: the matrix without isolated vertices.

    Parameters
    ----------
    S : CSR matrix of shape (n, n)
        Canonical or not; its index dtype is kept.
    keep : int ndarray of shape (m,)
        Ascending vertex ids, on S's device; every vertex left out has degree 0.
    xp : module
        The array module of `S`.

    Returns
    -------
    CSR matrix of shape (m, m)
        Canonical when S is; S's index dtype.

    Notes
    -----
    Dropped vertices have degree 0, so their stored entries (if any) are zeros, and so
    are the entries of kept rows in their columns: all are left out. When the kept
    rows hold every stored entry (the builders' isolated rows store nothing) and no
    kept row stores an explicit zero in a dropped column, the result is S's values with
    the columns renumbered and the row offsets of the kept rows: one gather pass that
    shares the values, instead of two compacting ones (those were most of forming A on
    MNIST-shaped graphs). On the CPU, when kept rows store nothing in dropped columns
    (whole components dropped, :func:`explorer.components.restrict_to`), the kept rows'
    entries are gathered in one pass (a mask of 1 B per entry). Otherwise two passes
    over blocks of rows (count, then fill) keep the scratch to one block whatever nnz is.
    """
    n = S.shape[0]
    m = int(keep.shape[0])
    idx = S.indices.dtype
    new_id = xp.full(n, -1, dtype=idx)
    new_id[keep] = xp.arange(m, dtype=idx)

    if int((S.indptr[keep + 1] - S.indptr[keep]).sum(dtype=xp.int64)) == S.nnz:
        cols = new_id[S.indices]
        if not S.nnz or int(cols.min()) >= 0:
            return csr_from_arrays(S.data, cols, S.indptr[xp.append(keep, n)], (m, m),
                                   canonical=S.has_canonical_format)

    if xp is np:
        # Kept rows that store nothing in a dropped column (dropped whole components,
        # whose rows hold explicit zeros): a gather of the kept rows' entries. On moons
        # 10⁵ with 46 components dropped (2.7·10⁷ entries) the two block passes below
        # took 4.3 s.
        lengths = np.diff(S.indptr)
        entry_kept = np.repeat(new_id >= 0, lengths)
        cols = new_id[S.indices[entry_kept]]
        if not cols.size or int(cols.min()) >= 0:
            indptr = np.zeros(m + 1, dtype=idx)
            np.cumsum(lengths[keep], out=indptr[1:])
            return csr_from_arrays(S.data[entry_kept], cols, indptr, (m, m),
                                   canonical=S.has_canonical_format)
        del entry_kept, cols

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


def scale_symmetric(S, dinv, xp, *, inplace=False):
    """A = D^-1/2 S D^-1/2 as a CSR matrix sharing S's index arrays.

    Parameters
    ----------
    S : CSR matrix of shape (m, m)
    dinv : float64 ndarray of shape (m,)
        The diagonal of D^-1/2 (1 / sqrt of the degrees), on S's device.
    xp : module
        The array module of `S`.
    inplace : bool, default False
        Overwrite S's own values (which must be float64) and return S: for a matrix
        whose values are the caller's to give up.

    Returns
    -------
    float64 CSR matrix of shape (m, m)

    Raises
    ------
    ValueError
        If `inplace` and S's values are not float64.

    Notes
    -----
    Computed over blocks of rows, so the scratch (row ids, gathered factors) stays near
    :data:`~explorer._csr.ENTRY_BLOCK` entries' worth whatever nnz is.
    """
    if inplace and S.dtype != xp.float64:
        raise ValueError(f"inplace scaling needs float64 values; got {S.dtype}")
    data = S.data if inplace else xp.empty(S.data.shape, dtype=xp.float64)
    for r0, r1, e0, e1 in row_blocks(S.indptr):
        if xp is np:  # each row's factor repeated along it: no row ids, no gather
            row_factor = np.repeat(dinv[r0:r1], np.diff(S.indptr[r0 : r1 + 1]))
        else:
            row_factor = dinv[block_rows(S, r0, r1, e0, e1, xp)]
        block = S.data[e0:e1] * row_factor
        block *= dinv[S.indices[e0:e1]]
        data[e0:e1] = block
    return S if inplace else with_values(S, data)
