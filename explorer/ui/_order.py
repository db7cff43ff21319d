"""The orders the spy plot draws the similarity matrix S in, and the stage computing them.

Three orders of the rows (and, symmetrically, the columns) of a run's graph:

``"as loaded"``
    The rows in the data's order: for shuffled data (every built-in set comes in
    random order) a cloud.
``"reordered"``
    A row order computed from S alone, before any clustering
    (:func:`explorer.graph.reorder.row_order`: ``"jaccard"``, ``"rcm"``, ``"spatial"``;
    or ``"auto"``, the rule :func:`~explorer.graph.reorder.choose_order` applies before
    the eigensolver): neighbours get nearby numbers, so the entries gather in bands.
``"by cluster"``
    The run's clusters one after the other (:func:`explorer.graph.reorder.label_order`),
    each in the reordered order: diagonal blocks, with bands inside.

Each comes with what the library measures of it, the product traffic against its floor
(:func:`explorer.graph.reorder.spmm_traffic`). :class:`OrderState` computes them off the
event loop like the app's other stages; what it computes is cached with the run
(:func:`orders_of`), so switching the spy plot's order back and forth, or the tour asking
for the order the sparsity tab computed, costs nothing the second time.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import param

from explorer._backend import to_numpy
from explorer.graph import reorder

from ._stage import Inputs, Stage, Waiting

#: The spy plot's orders.
MODES = ("as loaded", "reordered", "by cluster")

#: The row orders it can reorder by: the library's methods, and its rule.
METHODS = ("auto", *reorder.METHODS)


@dataclass(frozen=True, eq=False)
class MatrixOrder:
    """One order of the rows and columns of S, as the spy plot draws it.

    Attributes
    ----------
    mode : {"as loaded", "reordered", "by cluster"}
    perm : ndarray of int64, shape (n,), or None
        Row ``i`` of the drawn matrix is row ``perm[i]`` of S (None: as loaded).
    traffic : explorer.graph.reorder.SpmmTraffic
        The product traffic of S in this order.
    baseline : explorer.graph.reorder.SpmmTraffic
        The same as loaded (to say what the order changed).
    method : str
        The row order behind a reordering (``"jaccard"``, ``"rcm"``, ``"spatial"``);
        ``""`` as loaded.
    how : str
        How that order was chosen (``"chosen in the menu"``, ``"the auto rule's
        choice"``, ...); ``""`` as loaded.
    reason : str
        The auto rule's reason (``""`` for a method chosen by name).
    seconds : float
        Time to compute the row order (0 as loaded).
    blocks : tuple of (start, stop)
        By cluster: the positions of each cluster's rows (label order; the unclustered
        rows, −1, after them are no block). Empty otherwise.
    """

    mode: str
    perm: np.ndarray | None
    traffic: reorder.SpmmTraffic
    baseline: reorder.SpmmTraffic
    method: str = ""
    how: str = ""
    reason: str = ""
    seconds: float = 0.0
    blocks: tuple = ()

    def positions(self, rows) -> np.ndarray:
        """Where rows `rows` of S are drawn in this order (the same map serves the
        columns: the order is symmetric)."""
        rows = np.asarray(rows)
        return rows if self.perm is None else self.inverse[rows]

    @cached_property
    def inverse(self) -> np.ndarray | None:
        """The position of every row of S in this order (None as loaded)."""
        return None if self.perm is None else reorder.inverse_permutation(self.perm)

    def title(self) -> str:
        """The spy plot's title: the order and its product traffic over the floor."""
        now = f"{self.traffic.ratio:.2f}× its floor"
        if self.mode == "as loaded":
            return f"S as loaded · product traffic {now}"
        if self.mode == "reordered":
            return (f"S reordered ({self.method}, {self.seconds:.2g} s) · traffic "
                    f"{self.baseline.ratio:.2f}× → {now}")
        return f"S by cluster (within: {self.method}) · traffic {now}"


@dataclass(frozen=True, eq=False)
class MatrixOrders:
    """What :class:`OrderState` computed: the orders of one run's S that its mode needs.

    Attributes
    ----------
    shown : explorer.ui.state.Presentation
        The run (and its matched labels) the orders are of.
    mode, method : str
        What was asked for.
    orders : dict of str to MatrixOrder
        By mode: ``"as loaded"`` always; ``"reordered"`` unless the mode is
        ``"as loaded"``; ``"by cluster"`` when it is the mode.
    """

    shown: object
    mode: str
    method: str
    orders: dict

    def __getitem__(self, mode: str) -> MatrixOrder:
        return self.orders[mode]

    @property
    def current(self) -> MatrixOrder:
        """The order asked for."""
        return self.orders[self.mode]


