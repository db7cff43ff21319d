"""Every bad input to a public library entry gets a ValueError/TypeError that says why.

:data:`CASES` is the table of bad inputs (entry, what is wrong, the call, the exception
expected and a piece of its message); the tests run every row, and
``python tests/test_robustness_library.py`` prints the table with the messages the code
really gives (docs/robustness.md is made from it). The property-based tests below check
the validators on any input, and the CPU builders against the float64 reference on
small drawn data.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import explorer
from explorer import KMeans, SpectralClustering, build_graph, graph_stats, spectral_embedding
from explorer import data as datasets
from explorer._backend import gpu_status
from explorer._validation import (
    check_choice,
    check_data,
    check_float,
    check_int,
    check_random_state,
)
from explorer.graph import CPU_METHODS, EdgeRule, default_hypo_max_nnz_row
from explorer.graph import _cpu as cpu
from explorer.graph.reference import pair_values, reference_csr
from explorer.memory import MemoryEstimateError
from explorer.partition import partition_graph
from explorer.testing import assert_same_graph

HYPOTHESIS = settings(max_examples=50, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Case:
    """One bad input: `call()` must raise `exc` with `match` (a regex) in its message."""

    entry: str
    bad: str
    call: Callable[[], object]
    exc: type
    match: str

    @property
    def id(self) -> str:
        return f"{self.entry}: {self.bad}"


def _X(n=40, d=2, seed=0):
    return np.random.default_rng(seed).random((n, d)).astype(np.float32)


def _with(value, i=0):
    X = _X()
    X[i, 0] = value
    return X


G = {"metric": "gaussian", "sigma": 0.1, "threshold_sqdist": 0.05, "backend": "cpu"}


def _bg(X=None, **kw):
    return lambda: build_graph(_X() if X is None else X, **{**G, **kw})


def _gs(X=None, **kw):
    return lambda: graph_stats(_X() if X is None else X, **{**G, **kw})


def _sc(X=None, **kw):
    params = {"n_clusters": 2, **G, **kw}
    return lambda: SpectralClustering(**params).fit(_X() if X is None else X)


def _km(X=None, **kw):
    params = {"n_clusters": 2, **kw}
    return lambda: KMeans(**params).fit(_X() if X is None else X)


def _pre(X, **kw):
    params = {"n_clusters": 2, "affinity": "precomputed", "backend": "cpu", **kw}
    return lambda: SpectralClustering(**params).fit(X() if callable(X) else X)


def _kmp(X):
    return lambda: KMeans(2, n_init=1, random_state=0).fit(_X()).predict(X)


def _affinity():
    return build_graph(_X(), **G).csr


def _emb(csr=None, k=2, **kw):
    return lambda: spectral_embedding(_affinity() if csr is None else csr, k, **kw)


def _asymmetric():
    return sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=np.float32))


def _two_edges():
    return sp.csr_matrix(np.kron(np.eye(2), [[0, 1], [1, 0]]).astype(np.float32))


def _negative():
    return sp.csr_matrix(np.array([[0, -1], [-1, 0]], dtype=np.float32))


def _nan_weights():
    return sp.csr_matrix(np.array([[0, np.nan], [np.nan, 0]], dtype=np.float32))


#: The cases' files live here; removed when the interpreter exits (the finaliser of
#: TemporaryDirectory), so neither the tests nor the table leave folders behind.
_FILES = tempfile.TemporaryDirectory(prefix="robustness-")


def _csv() -> Path:
    """A well-formed CSV (so that only the argument under test is wrong)."""
    path = Path(tempfile.mkdtemp(dir=_FILES.name)) / "good.csv"
    path.write_text("a,b\n1,2\n3,4\n5,6\n")
    return path


def _pg(csr=None, **kw):
    return lambda: partition_graph(_affinity() if csr is None else csr(), kw.pop("k", 2), **kw)


def _special(kind: str) -> Path:
    """A directory or a FIFO named like a data file."""
    folder = Path(tempfile.mkdtemp(dir=_FILES.name))
    path = folder / ("folder.csv" if kind == "dir" else "pipe.csv")
    if kind == "dir":
        path.mkdir()
    else:
        os.mkfifo(path)
    return path


V = ValueError
T = TypeError
M = MemoryEstimateError

CASES = [
    # -- data, through build_graph (check_data is shared by every entry) -----------
    Case("build_graph", "X with a NaN", _bg(_with(np.nan)), V, r"X contains 1 non-finite"),
    Case("build_graph", "X with +inf", _bg(_with(np.inf)), V, r"non-finite value.*NaN or inf"),
    Case("build_graph", "empty X (0×2)", _bg(np.empty((0, 2))), V, r"n=0 samples.*need n >= 2"),
    Case("build_graph", "one row", _bg(np.ones((1, 3))), V, r"n=1 samples.*need n >= 2"),
    Case("build_graph", "d = 0 (5×0)", _bg(np.empty((5, 0))), V, r"d=0 features.*need d >= 1"),
    Case("build_graph", "1-D X", _bg(np.ones(5)), V, r"X must be a 2-D array.*got 1-D"),
    Case("build_graph", "3-D X", _bg(np.ones((4, 2, 2))), V, r"got 3-D shape \(4, 2, 2\)"),
    Case("build_graph", "object dtype", _bg(np.array([[1, "a"], [2, 3]], dtype=object)), T,
         r"X must be numeric; got dtype object"),
    Case("build_graph", "strings", _bg(np.array([["1", "2"], ["3", "4"]])), T,
         r"X must be numeric; got dtype <U1"),
    Case("build_graph", "complex dtype", _bg(np.ones((4, 2), dtype=complex)), V,
         r"Complex data not supported: X must be real-valued; got dtype complex128"),
    Case("build_graph", "ragged nested list", _bg([[1.0, 2.0], [3.0]]), V,
         r"X must be a rectangular n×d array"),
    Case("build_graph", "X = None", lambda: build_graph(None, **G), T,
         r"X must be numeric; got dtype object"),
    # -- edge rule -------------------------------------------------------------------
    Case("build_graph", "sigma = 0", _bg(sigma=0.0), V, r"sigma=0.0 is out of range.*\(0.0, inf\]"),
    Case("build_graph", "sigma < 0", _bg(sigma=-1), V, r"sigma=-1.0 is out of range"),
    Case("build_graph", "sigma = NaN", _bg(sigma=float("nan")), V, r"sigma=nan is out of range"),
    Case("build_graph", "sigma missing (gaussian)", _bg(sigma=None), V,
         r"metric='gaussian' needs sigma > 0; got sigma=None"),
    Case("build_graph", "sigma a string", _bg(sigma="0.1"), T,
         r"sigma must be a real number; got '0.1' \(str\)"),
    Case("build_graph", "threshold_sqdist = 0", _bg(threshold_sqdist=0.0), V,
         r"threshold_sqdist=0.0 is out of range; allowed: \(0.0, inf\]"),
    Case("build_graph", "threshold_sqdist < 0", _bg(threshold_sqdist=-0.5), V,
         r"threshold_sqdist=-0.5 is out of range"),
    Case("build_graph", "threshold_sqdist = inf", _bg(threshold_sqdist=math.inf), V,
         r"threshold_sqdist=inf is out of range"),
    Case("build_graph", "threshold_sqdist = True", _bg(threshold_sqdist=True), T,
         r"threshold_sqdist must be a real number; got True \(bool\)"),
    Case("build_graph", "gaussian threshold_sim = 0", _bg(threshold_sqdist=None, threshold_sim=0.0),
         V, r"threshold_sim=0.0 is out of range; allowed: \(0.0, 1.0\)"),
    Case("build_graph", "gaussian threshold_sim = 1", _bg(threshold_sqdist=None, threshold_sim=1.0),
         V, r"threshold_sim=1.0 is out of range; allowed: \(0.0, 1.0\)"),
    Case("build_graph", "cosine threshold_sim = 1",
         _bg(metric="cosine", threshold_sqdist=None, threshold_sim=1.0), V,
         r"threshold_sim=1.0 is out of range; allowed: \[-1.0, 1.0\)"),
    Case("build_graph", "cosine threshold_sim < -1",
         _bg(metric="cosine", threshold_sqdist=None, threshold_sim=-1.5), V,
         r"threshold_sim=-1.5 is out of range"),
    Case("build_graph", "cosine with threshold_sqdist", _bg(metric="cosine"), V,
         r"metric='cosine' takes threshold_sim in \[-1, 1\); got threshold_sqdist=0.05"),
    Case("build_graph", "uniform with threshold_sim",
         _bg(metric="uniform", threshold_sqdist=None, threshold_sim=0.5), V,
         r"metric='uniform' takes threshold_sqdist > 0; got threshold_sim=0.5"),
    Case("build_graph", "both thresholds", _bg(threshold_sim=0.5), V,
         r"give exactly one of threshold_sqdist and threshold_sim; got both"),
    Case("build_graph", "no threshold", _bg(threshold_sqdist=None), V,
         r"give exactly one of threshold_sqdist and threshold_sim; got neither"),
    Case("build_graph", "unknown metric", _bg(metric="euclidean"), V,
         r"metric='euclidean' is not allowed; use one of 'gaussian', 'cosine', 'uniform'"),
    # -- builder and its knobs -------------------------------------------------------
    Case("build_graph", "hypo_max_nnz_row = 0", _bg(hypo_max_nnz_row=0), V,
         r"hypo_max_nnz_row=0 is out of range; allowed: \[1, inf\]"),
    Case("build_graph", "hypo_max_nnz_row = 2.5", _bg(hypo_max_nnz_row=2.5), T,
         r"hypo_max_nnz_row must be an integer; got 2.5 \(float\)"),
    Case("build_graph", "sp_max_nz_pct = 0", _bg(sp_max_nz_pct=0), V,
         r"sp_max_nz_pct=0.0 is out of range; allowed: \(0.0, 100.0\]"),
    Case("build_graph", "sp_max_nz_pct = 101", _bg(sp_max_nz_pct=101), V,
         r"sp_max_nz_pct=101.0 is out of range; allowed: \(0.0, 100.0\]"),
    Case("build_graph", "mem_use_rate = 0", _bg(mem_use_rate=0), V,
         r"mem_use_rate=0.0 is out of range; allowed: \(0.0, 1.0\]"),
    Case("build_graph", "mem_use_rate = 1.5", _bg(mem_use_rate=1.5), V,
         r"mem_use_rate=1.5 is out of range; allowed: \(0.0, 1.0\]"),
    Case("build_graph", "unknown method", _bg(method="fastest"), V,
         r"method='fastest' is not allowed for backend='cpu'; use one of 'auto', "),
    Case("build_graph", "GPU method on the CPU", _bg(method="csr2"), V,
         r"method='csr2' runs on the GPU backend only, but the backend is 'cpu'"),
    Case("build_graph", "kdtree with cosine",
         _bg(metric="cosine", threshold_sqdist=None, threshold_sim=0.5, method="kdtree"), V,
         r"method='kdtree' serves distance rules .* got metric='cosine'"),
    Case("build_graph", "block_shapes not a mapping", _bg(block_shapes=(32, 4)), T,
         r"block_shapes must be None or a mapping"),
    Case("build_graph", "unknown backend", _bg(backend="tpu"), V,
         r"backend='tpu' is not allowed; use one of auto, gpu, cpu"),
    # -- graph_stats -----------------------------------------------------------------
    Case("graph_stats", "X with a NaN", _gs(_with(np.nan)), V, r"X contains 1 non-finite"),
    Case("graph_stats", "sample_rows = 0", _gs(sample_rows=0), V,
         r"sample_rows=0 is out of range; allowed: \[1, inf\]"),
    Case("graph_stats", "components = 'yes'", _gs(components="yes"), T,
         r"components must be True or False; got 'yes'"),
    Case("graph_stats", "hypo_max_nnz_row = -3", _gs(hypo_max_nnz_row=-3), V,
         r"hypo_max_nnz_row=-3 is out of range"),
    Case("graph_stats", "sigma = 0", _gs(sigma=0), V, r"sigma=0.0 is out of range"),
    # -- SpectralClustering.fit ------------------------------------------------------
    Case("SpectralClustering.fit", "n_clusters = 0", _sc(n_clusters=0), V,
         r"n_clusters=0 is out of range; allowed: \[1, inf\]"),
    Case("SpectralClustering.fit", "n_clusters > n", _sc(n_clusters=41), V,
         r"n_clusters=41 is out of range: only 40 of the n=40 points have an edge"),
    Case("SpectralClustering.fit", "n_clusters = 'many'", _sc(n_clusters="many"), V,
         r"n_clusters='many' is not allowed; use one of 'auto'"),
    Case("SpectralClustering.fit", "n_clusters = 2.0", _sc(n_clusters=2.0), T,
         r"n_clusters must be an integer; got 2.0 \(float\)"),
    Case("SpectralClustering.fit", "no edge at all", _sc(threshold_sqdist=1e-12), V,
         r"the graph has no edge: all n=40 points are isolated; raise the threshold"),
    Case("SpectralClustering.fit", "X with inf", _sc(_with(-np.inf)), V, r"non-finite"),
    Case("SpectralClustering.fit", "one row", _sc(np.ones((1, 2))), V, r"n=1 samples"),
    Case("SpectralClustering.fit", "unknown eigen_solver", _sc(eigen_solver="eigh"), V,
         r"eigen_solver='eigh' is not allowed; use one of 'auto', 'dense', 'lanczos', "
         r"'lobpcg'"),
    Case("SpectralClustering.fit", "eigen_solver='components' with n_clusters='auto'",
         _sc(n_clusters="auto", eigen_solver="components"), V,
         r"eigen_solver='components' needs a fixed n_clusters"),
    Case("SpectralClustering.fit", "eigen_tol = 0", _sc(eigen_tol=0), V,
         r"eigen_tol=0.0 is out of range; allowed: \(0.0, inf\]"),
    Case("SpectralClustering.fit", "eigen_max_iter = 0", _sc(eigen_max_iter=0), V,
         r"eigen_max_iter=0 is out of range"),
    Case("SpectralClustering.fit", "n_init = 0", _sc(n_init=0), V, r"n_init=0 is out of range"),
    Case("SpectralClustering.fit", "kmeans_tol < 0", _sc(kmeans_tol=-0.5), V,
         r"kmeans_tol=-0.5 is out of range; allowed: \[0.0, inf\]"),
    Case("SpectralClustering.fit", "kmeans_max_iter = 0", _sc(kmeans_max_iter=0), V,
         r"kmeans_max_iter=0 is out of range"),
    Case("SpectralClustering.fit", "hypo_max_nnz_row = 0", _sc(hypo_max_nnz_row=0), V,
         r"hypo_max_nnz_row=0 is out of range"),
    Case("SpectralClustering.fit", "unknown backend", _sc(backend="cuda"), V,
         r"backend='cuda' is not allowed"),
    Case("SpectralClustering.fit", "unknown affinity", _sc(affinity="gauss"), V,
         r"affinity='gauss' is not allowed; use one of 'auto', 'epsilon', 'knn', 'mutual_knn', "
         r"'nearest_neighbors', 'precomputed'"),
    Case("SpectralClustering.fit", "sparse X (points)", _sc(sp.csr_matrix(_X())), T,
         r"Sparse data was passed for X .*sparse input is not supported for data points.*"
         r"affinity='precomputed'"),
    Case("SpectralClustering.fit", "precomputed: not square", _pre(_X()), V,
         r"affinity='precomputed' needs X to be a square \(n_samples, n_samples\) affinity "
         r"matrix; got shape \(40, 2\)"),
    Case("SpectralClustering.fit", "precomputed: negative weights",
         _pre(-_affinity()), V,
         r"Negative values in data passed as X with affinity='precomputed': \d+ negative "
         r"value\(s\)"),
    Case("SpectralClustering.fit", "precomputed: asymmetric", _pre(_asymmetric()), V,
         r"affinity='precomputed' needs a symmetric affinity matrix; X is not symmetric"),
    Case("SpectralClustering.fit", "precomputed: NaN weight", _pre(_nan_weights()), V,
         r"Input X contains 2 non-finite value\(s\) \(NaN or inf\)"),
    Case("SpectralClustering.fit", "precomputed: no edge", _pre(np.eye(3)), V,
         r"the affinity matrix has no edge: all n=3 vertices are isolated"),
    # -- KMeans.fit ------------------------------------------------------------------
    Case("KMeans.fit", "n_clusters = 0", _km(n_clusters=0), V, r"n_clusters=0 is out of range"),
    Case("KMeans.fit", "n_clusters > n", _km(n_clusters=41), V,
         r"n_clusters=41 is more than the n=40 samples of X; allowed: 1 <= n_clusters <= 40"),
    Case("KMeans.fit", "X with a NaN", _km(_with(np.nan)), V, r"X contains 1 non-finite"),
    Case("KMeans.fit", "empty X", _km(np.empty((0, 3))), V, r"n=0 samples.*need n >= 1"),
    Case("KMeans.fit", "d = 0", _km(np.empty((3, 0))), V, r"d=0 features"),
    Case("KMeans.fit", "unknown init", _km(init="kmeans||"), V,
         r"init='kmeans\|\|' is not allowed; use one of"),
    Case("KMeans.fit", "init of the wrong shape", _km(init=np.zeros((3, 2))), V,
         r"init array has shape \(3, 2\); it must be \(n_clusters, n_features\) = \(2, 2\)"),
    Case("KMeans.fit", "tol < 0", _km(tol=-1e-3), V, r"tol=-0.001 is out of range"),
    Case("KMeans.fit", "max_iter = 0", _km(max_iter=0), V, r"max_iter=0 is out of range"),
    Case("KMeans.fit", "complex X", _km(np.ones((4, 2), dtype=complex)), V,
         r"Complex data not supported: X must be real-valued"),
    Case("KMeans.fit", "sparse X", _km(sp.csr_matrix(_X())), T,
         r"Sparse data was passed for X .*sparse input is not supported"),
    Case("KMeans.predict", "fewer features than fit", _kmp(_X(d=1)), V,
         r"X has 1 features, but KMeans is expecting 2 features as input"),
    Case("KMeans.predict", "1-D X", _kmp(np.ones(2)), V,
         r"Expected 2D array, got 1D array instead: X must be a 2-D array.*Reshape your data"),
    # -- spectral_embedding ----------------------------------------------------------
    Case("spectral_embedding", "a dense matrix", _emb(np.eye(3)), T,
         r"csr must be a scipy.sparse or cupyx.scipy.sparse matrix; got numpy.ndarray"),
    Case("spectral_embedding", "n_components = 0", _emb(k=0), V,
         r"n_components=0 is out of range; allowed: \[1, 40\]"),
    Case("spectral_embedding", "n_components > n", _emb(k=41), V,
         r"n_components=41 is out of range; allowed: \[1, 40\]"),
    Case("spectral_embedding", "unknown solver", _emb(solver="eigh"), V,
         r"solver='eigh' is not allowed"),
    Case("spectral_embedding", "tol = -1", _emb(tol=-1.0), V, r"tol=-1.0 is out of range"),
    Case("spectral_embedding", "asymmetric matrix", lambda: spectral_embedding(_asymmetric(), 1),
         V, r"csr is not symmetric"),
    Case("spectral_embedding", "negative weights", lambda: spectral_embedding(_negative(), 1), V,
         r"csr has negative weights \(min -1\)"),
    Case("spectral_embedding", "NaN weights", lambda: spectral_embedding(_nan_weights(), 1), V,
         r"csr contains non-finite weights"),
    Case("spectral_embedding", "no edge", lambda: spectral_embedding(sp.csr_matrix((4, 4)), 1), V,
         r"csr has no edge with positive weight"),
    Case("spectral_embedding", "not square",
         lambda: spectral_embedding(sp.csr_matrix((3, 4)), 1), V,
         r"csr must be a square n×n matrix"),
    Case("spectral_embedding", "solver='components', 2 components, k = 1",
         lambda: spectral_embedding(_two_edges(), 1, solver="components"), V,
         r"solver='components' needs exactly n_components=1 connected components among "
         r"the non-isolated vertices, the graph has 2"),
    Case("data.read", "label_column not a column",
         lambda: datasets.read(_csv(), label_column="class"), V,
         r"good.csv: label_column='class' is not a column; column names: 'a', 'b'"),
    Case("data.read", "label_column out of range", lambda: datasets.read(_csv(), label_column=5),
         V, r"good.csv: label_column=5 is out of range; the file has 2 columns"),
    # -- data.load -------------------------------------------------------------------
    Case("data.load", "unknown name", lambda: datasets.load("mnist"), V,
         r"name='mnist' is not a built-in data set; use one of 'moons'"),
    Case("data.load", "n_samples = 1", lambda: datasets.load("moons", n_samples=1), V,
         r"n_samples=1 is out of range; allowed: \[2, inf\]"),
    Case("data.load", "n_samples above the set's size",
         lambda: datasets.load("digits", n_samples=5000), V,
         r"n_samples=5000 is out of range; allowed: \[2, 1797\]"),
    Case("data.load", "n_samples = '100'", lambda: datasets.load("moons", n_samples="100"), T,
         r"n_samples must be an integer; got '100' \(str\)"),
    Case("data.load", "random_state = -1",
         lambda: datasets.load("moons", n_samples=10, random_state=-1), V,
         r"random_state=-1 is out of range"),
    Case("data.load", "unknown option", lambda: datasets.load("moons", n_samples=10, nois=0.1), V,
         r"moons has no option 'nois'; its options: noise"),
    # -- data.read (malformed files: tests/test_robustness_files.py) -----------------
    Case("data.read", "label_column = 1.5", lambda: datasets.read(_csv(), label_column=1.5), T,
         r"label_column must be a column name \(str\), a 0-based index \(int\) or None"),
    Case("data.read", "unknown file type", lambda: datasets.read(__file__), V,
         r"test_robustness_library.py: unknown file type '.py'; allowed: "),
    Case("data.read", "missing file", lambda: datasets.read("/nonexistent/x.csv"),
         FileNotFoundError, r"/nonexistent/x.csv: no such file"),
    # -- issue 15: numeric extremes ----------------------------------------------------
    Case("build_graph", "sigma = 1e-200 (2σ² underflows)", _bg(sigma=1e-200), V,
         r"sigma=1e-200 is out of range: 2σ² = 0 underflows float32.*allowed: \[7.67e-20, "
         r"1.3e\+19\]"),
    Case("build_graph", "sigma = 1e200 (2σ² overflows)", _bg(sigma=1e200), V,
         r"sigma=1e\+200 is out of range: 2σ² = inf overflows float32"),
    Case("build_graph", "sigma = 1e-30 (every weight would be 0)", _bg(sigma=1e-30), V,
         r"sigma=1e-30 is out of range: 2σ² = 2e-60 underflows float32"),
    Case("build_graph", "threshold_sqdist = 10**400 (an int)", _bg(threshold_sqdist=10**400), V,
         r"threshold_sqdist=~1e\+400 is out of range: it is beyond float64's range"),
    Case("build_graph", "threshold_sim = 10**400 (an int)",
         _bg(threshold_sqdist=None, threshold_sim=10**400), V,
         r"threshold_sim=~1e\+400 is out of range: it is beyond float64's range"),
    Case("build_graph", "threshold_sqdist = 1e39 (beyond float32)", _bg(threshold_sqdist=1e39),
         V, r"threshold_sqdist=1e\+39 is out of range: beyond float32's normal range"),
    Case("build_graph", "threshold_sqdist = 1e-45 (below float32's normal range)",
         _bg(threshold_sqdist=1e-45), V,
         r"threshold_sqdist=1e-45 is out of range: beyond float32's normal range"),
    Case("build_graph", "hypo_max_nnz_row = 2**70", _bg(hypo_max_nnz_row=2**70), V,
         r"hypo_max_nnz_row=~1e\+21 is above the practical limit 2,147,483,647"),
    Case("graph_stats", "sigma = 1e-200", _gs(sigma=1e-200), V,
         r"sigma=1e-200 is out of range: 2σ² = 0 underflows"),
    Case("graph_stats", "hypo_max_nnz_row = 2**40", _gs(hypo_max_nnz_row=2**40), V,
         r"hypo_max_nnz_row=1099511627776 is above the practical limit"),
    Case("SpectralClustering.fit", "every edge's weight underflows (σ = 1e-5, t = 0.05)",
         _sc(sigma=1e-5), V, r"every one of the graph's \d+ edges has weight 0: .* raise sigma"),
    Case("SpectralClustering.fit", "sigma = 1e200", _sc(sigma=1e200), V,
         r"sigma=1e\+200 is out of range"),
    # -- issue 15: arguments -----------------------------------------------------------
    Case("SpectralClustering.fit", "random_state = True", _sc(random_state=True), T,
         r"random_state must be None, an int in \[0, 2\*\*32 - 1\], a numpy.random.RandomState "
         r"or a numpy.random.Generator; got True \(bool\)"),
    Case("SpectralClustering.fit", "random_state = -1", _sc(random_state=-1), V,
         r"random_state=-1 is out of range; allowed: \[0, 4294967295\]"),
    Case("SpectralClustering.fit", "random_state = 2**70", _sc(random_state=2**70), V,
         r"random_state=~1e\+21 is out of range"),
    Case("SpectralClustering.fit", "random_state = 'seed'", _sc(random_state="seed"), T,
         r"random_state must be None, an int .*; got 'seed' \(str\)"),
    Case("SpectralClustering.fit", "n_init = 10**9", _sc(n_init=10**9), V,
         r"n_init=1000000000 is above the practical limit 1,000"),
    Case("SpectralClustering.fit", "kmeans_max_iter = 10**9", _sc(kmeans_max_iter=10**9), V,
         r"kmeans_max_iter=1000000000 is above the practical limit 100,000"),
    Case("SpectralClustering.fit", "eigen_max_iter = 10**12", _sc(eigen_max_iter=10**12), V,
         r"eigen_max_iter=1000000000000 is above the practical limit 1,000,000"),
    Case("KMeans.fit", "random_state = True", _km(random_state=True), T,
         r"random_state must be None, an int .*; got True \(bool\)"),
    Case("KMeans.fit", "n_init = 10**9", _km(n_init=10**9), V,
         r"n_init=1000000000 is above the practical limit 1,000"),
    Case("KMeans.fit", "max_iter = 10**9", _km(max_iter=10**9), V,
         r"max_iter=1000000000 is above the practical limit 100,000"),
    Case("partition_graph", "csr = None", _pg(lambda: None), T,
         r"csr must be a scipy.sparse or cupyx.scipy.sparse matrix .*; got builtins.NoneType"),
    Case("partition_graph", "a dense matrix", _pg(lambda: _affinity().toarray()), T,
         r"csr must be a scipy.sparse .*; got numpy.ndarray"),
    Case("partition_graph", "complex CSR", _pg(lambda: _affinity().astype(np.complex64)), V,
         r"Complex data not supported: csr must hold real weights; got dtype complex64"),
    Case("partition_graph", "not square", _pg(lambda: _affinity()[:, :30]), V,
         r"csr must be a square n×n matrix with n >= 2; got shape \(40, 30\)"),
    Case("partition_graph", "isolated of the wrong shape",
         _pg(isolated=np.zeros(3, dtype=bool)), V,
         r"isolated must be a bool array of shape \(40,\) \(one flag per vertex\); got dtype "
         r"bool, shape \(3,\)"),
    Case("partition_graph", "isolated not bool", _pg(isolated=np.zeros(40)), V,
         r"isolated must be a bool array of shape \(40,\).*got dtype float64"),
    Case("partition_graph", "on_kmeans not callable", _pg(on_kmeans="print"), T,
         r"on_kmeans must be a callable or None; got 'print' \(str\)"),
    Case("partition_graph", "n_components = -1", _pg(n_components=-1), V,
         r"n_components=-1 is out of range; allowed: \[0, 40\]"),
    Case("partition_graph", "n_clusters = 0", _pg(k=0), V,
         r"n_clusters=0 is out of range; allowed: \[1, inf\]"),
    Case("partition_graph", "random_state = True", _pg(random_state=True), T,
         r"random_state must be None, an int"),
    Case("partition_graph", "n_init = 10**9", _pg(n_init=10**9), V,
         r"n_init=1000000000 is above the practical limit"),
    # -- issue 15: files and memory -------------------------------------------------------
    Case("data.read", "a directory", lambda: datasets.read(_special("dir")), V,
         r"folder.csv: is a directory, not a data file; give the path of a regular file"),
    Case("data.read", "a FIFO", lambda: datasets.read(_special("fifo")), V,
         r"pipe.csv: is a FIFO \(named pipe\), not a data file"),
    Case("data.read", "/dev/zero", lambda: datasets.read("/dev/zero"), V,
         r"/dev/zero: is a character device, not a data file"),
    Case("data.load", "infinite-digits, n_samples = 10**11",
         lambda: datasets.load("infinite-digits", n_samples=10**11), M,
         r"generating infinite-digits with n_samples=100000000000 \(100,000,000,000 × 784 "
         r"values\) needs about .* TiB, but only .* of memory is available on this machine; "
         r"lower n_samples"),
    Case("data.load", "random_state = True",
         lambda: datasets.load("moons", n_samples=10, random_state=True), T,
         r"random_state must be an integer; got True \(bool\)"),
]

NO_GPU = not gpu_status()[0]
if NO_GPU:  # where a GPU answers, asking for it is no error
    CASES += [
        Case("build_graph", "backend='gpu' without a GPU", _bg(backend="gpu"), V,
             r"backend='gpu' was asked for but no GPU can be used: "),
        Case("SpectralClustering.fit", "backend='gpu' without a GPU", _sc(backend="gpu"), V,
             r"backend='gpu' was asked for but no GPU can be used"),
    ]


def message(case: Case) -> str:
    """What `case` raises: ``'ValueError: ...'`` (the table's message column)."""
    try:
        case.call()
    except Exception as exc:  # the table shows whatever it is; the test checks the type
        return f"{type(exc).__name__}: {exc}"
    return "(no error)"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_a_clear_error(case):
    with pytest.raises(case.exc) as info:
        case.call()
    assert type(info.value) is case.exc, f"{type(info.value).__name__}: {info.value}"
    assert re.search(case.match, str(info.value)), str(info.value)


def test_the_table_is_large_enough():
    assert len(CASES) >= 25
    assert {c.entry for c in CASES} >= {
        "build_graph", "graph_stats", "SpectralClustering.fit", "KMeans.fit",
        "spectral_embedding", "data.load", "data.read",
    }


def test_errors_leave_nothing_behind():
    """A refused call changes nothing: the estimator can be fitted right after."""
    sc = SpectralClustering(n_clusters=0, **G)
    with pytest.raises(ValueError):
        sc.fit(_X())
    assert not hasattr(sc, "labels_")
    sc.set_params(n_clusters=2).fit(_X())
    assert sc.labels_.shape == (40,)


# --------------------------------------------------------------- validators, any input

ANY = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
    st.complex_numbers(max_magnitude=10), st.lists(st.integers(), max_size=2),
    st.sampled_from([np.int64(3), np.float32(0.5), np.float64(-2.0), np.bool_(True)]),
)
BOUND = st.one_of(st.none(), st.floats(-100, 100, allow_nan=False))


