"""Representatives mode on a Dask array: data larger than one GPU, clustered end to end.

The chain of :mod:`explorer.representatives` with the rows left where they are:

1. a uniform sample of ``SAMPLE_PER_REPRESENTATIVE · m`` rows, drawn on the client
   from the fit's stream as the single-process extraction draws it
   (:func:`explorer.representatives.sample_rows`), cut out of each row block on its
   worker;
2. the representatives' k-means of that sample across the workers
   (:func:`~explorer.distributed.kmeans_fit`: with one GPU per worker its Lloyd loop
   runs on the workers, the sums all-reduced by NCCL), with the single-process
   seeding, iterations and tolerance;
3. every row assigned to its nearest representative on its worker
   (:func:`explorer.representatives.assign_rows`), the counts per representative and
   the squared distances reduced on the client;
4. the m × m graph of the representatives, weighted by their counts, partitioned by
   the single-process pipeline in the client process (:func:`explorer.pipeline.run_graph`,
   on the client's backend: its GPU when it has one);
5. the labels mapped back on the workers (``rep_labels[assignment]``) and returned as
   :func:`~explorer.distributed._labels.finish_labels` returns them.

Only the sample (m · 32 rows), the m × d centres and m counts reach the client; the
rows, their assignment and their labels stay on the workers.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from sklearn.utils import check_random_state

from .._backend import array_module, resolve_backend, to_numpy
from ..pipeline import Points, plan_graph_of, run_graph
from ..representatives import (
    REPRESENTATIVE_INIT,
    REPRESENTATIVE_MAX_ITER,
    REPRESENTATIVE_TOL,
    SAMPLE_PER_REPRESENTATIVE,
    Representatives,
    assign_rows,
    check_n_representatives,
    sample_rows,
)
from ._blocks import RowBlocks, get_client, n_workers
from ._kmeans import kmeans_fit, label_meta
from ._labels import finish_labels

__all__ = ["plan_representatives", "run_representatives"]


# ---------------------------------------------------------------- worker functions


def take_rows(block, local):
    """Rows `local` of a block (on its device)."""
    xp = array_module(block)
    return block[xp.asarray(local)]


def assign_block(block, centers, m):
    """A block's rows assigned to their nearest representative: ``(labels int32,
    float64 sum of squared distances, int64 counts per representative (host))``."""
    xp = array_module(block)
    labels, total = assign_rows(block, xp.asarray(centers))
    return labels, total, to_numpy(xp.bincount(labels, minlength=m)).astype(np.int64)


def assign_summary(assigned):
    return assigned[1], assigned[2]


def assignment(assigned):
    return assigned[0]


def map_block(assigned, rep_labels):
    """A block's labels: its rows' representatives' (``rep_labels[assignment]``)."""
    labels = assigned[0]
    xp = array_module(labels)
    return xp.asarray(rep_labels, dtype=xp.int32)[labels]


def take_values(labels, values):
    """``values[labels]`` on the labels' device (isolated rows from the representatives')."""
    xp = array_module(labels)
    return xp.asarray(values)[labels]


# ---------------------------------------------------------------- client side


