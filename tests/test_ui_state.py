"""The app's state and logic without a browser (and without Panel).

parameters -> statistics -> run -> results, the error paths, uploads, the guided
tour and the exports, all through explorer.ui.state and the real library.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

# The app's packages are optional (a GPU server often has none): skip, saying why.
pytest.importorskip("param", reason="the app's state classes need param (pip install -e '.[app]')")

import explorer  # noqa: E402
from explorer._backend import gpu_status  # noqa: E402
from explorer.ui import _export  # noqa: E402
from explorer.ui._errors import describe_error  # noqa: E402
from explorer.ui._jobs import RUN_NICENESS, LatestOnly, publishing, run_in_process  # noqa: E402
from explorer.ui._run import execute  # noqa: E402
from explorer.ui._teaching import TOUR_GRAPH_MAX_N  # noqa: E402
from explorer.ui.state import STAGES, STEPS, ExplorerState, project_2d  # noqa: E402


def _state(dataset="moons", n=400, **data) -> ExplorerState:
    s = ExplorerState()
    s.data.param.update(dataset=dataset, n_samples=n, **data)
    assert s.load(), s.data.error
    return s


def _connect(s: ExplorerState, factor=6.0) -> None:
    """Raise the suggested distance threshold so the graph is connected (clean runs)."""
    s.graph.threshold_sqdist = s.graph.threshold_sqdist * factor
    s.graph.sigma = float(np.sqrt(s.graph.threshold_sqdist / 8))


def _csv(rows, header=None) -> bytes:
    lines = ([",".join(header)] if header else []) + [",".join(map(str, r)) for r in rows]
    return ("\n".join(lines) + "\n").encode()


# --------------------------------------------------------------------------- layering


def test_state_imports_neither_panel_nor_holoviews():
    code = (
        "import sys, explorer.ui.state\n"
        "bad = [m for m in ('panel', 'holoviews', 'bokeh', 'datashader') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --------------------------------------------------------------------------- data


def test_load_builtin_adopts_suggested_parameters():
    s = _state("blobs", 600, random_state=3)
    ds = s.dataset
    assert (ds.n, ds.d) == (600, 2) and ds.n_classes == 3
    assert s.data.xy.shape == (600, 2) and s.data.projection_note == ""
    assert s.graph.metric == ds.suggested["metric"]
    assert s.graph.threshold_sqdist == pytest.approx(ds.suggested["threshold_sqdist"])
    assert s.graph.sigma == pytest.approx(ds.suggested["sigma"])
    assert s.run_state.n_clusters == 3 and not s.run_state.auto_k
    lo, hi = s.graph.log_sqdist_range
    assert lo < np.log10(s.graph.threshold_sqdist) < hi


def test_noise_drives_the_option_each_generator_has():
    s = ExplorerState()
    s.data.dataset = "blobs"
    assert s.data.noise_option == "cluster_std"
    s.data.dataset = "moons"
    assert s.data.noise_option == "noise"
    s.data.noise = 0.0
    s.data.n_samples = 300
    assert s.load()
    # noise 0: every point lies exactly on its half circle of the unit-square moons.
    ref = explorer.data.load("moons", n_samples=300, noise=0.0)
    np.testing.assert_array_equal(s.dataset.X, ref.X)
    s.data.dataset = "varied"  # a spread per cluster: no single noise control
    assert s.data.noise_option is None


def test_high_dimensional_data_is_drawn_as_its_pca_projection():
    s = _state("digits", 1797)
    xy, note = s.data.xy, s.data.projection_note
    assert xy.shape == (1797, 2) and "PCA" in note and "64" in note
    ref = PCA(n_components=2).fit_transform(s.dataset.X.astype(np.float64))
    for j in range(2):  # components are defined up to sign
        assert abs(np.corrcoef(xy[:, j], ref[:, j])[0, 1]) > 0.9999


@given(n=st.integers(3, 60), d=st.integers(1, 7), seed=st.integers(0, 2**32 - 1))
def test_projection_shape_and_order_of_variance(n, d, seed):
    X = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    xy, note = project_2d(X)
    assert xy.shape == (n, 2) and np.isfinite(xy).all()
    if d == 2:
        np.testing.assert_array_equal(xy, X)
    elif d > 2:
        assert xy[:, 0].var() >= xy[:, 1].var() * (1 - 1e-4) - 1e-9
        np.testing.assert_allclose(xy.mean(axis=0), 0, atol=1e-4 * max(1, np.abs(X).max()))


# --------------------------------------------------------------------------- statistics


def test_statistics_are_the_library_statistics():
    s = _state("moons", 800)
    s.graph.threshold_sqdist *= 2
    assert s.refresh_stats()
    expected = explorer.graph_stats(s.dataset.X, **s.graph.edge_kwargs(), backend="auto")
    assert s.graph.stats.to_dict() == expected.to_dict()
    assert not s.graph.stats.estimated and s.graph.stats.n_components is not None
    assert s.graph.stats_seconds > 0 and s.graph.stats_error == ""


def test_statistics_follow_hypo_max_nnz_row():
    s = _state("moons", 500)
    s.graph.hypo_max_nnz_row = 3
    assert s.refresh_stats()
    counts = np.diff(explorer.build_graph(s.dataset.X, **s.graph.edge_kwargs()).csr.indptr)
    assert s.graph.stats.hypo_max_nnz_row == 3
    assert s.graph.stats.rows_over_hypo == int((counts > 3).sum())


def test_large_data_statistics_are_sampled_and_say_so():
    s = _state("moons", 3000)
    s.graph.exact_max_n = 1000
    s.graph.sample_rows = 500
    assert s.refresh_stats()
    st_ = s.graph.stats
    assert st_.estimated and st_.sample_rows == 500 and st_.n_components is None
    exact = explorer.graph_stats(s.dataset.X, **s.graph.edge_kwargs())
    assert st_.nnz == pytest.approx(exact.nnz, rel=0.2)


def test_stale_statistics_are_dropped():
    s = _state("moons", 400)
    first = s.prepare_stats()
    s.graph.threshold_sqdist *= 3
    second = s.prepare_stats()
    late, fresh = first(), second()
    assert s.apply_stats(fresh)
    assert not s.apply_stats(late)  # finished last, but asked for first
    assert s.graph.stats.nnz == fresh.stats.nnz != late.stats.nnz


def test_statistics_come_fast_then_complete():
    s = _state("moons", 600)
    fast = s.prepare_stats()()
    complete = s.prepare_components()()
    assert s.apply_stats(fast)
    assert s.graph.stats.n_components is None and not s.graph.stats_complete
    assert s.apply_stats(complete) and s.graph.stats_complete
    expected = explorer.graph_stats(s.dataset.X, **s.graph.edge_kwargs())
    assert s.graph.stats.to_dict() == expected.to_dict()
    assert not s.apply_stats(fast)  # the fast figures never replace complete ones
    with pytest.raises(ValueError, match="complete"):
        s.prepare_components()
    s.graph.threshold_sqdist *= 2
    assert not s.apply_stats(complete)  # parameters moved on
    s.graph.exact_max_n = 100  # sampled: nothing for a components job to add
    with pytest.raises(ValueError, match="sampled"):
        s.prepare_components()


@pytest.mark.skipif(gpu_status()[0], reason="checks the message shown where no GPU exists")
def test_statistics_error_is_a_message_and_the_state_recovers():
    s = _state("moons", 300)
    s.graph.backend = "gpu"
    assert not s.refresh_stats()
    assert "backend='gpu'" in s.graph.stats_error and s.graph.stats is None
    s.graph.backend = "cpu"
    assert s.refresh_stats() and s.graph.stats_error == "" and s.graph.stats is not None


def test_metric_change_keeps_threshold_kind_valid():
    s = _state("moons", 300)
    s.graph.metric = "cosine"
    assert s.graph.threshold_kind == "sim" and s.graph.epsilon is None
    kw = s.graph.edge_kwargs()
    assert kw["threshold_sqdist"] is None and kw["sigma"] is None
    s.graph.metric = "uniform"
    assert s.graph.threshold_kind == "sqdist"
    s.graph.metric = "gaussian"
    s.graph.threshold_kind = "sim"
    s.graph.threshold_sim = 0.5
    # the distance a gaussian similarity threshold stands for: sigma * sqrt(-2 ln t)
    assert s.graph.epsilon == pytest.approx(s.graph.sigma * np.sqrt(-2 * np.log(0.5)))
    assert s.refresh_stats()


def test_methods_offered_are_the_backends():
    s = ExplorerState()
    s.graph.backend = "cpu"
    assert set(s.graph.param.method.objects) == {"auto", *explorer.graph.CPU_METHODS}
    s.graph.method = "bruteforce"
    assert s.graph.build_kwargs()["method"] == "bruteforce"


# --------------------------------------------------------------------------- runs


def test_run_moons_end_to_end():
    s = _state("moons", 600, random_state=1)
    _connect(s)
    s.run_state.n_clusters = 2
    outcome = s.run()
    assert outcome.error == "" and s.run_state.error == ""
    r = s.result
    y = s.dataset.y
    assert r.labels.shape == (600,) and r.n_clusters == 2
    assert adjusted_rand_score(y, r.labels) > 0.99
    assert r.scores["spectral"]["ari"] == pytest.approx(adjusted_rand_score(y, r.labels))
    assert r.scores["spectral"]["nmi"] == pytest.approx(normalized_mutual_info_score(y, r.labels))
    assert r.scores["kmeans"]["ari"] == pytest.approx(adjusted_rand_score(y, r.kmeans_labels))
    assert list(r.timings) == [k for k, _ in STAGES] + ["total"]
    assert all(v >= 0 for v in r.timings.values())
    assert np.all(np.diff(r.eigenvalues) >= -1e-12) and len(r.eigenvalues) >= 10
    assert r.k_suggested == explorer.embedding.eigengap_k(r.eigenvalues)
    assert r.vectors.shape == (600, len(r.eigenvalues)) and r.embedding.shape == (600, 2)
    finite = np.isfinite(r.embedding).all(axis=1)
    np.testing.assert_allclose(np.linalg.norm(r.embedding[finite], axis=1), 1, rtol=1e-6)
    assert r.backend == "cpu" and r.method in explorer.graph.CPU_METHODS
    assert r.csr.shape == (600, 600) and sp.issparse(r.csr)
    assert not s.run_state.running and s.run_state.stage == ""


def test_run_is_spectral_clustering_stage_by_stage():
    """With no extra eigenpairs the app's staged run is SpectralClustering.fit exactly."""
    s = _state("blobs", 500, random_state=2)
    _connect(s, 3.0)
    s.run_state.param.update(n_clusters=3, random_state=5, n_eigenpairs=1)
    s.run()
    g = s.graph
    sc = explorer.SpectralClustering(
        n_clusters=3, metric=g.metric, sigma=g.sigma, threshold_sqdist=g.threshold_sqdist,
        random_state=5, backend="cpu",
    ).fit(s.dataset.X)
    np.testing.assert_array_equal(s.result.labels, sc.labels_)
    np.testing.assert_array_equal(s.result.eigenvalues, sc.eigenvalues_)


