"""The whole spectral clustering of a Dask array on a dask.distributed cluster:
what ``SpectralClustering(...).fit(dask_array)`` runs (issue 19, item 3)."""

from __future__ import annotations

import time

import numpy as np
from sklearn.utils import check_random_state

from .._backend import column_norms
from .._validation import check_choice, check_int
from ..embedding import EIGENGAP_TOL, Embedding, auto_k_max, chebyshev, eigengap_k, solvers
from ..embedding.components import indicator_vectors
from ..embedding.embed import finish_eigenvectors
from ..graph.rule import EdgeRule
from ..partition import STRAY_SHARE, warn_components
from ..pipeline import FitResult
from ._blocks import RowBlocks, get_client, n_workers
from ._components import block_components, largest_components
from ._embedding import components_embedding
from ._exact import exact_plan, resident_solve
from ._graph import METHODS, build_row_blocks, gather_points
from ._kmeans import kmeans_fit, label_meta
from ._labels import finish_labels
from ._operator import RowBlockOperator, normalised_blocks
from ._representatives import plan_representatives, run_representatives

__all__ = ["DISTRIBUTED_SOLVERS", "distributed_embedding", "engine_kmeans", "plan_fit", "run_fit"]

#: Eigensolvers that run on the row-block operator (``"dense"`` gathers A: small
#: graphs only, as in the single-process path; ``"components"`` needs no product;
#: ``"chebyshev"`` runs on the workers, :mod:`._exact`, where they have a collective).
DISTRIBUTED_SOLVERS = ("auto", "dense", "lanczos", "lobpcg", "chebyshev", "components")


def resolve_distributed_solver(solver: str, m: int, k: int, resident: bool = False) -> str:
    """The solver that runs on a distributed graph of `m` non-isolated vertices.

    ``"auto"`` is dense up to :data:`~explorer.embedding.solvers.DENSE_MAX_N` vertices
    (A gathered to the client) and Chebyshev beyond, as the single-process ``"auto"``
    on the GPU, when it can run on the workers (`resident`: one worker, or one GPU per
    worker with NCCL, :func:`~._exact.exact_plan`); otherwise LOBPCG, driven from the
    client. ``"chebyshev"`` asked for where it cannot run on the workers is LOBPCG too.
    """
    check_choice(solver, "eigen_solver", DISTRIBUTED_SOLVERS)
    used = solvers.resolve_solver(solver, m, k)
    return "lobpcg" if used == "chebyshev" and not resident else used


def _solver_why(solver: str, used: str, k: int, resident_why: str | None = None) -> str:
    """Why `used` ran in the distributed fit when `solver` was asked for."""
    if used == "components":
        return solvers.components_reason(solver, k)
    where = "" if resident_why is None or used not in ("chebyshev", "lobpcg") \
        else f"; {resident_why}"
    if solver == used:
        return f"eigen_solver={solver!r} asked for{where}"
    if solver != "auto":
        return f"eigen_solver={solver!r} asked for, {used} ran{where}"
    return (f"auto, distributed: dense up to {solvers.DENSE_MAX_N} vertices (A gathered to "
            "the client), beyond Chebyshev on the workers where they have a collective, "
            f"else LOBPCG from the client (resolve_distributed_solver){where}")


