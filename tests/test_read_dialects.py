"""Real files in, right answers out: ``explorer.data.read`` on tables written by pandas,
NumPy and spreadsheets in many dialects, the columns it leaves out, and the limits on
what a file will become.

The property test writes drawn numeric tables through the writers people use
(``DataFrame.to_csv`` with and without its index and header, ``;`` separators with
decimal commas, tabs, ``np.savetxt`` with padded formats and a ``#`` header, Parquet,
NPY, NPZ) and reads them back: the values the file holds, every row, no extra column.
"""

from __future__ import annotations

import re
import resource
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from explorer import data
from explorer.memory import MemoryEstimateError

DIALECTS = ["to_csv", "to_csv_index", "to_csv_no_header", "semicolon_decimal_comma", "tab",
            "savetxt_8.3f", "savetxt_.6e", "savetxt_12.5g", "savetxt_comma", "savetxt_header",
            "parquet", "npy", "npz"]


def _as_written(X, fmt):
    """The float32 values a text file written with `fmt` holds."""
    return np.vectorize(lambda v: float(fmt % v))(X).astype(np.float32).reshape(X.shape)


def _write(path_base, X, dialect):
    """Write `X` in `dialect`; return the path and the values the file holds."""
    names = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    if dialect.startswith("savetxt"):
        fmt = {"savetxt_8.3f": "%8.3f", "savetxt_.6e": "% .6e", "savetxt_12.5g": "%12.5g",
               "savetxt_comma": "%8.3f", "savetxt_header": "%10.4f"}[dialect]
        path = path_base.with_suffix(".txt")
        np.savetxt(path, X, fmt=fmt, delimiter="," if dialect == "savetxt_comma" else " ",
                   header=" ".join(names) if dialect == "savetxt_header" else "")
        return path, _as_written(X, fmt)
    if dialect == "parquet":
        path = path_base.with_suffix(".parquet")
        frame.to_parquet(path)
        return path, X.astype(np.float32)
    if dialect == "npy":
        path = path_base.with_suffix(".npy")
        np.save(path, X)
        return path, X.astype(np.float32)
    if dialect == "npz":
        path = path_base.with_suffix(".npz")
        np.savez_compressed(path, X=X)
        return path, X.astype(np.float32)
    path = path_base.with_suffix(".tsv" if dialect == "tab" else ".csv")
    kwargs = {"index": dialect == "to_csv_index", "float_format": "%.7g"}
    if dialect == "to_csv_no_header":
        kwargs["header"] = False
    if dialect == "semicolon_decimal_comma":
        kwargs.update(sep=";", decimal=",")
    if dialect == "tab":
        kwargs["sep"] = "\t"
    frame.to_csv(path, **kwargs)
    return path, _as_written(X, "%.7g")


TABLES = hnp.arrays(
    np.float64, st.tuples(st.integers(2, 25), st.integers(1, 5)),
    elements=st.one_of(st.floats(-1e4, 1e4, allow_nan=False, allow_subnormal=False),
                       st.integers(-50, 50).map(float)))


@settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(X=TABLES, dialect=st.sampled_from(DIALECTS))
def test_tables_written_in_any_dialect_read_back_equal(tmp_path_factory, X, dialect):
    path, expected = _write(tmp_path_factory.mktemp("dialect") / "table", X, dialect)
    if dialect == "semicolon_decimal_comma":
        text = path.read_text()
        commas = [f for f in re.split(r"[;\n]", text.split("\n", 1)[1]) if "," in f]
        if commas and all(re.fullmatch(r"-?[1-9]\d{0,2}(,\d{3})+", f) for f in commas):
            # Every comma could be a thousands separator ("1,234"): refused, not guessed.
            with pytest.raises(ValueError, match=r"the decimal mark is ambiguous"):
                data.read(path)
            return
    ds = data.read(path)
    assert ds.X.shape == expected.shape, (dialect, path.read_bytes()[:300])
    np.testing.assert_array_equal(ds.X, expected)
    info = ds.params["read"]
    if dialect == "to_csv_index":
        assert list(info["ignored"]) == ["Unnamed: 0"]
    else:
        assert info["ignored"] == {}
    if dialect == "semicolon_decimal_comma":  # one column: no separator to find
        assert info["delimiter"] == (";" if X.shape[1] > 1 else "")
    if dialect in ("to_csv", "to_csv_index", "tab", "parquet"):
        assert ds.feature_names == tuple(f"f{j}" for j in range(X.shape[1]))
    if dialect.startswith("savetxt") or dialect == "to_csv_no_header":
        assert info["header"] is False and ds.feature_names is None


