"""Worker-resident Lloyd iterations: each worker runs the whole loop on the row blocks
it holds, and the workers add their float64 partial sums with an all-reduce.

The client-reduced loop (:func:`explorer.distributed._kmeans._lloyd`) is a scheduler
round trip per iteration (tasks out, k × (d + 1) sums back to the client, centres
out again): 30-40 ms an iteration whatever the work. Here the client starts one task
per worker, once; inside it every iteration is

1. the first half of the single-process restarts runner's step
   (:func:`explorer.kmeans.starts_runner`: on the GPU the kernels of the one-GPU loop,
   on the CPU :func:`explorer.kmeans.assign_nearest`) on each of the worker's blocks:
   labels, and the float64 sums and counts, added in block order;
2. one all-reduce of ``sums (k × (d + 1)) | labels changed`` across the workers;
3. the second half of the step (the update and its status) by every worker on the
   same reduced sums, and the single-process stopping rule
   (:func:`explorer.kmeans.lloyd_stops`), so every worker holds the same centres
   without another message.

Empty clusters are re-seeded at the rows farthest from their centres (the rule of the
single-process loop): each worker offers its own farthest rows, an all-gather brings
them to every worker, and all pick the same ones (largest distance, then lowest row).

**Communicators.** :class:`LocalComm` (one worker: the all-reduce is the identity, so
the loop runs for real on a one-worker CPU cluster) and :class:`NcclComm` (one GPU per
worker, NCCL through CuPy: the client draws an NCCL unique id, a collective
``client.run`` creates one communicator per worker in the worker's state under a
session key, and the session destroys them at the end, as raft-dask's ``Comms`` does).
Several CPU workers have no collective here: their fit keeps the client-reduced loop.
"""

from __future__ import annotations

import time
import uuid

import numpy as np

from .. import kmeans as _km
from .._backend import array_module, to_numpy

__all__ = ["LocalComm", "NcclComm", "NcclSession", "resident_lloyd", "resident_plan"]

#: Attribute of a dask Worker holding its communicators, by session key.
_STATE = "_explorer_comms"


class LocalComm:
    """The communicator of a single worker: every collective is the identity, and
    a halo exchange is empty."""

    rank, size = 0, 1

    def allreduce_sum(self, a):
        return a

    def allgather(self, a):
        return a[None]

    def exchange(self, Y, sends, recv_counts):
        """Nothing to exchange with no other rank: an empty halo."""
        return Y[:0]


class NcclComm:
    """A ``cupy.cuda.nccl.NcclCommunicator`` with the collectives the resident loops
    use, on the current CuPy stream: all-reduce and all-gather of float64 buffers,
    and the halo exchange of the exact mode's products (grouped send/recv)."""

    def __init__(self, comm, rank, size):
        self.comm, self.rank, self.size = comm, rank, size

    def _args(self):
        import cupy
        from cupy.cuda import nccl

        return nccl, cupy.cuda.get_current_stream().ptr

    def allreduce_sum(self, a):
        import cupy

        nccl, stream = self._args()
        a = cupy.ascontiguousarray(a, dtype=cupy.float64)
        out = cupy.empty_like(a)
        self.comm.allReduce(a.data.ptr, out.data.ptr, a.size, nccl.NCCL_FLOAT64,
                            nccl.NCCL_SUM, stream)
        return out

    def allgather(self, a):
        import cupy

        nccl, stream = self._args()
        a = cupy.ascontiguousarray(a, dtype=cupy.float64)
        out = cupy.empty((self.size, *a.shape), dtype=cupy.float64)
        self.comm.allGather(a.data.ptr, out.data.ptr, a.size, nccl.NCCL_FLOAT64, stream)
        return out

    def exchange(self, Y, sends, recv_counts):
        """The halo rows of the row-major block `Y` (float32 or float64): to each peer p
        the rows ``sends[p]`` (local indices; None or empty: nothing), from each peer
        ``recv_counts[p]`` rows, all in one NCCL group of point-to-point calls.

        Returns the received rows, peers in rank order, each peer's in the order it
        sent them (``(sum(recv_counts), b)``, Y's dtype)."""
        import cupy

        nccl, stream = self._args()
        b = Y.shape[1]
        kind = {np.dtype(np.float32): nccl.NCCL_FLOAT32,
                np.dtype(np.float64): nccl.NCCL_FLOAT64}[np.dtype(Y.dtype)]
        out = cupy.empty((int(sum(recv_counts)), b), dtype=Y.dtype)
        packed = [None if idx is None or idx.shape[0] == 0 else cupy.ascontiguousarray(Y[idx])
                  for idx in sends]
        nccl.groupStart()
        for peer, buf in enumerate(packed):
            if buf is not None:
                self.comm.send(buf.data.ptr, buf.size, kind, peer, stream)
        at = 0
        for peer, count in enumerate(recv_counts):
            if count:
                self.comm.recv(out[at : at + count].data.ptr, int(count) * b, kind, peer,
                               stream)
                at += int(count)
        nccl.groupEnd()
        return out