def _named(exc: BaseException, name: str) -> None:
    assert isinstance(exc, (ValueError, TypeError)), repr(exc)
    assert name in str(exc), str(exc)


@HYPOTHESIS
@given(value=ANY, low=BOUND, high=BOUND, lo_in=st.booleans(), hi_in=st.booleans(),
       allow_none=st.booleans())
def test_check_float_validates_or_names_the_argument(value, low, high, lo_in, hi_in, allow_none):
    try:
        out = check_float(value, "alpha", low=low, high=high, low_inclusive=lo_in,
                          high_inclusive=hi_in, allow_none=allow_none)
    except Exception as exc:
        _named(exc, "alpha")
        return
    if value is None:
        assert allow_none and out is None
        return
    assert type(out) is float and math.isfinite(out)
    assert not isinstance(value, (bool, np.bool_, str, complex))
    assert out == float(value)
    if low is not None:
        assert out >= low if lo_in else out > low
    if high is not None:
        assert out <= high if hi_in else out < high


@HYPOTHESIS
@given(value=ANY, low=st.one_of(st.none(), st.integers(-50, 50)),
       high=st.one_of(st.none(), st.integers(-50, 50)), allow_none=st.booleans())
def test_check_int_validates_or_names_the_argument(value, low, high, allow_none):
    try:
        out = check_int(value, "count", low=low, high=high, allow_none=allow_none)
    except Exception as exc:
        _named(exc, "count")
        return
    if value is None:
        assert allow_none and out is None
        return
    assert type(out) is int and out == value and not isinstance(value, (bool, np.bool_))
    assert (low is None or out >= low) and (high is None or out <= high)


