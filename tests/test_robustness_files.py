"""Malformed CSV, NPY, NPZ and Parquet files: ``explorer.data.read`` either returns a
finite float32 n×d matrix (n >= 2, d >= 1) or raises ValueError/TypeError whose message
names the file and the problem, never another exception.

Files are drawn with hypothesis: ragged rows, text columns, NaN/inf, empty fields, empty
files, one row, header typos, wrong label columns, odd dtypes and shapes, truncated files
and binary garbage.
"""

from __future__ import annotations

import io
import re
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import data as datasets
from explorer import memory
from explorer.memory import MemoryEstimateError

HYPOTHESIS = settings(max_examples=50, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])

NAMES = ["x", "y", "z", "label", "class", "target"]

CELLS = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False).map(lambda v: f"{v:.4g}"),
    st.integers(-50, 50).map(str),
    st.sampled_from(["", "nan", "NaN", "inf", "-inf", "abc", "NA", "1e400", "0x10", " 3 ",
                     "1,5", '"2"', "#4", "true"]),
)

LABELS = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from(NAMES),
                   st.sampled_from(["lable", "Class", "targte", "0", "-1", "7", ""]))


def _typo(name: str, how: int) -> str:
    if how == 0 or len(name) < 2:
        return name
    if how == 1:
        return name[::-1]
    if how == 2:
        return name.upper()
    return name[1:] + " "


@st.composite
def csv_texts(draw):
    n_rows = draw(st.integers(0, 6))
    width = draw(st.integers(1, 4))
    rows = []
    for _ in range(n_rows):
        w = width + draw(st.sampled_from([0, 0, 0, -1, 1]))  # now and then ragged
        rows.append([draw(CELLS) for _ in range(max(w, 0))])
    delimiter = draw(st.sampled_from([",", ";", "\t", " "]))
    lines = [delimiter.join(r) for r in rows]
    if draw(st.booleans()):  # a header, maybe with typos and a missing or extra name
        names = [_typo(draw(st.sampled_from(NAMES)), draw(st.integers(0, 3)))
                 for _ in range(width + draw(st.sampled_from([0, 0, -1, 1])))]
        lines.insert(0, delimiter.join(names))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "# a comment")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


ARRAY_DTYPES = ["float32", "float64", "int16", "uint8", "bool", "complex64", "float16",
                "<U3", "S2", "datetime64[s]", "object"]


@st.composite
def arrays(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=3)))
    dtype = draw(st.sampled_from(ARRAY_DTYPES))
    seed = draw(st.integers(0, 2**16))
    a = np.random.default_rng(seed).standard_normal(shape) * 10
    poison = draw(st.sampled_from([None, np.nan, np.inf, -np.inf]))
    if poison is not None and a.size:
        a.flat[seed % a.size] = poison
    if dtype == "object":
        return np.array(a.tolist() if a.ndim else a.item(), dtype=object)
    with np.errstate(invalid="ignore", over="ignore"):
        return a.astype(dtype)


def _structured(draw):
    n = draw(st.integers(0, 4))
    fields = draw(st.lists(st.sampled_from([("a", "f4"), ("b", "i4"), ("label", "U3"),
                                            ("c", "c8"), ("d", "f8")]),
                           min_size=1, max_size=4, unique_by=lambda f: f[0]))
    rec = np.zeros(n, dtype=fields)
    for name, kind in fields:
        if kind == "U3":
            rec[name] = [draw(st.sampled_from(["p", "q", ""])) for _ in range(n)]
        else:
            rec[name] = np.arange(n)
    return rec


def _npy_bytes(a, allow_pickle: bool) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=allow_pickle)
    return buf.getvalue()


def _claiming_npy(shape, descr="<f8", data=b"\0" * 64) -> bytes:
    """A .npy whose header claims `shape` but which holds only `data`."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue() + data


def _npz(members: dict, compression=zipfile.ZIP_DEFLATED) -> bytes:
    """An .npz of raw member bytes (``{"X": npy bytes}``)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as z:
        for key, content in members.items():
            z.writestr(f"{key}.npy", content)
    return buf.getvalue()


def _sub_array_npy() -> bytes:
    a = np.zeros(3, dtype=[("xy", "<f8", (2,)), ("c", "<i4")])
    a["xy"] = [[1, 2], [3, 4], [5, 6]]
    a["c"] = [7, 8, 9]
    return _npy_bytes(a, False)


def _nested_npy() -> bytes:
    inner = np.dtype([("u", "<f4"), ("v", "<f4")])
    return _npy_bytes(np.zeros(3, dtype=[("p", inner), ("c", "<i4")]), False)


