"""The ``spectral-explorer`` command: cluster or measure a data set from a shell.

Subcommands:

- ``run``: the whole pipeline (graph, embedding, k-means) on a built-in data set or a
  file; prints stage timings, graph statistics, the backend and builder with the
  reasons they were chosen, and ARI/NMI when the data has labels. ``--json PATH``
  writes everything, with the environment.
- ``stats``: the graph's statistics only (:func:`explorer.graph_stats`), optionally
  estimated from a sample of rows.
- ``compare``: two runs side by side: two ``run --json`` results (``--results A B``),
  or two parameter sets on one data set (``-a KEY=VALUE``, ``-b KEY=VALUE`` over the
  flags both share); prints what differs and the ARI between the two labellings
  (:func:`explorer.metrics.compare_runs`); ``--json PATH`` writes the comparison.
- ``datasets``: the built-in data sets.

Every keyword of :class:`explorer.SpectralClustering` is a flag, generated from the
parameter table (:data:`explorer.params.SPECTRAL_PARAMS`); what is left out the
library decides, and the output prints its plan (:meth:`SpectralClustering.plan`:
mode, graph kind, edge rule, backend, each with its reason) without deciding anything
itself. Bad input ends with one line ``error: <message>`` on stderr and exit status 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import explorer
from explorer.params import SPECTRAL_PARAMS

#: Exceptions that are the user's to fix: reported as one line, exit status 2.
#: ArithmeticError (overflow, division by zero) is a numeric extreme of the input that
#: a check missed: still the input's, still one line.
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, MemoryError, ArithmeticError)
EXIT_USAGE = 2



class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line error format."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"error: {message} (see {self.prog} --help)\n")


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
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{run,stats,compare,datasets,warmup}")

    run = sub.add_parser("run", help="cluster a data set and report timings, statistics, scores")
    _data_arguments(run)
    _estimator_arguments(run)
    dk = run.add_argument_group(
        "distributed (dask.distributed; pip install 'spectral-explorer[dask]')")
    dk.add_argument("--scheduler", metavar="ADDRESS",
                    help="run on the Dask cluster of this scheduler (tcp://host:8786): the "
                         "data as a Dask array of row blocks, see explorer.distributed")
    dk.add_argument("--row-chunks", type=int, metavar="ROWS",
                    help="rows per block with --scheduler (default: 2 blocks per worker)")
    run.add_argument("--json", type=Path, metavar="PATH", help="write the full result as JSON")

    stats = sub.add_parser("stats", help="statistics of the graph a run would build (no "
                                         "clustering)")
    _data_arguments(stats)
    _estimator_arguments(stats)
    stats.add_argument("--sample-rows", type=int,
                       help="count only this many random rows and extrapolate (fast)")
    stats.add_argument("--no-components", action="store_true",
                       help="skip connected components (they need the whole graph)")
    stats.add_argument("--json", type=Path, metavar="PATH", help="write the statistics as JSON")

    cmp = sub.add_parser("compare", help="two runs side by side: what differs, the ARI "
                                         "between them, the points that changed cluster")
    cmp.add_argument("--results", nargs=2, type=Path, metavar=("A.json", "B.json"),
                     help="compare two results written by 'run --json' (instead of fitting)")
    _data_arguments(cmp)
    _estimator_arguments(cmp)
    for side in ("a", "b"):
        cmp.add_argument(f"-{side}", f"--{side}", dest=f"params_{side}", type=_option,
                         action="append", default=[], metavar="KEY=VALUE",
                         help=f"a keyword of run {side.upper()} only, as its flag takes it, "
                              "e.g. sigma=0.2 (repeatable)")
    cmp.add_argument("--json", type=Path, metavar="PATH",
                     help="write the comparison (and both runs' scores, plans, timings) as "
                          "JSON")

    sub.add_parser("datasets", help="list the built-in data sets")

    warm = sub.add_parser("warmup", help="compile the GPU kernels of the default fits into "
                                         "CuPy's kernel cache, so that no first fit waits for "
                                         "them (explorer.warmup)")
    warm.add_argument("--clusters", type=int, nargs="+", metavar="K",
                      help="numbers of clusters to compile for (default: "
                           "explorer.warmup.CLUSTERS)")
    warm.add_argument("--cache-dir", type=Path, metavar="DIR",
                      help="the kernel cache to fill (CUPY_CACHE_DIR; default: CuPy's)")
    warm.add_argument("--quiet", action="store_true", help="print nothing")
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


#: The estimator's keywords as flags, by group (every keyword of the parameter table
#: explorer.params.SPECTRAL_PARAMS has one); ``--graph`` is also ``--affinity``.
FLAG_GROUPS = {
    "similarity graph (left out: chosen from the data by the library)": (
        "affinity", "metric", "sigma", "threshold_sqdist", "threshold_sim", "n_neighbors",
        "local_neighbor", "scale"),
    "graph builder": ("method", "hypo_max_nnz_row", "sp_max_nz_pct", "mem_use_rate",
                      "backend"),
    "clustering": ("n_clusters", "eigen_solver", "eigen_tol", "eigen_max_iter",
                   "n_eigenpairs", "n_init", "kmeans_tol", "kmeans_max_iter",
                   "random_state", "reorder"),
    "mode (exact, representatives, landmarks)": ("mode", "n_representatives", "n_landmarks",
                                                "n_nearest_landmarks"),
    "scikit-learn's keywords (their meanings there)": (
        "gamma", "degree", "coef0", "n_components", "assign_labels", "n_jobs"),
}
#: Keywords with no flag: a dict of a callable's arguments, and the progress printing
#: (the command line prints its plan and result anyway).
NO_FLAG = ("kernel_params", "verbose")
ALIASES = {"affinity": ("--graph",)}
#: The command line's own defaults where they differ from the estimator's: a seeded run
#: prints the same numbers twice.
CLI_DEFAULTS = {"random_state": 0}


def _estimator_arguments(p):
    """One flag per keyword of the estimator, generated from its declaration (type,
    allowed values, help); left out, the keyword keeps the estimator's default (the
    library decides). Values are checked by the library, whose messages name the
    keyword and the range."""
    for title, names in FLAG_GROUPS.items():
        group = p.add_argument_group(title)
        for name in names:
            f = SPECTRAL_PARAMS[name]
            default = CLI_DEFAULTS.get(name)
            extra = f"; default {default}" if default is not None else ""
            group.add_argument(f.flag, *ALIASES.get(name, ()), dest=name, type=_parser_of(f),
                               default=default, metavar=name.upper(),
                               help=(f.help + "; allowed " + f.describe_allowed()
                                     + extra).replace("%", "%%"))


#: The word a flag takes for None where None is not the keyword's default
#: (``--scale none``: the features as given, against the default "auto").
NONE_WORD = "none"


class _NoneGiven:
    """``--FLAG none`` parsed: None asked for explicitly (a flag left out is None too,
    and then the estimator's default applies)."""

    def __repr__(self):
        return NONE_WORD


NONE_GIVEN = _NoneGiven()


def _parser_of(f):
    """The flag's type: numbers (and the words a number field takes), or text."""
    if f.type is int or f.name in ("n_clusters", "random_state"):
        kind = int
    elif f.type is float:
        kind = float
    elif f.allow_none and f.default is not None:
        def text_or_none(text: str):
            return NONE_GIVEN if text == NONE_WORD else text

        text_or_none.__name__ = "str"
        return text_or_none
    else:
        return str

    def parse(text: str):
        if text in f.words or (f.name == "n_clusters" and text == "auto"):
            return text
        try:
            return kind(text)
        except ValueError:
            words = " or ".join(repr(w) for w in (*f.words, *(
                ("auto",) if f.name == "n_clusters" else ())))
            raise argparse.ArgumentTypeError(
                f"invalid {f.flag} {text!r}: use {'an integer' if kind is int else 'a number'}"
                + (f" or {words}" if words else "")) from None

    parse.__name__ = kind.__name__  # argparse names the type in its message
    return parse


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
        # Centred on reading, as the app reads files: the estimator would centre the
        # same offset, but a float32 Dataset cannot carry it to the estimator.
        ds = data.read(args.file, label_column=args.label_column, ignore_columns=ignore,
                       center=True)
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


def _estimator(args, ds, extra: dict | None = None) -> explorer.SpectralClustering:
    """The estimator of the flags given (the rest keeps the estimator's defaults: the
    library decides), k the data's classes when it has labels and none is given;
    `extra` overrides the flags (``compare``'s ``-a`` / ``-b``)."""
    params = {name: None if getattr(args, name) is NONE_GIVEN else getattr(args, name)
              for names in FLAG_GROUPS.values() for name in names
              if getattr(args, name) is not None}
    params.update(extra or {})
    if "n_clusters" not in params:  # the classes of labelled data, else the eigengap
        params["n_clusters"] = "auto" if ds.y is None else ds.n_classes
    return explorer.SpectralClustering(**params)


# --- commands ----------------------------------------------------------------------


def _cmd_run(args, out) -> dict:
    """``run``: fit, then print the library's plan and result (nothing re-derived)."""
    ds, load_s = _load(args)
    sc = _estimator(args, ds)
    if args.scheduler:
        if args.row_chunks is not None and args.row_chunks < 1:
            raise ValueError(f"--row-chunks must be >= 1; got {args.row_chunks}")
        scores = _fit_on_cluster(sc, ds, args.scheduler, args.row_chunks)
    else:
        sc.fit(ds.X)
        scores = _scores(sc, ds)
    plan, g = sc.plan_, sc.graph_
    timings = {"data": load_s, **sc.timings_}

    _print_data(out, ds, load_s)
    for label, text in plan.lines():
        _row(out, label, text)
    if g is not None:
        _print_graph(out, g.stats, g.method, g.method_reason, g.options)
    residual = (float(np.max(sc.eigen_residuals_)) if len(sc.eigen_residuals_)
                else float("nan"))
    _row(out, "clustering", f"k={sc.n_clusters_}" + (
        " (eigengap)" if sc.n_clusters == "auto" else "")
        + f", eigensolver {sc.eigen_solver_}, {_iters(sc.eigen_iterations_)}, "
        f"max residual {residual:.2g}")
    _row(out, "eigensolver", sc.eigen_solver_why_)
    _row(out, "eigenvalues", " ".join(f"{v:.4g}" for v in np.asarray(sc.eigenvalues_)))
    if sc.reorder_ is not None:
        _row(out, "row order", f"{sc.reorder_.describe()}; {sc.reorder_.reason}")
    _row(out, "scores", _scores_text(scores))
    _row(out, "timings", _seconds_text(timings))
    if g is not None:
        _row(out, "graph stages", _seconds_text(g.timings))
    result = {
        "command": "run",
        "data": _data_json(ds),
        "parameters": dict(sc.get_params()),
        "plan": dict(plan.lines()),
        "suggested_parameters_used": sorted(sc.suggested_params_),
        "backend": {"name": sc.backend_, "reason": sc.backend_reason_},
        "mode": {"name": sc.mode_, "reason": sc.mode_why_},
        "graph_kind": {"name": sc.affinity_, "why": sc.affinity_why_},
        "edge_rule": None if sc.edge_rule_ is None else sc.edge_rule_.describe(),
        "n_clusters": int(sc.n_clusters_),
        "timings": timings,
        "scores": scores,
        "eigenvalues": np.asarray(sc.eigenvalues_, dtype=float).tolist(),
        "eigensolver": {
            "name": sc.eigen_solver_,
            "why": sc.eigen_solver_why_,
            "iterations": sc.eigen_iterations_,
            "residual_norms": np.asarray(sc.eigen_residuals_, dtype=float).tolist(),
        },
        "reorder": None if sc.reorder_ is None else sc.reorder_.as_dict(),
        "labels": np.asarray(sc.labels_).astype(int).tolist(),
    }
    if g is not None:
        result.update({
            "method": {"name": g.method, "reason": g.method_reason},
            "options_used": ({} if g.options is None else
                             {k: v for k, v in g.options.to_kwargs().items() if v is not None}),
            "stats": g.stats.to_dict(), "graph_timings": dict(g.timings)})
    if sc.landmark_partition_ is not None:
        part = sc.landmark_partition_
        result["landmarks"] = {
            "n_landmarks": int(len(sc.landmarks_)), "n_nearest": part.n_nearest,
            "method": part.landmark_method, "metric": sc.metric_, "sigma": sc.sigma_,
            "block_size": part.svd.block_size,
            "singular_values": np.asarray(part.singular_values, float).tolist()}
    return result


def _scores(sc, ds) -> dict:
    """ARI / NMI against the data's labels, and the cuts of the graph that was
    clustered (the representatives' in that mode; none in landmark mode)."""
    from explorer.metrics import (
        adjusted_rand_score,
        clustering_scores,
        normalized_mutual_info_score,
    )

    labels = np.asarray(sc.labels_)
    if sc.graph_ is None:
        scores = {"n_unclustered": int((labels < 0).sum())}
    elif sc.mode_ == "representatives":
        scores = clustering_scores(sc.affinity_matrix_, sc.representative_labels_)
        scores["n_unclustered"] = int((labels < 0).sum())
    else:
        scores = clustering_scores(sc.affinity_matrix_, labels)
    if ds.y is not None:
        scores["ari"] = adjusted_rand_score(ds.y, labels)
        scores["nmi"] = normalized_mutual_info_score(ds.y, labels)
    return scores


def _fit_on_cluster(sc, ds, address, row_chunks) -> dict:
    """Fit `sc` on the Dask cluster of the scheduler at `address`, the data cut into row
    blocks; `labels_` is gathered to a NumPy array and the scores (the cuts summed where
    the graph's blocks are) computed while the client is open."""
    try:
        import dask.array as da
        from distributed import Client
    except ImportError as exc:
        raise ValueError("--scheduler needs dask.distributed: pip install "
                         "'spectral-explorer[dask]'") from exc
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
        return _scores(sc, ds)


def _cmd_stats(args, out) -> dict:
    """``stats``: the statistics of the graph a run of these flags builds (the plan's
    points and edge rule: the representatives' graph in that mode)."""
    from explorer import graph_stats

    ds, load_s = _load(args)
    plan = _estimator(args, ds).plan(ds.X)
    _print_data(out, ds, load_s)
    for label, text in plan.lines():
        _row(out, label, text)
    if plan.rule is None:
        raise ValueError(f"mode {plan.mode!r} builds no graph of the points "
                         f"({plan.affinity_why}); its statistics are those of no graph: use "
                         "--mode exact or representatives")
    start = time.perf_counter()
    stats = graph_stats(plan.points, plan.rule, hypo_max_nnz_row=args.hypo_max_nnz_row,
                        backend=plan.backend, sample_rows=args.sample_rows,
                        components=not args.no_components)
    seconds = time.perf_counter() - start
    _print_graph(out, stats)
    _row(out, "timings", f"statistics {seconds:.3f} s")
    return {
        "command": "stats",
        "data": _data_json(ds),
        "plan": dict(plan.lines()),
        "parameters": {**{k: v for k, v in plan.user_rule.to_kwargs().items() if v is not None},
                       "hypo_max_nnz_row": args.hypo_max_nnz_row,
                       "sample_rows": args.sample_rows, "components": not args.no_components},
        "suggested_parameters_used": sorted(plan.rule.suggested),
        "backend": {"name": plan.backend, "reason": plan.backend_why},
        "mode": {"name": plan.mode, "reason": plan.mode_why},
        "edge_rule": plan.user_rule.describe(),
        "graph_kind": {"name": plan.affinity, "why": plan.affinity_why},
        "stats": stats.to_dict(),
        "timings": {"data": load_s, **plan.timings, "stats": seconds},
    }


def _side_params(pairs, flag: str) -> dict:
    """``compare``'s ``-a`` / ``-b`` pairs as estimator keywords, each value parsed as
    its flag parses it (the library checks the value)."""
    params = {}
    for key, value in pairs:
        if key not in SPECTRAL_PARAMS or key in NO_FLAG:
            allowed = ", ".join(n for names in FLAG_GROUPS.values() for n in names)
            raise ValueError(f"{flag} {key}={value}: {key!r} is not a keyword of the "
                             f"estimator; allowed: {allowed}")
        try:
            parsed = _parser_of(SPECTRAL_PARAMS[key])(str(value))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"{flag} {key}={value}: {exc}") from None
        params[key] = None if parsed is NONE_GIVEN else parsed
    return params