# ---------------------------------------------------------------- worker functions


def _nccl_unique_id():
    from cupy.cuda import nccl

    return nccl.get_unique_id()


def _nccl_init(session, uid, ranks, dask_worker=None):
    """Create this worker's communicator (collective: every rank at once)."""
    from cupy.cuda import nccl

    rank = ranks[dask_worker.address]
    comm = nccl.NcclCommunicator(len(ranks), uid, rank)
    if not hasattr(dask_worker, _STATE):
        setattr(dask_worker, _STATE, {})
    getattr(dask_worker, _STATE)[session] = NcclComm(comm, rank, len(ranks))
    return rank


def _nccl_destroy(session, abort=False, dask_worker=None):
    """Free this worker's communicator; `abort` (after a failure, when a rank may still
    wait in a collective) aborts it instead of waiting for the others."""
    comm = getattr(dask_worker, _STATE, {}).pop(session, None)
    if comm is not None:
        (comm.comm.abort if abort else comm.comm.destroy)()


def _communicator(session):
    if session is None:
        return LocalComm()
    from distributed import get_worker

    return getattr(get_worker(), _STATE)[session]


def _sync(xp):
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def _farthest_rows(comm, runners, offsets, n_empty, xp):
    """The `n_empty` rows of all workers farthest from their centres (largest
    distance first, ties by lowest global row), float64, the same on every worker.

    Each block offers its own `n_empty` farthest rows (the runners' ranking, as the
    one-process loop ranks them) as ``(distance, global row, features)``; one
    all-gather brings every worker's offers to every worker, which all pick the same
    rows."""
    d = runners[0].X.shape[1]
    offers = []
    for runner, offset in zip(runners, offsets, strict=True):
        values, far = runner.farthest(0, n_empty)
        offer = np.full((n_empty, 2 + d), -np.inf)
        count = int(far.shape[0])
        offer[:count, 0] = to_numpy(values)
        offer[:count, 1] = to_numpy(far) + offset
        offer[:count, 2:] = to_numpy(runner.X[far]).astype(np.float64)
        offers.append(offer)
    mine = np.concatenate(offers)
    # This worker's best n_empty: the same size on every worker, as all-gather needs.
    mine = mine[np.lexsort((mine[:, 1], -mine[:, 0]))[:n_empty]]
    every = to_numpy(comm.allgather(xp.asarray(mine))).reshape(-1, 2 + d)
    top = np.lexsort((every[:, 1], -every[:, 0]))[:n_empty]
    return every[top, 2:]


