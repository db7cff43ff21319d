"""Feature scaling before a graph is built: ``scale="standard" | "minmax" | None``.

An ε-ball or a k-nearest-neighbour list is measured in the data's own units, so a
feature in thousands drowns a feature in units (scikit-learn's wine: proline in the
hundreds, hue around 1). Scaling puts the features on one footing first:

- ``"standard"``: ``(x - mean) / std`` per feature (scikit-learn's ``StandardScaler``,
  population std);
- ``"minmax"``: ``(x - min) / (max - min)`` per feature, into [0, 1]
  (``MinMaxScaler``);
- ``None``: the data as given.

The statistics are fitted in float64 (sums over blocks of rows, so no float64 copy of
the data is made), on the device the data lives on (NumPy or CuPy). A constant feature
(std or range 0) cannot be scaled: it is centred (standard: 0; minmax: 0) and left
with scale 1, with a :class:`ConstantFeatureWarning` that names it, never a division by
zero. :func:`check_feature_scales` warns with a :class:`FeatureScaleWarning` when no
scaling is chosen and the features' spreads differ by more than
:data:`SCALE_RATIO_WARN`.

:class:`explorer.SpectralClustering`, the command line (``--scale``) and the app use
:func:`fit_scaler`; :func:`scale_features` returns the scaled data (what the app shows).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ._backend import array_module, chunk_rows, to_numpy
from ._validation import check_choice

__all__ = [
    "SCALE_RATIO_WARN",
    "SCALINGS",
    "ConstantFeatureWarning",
    "FeatureScaleWarning",
    "FeatureScaler",
    "check_feature_scales",
    "feature_spreads",
    "fit_scaler",
    "scale_features",
]

#: The scalings :func:`fit_scaler` knows (``None``, no scaling, is allowed besides).
SCALINGS = ("standard", "minmax")

#: With no scaling chosen, :func:`check_feature_scales` warns when the largest feature
#: standard deviation exceeds the smallest (positive) one this many times.
SCALE_RATIO_WARN = 100.0


class ConstantFeatureWarning(UserWarning):
    """A feature is constant (standard deviation or range 0): it cannot be scaled to
    unit spread, so it is centred and left with scale 1 (it adds nothing to any
    distance)."""


class FeatureScaleWarning(UserWarning):
    """The features' spreads differ by orders of magnitude and no scaling was chosen:
    distances, and so the graph, are those of the widest features."""


@dataclass(frozen=True)
class FeatureScaler:
    """Per-feature affine map ``(x - offset) / scale`` fitted on a data set.

    Attributes
    ----------
    method : {"standard", "minmax"}
    offset : numpy.ndarray of float64, shape (d,)
        The mean (standard) or the minimum (minmax) of each feature.
    scale : numpy.ndarray of float64, shape (d,)
        The standard deviation (standard) or the range (minmax) of each feature; 1
        for a constant feature.
    constant : numpy.ndarray of bool, shape (d,)
        The features found constant.
    """

    method: str
    offset: np.ndarray
    scale: np.ndarray
    constant: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.offset.shape[0])

    def transform(self, X):
        """`X` scaled, as a C-contiguous float32 array on its device (NumPy or CuPy).

        Each block of rows is widened to float64, mapped and narrowed back, so the
        result is the float64 map rounded once.

        Raises
        ------
        ValueError
            `X` without ``n_features`` columns.
        """
        xp = array_module(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"X must have {self.n_features} features, as the data the scaler was "
                f"fitted on; got shape {tuple(X.shape)}"
            )
        offset = xp.asarray(self.offset)
        inv = xp.asarray(1.0 / self.scale)
        out = xp.empty(X.shape, dtype=xp.float32)
        step = chunk_rows(xp, X.shape[1])
        for start in range(0, X.shape[0], step):
            block = X[start : start + step].astype(xp.float64)
            block -= offset
            block *= inv
            out[start : start + step] = block
        return out

    def describe(self) -> str:
        """One line for logs, e.g. ``standard scaling of 13 features (1 constant)``."""
        n_const = int(self.constant.sum())
        extra = f" ({n_const} constant)" if n_const else ""
        return f"{self.method} scaling of {self.n_features} features{extra}"


def fit_scaler(X, method: str, *, name: str = "X") -> FeatureScaler:
    """Fit the per-feature statistics of `method` on `X` in float64.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        NumPy or CuPy, finite (validated by the caller, e.g. ``check_data``).
    method : {"standard", "minmax"}
    name : str
        How warnings name the data.

    Returns
    -------
    FeatureScaler

    Warns
    -----
    ConstantFeatureWarning
        When some feature is constant (its indices are named).
    """
    method = check_choice(method, "scale", SCALINGS)
    xp = array_module(X)
    if method == "standard":
        offset, scale = _mean_std(X, xp)
    else:
        offset = to_numpy(X.min(axis=0)).astype(np.float64)
        scale = to_numpy(X.max(axis=0)).astype(np.float64) - offset
    constant = ~(scale > 0)
    if constant.any():
        idx = np.flatnonzero(constant)
        shown = ", ".join(map(str, idx[:10])) + (", …" if idx.size > 10 else "")
        warnings.warn(
            f"{name} has {idx.size} constant feature(s) (column {shown}): a {method} "
            "scaling cannot give them unit spread, so they are centred and kept with scale 1 "
            "(they add nothing to any distance); drop them to silence this warning",
            ConstantFeatureWarning, stacklevel=2,
        )
        scale = np.where(constant, 1.0, scale)
    return FeatureScaler(method, offset, scale, constant)


def scale_features(X, scale, *, name: str = "X"):
    """`X` as a graph would be built from it under `scale`.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        NumPy or CuPy, finite.
    scale : {"standard", "minmax"} or None
        None returns `X` unchanged.

    Returns
    -------
    ndarray
        float32 (n, d) on the device of `X` (`X` itself when `scale` is None).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.preprocessing import scale_features
    >>> scale_features(np.array([[0.0, 10.0], [2.0, 30.0]]), "minmax").tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    if scale is None:
        return X
    return fit_scaler(X, scale, name=name).transform(X)


