"""Testing hooks for graph builders: the oracle checks every builder's tests call.

:func:`check_canonical` checks the form docs/architecture.md "Semantics" prescribes;
:func:`assert_same_graph` compares a graph with the float64 reference
(:func:`reference_csr`, re-exported from :mod:`explorer.graph.reference`), allowing
differences only inside the float32 rounding band. Both take SciPy or CuPy CSR
matrices (CuPy ones are copied to the host) and raise ``AssertionError`` with a
message that says what differs and shows a few offending entries.
:func:`assert_same_knn_graph` does the same for kNN graphs, whose band is around each
point's k-th value. :func:`check_row_block` checks one row block of a graph (the
distributed build's).
:func:`tricky_data` makes the data that trips builders up.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._backend import to_numpy
from ._validation import check_data
from .graph import EdgeRule
from .graph.reference import (
    PairValues,
    index_dtype,
    pair_values,
    pair_values_at,
    reference_csr,
    reference_knn,
    threshold_value,
)
from .graph.rule import BAND_RTOL

__all__ = [
    "DATA_FLAVOURS",
    "assert_same_graph",
    "assert_same_knn_graph",
    "check_canonical",
    "check_row_block",
    "pair_values",
    "pair_values_at",
    "reference_csr",
    "tricky_data",
]

#: Kinds of data :func:`tricky_data` makes, each aimed at a way builders go wrong.
DATA_FLAVOURS = ("uniform", "blobs", "lattice", "duplicates", "offset", "zeros")


def tricky_data(rng, n: int, d: int, flavour: str = "uniform"):
    """Float32 test data of one of :data:`DATA_FLAVOURS`.

    ``uniform``: U[0, 1). ``blobs``: three tight Gaussian clusters (many edges within,
    none between). ``lattice``: small integers, so many pairs share a squared
    distance exactly (ties at an integer threshold) and many points coincide.
    ``duplicates``: about a third of the rows copied from others (squared distance
    0, cosine 1). ``offset``: points 1000 + U[0, 0.01), far from the origin, where
    ``|x|^2 + |y|^2 - 2x.y`` cancels catastrophically. ``zeros``: signed normal data
    with about a quarter of the rows exactly zero (cosine: no edges).

    Parameters
    ----------
    rng : numpy.random.Generator
    n, d : int
    flavour : str

    Returns
    -------
    ndarray of shape (n, d), float32
    """
    if flavour == "uniform":
        X = rng.random((n, d))
    elif flavour == "blobs":
        centres = rng.random((3, d)) * 10
        X = centres[rng.integers(0, 3, n)] + 0.3 * rng.standard_normal((n, d))
    elif flavour == "lattice":
        X = rng.integers(0, 4, (n, d)).astype(np.float64)
    elif flavour == "duplicates":
        X = rng.random((n, d))
        copies = rng.random(n) < 1 / 3
        X[copies] = X[rng.integers(0, n, int(copies.sum()))]
    elif flavour == "offset":
        X = 1000.0 + 0.01 * rng.random((n, d))
    elif flavour == "zeros":
        X = rng.standard_normal((n, d))
        X[rng.random(n) < 0.25] = 0.0
    else:
        allowed = ", ".join(DATA_FLAVOURS)
        raise ValueError(f"flavour={flavour!r} is not allowed; use one of {allowed}")
    return np.ascontiguousarray(X, dtype=np.float32)


def _host_csr(m, name: str):
    if type(m).__module__.startswith("cupyx"):
        m = m.get()
    if not (sp.issparse(m) and m.format == "csr"):
        raise AssertionError(f"{name} is not a CSR matrix: {type(m).__name__}")
    return m


def _rows_cols(m):
    rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    return rows, m.indices.astype(np.int64)


def _check_rows_form(m, r0: int, n: int):
    """The canonical form of rows ``r0:r0 + m.shape[0]`` of an n-column graph, as
    :func:`check_canonical` and :func:`check_row_block` define it (everything but
    squareness and symmetry); returns the entries' local rows and their columns."""
    rows_n, nnz = m.shape[0], int(m.nnz)
    if m.data.dtype != np.float32:
        raise AssertionError(f"data dtype is {m.data.dtype}, expected float32")
    want = np.dtype(index_dtype(nnz, n))
    if m.indices.dtype != want or m.indptr.dtype != want:
        raise AssertionError(
            f"index dtypes indices={m.indices.dtype}, indptr={m.indptr.dtype}; expected {want} "
            f"for nnz={nnz}, n={n}"
        )
    ptr = m.indptr
    if (ptr.shape != (rows_n + 1,) or ptr[0] != 0 or ptr[-1] != nnz
            or m.indices.size != nnz or m.data.size != nnz):
        raise AssertionError(
            f"inconsistent indptr: length {ptr.size} (want {rows_n + 1}), first {ptr[0]}, "
            f"last {ptr[-1]}, nnz {nnz}, len(indices) {m.indices.size}, len(data) {m.data.size}"
        )
    if np.any(np.diff(ptr) < 0):
        bad = np.flatnonzero(np.diff(ptr) < 0)[:5]
        raise AssertionError(f"indptr decreases at rows {bad.tolist()}")
    if not np.all(np.isfinite(m.data)):
        bad = np.flatnonzero(~np.isfinite(m.data))[:5]
        raise AssertionError(f"{np.count_nonzero(~np.isfinite(m.data))} non-finite values, "
                             f"at data positions {bad.tolist()}")
    rows, cols = _rows_cols(m)
    if nnz and (cols.min() < 0 or cols.max() >= n):
        raise AssertionError(f"column indices outside [0, {n}): min {cols.min()}, max {cols.max()}")
    unsorted = (rows[1:] == rows[:-1]) & (cols[1:] <= cols[:-1])
    if np.any(unsorted):
        k = np.flatnonzero(unsorted)[:5]
        raise AssertionError(
            "column indices not strictly ascending within rows (unsorted or duplicated): "
            + ", ".join(f"row {r0 + rows[q]}: {cols[q]} then {cols[q + 1]}" for q in k)
        )
    diag = rows + r0 == cols
    if np.any(diag):
        raise AssertionError(f"{np.count_nonzero(diag)} stored diagonal entries, rows "
                             f"{(rows[diag][:5] + r0).tolist()}")
    return rows, cols


