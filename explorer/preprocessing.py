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
zero. ``scale="auto"`` (the estimator's default, :func:`choose_scaling`) standardises
features in mixed units (ranges more than :data:`SCALE_RATIO_WARN` apart) and keeps
the rest as given; :func:`check_feature_scales` warns with a
:class:`FeatureScaleWarning` when ``scale=None`` is given for such features.

:class:`explorer.SpectralClustering`, the command line (``--scale``) and the app use
:func:`fit_scaler`; :func:`scale_features` returns the scaled data (what the app shows).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ._backend import array_module, chunk_rows, column_centred_sums, column_extremes, to_numpy
from ._validation import check_choice

__all__ = [
    "SCALE_RATIO_WARN",
    "SCALINGS",
    "ConstantFeatureWarning",
    "FeatureScaleWarning",
    "FeatureScaler",
    "check_feature_scales",
    "choose_scaling",
    "feature_ranges",
    "feature_spreads",
    "fit_scaler",
    "scale_features",
]

#: The scalings :func:`fit_scaler` knows (``None``, no scaling, is allowed besides).
SCALINGS = ("standard", "minmax")

#: Features whose ranges (max − min, constant features left out) differ by more than
#: this factor are in mixed units: ``scale="auto"`` standardises them
#: (:func:`choose_scaling`), and with ``scale=None`` :func:`check_feature_scales` warns.
#: Measured on scikit-learn's tables (benchmarks/README.md "Quality on real tables"):
#: wine's ranges differ 2650-fold, breast cancer's 141 000-fold (ARI unscaled 0.36 and
#: 0.42, standardised 0.88 and 0.74); iris' 2.5-fold and digits' 16-fold (pixels 0-16,
#: one unit; unscaled 0.745 and 0.822, standardised 0.552 and 0.694). The ranges, not
#: the standard deviations: a rarely inked pixel has a tiny deviation (digits: 277-fold)
#: in the units of the others.
SCALE_RATIO_WARN = 100.0

#: ``scale="auto"``'s choice for features in mixed units. Measured against "minmax"
#: (the same tables): wine 0.880 / 0.869, breast cancer 0.737 / 0.799, mixed-unit blobs
#: 1.0 / 1.0; standard is kept for a scikit-learn user's expectation
#: (``StandardScaler``) and because one outlier sets a feature's whole min-max range.
AUTO_SCALING = "standard"


class ConstantFeatureWarning(UserWarning):
    """A feature is constant (standard deviation or range 0): it cannot be scaled to
    unit spread, so it is centred and left with scale 1 (it adds nothing to any
    distance)."""


class FeatureScaleWarning(UserWarning):
    """The features' ranges differ by orders of magnitude (mixed units) and
    ``scale=None`` was given: distances, and so the graph, are those of the widest
    features."""


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
    if method == "standard":
        offset, scale = _mean_std(X)
    else:
        lo, hi = (to_numpy(v) for v in column_extremes(X))
        offset, scale = lo, hi - lo
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
    return _mean_std(X)[1]


def feature_ranges(X):
    """float64 range (max − min) of each feature (NumPy array of shape (d,))."""
    lo, hi = (to_numpy(v) for v in column_extremes(X))
    return hi - lo


def _range_ratio(X):
    """(ratio of the largest to the smallest positive range, widest column, narrowest
    column, the ranges); ratio 1.0 with fewer than two non-constant features."""
    ranges = feature_ranges(X)
    positive = ranges > 0
    if positive.sum() < 2:
        return 1.0, None, None, ranges
    wide = int(np.argmax(np.where(positive, ranges, -np.inf)))
    narrow = int(np.argmin(np.where(positive, ranges, np.inf)))
    return float(ranges[wide] / ranges[narrow]), wide, narrow, ranges


def choose_scaling(X) -> tuple[str | None, str]:
    """``scale="auto"``: :data:`AUTO_SCALING` when the features are in mixed units
    (their ranges differ by more than :data:`SCALE_RATIO_WARN`), else None.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        NumPy or CuPy, finite.

    Returns
    -------
    (method, why) : (str or None, str)
        The scaling and one sentence on why (for the fit's plan).
    """
    ratio, wide, narrow, ranges = _range_ratio(X)
    if ratio > SCALE_RATIO_WARN:
        return AUTO_SCALING, (
            f"scale='auto': the features' ranges differ {ratio:.3g}-fold (column {wide}: "
            f"{ranges[wide]:.3g}; column {narrow}: {ranges[narrow]:.3g}), more than "
            f"{SCALE_RATIO_WARN:g}: mixed units, {AUTO_SCALING} scaling weighs them alike "
            "(scale=None keeps the units)")
    return None, (f"scale='auto': the features' ranges are within {SCALE_RATIO_WARN:g}-fold "
                  f"of each other ({ratio:.3g}): one scale of units, kept as given")


def check_feature_scales(X, *, name: str = "X") -> float:
    """Warn when the features' ranges differ by more than :data:`SCALE_RATIO_WARN`.

    For data about to be used unscaled (``scale=None`` given): the ratio of the
    largest to the smallest positive range (max − min; constant features left out).
    Data in one unit whose features vary unevenly (pixel intensities 0-16, some
    pixels rarely inked) stay within the bound: scaling them would weigh a rarely
    used pixel as much as a stroke.

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
        When the ratio exceeds :data:`SCALE_RATIO_WARN`: it names the widest and the
        narrowest column and what to pass.
    """
    ratio, wide, narrow, ranges = _range_ratio(X)
    if ratio > SCALE_RATIO_WARN:
        warnings.warn(
            f"{name}'s features differ in range by a factor {ratio:.3g} (column {wide}: "
            f"{ranges[wide]:.3g}; column {narrow}: {ranges[narrow]:.3g}), more than "
            f"{SCALE_RATIO_WARN:g}, and scale=None was given: distances, and so the graph, "
            f"are those of the widest features; pass scale='auto' (the default, which "
            f"standardises features in mixed units) or scale='{AUTO_SCALING}' to weigh "
            f"them alike (command line: --scale auto)",
            FeatureScaleWarning, stacklevel=2,
        )
    return ratio


def _mean_std(X):
    """float64 mean and population standard deviation of each column (NumPy arrays),
    by two passes (:func:`explorer._backend.column_centred_sums`: the second sums
    squared deviations from the mean, which keeps the variance of offset data exact to
    float64)."""
    n = X.shape[0]
    mean = column_centred_sums(X, squares=False)[0] / n
    return to_numpy(mean), np.sqrt(to_numpy(column_centred_sums(X, mean)[1]) / n)