def test_extra_eigenpairs_for_the_spectrum_keep_the_clustering():
    s = _state("blobs", 500, random_state=2)
    _connect(s, 3.0)
    s.run_state.param.update(n_clusters=3, random_state=5)
    s.run()
    assert len(s.result.eigenvalues) == 10 and s.result.embedding.shape[1] == 3
    first = s.result
    s.run_state.n_eigenpairs = 6
    s.run()
    assert len(s.result.eigenvalues) == 6
    assert adjusted_rand_score(first.labels, s.result.labels) > 0.99
    np.testing.assert_allclose(s.result.eigenvalues[:3], first.eigenvalues[:3], atol=1e-8)


def test_auto_k_finds_the_blobs():
    s = _state("blobs", 600, random_state=4)
    _connect(s, 3.0)
    s.run_state.auto_k = True
    s.run()
    assert s.result.n_clusters == 3 == s.result.k_suggested
    assert s.result.scores["spectral"]["ari"] > 0.99


def test_run_reports_each_stage_in_order():
    s = _state("moons", 300)
    _connect(s)
    seen = []
    s.run_state.param.watch(lambda e: seen.append(e.new), "stage")
    s.run()
    assert [x for x in seen if x] == [k for k, _ in STAGES]


def test_second_run_is_refused_while_one_runs():
    s = _state("moons", 300)
    _connect(s)
    job = s.prepare_run()
    assert s.run_state.running
    with pytest.raises(RuntimeError, match="already in progress"):
        s.prepare_run()
    s.apply_run(job())
    assert not s.run_state.running and s.result is not None
    s.run()  # the slot is free again


