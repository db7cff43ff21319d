"""Every bad input to the ``spectral-explorer`` command ends with one line ``error: ...``
on stderr and exit status 2, never a traceback.

:data:`CASES` is the table (what is wrong, the arguments, a regex of the message);
``{dir}`` in an argument is a folder holding the files of :data:`FILES`.
``python tests/test_robustness_cli.py`` prints the table with the messages the command
really gives (docs/robustness.md is made from it).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from explorer import cli
from explorer._backend import gpu_status

REPO = Path(__file__).resolve().parents[1]

#: Malformed (and one well-formed) input files, by name.
FILES = {
    "good.csv": "a,b,class\n0.1,0.2,x\n0.3,0.1,y\n0.5,0.9,x\n0.7,0.4,y\n",
    "short-row.csv": "1,2,3\n4,5\n6,7,8\n",
    "long-row.csv": "1,2\n3,4\n5,6,7\n8,9\n",
    "text.csv": "a,b\n1,2\n3,abc\n5,6\n",
    "nan.csv": "a,b\n1,2\nnan,4\n5,6\n",
    "inf.csv": "1,2\n3,inf\n5,6\n",
    "empty.csv": "",
    "header-only.csv": "a,b,c\n",
    "one-row.csv": "1,2,3\n",
    "garbage.npy": bytes(range(256)) * 4,
    "garbage.parquet": b"PAR1" + bytes(200),
    "object.npy": None,  # written by _write_files: an object array (pickle)
    "data.xlsx": b"PK\x03\x04not a spreadsheet",
    "claims.npy": "claims",  # written by _write_files: a header claiming (10**9, 2)
    "claims.npz": "claims",  # the same, as an .npz member
    "folder.csv": "dir",  # a directory
}

SMALL = ["--n-samples", "100", "--backend", "cpu"]

#: (what is wrong, arguments, regex the message must match)
CASES = [
    ("n_samples = 1", ["stats", "moons", "--n-samples", "1"],
     r"n_samples=1 is out of range; allowed: \[2, inf\]"),
    ("n_samples not a number", ["stats", "moons", "--n-samples", "abc"],
     r"argument --n-samples: invalid int value: 'abc'"),
    ("unknown data set", ["stats", "mnist"], r"name='mnist' is not a built-in data set"),
    ("no data given", ["stats"], r"give a built-in data set name or --file PATH \(exactly one\)"),
    ("both a data set and --file", ["stats", "moons", "--file", "{dir}/good.csv"],
     r"give a built-in data set name or --file PATH \(exactly one\)"),
    ("unknown generator option", ["stats", "moons", *SMALL, "-o", "nois=0.1"],
     r"moons has no option 'nois'; its options: noise"),
    ("generator option not KEY=VALUE", ["stats", "moons", "-o", "noise"],
     r"invalid --option 'noise': use KEY=VALUE"),
    ("generator option out of range", ["stats", "moons", *SMALL, "-o", "noise=-1"],
     r"noise"),
    ("--label-column with a built-in set", ["stats", "moons", "--label-column", "0"],
     r"--label-column applies to --file only"),
    ("sigma = 0", ["stats", "moons", *SMALL, "--sigma", "0"],
     r"sigma=0.0 is out of range; allowed: \(0.0, inf\]"),
    ("sigma < 0", ["stats", "moons", *SMALL, "--sigma", "-0.5"], r"sigma=-0.5 is out of range"),
    ("threshold_sqdist = 0", ["stats", "moons", *SMALL, "--threshold-sqdist", "0"],
     r"threshold_sqdist=0.0 is out of range"),
    ("threshold_sqdist = nan", ["stats", "moons", *SMALL, "--threshold-sqdist", "nan"],
     r"threshold_sqdist=nan is out of range"),
    ("cosine threshold_sim = 1.5",
     ["stats", "moons", *SMALL, "--metric", "cosine", "--threshold-sim", "1.5"],
     r"threshold_sim=1.5 is out of range; allowed: \[-1.0, 1.0\)"),
    ("both thresholds",
     ["stats", "moons", *SMALL, "--threshold-sqdist", "0.1", "--threshold-sim", "0.5"],
     r"give exactly one of threshold_sqdist and threshold_sim; got both"),
    ("metric without a threshold of its kind",
     ["stats", "moons", *SMALL, "--metric", "cosine", "--threshold-sqdist", "0.1"],
     r"metric='cosine' takes threshold_sim"),
    ("unknown metric", ["stats", "moons", *SMALL, "--metric", "manhattan",
                        "--threshold-sqdist", "0.1"],
     r"metric='manhattan' is not allowed; use one of 'auto', 'gaussian', 'cosine', 'uniform'"),
    ("hypo_max_nnz_row = 0", ["stats", "moons", *SMALL, "--hypo-max-nnz-row", "0"],
     r"hypo_max_nnz_row=0 is out of range; allowed: \[1, inf\]"),
    ("sample_rows = 0", ["stats", "moons", *SMALL, "--sample-rows", "0"],
     r"sample_rows=0 is out of range"),
    ("sp_max_nz_pct = 0", ["run", "moons", *SMALL, "--sp-max-nz-pct", "0"],
     r"sp_max_nz_pct=0.0 is out of range; allowed: \(0.0, 100.0\]"),
    ("sp_max_nz_pct = 150", ["run", "moons", *SMALL, "--sp-max-nz-pct", "150"],
     r"sp_max_nz_pct=150.0 is out of range"),
    ("mem_use_rate = 0", ["run", "moons", *SMALL, "--mem-use-rate", "0"],
     r"mem_use_rate=0.0 is out of range; allowed: \(0.0, 1.0\]"),
    ("mem_use_rate = 1.5", ["run", "moons", *SMALL, "--mem-use-rate", "1.5"],
     r"mem_use_rate=1.5 is out of range"),
    ("unknown method", ["run", "moons", *SMALL, "--method", "fastest"],
     r"method='fastest' is not allowed for backend='cpu'"),
    ("GPU method on the CPU", ["run", "moons", *SMALL, "--method", "csr3"],
     r"method='csr3' runs on the GPU backend only"),
    ("unknown backend", ["stats", "moons", "--backend", "tpu"],
     r"backend='tpu' is not allowed; use one of 'auto', 'gpu', 'cpu'"),
    ("n_clusters = 0", ["run", "moons", *SMALL, "--n-clusters", "0"],
     r"n_clusters=0 is out of range; allowed: \[1, inf\]"),
    ("n_clusters > n", ["run", "moons", *SMALL, "--n-clusters", "101"],
     r"n_clusters=101 is out of range: only \d+ of the n=100 points have an edge"),
    ("n_clusters not a number", ["run", "moons", "--n-clusters", "many"],
     r"invalid --n-clusters 'many': use an integer or 'auto'"),
    ("no edge at all", ["run", "moons", *SMALL, "--threshold-sqdist", "1e-12"],
     r"the graph has no edge: all n=100 points are isolated"),
    ("unknown eigensolver", ["run", "moons", *SMALL, "--eigen-solver", "eigh"],
     r"eigen_solver='eigh' is not allowed"),
    ("eigen_tol = 0", ["run", "moons", *SMALL, "--eigen-tol", "0"],
     r"eigen_tol=0.0 is out of range"),
    ("eigensolver does not converge",
     ["run", "moons", *SMALL, "--n-clusters", "3", "--eigen-solver", "lanczos",
      "--eigen-max-iter", "1"],
     r"Lanczos \(ARPACK\) did not converge.*raise max_iter"),
    ("n_init = 0", ["run", "moons", *SMALL, "--n-init", "0"], r"n_init=0 is out of range"),
    ("--json into a missing folder",
     ["stats", "moons", *SMALL, "--json", "{dir}/no/such/folder/out.json"],
     r"--json .*out.json: cannot write \(No such file or directory\)"),
    ("missing file", ["stats", "--file", "{dir}/missing.csv"], r"missing.csv: no such file"),
    ("CSV row with a field too many", ["stats", "--file", "{dir}/long-row.csv"],
     r"long-row.csv: ragged rows \(Expected 2 fields in line 3, saw 3\); every row must "
     r"have the same number of fields"),
    ("CSV row with a field too few", ["stats", "--file", "{dir}/short-row.csv"],
     r"short-row.csv: column 2 \(0-based\) has 1 missing value\(s\) \(first at data row 2\)"),
    ("text in a feature column", ["stats", "--file", "{dir}/text.csv"],
     r"text.csv: column 'b' is not numeric \(data row 2: 'abc'\)"),
    ("NaN in a CSV", ["stats", "--file", "{dir}/nan.csv"],
     r"nan.csv contains 1 non-finite value\(s\)"),
    ("inf in a CSV", ["stats", "--file", "{dir}/inf.csv"],
     r"inf.csv contains 1 non-finite value\(s\)"),
    ("empty file", ["stats", "--file", "{dir}/empty.csv"], r"empty.csv: the file is empty"),
    ("header only", ["stats", "--file", "{dir}/header-only.csv"],
     r"header-only.csv: column 0 \(0-based\) is not numeric \(data row 1: 'a'\)"),
    ("one row", ["stats", "--file", "{dir}/one-row.csv"],
     r"one-row.csv has n=1 samples .*need n >= 2"),
    ("binary garbage as .npy", ["stats", "--file", "{dir}/garbage.npy"],
     r"garbage.npy: not a readable NumPy file"),
    ("binary garbage as .parquet", ["stats", "--file", "{dir}/garbage.parquet"],
     r"garbage.parquet: not a readable Parquet file"),
    ("object array (pickle) in .npy", ["stats", "--file", "{dir}/object.npy"],
     r"object.npy: holds Python objects, which are not loaded \(no pickle\)"),
    ("unknown file type", ["stats", "--file", "{dir}/data.xlsx"],
     r"data.xlsx: unknown file type '.xlsx'; allowed: .csv"),
    ("label column not in the file",
     ["stats", "--file", "{dir}/good.csv", "--label-column", "target"],
     r"good.csv: label_column='target' is not a column; column names: 'a', 'b', 'class'"),
    ("text column without --label-column", ["stats", "--file", "{dir}/good.csv"],
     r"good.csv: column 'class' is not numeric .*pass label_column to name it"),
    # -- issue 15 --------------------------------------------------------------------------
    ("sigma = 1e-200 (2σ² underflows)", ["stats", "moons", *SMALL, "--sigma", "1e-200",
                                         "--threshold-sqdist", "0.01"],
     r"sigma=1e-200 is out of range: 2σ² = 0 underflows float32"),
    ("sigma = 1e200 (2σ² overflows)", ["run", "moons", *SMALL, "--sigma", "1e200",
                                       "--threshold-sqdist", "0.01"],
     r"sigma=1e\+200 is out of range: 2σ² = inf overflows float32"),
    ("sigma = 1e-30", ["run", "moons", *SMALL, "--sigma", "1e-30", "--threshold-sqdist", "0.01"],
     r"sigma=1e-30 is out of range"),
    ("every edge's weight underflows", ["run", "moons", *SMALL, "--sigma", "1e-6",
                                        "--threshold-sqdist", "0.01"],
     r"every one of the graph's \d+ edges has weight 0: .* raise sigma"),
    ("threshold_sqdist = 1e39", ["stats", "moons", *SMALL, "--threshold-sqdist", "1e39"],
     r"threshold_sqdist=1e\+39 is out of range: beyond float32's normal range"),
    ("threshold_sqdist = 1e400 (inf)", ["stats", "moons", *SMALL, "--threshold-sqdist", "1e400"],
     r"threshold_sqdist=inf is out of range"),
    ("random_state = -1", ["run", "moons", *SMALL, "--random-state", "-1"],
     r"random_state=-1 is out of range; allowed: \[0, 4294967295\]"),
    ("random_state = 2**40", ["run", "moons", *SMALL, "--random-state", str(2**40)],
     r"random_state=1099511627776 is out of range"),
    ("n_init = 10**9", ["run", "moons", *SMALL, "--n-init", "1000000000"],
     r"n_init=1000000000 is above the practical limit 1,000"),
    ("hypo_max_nnz_row = 2**70", ["stats", "moons", *SMALL, "--hypo-max-nnz-row", str(2**70)],
     r"hypo_max_nnz_row=~1e\+21 is above the practical limit"),
    ("generated data too large for memory", ["stats", "infinite-digits", "--n-samples",
                                              str(10**11)],
     r"generating infinite-digits with n_samples=100000000000 .* needs about .*, but only .* "
     r"of memory is available on this machine; lower n_samples"),
    (".npy whose header claims (10⁹, 2)", ["stats", "--file", "{dir}/claims.npy"],
     r"claims.npy: truncated or damaged: the header claims the array of shape "
     r"\(1000000000, 2\) float64 \(14.9 GiB\)"),
    (".npz member claiming 15 GiB", ["stats", "--file", "{dir}/claims.npz"],
     r"claims.npz: member 'X' of shape \(1000000000, 2\) float64, decompressed needs about "
     r"14.9 GiB, more than the limit on what a compressed file may expand to"),
    ("a directory as --file", ["stats", "--file", "{dir}/folder.csv"],
     r"folder.csv: is a directory, not a data file"),
    ("/dev/zero as --file", ["stats", "--file", "/dev/zero"],
     r"/dev/zero: is a character device, not a data file"),
    # -- real files (delimiters, ID columns, outputs) ----------------------------------------
    ("--json the same path as --file", ["run", "--file", "{dir}/good.csv", "--json",
                                         "{dir}/good.csv"],
     r"--json .*good.csv is the data file given as --file; the result would replace the "
     r"data: give the JSON another path"),
    ("--ignore-columns naming no column", ["stats", "--file", "{dir}/good.csv",
                                           "--label-column", "class", "--ignore-columns", "c"],
     r"good.csv: ignore_columns='c' is not a column; column names: 'a', 'b', 'class'"),
    ("--ignore-columns with the label column", ["stats", "--file", "{dir}/good.csv",
                                                "--label-column", "class",
                                                "--ignore-columns", "class"],
     r"good.csv: column 'class' is both the label column and in ignore_columns"),
]

if not gpu_status()[0]:
    CASES.append(("backend gpu without a GPU", ["stats", "moons", "--backend", "gpu"],
                  r"backend='gpu' was asked for but no GPU can be used: "))


def _write_files(folder: Path) -> None:
    for name, content in FILES.items():
        path = folder / name
        if content is None:
            np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
        elif content == "dir":
            path.mkdir()
        elif content == "claims":
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                header, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 2)})
            npy = header.getvalue() + bytes(64)
            if path.suffix == ".npy":
                path.write_bytes(npy)
            else:
                with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
                    z.writestr("X.npy", npy)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-files")
    _write_files(path)
    return path


def invoke(argv, folder: Path) -> tuple[int, str, str]:
    """Run ``cli.main`` in this process: (exit status, stdout, stderr)."""
    argv = [a.replace("{dir}", str(folder)) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse's own errors exit through SystemExit
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("bad, argv, match", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_error_line_and_status_2(folder, bad, argv, match):
    code, _, err = invoke(argv, folder)
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    assert re.search(match, lines[0]), lines[0]


def test_the_table_is_large_enough():
    assert len(CASES) >= 25


@pytest.mark.parametrize("bad, argv, match", [CASES[i] for i in (0, 26, 32, 38)],
                         ids=[CASES[i][0] for i in (0, 26, 32, 38)])
def test_the_installed_command_behaves_the_same(folder, bad, argv, match):
    """The real process (``python -m explorer.cli``): status 2, one line, no traceback."""
    argv = [a.replace("{dir}", str(folder)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "explorer.cli", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert re.search(match, proc.stderr), proc.stderr


if __name__ == "__main__":  # the CLI rows of docs/robustness.md, from the command itself
    with tempfile.TemporaryDirectory() as tmp:
        _write_files(Path(tmp))
        for bad, argv, _ in CASES:
            code, _, err = invoke(argv, Path(tmp))
            line = " ".join(err.strip().splitlines()[-1].split()).replace(tmp, "DIR")
            shown = shlex.join(a.replace("{dir}", "DIR") for a in argv)
            print(f"| CLI | `spectral-explorer {shown}` | {bad} | exit {code}: "
                  f"{line.replace('|', chr(92) + '|')} |")
    print(f"<!-- {len(CASES)} CLI rows -->")
