"""eigen_solver="auto" (the measured cost model), affinity="auto"'s exact shortcut, and the
kd-tree kNN search's in-order rows (issue 22)."""

import numpy as np
import pytest
import scipy.sparse as sp

from explorer import EdgeRule, build_graph, spectral_embedding
from explorer.affinity import choose_affinity
from explorer.embedding import solvers
from explorer.embedding.chebyshev import default_block
from explorer.embedding.solvers import (
    CPU_COSTS,
    DENSE_MAX_N,
    DENSE_MEMORY_MAX_N,
    auto_costs,
    resolve_solver,
    solver_reason,
)
from explorer.graph.reference import reference_csr
from explorer.testing import check_canonical, tricky_data


def ring_graph(m, width=3):
    """A connected band graph of `m` vertices (each joined to its `width` next ones)."""
    rows = np.repeat(np.arange(m), width)
    cols = (rows + np.tile(np.arange(1, width + 1), m)) % m
    S = sp.coo_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(m, m))
    return (S + S.T).tocsr()


# ------------------------------------------------------------- the solver's cost model


@pytest.mark.parametrize("m, nnz, k", [(200, 2_000, 2), (450, 5_400, 2), (600, 7_200, 2),
                                       (1_797, 24_678, 10), (1_797, 430_000, 10),
                                       (5_000, 60_000, 3), (20_000, 240_000, 2)])
def test_auto_takes_the_cheaper_predicted_solver(m, nnz, k):
    cost = auto_costs(m, k, nnz)
    b = default_block(k, m)
    assert cost["chebyshev"] == pytest.approx(
        CPU_COSTS.products * (nnz * (CPU_COSTS.alpha + CPU_COSTS.beta * b)
                              + CPU_COSTS.gamma * m * b))
    expected = "dense" if cost["dense"] is not None and cost["dense"] <= cost["chebyshev"] \
        else "chebyshev"
    assert resolve_solver("auto", m, k, nnz=nnz) == expected


def test_auto_crossover_moves_with_the_density():
    # A sparse kNN-like graph leaves dense early; a dense graph of the same size keeps it.
    assert resolve_solver("auto", 1_000, 2, nnz=10 * 1_000) == "chebyshev"
    assert resolve_solver("auto", 200, 2, nnz=10 * 200) == "dense"
    assert resolve_solver("auto", 1_500, 4, nnz=500 * 1_500) == "dense"
    # Past the memory bound dense is not considered, however dense the graph.
    assert auto_costs(DENSE_MEMORY_MAX_N + 1, 2, 10**9)["dense"] is None
    assert resolve_solver("auto", DENSE_MEMORY_MAX_N + 1, 2, nnz=10**9) == "chebyshev"


def test_without_nnz_auto_is_the_count_rule():
    assert resolve_solver("auto", DENSE_MAX_N, 2) == "dense"
    assert resolve_solver("auto", DENSE_MAX_N + 1, 2) == "chebyshev"
    why = solver_reason("auto", "chebyshev", DENSE_MAX_N + 1, 2)
    assert why.startswith(f"auto: {DENSE_MAX_N + 1} vertices > {DENSE_MAX_N}")


def test_the_reason_names_both_predictions_and_the_source():
    why = solver_reason("auto", "chebyshev", 5_000, 2, np, 60_000)
    cost = auto_costs(5_000, 2, 60_000)
    assert why.startswith("auto: 5000 vertices, 60000 nonzeros, k=2")
    assert f"dense {cost['dense']:.2g} s" in why and f"Chebyshev {cost['chebyshev']:.2g} s" in why
    assert CPU_COSTS.source in why
    big = solver_reason("auto", "chebyshev", DENSE_MEMORY_MAX_N + 1, 2, np, 10**6)
    assert "not considered" in big
    assert solver_reason("lanczos", "lanczos", 500, 2) == "eigen_solver='lanczos' asked for"
    assert "solved densely" in solver_reason("lobpcg", "dense", 12, 2)


def test_embedding_runs_and_explains_the_auto_choice():
    small = ring_graph(150)
    emb = spectral_embedding(small, 2, random_state=0)
    assert emb.solver == "dense" and "solved densely (exact, and cheaper here)" in emb.solver_why
    # A connected ring: "auto" tries Lanczos first, whose crowded spectrum (eigenvalues
    # ~ (2πj/m)² near 0) sends it back to the cost model's choice, which says so.
    large = ring_graph(3_000)
    emb = spectral_embedding(large, 2, random_state=0)
    assert emb.solver == "chebyshev" == resolve_solver("auto", 3_000, 2, nnz=large.nnz)
    assert resolve_solver("auto", 3_000, 2, nnz=large.nnz, connected=True) == "lanczos"
    assert emb.solver_why.startswith("auto tried Lanczos first: ")
    assert f"then auto: 3000 vertices, {large.nnz} nonzeros, k=2" in emb.solver_why
    assert emb.residual_norms.max() <= 2 * emb.tol


