"""Spectral embedding of a similarity graph: Laplacian, eigensolvers, eigengap.

>>> from explorer.embedding import spectral_embedding, eigengap_k
>>> emb = spectral_embedding(csr, 8)  # doctest: +SKIP
>>> k = eigengap_k(emb.eigenvalues)  # doctest: +SKIP

:func:`spectral_embedding` (module ``embed``) forms A = D^-1/2 S D^-1/2 on the
non-isolated vertices (``laplacian``), computes its k largest eigenpairs through one
interface (``solvers``: the solver choice and the defaults) and returns an
:class:`Embedding`. One module per solver family:

==============  ===================================================================
``dense``       full symmetric eigendecomposition (small graphs)
``lanczos``     ``eigsh``, implicitly restarted Lanczos (SciPy / cupyx)
``lobpcg``      block LOBPCG that stops on the wanted pairs (our own)
``chebyshev``   Chebyshev-filtered block subspace iteration (the default)
``lu``          LOBPCG preconditioned by the sparse LU of L + δI (CPU)
``multigrid``   LOBPCG preconditioned by a two-grid cycle, ``"amg"`` (CPU; "auto"'s
                choice for large graphs of points in the plane)
``components``  the component indicators, exact for a graph with exactly k components
==============  ===================================================================

``linalg`` holds the small helpers they share (Rayleigh-Ritz, SVQB, signs, unit rows);
``eigengap`` proposes k from the eigenvalues. The submodules' public names are the
lower-level API the benchmarks call (to time one solver on one A formed once).
"""

from .eigengap import (
    AUTO_K_MAX,
    EIGENGAP_TOL,
    EigengapChoice,
    auto_k_max,
    eigengap_choice,
    eigengap_k,
)
from .embed import Embedding, components_embedding, spectral_embedding
from .lanczos import ConvergenceError
from .laplacian import isolated_vertices
from .lobpcg import DEFAULT_MAX_ITER as DEFAULT_LOBPCG_MAX_ITER
from .solvers import DEFAULT_TOL, DENSE_MAX_N, SOLVERS, components_reason

__all__ = [
    "AUTO_K_MAX",
    "DEFAULT_LOBPCG_MAX_ITER",
    "DEFAULT_TOL",
    "DENSE_MAX_N",
    "EIGENGAP_TOL",
    "SOLVERS",
    "ConvergenceError",
    "EigengapChoice",
    "Embedding",
    "components_embedding",
    "components_reason",
    "auto_k_max",
    "eigengap_choice",
    "eigengap_k",
    "isolated_vertices",
    "spectral_embedding",
]