# --- the files of the issue -----------------------------------------------------------


def _issue_points():
    X = np.random.default_rng(0).normal(size=(20, 2)).round(2)
    X[0] = [0.13, -0.13]
    return X


def test_a_german_spreadsheet_csv(tmp_path):
    """';' between fields and ',' as the decimal mark: 20 × 2 values, not one column
    named 'x;y' (the delimiter was sniffed as ',')."""
    X = _issue_points()
    path = tmp_path / "punkte.csv"
    pd.DataFrame(X, columns=["x", "y"]).to_csv(path, sep=";", decimal=",", index=False)
    assert path.read_text().startswith("x;y\n0,13;-0,13\n")
    ds = data.read(path)
    np.testing.assert_array_equal(ds.X, X.astype(np.float32))
    assert ds.feature_names == ("x", "y")
    info = ds.params["read"]
    assert (info["delimiter"], info["decimal"], info["header"]) == (";", ",", True)
    assert data.describe_read(info) == "text, UTF-8, ';'-separated, decimal ',', header row"


def test_a_german_csv_with_thousands_points_and_a_code_page(tmp_path):
    path = tmp_path / "umsatz.csv"
    path.write_bytes("Größe;Wert;Kunde\n1.234,5;2,25;Müller\n10,75;-3,5;Göthe\n"
                     "7,0;1.000,0;Müller\n".encode("cp1252"))
    ds = data.read(path, label_column="Kunde")
    np.testing.assert_array_equal(ds.X, [[1234.5, 2.25], [10.75, -3.5], [7.0, 1000.0]])
    assert ds.classes == ("Göthe", "Müller") and ds.feature_names == ("Größe", "Wert")
    info = ds.params["read"]
    assert (info["decimal"], info["thousands"]) == (",", ".")
    assert info["encoding"] != "utf-8"


@pytest.mark.parametrize("text, match", [
    ("a;b\n0,5;2.5\n1,5;3.5\n", r"decimal comma \('0,5'\) and with a decimal point \('2.5'\)"),
    ("a;b\n1,234;7\n2,500;8\n", r"every comma in this ';'-separated table could be a decimal "
                                r"comma or a thousands separator \('1,234'\)"),
])
def test_an_ambiguous_decimal_mark_is_refused_naming_the_file(tmp_path, text, match):
    path = tmp_path / "mixed.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"^mixed.csv: the decimal mark is ambiguous: .*" + match):
        data.read(path)


@pytest.mark.parametrize("fmt", ["%8.3f", "% .6e", "%12.5g"])
@pytest.mark.parametrize("header", ["", "x y"])
def test_savetxt_keeps_its_first_row(tmp_path, fmt, header):
    X = _issue_points()
    path = tmp_path / "points.txt"
    np.savetxt(path, X, fmt=fmt, header=header)
    ds = data.read(path)
    assert ds.n == 20
    np.testing.assert_array_equal(ds.X, _as_written(X, fmt))
    assert ds.params["read"]["comment_lines"] == (1 if header else 0)


