"""Test data shared by the reordering tests (tests/test_reorder.py, test_gpu_reorder.py)."""

from __future__ import annotations

import numpy as np


def bridged_blobs(rng, n, per_bridge=100):
    """Three 2-D blobs 3 apart joined by thin bridges of evenly spaced points, rows in
    random order, and the squared-distance threshold of about 80 neighbours at the
    centres (float32 points, float threshold).

    One component (besides stray pieces and isolated points in the tails), so an
    iterative eigensolver works from its random start, and k-means boundaries that
    cross the sparse bridges: no point lies within rounding of one, so embeddings that
    agree to a solver's tolerance give the same labels.
    """
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    X = centres[rng.integers(0, 3, n)] + 0.5 * rng.standard_normal((n, 2))
    u = np.linspace(0.0, 1.0, per_bridge)[:, None]
    bridges = [centres[a] + u * (centres[b] - centres[a]) for a, b in ((0, 1), (0, 2), (1, 2))]
    X = np.concatenate([X, *bridges])[rng.permutation(n + 3 * per_bridge)]
    return X.astype(np.float32), 80 * 1.5 / n
