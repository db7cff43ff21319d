"""Reading a data set from a file: CSV, NPY, NPZ or Parquet, with an optional label column.

Every problem is a ``ValueError`` (``FileNotFoundError`` for a missing file) whose
message names the file, says what is wrong and what is allowed. pandas and pyarrow are
imported only for the formats that need them.

What a file will become in memory is estimated from its metadata or its first lines
and checked before it is parsed or decompressed (a small file must not expand without
bound), and what the reader decided about a text file (its delimiter, decimal mark,
header, encoding) and which columns it left out, and why, is recorded in
``Dataset.params["read"]``.
"""

from __future__ import annotations

import contextlib
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

#: Lines read to decide the delimiter, the decimal mark and whether the first line is
#: a header.
_PEEK_LINES = 100

#: Longest line a text file may have (characters): a data file has one row per line,
#: and pandas takes ~20 bytes per field of a single huge line (a 200 MB one-line CSV
#: took 3.8 GB). 8 Mi characters hold ~500,000 numeric fields.
MAX_LINE_CHARS = 8 * 2**20

#: Peak bytes per byte of a text file while pandas parses it (the text, the tokens,
#: the float64 columns and the frame's copy).
CSV_BYTES_FACTOR = 8

#: Peak bytes of a Parquet file per byte of its decoded contents (the Arrow table, the
#: pandas frame and the float64 matrix).
PARQUET_BYTES_FACTOR = 3

#: Bytes a text or binary value takes once decoded into a pandas object column (the
#: pointer and a small Python string): Parquet's encoded size says nothing about it.
OBJECT_VALUE_BYTES = 64

#: Peak bytes of a loaded NumPy array per byte of its contents: the array, its float64
#: copy and the float32 result.
NUMPY_BYTES_FACTOR = 3

#: A numeric text table with at least this many columns is parsed by NumPy in one
#: vectorised pass: pandas builds one Python object per column (3 rows × 300,000
#: columns took 9 s to parse, and as long again to check column by column).
WIDE_COLUMNS = 512

#: Encodings tried when a text file is not UTF-8 (charset-normalizer picks the one that
#: decodes it most plausibly): the code pages spreadsheets export in.
_ENCODINGS = ("utf_16", "cp1252", "cp1250", "cp1251", "iso8859_15", "latin_1", "mac_roman",
              "shift_jis", "gb18030")


def format_name(kind: str) -> str:
    return {"csv": "text", "parquet": "Parquet", "npy": "NumPy", "npz": "NPZ"}[kind]


class _ShownPath(type(Path())):
    """A path whose :attr:`name` is the name the user knows the file by (an upload
    stored under a fixed temporary name): every message of the readers says
    ``path.name``. The suffix stays the real file's."""

    @property
    def name(self):
        return getattr(self, "_shown", None) or super().name

    @property
    def suffix(self):
        return Path(str(self)).suffix


def _check_regular_file(path: Path) -> None:
    """FileNotFoundError for a missing path, ValueError for a directory, a FIFO, a
    device or a socket (reading one would block, never end or is meaningless)."""
    import stat

    where = path.name if getattr(path, "_shown", None) else str(path)  # never a server path
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISREG(mode):
        return
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    what = next((text for test, text in kinds if test(mode)), "not a regular file")
    raise ValueError(f"{where}: is {what}, not a data file; give the path of a regular file")


