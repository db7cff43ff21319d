"""SpectralClustering.predict on new points: the Nyström extension (explorer.extension).

Fits on `--n` points of a built-in shape on the GPU, then labels `--n-new` other points
of the same shape (drawn with another seed) by ``predict``, per mode: exact (the cross
edges to every training point, brute-force blocks of products on the GPU),
representatives (the nearest representative) and landmarks (Ẑ(x) V Σ^-1). Reports the
fit's and predict's seconds (median of `--repeats` timed calls after one warm-up), the
new points' ARI against the generator's classes, the share of new points out of reach
(label −1), and how often predict on a sample of the training points gives their
fitted labels.

usage: python benchmarks/predict.py [--n 1000000] [--n-new 1000000] [--shape moons]
           [--modes exact,representatives,landmarks] [--repeats 3] [--affinity epsilon]
           [--backend gpu] [--name predict]
Writes benchmarks/results/<name>.json.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import environment_info, summary, time_cpu, time_gpu, write_result
from sklearn.metrics import adjusted_rand_score

from explorer import SpectralClustering, data
from explorer._backend import array_module, resolve_backend, to_numpy

#: Training points whose predicted label is compared with the fitted one.
TRAIN_SAMPLE = 100_000


def run_mode(mode, X, Xn, yn, k, args):
    xp = array_module(X)
    kw = {"mode": mode}
    if mode != "landmarks":
        kw["affinity"] = args.affinity
    else:
        kw["affinity"] = "epsilon"
    est = SpectralClustering(k, random_state=0, backend=args.backend, **kw)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as fit_warnings:
        warnings.simplefilter("always")
        est.fit(X)
    fit_s = time.perf_counter() - t0
    timing = time_gpu if xp is not np else time_cpu
    labels = []

    def call():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels.append(est.predict(Xn))

    times = timing(call, repeats=args.repeats, warmup=1)
    pred = to_numpy(labels[-1])
    sample = np.random.default_rng(0).choice(X.shape[0], min(TRAIN_SAMPLE, X.shape[0]),
                                             replace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = to_numpy(est.predict(X[xp.asarray(sample)]))
    fitted = to_numpy(est.labels_)[sample]
    row = {
        "mode": est.mode_,
        "rule": None if est.edge_rule_ is None else est.edge_rule_.describe(),
        "backend": est.backend_,
        "fit_seconds": fit_s,
        "fit_timings": est.timings_,
        "fit_warnings": [str(w.message)[:300] for w in fit_warnings],
        "predict": summary(times),
        "new_points_per_second": Xn.shape[0] / float(np.median(times)),
        "ari_new_vs_classes": float(adjusted_rand_score(yn, pred)),
        "ari_fit_vs_classes": None,
        "unreachable_share": float(np.mean(pred < 0)),
        "train_sample_agreement": float(np.mean(own == fitted)),
    }
    print(f"{mode:16s} fit {fit_s:7.2f} s  predict {row['predict']['median']:7.3f} s  "
          f"ARI(new) {row['ari_new_vs_classes']:.4f}  -1 share {row['unreachable_share']:.2e}  "
          f"train agreement {row['train_sample_agreement']:.4f}", flush=True)
    return row, est


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--n-new", type=int, default=1_000_000)
    parser.add_argument("--shape", default="moons")
    parser.add_argument("--modes", default="exact,representatives,landmarks")
    parser.add_argument("--affinity", default="epsilon")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", default="gpu")
    parser.add_argument("--name", default="predict")
    args = parser.parse_args()

    be = resolve_backend(args.backend)
    info = data.DATASETS[args.shape]
    k = info.n_classes
    train = data.load(args.shape, args.n, random_state=0)
    new = data.load(args.shape, args.n_new, random_state=1)
    X, Xn = be.xp.asarray(train.X), be.xp.asarray(new.X)
    rows = []
    for mode in args.modes.split(","):
        row, est = run_mode(mode, X, Xn, new.y, k, args)
        row["ari_fit_vs_classes"] = float(adjusted_rand_score(train.y, to_numpy(est.labels_)))
        rows.append(row)
        del est
    payload = {"benchmark": "predict", "shape": args.shape, "n_fit": args.n,
               "n_new": args.n_new, "k": k, "rows": rows, "environment": environment_info()}
    path = write_result(args.name, payload)
    print("wrote", path)


if __name__ == "__main__":
    main()
