"""The two-grid preconditioner of eigen_solver="amg" (explorer.embedding.multigrid):
its aggregates against a float64 reference, and the cycle's algebra."""

import numpy as np
import pytest
import scipy.sparse as sp

from explorer import build_graph
from explorer.embedding.multigrid import (
    aggregate,
    multigrid_preconditioner,
    strongest_neighbours,
)


def random_graph(rng, m=300, density=0.02, ties=True, diagonal=True, empty=5):
    """A symmetric non-negative matrix with exact ties, a stored diagonal and empty
    rows, as float64 CSR."""
    S = sp.random(m, m, density=density, random_state=rng, format="coo")
    values = rng.integers(1, 6, S.nnz).astype(np.float64) if ties else S.data
    S = sp.coo_matrix((values, (S.row, S.col)), shape=(m, m))
    S = (S + S.T).tocsr()
    if diagonal:
        S = S + sp.diags(rng.uniform(10, 20, m))  # larger than any neighbour: ignored
    if empty:
        keep = np.ones(m)
        keep[rng.choice(m, empty, replace=False)] = 0
        S = sp.diags(keep) @ S @ sp.diags(keep)
    S = S.tocsr()
    S.sort_indices()
    return S


def reference_strongest(S):
    dense = S.toarray()
    np.fill_diagonal(dense, 0.0)
    best = np.full(S.shape[0], -1)
    for i in range(S.shape[0]):
        if dense[i].max() > 0:
            best[i] = int(np.argmax(dense[i]))  # the first of equal maxima
    return best


@pytest.mark.parametrize("ties", [True, False])
def test_strongest_neighbours_match_the_dense_reference(ties, rng):
    S = random_graph(rng, ties=ties)
    np.testing.assert_array_equal(strongest_neighbours(S), reference_strongest(S))


def test_aggregates_are_pieces_of_the_strongest_neighbour_forest(rng):
    S = random_graph(rng, m=400, density=0.004)  # several components
    labels, count = aggregate(S)
    best = reference_strongest(S)
    assert labels.shape == (400,) and set(np.unique(labels)) == set(range(count))
    # A vertex and its strongest neighbour share an aggregate ...
    linked = best >= 0
    np.testing.assert_array_equal(labels[linked], labels[best[linked]])
    # ... an aggregate is connected by such links alone (so never spans components),
    # and a vertex without a neighbour is an aggregate of its own.
    forest = sp.coo_matrix((np.ones(linked.sum()), (np.flatnonzero(linked), best[linked])),
                           shape=S.shape)
    pieces = sp.csgraph.connected_components(forest, directed=False)[1]
    for a in range(count):
        assert np.unique(pieces[labels == a]).size == 1
    components = sp.csgraph.connected_components(S, directed=False)[1]
    for a in range(count):
        assert np.unique(components[labels == a]).size == 1
    assert np.all(np.bincount(labels)[labels[~linked]] == 1)


def normalized(S):
    degree = np.asarray(S.sum(axis=1)).ravel()
    dinv = 1.0 / np.sqrt(degree)
    return (sp.diags(dinv) @ S @ sp.diags(dinv)).tocsr(), degree


def test_the_cycle_is_a_symmetric_positive_definite_approximate_inverse(rng):
    X = rng.uniform(0, 1, (600, 2)).astype(np.float32)
    g = build_graph(X, metric="gaussian", sigma="local", graph="knn", n_neighbors=8,
                    backend="cpu")
    A, degree = normalized(g.csr.astype(np.float64))
    m = A.shape[0]
    shift = 1e-3
    apply = multigrid_preconditioner(A, degree, shift=shift)
    B = apply(np.eye(m))
    # Symmetric up to the float32 coarse factors' rounding, positive definite.
    assert np.abs(B - B.T).max() <= 1e-4 * np.abs(B).max()
    assert np.linalg.eigvalsh((B + B.T) / 2).min() > 0
    # It approximates (L + δI)^-1: the preconditioned operator's spread of eigenvalues
    # is a small fraction of the plain one's.
    L = (1.0 + shift) * np.eye(m) - A.toarray()
    plain = np.linalg.eigvalsh(L)
    c = np.linalg.cholesky((B + B.T) / 2)
    conditioned = np.linalg.eigvalsh(c.T @ L @ c)
    assert conditioned.max() / conditioned.min() < 0.05 * plain.max() / plain.min()
    # A vector in, a vector out, float64; linear up to the coarse factors' float32.
    r = rng.standard_normal(m)
    out = apply(r)
    assert out.shape == (m,) and out.dtype == np.float64
    np.testing.assert_allclose(out, B @ r, rtol=0, atol=1e-4 * np.abs(out).max())


def test_the_coarse_space_holds_the_smooth_vector(rng):
    # D^1/2 1 is A's eigenvector for eigenvalue 1: on it the coarse correction is exact,
    # so the cycle returns (L + δI)^-1 of it, D^1/2 1 / δ, up to float32 rounding.
    X = rng.uniform(0, 1, (500, 2)).astype(np.float32)
    g = build_graph(X, metric="gaussian", sigma="local", graph="knn", n_neighbors=8,
                    backend="cpu")
    A, degree = normalized(g.csr.astype(np.float64))
    shift = 1e-2
    v = np.sqrt(degree)
    out = multigrid_preconditioner(A, degree, shift=shift)(v)
    np.testing.assert_allclose(out, v / shift, rtol=1e-4)