def read(path, label_column=None, *, center=False, ignore_columns=None, auto_ignore=True,
         max_bytes=None, name=None) -> Dataset:
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
        another column; else, of the text columns left after the ignored ones, the
        only one, or the only one whose values repeat (at most half as many distinct
        values as rows: classes, not names); else as None.
    center : bool
        Take each column's offset off in float64 before the float32 conversion (see
        :func:`explorer._validation.check_data`).
    ignore_columns : sequence of str or int, str, int or None
        Columns left out of the features: names or 0-based positions (negative from
        the end; a string of digits is a position, as a command line gives it).
    auto_ignore : bool
        Also leave out, with the reason recorded, the columns that are not
        measurements: a to_csv index (an unnamed, ``Unnamed: 0`` or ``index`` column
        of distinct integers), an ID column (distinct integers under an ID-like name
        such as ``id`` or ``customer_id``, or distinct text codes such as ``C0001``
        or UUIDs) and a column of dates. Such a column would otherwise dominate the
        distances (an index 0..n-1) or make the file unreadable (text). A column
        named as `label_column` is never left out.
    max_bytes : int, optional
        The most bytes the file's contents may take once decoded (decompressed,
        parsed, expanded to float64), estimated before anything is decoded. Default:
        :func:`explorer.memory.file_content_limit`.
    name : str, optional
        The name messages and the data set give the file (default: the file's own);
        a server reading an upload stored under a fixed temporary name passes the
        user's.

    Returns
    -------
    Dataset
        X float32 (n, d), y coded ``0 .. k-1`` (original values in ``classes``: the
        class names as the file wrote them) or None, ``feature_names`` when the file
        names its columns. ``params["columns"]`` lists every column of the table in
        file order, the label and ignored columns included: names when the file has
        them, else 0-based positions (either can be passed back as `label_column` or
        in `ignore_columns`); ``params["label_column"]`` is the column the labels came
        from (its name, position or ``.npz`` key) or None; ``params["read"]`` says what
        was detected (:func:`describe_read` words it): ``format``, and for text
        ``encoding``, ``delimiter``, ``decimal``, ``thousands``, ``header``,
        ``comment_lines``; ``ignored`` maps each column left out to why, and
        ``decoded_bytes`` is the estimate checked against `max_bytes`.

    Raises
    ------
    FileNotFoundError
        If `path` does not exist.
    ValueError
        For an unknown extension, an unreadable or empty file, an undecidable decimal
        mark, ragged rows, missing values, a non-numeric column other than the label
        and ignored columns, an unknown label or ignored column, or data that is not
        a finite numeric n×d matrix with n >= 2.
    explorer.memory.MemoryEstimateError
        When the decoded contents would exceed `max_bytes` or the memory available
        (a ValueError too).

    Notes
    -----
    Text files: the encoding is UTF-8 (with or without a BOM), else the code page
    charset-normalizer finds. The delimiter is the one among ``, ; tab whitespace``
    that splits the first lines into the same number of fields, most of them numbers
    (``.tsv`` is tab). With ``;``, tab or whitespace between fields, numbers written
    ``0,13`` have a decimal comma (and ``1.234,5`` a thousands point); a table where
    both marks occur, or whose commas could only be thousands separators
    (``1,234``), is refused rather than guessed. The first line is a header when one
    of its fields is not a number while the field below it is (numbers padded by
    ``np.savetxt`` are data). Lines starting with ``#`` are comments.

    ``.npy``: a 2-D numeric array, or a 1-D structured array whose numeric fields are
    the columns (fields are then named). ``.npz``: the array ``X`` (or ``x``) and,
    when present, ``y``; without ``X``, the first 2-D array in the file.
    """
    kind = FORMATS.get(Path(path).suffix.lower())
    path = _ShownPath(str(path))
    if name:
        path._shown = Path(str(name)).name
    _check_regular_file(path)
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
    ignore = _ignore_list(ignore_columns)
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(
            max_bytes, (int, np.integer)) or max_bytes < 1):
        raise ValueError(f"max_bytes must be a positive integer (bytes) or None; got "
                         f"{max_bytes!r}")
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
    info = {"format": kind}
    limit = (contextlib.nullcontext() if max_bytes is None
             else memory.file_limit(int(max_bytes), "max_bytes"))
    with limit:
        X, y, classes, names, columns, used = reader[kind](
            path, label_column, _Choice(ignore, bool(auto_ignore)), info)
    offset = column_offsets(X) if center else None
    X = check_data(X, name=path.name, center=True if center else None)
    if y is not None and len(y) != X.shape[0]:
        raise ValueError(
            f"{path.name}: {len(y)} labels for {X.shape[0]} rows; need one label per row"
        )
    info.setdefault("ignored", {})
    return Dataset(
        X=X,
        y=y,
        name=path.name,
        description=f"{path.name}: {X.shape[0]} rows × {X.shape[1]} features"
        + ("" if y is None else f", {len(classes)} classes")
        + ("" if offset is None else "; centred by "
           + ", ".join(f"{v:.6g}" for v in np.asarray(offset).tolist()))
        + ("" if offset is None else " (float32 could not carry the offset)"),
        params={"path": str(path), "label_column": used, "columns": columns, "read": info,
                **({} if offset is None else {"offset": np.asarray(offset).tolist()})},
        classes=classes,
        feature_names=names,
    )


def describe_read(info: dict) -> str:
    """One line saying what :func:`read` detected (``Dataset.params["read"]``), e.g.
    ``text, UTF-8, ';'-separated, decimal ',', header row; ignored: 'customer_id'
    (text ID: ...)``."""
    kind = info.get("format", "csv")
    parts = [format_name(kind)]
    if kind == "csv":
        parts.append(str(info.get("encoding", "utf-8")).replace("_", "-").upper()
                     if info.get("encoding") not in (None, "utf-8") else "UTF-8")
        delimiter = info.get("delimiter")
        if delimiter is not None:
            shown = {"\t": "tab", " ": "whitespace"}.get(delimiter, repr(delimiter))
            parts.append("one column" if delimiter == ONE_COLUMN else f"{shown}-separated")
        if info.get("decimal", ".") != ".":
            parts.append(f"decimal {info['decimal']!r}"
                         + (f", thousands {info['thousands']!r}" if info.get("thousands")
                            else ""))
        parts.append("header row" if info.get("header") else "no header")
        if info.get("comment_lines"):
            parts.append(f"{info['comment_lines']} comment line(s) skipped")
    text = ", ".join(parts)
    ignored = info.get("ignored") or {}
    if ignored:
        text += "; ignored: " + "; ".join(
            f"{_shown_column(c)} ({why})" for c, why in ignored.items())
    return text


def _shown_column(column) -> str:
    return repr(column) if isinstance(column, str) else f"column {column}"


class _Choice:
    """The columns the caller asked to leave out, and whether to find more."""

    def __init__(self, ignore, auto):
        self.ignore = ignore
        self.auto = auto


def _ignore_list(ignore_columns) -> list:
    if ignore_columns is None:
        return []
    if isinstance(ignore_columns, (str, int, np.integer)) and not isinstance(
            ignore_columns, bool):
        ignore_columns = [ignore_columns]
    try:
        items = list(ignore_columns)
    except TypeError:
        raise TypeError(f"ignore_columns must be column names or 0-based indices (a list); got "
                        f"{ignore_columns!r}") from None
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int, np.integer)):
            raise TypeError(f"ignore_columns must hold column names (str) or 0-based indices "
                            f"(int); got {item!r} ({type(item).__name__})")
    return items


# --- text ---------------------------------------------------------------------------


def _read_csv(path, label_column, choice, info):
    import pandas as pd

    text = _read_text(path, info)
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
    if "#" in text:
        comments = sum(1 for line in lines if line.lstrip().startswith("#"))
        lines = ["" if line.lstrip().startswith("#") else line for line in lines]
    else:
        comments = 0
    info["comment_lines"] = comments
    head = [line for line in itertools.islice((x for x in lines if x.strip()), _PEEK_LINES)]
    if not head:
        raise ValueError(f"{path.name}: no data rows (only blank or comment lines)")
    delimiter = _delimiter(path, [_INLINE.sub("", line) if "#" in line else line
                                  for line in head])
    if "#" in text:
        lines = [_strip_inline(line, delimiter) if "#" in line else line for line in lines]
        head = [line for line in itertools.islice((x for x in lines if x.strip()),
                                                  _PEEK_LINES)]
    try:
        rows = _split(head, delimiter, _SAMPLE_FIELDS)
        width = _count_fields(head[0], delimiter)
    except csv.Error as exc:
        raise ValueError(f"{path.name}: not a readable text table ({exc})") from None
    if not rows:
        raise ValueError(f"{path.name}: no data rows (only blank or comment lines)")
    decimal, thousands = _decimal_mark(path, rows, delimiter)
    header = _has_header(rows, decimal)
    info.update(delimiter=delimiter, decimal=decimal, thousands=thousands, header=header)
    # What the parse will build: a float64 per field (before the parse, from the text).
    n_rows = sum(1 for line in lines if line.strip()) - header
    decoded = max(n_rows, 0) * width * 8
    info["decoded_bytes"] = decoded
    memory.check_allocation(
        decoded, f"{path.name}: {n_rows:,} rows × {width:,} columns of text, parsed "
        "to float64", "subsample the file", limit=memory.file_content_limit(),
        limit_name=memory.file_limit_name(),
    )
    if width >= WIDE_COLUMNS:
        first = _split(head[:1], delimiter)[0] if header else None
        wide = _read_wide(path, lines, first, delimiter, decimal,
                          thousands, label_column, choice, info)
        if wide is not None:
            return wide
    try:
        frame = pd.read_csv(
            io.StringIO("\n".join(lines)),
            # One column: a separator that is not in the text (pandas needs one).
            sep={" ": r"\s+", ONE_COLUMN: "\x1f"}.get(delimiter, delimiter),
            header=0 if header else None,
            decimal=decimal,
            thousands=thousands,
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
    return _from_frame(frame, path, label_column, choice, info, decimal=decimal)


def _read_wide(path, lines, header, delimiter, decimal, thousands, label_column, choice,
               info):
    """A wide, purely numeric table parsed in one vectorised pass (no frame, no loop
    over columns), or None when it is not one (quotes, thousands separators, text,
    empty fields, ragged rows, duplicate names, a label-like name under
    ``label_column="auto"``): the general parse then reads it, or says what is wrong."""
    if thousands or any('"' in line for line in lines[:_PEEK_LINES]):
        return None
    body = [line for line in lines if line.strip()][1 if header else 0:]
    names = None if header is None else [h.strip() for h in header]
    if names is not None and len(set(names)) != len(names):
        return None  # duplicate names: pandas' renaming applies
    if delimiter == " ":
        fields = [line.split() for line in body]
        counts = np.fromiter(map(len, fields), dtype=np.int64, count=len(fields))
        flat = list(itertools.chain.from_iterable(fields))
    else:
        counts = np.fromiter((line.count(delimiter) + 1 for line in body), dtype=np.int64,
                             count=len(body))
        flat = delimiter.join(body).split(delimiter)
    width = len(header) if header is not None else int(counts[0]) if len(counts) else 0
    if len(body) == 0 or np.any(counts != width):
        return None
    if decimal != ".":
        flat = [f.replace(decimal, ".") for f in flat]
    try:
        X = np.array(flat, dtype=np.float64).reshape(len(body), width)
    except ValueError:  # text, empty fields: the general parse says which
        return None
    columns = tuple(names) if names is not None else tuple(range(width))
    keep, label_j = _wide_selection(X, columns, names is not None, label_column, choice, path,
                                    info)
    if keep is None:
        return None
    info["parser"] = "numpy"
    y = classes = used = None
    if label_j is not None:
        values = X[:, label_j]
        if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
            values = values.astype(np.int64)  # as pandas reads a column of integers
        y, classes = _encode_labels(values, path, columns[label_j])
        used = columns[label_j]
    X = X[:, keep] if len(keep) != width else X
    feature_names = None if names is None else tuple(names[j] for j in keep)
    return X, y, classes, feature_names, columns, used


def _wide_selection(X, columns, named, label_column, choice, path, info):
    """The columns kept (indices) and the label column's index, for an all-numeric
    matrix; ``(None, None)`` to leave it to the frame path (label names under
    ``"auto"``)."""
    d = len(columns)
    label_j = None
    if isinstance(label_column, str) and label_column == AUTO and AUTO not in columns:
        if named and any(str(c).strip().lower() in LABEL_NAMES for c in columns):
            return None, None
        label_column = None
    if label_column is not None:
        label_j = _column_index(list(columns), label_column, path, named)
    ignored = {}
    for item in choice.ignore:
        j = _ignore_index(list(columns), item, path, named)
        if j == label_j:
            raise ValueError(f"{path.name}: column {_col_text(columns[j], named)} is both the "
                             "label column and in ignore_columns; choose one")
        ignored[columns[j]] = "ignore_columns"
    if choice.auto and named:
        n = X.shape[0]
        for j, name in enumerate(columns):
            if j == label_j or name in ignored or not (_unnamed(name) or _id_like(name)):
                continue
            why = _numeric_reason(X[:, j], name, n)
            if why:
                ignored[name] = why
    info["ignored"] = ignored
    drop = {columns.index(c) for c in ignored} | ({label_j} if label_j is not None else set())
    keep = [j for j in range(d) if j not in drop]
    if not keep:
        raise ValueError(f"{path.name}: no feature columns besides the label and ignored "
                         "columns")
    return keep, label_j


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


def _read_text(path, info) -> str:
    """The file's text with universal newlines (\\n, \\r\\n and a lone \\r all end a
    line): UTF-8 with or without a BOM, else the code page charset-normalizer finds
    among :data:`_ENCODINGS` (recorded in ``info["encoding"]``)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
        info["encoding"] = "utf-8"
    except UnicodeDecodeError as exc:
        text = _decode_other(path, raw, exc.reason, info)
    del raw
    if "\0" in text:
        raise ValueError(f"{path.name}: not a text file (it holds NUL bytes); a text table "
                         "has one row of numbers per line")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decode_other(path, raw: bytes, reason: str, info) -> str:
    from charset_normalizer import from_bytes

    best = None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\0" not in raw:  # NULs: binary
        best = from_bytes(raw, cp_isolation=list(_ENCODINGS)).best()
    if best is None:
        raise ValueError(f"{path.name}: not a UTF-8 text file ({reason}), and no other text "
                         "encoding decodes it; save it as UTF-8 text")
    info["encoding"] = best.encoding
    return str(best)