def distributed_embedding(graph, n_components, *, solver="auto", tol=None, max_iter=None,
                          random_state=None, exclude=None, components=None, resident=None,
                          order=None, points=None):
    """The spectral embedding of a :class:`~explorer.distributed.RowBlockGraph`.

    The steps of :func:`explorer.spectral_embedding` with the matrix on the workers:
    the degrees come from the build, A's row blocks are formed where S's are
    (:func:`~explorer.distributed._operator.normalised_block`), and the eigensolver
    runs on the client against :class:`RowBlockOperator`. Unlike the single-process
    stage, S's symmetry is not re-checked (the row-block builder makes it symmetric by
    construction).

    `exclude` (bool, n) marks vertices left out besides the isolated ones (those of
    components beyond the k largest); `components` (int, n) are the component labels
    (:func:`~explorer.distributed._components.component_labels`), which
    ``solver="components"`` needs.

    `resident` is :func:`~explorer.distributed._exact.exact_plan`'s ``(workers, kind,
    why)``: with a `kind`, ``"chebyshev"`` (and ``"auto"`` beyond the dense size) runs
    on the workers, every product there
    (:func:`~explorer.distributed._exact.resident_solve`, its rows in `order`: None,
    the blocks as built, or ``"spatial"``, the Morton order of the future of all
    `points`); its statistics are in the embedding's timings as ``resident.*``.

    Returns
    -------
    embedding : explorer.Embedding
        NumPy arrays on the client (n × k: the size of the eigenvectors).
    operator : RowBlockOperator
    """
    t0 = time.perf_counter()
    rng = check_random_state(random_state)
    n = graph.n
    degree = graph.degrees
    isolated = degree <= 0
    if exclude is not None:
        isolated = isolated | exclude
    keep = np.flatnonzero(~isolated)
    m = int(keep.shape[0])
    if m == 0:
        raise ValueError(
            f"the graph has no edge with positive weight: all n={n} vertices are isolated, "
            "nothing can be embedded; use a larger threshold (or sigma)"
        )
    k = check_int(n_components, "n_components", low=1, high=m)
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[keep] = np.arange(m)
    dinv = 1.0 / np.sqrt(degree[keep])
    workers, kind = (None, None) if resident is None else resident[:2]
    used = resolve_distributed_solver(solver, m, k, resident=kind is not None)
    spatial = used == "chebyshev" and order == "spatial"
    op = None if spatial else RowBlockOperator(normalised_blocks(graph, new_id, dinv),
                                               graph.nnz)
    t1 = time.perf_counter()
    A = op.to_csr() if used == "dense" else op
    measured, extra = None, {}
    if used == "components":
        mu, V = indicator_vectors(components[keep], k, degree[keep], np)
        iterations = tol_used = None
    elif used == "chebyshev":
        start = _component_start(components, keep, k, degree)
        mu, V, iterations, measured, stats = resident_solve(
            graph, keep, dinv, k, workers=workers, kind=kind, tol=tol, max_iter=max_iter,
            rng=rng, start=start, order=order, points=points,
            ablocks=None if op is None else op.blocks)
        tol_used = chebyshev.DEFAULT_TOL if tol is None else tol
        extra = {f"resident.{key}": (float(sum(v)) if isinstance(v, list) else v)
                 for key, v in stats.items() if key != "order"}
    else:
        start = None if used == "dense" else _component_start(components, keep, k,
                                                                 degree)
        pairs = solvers.solve(used, A, k, degree=degree[keep], tol=tol, max_iter=max_iter,
                              rng=rng, xp=np, start=start)
        mu, V, iterations, tol_used = pairs.values, pairs.vectors, pairs.iterations, pairs.tol
    t2 = time.perf_counter()
    embedding, vectors, residuals = finish_eigenvectors(A, mu, V, dinv, keep, n, np, used,
                                                        iterations, tol_used, stacklevel=3,
                                                        residuals=measured)
    t3 = time.perf_counter()
    emb = Embedding(
        embedding=embedding, vectors=vectors, eigenvalues=1.0 - np.asarray(mu),
        isolated=isolated, solver=used, iterations=iterations, residual_norms=residuals,
        tol=tol_used, timings={"laplacian": t1 - t0, "solve": t2 - t1, "vectors": t3 - t2,
                               **extra, "total": t3 - t0},
    )
    return emb, op


def _component_start(components, keep, k, degree):
    """As :func:`explorer.spectral_embedding`'s `components`: with exactly k components
    left, the iterative solver starts from their exact (unit) indicators; else None."""
    if components is None or np.unique(components[keep]).shape[0] != k:
        return None
    start = indicator_vectors(components[keep], k, degree[keep], np)[1]
    return start / column_norms(start, np)