def test_run_errors_are_messages_and_the_app_keeps_working():
    s = _state("moons", 40)
    s.graph.threshold_sqdist = 1e-12  # no point has a neighbour
    outcome = s.run()
    assert "isolated" in outcome.error and s.result is None and not s.run_state.running
    assert s.run_state.error == outcome.error
    s.graph.threshold_sqdist = 0.05
    s.run_state.n_clusters = 64  # more clusters than points
    outcome = s.run()
    assert "n_clusters=64" in outcome.error and s.result is None
    s.run_state.n_clusters = 2
    assert s.run().error == "" and s.result is not None and s.run_state.error == ""


@pytest.mark.skipif(gpu_status()[0], reason="checks the message shown where no GPU exists")
def test_run_on_missing_gpu_is_a_readable_error():
    s = _state("moons", 300)
    s.graph.backend = "gpu"
    outcome = s.run()
    assert outcome.error.startswith("Error while the graph stage:")
    assert "backend='gpu'" in outcome.error and "Traceback" not in outcome.error


def test_too_many_components_are_warned_about():
    s = _state("blobs", 600, random_state=0)
    s.graph.threshold_sqdist /= 4  # fragments the blobs
    s.run_state.n_clusters = 2
    s.run()
    comps = s.result.graph_stats.n_components - s.result.graph_stats.n_isolated
    assert comps > 2
    assert any(f"{comps} connected components" in w for w in s.result.warnings)