@HYPOTHESIS
@given(value=ANY, choices=st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=4))
def test_check_choice_validates_or_names_the_argument(value, choices):
    try:
        out = check_choice(value, "mode", choices)
    except Exception as exc:
        _named(exc, "mode")
        return
    assert out == value and out in choices


ARRAYS = st.one_of(
    st.builds(
        lambda shape, dtype, fill, seed: _array(shape, dtype, fill, seed),
        shape=st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple),
        dtype=st.sampled_from(["float32", "float64", "int32", "uint8", "bool", "complex64",
                               "object", "<U2", "float16"]),
        fill=st.sampled_from(["random", "nan", "inf", "zeros"]),
        seed=st.integers(0, 2**16),
    ),
    st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3), max_size=4),
    st.none(), st.text(max_size=3),
)


def _array(shape, dtype, fill, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    if fill == "zeros":
        a = np.zeros(shape)
    elif fill != "random" and a.size:
        a.flat[seed % a.size] = np.nan if fill == "nan" else np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        return a.astype(dtype)


@HYPOTHESIS
@given(X=ARRAYS, min_samples=st.integers(1, 3))
def test_check_data_validates_or_names_the_argument(X, min_samples):
    try:
        out = check_data(X, name="data", min_samples=min_samples)
    except Exception as exc:
        _named(exc, "data")
        return
    src = np.asarray(X)
    assert out.dtype == np.float32 and out.flags.c_contiguous and out.ndim == 2
    assert out.shape == src.shape and out.shape[0] >= min_samples and out.shape[1] >= 1
    assert np.isfinite(out).all()
    assert src.dtype.kind in "biufO"  # object arrays of numbers convert, as in scikit-learn
    np.testing.assert_array_equal(out, src.astype(np.float32))


@HYPOTHESIS
@given(metric=st.one_of(st.sampled_from(["gaussian", "cosine", "uniform"]), ANY),
       sigma=ANY, sqdist=ANY, sim=ANY)
def test_graph_params_validate_or_name_the_argument(metric, sigma, sqdist, sim):
    try:
        p = EdgeRule.from_args(metric, sigma, sqdist, sim)
    except Exception as exc:
        assert isinstance(exc, (ValueError, TypeError)), repr(exc)
        names = ("metric", "sigma", "threshold_sqdist", "threshold_sim")
        assert any(name in str(exc) for name in names), str(exc)
        return
    assert p.metric == metric and p.threshold_kind in ("sqdist", "sim")
    assert math.isfinite(p.threshold)
    if p.metric == "gaussian":
        assert p.sigma > 0 and math.isfinite(p.sigma)
    if p.threshold_kind == "sqdist":
        assert p.threshold > 0 and p.metric != "cosine"
    elif p.metric == "cosine":
        assert -1 <= p.threshold < 1
    else:
        assert 0 < p.threshold < 1 and p.metric == "gaussian"


# --------------------------------------------------------- CPU builders = the reference


@st.composite
def small_problems(draw):
    n = draw(st.integers(2, 40))
    d = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["uniform", "lattice", "normal"]))
    if kind == "lattice":  # ties: many pairs share one squared distance
        X = rng.integers(0, 3, (n, d)).astype(np.float32)
    elif kind == "normal":
        X = rng.standard_normal((n, d)).astype(np.float32)
    else:
        X = rng.random((n, d)).astype(np.float32)
    rule = draw(st.sampled_from(["gaussian-sqdist", "gaussian-sim", "uniform", "cosine"]))
    metric = rule.split("-")[0]
    sigma = draw(st.floats(0.05, 3.0)) if metric == "gaussian" else None
    probe = EdgeRule.from_args("cosine", threshold_sim=0.0) if metric == "cosine" else \
        EdgeRule.from_args("uniform", threshold_sqdist=1.0)
    values = np.unique(pair_values(X, X, probe)[0][np.triu_indices(n, 1)])
    # A threshold equal to a pair value of the data (ties on the boundary), or between two.
    i = draw(st.integers(0, len(values) - 1))
    t = float(values[i]) if draw(st.booleans()) else float(values[i]) * draw(st.floats(0.5, 2))
    if metric == "cosine":
        kw = {"threshold_sim": min(max(t, -1.0), 0.999)}
    elif rule == "gaussian-sim":
        sim = math.exp(-t / (2 * sigma**2)) if t > 0 else 0.5
        assume(0 < sim < 1)
        kw = {"threshold_sim": sim}
    else:
        assume(t > 0)
        kw = {"threshold_sqdist": t}
    return X, EdgeRule.from_args(metric, sigma, **kw)