#: Candidate delimiters in order of preference when several fit equally (" " stands for
#: any run of whitespace).
_DELIMITERS = (",", ";", "\t", " ")

#: The "delimiter" of a one-column table (its lines are fields whole).
ONE_COLUMN = ""


def _split(lines, delimiter, most=-1) -> list[list[str]]:
    """The fields of the non-blank `lines` (at most `most` of each line when no field
    is quoted: a wide table's first fields judge it as well as all of them)."""
    if delimiter == ONE_COLUMN:
        return [[line.strip()] for line in lines if line.strip()]
    if delimiter == " ":
        return [line.split(None, most)[:most if most > 0 else None] for line in lines
                if line.strip()]
    if not any('"' in line for line in lines):  # no quoting: a plain split is the same
        return [[f.lstrip(" ") for f in line.split(delimiter, most)[:most if most > 0 else None]]
                for line in lines if line.strip()]
    return [r for r in csv.reader(lines, delimiter=delimiter, skipinitialspace=True) if r]


def _count_fields(line: str, delimiter: str) -> int:
    if delimiter == ONE_COLUMN:
        return 1
    if delimiter == " ":
        return len(line.split())
    if '"' not in line:
        return line.count(delimiter) + 1
    return len(next(csv.reader([line], delimiter=delimiter), []))


