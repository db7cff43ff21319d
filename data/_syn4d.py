"""The paper's synthetic shape (Syn1M / Syn5M): 4-D, 4 convex clusters in [0, 1]⁴."""

from __future__ import annotations

import math

import numpy as np

#: Side of each cluster's box before the [0, 1] feature scaling (which changes it by
#: well under 0.1 % at the paper's sizes). Calibrated; see :func:`syn4d`.
SIDE = 0.421

#: Box corners: clusters differ in 2 or 4 coordinates, each by a gap of 1 - 2·SIDE.
_CORNERS = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]], dtype=np.float64)


def syn4d(n, rng):
    """Four uniform 4-D boxes at opposite corners of the unit cube, features in [0, 1].

    Each cluster is a box of side :data:`SIDE` with uniform density, sitting in a
    corner of [0, 1]⁴ given by :data:`_CORNERS`; the clusters have n/4 points each
    (±1) in random order, and every feature is then min-max scaled to [0, 1] as the
    paper does.

    Notes
    -----
    **Why boxes.** Table 3 of the paper (σ = 0.01; squared-distance threshold 0.0008
    at n = 10⁶: nnz per row mean 23, max 54; 0.0004 at n = 5·10⁶: mean 29, max 64)
    says the density is near-uniform inside each cluster: the max is what the
    Poisson tail of the mean gives over 10⁶ rows, and halving the threshold at five
    times the points multiplies the mean by 5/4 = (5 · (1/2)²), the 4-D volume law.
    That density fixes the clusters' total volume (about 1/8 of the cube). Four balls
    of that volume (radius 0.283) fit in [0, 1]⁴ with a gap of only 0.048 between
    them, so a threshold giving the same mean degree at n ≲ 1.2·10⁵ would join
    clusters. Boxes of side 0.421 leave a gap of 0.158 per differing coordinate
    (≥ 0.22 between any two clusters), so the clusters stay apart at every size and
    threshold the suggested parameters give, down to a few thousand points.

    **Calibration** (scipy ``cKDTree`` neighbour counts, strict ``‖xi−xj‖² < t``
    excluding the row itself, seed 0): the side was bisected on the mean count of
    50 000 sampled rows at n = 10⁶, t = 0.0008 (side 0.4207 → 23.05, 0.4211 →
    22.97). With side 0.421, seed 0, counting every row and every pair between
    clusters:

    =======  ======  ========  =======  ==============  ================
    n        t       mean nnz  max nnz  paper (Tab. 3)  closest clusters
    =======  ======  ========  =======  ==============  ================
    10⁶      0.0008  22.9      55       23 / 54         0.227 (no edge)
    5·10⁶    0.0004  29.4      62       29 / 64         0.225 (no edge)
    =======  ======  ========  =======  ==============  ================

    Generating 5·10⁶ rows takes under 2 s on two cores.
    """
    y = rng.permutation(np.arange(n, dtype=np.int64) % 4)
    X = rng.random((n, 4))
    X *= SIDE
    X += _CORNERS[y] * (1.0 - SIDE)
    lo = X.min(axis=0)
    X -= lo
    X /= X.max(axis=0)
    return np.ascontiguousarray(X, dtype=np.float32), y


def suggested_threshold(n: int) -> tuple[float, float]:
    """``(sigma, threshold_sqdist)`` for n rows: the paper's from 10⁶ rows up.

    The mean count scales as ``n · t²`` in 4-D, so from n = 10⁶ up
    ``t = 0.0008 · sqrt(10⁶ / n)`` keeps the paper's mean of about 23 per row
    (t = 0.0008 at 10⁶, 0.00036 at 5·10⁶, where the paper took 0.0004 for 29).
    Below 10⁶ the boxes' corners and edges are thinly covered (a corner keeps 1/16
    of its ball) and would break off as stray pieces, so the mean grows as
    ``23 · (10⁶ / n)^(1/4)``: ``t = 0.0008 · (10⁶ / n)^(5/8)``, measured to give
    exactly the 4 clusters as components (plus at most a few isolated rows) at
    n = 2·10³, 2·10⁴, 10⁵ and 3·10⁵. ``σ = sqrt(t / 8)`` keeps the paper's weight at
    the cutoff, ``exp(-4)`` (σ = 0.01 at 10⁶). Rounded to two significant digits.
    """
    ratio = 1e6 / n
    t = 0.0008 * (math.sqrt(ratio) if ratio <= 1 else ratio**0.625)
    t = float(f"{t:.2g}")
    return float(f"{math.sqrt(t / 8.0):.2g}"), t
