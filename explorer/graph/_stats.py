"""Sparsity statistics from nonzeros per row: what the sliders show and CSR-2 needs.

Everything here starts from ``counts`` (nonzeros per row, diagonal excluded), so the
same code serves a built graph (``diff(indptr)``), a counting pass without the matrix,
and a sample of rows. Counts may be NumPy or CuPy; every figure is read off their
table (:func:`count_table`: how many rows hold each number of nonzeros), made on the
counts' device, so only the table (max + 1 integers) reaches the host, not n counts.
"""

from __future__ import annotations

import math

import numpy as np

from .._backend import array_module, to_numpy
from ._reference import index_dtype
from ._types import GraphStats

#: Most bins in the nnz-per-row histogram; bins are whole numbers of nonzeros wide.
MAX_HIST_BINS = 64

#: Largest width :func:`suggest_hypo` proposes (see its Notes).
HYPO_CAP = 1024

#: :func:`suggest_hypo` proposes a width that leaves at most this fraction of rows
#: to CSR-2's supplementary pass.
HYPO_OVERFLOW_FRACTION = 0.01

#: :func:`suggest_hypo` rounds up to a multiple of this (a half-warp of columns).
HYPO_MULTIPLE = 16


def suggest_hypo(counts) -> int:
    """A ``hypoMaxNnzRow`` for CSR-2 from the nonzeros per row.

    The rule: the smallest width that leaves at most 1% of the rows over it (the
    99th percentile, ``inverted_cdf``), rounded up to a multiple of 16, then capped
    at the true maximum and at 1024, and at least 1.

    Parameters
    ----------
    counts : array_like of int
        Nonzeros per row (all rows or a sample), NumPy or CuPy.

    Returns
    -------
    int

    Notes
    -----
    CSR-2's ``fullPass`` visits every pair whatever the width, but its shared
    memory grows with the width; ``supPass`` rescans each overflowing row from its
    restart column, at most a full row. So the supplementary work is at most the
    fraction of rows over the width times the full pass: the 1% rule bounds it to
    about 1% of the full pass whatever the order of the rows, while the width stays
    near the bulk of the distribution rather than its tail. Capping at the maximum
    wastes no ELLPACK slot on a regular pattern: on Syn1M (mean 23, max 54) the
    paper's best width is the maximum, 54 (Table 5). The cap at 1024 follows the
    paper's MNIST runs: widths 512 and 1024 are the fastest, 2048 is slower on every
    MNIST row of Table 5, and the kernel slows sharply once a block's shared memory
    passes 24 KB (width ~2943, Fig. 6), so heavy tails are better left to
    ``supPass``. Multiples of 16 keep the ELLPACK rows aligned.
    """
    return _suggest_from_table(count_table(counts))


def count_table(counts):
    """How many rows hold each number of nonzeros: ``table[v]`` rows hold v (a NumPy
    int64 array of length max + 1; empty for no rows), counted on the device of
    `counts`."""
    xp = array_module(counts)
    counts = xp.asarray(counts).ravel()
    if counts.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(to_numpy(xp.bincount(counts.astype(xp.int64, copy=False))),
                      dtype=np.int64)


def _suggest_from_table(table) -> int:
    if table.size == 0:
        return 1
    top = table.size - 1
    # numpy.quantile(counts, 1 - f, method="inverted_cdf"): the ⌈m (1 - f)⌉-th least.
    m = int(table.sum())
    rank = max(1, math.ceil(m * (1.0 - HYPO_OVERFLOW_FRACTION)))
    q = int(np.searchsorted(np.cumsum(table), rank))
    rounded = HYPO_MULTIPLE * math.ceil(q / HYPO_MULTIPLE)
    return max(1, min(rounded, top, HYPO_CAP))


def nnz_histogram(counts):
    """Histogram of nonzeros per row with whole-number bins.

    One bin per value while the maximum is below :data:`MAX_HIST_BINS`; beyond, bins
    ``w`` values wide with ``w = ceil((max + 1) / MAX_HIST_BINS)``. Bin ``k`` holds
    the rows with ``edges[k] <= count < edges[k+1]``.

    Returns
    -------
    counts : ndarray of int64
    edges : ndarray of int64
        ``len(counts) + 1`` integer edges starting at 0.
    """
    return _histogram_from_table(count_table(counts))


