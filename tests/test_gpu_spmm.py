"""The warp-per-row block product (kernels/spmm.cu) against SciPy in float64: every
supported block width, both value and index types, odd shapes, empty rows, rows far
longer than a warp, duplicates left in; the output buffer poisoned first."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytestmark = pytest.mark.gpu


def random_csr(rng, n, m, density, empty_fraction=0.2):
    """A random n × m CSR (float64) with empty rows, a few rows of ~300 entries and,
    where there are entries, one duplicated entry left uncombined."""
    A = sp.random(n, m, density=density, format="lil", dtype=np.float64,
                  random_state=np.random.RandomState(int(rng.integers(2**31))))
    for row in rng.choice(n, size=min(n, 3), replace=False):
        A[row, rng.choice(m, size=min(m, 300), replace=False)] = 1.0
    A = sp.csr_matrix(A)
    A.data = rng.standard_normal(A.nnz)
    keep = (rng.random(n) >= empty_fraction).astype(np.float64)
    A = sp.csr_matrix(sp.diags(keep) @ A)
    A.eliminate_zeros()
    if A.nnz:  # a duplicate: the same column twice in row 0's place of the first entry
        first = int(np.searchsorted(A.indptr, 0, side="right")) - 1
        indices = np.insert(A.indices, 0, A.indices[0])
        data = np.insert(A.data, 0, 0.5)
        indptr = A.indptr.copy()
        indptr[first + 1:] += 1
        A = sp.csr_matrix((data, indices, indptr), shape=A.shape)
    return A


def on_device(A, value, index):
    import cupy

    from explorer._csr import csr_from_arrays

    return csr_from_arrays(cupy.asarray(A.data, dtype=value),
                           cupy.asarray(A.indices, dtype=index),
                           cupy.asarray(A.indptr, dtype=index), A.shape, canonical=False)


@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("value", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "m", "density"), [(1, 1, 1.0), (257, 300, 0.05),
                                                 (3001, 2000, 0.01), (500, 40, 0.0)])
def test_block_product_equals_float64(rng, n, m, density, value, index):
    import cupy
    from explorer.kernels import spmm

    A = random_csr(rng, n, m, density)
    dA = on_device(A, value, index)
    for b in (8, 9, 15, 16, 17, 31, 32):
        Y = rng.standard_normal((m, b))
        want = A @ Y
        out = cupy.full((n, b), np.nan, dtype=value)  # poisoned: every entry is written
        got = spmm.csr_times_block(dA, cupy.asarray(Y, dtype=value), out=out)
        assert got is out and got.flags.c_contiguous
        got = cupy.asnumpy(got)
        assert np.isfinite(got).all()
        # float32: each product rounds to ~6e-8 relative; a row sums up to ~300 of them.
        scale = abs(A) @ abs(Y)
        tol = 2e-5 if value == np.float32 else 1e-13
        np.testing.assert_array_less(np.abs(got - want), tol * (scale + 1e-30) + 1e-30)


def test_a_column_major_block_is_read_as_given(rng):
    import cupy
    from explorer.kernels import spmm

    A = random_csr(rng, 600, 600, 0.02)
    Y = rng.standard_normal((600, 12))
    got = spmm.csr_times_block(on_device(A, np.float64, np.int32),
                               cupy.asfortranarray(cupy.asarray(Y)))
    np.testing.assert_allclose(cupy.asnumpy(got), A @ Y, rtol=1e-12, atol=1e-12)


def test_what_it_refuses_is_named():
    import cupy
    from explorer.kernels import spmm

    A = on_device(sp.identity(40, format="csr"), np.float32, np.int32)
    for b in (4, 33):
        Y = cupy.ones((40, b), dtype=np.float32)
        assert not spmm.supports(A, Y)
        with pytest.raises(ValueError, match=f"got A float32 .* of shape \\(40, {b}\\)"):
            spmm.csr_times_block(A, Y)
    assert not spmm.supports(A, cupy.ones((40, 8), dtype=np.float64))
    with pytest.raises(ValueError, match="A is 40 × 40 but Y has 39 rows"):
        spmm.csr_times_block(A, cupy.ones((39, 8), dtype=np.float32))
    with pytest.raises(ValueError, match=r"out must be a C-contiguous \(40, 8\) float32"):
        spmm.csr_times_block(A, cupy.ones((40, 8), dtype=np.float32),
                             out=cupy.empty((40, 8), dtype=np.float32, order="F"))


@pytest.mark.parametrize("layout", ["row", "col"])
def test_chebyshev_products_take_the_kernel_in_row_layout(rng, layout):
    # The same eigenpairs whichever product ran: the kernel (row) or cuSPARSE (col).
    import cupy
    import cupyx.scipy.sparse as csp

    from explorer.embedding.chebyshev import ChebyshevBlock, chebyshev_subspace

    S = sp.random(2000, 2000, density=0.01, random_state=int(rng.integers(2**31)))
    S = S + S.T + sp.identity(2000)
    d = 1 / np.sqrt(np.asarray(S.sum(axis=1)).ravel())
    A = sp.csr_matrix(sp.diags(d) @ S @ sp.diags(d))
    ops = ChebyshevBlock(csp.csr_matrix(A), cupy, np.dtype(np.float32), layout, 0)
    Y = ops.random(2000, 8)
    out = ops.product(Y)
    assert out.flags.c_contiguous == (layout == "row")
    np.testing.assert_allclose(cupy.asnumpy(out), A @ cupy.asnumpy(Y).astype(np.float64),
                               atol=1e-5)
    mu, V, _, res = chebyshev_subspace(csp.csr_matrix(A), 4, random_state=0, layout=layout)
    spectrum = np.sort(np.linalg.eigvalsh(A.toarray()))[::-1]
    assert res.max() <= 1e-4
    # An eigenvalue's error is at most the squared residual over its gap to the rest.
    gap = float(np.min(-np.diff(spectrum[:5])))
    np.testing.assert_allclose(mu, spectrum[:4], atol=max(res.max() ** 2 / gap, 1e-9))
