"""Chebyshev-filtered subspace iteration against float64 dense references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.polynomial import chebyshev
from sklearn.metrics import adjusted_rand_score

from explorer import KMeans, build_graph, data
from explorer.embedding.chebyshev import (
    DEFAULT_TOL,
    SPECTRUM,
    ChebyshevBlock,
    chebyshev_subspace,
    filter_degree,
    gram_rayleigh_ritz,
    residual_target,
)
from explorer.graph import dataset_params

# -------------------------------------------------------------------------- graphs


def normalised(S):
    """A = D^-1/2 S D^-1/2 (float64) of a similarity matrix without isolated vertices."""
    S = sp.csr_matrix(S, dtype=np.float64)
    dinv = 1.0 / np.sqrt(np.asarray(S.sum(axis=1)).ravel())
    return sp.csr_matrix(S.multiply(dinv[:, None]).multiply(dinv[None, :]))


def rectangles(rng, sizes, *, box=(3.0, 1.5), radius=0.5, gap=10.0):
    """Normalised Gaussian ε-graph of uniform rectangles, `gap` apart and shuffled: one
    connected component per rectangle (dense enough: tens of neighbours a point).

    Returns (A, component of each vertex, weighted degree of each vertex). Built by
    dense float64 thresholding, independent of explorer.graph.
    """
    corners = [np.array([gap * i, 0.0]) for i in range(len(sizes))]
    for _ in range(50):  # a sparse draw can leave a point apart: draw again
        X = np.vstack([c + rng.random((s, 2)) * box for c, s in zip(corners, sizes, strict=True)])
        truth = np.repeat(np.arange(len(sizes)), sizes)
        order = rng.permutation(X.shape[0])
        X, truth = X[order], truth[order]
        sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
        W = np.where(sq < radius**2, np.exp(-sq / (2 * radius**2)), 0.0)
        np.fill_diagonal(W, 0.0)
        if sp.csgraph.connected_components(sp.csr_matrix(W))[0] == len(sizes):
            return normalised(W), truth, W.sum(axis=1)
    raise AssertionError(f"no draw of {sizes} points gave one component per rectangle")


def dense_top(A, k):
    """The k largest eigenpairs of A (dense float64), descending, and the next eigenvalue."""
    mu, V = np.linalg.eigh(A.toarray())
    return mu[::-1][:k], V[:, ::-1][:, :k], mu[::-1][k]


def sin_angle(V, W):
    """Sine of the largest principal angle between the column spans of V and W."""
    Qv, _ = np.linalg.qr(V)
    Qw, _ = np.linalg.qr(W)
    s = np.linalg.svd(Qv.T @ Qw, compute_uv=False)
    return math.sqrt(max(0.0, 1.0 - float(s.min()) ** 2))


def check_solution(A, k, mu, V, residuals, tol, slack=0.0):
    """What every solution must satisfy, checked against a dense float64 reference.

    `slack`: how far the float64 residuals may exceed `tol` when the iteration judged
    convergence in float32 (its rounding, about 2e-7).
    """
    ref_mu, ref_V, next_mu = dense_top(A, k)
    assert mu.shape == (k,) and V.shape == (A.shape[0], k) and residuals.shape == (k,)
    assert V.dtype == np.float64 and np.all(np.diff(mu) <= 0)
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-10)
    # The residuals reported are those of the returned pairs, in float64.
    np.testing.assert_allclose(
        residuals, np.linalg.norm(A @ V - V * mu, axis=0), rtol=1e-6, atol=1e-12
    )
    assert residuals.max() <= tol + slack
    # k Ritz pairs with residual matrix R lie within ||R||_2 <= sqrt(k) tol of k
    # eigenvalues (Kahan), and Ritz values never exceed the eigenvalues they match.
    np.testing.assert_allclose(mu, ref_mu, rtol=0, atol=math.sqrt(k) * tol)
    # Davis–Kahan sin θ: the span is as close to the eigenspace as residual over gap.
    gap = ref_mu[-1] - next_mu
    if gap > 10 * math.sqrt(k) * tol:
        assert sin_angle(V, ref_V) <= math.sqrt(k) * tol / (gap - math.sqrt(k) * tol)


# ---------------------------------------------------------------- against references


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("sizes", "k"), [((400, 300, 350), 3), ((400, 300, 350), 5), ((900,), 4)])
def test_matches_the_dense_reference(sizes, k, dtype, rng):
    A, *_ = rectangles(rng, sizes)
    tol = 1e-4 if dtype == "float32" else 1e-6
    mu, V, iterations, residuals = chebyshev_subspace(
        A, k, tol=tol, dtype=dtype, random_state=rng.integers(2**31)
    )
    check_solution(A, k, mu, V, residuals, tol, slack=1e-6 if dtype == "float32" else 0.0)
    assert 1 <= iterations <= 10_000


def test_a_repeated_eigenvalue_is_found_whole(rng):
    """Six components: eigenvalue 1 six times, all found (single-vector Lanczos may not)."""
    A, truth, degree = rectangles(rng, [150] * 6, box=(1.5, 1.5))
    mu, V, _, residuals = chebyshev_subspace(A, 6, tol=1e-7, random_state=0)
    np.testing.assert_allclose(mu, 1.0, atol=1e-10)
    assert residuals.max() <= 1e-7
    # The eigenvalue-1 eigenspace is spanned by D^1/2 times the component indicators.
    exact = np.zeros((A.shape[0], 6))
    exact[np.arange(A.shape[0]), truth] = np.sqrt(degree)
    assert sin_angle(V, exact) < 1e-6


@pytest.mark.parametrize("k", [1, 2, 4])
def test_agrees_with_scipy_eigsh_on_a_connected_graph(k, rng):
    A, *_ = rectangles(rng, [1200], box=(6.0, 2.5))
    ref = np.sort(sla.eigsh(A, k=k, which="LA", tol=1e-12)[0])[::-1]
    mu, V, _, residuals = chebyshev_subspace(A, k, tol=1e-7, random_state=1)
    np.testing.assert_allclose(mu, ref, atol=math.sqrt(k) * 1e-7)
    assert residuals.max() <= 1e-7


@settings(max_examples=25)
@given(
    sizes=st.lists(st.integers(30, 90), min_size=1, max_size=4),
    extra=st.integers(0, 3),
    seed=st.integers(0, 2**31 - 1),
    float32=st.booleans(),
)
def test_random_graphs(sizes, extra, seed, float32):
    """Random rectangle graphs of 1-4 components; k from the components up."""
    rng = np.random.default_rng(seed)
    A, *_ = rectangles(rng, sizes, box=(1.5, 1.0), radius=0.45)
    k = min(len(sizes) + extra, A.shape[0] - 1)
    A = A.astype(np.float32) if float32 else A
    tol = 1e-5
    mu, V, _, residuals = chebyshev_subspace(A, k, tol=tol, random_state=seed)
    check_solution(A.astype(np.float64), k, mu, V, residuals, tol)


# ---------------------------------------------------------------------- behaviour


def test_deterministic_with_random_state(rng):
    A, *_ = rectangles(rng, [300, 200])
    first = chebyshev_subspace(A, 2, random_state=7)
    again = chebyshev_subspace(A, 2, random_state=7)
    other = chebyshev_subspace(A, 2, random_state=8)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[1], other[1])
    assert sin_angle(first[1], other[1]) < 0.05


@pytest.mark.parametrize("input_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("work", [None, "float32", "float64"])
def test_input_and_working_precisions(input_dtype, work, rng):
    A, *_ = rectangles(rng, [250, 250, 250])
    tol = 1e-4
    mu, V, _, residuals = chebyshev_subspace(
        A.astype(input_dtype), 4, tol=tol, dtype=work, random_state=3
    )
    assert isinstance(mu, np.ndarray) and isinstance(V, np.ndarray) and V.dtype == np.float64
    # The reference is the float64 matrix the (possibly float32) input rounds from.
    check_solution(A.astype(input_dtype).astype(np.float64), 4, mu, V, residuals, tol,
                   slack=1e-6 if work == "float32" else 0.0)


def test_a_starting_vector_is_used(rng):
    """D^1/2 1 is an exact eigenvector for eigenvalue 1: placed in the block, it is
    found by the first Rayleigh-Ritz step and kept."""
    A, _, degree = rectangles(rng, [700], box=(6.0, 2.5))
    mu, V, iterations, residuals = chebyshev_subspace(A, 1, tol=1e-8, v0=np.sqrt(degree))
    assert iterations == 1 and residuals[0] <= 1e-8 and abs(mu[0] - 1.0) < 1e-12
    mu, V, _, residuals = chebyshev_subspace(A, 3, tol=1e-8, random_state=0, v0=np.sqrt(degree))
    check_solution(A, 3, mu, V, residuals, 1e-8)
    assert sin_angle(V[:, :1], np.sqrt(degree)[:, None]) < 1e-6


@pytest.mark.parametrize("max_iter", [1, 2, 3, 30])
def test_the_budget_is_respected_and_reported(max_iter, rng):
    A, *_ = rectangles(rng, [400, 400])
    mu, V, iterations, residuals = chebyshev_subspace(
        A, 3, tol=1e-12, max_iter=max_iter, random_state=0
    )
    assert iterations <= max_iter and iterations >= max_iter - 1
    assert residuals.max() > 1e-12  # stopped by the budget, not converged
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-10)
    np.testing.assert_allclose(residuals, np.linalg.norm(A @ V - V * mu, axis=0), rtol=1e-6)


def test_callback_sees_every_check(rng):
    A, *_ = rectangles(rng, [300, 300])
    seen = []
    _, _, iterations, _ = chebyshev_subspace(
        A, 2, tol=1e-6, random_state=0, callback=lambda p, theta, res: seen.append((p, theta, res))
    )
    products = [p for p, _, _ in seen]
    assert products[0] == 1 and products[-1] == iterations
    assert all(b > a for a, b in zip(products, products[1:], strict=False))
    assert seen[-1][2].max() <= 1e-6 < seen[0][2].max()
    assert all(theta.shape[0] >= 2 for _, theta, _ in seen)


@pytest.mark.parametrize(("name", "k"), [("blobs", 3), ("moons", 2)])
def test_clustering_the_embedding(name, k):
    """End to end on explorer.build_graph: unit rows of D^-1/2 V cluster perfectly."""
    ds = data.load(name, n_samples=3000, random_state=0)
    s = dataset_params(ds)
    csr = build_graph(ds.X, metric=s["metric"], sigma=s["sigma"],
                      threshold_sqdist=s["threshold_sqdist"], backend="cpu").csr
    S = csr.astype(np.float64)
    degree = np.asarray(S.sum(axis=1)).ravel()
    keep = degree > 0
    S = S[keep][:, keep]
    A = normalised(S)
    _, V, _, residuals = chebyshev_subspace(A, k, random_state=0)
    assert residuals.max() <= DEFAULT_TOL
    U = V / np.sqrt(degree[keep])[:, None]
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    labels = KMeans(n_clusters=k, random_state=0).fit(U.astype(np.float32)).labels_
    assert adjusted_rand_score(ds.y[keep], labels) >= 0.99


# ------------------------------------------------------------------------ helpers


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [1, 2, 7, 30])
def test_filter_is_the_scaled_chebyshev_polynomial(p, dtype):
    """On a diagonal matrix the filter maps e_i to P(x_i) e_i with
    P = T_p(t(x)) / T_p(t(1)), t mapping [low, cut] onto [-1, 1]."""
    x = np.linspace(-1.0, 1.0, 41)
    A = sp.diags(x).tocsr()
    cut = 0.6
    ops = ChebyshevBlock(A, np, np.dtype(dtype), "row", 0)
    V = np.eye(41, dtype=dtype)
    Y = ops.filter(V, p, cut)
    low, high = SPECTRUM
    t = (2 * x - (cut + low)) / (cut - low)
    t0 = (2 * high - (cut + low)) / (cut - low)
    coef = np.zeros(p + 1)
    coef[p] = 1.0
    expected = chebyshev.chebval(t, coef) / chebyshev.chebval(t0, coef)
    np.testing.assert_allclose(np.diag(Y), expected, atol=50 * np.finfo(dtype).eps)
    assert abs(np.diag(Y)[-1] - 1.0) < 50 * np.finfo(dtype).eps  # 1 at the top
    assert np.abs(np.diag(Y)[x <= cut]).max() <= 1.0 / chebyshev.chebval(t0, coef) + 1e-6


@pytest.mark.parametrize("cut", [-0.5, 0.0, 0.9, 0.999, 0.99999])
@pytest.mark.parametrize("growth", [1e3, 1e6])
def test_degree_keeps_the_growth_bound(cut, growth):
    p = filter_degree(cut, 64, growth)
    low, high = SPECTRUM
    t0 = (2 * high - cut - low) / (cut - low)
    assert 1 <= p <= 64
    assert math.cosh(p * math.acosh(t0)) <= growth or p == 1
    assert p == 64 or math.cosh((p + 1) * math.acosh(t0)) > growth


def test_rayleigh_ritz_of_a_known_block(rng):
    """An oblique basis of a known invariant subspace: exact Ritz pairs, zero residuals."""
    n, b = 50, 4
    Qfull, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.linspace(-0.9, 0.95, n)
    A = (Qfull * lam) @ Qfull.T
    top = Qfull[:, -b:]
    # Same span, not orthonormal: a rotation and column scales up to 6 apart.
    Y = top @ np.linalg.qr(rng.standard_normal((b, b)))[0] @ np.diag([1.0, 2.0, 0.5, 3.0])
    Z = np.hstack([Y, A @ Y])
    theta, Q, res = gram_rayleigh_ritz(Z.T @ Z, b, 2, 1e-13)
    np.testing.assert_allclose(theta, lam[::-1][:b], atol=1e-12)
    np.testing.assert_allclose((Y @ Q).T @ (Y @ Q), np.eye(b), atol=1e-10)
    assert res.shape == (2,) and res.max() < 1e-6


def test_rayleigh_ritz_drops_a_dependent_direction(rng):
    n = 40
    Y = rng.standard_normal((n, 3))
    Y = np.hstack([Y, Y[:, :1] * 2.0])  # four columns, rank three
    A = np.diag(np.linspace(-1, 1, n))
    Z = np.hstack([Y, A @ Y])
    theta, Q, _ = gram_rayleigh_ritz(Z.T @ Z, 4, 2, 1e-13)
    assert theta.shape == (3,) and Q.shape == (4, 3)
    np.testing.assert_allclose((Y @ Q).T @ (Y @ Q), np.eye(3), atol=1e-10)


# ------------------------------------------------------------------------- errors


def test_invalid_arguments_are_named(rng):
    A, *_ = rectangles(rng, [60])
    with pytest.raises(TypeError, match="A must be a scipy.sparse"):
        chebyshev_subspace(A.toarray(), 2)
    with pytest.raises(ValueError, match="square"):
        chebyshev_subspace(sp.csr_matrix((5, 6)), 2)
    with pytest.raises(TypeError, match="float32 or float64"):
        chebyshev_subspace(sp.csr_matrix(np.eye(5, dtype=np.int64)), 2)
    with pytest.raises(ValueError, match="k=60"):
        chebyshev_subspace(A, 60)
    with pytest.raises(ValueError, match="block=2"):
        chebyshev_subspace(A, 3, block=2)
    with pytest.raises(ValueError, match="tol"):
        chebyshev_subspace(A, 2, tol=0.0)
    with pytest.raises(ValueError, match="degree"):
        chebyshev_subspace(A, 2, degree=0)
    with pytest.raises(ValueError, match="max_iter"):
        chebyshev_subspace(A, 2, max_iter=0)
    with pytest.raises(ValueError, match="dtype='float16' is not allowed"):
        chebyshev_subspace(A, 2, dtype="float16")
    with pytest.raises(ValueError, match="dtype='banana' is not allowed"):
        chebyshev_subspace(A, 2, dtype="banana")
    with pytest.raises(ValueError, match="below what dtype='float32' resolves"):
        chebyshev_subspace(A, 2, tol=1e-7, dtype="float32")
    with pytest.raises(ValueError, match="layout"):
        chebyshev_subspace(A, 2, layout="diagonal")
    with pytest.raises(ValueError, match="v0 must have shape"):
        chebyshev_subspace(A, 2, v0=np.ones((59, 1)))
    with pytest.raises(ValueError, match="v0 must have shape"):
        chebyshev_subspace(A, 2, block=4, v0=np.ones((60, 5)))
    with pytest.raises(ValueError, match="non-finite"):
        chebyshev_subspace(A, 2, v0=np.full(60, np.nan))


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("dtype", [None, "float64"])
def test_cupy_matches_scipy(layout, dtype, rng):
    import cupy
    import cupyx.scipy.sparse as csp

    A, *_ = rectangles(rng, [500, 400, 300])
    tol = 1e-4 if dtype is None else 1e-7
    cpu = chebyshev_subspace(A, 4, tol=tol, random_state=0)
    gpu = chebyshev_subspace(csp.csr_matrix(A), 4, tol=tol, dtype=dtype, layout=layout,
                             random_state=0)
    assert isinstance(gpu[1], cupy.ndarray) and isinstance(gpu[0], np.ndarray)
    V = cupy.asnumpy(gpu[1])
    check_solution(A, 4, gpu[0], V, gpu[3], tol, slack=1e-6 if dtype is None else 0.0)
    assert sin_angle(V, cpu[1]) <= 4 * tol / (dense_top(A, 4)[0][-1] - dense_top(A, 4)[2])


@pytest.mark.gpu
def test_cupy_is_reproducible(rng):
    import cupy
    import cupyx.scipy.sparse as csp

    # Same seed, same answer up to rounding: cuSPARSE's SpMM may sum a row in another
    # order from one call to the next (seen on an H200: eigenvalues 8e-14 apart), so
    # bit-for-bit equality, which the CPU gives, is not promised on the GPU.
    A = csp.csr_matrix(rectangles(rng, [600, 600])[0].astype(np.float32))
    first = chebyshev_subspace(A, 3, random_state=5)
    again = chebyshev_subspace(A, 3, random_state=5)
    np.testing.assert_allclose(first[0], again[0], rtol=0, atol=1e-10)
    # The same invariant subspace (columns may rotate inside a repeated eigenvalue).
    cosines = cupy.linalg.svd(first[1].T @ again[1], compute_uv=False)
    cupy.testing.assert_allclose(cosines, cupy.ones(3), atol=1e-6)


def test_the_gap_target_applies_after_separated_clusters_only():
    floor = 1e-10
    # Two zero eigenvalues of L_sym, the next at 5e-6: the gap is the whole next
    # eigenvalue, and the target tightens to GAP_ANGLE times it.
    moons = 1.0 - np.array([0.0, 0.0, 5e-6, 5e-6, 1e-2])
    assert residual_target(1e-4, moons, 2, floor) == pytest.approx(0.05 * 5e-6)
    # k = 3 inside a bunch near 1e-3 (gaps of 2e-6, a fiftieth of a percent of the
    # eigenvalue): any split of the bunch is an answer, so tol stands.
    bunch = 1.0 - np.array([0.0, 0.0, 1e-3, 1e-3 + 2e-6, 1e-3 + 4e-6, 2e-2])
    assert residual_target(1e-4, bunch, 3, floor) == 1e-4
    # A repeated eigenvalue at k, and no Ritz value beyond k: tol.
    assert residual_target(1e-4, 1.0 - np.array([0.0, 0.0, 0.0]), 2, floor) == 1e-4
    assert residual_target(1e-4, moons[:2], 2, floor) == 1e-4


def test_k_inside_a_bunch_stops_at_tol_within_the_bunch(rng):
    # Two unit eigenvalues of A, then six within 1e-5 of 1 - 1e-3: k = 4 splits that
    # bunch. The span comes back inside the eigenspace of the two and the bunch, with
    # Ritz values from the bunch.
    n = 400
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    bunch = 1.0 - 1e-3 - 2e-6 * np.arange(6)
    mu = np.concatenate([[1.0, 1.0], bunch, np.linspace(0.95, -0.9, n - 8)])
    A = sp.csr_matrix((Q * mu) @ Q.T)
    theta, V, products, residuals = chebyshev_subspace(A, 4, tol=1e-4, random_state=0)
    assert residuals.max() <= 1e-4
    assert products <= 1000  # 4583 when the gap target applied inside the bunch
    # Davis-Kahan: the sine is at most the block's residual over the gap to the rest
    # of the spectrum (0.95 and below).
    assert sin_angle(V, Q[:, :8]) <= np.linalg.norm(residuals) / (bunch[-1] - 0.95)
    assert np.all((theta[2:] <= bunch[0] + 1e-7) & (theta[2:] >= bunch[-1] - 1e-7))


def test_a_small_gap_after_k_is_resolved_beyond_tol(rng):
    # Two unit eigenvalues and five at 1 - 5e-6 right after them: tol = 1e-4 alone
    # accepted a span tilted 0.31 (sine) towards them (measured); the gap-aware target
    # (GAP_ANGLE · gap, down to float64 resolution) brings the angle under 3°.
    n = 400
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    mu = np.concatenate([[1.0, 1.0], [1.0 - 5e-6] * 5, np.linspace(0.99, -0.9, n - 7)])
    A = sp.csr_matrix((Q * mu) @ Q.T)
    _, V, _, residuals = chebyshev_subspace(A, 2, tol=1e-4, random_state=0)
    assert residuals.max() <= 0.05 * 5e-6
    assert sin_angle(V, Q[:, :2]) <= 0.05


def test_a_small_gap_after_k_is_resolved_in_every_draw(rng):
    # The spectrum of the test above in 100 draws. The iteration is the same in any
    # eigenbasis (A = Q D Qᵀ from the block Y runs as D from Qᵀ Y, and Qᵀ Y of a
    # Gaussian Y is Gaussian), so a shuffled diagonal matrix stands for a random Q at a
    # fraction of the cost. Judging the gap on the Ritz values alone stopped 7 draws in
    # 100 here (9 in 100 with a random Q) after ~50 products, the Ritz gap 4.6e-7 at
    # residual 3e-5 taken for a degenerate one, with the span at sine ~0.9.
    n = 400
    mu = np.concatenate([[1.0, 1.0], [1.0 - 5e-6] * 5, np.linspace(0.99, -0.9, n - 7)])
    for _ in range(100):
        order = rng.permutation(n)
        A = sp.diags(mu[order]).tocsr()
        _, V, _, residuals = chebyshev_subspace(A, 2, tol=1e-4, random_state=rng.integers(2**31))
        assert residuals.max() <= 0.05 * 5e-6
        assert sin_angle(V, np.eye(n)[:, np.flatnonzero(order < 2)]) <= 0.05


def test_the_gap_is_judged_only_as_far_as_the_residuals_allow():
    floor, tol = 1e-10, 1e-4
    # Ritz values and the two wanted residuals at the early stop of the small-gap case
    # (1, 1, five at 1 - 5e-6): the Ritz gap 4.6e-7 looks degenerate, but with r_2 =
    # 3.1e-5 the eigenvalues may be 5e-6 apart; the target stays below tol until the
    # gap is resolved or shown small.
    theta = 1.0 - np.array([5.58e-7, 4.57e-6, 5.03e-6, 5.07e-6, 5.56e-6, 1.52e-4, 9.4e-4])
    residuals = np.array([2.91e-5, 3.10e-5])
    assert residual_target(tol, theta, 2, floor) == tol  # the Ritz values at face value
    assert residual_target(tol, theta, 2, floor, residuals) < 1e-6
    # Converged: the gap is 5e-6 and the target GAP_ANGLE times it.
    theta = 1.0 - np.array([0.0, 1e-12, 5e-6, 5e-6, 5e-6, 1e-2])
    target = residual_target(tol, theta, 2, floor, np.array([1e-8, 1e-8]))
    assert target == pytest.approx(0.05 * 5e-6, rel=1e-3)
    # More copies of the top eigenvalue than k: θ_{k+1} within DEGENERATE_GAP of 1 is
    # enough (no eigenvalue exceeds 1), whatever the residuals.
    copies = 1.0 - np.array([1e-9, 2e-9, 3e-8, 2e-2])
    assert residual_target(tol, copies, 2, floor, np.array([9e-5, 9e-5])) == tol
    # k inside a bunch near 1e-3: tol once r_k is below a tenth of it (less the gap),
    # the residual at which it will be judged before.
    bunch = 1.0 - np.array([0.0, 0.0, 1e-3, 1e-3 + 2e-6, 1e-3 + 4e-6, 2e-2])
    assert residual_target(tol, bunch, 3, floor, np.array([1e-6, 1e-6, 5e-5])) == tol
    target = residual_target(tol, bunch, 3, floor, np.array([1e-6, 1e-6, 3e-4]))
    assert target == pytest.approx(0.1 * (1e-3 + 2e-6) - 2e-6)
