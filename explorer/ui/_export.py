"""A run's result as files: labels (CSV), the graph (NPZ), the whole result (JSON)."""

from __future__ import annotations

import io
import json
import math
import os
import struct
import zipfile

import numpy as np
import pandas as pd
import scipy.sparse as sp

import explorer
from explorer._backend import array_module


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
    save_graph_npz(result.csr, out)
    return out.getvalue()


def save_graph_npz(csr, file, *, compressed=True) -> None:
    """Write a CSR matrix in SciPy's ``.npz`` format (``scipy.sparse.load_npz`` reads it).

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix
        A CuPy matrix is copied to the host once (12 B per nonzero with int64 indices).
    file : str, os.PathLike or binary file object
        Where to write; a path gets the ``.npz`` suffix if it lacks it, as in SciPy.
    compressed : bool, default True
        zlib-compress the arrays. Compression runs on one core at about 50 MB/s:
        seconds for the app's graphs, 9 minutes for a 2.2·10⁹-nonzero graph (26.6 GB),
        which ``compressed=False`` writes about 5x faster (the zip's CRC-32 is then
        the bound, not the disk).

    Notes
    -----
    The index arrays are written with their own dtype, so int64 indices stay int64 in
    the file, and arrays are streamed into the archive in 16 MiB pieces (NumPy's
    ``savez``), so writing costs no second copy of the matrix. Reading back, SciPy
    narrows indices to int32 when they fit (only a graph of 2**31 nonzeros or more
    comes back int64).
    """
    if array_module(csr) is not np:  # cupyx: each array to the host as it is
        host = sp.csr_matrix(csr.shape, dtype=csr.dtype)
        # Assigned, not passed to the constructor, which would narrow int64 indices.
        host.data, host.indices, host.indptr = csr.data.get(), csr.indices.get(), csr.indptr.get()
    else:
        host = sp.csr_matrix(csr)
    sp.save_npz(file, host, compressed=compressed)


def map_graph_npz(path):
    """Map a CSR ``.npz`` written uncompressed (``save_graph_npz(..., compressed=False)``).

    ``scipy.sparse.load_npz`` reads every byte into memory and checks the archive's
    CRC-32 on the way, at a few hundred MB/s on one core: minutes for a 26.6 GB graph.
    Here the three arrays are read-only memory maps of the file itself, with the dtypes
    stored in it (int64 indices stay int64): nothing is read until it is used.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    scipy.sparse.csr_matrix
        Its ``data``, ``indices`` and ``indptr`` are ``numpy.memmap`` views of the file
        (no CRC check: compare the values, or use ``scipy.sparse.load_npz``, to verify).

    Raises
    ------
    ValueError
        If the file does not hold a CSR matrix, or its arrays were compressed.
    """
    path = os.fspath(path)
    with np.load(path) as stored:
        fmt = stored["format"].item()
        shape = tuple(int(v) for v in stored["shape"])
    if fmt not in (b"csr", "csr"):
        raise ValueError(f"{path}: holds a {fmt!r} matrix; map_graph_npz maps CSR files")
    data, indices, indptr = (_map_member(path, name) for name in ("data", "indices", "indptr"))
    out = sp.csr_matrix(shape, dtype=data.dtype)
    # Assigned, not passed to the constructor, which would read (and narrow) the indices.
    out.data, out.indices, out.indptr = data, indices, indptr
    return out


def _map_member(path: str, name: str):
    """Memory map of the array ``<name>.npy`` stored uncompressed in the zip at `path`."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{path}: {name} is compressed; only a file written with "
                         "compressed=False can be mapped (scipy.sparse.load_npz reads any)")
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)  # the zip's local file header; the member's bytes follow it
        if local[:4] != b"PK\x03\x04":
            raise ValueError(f"{path}: no local zip header for {name}")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        fh.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"{path}: {name} has .npy format version {version}")
        offset = fh.tell()
    if len(shape) != 1 or dtype.hasobject:
        raise ValueError(f"{path}: {name} is not a 1-D numeric array")
    if shape[0] == 0:
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


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
        "graph_stats": None if result.graph_stats is None else result.graph_stats.to_dict(),
        "mode": result.mode,
        "mode_why": result.mode_why,
        "affinity": result.affinity,
        "affinity_why": result.affinity_why,
        "n_isolated": int(result.isolated.sum()),
    })


def result_json(result) -> bytes:
    """:func:`result_dict` as indented UTF-8 JSON."""
    return json.dumps(result_dict(result), indent=2, ensure_ascii=False).encode()
