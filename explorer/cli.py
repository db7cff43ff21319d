"""The ``spectral-explorer`` command: cluster or measure a data set from a shell.

Subcommands:

- ``run``: the whole pipeline (graph, embedding, k-means) on a built-in data set or a
  file; prints stage timings, graph statistics, the backend and builder with the
  reasons they were chosen, and ARI/NMI when the data has labels. ``--json PATH``
  writes everything, with the environment.
- ``stats``: the graph's statistics only (:func:`explorer.graph_stats`), optionally
  estimated from a sample of rows.
- ``datasets``: the built-in data sets.

Graph parameters left out are filled in from the data set's suggestion
(:attr:`explorer.data.Dataset.suggested`, by :meth:`explorer.EdgeRule.suggest`, the
rule :class:`explorer.SpectralClustering` and the app use) and the output says which.
The graph flags are generated from the edge rule's and the builders' field
declarations (``explorer.graph.EDGE_FIELDS`` and ``BUILD_FIELDS``). Bad input ends
with one line ``error: <message>`` on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import explorer
from explorer.graph.rule import BUILD_FIELDS, EDGE_FIELDS, EdgeRule, MissingThreshold
from explorer.preprocessing import SCALINGS

#: Exceptions that are the user's to fix: reported as one line, exit status 2.
#: ArithmeticError (overflow, division by zero) is a numeric extreme of the input that
#: a check missed: still the input's, still one line.
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, MemoryError, ArithmeticError)
EXIT_USAGE = 2



class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line error format."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"error: {message} (see {self.prog} --help)\n")


def _n_clusters(text):
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid --n-clusters {text!r}: use an integer >= 1 or 'auto'"
        ) from None


def _n_representatives(text):
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--n-representatives must be an integer or 'auto'; got {text!r}") from None


def _option(text):
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(
            f"invalid --option {text!r}: use KEY=VALUE, e.g. noise=0.1"
        )
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = value  # a bare word stays a string
    return key, parsed


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the tests and for ``--help`` text)."""
    parser = _Parser(
        prog="spectral-explorer",
        description="Spectral clustering on an ε-neighbourhood graph, on the GPU or the CPU.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {explorer.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,stats,datasets}")

    run = sub.add_parser("run", help="cluster a data set and report timings, statistics, scores")
    _data_arguments(run)
    _graph_arguments(run)
    g = run.add_argument_group("graph builder")
    g.add_argument("--method", default="auto",
                   help="builder: auto, kdtree, bruteforce (CPU); csr1, csr2, csr3, ... (GPU)")
    _field_arguments(g, ("sp_max_nz_pct", "mem_use_rate"))
    c = run.add_argument_group("clustering")
    c.add_argument("--n-clusters", type=_n_clusters,
                   help="k, or 'auto' (eigengap); default: the data's classes, else auto")
    c.add_argument("--eigen-solver", default="auto",
                   help="auto, dense, lanczos, lobpcg, chebyshev, lu, amg (CPU) or components")
    c.add_argument("--eigen-tol", type=float, help="eigensolver residual tolerance")
    c.add_argument("--eigen-max-iter", type=int, help="eigensolver iteration limit")
    c.add_argument("--n-init", type=int, default=10, help="k-means restarts (default 10)")
    c.add_argument("--mode", default="auto",
                   choices=("auto", "exact", "representatives", "landmarks"),
                   help="exact: the graph of all points; representatives: k-means "
                   "representatives clustered, labels mapped back (papers/004); landmarks: "
                   "landmark spectral clustering through --n-landmarks points (papers/002; "
                   "uses --metric, --sigma); auto: exact or representatives by the pair "
                   "work n²·d (default)")
    c.add_argument("--n-representatives", type=_n_representatives, default="auto",
                   metavar="M", help="representatives of --mode representatives (default "
                   "auto: min(4096, n) on the GPU, min(2048, n) on the CPU)")
    c.add_argument("--random-state", type=int, default=0,
                   help="seed of the eigensolver start and k-means (default 0)")
    c.add_argument("--reorder", choices=("auto", "jaccard", "rcm", "spatial"),
                   help="run the eigensolver on the graph with its rows reordered: auto (when "
                        "the products saved pay for it), jaccard (paper 003), rcm, spatial "
                        "(Morton order of the points); default: as given")
    lm = run.add_argument_group("mode landmarks (explorer.landmarks, papers/002)")
    lm.add_argument("--n-landmarks", type=int, metavar="P",
                    help="landmarks with --mode landmarks (default min(1000, n))")
    lm.add_argument("--n-nearest-landmarks", type=int, default=5, metavar="R",
                    help="landmarks each point is joined to with --mode landmarks (default 5)")
    dk = run.add_argument_group(
        "distributed (dask.distributed; pip install 'spectral-explorer[dask]')")
    dk.add_argument("--scheduler", metavar="ADDRESS",
                    help="run on the Dask cluster of this scheduler (tcp://host:8786): the "
                         "data as a Dask array of row blocks, see explorer.distributed")
    dk.add_argument("--row-chunks", type=int, metavar="ROWS",
                    help="rows per block with --scheduler (default: 2 blocks per worker)")
    run.add_argument("--json", type=Path, metavar="PATH", help="write the full result as JSON")

    stats = sub.add_parser("stats", help="graph statistics only (no clustering)")
    _data_arguments(stats)
    _graph_arguments(stats)
    stats.add_argument("--sample-rows", type=int,
                       help="count only this many random rows and extrapolate (fast)")
    stats.add_argument("--no-components", action="store_true",
                       help="skip connected components (they need the whole graph)")
    stats.add_argument("--json", type=Path, metavar="PATH", help="write the statistics as JSON")

    sub.add_parser("datasets", help="list the built-in data sets")
    return parser