def test_the_index_of_to_csv_is_left_out(tmp_path):
    X = _issue_points()
    path = tmp_path / "frame.csv"
    pd.DataFrame(X, columns=["x", "y"]).to_csv(path)
    ds = data.read(path)
    assert ds.d == 2 and ds.feature_names == ("x", "y")
    assert ds.params["read"]["ignored"] == {
        "Unnamed: 0": "index column: distinct integers under no name or 'index' (a to_csv "
                      "index)"}
    assert ds.params["columns"] == ("Unnamed: 0", "x", "y")
    kept = data.read(path, auto_ignore=False)  # asked for: the index is a feature
    assert kept.d == 3 and kept.params["read"]["ignored"] == {}
    np.testing.assert_array_equal(kept.X[:, 0], np.arange(20))


def _customers(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "customer_id": [f"C{i:04d}" for i in range(n)],
        "income": rng.normal(50_000, 9_000, n).round(2),
        "age": rng.integers(20, 70, n),
        "segment": rng.choice(["gold", "silver", "bronze"], n),
    })


def test_a_text_id_column_is_left_out_and_the_segment_is_the_label(tmp_path):
    frame = _customers()
    path = tmp_path / "customers.csv"
    frame.to_csv(path, index=False)
    for label in ("segment", data.AUTO):
        ds = data.read(path, label_column=label)
        assert ds.feature_names == ("income", "age")
        assert ds.params["label_column"] == "segment"
        assert ds.classes == ("bronze", "gold", "silver")
        assert list(ds.params["read"]["ignored"]) == ["customer_id"]
        np.testing.assert_array_equal(ds.X, frame[["income", "age"]].to_numpy(np.float32))
    with pytest.raises(ValueError, match=r"customers.csv: column 'segment' is not numeric .* "
                       r"\(pass label_column to name it, or ignore_columns to leave it out\)"):
        data.read(path)
    ds = data.read(path, ignore_columns=["segment"])
    assert ds.d == 2 and ds.params["read"]["ignored"] == {
        "customer_id": "text ID: every value distinct, under an ID-like name",
        "segment": "ignore_columns"}
    # Under a name that says nothing, codes such as C0001 are still an ID.
    frame.rename(columns={"customer_id": "who"}).to_parquet(tmp_path / "c.parquet")
    ds = data.read(tmp_path / "c.parquet", label_column="auto")
    assert ds.params["read"]["ignored"] == {
        "who": "text ID: every value a distinct code such as 'C0000'"}


def test_date_and_numeric_id_columns_are_left_out(tmp_path):
    frame = _customers()
    frame.insert(0, "id", np.arange(1000, 1000 + len(frame)))
    frame["signed_up"] = pd.date_range("2024-01-01", periods=len(frame)).strftime("%d.%m.%Y")
    frame.to_csv(tmp_path / "c.csv", index=False)
    ds = data.read(tmp_path / "c.csv", label_column="segment")
    assert ds.feature_names == ("income", "age")
    assert ds.params["read"]["ignored"] == {
        "id": "ID column: distinct integers under an ID-like name",
        "customer_id": "text ID: every value distinct, under an ID-like name",
        "signed_up": "dates"}
    frame["signed_up"] = pd.date_range("2024-01-01", periods=len(frame))
    frame.to_parquet(tmp_path / "c.parquet")
    ds = data.read(tmp_path / "c.parquet", label_column="segment")
    assert ds.params["read"]["ignored"]["signed_up"] == "dates"
    assert ds.feature_names == ("income", "age")


