"""The float64 reference: what an edge and its weight are, pair by pair.

Every builder, CPU and GPU, is tested against this module, and the CPU builders use
it for their final decisions, so they equal it exactly (same pattern, same bits).

The arithmetic is fixed once, here:

* inputs are the float32 data widened to float64 (exactly);
* a squared distance is ``sum_k (x_ik - x_jk)**2`` accumulated feature by feature
  in float64, **not** ``|x|^2 + |y|^2 - 2 x.y`` (that expansion cancels
  catastrophically when the points are close, which is exactly where the threshold
  is);
* a cosine is ``(sum_k x_ik x_jk) / (|x_i| |x_j|)`` with the norms accumulated the
  same way, clipped to [-1, 1]; a zero vector has cosine ``-inf`` with everything,
  so it never passes a threshold and gets no edge;
* a gaussian weight is ``exp(-d2 / (2 sigma^2))`` computed in float64 and only then
  cast to float32 by the builders.

Accumulating one feature at a time (an explicit loop over the d columns, each step a
vectorised operation over all pairs) makes the dense form (:func:`pair_values`) and
the pair-list form (:func:`pair_values_at`) perform the very same IEEE operations
in the very same order, so they agree to the last bit; a library reduction
(``sum(axis=-1)``, BLAS) would pick its own order. It also makes every value
symmetric bit for bit: ``(a - b)**2 == (b - a)**2`` and ``a*b == b*a`` exactly.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._backend import array_module
from .rule import EdgeRule

#: Pairs evaluated per chunk in :meth:`PairValues.at`. Each feature step makes a few
#: float64 temporaries of this length; at 512 KiB each they stay in cache, which makes
#: d = 784 four times faster than 8 MiB chunks, and the per-call overhead is still
#: negligible for d = 2.
_PAIR_CHUNK = 1 << 16

#: Bytes of float64 scratch per row block in :func:`reference_csr`.
_BLOCK_BYTES = 1 << 24


def index_dtype(nnz: int, n: int):
    """The CSR index dtype the semantics prescribe: int32 while it can hold ``nnz`` and ``n``."""
    return np.int32 if max(int(nnz), int(n)) < 2**31 else np.int64


class PairValues:
    """Float64 compared values and weights for pairs of rows of one data matrix.

    Prepares the float64 columns (and row norms, for cosine) once so that builders
    can evaluate many blocks or pair lists without redoing it.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32
        Validated data (host).
    params : EdgeRule
    """

    def __init__(self, X, params: EdgeRule):
        self.params = params
        # One contiguous float64 array per feature: the loops below walk features.
        self.cols = np.ascontiguousarray(np.asarray(X, dtype=np.float64).T)
        self.norms = _norms(self.cols) if params.compares == "cosine" else None

    @property
    def n(self) -> int:
        return self.cols.shape[1]

    def block(self, rows, cols=slice(None)):
        """Compared values of the pairs (r, c), r in `rows`, c in `cols` (slices or index arrays).

        Shape ``(len(rows), len(cols))``.
        """
        a = self.cols[:, rows]
        b = self.cols[:, cols]
        if self.params.compares == "sqdist":
            return _sqdist_dense(a, b)
        return _cosine(_dot_dense(a, b), self.norms[rows][:, None], self.norms[cols][None, :])

    def at(self, i, j):
        """Compared values of the pairs ``(i[k], j[k])``: shape (len(i),)."""
        i = np.asarray(i, dtype=np.intp)
        j = np.asarray(j, dtype=np.intp)
        out = np.empty(i.shape[0], dtype=np.float64)
        for s in range(0, i.shape[0], _PAIR_CHUNK):
            ii, jj = i[s : s + _PAIR_CHUNK], j[s : s + _PAIR_CHUNK]
            if self.params.compares == "sqdist":
                out[s : s + _PAIR_CHUNK] = _sqdist_pairs(self.cols, ii, jj)
            else:
                out[s : s + _PAIR_CHUNK] = _cosine(
                    _dot_pairs(self.cols, ii, jj), self.norms[ii], self.norms[jj]
                )
        return out

    def weights(self, compared):
        """Float64 weights of pairs with these compared values (see :func:`weights_from`)."""
        return weights_from(compared, self.params)


#: Float64 elements of one feature block in :func:`_ordered_sum` (512 KiB: the size that
#: kept d = 784 fast, see :data:`_PAIR_CHUNK`).
_SUM_BLOCK = 1 << 16

#: Sums of at least this many elements go one feature at a time: the blocks' 2-D
#: gathers cost more than the Python steps they save from here on (one core,
#: sqdist of random pairs: 16 384 pairs of d = 64 in 5.0 ms against 18 ms in blocks,
#: of d = 784 in 55 against 245 ms; 256 pairs of d = 20 000 in 85 against 33 ms).
_PER_FEATURE_MIN_SIZE = 1024


def _ordered_sum(one, block, n_features: int, shape) -> np.ndarray:
    """``Σ_k term_k`` accumulated feature by feature in the order k = 0, 1, ..., d − 1.

    The rounding is that of the loop ``out = 0; out += term_k`` whichever way it runs
    (``np.add.accumulate`` is a sequential scan, and ``out + t`` rounds as ``t + out``),
    so every path that sums the same terms gets the same float64 bits: builders that
    use the pair path and builders that use the dense path decide a pair identically.
    Sums of :data:`_PER_FEATURE_MIN_SIZE` elements or more go one feature at a time,
    in place; smaller ones (few pairs of very wide data: d = 10⁶, two rows) take the
    features in blocks of about :data:`_SUM_BLOCK` elements, so that they cost
    d / block Python steps, not d (a loop per feature held the app's server for
    minutes on such a file).

    Parameters
    ----------
    one : callable
        ``one(k)``: the terms of feature k, of shape `shape` (a new array).
    block : callable
        ``block(k0, k1)``: the terms of features ``k0:k1``, shape ``(k1 - k0, *shape)``
        (a new array: it is modified).
    n_features : int
    shape : tuple
        Shape of the sum.
    """
    size = max(1, int(np.prod(shape)))
    step = _SUM_BLOCK // size
    out = np.zeros(shape)
    if step < 2 or size >= _PER_FEATURE_MIN_SIZE:
        for k in range(n_features):
            out += one(k)
        return out
    for k0 in range(0, n_features, step):
        terms = block(k0, min(n_features, k0 + step))
        terms[0] += out
        out = np.add.accumulate(terms, axis=0)[-1]
    return out


def _squared(diff):
    diff *= diff
    return diff


def _norms(cols):
    return np.sqrt(_ordered_sum(lambda k: cols[k] * cols[k],
                                lambda k0, k1: _squared(cols[k0:k1].copy()),
                                cols.shape[0], (cols.shape[1],)))


def _sqdist_dense(a, b):
    return _ordered_sum(lambda k: _squared(a[k][:, None] - b[k][None, :]),
                        lambda k0, k1: _squared(a[k0:k1, :, None] - b[k0:k1, None, :]),
                        a.shape[0], (a.shape[1], b.shape[1]))


def _sqdist_pairs(cols, i, j):
    return _ordered_sum(lambda k: _squared(cols[k][i] - cols[k][j]),
                        lambda k0, k1: _squared(cols[k0:k1, i] - cols[k0:k1, j]),
                        cols.shape[0], (i.shape[0],))


def _dot_dense(a, b):
    return _ordered_sum(lambda k: a[k][:, None] * b[k][None, :],
                        lambda k0, k1: a[k0:k1, :, None] * b[k0:k1, None, :],
                        a.shape[0], (a.shape[1], b.shape[1]))


def _dot_pairs(cols, i, j):
    return _ordered_sum(lambda k: cols[k][i] * cols[k][j],
                        lambda k0, k1: cols[k0:k1, i] * cols[k0:k1, j],
                        cols.shape[0], (i.shape[0],))


def _cosine(dot, norm_a, norm_b):
    den = norm_a * norm_b
    zero = den == 0  # a zero vector: no direction, no edge
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.clip(dot / den, -1.0, 1.0)
    return np.where(zero, -np.inf, cos)


def weights_from(compared, params: EdgeRule):
    """Float64 weights for float64 compared values, per the metric (fixed σ).

    gaussian: ``exp(-d2 / (2 sigma^2))``; uniform: 1; cosine: the cosine itself,
    0 for a zero vector (whose compared value is ``-inf``). NumPy or CuPy values
    (the same expression on both, so the GPU's kNN builders weigh as this does);
    ``sigma="local"`` weights are :func:`local_weights_from`'s.
    """
    xp = array_module(compared)
    compared = xp.asarray(compared, dtype=xp.float64)
    if params.metric == "gaussian":
        if params.local_sigma:
            raise ValueError("sigma='local' weights need each point's σ: use "
                             "local_weights_from")
        return xp.exp(compared * (-0.5 / (params.sigma * params.sigma)))
    if params.metric == "uniform":
        return xp.ones_like(compared)
    return xp.where(xp.isfinite(compared), compared, 0.0)


def local_weights_from(sqdist, sigma_i, sigma_j):
    """Self-tuning weights ``exp(-d2 / (σi σj))`` (Zelnik-Manor & Perona), float64.

    A pair of coincident points weighs 1 and a pair at a positive distance where
    ``σi σj == 0`` (a point with at least m duplicates) weighs 0, the limits of the
    formula. NumPy or CuPy arrays of one shape.
    """
    xp = array_module(sqdist)
    den = sigma_i * sigma_j
    with np.errstate(divide="ignore", invalid="ignore"):
        w = xp.exp(-(sqdist / den))
    return xp.where(den > 0, w, xp.where(sqdist == 0, 1.0, 0.0))


def edge_mask(compared, params: EdgeRule):
    """Which pairs are edges: ``compared < cutoff`` (squared distance) or ``> t`` (cosine).

    Both comparisons are strict (docs/architecture.md "Semantics"); a gaussian similarity
    threshold is decided on its squared-distance cutoff ``-2 sigma^2 ln t``, the form
    every builder compares. NaN and ``-inf`` never pass. The diagonal is the
    caller's business (its squared distance 0 passes any cutoff).
    """
    compared = np.asarray(compared)
    if params.compares == "sqdist":
        return compared < params.sqdist_cutoff
    return compared > params.threshold


def threshold_value(params: EdgeRule) -> float:
    """The value compared values are thresholded against, in their own units."""
    return params.sqdist_cutoff if params.compares == "sqdist" else params.threshold


def pair_values(Xa, Xb, params: EdgeRule):
    """Compared values and weights of every pair between the rows of `Xa` and of `Xb`.

    Parameters
    ----------
    Xa : array_like of shape (a, d)
    Xb : array_like of shape (b, d)
        Float32 data (float64 input is used as given: widening float32 is exact,
        so pass the float32 data the builders see).
    params : EdgeRule

    Returns
    -------
    compared : ndarray of shape (a, b), float64
        Squared distances (distance rules) or cosines (``-inf`` for a zero vector).
    weights : ndarray of shape (a, b), float64
        Edge weights per the metric (also filled for pairs that are not edges).
    """
    Xa = np.asarray(Xa)
    Xb = np.asarray(Xb)
    a = np.ascontiguousarray(Xa.astype(np.float64).T)
    b = np.ascontiguousarray(Xb.astype(np.float64).T)
    if params.compares == "sqdist":
        compared = _sqdist_dense(a, b)
    else:
        compared = _cosine(_dot_dense(a, b), _norms(a)[:, None], _norms(b)[None, :])
    return compared, weights_from(compared, params)


def pair_values_at(X, i, j, params: EdgeRule):
    """Compared values and weights of the pairs ``(i[k], j[k])`` of rows of `X`.

    Bit for bit the values :func:`pair_values` gives for the same pairs.
    """
    pv = PairValues(X, params)
    compared = pv.at(i, j)
    return compared, pv.weights(compared)


def reference_csr(X, params: EdgeRule):
    """The float64 brute-force similarity matrix, canonical CSR (for test sizes).

    Evaluates all n² pairs, a block of rows at a time (memory: a block × n of
    float64, never n × n), with the arithmetic of this module; O(n² d) time. Every
    rule: ε graphs, kNN graphs (:func:`reference_knn_csr`) and self-tuning weights
    (σi from :func:`reference_local_sqdist`, weights :func:`local_weights_from`).

    Parameters
    ----------
    X : ndarray of shape (n, d), float32
        The data as the builders see it (validate it with ``check_data`` first).
    params : EdgeRule

    Returns
    -------
    scipy.sparse.csr_matrix
        n × n, float32 weights, no diagonal, ascending columns per row, int32
        indices while nnz < 2**31. Edges whose float32 weight underflows to 0
        are kept as explicit zeros: the rule, not the value, makes an edge.
    """
    X = np.asarray(X)
    if params.is_knn:
        csr = reference_knn_csr(X, params)
    elif params.local_sigma:
        csr = reference_csr(X, params.pattern_rule)
    else:
        csr = _reference_epsilon(X, params)
    if params.local_sigma:
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        sig = np.sqrt(reference_local_sqdist(X, params.local_neighbor))
        d2 = PairValues(X, params).at(rows, csr.indices)
        csr.data = local_weights_from(d2, sig[rows], sig[csr.indices]).astype(np.float32)
    return csr


def _reference_epsilon(X, params: EdgeRule):
    pv = PairValues(X, params)
    n = pv.n
    step = max(1, _BLOCK_BYTES // (8 * n))
    counts = np.zeros(n, dtype=np.int64)
    cols, vals = [], []
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        compared = pv.block(slice(r0, r1))
        mask = edge_mask(compared, params)
        mask[np.arange(r1 - r0), np.arange(r0, r1)] = False
        counts[r0:r1] = mask.sum(axis=1)
        _, c = np.nonzero(mask)  # row-major: rows in order, columns ascending
        cols.append(c)
        vals.append(pv.weights(compared[mask]).astype(np.float32))
    nnz = int(counts.sum())
    idx = index_dtype(nnz, n)
    indptr = np.zeros(n + 1, dtype=idx)
    np.cumsum(counts, out=indptr[1:])
    indices = np.concatenate(cols).astype(idx, copy=False)
    data = np.concatenate(vals)
    csr = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    csr.has_sorted_indices = True
    return csr


def _knn_key(compared, params: EdgeRule):
    """Sort key of "nearer": the squared distance, or minus the cosine; a zero vector's
    ``-inf`` cosine becomes ``+inf`` (never a neighbour)."""
    key = compared if params.compares == "sqdist" else -compared
    return np.where(np.isnan(key), np.inf, key)


def reference_knn(X, params: EdgeRule, k: int):
    """Each point's `k` nearest other points, float64 brute force (for test sizes).

    Nearest: smallest squared distance (cosine: largest cosine), ties broken by the
    lower index; a zero vector under cosine is nobody's neighbour and has none.

    Returns
    -------
    neighbors : ndarray of int64, shape (n, min(k, n - 1))
        Ascending by (key, index) per row; ``-1`` pads rows with fewer candidates.
    compared : ndarray of float64, same shape
        Their compared values (NaN in padding).
    """
    X = np.asarray(X)
    pv = PairValues(X, params)
    n = pv.n
    k = min(int(k), n - 1)
    step = max(1, _BLOCK_BYTES // (16 * n))
    nbr = np.full((n, k), -1, dtype=np.int64)
    val = np.full((n, k), np.nan)
    cols = np.broadcast_to(np.arange(n), (step, n))
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        compared = pv.block(slice(r0, r1))
        key = _knn_key(compared, params)
        key[np.arange(r1 - r0), np.arange(r0, r1)] = np.inf
        order = np.lexsort((cols[: r1 - r0], key), axis=1)[:, :k]
        top = np.take_along_axis(key, order, axis=1)
        ok = np.isfinite(top)
        nbr[r0:r1] = np.where(ok, order, -1)
        val[r0:r1] = np.where(ok, np.take_along_axis(compared, order, axis=1), np.nan)
    return nbr, val


def reference_local_sqdist(X, m: int):
    """σi² of self-tuning weights: each point's squared distance to its m-th nearest
    other point (``min(m, n - 1)``-th), float64 brute force."""
    nbr, val = reference_knn(X, EdgeRule("uniform", None, None, None, graph="knn"), m)
    return val[:, -1]


def reference_knn_csr(X, params: EdgeRule):
    """The kNN graph of `params` (``graph="knn"`` or ``"mutual_knn"``), canonical CSR.

    Directed lists from :func:`reference_knn`, symmetrised with SciPy (union: the
    pattern of A + Aᵀ; mutual: of A ∘ Aᵀ), the optional threshold applied, weights per
    the metric (fixed σ; :func:`reference_csr` applies ``sigma="local"``).
    """
    X = np.asarray(X)
    n = X.shape[0]
    nbr, _ = reference_knn(X, params, params.n_neighbors)
    rows = np.repeat(np.arange(n), nbr.shape[1])
    cols = nbr.ravel()
    ok = cols >= 0
    A = sp.csr_matrix((np.ones(int(ok.sum())), (rows[ok], cols[ok])), shape=(n, n))
    S = A + A.T if params.graph == "knn" else A.multiply(A.T)
    S = sp.csr_matrix(S)
    S.sort_indices()
    r = np.repeat(np.arange(n), np.diff(S.indptr))
    c = S.indices.astype(np.int64)
    compared = PairValues(X, params).at(r, c)
    keep = edge_mask(compared, params) if params.has_threshold else np.ones(r.size, bool)
    r, c, compared = r[keep], c[keep], compared[keep]
    if params.local_sigma:
        weights = np.ones(r.size)  # replaced by reference_csr
    else:
        weights = weights_from(compared, params)
    idx = index_dtype(r.size, n)
    indptr = np.zeros(n + 1, dtype=idx)
    np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
    csr = sp.csr_matrix((weights.astype(np.float32), c.astype(idx), indptr), shape=(n, n))
    csr.has_sorted_indices = True
    return csr