def _identical(a, b) -> None:
    assert a.shape == b.shape
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), f"{name} differs"


@HYPOTHESIS
@given(problem=small_problems())
def test_cpu_builders_equal_the_float64_reference(problem):
    X, params = problem
    expected = reference_csr(X, params)
    methods = [m for m in CPU_METHODS if not (m == "kdtree" and params.compares != "sqdist")]
    for method in methods:
        csr, _, _ = cpu.build_cpu(X, params, method)
        _identical(csr, expected)
    g = build_graph(X, metric=params.metric, sigma=params.sigma, backend="cpu",
                    **{f"threshold_{params.threshold_kind}": params.threshold})
    _identical(g.csr, expected)
    assert g.stats.nnz == expected.nnz


# ------------------------------------------------------------- memory preflights


def test_cpu_preflight_gives_the_estimate_and_a_suggestion(monkeypatch):
    from explorer import memory

    X = _X(3000, 2, seed=1)
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 16 * 2**20)
    with pytest.raises(ValueError) as info:
        build_graph(X, metric="uniform", threshold_sqdist=0.5, backend="cpu")
    text = str(info.value)
    assert re.search(r"graph too large for this machine: uniform, ‖xi−xj‖² < 0.5 on n=3000 "
                     r"gives an estimated nnz ≈ [\d.e+]+ \([\d.]+ per row\), about [\d.]+ GiB "
                     r"to build on the CPU, but only 0.0 GiB is available; lower the threshold, "
                     r"subsample the data, or use graph_stats\(sample_rows=...\)", text), text
    nnz = float(re.search(r"nnz ≈ ([\d.e+]+)", text).group(1))
    exact = graph_stats(X, metric="uniform", threshold_sqdist=0.5, backend="cpu",
                        components=False).nnz
    assert abs(nnz - exact) < 0.15 * exact  # a 512-row sample estimates within 15 %
    # the live statistics still work: they count rows, they do not build
    assert graph_stats(X, metric="uniform", threshold_sqdist=0.5, backend="cpu",
                       sample_rows=100).estimated