def _kmeans(E, k, params, rng, client, on_gpu):
    """k-means of the embedding's kept rows `E` (a Dask array) on the workers."""
    if on_gpu:  # CuPy chunks: k-means on the workers' GPUs
        import cupy

        E = E.map_blocks(cupy.asarray, meta=cupy.empty((0, 0)))
    # Numbered by first point, as the single-process partition is.
    return kmeans_fit(E, k, n_init=params["n_init"], tol=params["kmeans_tol"],
                      max_iter=params["kmeans_max_iter"], random_state=rng,
                      client=client).number_by_first_point()


def _blocks_array(futures, rows, k):
    """The Dask array of the row blocks `futures` (`rows` each; empty ones skipped)."""
    import dask.array as da

    parts = [da.from_delayed(f, shape=(int(r), k), dtype=np.float64)
             for f, r in zip(futures, rows, strict=True) if r]
    return da.concatenate(parts)


def _place_labels(blocks, columns, n_kept, km_labels, X):
    """The labels of all n rows (:func:`~explorer.distributed._labels.finish_labels`:
    a Dask array with X's row chunks, gathered to the client within its budget):
    k-means' labels of each block's kept rows put in place on its worker, −1 for the
    rest."""
    client = blocks.client
    meta = label_meta(X)
    it = iter(km_labels)
    parts = []
    for col, r in zip(columns, n_kept, strict=True):
        lab = next(it) if r else None
        parts.append(client.submit(place_labels, col, lab, type(meta) is not np.ndarray,
                                   pure=False))
    return finish_labels(client, parts, blocks.sizes, tuple(int(c) for c in X.chunks[0]),
                         meta)


def place_labels(columns, labels, on_gpu):
    """One block's labels: `labels` (k-means', of its kept rows, or None when it kept
    none) at its kept rows (``columns >= 0``), −1 elsewhere; CuPy when `on_gpu`."""
    if on_gpu:
        import cupy as xp
    else:
        xp = np
    out = xp.full(columns.shape[0], -1, dtype=xp.int32)
    if labels is not None:
        out[xp.asarray(columns >= 0)] = xp.asarray(labels, dtype=xp.int32)
    return out


