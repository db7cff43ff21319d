"""Uploads through the app's data state (no browser): files with ID columns, files that
expand far beyond their size, names the file system cannot hold, and the temporary
folder that must never outlive a read.
"""

from __future__ import annotations

import io
import re
import tempfile

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("param", reason="the app's state classes need param (pip install -e '.[app]')")

from explorer.ui.state import ExplorerState  # noqa: E402


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A state whose temporary files go to `tmp_path` (to see what is left behind)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    s = ExplorerState()
    s.data.n_samples = 200
    assert s.load()
    return s


def _left_behind(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


def customers_csv(n=60, seed=0) -> bytes:
    """customer_id C0000..., income, age, segment: the issue's file."""
    rng = np.random.default_rng(seed)
    segment = rng.integers(0, 3, n)
    frame = pd.DataFrame({
        "customer_id": [f"C{i:04d}" for i in range(n)],
        "income": (20_000 + 30_000 * segment + rng.normal(0, 1500, n)).round(2),
        "age": (25 + 15 * segment + rng.normal(0, 2, n)).round(),
        "segment": np.array(["bronze", "silver", "gold"])[segment],
    })
    return frame.to_csv(index=False).encode()


def lying_parquet(rows_per_group=1_000_000, groups=75) -> bytes:
    """A Parquet file of a few hundred KiB whose constant column decodes to
    `rows_per_group` × `groups` × 8 bytes (600 MB): written a row group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"x": np.zeros(rows_per_group)})
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema) as writer:
        for _ in range(groups):
            writer.write_table(table)
    return buf.getvalue()


def test_an_id_column_csv_uploads_with_its_segment_as_labels(state, tmp_path):
    state.data.set_file("customers.csv", customers_csv())
    assert state.load(), state.data.error
    data = state.data
    assert data.current.d == 2 and data.current.feature_names == ("income", "age")
    assert data.label_column == "segment" and data.current.n_classes == 3
    assert data.ignored == {"customer_id": "text ID: every value distinct, under an ID-like "
                                           "name"}
    assert data.columns == ["customer_id", "income", "age", "segment"]
    assert "'customer_id' (text ID" in data.read_note
    assert _left_behind(tmp_path) == []
    # The user's choice replaces the reader's: leave out age as well.
    data.choose_ignored(["customer_id", "age"])
    assert state.load(), state.data.error
    assert data.current.feature_names == ("income",)
    assert data.ignored == {"customer_id": "ignore_columns", "age": "ignore_columns"}
    assert data.label_column == "segment"
    assert state.run(), state.run_state.error
    assert len(np.unique(state.result.labels)) == 3


def test_a_lying_parquet_is_refused_by_its_name_and_nothing_is_left(state, tmp_path):
    content = lying_parquet()
    assert len(content) < 2**20
    before, refused = state.dataset, state.data.refused
    state.data.set_file("rows.parquet", content)
    assert not state.load()
    text = state.data.error
    assert re.match(r"Error while reading rows.parquet: rows.parquet: 75,000,000 rows × 1 "
                    r"columns, decoded needs about 572 MiB, more than the app's limit on what "
                    r"an upload may expand to of 512 MiB", text), text
    assert "/tmp" not in text and "upload" not in text.replace("an upload", "")
    assert state.dataset is before and state.data.refused == refused + 1
    assert _left_behind(tmp_path) == []


def test_a_long_utf8_name_uploads_and_bad_files_leave_nothing(state, tmp_path):
    name = "Messwerte " + "ä" * 200 + ".csv"  # 410 bytes in UTF-8: no file system holds it
    assert len(name.encode()) > 255
    state.data.set_file(name, b"x,y\n0,0\n1,1\n2,2\n")
    assert state.load(), state.data.error
    assert state.data.current.name == name and state.data.current.n == 3
    assert _left_behind(tmp_path) == []
    state.data.set_file(name, b"x,y\n0,1\n1,1,1\n2,2\n")
    assert not state.load()
    assert state.data.error.startswith(f"Error while reading {name}: {name}: ragged rows")
    assert "Unexpected" not in state.data.error and "/tmp" not in state.data.error
    assert _left_behind(tmp_path) == []