def test_gpu_nnz_check_names_a_counted_or_sampled_nnz():
    # The grid's memory check runs on the nnz its counting pass found (no sampled
    # estimate beforehand); the others' on the sampled estimate: the message says which.
    from explorer import memory

    rule = EdgeRule.from_args("uniform", threshold_sqdist=0.5)
    memory.check_gpu_nnz(10**6, 3e7, rule, "grid", 32, free=64 * 2**30)  # fits: no error
    with pytest.raises(memory.MemoryEstimateError, match=r"graph too large for the GPU: .* "
                       r"on n=1000000 gives nnz ≈ 3e\+07 \(30.0 per row, counted\); "
                       r"method='grid' needs about 0.23 GiB but 0.00 GiB"):
        memory.check_gpu_nnz(10**6, 3e7, rule, "grid", 32, free=2**20)
    with pytest.raises(memory.MemoryEstimateError, match=r"an estimated nnz ≈ 3e\+07 "
                       r"\(30.0 per row, from 512 sampled rows\)"):
        memory.check_gpu_nnz(10**6, 3e7, rule, "csr1", 32, sampled_rows=512, free=2**20)


@pytest.mark.gpu
def test_gpu_preflight_refuses_with_the_estimate(monkeypatch):
    import cupy

    from explorer import memory
    from explorer.graph import gpu

    X = cupy.asarray(_X(3000, 2, seed=2))
    params = EdgeRule.from_args("uniform", threshold_sqdist=0.5)

    def count_rows(rows):
        return gpu.count_rows_gpu(X, params, rows)[0]

    hypo = default_hypo_max_nnz_row(2)
    memory.check_gpu_memory(3000, count_rows, params, "csr2", hypo,
                            free=64 * 2**30)  # fits: no error
    with pytest.raises(ValueError, match=r"graph too large for the GPU: .* estimated nnz ≈ "
                       r"[\d.e+]+ .*method='csr2', hypo_max_nnz_row=32 .* GiB of GPU memory is "
                       r"free; lower the threshold.*lower hypo_max_nnz_row"):
        memory.check_gpu_memory(3000, count_rows, params, "csr2", hypo, free=2**20)
    monkeypatch.setattr(memory, "free_device_bytes", lambda: 2**20)
    for method in gpu.GPU_METHODS:
        with pytest.raises(ValueError, match=rf"graph too large for the GPU.*{method!r}"):
            build_graph(X, metric="uniform", threshold_sqdist=0.5, method=method, backend="gpu")


