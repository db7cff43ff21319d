"""The GPU builders' parameters when the user gives none: the paper's settings.

The default ``hypo_max_nnz_row`` is computed by :func:`default_hypo` and nowhere else
(the GPU build resolves it once, for the preflight and for CSR-2). Imports CuPy.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels import csr as kcsr
from ._gpu_count import count_rows_gpu
from ._params import GraphParams

#: memUseRate when not given: the paper's best on every benchmark (sect. 6.3.3).
DEFAULT_MEM_USE_RATE = 0.8

#: hypoMaxNnzRow when not given, by dimension: the smallest widths of the paper's runs
#: (Table 5: 16-64 on the 4-D sets, 512-2048 on MNIST). CSR-2 exists to avoid a counting
#: pass, so the default is a constant, not a count; rows past it go to supPass.
DEFAULT_HYPO_LOW_D = 32
DEFAULT_HYPO_HIGH_D = 512

#: Rows counted to size CSR-3's arrays when sp_max_nz_pct is not given.
SPP_SAMPLE_ROWS = 1024


def default_hypo(d: int) -> int:
    """CSR-2's width when none is given: :data:`DEFAULT_HYPO_HIGH_D` from Table 4's
    MNIST dimensions on (d >= :data:`explorer.kernels.csr.HIGH_D`), else
    :data:`DEFAULT_HYPO_LOW_D`."""
    return DEFAULT_HYPO_HIGH_D if d >= kcsr.HIGH_D else DEFAULT_HYPO_LOW_D


def default_sp_max_nz_pct(X, params: GraphParams) -> tuple[float, float]:
    """CSR-3's spMaxNzPct when none is given, and the density estimate it came from.

    The paper sets spMaxNzPct to a round bound a little above the true density (Table 2
    against Table 3: 1% for MNIST at 0.2-0.42%, 0.01% for Syn1M at 0.0023%, 0.001% for
    Syn5M at 0.0006%). The same rule here: estimate the density from the counting pass on
    :data:`SPP_SAMPLE_ROWS` evenly spaced rows (a 1024 × n pass, milliseconds), take 1.5
    times it (at least one nonzero per row), and round up to a power of ten.
    """
    n = X.shape[0]
    rows = np.unique(np.linspace(0, n - 1, min(n, SPP_SAMPLE_ROWS)).astype(np.int64))
    counts, _ = count_rows_gpu(X, params, rows)
    density = max(1.5 * float(counts.mean()) / n, 1.0 / n)
    return min(100.0, 10.0 ** math.ceil(math.log10(100.0 * density))), 100.0 * density / 1.5