@st.composite
def npy_files(draw):
    kind = draw(st.sampled_from(["array", "array", "structured", "truncated", "garbage"]))
    if kind == "garbage":
        return draw(st.binary(min_size=0, max_size=300))
    a = _structured(draw) if kind == "structured" else draw(arrays())
    content = _npy_bytes(a, allow_pickle=a.dtype == object)
    if kind == "truncated":
        return content[: draw(st.integers(0, max(len(content) - 1, 0)))]
    return content


@st.composite
def npz_files(draw):
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(min_size=0, max_size=300))
    keys = draw(st.lists(st.sampled_from(["X", "x", "y", "labels", "data", "extra"]),
                         min_size=0, max_size=3, unique=True))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for key in keys:
            a = draw(arrays())
            zf.writestr(f"{key}.npy", _npy_bytes(a, allow_pickle=a.dtype == object))
    content = buf.getvalue()
    if draw(st.integers(0, 4)) == 0:
        return content[: draw(st.integers(0, max(len(content) - 1, 0)))]
    return content


@st.composite
def parquet_files(draw):
    if draw(st.integers(0, 5)) == 0:
        return draw(st.binary(min_size=0, max_size=300))
    n = draw(st.integers(0, 5))
    columns = {}
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True)):
        kind = draw(st.sampled_from(["float", "int", "text", "nan", "bool", "mixed"]))
        if kind == "float":
            columns[name] = np.linspace(0, 1, n)
        elif kind == "int":
            columns[name] = np.arange(n)
        elif kind == "text":
            columns[name] = [draw(st.sampled_from(["a", "b", "3"])) for _ in range(n)]
        elif kind == "nan":
            columns[name] = [draw(st.sampled_from([1.0, np.nan, np.inf])) for _ in range(n)]
        elif kind == "bool":
            columns[name] = [bool(i % 2) for i in range(n)]
        else:
            columns[name] = pd.array([draw(st.sampled_from([1, None])) for _ in range(n)],
                                     dtype="Int64")
    buf = io.BytesIO()
    pd.DataFrame(columns).to_parquet(buf)
    content = buf.getvalue()
    if draw(st.integers(0, 4)) == 0:
        return content[: draw(st.integers(0, max(len(content) - 1, 0)))]
    return content