def plan_representatives(data, params, client=None):
    """The :class:`~explorer.pipeline.FitPlan` of ``mode="representatives"`` on the
    Dask array ``data.X``: steps 1-3 of the module's chain run here (the
    representatives are the plan's points, as in the single-process plan), then the
    single-process planner chooses the graph kind and edge rule from them."""
    client = get_client(client)
    t0 = time.perf_counter()
    blocks = RowBlocks.from_dask(client, data.X)
    n, d = blocks.n, int(data.X.shape[1])
    meta = label_meta(data.X)
    on_gpu = type(meta) is not np.ndarray
    m = check_n_representatives(params["n_representatives"], n, params["n_clusters"],
                                "gpu" if on_gpu else "cpu")
    rng = check_random_state(params["random_state"])
    size = min(n, SAMPLE_PER_REPRESENTATIVE * m)
    rows = sample_rows(n, size, rng) if size < n else np.arange(n)
    sample = _sample_array(blocks, rows, d, data.X)
    km = kmeans_fit(sample, m, init=REPRESENTATIVE_INIT, n_init=1,
                    max_iter=REPRESENTATIVE_MAX_ITER, tol=REPRESENTATIVE_TOL,
                    random_state=rng, client=client)
    centers = np.ascontiguousarray(km.cluster_centers, dtype=np.float32)
    t1 = time.perf_counter()
    assigned = blocks.map(assign_block, centers, m)
    total, counts = 0.0, np.zeros(m, dtype=np.int64)
    for part_total, part_counts in client.gather([client.submit(assign_summary, a)
                                                  for a in assigned]):
        total, counts = total + part_total, counts + part_counts
    t2 = time.perf_counter()
    backend = resolve_backend(params["backend"])
    xp = backend.xp
    reps = Representatives(
        centers=xp.asarray(centers), labels=None, counts=xp.asarray(counts),
        sample_size=int(rows.shape[0]), n_iter=km.n_iter, mean_sqdist=total / n,
        timings={"fit": t1 - t0, "assign": t2 - t1},
    )
    timings = {"representatives": t2 - t0,
               **{f"representatives.{k}": v for k, v in reps.timings.items()}}
    where = Points(
        data=data, backend=backend, mode="representatives",
        mode_why=(f"asked for: {m} representatives of the n={n} rows, k-means of "
                  f"{rows.shape[0]} sampled rows on the workers ({km.lloyd}), every row "
                  "assigned on its worker"),
        points=reps.centers, representatives=reps, rng=rng, timings=timings)
    plan = plan_graph_of(where, None, params)
    return replace(
        plan, engine="dask",
        engine_why=f"a Dask array: {n_workers(client)} workers of "
                   f"{client.scheduler.address}, {blocks.n_blocks} row blocks",
        backend_why=(f"the representatives' graph in the client process ({backend.reason}); "
                     "the rows on the workers"),
        engine_state={"client": client, "blocks": blocks, "assigned": assigned,
                      "meta": meta, "row_chunks": tuple(int(c) for c in data.X.chunks[0])},
    )


def _sample_array(blocks, rows, d, X):
    """The rows `rows` (increasing) as a Dask array of pieces cut on their workers."""
    import dask.array as da

    which, local = blocks.locate(rows)
    meta = X._meta if getattr(X, "_meta", None) is not None else np.empty((0, d), np.float32)
    parts = []
    for b in np.unique(which):
        sel = local[which == b]
        f = blocks.client.submit(take_rows, blocks.futures[b], sel, pure=False)
        parts.append(da.from_delayed(f, shape=(int(sel.shape[0]), d), dtype=np.float32,
                                     meta=meta))
    return da.concatenate(parts)


def run_representatives(plan):
    """Steps 4-5 of the chain: the representatives' graph partitioned in the client
    process, the labels mapped back on the workers. Returns the
    :class:`~explorer.pipeline.FitResult` with the points' labels, the points'
    ``isolated`` (a Dask array, mapped from their representatives') and, as
    ``plan.representatives.labels``, each row's representative (labels and
    representatives within the client's budget are computed; see
    :func:`~explorer.distributed._labels.finish_labels`)."""
    state = plan.engine_state
    client, blocks, assigned = state["client"], state["blocks"], state["assigned"]
    reps = plan.representatives
    xp = array_module(reps.centers)
    m = int(reps.centers.shape[0])
    t0 = time.perf_counter()
    # The single-process runner on the m representatives, each standing for itself.
    reps.labels = xp.arange(m, dtype=xp.int32)
    result = run_graph(replace(plan, engine="in-process", engine_state=None))
    t1 = time.perf_counter()
    rep_labels = to_numpy(result.representative_labels).astype(np.int32)
    rep_isolated = to_numpy(result.isolated)
    sizes, chunks, meta = blocks.sizes, state["row_chunks"], state["meta"]
    labels = finish_labels(client, [client.submit(map_block, a, rep_labels, pure=False)
                                    for a in assigned], sizes, chunks, meta)
    reps.labels = finish_labels(client, [client.submit(assignment, a, pure=False)
                                         for a in assigned], sizes, chunks, meta)
    isolated = reps.labels.map_blocks(take_values, rep_isolated, dtype=bool,
                                      meta=np.empty((0,), bool) if type(meta) is np.ndarray
                                      else meta.astype(bool))
    plan.engine_state = None  # the client and its futures are not kept with the fit
    return replace(result, labels=labels, isolated=isolated, backend="dask",
                   timings={**result.timings, "map_labels": time.perf_counter() - t1,
                            "representatives_graph": t1 - t0})
