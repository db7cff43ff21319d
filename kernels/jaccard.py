"""Launchers of the Jaccard row clustering (``jaccard.cu``, paper 003): one round of
leader selection and joining on a symmetric CSR pattern, and the rounds of one level."""

from __future__ import annotations

import numpy as np

from ._launch import launch

#: One warp per row, 8 rows per block.
BLOCK = (32, 8)

#: Rounds a level may take. Each round makes at least the ungrouped row of largest key a
#: leader, and in practice a constant fraction of the ungrouped rows (Luby's argument):
#: 10⁷ rows take about 10-20 rounds.
MAX_ROUNDS = 10_000


def _defines(indptr, indices) -> tuple:
    return (f"-DPTR64={int(indptr.dtype == np.int64)}",
            f"-DIDX64={int(indices.dtype == np.int64)}")


def _grid(n: int) -> tuple:
    return (-(-n // BLOCK[1]),)


def leaders(n: int, indptr, indices, group, leader, seed: int, stamp: int) -> None:
    """Mark the leaders of round `stamp`: ``leader[i] = stamp`` for every ungrouped row
    (``group[i] < 0``) whose key beats those of its ungrouped neighbours. In place."""
    launch("jaccard", "jc_leaders", _defines(indptr, indices), _grid(n), BLOCK,
           (np.int64(n), indptr, indices, group, leader, np.uint32(seed), np.int32(stamp)))


def join(n: int, indptr, indices, group, leader, stamp: int, min_sim: float) -> None:
    """Open the groups of round `stamp`'s leaders and let every other ungrouped row join
    its most similar such leader among its neighbours when the Jaccard similarity is at
    least `min_sim`. In place on `group` (int32, -1: ungrouped)."""
    launch("jaccard", "jc_join", _defines(indptr, indices), _grid(n), BLOCK,
           (np.int64(n), indptr, indices, group, leader, np.int32(stamp),
            np.float64(min_sim)))


def cluster_level(n: int, indptr, indices, min_sim: float, seed: int):
    """Group the `n` rows of a symmetric CSR pattern (sorted columns, no diagonal) by
    rounds of :func:`leaders` and :func:`join` until every row has a group.

    Returns
    -------
    group : cupy.ndarray of int32, shape (n,)
        The leader of each row's group (a leader is its own).
    rounds : int
    """
    import cupy

    group = cupy.full(n, -1, dtype=cupy.int32)
    leader = cupy.zeros(n, dtype=cupy.int32)
    for stamp in range(1, MAX_ROUNDS + 1):
        leaders(n, indptr, indices, group, leader, seed, stamp)
        join(n, indptr, indices, group, leader, stamp, min_sim)
        if not bool((group < 0).any()):
            return group, stamp
    raise RuntimeError(f"the Jaccard clustering did not finish in {MAX_ROUNDS} rounds")
