"""The oracle checks themselves: they must fail on the faults they exist to catch."""

import numpy as np
import pytest
import scipy.sparse as sp

from explorer.graph import EdgeRule
from explorer.graph.reference import reference_csr
from explorer.testing import assert_same_graph, check_canonical, tricky_data


def edited(csr, *, drop=(), add=(), scale=None):
    """A copy of `csr` with entries dropped/added (both directions), rebuilt canonically."""
    m = csr.tolil(copy=True)
    for i, j in drop:
        m[i, j] = 0
        m[j, i] = 0
    for i, j, v in add:
        m[i, j] = v
        m[j, i] = v
    out = m.tocsr()
    out.eliminate_zeros()
    out.sort_indices()
    if scale is not None:
        (i, j), factor = scale
        out[i, j] = out[i, j] * factor
    out.indices = out.indices.astype(np.int32)
    out.indptr = out.indptr.astype(np.int32)
    return out


def band_pair_data(rel):
    """1-D data whose pair (0, 1) has squared distance t·(1 - rel), and a far point."""
    s = np.float32(0.1234567)
    d2 = float(s) ** 2  # exact: a float32 squared fits in float64
    t = d2 / (1.0 - rel)
    X = np.array([[0.0], [s], [5.0], [5.01]], dtype=np.float32)
    return X, EdgeRule.from_args("uniform", threshold_sqdist=t)


def test_identical_graphs_pass(rng):
    X = tricky_data(rng, 80, 3, "blobs")
    params = EdgeRule.from_args("gaussian", 0.5, threshold_sqdist=0.5)
    ref = reference_csr(X, params)
    assert ref.nnz > 0
    assert_same_graph(ref, ref.copy(), X, params)


def test_missing_edge_outside_the_band_fails(rng):
    X = tricky_data(rng, 80, 3, "blobs")
    params = EdgeRule.from_args("gaussian", 0.5, threshold_sqdist=0.5)
    ref = reference_csr(X, params)
    # The first stored entry, whatever its row (row 0 may be isolated in a draw).
    i, j = int(np.searchsorted(ref.indptr, 0, side="right") - 1), int(ref.indices[0])
    with pytest.raises(AssertionError) as err:
        assert_same_graph(edited(ref, drop=[(i, j)]), ref, X, params)
    msg = str(err.value)
    assert "missing from actual outside the rounding band: 2" in msg
    assert f"missing ({i}, {j})" in msg and "float64 sqdist=" in msg


def test_extra_edge_and_diagonal_fail(rng):
    X = tricky_data(rng, 60, 2, "blobs")
    params = EdgeRule.from_args("uniform", threshold_sqdist=0.3)
    ref = reference_csr(X, params)
    dense = ref.toarray()
    i, j = map(int, np.argwhere((dense == 0) & ~np.eye(60, dtype=bool))[0])
    with pytest.raises(AssertionError, match="extra in actual outside the rounding band: 2"):
        assert_same_graph(edited(ref, add=[(i, j, 1.0)]), ref, X, params)
    diag = edited(ref, add=[(5, 5, 1.0)])
    with pytest.raises(AssertionError, match="on the diagonal"):
        assert_same_graph(diag, ref, X, params)


@pytest.mark.parametrize("rel", [4e-6, -4e-6])
def test_difference_inside_the_band_passes(rel):
    # rel > 0: (0, 1) is an edge a float32 builder may miss; rel < 0: a non-edge it may add.
    X, params = band_pair_data(rel)
    ref = reference_csr(X, params)
    is_edge = rel > 0
    assert (ref[0, 1] != 0) == is_edge and ref[2, 3] != 0
    other = edited(ref, drop=[(0, 1)]) if is_edge else edited(ref, add=[(0, 1, 1.0)])
    assert other.nnz != ref.nnz
    assert_same_graph(other, ref, X, params)
    assert_same_graph(ref, other, X, params)