def _histogram_from_table(table):
    top = max(0, table.size - 1)
    width = max(1, math.ceil((top + 1) / MAX_HIST_BINS))
    nbins = top // width + 1
    padded = np.zeros(nbins * width, dtype=np.int64)
    padded[: table.size] = table
    hist = padded.reshape(nbins, width).sum(axis=1)
    edges = np.arange(nbins + 1, dtype=np.int64) * width
    return hist, edges


def csr_bytes(n: int, nnz: int) -> int:
    """Bytes of an n×n float32 CSR with `nnz` nonzeros.

    Indices and indptr share one dtype, as in SciPy: int32 while it holds nnz and n,
    int64 beyond.
    """
    isz = np.dtype(index_dtype(nnz, n)).itemsize
    return int(nnz) * (4 + isz) + (int(n) + 1) * isz


def stats_from_counts(
    counts,
    *,
    n: int,
    hypo_max_nnz_row: int | None = None,
    n_components: int | None = None,
    degrees=None,
    estimated: bool = False,
    sample_rows: int | None = None,
) -> GraphStats:
    """Build a :class:`GraphStats` from nonzeros per row.

    Parameters
    ----------
    counts : array_like of int, NumPy or CuPy
        Nonzeros per row: all `n` rows, or the sampled rows when `estimated`.
    n : int
        Rows of the whole graph.
    hypo_max_nnz_row : int, optional
        The ELLPACK width for the byte and overflow figures; default: the suggested
        one (:func:`suggest_hypo` of `counts`).
    n_components : int, optional
        Connected components, when the caller computed them.
    degrees : array_like of float, optional
        Weighted degrees (row sums) of the same rows as `counts`.
    estimated : bool
        `counts` are a sample of rows: nnz, isolated rows, rows over the width, the
        histogram and the byte figures are scaled by ``n / len(counts)`` (rounded);
        min, max, mean and the degree summary are the sample's.
    sample_rows : int, optional
        Recorded as is (defaults to ``len(counts)`` when `estimated`).

    Returns
    -------
    GraphStats
    """
    table = count_table(counts)
    n = int(n)
    m = int(table.sum())
    values = np.arange(table.size, dtype=np.int64)
    scale = n / m if estimated else 1.0

    def extrapolate(x) -> int:
        return int(round(x * scale)) if estimated else int(x)

    suggested = _suggest_from_table(table)
    hypo = suggested if hypo_max_nnz_row is None else int(hypo_max_nnz_row)
    total = int(table @ values)
    nnz = extrapolate(total)
    hist, edges = _histogram_from_table(table)
    if estimated:
        hist = np.rint(hist * scale).astype(np.int64)
    deg = dict(degree_min=None, degree_mean=None, degree_max=None)
    if degrees is not None:
        xp = array_module(degrees)
        d = xp.asarray(degrees).ravel()
        if d.size:
            lo, mean, hi = (float(v) for v in to_numpy(xp.stack(
                [d.min(), d.mean(dtype=xp.float64), d.max()]).astype(xp.float64)))
            deg = dict(degree_min=lo, degree_mean=mean, degree_max=hi)
    present = np.flatnonzero(table)
    return GraphStats(
        n=n,
        nnz=nnz,
        nnz_row_min=int(present[0]) if m else 0,
        nnz_row_mean=total / m if m else float("nan"),
        nnz_row_max=int(present[-1]) if m else 0,
        nnz_row_hist=(hist, edges),
        sparsity=100.0 * (1.0 - nnz / (float(n) * n)),
        n_isolated=extrapolate(table[0] if m else 0),
        n_components=None if n_components is None else int(n_components),
        hypo_max_nnz_row=hypo,
        suggested_hypo_max_nnz_row=suggested,
        rows_over_hypo=extrapolate(table[hypo + 1:].sum()),
        bytes_csr=csr_bytes(n, nnz),
        bytes_dense=4 * n * n,
        bytes_ellpack=n * hypo * (4 + 4),
        estimated=bool(estimated),
        sample_rows=(m if sample_rows is None else int(sample_rows)) if estimated else None,
        **deg,
    )
