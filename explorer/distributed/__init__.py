"""Spectral clustering on a dask.distributed cluster (issue 19, after "Scalable
Clustering using Multiple GPUs").

The same pipeline as the single-process one, on a Dask array whose row chunks stay on
the workers:

- :func:`kmeans_fit`: paper 001's k-means, the assignment local to each row block;
  the Lloyd loop resident on the workers with the float64 partial sums all-reduced
  by NCCL (one GPU per worker) or on the one worker (:mod:`._resident`), else reduced
  on the client each iteration (:mod:`._kmeans`);
- :func:`build_row_blocks`: the ε-graph's CSR built as row blocks on the workers,
  each block against all points (:mod:`._graph`);
- :class:`RowBlockOperator`: the matrix A = D^-1/2 S D^-1/2 kept as row blocks, with
  the distributed product the client-driven eigensolvers call (:mod:`._operator`);
- the exact mode's Chebyshev eigensolver resident on the workers (:mod:`._exact`):
  one task per worker runs the one-process iteration on its rows of A (in the points'
  Morton order with several GPUs), exchanging only halo rows per product (NCCL
  send/recv) and all-reducing the Gram matrices; on one worker with no collective
  at all; several CPU workers keep LOBPCG driven from the client;
- connected components labelled per row block, merged through the links between
  blocks (:mod:`._components`), the components embedding per row block
  (:mod:`._embedding`) and products whose vectors stay on the workers, each block
  fetching its halo rows from the others (:mod:`._halo`);
- :func:`plan_fit` and :func:`run_fit`: the whole :class:`explorer.SpectralClustering`
  fit on a Dask array (:mod:`._fit`), and in ``mode="representatives"`` the
  representatives chain with the rows left on the workers (:mod:`._representatives`);
- the labels a fit returns: computed to the client within a budget, else left on the
  workers in an array that says to compute them before the client closes
  (:mod:`._labels`).

Importing this package registers the Dask engine (:func:`explorer.engines.register_engine`):
``SpectralClustering(...).fit(dask_array)`` and ``KMeans(...).fit(dask_array)`` import it
by name on their first Dask array. It imports Dask; ``import explorer`` does not.
"""

from ..engines import Engine, register_engine
from ._blocks import RowBlocks, get_client, is_dask_array, n_workers
from ._fit import DISTRIBUTED_SOLVERS, distributed_embedding, engine_kmeans, plan_fit, run_fit
from ._graph import RowBlockGraph, build_row_blocks
from ._kmeans import DistributedKMeansResult, kmeans_fit
from ._operator import RowBlockOperator

__all__ = [
    "DISTRIBUTED_SOLVERS",
    "DistributedKMeansResult",
    "RowBlockOperator",
    "RowBlockGraph",
    "RowBlocks",
    "build_row_blocks",
    "distributed_embedding",
    "plan_fit",
    "run_fit",
    "get_client",
    "is_dask_array",
    "kmeans_fit",
    "n_workers",
]

register_engine(Engine(name="dask", plan=plan_fit, run=run_fit, kmeans=engine_kmeans))
