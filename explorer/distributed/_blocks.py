"""Row blocks of a Dask array held on the workers, and the client that holds them.

Everything distributed in Spectral Explorer works on *row blocks*: the rows of the
data (and of the similarity matrix) cut where the Dask array's row chunks are cut,
each block a future whose value lives on one worker. Tasks that take a block's future
run where the block is (Dask's scheduler places them by data locality); only small
results (partial sums, counts, a few rows) come back to the client, always gathered
in block order so that every reduction is done in one fixed order.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

__all__ = ["RowBlocks", "get_client", "is_dask_array", "n_workers"]


def is_dask_array(X) -> bool:
    """Whether `X` is a ``dask.array.Array`` (checked without importing Dask)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "to_delayed") \
        and hasattr(X, "chunks")


def get_client(client=None):
    """`client`, else the ``dask.distributed`` Client in scope.

    Raises
    ------
    ImportError
        If dask.distributed is not installed (``pip install "spectral-explorer[dask]"``).
    ValueError
        If no Client is in scope.
    """
    if client is not None:
        return client
    try:
        from distributed import default_client
    except ImportError as exc:  # pragma: no cover - the [dask] extra is missing
        raise ImportError(
            "a Dask array needs dask.distributed: pip install 'spectral-explorer[dask]'"
        ) from exc
    try:
        return default_client()
    except ValueError as exc:
        raise ValueError(
            "a Dask array is clustered on a dask.distributed cluster, and no Client is in "
            "scope: start one first (from dask.distributed import Client; client = Client() "
            "for a local cluster, Client('tcp://host:8786') for a running scheduler), or "
            "pass X.compute() for the single-process path"
        ) from exc


def n_workers(client) -> int:
    """Workers of the cluster of `client` (all of them, whatever the Dask version)."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # before 2025.1 every worker was listed
        info = client.scheduler_info()
    return len(info["workers"])


def part(value, i):
    """Item `i` of a block task's tuple result (run on the worker: only it travels)."""
    return operator.getitem(value, i)


@dataclass
class RowBlocks:
    """Futures of consecutive row blocks, in order, with their row offsets.

    Attributes
    ----------
    client : distributed.Client
    futures : list of distributed.Future
        Block b holds rows ``offsets[b]:offsets[b + 1]``.
    offsets : numpy.ndarray of int64, shape (n_blocks + 1,)
    """

    client: object
    futures: list
    offsets: np.ndarray

    @classmethod
    def from_dask(cls, client, X) -> RowBlocks:
        """The row chunks of the 2-D Dask array `X` computed on the workers (columns
        merged into one chunk first when they were split)."""
        if not is_dask_array(X):
            raise TypeError(
                f"X must be a dask.array.Array here; got {type(X).__module__}."
                f"{type(X).__name__} (a Dask DataFrame: X.to_dask_array(lengths=True))"
            )
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples × n_features); got shape {X.shape}")
        if any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("X has unknown chunk sizes; compute them first "
                             "(X.compute_chunk_sizes(), or to_dask_array(lengths=True))")
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        sizes = np.asarray(X.chunks[0], dtype=np.int64)
        delayed = X.to_delayed()[:, 0]
        # Empty row chunks hold nothing to do: they are not blocks.
        futures = client.compute([dl for dl, s in zip(delayed, sizes, strict=True) if s > 0])
        offsets = np.concatenate([[0], np.cumsum(sizes[sizes > 0])]).astype(np.int64)
        return cls(client, futures, offsets)

    @property
    def n(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_blocks(self) -> int:
        return len(self.futures)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def map(self, fn, *args, blocks=None, **kwargs) -> list:
        """``fn(block, *args, **kwargs)`` on each block's worker: a list of futures.

        `blocks` (futures, one per block) replaces the data blocks as first argument;
        an argument that is a list of one future per block is given block by block.

        Each task is held to the worker of its block (the blocks are waited for, then
        located): left to the scheduler, a task whose other inputs are larger (the
        gathered points of a graph block) or a worker busier than another moved blocks
        between workers, and a loop meant to run on four GPUs found its blocks on two
        (work stealing takes tasks with loose restrictions too; these are strict).
        """
        from distributed import wait

        blocks = self.futures if blocks is None else blocks
        wait(blocks)
        holders = self.client.who_has(blocks)
        out = []
        for b, blk in enumerate(blocks):
            per = [a[b] if isinstance(a, _PerBlock) else a for a in args]
            where = sorted(holders.get(blk.key, ()))[:1] or None
            out.append(self.client.submit(fn, blk, *per, pure=False, workers=where,
                                          allow_other_workers=where is None, **kwargs))
        return out

    def gather_parts(self, futures, i) -> list:
        """Item `i` of each block task's tuple result, gathered in block order."""
        return self.client.gather([self.client.submit(part, f, i) for f in futures])

    def parts(self, futures, i) -> list:
        """Futures of item `i` of each block task's tuple result (left on the workers)."""
        return [self.client.submit(part, f, i) for f in futures]

    def locate(self, index):
        """Block and local row of each global row `index` (int array)."""
        index = np.asarray(index, dtype=np.int64)
        block = np.searchsorted(self.offsets, index, side="right") - 1
        return block, index - self.offsets[block]


class _PerBlock(list):
    """A list of one value (or future) per block, given block by block by
    :meth:`RowBlocks.map`."""


def per_block(values) -> _PerBlock:
    """Mark `values` (one per block) for :meth:`RowBlocks.map`."""
    return _PerBlock(values)