#: Fields per line looked at to judge a delimiter, a decimal mark or a header (a wide
#: table's first 200 columns tell as much as all of them).
_SAMPLE_FIELDS = 200


def _sample(rows) -> list[str]:
    return [f.strip() for r in rows for f in r[:_SAMPLE_FIELDS]]


#: A number with a decimal comma (``0,13``, ``-1,5e3``), and one whose commas can only
#: be thousands separators (``1,234``, ``12,345,678``).
_COMMA_NUMBER = re.compile(r"[+-]?(\d+,\d*|,\d+)([eE][+-]?\d+)?")
_COMMA_THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(,\d{3})+")
#: A number with a decimal point, and one written with points between thousands and a
#: decimal comma (``1.234,5``).
_POINT_NUMBER = re.compile(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?")
_POINT_THOUSANDS = re.compile(r"[+-]?\d{1,3}(\.\d{3})+(,\d*)?")
#: A number with a decimal comma and digits after it (``0,13``, ``,5``), as a field of
#: a table that is not comma-separated may be.
_DECIMAL_COMMA = re.compile(r"[+-]?\d*,\d+([eE][+-]?\d+)?")


def _delimiter(path, head):
    """The delimiter that splits the first lines into the same number of fields (more
    than one), most of them numbers; "," when none does."""
    if path.suffix.lower() == ".tsv":
        return "\t"
    sample = [line for line in head if not line.lstrip().startswith("#")]
    best, best_score = ",", None
    for rank, delimiter in enumerate(_DELIMITERS):
        if delimiter != " " and not any(delimiter in line for line in sample):
            continue
        try:
            rows = _split(sample, delimiter, _SAMPLE_FIELDS)
            counts = [_count_fields(line, delimiter) for line in sample if line.strip()]
        except csv.Error:
            continue
        if not counts or max(counts) < 2:
            continue
        body = rows[1:] or rows
        fields = [f for f in _sample(body) if f]  # an empty field is missing, not text
        numeric = sum(_is_number(f) or delimiter != "," and bool(_DECIMAL_COMMA.fullmatch(f))
                      for f in fields) / max(len(fields), 1)
        consistent = len(set(counts)) == 1
        body_consistent = len({len(r) for r in body}) == 1
        score = (consistent, body_consistent, numeric, -rank)
        if best_score is None or score > best_score:
            best, best_score = delimiter, score
    if best_score is None or not best_score[0]:
        # No delimiter splits every line alike: one column, if its fields are numbers
        # (``0,5`` with a decimal comma splits on ',' only by accident).
        body = [line.strip() for line in sample[1:] or sample]
        if body and all(_is_number(f) or _DECIMAL_COMMA.fullmatch(f) for f in body):
            return ONE_COLUMN
    return best


def _decimal_mark(path, rows, delimiter):
    """``(decimal, thousands)`` of a table whose fields are `rows` (the first lines).

    A ``,``-separated table has decimal points. Otherwise numbers such as ``0,13``
    mean a decimal comma (``1.234,5``: with a thousands point). Refused when both
    marks occur, or when every comma could be a thousands separator (``1,234``).
    """
    if delimiter == ",":
        return ".", None
    fields = _sample(rows[1:] or rows)
    commas = [f for f in fields if _COMMA_NUMBER.fullmatch(f)]
    if not commas and not any(_POINT_THOUSANDS.fullmatch(f) and "," in f for f in fields):
        return ".", None
    points = [f for f in fields if _POINT_NUMBER.fullmatch(f)]
    grouped = [f for f in fields if _POINT_THOUSANDS.fullmatch(f) and not
               _POINT_NUMBER.fullmatch(f)]
    shown = {"\t": "tab", " ": "whitespace"}.get(delimiter, repr(delimiter))
    table = "one-column table" if delimiter == ONE_COLUMN else f"{shown}-separated table"
    if grouped and not points:
        return ",", "."
    if points:
        raise ValueError(
            f"{path.name}: the decimal mark is ambiguous: this {table} has "
            f"numbers with a decimal comma ({commas[0]!r}) and with a decimal point "
            f"({points[0]!r}); write every number with the same mark"
        )
    if all(_COMMA_THOUSANDS.fullmatch(f) for f in commas):
        raise ValueError(
            f"{path.name}: the decimal mark is ambiguous: every comma in this "
            f"{table} could be a decimal comma or a thousands separator "
            f"({commas[0]!r}); write the numbers without thousands separators, or with a "
            "decimal point"
        )
    return ",", None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _has_header(rows, decimal=".") -> bool:
    def number(field):
        field = field.strip()
        if decimal != ".":
            field = field.replace(".", "").replace(decimal, ".")
        return _is_number(field)

    first, rest = rows[0], rows[1:]
    if decimal == ".":
        try:  # a row of numbers (the common case, and a wide one) in one conversion
            np.array([f.strip() for f in first], dtype=np.float64)
            return False
        except ValueError:
            pass
    for j, field in enumerate(first):
        if number(field):
            continue
        if any(j < len(r) and number(r[j]) for r in rest):
            return True
    # No text field sits above a number: data (a file of text columns only is read
    # as data, and its columns are then reported as non-numeric).
    return False


def _parser_detail(exc) -> str:
    text = str(exc).strip()
    return text.split("C error: ", 1)[-1] if "C error: " in text else text


# --- columns that are not measurements -----------------------------------------------

#: Names of a column that identifies rows (compared without case): whole names, and
#: endings after a separator (``customer_id``, ``order-no``); camelCase ``customerId``.
_ID_NAMES = {"id", "ids", "key", "uuid", "guid", "index", "idx", "rowid", "row_id", "row id"}
_ID_SUFFIX = re.compile(r"(?i).+[_\s.-](id|key|uuid|guid|no|nr)")
_ID_CAMEL = re.compile(r".*[a-z](Id|ID)")
#: A text code that names one row: letters and a number (``C0001``, ``cust-17``), or a
#: UUID.
_TEXT_ID = re.compile(r"[A-Za-z]{1,12}[-_#/.]?\d+|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                      r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: A date, optionally with a time: ISO (``2024-03-01``, ``2024-03-01T12:30:00Z``) or
#: day-first / month-first (``01.03.2024``, ``3/1/24``).
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?"
                   r"(Z|[+-]\d{2}:?\d{2})?|\d{1,2}[./]\d{1,2}[./]\d{2,4}( \d{1,2}:\d{2}(:\d{2})?)?")


def _unnamed(name) -> bool:
    text = str(name).strip()
    return text == "" or text.lower() in ("index", "idx") or bool(
        re.fullmatch(r"Unnamed: \d+", text))


def _id_like(name) -> bool:
    text = str(name).strip()
    return (text.lower() in _ID_NAMES or bool(_ID_SUFFIX.fullmatch(text))
            or bool(_ID_CAMEL.fullmatch(text)))


def _numeric_reason(values, name, n) -> str | None:
    """Why a numeric column of an unnamed / index / ID-like name is left out, or None."""
    values = np.asarray(values)
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
            return None
    elif values.dtype.kind not in "iu":
        return None
    if n < 2 or len(np.unique(values)) != n:
        return None
    if _unnamed(name):
        return "index column: distinct integers under no name or 'index' (a to_csv index)"
    return "ID column: distinct integers under an ID-like name"


def _text_reason(col, name, named, n) -> str | None:
    """Why a text column is left out (dates, or a text ID), or None."""
    text = col.astype(str).str.strip()
    if n >= 1 and bool(text.str.fullmatch(_DATE).all()):
        return "dates"
    if n < 2 or text.nunique() != n:
        return None
    if named and _id_like(name):
        return "text ID: every value distinct, under an ID-like name"
    if bool(text.str.fullmatch(_TEXT_ID).all()):
        return "text ID: every value a distinct code such as " + repr(str(text.iloc[0]))
    return None


# --- frames (CSV and Parquet) ------------------------------------------------------


def _from_frame(frame, path, label_column, choice, info, decimal="."):
    if frame.shape[0] == 0:
        raise ValueError(f"{path.name}: no data rows")
    columns = list(frame.columns)
    named = not all(isinstance(c, int) for c in columns)
    table = tuple(str(c) for c in columns) if named else tuple(range(len(columns)))
    n = frame.shape[0]
    kinds = [dt.kind for dt in frame.dtypes]
    numeric = [k in "biuf" for k in kinds]
    label_j = None
    auto_label = isinstance(label_column, str) and label_column == AUTO and AUTO not in table
    if label_column is not None and not auto_label:
        label_j = _column_index(columns, label_column, path, named)
    elif auto_label and named and len(columns) >= 2:  # by name first: never ignored
        lowered = {str(c).strip().lower(): j for j, c in reversed(list(enumerate(columns)))}
        label_j = next((lowered[c] for c in LABEL_NAMES if c in lowered), None)
    ignored = {}
    for item in choice.ignore:
        j = _ignore_index(columns, item, path, named)
        if j == label_j:
            raise ValueError(f"{path.name}: column {_col_text(columns[j], named)} is both the "
                             "label column and in ignore_columns; choose one")
        ignored[j] = "ignore_columns"
    if choice.auto:
        for j, name in enumerate(columns):
            if j == label_j or j in ignored:
                continue
            col = frame.iloc[:, j]
            if kinds[j] == "M" or kinds[j] == "m":
                ignored[j] = "dates" if kinds[j] == "M" else "durations"
            elif numeric[j]:
                if named and (_unnamed(name) or _id_like(name)) and not col.isna().any():
                    why = _numeric_reason(col.to_numpy(), name, n)
                    if why:
                        ignored[j] = why
            elif kinds[j] in "OSUT" and not col.isna().any() and not _is_numeric_column(col):
                why = _text_reason(col, name, named, n)
                if why:
                    ignored[j] = why
    info["ignored"] = {table[j]: why for j, why in sorted(ignored.items())}
    if auto_label and label_j is None:
        rest = [j for j in range(len(columns)) if j not in ignored]
        label_j = _auto_label(frame, rest, numeric)
    y = classes = used = None
    if label_j is not None:
        y, classes = _encode_labels(frame.iloc[:, label_j], path, columns[label_j])
        used = table[label_j]
    keep = [j for j in range(len(columns)) if j not in ignored and j != label_j]
    if not keep:
        raise ValueError(f"{path.name}: no feature columns besides the label column"
                         + (" and the ignored columns" if ignored else ""))
    if len(keep) != len(columns):
        frame = frame.iloc[:, keep]
    columns = [columns[j] for j in keep]
    numeric = [numeric[j] for j in keep]
    kinds = [kinds[j] for j in keep]
    # Columns pandas parsed as numbers need no look, one at a time: one NaN test for all.
    numbers = [j for j, ok in enumerate(numeric) if ok]
    if numbers:
        block = frame.iloc[:, numbers]
        missing = block.isna().to_numpy().any(axis=0)
        if missing.any():
            j = numbers[int(np.flatnonzero(missing)[0])]
            _missing_error(frame.iloc[:, j], columns[j], path, named)
    if not all(numeric):
        frame = frame.copy()
    for j, ok in enumerate(numeric):
        if ok:
            continue
        name = columns[j]
        col = frame.iloc[:, j]
        if col.isna().any():
            _missing_error(col, name, path, named)
        if kinds[j] == "c":  # NumPy would drop the imaginary part
            raise ValueError(
                f"{path.name}: column {_col_text(name, named)} is complex ({col.dtype}); "
                "only real numbers are allowed"
            )
        text = col.astype(str).str.strip()
        if decimal != ".":
            text = text.str.replace(decimal, ".", regex=False)
        is_number = text.map(_is_number).to_numpy(dtype=bool)
        if not is_number.all():
            bad = int(np.flatnonzero(~is_number)[0])
            raise ValueError(
                f"{path.name}: column {_col_text(name, named)} is not numeric (data row "
                f"{bad + 1}: {col.iloc[bad]!r}); only the label column may hold text"
                + ("" if label_column is not None else " (pass label_column to name it, or "
                   "ignore_columns to leave it out)")
            )
        # Numbers pandas kept as text ("nan", "inf"): non-finite, reported as such.
        frame.isetitem(j, text.astype(np.float64))
    X = frame.to_numpy(dtype=np.float64)
    names = tuple(str(c) for c in columns) if named else None
    return X, y, classes, names, table, used


def _missing_error(col, name, path, named):
    missing = col.isna().to_numpy()
    bad = int(np.flatnonzero(missing)[0])
    raise ValueError(
        f"{path.name}: column {_col_text(name, named)} has {int(missing.sum())} missing "
        f"value(s) (first at data row {bad + 1}): empty fields, short rows or nulls; "
        "every row needs a number in every column"
    )


def _is_numeric_column(col) -> bool:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        return True
    return bool(col.dropna().astype(str).str.strip().map(_is_number).all())


def _auto_label(frame, rest, numeric):
    """The label column ``label_column="auto"`` picks among the columns `rest` (not
    ignored) when none is named like labels: the only text column, else the only text
    column whose values repeat (classes, not names), else None."""
    if len(rest) < 2:
        return None
    text = [j for j in rest if not numeric[j] and not _is_numeric_column(frame.iloc[:, j])]
    if len(text) == 1:
        return text[0]
    n = frame.shape[0]
    repeating = [j for j in text if frame.iloc[:, j].nunique() <= max(1, n // 2)]
    return repeating[0] if len(repeating) == 1 else None


def _column_index(columns, label_column, path, named, what="label_column") -> int:
    if isinstance(label_column, str):
        if label_column in columns:
            return columns.index(label_column)
        if label_column.strip().lstrip("-").isdigit():  # "3" from a command line
            return _column_index(columns, int(label_column), path, named, what)
        allowed = ", ".join(repr(str(c)) for c in columns) if named else "none (no header)"
        raise ValueError(
            f"{path.name}: {what}={label_column!r} is not a column; column names: "
            f"{allowed}; or give a 0-based index < {len(columns)}"
        )
    j = int(label_column)
    if not -len(columns) <= j < len(columns):
        raise ValueError(
            f"{path.name}: {what}={j} is out of range; the file has {len(columns)} "
            f"columns (indices 0..{len(columns) - 1}, or negative from the end)"
        )
    return j % len(columns)


def _ignore_index(columns, item, path, named) -> int:
    return _column_index(columns, item, path, named, what="ignore_columns")


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
            nbytes, f"{path.name}: {claim}, {'decompressed' if stored is None else 'loaded'}",
            advice, limit=limit,
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
        _check_contents(path, "the array", shape, dtype, stored=stored,
                        limit=memory.file_content_limit())
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


def _read_npy(path, label_column, choice, info):
    import pandas as pd

    array = _load_numpy(path)
    if array.dtype.names is not None:  # structured: fields are columns
        if array.ndim != 1:
            raise ValueError(
                f"{path.name}: a structured array must be 1-D (one record per row); got "
                f"shape {array.shape}"
            )
        return _from_frame(pd.DataFrame(_structured_columns(array, path)), path, label_column,
                           choice, info)
    if array.ndim != 2:
        raise ValueError(
            f"{path.name}: needs a 2-D array (rows × features) or a 1-D structured array; "
            f"got a {array.ndim}-D array of shape {array.shape}"
        )
    no_label = label_column is None or (isinstance(label_column, str) and label_column == AUTO)
    if no_label and not choice.ignore:  # no names: nothing is left out on its own
        return array, None, None, None, tuple(range(array.shape[1])), None
    if not no_label and isinstance(label_column, str) and not label_column.lstrip("-").isdigit():
        raise ValueError(
            f"{path.name}: label_column={label_column!r} names a column, but a plain array "
            "has no names; give a 0-based column index"
        )
    frame = pd.DataFrame(array)
    return _from_frame(frame, path, None if no_label else int(label_column), choice, info)


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


def _read_npz(path, label_column, choice, detected):
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
    elif (label_column is None or label_column == AUTO) and not choice.ignore:
        return X, None, None, None, tuple(range(X.shape[1])), None
    else:  # a column of X, or columns of X left out
        import pandas as pd

        column = None if label_column == AUTO else label_column
        return _from_frame(pd.DataFrame(X), path, column, choice, detected)
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
    columns = tuple(range(X.shape[1]))
    if choice.ignore:
        import pandas as pd

        X = _from_frame(pd.DataFrame(X), path, None, choice, detected)[0]
    return (X, codes.astype(np.int64).reshape(-1), tuple(classes.tolist()), None, columns,
            ykey)


# --- Parquet ------------------------------------------------------------------------


def _parquet_decoded_bytes(pf) -> int:
    """Bytes the file's columns take once decoded, from the metadata alone: per row
    group, its rows × each column's width in memory (a fixed-width value as the
    float64 it becomes, at least; a text or binary value as a pandas object,
    :data:`OBJECT_VALUE_BYTES`, or its uncompressed bytes when more).

    The metadata's own sizes are of the encoded pages: a column of one repeated value,
    run-length or dictionary encoded, takes a few bytes there and 8 per row decoded.
    """
    import pyarrow as pa

    meta = pf.metadata
    widths = []
    for field in pf.schema_arrow:
        t = field.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        try:
            widths.append(max(t.bit_width // 8, 8))
        except ValueError:  # variable width: strings, binaries, lists
            widths.append(None)
    total = 0
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        rows = group.num_rows
        fixed = sum(w for w in widths if w is not None)
        variable = sum(1 for w in widths if w is None)
        encoded = sum(group.column(j).total_uncompressed_size for j in range(group.num_columns))
        total += rows * fixed + max(rows * variable * OBJECT_VALUE_BYTES,
                                    encoded if variable else 0)
    return total


def _read_parquet(path, label_column, choice, info):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        meta = pf.metadata
        decoded = _parquet_decoded_bytes(pf)
        info["decoded_bytes"] = decoded
        shape = f"{meta.num_rows:,} rows × {meta.num_columns:,} columns"
        memory.check_allocation(
            decoded, f"{path.name}: {shape}, decoded", "subsample the data before saving it",
            limit=memory.file_content_limit(), limit_name=memory.file_limit_name(),
        )
        memory.check_allocation(
            decoded * PARQUET_BYTES_FACTOR, f"{path.name}: {shape} "
            f"({memory.format_bytes(decoded)} decoded, about {PARQUET_BYTES_FACTOR}× that "
            "while converting)", "subsample the data",
        )
        table = pf.read()
    except (pa.ArrowInvalid, OSError) as exc:
        text = str(exc).replace(str(path), path.name)
        raise ValueError(f"{path.name}: not a readable Parquet file ({text})") from None
    frame = table.to_pandas()
    del table
    frame.columns = [str(c) for c in frame.columns]
    return _from_frame(frame, path, label_column, choice, info)
