"""Clustering quality: agreement with ground truth (ARI, NMI) and graph cut scores.

Label −1 marks a vertex without a cluster (an isolated vertex of the similarity
graph). Against ground truth it is one more label, "noise", so unclustered points
count as a group of their own and a clustering that leaves many points out scores
lower. In the cut scores they belong to no cluster (see :func:`normalized_cut`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn import metrics as _sk

from ._backend import array_module, sparse_module, to_numpy
from ._csr import block_rows, row_blocks

NOISE = -1


def adjusted_rand_score(y_true, y_pred) -> float:
    """Adjusted Rand index of two labellings (scikit-learn's), NumPy or CuPy input.

    −1 labels are an ordinary label ("noise"). 1 for identical partitions, about 0 for
    independent ones.

    Raises
    ------
    ValueError
        If the label arrays are not 1-D or differ in length.
    """
    a, b = _pair(y_true, y_pred)
    return float(_sk.adjusted_rand_score(a, b))


def normalized_mutual_info_score(y_true, y_pred) -> float:
    """Normalised mutual information (arithmetic mean normalisation, scikit-learn's).

    −1 labels are an ordinary label ("noise"). NumPy or CuPy input.

    Raises
    ------
    ValueError
        If the label arrays are not 1-D or differ in length.
    """
    a, b = _pair(y_true, y_pred)
    return float(_sk.normalized_mutual_info_score(a, b))


def normalized_cut(csr, labels) -> float:
    """Normalised cut of a partition of a weighted graph (von Luxburg 2007, eq. 2).

    ``Ncut(A_1..A_k) = sum_i cut(A_i, complement of A_i) / vol(A_i)``, with
    ``cut(A, B) = sum of w_uv over u in A, v in B`` and ``vol(A)`` the sum of the
    degrees in A. The clusters are the labels >= 0; vertices labelled −1 belong to
    none, so an edge from a cluster to such a vertex counts as cut (an isolated vertex
    has no edges and changes nothing). A cluster of zero volume has no edges at all;
    its term, 0/0, is taken as 0.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)
        Symmetric similarity matrix.
    labels : array of int, shape (n,)
        Same array module as `csr` or NumPy (copied to the device if needed).

    Returns
    -------
    float
        0 for a partition along connected components; at most k.
    """
    cut, vol, _ = _cut_terms(csr, labels)
    return float(_safe_ratio(cut, vol).sum())


def ratio_cut(csr, labels) -> float:
    """Ratio cut: ``sum_i cut(A_i, complement of A_i) / |A_i|`` (von Luxburg 2007, eq. 2).

    Same conventions as :func:`normalized_cut`; ``|A_i|`` counts the vertices
    labelled i.
    """
    cut, _, size = _cut_terms(csr, labels)
    return float(_safe_ratio(cut, size).sum())


def clustering_scores(csr, labels, y_true=None) -> dict:
    """All scores of a clustering in one dictionary.

    Returns
    -------
    dict
        ``"n_clusters"`` (distinct labels >= 0), ``"n_unclustered"`` (labels −1),
        ``"normalized_cut"``, ``"ratio_cut"``, and with `y_true` also ``"ari"`` and
        ``"nmi"``. Plain Python numbers (JSON-ready).
    """
    cut, vol, size = _cut_terms(csr, labels)
    lab = to_numpy(labels)
    scores = {
        "n_clusters": int(size.shape[0]),
        "n_unclustered": int(np.count_nonzero(np.asarray(lab) == NOISE)),
        "normalized_cut": float(_safe_ratio(cut, vol).sum()),
        "ratio_cut": float(_safe_ratio(cut, size).sum()),
    }
    if y_true is not None:
        scores["ari"] = adjusted_rand_score(y_true, labels)
        scores["nmi"] = normalized_mutual_info_score(y_true, labels)
    return scores


def match_labels(labels, reference):
    """Relabel `labels` so that each cluster takes the id of the `reference` cluster it
    overlaps most, one to one (for drawing both in the same colours).

    The pairing maximises the total overlap (the Hungarian algorithm,
    :func:`scipy.optimize.linear_sum_assignment`, on the contingency table of the
    two labellings). Label −1 (no cluster) is kept as −1 and pairs with nothing.
    A cluster left without a partner (more clusters than the reference has) gets a
    new id, above every id of `reference`, in order of its old id. The partition is
    unchanged: only the names of its clusters change.

    Parameters
    ----------
    labels : array-like of int, shape (n,)
        The labelling to rename (NumPy or CuPy).
    reference : array-like of int, shape (n,)
        The labelling whose ids to take (e.g. the ground truth, or the spectral
        clusters k-means is compared with).

    Returns
    -------
    ndarray of int64, shape (n,)
        On the host.

    Raises
    ------
    ValueError
        If either is not 1-D or they differ in length.

    Examples
    --------
    >>> match_labels([0, 0, 1, 1, -1], [1, 1, 0, 0, 0]).tolist()
    [1, 1, 0, 0, -1]
    """
    from scipy.optimize import linear_sum_assignment

    ref, lab = _pair(reference, labels)
    lab = lab.astype(np.int64, copy=False)
    ref = ref.astype(np.int64, copy=False)
    out = np.full(lab.shape, NOISE, dtype=np.int64)
    kept = lab != NOISE
    if not kept.any():
        return out
    old, codes = np.unique(lab[kept], return_inverse=True)
    ref_kept = ref[kept]
    partner = ref_kept != NOISE
    new_ids = np.full(old.size, NOISE, dtype=np.int64)
    if partner.any():
        ref_ids, ref_codes = np.unique(ref_kept[partner], return_inverse=True)
        table = np.zeros((old.size, ref_ids.size), dtype=np.int64)
        np.add.at(table, (codes[partner], ref_codes), 1)
        rows, cols = linear_sum_assignment(table, maximize=True)
        overlap = table[rows, cols] > 0  # a pairing without a shared point is none
        new_ids[rows[overlap]] = ref_ids[cols[overlap]]
    top = int(ref[ref != NOISE].max()) if (ref != NOISE).any() else -1
    spare = np.flatnonzero(new_ids == NOISE)
    new_ids[spare] = top + 1 + np.arange(spare.size)
    out[kept] = new_ids[codes]
    return out


@dataclass(frozen=True)
class RunComparison:
    """Two clusterings of the same points, side by side (:func:`compare_runs`).

    Attributes
    ----------
    labels_a : ndarray of int64, shape (n,)
        Run A's clusters, as given.
    labels_b : ndarray of int64, shape (n,)
        Run B's clusters renamed after A's (:func:`match_labels`), so that a point
        keeps its colour when it keeps its cluster.
    ari : float
        Adjusted Rand index between A and B (1: the same partition).
    ari_truth : tuple of (float, float) or None
        Each run's ARI against the ground truth, when given.
    changed : ndarray of bool, shape (n,)
        The points whose cluster differs between A and B once B's clusters are
        named after A's (a point entering or leaving label −1 counts).
    n_clusters : tuple of (int, int)
        The clusters of each run (label −1 not counted).
    parameters : dict of str to tuple
        The parameters whose values differ: name → (A's value, B's value); a
        parameter one run lacks has ``None`` there.
    plan : dict of str to tuple
        The plan lines that differ: label → (A's sentence, B's sentence).
    """

    labels_a: np.ndarray
    labels_b: np.ndarray
    ari: float
    ari_truth: tuple | None
    changed: np.ndarray
    n_clusters: tuple
    parameters: dict = field(default_factory=dict)
    plan: dict = field(default_factory=dict)

    @property
    def n_changed(self) -> int:
        """How many points changed cluster."""
        return int(np.count_nonzero(self.changed))

    def to_dict(self) -> dict:
        """JSON-ready dictionary: the scores, the differences (each as ``[A, B]``), the
        points that changed cluster (their indices) and both labellings as lists."""
        def pair(ab):
            return [_plain(v) for v in ab]

        return {
            "ari": float(self.ari),
            "ari_truth": None if self.ari_truth is None else [float(v) for v in self.ari_truth],
            "n_clusters": [int(v) for v in self.n_clusters],
            "n_changed": self.n_changed,
            "changed": np.flatnonzero(self.changed).tolist(),
            "parameters": {k: pair(v) for k, v in self.parameters.items()},
            "plan": {k: pair(v) for k, v in self.plan.items()},
            "labels_a": self.labels_a.tolist(),
            "labels_b": self.labels_b.tolist(),
        }

    def lines(self) -> list[tuple[str, str]]:
        """The comparison as (label, sentence) rows, for the command line and the app."""
        n = len(self.labels_a)
        rows = [("ARI A vs B", f"{self.ari:.4f}"),
                ("changed", f"{self.n_changed:,} of {n:,} points changed cluster "
                            f"({100.0 * self.n_changed / max(n, 1):.1f} %)"),
                ("clusters", f"A {self.n_clusters[0]}, B {self.n_clusters[1]}")]
        if self.ari_truth is not None:
            rows.append(("ARI vs truth", f"A {self.ari_truth[0]:.4f}, B {self.ari_truth[1]:.4f}"))
        if not self.parameters:
            rows.append(("parameters", "the same"))
        for name, (a, b) in self.parameters.items():
            rows.append((name, f"A {a!r} → B {b!r}"))
        for label, (a, b) in self.plan.items():
            rows.append((f"plan: {label}", f"A {a} → B {b}"))
        return rows


def _plain(value):
    """A parameter value as JSON holds it: NumPy scalars and arrays as numbers and
    lists, anything else JSON cannot hold as its text."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _differences(a: dict | None, b: dict | None) -> dict:
    a, b = dict(a or {}), dict(b or {})
    keys = list(a) + [k for k in b if k not in a]
    return {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}


def compare_runs(labels_a, labels_b, *, y_true=None, params_a: dict | None = None,
                 params_b: dict | None = None, plan_a=None, plan_b=None) -> RunComparison:
    """Compare two clusterings of the same points: their ARI, which points changed
    cluster, and what differs in their parameters and plans.

    Parameters
    ----------
    labels_a, labels_b : array-like of int, shape (n,)
        The clusters of run A and run B (label −1: no cluster), on the host or a GPU.
    y_true : array-like, shape (n,), optional
        Ground truth: each run's ARI against it is reported as well.
    params_a, params_b : dict, optional
        Each run's parameters (name → value); the differing ones are listed.
    plan_a, plan_b : dict or sequence of (str, str), optional
        Each run's plan lines (``FitPlan.lines()``, label → sentence); the
        differing ones are listed.

    Returns
    -------
    RunComparison

    Raises
    ------
    ValueError
        If the labellings are not 1-D or differ in length (different data), or
        `y_true` has another length.

    Examples
    --------
    >>> c = compare_runs([0, 0, 1, 1], [1, 1, 0, 0], params_a={"sigma": 0.1},
    ...                  params_b={"sigma": 0.2})
    >>> c.ari, c.n_changed, c.parameters
    (1.0, 0, {'sigma': (0.1, 0.2)})
    """
    a = to_numpy(_labels_1d(labels_a, "labels_a")).astype(np.int64)
    b = to_numpy(_labels_1d(labels_b, "labels_b")).astype(np.int64)
    if a.shape != b.shape:
        raise ValueError(f"labels_b has {b.size} points and labels_a {a.size}: two runs "
                         "compare only on the same data (the same points, in the same order)")
    matched = match_labels(b, a)
    truth = None
    if y_true is not None:
        y = to_numpy(_labels_1d(y_true, "y_true"))
        if y.shape != a.shape:
            raise ValueError(f"y_true has {y.size} entries; the runs have {a.size} points")
        truth = (adjusted_rand_score(y, a), adjusted_rand_score(y, b))

    def k(lab):
        return int(np.unique(lab[lab != NOISE]).size)

    return RunComparison(
        labels_a=a, labels_b=matched, ari=adjusted_rand_score(a, b), ari_truth=truth,
        changed=matched != a, n_clusters=(k(a), k(b)),
        parameters=_differences(params_a, params_b),
        plan=_differences(None if plan_a is None else dict(plan_a),
                          None if plan_b is None else dict(plan_b)))


# --------------------------------------------------------------------------- helpers


def _labels_1d(labels, name: str, n=None):
    arr = labels if array_module(labels) is not np else np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of labels; got shape {tuple(arr.shape)}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} labels but the graph has n={n} vertices")
    return arr


