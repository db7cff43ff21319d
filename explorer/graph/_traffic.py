"""The memory traffic of a sparse × dense block product (SpMM) as a function of the row
order: the statistic a reordering improves, and the bytes floor it is measured against.

Y = A X with A n × n in CSR and X n × b (row-major, float32) reads A once (values,
column indices, row offsets) and writes Y once; what depends on the order is how often
the rows of X are fetched. Rows of A processed close together in time share the cache:
a row of X wanted by several of them is fetched once. The model takes tiles of `tile`
consecutive rows as the unit of reuse and no reuse between tiles, so the X traffic is
the number of distinct columns per tile, summed over tiles, times the bytes of one X
row (rounded up to 32-byte sectors). The floor fetches every row of X once.

The distinct columns are counted on a seeded sample of tiles (:data:`SAMPLE_TILES`),
so the statistic costs a few milliseconds whatever n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._backend import array_module, to_numpy
from ._jaccard import sorted_unique

#: Rows per tile of the reuse model (a few thread blocks' rows in flight on one SM).
DEFAULT_TILE = 256

#: Tiles sampled for the distinct-column count.
SAMPLE_TILES = 512

#: Seed of the tile sample.
SAMPLE_SEED = 0

#: The memory transaction granularity: X rows are fetched in 32-byte sectors.
SECTOR_BYTES = 32


@dataclass(frozen=True)
class SpmmTraffic:
    """Estimated bytes one product ``A @ X`` moves, in the matrix's current row order.

    Attributes
    ----------
    n, nnz : int
    block : int
        Columns of X.
    tile : int
        Rows per tile of the reuse model.
    columns_per_tile : float
        Mean distinct columns a tile touches (from the sampled tiles).
    matrix_bytes : float
        Values, column indices and row offsets of A, read once.
    x_bytes : float
        Rows of X fetched: distinct columns per tile × tiles × bytes per X row.
    y_bytes : float
        Y written.
    floor_bytes : float
        The same with every row of X that A references fetched once (for a symmetric
        pattern, one per non-empty row).
    """

    n: int
    nnz: int
    block: int
    tile: int
    columns_per_tile: float
    matrix_bytes: float
    x_bytes: float
    y_bytes: float
    floor_bytes: float

    @property
    def bytes(self) -> float:
        """Estimated bytes per product."""
        return self.matrix_bytes + self.x_bytes + self.y_bytes

    @property
    def ratio(self) -> float:
        """``bytes / floor_bytes`` (1 is the best any order can do)."""
        return self.bytes / self.floor_bytes if self.floor_bytes else 1.0

    def as_dict(self) -> dict:
        """Plain numbers for JSON."""
        return {"n": self.n, "nnz": self.nnz, "block": self.block, "tile": self.tile,
                "columns_per_tile": self.columns_per_tile, "bytes": self.bytes,
                "floor_bytes": self.floor_bytes, "ratio": self.ratio}


def x_row_bytes(block: int, itemsize: int = 4) -> int:
    """Bytes fetched for one row of X: `block` values rounded up to whole sectors."""
    return -(-block * itemsize // SECTOR_BYTES) * SECTOR_BYTES


def spmm_traffic(csr, *, block: int = 8, tile: int = DEFAULT_TILE,
                 sample_tiles: int = SAMPLE_TILES, value_bytes: int = 4,
                 perm=None) -> SpmmTraffic:
    """The traffic model of ``csr @ X`` for X of `block` float32 columns.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix of shape (n, n)
    block : int
        Columns of X (the eigensolver's block width).
    tile : int
        Rows per tile of the reuse model.
    sample_tiles : int
        Tiles whose distinct columns are counted (all of them when there are fewer).
    value_bytes : int
        Bytes per stored value of A (4: float32).
    perm : int array of shape (n,), optional
        Measure the order ``perm`` instead (row i of the reordered matrix is row
        ``perm[i]``; the columns renumbered alike), without forming it.

    Returns
    -------
    SpmmTraffic
    """
    xp = array_module(csr)
    n, nnz = int(csr.shape[0]), int(csr.nnz)
    n_tiles = -(-n // tile) if n else 0
    if n_tiles == 0:
        return SpmmTraffic(n, nnz, block, tile, 0.0, 0.0, 0.0, 0.0, 0.0)
    rng = np.random.default_rng(SAMPLE_SEED)
    chosen = (np.arange(n_tiles) if n_tiles <= sample_tiles
              else np.sort(rng.choice(n_tiles, sample_tiles, replace=False)))
    # The sampled tiles' rows (positions in the new order) and their rows in csr.
    pos = (chosen[:, None] * tile + np.arange(tile)[None, :]).ravel()
    which = np.repeat(np.arange(chosen.size, dtype=np.int64), tile)
    inside = pos < n
    pos, which = pos[inside], which[inside]
    rows = xp.asarray(pos) if perm is None else xp.asarray(perm)[xp.asarray(pos)]
    starts = to_numpy(csr.indptr[rows]).astype(np.int64)
    lengths = to_numpy(csr.indptr[rows + 1]).astype(np.int64) - starts
    total = int(lengths.sum())
    distinct = 0
    if total:
        # Entries of the sampled tiles: tile number * n + column, counted once each.
        offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        entries = xp.asarray(np.arange(total, dtype=np.int64) + offsets)
        cols = csr.indices[entries].astype(xp.int64)
        if perm is not None:
            inv = xp.empty(n, dtype=xp.int64)
            inv[xp.asarray(perm)] = xp.arange(n, dtype=xp.int64)
            cols = inv[cols]
        keys = xp.asarray(np.repeat(which, lengths)) * n + cols
        distinct = int(sorted_unique(keys, xp).shape[0])
    per_tile = distinct / chosen.size
    row = x_row_bytes(block)
    index_bytes = csr.indices.dtype.itemsize
    matrix_bytes = float(nnz * (value_bytes + index_bytes) + (n + 1) * csr.indptr.dtype.itemsize)
    y_bytes = float(n * block * 4)
    x_bytes = per_tile * n_tiles * row
    # Every column referenced fetched once: the non-empty rows of a symmetric pattern.
    referenced = int(xp.count_nonzero(csr.indptr[1:] != csr.indptr[:-1]))
    floor_x = float(referenced * row)
    x_bytes = max(x_bytes, floor_x)  # a sample cannot make it cheaper than the floor
    floor = matrix_bytes + y_bytes + floor_x
    return SpmmTraffic(n, nnz, block, tile, per_tile, matrix_bytes, x_bytes, y_bytes, floor)
