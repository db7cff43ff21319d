"""Spectral embedding and the eigengap heuristic, against float64 dense references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from explorer.components import component_labels, largest_components, restrict_to
from explorer.embedding import (
    DENSE_MAX_N,
    Embedding,
    auto_k_max,
    components_embedding,
    eigengap_choice,
    eigengap_k,
    isolated_vertices,
    spectral_embedding,
)

# -------------------------------------------------------------------------- graphs


def blob_graph(rng, sizes, *, box=(2.0, 2.0), radius=0.6, n_isolated=0, gap=20.0):
    """Gaussian ε-graph of uniform rectangles of points, `gap` apart, plus `n_isolated`
    far-away points, shuffled; returns (csr, component of each point, −1 if isolated).

    Points are dense enough (tens of neighbours each) that every rectangle is one
    connected component whatever the random draw. The graph is built by dense float64
    thresholding, independent of explorer.graph.
    """
    parts = [np.array([gap * i, 0.0]) + rng.random((size, 2)) * box for i, size in enumerate(sizes)]
    far = 1e4 + 1e3 * np.arange(n_isolated)[:, None] * np.ones((1, 2))
    X = np.vstack([*parts, far])
    truth = np.concatenate([np.full(s, i) for i, s in enumerate(sizes)] + [np.full(n_isolated, -1)])
    order = rng.permutation(X.shape[0])
    X, truth = X[order], truth[order]
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    W = np.where(sq < radius**2, np.exp(-sq / (2 * radius**2)), 0.0)
    np.fill_diagonal(W, 0.0)
    csr = sp.csr_matrix(W.astype(np.float32))
    assert sp.csgraph.connected_components(csr)[0] == len(sizes) + n_isolated
    return csr, truth


#: A 6 × 2.5 rectangle: one component whose low eigenvalues are simple and apart
#: (a square's would come in pairs).
RECT = (6.0, 2.5)


def reference(csr, k):
    """Smallest k eigenpairs of L_sym on the non-isolated vertices, dense float64."""
    S = csr.toarray().astype(np.float64)
    deg = S.sum(1)
    keep = deg > 0
    S, deg = S[np.ix_(keep, keep)], deg[keep]
    A = S / np.sqrt(np.outer(deg, deg))
    mu, V = np.linalg.eigh(A)
    return 1.0 - mu[::-1][:k], V[:, ::-1][:, :k], keep, S, deg


def principal_cosines(U, V):
    """Cosines of the principal angles between the column spaces of U and V."""
    qu, _ = np.linalg.qr(U)
    qv, _ = np.linalg.qr(V)
    return np.linalg.svd(qu.T @ qv, compute_uv=False)


# ------------------------------------------------------------------- the embedding


@pytest.mark.parametrize("solver", ["dense", "lanczos", "lobpcg", "chebyshev", "lu", "amg"])
def test_each_solver_matches_the_dense_reference_on_a_connected_graph(solver, rng):
    csr, _ = blob_graph(rng, [500], box=RECT)
    k = 4
    lam_ref, V_ref, keep, S, deg = reference(csr, k)
    emb = spectral_embedding(csr, k, solver=solver, tol=1e-9, random_state=0)

    assert emb.solver == solver
    np.testing.assert_allclose(emb.eigenvalues, lam_ref, atol=1e-8)
    assert np.all(np.diff(emb.eigenvalues) >= -1e-12)
    # U are eigenvectors of L_rw: S u = (1 - λ) D u, for each column.
    U = emb.vectors[keep]
    lhs = S @ U
    rhs = (1.0 - emb.eigenvalues)[None, :] * deg[:, None] * U
    assert np.abs(lhs - rhs).max() <= 1e-7 * np.abs(rhs).max()
    # Same eigenspace as the reference (eigenvalues here are simple and separated).
    V = U * np.sqrt(deg)[:, None]
    assert principal_cosines(V, V_ref).min() > 1 - 1e-8
    np.testing.assert_allclose(np.linalg.norm(emb.embedding, axis=1), 1.0, rtol=1e-12)
    if solver == "dense":
        assert emb.iterations is None and emb.tol is None
    else:
        assert emb.iterations > 0 and emb.tol == 1e-9


@pytest.mark.parametrize("solver", ["dense", "lobpcg", "chebyshev", "lu", "amg"])
def test_a_repeated_zero_eigenvalue_is_found_whole(solver, rng):
    # Three components: eigenvalue 0 of L_sym three times. Lanczos may return only some
    # copies (see spectral_embedding Notes); the dense and block solvers must not.
    csr, truth = blob_graph(rng, [150, 120, 130])
    emb = spectral_embedding(csr, 5, solver=solver, tol=1e-8, random_state=1)
    lam_ref, _, _, _, _ = reference(csr, 5)
    assert sp.csgraph.connected_components(csr)[0] == 3
    np.testing.assert_allclose(emb.eigenvalues, lam_ref, atol=1e-7)
    np.testing.assert_allclose(emb.eigenvalues[:3], 0.0, atol=1e-9)
    assert emb.eigenvalues[3] > 1e-3
    # With k = number of components, the unit rows are one point per component and
    # the points of different components are orthogonal.
    E = emb.truncate(3).embedding
    for c in range(3):
        rows = E[truth == c]
        assert np.abs(rows - rows[0]).max() < 1e-6
    centres = np.array([E[truth == c][0] for c in range(3)])
    np.testing.assert_allclose(centres @ centres.T, np.eye(3), atol=1e-6)


@pytest.mark.parametrize("on_gpu", [False, pytest.param(True, marks=pytest.mark.gpu)])
def test_components_solver_returns_the_indicators(on_gpu, rng):
    csr, truth = blob_graph(rng, [150, 120, 130], n_isolated=4)
    graph = csr
    if on_gpu:
        cupy = pytest.importorskip("cupy")
        import cupyx.scipy.sparse as csp

        graph = csp.csr_matrix(csr)
    emb = spectral_embedding(graph, 3, solver="components")
    host = emb if not on_gpu else Embedding(
        **{f: cupy.asnumpy(v) if isinstance(v, cupy.ndarray) else v
           for f, v in vars(emb).items()})
    assert host.solver == "components" and host.iterations is None and host.tol is None
    np.testing.assert_array_equal(host.eigenvalues, 0.0)
    assert host.residual_norms.max() <= 1e-12
    np.testing.assert_array_equal(host.isolated, truth == -1)
    assert np.isnan(host.vectors[truth == -1]).all()
    # Columns in the order of each component's first vertex; U = 1_c / sqrt(vol c).
    deg = np.asarray(csr.astype(np.float64).sum(axis=1)).ravel()
    first = sorted(range(3), key=lambda c: np.flatnonzero(truth == c)[0])
    for column, c in enumerate(first):
        rows = truth == c
        want = np.zeros((rows.sum(), 3))
        want[:, column] = 1.0
        np.testing.assert_array_equal(host.embedding[rows], want)
        np.testing.assert_allclose(host.vectors[rows, column], 1 / np.sqrt(deg[rows].sum()),
                                   rtol=1e-12)
    # The dense solver's eigenspace of the three zeros.
    _, V_ref, keep, _, deg_kept = reference(csr, 3)
    V = host.vectors[keep] * np.sqrt(deg_kept)[:, None]
    assert principal_cosines(V, V_ref).min() > 1 - 1e-10


def test_components_solver_needs_exactly_k_components(rng):
    csr, _ = blob_graph(rng, [100, 90, 80])
    for k in (2, 4):
        with pytest.raises(ValueError, match=f"needs exactly n_components={k} connected "
                           "components among the non-isolated vertices, the graph has 3"):
            spectral_embedding(csr, k, solver="components")


@pytest.mark.parametrize(("sizes", "k"), [([120] * 6, 4), ([200, 150, 100], 12)])
def test_lobpcg_matches_the_dense_spectrum(sizes, k, rng):
    # More components than k (any k vectors of the null space are right), and k well
    # beyond the components (clustered nonzero eigenvalues at the edge of the block).
    csr, truth = blob_graph(rng, sizes)
    lam_ref, _, keep, S, deg = reference(csr, k)
    emb = spectral_embedding(csr, k, solver="lobpcg", tol=1e-7, random_state=5)
    assert emb.solver == "lobpcg" and 0 < emb.iterations <= 1000
    np.testing.assert_allclose(emb.eigenvalues, lam_ref, atol=1e-9)
    assert emb.residual_norms.max() <= 2e-7
    U = emb.vectors[keep]
    lhs, rhs = S @ U, (1.0 - emb.eigenvalues)[None, :] * deg[:, None] * U
    assert np.abs(lhs - rhs).max() <= 1e-5 * np.abs(rhs).max()


def test_an_unconverged_solver_warns(rng):
    csr, _ = blob_graph(rng, [400], box=RECT)
    with pytest.warns(ConvergenceWarning, match="residual norm"):
        emb = spectral_embedding(csr, 3, solver="lobpcg", tol=1e-12, max_iter=2, random_state=0)
    assert emb.iterations == 2


def test_auto_uses_a_block_solver_above_the_dense_limit(rng):
    sizes = [DENSE_MAX_N // 2 + 60, DENSE_MAX_N // 2 + 60]
    csr, truth = blob_graph(rng, sizes, box=(3.0, 3.0), radius=0.5)
    emb = spectral_embedding(csr, 3, tol=1e-6, random_state=2)
    assert emb.solver == "chebyshev"
    np.testing.assert_allclose(emb.eigenvalues[:2], 0.0, atol=1e-8)
    assert emb.eigenvalues[2] > 1e-3
    assert emb.residual_norms.max() <= 2 * emb.tol


def test_residual_norms_are_recomputed_from_the_returned_vectors(rng):
    csr, _ = blob_graph(rng, [300], box=RECT, radius=0.7)
    emb = spectral_embedding(csr, 3, solver="lobpcg", tol=1e-4, random_state=3)
    _, _, keep, S, deg = reference(csr, 3)
    A = S / np.sqrt(np.outer(deg, deg))
    V = emb.vectors[keep] * np.sqrt(deg)[:, None]
    V /= np.linalg.norm(V, axis=0)
    mu = 1.0 - emb.eigenvalues
    np.testing.assert_allclose(
        emb.residual_norms, np.linalg.norm(A @ V - V * mu, axis=0), rtol=1e-6, atol=1e-12
    )
    assert emb.residual_norms.max() <= 2e-4


def test_isolated_vertices_are_left_out_and_filled_with_nan(rng):
    csr, truth = blob_graph(rng, [120, 100], n_isolated=5)
    iso = truth == -1
    np.testing.assert_array_equal(isolated_vertices(csr), iso)
    emb = spectral_embedding(csr, 3, solver="dense")
    np.testing.assert_array_equal(emb.isolated, iso)
    assert np.isnan(emb.embedding[iso]).all() and np.isnan(emb.vectors[iso]).all()
    assert np.isfinite(emb.embedding[~iso]).all()
    # The same spectrum as the graph without those vertices.
    sub = csr[~iso][:, ~iso]
    np.testing.assert_allclose(
        emb.eigenvalues, spectral_embedding(sub, 3, solver="dense").eigenvalues, atol=1e-12
    )


@pytest.mark.parametrize("solver", ["lanczos", "lobpcg", "chebyshev", "lu", "amg"])
def test_iterative_solvers_leave_isolated_vertices_out(solver, rng):
    csr, truth = blob_graph(rng, [500], box=RECT, n_isolated=30)
    lam_ref, V_ref, keep, _, deg = reference(csr, 4)
    emb = spectral_embedding(csr, 4, solver=solver, tol=1e-9, random_state=0)
    assert emb.solver == solver
    np.testing.assert_allclose(emb.eigenvalues, lam_ref, atol=1e-8)
    iso = truth == -1
    assert np.isnan(emb.vectors[iso]).all() and np.isnan(emb.embedding[iso]).all()
    V = emb.vectors[~iso] * np.sqrt(deg)[:, None]  # back to eigenvectors of A
    np.testing.assert_allclose(np.linalg.norm(V, axis=0), 1.0, rtol=1e-9)
    np.testing.assert_allclose(principal_cosines(V, V_ref), 1.0, atol=1e-8)
    assert emb.residual_norms.max() <= 2e-9


@pytest.mark.parametrize("stored_zero", [None, "dropped pair", "dropped row", "kept row"])
def test_the_matrix_without_isolated_vertices(stored_zero, rng):
    # All ways of forming it: renumbering the columns when the dropped rows store
    # nothing, gathering the kept rows when only dropped rows store (zeros between
    # dropped vertices: a dropped component), compacting when an explicit zero is
    # stored between a dropped and a kept vertex.
    from explorer.embedding import laplacian

    csr, truth = blob_graph(rng, [150, 120], n_isolated=6)
    iso = np.flatnonzero(truth == -1)
    kept_vertex = int(np.flatnonzero(truth >= 0)[0])
    extra = {None: [], "dropped pair": [(iso[0], iso[1]), (iso[1], iso[0])],
             "dropped row": [(iso[0], kept_vertex), (kept_vertex, iso[0])],
             "kept row": [(kept_vertex, iso[1])]}[stored_zero]
    coo = csr.tocoo()
    rows = np.concatenate([coo.row, [r for r, _ in extra]]).astype(np.int64)
    cols = np.concatenate([coo.col, [c for _, c in extra]]).astype(np.int64)
    data = np.concatenate([coo.data, np.zeros(len(extra), dtype=np.float32)])
    S = sp.csr_matrix((data, (rows, cols)), shape=csr.shape)
    S.sort_indices()
    if stored_zero:
        assert S.nnz > np.count_nonzero(S.toarray())  # the zero is stored
    keep = np.flatnonzero(truth >= 0)
    sub = laplacian.submatrix(S.astype(np.float64), keep, np)
    assert sub.shape == (keep.size, keep.size) and sub.has_canonical_format
    np.testing.assert_array_equal(sub.toarray(), S.toarray()[np.ix_(keep, keep)])
    assert sub.nnz == np.count_nonzero(S.toarray()[np.ix_(keep, keep)])
    assert sub.indices.dtype == S.indices.dtype


def test_an_explicitly_stored_zero_weight_does_not_make_an_edge():
    # Builders store an edge whose float32 gaussian weight underflows as an explicit 0:
    # such a vertex has degree 0 and is isolated.
    S = sp.csr_matrix(
        (np.array([1.0, 1.0, 0.0, 0.0], np.float32), ([0, 1, 2, 3], [1, 0, 3, 2])), shape=(4, 4)
    )
    assert S.nnz == 4
    np.testing.assert_array_equal(isolated_vertices(S), [False, False, True, True])
    emb = spectral_embedding(S, 1)
    np.testing.assert_allclose(emb.eigenvalues, [0.0], atol=1e-15)


def test_signs_are_deterministic_and_the_solution_reproducible(rng):
    csr, _ = blob_graph(rng, [400], box=RECT)
    a = spectral_embedding(csr, 3, solver="lobpcg", random_state=7)
    b = spectral_embedding(csr, 3, solver="lobpcg", random_state=7)
    np.testing.assert_array_equal(a.embedding, b.embedding)
    c = spectral_embedding(csr, 3, solver="lanczos", random_state=8, tol=1e-10)
    # Different solvers and seeds agree once signs are fixed: the largest-magnitude
    # entry of each column of V = D^1/2 U is positive.
    np.testing.assert_allclose(a.vectors, c.vectors, atol=1e-4)
    deg = np.asarray(csr.sum(1)).ravel()
    V = a.vectors * np.sqrt(deg)[:, None]
    assert (V[np.abs(V).argmax(0), np.arange(3)] > 0).all()


def test_truncate_keeps_the_leading_pairs_and_rescales_rows(rng):
    csr, _ = blob_graph(rng, [200, 200])
    emb = spectral_embedding(csr, 5, solver="dense")
    two = emb.truncate(2)
    assert isinstance(two, Embedding) and two.n_components == 2
    np.testing.assert_array_equal(two.vectors, emb.vectors[:, :2])
    np.testing.assert_array_equal(two.eigenvalues, emb.eigenvalues[:2])
    np.testing.assert_array_equal(two.residual_norms, emb.residual_norms[:2])
    np.testing.assert_allclose(np.linalg.norm(two.embedding, axis=1), 1.0)
    with pytest.raises(ValueError, match="k=6"):
        emb.truncate(6)


def test_small_graphs_fall_back_to_the_dense_solver(rng):
    csr, _ = blob_graph(rng, [6], radius=3.0)
    for solver in ("lanczos", "lobpcg"):
        emb = spectral_embedding(csr, 4, solver=solver)
        assert emb.solver == "dense"
        np.testing.assert_allclose(emb.eigenvalues, reference(csr, 4)[0], atol=1e-10)


def test_timings_are_reported(rng):
    csr, _ = blob_graph(rng, [100])
    emb = spectral_embedding(csr, 2)
    assert set(emb.timings) == {"laplacian", "laplacian.check", "laplacian.scale", "solve",
                                "vectors", "total"}
    assert all(t >= 0 for t in emb.timings.values())
    assert emb.timings["total"] >= emb.timings["solve"]
    assert emb.timings["laplacian"] == pytest.approx(
        emb.timings["laplacian.check"] + emb.timings["laplacian.scale"])


# -------------------------------------------------------------------------- errors


def test_invalid_input_is_named():
    S = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], np.float32))
    with pytest.raises(TypeError, match="csr must be a scipy.sparse"):
        spectral_embedding(S.toarray(), 1)
    with pytest.raises(ValueError, match="square"):
        spectral_embedding(sp.csr_matrix(np.ones((2, 3))), 1)
    with pytest.raises(ValueError, match="n_components=0"):
        spectral_embedding(S, 0)
    with pytest.raises(ValueError, match="n_components=4"):
        spectral_embedding(S, 4)
    with pytest.raises(ValueError, match="solver='arpack'"):
        spectral_embedding(S, 1, solver="arpack")
    with pytest.raises(ValueError, match="tol"):
        spectral_embedding(S, 1, tol=0.0)
    with pytest.raises(ValueError, match="max_iter=0"):
        spectral_embedding(S, 1, max_iter=0)
    with pytest.raises(ValueError, match="negative weights"):
        spectral_embedding(sp.csr_matrix(-S.toarray()), 1)
    with pytest.raises(ValueError, match="not symmetric"):
        spectral_embedding(sp.csr_matrix(np.triu(S.toarray())), 1)
    infinite = S.copy()
    infinite.data[:] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        spectral_embedding(infinite, 1)
    with pytest.raises(ValueError, match="all n=3 vertices are isolated"):
        spectral_embedding(sp.csr_matrix((3, 3), dtype=np.float32), 1)


# ------------------------------------------------------------------------ eigengap


@pytest.mark.parametrize(
    ("eigenvalues", "k"),
    [
        ([0.0, 0.01, 0.5, 0.52], 2),  # one zero: λ_3 / λ_2 = 50, nearly two pieces
        ([0.0, 0.1, 0.3, 0.35], 2),  # one zero, ratios below 10: the largest gap
        ([0.0, 2e-5, 3e-3, 1e-2, 0.03, 0.1, 0.2], 2),  # two bridged paths: not the 0.1 gap
        ([0.0, 1e-3, 0.02, 0.04, 0.9], 4),  # ratios 20 and 22.5: the largest wins
        ([0.0, 0.0, 0.0, 0.3, 0.31], 3),  # three zeros: three components
        ([2e-10, -1e-12, 0.0, 1e-4, 0.9], 3),  # zeros within zero_tol, any order
        ([0.0, 0.2, 0.4, 0.6], 1),  # equal gaps: the smallest k
        ([0.0, 0.0, 0.0, 0.0], 4),  # no visible gap: all components
        ([0.4], 1),
        ([0.5, 0.5, 0.5], 3),  # no gap at all: k_max
        ([0.3, 0.0, 0.1, 0.9], 3),  # unsorted input
    ],
)
def test_eigengap_rule(eigenvalues, k):
    assert eigengap_k(np.array(eigenvalues)) == k


@pytest.mark.parametrize(
    ("eigenvalues", "k", "rule", "words"),
    [
        ([0.0, 0.0, 0.3, 0.31], 2, "components", "2 connected components"),
        ([0.0, 2e-5, 3e-3, 1e-2, 0.03], 2, "ratio", "λ_3 is 150 times λ_2"),
        ([0.0, 0.1, 0.3, 0.35], 2, "gap", "the largest gap"),
        ([0.4], 1, "single", "no gap stands out"),
    ],
)
def test_eigengap_choice_names_its_rule(eigenvalues, k, rule, words):
    choice = eigengap_choice(eigenvalues)
    assert (choice.k, choice.rule) == (k, rule) == (eigengap_k(eigenvalues), rule)
    assert words in choice.describe()
    assert (choice.ratio is not None) == (rule == "ratio")


def test_eigengap_k_max_limits_the_view():
    lam = [0.0, 0.1, 0.2, 0.9]
    assert eigengap_k(lam) == 3
    assert eigengap_k(lam, k_max=3) == 1
    assert eigengap_k([0.0, 0.0, 0.0, 0.5], k_max=2) == 2


@given(
    k=st.integers(1, 12),
    extra=st.integers(1, 10),
    seed=st.integers(0, 2**32 - 1),
)
def test_eigengap_finds_a_planted_gap(k, extra, seed):
    r = np.random.default_rng(seed)
    # k small eigenvalues below 0.05 (the first exactly 0, the others within a factor
    # 10 of each other), then a jump of at least 0.5 and slowly rising ones with gaps
    # below 0.05.
    low = np.concatenate([[0.0], np.sort(r.uniform(5.1e-3, 0.05, k - 1))])
    high = 0.55 + np.cumsum(r.uniform(0, 0.05, extra))
    assert eigengap_k(r.permutation(np.concatenate([low, high]))) == k


def test_eigengap_errors():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        eigengap_k([])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        eigengap_k(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="finite"):
        eigengap_k([0.0, np.nan])
    with pytest.raises(ValueError, match="k_max=3"):
        eigengap_k([0.0, 0.5], k_max=3)


def test_auto_k_max():
    assert auto_k_max(1) == 1
    assert auto_k_max(7) == 7
    assert auto_k_max(10_000) == 20


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("solver", ["dense", "lanczos", "lobpcg", "chebyshev"])
def test_cupy_matches_scipy(solver, rng):
    cupy = pytest.importorskip("cupy")
    import cupyx.scipy.sparse as csp

    # Connected apart from the isolated points: Lanczos may miss repeated eigenvalues.
    csr, truth = blob_graph(rng, [1500], box=RECT, radius=0.4, n_isolated=3)
    k = 3
    cpu = spectral_embedding(csr, k, solver=solver, tol=1e-8, random_state=0)
    gpu = spectral_embedding(csp.csr_matrix(csr), k, solver=solver, tol=1e-8, random_state=0)
    assert isinstance(gpu.embedding, cupy.ndarray) and isinstance(gpu.isolated, cupy.ndarray)
    assert gpu.solver == cpu.solver
    np.testing.assert_array_equal(cupy.asnumpy(gpu.isolated), truth == -1)
    np.testing.assert_allclose(gpu.eigenvalues, cpu.eigenvalues, atol=1e-7)
    assert gpu.residual_norms.max() <= 1e-6
    keep = truth != -1
    cos = principal_cosines(cupy.asnumpy(gpu.vectors)[keep], cpu.vectors[keep])
    assert cos.min() > 1 - 1e-6


# ------------------------------------------------------ components: one labelling


def test_components_embedding_equals_the_solver_on_the_restricted_graph(rng):
    """The fast path (no A formed, the labels and kept vertices given) is the
    components solver on the graph with the dropped components' weights zeroed."""
    csr, truth = blob_graph(rng, [150, 60, 120, 80], radius=0.9, n_isolated=3)
    split = largest_components(csr, 2)
    assert split.n_components == 4 and split.n_dropped == 140
    fast = components_embedding(csr, 2, labels=split.labels, kept=split.kept)
    slow = spectral_embedding(restrict_to(csr, split.kept), 2, solver="dense")
    assert fast.solver == "components" and fast.iterations is None
    np.testing.assert_array_equal(fast.isolated, (truth == -1) | (truth == 1) | (truth == 3))
    np.testing.assert_array_equal(fast.eigenvalues, 0.0)
    assert fast.residual_norms.max() < 1e-12
    kept = ~fast.isolated
    # The same invariant subspace: the rows are one point per component, orthogonal.
    np.testing.assert_allclose(np.abs(fast.embedding[kept] @ fast.embedding[kept].T),
                               np.abs(slow.embedding[kept] @ slow.embedding[kept].T), atol=1e-6)
    assert np.isnan(fast.embedding[~kept]).all()
    # Labelled here when not given: the same answer.
    again = components_embedding(restrict_to(csr, split.kept), 2)
    np.testing.assert_array_equal(again.embedding, fast.embedding)
    assert "exactly k=2" in fast.solver_why or "components" in fast.solver_why