def check_canonical(csr, *, symmetry_rtol: float = 0.0) -> None:
    """Assert that `csr` is a graph in the canonical form every builder must return.

    Checked: square; float32 data, all finite; indices and indptr of one dtype,
    int32 while nnz and n fit (int64 beyond); ``indptr`` starts at 0, never
    decreases and ends at nnz; column indices in range and strictly ascending in
    each row (sorted, no duplicates); no stored diagonal; symmetric pattern, and
    symmetric values (exactly, or to `symmetry_rtol` relative).

    Explicit zeros are allowed: an edge is decided by the rule, and its float32
    weight can be 0 (a gaussian weight that underflows for a far pair under a
    generous threshold; a cosine of exactly 0 under a negative threshold). A
    builder must keep such edges, so this check must not reject them.

    Parameters
    ----------
    csr : scipy.sparse CSR or cupyx.scipy.sparse.csr_matrix
    symmetry_rtol : float
        Relative tolerance on ``S[i, j] == S[j, i]``. 0 (exact) suits builders that
        compute both orders with the same arithmetic (all of ours); a tensor-core
        GEMM builder may pass a small tolerance and say why.

    Raises
    ------
    AssertionError
        Naming the first property that fails, with examples.
    """
    m = _host_csr(csr, "csr")
    n_rows, n_cols = m.shape
    if n_rows != n_cols:
        raise AssertionError(f"not square: shape {m.shape}")
    n = n_rows
    rows, cols = _check_rows_form(m, 0, n)
    # Symmetry: the transposed entries, sorted like the originals, must match them.
    key = rows * n + cols
    tkey = cols * n + rows
    order = np.argsort(tkey, kind="stable")
    if not np.array_equal(tkey[order], key):
        missing = np.setdiff1d(key, tkey, assume_unique=True)[:5]
        raise AssertionError(
            "pattern not symmetric: entries without a mirror "
            + ", ".join(f"({q // n}, {q % n})" for q in missing)
        )
    a = m.data.astype(np.float64)
    b = a[order]
    off = np.abs(a - b) > symmetry_rtol * np.abs(b)
    if np.any(off):
        k = np.flatnonzero(off)[:5]
        raise AssertionError(
            f"values not symmetric (rtol={symmetry_rtol}) at {np.count_nonzero(off)} entries: "
            + ", ".join(f"S[{rows[q]}, {cols[q]}]={a[q]!r} vs S[{cols[q]}, {rows[q]}]={b[q]!r}"
                        for q in k)
        )


