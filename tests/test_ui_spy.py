"""The spy plot's orders (explorer/ui/_order.py) and the views drawing them: the
sparsity tab's order selector and the tour's step of S in three orders.

The orders are computed on a real run of shuffled data (every built-in set comes in
random order) and checked for what the picture is meant to show: a reordering brings
neighbours together (entries near the diagonal: bands), and the by-cluster order puts
every edge inside a cluster into that cluster's diagonal block.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("param", reason="the app's state classes need param (pip install -e '.[app]')")

from explorer.graph import reorder  # noqa: E402
from explorer.ui._order import (  # noqa: E402
    METHODS,
    MODES,
    OrderState,
    compute_row_order,
    matrix_orders,
    orders_of,
)
from explorer.ui.state import ExplorerState  # noqa: E402
from tests._session import act as _act  # noqa: E402


def _connected(state, factor=6.0):
    """Widen the suggested threshold so that each blob is one connected piece."""
    state.graph.threshold_sqdist *= factor
    state.graph.sigma = float(np.sqrt(state.graph.threshold_sqdist / 8))


@pytest.fixture(scope="module")
def shown():
    """A run of 1,500 shuffled blob points (3 clusters), as the views get it."""
    s = ExplorerState()
    s.data.param.update(dataset="blobs", n_samples=1500)
    assert s.load()
    _connected(s)
    assert s.run(), s.run_state.error
    return s.views.result


def _entries(csr):
    rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    return rows, csr.indices


def _mean_distance_from_diagonal(order, csr) -> float:
    rows, cols = _entries(csr)
    return float(np.abs(order.positions(rows) - order.positions(cols)).mean())


def _is_permutation(perm, n) -> bool:
    return perm.shape == (n,) and np.array_equal(np.sort(perm), np.arange(n))


@pytest.mark.parametrize("method", METHODS)
def test_each_order_is_a_permutation_that_makes_bands_then_blocks(shown, method):
    csr, n, labels = shown.run.csr, shown.run.n, shown.labels
    orders = matrix_orders(shown, "by cluster", method)
    loaded, ordered, blocks = (orders[m] for m in MODES)
    assert orders.current is blocks and loaded.perm is None
    assert np.array_equal(loaded.positions(np.arange(n)), np.arange(n))
    assert ordered.method in reorder.METHODS and blocks.method == ordered.method
    for order in (ordered, blocks):
        assert _is_permutation(order.perm, n)
        assert _is_permutation(order.positions(np.arange(n)), n)
        assert np.array_equal(order.positions(order.perm), np.arange(n))  # inverse
    # Shuffled blobs: as loaded an entry is a third of n from the diagonal on average;
    # reordered from S alone, far closer (bands).
    far = _mean_distance_from_diagonal(loaded, csr)
    assert far > n / 5
    assert _mean_distance_from_diagonal(ordered, csr) < far / 3
    # By cluster: clusters one after the other (label order, -1 last) ...
    grouped = labels[blocks.perm]
    key = np.where(grouped < 0, grouped.max() + 1, grouped)
    assert np.all(np.diff(key) >= 0)
    # ... each in the reordered order ...
    for c in np.unique(labels):
        assert np.array_equal(blocks.perm[grouped == c],
                              ordered.perm[labels[ordered.perm] == c])
    # ... so every edge within a cluster lies in that cluster's diagonal block.
    rows, cols = _entries(csr)
    inside = labels[rows] == labels[cols]
    assert inside.mean() > 0.95  # the run found the blobs
    start = {c: int(np.flatnonzero(grouped == c)[0]) for c in np.unique(labels)}
    size = {c: int((labels == c).sum()) for c in np.unique(labels)}
    assert blocks.blocks == tuple((start[c], start[c] + size[c]) for c in sorted(start)
                                  if c >= 0)
    assert loaded.blocks == ordered.blocks == ()
    for r, cl in ((blocks.positions(rows[inside]), labels[rows[inside]]),
                  (blocks.positions(cols[inside]), labels[cols[inside]])):
        lo = np.array([start[c] for c in cl])
        hi = lo + np.array([size[c] for c in cl])
        assert np.all((lo <= r) & (r < hi))
    # What the library reports: the traffic of each order, and the baseline as loaded.
    assert loaded.traffic == loaded.baseline == ordered.baseline == blocks.baseline
    assert ordered.traffic.ratio <= loaded.traffic.ratio
    titles = [o.title() for o in (loaded, ordered, blocks)]
    assert titles[0].startswith("S as loaded") and f"{loaded.traffic.ratio:.2f}×" in titles[0]
    assert f"S reordered ({ordered.method}" in titles[1]
    assert f"{loaded.traffic.ratio:.2f}× → {ordered.traffic.ratio:.2f}×" in titles[1]
    assert f"within: {ordered.method}" in titles[2]


def test_orders_are_computed_once_per_run(shown):
    first = matrix_orders(shown, "by cluster", "rcm")
    again = matrix_orders(shown, "reordered", "rcm")
    assert again["reordered"] is first["reordered"] and again["as loaded"] is first["as loaded"]
    assert "by cluster" not in again.orders and again.current is again["reordered"]
    assert matrix_orders(shown, "as loaded", "jaccard").orders.keys() == {"as loaded"}


def test_concurrent_requests_share_one_computation(shown):
    """The sparsity tab and the tour may ask for one order at once: one computes it,
    the other waits and gets the same object."""
    cache = orders_of(shown)
    barrier = threading.Barrier(2)
    got = []

    def ask():
        barrier.wait()
        got.append(cache.reordered(shown.run.csr, shown.data.dataset.X, "jaccard"))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] is got[1]


def test_auto_shows_the_rules_choice_or_its_cheapest_candidate(shown, rng):
    csr, X = shown.run.csr, shown.data.dataset.X
    rule = reorder.choose_order(csr, "auto", X)
    order, how, reason = compute_row_order(csr, X, "auto")
    if rule.reordered:
        assert (order.method, how, reason) == (rule.method, "the auto rule's choice",
                                                rule.reason)
    else:
        assert "keeps the rows' order" in how and rule.reason.endswith(reason)
    # Points already in a good order: a line, its points sorted, keeps its order; the
    # picture still gets a reordering, the cheapest the rule considered.
    x = np.sort(rng.random(3000)).astype(np.float32)
    line = np.column_stack([x, np.zeros_like(x)])
    from explorer import build_graph

    graph = build_graph(line, metric="uniform", threshold_sqdist=(8 / 3000) ** 2)
    kept = reorder.choose_order(graph.csr, "auto", line)
    assert not kept.reordered
    order, how, reason = compute_row_order(graph.csr, line, "auto")
    costs = {m: c for m, (_, c) in kept.info["candidates"].items()}
    assert order.method == min(costs, key=costs.get) and _is_permutation(order.perm, 3000)
    assert "keeps the rows' order" in how and reason and not reason.startswith("kept")


def test_unknown_mode_or_method_is_refused_naming_it(shown):
    with pytest.raises(ValueError, match="mode must be one of .*'sideways'"):
        matrix_orders(shown, "sideways", "auto")
    with pytest.raises(ValueError, match="method must be one of .*'metis'"):
        matrix_orders(shown, "reordered", "metis")
    with pytest.raises(ValueError):
        OrderState(ExplorerState().views, method="metis")


def test_order_stage_follows_the_run_and_waits_while_inactive(shown):
    s = ExplorerState()
    stage = OrderState(s.views)
    assert not stage.wanted and stage.waiting == "" and stage.inputs_now() is None
    stage.refresh()
    assert stage.waiting == "waiting for a run"
    s.data.param.update(dataset="moons", n_samples=300)
    s.load()
    _connected(s)
    assert s.run()
    assert stage.wanted
    stage.active = False
    assert not stage.wanted and stage.waiting == "waiting to be shown"
    stage.active = True
    assert stage.compute()
    got = stage.result
    assert got.shown is s.views.result and got.mode == "by cluster" and got.method == "auto"
    assert not stage.stale and not stage.wanted
    stage.mode = "as loaded"
    assert stage.stale and stage.wanted
    assert stage.compute() and stage.result.orders.keys() == {"as loaded"}
    assert stage.result["as loaded"] is got["as loaded"]  # cached with the run


# --------------------------------------------------------------------------- views


def _title(obj) -> str:
    import holoviews as hv

    return hv.render(obj, backend="bokeh").title.text


def test_spy_outlines_the_blocks_it_is_given():
    pytest.importorskip("holoviews", reason="the plots need HoloViews (pip install -e '.[app]')")
    import holoviews as hv

    from explorer.ui import plots

    hv.extension("bokeh")
    rows, cols = np.array([0, 1, 3, 4]), np.array([1, 0, 4, 3])
    figure = hv.render(plots.spy(rows, cols, 5, title="S", blocks=[(0, 2), (2, 5)]))
    quads = [r for r in figure.renderers if type(r.glyph).__name__ == "Quad"]
    assert len(quads) == 1 and figure.title.text == "S"
    data = quads[0].data_source.data
    assert list(data["left"]) == [0, 2] and list(data["right"]) == [2, 5]
    assert sorted(zip(data["bottom"], data["top"], strict=True)) == [(0, 2), (2, 5)]
    plain = hv.render(plots.spy(rows, cols, 5, title="S"))
    assert not [r for r in plain.renderers if type(r.glyph).__name__ == "Quad"]


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_sparsity_tab_switches_orders_and_the_tour_draws_all_three():
    pn = pytest.importorskip("panel", reason="the views need Panel (pip install -e '.[app]')")
    import holoviews as hv

    from explorer.ui import ExplorerApp

    hv.extension("bokeh")
    state = ExplorerState()
    state.data.param.update(dataset="moons", n_samples=600)
    app = ExplorerApp(state=state)
    sv, tv = app.sparsity, app.teaching
    assert sv.text.object.startswith("Waiting for a run") and sv.spy.object is None
    assert sv.mode.value == "by cluster" and sv.method.value == "auto"
    assert list(sv.mode.options) == list(MODES) and list(sv.method.options) == list(METHODS)
    _connected(state)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    shown = state.views.result
    assert sv.orders.result.shown is shown and sv.orders.error == ""
    title = _title(sv.spy.object)
    assert title.startswith("S by cluster (within: ") and "× its floor" in title
    assert "grouped by the run's clusters" in sv.note.object
    for mode, head, words in [("as loaded", "S as loaded · product traffic", "data's order"),
                              ("reordered", "S reordered (", "before any clustering"),
                              ("by cluster", "S by cluster (", "diagonal block")]:
        _act(lambda mode=mode: setattr(sv.mode, "value", mode))
        assert sv.orders.mode == mode and sv.orders.result.mode == mode
        assert _title(sv.spy.object).startswith(head) and words in sv.note.object
    _act(lambda: setattr(sv.method, "value", "rcm"))
    assert sv.orders.result.current.method == "rcm" and "**rcm** order" in sv.note.object
    assert "chosen in the menu" in sv.note.object
    pn.panel(sv).get_root()  # the tab renders

    # The tour: the step after the graph draws S in the three orders (auto, cached).
    assert not tv.orders.active
    for _ in range(2):
        _act(lambda: tv.next.param.trigger("clicks"))
    assert state.teaching.current.key == "blocks" and tv.orders.active
    layout = tv.plot.object
    assert isinstance(layout, hv.Layout) and len(layout) == 3
    titles = [_title(p) for p in layout]
    assert titles[0] == "S as loaded: a cloud" and titles[2] == "by cluster: diagonal blocks"
    assert titles[1].startswith("reordered (") and titles[1].endswith("): bands")
    assert "Product traffic over its floor" in tv.extra.object
    assert "k independent eigenvectors of eigenvalue 0" in tv.text.object
    assert tv.orders.result["as loaded"] is sv.orders.result["as loaded"]  # one cache
    _act(lambda: tv.next.param.trigger("clicks"))  # the Laplacian: blocks beside the spectrum
    assert state.teaching.current.key == "laplacian" and tv.orders.active
    assert _title(tv.plot.object[0]) == "S, ordered by cluster"
    _act(lambda: tv.next.param.trigger("clicks"))
    assert state.teaching.current.key == "eigenvectors" and not tv.orders.active
    pn.panel(tv).get_root()