def resident_lloyd(prepared, offsets, starts, max_iter, tol_abs, session=None):
    """Lloyd's iterations of every restart in `starts` on this worker's blocks (run on
    the worker, one task per worker, all at once).

    Each block is held by the one-process restarts runner
    (:func:`explorer.kmeans.starts_runner`: the GPU's kernels, or the CPU's
    :func:`~explorer.kmeans.assign_nearest`), whose step is cut in two: the
    assignment with its float64 sums and labels changed, then (after the sums of all
    blocks of all workers are added) the update and the stopping status.

    Parameters
    ----------
    prepared : list of (Xc, x_sq)
        This worker's centred blocks (:func:`explorer.distributed._kmeans._centre_block`),
        in block order.
    offsets : list of int
        Global first row of each block.
    starts : list of float64 arrays (k, d)
        Initial centres of each restart (the same on every worker).
    max_iter, tol_abs
        As :func:`explorer.kmeans._lloyd_starts`.
    session : str, None or communicator
        Key of this worker's communicator; None for a single worker; or the
        communicator itself (an object with ``allreduce_sum`` and ``allgather``, as
        :class:`LocalComm`).

    Returns
    -------
    dict
        ``labels`` (one int32 array per block, of the best restart), ``centers``,
        ``inertia``, ``n_iter`` of the best restart (the first of least inertia),
        this worker's seconds of ``compute`` and ``allreduce``, its ``iterations``
        over all restarts, ``steps``: the seconds of each iteration (from its
        assignment to its update, the all-reduce included), ``start_wait``: the seconds
        spent waiting for the other workers to start (a first all-reduce, before the
        loop, so that the tasks' start times do not land in an iteration), and
        ``products``: steps per product of the GPU's checked assignment (the same on
        every worker).
    """
    comm = session if hasattr(session, "allreduce_sum") else _communicator(session)
    xp = array_module(prepared[0][0])
    best = None
    t_compute = t_comm = 0.0
    iterations = 0
    products = []  # the checked assignment's product of each step (GPU)
    steps = []
    t0 = time.perf_counter()
    comm.allreduce_sum(xp.zeros(1, dtype=xp.float64))  # every worker has started
    _sync(xp)
    start_wait = time.perf_counter() - t0
    for start in starts:
        k, d = start.shape
        runners = [_km.starts_runner(Xc, x_sq, np.asarray(start)[None], xp)
                   for Xc, x_sq in prepared]
        # The GPU's checked assignment picks its product from the re-check counts of a
        # step: those of every block of every worker, added with the sums, so that all
        # workers take the same product (as one process would on all the rows).
        checked = [r for r in runners if getattr(r, "product", None) is not None]
        for runner in checked:
            runner.choose_locally = False
        m = k * (d + 1)
        n_iter, consistent = 0, False
        while n_iter < max_iter:
            n_iter += 1
            t0 = time.perf_counter()
            total = xp.zeros(m + 4, dtype=xp.float64)
            for runner in runners:
                runner.assign_sums([0])
                total[:m] += runner.sums[0].ravel()
                total[m : m + 1] += runner.changed[0:1]
            if checked:
                products.append(checked[0].product)
                total[m + 1 :] += xp.asarray([sum(r.step_counts[key] for r in checked)
                                              for key in ("rechecked", "within_tf32",
                                                          "rows")], dtype=xp.float64)
            _sync(xp)
            t1 = time.perf_counter()
            total = comm.allreduce_sum(total)
            _sync(xp)
            t2 = time.perf_counter()
            if checked:
                rechecked, within, rows = (int(v) for v in to_numpy(total[m + 1 :]))
                for runner in checked:
                    runner.choose_product({"rechecked": rechecked, "within_tf32": within},
                                          rows)
            for runner in runners:  # every block updates from the same sums
                runner.sums[0] = total[:m].reshape(k, d + 1)
                runner.changed[0:1] = total[m : m + 1].astype(runner.changed.dtype)
                status = runner.update([0])
            changed, n_empty, shift = (int(status[0][0]), int(status[1][0]),
                                       float(status[2][0]))
            if n_empty:
                far = _farthest_rows(comm, runners, offsets, n_empty, xp)
                for runner in runners:
                    runner.place_empty(0, xp.asarray(far))
            t3 = time.perf_counter()
            t_compute += (t1 - t0) + (t3 - t2)
            t_comm += t2 - t1
            steps.append(t3 - t0)
            consistent = changed == 0 and n_empty == 0
            if _km.lloyd_stops(changed, n_empty, shift, tol_abs):
                break
        iterations += n_iter
        t0 = time.perf_counter()
        if not consistent:  # labels of the final centres, as the one-process loop
            for runner in runners:
                runner.assign([0])
        local = sum(float(runner.inertia()[0]) for runner in runners)
        inertia = float(to_numpy(comm.allreduce_sum(xp.asarray([local])))[0])
        t_compute += time.perf_counter() - t0
        # The first of least inertia (kmeans.best_restart): replaced only by one less
        # beyond the rounding of its sum.
        if best is None or _km.best_restart([best["inertia"], inertia]) == 1:
            results = [runner.result(0) for runner in runners]
            best = {"labels": [lab for _, lab in results],
                    "centers": to_numpy(results[0][0]), "inertia": inertia,
                    "n_iter": n_iter}
        runners = None
    return {**best, "compute": t_compute, "allreduce": t_comm, "iterations": iterations,
            "steps": steps, "start_wait": start_wait,
            "products": {p: products.count(p) for p in dict.fromkeys(products)}}


def block_labels(result, i):
    """Labels of the worker's `i`-th block from :func:`resident_lloyd`'s result."""
    return result["labels"][i]


def summary(result):
    """Everything but the labels (what comes back to the client)."""
    return {key: v for key, v in result.items() if key != "labels"}


# ---------------------------------------------------------------- client side