def plan_fit(data, params, client=None):
    """The :class:`~explorer.pipeline.FitPlan` of a spectral fit of the Dask array
    ``data.X`` (the input stage's float32 blocks): the checks of what the Dask engine
    runs, the row blocks placed on the workers, and the edge rule chosen on a worker
    from all points when parameters are missing (:meth:`explorer.EdgeRule.suggest`,
    which samples at most 20 000 rows). ``mode="representatives"`` (asked for; "auto"
    stays exact) plans the representatives chain on the workers
    (:func:`~explorer.distributed._representatives.plan_representatives`)."""
    from ..pipeline import FitPlan

    if params["scale"] not in (None, "auto"):  # "auto": the points as given here
        raise ValueError(
            f"scale={params['scale']!r} is not available on a Dask array (the distributed "
            "fit takes the points as given); scale the array first, e.g. "
            "(X - X.mean(axis=0)) / X.std(axis=0), and use scale=None")
    if params["reorder"] is not None:
        raise ValueError(
            f"reorder={params['reorder']!r} is for a single-process fit; a Dask array is "
            "embedded in its row blocks as built (use reorder=None)")
    if params["mode"] == "landmarks":
        raise ValueError("mode='landmarks' is not available on Dask arrays; allowed there: "
                         "mode='auto' or 'exact' (the distributed exact graph) and "
                         "'representatives'")
    if params["mode"] == "representatives":
        # Any graph kind: the representatives' graph is built in one process.
        return plan_representatives(data, params, client)
    # affinity="auto" (the default) is the ε-graph here: the only kind row blocks build.
    if params["affinity"] not in ("epsilon", "auto") or params["sigma"] == "local":
        what = (f"affinity={params['affinity']!r}"
                if params["affinity"] not in ("epsilon", "auto") else "sigma='local'")
        raise ValueError(f"{what} is not available for a Dask array yet (the row blocks "
                         "build ε graphs with a fixed σ); use affinity='epsilon' with a "
                         "numeric or 'auto' sigma, or fit the points as a NumPy or CuPy array")
    check_choice(params["eigen_solver"], "eigen_solver", DISTRIBUTED_SOLVERS)
    check_choice(params["method"], "method", METHODS)
    client = get_client(client)
    t0 = time.perf_counter()
    blocks = RowBlocks.from_dask(client, data.X)
    points = client.submit(gather_points, blocks.futures)
    sigma, t_sq = params["sigma"], params["threshold_sqdist"]
    if data.unit != 1.0:  # given lengths in the units the graph is built in
        sigma = sigma * data.unit if not isinstance(sigma, str) else sigma
        t_sq = None if t_sq is None else t_sq * data.unit**2
    rule = client.submit(EdgeRule.suggest, points, params["metric"], sigma, t_sq,
                         params["threshold_sim"], n_clusters=params["n_clusters"]).result()
    timings = {"suggest": time.perf_counter() - t0} if rule.suggested else {}
    solver = params["eigen_solver"]
    return FitPlan(
        params=params, data=data, engine="dask",
        engine_why=f"a Dask array: {n_workers(client)} workers of "
                   f"{client.scheduler.address}, {blocks.n_blocks} row blocks",
        backend="dask", backend_why="the work runs where the chunks are (NumPy chunks on "
        "the workers' CPUs, CuPy chunks on their GPUs)",
        mode="exact", mode_why="a Dask array: the distributed exact pipeline",
        affinity="epsilon", affinity_why=("given" if params["affinity"] == "epsilon" else
                                          "a Dask array: the distributed fit builds "
                                          "ε-graphs only"),
        rule=rule, eigen_solver=solver,
        eigen_solver_why=("given" if solver != "auto" else "auto, distributed: the "
                          "components' indicators with exactly k components, else dense up "
                          f"to {solvers.DENSE_MAX_N} vertices and LOBPCG beyond"),
        points=data.X, timings=timings, rng=check_random_state(params["random_state"]),
        engine_state={"client": client, "blocks": blocks, "points": points},
    )


