"""The components eigensolver: exact eigenvectors for a graph with exactly k components.

When the graph (its non-isolated vertices) has exactly k connected components, the k
largest eigenvalues of A = D^-1/2 S D^-1/2 are 1 and the vectors D^1/2 1_c of the
components c span their eigenspace: no iteration is needed, whatever the gap to the
next eigenvalue. The labelling itself is :func:`explorer.components.component_labels`.
"""

from __future__ import annotations

from ..components import component_labels

__all__ = ["indicator_eigenpairs"]


def indicator_eigenpairs(A, k, degree, xp):
    """The eigenpairs of eigenvalue 1 of A when its graph has exactly k components.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse CSR matrix of shape (m, m)
        A = D^-1/2 S D^-1/2 on the non-isolated vertices.
    k : int
        Number of eigenpairs, which must be the number of components.
    degree : float64 ndarray of shape (m,)
        The degrees of A's vertices (the row sums of S), on A's device.
    xp : module
        The array module of `A`.

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
        All 1 (float64, on A's device).
    V : ndarray of shape (m, k)
        Column c is D^1/2 times the indicator of component c, components in the order
        of their first vertex (not normalised: the caller scales columns to unit norm).

    Raises
    ------
    ValueError
        If the graph of A does not have exactly k connected components.

    Notes
    -----
    An iterative solver must instead separate the zeros of L_sym from its next
    eigenvalues, which on path-like clusters lie within 10⁻⁶ of them: on two moons of
    10⁶ points Chebyshev stopped at its tolerance with the vectors mixed (ARI 0.37,
    benchmarks/README.md).
    """
    return indicator_vectors(component_labels(A), k, degree, xp)


def indicator_vectors(labels, k, degree, xp):
    """:func:`indicator_eigenpairs` from the component label of each of A's vertices
    (columns in ascending label order), however the labels were found.

    Raises
    ------
    ValueError
        If `labels` do not hold exactly k components.
    """
    found, column = xp.unique(labels, return_inverse=True)
    n_found = int(found.shape[0])
    if n_found != k:
        raise ValueError(
            f"solver='components' needs exactly n_components={k} connected components "
            f"among the non-isolated vertices, the graph has {n_found}; use another solver"
        )
    m = labels.shape[0]
    V = xp.zeros((m, k), dtype=xp.float64)
    V[xp.arange(m), column.ravel()] = xp.sqrt(degree)
    return xp.ones(k, dtype=xp.float64), V
