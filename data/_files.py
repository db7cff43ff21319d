"""Reading a data set from a file: CSV, NPY, NPZ or Parquet, with an optional label column.

Every problem is a ``ValueError`` (``FileNotFoundError`` for a missing file) whose
message names the file, says what is wrong and what is allowed. pandas and pyarrow are
imported only for the formats that need them.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

from explorer import memory
from explorer._validation import check_data, column_offsets

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

#: ``label_column="auto"``: take the label column from the file (see :func:`read`).
AUTO = "auto"

#: Column names taken as labels under ``label_column="auto"`` (compared without case
#: and surrounding spaces), in this order of preference.
LABEL_NAMES = ("label", "labels", "class", "classes", "target", "cluster", "truth", "y_true",
               "species", "category")

#: Lines read to decide the delimiter and whether the first line is a header.
_PEEK_LINES = 100

#: Longest line a text file may have (characters): a data file has one row per line,
#: and pandas takes ~20 bytes per field of a single huge line (a 200 MB one-line CSV
#: took 3.8 GB). 8 Mi characters hold ~500,000 numeric fields.
MAX_LINE_CHARS = 8 * 2**20

#: Peak bytes per byte of a text file while pandas parses it (the text, the tokens,
#: the float64 columns and the frame's copy), and of a Parquet file (decompressed
#: columns, the Arrow table and the pandas frame).
CSV_BYTES_FACTOR = 8
PARQUET_BYTES_FACTOR = 16

#: Peak bytes of a loaded NumPy array per byte of its contents: the array, its float64
#: copy and the float32 result.
NUMPY_BYTES_FACTOR = 3


def format_name(kind: str) -> str:
    return {"csv": "text", "parquet": "Parquet", "npy": "NumPy", "npz": "NPZ"}[kind]


def _check_regular_file(path: Path) -> None:
    """FileNotFoundError for a missing path, ValueError for a directory, a FIFO, a
    device or a socket (reading one would block, never end or is meaningless)."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISREG(mode):
        return
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    what = next((text for test, text in kinds if test(mode)), "not a regular file")
    raise ValueError(f"{path}: is {what}, not a data file; give the path of a regular file")


def read(path, label_column=None, *, center=False) -> Dataset:
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
        ``"auto"`` (:data:`AUTO`; a column of that name, if there is one, is taken by
        name): a column whose name is one of :data:`LABEL_NAMES` when the table has
        another column; else the table's only non-numeric column (text labels such as
        ``setosa``) when it has exactly one and another column; else as None.

    Returns
    -------
    Dataset
        X float32 (n, d), y coded ``0 .. k-1`` (original values in ``classes``: the
        class names as the file wrote them) or None, ``feature_names`` when the file
        names its columns. ``params["columns"]`` lists every column of the table in
        file order, the label column included: names when the file has them, else
        0-based positions (either can be passed back as `label_column`), so that a
        UI can offer the label column by name; ``params["label_column"]`` is the
        column the labels came from (its name, position or ``.npz`` key) or None.

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
    _check_regular_file(path)
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
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{path.name}: the file is empty")
    if kind == "csv":  # parsed whole: memory proportional to the file
        memory.check_allocation(
            size * CSV_BYTES_FACTOR, f"{path.name}: parsing this text file of "
            f"{memory.format_bytes(size)} (about {CSV_BYTES_FACTOR}× its size)",
            "subsample the file, or save it as .npy (read without parsing)",
        )
    reader = {"csv": _read_csv, "npy": _read_npy, "npz": _read_npz, "parquet": _read_parquet}
    X, y, classes, names, columns, used = reader[kind](path, label_column)
    offset = column_offsets(X) if center else None
    X = check_data(X, name=path.name, center=True if center else None)
    if y is not None and len(y) != X.shape[0]:
        raise ValueError(
            f"{path.name}: {len(y)} labels for {X.shape[0]} rows; need one label per row"
        )
    return Dataset(
        X=X,
        y=y,
        name=path.name,
        description=f"{path.name}: {X.shape[0]} rows × {X.shape[1]} features"
        + ("" if y is None else f", {len(classes)} classes")
        + ("" if offset is None else "; centred by "
           + ", ".join(f"{v:.6g}" for v in np.asarray(offset).tolist()))
        + ("" if offset is None else " (float32 could not carry the offset)"),
        params={"path": str(path), "label_column": used, "columns": columns,
                **({} if offset is None else {"offset": np.asarray(offset).tolist()})},
        classes=classes,
        feature_names=names,
    )