def test_new_data_clears_the_result():
    s = _state("moons", 300)
    _connect(s)
    s.run()
    assert s.result is not None
    s.data.random_state = 9
    s.load()
    assert s.result is None


def test_error_messages_name_memory_problems():
    text = describe_error(MemoryError(), "building the graph")
    assert text.startswith("Out of memory while building the graph") and "threshold" in text

    class OutOfMemoryError(Exception):  # the name CuPy's allocator raises
        pass

    text = describe_error(OutOfMemoryError("out of memory allocating 8,000,000 bytes"), "x")
    assert text.startswith("The GPU ran out of memory") and "CPU backend" in text
    assert describe_error(ValueError("sigma=-1 is out of range"), "y").endswith(
        "sigma=-1 is out of range"
    )
    assert describe_error(KeyError("k"), "z").startswith("Unexpected KeyError while z")


# --------------------------------------------------------------------------- files


def test_uploaded_csv_with_a_label_column(rng):
    X = rng.normal(size=(120, 2)).round(4)
    y = (X[:, 0] > 0).astype(int)
    s = ExplorerState()
    s.data.set_file("points.csv", _csv(np.column_stack([X, y]).tolist(), ["x", "y", "label"]))
    assert s.load(), s.data.error
    ds = s.dataset
    assert (ds.n, ds.d) == (120, 2) and ds.name == "points.csv"
    np.testing.assert_allclose(ds.X, X, rtol=1e-6)
    np.testing.assert_array_equal(ds.y, y)
    assert s.data.label_column == 2 and None in s.data.label_options.values()
    s.data.choose_label(None)  # no labels: the label column becomes a feature
    assert s.load()
    assert s.dataset.d == 3 and s.dataset.y is None and s.data.label_column is None


def test_uploaded_csv_with_text_labels_last(rng):
    X = rng.uniform(size=(50, 3)).round(5)
    names = np.where(X[:, 0] > 0.5, "big", "small")
    rows = [[*x, c] for x, c in zip(X.tolist(), names, strict=True)]
    s = ExplorerState()
    s.data.set_file("shapes.csv", _csv(rows))
    assert s.load(), s.data.error
    assert s.dataset.d == 3 and s.dataset.n_classes == 2 and s.data.label_column == 3


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_uploaded_binary_formats(rng, suffix):
    X = rng.normal(size=(80, 3)).astype(np.float32)
    buf = io.BytesIO()
    if suffix == ".npy":
        np.save(buf, X)
    else:
        import pandas as pd

        pd.DataFrame(X, columns=["a", "b", "c"]).to_parquet(buf)
    s = ExplorerState()
    s.data.set_file("m" + suffix, buf.getvalue())
    assert s.load(), s.data.error
    np.testing.assert_array_equal(s.dataset.X, X)
    assert "PCA" in s.data.projection_note


