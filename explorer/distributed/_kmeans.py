"""Distributed k-means after "Scalable Clustering using Multiple GPUs": each worker
assigns its row blocks to the nearest centres and forms float64 partial sums; the
client adds them in block order.

The single-process pieces do the arithmetic (:func:`explorer.kmeans.assign_nearest`,
its seeding helpers and inertia); this module only cuts the work by row blocks and
reduces what comes back.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import check_random_state

from .. import kmeans as _km
from .._backend import array_module, chunk_rows, column_sums, to_numpy
from .._validation import check_choice, check_data, check_float, check_int
from ._blocks import RowBlocks, get_client, per_block
from ._resident import resident_plan, run_resident

__all__ = ["DistributedKMeansResult", "kmeans_fit"]

#: Restarts run side by side by at most this many client threads.
MAX_CONCURRENT_RESTARTS = 16


@dataclass
class DistributedKMeansResult:
    """What :func:`kmeans_fit` returns.

    Attributes
    ----------
    cluster_centers : numpy.ndarray of shape (k, d)
        float64 for float64 data, else float32 (as :class:`explorer.KMeans`).
    labels : list of distributed.Future
        The int32 labels of each row block, on its worker, in block order.
    blocks : RowBlocks
        The row blocks the labels belong to.
    inertia : float
    n_iter : int
        Lloyd iterations of the kept run.
    init : str
        The seeding that ran (``"auto"`` resolved).
    timings : dict of str to float
        Seconds: ``"prepare"``, ``"seed"``, ``"lloyd"``, ``"total"``; with the
        worker-resident loop also the slowest worker's ``"lloyd_compute"`` and
        ``"lloyd_allreduce"`` seconds, ``"lloyd_iterations"`` (all restarts),
        ``"lloyd_step_median"`` (the median seconds of an iteration, the slowest
        worker's each time) and ``"lloyd_start_wait"`` (seconds the first worker to
        start waited for the last).
    """

    cluster_centers: np.ndarray
    labels: list
    blocks: RowBlocks
    inertia: float
    n_iter: int
    init: str
    timings: dict = field(default_factory=dict)
    #: An empty int32 array of the chunks' module (NumPy or CuPy), for `labels_array`.
    meta: object = None
    #: The row chunks of the data (labels_array takes them, empty chunks included).
    row_chunks: tuple | None = None
    #: Where the Lloyd iterations ran, and why (:func:`kmeans_fit`, Notes).
    lloyd: str = ""

    def labels_array(self):
        """The labels as a Dask array with the data's row chunks (nothing is gathered;
        valid while the client is open: :func:`~explorer.distributed._labels.finish_labels`
        gives the labels that outlive it)."""
        import dask.array as da

        meta = self.meta if self.meta is not None else np.empty((0,), dtype=np.int32)
        out = da.concatenate([
            da.from_delayed(f, shape=(int(s),), dtype=np.int32, meta=meta)
            for f, s in zip(self.labels, self.blocks.sizes, strict=True)
        ])
        if self.row_chunks is not None and out.chunks[0] != tuple(self.row_chunks):
            out = out.rechunk((tuple(self.row_chunks),))
        return out

    def number_by_first_point(self) -> DistributedKMeansResult:
        """Renumber the clusters in the order of their first row, as
        :func:`explorer.kmeans.number_by_first_point` does for one process: each
        block's first rows come to the client (k integers a block), the renumbering
        runs on the workers. In place; returns self."""
        client = self.blocks.client
        k = self.cluster_centers.shape[0]
        firsts = client.gather([client.submit(_km.first_rows, f, k, pure=False)
                                for f in self.labels])
        first = np.full(k, self.blocks.n, dtype=np.int64)
        for r0, size, f in zip(self.blocks.offsets[:-1], self.blocks.sizes, firsts,
                               strict=True):
            first = np.minimum(first, np.where(f < size, f + r0, self.blocks.n))
        order, new_id = _km.first_row_numbering(first)
        self.cluster_centers = self.cluster_centers[order]
        self.labels = [client.submit(renumber, f, new_id, pure=False) for f in self.labels]
        return self

    def labels_numpy(self) -> np.ndarray:
        """The labels gathered to the client as one NumPy array."""
        parts = self.blocks.client.gather(self.labels)
        return np.concatenate([to_numpy(p) for p in parts]).astype(np.int32, copy=False)


def kmeans_fit(X, n_clusters, *, init="auto", n_init=10, max_iter=300, tol=1e-4,
               random_state=None, client=None, resident=True) -> DistributedKMeansResult:
    """k-means of the rows of a Dask array on a dask.distributed cluster.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        NumPy or CuPy chunks (each worker computes with its chunks' module); chunked
        by rows (column chunks are merged).
    n_clusters, init, n_init, max_iter, tol, random_state
        As :class:`explorer.KMeans` (`init` may be an array of shape (k, d)).
    client : distributed.Client, optional
        Default: the Client in scope.
    resident : bool, default True
        Run the Lloyd iterations on the workers where that can be done
        (:mod:`._resident`: one worker, or one GPU per worker with NCCL); False keeps
        the client-reduced loop (for comparison).

    Returns
    -------
    DistributedKMeansResult

    Notes
    -----
    **Paper 001's scheme.** Each row block stays on its worker for the whole fit
    (centred there, its squared norms kept). Each worker runs the single-process
    assignment step (:func:`explorer.kmeans.assign_nearest`) on its rows and keeps the
    labels; only float64 per-cluster sums and counts (k × (d + 1)) and how many labels
    changed are exchanged, and added in a fixed order (float64, the accurate update of
    He, Vialle and Baboulin's k-means chain).

    **Where the loop runs** (``result.lloyd`` says which ran and why). With one worker
    holding the blocks, or with one GPU per worker and NCCL, the whole Lloyd loop of
    every restart runs on the workers (:mod:`._resident`): one task per worker, the
    partial sums all-reduced between the workers each iteration, no scheduler or
    client in the loop. Otherwise (several CPU workers: no collective between their
    processes here) each iteration is a round trip: the client sends the centres,
    gathers the partial sums in block order and forms the new centres.

    **Seeding.** The random draws come from `random_state` in the same sequence as
    :class:`explorer.KMeans`'s, so ``"k-means++"`` and ``"random"`` pick the same
    points. Greedy k-means++ is distributed round by round: the blocks' float64 mass
    totals locate each D²-draw's block, the block finds the row, and the candidates'
    potentials are reduced from per-block partial sums. ``"k-means||"`` draws its
    candidates on the workers, each block from its own stream seeded by
    ``(seed, round, block)``: deterministic for a given chunking, but not the draws of
    the single-process run (which draws all n uniforms from one stream); its
    candidates are reduced to k centres on the client by the same weighted greedy
    k-means++.

    **Same labels as the single-process path.** Everything a label depends on is
    computed by the same functions on the same rows, and every reduction is done in
    a fixed order, so repeats give identical results. Against
    :class:`explorer.KMeans` on the same data and seed, the sums are grouped by block
    instead of by the single-process chunk, which changes the last bits of float64
    sums (the mean, D² totals, centroid sums); labels can then differ only for a point
    equidistant to two centres within that rounding (or a draw that falls within it
    of a row boundary), which the tests never met.
    """
    t_start = time.perf_counter()
    client = get_client(client)
    blocks = RowBlocks.from_dask(client, X)
    n, d = blocks.n, int(X.shape[1])
    k = check_int(n_clusters, "n_clusters", low=1)
    if k > n:
        raise ValueError(
            f"n_clusters={k} is more than the n={n} samples of X; "
            f"allowed: 1 <= n_clusters <= {n}"
        )
    n_init = check_int(n_init, "n_init", low=1)
    max_iter = check_int(max_iter, "max_iter", low=1)
    tol = check_float(tol, "tol", low=0.0, high=1.0)
    if isinstance(init, str):
        init = check_choice(init, "init", _km.INITS)
    else:
        init = np.asarray(init.get() if hasattr(init, "get") else init, dtype=np.float64)
        if init.shape != (k, d):
            raise ValueError(f"init array has shape {init.shape}; it must be (n_clusters, "
                             f"n_features) = {(k, d)}")
    rng = check_random_state(random_state)

    t0 = time.perf_counter()
    prepared, mean, out_dtype = _prepare(blocks)
    t1 = time.perf_counter()
    if not isinstance(init, str):
        init = init - mean
        n_init = 1
    elif init == "auto":
        parallel = n >= _km.PARALLEL_MIN_SAMPLES and k <= _km.PARALLEL_MAX_CLUSTERS
        init = "k-means||" if parallel else "k-means++"
    parallel = isinstance(init, str) and init == "k-means||"
    pool = _oversample(blocks, prepared, k, d, rng) if parallel else None
    t_seed = time.perf_counter() - t1
    t_lloyd = 0.0
    # Every restart's draws first, in the single-process order (Lloyd draws nothing),
    # then the restarts run side by side: each is a chain of small round trips, so
    # their latencies overlap instead of adding up. The best is kept in restart order.
    draws = [_restart_draws(blocks.n, k, init, rng, pool) for _ in range(n_init)]

    tol_abs = _tolerance(blocks, prepared, tol, d)
    workers, kind, loop_why = (resident_plan(blocks, prepared) if resident
                               else (None, None, "client-reduced loop (asked for)"))
    stats = {}

    if kind is not None:
        # Seeding as below (a chain of client round trips per restart, side by side),
        # then every restart's Lloyd loop on the workers, one task per worker.
        def seed(r):
            t2 = time.perf_counter()
            return (_initial_centers(blocks, prepared, k, d, init, draws[r]),
                    time.perf_counter() - t2)

        with ThreadPoolExecutor(max_workers=min(n_init, MAX_CONCURRENT_RESTARTS)) as pool_:
            seeded = list(pool_.map(seed, range(n_init)))
        t_seed += sum(s for _, s in seeded)
        t3 = time.perf_counter()
        centers, labels, inertia, n_iter, stats = run_resident(
            blocks, prepared, workers, kind, [c for c, _ in seeded], max_iter, tol_abs)
        t_lloyd = time.perf_counter() - t3
        products = stats.pop("lloyd_products")[0]
        if products:
            loop_why += ("; the checked assignment's products, steps each: "
                         + ", ".join(f"{p} {c}" for p, c in products.items()))
    else:
        def restart(r):
            t2 = time.perf_counter()
            centers = _initial_centers(blocks, prepared, k, d, init, draws[r])
            t3 = time.perf_counter()
            return (_lloyd(blocks, prepared, centers, max_iter, tol_abs), t3 - t2,
                    time.perf_counter() - t3)

        with ThreadPoolExecutor(max_workers=min(n_init, MAX_CONCURRENT_RESTARTS)) as pool_:
            results = list(pool_.map(restart, range(n_init)))
        for _, seed_s, lloyd_s in results:
            t_seed += seed_s
            t_lloyd += lloyd_s
        best = results[_km.best_restart([result[2] for result, _, _ in results])][0]
        centers, labels, inertia, n_iter = best
    return DistributedKMeansResult(
        cluster_centers=(centers + mean).astype(out_dtype), labels=labels, blocks=blocks,
        inertia=float(inertia), n_iter=int(n_iter),
        init=init if isinstance(init, str) else "array",
        timings={"prepare": t1 - t0, "seed": t_seed, "lloyd": t_lloyd, **stats,
                 "total": time.perf_counter() - t_start},
        meta=label_meta(X), row_chunks=tuple(int(c) for c in X.chunks[0]),
        lloyd=loop_why,
    )


def renumber(labels, new_id):
    """A block's labels renumbered: ``new_id[labels]`` on the block's device."""
    xp = array_module(labels)
    return xp.asarray(new_id)[labels]


def label_meta(X):
    """An empty int32 array of the module of the Dask array `X`'s chunks."""
    meta = getattr(X, "_meta", None)
    if meta is None or type(meta).__module__.split(".")[0] != "cupy":
        return np.empty((0,), dtype=np.int32)
    import cupy

    return cupy.empty((0,), dtype=cupy.int32)


# ---------------------------------------------------------------- worker functions
# Module-level, so that worker processes import them by name.


def _block_column_sums(block):
    """Validated block: (float64 column sums of the values k-means centres, is float64)."""
    X32 = check_data(block, min_samples=1)
    xp = array_module(X32)
    is64 = array_module(block) is xp and getattr(block, "dtype", None) == xp.float64
    return to_numpy(column_sums(block if is64 else X32, xp)), is64


def _centre_block(block, shift, is64):
    """The block centred as :func:`explorer.kmeans.centre` centres X, with its squared
    row norms: ``(Xc float32, x_sq)``."""
    xp = array_module(block)
    if is64:
        Xc = (block - xp.asarray(shift)).astype(xp.float32)
    else:
        X32 = check_data(block, min_samples=1)
        Xc = X32 - xp.asarray(shift.astype(np.float32))
    return Xc, _km.row_sq_norms(Xc, xp)


def _block_moments(prep):
    """float64 sum of the block's squared row norms and its column sums (centred rows),
    for :func:`explorer.kmeans.variance_tolerance`."""
    Xc, x_sq = prep
    xp = array_module(Xc)
    return float(x_sq.sum(dtype=xp.float64)), to_numpy(column_sums(Xc, xp))


def _rows(prep, local):
    """Rows `local` of the centred block, float64 on the host."""
    Xc, _ = prep
    xp = array_module(Xc)
    return to_numpy(Xc[xp.asarray(local)]).astype(np.float64)


def _sqdist_first(prep, row):
    """k-means++ state of a block after the first centre: (closest, mass = closest)."""
    Xc, x_sq = prep
    xp = array_module(Xc)
    closest = _km.sqdist(Xc, x_sq, xp.asarray(row[None, :]).astype(xp.float32))[:, 0]
    return closest, closest


def _mass_total(state):
    """float64 total of the block's D² mass (the last value of its running sum)."""
    mass = state[1]
    xp = array_module(mass)
    return float(xp.cumsum(mass, dtype=xp.float64)[-1]) if mass.shape[0] else 0.0


def _find_draws(state, targets):
    """Local row of each target of a running sum started at the block's offset."""
    offset, local_targets = targets
    mass = state[1]
    xp = array_module(mass)
    cumulative = xp.cumsum(mass, dtype=xp.float64) + offset
    found = xp.searchsorted(cumulative, xp.asarray(local_targets))
    return to_numpy(xp.minimum(found, mass.shape[0] - 1))


def _trial(prep, state, candidates):
    """Each candidate's potential over the block, and the trial distances kept for
    :func:`_choose`: ``(dist, partial potentials)``."""
    Xc, x_sq = prep
    xp = array_module(Xc)
    closest = state[0]
    dist = xp.minimum(_km.sqdist(Xc, x_sq, xp.asarray(candidates).astype(xp.float32)),
                      closest[:, None])
    return dist, to_numpy(column_sums(dist, xp))


def _choose(trial, best):
    dist = trial[0]
    return dist[:, best], dist[:, best]


def _draw_round(prep, closest, seed, potential, ell):
    """k-means|| round on one block: local rows drawn with probability l·d²/potential."""
    Xc, _ = prep
    xp = array_module(Xc)
    draws = xp.random.RandomState(seed).random_sample(Xc.shape[0])
    return to_numpy(xp.flatnonzero(draws * potential < ell * closest))


def _closest_sum(closest):
    xp = array_module(closest)
    return float(closest.sum(dtype=xp.float64))


def _closest_after(prep, closest, new):
    """Squared distance of each row to its nearest candidate, old or `new`."""
    Xc, x_sq = prep
    xp = array_module(Xc)
    chunk = chunk_rows(xp, max(new.shape[0], Xc.shape[1]))
    _, dist, _ = _km.assign_nearest(Xc, x_sq, xp.asarray(new), chunk, xp, want_sums=False)
    return dist if closest is None else xp.minimum(closest, dist)


def _farthest(values, count):
    """The block's `count` largest `values` and their local rows, largest first."""
    xp = array_module(values)
    local = xp.argsort(-values)[:count]
    return to_numpy(values[local]).astype(np.float64), to_numpy(local)


def _nearest_counts(prep, candidates):
    """Rows of the block nearest to each candidate (int64, one per candidate)."""
    Xc, x_sq = prep
    xp = array_module(Xc)
    m = candidates.shape[0]
    chunk = chunk_rows(xp, max(m, Xc.shape[1]))
    labels, _, _ = _km.assign_nearest(Xc, x_sq, xp.asarray(candidates), chunk, xp,
                                      want_sums=False)
    return to_numpy(xp.bincount(labels, minlength=m)).astype(np.int64)


def _step(prep, centers, previous):
    """One Lloyd assignment on a block: ``(labels, mind, sums, changed)``; `sums` the
    float64 per-cluster sums and counts (k × (d + 1)) on the host. `previous` is the
    block's previous step (its labels are item 0), or None."""
    previous = None if previous is None else previous[0]
    Xc, x_sq = prep
    xp = array_module(Xc)
    chunk = chunk_rows(xp, max(centers.shape))
    labels, mind, sums = _km.assign_nearest(Xc, x_sq, xp.asarray(centers), chunk, xp,
                                            want_sums=True)
    changed = Xc.shape[0] if previous is None else int(xp.count_nonzero(labels != previous))
    return labels, mind, to_numpy(sums), changed


def _labels_only(prep, centers):
    Xc, x_sq = prep
    xp = array_module(Xc)
    chunk = chunk_rows(xp, max(centers.shape))
    return _km.assign_nearest(Xc, x_sq, xp.asarray(centers), chunk, xp, want_sums=False)[0]


def _block_inertia(prep, centers, labels):
    Xc, _ = prep
    xp = array_module(Xc)
    return float(_km.inertia(Xc, xp.asarray(centers), labels,
                              chunk_rows(xp, max(centers.shape)), xp))


# ---------------------------------------------------------------- client side


def _prepare(blocks: RowBlocks):
    """Centre every block on its worker: futures of (Xc, x_sq), the float64 shift and
    the output dtype (the rules of :func:`explorer.kmeans.centre`, the mean from
    per-block float64 column sums added in block order)."""
    parts = blocks.client.gather(blocks.map(_block_column_sums))
    total = np.zeros_like(parts[0][0])
    for sums, _ in parts:
        total = total + sums
    is64 = all(p[1] for p in parts)
    shift = total / blocks.n
    if not is64:
        shift = shift.astype(np.float32).astype(np.float64)
    prepared = blocks.map(_centre_block, shift, is64)
    return prepared, shift, (np.float64 if is64 else np.float32)


def _fetch_rows(blocks, prepared, index) -> np.ndarray:
    """Rows `index` (global) of the centred data, float64, in the order given."""
    index = np.asarray(index, dtype=np.int64)
    which, local = blocks.locate(index)
    wanted = []
    for b in np.unique(which):
        sel = np.flatnonzero(which == b)
        wanted.append((sel, blocks.client.submit(_rows, prepared[b], local[sel], pure=False)))
    rows = None
    for sel, fut in wanted:
        values = fut.result()
        if rows is None:
            rows = np.empty((index.shape[0], values.shape[1]))
        rows[sel] = values
    return np.empty((0, 0)) if rows is None else rows


def _restart_draws(n, k, init, rng, pool):
    """What one restart's seeding draws from `rng`, drawn now and in the order of
    :func:`explorer.kmeans._initial_centers`: the k-means|| centres themselves (reduced
    on the client), the rows of ``"random"``, or k-means++'s first row and uniforms."""
    if not isinstance(init, str):
        return init
    if init == "random":
        return rng.choice(n, size=k, replace=False)
    if init == "k-means||":
        candidates, cand_sq, weights = pool
        return _km.kmeans_plusplus(candidates, cand_sq, k, rng, np, weights=weights)
    first = int(rng.randint(n))
    return first, rng.uniform(size=(k - 1, 2 + int(np.log(k))))


def _initial_centers(blocks, prepared, k, d, init, draws):
    if not isinstance(init, str) or init == "k-means||":
        return draws
    if init == "random":
        return _fetch_rows(blocks, prepared, draws)
    return _kmeans_plusplus(blocks, prepared, k, d, draws)


def _kmeans_plusplus(blocks, prepared, k, d, draws):
    """Greedy k-means++ over the row blocks with the draws of
    :func:`explorer.kmeans.kmeans_plusplus` (`draws`: the first row and the uniforms,
    from :func:`_restart_draws`)."""
    client = blocks.client
    trials = 2 + int(np.log(k))
    centers = np.empty((k, d), dtype=np.float64)
    first, uniforms = draws
    centers[0] = _fetch_rows(blocks, prepared, [first])[0]
    states = blocks.map(_sqdist_first, centers[0], blocks=prepared)
    for c in range(1, k):
        totals = np.asarray(client.gather(blocks.map(_mass_total, blocks=states)))
        ends = np.cumsum(totals)
        targets = uniforms[c - 1] * ends[-1]
        # The block whose running-sum range holds each target, then the row inside it.
        which = np.minimum(np.searchsorted(ends, targets), blocks.n_blocks - 1)
        index = np.empty(trials, dtype=np.int64)
        for b in np.unique(which):
            sel = np.flatnonzero(which == b)
            start = ends[b - 1] if b else 0.0
            local = client.submit(_find_draws, states[b], (start, targets[sel]),
                                  pure=False).result()
            index[sel] = local + blocks.offsets[b]
        candidates = _fetch_rows(blocks, prepared, index)
        trial = blocks.map(_trial, per_block(states), candidates, blocks=prepared)
        potentials = np.zeros(trials)
        for p in blocks.gather_parts(trial, 1):
            potentials = potentials + p
        best = int(np.argmin(potentials))
        centers[c] = candidates[best]
        states = blocks.map(_choose, best, blocks=trial)
    return centers


def _oversample(blocks, prepared, k, d, rng):
    """k-means|| candidates drawn on the workers (see :func:`kmeans_fit`, Notes), in the
    form :func:`explorer.kmeans._oversample` returns them."""
    client = blocks.client
    ell = _km.OVERSAMPLING * k
    seed = int(rng.randint(2**31 - 1))
    first = int(rng.randint(blocks.n))
    picked = [np.asarray([first])]
    new = _fetch_rows(blocks, prepared, [first])
    closest = blocks.map(_closest_after, None, new, blocks=prepared)
    for r in range(_km.PARALLEL_ROUNDS):
        potential = sum(client.gather(blocks.map(_closest_sum, blocks=closest)))
        if potential <= 0:
            break
        seeds = [int(s.generate_state(1)[0] >> 1)
                 for s in np.random.SeedSequence([seed, r]).spawn(blocks.n_blocks)]
        drawn = client.gather(blocks.map(_draw_round, per_block(closest), per_block(seeds),
                                         potential, ell, blocks=prepared))
        chosen = np.concatenate([loc + blocks.offsets[b] for b, loc in enumerate(drawn)])
        if chosen.size == 0:
            continue
        new = _fetch_rows(blocks, prepared, chosen)
        closest = blocks.map(_closest_after, per_block(closest), new, blocks=prepared)
        picked.append(chosen)
    index = np.concatenate(picked)
    if index.shape[0] < k:
        index = np.concatenate([index, _global_farthest(blocks, closest, k - index.shape[0])])
    candidates = _fetch_rows(blocks, prepared, index).astype(np.float32)
    weights = np.zeros(index.shape[0])
    for counts in client.gather(blocks.map(_nearest_counts, candidates.astype(np.float64),
                                           blocks=prepared)):
        weights = weights + counts
    return candidates, _km.row_sq_norms(candidates, np), weights


def _global_farthest(blocks, values, count) -> np.ndarray:
    """Global rows of the `count` largest per-row `values` (futures, one per block)."""
    parts = blocks.client.gather(blocks.map(_farthest, count, blocks=values))
    vals = np.concatenate([p[0] for p in parts])
    rows = np.concatenate([p[1] + blocks.offsets[b] for b, p in enumerate(parts)])
    order = np.argsort(-vals, kind="stable")[:count]
    return rows[order]


def _tolerance(blocks, prepared, tol, d):
    """The absolute centre-shift tolerance of :class:`explorer.KMeans` (scikit-learn's
    rule, :func:`explorer.kmeans.variance_tolerance`) from per-block float64 totals
    added in block order."""
    sq_total, columns = 0.0, np.zeros(d)
    for sq, col in blocks.client.gather(blocks.map(_block_moments, blocks=prepared)):
        sq_total, columns = sq_total + sq, columns + col
    return _km.variance_tolerance(tol, sq_total, columns, blocks.n, d)


def _lloyd(blocks, prepared, centers, max_iter, tol_abs):
    """Lloyd iterations as :func:`explorer.kmeans._lloyd_starts` runs one restart, the
    assignment on the workers and the partial sums reduced on the client in block
    order; the same stopping rule (no label changed, or without an empty cluster a
    squared centre shift of at most `tol_abs`)."""
    client = blocks.client
    previous = [None] * blocks.n_blocks
    consistent = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        steps = blocks.map(_step, centers, per_block(previous), blocks=prepared)
        small = client.gather([client.submit(_sums_changed, s) for s in steps])
        sums = np.zeros_like(small[0][0])
        changed = 0
        for s, c in small:
            sums = sums + s
            changed += c
        centers, empty, shift = _km.update_centers(centers, sums, np)
        n_empty = int(np.count_nonzero(empty))
        if n_empty:
            mind = blocks.parts(steps, 1)
            far = _global_farthest(blocks, mind, n_empty)
            centers[np.flatnonzero(empty)] = _fetch_rows(blocks, prepared, far)
        previous = steps  # the next step reads the labels where they are
        consistent = changed == 0 and n_empty == 0
        if _km.lloyd_stops(changed, n_empty, shift, tol_abs):
            break
    if consistent:
        labels = blocks.parts(previous, 0)
    else:
        labels = blocks.map(_labels_only, centers, blocks=prepared)
    inertia = 0.0
    for value in client.gather(blocks.map(_block_inertia, centers, per_block(labels),
                                          blocks=prepared)):
        inertia += value
    return centers, labels, inertia, n_iter


def _sums_changed(step):
    return step[2], step[3]