# --- text ---------------------------------------------------------------------------


def _read_csv(path, label_column):
    import pandas as pd

    text = _read_text(path)
    # Comments are whole lines starting with '#'; they become blank lines (skipped), so
    # the line numbers of messages stay the file's. A '#' anywhere else is data (a
    # label "#red"); an inline comment ("1,2 # note") is reported as text in a column.
    lines = text.split("\n")
    if len(text) > MAX_LINE_CHARS:
        lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        if lengths.max() > MAX_LINE_CHARS:
            number = int(lengths.argmax())
            raise ValueError(
                f"{path.name}: line {number + 1} is {int(lengths[number]):,} characters long, "
                f"more than the {MAX_LINE_CHARS:,} a data row may have; a text table has one "
                "row per line (is it one huge line?)"
            )
    lines = ["" if line.lstrip().startswith("#") else line for line in lines]
    head = [line for line in itertools.islice((x for x in lines if x.strip()), _PEEK_LINES)]
    if not head:
        raise ValueError(f"{path.name}: no data rows (only blank or comment lines)")
    delimiter = _delimiter(path, [_INLINE.sub("", line) for line in head])
    if "#" in text:
        lines = [_strip_inline(line, delimiter) if "#" in line else line for line in lines]
        head = [line for line in itertools.islice((x for x in lines if x.strip()),
                                                  _PEEK_LINES)]
    try:
        rows = [r for r in csv.reader(head, delimiter=delimiter) if r]
    except csv.Error as exc:
        raise ValueError(f"{path.name}: not a readable text table ({exc})") from None
    if not rows:
        raise ValueError(f"{path.name}: no data rows (only blank or comment lines)")
    header = _has_header(rows)
    try:
        frame = pd.read_csv(
            io.StringIO("\n".join(lines)),
            sep=r"\s+" if delimiter == " " else delimiter,
            header=0 if header else None,
            # Only an empty field is missing; "nan"/"inf" are numbers (non-finite ones,
            # reported as such) and "NA" is text (a valid label).
            keep_default_na=False,
            na_values=[""],
            skipinitialspace=True,
            skip_blank_lines=True,
        )
    except pd.errors.ParserError as exc:
        raise ValueError(
            f"{path.name}: ragged rows ({_parser_detail(exc)}); every row must have the same "
            "number of fields"
        ) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path.name}: no data rows") from None
    del text, lines
    if not header:
        frame.columns = list(range(frame.shape[1]))
    return _from_frame(frame, path, label_column)


#: A '#' after whitespace, to the end of the line (the delimiter is not known yet).
_INLINE = re.compile(r"\s+#.*$")


def _strip_inline(line: str, delimiter: str) -> str:
    """`line` without an inline comment: from a '#' that follows whitespace inside a
    field to the end of the line (``1,2  # note``). A '#' that begins a field (``#red``,
    ``1, 2, #red``) is data; with a space delimiter every ``' #'`` starts a comment."""
    start = 0
    while True:
        k = line.find("#", start)
        if k <= 0:
            return line
        before = line[:k]
        if before[-1].isspace() and before.count('"') % 2 == 0:  # not inside quotes
            rest = before.rstrip()
            if delimiter == " " or (rest and not rest.endswith(delimiter)):
                return rest
        start = k + 1


def _read_text(path) -> str:
    """The file's text with universal newlines (\\n, \\r\\n and a lone \\r all end a
    line), UTF-8 with or without a BOM."""
    with open(path, encoding="utf-8-sig", newline=None) as fh:
        try:
            text = fh.read()
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path.name}: not a UTF-8 text file ({exc.reason})") from None
    return text


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
    table = tuple(str(c) for c in columns) if named else tuple(range(len(columns)))
    if isinstance(label_column, str) and label_column == AUTO and AUTO not in table:
        label_column = _auto_label(frame, columns, named)
    y = classes = used = None
    if label_column is not None:
        j = _column_index(columns, label_column, path, named)
        y, classes = _encode_labels(frame.iloc[:, j], path, columns[j])
        used = table[j]
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
    return X, y, classes, names, table, used