def _read_result(path: Path) -> dict:
    """A ``run --json`` result, checked to hold what ``compare`` needs."""
    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"--results {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--results {path}: not a JSON result of 'run --json' ({exc})") from None
    if not isinstance(result, dict) or result.get("command") != "run" or "labels" not in result:
        raise ValueError(f"--results {path}: not a result of 'spectral-explorer run --json' "
                         "with labels (results written before 'compare' existed have none: "
                         "run again)")
    return result


def _cmd_compare(args, out) -> dict:
    """``compare``: two runs (two JSON results, or two parameter sets fitted here), then
    the library's comparison (:func:`explorer.metrics.compare_runs`) printed; returned
    as the JSON result (``--json``)."""
    from explorer.metrics import compare_runs

    if args.results is not None:
        if args.dataset is not None or args.file is not None or args.params_a or args.params_b:
            raise ValueError("--results compares two saved results: give no data set, "
                             "--file, -a or -b with it")
        for path in args.results:
            if args.json is not None and _same_file(args.json, path):
                raise ValueError(f"--json {args.json} is the result given as --results "
                                 f"{path}; the comparison would replace it: give the JSON "
                                 "another path")
        a, b = (_read_result(p) for p in args.results)
        def same(data):  # the data's identity, not how long it took to make
            return {k: v for k, v in data.items() if k != "params"} | {
                "params": {k: v for k, v in (data.get("params") or {}).items()
                           if not k.endswith("seconds")}}

        if same(a["data"]) != same(b["data"]):
            raise ValueError(f"--results: {args.results[0]} clustered {a['data']['name']} "
                             f"(n={a['data']['n']}) and {args.results[1]} "
                             f"{b['data']['name']} (n={b['data']['n']}) with other "
                             "settings: two runs compare only on the same data")
        runs, y, data_json = [a, b], None, a["data"]
        _row(out, "data", f"{a['data']['name']}: n = {a['data']['n']:,}, d = {a['data']['d']}")
    else:
        if not args.params_a and not args.params_b:
            raise ValueError("compare needs --results A.json B.json, or -a/-b KEY=VALUE "
                             "(the parameters of run A and run B)")
        sides = [_side_params(args.params_a, "-a"), _side_params(args.params_b, "-b")]
        ds, load_s = _load(args)
        _print_data(out, ds, load_s)
        runs, y, data_json = [], ds.y, _data_json(ds)
        for extra in sides:
            sc = _estimator(args, ds, extra).fit(ds.X)
            runs.append({"parameters": dict(sc.get_params()), "plan": dict(sc.plan_.lines()),
                         "scores": _scores(sc, ds), "labels": np.asarray(sc.labels_),
                         "timings": dict(sc.timings_),
                         "backend": {"name": sc.backend_, "reason": sc.backend_reason_}})
    for name, run in zip("AB", runs, strict=True):
        _row(out, f"run {name}", _scores_text(run["scores"]) + (
            f"  ({run['timings']['total']:.2f} s)" if "total" in run["timings"] else ""))
    comparison = compare_runs(runs[0]["labels"], runs[1]["labels"], y_true=y,
                              params_a=runs[0]["parameters"], params_b=runs[1]["parameters"],
                              plan_a=runs[0]["plan"], plan_b=runs[1]["plan"])
    for label, text in comparison.lines():
        _row(out, label, text)
    backends = [(run.get("backend") or {}).get("name", "cpu") for run in runs]
    return {
        "command": "compare",
        "data": data_json,
        # The environment described is a GPU's when either run used one.
        "backend": {"name": next((b for b in backends if b != "cpu"), "cpu")},
        "runs": {name: {key: run.get(key) for key in
                        ("parameters", "plan", "scores", "timings", "backend")}
                 for name, run in zip("AB", runs, strict=True)},
        "results": None if args.results is None else [str(p) for p in args.results],
        "comparison": comparison.to_dict(),
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


def _cmd_warmup(args, out) -> None:
    if args.cache_dir is not None:  # before CuPy compiles anything in this process
        os.environ["CUPY_CACHE_DIR"] = str(args.cache_dir)
    from . import warmup

    def progress(name, k, seconds):
        if not args.quiet:
            print(f"{name:<16} k={k:<3} {seconds:6.2f} s", file=out, flush=True)

    try:
        result = warmup.precompile(args.clusters or warmup.CLUSTERS, progress=progress)
    except RuntimeError as exc:
        raise ValueError(str(exc)) from None
    if not args.quiet:
        print(f"compiled into {result['cache_dir']} in {result['total']:.1f} s", file=out)


def _row(out, label, text):
    print(f"{label:<13} {text}", file=out)


def _print_data(out, ds, seconds):
    _row(out, "data", f"{ds.summary()} ({seconds:.2f} s)")


def _print_graph(out, st, method=None, method_reason=None, options=None):
    if method is not None:
        used = {} if options is None else {
            k: v for k, v in options.to_kwargs().items() if v is not None and k != "block_shapes"}
        knobs = "".join(f", {k}={v:g}" for k, v in used.items())
        _row(out, "method", f"{method}{knobs}: {method_reason}")
    est = f" (estimated from {st.sample_rows} rows)" if st.estimated else ""
    _row(out, "nnz", f"{st.nnz:,} ({st.nnz_row_mean:.1f} per row; min {st.nnz_row_min}, "
         f"max {st.nnz_row_max}){est}")
    _row(out, "sparsity", f"{st.sparsity:.4f} % zeros")
    _row(out, "memory", f"CSR {_bytes(st.bytes_csr)} | dense {_bytes(st.bytes_dense)} | "
         f"ELLPACK@{st.hypo_max_nnz_row} {_bytes(st.bytes_ellpack)} "
         f"({st.rows_over_hypo:,} rows over; suggested width {st.suggested_hypo_max_nnz_row})")
    if st.n_components is None:
        comps = "not computed"
    else:  # as the app says it: the isolated rows are components of one vertex each
        comps = (f"{st.n_components - st.n_isolated:,} besides the isolated rows "
                 f"({st.n_components:,} counting each as one)")
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
    if "normalized_cut" in scores:
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
            if args.command == "warmup":
                _cmd_warmup(args, out)
                return 0
            commands = {"run": _cmd_run, "stats": _cmd_stats, "compare": _cmd_compare}
            result = commands[args.command](args, out)
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