def resident_plan(blocks, prepared, what="Lloyd loop", collective="partial sums "
                  "all-reduced", fallback="client-reduced loop", on_gpu=None):
    """Whether a loop (the Lloyd loop; the exact mode's eigensolver) can run on the
    workers, and how.

    Returns ``(workers, kind, why)``: `workers` maps each worker address holding
    blocks to its block indices (in block order), the workers ordered by their first
    block; `kind` is ``"local"`` (one worker: no collective needed), ``"nccl"``
    (several workers with CuPy blocks and NCCL) or None (the `fallback`); `why` says
    which and why, naming the loop `what`, its `collective` and the `fallback`.
    `on_gpu(block)` tells (on a worker) whether a block is on a GPU; default: the
    block is a tuple of arrays, the first a CuPy one.
    """
    from distributed import wait

    client = blocks.client
    wait(prepared)
    who = client.who_has(prepared)
    workers: dict[str, list[int]] = {}
    for b, f in enumerate(prepared):
        holders = sorted(who.get(f.key, ()))
        if not holders:
            return None, None, f"a block has no worker yet: the {fallback}"
        workers.setdefault(holders[0], []).append(b)
    if len(workers) == 1:
        return workers, "local", (f"worker-resident {what} on the one worker holding "
                                  "the blocks (no collective needed)")
    gpu = client.submit(on_gpu or _is_cupy, prepared[0], pure=False).result()
    if not gpu:
        return None, None, (f"{fallback}: {len(workers)} CPU workers (the "
                            "worker-resident loop's collectives are NCCL, GPUs only)")
    ok = client.run(_nccl_available, workers=list(workers))
    if not all(ok.values()):
        return None, None, f"{fallback}: NCCL is not available on every worker"
    devices = client.run(_device_id, workers=list(workers))
    if len(set(devices.values())) < len(workers):
        return None, None, (f"{fallback}: workers share a GPU (NCCL needs one GPU "
                            "per rank; dask_cuda's LocalCUDACluster gives one per worker)")
    return workers, "nccl", (f"worker-resident {what} on {len(workers)} GPU workers, "
                             f"{collective} by NCCL")


def _is_cupy(prep):
    return type(prep[0]).__module__.split(".")[0] == "cupy"


def _device_id():
    """This worker's GPU, by PCI bus id (the same GPU under any CUDA_VISIBLE_DEVICES)."""
    import cupy

    return cupy.cuda.Device().pci_bus_id


def _nccl_available():
    try:
        from cupy.cuda import nccl
    except ImportError:
        return False
    return bool(getattr(nccl, "available", True))


class NcclSession:
    """One NCCL communicator per worker, for the length of a ``with`` block: the key
    under which the workers keep it (None when `kind` is not ``"nccl"``)."""

    def __init__(self, client, workers, kind):
        self.client, self.workers, self.kind = client, list(workers), kind
        self.key = None

    def __enter__(self):
        if self.kind != "nccl":
            return None
        self.key = f"explorer-nccl-{uuid.uuid4().hex}"
        uid = self.client.submit(_nccl_unique_id, workers=self.workers[:1],
                                 pure=False).result()
        ranks = {w: r for r, w in enumerate(self.workers)}
        # One call to all the workers at once: each init waits for every rank.
        self.client.run(_nccl_init, self.key, uid, ranks, workers=self.workers)
        return self.key

    def __exit__(self, exc_type, *exc):
        if self.key is not None:
            self.client.run(_nccl_destroy, self.key, exc_type is not None,
                            workers=self.workers)
        return False


def run_resident(blocks, prepared, workers, kind, starts, max_iter, tol_abs):
    """The restarts `starts` on the workers (:func:`resident_lloyd`): ``(centers,
    labels (futures, block order), inertia, n_iter, stats)``."""
    client = blocks.client
    with NcclSession(client, workers, kind) as session:
        tasks = {}
        for w, idx in workers.items():
            tasks[w] = client.submit(
                resident_lloyd, [prepared[b] for b in idx],
                [int(blocks.offsets[b]) for b in idx], starts, max_iter, tol_abs,
                session, workers=[w], allow_other_workers=False, pure=False)
        summaries = client.gather([client.submit(summary, t, workers=[w], pure=False)
                                   for w, t in tasks.items()])
    labels = [None] * blocks.n_blocks
    for w, idx in workers.items():
        for i, b in enumerate(idx):
            labels[b] = client.submit(block_labels, tasks[w], i, workers=[w], pure=False)
    first = summaries[0]
    # An iteration ends with the all-reduce, so every worker's i-th step lasts about
    # as long; the slowest worker's is the loop's.
    step = [max(s["steps"][i] for s in summaries) for i in range(len(first["steps"]))]
    stats = {"lloyd_compute": max(s["compute"] for s in summaries),
             "lloyd_allreduce": max(s["allreduce"] for s in summaries),
             "lloyd_iterations": first["iterations"],
             "lloyd_step_median": float(np.median(step)) if step else None,
             "lloyd_start_wait": max(s["start_wait"] for s in summaries),
             "lloyd_products": [s["products"] for s in summaries]}
    return first["centers"], labels, first["inertia"], first["n_iter"], stats