def run_fit(plan):
    """Run a Dask engine plan (:func:`plan_fit`): the distributed exact pipeline, or
    in representatives mode :func:`~explorer.distributed._representatives.run_representatives`.

    Returns
    -------
    explorer.pipeline.FitResult

    Notes
    -----
    The stages of the single-process fit, each on the workers where it is O(n·…):

    1. the graph as CSR row blocks (:func:`~explorer.distributed.build_row_blocks`;
       ``method`` must be one of its builders or ``"auto"``);
    2. with a fixed k, the connected components, labelled per row block with only the
       links between blocks merged on the client
       (:func:`~explorer.distributed._components.block_components`), and the
       single-process components rule: stray pieces out, then the k largest;
    3. the embedding: with exactly k components left (solver ``"auto"`` or
       ``"components"``) their indicator vectors, row block by row block on the
       workers (:func:`~explorer.distributed._embedding.components_embedding`);
       otherwise :func:`distributed_embedding`: ``"chebyshev"`` (and ``"auto"`` beyond
       the dense size) on the workers where they have a collective
       (:mod:`~explorer.distributed._exact`: one worker, or one GPU per worker with
       NCCL, the rows then in the points' Morton order, a second build of the graph's
       rows on each GPU), else ``"dense"``, ``"lobpcg"`` or ``"lanczos"``, the solver
       on the client against the row-block operator;
    4. k-means of the embedding's rows, distributed with the row blocks
       (:func:`~explorer.distributed.kmeans_fit`).

    The random stream is the single-process one: the eigensolver draws its seed, then
    k-means seeds from the same stream. With the same solver, the distributed
    products equal the single-process ones bit for bit on the CPU, so the embedding
    is the same and the labels are those of the single-process fit (see
    :func:`~explorer.distributed.kmeans_fit` for the k-means rounding caveat).

    `labels`, `embedding` and `eigenvectors` are Dask arrays with X's row chunks
    (the labels' chunks of X's array kind, the embedding's NumPy). The labels are
    gathered to the client at the end of the fit when they fit its budget, and then
    stay valid after the client closes; larger ones stay on the workers and, used
    after the client closed, raise an error that says to ``.compute()`` them first
    (:mod:`~explorer.distributed._labels`). The components embedding's arrays are
    read while the client is open; `graph` is the
    :class:`~explorer.distributed.RowBlockGraph` (its ``to_csr()`` gathers it).
    The resident Chebyshev solve returns its vectors to the client, where k-means
    takes them as with the other solvers. Client-driven (a round trip per product):
    LOBPCG and Lanczos, and Chebyshev on several CPU workers (no collective there).
    """
    import dask.array as da

    if plan.mode == "representatives":
        return run_representatives(plan)
    params, rule, rng = plan.params, plan.rule, plan.rng
    X = plan.points
    client, blocks, points = (plan.engine_state[k] for k in ("client", "blocks", "points"))
    t1 = time.perf_counter()
    graph = build_row_blocks(X, rule, method=params["method"], client=client, blocks=blocks,
                             points=points)
    t2 = time.perf_counter()
    n = graph.n
    if graph.nnz == 0 or not (graph.degrees > 0).any():
        raise ValueError(
            f"the graph has no edge: all n={n} points are isolated; raise the threshold "
            f"(now {rule.describe()}) until points have neighbours"
        )

    auto = params["n_clusters"] == "auto"
    in_graph = graph.degrees > 0
    n_kept = int(np.count_nonzero(in_graph))
    solver = params["eigen_solver"]
    if auto and solver == "components":
        raise ValueError(
            "eigen_solver='components' needs a fixed n_clusters (it gives exactly k "
            "eigenpairs, no spectrum for the eigengap to read); with n_clusters='auto' use "
            "another solver"
        )
    comps = kept_labels = resident_why = None
    stages = {}
    if not auto:
        k = params["n_clusters"]
        if k > n_kept:
            raise ValueError(
                f"n_clusters={k} is out of range: only {n_kept} of the n={n} points have an "
                f"edge ({n - n_kept} are isolated); allowed: 1 <= n_clusters <= {n_kept}"
            )
        # The components rule of partition_graph: more than k, the k largest are the
        # clusters; exactly k (after that), their indicators are the eigenvectors.
        comps = block_components(graph)
        stages.update({f"components.{key}": v for key, v in comps.timings.items()})
        choice = largest_components(comps.found, comps.counts, comps.first, k,
                                    STRAY_SHARE)
        kept_labels = choice.kept
        if choice.n_dropped:
            warn_components(choice.n_components, n - n_kept, k, choice.n_dropped,
                             n_stray=choice.n_stray, stray_pieces=choice.stray_pieces,
                             stray_size=choice.stray_size)
        if solver == "auto" and choice.n_left >= k:
            solver = "components"
        if solver == "components" and choice.n_left < k:
            raise ValueError(
                f"solver='components' needs exactly n_components={k} connected components "
                f"among the non-isolated vertices, the graph has {choice.n_left}; use "
                "another solver"
            )
    on_gpu = label_meta(X).__class__ is not np.ndarray
    row_chunks = tuple(int(c) for c in X.chunks[0])
    if solver == "components":
        # On the workers, row block by row block: nothing of size n reaches the client.
        bemb = components_embedding(graph, comps, kept_labels)
        stages.update({f"embedding.{key}": v for key, v in bemb.timings.items()})
        t3 = time.perf_counter()
        E = _blocks_array(bemb.kept, bemb.n_kept, k)
        km = _kmeans(E, k, params, rng, client, on_gpu)
        labels = _place_labels(blocks, bemb.columns, bemb.n_kept, km.labels, X)
        embedding = bemb.dask_array("embedding", row_chunks)
        vectors = bemb.dask_array("vectors", row_chunks)
        eigenvalues, used_solver = bemb.eigenvalues, "components"
        iterations, residuals = None, bemb.residual_norms
    else:
        # The iterative and dense solvers run on the client (their n × k blocks are
        # there anyway), so the labels come to the client too.
        components = dropped = None
        if comps is not None:
            components = comps.gather()
            dropped = in_graph & ~np.isin(components, kept_labels)
        n_eig = auto_k_max(n_kept) if auto else k
        tol = EIGENGAP_TOL if auto and params["eigen_tol"] is None else params["eigen_tol"]
        resident = None
        if solver in ("auto", "chebyshev"):
            # Chebyshev on the workers where they have a collective; with several,
            # each builds its rows of the graph in the points' Morton order.
            resident = exact_plan(graph.blocks)
            resident_why = resident[2]
        order = "spatial" if resident is not None and resident[1] == "nccl" else None
        emb, _ = distributed_embedding(graph, n_eig, solver=solver, tol=tol,
                                       max_iter=params["eigen_max_iter"], random_state=rng,
                                       exclude=dropped, components=components,
                                       resident=resident, order=order, points=points)
        stages.update({key: v for key, v in emb.timings.items()
                       if key.startswith("resident.")})
        k = eigengap_k(emb.eigenvalues) if auto else k
        used = emb.truncate(k)
        t3 = time.perf_counter()
        keep = np.flatnonzero(~used.isolated)
        kept_per_block = [int(np.count_nonzero(~used.isolated[r0:r1]))
                          for r0, r1 in zip(blocks.offsets[:-1], blocks.offsets[1:],
                                            strict=True)]
        chunks = tuple(c for c in kept_per_block if c) or (keep.shape[0],)
        E = da.from_array(used.embedding[keep], chunks=(chunks, -1))
        km = _kmeans(E, k, params, rng, client, on_gpu)
        full = np.full(n, -1, dtype=np.int32)
        full[keep] = km.labels_numpy()
        labels = da.from_array(full, chunks=(row_chunks,))
        if on_gpu:
            import cupy

            labels = labels.map_blocks(cupy.asarray, meta=label_meta(X))
        embedding = da.from_array(used.embedding, chunks=(row_chunks, -1))
        vectors = da.from_array(used.vectors, chunks=(row_chunks, -1))
        eigenvalues, used_solver = used.eigenvalues, emb.solver
        iterations, residuals = emb.iterations, emb.residual_norms
    t4 = time.perf_counter()

    plan.engine_state = None  # the client and its futures are not kept with the fit
    return FitResult(
        labels=labels, n_clusters=int(k), eigenvalues=eigenvalues, embedding=embedding,
        eigenvectors=vectors, isolated=~in_graph,
        eigen_solver=used_solver,
        eigen_solver_why=_solver_why(params["eigen_solver"], used_solver, k,
                                     resident_why),
        eigen_iterations=iterations, eigen_residuals=residuals, backend="dask",
        backend_why=plan.engine_why, graph=graph, affinity_matrix=graph,
        timings={"graph": t2 - t1, "embedding": t3 - t2, "kmeans": t4 - t3, **stages},
    )


def engine_kmeans(data, params):
    """:class:`explorer.KMeans` on the Dask array ``data.X`` (the engine's k-means):
    ``(centres, labels, inertia, n_iter)``, the centres in ``data.X``'s space and the
    labels a Dask array with X's row chunks, computed to the client within its budget
    (:func:`~explorer.distributed._labels.finish_labels`)."""
    result = kmeans_fit(data.X, params["n_clusters"], init=params["init"],
                        n_init=params["n_init"], max_iter=params["max_iter"],
                        tol=params["tol"], random_state=params["random_state"])
    labels = finish_labels(result.blocks.client, result.labels, result.blocks.sizes,
                           result.row_chunks, result.meta)
    return result.cluster_centers.astype(np.float64), labels, result.inertia, result.n_iter
