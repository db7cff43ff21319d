"""Sparsity statistics from nonzeros per row: what the sliders show and CSR-2 needs.

Everything here starts from ``counts`` (nonzeros per row, diagonal excluded), so the
same code serves a built graph (``diff(indptr)``), a counting pass without the matrix,
and a sample of rows. Counts may be NumPy or CuPy; they are brought to the host
(n integers: a few ms even for millions of rows) and the results are host values.
"""

from __future__ import annotations

import math

import numpy as np

from .._backend import to_numpy
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
    counts = np.asarray(to_numpy(counts)).ravel()
    if counts.size == 0:
        return 1
    top = int(counts.max())
    q = int(np.quantile(counts, 1.0 - HYPO_OVERFLOW_FRACTION, method="inverted_cdf"))
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
    counts = np.asarray(to_numpy(counts)).ravel().astype(np.int64, copy=False)
    top = int(counts.max()) if counts.size else 0
    width = max(1, math.ceil((top + 1) / MAX_HIST_BINS))
    nbins = top // width + 1
    hist = np.bincount(counts // width, minlength=nbins).astype(np.int64)
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
    counts = np.asarray(to_numpy(counts)).ravel().astype(np.int64, copy=False)
    n = int(n)
    m = counts.size
    scale = n / m if estimated else 1.0

    def extrapolate(x) -> int:
        return int(round(x * scale)) if estimated else int(x)

    suggested = suggest_hypo(counts)
    hypo = suggested if hypo_max_nnz_row is None else int(hypo_max_nnz_row)
    nnz = extrapolate(counts.sum())
    hist, edges = nnz_histogram(counts)
    if estimated:
        hist = np.rint(hist * scale).astype(np.int64)
    deg = dict(degree_min=None, degree_mean=None, degree_max=None)
    if degrees is not None:
        d = np.asarray(to_numpy(degrees), dtype=np.float64).ravel()
        if d.size:
            deg = dict(degree_min=float(d.min()), degree_mean=float(d.mean()),
                       degree_max=float(d.max()))
    return GraphStats(
        n=n,
        nnz=nnz,
        nnz_row_min=int(counts.min()),
        nnz_row_mean=float(counts.mean()),
        nnz_row_max=int(counts.max()),
        nnz_row_hist=(hist, edges),
        sparsity=100.0 * (1.0 - nnz / (float(n) * n)),
        n_isolated=extrapolate(np.count_nonzero(counts == 0)),
        n_components=None if n_components is None else int(n_components),
        hypo_max_nnz_row=hypo,
        suggested_hypo_max_nnz_row=suggested,
        rows_over_hypo=extrapolate(np.count_nonzero(counts > hypo)),
        bytes_csr=csr_bytes(n, nnz),
        bytes_dense=4 * n * n,
        bytes_ellpack=n * hypo * (4 + 4),
        estimated=bool(estimated),
        sample_rows=(m if sample_rows is None else int(sample_rows)) if estimated else None,
        **deg,
    )