def _check_read(name: str, content, label_column) -> None:
    """The property: a valid data set, or ValueError/TypeError naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
        try:
            ds = datasets.read(path, label_column=label_column)
        except (ValueError, TypeError) as exc:
            text = str(exc)
            # The one error that need not name the file: a label_column of a wrong type.
            named = name in text or (isinstance(exc, TypeError) and "label_column" in text)
            assert named, f"the message does not name the file: {text}"
            assert len(text) > len(name) + 10, f"the message says no more than the name: {text}"
            return
    assert ds.X.dtype == np.float32 and ds.X.ndim == 2
    assert ds.n >= 2 and ds.d >= 1 and np.isfinite(ds.X).all()
    if ds.y is not None:
        assert ds.y.shape == (ds.n,) and ds.y.min() >= 0


@HYPOTHESIS
@given(text=csv_texts(), label_column=LABELS,
       suffix=st.sampled_from([".csv", ".tsv", ".txt"]))
def test_malformed_text_files(text, label_column, suffix):
    _check_read("drawn" + suffix, text, label_column)


@HYPOTHESIS
@given(content=npy_files(), label_column=LABELS)
def test_malformed_npy_files(content, label_column):
    _check_read("drawn.npy", content, label_column)


@HYPOTHESIS
@given(content=npz_files(), label_column=LABELS)
def test_malformed_npz_files(content, label_column):
    _check_read("drawn.npz", content, label_column)


@HYPOTHESIS
@given(content=parquet_files(), label_column=LABELS)
def test_malformed_parquet_files(content, label_column):
    _check_read("drawn.parquet", content, label_column)


@HYPOTHESIS
@given(content=st.binary(min_size=1, max_size=400),
       suffix=st.sampled_from([".csv", ".npy", ".npz", ".parquet", ".pq", ".tsv"]))
def test_binary_garbage(content, suffix):
    _check_read("garbage" + suffix, content, None)


#: Files whose exact message is part of the contract (docs/robustness.md lists them).
NAMED = [
    ("empty.csv", "", None, r"empty.csv: the file is empty"),
    ("one-row.csv", "1,2,3\n", None, r"one-row.csv has n=1 samples"),
    ("comments.csv", "# only\n# comments\n", None,
     r"comments.csv: no data rows \(only blank or comment lines\)"),
    ("ragged.csv", "1,2\n3,4\n5,6,7\n", None, r"ragged.csv: ragged rows"),
    ("text.csv", "a,b\n1,x\n2,3\n", None, r"text.csv: column 'b' is not numeric"),
    ("nan.csv", "1,2\nnan,3\n", None, r"nan.csv contains 1 non-finite value"),
    ("missing.csv", "a,b\n1,\n2,3\n", None, r"missing.csv: column 'b' has 1 missing value"),
    ("typo.csv", "x,y,lable\n1,2,a\n3,4,b\n", "label", r"typo.csv: label_column='label' is not "
     r"a column; column names: 'x', 'y', 'lable'"),
    ("wide.csv", "1,2\n3,4\n", 2, r"wide.csv: label_column=2 is out of range; the file has 2"),
    ("only-label.csv", "c\na\nb\n", 0, r"only-label.csv: no feature columns besides the label"),
    # Not UTF-8: decoded in the code page charset-normalizer finds, then judged as text.
    ("latin1.csv", "a,b\n1,\xe9\n".encode("latin-1"), None,
     r"latin1.csv: column 'b' is not numeric \(data row 1: 'é'\)"),
    ("nul.csv", b"1,2\n3,\x004\n", None, r"nul.csv: not a text file \(it holds NUL bytes\)"),
    ("three-d.npy", _npy_bytes(np.zeros((2, 2, 2)), False), None,
     r"three-d.npy: needs a 2-D array .* got a 3-D array of shape \(2, 2, 2\)"),
    ("complex.npy", _npy_bytes(np.ones((3, 2), complex), False), None,
     r"Complex data not supported: complex.npy must be real-valued; got dtype complex128"),
    ("strings.npy", _npy_bytes(np.array([["a", "b"], ["c", "d"]]), False), None,
     r"strings.npy must be numeric; got dtype <U1"),
    ("complex-field.npy", _npy_bytes(np.zeros(3, dtype=[("a", "f4"), ("c", "c8")]), False),
     None, r"complex-field.npy: column 'c' is complex \(complex64\); only real numbers"),
    ("pickle.npy", _npy_bytes(np.array([None, 1], dtype=object), True), None,
     r"pickle.npy: holds Python objects, which are not loaded \(no pickle\)"),
    ("garbage.npy", b"\x93NUMPY\x01\x00garbage", None, r"garbage.npy: not a readable NumPy file"),
    ("no-header.npy", b"just text", None, r"no-header.npy: not a readable NumPy file \(no .npy"),
    ("garbage.parquet", b"PAR1garbagePAR1", None, r"garbage.parquet: not a readable Parquet"),
    # -- issue 15 -------------------------------------------------------------------------
    ("claims.npy", _claiming_npy((10**9, 2)), None,
     r"claims.npy: truncated or damaged: the header claims the array of shape "
     r"\(1000000000, 2\) float64 \(14.9 GiB\), but the file holds only 64 B of data"),
    ("claims.npz", _npz({"X": _claiming_npy((10**9, 2))}), None,
     r"claims.npz: member 'X' of shape \(1000000000, 2\) float64, decompressed needs about "
     r"14.9 GiB, more than the limit on what a compressed file may expand to "
     r"\(EXPLORER_MAX_FILE_BYTES\) of 2 GiB"),
    ("nested.npy", _nested_npy(), None,
     r"nested.npy: field 'p' is itself a structured record; only numeric fields"),
    ("inline-comma.csv", "1,2\n3,4,# note\n5,6\n", None,
     r"inline-comma.csv: ragged rows \(Expected 2 fields in line 2, saw 3\)"),
    ("hash-field.csv", "a,b\n1,#2\n3,4\n", None,
     r"hash-field.csv: column 'b' is not numeric \(data row 1: '#2'\)"),
    ("npz-text-member.npz", _npz({"X": b"not a numpy array"}), None,
     r"npz-text-member.npz: not a readable NumPy file"),
    # -- dialects: refused rather than guessed ------------------------------------------------
    ("mixed-marks.csv", "a;b\n0,5;2.5\n1,5;3.5\n", None,
     r"mixed-marks.csv: the decimal mark is ambiguous: this ';'-separated table has numbers "
     r"with a decimal comma \('0,5'\) and with a decimal point \('2.5'\)"),
    ("thousands-or-decimal.csv", "a;b\n1,234;7\n2,500;8\n", None,
     r"thousands-or-decimal.csv: the decimal mark is ambiguous: every comma .* could be a "
     r"decimal comma or a thousands separator"),
]


@pytest.mark.parametrize("name, content, label_column, match", NAMED, ids=[c[0] for c in NAMED])
def test_named_malformed_files(tmp_path, name, content, label_column, match):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    with pytest.raises((ValueError, TypeError)) as info:
        datasets.read(path, label_column=label_column)
    # non-numeric dtypes are TypeErrors (check_data's), everything else ValueErrors
    # (complex values too: "Complex data not supported", as scikit-learn raises it)
    wanted = TypeError if re.search(r"must be numeric", match) else ValueError
    if re.search(r"needs about", match):  # the memory preflight's own ValueError
        wanted = MemoryEstimateError
    assert type(info.value) is wanted, repr(info.value)
    assert re.search(match, str(info.value)), str(info.value)


#: Files that are read, and what they must give (issue 15: each was misread or refused
#: with a raw error before): (name, content, label_column, X, classes, feature names).
READS = [
    ("cr-only.csv", b"a,b\r1,2\r3,4\r5,6\r", None, [[1, 2], [3, 4], [5, 6]], None, ("a", "b")),
    ("crlf.csv", b"a,b\r\n1,2\r\n3,4\r\n", None, [[1, 2], [3, 4]], None, ("a", "b")),
    ("inline.csv", "1,2 # note\n3,4\n5,6\n", None, [[1, 2], [3, 4], [5, 6]], None, None),
    ("inline-header.csv", "x,y # metres\n1,2  # first\n3,4\n", None, [[1, 2], [3, 4]], None,
     ("x", "y")),
    ("inline.txt", "1 2 # note\n3 4\n5 6\n", None, [[1, 2], [3, 4], [5, 6]], None, None),
    ("hash-labels.csv", "x,y,c\n1,2,#red\n3,4,#blue\n", "c", [[1, 2], [3, 4]],
     ("#blue", "#red"), ("x", "y")),
    ("hash-labels-spaced.csv", "1, 2, #red\n3, 4, #blue\n", 2, [[1, 2], [3, 4]],
     ("#blue", "#red"), None),
    ("sub-array.npy", _sub_array_npy(), None, [[1, 2, 7], [3, 4, 8], [5, 6, 9]], None,
     ("xy[0]", "xy[1]", "c")),
    # -- real files: dialects, and columns that are not measurements ---------------------
    ("german.csv", "x;y\n0,5;-0,25\n1,5;2\n", None, [[0.5, -0.25], [1.5, 2]], None,
     ("x", "y")),
    ("german-thousands.csv", "x;y\n1.234,5;1\n-2,5;2\n", None, [[1234.5, 1], [-2.5, 2]], None,
     ("x", "y")),
    ("savetxt.txt", "   0.500   -0.250\n   1.500    2.000\n", None, [[0.5, -0.25], [1.5, 2]],
     None, None),
    ("savetxt-header.txt", "# x y\n0.500 -0.250\n1.500 2.000\n", None,
     [[0.5, -0.25], [1.5, 2]], None, None),
    ("to-csv-index.csv", ",x,y\n0,0.5,1\n1,1.5,2\n2,2.5,3\n", None,
     [[0.5, 1], [1.5, 2], [2.5, 3]], None, ("x", "y")),
    ("customer-id.csv", "customer_id,income,segment\nC0001,1,a\nC0002,2,b\nC0003,3,a\n",
     "segment", [[1], [2], [3]], ("a", "b"), ("income",)),
    ("dates.csv", "day,v,w\n2024-01-01,1,2\n2024-01-02,3,4\n", None, [[1, 2], [3, 4]], None,
     ("v", "w")),
    ("cp1252.csv", "x;Kunde\n0,5;Müller\n1,5;Göthe\n".encode("cp1252"), "Kunde",
     [[0.5], [1.5]], ("Göthe", "Müller"), ("x",)),
]


@pytest.mark.parametrize("name, content, label_column, X, classes, names", READS,
                         ids=[r[0] for r in READS])
def test_files_that_are_read(tmp_path, name, content, label_column, X, classes, names):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    ds = datasets.read(path, label_column=label_column)
    assert ds.X.tolist() == X
    assert ds.classes == classes
    assert ds.feature_names == names


def test_a_zip_bomb_is_refused_before_it_expands(tmp_path):
    """A small .npz whose member decompresses to far more (issue 15: 4 MB -> 4 GiB took
    the server from 0.3 to 9 GB): refused from the zip directory, nothing decompressed."""
    import resource

    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("X.npy", "w") as fh:
            np.lib.format.write_array_header_1_0(
                fh, {"descr": "<f8", "fortran_order": False, "shape": (2**20, 8)})
            for _ in range(8):
                fh.write(bytes(2**20))
    assert path.stat().st_size < 100_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with memory.file_limit(2**20), pytest.raises(MemoryEstimateError, match=(
            r"bomb.npz: member 'X' decompresses to 8 MiB \(from .* in the archive\), more than "
            r"the limit on what a compressed file may expand to, 1 MiB")):
        datasets.read(path)
    # A member whose header claims less than it holds: only the claim is read.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB
    liar = tmp_path / "liar.npz"
    with zipfile.ZipFile(liar, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("X.npy", "w") as fh:
            np.lib.format.write_array_header_1_0(
                fh, {"descr": "<f8", "fortran_order": False, "shape": (4, 2)})
            fh.write(np.arange(8.0).tobytes() + bytes(2**20))
    assert datasets.read(liar).X.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_one_huge_line_is_refused_with_its_length(tmp_path, monkeypatch):
    from explorer.data import _files

    monkeypatch.setattr(_files, "MAX_LINE_CHARS", 1000)
    path = tmp_path / "one-line.csv"
    path.write_text(",".join(["1.5"] * 1000))
    with pytest.raises(ValueError, match=r"one-line.csv: line 1 is 3,999 characters long, more "
                       r"than the 1,000 a data row may have; a text table has one row per line"):
        datasets.read(path)


def test_a_text_file_too_large_for_memory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 2**10)
    path = tmp_path / "big.csv"
    path.write_text("1,2\n" * 1000)
    with pytest.raises(MemoryEstimateError, match=r"big.csv: parsing this text file of 3.91 "
                       r"KiB \(about 8× its size\) needs about 31.2 KiB, but only 1 KiB of "
                       r"memory is available on this machine; subsample the file"):
        datasets.read(path)


def test_a_file_with_a_large_offset_warns_or_is_centred(tmp_path):
    """Timestamps 1.7e9 + 60 i: float32 keeps ~3 digits of their variation. read()
    warns; read(center=True) (the app) takes the offset off in float64 first."""
    import explorer

    path = tmp_path / "times.csv"
    t = 1.7e9 + 60.0 * np.arange(50)
    path.write_text("t,v\n" + "".join(f"{a:.1f},{i % 3}\n" for i, a in enumerate(t)))
    with pytest.warns(UserWarning, match=r"times.csv has an offset that float32 cannot carry: "
                      r"column 0 lies around 1.7\d*e\+09.*read\(\.\.\., center=True\)"):
        datasets.read(path)
    ds = datasets.read(path, center=True)
    assert ds.params["offset"] == [pytest.approx(1.7e9 + 60 * 24.5), 0.0]
    assert "centred by" in ds.description
    assert np.allclose(np.diff(ds.X[:, 0]), 60.0)
    g = explorer.build_graph(ds.X, metric="uniform", threshold_sqdist=3599.0, backend="cpu")
    assert g.csr.nnz == 2 * int(np.sum(np.diff(np.arange(50) % 3) == 0))  # only the v ties


def message(name, content, label_column) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        if isinstance(content, str):
            path.write_text(content)
        else:
            path.write_bytes(content)
        try:
            datasets.read(path, label_column=label_column)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
    return "(no error)"


if __name__ == "__main__":  # the file rows of docs/robustness.md
    for name, content, label_column, _ in NAMED:
        shown = content if isinstance(content, str) else repr(content[:24])
        shown = shown.replace("\n", "⏎") if isinstance(content, str) else shown
        text = " ".join(message(name, content, label_column).split()).replace("|", "\\|")
        arg = "" if label_column is None else f", label_column={label_column!r}"
        print(f"| library | `data.read('{name}'{arg})` | `{shown}` | {text} |")
    for name, content, label_column, X, classes, names in READS:
        shown = content if isinstance(content, str) else repr(content[:24])
        shown = shown.replace("\n", "⏎") if isinstance(content, str) else shown
        arg = "" if label_column is None else f", label_column={label_column!r}"
        got = f"read: X = {X}" + ("" if classes is None else f", classes {classes}") + (
            "" if names is None else f", columns {names}")
        print(f"| library | `data.read('{name}'{arg})` | `{shown}` | {got} |")
    print(f"<!-- {len(NAMED)} file rows, {len(READS)} files read -->")