def check_row_block(block, r0: int, n: int) -> None:
    """Assert that `block` is rows ``r0:r0 + block.shape[0]`` of a graph of `n` points in
    canonical form.

    Checked: shape (rows, n); float32 data, all finite; indices and indptr of one
    dtype, int32 while the block's nnz and n fit (int64 beyond); ``indptr`` starts at
    0, never decreases and ends at nnz; column indices in [0, n) and strictly
    ascending in each row; no entry (i, i) of the whole graph (column ``r0 + row``).
    Symmetry is a property of the whole graph: check the stacked blocks with
    :func:`check_canonical`.

    Parameters
    ----------
    block : scipy.sparse CSR or cupyx.scipy.sparse.csr_matrix
    r0 : int
        The block's first row in the whole graph.
    n : int
        Points (columns).

    Raises
    ------
    AssertionError
        Naming the first property that fails.
    """
    m = _host_csr(block, "block")
    rows_n = m.shape[0]
    if m.shape != (rows_n, n):
        raise AssertionError(f"shape {m.shape}, expected ({rows_n}, {n})")
    _check_rows_form(m, r0, n)

def assert_same_graph(
    actual, expected, X, params: EdgeRule, rtol: float = 1e-5, *, atol: float | None = None,
    max_report: int = 6,
) -> None:
    """Assert that `actual` is the graph `expected` up to the float32 rounding band.

    The patterns must be equal except for pairs whose float64 compared value (squared
    distance or cosine, :func:`explorer.graph.reference.pair_values_at`) lies within
    ``params.band`` of the threshold: a float32 builder may decide those either way.
    On the common pattern the values must agree: ``|a - e| <= rtol |e| + atol``.

    Parameters
    ----------
    actual, expected : scipy.sparse CSR or cupyx.scipy.sparse.csr_matrix
        n × n. `expected` is normally ``reference_csr(X, params)``.
    X : array_like of shape (n, d)
        The data both were built from (NumPy or CuPy; float32 as the builders saw it).
    params : EdgeRule
    rtol : float
        Relative tolerance on values (docs/architecture.md "Exactness": 1e-5).
    atol : float, optional
        Absolute tolerance on values; default the smallest normal float32 (~1.2e-38),
        so weights that underflow into float32 subnormals (a GPU may flush them to 0)
        compare equal.
    max_report : int
        Offending entries shown per kind.

    Raises
    ------
    AssertionError
        With counts (nnz of both, pattern differences outside and inside the band,
        values off) and up to `max_report` offending pairs of each kind with their
        float64 compared values.
    """
    A = _host_csr(actual, "actual")
    E = _host_csr(expected, "expected")
    X = check_data(to_numpy(X))
    n = X.shape[0]
    if A.shape != (n, n) or E.shape != (n, n):
        raise AssertionError(f"shapes actual {A.shape}, expected {E.shape}; X has n={n} rows")
    atol = float(np.finfo(np.float32).tiny) if atol is None else float(atol)
    ra, ca = _rows_cols(A)
    re, ce = _rows_cols(E)
    ka = ra * n + ca
    ke = re * n + ce
    for name, k in (("actual", ka), ("expected", ke)):
        uniq = np.unique(k)
        if uniq.size != k.size:
            raise AssertionError(f"{name} stores {k.size - uniq.size} duplicate entries")
    common, ia, ie = np.intersect1d(ka, ke, assume_unique=True, return_indices=True)
    extra = np.setdiff1d(ka, ke, assume_unique=True)
    missing = np.setdiff1d(ke, ka, assume_unique=True)

    thr = threshold_value(params)

    values = PairValues(X, params)  # compared values only (self-tuning σ has no pair weight)

    def judge(keys):
        i, j = keys // n, keys % n
        compared = values.at(i, j)
        with np.errstate(invalid="ignore"):
            inside = (np.abs(compared - thr) <= params.band) & (i != j)
        return i, j, compared, inside

    mi, mj, mc, m_in = judge(missing)
    xi, xj, xc, x_in = judge(extra)

    a_val = A.data[ia].astype(np.float64)
    e_val = E.data[ie].astype(np.float64)
    with np.errstate(invalid="ignore"):
        v_off = ~(np.abs(a_val - e_val) <= rtol * np.abs(e_val) + atol)

    n_missing = int(np.count_nonzero(~m_in))
    n_extra = int(np.count_nonzero(~x_in))
    n_values = int(np.count_nonzero(v_off))
    if not (n_missing or n_extra or n_values):
        return

    def fmt_pair(i, j, c):
        rel = (c - thr) / abs(thr) if thr != 0 else c - thr
        return (f"({i}, {j}): float64 {params.compares}={c!r}, threshold {thr!r}, "
                f"relative offset {rel:+.3g} (band ±{params.band / max(abs(thr), 1e-300):.1g})")

    lines = [
        f"graphs differ for {params.describe()}, n={n}:",
        f"  nnz actual={A.nnz}, expected={E.nnz}, common={common.size}",
        f"  missing from actual outside the rounding band: {n_missing}",
        f"  extra in actual outside the rounding band: {n_extra}"
        + (f" (of which {int(np.count_nonzero(xi == xj))} on the diagonal)" if extra.size else ""),
        f"  differing inside the band (allowed): "
        f"{int(np.count_nonzero(m_in) + np.count_nonzero(x_in))}",
        f"  values off by more than rtol={rtol:g} (atol={atol:g}): {n_values}",
    ]
    for q in np.flatnonzero(~m_in)[:max_report]:
        lines.append(f"    missing {fmt_pair(mi[q], mj[q], mc[q])}, expected value "
                     f"{E[mi[q], mj[q]]!r}")
    for q in np.flatnonzero(~x_in)[:max_report]:
        lines.append(f"    extra {fmt_pair(xi[q], xj[q], xc[q])}, actual value "
                     f"{A[xi[q], xj[q]]!r}")
    if n_values:
        rel = np.abs(a_val - e_val) / np.maximum(np.abs(e_val), atol)
        worst = np.argsort(-np.where(v_off, np.nan_to_num(rel, nan=np.inf), -1.0))[:max_report]
        lines.append(f"    worst relative value error {np.nanmax(np.where(v_off, rel, 0)):.3g}")
        for q in worst:
            if v_off[q]:
                lines.append(f"    value at ({common[q] // n}, {common[q] % n}): actual "
                             f"{a_val[q]!r}, expected {e_val[q]!r}")
    raise AssertionError("\n".join(lines))


