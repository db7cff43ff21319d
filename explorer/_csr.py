"""CSR matrices that share index arrays, and passes over them in blocks of rows.

At 2.2·10⁹ nonzeros with int64 indices a copy of the index arrays is 17.7 GB and any
per-entry temporary (a row id, a gathered factor) another 17.7 GB: the helpers here
widen or replace values without copying indices, and let a pass visit the entries a
block of rows at a time, so its scratch stays bounded whatever nnz is.
"""

from __future__ import annotations

import numpy as np

from ._backend import array_module, sparse_module

#: Stored entries per block of the passes that need each entry's row (forming
#: A = D^-1/2 S D^-1/2, dropping isolated vertices): a block's scratch (int64 row ids,
#: gathered float64 factors, ~40 B an entry) stays near 1.3 GB whatever nnz is, where
#: whole-matrix temporaries would be several copies of the matrix (at 2.2·10⁹ nonzeros,
#: 17.7 GB each). A 2.2·10⁹-nonzero graph takes 67 blocks.
ENTRY_BLOCK = 1 << 25

#: Most stored entries one sparse product is handed: cuSPARSE's SpMV failed with
#: CUSPARSE_STATUS_INTERNAL_ERROR on a matrix of 2.2·10⁹ nonzeros with int64 indices
#: (CuPy 14.2, CUDA 13), while products over row blocks of the same matrix succeeded;
#: :func:`matmul` multiplies larger matrices a slab of rows at a time (3 slabs at
#: 2.2·10⁹), smaller ones in one call.
PRODUCT_MAX_ENTRIES = 1 << 30


def csr_from_arrays(data, indices, indptr, shape, *, canonical):
    """A CSR matrix holding these very arrays: no copy, and the index dtype kept.

    SciPy's and CuPy's constructors (and ``astype``, ``copy``, ``transpose``, which go
    through them) narrow int64 index arrays whose values fit in int32, copying them;
    a matrix assembled here keeps int64 indices int64 and shares them.

    Parameters
    ----------
    data, indices, indptr : ndarray
        NumPy or CuPy (the array module picks SciPy or cupyx), 1-D, a valid CSR.
    shape : tuple of int
    canonical : bool
        Whether the columns of each row are sorted and distinct; recorded, not
        checked (cuSPARSE products require it and would otherwise check it).

    Returns
    -------
    scipy.sparse.csr_matrix or cupyx.scipy.sparse.csr_matrix
    """
    sp = sparse_module(array_module(data))
    out = sp.csr_matrix(tuple(shape), dtype=data.dtype)
    out.data, out.indices, out.indptr = data, indices, indptr
    out.has_canonical_format = bool(canonical)
    return out


def with_values(A, data):
    """The CSR matrix of `A`'s sparsity pattern (its own index arrays) with values `data`.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse CSR matrix
    data : ndarray of shape (A.nnz,)
        Same array module as `A`, any float dtype; used as is (not copied).

    Returns
    -------
    scipy.sparse.csr_matrix or cupyx.scipy.sparse.csr_matrix
        Shares ``A.indices`` and ``A.indptr``, carries `A`'s canonical flag.
    """
    if data.shape != A.data.shape:
        raise ValueError(f"data must have shape {A.data.shape} (one value per stored entry); "
                         f"got {data.shape}")
    return csr_from_arrays(data, A.indices, A.indptr, A.shape, canonical=A.has_canonical_format)


def cast_values(A, dtype):
    """`A` with values of `dtype` and the same index arrays; `A` itself if already so."""
    if A.dtype == dtype:
        return A
    return with_values(A, A.data.astype(dtype))


def row_blocks(indptr, max_entries=None):
    """Consecutive row ranges ``(r0, r1, e0, e1)`` holding at most `max_entries`
    (default :data:`ENTRY_BLOCK`) stored entries each (a longer row is a range of its
    own); ``e0:e1`` are their entries. Each block's end is found by a binary search on
    the offsets' own device: a few numbers per block reach the host, not the n + 1
    offsets (a copy on every pass over a large graph)."""
    max_entries = ENTRY_BLOCK if max_entries is None else max_entries
    n = indptr.shape[0] - 1
    first, last = int(indptr[0]), int(indptr[-1])
    if last - first <= max_entries:  # one block: two numbers read
        if n > 0:
            yield 0, n, first, last
        return
    xp = array_module(indptr)
    r0, e0 = 0, first
    while r0 < n:
        r1 = int(xp.searchsorted(indptr, min(e0 + max_entries, last), side="right")) - 1
        r1 = min(max(r1, r0 + 1), n)
        e1 = int(indptr[r1])
        yield r0, r1, e0, e1
        r0, e0 = r1, e1