@pytest.mark.gpu
def test_gpu_out_of_memory_during_a_build_is_a_memory_error(monkeypatch):
    import cupy

    from explorer.graph import _gpu_build

    def greedy(X, params, **options):
        cupy.empty(1 << 50, dtype=cupy.uint8)  # a petabyte: CuPy's OutOfMemoryError

    monkeypatch.setitem(_gpu_build.BUILDERS, "csr2", greedy)
    X = cupy.asarray(_X(200, 2, seed=3))
    with pytest.raises(MemoryError, match=r"the GPU ran out of memory building the graph of "
                       r"n=200 points with method='csr2'.*or use backend='cpu'"):
        build_graph(X, metric="uniform", threshold_sqdist=0.01, method="csr2", backend="gpu")
    monkeypatch.undo()
    params = EdgeRule.from_args("uniform", threshold_sqdist=0.01)
    g = build_graph(X, metric="uniform", threshold_sqdist=0.01, method="csr2", backend="gpu")
    assert_same_graph(g.csr, reference_csr(X.get(), params), X, params)  # recovered


# --------------------------------------------------------------- issue 15: behaviours


def _float64_pattern(X64, t):
    """The edges of ``‖xi−xj‖² < t`` decided on the float64 data itself."""
    d2 = ((X64[:, None, :] - X64[None, :, :]) ** 2).sum(-1)
    A = d2 < t
    np.fill_diagonal(A, False)
    return A, d2