def _pair(y_true, y_pred):
    a = np.asarray(to_numpy(_labels_1d(y_true, "y_true")))
    b = np.asarray(to_numpy(_labels_1d(y_pred, "y_pred")))
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"y_true and y_pred must have the same length; got {a.shape[0]} and {b.shape[0]}"
        )
    return a, b


def _cut_terms(csr, labels):
    """Per cluster (labels >= 0, in ascending label order): cut weight, volume, size.

    Returned as NumPy float64 arrays (k is small); the O(nnz) work stays on the device.
    """
    if hasattr(csr, "cut_terms"):  # a graph held elsewhere (explorer.distributed)
        return csr.cut_terms(labels)
    xp = array_module(csr)
    sparse = sparse_module(xp)
    if not sparse.issparse(csr):
        raise TypeError(
            "csr must be a scipy.sparse or cupyx.scipy.sparse matrix; "
            f"got {type(csr).__module__}.{type(csr).__name__}"
        )
    if csr.shape[0] != csr.shape[1]:
        raise ValueError(f"csr must be square; got shape {csr.shape}")
    n = csr.shape[0]
    lab = _labels_1d(labels, "labels", n)
    lab = np.asarray(to_numpy(lab)) if xp is np else xp.asarray(lab)
    if lab.dtype.kind not in "iu":
        raise TypeError(f"labels must be integers; got dtype {lab.dtype}")
    lab = lab.astype(xp.int64)
    if bool((lab < NOISE).any()):
        raise ValueError("labels must be >= 0, or -1 for a vertex in no cluster")
    clustered = lab >= 0
    if not bool(clustered.any()):
        empty = np.zeros(0)
        return empty, empty, empty
    ids, inverse = xp.unique(lab[clustered], return_inverse=True)
    k = int(ids.shape[0])
    cluster = xp.full(n, -1, dtype=xp.int64)
    cluster[clustered] = inverse.ravel()

    csr = csr.tocsr()
    if xp is np:
        return _cut_terms_host(csr, cluster, clustered, k)
    # A block of rows at a time: per-entry temporaries (row ids, cluster ids, float64
    # weights, masks) for the whole matrix would be several copies of it (17.7 GB each
    # at 2.2·10⁹ nonzeros).
    cut, vol = np.zeros(k), np.zeros(k)
    for r0, r1, e0, e1 in row_blocks(csr.indptr):
        w = csr.data[e0:e1].astype(xp.float64)
        cu = cluster[block_rows(csr, r0, r1, e0, e1, xp)]
        cv = cluster[csr.indices[e0:e1]]
        own = cu >= 0
        crossing = own & (cu != cv)
        cut += cut_sums(cu[crossing], w[crossing], k, xp)
        vol += cut_sums(cu[own], w[own], k, xp)
    size = cut_sums(cluster[clustered], xp.ones(int(clustered.sum()), dtype=xp.float64), k, xp)
    return cut, vol, size