def test_ignore_columns_by_name_and_position_and_its_errors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b,c,label\n1,2,3,x\n4,5,6,y\n7,8,9,x\n")
    assert data.read(path, ignore_columns=["b"], label_column="label").feature_names == ("a", "c")
    assert data.read(path, ignore_columns=[0, "-2"], label_column=3).feature_names == ("b",)
    assert data.read(path, ignore_columns="c", label_column="auto").feature_names == ("a", "b")
    with pytest.raises(ValueError, match=r"t.csv: ignore_columns='z' is not a column; column "
                       r"names: 'a', 'b', 'c', 'label'"):
        data.read(path, ignore_columns=["z"], label_column="label")
    with pytest.raises(ValueError, match=r"t.csv: column 'label' is both the label column and "
                       r"in ignore_columns; choose one"):
        data.read(path, ignore_columns=["label"], label_column="label")
    with pytest.raises(TypeError, match=r"ignore_columns must hold column names \(str\) or "
                       r"0-based indices \(int\); got 1.5"):
        data.read(path, ignore_columns=[1.5])
    with pytest.raises(ValueError, match=r"t.csv: no feature columns besides the label column "
                       r"and the ignored columns"):
        data.read(path, ignore_columns=["a", "b", "c"], label_column="label")
    np.save(tmp_path / "x.npy", np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(data.read(tmp_path / "x.npy", ignore_columns=[1]).X,
                                  [[0, 2], [3, 5], [6, 8], [9, 11]])


def test_a_wide_csv_reads_fast(tmp_path):
    """3 rows × 300,000 columns (1.7 MiB): one NumPy pass, not a frame of 300,000
    columns checked one by one (15 s before)."""
    X = np.random.default_rng(0).random((3, 300_000))
    path = tmp_path / "wide.csv"
    np.savetxt(path, X, fmt="%.3f", delimiter=",")
    start = time.perf_counter()
    ds = data.read(path)
    seconds = time.perf_counter() - start
    assert ds.X.shape == (3, 300_000) and ds.params["read"]["parser"] == "numpy"
    np.testing.assert_array_equal(ds.X, _as_written(X, "%.3f"))
    assert seconds < 3.0, seconds
    # With a header and a label column, the same pass.
    names = ",".join(f"c{j}" for j in range(300_000))
    path.write_text(names + ",label\n" + "\n".join(
        ",".join(f"{v:.3f}" for v in row) + f",{k % 2}" for k, row in enumerate(X)) + "\n")
    ds = data.read(path, label_column="label")
    assert ds.X.shape == (3, 300_000) and ds.classes == (0, 1)
    assert ds.feature_names[:2] == ("c0", "c1") and ds.params["read"]["parser"] == "numpy"


# --- limits on what a file will become ------------------------------------------------


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_a_parquet_that_lies_about_its_size_is_refused_before_reading(tmp_path):
    """A constant column, run-length encoded: a few KiB on disk, and the metadata's own
    sizes (of the encoded pages) are as small; decoded it is 8 bytes a row."""
    import pyarrow.parquet as pq

    path = tmp_path / "constant.parquet"
    rows = 4_000_000
    pd.DataFrame({"a": np.zeros(rows), "b": np.ones(rows)}).to_parquet(path)
    meta = pq.ParquetFile(path).metadata
    encoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    assert path.stat().st_size < 200_000 and encoded < 2**20  # what the old check saw
    before = _rss_kib()
    with pytest.raises(MemoryEstimateError, match=(
            r"^constant.parquet: 4,000,000 rows × 2 columns, decoded needs about 61 MiB, "
            r"more than max_bytes of 16 MiB; subsample the data before saving it")):
        data.read(path, max_bytes=16 * 2**20)
    assert _rss_kib() - before < 20_000  # nothing decoded
    assert data.read(path, max_bytes=64 * 2**20).params["read"]["decoded_bytes"] == 16 * rows


def test_an_npz_that_lies_about_its_size_is_refused_before_reading(tmp_path):
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, X=np.zeros((2_000_000, 4)))
    assert path.stat().st_size < 200_000
    before = _rss_kib()
    with pytest.raises(MemoryEstimateError, match=(
            r"^zeros.npz: member 'X' decompresses to 61 MiB \(from .* in the archive\), more "
            r"than max_bytes, 16 MiB")):
        data.read(path, max_bytes=16 * 2**20)
    assert _rss_kib() - before < 20_000


