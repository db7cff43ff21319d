"""The labels a distributed fit hands back: computed to the client when they fit its
budget, else left on the workers in an array that says so once they are gone.

Labels built from futures are valid only while the client that holds the futures
is open: read after ``client.close()``, a plain Dask array of them fails with
dask's "Missing dependency …". So the fit decides once, by size:

- at most :data:`LABELS_TO_CLIENT_MAX_BYTES` of int32 labels (2²⁸ rows) are gathered
  to the client at the end of the fit and returned as a Dask array over that NumPy
  array (with X's row chunks; CuPy chunks for CuPy data, as before): it stays valid
  after the client closes;
- more stay on the workers as a :class:`WorkerLabels` array: a Dask array whose use
  after its client closed (or its futures were released) raises a RuntimeError that
  says to ``.compute()`` (or store) the labels while the client is open.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from .._backend import to_numpy

__all__ = ["LABELS_TO_CLIENT_MAX_BYTES", "WorkerLabels", "finish_labels"]

#: int32 labels of at most this many bytes come to the client at the end of a fit
#: (1 GiB: 268 million rows); more stay on the workers (:class:`WorkerLabels`).
LABELS_TO_CLIENT_MAX_BYTES = 1 << 30

GONE_MESSAGE = (
    "these labels were left on the Dask workers (int32 labels of {n} rows are more than "
    "the {budget} bytes a fit brings to the client, explorer.distributed._labels."
    "LABELS_TO_CLIENT_MAX_BYTES) and their client has closed, so they are gone. Compute "
    "them while the client is open: labels = estimator.labels_.compute() (or store them, "
    "estimator.labels_.to_zarr(...)), then close the client; or refit."
)


class WorkerLabels(da.Array):
    """A Dask array of labels held by the futures of an open client; any use after that
    client closed (or the futures were released) raises a RuntimeError naming
    ``.compute()``. Arrays derived from it while the client is open are plain Dask
    arrays."""

    __slots__ = ()

    def __new__(cls, array, futures, client, budget):
        self = super().__new__(cls, array.dask, array.name, array.chunks, meta=array._meta)
        self.__dict__["_holder"] = (list(futures), client, budget)
        return self

    def alive(self) -> bool:
        """Whether the futures holding the labels are still there."""
        futures, client, _ = self.__dict__["_holder"]
        if getattr(client, "status", "closed") not in ("running", "connecting"):
            return False
        return not any(f.status in ("cancelled", "lost") for f in futures)

    def check(self) -> None:
        """Raise the RuntimeError of :data:`GONE_MESSAGE` if the labels are gone."""
        if not self.alive():
            budget = self.__dict__["_holder"][2]
            raise RuntimeError(GONE_MESSAGE.format(n=self.shape[0], budget=budget))

    def __dask_graph__(self):
        self.check()
        return super().__dask_graph__()

    def compute(self, **kwargs):
        self.check()
        return super().compute(**kwargs)

    def persist(self, **kwargs):
        self.check()
        return super().persist(**kwargs)

    def __array__(self, *args, **kwargs):
        self.check()
        return super().__array__(*args, **kwargs)

    def __reduce__(self):  # pickled as the plain Dask array
        return da.Array(self.dask, self.name, self.chunks, meta=self._meta).__reduce__()


def finish_labels(client, futures, sizes, row_chunks, meta, budget=None):
    """The labels of a fit: one int32 block per future (`sizes` rows each, block
    order), as a Dask array with the data's row chunks `row_chunks`.

    Gathered to the client when ``4 · n`` bytes are at most `budget` (default
    :data:`LABELS_TO_CLIENT_MAX_BYTES`), else left on the workers (:class:`WorkerLabels`).
    `meta` is an empty array of the data's chunks' module (CuPy data: CuPy chunks).
    """
    budget = LABELS_TO_CLIENT_MAX_BYTES if budget is None else budget
    n = int(sum(int(s) for s in sizes))
    on_gpu = type(meta).__module__.split(".")[0] == "cupy"
    if 4 * n <= budget:
        parts = client.gather(list(futures))
        host = (np.concatenate([to_numpy(p) for p in parts]) if parts
                else np.empty(0)).astype(np.int32, copy=False)
        out = da.from_array(host, chunks=(tuple(row_chunks),))
        if on_gpu:
            import cupy

            out = out.map_blocks(cupy.asarray, meta=meta)
        return out
    out = da.concatenate([da.from_delayed(f, shape=(int(s),), dtype=np.int32, meta=meta)
                          for f, s in zip(futures, sizes, strict=True)])
    if out.chunks[0] != tuple(row_chunks):
        out = out.rechunk((tuple(row_chunks),))
    return WorkerLabels(out, futures, client, budget)
