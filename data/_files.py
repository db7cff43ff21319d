"""Reading a data set from a file: CSV, NPY, NPZ or Parquet, with an optional label column.

Every problem is a ``ValueError`` (``FileNotFoundError`` for a missing file) whose
message names the file, says what is wrong and what is allowed. pandas and pyarrow are
imported only for the formats that need them.
"""

from __future__ import annotations

import csv
import io
import itertools
import zipfile
import zlib
from pathlib import Path

import numpy as np

from explorer._validation import check_data

from ._dataset import Dataset

FORMATS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".npy": "npy",
    ".npz": "npz",
    ".parquet": "parquet",
    ".pq": "parquet",
}

#: Lines read to decide the delimiter and whether the first line is a header.
_PEEK_LINES = 100


def read(path, label_column=None) -> Dataset:
    """Read a data set from a file.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.csv`` / ``.tsv`` / ``.txt`` (delimited text), ``.npy``, ``.npz`` or
        ``.parquet`` / ``.pq`` file.
    label_column : str, int or None
        The column holding ground-truth labels (any values: numbers or text), by
        name or by 0-based position (negative counts from the end). For an ``.npz``
        file a name may also be the key of a 1-D label array. None: the file has no
        labels, except that an ``.npz`` file with a ``y`` array uses it.

    Returns
    -------
    Dataset
        X float32 (n, d), y coded ``0 .. k-1`` (original values in ``classes``) or
        None, ``feature_names`` when the file names its columns.

    Raises
    ------
    FileNotFoundError
        If `path` does not exist.
    ValueError
        For an unknown extension, an unreadable or empty file, ragged rows, missing
        values, a non-numeric column other than the label column, an unknown label
        column, or data that is not a finite numeric n×d matrix with n >= 2.

    Notes
    -----
    Text files: the delimiter is detected among ``, ; tab space`` (``.tsv`` is tab),
    and the first line is a header when one of its fields is not a number while the
    field below it is. Lines starting with ``#`` are comments.

    ``.npy``: a 2-D numeric array, or a 1-D structured array whose numeric fields are
    the columns (fields are then named). ``.npz``: the array ``X`` (or ``x``) and,
    when present, ``y``; without ``X``, the first 2-D array in the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(
            f"{path.name}: unknown file type {path.suffix!r}; allowed: "
            f"{', '.join(sorted(FORMATS))}"
        )
    if label_column is not None and (isinstance(label_column, bool)
                                     or not isinstance(label_column, (str, int, np.integer))):
        raise TypeError(
            f"label_column must be a column name (str), a 0-based index (int) or None; "
            f"got {label_column!r} ({type(label_column).__name__})"
        )
    if path.stat().st_size == 0:
        raise ValueError(f"{path.name}: the file is empty")
    reader = {"csv": _read_csv, "npy": _read_npy, "npz": _read_npz, "parquet": _read_parquet}
    X, y, classes, names = reader[kind](path, label_column)
    X = check_data(X, name=path.name)
    if y is not None and len(y) != X.shape[0]:
        raise ValueError(
            f"{path.name}: {len(y)} labels for {X.shape[0]} rows; need one label per row"
        )
    return Dataset(
        X=X,
        y=y,
        name=path.name,
        description=f"{path.name}: {X.shape[0]} rows × {X.shape[1]} features"
        + ("" if y is None else f", {len(classes)} classes"),
        params={"path": str(path), "label_column": label_column},
        classes=classes,
        feature_names=names,
    )


# --- text ---------------------------------------------------------------------------


def _read_csv(path, label_column):
    import pandas as pd

    with open(path, newline="", encoding="utf-8-sig") as fh:
        try:
            head = list(itertools.islice(fh, _PEEK_LINES))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path.name}: not a UTF-8 text file ({exc.reason})") from None
    delimiter = _delimiter(path, head)
    rows = [r for r in csv.reader(io.StringIO("".join(head)), delimiter=delimiter)
            if r and not r[0].lstrip().startswith("#")]
    if not rows:
        raise ValueError(f"{path.name}: no data rows (only blank or comment lines)")
    header = _has_header(rows)
    try:
        frame = pd.read_csv(
            path,
            sep=r"\s+" if delimiter == " " else delimiter,
            header=0 if header else None,
            comment="#",
            # Only an empty field is missing; "nan"/"inf" are numbers (non-finite ones,
            # reported as such) and "NA" is text (a valid label).
            keep_default_na=False,
            na_values=[""],
            skipinitialspace=True,
            skip_blank_lines=True,
            encoding="utf-8-sig",
        )
    except pd.errors.ParserError as exc:
        raise ValueError(
            f"{path.name}: ragged rows ({_parser_detail(exc)}); every row must have the same "
            "number of fields"
        ) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path.name}: no data rows") from None
    if not header:
        frame.columns = list(range(frame.shape[1]))
    return _from_frame(frame, path, label_column)


def _delimiter(path, head):
    if path.suffix.lower() == ".tsv":
        return "\t"
    sample = "".join(line for line in head if not line.lstrip().startswith("#"))
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t ").delimiter
    except csv.Error:
        return ","


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _has_header(rows) -> bool:
    first, rest = rows[0], rows[1:]
    for j, field in enumerate(first):
        if _is_number(field.strip()):
            continue
        if any(j < len(r) and _is_number(r[j].strip()) for r in rest):
            return True
    # No text field sits above a number: data (a file of text columns only is read
    # as data, and its columns are then reported as non-numeric).
    return False


def _parser_detail(exc) -> str:
    text = str(exc).strip()
    return text.split("C error: ", 1)[-1] if "C error: " in text else text


# --- frames (CSV and Parquet) ------------------------------------------------------


def _from_frame(frame, path, label_column):
    import pandas as pd

    if frame.shape[0] == 0:
        raise ValueError(f"{path.name}: no data rows")
    columns = list(frame.columns)
    named = not all(isinstance(c, int) for c in columns)
    y = classes = None
    if label_column is not None:
        j = _column_index(columns, label_column, path, named)
        y, classes = _encode_labels(frame.iloc[:, j], path, columns[j])
        frame = frame.drop(columns=columns[j])
        columns = list(frame.columns)
    if frame.shape[1] == 0:
        raise ValueError(f"{path.name}: no feature columns besides the label column")
    for name in columns:
        col = frame[name]
        missing = col.isna().to_numpy()
        if missing.any():
            bad = int(np.flatnonzero(missing)[0])
            raise ValueError(
                f"{path.name}: column {_col_text(name, named)} has {int(missing.sum())} missing "
                f"value(s) (first at data row {bad + 1}): empty fields, short rows or nulls; "
                "every row needs a number in every column"
            )
        if pd.api.types.is_complex_dtype(col):  # NumPy would drop the imaginary part
            raise ValueError(
                f"{path.name}: column {_col_text(name, named)} is complex ({col.dtype}); "
                "only real numbers are allowed"
            )
        if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
            text = col.astype(str).str.strip()
            numeric = text.map(_is_number).to_numpy(dtype=bool)
            if not numeric.all():
                bad = int(np.flatnonzero(~numeric)[0])
                raise ValueError(
                    f"{path.name}: column {_col_text(name, named)} is not numeric (data row "
                    f"{bad + 1}: {col.iloc[bad]!r}); only the label column may hold text"
                    + ("" if label_column is not None else " (pass label_column to name it)")
                )
            # Numbers pandas kept as text ("nan", "inf"): non-finite, reported as such.
            frame[name] = text.astype(np.float64)
    X = frame.to_numpy(dtype=np.float64)
    names = tuple(str(c) for c in columns) if named else None
    return X, y, classes, names


def _column_index(columns, label_column, path, named) -> int:
    if isinstance(label_column, str):
        if label_column in columns:
            return columns.index(label_column)
        if label_column.lstrip("-").isdigit():  # "3" from a command line
            return _column_index(columns, int(label_column), path, named)
        allowed = ", ".join(repr(str(c)) for c in columns) if named else "none (no header)"
        raise ValueError(
            f"{path.name}: label_column={label_column!r} is not a column; column names: "
            f"{allowed}; or give a 0-based index < {len(columns)}"
        )
    j = int(label_column)
    if not -len(columns) <= j < len(columns):
        raise ValueError(
            f"{path.name}: label_column={j} is out of range; the file has {len(columns)} "
            f"columns (indices 0..{len(columns) - 1}, or negative from the end)"
        )
    return j % len(columns)


def _col_text(name, named) -> str:
    return repr(str(name)) if named else f"{name} (0-based)"


def _encode_labels(values, path, name):
    import pandas as pd

    series = pd.Series(values)
    if series.isna().any():
        bad = int(np.flatnonzero(series.isna().to_numpy())[0])
        raise ValueError(
            f"{path.name}: label column {name!r} has missing labels (first at data row {bad + 1}); "
            "every row needs a label"
        )
    raw = series.to_numpy()
    if raw.dtype == object:
        raw = raw.astype(str)
    classes, y = np.unique(raw, return_inverse=True)
    return y.astype(np.int64).reshape(-1), tuple(classes.tolist())


# --- NumPy --------------------------------------------------------------------------


_MAGIC = {".npy": b"\x93NUMPY", ".npz": b"PK"}  # NumPy header; zip archive


#: What NumPy raises on a damaged file (zip errors for .npz members read lazily).
_UNREADABLE = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)


def _numpy_error(path, exc) -> ValueError:
    if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
        return ValueError(
            f"{path.name}: holds Python objects, which are not loaded (no pickle); save "
            "a numeric array instead"
        )
    return ValueError(f"{path.name}: not a readable NumPy file ({exc})")


def _load_numpy(path):
    magic = _MAGIC[path.suffix.lower()]
    with open(path, "rb") as fh:
        if fh.read(len(magic)) != magic:
            raise ValueError(f"{path.name}: not a readable NumPy file (no {path.suffix} header)")
    try:
        return np.load(path, allow_pickle=False)
    except _UNREADABLE as exc:
        raise _numpy_error(path, exc) from None


def _read_npy(path, label_column):
    import pandas as pd

    array = _load_numpy(path)
    if array.dtype.names is not None:  # structured: fields are columns
        if array.ndim != 1:
            raise ValueError(
                f"{path.name}: a structured array must be 1-D (one record per row); got "
                f"shape {array.shape}"
            )
        frame = pd.DataFrame({name: array[name] for name in array.dtype.names})
        return _from_frame(frame, path, label_column)
    if array.ndim != 2:
        raise ValueError(
            f"{path.name}: needs a 2-D array (rows × features) or a 1-D structured array; "
            f"got a {array.ndim}-D array of shape {array.shape}"
        )
    if label_column is None:
        return array, None, None, None
    if isinstance(label_column, str) and not label_column.lstrip("-").isdigit():
        raise ValueError(
            f"{path.name}: label_column={label_column!r} names a column, but a plain array "
            "has no names; give a 0-based column index"
        )
    frame = pd.DataFrame(array)
    return _from_frame(frame, path, int(label_column))


def _read_npz(path, label_column):
    with _load_numpy(path) as archive:
        keys = list(archive.files)
        try:  # members are read (and can fail) only here
            arrays = {k: archive[k] for k in keys}
        except _UNREADABLE as exc:
            raise _numpy_error(path, exc) from None
    if "X" in arrays or "x" in arrays:
        xkey = "X" if "X" in arrays else "x"
    else:
        two_d = [k for k in keys if arrays[k].ndim == 2]
        if not two_d:
            raise ValueError(
                f"{path.name}: no data array; expected key 'X' or any 2-D array, found "
                + ", ".join(f"{k} {arrays[k].shape}" for k in keys)
            )
        xkey = two_d[0]
    X = arrays[xkey]
    if X.ndim != 2:
        raise ValueError(f"{path.name}: array {xkey!r} must be 2-D; got shape {X.shape}")
    if isinstance(label_column, str) and label_column in arrays and label_column != xkey:
        ykey = label_column
    elif label_column is None and "y" in arrays and xkey != "y":
        ykey = "y"
    elif label_column is None:
        return X, None, None, None
    else:  # a column of X
        import pandas as pd

        return _from_frame(pd.DataFrame(X), path, label_column)
    y = arrays[ykey]
    if y.ndim != 1:
        raise ValueError(f"{path.name}: labels {ykey!r} must be 1-D; got shape {y.shape}")
    if y.dtype.kind not in "biufUS":
        raise ValueError(
            f"{path.name}: labels {ykey!r} have dtype {y.dtype}; allowed: numbers or strings"
        )
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError(f"{path.name}: labels {ykey!r} contain NaN or inf")
    classes, codes = np.unique(y, return_inverse=True)
    return X, codes.astype(np.int64).reshape(-1), tuple(classes.tolist()), None


# --- Parquet ------------------------------------------------------------------------


def _read_parquet(path, label_column):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path.name}: not a readable Parquet file ({exc})") from None
    frame = table.to_pandas()
    frame.columns = [str(c) for c in frame.columns]
    return _from_frame(frame, path, label_column)