def test_bad_files_are_messages_and_the_data_stays():
    s = _state("moons", 300)
    before = s.dataset
    s.data.set_file("ragged.csv", b"1,2,3\n4,5\n6,7,8\n")
    assert not s.load()
    assert "ragged.csv" in s.data.error and s.dataset is before
    s.data.set_file("table.xlsx", b"PK\x03\x04")
    assert not s.load()
    assert ".xlsx" in s.data.error and ".csv" in s.data.error and s.dataset is before
    s.data.set_file("nan.csv", b"1,2\nnan,4\n5,6\n")
    assert not s.load() and "nan.csv" in s.data.error
    s.data.set_file("fine.csv", _csv([[0, 0], [1, 1], [2, 2]]))
    assert s.load() and s.data.error == "" and s.dataset.n == 3


def test_no_file_no_load():
    s = ExplorerState()
    s.data.source = "file"
    with pytest.raises(ValueError, match="no file"):
        s.prepare_load()


# --------------------------------------------------------------------------- tour


def test_tour_steps_and_bounds():
    s = ExplorerState()
    t = s.teaching
    keys = []
    for _ in range(len(STEPS) + 2):
        keys.append(t.current.key)
        t.next()
    assert keys[: len(STEPS)] == [x.key for x in STEPS] and t.at_end and t.step == len(STEPS) - 1
    for _ in range(len(STEPS) + 2):
        t.previous()
    assert t.at_start and t.step == 0
    assert all(2 <= x.text.count(".") <= 5 for x in STEPS)  # a few sentences each


def test_tour_graph_is_the_graph_of_the_current_parameters():
    s = _state("moons", 500)
    job = s.teaching.prepare_graph(s.dataset.X, s.graph.edge_kwargs())
    assert s.teaching.apply_graph(job())
    expected = explorer.build_graph(s.dataset.X, **s.graph.edge_kwargs()).csr
    assert (s.teaching.csr != expected).nnz == 0


def test_tour_graph_of_large_data_is_the_runs():
    X = np.zeros((TOUR_GRAPH_MAX_N + 1, 2), dtype=np.float32)
    s = ExplorerState()
    job = s.teaching.prepare_graph(X, {"metric": "uniform", "threshold_sqdist": 1.0})
    assert s.teaching.apply_graph(job()) and s.teaching.csr is None and "Run" in s.teaching.note
    marker = sp.csr_matrix((2, 2))
    s.teaching.apply_graph(s.teaching.prepare_graph(X, {}, run_csr=marker)())
    assert s.teaching.csr is marker


# --------------------------------------------------------------------------- export


def test_exports_round_trip(tmp_path):
    s = _state("moons", 300)
    _connect(s)
    s.run()
    r = s.result
    table = np.loadtxt(io.BytesIO(_export.labels_csv(r)), delimiter=",", skiprows=1, dtype=int)
    header = _export.labels_csv(r).decode().splitlines()[0]
    assert header == "index,spectral,kmeans,truth"
    np.testing.assert_array_equal(table[:, 0], np.arange(300))
    np.testing.assert_array_equal(table[:, 1], r.labels)
    np.testing.assert_array_equal(table[:, 2], r.kmeans_labels)
    np.testing.assert_array_equal(table[:, 3], s.dataset.y)
    path = tmp_path / "g.npz"
    path.write_bytes(_export.graph_npz(r))
    assert (sp.load_npz(path) != r.csr).nnz == 0
    doc = json.loads(_export.result_json(r))
    assert doc["graph_stats"] == json.loads(json.dumps(r.graph_stats.to_dict()))
    assert doc["n_clusters"] == 2 and doc["dataset"] == "moons" and doc["n"] == 300
    assert doc["eigenvalues"] == pytest.approx(r.eigenvalues.tolist())
    assert doc["scores"]["spectral"]["ari"] == pytest.approx(r.scores["spectral"]["ari"])
    assert set(doc["timings_s"]) == set(r.timings)


# --------------------------------------------------------------------------- jobs


