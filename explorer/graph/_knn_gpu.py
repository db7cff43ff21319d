"""The GPU kNN search behind :mod:`explorer.graph.knn` (imported on a GPU run only).

``"grid"`` for distance rules up to :data:`GRID_KNN_MAX_D` features (cells over at
most three of them), ``"gemm"`` otherwise (fp16 or TF32 tensor-core tiles, float64
re-check of the candidates and of the rows their rounding leaves open); both exact, see
:mod:`explorer.kernels.knn`.
"""

from __future__ import annotations

from ..kernels import StageTimer
from ..kernels import knn as knn_kernels
from .rule import EdgeRule

#: ``method="auto"`` takes the grid for distance rules up to this d.
GRID_KNN_MAX_D = 8


def choose_knn_method_gpu(n: int, d: int, rule: EdgeRule) -> tuple[str, str]:
    """``method="auto"`` for a kNN search on the GPU, and why."""
    if rule.compares == "sqdist" and d <= GRID_KNN_MAX_D:
        return "grid", (f"GPU backend, n={n}, d={d}, distance rule: a grid of cells searched "
                        f"ring by ring finds the k nearest without all n² pairs (taken for "
                        f"d <= {GRID_KNN_MAX_D})")
    why = "cosine" if rule.compares == "cosine" else f"d={d} > {GRID_KNN_MAX_D}"
    return "gemm", (f"GPU backend, n={n}, d={d}, {why}: fp16 (or TF32) tensor-core "
                    "similarity tiles, per-row top-k, float64 re-check (exact)")


def knn_search_gpu(X, rule: EdgeRule, k: int, method: str):
    """Each point's `k` nearest other points on the GPU (see :func:`explorer.graph.knn.
    knn_search`); `X` a C-contiguous CuPy float32 array."""
    n = X.shape[0]
    k = min(int(k), n - 1)
    timer = StageTimer()
    if method == "grid":
        if rule.compares != "sqdist":
            raise ValueError(f"method='grid' serves distance rules only; got metric="
                             f"{rule.metric!r}: use method='gemm' or 'auto'")
        nbr, val, info = knn_kernels.knn_grid(X, k, timer=timer)
    else:
        nbr, val, info = knn_kernels.knn_gemm(X, k, rule.compares == "cosine", timer=timer)
    info = dict(info)
    info["stages"] = timer.seconds()
    return nbr, val, info
