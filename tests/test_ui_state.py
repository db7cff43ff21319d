"""The app's state and logic without a browser (and without Panel).

parameters -> statistics -> run -> views, the stages' stale flags and latest-wins
jobs, the error paths, uploads, the guided tour and the exports, all through
explorer.ui.state and the real library.
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

import param  # noqa: E402

import explorer  # noqa: E402
from explorer._backend import gpu_status  # noqa: E402
from explorer.ui import _export  # noqa: E402
from explorer.ui._errors import describe_error  # noqa: E402
from explorer.ui._jobs import (  # noqa: E402
    RUN_NICENESS,
    in_process,
    in_threads,
    publishing,
    run_in_process,
)
from explorer.ui._stage import execute_step  # noqa: E402
from explorer.ui._teaching import TOUR_GRAPH_MAX_N  # noqa: E402
from explorer.ui.state import (  # noqa: E402
    STAGES,
    STEPS,
    ExplorerState,
    Inputs,
    Stage,
    Waiting,
    project_2d,
)


def _state(dataset="moons", n=400, graph="epsilon", **data) -> ExplorerState:
    """A loaded state; on the ε-graph the sidebar is centred on (the tests of ε
    behaviour), or with ``graph=None`` on the library's choice the app opens on."""
    s = ExplorerState()
    s.data.param.update(dataset=dataset, n_samples=n, **data)
    assert s.load(), s.data.error
    if graph is not None:
        s.graph.graph = graph
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


def test_load_builtin_adopts_the_librarys_choice():
    # New data open on what a default fit would build (the library's plan), with the
    # σ and threshold sliders centred on the library's ε rule for the same points.
    s = _state("blobs", 600, graph=None, random_state=3)
    ds = s.dataset
    assert (ds.n, ds.d) == (600, 2) and ds.n_classes == 3
    assert s.data.xy.shape == (600, 2) and s.data.projection_note == ""
    plan = explorer.SpectralClustering(3, random_state=0).plan(ds.X)
    assert s.graph.graph == plan.rule.graph and s.graph.rule == plan.rule
    eps = explorer.EdgeRule.suggest(ds.X, n_clusters=3) if plan.rule.graph != "epsilon" \
        else plan.rule
    assert s.graph.threshold_sqdist == pytest.approx(eps.threshold_sqdist)
    assert s.graph.sigma == pytest.approx(eps.sigma)
    assert plan.affinity_why in s.graph.graph_note
    assert s.run_state.n_clusters == 3 and not s.run_state.auto_k
    lo, hi = s.graph.log_sqdist_range
    assert lo < np.log10(s.graph.threshold_sqdist) < hi


def test_digits_open_on_the_librarys_graph_not_the_data_sets_preset():
    # The teacher's "spectral beats k-means" demo: the app's first Run is the library's
    # default fit (a kNN graph on 64 features), not the data set's cosine preset.
    s = _state("digits", 1797, graph=None)
    assert s.graph.graph == "knn" and s.graph.local_sigma
    assert s.run(), s.run_state.error
    want = explorer.SpectralClustering(10, random_state=0).fit(s.dataset.X)
    assert explorer.metrics.adjusted_rand_score(want.labels_, s.result.labels) > 0.95
    assert s.result.scores["spectral"]["ari"] > s.result.scores["kmeans"]["ari"]