def assert_same_knn_graph(actual, expected, X, params: EdgeRule, rtol: float = 1e-5, *,
                          atol: float | None = None, max_report: int = 6) -> None:
    """Assert that the kNN graph `actual` is `expected` up to ties within the band.

    A pair may differ only where its float64 compared value lies within the rounding
    band (relative :data:`~explorer.graph.rule.BAND_RTOL`; cosines relative to
    ``max(|v|, 1)``) of the k-th nearest value of one of its ends (a tie for the last
    place, which a float32 or differently ordered search may give either way), or of
    the rule's threshold when it has one. Values on the common pattern agree to
    ``rtol |e| + atol``.

    Parameters
    ----------
    actual, expected : scipy.sparse CSR or cupyx.scipy.sparse.csr_matrix
        `expected` is normally ``reference_csr(X, params)``.
    X : array_like of shape (n, d)
    params : EdgeRule
        A kNN rule (``graph`` ``"knn"`` or ``"mutual_knn"``).
    rtol, atol, max_report
        As in :func:`assert_same_graph`.

    Raises
    ------
    AssertionError
        With the counts and a few offending pairs.
    """
    A = _host_csr(actual, "actual")
    E = _host_csr(expected, "expected")
    X = check_data(to_numpy(X))
    n = X.shape[0]
    atol = float(np.finfo(np.float32).tiny) if atol is None else float(atol)
    ra, ca = _rows_cols(A)
    re, ce = _rows_cols(E)
    ka, ke = ra * n + ca, re * n + ce
    if np.unique(ka).size != ka.size:
        raise AssertionError("actual stores duplicate entries")
    _, val = reference_knn(X, params, params.n_neighbors)
    kth = np.full(n, np.nan)
    has = ~np.isnan(val)
    last = has.sum(axis=1) - 1
    ok = last >= 0
    kth[ok] = val[np.flatnonzero(ok), last[ok]]

    def near(c, ref):
        scale = np.abs(ref) if params.compares == "sqdist" else np.maximum(np.abs(ref), 1.0)
        with np.errstate(invalid="ignore"):
            return np.abs(c - ref) <= BAND_RTOL * scale

    # The compared values only: a rule of the same comparison without weights to make.
    probe = params if params.compares == "cosine" else EdgeRule("uniform", None, None, None,
                                                                graph="knn")

    def judge(keys):
        i, j = keys // n, keys % n
        c, _ = pair_values_at(X, i, j, probe)
        allowed = near(c, kth[i]) | near(c, kth[j])
        if params.has_threshold:
            allowed |= near(c, threshold_value(params))
        return i, j, c, allowed & (i != j)

    common, ia, ie = np.intersect1d(ka, ke, assume_unique=True, return_indices=True)
    xi, xj, xc, x_ok = judge(np.setdiff1d(ka, ke, assume_unique=True))
    mi, mj, mc, m_ok = judge(np.setdiff1d(ke, ka, assume_unique=True))
    a_val = A.data[ia].astype(np.float64)
    e_val = E.data[ie].astype(np.float64)
    with np.errstate(invalid="ignore"):
        v_off = ~(np.abs(a_val - e_val) <= rtol * np.abs(e_val) + atol)
    if not ((~x_ok).any() or (~m_ok).any() or v_off.any()):
        return
    lines = [f"kNN graphs differ for {params.describe()}, n={n}: nnz actual={A.nnz}, "
             f"expected={E.nnz}, common={common.size}; missing outside the band "
             f"{int((~m_ok).sum())}, extra outside the band {int((~x_ok).sum())}, "
             f"values off {int(v_off.sum())}"]
    for q in np.flatnonzero(~m_ok)[:max_report]:
        lines.append(f"    missing ({mi[q]}, {mj[q]}): {mc[q]!r}, k-th of {mi[q]}: "
                     f"{kth[mi[q]]!r}, of {mj[q]}: {kth[mj[q]]!r}")
    for q in np.flatnonzero(~x_ok)[:max_report]:
        lines.append(f"    extra ({xi[q]}, {xj[q]}): {xc[q]!r}, k-th of {xi[q]}: "
                     f"{kth[xi[q]]!r}, of {xj[q]}: {kth[xj[q]]!r}")
    for q in np.flatnonzero(v_off)[:max_report]:
        lines.append(f"    value at ({common[q] // n}, {common[q] % n}): actual {a_val[q]!r}, "
                     f"expected {e_val[q]!r}")
    raise AssertionError("\n".join(lines))
