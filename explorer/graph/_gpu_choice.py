"""``method="auto"`` on the GPU: which builder, and why (no CuPy needed).

Every method gives the same graph; only time differs.
"""

from __future__ import annotations

from .rule import EdgeRule

#: "Large d" in the paper's method advice (sect. 4.6: "hundreds of dimensions").
LARGE_D = 100

#: Distance rules up to this many features go through the uniform grid: 3^min(d, 4)
#: neighbouring cells stay a small part of the data (docs/fast-builders.md). The live
#: statistics count rows through the grid under the same condition.
GRID_D = 8

#: From this many features a pair costs enough multiply-adds that tensor-core tiles
#: with an exact re-check beat the paper's per-pair kernels (benchmarks/README.md,
#: "The fast path").
GEMM_D = 32


def uses_grid(d: int, params: EdgeRule) -> bool:
    """Whether a rule on `d` features goes through the uniform grid (build and count)."""
    return params.compares == "sqdist" and d <= GRID_D


def choose_method(n: int, d: int, params: EdgeRule) -> tuple[str, str]:
    """The method for ``method="auto"``, and why.

    Beyond the paper first: low-d distance rules need only neighbouring cells (grid,
    O(n · neighbours)); many features make a pair a dot product, which tensor cores
    compute far faster than per-pair kernels (gemm). Between the two, the paper's advice
    (:func:`paper_choice`).
    """
    if uses_grid(d, params):
        return "grid", (
            f"GPU, n={n}, d={d} <= {GRID_D}, distance threshold: uniform grid of cell side ε, "
            "O(n · neighbours) instead of n² pairs"
        )
    if d >= GEMM_D:
        return "gemm", (
            f"GPU, n={n}, d={d} >= {GEMM_D}: tensor-core similarity tiles with an exact "
            "float32 re-check near the threshold"
        )
    return paper_choice(n, d)


def paper_choice(n: int, d: int) -> tuple[str, str]:
    """The paper's advice among CSR-1/2/3 (sect. 4.6).

    Many dimensions (d >= 100; "hundreds of dimensions may be regarded as large d") make
    each similarity expensive: CSR-3 computes each pair once (n²) and was the fastest on
    every MNIST set (Table 5). Otherwise CSR-2: fewer similarities than CSR-1 and far
    fewer memory accesses than CSR-3, the fastest on the 4-D million-point sets.
    """
    if d >= LARGE_D:
        return "csr3", (
            f"GPU, d={d} >= {LARGE_D}: CSR-3 evaluates each pair once, best when "
            "similarities are expensive (paper sect. 4.6)"
        )
    return "csr2", (
        f"GPU, n={n}, d={d}: CSR-2 evaluates n² to 2n² cheap pairs with the fewest memory "
        "accesses (paper sect. 4.6)"
    )


def choose_rows_method(n: int, d: int, params: EdgeRule) -> tuple[str, str]:
    """The builder of a row block of the graph on a GPU, and why (no CuPy needed).

    ``"grid"`` for distance rules with d <= :data:`GRID_D`, ``"gemm"`` for d >=
    :data:`GEMM_D`; between the two (and for cosine rules below :data:`GEMM_D`) no
    GPU builder takes a range of rows (the paper's CSR kernels build all rows at
    once), so the CPU's choice (``"kdtree"`` or ``"bruteforce"``, on the worker's host)
    is returned, with the reason saying so.
    """
    if uses_grid(d, params):
        return "grid", (
            f"GPU row block, n={n}, d={d} <= {GRID_D}, distance threshold: uniform grid of "
            "all points, the block's rows counted and filled"
        )
    if d >= GEMM_D:
        return "gemm", (
            f"GPU row block, n={n}, d={d} >= {GEMM_D}: tensor-core tiles of the block's rows "
            "against all points with an exact float32 re-check"
        )
    from ._cpu import choose_method as cpu_choice

    method, why = cpu_choice(n, d, params)
    rule = "cosine rule" if params.compares == "cosine" else "distance rule"
    return method, (
        f"on the worker's host, not its GPU: for a {rule} with d={d} no GPU builder takes "
        f"a range of rows (grid: distance rules with d <= {GRID_D}; gemm: d >= {GEMM_D}); "
        f"{why}"
    )
