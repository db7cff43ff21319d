"""The GPU graph builders, public: what :func:`explorer.build_graph` runs on a CUDA device.

Use this module to run or time one builder without the statistics
:func:`explorer.build_graph` adds (the benchmarks do), to count rows on the device, or
to see what ``method="auto"`` would pick. Importing it imports CuPy.

- :func:`build_gpu`: one build, ``(csr, timings, info)``; :data:`GPU_METHODS`,
  :data:`PAPER_METHODS`.
- :func:`build_rows_gpu`: rows ``r0:r1`` of the graph of all points (grid or gemm,
  :data:`ROW_METHODS`), the distributed build's row block; :func:`choose_rows_method`
  picks its builder.
- :func:`count_rows_gpu`, :func:`count_rows_paper`: nonzeros and weighted degrees per
  row without the matrix.
- :func:`choose_method`, :func:`paper_choice`: ``method="auto"`` and the paper's advice.
- :func:`default_sp_max_nz_pct`: CSR-3's spMaxNzPct from a device count (the other
  defaults are in :mod:`explorer.graph.rule`).
- :func:`kernel_rule`: the edge rule as the launchers of :mod:`explorer.kernels` take
  it (for calling them directly).
"""

from ._gpu_build import GPU_METHODS, PAPER_METHODS, ROW_METHODS, build_gpu, build_rows_gpu
from ._gpu_choice import choose_method, choose_rows_method, paper_choice
from ._gpu_count import count_rows_gpu, count_rows_paper
from ._gpu_defaults import default_sp_max_nz_pct
from ._gpu_rule import kernel_rule

__all__ = [
    "GPU_METHODS",
    "PAPER_METHODS",
    "ROW_METHODS",
    "build_gpu",
    "build_rows_gpu",
    "choose_method",
    "choose_rows_method",
    "count_rows_gpu",
    "count_rows_paper",
    "default_sp_max_nz_pct",
    "kernel_rule",
    "paper_choice",
]