def test_a_npy_and_a_csv_over_the_limit_are_refused_before_reading(tmp_path):
    np.save(tmp_path / "big.npy", np.zeros((1000, 100)))
    with pytest.raises(MemoryEstimateError, match=(
            r"^big.npy: the array of shape \(1000, 100\) float64, loaded needs about 781 KiB, "
            r"more than max_bytes of 512 KiB")):
        data.read(tmp_path / "big.npy", max_bytes=2**19)
    # Two bytes of text ("0,") become an 8-byte float: the text says how many.
    path = tmp_path / "zeros.csv"
    path.write_text(("0," * 999 + "0\n") * 200)
    with pytest.raises(MemoryEstimateError, match=(
            r"^zeros.csv: 200 rows × 1,000 columns of text, parsed to float64 needs about "
            r"1.53 MiB, more than max_bytes of 1 MiB; subsample the file")):
        data.read(path, max_bytes=2**20)
    assert data.read(path, max_bytes=2**21).X.shape == (200, 1000)


def test_messages_name_the_file_by_the_name_given(tmp_path):
    path = tmp_path / "upload.csv"
    path.write_text("a,b\n1,x\n2,3\n")
    with pytest.raises(ValueError) as info:
        data.read(path, name="Kundenübersicht 2024 (final).csv")
    assert str(info.value).startswith("Kundenübersicht 2024 (final).csv: column 'b' is not "
                                      "numeric")
    path.write_text("a,b\n1,2\n3,4\n")
    assert data.read(path, name="mine.csv").name == "mine.csv"
    with pytest.raises(ValueError, match=r"max_bytes must be a positive integer"):
        data.read(path, max_bytes=0)


# --- the command line -------------------------------------------------------------------


def _cli(capsys, *argv):
    from explorer import cli

    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own refusals (the CLI's one-line format)
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_refuses_a_json_path_that_is_the_data_file(capsys, tmp_path):
    path = tmp_path / "pts.csv"
    pd.DataFrame(_issue_points(), columns=["x", "y"]).to_csv(path, index=False)
    before = path.read_bytes()
    for json_arg in (path, tmp_path / "." / "pts.csv"):
        code, out, err = _cli(capsys, "run", "--file", path, "--json", json_arg,
                              "--backend", "cpu")
        assert code == 2
        assert err.startswith(f"error: --json {json_arg} is the data file given as --file; the "
                              "result would replace the data: give the JSON another path")
        assert path.read_bytes() == before


def test_cli_ignore_columns_prints_what_was_read_and_writes_json_atomically(capsys, tmp_path):
    path = tmp_path / "customers.csv"
    frame = _customers()
    frame.insert(2, "noise", np.random.default_rng(1).normal(size=len(frame)))
    frame.to_csv(path, index=False)
    out_json = tmp_path / "result.json"
    out_json.write_text("old")
    code, out, err = _cli(capsys, "stats", "--file", path, "--label-column", "segment",
                          "--ignore-columns", "noise", "--backend", "cpu", "--json", out_json)
    assert code == 0, err
    assert ("read          text, UTF-8, ','-separated, header row; ignored: 'customer_id' (text "
            "ID: every value distinct, under an ID-like name); 'noise' (ignore_columns)") in out
    import json

    result = json.loads(out_json.read_text())
    assert result["data"]["d"] == 2
    assert result["data"]["params"]["read"]["ignored"]["noise"] == "ignore_columns"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["customers.csv", "result.json"]
    code, out, err = _cli(capsys, "stats", "--file", path, "--ignore-columns", "a,,b")
    assert code == 2 and "give column names or 0-based indices separated by commas" in err
    code, out, err = _cli(capsys, "stats", "moons", "--ignore-columns", "0")
    assert code == 2 and "--ignore-columns applies to --file only" in err


def test_cli_json_that_cannot_be_written_leaves_nothing_behind(capsys, tmp_path):
    """The JSON is written beside its target and renamed over it: when the rename fails
    (the target is a folder), the temporary file goes too."""
    path = tmp_path / "pts.csv"
    pd.DataFrame(_issue_points(), columns=["x", "y"]).to_csv(path, index=False)
    target = tmp_path / "r.json"
    target.mkdir()
    code, out, err = _cli(capsys, "stats", "--file", path, "--backend", "cpu", "--json", target)
    assert code == 2 and f"error: --json {target}: cannot write" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pts.csv", "r.json"]
    assert list(target.iterdir()) == []
