"""The app's answers to bad input, checked on its state (``explorer.ui.state``, no browser).

Two layers answer. The state's parameters carry bounds: a widget (or a notebook) cannot
set σ <= 0, k < 1 and the like; ``param`` refuses with a ValueError naming the
parameter. What only the library can judge (a threshold out of range for the metric,
a GPU that is not there, k above the points that have edges, a malformed upload, a
memory failure) comes back from the job as a message in the state's ``error`` fields,
the last good data and result stay, and the next job runs normally.

``python tests/test_robustness_app.py`` prints the app rows of docs/robustness.md.
"""

from __future__ import annotations

import io
import re
import zipfile

import numpy as np
import pytest

# The app's packages are optional (a GPU server often has none): skip, saying why.
pytest.importorskip("param", reason="the app's state classes need param (pip install -e '.[app]')")

import explorer  # noqa: E402
import explorer.pipeline.runners  # noqa: E402
from explorer._backend import gpu_status  # noqa: E402
from explorer.ui.state import ExplorerState  # noqa: E402
from tests.test_upload_files import lying_parquet  # noqa: E402

NO_GPU = not gpu_status()[0]


@pytest.fixture
def state():
    s = ExplorerState()
    s.data.n_samples = 200
    assert s.load()
    s.graph.graph = "epsilon"  # the ε-graph the sidebar is centred on
    return s


# ------------------------------------------------ parameters the widgets cannot set

#: (part of the state, parameter, bad value, regex of param's message)
BOUNDS = [
    ("graph", "sigma", 0.0, r"'GraphState.sigma' must be greater than 0, not 0.0"),
    ("graph", "sigma", -1.0, r"'GraphState.sigma' must be greater than 0, not -1.0"),
    ("graph", "threshold_sqdist", 0.0, r"'GraphState.threshold_sqdist' must be greater than 0"),
    ("graph", "threshold_sim", 1.0, r"'GraphState.threshold_sim' must be less than 1, not 1.0"),
    ("graph", "threshold_sim", -1.5, r"'GraphState.threshold_sim' must be at least -1"),
    ("graph", "hypo_max_nnz_row", 0, r"'GraphState.hypo_max_nnz_row' must be at least 1, not 0"),
    ("graph", "sp_max_nz_pct", 101.0, r"'GraphState.sp_max_nz_pct' must be at most 100"),
    ("graph", "sp_max_nz_pct", 0.0, r"'GraphState.sp_max_nz_pct' must be greater than 0"),
    ("graph", "mem_use_rate", 0.0, r"'GraphState.mem_use_rate' must be greater than 0"),
    ("graph", "mem_use_rate", 1.5, r"'GraphState.mem_use_rate' must be at most 1"),
    ("graph", "metric", "euclidean", r"'GraphState.metric' does not accept 'euclidean'"),
    ("graph", "backend", "tpu", r"'GraphState.backend' does not accept 'tpu'"),
    ("graph", "method", "fastest", r"'GraphState.method' does not accept 'fastest'"),
    ("run_state", "n_clusters", 0, r"'RunState.n_clusters' must be at least 1, not 0"),
    ("run_state", "eigen_tol", 0.0, r"'RunState.eigen_tol' must be greater than 0"),
    ("run_state", "n_init", 0, r"'RunState.n_init' must be at least 1, not 0"),
    ("data", "n_samples", 1, r"'DataState.n_samples' must be at least 2, not 1"),
    ("data", "noise", -0.1, r"'DataState.noise' must be at least 0"),
]
if NO_GPU:  # without a device the method list has no GPU builder
    BOUNDS.append(("graph", "method", "csr2", r"'GraphState.method' does not accept 'csr2'"))


@pytest.mark.parametrize("part, name, value, match", BOUNDS,
                         ids=[f"{p}.{n}={v!r}" for p, n, v, _ in BOUNDS])
def test_parameters_refuse_values_out_of_bounds(state, part, name, value, match):
    obj = getattr(state, part)
    before = getattr(obj, name)
    with pytest.raises(ValueError, match=match):
        setattr(obj, name, value)
    assert getattr(obj, name) == before  # nothing changed


