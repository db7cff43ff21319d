"""Representatives (after He, Vialle, Baboulin's k-means chain): their graph unweighted
against weighted by the points each stands for
(:func:`explorer.representatives.weight_by_counts`, what ``mode="representatives"``
clusters), on the built-in 2-D shapes, m = 4096 and 16384.

usage: python benchmarks/representatives_weights.py OUT.json {gpu,cpu} SIZES [FAMILIES]
  SIZES: comma-separated, e.g. 1000000,10000000 (one H200 call: about 3 minutes);
  FAMILIES: how many of the families below (default all).
"""

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.data import load  # noqa: E402

import explorer  # noqa: E402
from explorer.metrics import adjusted_rand_score  # noqa: E402

FAMILIES = [("circles", {"noise": 0.1}), ("aniso", {"cluster_std": 0.25}),
            ("moons", {"noise": 0.1}), ("circles", {"noise": 0.05}),
            ("aniso", {"cluster_std": 0.15}), ("spirals", {"noise": 0.05}),
            ("blobs", {"cluster_std": 0.3}), ("moons", {"noise": 0.05}), ("varied", {}),
            ("spirals", {"noise": 0.02}), ("blobs", {"cluster_std": 0.15})]


def host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def main(out, backend, sizes, n_families=None):
    warnings.simplefilter("ignore")
    rows = []
    for n in sizes:
        for name, opts in FAMILIES[:n_families]:
            ds = load(name, n_samples=n, random_state=0, **opts)
            X = ds.X
            if backend == "gpu":
                import cupy

                X = cupy.asarray(X)
            for m in (4096, 16384):
                t = time.perf_counter()
                sc = explorer.SpectralClustering(ds.n_classes, mode="representatives",
                                                 n_representatives=m, backend=backend,
                                                 random_state=0).fit(X)
                t_weighted = time.perf_counter() - t
                t = time.perf_counter()
                # the same representatives' graph, unweighted (graph_.csr is as built)
                plain = explorer.SpectralClustering(ds.n_classes, affinity="precomputed",
                                                    backend=backend,
                                                    random_state=0).fit(sc.graph_.csr)
                t_plain = time.perf_counter() - t
                unweighted = host(plain.labels_)[host(sc.representative_of_)]
                row = {"name": name, "opts": opts, "n": n, "m": m,
                       "ari_unweighted": float(adjusted_rand_score(ds.y, unweighted)),
                       "ari_weighted": float(adjusted_rand_score(ds.y, host(sc.labels_))),
                       "affinity": sc.affinity_, "s_fit_weighted": t_weighted,
                       "s_unweighted_partition": t_plain}
                print(json.dumps(row), flush=True)
                rows.append(row)
    Path(out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [int(float(s)) for s in sys.argv[3].split(",")],
         int(sys.argv[4]) if len(sys.argv) > 4 else None)