def _is_numeric_column(col) -> bool:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        return True
    return bool(col.dropna().astype(str).str.strip().map(_is_number).all())


def _auto_label(frame, columns, named):
    """The label column ``label_column="auto"`` picks (a name or position), or None."""
    if len(columns) < 2:
        return None
    if named:
        lowered = [str(c).strip().lower() for c in columns]
        for candidate in LABEL_NAMES:
            if candidate in lowered:
                return columns[lowered.index(candidate)]
    text = [c for c in columns if not _is_numeric_column(frame[c])]
    return text[0] if len(text) == 1 else None


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
#: A damaged .npy header can make NumPy's header parser (tokenize / ast) raise
#: TokenError, SyntaxError, TypeError or OverflowError (found by the fuzz test).
_UNREADABLE = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error,
               tokenize.TokenError, SyntaxError, TypeError, OverflowError,
               NotImplementedError)


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
    if path.suffix.lower() == ".npy":
        return _read_npy_array(path)
    try:
        return zipfile.ZipFile(path)
    except _UNREADABLE as exc:
        raise _numpy_error(path, exc) from None


def _array_header(fh, path, what: str):
    """``(shape, dtype, fortran)`` of the .npy stream `fh`, read from its header only."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
    except _UNREADABLE as exc:
        raise _numpy_error(path, exc) from None
    if dtype.hasobject:
        raise _numpy_error(path, ValueError("allow_pickle"))
    return shape, dtype, fortran


def _check_contents(path, what: str, shape, dtype, *, stored=None, limit=None) -> None:
    """Refuse an array whose header claims more than the file holds (`stored`: bytes
    after the header, for a plain .npy), more than a decompression `limit` (an .npz
    member) or more than memory allows."""
    count = 1
    for s in shape:
        count *= int(s)
    nbytes = count * dtype.itemsize
    claim = f"{what} of shape {tuple(int(s) for s in shape)} {dtype}"
    if stored is not None and nbytes > stored:
        raise ValueError(
            f"{path.name}: truncated or damaged: the header claims {claim} "
            f"({memory.format_bytes(nbytes)}), but the file holds only "
            f"{memory.format_bytes(stored)} of data"
        )
    advice = "subsample the data before saving it"
    if limit is not None:
        memory.check_allocation(
            nbytes, f"{path.name}: {claim}, decompressed", advice, limit=limit,
            limit_name=memory.file_limit_name(),
        )
    memory.check_allocation(
        nbytes * NUMPY_BYTES_FACTOR, f"{path.name}: {claim} ({memory.format_bytes(nbytes)}, "
        "read and converted to float32)", advice,
    )


def _read_npy_array(path):
    with open(path, "rb") as fh:
        shape, dtype, _ = _array_header(fh, path, "array")
        stored = path.stat().st_size - fh.tell()
        _check_contents(path, "the array", shape, dtype, stored=stored)
        fh.seek(0)
        try:
            return np.lib.format.read_array(fh, allow_pickle=False)
        except _UNREADABLE as exc:
            raise _numpy_error(path, exc) from None


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path):
    """One .npz member, its header checked before a byte of its data is decompressed.

    The zip directory's uncompressed size and the member's .npy header are both
    checked against the file limit and the memory available; decompression then reads
    exactly the bytes the header claims (a member that decompresses to more is not
    read further), so a small archive cannot expand without bound.
    """
    what = f"member {info.filename[:-4]!r}"
    limit = memory.file_content_limit()
    if info.file_size > limit:
        raise memory.MemoryEstimateError(
            f"{path.name}: {what} decompresses to {memory.format_bytes(info.file_size)} "
            f"(from {memory.format_bytes(info.compress_size)} in the archive), more than "
            f"{memory.file_limit_name()}, {memory.format_bytes(limit)}; subsample the data "
            "before saving it",
            device="CPU", nnz=0.0, need_bytes=float(info.file_size), available_bytes=limit,
        )
    try:
        with archive.open(info) as fh:
            shape, dtype, _ = _array_header(fh, path, what)
        _check_contents(path, what, shape, dtype, limit=limit)
        with archive.open(info) as fh:  # reads the header again, then its data only
            return np.lib.format.read_array(fh, allow_pickle=False)
    except memory.MemoryEstimateError:
        raise
    except _UNREADABLE as exc:
        if isinstance(exc, ValueError) and str(exc).startswith(f"{path.name}:"):
            raise  # already ours (a damaged header), not to be wrapped again
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
        return _from_frame(pd.DataFrame(_structured_columns(array, path)), path, label_column)
    if array.ndim != 2:
        raise ValueError(
            f"{path.name}: needs a 2-D array (rows × features) or a 1-D structured array; "
            f"got a {array.ndim}-D array of shape {array.shape}"
        )
    if label_column is None or (isinstance(label_column, str) and label_column == AUTO):
        return array, None, None, None, tuple(range(array.shape[1])), None
    if isinstance(label_column, str) and not label_column.lstrip("-").isdigit():
        raise ValueError(
            f"{path.name}: label_column={label_column!r} names a column, but a plain array "
            "has no names; give a 0-based column index"
        )
    frame = pd.DataFrame(array)
    return _from_frame(frame, path, int(label_column))


def _structured_columns(array, path) -> dict:
    """The columns of a 1-D structured array: a field per column, a sub-array field
    (``('xy', '<f8', (2,))``) one column per element, named ``xy[0]``, ``xy[1]``, ...;
    a nested structured field is refused."""
    columns = {}
    for name in array.dtype.names:
        field = array[name]
        if field.dtype.names is not None:
            raise ValueError(
                f"{path.name}: field {name!r} is itself a structured record; only numeric "
                "fields (scalars or fixed-size sub-arrays) can be columns"
            )
        if field.ndim == 1:
            columns[name] = field
            continue
        flat = field.reshape(field.shape[0], int(np.prod(field.shape[1:])))
        shape = field.shape[1:]
        for k in range(flat.shape[1]):
            index = ",".join(map(str, np.unravel_index(k, shape)))
            columns[f"{name}[{index}]"] = flat[:, k]
    return columns


def _read_npz(path, label_column):
    with _load_numpy(path) as archive:
        try:
            infos = archive.infolist()
        except _UNREADABLE as exc:
            raise _numpy_error(path, exc) from None
        total = sum(info.file_size for info in infos)
        memory.check_allocation(
            total * NUMPY_BYTES_FACTOR, f"{path.name}: {len(infos)} member(s) of "
            f"{memory.format_bytes(total)} decompressed (read and converted to float32)",
            "subsample the data before saving it",
        )
        arrays = {}
        for info in infos:  # members are read (and can fail) only here
            if not info.filename.endswith(".npy") or info.is_dir():
                continue  # not an array (np.savez writes only .npy members)
            arrays[info.filename[:-4]] = _read_member(archive, info, path)
        if not arrays:
            raise ValueError(
                f"{path.name}: no data array; expected key 'X' or any 2-D array, found no .npy "
                "member"
            )
        keys = list(arrays)
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
    elif label_column in (None, AUTO) and "y" in arrays and xkey != "y":
        ykey = "y"
    elif label_column is None or label_column == AUTO:
        return X, None, None, None, tuple(range(X.shape[1])), None
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
    return (X, codes.astype(np.int64).reshape(-1), tuple(classes.tolist()), None,
            tuple(range(X.shape[1])), ykey)


# --- Parquet ------------------------------------------------------------------------


def _read_parquet(path, label_column):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
        expanded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        limit = memory.file_content_limit()
        memory.check_allocation(
            expanded, f"{path.name}: {meta.num_rows} rows × {meta.num_columns} columns, "
            "decompressed", "subsample the data before saving it", limit=limit,
            limit_name=memory.file_limit_name(),
        )
        memory.check_allocation(
            expanded * PARQUET_BYTES_FACTOR, f"{path.name}: {meta.num_rows} rows × "
            f"{meta.num_columns} columns ({memory.format_bytes(expanded)} decompressed, about "
            f"{PARQUET_BYTES_FACTOR}× that while converting)", "subsample the data",
        )
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path.name}: not a readable Parquet file ({exc})") from None
    frame = table.to_pandas()
    frame.columns = [str(c) for c in frame.columns]
    return _from_frame(frame, path, label_column)
