"""A run's result as files: labels (CSV), the graph (NPZ), the whole result (JSON)."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import scipy.sparse as sp

import explorer


def labels_csv(result) -> bytes:
    """One row per point: ``index,spectral[,kmeans][,truth]``; −1 marks isolated points."""
    columns = {"index": np.arange(result.n), "spectral": result.labels}
    if result.kmeans_labels is not None:
        columns["kmeans"] = result.kmeans_labels
    if result.y_true is not None:
        columns["truth"] = np.asarray(result.y_true)
    # pandas writes integers several times faster than numpy.savetxt (5M rows: seconds).
    frame = pd.DataFrame({k: np.asarray(v, dtype=np.int64) for k, v in columns.items()})
    return frame.to_csv(index=False, lineterminator="\n").encode()


def graph_npz(result) -> bytes:
    """The similarity matrix S in SciPy's ``.npz`` format (``scipy.sparse.load_npz``)."""
    out = io.BytesIO()
    sp.save_npz(out, sp.csr_matrix(result.csr), compressed=True)
    return out.getvalue()


def _plain(value):
    """JSON-ready: NumPy scalars and arrays to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def result_dict(result) -> dict:
    """The run as a JSON-ready dictionary (everything but the per-point arrays)."""
    return _plain({
        "explorer_version": explorer.__version__,
        "dataset": result.dataset,
        "n": result.n,
        "parameters": result.params,
        "n_clusters": result.n_clusters,
        "k_suggested_by_eigengap": result.k_suggested,
        "backend": result.backend,
        "backend_reason": result.backend_reason,
        "method": result.method,
        "method_reason": result.method_reason,
        "eigen_solver": result.solver,
        "eigen_iterations": result.eigen_iterations,
        "eigen_residuals": result.eigen_residuals,
        "eigenvalues": result.eigenvalues,
        "timings_s": result.timings,
        "scores": result.scores,
        "graph_stats": result.graph_stats.to_dict(),
        "n_isolated": int(result.isolated.sum()),
    })


def result_json(result) -> bytes:
    """:func:`result_dict` as indented UTF-8 JSON."""
    return json.dumps(result_dict(result), indent=2, ensure_ascii=False).encode()