def _cut_terms_host(csr, cluster, clustered, k):
    """:func:`_cut_terms` on the CPU by two sparse products, without per-entry
    temporaries: P = S E (E the n × k cluster indicator) gives each row's weight into
    each cluster in one C++ pass; a row's weight inside its own cluster is P[i, c_i],
    its crossing weight its degree minus that (the same entries summed in the same
    order, so a row with no crossing edge gives exactly 0). On moons 10⁵ (2.7·10⁷
    nonzeros, 2 shared cores) the row-block passes took 9 s, most of the app's scores.
    Scratch: a float64 copy of the values (8 B per nonzero) and n × k products."""
    n = csr.shape[0]
    rows = np.flatnonzero(clustered)
    E = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cluster[rows])), shape=(n, k))
    S = sp.csr_matrix((csr.data.astype(np.float64), csr.indices, csr.indptr), shape=csr.shape)
    degree = S @ np.ones(n)
    P = (S @ E).tocsr()
    own = np.asarray(P.multiply(E).sum(axis=1)).ravel()
    c = cluster[rows]
    vol = np.bincount(c, weights=degree[rows], minlength=k)
    cut = np.bincount(c, weights=degree[rows] - own[rows], minlength=k)
    size = np.bincount(c, minlength=k).astype(np.float64)
    return cut, vol, size


def cut_sums(index, weights, k, xp):
    """Per-index sums of `weights` over 0..k-1, as a NumPy float64 array.

    The summing step of the cut scores (:func:`clustering_scores`), public for the
    distributed build, whose row blocks each sum their share.

    Parameters
    ----------
    index : array of int, shape (m,)
        The cluster (0..k-1) of each weight, NumPy or CuPy.
    weights : array of float64, shape (m,)
        Same array module as `index`.
    k : int
        Number of clusters.
    xp : module
        NumPy or CuPy, the module of `index` and `weights`.

    Returns
    -------
    numpy.ndarray of float64, shape (k,)
    """
    if index.shape[0] == 0:  # CuPy's bincount cannot size an empty input
        return np.zeros(k)
    return np.asarray(to_numpy(xp.bincount(index, weights=weights, minlength=k)), dtype=np.float64)


def _safe_ratio(num, den):
    """num / den with 0/0 taken as 0 (a cluster without edges has nothing cut)."""
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out
