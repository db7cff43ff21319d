"""explorer.components on the CPU: one labelling, the k largest, the restriction."""

import numpy as np
import scipy.sparse as sp

from explorer.components import (
    component_labels,
    count_components,
    keep_largest_components,
    label_counts,
    largest_components,
    restrict_to,
)


def chain_graph(rng, sizes, n_isolated=0):
    """Components that are random chains of the given sizes (plus isolated vertices),
    vertices shuffled; returns (csr, component id of each vertex, -1 when isolated)."""
    comp = np.concatenate([np.full(s, c) for c, s in enumerate(sizes)] + [np.full(n_isolated, -1)])
    order = rng.permutation(comp.size)
    comp = comp[order]
    rows, cols = [], []
    for c in range(len(sizes)):
        members = rng.permutation(np.flatnonzero(comp == c))
        rows += list(members[:-1])
        cols += list(members[1:])
    w = rng.random(len(rows)).astype(np.float32) + 0.1
    S = sp.csr_matrix((np.concatenate([w, w]), (rows + cols, cols + rows)), shape=(comp.size,) * 2)
    S.sort_indices()
    return S, comp


def test_largest_components_labels_once_and_keeps_the_k_largest(rng):
    S, comp = chain_graph(rng, [30, 5, 50, 5, 12], n_isolated=4)
    isolated = comp == -1
    split = largest_components(S, 2, isolated=isolated)
    assert split.n_components == 5 and split.n_dropped == 5 + 5 + 12
    np.testing.assert_array_equal(split.kept, (comp == 0) | (comp == 2))
    labels = component_labels(S)
    # The labels are a relabelling of the components.
    assert len({(a, b) for a, b in zip(labels, comp, strict=True)}) == count_components(S)
    # Known to have at most k: nothing labelled, nothing kept.
    quick = largest_components(S, 5, n_components=5)
    assert quick.labels is None and quick.kept is None and quick.n_dropped == 0


def test_ties_go_to_the_component_met_first(rng):
    S, comp = chain_graph(rng, [8, 8, 8])
    split = largest_components(S, 2)
    first = sorted(range(3), key=lambda c: np.flatnonzero(comp == c)[0])[:2]
    np.testing.assert_array_equal(split.kept, np.isin(comp, first))


def test_restrict_to_zeroes_the_dropped_components_on_the_same_pattern(rng):
    S, comp = chain_graph(rng, [20, 3, 15], n_isolated=2)
    kept = (comp == 0) | (comp == 2)
    R = restrict_to(S, kept)
    assert R.indices is S.indices and R.indptr is S.indptr
    dense, full = R.toarray(), S.toarray()
    np.testing.assert_array_equal(dense[np.ix_(kept, kept)], full[np.ix_(kept, kept)])
    assert not dense[~kept].any() and not dense[:, ~kept].any()
    again, n_components, n_dropped = keep_largest_components(S, 2, isolated=comp == -1)
    np.testing.assert_array_equal(again.data, R.data)
    assert (n_components, n_dropped) == (3, 3)


def test_label_counts_are_uniques_counts(rng):
    # The stray rule and the exactly-k test count components by label_counts: the
    # distinct labels and their sizes exactly as np.unique gives them, empty included.
    for _ in range(300):
        size = int(rng.integers(0, 400))
        labels = rng.integers(0, int(rng.integers(1, 60)), size=size).astype(
            rng.choice([np.int32, np.int64]))
        found, counts = label_counts(labels)
        want, want_counts = np.unique(labels, return_counts=True)
        assert found.dtype == labels.dtype and counts.dtype == np.int64
        assert np.array_equal(found, want) and np.array_equal(counts, want_counts)
