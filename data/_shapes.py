"""2-D shapes (the paper's Fig. 1 kind): moons, circles, blobs, aniso, varied,
spirals and uniform.

Every shape is fitted into the unit square by one scale factor for both axes (so its
geometry is kept) and a shift: one range of σ and thresholds then serves every shape,
and a threshold read off one shape means the same on another.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import make_circles, make_moons

from explorer._validation import check_float, check_int

#: The linear map sklearn's clustering comparison uses for its anisotropic blobs.
_ANISO = np.array([[0.6, -0.6], [-0.4, 0.8]])


def _seed(rng) -> int:
    # scikit-learn's generators take an int seed; derive one from our generator so a
    # single random_state drives everything.
    return int(rng.integers(2**31 - 1))


def moons(n, rng, *, noise=0.05):
    """Two interleaving half circles (scikit-learn's ``make_moons``)."""
    noise = check_float(noise, "noise", low=0.0)
    X, y = make_moons(n, noise=noise, random_state=_seed(rng))
    return X, y


def circles(n, rng, *, noise=0.05, factor=0.5):
    """A circle inside a circle (``make_circles``); `factor` is the inner radius."""
    noise = check_float(noise, "noise", low=0.0)
    factor = check_float(factor, "factor", low=0.0, high=1.0, low_inclusive=False,
                         high_inclusive=False)
    X, y = make_circles(n, noise=noise, factor=factor, random_state=_seed(rng))
    return X, y


def _blob_centers(k):
    # Evenly on the unit circle: neighbouring centres are 2 sin(π/k) apart, so the
    # default spread separates them for any k the UI offers.
    angle = 2 * np.pi * np.arange(k) / k + np.pi / 2
    return np.stack([np.cos(angle), np.sin(angle)], axis=1)


def _gaussian_blobs(n, rng, centers, stds):
    y = rng.permutation(np.arange(n) % len(centers))
    X = centers[y] + rng.standard_normal((n, 2)) * np.asarray(stds)[y, None]
    return X, y


def blobs(n, rng, *, centers=3, cluster_std=0.15):
    """Isotropic gaussian blobs with centres evenly spaced on a circle of radius 1."""
    centers = check_int(centers, "centers", low=1, high=64)
    cluster_std = check_float(cluster_std, "cluster_std", low=0.0)
    return _gaussian_blobs(n, rng, _blob_centers(centers), [cluster_std] * centers)


def aniso(n, rng, *, centers=3, cluster_std=0.15):
    """Blobs sheared by a fixed linear map into parallel elongated clusters."""
    X, y = blobs(n, rng, centers=centers, cluster_std=cluster_std)
    return X @ _ANISO, y


def varied(n, rng, *, cluster_std=(0.1, 0.25, 0.05)):
    """Three blobs of different spreads (the default spreads differ fivefold)."""
    stds = np.atleast_1d(np.asarray(cluster_std, dtype=np.float64))
    if stds.ndim != 1 or stds.size < 1 or not np.all(np.isfinite(stds)) or np.any(stds < 0):
        raise ValueError(
            f"cluster_std={cluster_std!r} is not allowed; use a sequence of finite numbers >= 0, "
            "one per blob"
        )
    return _gaussian_blobs(n, rng, 1.5 * _blob_centers(stds.size), stds)


def spirals(n, rng, *, arms=2, turns=1.5, noise=0.02):
    """Interleaved Archimedean spirals, points uniform along each arm."""
    arms = check_int(arms, "arms", low=1, high=16)
    turns = check_float(turns, "turns", low=0.0, low_inclusive=False)
    noise = check_float(noise, "noise", low=0.0)
    y = rng.permutation(np.arange(n) % arms)
    # Radius r in [0.25, 1]; arc length grows like r², so r = sqrt(u) spreads the
    # points evenly along the arm instead of crowding the centre.
    r = np.sqrt(rng.uniform(0.25**2, 1.0, n))
    angle = 2 * np.pi * (turns * r + y / arms)
    X = np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1)
    return X + noise * rng.standard_normal((n, 2)), y


def uniform(n, rng):
    """Uniform noise in the unit square: no structure, no labels."""
    return rng.random((n, 2)), None


def fit_unit_square(X):
    """Shift and scale (one factor for both axes) into [0, 1]², as float32."""
    lo = X.min(axis=0)
    extent = float((X.max(axis=0) - lo).max())
    return np.ascontiguousarray((X - lo) / (extent if extent > 0 else 1.0), dtype=np.float32)
