"""The guided pipeline: the steps of spectral clustering, one at a time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import param

import explorer

from ._errors import describe_error

#: Up to this many points the tour builds the graph of the current parameters to draw
#: it; beyond, the build would be a full run's work, so the last run's graph is drawn
#: instead. Either is drawn at any n: ``plots.graph_edges`` aggregates the edges as
#: lines (datashader) above ``plots.EDGES_RASTERIZE_ABOVE`` of them.
TOUR_GRAPH_MAX_N = 20_000


@dataclass(frozen=True)
class Step:
    """One step of the guided pipeline.

    Attributes
    ----------
    key : str
        What the view draws: ``"data"``, ``"graph"``, ``"blocks"`` (S as loaded,
        reordered, by cluster), ``"laplacian"``, ``"eigenvectors"`` or ``"kmeans"``.
    title : str
    text : str
        Two or three sentences on what the picture shows.
    needs_run : bool
        True when the picture needs a finished run (the data and the graph do not).
    """

    key: str
    title: str
    text: str
    needs_run: bool


STEPS = (
    Step(
        "data",
        "1 · The data",
        "Spectral clustering starts from nothing but points. Clusters here are defined by "
        "connectivity, not by distance to a centre, which is why a curved or nested shape "
        "can still be one cluster.",
        False,
    ),
    Step(
        "graph",
        "2 · The similarity graph",
        "Each point is joined to every point closer than ε = √t (the ε-neighbourhood), and "
        "the edge carries a similarity weight. Only these edges are stored, as a sparse "
        "CSR matrix S: the cost of everything after this step grows with its nonzeros, "
        "not with n².",
        False,
    ),
    Step(
        "blocks",
        "3 · The matrix S, reordered",
        "The same S in three orders: as loaded (shuffled rows make a cloud), reordered from "
        "S alone (bands: neighbours get nearby numbers), and grouped by the clusters the run "
        "found (blocks on the diagonal). A cluster is a set of points joined to each other "
        "and hardly to the rest, so once its rows are consecutive its edges fill one "
        "diagonal block, and the few edges between clusters are the specks off the blocks. "
        "With k connected components S has exactly k blocks, and so has L = I − D^-1/2 S "
        "D^-1/2; the vector D^1/2 1 of each block (the square roots of its degrees, zero "
        "elsewhere) satisfies L v = 0, so k blocks give k independent eigenvectors of "
        "eigenvalue 0.",
        True,
    ),
    Step(
        "laplacian",
        "4 · The Laplacian",
        "From S and the degrees D comes the normalised Laplacian L = I − D^-1/2 S D^-1/2. "
        "Reordered by cluster, S is nearly block-diagonal: a graph with c separate pieces "
        "has eigenvalue 0 of L exactly c times, and weak links between pieces lift those "
        "eigenvalues only a little. The spectrum's jump after them (a tenfold step, or "
        "else its largest gap) suggests k.",
        True,
    ),
    Step(
        "eigenvectors",
        "5 · The eigenvectors",
        "The eigenvectors of the k smallest eigenvalues are nearly constant on each cluster, "
        "so each point gets k coordinates in which the clusters are far apart. Colour "
        "shows one eigenvector's value per point: look how it splits the data.",
        True,
    ),
    Step(
        "kmeans",
        "6 · k-means on the embedding",
        "In the eigenvector coordinates (rows scaled to unit length) the clusters are compact "
        "blobs, so plain k-means finds them. Its labels, mapped back to the points, are the "
        "spectral clustering; points with no neighbour at all are marked grey (−1).",
        True,
    ),
)


@dataclass
class TourGraph:
    """What a tour-graph job produced: a SciPy CSR or None, and a sentence."""

    csr: object = None
    note: str = ""
    generation: int = 0


class TeachingState(param.Parameterized):
    """Which step of the guided pipeline is shown, and the graph its step 2 draws."""

    step = param.Integer(default=0, bounds=(0, len(STEPS) - 1), doc="Index into STEPS.")
    csr = param.Parameter(default=None, doc="The graph step 2 draws (SciPy CSR) or None.")
    note = param.String(default="", doc="Says which graph step 2 draws, or why none.")

    def __init__(self, **params):
        super().__init__(**params)
        self._generation = 0

    def prepare_graph(self, X, edge_kwargs: dict, run_csr=None) -> Callable[[], TourGraph]:
        """The job giving the graph of `X` under `edge_kwargs` for step 2.

        Up to :data:`TOUR_GRAPH_MAX_N` points it is built (``explorer.build_graph``,
        CPU, so that it is a SciPy matrix to draw); beyond, `run_csr` (the last run's
        graph) is used when there is one.
        """
        self._generation += 1
        generation = self._generation
        n = X.shape[0]

        def job() -> TourGraph:
            if n > TOUR_GRAPH_MAX_N:
                if run_csr is None:
                    return TourGraph(note=f"n = {n:,} points: the tour draws the graph of the "
                                     "last run here; press Run.", generation=generation)
                return TourGraph(csr=run_csr, note="The graph of the last run.",
                                 generation=generation)
            try:
                g = explorer.build_graph(X, **edge_kwargs, backend="cpu")
            except Exception as exc:
                return TourGraph(note=describe_error(exc, "building the graph"),
                                 generation=generation)
            return TourGraph(csr=g.csr, note="The graph of the current sidebar parameters.",
                             generation=generation)

        return job

    def apply_graph(self, outcome: TourGraph) -> bool:
        """Publish a tour graph unless a newer one was asked for since."""
        if outcome.generation != self._generation:
            return False
        self.param.update(csr=outcome.csr, note=outcome.note)
        return True

    @property
    def current(self) -> Step:
        return STEPS[self.step]

    @property
    def at_start(self) -> bool:
        return self.step == 0

    @property
    def at_end(self) -> bool:
        return self.step == len(STEPS) - 1

    def next(self) -> None:
        """Go one step on (stays on the last)."""
        self.step = min(self.step + 1, len(STEPS) - 1)

    def previous(self) -> None:
        """Go one step back (stays on the first)."""
        self.step = max(self.step - 1, 0)
