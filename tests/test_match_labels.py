"""explorer.metrics.match_labels: cluster ids renamed after a reference labelling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from explorer.metrics import adjusted_rand_score, match_labels


def _best_overlap_bruteforce(labels, reference):
    """Largest total overlap of any one-to-one pairing (every permutation)."""
    old = np.unique(labels[labels >= 0])
    ref = np.unique(reference[reference >= 0])
    table = np.array([[np.sum((labels == a) & (reference == b)) for b in ref] for a in old])
    best = 0
    if len(old) <= len(ref):
        for perm in itertools.permutations(range(len(ref)), len(old)):
            best = max(best, sum(table[i, j] for i, j in enumerate(perm)))
    else:
        for perm in itertools.permutations(range(len(old)), len(ref)):
            best = max(best, sum(table[i, j] for j, i in enumerate(perm)))
    return best


@pytest.mark.parametrize("k_labels,k_ref", [(3, 3), (2, 4), (5, 3), (1, 1)])
def test_matching_keeps_the_partition_and_maximises_overlap(rng, k_labels, k_ref):
    n = int(rng.integers(50, 400))
    reference = rng.integers(-1, k_ref, size=n)
    labels = rng.integers(-1, k_labels, size=n)
    out = match_labels(labels, reference)
    assert out.dtype == np.int64 and out.shape == (n,)
    np.testing.assert_array_equal(out < 0, labels < 0)  # -1 kept, nothing else made -1
    # the same partition: a bijection between old and new ids
    pairs = {(a, b) for a, b in zip(labels[labels >= 0], out[out >= 0], strict=True)}
    assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})
    assert adjusted_rand_score(labels, out) == pytest.approx(1.0)
    # the overlap with the reference is the best any pairing gives
    matched = out[(out >= 0) & np.isin(out, reference[reference >= 0])]
    got = int(np.sum((out == reference) & (out >= 0)))
    assert got == _best_overlap_bruteforce(labels, reference), matched
    # clusters without a partner get ids above every reference id
    unpaired = set(np.unique(out[out >= 0])) - set(np.unique(reference))
    assert all(u > reference.max() for u in unpaired)


def test_a_permuted_copy_is_mapped_back(rng):
    reference = rng.integers(0, 6, size=1000)
    perm = rng.permutation(6)
    np.testing.assert_array_equal(match_labels(perm[reference], reference), reference)


def test_example_and_errors():
    assert match_labels([0, 0, 1, 1, -1], [1, 1, 0, 0, 0]).tolist() == [1, 1, 0, 0, -1]
    assert match_labels([-1, -1], [0, 1]).tolist() == [-1, -1]
    # a cluster sharing no point with any reference cluster is new
    assert match_labels([0, 0, 1], [-1, -1, 3]).tolist() == [4, 4, 3]
    with pytest.raises(ValueError, match="same length"):
        match_labels([0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="1-D"):
        match_labels(np.zeros((2, 2), int), [0, 1])
