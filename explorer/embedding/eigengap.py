"""The eigengap heuristic: a number of clusters read off the Laplacian spectrum.

With ``n_clusters="auto"``, :func:`explorer.partition_graph` embeds with
:func:`auto_k_max` eigenpairs, solved to :data:`EIGENGAP_TOL`, and :func:`eigengap_k`
picks k among them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._backend import to_numpy
from .._validation import check_float, check_int

__all__ = ["AUTO_K_MAX", "EIGENGAP_TOL", "NEAR_ZERO_RATIO", "EigengapChoice", "auto_k_max",
           "eigengap_choice", "eigengap_k"]

#: Tolerance for a solve whose eigenvalues choose k (``n_clusters="auto"``) when the
#: user gave none. A "zero" eigenvalue comes out near tol²/gap: on Syn1M (gap 2e-3)
#: the Chebyshev solver's default 1e-4 left zeros up to 2.1e-6, above
#: :func:`eigengap_k`'s zero test (1e-6), which could count too few components;
#: 1e-5 keeps them below 1e-7 for about 15 % more products.
EIGENGAP_TOL = 1e-5

#: Upper bound on the eigenpairs ``n_clusters="auto"`` computes before the eigengap
#: heuristic picks k among them.
AUTO_K_MAX = 20

#: A jump λ_{k+1} / λ_k of at least this (an order of magnitude), with λ_k above zero,
#: marks k nearly disconnected pieces. Measured on connected ε-graphs of moons and
#: circles (1,500 points, 40 draws per radius): inside one elongated piece the
#: ratios follow the path's j² law and stay below 4; two moons joined by a few edges
#: give λ_3 / λ_2 from 9 to 335.
NEAR_ZERO_RATIO = 10.0


class EigengapChoice(NamedTuple):
    """What :func:`eigengap_choice` proposes, and which of its rules decided."""

    #: The proposed number of clusters.
    k: int
    #: ``"components"`` (rule 1), ``"ratio"`` (rule 2), ``"gap"`` (rule 3), or
    #: ``"single"`` (one eigenvalue, or no visible gap: k_max).
    rule: str
    #: Eigenvalues at or below `zero_tol`.
    zeros: int
    #: The `zero_tol` the eigenvalues were compared with.
    zero_tol: float
    #: λ_{k+1} / λ_k under rule 2, else None.
    ratio: float | None = None

    def describe(self) -> str:
        """Which rule decided k, in a sentence (the app's spectrum view shows it)."""
        if self.rule == "components":
            return (f"{self.zeros} eigenvalues are 0 (≤ {self.zero_tol:g}): the graph, "
                    f"isolated points left out, has {self.zeros} connected components, "
                    "and a disconnection decides k")
        if self.rule == "ratio":
            return (f"λ_{self.k + 1} is {self.ratio:.0f} times λ_{self.k} (a jump of "
                    f"{NEAR_ZERO_RATIO:g} or more): {self.k} pieces joined by only a few "
                    "edges decide k")
        if self.rule == "gap":
            return "the largest gap λ_(k+1) − λ_k decides k"
        return "no gap stands out: k is the number of eigenvalues computed"


def eigengap_k(eigenvalues, k_max=None, *, zero_tol=1e-6, atol=1e-8) -> int:
    """Propose a number of clusters from the eigengap of the Laplacian spectrum:
    ``eigengap_choice(...).k``.

    See :func:`eigengap_choice` for the rules, the parameters and the errors.
    """
    return eigengap_choice(eigenvalues, k_max, zero_tol=zero_tol, atol=atol).k


def eigengap_choice(eigenvalues, k_max=None, *, zero_tol=1e-6, atol=1e-8) -> EigengapChoice:
    """Propose a number of clusters from the eigengap of the Laplacian spectrum, and
    say which rule decided.

    With the eigenvalues of L_sym sorted ascending, λ_1 <= λ_2 <= ..., and only the
    first `k_max` considered:

    1. If at least two of them are zero (<= `zero_tol`), the graph has that many
       connected components (outside its isolated vertices) and k is their count z:
       a gap from exactly 0 to a positive λ_{z+1} is infinite in relative terms, and
       no absolute comparison with later gaps should override a disconnection.
    2. Otherwise, if some k >= 2 with λ_k above `zero_tol` has
       λ_{k+1} / λ_k >= :data:`NEAR_ZERO_RATIO`, k is the one with the largest such
       ratio: k pieces joined by a few edges (a cut far cheaper than any cut inside a
       piece) give k eigenvalues an order of magnitude below the next one. This is
       rule 1 for graphs that are connected, but only just.
    3. Otherwise k is the index of the largest gap λ_{k+1} - λ_k (von Luxburg's
       eigengap heuristic: k well-separated clusters give k eigenvalues near 0 and a
       jump after them).

    Parameters
    ----------
    eigenvalues : array-like of shape (m,)
        Eigenvalues of L_sym (any order; NumPy or CuPy).
    k_max : int, optional
        Consider only the `k_max` smallest eigenvalues, 1 <= k_max <= m; default m.
    zero_tol : float, default 1e-6
        Eigenvalues at or below this are zero. A solve at tolerance
        :data:`EIGENGAP_TOL` returns zero eigenvalues below 1e-7 (their error is about
        the squared residual over the gap), while the smallest nonzero eigenvalue of
        an ε-graph on a few hundred thousand points is still above 1e-5.
    atol : float, default 1e-8
        Gaps within `atol` of the largest count as equally large.

    Returns
    -------
    EigengapChoice
        k in [1, k_max] and the rule. Under rule 3, ties go to the smallest k; when
        every gap is within `atol` of zero the answer is `k_max`. A single eigenvalue
        gives 1.

    Raises
    ------
    ValueError
        If `eigenvalues` is empty, not 1-D or not finite, or an argument is out of
        range.

    Notes
    -----
    Rules 1 and 2 matter on elongated clusters (moons, circles): their ε-graphs are
    path-like, with eigenvalues growing like j² inside each cluster, so later gaps
    outgrow the first one and rule 3 alone would pick a large k (10 to 18 of 20 on
    two moons joined by a few edges) even when every cluster is its own component.
    """
    lam = np.asarray(to_numpy(eigenvalues), dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError(f"eigenvalues must be a non-empty 1-D array; got shape {tuple(lam.shape)}")
    if not np.isfinite(lam).all():
        raise ValueError("eigenvalues must be finite; got NaN or inf")
    k_max = check_int(k_max, "k_max", low=1, high=lam.size, allow_none=True) or lam.size
    zero_tol = check_float(zero_tol, "zero_tol", low=0.0)
    atol = check_float(atol, "atol", low=0.0)
    lam = np.sort(lam)[:k_max]
    zeros = int(np.count_nonzero(lam <= zero_tol))
    if zeros >= 2:
        return EigengapChoice(zeros, "components", zeros, zero_tol)
    if lam.size == 1:
        return EigengapChoice(1, "single", zeros, zero_tol)
    # Rule 2: ratios λ_{k+1} / λ_k for k >= 2 (index k-1 >= 1) with λ_k above zero.
    below, above = lam[1:-1], lam[2:]
    ratios = np.where(below > zero_tol, above / np.maximum(below, zero_tol), 0.0)
    if ratios.size and ratios.max() >= NEAR_ZERO_RATIO:
        best = int(np.argmax(ratios))
        return EigengapChoice(best + 2, "ratio", zeros, zero_tol, float(ratios[best]))
    gaps = np.diff(lam)
    best = float(gaps.max())
    if best <= atol:
        return EigengapChoice(int(lam.size), "single", zeros, zero_tol)
    return EigengapChoice(int(np.flatnonzero(gaps >= best - atol)[0]) + 1, "gap", zeros,
                          zero_tol)


def auto_k_max(n_vertices: int) -> int:
    """How many eigenpairs ``n_clusters="auto"`` computes: ``min(20, n_vertices)``."""
    return max(1, min(AUTO_K_MAX, int(n_vertices)))
