"""Runners: one per mode, behind one interface — ``run(plan) -> FitResult``.

:func:`run_plan` runs a :class:`~explorer.pipeline.FitPlan` on its engine: the
in-process runners here (:func:`run_graph` for the exact and representatives modes,
which differ only in the points the graph joins; :func:`run_landmarks`), or the
runner of a registered engine (:mod:`explorer.engines`). Every runner returns one
:class:`FitResult`, from which the estimator sets its fitted attributes in one place.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from .._backend import array_module
from ..components import components_besides_isolated
from ..embedding import isolated_vertices
from ..engines import ENGINE_MODULES, engine_for
from ..extension import exact_model, landmark_model
from ..graph import build_graph
from ..inputs import Prepared
from ..landmarks import SVD_MAX_ITER, SVD_TOL, landmark_partition
from ..params import KERNELS
from ..partition import partition_graph, warn_components, zero_weights_message
from ..representatives import map_labels, weight_by_counts
from .plan import FitPlan

__all__ = ["FitResult", "run_graph", "run_landmarks", "run_plan"]


@dataclass
class FitResult:
    """What a runner produced; the estimator's fitted attributes come from it.

    Attributes
    ----------
    labels : array of int32, shape (n,)
        Each point's cluster, −1 for points left out; on the device that computed it
        (a Dask array on the Dask engine).
    n_clusters : int
    eigenvalues : array of shape (k,)
    embedding, eigenvectors : array of shape (rows, k)
        Rows of the graph that was embedded (the points, or the representatives).
    spectrum : explorer.Embedding or None
        Every eigenpair computed.
    isolated : bool array of shape (n,)
        Points without a cluster for want of an edge.
    graph : explorer.Graph (or the Dask engine's row-block graph) or None
        None in landmark mode.
    affinity_matrix : sparse matrix or None
        The matrix embedded (the representatives' weighted by their counts).
    eigen_solver, eigen_solver_why : str
    eigen_iterations : int or None
    eigen_residuals : array
    reorder : explorer.graph.reorder.RowOrder or None
    kmeans : explorer.KMeans or None
        The k-means fitted on the embedding (its centres label new points).
    representative_labels : array or None
        The representatives' clusters (mode representatives).
    landmark_partition : explorer.landmarks.LandmarkPartition or None
    extension : explorer.extension.ExtensionModel or None
        What ``predict`` and ``transform`` extend through (None: no points to join,
        or an engine that keeps none).
    backend, backend_why : str
        Where it ran.
    timings : dict of str to float
        Seconds per stage (the plan's included), ``"total"`` last.
    """

    labels: object
    n_clusters: int
    eigenvalues: object
    embedding: object
    eigenvectors: object
    isolated: object
    eigen_solver: str
    eigen_solver_why: str
    eigen_iterations: int | None
    eigen_residuals: object
    backend: str
    backend_why: str
    spectrum: object = None
    graph: object = None
    affinity_matrix: object = None
    reorder: object = None
    kmeans: object = None
    representative_labels: object = None
    landmark_partition: object = None
    extension: object = None
    timings: dict = field(default_factory=dict)


def run_plan(plan: FitPlan, X=None) -> FitResult:
    """Run `plan` on its engine (`X`: what the fit was given, for an engine that
    needs it)."""
    if plan.engine != "in-process":
        engine = engine_for(X) if X is not None else None
        if engine is None or engine.name != plan.engine:
            raise ValueError(f"no engine {plan.engine!r} for this data; known engines: "
                             f"{', '.join(ENGINE_MODULES)}")
        result = engine.run(plan)
    elif plan.mode == "landmarks":
        result = run_landmarks(plan)
    else:
        result = run_graph(plan)
    result.timings = {**plan.timings, **result.timings}
    return result


def run_graph(plan: FitPlan) -> FitResult:
    """Exact and representatives mode: the graph of the plan's points, its partition,
    and (representatives) every point's label through its representative."""
    params, reps = plan.params, plan.representatives
    t0 = time.perf_counter()
    graph = plan.graph
    if graph is None:
        graph = build_graph(Prepared(plan.points), plan.rule, method=params["method"],
                            options=plan.options, backend=params["backend"])
    csr = graph.csr
    copies = reps is not None and reps.kind == "distinct"
    if reps is not None:  # weighted by the points each representative stands for
        csr = weight_by_counts(csr, reps.counts, copies=copies)
    xp = array_module(csr)
    t_graph = time.perf_counter() - t0
    if plan.rule is not None:
        _warn_duplicates(plan.points, params["n_clusters"])
    isolated = isolated_vertices(csr)
    n = csr.shape[0]
    n_isolated = int(xp.count_nonzero(isolated))
    if n_isolated == n:
        if plan.rule is None:
            raise ValueError(
                f"the affinity matrix has no edge: all n={n} vertices are isolated (no "
                "positive weight off the diagonal); affinity='precomputed' needs a graph "
                "with edges")
        if int(csr.nnz) > 0:
            raise ValueError(zero_weights_message(plan.user_rule, int(csr.nnz)))
        raise ValueError(
            f"the graph has no edge: all n={n} points are isolated; raise the threshold "
            f"(now {plan.user_rule.describe()}) until points have neighbours")
    part = partition_graph(
        csr, params["n_clusters"], n_components=components_besides_isolated(graph.stats),
        eigen_solver=params["eigen_solver"], eigen_tol=params["eigen_tol"],
        eigen_max_iter=params["eigen_max_iter"], n_eigenpairs=params["n_eigenpairs"],
        n_init=params["n_init"], kmeans_tol=params["kmeans_tol"],
        kmeans_max_iter=params["kmeans_max_iter"], random_state=plan.rng,
        isolated=isolated, reorder=params["reorder"],
        reorder_points=None if plan.rule is None else plan.points,
        n_vectors=params["n_components"], assign_labels=params["assign_labels"],
        row_counts=reps.counts if copies else None,
    )
    components = components_besides_isolated(graph.stats)
    if components is not None and components > 1 and _scikit_learn_affinity(params):
        warnings.warn(
            f"Graph is not fully connected: {components} connected components besides its "
            f"{n_isolated} isolated vertices, so spectral embedding may not work as "
            "expected; here the components rule decides (each of the k largest is a "
            "cluster, see SpectralClustering's Notes)", UserWarning, stacklevel=4)
    if part.n_dropped:
        warn_components(part.n_components, n_isolated, part.n_clusters, part.n_dropped,
                        n_stray=part.n_stray, stray_pieces=part.stray_pieces,
                        stray_size=part.stray_size)
    emb, labels = part.clustered, part.labels
    rep_labels = None
    if reps is not None:  # the points take their representative's label
        rep_labels = labels
        labels = map_labels(labels, reps.labels)
        isolated = isolated[reps.labels]
    return FitResult(
        labels=labels, n_clusters=int(part.n_clusters), eigenvalues=emb.eigenvalues,
        embedding=emb.embedding, eigenvectors=emb.vectors, isolated=isolated,
        eigen_solver=emb.solver, eigen_solver_why=emb.solver_why,
        eigen_iterations=emb.iterations, eigen_residuals=emb.residual_norms,
        backend=graph.backend, backend_why=plan.backend_why, spectrum=part.embedding,
        graph=graph, affinity_matrix=csr, reorder=part.reorder, kmeans=part.kmeans,
        representative_labels=rep_labels,
        extension=None if plan.rule is None or part.kmeans is None else exact_model(
            plan.points, plan.rule, emb.vectors, emb.eigenvalues, part.kmeans,
            data=replace(plan.data, X=None), scaler=plan.scaler,
            counts=None if reps is None else reps.counts, point_labels=rep_labels),
        timings={"graph": t_graph, **part.timings},
    )


def run_landmarks(plan: FitPlan) -> FitResult:
    """Landmark mode: :func:`explorer.landmarks.landmark_partition` on the plan's points."""
    params = plan.params
    metric = "gaussian" if params["metric"] == "auto" else params["metric"]
    n = plan.points.shape[0]
    sigma = params["sigma"]
    if plan.data is not None and plan.data.unit != 1.0 and isinstance(sigma, float):
        sigma = sigma * plan.data.unit
    part = landmark_partition(
        plan.points, params["n_clusters"],
        n_landmarks=min(1000, n) if params["n_landmarks"] is None else params["n_landmarks"],
        n_nearest=params["n_nearest_landmarks"], metric=metric, sigma=sigma,
        backend=params["backend"], random_state=plan.rng,
        svd_tol=SVD_TOL if params["eigen_tol"] is None else params["eigen_tol"],
        svd_max_iter=(SVD_MAX_ITER if params["eigen_max_iter"] is None
                      else params["eigen_max_iter"]),
        n_init=params["n_init"], kmeans_tol=params["kmeans_tol"],
        kmeans_max_iter=params["kmeans_max_iter"],
    )
    k = part.n_clusters
    # Without the stored affinity: the estimator keeps no n × p matrix (as it keeps
    # no graph), and what it keeps pickles to the host.
    return FitResult(
        labels=part.labels, n_clusters=int(k),
        # Eigenvalues of the landmark graph's normalised Laplacian I - W: 1 - σ².
        eigenvalues=1.0 - part.singular_values[:k] ** 2,
        embedding=part.embedding, eigenvectors=part.vectors, isolated=part.isolated,
        eigen_solver=part.solver,
        eigen_solver_why=f"landmark mode: the truncated SVD of the n × p affinity "
                         f"({part.solver})",
        eigen_iterations=part.iterations, eigen_residuals=part.svd.residuals[:k],
        backend=part.backend, backend_why=part.backend_reason,
        landmark_partition=replace(part, affinity=None),
        extension=landmark_model(part, part.affinity, data=replace(plan.data, X=None),
                                 scaler=plan.scaler),
        timings={key: v for key, v in part.timings.items() if key != "total"},
    )


def _scikit_learn_affinity(params) -> bool:
    """Whether the affinity is one of scikit-learn's own (its users expect its warning
    that a graph is not fully connected)."""
    affinity = params["affinity"]
    return callable(affinity) or affinity in (*KERNELS, "nearest_neighbors",
                                              "precomputed_nearest_neighbors")


#: Up to this many values (n·d), :func:`_warn_duplicates` counts distinct rows.
DUPLICATE_CHECK_SIZE = 10**7


def _warn_duplicates(X, n_clusters) -> None:
    """Warn when `X` has fewer distinct rows than k: identical points cannot be told
    apart, and their split among clusters is arbitrary (an eigenspace without a
    preferred direction)."""
    if isinstance(n_clusters, str) or array_module(X) is not np or X.size > DUPLICATE_CHECK_SIZE:
        return
    k = int(n_clusters)
    if k < 2 or k > X.shape[0]:
        return
    # k distinct rows among the first few settle it; only data that fail there are
    # counted in full.
    if np.unique(X[: 64 * k], axis=0).shape[0] >= k:
        return
    distinct = int(np.unique(X, axis=0).shape[0])
    if distinct < k:
        warnings.warn(
            f"X has only {distinct} distinct point(s) among its n={X.shape[0]} rows, fewer "
            f"than n_clusters={k}: identical points cannot be told apart, so how they are "
            f"split among the {k} clusters is arbitrary; lower n_clusters to at most "
            f"{distinct} or remove the duplicates",
            UserWarning, stacklevel=4,
        )
