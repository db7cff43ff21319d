"""CSR matrices that share index arrays, and passes over them in blocks of rows.

At 2.2·10⁹ nonzeros with int64 indices a copy of the index arrays is 17.7 GB and any
per-entry temporary (a row id, a gathered factor) another 17.7 GB: the helpers here
widen or replace values without copying indices, and let a pass visit the entries a
block of rows at a time, so its scratch stays bounded whatever nnz is.
"""

from __future__ import annotations

import numpy as np

from ._backend import array_module, sparse_module, to_numpy

#: Stored entries per block of the passes that need each entry's row (forming
#: A = D^-1/2 S D^-1/2, dropping isolated vertices): a block's scratch (int64 row ids,
#: gathered float64 factors, ~40 B an entry) stays near 1.3 GB whatever nnz is, where
#: whole-matrix temporaries would be several copies of the matrix (at 2.2·10⁹ nonzeros,
#: 17.7 GB each). A 2.2·10⁹-nonzero graph takes 67 blocks.
ENTRY_BLOCK = 1 << 25


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


def row_blocks(indptr):
    """Consecutive row ranges ``(r0, r1, e0, e1)`` holding at most :data:`ENTRY_BLOCK`
    stored entries each (a longer row is a range of its own); ``e0:e1`` are their
    entries. The row offsets are read on the host (n + 1 integers)."""
    max_entries = ENTRY_BLOCK
    ptr = np.asarray(to_numpy(indptr), dtype=np.int64)
    n = ptr.shape[0] - 1
    r0 = 0
    while r0 < n:
        r1 = int(np.searchsorted(ptr, ptr[r0] + max_entries, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n)
        yield r0, r1, int(ptr[r0]), int(ptr[r1])
        r0 = r1


def block_rows(S, r0, r1, e0, e1, xp):
    """Row index of every stored entry ``e0:e1`` of the rows ``r0:r1``, in storage order."""
    entries = xp.arange(e0, e1, dtype=S.indptr.dtype)
    return xp.searchsorted(S.indptr[r0 + 1 : r1 + 1], entries, side="right") + r0


def row_sums(A, xp):
    """float64 row sums of a CSR matrix (a 1-D array on its device).

    A float32 sum of a long row loses digits the statistics show. The values are
    widened a block of rows at a time (each block a CSR matrix of its own, summed by a
    product with ones), so no float64 copy of the whole matrix is made.
    """
    n_rows, n_cols = A.shape
    out = xp.zeros(n_rows, dtype=xp.float64)
    ones = xp.ones(n_cols, dtype=xp.float64)
    for r0, r1, e0, e1 in row_blocks(A.indptr):
        if e1 == e0:
            continue
        block = csr_from_arrays(A.data[e0:e1].astype(xp.float64), A.indices[e0:e1],
                                A.indptr[r0 : r1 + 1] - A.indptr.dtype.type(e0),
                                (r1 - r0, n_cols), canonical=A.has_canonical_format)
        out[r0:r1] = block @ ones
    return out
