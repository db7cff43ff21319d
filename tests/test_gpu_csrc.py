"""The CSRC kernels (kernels/csrc.cu, csrc_nearest.cu) against NumPy float64: the layout
built from CSR, ``A @ X`` and ``A.T @ U`` from the same stored arrays at every width and
in both transposed variants (odd shapes, empty rows, explicit zeros), and the selection
of the nearest landmarks; every output buffer poisoned first."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytestmark = pytest.mark.gpu


def random_csr(rng, n, p, density, empty_fraction=0.2):
    """A random n × p CSR (float32) with empty rows and a few explicit zeros."""
    A = sp.random(n, p, density=density, format="csr", dtype=np.float64,
                  random_state=np.random.RandomState(int(rng.integers(2**31))))
    A.data = rng.standard_normal(A.nnz)
    empty = rng.random(n) < empty_fraction
    A = sp.diags((~empty).astype(np.float64)) @ A
    A = sp.csr_matrix(A)
    A.eliminate_zeros()
    A.sort_indices()
    if A.nnz:
        A.data[rng.random(A.nnz) < 0.05] = 0.0  # explicit zeros stay entries
    return A.astype(np.float32)


def to_csrc(A):
    import cupy
    from explorer.kernels import csrc

    return csrc.from_csr(cupy.asarray(A.indptr), cupy.asarray(A.indices),
                         cupy.asarray(A.data), A.shape)


SHAPES = [(1, 1, 1.0), (255, 3, 0.5), (256, 17, 0.2), (257, 1000, 0.01), (3001, 64, 0.08),
          (1000, 5, 0.0)]


@pytest.mark.parametrize(("n", "p", "density"), SHAPES)
def test_layout_from_csr(n, p, density, rng, poisoned):
    import cupy
    from explorer.kernels import csrc

    A = random_csr(rng, n, p, density)
    M = to_csrc(A)
    assert M.shape == (n, p) and M.nnz == A.nnz
    assert M.blockptr.dtype == cupy.int64 and M.roff.dtype == cupy.uint8
    assert M.col.dtype == cupy.int32 and M.val.dtype == cupy.float32
    ptr = cupy.asnumpy(M.blockptr)
    starts = np.minimum(np.arange(0, -(-n // csrc.ROWS) + 1) * csrc.ROWS, n)
    np.testing.assert_array_equal(ptr, A.indptr[starts])
    roff, col, val = (cupy.asnumpy(a) for a in (M.roff, M.col, M.val))
    back = np.zeros((n, p))
    for g in range(len(ptr) - 1):
        block = slice(ptr[g], ptr[g + 1])
        assert np.all(np.diff(col[block]) >= 0)  # sorted by column inside the block
        np.add.at(back, (g * csrc.ROWS + roff[block].astype(np.int64), col[block]), val[block])
    np.testing.assert_array_equal(back, A.toarray())
    assert M.nbytes == csrc.csrc_nbytes(n, A.nnz)


@pytest.mark.parametrize(("n", "p", "density"), SHAPES)
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 32, 64])
def test_products_match_float64(n, p, density, width, rng, poisoned):
    import cupy
    from explorer.kernels import csrc

    A = random_csr(rng, n, p, density)
    M = to_csrc(A)
    A64 = A.astype(np.float64)
    X = rng.standard_normal((p, width)).astype(np.float32)
    U = rng.standard_normal((n, width)).astype(np.float32)
    Y = cupy.asnumpy(csrc.spmm(M, cupy.asarray(X)))
    want = A64 @ X.astype(np.float64)
    scale = np.abs(A64) @ np.abs(X.astype(np.float64))
    assert Y.shape == (n, width) and np.isfinite(Y).all()  # every row written (poisoned)
    assert np.all(np.abs(Y - want) <= 1e-5 * scale + 1e-30)
    wantT = A64.T @ U.astype(np.float64)
    scaleT = np.abs(A64.T) @ np.abs(U.astype(np.float64))
    fits = p * width * 4 <= csrc.SHARED_RESULT_MAX_BYTES
    variants = ["auto", "runs"] + (["shared"] if fits else [])
    for variant in variants:
        W = cupy.asnumpy(csrc.spmm_t(M, cupy.asarray(U), variant))
        assert W.shape == (p, width) and np.isfinite(W).all()
        bound = 1e-5 * scaleT + 1e-30
        assert np.all(np.abs(W - wantT) <= bound), variant


def test_transposed_variants_and_bad_operands(rng):
    import cupy
    from explorer.kernels import csrc

    assert csrc.transposed_variant(1000, 16) == "runs"
    assert csrc.transposed_variant(1000, 16, "shared") == "shared"
    with pytest.raises(ValueError, match="variant='shared' needs"):
        csrc.transposed_variant(10**5, 8, "shared")
    with pytest.raises(ValueError, match="variant='fast' is not allowed"):
        csrc.transposed_variant(10, 8, "fast")
    M = to_csrc(random_csr(rng, 40, 7, 0.3))
    with pytest.raises(ValueError, match=r"X has shape \(7, 3\).*pad the columns"):
        csrc.spmm(M, cupy.zeros((7, 3), dtype=cupy.float32))
    with pytest.raises(ValueError, match=r"U has shape \(39, 4\)"):
        csrc.spmm_t(M, cupy.zeros((39, 4), dtype=cupy.float32))
    with pytest.raises(TypeError, match="X must be a 2-D CuPy float32 array"):
        csrc.spmm(M, np.zeros((7, 4), dtype=np.float32))


def reference_select(G, a, b, scale, r):
    keys = a.astype(np.float64)[:, None] + b.astype(np.float64)[None, :] \
        + scale * G.astype(np.float64)
    keys = np.where(np.isnan(keys), np.inf, keys)
    return keys, np.argsort(keys, axis=1, kind="stable")[:, :r]


@pytest.mark.parametrize(("m", "p", "r"), [(1, 1, 1), (77, 5, 5), (300, 33, 7),
                                           (1000, 1000, 5), (129, 700, 32)])
def test_nearest_landmarks_match_float64(m, p, r, rng, poisoned):
    import cupy
    from explorer.kernels import csrc

    G = rng.standard_normal((m, p)).astype(np.float32)
    a = rng.uniform(0, 3, m).astype(np.float32)
    b = rng.uniform(0, 3, p).astype(np.float32)
    idx, key = csrc.nearest_landmarks(cupy.asarray(G), cupy.asarray(a), cupy.asarray(b),
                                      -2.0, r)
    idx, key = cupy.asnumpy(idx), cupy.asnumpy(key)
    keys, best = reference_select(G, a, b, -2.0, r)
    rows = np.arange(m)[:, None]
    assert idx.dtype == np.int32 and idx.min() >= 0 and idx.max() < p
    chosen = keys[rows, idx]
    sorted_keys = np.sort(keys, axis=1)
    tol = 1e-5 * (1 + np.abs(sorted_keys[:, :r]).max(axis=1, keepdims=True))
    np.testing.assert_allclose(key, chosen, rtol=0, atol=float(tol.max()))
    assert np.all(np.abs(chosen - sorted_keys[:, :r]) <= 2 * tol)  # the r best, in order
    if p > r:
        clear = (sorted_keys[:, r] - sorted_keys[:, r - 1] > 4 * tol[:, 0])
        np.testing.assert_array_equal(np.sort(idx[clear], 1), np.sort(best[clear], 1))


def test_nearest_landmarks_ties_and_nan(poisoned):
    import cupy
    from explorer.kernels import csrc

    m, p, r = 5, 70, 4
    G = np.zeros((m, p), dtype=np.float32)
    G[1, :] = np.nan
    G[1, [3, 60]] = 0.0  # only two comparable landmarks
    G[2, [65, 9, 40]] = 1.0  # three tied best (scale -1): lower columns first
    idx, key = csrc.nearest_landmarks(cupy.asarray(G), cupy.zeros(m, cupy.float32),
                                      cupy.zeros(p, cupy.float32), -1.0, r)
    idx, key = cupy.asnumpy(idx), cupy.asnumpy(key)
    np.testing.assert_array_equal(idx[0], [0, 1, 2, 3])  # all tied: the first columns
    np.testing.assert_array_equal(idx[1], [3, 60, -1, -1])
    assert np.isinf(key[1, 2:]).all()
    np.testing.assert_array_equal(idx[2], [9, 40, 65, 0])
    np.testing.assert_array_equal(key[2], [-1, -1, -1, 0])
