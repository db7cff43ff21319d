"""CSR-3's spMaxNzPct when the user gives none: estimated on the device.

The defaults that need no data (CSR-2's width, memUseRate) are in
:mod:`explorer.graph.rule`; this one counts rows on the GPU, so it lives here. Imports
CuPy.
"""

from __future__ import annotations

import math

import numpy as np

from ._gpu_count import count_rows_gpu
from .rule import EdgeRule

#: Rows counted to size CSR-3's arrays when sp_max_nz_pct is not given.
SPP_SAMPLE_ROWS = 1024


def default_sp_max_nz_pct(X, params: EdgeRule) -> tuple[float, float]:
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