@pytest.mark.filterwarnings("ignore:the graph has")
@pytest.mark.parametrize("what", ["coordinates 5e6 + small", "timestamps 1.7e9 + 60 i"])
def test_a_large_offset_gives_the_float64_graph(what):
    """float64 data far from 0: the graph is the one float64 decides (outside the
    rounding band), not the one of the float32 cast (issue 15: 118 edges vs 0)."""
    rng = np.random.default_rng(7)
    if what.startswith("coordinates"):
        X64 = 5e6 + rng.random((300, 2)) * 0.05
        t = 1e-5
    else:
        X64 = (1.7e9 + 60.0 * np.arange(200) + rng.random(200))[:, None]
        t = 3600.0
    A, d2 = _float64_pattern(X64, t)
    band = np.abs(d2 - t) <= 1e-5 * t
    for fn in (build_graph, graph_stats):
        kw = {"metric": "uniform", "threshold_sqdist": t, "backend": "cpu"}
        if fn is build_graph:
            got = fn(X64, **kw).csr.toarray() != 0
            assert not ((got != A) & ~band).any()
        else:
            assert abs(fn(X64, **kw).nnz - int(A.sum())) <= int(band.sum())
    naive = reference_csr(X64.astype(np.float32), EdgeRule.from_args("uniform",
                                                                      threshold_sqdist=t))
    assert naive.nnz != int(A.sum())  # what the plain cast gave: a different graph
    labels = SpectralClustering(2, metric="uniform", threshold_sqdist=t, backend="cpu",
                                random_state=0).fit(X64)
    assert labels.graph_.stats.nnz == build_graph(X64, metric="uniform",
                                                  threshold_sqdist=t, backend="cpu").stats.nnz


