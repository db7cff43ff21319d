"""The results the graph stage hands on: :class:`Graph` and :class:`GraphStats`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .rule import BuildOptions, EdgeRule


@dataclass
class GraphStats:
    """Sparsity statistics of an ε-neighbourhood graph (docs/architecture.md "Semantics").

    All counts exclude the diagonal, which is never stored. Arrays are NumPy, on the
    host, whatever backend computed them.

    Attributes
    ----------
    n : int
        Vertices (rows).
    nnz : int
        Stored nonzeros (each undirected edge counts twice).
    nnz_row_min, nnz_row_mean, nnz_row_max : int, float, int
        Nonzeros per row.
    nnz_row_hist : tuple of ndarray
        ``(counts, bin_edges)`` of nonzeros per row, as ``numpy.histogram`` returns.
    sparsity : float
        Percentage of the n×n entries that are zero.
    n_isolated : int
        Rows with no nonzero (they get label −1 in clustering).
    n_components : int or None
        Connected components (isolated vertices count as components); None when not
        computed (statistics estimated from a row sample).
    hypo_max_nnz_row : int
        The ELLPACK width the byte and overflow figures use: the one given, else the
        one CSR-2 ran with (a GPU build with ``method="csr2"``), else
        :attr:`suggested_hypo_max_nnz_row`. (A CSR-2 run given no width runs with
        :func:`explorer.graph.default_hypo_max_nnz_row`, not the suggestion: CSR-2
        avoids a counting pass; :attr:`Graph.options` records what ran.)
    suggested_hypo_max_nnz_row : int
        A CSR-2 width that holds most rows (see :func:`explorer.graph.suggest_hypo`).
    rows_over_hypo : int
        Rows with more nonzeros than `hypo_max_nnz_row`: CSR-2's supplementary pass
        revisits them.
    bytes_csr, bytes_dense, bytes_ellpack : int
        Memory of the matrix as float32 CSR (int32 indices and row offsets while nnz
        and n are below 2**31, int64 beyond: 8 or 12 B per nonzero), dense float32,
        and float32+int32 ELLPACK at `hypo_max_nnz_row`.
    degree_min, degree_mean, degree_max : float or None
        Weighted degrees (row sums of S), when the builder computed weights.
    estimated : bool
        True when the figures are extrapolated from a sample of rows.
    sample_rows : int or None
        How many rows the estimate used.
    """

    n: int
    nnz: int
    nnz_row_min: int
    nnz_row_mean: float
    nnz_row_max: int
    nnz_row_hist: tuple
    sparsity: float
    n_isolated: int
    n_components: int | None
    hypo_max_nnz_row: int
    suggested_hypo_max_nnz_row: int
    rows_over_hypo: int
    bytes_csr: int
    bytes_dense: int
    bytes_ellpack: int
    degree_min: float | None = None
    degree_mean: float | None = None
    degree_max: float | None = None
    estimated: bool = False
    sample_rows: int | None = None

    def to_dict(self) -> dict:
        """JSON-ready dictionary (the histogram as lists)."""
        out = asdict(self)
        counts, edges = self.nnz_row_hist
        out["nnz_row_hist"] = {
            "counts": np.asarray(counts).tolist(),
            "bin_edges": np.asarray(edges).tolist(),
        }
        return out


@dataclass
class Graph:
    """A similarity graph in canonical CSR with what it cost to build.

    Attributes
    ----------
    csr : scipy.sparse.csr_matrix or cupyx.scipy.sparse.csr_matrix
        n×n, symmetric, float32 values, no stored diagonal, column indices ascending
        in each row, int32 indices while nnz < 2**31 (int64 beyond).
    rule : EdgeRule or None
        The edge rule it was built with; None for a graph the user gave
        (``SpectralClustering(affinity="precomputed")``).
    options : BuildOptions
        The builder's knobs as they ran: a CSR-2 run records the width it used
        (given, else :func:`~explorer.graph.default_hypo_max_nnz_row`), a CSR-3 run
        the spMaxNzPct and memUseRate it used, a CSR-1/2/3 run its kernels' block
        shapes (given, else the paper's Table 4); None where the builder had no use for
        one.
    stats : GraphStats
    timings : dict of str to float
        Stage name to seconds (CUDA events on the GPU).
    backend : {"gpu", "cpu"}
    method : str
        The builder that ran (``"csr1"``, ``"kdtree"``, ...).
    method_reason : str
        Why that builder (what ``method="auto"`` saw), or ``"asked for"``.
    info : dict
        What the builder reports about its run (GPU: block shapes, hypo, chunks...;
        CPU: candidate pairs examined).
    """

    csr: object
    rule: EdgeRule | None
    stats: GraphStats
    options: BuildOptions = field(default_factory=BuildOptions)
    timings: dict = field(default_factory=dict)
    backend: str = "cpu"
    method: str = ""
    method_reason: str = ""
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.csr.shape[0]

    @property
    def nnz(self) -> int:
        return int(self.csr.nnz)