def test_auto_keeps_lanczos_on_a_connected_graph_with_separated_eigenvalues():
    # The digits' suggested ε-graph (1797 vertices, connected): Lanczos was 0.017 s
    # there against Chebyshev's 0.10 s and the dense solver's 0.45 s.
    from explorer import data
    from explorer.embedding.solvers import LANCZOS_EDGE_GAP_TOLS, LANCZOS_INNER_GAP_TOLS
    from explorer.graph import dataset_params

    digits = data.load("digits")
    params = {key: value for key, value in dataset_params(digits).items()
              if key != "n_clusters"}
    csr = build_graph(digits.X, backend="cpu", **params).csr
    assert sp.csgraph.connected_components(csr)[0] == 1
    emb = spectral_embedding(csr, 10, random_state=0)
    dense = spectral_embedding(csr, 10, solver="dense")
    assert emb.solver == "lanczos", emb.solver_why
    assert emb.solver_why.startswith(f"auto: {csr.shape[0]} vertices, one connected component")
    # The check held: the k + 1 = 11 largest eigenvalues of A are that far apart.
    gaps = -np.diff(1.0 - spectral_embedding(csr, 11, solver="dense").eigenvalues)
    assert gaps[-1] >= LANCZOS_EDGE_GAP_TOLS * emb.tol
    assert gaps[:-1].min() >= LANCZOS_INNER_GAP_TOLS * emb.tol
    np.testing.assert_allclose(emb.eigenvalues, dense.eigenvalues, atol=1e-8)
    V, W = emb.vectors, dense.vectors
    np.testing.assert_allclose(np.abs(np.sum(V * W, axis=0)) / np.linalg.norm(V, axis=0)
                               / np.linalg.norm(W, axis=0), 1.0, atol=1e-6)
    # Two components: no Lanczos (it may miss a copy of the repeated eigenvalue 1).
    two = sp.block_diag([csr, csr]).tocsr()
    assert spectral_embedding(two, 10, random_state=0).solver != "lanczos"


def test_auto_falls_back_when_lanczos_pairs_are_closer_than_its_tolerance(rng):
    # Two tight blobs joined by one weak edge: 1 and 1 - ε (ε ~ 1e-7) lead the
    # spectrum, closer than 10 × tol: Lanczos's pairs are set aside.
    from explorer import build_graph

    X = np.concatenate([rng.normal(0, 1, (800, 5)), rng.normal(0, 1, (800, 5)) + 50])
    csr = build_graph(X.astype(np.float32), metric="gaussian", sigma="local", graph="knn",
                      n_neighbors=10, backend="cpu").csr.tolil()
    csr[0, 800] = csr[800, 0] = 1e-6
    csr = csr.tocsr()
    assert sp.csgraph.connected_components(csr)[0] == 1
    emb = spectral_embedding(csr, 2, random_state=0)
    assert emb.solver in ("dense", "chebyshev")
    assert emb.solver_why.startswith("auto tried Lanczos first: two of its k = 2 "
                                     "eigenvalues lie")
    np.testing.assert_allclose(emb.eigenvalues,
                               spectral_embedding(csr, 2, solver="dense").eigenvalues, atol=1e-6)


