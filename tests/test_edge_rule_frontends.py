"""The command line and the app take their graph parameters from one declaration and
build the same EdgeRule by the same rule."""

from __future__ import annotations

import json

import pytest

import explorer
from explorer import EdgeRule, cli, data
from explorer.graph import BUILD_FIELDS, EDGE_FIELDS, BuildOptions

# --- command line ----------------------------------------------------------------------


def test_flags_are_generated_from_the_declarations():
    from explorer.params import SPECTRAL_PARAMS

    help_text = cli.build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    for f in (*EDGE_FIELDS.values(), *BUILD_FIELDS.values(), *SPECTRAL_PARAMS.values()):
        if f.name != "graph" and f.name not in cli.NO_FLAG:  # graph: --affinity (--graph)
            assert f.flag in help_text, f.flag
    assert "--graph" in help_text
    assert "allowed (0, inf]" in help_text  # sigma's bounds, from its declaration
    args = cli.build_parser().parse_args(["stats", "moons", "--hypo-max-nnz-row", "8"])
    assert isinstance(args.hypo_max_nnz_row, int)


def test_cli_rule_is_the_estimators_rule():
    ds = data.load("moons", n_samples=400)
    args = cli.build_parser().parse_args(["stats", "moons", "--sigma", "0.02",
                                          "--n-samples", "400", "--backend", "cpu"])
    plan = cli._estimator(args, ds).plan(ds.X)
    rule = plan.rule
    assert rule == EdgeRule.suggest(ds.X, sigma=0.02, n_clusters=2)
    assert rule.sigma == 0.02 and set(rule.suggested) == {"metric", "threshold_sqdist"}


def test_run_json_records_the_rule_and_the_options_that_ran(tmp_path, capsys):
    path = tmp_path / "r.json"
    code = cli.main(["run", "blobs", "--n-samples", "300", "--graph", "epsilon",
                     "--backend", "cpu", "--json", str(path)])
    capsys.readouterr()
    assert code == 0
    doc = json.loads(path.read_text())
    assert doc["edge_rule"].startswith("gaussian σ=")
    assert doc["options_used"] == {}  # a CPU builder takes none of CSR-2/3's knobs
    assert doc["parameters"]["metric"] == "auto"  # the estimator's keyword, as given
    assert "metric" in doc["suggested_parameters_used"]  # ... and what it chose


# --- the app's state -------------------------------------------------------------------

param = pytest.importorskip("param", reason="the app's state needs param")
from explorer.ui._graph import STATS_PARAMS, GraphState  # noqa: E402
from explorer.ui.state import ExplorerState  # noqa: E402


def test_graph_state_parameters_follow_the_declarations():
    g = GraphState()
    for name, f in {**EDGE_FIELDS, **BUILD_FIELDS}.items():
        p = g.param[name]
        if f.type is str:
            assert list(p.objects) == list(f.choices)
        else:
            assert tuple(p.bounds) == f.bounds, name
    assert set(EDGE_FIELDS) <= set(STATS_PARAMS)


def test_graph_state_holds_the_validated_objects():
    g = GraphState(metric="gaussian", sigma=0.1, threshold_kind="sim", threshold_sim=0.5,
                   hypo_max_nnz_row=7)
    assert g.rule == EdgeRule.from_args("gaussian", 0.1, threshold_sim=0.5)
    assert g.options == BuildOptions(hypo_max_nnz_row=7)
    assert g.epsilon == pytest.approx(g.rule.radius)
    kw = g.estimator_params()  # what a run hands SpectralClustering
    assert EdgeRule.from_args(kw["metric"], kw["sigma"], threshold_sim=kw["threshold_sim"]) \
        == g.rule
    assert kw["hypo_max_nnz_row"] == 7
    assert "7" in g.hypo_note(2)
    g.hypo_max_nnz_row = None
    assert "32 (d = 2)" in g.hypo_note(2) and "512 (d = 784)" in g.hypo_note(784)
    assert "suggested" in g.hypo_note()


def test_a_rule_the_sliders_allow_but_the_rule_refuses_is_a_stats_error():
    s = ExplorerState()
    s.data.param.update(dataset="moons", n_samples=200)
    assert s.load()
    s.graph.param.update(graph="epsilon", local_sigma=False, metric="gaussian",
                         threshold_kind="sim", threshold_sim=-0.5)
    assert s.graph.epsilon is None
    assert not s.refresh_stats()
    assert "threshold_sim=-0.5" in s.graph.error


def test_new_data_adopts_the_librarys_rule():
    s = ExplorerState()
    s.data.param.update(dataset="blobs", n_samples=300)
    assert s.load()
    ds = s.dataset
    assert s.graph.rule == explorer.SpectralClustering(ds.n_classes, random_state=0).plan(
        ds.X).rule
    assert s.run(), s.run_state.error
    params = s.result.params
    assert params["edge_rule"] == s.graph.rule.describe()
    assert params["affinity"] == s.graph.graph
    assert params["threshold_sqdist"] == s.graph.rule.threshold_sqdist
    json.dumps(params)  # plain values, for the export


def test_parameters_that_make_no_rule_are_reported_not_raised_by_the_tour():
    s = ExplorerState()
    s.data.param.update(dataset="moons", n_samples=200)
    assert s.load()
    s.graph.param.update(graph="epsilon", local_sigma=False, metric="gaussian",
                         threshold_kind="sim", threshold_sim=-0.5)
    tour = s.teaching.prepare_graph(s.dataset.X, s.graph.edge_kwargs())()
    assert tour.csr is None and "threshold_sim=-0.5" in tour.note
    with pytest.raises(ValueError, match="threshold_sim=-0.5"):
        s.prepare_run()
    assert not s.run_state.running  # the slot was not claimed
