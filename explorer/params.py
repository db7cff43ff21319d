"""The one parameter table: every public keyword, declared once, checked once.

Each keyword of :class:`explorer.SpectralClustering`, :class:`explorer.KMeans`,
:func:`explorer.build_graph` and :func:`explorer.graph_stats` is a :class:`Field`:
its type, its bounds or options, its default and one line of help (in the spirit of
scikit-learn's ``_parameter_constraints``). The public entry checks its keywords
against its table with :func:`check_params` and hands the validated values down;
the functions behind it trust them. The command line's flags (``explorer.cli``) and
the app's parameters (``explorer.ui``) are generated from the same declarations, so a
keyword added here reaches both.

This module sits at the bottom of the library (it imports only the argument checks),
so every layer may read the choices it declares.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ._validation import (
    check_choice,
    check_float,
    check_int,
    check_limit,
    check_random_state,
)

# --- the choices every layer shares ---------------------------------------------------

#: Similarities of an edge rule (docs/architecture.md "Semantics").
METRICS = ("gaussian", "cosine", "uniform")
#: Graph kinds: the ε-neighbourhood graph, the kNN graph as the union, the mutual kNN
#: graph (the intersection).
GRAPHS = ("epsilon", "knn", "mutual_knn")
#: The word that asks for self-tuning σ (local scaling) instead of a number.
LOCAL_SIGMA = "local"
#: scikit-learn's ``n_neighbors``, and Zelnik-Manor & Perona's m = 7 for local scaling.
DEFAULT_N_NEIGHBORS = 10
DEFAULT_LOCAL_NEIGHBOR = 7
#: The GPU kernels keep each point's best k in registers and local memory.
MAX_NEIGHBORS = 256
#: Backends a run may ask for.
BACKENDS = ("auto", "gpu", "cpu")
#: Eigensolvers of the embedding (``explorer.embedding``).
EIGEN_SOLVERS = ("auto", "dense", "lanczos", "lobpcg", "chebyshev", "lu", "amg", "components")
#: Pipelines of a fit: the graph of every point, of k-means representatives, or the
#: landmark graph (only when asked for: ``"auto"`` chooses between the first two).
MODES = ("auto", "exact", "representatives", "landmarks")
#: Feature scalings before the graph (``None``, no scaling, is allowed besides).
SCALINGS = ("standard", "minmax")
#: Row orders of the eigensolver's graph (``explorer.graph.reorder``).
REORDERS = ("auto", "jaccard", "rcm", "spatial")
#: k-means seedings.
KMEANS_INITS = ("auto", "k-means++", "k-means||", "random")
#: What X is to the spectral estimator: points to build a graph of, or the graph
#: (scikit-learn's names with its meanings: "nearest_neighbors" its kNN connectivity
#: graph, which counts a point among its own neighbours; "rbf" and the other
#: kernels of ``sklearn.metrics.pairwise.kernel_metrics()``, or a callable, weigh every
#: pair; "precomputed_nearest_neighbors": X holds distances to neighbours).
AFFINITIES = ("auto", "epsilon", "knn", "mutual_knn", "nearest_neighbors", "precomputed",
              "precomputed_nearest_neighbors", "rbf")
#: scikit-learn's pairwise kernels, by name (``kernel_metrics()``), as affinities.
KERNELS = ("additive_chi2", "chi2", "cosine", "laplacian", "linear", "poly", "polynomial",
           "rbf", "sigmoid")
#: How the embedding's rows become labels (scikit-learn's ``assign_labels``).
ASSIGN_LABELS = ("kmeans", "discretize", "cluster_qr")
#: scikit-learn's eigensolver names, as ours: ARPACK is our Lanczos.
EIGEN_SOLVER_ALIASES = {"arpack": "lanczos"}
#: The graph kind each affinity that builds one builds.
AFFINITY_GRAPH = {"epsilon": "epsilon", "knn": "knn", "mutual_knn": "mutual_knn",
                  "nearest_neighbors": "knn"}
#: Largest number of landmarks per point (the GPU kernels keep them in registers).
MAX_NEAREST_LANDMARKS = 32

#: Practical limits: past them a fit does not finish in useful time.
N_INIT_LIMIT = 1000
MAX_ITER_LIMIT = 100_000
EIGEN_MAX_ITER_LIMIT = 1_000_000

_NEIGHBOR_LIMIT_WHY = "the GPU kernels keep a point's best k in registers"


@dataclass(frozen=True)
class Field:
    """One keyword, declared once.

    Attributes
    ----------
    name : str
        The keyword (``threshold_sqdist``); the command-line flag is
        ``--threshold-sqdist``.
    type : {str, int, float, bool, object}
        What a value is: one of `choices` (str), a bounded number, a flag, or
        (object) whatever `check_with` accepts.
    help : str
        One line for ``--help`` and the app's parameter docs.
    default : object
        The value when the keyword is left out.
    choices : tuple
        Allowed values of a ``str`` field.
    low, high : float or None
        Bounds of a number, ``None`` for unbounded.
    low_inclusive, high_inclusive : bool
    limit : float or None
        A practical limit of an int, past the bounds (see ``check_limit``).
    limit_why : str
    words : tuple of str
        Words a number field accepts besides numbers (``sigma="local"``, ``"auto"``).
    allow_none : bool
        None is a value (it means "the default, worked out later").
    check_with : callable, optional
        ``check_with(value, name)`` for a field no bounds describe (a random state,
        an initial-centres array); returns the value to use.
    """

    name: str
    type: type
    help: str
    default: object = None
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    limit: float | None = None
    limit_why: str = ""
    words: tuple = ()
    allow_none: bool = False
    check_with: Callable | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def bounds(self) -> tuple:
        return (self.low, self.high)

    @property
    def inclusive_bounds(self) -> tuple:
        return (self.low_inclusive, self.high_inclusive)

    def check(self, value, *, allow_none: bool | None = None):
        """`value` validated against the declaration (messages name the keyword)."""
        none_ok = self.allow_none if allow_none is None else allow_none
        if value is None and none_ok:
            return None
        if self.words and isinstance(value, str) and value in self.words:
            return value
        if self.check_with is not None:
            return self.check_with(value, self.name)
        if self.type is str:
            if self.words and not self.choices:
                return check_choice(value, self.name, self.words)
            return check_choice(value, self.name, self.choices)
        if self.type is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{self.name} must be True or False; got {value!r}")
            return bool(value)
        if self.type is int:
            if self.words and isinstance(value, str):
                raise TypeError(f"{self.name} must be an integer; got {value!r} (str); "
                                f"allowed words: {', '.join(map(repr, self.words))}")
            value = check_int(value, self.name, low=self.low, high=self.high)
            if self.limit is None:
                return value
            return check_limit(value, self.name, self.limit, self.limit_why)
        if self.words and isinstance(value, str):
            raise TypeError(f"{self.name} must be a real number; got {value!r} (str); "
                            f"allowed words: {', '.join(map(repr, self.words))}")
        return check_float(value, self.name, low=self.low, high=self.high,
                           low_inclusive=self.low_inclusive,
                           high_inclusive=self.high_inclusive)

    def describe_allowed(self) -> str:
        """What the field allows, in words (for ``--help``)."""
        if self.type is str:
            text = ", ".join(self.choices or self.words)
        elif self.type in (int, float):
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            text = (f"{'[' if self.low_inclusive else '('}{lo}, {hi}"
                    f"{']' if self.high_inclusive else ')'}")
            if self.words:
                text += " or " + ", ".join(self.words)
        else:
            text = self.help
        return text + (" (or none)" if self.allow_none else "")


def table(*fields: Field) -> dict[str, Field]:
    """Fields by name, in order."""
    return {f.name: f for f in fields}


def check_params(fields: Mapping[str, Field], values: Mapping) -> dict:
    """Every keyword of `values` checked against its declaration in `fields`.

    Parameters
    ----------
    fields : mapping of name to Field
        A table of this module.
    values : mapping
        Keyword to value (``estimator.get_params()``, a function's keywords).

    Returns
    -------
    dict
        The validated values (ints as ``int``, floats as ``float``), in `fields`'
        order; keywords `fields` does not declare are refused.

    Raises
    ------
    ValueError, TypeError
        A value out of its bounds or choices, naming the keyword, the value and what
        is allowed.
    """
    unknown = [name for name in values if name not in fields]
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                        f"allowed: {', '.join(fields)}")
    return {name: f.check(values.get(name, f.default)) for name, f in fields.items()}


# --- checks no bounds describe --------------------------------------------------------


def _random_state(value, name):
    check_random_state(value, name)  # raises on what is no seed
    return value


def _n_clusters(value, name):
    if isinstance(value, str):
        return check_choice(value, name, ("auto",))
    return check_int(value, name, low=1)


def _init(value, name):
    """A k-means seeding name or an array of initial centres (shape checked at fit)."""
    if isinstance(value, str):
        return check_choice(value, name, KMEANS_INITS)
    arr = np.asarray(value.get() if hasattr(value, "get") else value)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number) or arr.ndim != 2:
        raise TypeError(f"{name} must be one of {KMEANS_INITS} or an array of shape "
                        f"(n_clusters, n_features); got {value!r}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} array contains NaN or inf")
    return value


def _block_shapes(value, name):
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be None or a mapping of kernel name to block shape, "
                        f"e.g. {{'fullPass': (32, 4)}}; got {value!r} ({type(value).__name__})")
    return value


def _affinity(value, name):
    """An affinity name (ours or scikit-learn's, a kernel name) or a callable kernel."""
    if callable(value):
        return value
    return check_choice(value, name, tuple(dict.fromkeys((*AFFINITIES, *KERNELS))))


def _eigen_solver(value, name):
    return check_choice(value, name, (*EIGEN_SOLVERS, *EIGEN_SOLVER_ALIASES))


def _mapping(value, name):
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be None or a dict of keyword arguments for the kernel; "
                        f"got {value!r} ({type(value).__name__})")
    return value


def _n_jobs(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value == 0:
        raise ValueError(f"{name}={value!r} is not allowed; use None, -1 (every core) or "
                         "a positive number of threads")
    return int(value)


def _verbose(value, name):
    if isinstance(value, (bool, np.bool_, numbers.Integral)) and int(value) >= 0:
        return value
    raise TypeError(f"{name} must be a bool or an int >= 0; got {value!r}")


def _flag(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


# --- the edge rule and the builders' knobs ---------------------------------------------

#: The edge rule's keywords. ``threshold_sim``'s range depends on the metric (cosine
#: [-1, 1), gaussian (0, 1)); the declaration holds the union and the rule checks the rest.
EDGE_FIELDS = table(
    Field("graph", str, "epsilon (threshold), knn (union) or mutual_knn (intersection)",
          default="epsilon", choices=GRAPHS),
    Field("n_neighbors", int, "neighbours per point of the knn and mutual_knn graphs",
          default=DEFAULT_N_NEIGHBORS, low=1, limit=MAX_NEIGHBORS,
          limit_why=_NEIGHBOR_LIMIT_WHY),
    Field("metric", str, "gaussian, cosine or uniform", default="gaussian", choices=METRICS),
    Field("sigma", float, "gaussian width σ, or 'local': σi = distance to the "
          "local_neighbor-th neighbour, weight exp(-d²/(σiσj))", low=0.0,
          low_inclusive=False, words=(LOCAL_SIGMA,), allow_none=True),
    Field("local_neighbor", int, "m of sigma='local' (σi: distance to the m-th neighbour)",
          default=DEFAULT_LOCAL_NEIGHBOR, low=1, limit=MAX_NEIGHBORS,
          limit_why=_NEIGHBOR_LIMIT_WHY),
    Field("threshold_sqdist", float, "edge iff squared distance ‖xi−xj‖² < t (ε = √t)",
          low=0.0, low_inclusive=False, allow_none=True),
    Field("threshold_sim", float, "edge iff similarity > t (cosine: [-1, 1); gaussian: (0, 1))",
          low=-1.0, high=1.0, high_inclusive=False, allow_none=True),
)

#: The builders' knobs (the core paper's CSR-2 and CSR-3 parameters).
BUILD_FIELDS = table(
    Field("hypo_max_nnz_row", int,
          "CSR-2's ELLPACK width hypoMaxNnzRow (default: 32 for d < 64, else 512)", low=1,
          limit=2**31 - 1, limit_why="the kernels index a row's slots with int32",
          allow_none=True),
    Field("sp_max_nz_pct", float, "CSR-3's bound on the % of nonzeros (GPU only)",
          low=0.0, high=100.0, low_inclusive=False, allow_none=True),
    Field("mem_use_rate", float, "CSR-3's share of free GPU memory (GPU only; default 0.8)",
          low=0.0, high=1.0, low_inclusive=False, allow_none=True),
)

_METHOD = Field("method", str, "graph builder: auto; bruteforce, kdtree (CPU); csr1, csr2, "
                "csr3, grid, gemm (GPU); checked against the backend that runs",
                default="auto", check_with=lambda v, name: _method(v, name))
_BACKEND = Field("backend", str, "auto (the GPU when one answers), gpu or cpu",
                 default="auto", choices=BACKENDS)
_RANDOM_STATE = Field("random_state", object, "seed: None, an int in [0, 2**32 - 1], a "
                      "numpy RandomState or Generator", check_with=_random_state,
                      allow_none=True)


def _method(value, name):
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}={value!r} is not allowed; use 'auto' or a builder name")
    return value


#: :func:`explorer.build_graph`'s keywords (besides X and a ready rule or options).
BUILD_GRAPH_PARAMS = table(
    *EDGE_FIELDS.values(), _METHOD, *BUILD_FIELDS.values(),
    Field("block_shapes", object, "kernel name to CUDA block shape (GPU only)",
          check_with=_block_shapes, allow_none=True),
    _BACKEND,
)

#: :func:`explorer.graph_stats`'s keywords.
GRAPH_STATS_PARAMS = table(
    *EDGE_FIELDS.values(), BUILD_FIELDS["hypo_max_nnz_row"], _BACKEND,
    Field("sample_rows", int, "count only this many random rows and extrapolate", low=1,
          allow_none=True),
    Field("components", bool, "count connected components (every row counted only)",
          default=True, check_with=_flag),
)

# --- k-means -----------------------------------------------------------------------------

_N_INIT = Field("n_init", int, "k-means restarts (the lowest inertia is kept)", default=10,
                low=1, limit=N_INIT_LIMIT, limit_why="each restart runs k-means again")
_KMEANS_MAX_ITER = Field("max_iter", int, "Lloyd iterations per restart, at most",
                         default=300, low=1, limit=MAX_ITER_LIMIT,
                         limit_why="Lloyd's iterations stop long before")
_KMEANS_TOL = Field("tol", float, "k-means stops when the centres' squared shift is at most "
                    "this times the features' mean variance (scikit-learn's rule)",
                    default=1e-4, low=0.0)

#: :class:`explorer.KMeans`'s keywords.
KMEANS_PARAMS = table(
    Field("n_clusters", int, "k, 1 <= k <= n_samples", default=8, low=1),
    Field("init", object, "auto, k-means++, k-means||, random, or an array of initial "
          "centres (n_clusters, n_features)", default="auto", check_with=_init),
    _N_INIT, _KMEANS_MAX_ITER, _KMEANS_TOL, _RANDOM_STATE,
)

# --- spectral clustering -------------------------------------------------------------------


def _renamed(f: Field, name: str, **changes) -> Field:
    return Field(**{**f.__dict__, "name": name, **changes})


#: :class:`explorer.SpectralClustering`'s keywords, in its signature's order.
SPECTRAL_PARAMS = table(
    Field("n_clusters", object, "k (an integer >= 1), or 'auto': the eigengap's k",
          default=8, check_with=_n_clusters),
    Field("affinity", object, "auto (ε or kNN graph, chosen from the data), epsilon, knn, "
          "mutual_knn, nearest_neighbors (scikit-learn's kNN connectivity), precomputed (X "
          "is the graph), "
          "precomputed_nearest_neighbors (X holds neighbour distances), rbf or another "
          "kernel of sklearn.metrics.pairwise (or a callable)", default="auto",
          check_with=_affinity),
    _renamed(EDGE_FIELDS["metric"], "metric", default="auto", choices=("auto", *METRICS),
             help="auto, gaussian, cosine or uniform (auto: gaussian for n_features <= 8, "
                  "else cosine)"),
    _renamed(EDGE_FIELDS["sigma"], "sigma", default="auto", words=("auto", LOCAL_SIGMA)),
    EDGE_FIELDS["threshold_sqdist"],
    EDGE_FIELDS["threshold_sim"],
    EDGE_FIELDS["n_neighbors"],
    EDGE_FIELDS["local_neighbor"],
    _METHOD,
    *BUILD_FIELDS.values(),
    Field("eigen_solver", str, "the eigensolver (auto: components, amg, Lanczos, dense "
          "or Chebyshev by the graph and a cost model; arpack: Lanczos; None: auto)",
          default="auto", choices=(*EIGEN_SOLVERS, *EIGEN_SOLVER_ALIASES), allow_none=True,
          check_with=_eigen_solver),
    Field("eigen_tol", float, "eigensolver residual tolerance (None or 'auto': the "
          "solver's own)", low=0.0, low_inclusive=False, allow_none=True, words=("auto",)),
    Field("eigen_max_iter", int, "eigensolver iteration limit (None: the solver's own)",
          low=1, limit=EIGEN_MAX_ITER_LIMIT,
          limit_why="the eigensolvers converge (or stall) long before", allow_none=True),
    Field("n_eigenpairs", int, "compute at least this many eigenpairs (the spectrum "
          "beyond k)", low=1, allow_none=True),
    _N_INIT,
    _renamed(_KMEANS_TOL, "kmeans_tol"),
    _renamed(_KMEANS_MAX_ITER, "kmeans_max_iter"),
    _RANDOM_STATE,
    _BACKEND,
    Field("mode", str, "exact (the graph of every point), representatives (k-means "
          "representatives), landmarks, or auto (exact or representatives by n and d)",
          default="auto", choices=MODES),
    Field("n_representatives", int, "m of mode representatives (auto: 4096 on the GPU, "
          "2048 on the CPU, or n)", default="auto", low=2, words=("auto",)),
    Field("n_landmarks", int, "p of mode landmarks (None: min(1000, n))", low=1,
          allow_none=True),
    Field("n_nearest_landmarks", int, "landmarks each point is joined to (mode landmarks)",
          default=5, low=1, high=MAX_NEAREST_LANDMARKS),
    Field("reorder", str, "row order of the eigensolver's graph: auto, jaccard, rcm, "
          "spatial (None: as given)", choices=REORDERS, allow_none=True),
    Field("scale", str, "feature scaling before the graph: auto (standard when the "
          "features' ranges differ more than 100-fold, else none), standard or minmax "
          "(None: as given)", default="auto", choices=("auto", *SCALINGS), allow_none=True),
    # scikit-learn's keywords, with its meanings (the plan says how each maps here).
    Field("gamma", float, "kernel coefficient of rbf, laplacian, poly, sigmoid, chi2 "
          "(None: 1.0 for rbf, the kernel's own otherwise); with an ε or kNN graph, "
          "sigma = 1/sqrt(2 gamma)", low=0.0, low_inclusive=False, allow_none=True),
    Field("degree", float, "degree of the poly kernel", default=3, low=0.0),
    Field("coef0", float, "zero coefficient of the poly and sigmoid kernels", default=1),
    Field("kernel_params", object, "keywords of a callable kernel", allow_none=True,
          check_with=_mapping),
    Field("n_components", int, "eigenvectors the labels are read from (None: n_clusters)",
          low=1, allow_none=True),
    Field("assign_labels", str, "kmeans, discretize or cluster_qr: how the embedding's rows "
          "become labels", default="kmeans", choices=ASSIGN_LABELS),
    Field("n_jobs", int, "CPU threads of the fit (None: as the BLAS is set; -1: every core)",
          allow_none=True, check_with=_n_jobs),
    Field("verbose", object, "print the plan and the stages as they run", default=False,
          check_with=_verbose),
)


def defaults(fields: Mapping[str, Field]) -> dict:
    """Keyword to default of a table."""
    return {name: f.default for name, f in fields.items()}


def is_number(value) -> bool:
    """A real number that is not a bool (a given σ or threshold)."""
    return (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            and math.isfinite(float(value)))