def test_sliders_drive_the_graph_of_the_representatives():
    # Representatives mode (given, or mode="auto"'s choice on many points): the
    # statistics describe the representatives' graph, the sliders' σ and threshold
    # reach the run as given, and the run's graph is the one the statistics describe.
    s = ExplorerState()
    s.graph.backend = "cpu"
    s.data.param.update(dataset="moons", n_samples=6000)
    assert s.load() and s.data.result.representatives is None  # auto: every point
    assert s.graph.representatives is None
    s.run_state.param.update(mode="representatives", n_representatives=400)
    assert s.graph.representatives == {"n_representatives": 400, "random_state": 0,
                                       "n_clusters": 2}
    for big in (False, True):
        if big:  # mode="auto" on many points: the data's plan has representatives
            s.data.n_samples = 120_000
            s.run_state.param.update(mode="auto", n_representatives=None)
            assert s.load() and s.data.result.representatives is not None
            assert s.graph.representatives["n_representatives"] == "auto"
        s.graph.param.update(graph="epsilon", local_sigma=False, metric="gaussian",
                             threshold_kind="sqdist")
        s.graph.threshold_sqdist = s.graph.threshold_sqdist * 2
        assert s.refresh_stats(), s.graph.error
        stats = s.graph.stats
        assert stats.n == (400 if not big else s.data.result.representatives.shape[0])
        kw = s.run_state.estimator_params(s.run_state.snapshot())
        assert kw["threshold_sqdist"] == s.graph.threshold_sqdist
        assert s.run(), s.run_state.error
        r = s.result
        assert r.mode == "representatives"
        assert r.graph_stats.nnz == stats.nnz and r.graph_stats.n == stats.n
        assert f"{s.graph.threshold_sqdist:g}" in r.params["edge_rule"]


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
    assert s.graph.seconds > 0 and s.graph.error == "" and not s.graph.stale


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
    first = s.graph.prepare()
    s.graph.threshold_sqdist *= 3
    assert s.graph.stale  # the inputs moved on from the published statistics
    second = s.graph.prepare()
    late, fresh = first.run_step(0), second.run_step(0)
    assert s.graph.accept(second, fresh)
    assert not s.graph.accept(first, late)  # finished last, but asked for first
    assert s.graph.stats.nnz == fresh.value.nnz != late.value.nnz
    assert s.graph.inputs == second.inputs and s.graph.inputs != first.inputs
    s.graph.threshold_sqdist /= 3  # back: the first job's inputs are current again
    assert s.graph.stale and s.graph.accept(first, late) and not s.graph.stale


def test_statistics_come_fast_then_complete():
    s = _state("moons", 600)
    job = s.graph.prepare()
    assert len(job.steps) == 2
    assert s.graph.accept(job, job.run_step(0), final=False)
    assert s.graph.stats.n_components is None and not s.graph.stats_complete
    assert s.graph.accept(job, job.run_step(1)) and s.graph.stats_complete
    expected = explorer.graph_stats(s.dataset.X, **s.graph.edge_kwargs())
    assert s.graph.stats.to_dict() == expected.to_dict()
    assert not s.graph.wanted and not s.graph.stale  # nothing left to compute
    s.graph.threshold_sqdist *= 2
    assert s.graph.wanted
    assert not s.graph.accept(job, job.run_step(1))  # parameters moved on
    s.graph.exact_max_n = 100  # sampled: no components step
    assert len(s.graph.prepare().steps) == 1


@pytest.mark.skipif(gpu_status()[0], reason="checks the message shown where no GPU exists")
def test_statistics_error_is_a_message_and_the_state_recovers():
    s = _state("moons", 300)
    s.graph.backend = "gpu"
    before = s.graph.stats
    assert not s.refresh_stats()
    assert "backend='gpu'" in s.graph.error and s.graph.stale
    assert s.graph.stats is before  # the last statistics stay, stale
    s.graph.backend = "cpu"
    assert s.refresh_stats() and s.graph.error == "" and not s.graph.stale


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
    assert s.graph.estimator_params()["method"] == "bruteforce"


def test_every_declared_field_is_a_parameter_and_reaches_the_estimator():
    """A field declared in EDGE_FIELDS/BUILD_FIELDS needs no plumbing: it is a GraphState
    parameter, and every one the estimator takes is among a run's keywords."""
    from explorer.graph.rule import BUILD_FIELDS, EDGE_FIELDS

    s = _state("moons", 300)
    known = explorer.SpectralClustering().get_params()
    params = s.graph.estimator_params()
    for name in (*EDGE_FIELDS, *BUILD_FIELDS):
        assert name in s.graph.param
        assert (name in params) == (name in known)
    spec = s.run_state.spec(s.run_state.snapshot())
    assert set(spec.estimator) <= set(known)
    explorer.SpectralClustering(**spec.estimator)  # takes them all


# --------------------------------------------------------------------------- runs


