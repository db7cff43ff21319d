"""EdgeRule and BuildOptions: validated once, carried down; defaults computed in one place."""

import dataclasses
import math

import numpy as np
import pytest

import explorer
from explorer import data
from explorer.graph import (  # noqa: E402
    BUILD_FIELDS,
    EDGE_FIELDS,
    THRESHOLD_KINDS,
    BuildOptions,
    EdgeRule,
    build_graph,
    dataset_params,
    default_hypo_max_nnz_row,
    graph_stats,
    suggest_params,
)
from explorer.graph._dispatch import _options_used
from explorer.graph.rule import MissingThreshold


@pytest.fixture
def moons():
    return data.load("moons", n_samples=600)


# --- the rule ------------------------------------------------------------------------


def test_public_names():
    assert explorer.EdgeRule is EdgeRule and explorer.BuildOptions is BuildOptions
    assert not hasattr(explorer.graph, "GraphParams")
    assert set(THRESHOLD_KINDS) == set(EDGE_FIELDS["metric"].choices)


def test_rule_is_frozen_and_validated_on_construction():
    rule = EdgeRule("gaussian", 0.1, "sqdist", 0.02)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.threshold = 1.0
    with pytest.raises(ValueError, match="threshold_sqdist=-1.0 is out of range"):
        EdgeRule("uniform", None, "sqdist", -1.0)
    with pytest.raises(ValueError, match="metric='cosine' takes threshold_sim"):
        EdgeRule("cosine", None, "sqdist", 0.5)
    with pytest.raises(ValueError, match="needs sigma"):
        EdgeRule("gaussian", None, "sim", 0.5)
    # sigma is dropped by the metrics that ignore it, values become float
    assert EdgeRule("cosine", 3.0, "sim", 0).sigma is None
    assert isinstance(EdgeRule("cosine", None, "sim", 0).threshold, float)


def test_rule_derived_values():
    rule = EdgeRule.from_args("gaussian", 0.1, threshold_sim=0.5)
    assert rule.threshold_sim == 0.5 and rule.threshold_sqdist is None
    assert rule.sqdist_cutoff == pytest.approx(-2 * 0.01 * math.log(0.5))
    assert rule.radius == pytest.approx(math.sqrt(rule.sqdist_cutoff))
    assert EdgeRule.from_args("cosine", threshold_sim=0.2).radius is None
    assert rule.to_kwargs() == {"metric": "gaussian", "sigma": 0.1, "threshold_sqdist": None,
                                "threshold_sim": 0.5}
    assert EdgeRule.from_args(**rule.to_kwargs()) == rule
    # how a rule was found is not part of what it is
    assert dataclasses.replace(rule, suggested=("sigma",)) == rule


def test_default_hypo_in_one_place():
    assert default_hypo_max_nnz_row(2) == 32 and default_hypo_max_nnz_row(63) == 32
    assert default_hypo_max_nnz_row(64) == 512 and default_hypo_max_nnz_row(784) == 512
    assert BuildOptions().hypo_for(4) == 32 and BuildOptions(7).hypo_for(784) == 7


def test_build_options_validated_once():
    opts = BuildOptions.from_args(16, 1.0, 0.5, {"fullPass": (32, 4)})
    with pytest.raises(TypeError):
        opts.block_shapes["fullPass"] = (1, 1)  # read-only
    with pytest.raises(ValueError, match=r"hypo_max_nnz_row=0 is out of range"):
        BuildOptions(0)
    with pytest.raises(ValueError, match=r"mem_use_rate=1.5 is out of range"):
        BuildOptions(mem_use_rate=1.5)
    with pytest.raises(TypeError, match="block_shapes must be None or a mapping"):
        BuildOptions(block_shapes=[(32, 4)])
    assert opts.to_kwargs()["block_shapes"] == {"fullPass": (32, 4)}


def test_field_declarations_check_like_the_library():
    assert BUILD_FIELDS["hypo_max_nnz_row"].flag == "--hypo-max-nnz-row"
    with pytest.raises(ValueError, match=r"sigma=0.0 is out of range"):
        EDGE_FIELDS["sigma"].check(0.0)
    assert EDGE_FIELDS["threshold_sim"].check(None, allow_none=True) is None


