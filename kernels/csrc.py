"""CSRC: one stored tall sparse matrix for both ``A @ X`` and ``A.T @ U`` (Aliaga et al.,
"Sparse matrix-vector and matrix-multivector products for the truncated SVD on graphics
processors").

Aliaga et al.'s compressed sparse row/column layout keeps an n × p matrix (n ≫ p) in
row blocks of :data:`ROWS` rows: a block pointer per row block (like CSR's ``indptr``,
one entry per block instead of per row), and per entry its row inside the block in 8
bits, its column and its value, the entries of each block sorted by column. The
direct product accumulates a block's rows in shared memory; the transposed product
finds the entries of one column next to each other, so it adds them up before writing
(``csrc.cu``). Storage: 9 bytes per entry plus 8 per 256 rows, against CSR's 8 per
entry plus 4 per row, and one copy serves both products where CSR needs a transposed
copy (or a slow transposed product) for ``A.T @ U``.

Dense operands are row-major (C order) CuPy float32 arrays whose width is a power of
two up to :data:`MAX_WIDTH` (``WIDTHS``); the caller pads. :func:`nearest_landmarks`
(``csrc_nearest.cu``) selects the entries of a landmark affinity, row by row, from a
block of products.

CuPy is imported lazily (see :mod:`explorer.kernels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._launch import launch, multiprocessors

#: Rows per row block (the 8-bit in-block row index needs ROWS <= 256; ``ROWS`` in csrc.cu).
ROWS = 256

#: Threads per block of every CSRC kernel.
BLOCK = 256

#: Dense widths the kernels are compiled for (``NV`` in csrc.cu).
WIDTHS = (1, 2, 4, 8, 16, 32, 64)
MAX_WIDTH = WIDTHS[-1]

#: The ``"shared"`` transposed product keeps the p × width result in a block's shared
#: memory, at most this many bytes (two blocks per multiprocessor fit in 228 KiB of
#: shared memory).
SHARED_RESULT_MAX_BYTES = 96 * 1024

#: Blocks per multiprocessor of the shared-memory transposed product.
SHARED_BLOCKS_PER_SM = 2

#: Largest number of landmarks per row ``nearest_landmarks`` selects (registers).
MAX_NEAREST = 32

#: Threads per block of ``nearest_landmarks`` (one warp per row).
NEAREST_BLOCK = 256

TRANSPOSED_VARIANTS = ("auto", "shared", "runs")


@dataclass(frozen=True)
class CsrcMatrix:
    """An n × p sparse matrix in CSRC on the GPU.

    Attributes
    ----------
    blockptr : cupy.ndarray of int64, shape (ceil(n / ROWS) + 1,)
        Entries of row block g are ``blockptr[g]:blockptr[g + 1]``.
    roff : cupy.ndarray of uint8, shape (nnz,)
        Row of each entry relative to its block's first row.
    col : cupy.ndarray of int32, shape (nnz,)
        Column of each entry, ascending inside each row block.
    val : cupy.ndarray of float32, shape (nnz,)
    shape : tuple of int
        (n, p).
    """

    blockptr: object
    roff: object
    col: object
    val: object
    shape: tuple

    @property
    def nnz(self) -> int:
        return int(self.val.size)

    @property
    def n_blocks(self) -> int:
        return int(self.blockptr.size) - 1

    @property
    def nbytes(self) -> int:
        """Bytes of the four arrays."""
        return int(self.blockptr.nbytes + self.roff.nbytes + self.col.nbytes + self.val.nbytes)


def csrc_nbytes(n: int, nnz: int) -> int:
    """Bytes a CSRC matrix of `n` rows and `nnz` entries takes."""
    return 8 * (-(-n // ROWS) + 1) + 9 * nnz


def from_csr(indptr, indices, data, shape) -> CsrcMatrix:
    """CSRC from CSR arrays (CuPy; any integer index dtypes, float32 values).

    The paper's construction (section 2): the block pointer samples ``indptr`` every
    :data:`ROWS` rows, the in-block row is the row minus the block's first row, and the
    entries of each block are sorted by column (one sort of all entries by
    ``(block, column)``). Rows may be empty; explicit zeros are kept.
    """
    import cupy

    n = int(shape[0])
    indptr = cupy.asarray(indptr, dtype=cupy.int64)
    nnz = int(indptr[-1]) if n else 0
    # The row of each entry: the last row whose start is at or before it.
    rows = cupy.searchsorted(indptr, cupy.arange(nnz, dtype=cupy.int64), side="right") - 1
    return _assemble(rows, indices, data, indptr, shape)


def from_ell(cols, vals, p: int) -> CsrcMatrix:
    """CSRC from `r` entries per row: `cols` (n × r, int32, in ``[0, p)``) and `vals`
    (n × r, float32), CuPy."""
    import cupy

    n, r = cols.shape
    rows = cupy.arange(n * r, dtype=cupy.int64) // r
    indptr = cupy.arange(n + 1, dtype=cupy.int64) * r
    return _assemble(rows, cols.reshape(-1), vals.reshape(-1), indptr, (n, p))


def _assemble(rows, cols, vals, indptr, shape) -> CsrcMatrix:
    import cupy

    n, p = int(shape[0]), int(shape[1])
    if p >= 2**31:
        raise ValueError(f"shape={tuple(shape)}: CSRC columns are int32, p must be < 2**31")
    cols = cupy.asarray(cols).astype(cupy.int64, copy=False)
    key = (rows // ROWS) * p + cols
    order = cupy.argsort(key)
    del key
    starts = cupy.minimum(cupy.arange(0, -(-n // ROWS) + 1, dtype=cupy.int64) * ROWS, n)
    return CsrcMatrix(
        blockptr=indptr[starts].copy(),
        roff=(rows[order] % ROWS).astype(cupy.uint8),
        col=cols[order].astype(cupy.int32),
        val=cupy.asarray(vals, dtype=cupy.float32)[order],
        shape=(n, p),
    )


def _check_dense(A: CsrcMatrix, M, rows: int, name: str):
    import cupy

    if not isinstance(M, cupy.ndarray) or M.ndim != 2 or M.dtype != cupy.float32:
        raise TypeError(f"{name} must be a 2-D CuPy float32 array; got {type(M).__name__} "
                        f"{getattr(M, 'dtype', '')} {getattr(M, 'shape', '')}")
    if M.shape[0] != rows or M.shape[1] not in WIDTHS:
        raise ValueError(f"{name} has shape {M.shape}; for a {A.shape} matrix it must be "
                         f"({rows}, w) with w one of {WIDTHS} (pad the columns)")
    return cupy.ascontiguousarray(M)


def spmm(A: CsrcMatrix, X):
    """``Y = A @ X`` (n × w) for X of shape (p, w), w in :data:`WIDTHS`."""
    import cupy

    n, p = A.shape
    X = _check_dense(A, X, p, "X")
    w = X.shape[1]
    Y = cupy.empty((n, w), dtype=cupy.float32)
    if n == 0:
        return Y
    launch("csrc", "csrc_spmm", (f"-DNV={w}",), (A.n_blocks,), (BLOCK,),
           (A.blockptr, A.roff, A.col, A.val, X, Y, np.int64(n)),
           shared_mem=ROWS * w * 4)
    return Y


def transposed_variant(p: int, width: int, variant: str = "auto") -> str:
    """The transposed product's kernel.

    ``"runs"`` (``"auto"``): Aliaga et al.'s kernel, one block per row block, global
    atomics after summing each run of one column's entries in registers.
    ``"shared"``: every block keeps the whole p × width result in shared memory (at
    most :data:`SHARED_RESULT_MAX_BYTES`) over many row blocks, one global atomic per
    result element and block. ``"runs"`` is the faster (benchmarks/README.md,
    "Landmarks and CSRC"): the shared variant's few resident blocks cannot hide the
    latency of the rows of U they gather.
    """
    if variant not in TRANSPOSED_VARIANTS:
        raise ValueError(f"variant={variant!r} is not allowed; use one of {TRANSPOSED_VARIANTS}")
    if variant == "shared" and p * width * 4 > SHARED_RESULT_MAX_BYTES:
        raise ValueError(f"variant='shared' needs p * width * 4 <= {SHARED_RESULT_MAX_BYTES} "
                         f"bytes; got p={p}, width={width}")
    return "runs" if variant == "auto" else variant


def spmm_t(A: CsrcMatrix, U, variant: str = "auto"):
    """``W = A.T @ U`` (p × w) for U of shape (n, w), w in :data:`WIDTHS`, from the same
    stored arrays as :func:`spmm` (see :func:`transposed_variant`)."""
    import cupy

    n, p = A.shape
    U = _check_dense(A, U, n, "U")
    w = U.shape[1]
    kind = transposed_variant(p, w, variant)
    W = cupy.zeros((p, w), dtype=cupy.float32)
    if A.nnz == 0:
        return W
    if kind == "shared":
        grid = max(1, min(A.n_blocks, multiprocessors() * SHARED_BLOCKS_PER_SM))
        launch("csrc", "csrc_spmm_t_shared", (f"-DNV={w}",), (grid,), (BLOCK,),
               (A.blockptr, A.roff, A.col, A.val, U, W, np.int64(A.n_blocks), np.int32(p)),
               shared_mem=p * w * 4)
    else:
        launch("csrc", "csrc_spmm_t_runs", (f"-DNV={w}",), (A.n_blocks,), (BLOCK,),
               (A.blockptr, A.roff, A.col, A.val, U, W))
    return W


def nearest_landmarks(G, a, b, scale: float, r: int, *, idx=None, key=None):
    """The `r` smallest keys ``a[i] + b[j] + scale * G[i, j]`` of each row of `G`.

    Parameters
    ----------
    G : cupy.ndarray of float32, shape (m, p), C-contiguous
        Products of m rows with p landmarks.
    a : cupy.ndarray of float32, shape (m,)
    b : cupy.ndarray of float32, shape (p,)
    scale : float
    r : int
        1 <= r <= min(p, :data:`MAX_NEAREST`).
    idx, key : cupy.ndarray, optional
        Outputs to fill (int32 and float32, shape (m, r)), e.g. views of larger arrays.

    Returns
    -------
    idx : cupy.ndarray of int32, shape (m, r)
        Columns, by ascending key (ties: lower column first); -1 where a row has fewer
        than r keys that are not NaN.
    key : cupy.ndarray of float32, shape (m, r)
        Their keys (+inf where `idx` is -1).
    """
    import cupy

    m, p = G.shape
    if not 1 <= r <= min(p, MAX_NEAREST):
        raise ValueError(f"r={r} is out of range; allowed: 1 <= r <= min(p={p}, {MAX_NEAREST})")
    idx = cupy.empty((m, r), dtype=cupy.int32) if idx is None else idx
    key = cupy.empty((m, r), dtype=cupy.float32) if key is None else key
    if m == 0:
        return idx, key
    warps_per_block = NEAREST_BLOCK // 32
    grid = max(1, min(-(-m // warps_per_block), multiprocessors() * 16))
    launch("csrc_nearest", "nearest_landmarks", (f"-DNEAREST={r}",), (grid,), (NEAREST_BLOCK,),
           (cupy.ascontiguousarray(G), cupy.ascontiguousarray(a, dtype=cupy.float32),
            cupy.ascontiguousarray(b, dtype=cupy.float32), np.float32(scale), np.int64(m),
            np.int32(p), idx, key))
    return idx, key


__all__ = [
    "BLOCK",
    "MAX_NEAREST",
    "MAX_WIDTH",
    "ROWS",
    "SHARED_RESULT_MAX_BYTES",
    "TRANSPOSED_VARIANTS",
    "WIDTHS",
    "CsrcMatrix",
    "csrc_nbytes",
    "from_csr",
    "from_ell",
    "nearest_landmarks",
    "spmm",
    "spmm_t",
    "transposed_variant",
]