def test_run_moons_end_to_end():
    s = _state("moons", 600, random_state=1)
    _connect(s)
    s.run_state.n_clusters = 2
    assert s.run() and s.run_state.error == ""
    r = s.result
    y = s.dataset.y
    assert r.labels.shape == (600,) and r.n_clusters == 2
    assert adjusted_rand_score(y, r.labels) > 0.99
    assert r.scores["spectral"]["ari"] == pytest.approx(adjusted_rand_score(y, r.labels))
    assert r.scores["spectral"]["nmi"] == pytest.approx(normalized_mutual_info_score(y, r.labels))
    assert r.scores["kmeans"]["ari"] == pytest.approx(adjusted_rand_score(y, r.kmeans_labels))
    assert list(r.timings) == ["graph", "embedding", "kmeans", "k-means (raw data)", "scores",
                               "total"]
    assert all(v >= 0 for v in r.timings.values())
    assert np.all(np.diff(r.eigenvalues) >= -1e-12) and len(r.eigenvalues) >= 10
    assert r.k_suggested == explorer.embedding.eigengap_k(r.eigenvalues)
    assert r.vectors.shape == (600, len(r.eigenvalues)) and r.embedding.shape == (600, 2)
    finite = np.isfinite(r.embedding).all(axis=1)
    np.testing.assert_allclose(np.linalg.norm(r.embedding[finite], axis=1), 1, rtol=1e-6)
    assert r.backend == "cpu" and r.method in explorer.graph.CPU_METHODS
    assert r.csr.shape == (600, 600) and sp.issparse(r.csr)
    assert not s.run_state.running and s.run_state.stage == ""
    assert r.data is s.data.result and not s.run_state.stale
    assert s.refresh_stats()  # the live statistics count what the run did
    assert (r.n_isolated, r.n_unclustered) == (s.graph.stats.n_isolated, 0)


def test_run_is_spectral_clustering():
    """The app's run is SpectralClustering.fit with the sidebar's keywords."""
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
    # the comparison, run in a thread beside the fit on the CPU with k given, is
    # KMeans with the run's k, restarts and seed; with k="auto" it follows the fit
    km = explorer.KMeans(3, n_init=10, random_state=5).fit(s.dataset.X)
    np.testing.assert_array_equal(s.result.kmeans_labels, km.labels_)
    s.run_state.auto_k = True
    s.run()
    km = explorer.KMeans(s.result.params["n_clusters_used"], n_init=10,
                         random_state=5).fit(s.dataset.X)
    np.testing.assert_array_equal(s.result.kmeans_labels, km.labels_)


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
    assert s.apply_run(job, job.run_step(0))
    assert not s.run_state.running and s.result is not None
    assert s.run()  # the run is free again


def test_run_errors_are_messages_and_the_app_keeps_working():
    s = _state("moons", 40)
    s.graph.threshold_sqdist = 1e-12  # no point has a neighbour
    assert not s.run()
    assert "isolated" in s.run_state.error and s.result is None and not s.run_state.running
    s.graph.threshold_sqdist = 0.05
    s.run_state.n_clusters = 64  # more clusters than points
    assert not s.run()
    assert "n_clusters=64" in s.run_state.error and s.result is None
    s.run_state.n_clusters = 2
    assert s.run() and s.result is not None and s.run_state.error == ""


@pytest.mark.skipif(gpu_status()[0], reason="checks the message shown where no GPU exists")
def test_run_on_missing_gpu_is_a_readable_error():
    s = _state("moons", 300)
    s.graph.backend = "gpu"
    assert not s.run()
    error = s.run_state.error
    assert error.startswith("Error while running the clustering:")
    assert "backend='gpu'" in error and "Traceback" not in error


def test_too_many_components_are_warned_about():
    s = _state("blobs", 600, random_state=0)
    s.graph.threshold_sqdist /= 4  # fragments the blobs
    s.run_state.n_clusters = 2
    s.run()
    comps = s.result.graph_stats.n_components - s.result.graph_stats.n_isolated
    assert comps > 2 and s.result.n_components == comps
    # the library's own warning, as it words it, with the counts the views show
    assert any(f"the graph has {comps} connected components besides its "
               f"{s.result.n_isolated} isolated vertices" in w for w in s.result.warnings)
    assert s.result.n_unclustered == int((s.result.labels < 0).sum()) - s.result.n_isolated
    assert f"{s.result.n_unclustered:,} unclustered" in s.result.counts()