# --- entry points take the object ------------------------------------------------------


def test_build_graph_takes_a_rule_or_keywords(moons):
    kw = {"metric": "gaussian", "sigma": 0.05, "threshold_sqdist": 0.003}
    rule = EdgeRule.from_args(**kw)
    a = build_graph(moons.X, rule, backend="cpu")
    b = build_graph(moons.X, **kw, backend="cpu")
    assert a.rule == b.rule == rule
    assert (a.csr != b.csr).nnz == 0 and a.stats.to_dict() == b.stats.to_dict()
    opts = BuildOptions(hypo_max_nnz_row=5)
    c = build_graph(moons.X, rule, options=opts, backend="cpu")
    assert c.stats.hypo_max_nnz_row == 5
    # a CPU builder used no CSR-2 width: the options record none
    assert c.options == BuildOptions() and b.options == BuildOptions()
    with pytest.raises(TypeError, match="either rule or the keywords"):
        build_graph(moons.X, rule, threshold_sqdist=0.1, backend="cpu")
    with pytest.raises(TypeError, match="rule must be an explorer.EdgeRule"):
        build_graph(moons.X, kw, backend="cpu")
    with pytest.raises(TypeError, match="either options or the keywords"):
        build_graph(moons.X, rule, options=opts, hypo_max_nnz_row=3, backend="cpu")
    with pytest.raises(TypeError, match="options must be an explorer.graph.BuildOptions"):
        build_graph(moons.X, rule, options={"hypo_max_nnz_row": 3}, backend="cpu")


def test_graph_stats_takes_the_rule_and_shares_the_build_path(moons):
    rule = EdgeRule.from_args("uniform", threshold_sqdist=0.004)
    full = graph_stats(moons.X, rule, backend="cpu")
    assert full.to_dict() == build_graph(moons.X, rule, backend="cpu").stats.to_dict()
    fast = graph_stats(moons.X, rule, backend="cpu", components=False)
    assert fast.nnz == full.nnz and fast.n_components is None


def test_options_record_what_the_gpu_builders_ran_with():
    none = BuildOptions()
    assert _options_used(none, "csr2", 4, {}, True).hypo_max_nnz_row == 32
    assert _options_used(none, "csr2", 784, {}, True).hypo_max_nnz_row == 512
    assert _options_used(none, "csr2", 4, {"hypo": 54}, True).hypo_max_nnz_row == 54
    assert _options_used(BuildOptions(8), "csr2", 4, {"hypo": 8}, True).hypo_max_nnz_row == 8
    csr3 = _options_used(none, "csr3", 4, {"sp_max_nz_pct": 0.01}, True)
    assert csr3.sp_max_nz_pct == 0.01 and csr3.mem_use_rate == 0.8
    assert csr3.hypo_max_nnz_row is None
    shapes = BuildOptions(block_shapes={"fullPass": (32, 4)})
    assert _options_used(shapes, "csr1", 4, {}, True).block_shapes == {"fullPass": (32, 4)}
    assert _options_used(shapes, "kdtree", 4, {}, False) == BuildOptions()


# --- choosing what is left out -------------------------------------------------------


def test_suggest_fills_only_what_is_left_out(moons):
    auto = EdgeRule.suggest(moons.X, n_clusters=2)
    assert auto.suggested == ("metric", "threshold_sqdist", "sigma")
    assert auto.to_kwargs() == {**dict.fromkeys(("threshold_sim",)), **{
        k: v for k, v in dataset_params(moons).items() if k != "n_clusters"}}
    given = EdgeRule.suggest(moons.X, "gaussian", 0.02, threshold_sqdist=0.01)
    assert given == EdgeRule.from_args("gaussian", 0.02, 0.01) and given.suggested == ()
    # σ from a given squared-distance threshold: exp(-4) at the cutoff, no data scan
    only_t = EdgeRule.suggest(moons.X, threshold_sqdist=0.0008)
    assert only_t.metric == "gaussian" and only_t.sigma == 0.01
    assert only_t.suggested == ("sigma",)
    # a gaussian similarity threshold: σ from the data's distance scale
    sim = EdgeRule.suggest(moons.X, threshold_sim=0.5)
    assert sim.metric == "gaussian" and sim.sigma == auto.sigma
    assert set(sim.suggested) == {"metric", "sigma"}
    uniform = EdgeRule.suggest(moons.X, "uniform")
    assert uniform.threshold == auto.threshold and uniform.sigma is None


