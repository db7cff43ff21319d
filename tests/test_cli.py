"""The spectral-explorer command line: parsing, the commands end to end, errors."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer import cli, data


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- parsing ----------------------------------------------------------------------


def test_parser_reads_every_pipeline_parameter():
    args = cli.build_parser().parse_args([
        "run", "moons", "--n-samples", "300", "--metric", "gaussian", "--sigma", "0.1",
        "--threshold-sqdist", "0.02", "--method", "kdtree", "--hypo-max-nnz-row", "32",
        "--sp-max-nz-pct", "1", "--mem-use-rate", "0.5", "--n-clusters", "auto",
        "--eigen-solver", "lobpcg", "--eigen-tol", "1e-4", "--eigen-max-iter", "50",
        "--n-init", "3", "--random-state", "7", "--backend", "cpu", "-o", "noise=0.1",
        "-o", "name=x",
    ])
    assert args.dataset == "moons" and args.n_samples == 300 and args.sigma == 0.1
    assert args.threshold_sqdist == 0.02 and args.threshold_sim is None
    assert args.method == "kdtree" and args.hypo_max_nnz_row == 32
    assert args.sp_max_nz_pct == 1.0 and args.mem_use_rate == 0.5
    assert args.n_clusters == "auto" and args.eigen_solver == "lobpcg"
    assert args.eigen_tol == 1e-4 and args.eigen_max_iter == 50 and args.n_init == 3
    assert args.random_state == 7 and args.backend == "cpu"
    assert args.option == [("noise", 0.1), ("name", "x")]
    assert cli.build_parser().parse_args(["run", "moons", "--n-clusters", "4"]).n_clusters == 4


def test_the_library_fills_only_what_is_left_out(capsys, tmp_path):
    # The command line decides nothing itself: what is left out the estimator chooses
    # from the data, and the output is its plan.
    path = tmp_path / "r.json"
    code, out, err = run(capsys, "stats", "moons", "--n-samples", "400", "--backend", "cpu",
                         "--threshold-sqdist", "0.01", "--json", str(path))
    assert code == 0, err
    doc = json.loads(path.read_text())
    assert doc["parameters"]["threshold_sqdist"] == 0.01
    assert doc["suggested_parameters_used"] == ["sigma"]  # gaussian: the one for t
    assert doc["graph_kind"]["why"].startswith("threshold_sqdist given")
    ds = data.load("moons", n_samples=400)
    plan = __import__("explorer").SpectralClustering(
        2, threshold_sqdist=0.01, backend="cpu", random_state=0).plan(ds.X)
    assert doc["edge_rule"] == plan.user_rule.describe()
    assert "edge rule" in out and "graph kind" in out
    code, out, err = run(capsys, "run", "moons", "--n-samples", "300", "--backend", "cpu",
                         "--metric", "cosine", "--graph", "epsilon", "--threshold-sqdist",
                         "0.01")
    assert code == 2 and "threshold_sim" in err


# --- commands end to end ------------------------------------------------------------


def test_run_prints_backend_method_stats_timings_and_scores(capsys):
    code, out, err = run(capsys, "run", "moons", "--n-samples", "600", "--backend", "cpu")
    assert code == 0, err
    for word in ("backend       cpu", "method", "edge rule", "nnz", "sparsity", "memory",
                 "connectivity", "k=2", "eigenvalues", "ARI", "NMI", "normalized cut",
                 "timings", "embedding", "kmeans", "suggested"):
        assert word in out, word
    ari = float(out.split("ARI ")[1].split()[0])
    assert ari > 0.95


def test_run_json_holds_the_full_result(capsys, tmp_path):
    path = tmp_path / "r.json"
    code, out, err = run(capsys, "run", "blobs", "--n-samples", "500", "--backend", "cpu",
                         "--n-clusters", "3", "--sigma", "0.05", "--threshold-sqdist", "0.004",
                         "--json", str(path))
    assert code == 0, err
    result = json.loads(path.read_text())
    assert result["command"] == "run" and result["data"]["name"] == "blobs"
    assert result["data"]["n"] == 500 and result["n_clusters"] == 3
    assert result["parameters"]["sigma"] == 0.05
    assert result["parameters"]["threshold_sqdist"] == 0.004
    assert result["backend"]["name"] == "cpu" and result["method"]["name"]
    assert result["stats"]["n"] == 500 and result["stats"]["nnz"] > 0
    assert set(result["stats"]["nnz_row_hist"]) == {"counts", "bin_edges"}
    assert {"data", "graph", "embedding", "kmeans", "total"} <= set(result["timings"])
    assert {"ari", "nmi", "normalized_cut", "ratio_cut"} <= set(result["scores"])
    assert len(result["eigenvalues"]) == 3
    assert result["environment"]["host"]["cores_logical"] >= 1
    assert result["environment"]["backend"]["name"] == "cpu"
    assert "sigma" not in result["suggested_parameters_used"]


def test_stats_sampled_and_exact(capsys, tmp_path):
    code, out, err = run(capsys, "stats", "syn4d", "--n-samples", "20000", "--sample-rows",
                         "500", "--graph", "epsilon", "--backend", "cpu")
    assert code == 0, err
    assert "estimated from 500 rows" in out and "components not computed" in out
    path = tmp_path / "s.json"
    code, out, err = run(capsys, "stats", "circles", "--n-samples", "400", "--backend", "cpu",
                         "--json", str(path))
    assert code == 0, err
    stats = json.loads(path.read_text())["stats"]
    assert stats["estimated"] is False and stats["n_components"] >= 1


def test_run_on_a_labelled_file(capsys, tmp_path):
    ds = data.load("circles", n_samples=400, random_state=2)
    path = tmp_path / "c.csv"
    rings = np.where(ds.y == 1, "inner", "outer")
    rows = [f"{x:.9g},{y:.9g},{ring}" for (x, y), ring in zip(ds.X, rings, strict=True)]
    path.write_text("u,v,ring\n" + "\n".join(rows) + "\n")
    code, out, err = run(capsys, "run", "--file", str(path), "--label-column", "ring",
                         "--backend", "cpu")
    assert code == 0, err
    assert "c.csv: n=400, d=2, 2 classes" in out and "ARI" in out


def test_datasets_lists_every_name(capsys):
    code, out, _ = run(capsys, "datasets")
    assert code == 0
    for name in data.DATASETS:
        assert name in out


def test_warmup_says_why_it_cannot_compile_without_a_gpu(capsys, monkeypatch):
    from explorer import _backend

    monkeypatch.setattr(_backend, "gpu_status", lambda: (False, "no device here"))
    code, _, err = run(capsys, "warmup", "--clusters", "2")
    assert code == 2 and "no GPU to compile for: no device here" in err


def test_the_server_starts_the_warmup_once_and_not_without_a_gpu(monkeypatch):
    from explorer import _backend, warmup

    monkeypatch.setattr(warmup, "_started", False)
    monkeypatch.setattr(_backend, "gpu_status", lambda: (False, "no device here"))
    started = []
    monkeypatch.setattr(warmup.subprocess, "run", lambda *a, **kw: started.append(a))
    thread = warmup.start_background()
    thread.join(10)
    assert not thread.is_alive() and started == []
    assert warmup.start_background() is None  # once per process


# --- errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "nope"], ["'nope'", "'moons'"]),
        (["run", "moons", "--n-samples", "1"], ["n_samples=1"]),
        (["run", "moons", "--sigma", "-1", "--threshold-sqdist", "0.01"], ["sigma=-1"]),
        (["run", "moons", "--n-samples", "300", "--n-clusters", "0", "--backend", "cpu"],
         ["n_clusters"]),
        (["run", "moons", "-o", "bogus=1"], ["'bogus'", "noise"]),
        (["run", "--file", "/no/such/file.csv"], ["file.csv", "no such file"]),
        (["run", "moons", "--file", "x.csv"], ["exactly one"]),
        (["run"], ["exactly one"]),
        (["run", "moons", "--metric", "uniform", "--threshold-sim", "0.5"], ["threshold"]),
        (["run", "moons", "--method", "warp", "--backend", "cpu"], ["warp"]),
        (["stats", "moons", "--sample-rows", "0", "--backend", "cpu"], ["sample_rows"]),
        (["run", "moons", "--n-clusters", "x"], ["--n-clusters", "'x'"]),
        (["run", "moons", "-o", "novalue"], ["KEY=VALUE"]),
        (["frobnicate"], ["invalid choice"]),
    ],
)
def test_errors_are_one_line_and_exit_2(capsys, argv, words):
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    _, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "Traceback" not in err


def test_console_process_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,4,5\n")
    proc = subprocess.run([sys.executable, "-m", "explorer.cli", "run", "--file", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: bad.csv: ragged rows")
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_console_script_is_installed():
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "spectral-explorer"]
    assert script.value == "explorer.cli:main"
    assert script.load() is cli.main


# --- the documented commands ---------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def test_readme_and_ci_run_the_same_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert 'python -m pip install -e ".[test,notebook]" && python -m pytest\n' in readme
    assert ci[-1] == "python -m pytest"
    assert any(line.startswith('python -m pip install') and '-e ".[test,notebook]"' in line
               for line in ci)


def test_readme_command_lines_parse():
    lines = [line.split("#")[0].strip().removeprefix("$ ")
             for line in (ROOT / "README.md").read_text().splitlines()]
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("spectral-explorer ")]
    assert len(commands) >= 3
    for argv in commands:
        cli.build_parser().parse_args(argv)


# --- compare ------------------------------------------------------------------------


def test_compare_two_parameter_sets_prints_the_differences_and_the_ari(capsys):
    code, out, err = run(capsys, "compare", "moons", "--n-samples", "300",
                         "-a", "affinity=nearest_neighbors", "-b", "affinity=rbf")
    assert code == 0, err
    rows = {line[:13].strip(): line[14:] for line in out.splitlines()}
    assert rows["affinity"] == "A 'nearest_neighbors' → B 'rbf'"
    ari = float(rows["ARI A vs B"])
    assert 0 <= ari < 1 and "points changed cluster" in rows["changed"]
    assert rows["run A"].startswith("ARI 1.0000")
    assert "plan: graph kind A nearest_neighbors" in out


def test_compare_two_json_results(capsys, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, k in ((a, "2"), (b, "3")):
        assert run(capsys, "run", "moons", "--n-samples", "300", "--n-clusters", k,
                   "--json", str(path))[0] == 0
    assert len(json.loads(a.read_text())["labels"]) == 300
    report = tmp_path / "ab.json"
    code, out, err = run(capsys, "compare", "--results", str(a), str(b), "--json", str(report))
    assert code == 0, err
    assert "n_clusters    A 2 → B 3" in out and "clusters      A 2, B 3" in out
    assert re.search(r"ARI A vs B    0\.\d{4}", out) and f"wrote {report}" in out
    doc = json.loads(report.read_text())
    c = doc["comparison"]
    assert doc["command"] == "compare" and doc["data"]["n"] == 300
    assert f"{c['ari']:.4f}" in out and c["n_clusters"] == [2, 3]
    assert c["parameters"]["n_clusters"] == [2, 3] and len(c["labels_b"]) == 300
    assert c["n_changed"] == len(c["changed"]) > 0
    assert doc["runs"]["B"]["scores"]["ari"] < 1 and "environment" in doc
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, nothing left behind
    # The JSON never replaces an input: a result given to --results, or the data file.
    before = a.read_text()
    code, _, err = run(capsys, "compare", "--results", str(a), str(b), "--json", str(a))
    assert code == 2 and f"--json {a} is the result given as --results" in err
    assert a.read_text() == before
    code, _, err = run(capsys, "compare", "--file", str(a), "-a", "sigma=0.1",
                       "--json", str(a))
    assert code == 2 and "is the data file given as --file" in err and a.read_text() == before


def test_compare_errors_name_the_argument(capsys, tmp_path):
    code, _, err = run(capsys, "compare", "moons", "-a", "sigmaa=0.1")
    assert code == 2 and "-a sigmaa=0.1: 'sigmaa' is not a keyword" in err and "sigma," in err
    code, _, err = run(capsys, "compare", "moons", "-b", "n_neighbors=many")
    assert code == 2 and "-b n_neighbors=many: invalid --n-neighbors 'many'" in err
    code, _, err = run(capsys, "compare", "moons")
    assert code == 2 and "compare needs --results" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"command": "stats"}')
    code, _, err = run(capsys, "compare", "--results", str(bad), str(bad))
    assert code == 2 and f"--results {bad}: not a result" in err