def test_new_data_leaves_the_last_run_stale_with_its_own_points():
    s = _state("moons", 300)
    _connect(s)
    s.run()
    first = s.result
    assert first.data.n == 300 and not s.run_state.stale
    s.data.n_samples = 120  # the IndexError: n changed after a run
    assert s.load() and s.dataset.n == 120
    assert s.result is first and s.run_state.stale  # kept, marked stale
    assert first.data.xy.shape[0] == first.labels.shape[0] == 300  # one generation
    assert s.views.result.data is first.data
    assert s.run() and s.result.n == 120 and not s.run_state.stale
    assert s.views.result.run is s.result and s.views.result.labels.shape == (120,)


def test_a_parameter_change_marks_the_run_stale_and_names_the_old_value():
    s = _state("moons", 300)
    _connect(s)
    s.run()
    old = s.graph.threshold_sqdist
    s.graph.threshold_sqdist = old * 2
    assert s.run_state.stale
    assert s.run_state.inputs.changed(s.run_state.snapshot()) == ["threshold_sqdist"]
    assert s.run_state.inputs["threshold_sqdist"] == old
    s.graph.threshold_sqdist = old  # back: the result is current again
    assert not s.run_state.stale
    s.run_state.n_init = 3
    assert s.run_state.stale


def test_views_share_one_colour_per_cluster():
    s = _state("blobs", 600, random_state=4)
    _connect(s, 3.0)
    s.run_state.n_clusters = 3
    assert s.run()
    shown = s.views.result
    y = s.dataset.y
    # spectral renamed after the truth, k-means after spectral: ids agree where they can
    assert np.mean(shown.labels == y) > 0.95
    assert np.mean(shown.kmeans_labels == shown.labels) >= np.mean(
        s.result.kmeans_labels == shown.labels)
    assert adjusted_rand_score(shown.labels, s.result.labels) == 1.0


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
    assert s.data.label_column == "label" and None in s.data.label_options.values()
    assert list(s.data.label_options) == ["(none)", "x", "y", "label"]  # by header name
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
        s.data.prepare()


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


class _Slow(Stage):
    """A stage whose one step returns its input once released (threads)."""

    value = param.Integer(default=0)
    input_names = ("value",)

    def __init__(self, release):
        super().__init__()
        self.release, self.started = release, []

    def steps(self, inputs):
        v = inputs["value"]
        self.started.append(v)

        def step(report):
            self.release.wait(5)
            return v

        return [step]


def test_stages_are_latest_wins():
    """Requests made while a job runs collapse into one more job with the latest value,
    and only the result for the current inputs is published."""
    release = threading.Event()
    stage = _Slow(release)
    stage.executor = in_threads
    published = []
    stage.param.watch(lambda e: published.append(e.new), "result")

    async def scenario():
        first = asyncio.ensure_future(stage.request())
        await asyncio.sleep(0.05)
        assert stage.busy
        for v in range(1, 6):  # a slider dragged through five positions
            stage.value = v
            await stage.request()  # returns at once: one is in flight
        release.set()
        await asyncio.wait_for(first, 5)

    t0 = time.perf_counter()
    asyncio.run(scenario())
    assert stage.started == [0, 5] and published == [5]  # 0 finished after the drag: dropped
    assert stage.result == 5 and not stage.stale and not stage.busy
    assert time.perf_counter() - t0 < 5


def test_inputs_compare_results_by_identity_and_parameters_by_value():
    a, b = object(), object()
    assert Inputs((a,), {"t": 1.0}) == Inputs((a,), {"t": 1.0})
    assert Inputs((a,), {"t": 1.0}) != Inputs((b,), {"t": 1.0})
    assert Inputs((a,), {"t": 1.0}) != Inputs((a,), {"t": 2.0})
    assert Inputs((a,), {"t": 1.0, "k": 2}).changed(Inputs((a,), {"t": 3.0, "k": 2})) == ["t"]
    s = ExplorerState()
    with pytest.raises(Waiting, match="waiting for the data"):
        s.graph.snapshot()
    assert s.graph.waiting == "" or "data" in s.graph.waiting


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
    there = asyncio.run(run_in_process(execute_step, (job.steps[0], job.doing),
                                       lambda i, d: stages.append(i)))
    assert s.apply_run(job, there)
    assert stages == [0, 1, 2]
    assert s.run()
    here = s.result
    np.testing.assert_array_equal(there.value.labels, here.labels)
    np.testing.assert_array_equal(there.value.kmeans_labels, here.kmeans_labels)
    assert (there.value.csr != here.csr).nnz == 0
    assert there.value.scores == here.scores


