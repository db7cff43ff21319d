"""The components embedding of a row-block graph, computed per row block on the
workers: ``solver="components"`` without assembling anything of size n on the client."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..embedding.linalg import unit_rows
from ._components import BlockComponents
from ._halo import halo_product

__all__ = ["BlockEmbedding", "components_embedding"]


@dataclass
class BlockEmbedding:
    """A spectral embedding held as row blocks on the workers.

    Attributes
    ----------
    blocks : RowBlocks
        The graph's row blocks (offsets: the rows of each).
    embedding, vectors : list of distributed.Future
        Block b's rows of the embedding and of U = D^-1/2 V (rows × k float64, NaN for
        the vertices left out), as :class:`explorer.Embedding` holds them whole.
    kept : list of distributed.Future
        Block b's rows of the embedding of the vertices kept, in order (what k-means
        clusters).
    columns : list of distributed.Future
        Block b's column (component) of each row, −1 for a vertex left out.
    n_kept : numpy.ndarray of int64
        Kept vertices per block.
    eigenvalues, residual_norms : numpy.ndarray of shape (k,)
    timings : dict of str to float
        Seconds: ``"indicators"``, ``"vectors"``, ``"residuals"``, ``"total"``.
    """

    blocks: object
    embedding: list
    vectors: list
    kept: list
    columns: list
    n_kept: np.ndarray
    eigenvalues: np.ndarray
    residual_norms: np.ndarray
    timings: dict = field(default_factory=dict)

    @property
    def n_components(self) -> int:
        return int(self.eigenvalues.shape[0])

    def dask_array(self, which, chunks):
        """`which` (``"embedding"`` or ``"vectors"``) as a Dask array of n × k with the
        row `chunks` given (X's, empty chunks included); nothing is gathered."""
        import dask.array as da

        k = self.n_components
        parts = [da.from_delayed(f, shape=(int(s), k), dtype=np.float64)
                 for f, s in zip(getattr(self, which), self.blocks.sizes, strict=True)]
        out = da.concatenate(parts) if parts else da.zeros((0, k))
        return out if out.chunks[0] == tuple(chunks) else out.rechunk((tuple(chunks), -1))


def components_embedding(graph, components: BlockComponents, kept_labels) -> BlockEmbedding:
    """The embedding of the components `kept_labels` of `graph` (exactly k of them):
    their indicator vectors scaled by D^1/2, as
    :func:`explorer.embedding.embed.components_embedding` forms them, row block by row
    block on the workers.

    Notes
    -----
    Column c of V is sqrt(degree) on component c's vertices (components in ascending
    label order, as :func:`explorer.embedding.components.indicator_vectors` orders
    them), normalised by its norm, whose square each block sums for its rows (float64,
    added on the client in block order: the last bits can differ from the
    one-process sum, so can U's). V has no negative entry, so the sign rule leaves it
    as it is; each kept row of the embedding has one nonzero, 1 exactly, so k-means
    gets exactly the one-process points. The residual norms come from one
    :func:`~explorer.distributed._halo.halo_product` with S, each block's sum of
    squares added on the client. Through the client go k values per block, k more
    for the residuals, and the per-block counts.
    """
    t0 = time.perf_counter()
    blocks = graph.blocks
    client = blocks.client
    kept_labels = np.asarray(kept_labels, dtype=np.int64)
    k = int(kept_labels.shape[0])
    kept_f = client.scatter(kept_labels, broadcast=True, hash=False)
    columns = [client.submit(block_columns, lab, deg, kept_f, pure=False)
               for lab, deg in zip(components.labels, graph.degree_blocks, strict=True)]
    sums = client.gather([client.submit(column_volumes, col, deg, k, pure=False)
                          for col, deg in zip(columns, graph.degree_blocks, strict=True)])
    total = np.zeros(k)
    for s in sums:  # block order: one fixed reduction order
        total = total + s[0]
    norms = np.sqrt(total)
    n_kept = np.asarray([s[1] for s in sums], dtype=np.int64)
    t1 = time.perf_counter()
    rows = [client.submit(block_vectors, col, deg, norms, pure=False)
            for col, deg in zip(columns, graph.degree_blocks, strict=True)]
    embedding = blocks.parts(rows, 0)
    vectors = blocks.parts(rows, 1)
    scaled = blocks.parts(rows, 2)
    dinv = blocks.parts(rows, 3)
    kept = [client.submit(kept_rows, e, col, pure=False)
            for e, col in zip(embedding, columns, strict=True)]
    t2 = time.perf_counter()
    products = halo_product(graph, components.forests, scaled, dinv, components.reach)
    squares = client.gather([client.submit(residual_squares, y, r, pure=False)
                             for y, r in zip(products, rows, strict=True)])
    res = np.zeros(k)
    for s in squares:
        res = res + s
    t3 = time.perf_counter()
    return BlockEmbedding(
        blocks=blocks, embedding=embedding, vectors=vectors, kept=kept, columns=columns,
        n_kept=n_kept, eigenvalues=np.zeros(k), residual_norms=np.sqrt(res),
        timings={"indicators": t1 - t0, "vectors": t2 - t1, "residuals": t3 - t2,
                 "total": t3 - t0},
    )


# ---------------------------------------------------------------- worker functions


def block_columns(labels, degrees, kept_labels):
    """Each row's column: the rank of its component among `kept_labels`, −1 for a
    vertex left out (another component, or degree 0: only explicit zeros reach it)."""
    if kept_labels.shape[0] == 0:
        return np.full(labels.shape[0], -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(kept_labels, labels), kept_labels.shape[0] - 1)
    hit = (kept_labels[at] == labels) & (np.asarray(degrees) > 0)
    return np.where(hit, at, -1).astype(np.int64)


def column_volumes(columns, degrees, k):
    """This block's float64 sums of V's squares per column, and its kept rows."""
    keep = columns >= 0
    v = np.sqrt(degrees[keep])
    return np.bincount(columns[keep], weights=v * v, minlength=k), int(np.count_nonzero(keep))


def block_vectors(columns, degrees, norms):
    """This block's rows of (embedding, U, D^-1/2 V, D^-1/2): the arithmetic of
    :func:`explorer.embedding.embed.finish_eigenvectors` on V's rows, NaN rows for the
    vertices left out (zero rows in D^-1/2 V, which the residual product reads)."""
    rows, k = columns.shape[0], norms.shape[0]
    keep = np.flatnonzero(columns >= 0)
    col = columns[keep]
    V = np.zeros((keep.shape[0], k))
    V[np.arange(keep.shape[0]), col] = np.sqrt(degrees[keep])
    V = V / norms
    d_keep = 1.0 / np.sqrt(degrees[keep])
    U = V * d_keep[:, None]
    embedding = np.full((rows, k), np.nan)
    vectors = np.full((rows, k), np.nan)
    embedding[keep] = unit_rows(U, np)
    vectors[keep] = U
    scaled = np.zeros((rows, k))
    scaled[keep] = U
    dinv = np.zeros(rows)
    dinv[keep] = d_keep
    return embedding, vectors, scaled, dinv, V, keep


def kept_rows(embedding, columns):
    """The rows of the kept vertices (k-means' points)."""
    return embedding[columns >= 0]


def residual_squares(product, rows):
    """Per column, the sum over the block's kept rows of (A v − v)² (μ = 1)."""
    V, keep = rows[4], rows[5]
    r = product[keep] - V
    return (r * r).sum(axis=0)