def entry_rows(indptr, xp=None, *, first=0, span=None, dtype=np.int64):
    """The row of every stored entry of a run of a CSR's rows, on their device.

    Parameters
    ----------
    indptr : int array of shape (r + 1,), NumPy or CuPy
        The run's row offsets (``S.indptr[r0 : r1 + 1]``, or the whole ``S.indptr``).
    xp : module, optional
        indptr's array module.
    first : int
        The number of the run's first row (r0).
    span : (int, int), optional
        ``(indptr[0], indptr[-1])`` when the caller holds them on the host: the GPU
        then reads nothing back.
    dtype : numpy dtype
        Of the rows returned.

    Notes
    -----
    On the host a run of each row id as long as the row: one pass, where a binary
    search per entry takes 10× longer (26 against 2 ms at 1.15·10⁶ entries; 1.1 of the
    1.3 s of forming A at 1.4·10⁷ entries). CuPy's ``repeat`` takes no device counts,
    so the GPU searches.
    """
    xp = array_module(indptr) if xp is None else xp
    r = indptr.shape[0] - 1
    if xp is np:
        return np.repeat(np.arange(first, first + r, dtype=dtype), np.diff(indptr))
    e0, e1 = (int(indptr[0]), int(indptr[-1])) if span is None else span
    rows = xp.searchsorted(indptr[1:], xp.arange(e0, e1, dtype=indptr.dtype), side="right")
    return (rows + first).astype(dtype, copy=False)


def block_rows(S, r0, r1, e0, e1, xp):
    """Row index (S's index dtype) of every stored entry ``e0:e1`` of the rows
    ``r0:r1``, in storage order (:func:`entry_rows` of a block of rows)."""
    return entry_rows(S.indptr[r0 : r1 + 1], xp, first=r0, span=(e0, e1),
                      dtype=S.indptr.dtype)


def row_sums(A, xp):
    """float64 row sums of a CSR matrix (a 1-D array on its device).

    A float32 sum of a long row loses digits the statistics show. The values are
    widened a block of rows at a time (each block a CSR matrix of its own, summed by a
    product with ones), so no float64 copy of the whole matrix is made; float64 values
    are used as they are.
    """
    n_rows, n_cols = A.shape
    out = xp.zeros(n_rows, dtype=xp.float64)
    ones = xp.ones(n_cols, dtype=xp.float64)
    for r0, r1, e0, e1 in row_blocks(A.indptr):
        if e1 == e0:
            continue
        block = csr_from_arrays(A.data[e0:e1].astype(xp.float64, copy=False), A.indices[e0:e1],
                                A.indptr[r0 : r1 + 1] - A.indptr.dtype.type(e0),
                                (r1 - r0, n_cols), canonical=A.has_canonical_format)
        out[r0:r1] = block @ ones
    return out


def row_slab(A, r0, r1, e0, e1):
    """Rows ``r0:r1`` of CSR `A` (entries ``e0:e1``) as a CSR matrix of their own that
    shares `A`'s values and columns; only the row offsets are a (rebased) copy."""
    return csr_from_arrays(A.data[e0:e1], A.indices[e0:e1],
                           A.indptr[r0 : r1 + 1] - A.indptr.dtype.type(e0),
                           (r1 - r0, A.shape[1]), canonical=A.has_canonical_format)


def row_slabs(A):
    """``(r0, r1, slab)`` covering `A` with at most :data:`PRODUCT_MAX_ENTRIES` stored
    entries per slab: `A` itself when it is that small, or when it is an operator
    with a product of its own (no ``indptr``: the distributed row-block operator)."""
    if not hasattr(A, "indptr") or A.nnz <= PRODUCT_MAX_ENTRIES:
        return [(0, A.shape[0], A)]
    return [(r0, r1, row_slab(A, r0, r1, e0, e1))
            for r0, r1, e0, e1 in row_blocks(A.indptr, PRODUCT_MAX_ENTRIES)]


def matmul(A, X, slabs=None):
    """``A @ X`` for a CSR `A` and a dense vector or block `X`, a slab of rows at a time
    when `A` has more than :data:`PRODUCT_MAX_ENTRIES` stored entries.

    `slabs` (from :func:`row_slabs`) saves re-slicing when `A` is used many times.
    """
    slabs = row_slabs(A) if slabs is None else slabs
    if len(slabs) == 1:
        return A @ X
    xp = array_module(X)
    parts = [(r0, r1, slab @ X) for r0, r1, slab in slabs]
    out = xp.empty((A.shape[0],) + tuple(X.shape[1:]), dtype=parts[0][2].dtype)
    for r0, r1, part in parts:
        out[r0:r1] = part
    return out


def rmatmul(A, x):
    """``A.T @ x`` for a CSR `A` and a dense vector or block `x`, slab by slab (the
    slabs' transposed products summed) when `A` is larger than one product takes."""
    slabs = row_slabs(A)
    if len(slabs) == 1:
        return A.T @ x
    out = None
    for r0, r1, slab in slabs:
        part = slab.T @ x[r0:r1]
        out = part if out is None else out + part
    return out