def test_components_embedding_refuses_the_wrong_count(rng):
    csr, _ = blob_graph(rng, [60, 50, 40], radius=0.9)
    with pytest.raises(ValueError, match="needs exactly n_components=2 connected components"):
        components_embedding(csr, 2)


@pytest.mark.parametrize("solver", ["lanczos", "lobpcg", "chebyshev"])
def test_iterative_solvers_start_from_known_components(rng, solver):
    """With exactly k components known, the iterative solvers start from their exact
    indicators: converged at once, zero eigenvalues to rounding, whatever the
    clustering of the next eigenvalues (the long thin rectangles make them tiny)."""
    csr, truth = blob_graph(rng, [400, 300, 350], box=(12.0, 1.0), radius=0.8)
    labels = component_labels(csr)
    emb = spectral_embedding(csr, 3, solver=solver, components=labels, random_state=0)
    assert emb.solver == solver
    assert emb.iterations <= (3 if solver == "chebyshev" else 1) * 40
    if solver != "chebyshev":
        assert emb.iterations == 0
    np.testing.assert_allclose(emb.eigenvalues, 0.0, atol=1e-10)
    assert emb.residual_norms.max() < 1e-8
    rows = emb.embedding
    for c in range(3):  # one point per component
        inside = rows[truth == c]
        np.testing.assert_allclose(inside, np.broadcast_to(inside[:1], inside.shape), atol=1e-6)