def test_the_constants_are_the_committed_calibration():
    """CPU_COSTS restates benchmarks/results/eigen/solver-cost-cpu.json's fit (3 digits)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / CPU_COSTS.source
    fit = json.loads(path.read_text())
    assert CPU_COSTS.c_dense == pytest.approx(fit["dense"]["c_dense"], rel=5e-3)
    for name in ("alpha", "beta", "gamma"):
        assert getattr(CPU_COSTS, name) == pytest.approx(fit["chebyshev"][name], rel=5e-3), name
    assert CPU_COSTS.products == fit["chebyshev"]["products_median"]


# ------------------------------------------------------------- affinity="auto"


def test_a_sample_that_splits_into_k_pieces_needs_no_epsilon_search(monkeypatch):
    from explorer.graph import suggest as data_suggest

    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    X = np.vstack([c + rng.normal(scale=0.3, size=(400, 2)) for c in centres]).astype(np.float32)

    def refuse(*a, **kw):
        raise AssertionError("the ε search ran")

    monkeypatch.setattr(data_suggest, "sqdist_search", refuse)
    choice = choose_affinity(X, 3)
    assert choice.affinity == "knn" and choice.eigengaps == {"knn": 1.0}
    assert "splits into exactly k=3 components" in choice.why


def test_a_connected_sample_still_compares_the_eigengaps():
    # Two touching blobs: the kNN graph is connected, so the rule compares both graphs
    # (or finds no clean ε threshold), as before the shortcut.
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(size=(500, 2)), rng.normal(size=(500, 2)) + [2.0, 0.0]])
    choice = choose_affinity(X.astype(np.float32), 2)
    assert "splits into exactly" not in choice.why
    if choice.eigengaps is not None:
        assert set(choice.eigengaps) == {"epsilon", "knn"}
        assert 0.0 <= choice.eigengaps["knn"] < 1.0


# ------------------------------------------------------------- the kd-tree's rows


@pytest.mark.parametrize("flavour", ("uniform", "lattice", "duplicates"))
def test_kdtree_knn_in_order_rows_equal_the_reference(flavour):
    """Rows the tree returns in order (the point first) take their first k as they are,
    the others are sorted: both kinds occur on lattices and duplicates."""
    rng = np.random.default_rng(7)
    for n, d in ((1_000, 2), (400, 3)):
        X = tricky_data(rng, n, d, flavour)
        for k in (1, 5, 10):
            rule = EdgeRule.from_args("gaussian", "local", graph="knn", n_neighbors=k,
                                      local_neighbor=min(k, 7))
            g = build_graph(X, rule, method="kdtree", backend="cpu")
            check_canonical(g.csr)
            expected = reference_csr(X, rule)
            for name in ("indptr", "indices", "data"):
                assert np.array_equal(getattr(g.csr, name), getattr(expected, name)), name


def test_solvers_module_lists_its_public_names():
    for name in ("CPU_COSTS", "SolverCosts", "auto_costs", "DENSE_MEMORY_MAX_N"):
        assert name in solvers.__all__


@pytest.mark.gpu
def test_gpu_auto_is_the_count_rule_and_says_so():
    cupy = pytest.importorskip("cupy")
    import cupyx.scipy.sparse as csp

    for m, expected in ((DENSE_MAX_N - 100, "dense"), (DENSE_MAX_N + 500, "chebyshev")):
        graph = csp.csr_matrix(ring_graph(m))
        emb = spectral_embedding(graph, 2, random_state=0)
        assert emb.solver == expected == resolve_solver("auto", m, 2, cupy, nnz=graph.nnz)
        assert emb.solver_why.startswith(f"auto: {m} vertices")
        assert isinstance(emb.embedding, cupy.ndarray)


# ------------------------------ "lu" and "amg": LOBPCG preconditioned by (L + δI)^-1


def test_auto_takes_amg_for_large_graphs_of_low_dimensional_points():
    from explorer.embedding.lu import LU_MAX_DIM, LU_MIN_ROWS

    m, nnz = LU_MIN_ROWS, 12 * LU_MIN_ROWS
    assert resolve_solver("auto", m, 2, np, nnz=nnz, points_dim=2) == "amg"
    assert resolve_solver("auto", m, 2, np, nnz=nnz, points_dim=LU_MAX_DIM) == "amg"
    # Higher-dimensional points (fill towards dense), fewer rows, no points, the GPU:
    # the cost model's choice.
    plain = resolve_solver("auto", m, 2, np, nnz=nnz)
    assert plain not in ("lu", "amg")
    assert resolve_solver("auto", m, 2, np, nnz=nnz, points_dim=LU_MAX_DIM + 1) == plain
    assert resolve_solver("auto", m - 1, 2, np, nnz=nnz, points_dim=2) == plain
    why = solver_reason("auto", "amg", m, 2, np, nnz, points_dim=2)
    assert why.startswith(f"auto: {m} vertices") and "two-grid" in why


@pytest.mark.parametrize("solver", ["lu", "amg"])
def test_lu_and_amg_are_refused_on_another_backend_with_the_argument_named(solver):
    class NotNumpy:  # stands for CuPy: the check is on the module alone
        pass

    with pytest.raises(ValueError, match=f"eigen_solver='{solver}' runs on the CPU only"):
        resolve_solver(solver, 5000, 2, NotNumpy(), nnz=60_000)
    solvers.check_solver_backend(solver, np)


@pytest.mark.parametrize("solver", ["lu", "amg"])
def test_preconditioned_lobpcg_finds_the_crowded_eigenvalues_of_a_ring(solver, rng):
    # A ring of points: eigenvalues ~ (2πj/m)² crowd near 0. Chebyshev needs many
    # products, preconditioned LOBPCG a few iterations; both the dense answer.
    m = 3000
    t = np.sort(rng.uniform(0, 2 * np.pi, m))
    X = np.c_[np.cos(t), np.sin(t)].astype(np.float32) * (m / 40)
    g = build_graph(X, metric="gaussian", sigma=1.0, threshold_sqdist=4.0, backend="cpu")
    assert sp.csgraph.connected_components(g.csr)[0] == 1
    emb = spectral_embedding(g.csr, 3, solver=solver, tol=1e-8, random_state=0)
    dense = spectral_embedding(g.csr, 3, solver="dense")
    np.testing.assert_allclose(emb.eigenvalues, dense.eigenvalues, atol=1e-9)
    assert emb.solver == solver and emb.iterations <= 20
    cheb = spectral_embedding(g.csr, 3, solver="chebyshev", tol=1e-8, random_state=0)
    assert cheb.iterations > 5 * emb.iterations
    auto = spectral_embedding(g.csr, 3, random_state=0, points_dim=2)
    assert auto.solver not in ("lu", "amg")  # below LU_MIN_ROWS


def test_the_estimator_takes_amg_for_a_large_connected_planar_graph(rng):
    from explorer import SpectralClustering
    from explorer.embedding.lu import LU_MIN_ROWS

    n = LU_MIN_ROWS + 500
    t = rng.uniform(0, 2 * np.pi, n)
    X = (np.c_[np.cos(t), np.sin(t)] * (1 + 0.05 * rng.standard_normal((n, 1))))
    sc = SpectralClustering(2, affinity="knn", random_state=0, backend="cpu").fit(X)
    assert sc.eigen_solver_ == "amg", sc.eigen_solver_why_
    assert "two-grid" in sc.eigen_solver_why_
    # Two arcs of the ring: the Fiedler vector's cut.
    assert np.bincount(sc.labels_).min() > 0.3 * n
    # The same eigenvalues as the exact preconditioner's, to the solvers' tolerance: an
    # eigenvalue lies within the residual norm (<= tol) of each Ritz value. The ring's
    # second and third eigenvalues are close, so neither the values nor the vectors
    # agree closer than that; the vectors are compared against the dense reference in
    # test_embedding.py instead.
    lu = SpectralClustering(2, affinity="knn", eigen_solver="lu", random_state=0,
                            backend="cpu").fit(X)
    np.testing.assert_allclose(sc.spectrum_.eigenvalues, lu.spectrum_.eigenvalues,
                               rtol=0, atol=2 * sc.spectrum_.tol)


def test_factors_are_estimated_before_they_are_formed(monkeypatch):
    # Explicit "lu" and "amg": refused with the estimate and what to do; "auto": the
    # cost model instead, when the estimated factors would not fit.
    import explorer.embedding.solvers as solvers_module
    from explorer.embedding.lu import LU_MIN_ROWS, factor_bytes, lu_preconditioner
    from explorer.embedding.multigrid import multigrid_preconditioner
    from explorer.memory import MemoryEstimateError

    graph = ring_graph(3000)
    A = (graph / 6.0).astype(np.float64).tocsr()
    monkeypatch.setattr("explorer.memory.available_host_bytes", lambda: 1000)
    with pytest.raises(MemoryEstimateError, match=r"eigen_solver='lu': the sparse LU factors "
                       r"of the 3000-row graph .*use eigen_solver='chebyshev'"):
        lu_preconditioner(A)
    with pytest.raises(MemoryEstimateError, match=r"eigen_solver='amg': the coarse matrix "
                       r"of the 3000-row graph .*use eigen_solver='chebyshev'"):
        multigrid_preconditioner(A, np.asarray(A.sum(axis=1)).ravel())
    m, nnz = LU_MIN_ROWS, 12 * LU_MIN_ROWS
    monkeypatch.setattr(solvers_module, "available_host_bytes",
                        lambda: int(factor_bytes(nnz) / 0.8) - 1)
    assert resolve_solver("auto", m, 2, np, nnz=nnz, points_dim=2) not in ("lu", "amg")
    monkeypatch.setattr(solvers_module, "available_host_bytes",
                        lambda: int(factor_bytes(nnz) / 0.8) + 10)
    assert resolve_solver("auto", m, 2, np, nnz=nnz, points_dim=2) == "amg"