def test_difference_just_outside_the_band_fails():
    X, params = band_pair_data(3e-5)  # three band widths from the threshold
    ref = reference_csr(X, params)
    with pytest.raises(AssertionError, match="missing"):
        assert_same_graph(edited(ref, drop=[(0, 1)]), ref, X, params)


def test_values_are_compared_to_rtol(rng):
    X = tricky_data(rng, 50, 2, "blobs")
    params = EdgeRule.from_args("gaussian", 0.5, threshold_sqdist=0.5)
    ref = reference_csr(X, params)
    # The first stored entry, whatever its row (row 0 may be isolated in a draw).
    i, j = int(np.searchsorted(ref.indptr, 0, side="right") - 1), int(ref.indices[0])
    assert_same_graph(edited(ref, scale=((i, j), 1 + 2e-6)), ref, X, params)
    with pytest.raises(AssertionError, match="values off by more than rtol=1e-05 .*: 1"):
        assert_same_graph(edited(ref, scale=((i, j), 1 + 1e-4)), ref, X, params)
    assert_same_graph(edited(ref, scale=((i, j), 1 + 1e-4)), ref, X, params, rtol=1e-3)


def test_duplicate_entries_fail():
    X = np.array([[0.0], [0.1]], dtype=np.float32)
    params = EdgeRule.from_args("uniform", threshold_sqdist=1.0)
    ref = reference_csr(X, params)
    dup = sp.csr_matrix(
        (np.ones(3, np.float32), np.array([1, 1, 0], np.int32), np.array([0, 2, 3], np.int32)),
        shape=(2, 2),
    )
    with pytest.raises(AssertionError, match="duplicate"):
        assert_same_graph(dup, ref, X, params)


def _csr(data, indices, indptr, n, dtype=np.int32):
    m = sp.csr_matrix(
        (np.asarray(data, np.float32), np.asarray(indices), np.asarray(indptr)), shape=(n, n)
    )
    # Set afterwards: SciPy's constructor narrows int64 indices that fit in int32.
    m.indices = m.indices.astype(dtype)
    m.indptr = m.indptr.astype(dtype)
    return m


def test_check_canonical_accepts_a_good_graph_with_explicit_zeros():
    check_canonical(_csr([0.5, 0.0, 0.5, 0.0], [1, 2, 0, 0], [0, 2, 3, 4], 3))


@pytest.mark.parametrize(
    "matrix, words",
    [
        (_csr([1, 1, 1, 1], [2, 1, 0, 0], [0, 2, 3, 4], 3), "not strictly ascending"),
        (_csr([1, 1, 1], [1, 1, 0], [0, 2, 3], 2), "not strictly ascending"),
        (_csr([1, 1, 1], [0, 1, 0], [0, 2, 3], 2), "diagonal"),
        (_csr([1.0, 0.5], [1, 0], [0, 1, 2], 2), "values not symmetric"),
        (_csr([1.0], [1], [0, 1, 1], 2), "pattern not symmetric"),
        (_csr([1.0, 1.0], [1, 0], [0, 1, 2], 2, np.int64), "index dtypes"),
        (_csr([1.0, np.inf], [1, 0], [0, 1, 2], 2), "non-finite"),
        (sp.csr_matrix(np.array([[0, 1.0], [1.0, 0]])), "float32"),
        (sp.csr_matrix(np.ones((2, 3), np.float32)), "not square"),
        (sp.coo_matrix(np.eye(2, dtype=np.float32)), "not a CSR"),
    ],
)
def test_check_canonical_catches(matrix, words):
    with pytest.raises(AssertionError, match=words):
        check_canonical(matrix)


def test_check_canonical_symmetry_tolerance():
    m = _csr([1.0, 1.0 + 1e-7], [1, 0], [0, 1, 2], 2)
    with pytest.raises(AssertionError):
        check_canonical(m)
    check_canonical(m, symmetry_rtol=1e-6)