def _data_arguments(p):
    g = p.add_argument_group("data")
    g.add_argument("dataset", nargs="?",
                   help="built-in data set (see 'spectral-explorer datasets')")
    g.add_argument("--file", type=Path, help="read the data from a CSV, NPY, NPZ or Parquet file")
    g.add_argument("--label-column", help="ground-truth column of --file (name or 0-based index)")
    g.add_argument("--ignore-columns", type=_column_list, metavar="COLUMNS",
                   help="columns of --file left out of the features: names or 0-based "
                        "indices, comma separated (index, ID and date columns are left out "
                        "on their own; the 'read' line says which)")
    g.add_argument("--n-samples", type=int, help="rows to generate (built-in sets)")
    g.add_argument("--data-seed", type=int, default=0, help="generator seed (default 0)")
    g.add_argument("-o", "--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                   help="generator option, e.g. -o noise=0.1 (repeatable)")
    g.add_argument("--scale", choices=SCALINGS,
                   help="scale the features before the graph is built: standard (zero mean, "
                        "unit std) or minmax (into [0, 1]); default: as given")


def _graph_arguments(p):
    g = p.add_argument_group("similarity graph (left out: the data set's suggestion)")
    _field_arguments(g, (*EDGE_FIELDS, "hypo_max_nnz_row"))
    g.add_argument("--backend", default="auto", choices=("auto", "gpu", "cpu"))


def _field_arguments(group, names):
    """One flag per declared field (explorer.graph.rule): its type and help, no default
    (left out: None, which the suggestion or the builder fills in). Values are checked
    by the library, whose messages name the keyword and the range."""
    fields = {**EDGE_FIELDS, **BUILD_FIELDS}
    for name in names:
        f = fields[name]
        bounds = "" if f.type is str else f"; allowed {_range(f)}"
        if f.words:
            bounds += " or " + ", ".join(f.words)
        group.add_argument(f.flag, type=_number_or_word(f) if f.words else f.type,
                           metavar=name.upper(), help=f.help.replace("%", "%%") + bounds)


def _number_or_word(f):
    """The flag's type for a number field that also takes words (``--sigma local``)."""

    def parse(text: str):
        return text if text in f.words else f.type(text)

    parse.__name__ = f.type.__name__  # argparse names the type in its message
    return parse


def _range(f) -> str:
    lo = "-inf" if f.low is None else f"{f.low:g}"
    hi = "inf" if f.high is None else f"{f.high:g}"
    return f"{'[' if f.low_inclusive else '('}{lo}, {hi}{']' if f.high_inclusive else ')'}"


# --- data and parameters -------------------------------------------------------------


def _column_list(text: str) -> list[str]:
    """``--ignore-columns a,3,b``: the names and indices, in order (a name that is a
    number is taken as an index, as for --label-column)."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give column names or 0-based indices separated by commas, none empty")
    return items


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def _load(args):
    from explorer import data

    if (args.dataset is None) == (args.file is None):
        raise ValueError("give a built-in data set name or --file PATH (exactly one); "
                         f"built-in: {', '.join(data.DATASETS)}")
    ignore = getattr(args, "ignore_columns", None)
    if args.file is not None:
        if args.n_samples is not None or args.option:
            raise ValueError("--n-samples and --option apply to built-in data sets, not to --file")
        json_path = getattr(args, "json", None)
        if json_path is not None and _same_file(json_path, args.file):
            raise ValueError(f"--json {json_path} is the data file given as --file; the result "
                             "would replace the data: give the JSON another path")
        start = time.perf_counter()
        ds = data.read(args.file, label_column=args.label_column, ignore_columns=ignore)
        seconds = time.perf_counter() - start
        _row(sys.stdout, "read", data.describe_read(ds.params["read"]))
        return ds, seconds
    if args.label_column is not None:
        raise ValueError("--label-column applies to --file only")
    if ignore is not None:
        raise ValueError("--ignore-columns applies to --file only")
    start = time.perf_counter()
    ds = data.load(args.dataset, n_samples=args.n_samples, random_state=args.data_seed,
                   **dict(args.option))
    return ds, time.perf_counter() - start


def _apply_scale(args, ds):
    """The data set the graph is built from: `ds` with its features scaled by
    ``--scale`` (its suggestion then recomputed on the scaled data; a preset of raw
    units no longer applies), or `ds` as given after warning when its features'
    spreads differ by orders of magnitude."""
    from explorer.preprocessing import check_feature_scales, scale_features

    if args.scale is None:
        check_feature_scales(ds.X)
        return ds
    return dataclasses.replace(
        ds, X=scale_features(ds.X, args.scale), preset=None,
        description=f"{ds.description} ({args.scale} scaling)",
        params={**ds.params, "scale": args.scale},
    )


def _edge_rule(args, ds) -> EdgeRule:
    """The edge rule: the user's flags, the rest from the data set's suggestion
    (:meth:`explorer.EdgeRule.suggest`; ``rule.suggested`` names what it filled)."""
    given = {
        "metric": args.metric or "auto",
        "sigma": "auto" if args.sigma is None else args.sigma,
        "threshold_sqdist": args.threshold_sqdist,
        "threshold_sim": args.threshold_sim,
        "graph": _graph_kind(args, ds),
    }
    for name in ("n_neighbors", "local_neighbor"):
        if getattr(args, name) is not None:
            given[name] = getattr(args, name)
    try:
        return EdgeRule.suggest(ds.X, **given, suggestion=ds.suggested)
    except MissingThreshold as exc:
        raise ValueError(
            f"--metric {exc.metric} needs --threshold-{exc.kind}: {exc}"
        ) from None


def _graph_kind(args, ds) -> str:
    """``--graph``, or when left out the estimator's ``affinity="auto"`` rule
    (:func:`explorer.affinity.choose_affinity`; ε when a threshold or σ is given); the
    reason is kept in ``args.graph_why`` for the output."""
    if args.graph is not None:
        args.graph_why = "given (--graph)"
        return args.graph
    given = [f.flag for name, f in EDGE_FIELDS.items()
             if name in ("threshold_sqdist", "threshold_sim", "sigma")
             and getattr(args, name, None) is not None]
    if given:
        args.graph_why = f"{' and '.join(given)} given: the ε-graph they define"
        return "epsilon"
    from explorer.affinity import choose_affinity

    n_clusters = getattr(args, "n_clusters", None)
    if n_clusters is None:
        n_clusters = "auto" if ds.y is None else ds.n_classes
    kwargs = {name: getattr(args, name) for name in ("n_neighbors", "local_neighbor")
              if getattr(args, name, None) is not None}
    choice = choose_affinity(ds.X, n_clusters, backend=args.backend, **kwargs)
    args.graph_why = f"chosen (affinity='auto'): {choice.why}"
    return choice.affinity


def _graph_params(args, ds) -> tuple[dict, list[str]]:
    """The edge rule as estimator keywords (those that apply), and the names filled in."""
    rule = _edge_rule(args, ds)
    params = {k: v for k, v in rule.to_kwargs().items() if v is not None}
    params["affinity"] = params.pop("graph", "epsilon")  # the estimator's name of it
    return params, sorted(rule.suggested)


# --- commands ----------------------------------------------------------------------


def _cmd_run(args, out) -> dict:
    from explorer.metrics import clustering_scores

    ds, load_s = _load(args)
    ds = _apply_scale(args, ds)
    if args.mode == "landmarks":
        return _cmd_run_landmarks(args, out, ds, load_s)
    mode = _mode(args, ds)
    if mode == "representatives":  # the edge rule is chosen from the representatives
        graph = {k: v for k, v in (("metric", args.metric), ("sigma", args.sigma),
                                   ("threshold_sqdist", args.threshold_sqdist),
                                   ("threshold_sim", args.threshold_sim),
                                   ("affinity", args.graph), ("n_neighbors", args.n_neighbors),
                                   ("local_neighbor", args.local_neighbor)) if v is not None}
        filled = []
    else:
        graph, filled = _graph_params(args, ds)  # complete: the estimator chooses nothing
    n_clusters = args.n_clusters
    if n_clusters is None:  # as suggested: the classes of labelled data, else the eigengap
        n_clusters = "auto" if ds.y is None else ds.n_classes
        filled.append("n_clusters")
    sc = explorer.SpectralClustering(
        n_clusters=n_clusters, **graph, method=args.method,
        hypo_max_nnz_row=args.hypo_max_nnz_row, sp_max_nz_pct=args.sp_max_nz_pct,
        mem_use_rate=args.mem_use_rate, eigen_solver=args.eigen_solver, eigen_tol=args.eigen_tol,
        eigen_max_iter=args.eigen_max_iter, n_init=args.n_init, random_state=args.random_state,
        backend=args.backend, mode=mode, n_representatives=args.n_representatives,
        reorder=args.reorder,
    )
    if args.scheduler and args.reorder:
        raise ValueError("--reorder is for a single-process run; the distributed mode "
                         "(--scheduler) embeds the graph in its row blocks as built")
    if args.scheduler:
        scores = _fit_on_cluster(sc, ds, args.scheduler, args.row_chunks)
    elif mode == "representatives":
        from explorer.metrics import adjusted_rand_score, normalized_mutual_info_score

        sc.fit(ds.X)
        filled += [f"{name} (chosen from the representatives)"
                   for name in sorted(sc.suggested_params_)]
        args.graph_why = f"{sc.affinity_why_} (on the representatives)"
        # Cuts of the representatives' graph; ARI / NMI of every point's label.
        scores = clustering_scores(sc.affinity_matrix_, sc.representative_labels_)
        if ds.y is not None:
            scores["ari"] = adjusted_rand_score(ds.y, sc.labels_)
            scores["nmi"] = normalized_mutual_info_score(ds.y, sc.labels_)
    else:
        sc.fit(ds.X)
        scores = clustering_scores(sc.affinity_matrix_, sc.labels_, ds.y)
    g = sc.graph_
    timings = {"data": load_s, **sc.timings_}

    _print_data(out, ds, load_s)
    _row(out, "mode", f"{sc.mode_}: {sc.mode_why_}" + (
        f"; {len(sc.representatives_)} representatives" if sc.mode_ == "representatives"
        else ""))
    _print_graph(out, sc.backend_, sc.backend_reason_, g.method, g.method_reason, g.rule,
                 filled, g.stats, g.options)
    _row(out, "graph kind", f"{g.rule.graph}: {args.graph_why}")
    residual = float(np.max(sc.eigen_residuals_)) if len(sc.eigen_residuals_) else float("nan")
    _row(out, "clustering", f"k={sc.n_clusters_}" + (" (eigengap)" if n_clusters == "auto" else "")
         + f", eigensolver {sc.eigen_solver_}, {_iters(sc.eigen_iterations_)}, "
         f"max residual {residual:.2g}")
    _row(out, "eigensolver", sc.eigen_solver_why_)
    _row(out, "eigenvalues", " ".join(f"{v:.4g}" for v in sc.eigenvalues_))
    reorder = getattr(sc, "reorder_", None)
    if reorder is not None:
        _row(out, "row order", f"{reorder.describe()}; {reorder.reason}")
    _row(out, "scores", _scores_text(scores))
    _row(out, "timings", _seconds_text(timings))
    _row(out, "graph stages", _seconds_text(g.timings))
    return {
        "command": "run",
        "data": _data_json(ds),
        "parameters": {k: v for k, v in sc.get_params().items()},
        "suggested_parameters_used": filled,
        "backend": {"name": sc.backend_, "reason": sc.backend_reason_},
        "mode": {"name": sc.mode_, "reason": sc.mode_why_},
        "method": {"name": g.method, "reason": g.method_reason},
        "edge_rule": g.rule.describe(),
        "graph_kind": {"name": g.rule.graph, "why": args.graph_why},
        "options_used": {k: v for k, v in g.options.to_kwargs().items() if v is not None},
        "n_clusters": int(sc.n_clusters_),
        "stats": g.stats.to_dict(),
        "timings": timings,
        "graph_timings": dict(g.timings),
        "scores": scores,
        "eigenvalues": np.asarray(sc.eigenvalues_, dtype=float).tolist(),
        "eigensolver": {
            "name": sc.eigen_solver_,
            "why": sc.eigen_solver_why_,
            "iterations": sc.eigen_iterations_,
            "residual_norms": np.asarray(sc.eigen_residuals_, dtype=float).tolist(),
        },
        "reorder": None if reorder is None else reorder.as_dict(),
    }


def _cmd_run_landmarks(args, out, ds, load_s) -> dict:
    """``run --mode landmarks``: no n × n graph, so no graph statistics or cut scores;
    ARI/NMI against the labels when the data set has them."""
    from explorer.metrics import adjusted_rand_score, normalized_mutual_info_score

    if args.scheduler:
        raise ValueError("--scheduler runs --mode exact only")
    ignored = [flag for flag, value in (
        ("--threshold-sqdist", args.threshold_sqdist), ("--threshold-sim", args.threshold_sim),
        ("--hypo-max-nnz-row", args.hypo_max_nnz_row), ("--sp-max-nz-pct", args.sp_max_nz_pct),
        ("--mem-use-rate", args.mem_use_rate)) if value is not None]
    if ignored:
        raise ValueError(f"{', '.join(ignored)} apply to --mode exact (the epsilon-graph), "
                         "not to --mode landmarks")
    n_clusters = args.n_clusters
    if n_clusters is None:
        n_clusters = "auto" if ds.y is None else ds.n_classes
    sc = explorer.SpectralClustering(
        n_clusters=n_clusters, mode="landmarks", metric=args.metric or "auto",
        sigma="auto" if args.sigma is None else args.sigma, n_landmarks=args.n_landmarks,
        n_nearest_landmarks=args.n_nearest_landmarks, eigen_tol=args.eigen_tol,
        eigen_max_iter=args.eigen_max_iter, n_init=args.n_init,
        random_state=args.random_state, backend=args.backend,
    ).fit(ds.X)
    part = sc.landmark_partition_
    timings = {"data": load_s, **sc.timings_}
    scores = {}
    if ds.y is not None:
        labels = np.asarray(sc.labels_)  # NumPy data in, NumPy labels out
        scores = {"ari": adjusted_rand_score(ds.y, labels),
                  "nmi": normalized_mutual_info_score(ds.y, labels),
                  "n_unclustered": int((labels < 0).sum())}
    _print_data(out, ds, load_s)
    _row(out, "backend", f"{sc.backend_}: {sc.backend_reason_}")
    sigma = "" if sc.sigma_ is None else f", sigma {sc.sigma_:.4g}"
    _row(out, "landmarks", f"{len(sc.landmarks_)} ({part.landmark_method}), "
         f"{part.n_nearest} per point, {sc.metric_} weights{sigma}")
    _row(out, "clustering", f"k={sc.n_clusters_}" + (" (eigengap)" if n_clusters == "auto" else "")
         + f", truncated SVD {sc.eigen_solver_} (block {part.svd.block_size}), "
         f"{_iters(sc.eigen_iterations_)}, max residual {float(np.max(part.svd.residuals)):.2g}")
    _row(out, "eigenvalues", " ".join(f"{v:.4g}" for v in sc.eigenvalues_))
    if scores:
        _row(out, "scores", f"ARI {scores['ari']:.4f}  NMI {scores['nmi']:.4f}"
             + (f"  {scores['n_unclustered']} unclustered (label -1)"
                if scores["n_unclustered"] else ""))
    _row(out, "timings", _seconds_text(timings))
    return {
        "command": "run",
        "mode": "landmarks",
        "data": _data_json(ds),
        "parameters": dict(sc.get_params()),
        "backend": {"name": sc.backend_, "reason": sc.backend_reason_},
        "n_clusters": int(sc.n_clusters_),
        "landmarks": {"n_landmarks": int(len(sc.landmarks_)), "n_nearest": part.n_nearest,
                      "method": part.landmark_method, "metric": sc.metric_, "sigma": sc.sigma_},
        "timings": timings,
        "scores": scores,
        "eigenvalues": np.asarray(sc.eigenvalues_, dtype=float).tolist(),
        "truncated_svd": {"iterations": sc.eigen_iterations_, "block_size": part.svd.block_size,
                          "residual_norms": np.asarray(part.svd.residuals, dtype=float).tolist(),
                          "singular_values": np.asarray(part.singular_values, float).tolist()},
    }


def _mode(args, ds) -> str:
    """``--mode`` resolved by the estimator's rule (explorer.representatives.choose_mode),
    so that the edge rule is suggested for the points the graph will be built on."""
    from explorer import resolve_backend
    from explorer.representatives import choose_mode

    if args.scheduler:
        return "exact" if args.mode == "auto" else args.mode
    n, d = ds.X.shape
    m = args.n_representatives
    return choose_mode(args.mode, n, d, backend=resolve_backend(args.backend).name,
                       metric=args.metric or "auto",
                       n_representatives=None if isinstance(m, str) else m)[0]


def _fit_on_cluster(sc, ds, address, row_chunks) -> dict:
    """Fit `sc` on the Dask cluster of the scheduler at `address`, the data cut into row
    blocks; return the scores (the cuts summed where the graph's blocks are). `labels_`
    is left as a NumPy array."""
    from explorer.metrics import clustering_scores

    try:
        import dask.array as da
        from distributed import Client
    except ImportError as exc:
        raise ValueError("--scheduler needs dask.distributed: pip install "
                         "'spectral-explorer[dask]'") from exc
    if row_chunks is not None and row_chunks < 1:
        raise ValueError(f"--row-chunks must be >= 1; got {row_chunks}")
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"--scheduler {address}: no Dask scheduler answers there ({exc}); "
                         "start one (dask scheduler; dask worker ADDRESS, or "
                         "dask-cuda-worker ADDRESS for one worker per GPU)") from exc
    with client:
        from explorer.distributed import n_workers

        workers = max(1, n_workers(client))
        rows = row_chunks or max(1, -(-ds.X.shape[0] // (2 * workers)))
        sc.fit(da.from_array(np.asarray(ds.X), chunks=(rows, -1)))
        sc.labels_ = sc.labels_.compute()
        return clustering_scores(sc.affinity_matrix_, sc.labels_, ds.y)


def _cmd_stats(args, out) -> dict:
    from explorer import graph_stats, resolve_backend

    ds, load_s = _load(args)
    ds = _apply_scale(args, ds)
    rule = _edge_rule(args, ds)
    filled = sorted(rule.suggested)
    backend = resolve_backend(args.backend)
    start = time.perf_counter()
    stats = graph_stats(ds.X, rule, hypo_max_nnz_row=args.hypo_max_nnz_row,
                        backend=backend.name, sample_rows=args.sample_rows,
                        components=not args.no_components)
    seconds = time.perf_counter() - start
    _print_data(out, ds, load_s)
    _print_graph(out, backend.name, backend.reason, None, None, rule, filled, stats)
    _row(out, "graph kind", f"{rule.graph}: {args.graph_why}")
    _row(out, "timings", f"statistics {seconds:.3f} s")
    return {
        "command": "stats",
        "data": _data_json(ds),
        "parameters": {**{k: v for k, v in rule.to_kwargs().items() if v is not None},
                       "hypo_max_nnz_row": args.hypo_max_nnz_row,
                       "sample_rows": args.sample_rows, "components": not args.no_components},
        "suggested_parameters_used": filled,
        "backend": {"name": backend.name, "reason": backend.reason},
        "edge_rule": rule.describe(),
        "graph_kind": {"name": rule.graph, "why": args.graph_why},
        "stats": stats.to_dict(),
        "timings": {"data": load_s, "stats": seconds},
    }


def _cmd_datasets(args, out) -> None:
    from explorer.data import DATASETS

    width = max(map(len, DATASETS))
    for name, info in DATASETS.items():
        classes = "no labels" if info.n_classes is None else f"{info.n_classes} classes"
        opts = ", ".join(f"{k}={v!r}" for k, v in info.options.items()) or "-"
        print(f"{name:<{width}}  d={info.d:<4} n={info.default_n:<7} {classes:<11} "
              f"{info.description}; options: {opts}", file=out)


# --- printing ----------------------------------------------------------------------


def _row(out, label, text):
    print(f"{label:<13} {text}", file=out)


def _print_data(out, ds, seconds):
    _row(out, "data", f"{ds.summary()} ({seconds:.2f} s)")


def _print_graph(out, backend, backend_reason, method, method_reason, rule, filled, st,
                 options=None):
    _row(out, "backend", f"{backend}: {backend_reason}")
    if method is not None:
        used = {} if options is None else {
            k: v for k, v in options.to_kwargs().items() if v is not None and k != "block_shapes"}
        knobs = "".join(f", {k}={v:g}" for k, v in used.items())
        _row(out, "method", f"{method}{knobs}: {method_reason}")
    _row(out, "edge rule", rule.describe())
    if filled:
        _row(out, "suggested", f"{', '.join(filled)} (not given: taken from the data set's "
             "suggestion)")
    est = f" (estimated from {st.sample_rows} rows)" if st.estimated else ""
    _row(out, "nnz", f"{st.nnz:,} ({st.nnz_row_mean:.1f} per row; min {st.nnz_row_min}, "
         f"max {st.nnz_row_max}){est}")
    _row(out, "sparsity", f"{st.sparsity:.4f} % zeros")
    _row(out, "memory", f"CSR {_bytes(st.bytes_csr)} | dense {_bytes(st.bytes_dense)} | "
         f"ELLPACK@{st.hypo_max_nnz_row} {_bytes(st.bytes_ellpack)} "
         f"({st.rows_over_hypo:,} rows over; suggested width {st.suggested_hypo_max_nnz_row})")
    comps = "not computed" if st.n_components is None else f"{st.n_components:,}"
    _row(out, "connectivity", f"{st.n_isolated:,} isolated rows; connected components {comps}")


def _bytes(n) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1000.0
    return str(n)


def _seconds_text(timings) -> str:
    return " | ".join(f"{stage} {seconds:.3f} s" for stage, seconds in timings.items())


def _iters(iterations) -> str:
    return "iterations not reported" if iterations is None else f"{iterations} iterations"


def _scores_text(scores) -> str:
    parts = []
    if "ari" in scores:
        parts.append(f"ARI {scores['ari']:.4f}  NMI {scores['nmi']:.4f}")
    parts.append(f"normalized cut {scores['normalized_cut']:.4g}  "
                 f"ratio cut {scores['ratio_cut']:.4g}")
    if scores.get("n_unclustered"):
        parts.append(f"{scores['n_unclustered']} unclustered (label -1)")
    return "  ".join(parts)


def _data_json(ds) -> dict:
    return {"name": ds.name, "n": ds.n, "d": ds.d, "n_classes": ds.n_classes,
            "description": ds.description, "params": ds.params}


def _write_json(path: Path, result: dict, backend: str) -> None:
    from explorer.environment import environment_info

    # A distributed run ("dask") describes the client's machine; the workers' are theirs.
    result["environment"] = environment_info("cpu" if backend == "dask" else backend)
    text = json.dumps(result, indent=1, default=_json_default) + "\n"
    # Atomically: a temporary file beside the target, then renamed over it, so that an
    # interrupted or failed write leaves the old file (or none), never half a JSON.
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp", delete=False, encoding="utf-8") as fh:
            tmp = Path(fh.name)
            fh.write(text)
        # A temporary file is private (0600); the JSON keeps the mode of the file it
        # replaces, or gets a plain file's.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.is_file() else 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ValueError(f"--json {path}: cannot write ({exc.strerror or exc})") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _json_default(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


# --- entry point -------------------------------------------------------------------


def main(argv=None) -> int:
    """Run the command line; return the exit status (0 ok, 2 bad input)."""
    args = build_parser().parse_args(argv)
    out = sys.stdout
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if args.command == "datasets":
                _cmd_datasets(args, out)
                return 0
            result = (_cmd_run if args.command == "run" else _cmd_stats)(args, out)
        messages = list(dict.fromkeys(str(w.message) for w in caught))
        for message in messages:
            print(f"warning: {' '.join(message.split())}", file=sys.stderr)
        if args.json is not None:
            result["warnings"] = messages
            _write_json(args.json, result, result["backend"]["name"])
            print(f"wrote {args.json}", file=out)
    except USER_ERRORS as exc:
        text = " ".join(str(exc).split())
        if not text:
            text = ("out of memory (MemoryError); use smaller data or a lower threshold"
                    if isinstance(exc, MemoryError) else type(exc).__name__)
        elif not isinstance(exc, (ValueError, TypeError, FileNotFoundError, MemoryError)):
            text = f"{type(exc).__name__}: {text}"
        print(f"error: {text}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