def test_latest_only_coalesces_requests():
    """Requests made while a job runs collapse into one more job with the latest value."""
    value = {"v": 0}
    started, applied = [], []
    release = threading.Event()

    def prepare():
        v = value["v"]
        started.append(v)

        def work():
            release.wait(5)
            return v

        return work

    async def scenario():
        runner = LatestOnly(prepare, applied.append)
        first = asyncio.ensure_future(runner.request())
        await asyncio.sleep(0.05)
        for v in range(1, 6):  # a slider dragged through five positions
            value["v"] = v
            await runner.request()  # returns at once: one is in flight
        assert runner.running
        release.set()
        await asyncio.wait_for(first, 5)
        assert not runner.running

    t0 = time.perf_counter()
    asyncio.run(scenario())
    assert started == [0, 5] and applied == [0, 5]
    assert time.perf_counter() - t0 < 5


def _where(message, report):
    """Runs in a run worker: reports `message`, returns where and how it ran."""
    from threadpoolctl import threadpool_info

    report(*message)
    threads = {info["num_threads"] for info in threadpool_info()}
    return os.getpid(), os.nice(0) if hasattr(os, "nice") else None, threads


def _die(arg, report):
    """Runs in a run worker: reports, then ends the process as the OOM killer would."""
    report(arg)
    os._exit(9)


def test_runs_execute_in_worker_processes_at_lower_priority():
    seen = []
    pid, nice, threads = asyncio.run(run_in_process(_where, (1, "x"), lambda *m: seen.append(m)))
    assert seen == [(1, "x")]  # the progress came back before the result
    assert pid != os.getpid()
    if hasattr(os, "nice"):
        assert nice == min(os.nice(0) + RUN_NICENESS, 19)  # the OS caps niceness at 19
    assert threads <= {1}  # BLAS and OpenMP: one thread each, runs in parallel instead


def test_a_run_in_a_worker_equals_the_run_here():
    s = _state("moons", 300)
    _connect(s)
    job = s.prepare_run()
    stages = []
    there = asyncio.run(run_in_process(execute, job.spec, lambda i, d: stages.append(i)))
    s.apply_run(there)
    assert stages == [1, 2, 3, 4]  # stage 0 is reported when the run is claimed
    here = s.run().result
    np.testing.assert_array_equal(there.result.labels, here.labels)
    np.testing.assert_array_equal(there.result.kmeans_labels, here.kmeans_labels)
    assert (there.result.csr != here.csr).nnz == 0
    assert there.result.scores == here.scores


@pytest.mark.gpu
def test_a_gpu_run_in_a_worker_equals_the_run_here():
    """The worker initialises CUDA itself (its fork server never touches the GPU)."""
    s = _state("moons", 2000)
    _connect(s)
    s.graph.backend = "gpu"
    job = s.prepare_run()
    there = asyncio.run(run_in_process(execute, job.spec, job.report))
    s.apply_run(there)
    assert there.error == "" and there.result.backend == "gpu"
    here = s.run().result
    # Same seed, same device; sums in a different order (atomics) may move the last bits.
    assert adjusted_rand_score(there.result.labels, here.labels) > 0.99


def test_a_failing_run_in_a_worker_is_a_message():
    s = _state("moons", 40)
    s.graph.threshold_sqdist = 1e-12  # no point has a neighbour
    job = s.prepare_run()
    outcome = asyncio.run(run_in_process(execute, job.spec, job.report))
    assert outcome.result is None and "isolated" in outcome.error
    assert outcome.error.startswith("Error while the embedding stage:")


def test_a_worker_that_dies_is_an_error_and_is_replaced():
    from concurrent.futures.process import BrokenProcessPool

    seen = []
    with pytest.raises(BrokenProcessPool):
        asyncio.run(run_in_process(_die, "bye", seen.append))
    assert seen == ["bye"]
    pid, _, _ = asyncio.run(run_in_process(_where, (), lambda *m: None))  # a new worker
    assert pid != os.getpid()


def test_run_publications_take_turns_with_other_work():
    """Publications go one at a time, each followed by as long for everything else: work
    that became ready during one (a slider's statistics, needing a few passes of the
    loop) is done before the next publication starts."""
    events = []

    async def publish(name):
        async with publishing():
            events.append((name, time.perf_counter()))
            time.sleep(0.2)  # a redraw holding the event loop

    async def statistics():
        for _ in range(3):
            await asyncio.sleep(0)
        events.append(("statistics", time.perf_counter()))

    async def scenario():
        await asyncio.gather(publish("a"), publish("b"), statistics())

    asyncio.run(scenario())
    assert [name for name, _ in events] == ["a", "statistics", "b"]
    assert events[2][1] - events[0][1] >= 0.4
