"""The float64 reference graph, public: the oracle every builder is tested against.

What an edge and its weight are, pair by pair, in float64 (the arithmetic is fixed in
one place and explained in the private module that implements it). The CPU builders
use it for their final decisions, so they equal it bit for bit; the GPU builders equal
it outside the float32 rounding band (:func:`explorer.testing.assert_same_graph`).

- :func:`reference_csr`: the whole graph, canonical CSR (SciPy), for every rule (ε,
  kNN, self-tuning σ).
- :func:`reference_knn`, :func:`reference_knn_csr`, :func:`reference_local_sqdist`: each
  point's k nearest others (ties by the lower index), the kNN graph, the σi² of
  self-tuning weights; :func:`local_weights_from`: their weights.
- :func:`pair_values`, :func:`pair_values_at`: compared values (squared distance or
  cosine) and weights of dense blocks of pairs or of pair lists.
- :func:`edge_mask`, :func:`threshold_value`, :func:`weights_from`: the rule itself.
- :class:`PairValues`: the prepared form, for many blocks of one data matrix.
- :func:`index_dtype`: the CSR index dtype the semantics prescribe.
"""

from ._reference import (
    PairValues,
    edge_mask,
    index_dtype,
    local_weights_from,
    pair_values,
    pair_values_at,
    reference_csr,
    reference_knn,
    reference_knn_csr,
    reference_local_sqdist,
    threshold_value,
    weights_from,
)

__all__ = [
    "PairValues",
    "edge_mask",
    "index_dtype",
    "local_weights_from",
    "pair_values",
    "pair_values_at",
    "reference_csr",
    "reference_knn",
    "reference_knn_csr",
    "reference_local_sqdist",
    "threshold_value",
    "weights_from",
]