def test_suggest_high_d_takes_cosine(rng):
    X = rng.normal(size=(300, 20)).astype(np.float32)
    rule = EdgeRule.suggest(X)
    assert rule.metric == "cosine" and 0 <= rule.threshold < 1
    assert rule.suggested == ("metric", "threshold_sim")
    assert suggest_params(X) == {"n_clusters": "auto", **{
        k: v for k, v in rule.to_kwargs().items() if v is not None}}


def test_suggest_from_a_ready_suggestion(moons):
    rule = EdgeRule.suggest(moons.X, suggestion=dataset_params(moons))
    assert rule.to_kwargs()["threshold_sqdist"] == dataset_params(moons)["threshold_sqdist"]
    with pytest.raises(MissingThreshold, match="metric='cosine' needs threshold_sim") as err:
        EdgeRule.suggest(moons.X, "cosine", suggestion=dataset_params(moons))
    assert err.value.kind == "sim" and isinstance(err.value, ValueError)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"metric": "euclid"}, ValueError, "metric='euclid' is not allowed"),
    ({"threshold_sqdist": 0.1, "threshold_sim": 0.5}, ValueError, "got both"),
    ({"sigma": -1.0}, ValueError, r"sigma=-1.0 is out of range"),
    ({"metric": "gaussian", "sigma": None, "threshold_sqdist": 0.1}, ValueError, "needs sigma"),
    ({"metric": "cosine", "threshold_sqdist": 0.1}, ValueError, "takes threshold_sim"),
    ({"threshold_sim": 2.0}, ValueError, r"threshold_sim=2.0 is out of range"),
])
def test_suggest_validates_what_is_given(moons, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        EdgeRule.suggest(moons.X, **kwargs)


@pytest.mark.parametrize("n", [2, 3, 20, 30])
@pytest.mark.parametrize("d", [1, 2, 5, 10])
def test_suggest_gives_every_row_an_edge_on_tiny_data(rng, n, d):
    X = rng.normal(size=(n, d)).astype(np.float32)
    rule = EdgeRule.suggest(X)
    g = build_graph(X, rule, backend="cpu")
    assert g.nnz > 0


def test_suggest_on_identical_rows():
    for d in (2, 12):
        X = np.ones((25, d), dtype=np.float32)
        g = build_graph(X, EdgeRule.suggest(X), backend="cpu")
        assert g.nnz == 25 * 24  # the complete graph


def test_rule_and_options_pickle():
    import pickle

    rule = EdgeRule.suggest(np.arange(40, dtype=np.float32).reshape(20, 2))
    back = pickle.loads(pickle.dumps(rule))
    assert back == rule and back.suggested == rule.suggested
    opts = BuildOptions(16, block_shapes={"fullPass": (32, 4)})
    assert pickle.loads(pickle.dumps(opts)) == opts


@pytest.mark.gpu
@pytest.mark.parametrize("d", [4, 64])
def test_csr2_records_the_default_width_and_block_shapes_it_ran_with(rng, d):
    X = rng.random((500, d), dtype=np.float32)
    g = build_graph(X, EdgeRule.suggest(X), method="csr2", backend="gpu")
    width = default_hypo_max_nnz_row(d)
    assert g.options.hypo_max_nnz_row == width and g.stats.hypo_max_nnz_row == width
    # and the block shapes it launched (Table 4's for this d and width)
    assert set(g.options.block_shapes) == {"fullPass", "ellpackToCSR", "supPass"}
    given = build_graph(X, g.rule, method="csr2", hypo_max_nnz_row=3, backend="gpu")
    assert given.options.hypo_max_nnz_row == 3 == given.stats.hypo_max_nnz_row
