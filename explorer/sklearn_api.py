"""scikit-learn's functional API over our estimator: ``spectral_clustering``.

``from explorer.sklearn_api import spectral_clustering`` replaces
``from sklearn.cluster import spectral_clustering``: same signature, same meaning, the
labels of ``SpectralClustering(affinity="precomputed", ...)`` fitted on the affinity.
The estimator is the pipeline (input checks, plan, graph, embedding, assignment); this
module only translates the call.
"""

from __future__ import annotations

__all__ = ["spectral_clustering"]

#: scikit-learn's defaults of the keywords this function forwards only when set
#: otherwise: each default means "what the estimator does by default" (the default
#: eigensolver, that solver's own tolerance, n_components = n_clusters, k-means,
#: quiet), which is what leaving the keyword out gives our estimator.
_DEFAULTS = {"n_components": None, "eigen_solver": None, "eigen_tol": "auto",
             "assign_labels": "kmeans", "verbose": False}


def spectral_clustering(affinity, *, n_clusters=8, n_components=None, eigen_solver=None,
                        random_state=None, n_init=10, eigen_tol="auto",
                        assign_labels="kmeans", verbose=False):
    """Cluster the points of a precomputed affinity matrix (scikit-learn's function).

    Parameters
    ----------
    affinity : array or sparse matrix of shape (n_samples, n_samples)
        Symmetric, non-negative affinities (a graph's adjacency, a kernel matrix).
    n_clusters : int, default 8
    n_components : int or None, default None
        Eigenvectors of the embedding; None: `n_clusters`.
    eigen_solver : str or None, default None
        None: the estimator's default solver (chosen for the graph; scikit-learn's None
        is ARPACK). Otherwise a name the estimator takes (scikit-learn's ``"arpack"``,
        ``"lobpcg"``, ``"amg"`` among them).
    random_state : int, RandomState instance or None
    n_init : int, default 10
        k-means restarts (``assign_labels="kmeans"`` only).
    eigen_tol : float or "auto", default "auto"
        "auto": the eigensolver's own tolerance.
    assign_labels : {"kmeans", "discretize", "cluster_qr"}, default "kmeans"
        See :mod:`explorer.assign`.
    verbose : bool, default False

    Returns
    -------
    labels : ndarray of shape (n_samples,)

    Notes
    -----
    The keywords still at scikit-learn's defaults (the table ``_DEFAULTS``) are not
    passed to the estimator: each means "the default", which is what the estimator
    does without them. The others are passed as given, and the estimator validates
    them (errors name the keyword and what is allowed).
    """
    from .spectral import SpectralClustering

    chosen = {"n_components": n_components, "eigen_solver": eigen_solver,
              "eigen_tol": eigen_tol, "assign_labels": assign_labels, "verbose": verbose}
    passed = {name: value for name, value in chosen.items()
              if not (type(value) is type(_DEFAULTS[name]) and value == _DEFAULTS[name])}
    estimator = SpectralClustering(n_clusters=n_clusters, affinity="precomputed",
                                   random_state=random_state, n_init=n_init, **passed)
    return estimator.fit(affinity).labels_
