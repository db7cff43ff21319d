"""scikit-learn's kernel affinities: the dense kernel matrix, and rbf as a sparse ε-graph.

``sklearn.cluster.SpectralClustering(affinity=<kernel>)`` builds the dense n × n matrix
``pairwise_kernels(X, metric=<kernel>)``. This module gives the same affinities to our
estimator, in two forms:

- :func:`kernel_affinity`: the dense matrix itself, for any name of
  ``sklearn.metrics.pairwise.kernel_metrics()`` or a callable, on the data's array
  namespace, refused before anything is allocated when n² values do not fit.
- :func:`rbf_edge_rule`: for ``"rbf"``, the ε-graph of the core paper ("Generating
  Sparse Matrices for Large-Scale Spectral Clustering on a Single GPU"), an
  :class:`~explorer.graph.EdgeRule` whose gaussian weights are the rbf kernel's
  (σ = 1/√(2γ)) and whose squared-distance threshold drops a bounded share of each
  row's weight mass. This is what lets scikit-learn's keywords run at 10⁶–10⁷ points,
  where the dense matrix would need terabytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.metrics.pairwise import KERNEL_PARAMS, kernel_metrics, pairwise_kernels

from .._backend import array_module, to_numpy
from ..memory import check_allocation, check_gpu_allocation, format_bytes, sample_rows
from .rule import F32_EXP_UNDERFLOW, EdgeRule

__all__ = [
    "DEFAULT_MAX_DROPPED",
    "DEFAULT_SAMPLE_ROWS",
    "KERNELS",
    "RbfEdgeRule",
    "gamma_from_sigma",
    "kernel_affinity",
    "rbf_edge_rule",
    "sigma_from_gamma",
]

#: The kernel names scikit-learn's ``SpectralClustering(affinity=...)`` takes besides
#: the graph affinities (``sklearn.metrics.pairwise.kernel_metrics()``).
KERNELS = tuple(sorted(kernel_metrics()))

#: Kernels computed with CuPy on a CuPy input; the others (chi2, additive_chi2, a
#: callable) are computed by scikit-learn on a host copy and copied back.
GPU_KERNELS = ("cosine", "laplacian", "linear", "poly", "polynomial", "rbf", "sigmoid")

#: Peak bytes of the dense kernel, in units of the n × n result: laplacian's
#: ``-gamma * manhattan_distances(X)`` holds a second n × n matrix; the others work in
#: place on the result.
_PEAK_FACTOR = {"laplacian": 2.0}

#: Values per block of the CuPy kernels' intermediate arrays (float64): 32 Mi values,
#: 256 MiB.
_GPU_BLOCK_VALUES = 1 << 25

#: :func:`rbf_edge_rule`'s bound on the weight mass a row loses, relative to what it
#: keeps. Dropping a share ε of every row's mass moves the normalised affinity
#: D^-1/2 W D^-1/2 by O(ε) in norm (both the entries and the degrees change by a factor
#: within 1 ± ε), so its eigenvalues move by O(ε) and the embedding by O(ε / gap):
#: 1e-3 leaves any clustering whose eigengap is well above 1e-3 as the dense kernel's.
DEFAULT_MAX_DROPPED = 1e-3

#: Rows :func:`rbf_edge_rule` measures (each against all n points).
DEFAULT_SAMPLE_ROWS = 256

#: Resolution of :func:`rbf_edge_rule`'s threshold search, in units of γ d²: the mass
#: of each sampled row is binned by γ d² in steps of 1/32 (weights within a factor
#: e^(1/32) ≈ 1.03), and the threshold is a bin edge.
_BIN_WIDTH = 1.0 / 32.0


# --------------------------------------------------------------------- gamma and sigma


def sigma_from_gamma(gamma: float) -> float:
    """σ of our gaussian weight ``exp(-d²/(2σ²))`` equal to scikit-learn's rbf kernel
    ``exp(-γ d²)``: σ = 1/√(2γ)."""
    gamma = _check_gamma(gamma, allow_none=False)
    return 1.0 / math.sqrt(2.0 * gamma)


def gamma_from_sigma(sigma: float) -> float:
    """γ of scikit-learn's rbf kernel ``exp(-γ d²)`` equal to our gaussian weight of
    width `sigma`: γ = 1/(2σ²)."""
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.floating, np.integer)) \
            or not math.isfinite(float(sigma)) or float(sigma) <= 0:
        raise ValueError(f"sigma must be a finite number > 0; got sigma={sigma!r}")
    return 1.0 / (2.0 * float(sigma) ** 2)


def _check_gamma(gamma, *, allow_none: bool = True, low_inclusive: bool = False):
    if gamma is None and allow_none:
        return None
    ok = not isinstance(gamma, bool) and isinstance(gamma, (int, float, np.floating, np.integer))
    if ok:
        g = float(gamma)
        ok = math.isfinite(g) and (g >= 0 if low_inclusive else g > 0)
    if not ok:
        allowed = ">= 0" if low_inclusive else "> 0"
        none = " or None" if allow_none else ""
        raise ValueError(f"gamma must be a finite number {allowed}{none}; got gamma={gamma!r}")
    return g


# --------------------------------------------------------------------- the dense kernel


def _kernel_params(kernel, gamma, degree, coef0, kernel_params) -> dict:
    """The keywords the kernel gets, as ``SpectralClustering.fit`` passes them:
    `kernel_params`, with gamma, degree and coef0 put over them for a named kernel and
    filtered to those it takes (None left out: the kernel's own default); a callable
    gets `kernel_params` only."""
    if kernel_params is not None and not isinstance(kernel_params, dict):
        raise ValueError(
            f"kernel_params must be a dict of keywords for the kernel or None; got "
            f"{type(kernel_params).__name__}"
        )
    params = dict(kernel_params or {})
    if callable(kernel):
        return params
    params.update(gamma=gamma, degree=degree, coef0=coef0)
    # None: the kernel function's own default (scikit-learn's chi2 refuses gamma=None)
    return {k: v for k, v in params.items() if k in KERNEL_PARAMS[kernel] and v is not None}


def _check_kernel(kernel):
    if callable(kernel):
        return kernel
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(
            f"kernel={kernel!r} is not a kernel scikit-learn knows; use one of "
            f"{', '.join(KERNELS)} or a callable k(x, y) -> float"
        )
    return kernel


def _result_dtype(X):
    """float32 for float32 data (as scikit-learn returns), float64 otherwise."""
    return np.float32 if np.dtype(X.dtype) == np.float32 else np.float64


def kernel_affinity(X, kernel="rbf", *, gamma=None, degree=3, coef0=1, kernel_params=None,
                    available: int | None = None, free: int | None = None):
    """The dense n × n kernel affinity of `X`, with scikit-learn's meanings.

    ``kernel_affinity(X, k, gamma=g, degree=p, coef0=c, kernel_params=kp)`` equals
    what ``sklearn.cluster.SpectralClustering(affinity=k, gamma=g, degree=p, coef0=c,
    kernel_params=kp)`` builds as its ``affinity_matrix_``:
    ``pairwise_kernels(X, metric=k, filter_params=True, **params)``.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        NumPy (or SciPy sparse) data is passed to scikit-learn's ``pairwise_kernels``
        (exact: the same function). CuPy data stays on the GPU for the kernels of
        :data:`GPU_KERNELS`; for ``"chi2"``, ``"additive_chi2"`` and a callable it is
        copied to the host, computed by scikit-learn and copied back.
    kernel : str or callable, default "rbf"
        A name of ``sklearn.metrics.pairwise.kernel_metrics()`` (:data:`KERNELS`), or a
        callable ``k(x, y, **kernel_params) -> float`` called on pairs of rows (1-D
        arrays), as scikit-learn does: once per pair i < j and once per diagonal
        entry; the matrix is made symmetric from the upper triangle.
    gamma : float or None
        The kernels' γ; None is each kernel's own default in scikit-learn's pairwise
        functions (1/n_features for rbf, laplacian, poly and sigmoid; 1 for chi2).
        ``SpectralClustering`` passes its own default, 1.0, instead.
    degree, coef0 : float
        Of the polynomial (both) and sigmoid (coef0) kernels; ignored by the others.
    kernel_params : dict or None
        More keywords for the kernel (e.g. a callable's parameters). For a named
        kernel, `gamma`, `degree` and `coef0` override the same keys here, and keys
        the kernel does not take are dropped, as ``SpectralClustering`` does.
    available : int, optional
        Host bytes available, for the memory check (default: what the OS reports).
    free : int, optional
        Free GPU bytes, for the memory check of a CuPy input (default: the device's).

    Returns
    -------
    K : ndarray of shape (n_samples, n_samples)
        float32 for float32 data, float64 otherwise, on the namespace of `X`.

    Raises
    ------
    ValueError
        An unknown kernel name, a negative or non-finite gamma.
    explorer.memory.MemoryEstimateError
        Before anything is allocated, when the n × n matrix (n² × 4 or 8 bytes; twice
        that on the host for laplacian and for a callable, whose results hold a second
        n × n matrix) would not fit: the message names the size.
        The sparse alternative for rbf is :func:`rbf_edge_rule`.
    """
    kernel = _check_kernel(kernel)
    gamma = _check_gamma(gamma, low_inclusive=True)
    params = _kernel_params(kernel, gamma, degree, coef0, kernel_params)
    if not hasattr(X, "shape"):  # a list of rows
        X = np.asarray(X, dtype=np.float64)
    xp = array_module(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {tuple(X.shape)}")
    n = int(X.shape[0])
    dtype = _result_dtype(X)
    result = n * n * np.dtype(dtype).itemsize
    name = kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "callable")
    size = np.dtype(dtype).itemsize
    what = (f"the dense {n} x {n} {np.dtype(dtype).name} affinity of kernel {name!r} "
            f"(n² x {size} bytes = {format_bytes(result)})")
    advice = ("use a sparse graph instead: affinity='rbf' as a thresholded ε-graph "
              "(explorer.graph.pairwise.rbf_edge_rule), 'nearest_neighbors', or fewer points")
    gpu = xp is not np and isinstance(kernel, str) and kernel in GPU_KERNELS
    if gpu:
        check_gpu_allocation(result + _gpu_block_rows(n, X.shape[1], kernel) * n * 8,
                             what, advice, free=free)
        return _gpu_kernel(xp, X, kernel, params, dtype)
    factor = 1.0 if isinstance(kernel, str) else 2.0  # a callable: out + out.T
    check_allocation(result * _PEAK_FACTOR.get(kernel, factor), what, advice,
                     available=available)
    if xp is np:
        return pairwise_kernels(X, metric=kernel, filter_params=True, **params)
    check_gpu_allocation(result, what, advice, free=free)  # the host result goes to the device
    host = X.get()  # CuPy dense or sparse: NumPy or SciPy sparse
    return xp.asarray(pairwise_kernels(host, metric=kernel, filter_params=True, **params))


def _gpu_block_rows(n: int, d: int, kernel: str) -> int:
    """Rows per block of the CuPy kernels: a block's float64 intermediates (block × n,
    and block × n × d for laplacian's L1 distances) within :data:`_GPU_BLOCK_VALUES`."""
    width = n * (max(int(d), 1) if kernel == "laplacian" else 1)
    return int(max(1, min(n, _GPU_BLOCK_VALUES // max(width, 1))))


def _gpu_kernel(xp, X, kernel: str, params: dict, dtype):
    """The named kernels in CuPy, in float64 row blocks written into the result,
    following scikit-learn's definitions (``sklearn.metrics.pairwise``)."""
    if hasattr(X, "toarray"):  # cupyx sparse
        X = X.toarray()
    X = xp.asarray(X, dtype=xp.float64)
    n, d = X.shape
    gamma = params.get("gamma")
    if gamma is None and kernel != "cosine":
        gamma = 1.0 / d
    out = xp.empty((n, n), dtype=dtype)
    step = _gpu_block_rows(n, d, kernel)
    if kernel == "rbf":
        Xc = X - X.mean(axis=0)  # distances do not move; the cancellation in |a|²+|b|²-2ab does
        sq = (Xc * Xc).sum(axis=1)
    elif kernel == "cosine":
        norms = xp.sqrt((X * X).sum(axis=1))
        Xn = X / xp.where(norms > 0, norms, 1.0)[:, None]  # zero rows stay zero
    for i0 in range(0, n, step):
        i1 = min(n, i0 + step)
        if kernel == "rbf":
            block = sq[i0:i1, None] + sq[None, :] - 2.0 * (Xc[i0:i1] @ Xc.T)
            xp.maximum(block, 0.0, out=block)
            idx = xp.arange(i0, i1)
            block[idx - i0, idx] = 0.0  # a point's distance to itself, as scikit-learn sets
            block = xp.exp(-gamma * block)
        elif kernel == "laplacian":
            block = xp.abs(X[i0:i1, None, :] - X[None, :, :]).sum(axis=2)
            block = xp.exp(-gamma * block)
        elif kernel == "cosine":
            block = Xn[i0:i1] @ Xn.T
        else:
            block = X[i0:i1] @ X.T
            if kernel in ("poly", "polynomial"):
                block = (gamma * block + params["coef0"]) ** params["degree"]
            elif kernel == "sigmoid":
                block = xp.tanh(gamma * block + params["coef0"])
        out[i0:i1] = block
    return out


# --------------------------------------------------------------------- rbf as an ε-graph


@dataclass(frozen=True)
class RbfEdgeRule:
    """scikit-learn's rbf kernel as a thresholded ε-graph, and what the threshold drops.

    Attributes
    ----------
    rule : EdgeRule
        ``metric="gaussian"``, ``sigma = 1/√(2γ)`` (the weight exp(-d²/(2σ²)) is
        exp(-γ d²)), ``threshold_sqdist = t``: the pairs with d² < t are edges.
    gamma : float
        The rbf kernel's γ.
    max_dropped : float
        The bound asked for: per row, dropped mass ≤ `max_dropped` × kept mass.
    dropped : float
        The largest ratio dropped / kept measured on the sampled rows that keep some
        mass (float64); above `max_dropped` only when `capped`.
    dropped_mean : float
        Its mean over those rows.
    n_rows : int
        Rows sampled (each measured against all n points).
    edges_per_row : float
        Mean edges of a sampled row (other points with d² < t): nnz ≈ n × this.
    capped : bool
        Whether some sampled row needed a threshold beyond ``2σ² · 103.3``, the squared
        distance from which the builders' float32 weight is 0; t stops there (farther
        pairs would be edges of weight 0), and such rows lose more than the bound.
    isolated : int
        Sampled rows with no other point within ``2σ² · 103.3``: their float32 weights
        to every point are 0, so the graph leaves them isolated whatever the threshold
        (scikit-learn's float64 kernel gives them weights below 1e-44). They do not set
        the threshold and are not part of `dropped`.
    """

    rule: EdgeRule
    gamma: float
    max_dropped: float
    dropped: float
    dropped_mean: float
    n_rows: int
    edges_per_row: float
    capped: bool
    isolated: int = 0

    def describe(self) -> str:
        """One line for a plan or a log: the rule and the measured bound."""
        text = (f"rbf gamma={self.gamma:.6g} as gaussian sigma={self.rule.sigma:.6g}, "
                f"threshold_sqdist={self.rule.threshold:.6g}: dropped weight mass "
                f"<= {100 * self.dropped:.3g} % of the kept mass on a sample of "
                f"{self.n_rows} rows (bound {100 * self.max_dropped:.3g} %), "
                f"~{self.edges_per_row:.3g} edges per row")
        if self.capped:
            text += "; capped where float32 weights underflow"
        if self.isolated:
            text += (f"; {self.isolated} sampled row(s) have no other point within it "
                     "(isolated, as their float32 weights are 0)")
        return text


def rbf_edge_rule(X, gamma=None, *, max_dropped=DEFAULT_MAX_DROPPED,
                  n_sample_rows=DEFAULT_SAMPLE_ROWS, random_state=0) -> RbfEdgeRule:
    """The ε-graph edge rule of scikit-learn's rbf kernel, its threshold chosen so that
    each row keeps all but a share `max_dropped` of its weight mass.

    scikit-learn's ``affinity="rbf"`` weighs every pair ``exp(-γ d²)``; the graph of
    the core paper keeps the pairs with d² < t, with the same weights (gaussian,
    σ = 1/√(2γ)). For a row i, the weight mass a threshold t drops is
    ``Σ_{j≠i, d²ᵢⱼ ≥ t} exp(-γ d²ᵢⱼ)`` and the mass it keeps
    ``Σ_{j≠i, d²ᵢⱼ < t} exp(-γ d²ᵢⱼ)`` (the diagonal is not part of a graph Laplacian).
    t is the smallest threshold (on a grid of γ t in steps of 1/32) at which every
    sampled row drops at most `max_dropped` × what it keeps.

    How t follows: the mass of each of `n_sample_rows` rows (chosen by
    :func:`explorer.memory.sample_rows`) is measured against all n points, brute
    force in blocks, and binned by γ d²; for each row, the tail of its bins gives the
    smallest t meeting the bound; t is the largest of these, so every sampled row
    meets it, and the measured ratios are returned. Cost: n × `n_sample_rows` distances
    (a matrix product per block), on the namespace of `X` (the GPU for CuPy).

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        NumPy or CuPy data.
    gamma : float or None
        The rbf kernel's γ > 0; None is ``SpectralClustering``'s default, 1.0 (not the
        1/n_features of ``sklearn.metrics.pairwise.rbf_kernel``).
    max_dropped : float, default :data:`DEFAULT_MAX_DROPPED` (1e-3)
        Per row, the mass dropped relative to the mass kept, in (0, 1]. The default
        moves the normalised affinity by O(1e-3) in norm (see
        :data:`DEFAULT_MAX_DROPPED`).
    n_sample_rows : int, default 256
        Rows measured (all rows when n is smaller).
    random_state : int, default 0
        Seed of the row sample.

    Returns
    -------
    RbfEdgeRule
        The rule, and the measured dropped mass (``.dropped``, ``.describe()``).

    Notes
    -----
    The threshold is never beyond 2σ² · 103.3 (:attr:`EdgeRule.zero_weight_sqdist`):
    the builders weigh in float32, where farther pairs weigh 0. A sampled row that needs
    more (a point whose nearest neighbours are that far) sets ``capped`` and its ratio
    is reported as measured. The bound holds for the sampled rows; other rows are
    estimated by them, as the graph's memory estimate is.
    """
    gamma = 1.0 if gamma is None else _check_gamma(gamma, allow_none=False)
    if isinstance(max_dropped, bool) or not isinstance(max_dropped, (int, float, np.floating)) \
            or not 0.0 < float(max_dropped) <= 1.0:
        raise ValueError(f"max_dropped must be a number in (0, 1]; got {max_dropped!r}")
    if isinstance(n_sample_rows, bool) or not isinstance(n_sample_rows, (int, np.integer)) \
            or n_sample_rows < 1:
        raise ValueError(f"n_sample_rows must be an integer >= 1; got {n_sample_rows!r}")
    eps = float(max_dropped)
    if not hasattr(X, "shape"):  # a list of rows
        X = np.asarray(X, dtype=np.float64)
    xp = array_module(X)
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"X must be 2-D with at least one row; got shape {tuple(X.shape)}")
    X = xp.asarray(X, dtype=xp.float64)
    if not bool(xp.isfinite(X).all()):
        raise ValueError("X holds NaN or infinite values")
    X = X - X.mean(axis=0)
    n = X.shape[0]
    rows = sample_rows(n, int(n_sample_rows), int(random_state))
    m = rows.size
    s_max = F32_EXP_UNDERFLOW  # γ d² from which the float32 weight is 0
    nb = int(math.floor(s_max / _BIN_WIDTH))  # bins [b h, (b+1) h), b < nb; bin nb: beyond
    mass = xp.zeros(m * (nb + 1))
    count = xp.zeros(m * (nb + 1))
    S = X[xp.asarray(rows)]
    s_sq = (S * S).sum(axis=1)
    row_ids = xp.asarray(rows)[:, None]
    offset = (xp.arange(m) * (nb + 1))[:, None]
    step = max(1, (1 << 22) // m)
    for j0 in range(0, n, step):
        j1 = min(n, j0 + step)
        B = X[j0:j1]
        d2 = s_sq[:, None] + (B * B).sum(axis=1)[None, :] - 2.0 * (S @ B.T)
        xp.maximum(d2, 0.0, out=d2)
        s = gamma * d2
        w = xp.exp(-s)
        w = xp.where(xp.arange(j0, j1)[None, :] == row_ids, 0.0, w)  # not the row itself
        others = (xp.arange(j0, j1)[None, :] != row_ids).astype(xp.float64)
        b = xp.minimum(xp.floor(s / _BIN_WIDTH), nb).astype(xp.int64) + offset
        mass += xp.bincount(b.ravel(), weights=w.ravel(), minlength=m * (nb + 1))
        count += xp.bincount(b.ravel(), weights=others.ravel(), minlength=m * (nb + 1))
    mass = to_numpy(mass).reshape(m, nb + 1)
    count = to_numpy(count).reshape(m, nb + 1)
    total = mass.sum(axis=1)
    # tail[:, b]: the mass of bins b.., i.e. dropped by t = b h / γ (b = 0..nb).
    tail = np.cumsum(mass[:, ::-1], axis=1)[:, ::-1]
    allowed = eps / (1.0 + eps) * total  # dropped <= eps * kept  <=>  dropped <= this
    ok = tail[:, 1:] <= allowed[:, None] * (1 + 1e-12)
    # A row with no other point within the float32 range keeps nothing at any t: it is
    # isolated in the graph whatever t is, so it does not set t.
    lone = mass[:, :nb].sum(axis=1) == 0
    met = ok.any(axis=1) | lone
    first = np.where(met, ok.argmax(axis=1) + 1, nb)  # the smallest b >= 1 meeting it
    b = int(first[~lone].max()) if (~lone).any() else 1
    capped = bool((~met).any() or b >= nb)
    s_t = b * _BIN_WIDTH  # <= s_max
    kept = mass[:, :b].sum(axis=1)
    dropped = total - kept
    has_kept = ~lone & (kept > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(dropped > 0, dropped / kept, 0.0)[has_kept]
    if ratio.size == 0:
        ratio = np.zeros(1)
    sigma = 1.0 / math.sqrt(2.0 * gamma)
    rule = EdgeRule("gaussian", sigma, "sqdist", s_t / gamma)
    return RbfEdgeRule(rule=rule, gamma=gamma, max_dropped=eps, dropped=float(ratio.max()),
                       dropped_mean=float(ratio.mean()), n_rows=int(m),
                       edges_per_row=float(count[:, :b].sum(axis=1).mean()), capped=capped,
                       isolated=int(lone.sum()))