def compute_row_order(csr, X, method: str) -> tuple[reorder.RowOrder, str, str]:
    """The row order `method` gives S, how it was chosen, and the auto rule's reason.

    ``"auto"`` is :func:`~explorer.graph.reorder.choose_order`'s rule. When the rule
    keeps the rows' order (it would save the eigensolver less than it costs, e.g. on a
    small graph), the spy plot still has a reordering to show: the rule's cheapest
    candidate, with the rule's reason.

    Returns
    -------
    order : explorer.graph.reorder.RowOrder
        With a permutation.
    how : str
    reason : str
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if method != "auto":
        return reorder.row_order(csr, method, X), "chosen in the menu", ""
    order = reorder.choose_order(csr, "auto", X)
    if order.reordered:
        return order, "the auto rule's choice", order.reason
    candidates = order.info.get("candidates") or {"rcm": (0.0, 0.0)}
    cheapest = min(candidates, key=lambda m: candidates[m][1])  # (saving, cost) per method
    how = "the auto rule's cheapest candidate: the rule itself keeps the rows' order"
    return reorder.row_order(csr, cheapest, X), how, order.reason.removeprefix("kept: ")


class GraphOrders:
    """The orders of one run's S computed so far (thread-safe: the sparsity tab and the
    tour may ask for the same order at once; the second waits and reuses it)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._loaded: MatrixOrder | None = None
        self._rows: dict = {}  # method -> MatrixOrder ("reordered")
        self._clusters: dict = {}  # method -> MatrixOrder ("by cluster")

    def loaded(self, csr) -> MatrixOrder:
        """S as loaded."""
        with self._lock:
            if self._loaded is None:
                traffic = reorder.spmm_traffic(csr)
                self._loaded = MatrixOrder("as loaded", None, traffic, traffic)
            return self._loaded

    def reordered(self, csr, X, method: str) -> MatrixOrder:
        """S in the row order `method` gives it (:func:`compute_row_order`)."""
        base = self.loaded(csr)
        with self._lock:
            if method not in self._rows:
                order, how, reason = compute_row_order(csr, X, method)
                self._rows[method] = MatrixOrder(
                    "reordered", to_numpy(order.perm), order.after, base.traffic,
                    order.method, how, reason, order.seconds)
            return self._rows[method]

    def by_cluster(self, csr, X, labels, method: str) -> MatrixOrder:
        """S with the clusters of `labels` one after the other, each in `method`'s order."""
        within = self.reordered(csr, X, method)
        with self._lock:
            if method not in self._clusters:
                perm = reorder.label_order(np.asarray(labels), within=within.perm)
                self._clusters[method] = MatrixOrder(
                    "by cluster", perm, reorder.spmm_traffic(csr, perm=perm), within.baseline,
                    within.method, within.how, within.reason,
                    blocks=cluster_blocks(np.asarray(labels)[perm]))
            return self._clusters[method]


def cluster_blocks(grouped) -> tuple:
    """``(start, stop)`` of each cluster's run of rows in `grouped` (labels in an order
    that groups them, clusters in label order, −1 last and left out)."""
    _, start, count = np.unique(grouped[grouped >= 0], return_index=True, return_counts=True)
    return tuple((int(a), int(a + c)) for a, c in zip(start, count, strict=True))


#: The orders computed per run shown (weakly keyed: they go with the run).
_ORDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ORDERS_LOCK = threading.Lock()


def orders_of(shown) -> GraphOrders:
    """The cache of the orders of `shown`'s graph (a Presentation of the views stage)."""
    with _ORDERS_LOCK:
        orders = _ORDERS.get(shown)
        if orders is None:
            orders = _ORDERS[shown] = GraphOrders()
        return orders


def graph_of(shown):
    """``(csr, X, labels)`` of the graph a run built: the points' in exact mode (X as
    clustered, scaled where asked), the representatives' in representatives mode (their
    coordinates and clusters); None in landmark mode, which builds no graph."""
    run = shown.run
    if run.graph_of == "points":
        return run.csr, shown.data.X, shown.labels
    if run.graph_of == "representatives":
        return run.csr, run.anchors, shown.anchor_labels
    return None


def matrix_orders(shown, mode: str, method: str) -> MatrixOrders:
    """The orders of `shown`'s graph that `mode` needs (see :class:`MatrixOrders`).

    Parameters
    ----------
    shown : explorer.ui.state.Presentation
        A run with its matched labels.
    mode : {"as loaded", "reordered", "by cluster"}
    method : {"auto", "jaccard", "rcm", "spatial"}
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    graph = graph_of(shown)
    if graph is None:
        raise ValueError("mode='landmarks' builds no graph of the points: no matrix to order")
    csr, X, labels = graph
    cache = orders_of(shown)
    orders = {"as loaded": cache.loaded(csr)}
    if mode != "as loaded":
        orders["reordered"] = cache.reordered(csr, X, method)
    if mode == "by cluster":
        orders["by cluster"] = cache.by_cluster(csr, X, labels, method)
    return MatrixOrders(shown=shown, mode=mode, method=method, orders=orders)


class OrderState(Stage):
    """The spy plot's order of a run's S: a stage downstream of the views' stage.

    Parameters
    ----------
    views : explorer.ui.state.ViewState
        Its result (a Presentation: the run and its matched labels) is the input.

    Its inputs are that result, the mode and the method; it computes while
    :attr:`active` (a view not on screen, as the tour on another step, sets it False).
    """

    mode = param.Selector(default="by cluster", objects=list(MODES),
                          doc="The order the spy plot draws S in.")
    method = param.Selector(default="auto", objects=list(METHODS),
                            doc="The row order of 'reordered' (and within each cluster).")
    active = param.Boolean(default=True, doc="Compute only while True.")

    input_names = ("mode", "method")
    doing = "ordering the matrix's rows"

    def __init__(self, views: Stage, **params):
        super().__init__(**params)
        self.views = views
        self.follow(views)
        self.param.watch(self.refresh, "active")

    def upstream(self) -> tuple:
        return (("a run", self.views),)

    def parameters(self) -> dict:
        if not self.active:
            raise Waiting("waiting to be shown")
        return super().parameters()

    def steps(self, inputs: Inputs) -> list:
        shown = inputs.upstream[0]
        mode, method = inputs["mode"], inputs["method"]

        def step(report):
            report(f"ordering the rows ({method})" if mode != "as loaded" else "measuring")
            return matrix_orders(shown, mode, method)

        return [step]