@pytest.mark.gpu
def test_a_gpu_run_in_a_worker_equals_the_run_here():
    """The worker initialises CUDA itself (its fork server never touches the GPU)."""
    s = _state("moons", 2000)
    _connect(s)
    s.graph.backend = "gpu"
    job = s.prepare_run()
    there = asyncio.run(in_process(job, 0, lambda *m: None))
    s.apply_run(job, there)
    assert there.error == "" and there.value.backend == "gpu"
    assert s.run()
    # Same seed, same device; sums in a different order (atomics) may move the last bits.
    assert adjusted_rand_score(there.value.labels, s.result.labels) > 0.99


def test_a_failing_run_in_a_worker_is_a_message():
    s = _state("moons", 40)
    s.graph.threshold_sqdist = 1e-12  # no point has a neighbour
    job = s.prepare_run()
    outcome = asyncio.run(in_process(job, 0, lambda *m: None))
    assert outcome.value is None and "isolated" in outcome.error
    assert outcome.error.startswith("Error while running the clustering:")
    s.apply_run(job, outcome)
    assert s.run_state.error == outcome.error and not s.run_state.running


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


async def _on_the_loop(job, index, report):
    """A stage executor running the step right here: nothing but the stage's own
    publishing lets other work in."""
    return job.run_step(index, report)


def test_views_of_runs_take_turns_with_other_work():
    """The app's views draw a run when the views stage publishes it (they watch its
    result, not the run's), and that redraw is what holds the event loop: the views
    stages of two sessions publish one at a time, each followed by as long for
    everything else, as the runs do. (Without it, on 2 cores, nine sessions' views
    published back to back for 19-21 s, and a tenth session's statistics waited for
    all of them: tests/test_load.py.)"""
    events = []
    states = []
    for name in "ab":
        s = _state(n=200)
        _connect(s)
        assert s.run_state.run(), s.run_state.error  # the views now wait for their job
        s.views.executor = _on_the_loop
        s.views.param.watch(lambda e, name=name: (events.append((name, time.perf_counter())),
                                                  time.sleep(0.2)),  # a redraw
                            "result")
        states.append(s)

    async def statistics():
        for _ in range(3):
            await asyncio.sleep(0)
        events.append(("statistics", time.perf_counter()))

    async def scenario():
        await asyncio.gather(*(s.views.request() for s in states), statistics())

    asyncio.run(scenario())
    assert [name for name, _ in events] == ["a", "statistics", "b"]
    assert events[2][1] - events[0][1] >= 0.4
    assert all(s.views.result.run is s.result and not s.views.stale for s in states)


def test_each_data_set_keeps_its_own_n():
    """A set opens at its own default n (digits: all 1,797 rows) and the size chosen for
    one set does not carry to another: after digits, moons is back at 5,000; a size the
    user chose for moons comes back with moons."""
    from explorer.ui._data import DEFAULT_N, DataState

    d = DataState()
    assert d.n_samples == DEFAULT_N
    d.dataset = "digits"
    assert d.n_samples == 1797
    d.dataset = "moons"
    assert d.n_samples == DEFAULT_N
    d.n_samples = 3000
    d.dataset = "circles"
    assert d.n_samples == DEFAULT_N
    d.dataset = "moons"
    assert d.n_samples == 3000
    d.n_samples = DEFAULT_N  # back to the default: nothing to remember
    d.dataset = "digits"
    d.dataset = "moons"
    assert d.n_samples == DEFAULT_N
    d.param.update(dataset="circles", n_samples=2500)  # both at once (a notebook): as asked
    assert d.n_samples == 2500