# ----------------------------------------------- what the library judges, as messages


def _upload(state, name, content: bytes) -> str:
    state.data.set_file(name, content)
    assert not state.load()
    return state.data.error


def _claiming_npy() -> bytes:
    """192 bytes whose .npy header claims (10**9, 2) float64 (issue 15)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 2)})
    return header.getvalue() + bytes(64)


def _claiming_npz() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("X.npy", _claiming_npy())
    return buf.getvalue()


def zip_bomb(expanded: int = 600 * 2**20) -> bytes:
    """A small .npz whose member X decompresses to `expanded` bytes of zeros."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("X.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(
                fh, {"descr": "<f8", "fortran_order": False, "shape": (expanded // 16, 2)})
            chunk = bytes(2**20)
            for _ in range(expanded // len(chunk)):
                fh.write(chunk)
    return buf.getvalue()


#: (upload name, content, regex of the message). The file named in the library's part
#: of the message is the uploaded file's own name.
UPLOADS = [
    ("ragged.csv", b"1,2\n3,4\n5,6,7\n",
     r"^Error while reading ragged.csv: \S+: ragged rows \(Expected 2 fields in line 3"),
    ("text.csv", b"a,b\n1,x\n2,3\nz,5\n", r"^Error while reading text.csv: \S+: column '\w' is "
     r"not numeric"),
    ("nan.csv", b"1,2\nnan,3\n4,5\n", r"^Error while reading nan.csv: .*non-finite value"),
    ("empty.csv", b"", r"^Error while reading empty.csv: \S+: the file is empty"),
    ("one-row.csv", b"1,2,3\n", r"^Error while reading one-row.csv: \S+ has n=1 samples"),
    ("garbage.npy", bytes(range(256)), r"^Error while reading garbage.npy: \S+: not a readable "
     r"NumPy file"),
    ("garbage.parquet", b"PAR1" + bytes(64), r"^Error while reading garbage.parquet: \S+: not a "
     r"readable Parquet file"),
    ("data.xlsx", b"PK\x03\x04", r"^data.xlsx: unknown file type '.xlsx'; allowed: .csv"),
    # -- issue 15 ----------------------------------------------------------------------
    ("claims.npy", _claiming_npy(), r"^Error while reading claims.npy: claims.npy: truncated "
     r"or damaged: the header claims the array of shape \(1000000000, 2\) float64"),
    ("claims.npz", _claiming_npz(), r"^Error while reading claims.npz: claims.npz: member 'X' "
     r"of shape \(1000000000, 2\) float64, decompressed needs about 14.9 GiB, more than the "
     r"app's limit on what an upload may expand to of 512 MiB"),
    ("rows.parquet", lying_parquet(), r"^Error while reading rows.parquet: rows.parquet: "
     r"75,000,000 rows × 1 columns, decoded needs about 572 MiB, more than the app's limit on "
     r"what an upload may expand to of 512 MiB"),
    ("thousands.csv", b"a;b\n1,234;7\n2,500;8\n", r"^Error while reading thousands.csv: "
     r"thousands.csv: the decimal mark is ambiguous"),
    ("too-large.csv", b"1,2\n" * (13 * 2**18), r"^too-large.csv: the file is 13.0 MiB, more "
     r"than the 12 MiB an upload may have"),
    ("cr-only-one-row.csv", b"a,b\r1,2\r", r"^Error while reading cr-only-one-row.csv: \S+ has "
     r"n=1 samples"),
]


@pytest.mark.parametrize("name, content, match", UPLOADS, ids=[u[0] for u in UPLOADS])
def test_a_bad_upload_is_a_message_and_the_data_stays(state, name, content, match):
    before = state.dataset
    text = _upload(state, name, content)
    assert re.search(match, text), text
    assert "Traceback" not in text and "Unexpected" not in text
    assert state.dataset is before
    state.data.source = "built-in"  # the next load works
    assert state.load() and state.data.error == ""


def test_upload_messages_name_the_uploaded_file_only(state):
    for name, content, _ in UPLOADS[:-1]:
        text = _upload(state, name, content)
        assert "upload-" not in text and "/tmp" not in text, text


def test_a_file_the_browser_refused_is_the_same_message_and_the_data_stays(state):
    """The upload widget refuses a file over the limit before sending it and reports its
    name and size (DataControls._refused): the alert says what the server would."""
    from explorer.ui._data import UPLOAD_MAX_BYTES

    before = state.dataset
    state.data.refuse_file("big.csv", 20 * 2**20)
    assert state.data.error == ("big.csv: the file is 20.0 MiB, more than the 12 MiB an "
                                "upload may have; subsample it, or read it with the library "
                                "or the command line")
    assert state.dataset is before
    _upload(state, "big.csv", b"1,2\n" * (UPLOAD_MAX_BYTES // 4 + 1))
    assert state.data.error.startswith("big.csv: the file is 12.0 MiB, more than the 12 MiB")
    state.data.source = "built-in"
    assert state.load() and state.data.error == ""


def _stats_error(state, **graph) -> str:
    state.graph.param.update(**graph)
    assert not state.refresh_stats()
    return state.graph.error


def _run_error(state, **settings) -> str:
    state.run_state.param.update(**settings)
    before = state.result
    assert not state.run()
    assert state.result is before  # the last result stays (stale)
    assert not state.run_state.running  # the run is released: Run comes back
    return state.run_state.error


def test_a_similarity_threshold_out_of_range_for_gaussian(state):
    text = _stats_error(state, metric="gaussian", threshold_kind="sim", threshold_sim=-0.5)
    assert re.search(r"computing graph statistics: threshold_sim=-0.5 is out of range; "
                     r"allowed: \(0.0, 1.0\)", text), text
    assert state.graph.stats is None
    state.graph.threshold_sim = 0.5
    assert state.refresh_stats() and state.graph.error == ""


@pytest.mark.skipif(not NO_GPU, reason="a GPU answers here")
def test_asking_for_a_device_where_there_is_none(state):
    text = _stats_error(state, backend="gpu")
    assert "backend='gpu' was asked for but no GPU can be used" in text, text
    assert "backend='gpu' was asked for" in _run_error(state)


def test_a_run_without_any_edge(state):
    state.graph.threshold_sqdist = 1e-9  # isolates every point
    text = _run_error(state, n_clusters=2)
    # the library's message (SpectralClustering.fit), with the app's n
    assert re.search(r"^Error while running the clustering: the graph has no edge: all n=200 "
                     r"points are isolated; raise the threshold", text), text


def test_k_above_the_points_with_edges(state):
    for t in (1e-4, 3e-5, 1e-5, 3e-6, 1e-6):  # a threshold that leaves few points with edges
        stats = explorer.graph_stats(state.dataset.X, metric="uniform", threshold_sqdist=t,
                                     backend="cpu", components=False)
        kept = stats.n - stats.n_isolated
        if 0 < kept < 64:
            break
    assert 0 < kept < 64
    state.graph.param.update(metric="uniform", threshold_kind="sqdist", threshold_sqdist=t)
    text = _run_error(state, n_clusters=kept + 1, auto_k=False)
    assert re.search(rf"n_clusters={kept + 1} is out of range: only {kept} of the n=200 "
                     r"points have an edge", text), text


def test_eigensolver_that_does_not_converge_is_a_message(state):
    text = _run_error(state, eigen_solver="lanczos", eigen_max_iter=1, n_clusters=2)
    assert re.search(r"Error while running the clustering: Lanczos \(ARPACK\) did not "
                     r"converge", text), text


@pytest.mark.parametrize("error, match", [
    (MemoryError("cannot allocate 80 GiB"), r"Out of memory while running the clustering: "
     r"cannot allocate 80 GiB\. To fit, lower the threshold"),
    (type("OutOfMemoryError", (Exception,), {})("out of memory allocating 8,000,000,000 bytes"),
     r"The GPU ran out of memory while running the clustering: out of memory allocating"),
], ids=["host-memory", "device-memory"])
def test_out_of_memory_during_a_run_is_a_message_and_the_app_recovers(state, monkeypatch,
                                                                        error, match):
    state.run()
    good = state.result
    real = explorer.pipeline.runners.build_graph

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(explorer.pipeline.runners, "build_graph", fail)
    text = _run_error(state)
    assert re.search(match, text), text
    assert state.result is good  # the last result stays on screen
    monkeypatch.setattr(explorer.pipeline.runners, "build_graph", real)
    assert state.run() and state.result is not good and state.run_state.error == ""


def test_a_second_run_while_one_is_in_flight_is_refused(state):
    job = state.prepare_run()
    with pytest.raises(RuntimeError, match="a run is already in progress"):
        state.prepare_run()
    state.apply_run(job, job.run_step(0))
    assert state.result is not None and not state.run_state.running


def test_nothing_before_data():
    s = ExplorerState()
    with pytest.raises(ValueError, match="waiting for the data"):
        s.graph.prepare()
    with pytest.raises(ValueError, match="waiting for the data"):
        s.prepare_run()
    assert not s.run_state.running


def test_file_source_without_an_upload():
    s = ExplorerState()
    s.data.source = "file"
    with pytest.raises(ValueError, match="source='file' but no file was uploaded"):
        s.data.prepare()


# ------------------------------------------------------------------ issue 15: the app


def test_a_zip_bomb_upload_is_refused_before_it_expands(state):
    """A ~3 MB upload whose member expands to 600 MiB (issue 15: 4 MB -> 4 GiB took
    the server from 0.3 to 9 GB): refused from the archive's directory."""
    import resource

    content = zip_bomb()
    assert len(content) < 4 * 2**20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text = _upload(state, "bomb.npz", content)
    assert re.search(r"^Error while reading bomb.npz: bomb.npz: member 'X' decompresses to "
                     r"600 MiB \(from .* in the archive\), more than the app's limit on what an "
                     r"upload may expand to, 512 MiB", text), text
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


@pytest.mark.parametrize("sigma, t, match", [
    (1e-200, 0.01, r"sigma=1e-200 is out of range: 2σ² = 0 underflows float32"),
    (1e200, 0.01, r"sigma=1e\+200 is out of range: 2σ² = inf overflows float32"),
    (0.05, 1e39, r"threshold_sqdist=1e\+39 is out of range: beyond float32's normal range"),
], ids=["sigma-1e-200", "sigma-1e200", "threshold-1e39"])
def test_numeric_extremes_are_messages(state, sigma, t, match):
    text = _stats_error(state, metric="gaussian", threshold_kind="sqdist", sigma=sigma,
                        threshold_sqdist=t)
    assert re.search("^Error while computing graph statistics: " + match, text), text
    # Run: the rule is refused before the slot is claimed (the app shows the message)
    with pytest.raises(ValueError, match=match):
        state.prepare_run()
    assert not state.run_state.running


def test_a_run_whose_weights_all_underflow_blames_sigma(state):
    state.graph.param.update(metric="gaussian", threshold_kind="sqdist", sigma=1e-6,
                             threshold_sqdist=0.01)
    text = _run_error(state, n_clusters=2)
    assert re.search(r"every one of the graph's \d+ edges has weight 0: .* raise sigma", text), text


def test_an_upload_with_a_large_offset_is_centred_and_says_so(state):
    rows = "".join(f"{5e6 + 0.01 * i:.4f},{5e6 + 0.02 * (i % 7):.4f}\n" for i in range(40))
    state.data.set_file("utm.csv", ("x,y\n" + rows).encode())
    assert state.load(), state.data.error
    assert re.search(r"Centred by \(5e\+06, 5e\+06\): float32 could not carry the offset",
                     state.data.projection_note), state.data.projection_note
    assert abs(float(state.dataset.X[:, 0].mean())) < 1.0


def test_n_is_capped_by_d_and_memory(state):
    from explorer.ui._data import APP_MAX_VALUES, app_max_n

    top = app_max_n("infinite-digits")
    assert top <= APP_MAX_VALUES // 784 < 5_000_000
    assert app_max_n("moons") <= APP_MAX_VALUES // 2
    state.data.dataset = "infinite-digits"
    state.data.n_samples = 5_000_000  # what the slider offered before (14.6 GiB)
    assert not state.load()
    assert re.search(r"^n_samples=5,000,000 is too many for infinite-digits in the app: at most "
                     rf"{top:,} rows of 784 features", state.data.error), state.data.error
    state.data.dataset = "moons"
    state.data.n_samples = 200
    assert state.load() and state.data.error == ""


# ------------------------------------------------------------- rows of the docs table


def _rows():
    s = ExplorerState()
    s.data.n_samples = 200
    s.load()
    s.graph.graph = "epsilon"  # as the tests' state: the ε-graph the sidebar is centred on
    for part, name, value, _ in BOUNDS:
        try:
            setattr(getattr(s, part), name, value)
            yield f"set {part}.{name} = {value!r}", "(no error)"
        except ValueError as exc:
            yield f"set {part}.{name} = {value!r}", f"ValueError: {exc}"
    for name, content, _ in UPLOADS:
        s.data.set_file(name, content)
        s.load()
        yield f"upload `{name}`", s.data.error
    s.data.source = "built-in"
    s.load()
    s.graph.graph = "epsilon"
    s.graph.param.update(metric="gaussian", threshold_kind="sim", threshold_sim=-0.5)
    s.refresh_stats()
    yield "gaussian threshold_sim = -0.5 (stats)", s.graph.error
    s.graph.param.update(threshold_kind="sqdist")
    if NO_GPU:
        s.graph.backend = "gpu"
        s.refresh_stats()
        yield "backend gpu without a GPU (stats)", s.graph.error
        s.graph.backend = "auto"
    s.graph.threshold_sqdist = 1e-9
    s.run()
    yield "Run with no edge at all", s.run_state.error
    s.graph.threshold_sqdist = 1e-5
    s.run_state.param.update(n_clusters=64)
    s.run()
    yield "Run with k = 64 above the points with edges (threshold 1e-5)", s.run_state.error
    s.graph.threshold_sqdist = 0.01
    s.run_state.param.update(n_clusters=2, eigen_solver="lanczos", eigen_max_iter=1)
    s.run()
    yield "Run, Lanczos with max_iter 1", s.run_state.error
    s.run_state.param.update(eigen_solver="auto", eigen_max_iter=None)
    for sigma, t in ((1e-200, 0.01), (1e200, 0.01), (0.05, 1e39)):
        s.graph.param.update(sigma=sigma, threshold_sqdist=t)
        s.refresh_stats()
        yield f"σ = {sigma:g}, threshold {t:g} (stats)", s.graph.error
        try:
            s.prepare_run()
        except ValueError as exc:  # the app's Run shows it in the run alert
            yield f"σ = {sigma:g}, threshold {t:g} (Run)", str(exc)
        else:  # accepted: release the run this claimed, and say so
            s.run_state.end()
            yield f"σ = {sigma:g}, threshold {t:g} (Run)", "(no error)"
    s.graph.param.update(sigma=1e-6, threshold_sqdist=0.01)
    s.run()
    yield "Run with σ = 1e-6, threshold 0.01 (every weight underflows)", s.run_state.error
    s.graph.param.update(sigma=0.05, threshold_sqdist=0.01)
    s.data.dataset = "infinite-digits"
    s.data.n_samples = 5_000_000
    s.load()
    yield "infinite-digits with n = 5,000,000", s.data.error
    s.data.set_file("bomb.npz", zip_bomb())
    s.load()
    yield "upload `bomb.npz` (2.7 MB, member X expands to 600 MiB)", s.data.error
    s.data.refuse_file("twenty.csv", 20 * 2**20)  # what the upload widget reports
    yield "upload `twenty.csv` (20 MiB: refused in the browser, never sent)", s.data.error


if __name__ == "__main__":
    rows = list(_rows())
    for bad, text in rows:
        print(f"| app | state | {bad} | {' '.join(text.split()).replace('|', chr(92) + '|')} |")
    print(f"<!-- {len(rows)} app rows -->")