def feature_spreads(X):
    """float64 standard deviation of each feature (NumPy array of shape (d,))."""
    return _mean_std(X, array_module(X))[1]


def check_feature_scales(X, *, name: str = "X") -> float:
    """Warn when the features' spreads differ by more than :data:`SCALE_RATIO_WARN`.

    For data about to be used unscaled: the ratio of the largest to the smallest
    positive standard deviation (constant features left out).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    name : str
        How the warning names the data.

    Returns
    -------
    float
        The ratio (1.0 with fewer than two non-constant features).

    Warns
    -----
    FeatureScaleWarning
        When the ratio exceeds :data:`SCALE_RATIO_WARN`.
    """
    std = feature_spreads(X)
    positive = std[std > 0]
    if positive.size < 2:
        return 1.0
    ratio = float(positive.max() / positive.min())
    if ratio > SCALE_RATIO_WARN:
        wide, narrow = int(np.argmax(np.where(std > 0, std, -np.inf))), int(
            np.argmin(np.where(std > 0, std, np.inf)))
        warnings.warn(
            f"{name}'s features differ in spread by a factor {ratio:.3g} (std of column "
            f"{wide}: {std[wide]:.3g}; of column {narrow}: {std[narrow]:.3g}), more than "
            f"{SCALE_RATIO_WARN:g}: distances, and so the graph, are those of the widest "
            "features; scale them to weigh them alike: scale='standard' or 'minmax' "
            "(command line: --scale standard)",
            FeatureScaleWarning, stacklevel=2,
        )
    return ratio


def _mean_std(X, xp):
    """float64 mean and population standard deviation of each column (NumPy arrays),
    by two passes over blocks of rows (the second sums squared deviations, which
    keeps the variance of offset data exact to float64)."""
    n, d = X.shape
    step = chunk_rows(xp, d)
    total = xp.zeros(d, dtype=xp.float64)
    for start in range(0, n, step):
        total += X[start : start + step].astype(xp.float64).sum(axis=0)
    mean = total / n
    sq = xp.zeros(d, dtype=xp.float64)
    for start in range(0, n, step):
        block = X[start : start + step].astype(xp.float64) - mean
        sq += (block * block).sum(axis=0)
    return to_numpy(mean), np.sqrt(to_numpy(sq) / n)