def test_solver_reasons_are_given(rng):
    connected, _ = blob_graph(rng, [1200], box=RECT)
    auto = spectral_embedding(connected, 2, random_state=0)
    # Connected, its leading eigenvalues apart: the CPU's "auto" keeps Lanczos.
    assert auto.solver == "lanczos"
    assert auto.solver_why.startswith("auto: 1200 vertices, one connected component")
    np.testing.assert_allclose(auto.eigenvalues, reference(connected, 2)[0], atol=1e-8)
    small = spectral_embedding(blob_graph(rng, [15], radius=3.0)[0], 2, solver="lobpcg")
    assert small.solver == "dense" and "solved densely" in small.solver_why
    forced = spectral_embedding(connected, 2, solver="lanczos", random_state=0)
    assert forced.solver_why == "eigen_solver='lanczos' asked for"


def test_more_known_components_than_eigenpairs_are_not_a_start(rng):
    csr, _ = blob_graph(rng, [400, 300, 350], radius=0.9)
    labels = component_labels(csr)
    emb = spectral_embedding(csr, 2, solver="chebyshev", components=labels, random_state=0)
    assert emb.solver == "chebyshev" and emb.iterations > 0
    np.testing.assert_allclose(emb.eigenvalues, 0.0, atol=1e-6)