def test_a_large_offset_outside_the_graph_entries_warns():
    X64 = 1.7e9 + 60.0 * np.arange(100, dtype=np.float64)[:, None]
    with pytest.warns(UserWarning, match=r"X has an offset that float32 cannot carry: column 0 "
                      r"lies around 1.7e\+09"):
        check_data(X64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_data(X64, center=True)  # the graph entries centre, silently and documented
        check_data(X64.astype(np.float32))  # float32 data: nothing was lost in a cast


def test_cosine_on_offset_data_stays_within_the_band():
    """Cosine is not translation invariant: the data are not centred; the cast errs by
    ~1e-7 in a cosine, inside the band of 1e-5."""
    rng = np.random.default_rng(3)
    X64 = 5e6 + rng.random((60, 3))
    U = X64 / np.linalg.norm(X64, axis=1, keepdims=True)
    cos = U @ U.T
    t = float(np.median(cos))
    got = build_graph(X64, metric="cosine", threshold_sim=t, backend="cpu").csr.toarray() != 0
    want = cos > t
    np.fill_diagonal(want, False)
    assert not ((got != want) & (np.abs(cos - t) > 1e-5)).any()


def test_identical_points_warn_that_the_split_is_arbitrary():
    with pytest.warns(UserWarning, match=r"X has only 1 distinct point\(s\) among its n=50 "
                      r"rows, fewer than n_clusters=2"):
        SpectralClustering(2, metric="uniform", threshold_sqdist=0.1, backend="cpu",
                           random_state=0).fit(np.zeros((50, 2)))


def test_distinct_points_are_counted_past_the_first_rows():
    # The check looks at the first 64·k rows first; repeated rows there must not hide
    # distinct ones further down, nor make a warning where there are k of them.
    from explorer.pipeline.runners import _warn_duplicates

    X = np.zeros((300, 2), dtype=np.float32)
    X[-2:] = [[1, 0], [0, 1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_duplicates(X, 3)
    with pytest.warns(UserWarning, match=r"only 3 distinct point\(s\) among its n=300 rows"):
        _warn_duplicates(X, 4)


def test_random_state_takes_a_generator_and_refuses_bool():
    X = _X()
    a = SpectralClustering(2, **G, random_state=np.random.default_rng(5)).fit_predict(X)
    b = SpectralClustering(2, **G, random_state=np.random.default_rng(5)).fit_predict(X)
    assert np.array_equal(a, b)
    gen = np.random.default_rng(1)
    rs = check_random_state(gen)
    before = gen.bit_generator.state
    rs.random_sample(3)
    assert gen.bit_generator.state != before  # draws advance the Generator itself
    assert isinstance(check_random_state(np.int64(3)), np.random.RandomState)
    with pytest.raises(TypeError, match="random_state must be None"):
        check_random_state(np.bool_(True))


def test_partition_graph_converts_other_sparse_formats():
    csr = _affinity()
    want = partition_graph(csr, 2, random_state=0).labels
    for other in (csr.tocoo(), csr.tolil(), sp.csr_array(csr)):
        assert np.array_equal(partition_graph(other, 2, random_state=0).labels, want)


def test_sampled_counts_stay_exact_and_bounded_on_dense_settings():
    """Dense settings (every pair near the radius): the sampled count's unsure rows are
    decided in blocks of the brute force (issue 15: lists of ~n entries per row took
    6.4 GB at n = 200,000); the counts equal the exact ones."""
    X = np.random.default_rng(0).random((3000, 2)).astype(np.float32)
    rule = EdgeRule.from_args("uniform", threshold_sqdist=1.0)
    rows = np.sort(np.random.default_rng(1).choice(3000, 400, replace=False))
    got = cpu.count_rows_cpu(X, rule, "kdtree", rows)
    ref = np.diff(reference_csr(X, rule).indptr)[rows]
    assert np.array_equal(got, ref)


def test_the_memory_preflight_of_an_allocation(monkeypatch):
    from explorer import memory

    with pytest.raises(MemoryEstimateError, match=r"thing needs about 1 GiB, but only 16 MiB "
                       r"of memory is available on this machine; do less"):
        memory.check_allocation(2**30, "thing", "do less", available=2**24)
    with pytest.raises(MemoryEstimateError, match=r"thing needs about 1 GiB, more than the "
                       r"cap of 1 MiB; do less"):
        memory.check_allocation(2**30, "thing", "do less", limit=2**20, limit_name="the cap")
    memory.check_allocation(2**20, "thing", "do less", available=2**30)
    with memory.file_limit(123):
        assert memory.file_content_limit() == 123
    monkeypatch.setenv("EXPLORER_MAX_FILE_BYTES", "4096")
    assert memory.file_content_limit() == 4096


if __name__ == "__main__":  # the table of docs/robustness.md, from the code itself
    for c in CASES:
        text = " ".join(message(c).split()).replace("|", "\\|")
        text = re.sub(r"/tmp/robustness-\w+/tmp\w+/", "DIR/", text)
        print(f"| library | `{c.entry}` | {c.bad} | {text} |")
    print(f"<!-- {len(CASES)} library rows, explorer {explorer.__version__} -->")
