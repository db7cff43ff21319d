"""Uploads in headless Chromium: a CSV with a text ID column is read (the ID left out
and shown in the column picker) and clustered, a Parquet file far larger decoded than
sent is refused by its name and withdrawn from the drop area (no "Upload complete"
beside the error), and a name too long for any file system uploads.

Uses the session's served app (tests/conftest.py ``panel_server``, whose log is checked
for tracebacks when the session ends) and the page helper of tests/test_browser.py.
"""

from __future__ import annotations

import re

import pytest

from tests.test_browser import Page
from tests.test_upload_files import customers_csv, lying_parquet

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(panel_server):
    return panel_server


@pytest.fixture
def app(server, browser):
    page = Page(browser, server)
    yield page
    page.page.close()


def test_id_columns_lying_sizes_and_long_names(app, tmp_path):
    page = app.page
    path = tmp_path / "customers.csv"
    path.write_bytes(customers_csv())
    app.upload(path)
    page.get_by_text(re.compile(r"customers\.csv: n = 60, d = 2, 3 classes")).wait_for()
    page.get_by_text(re.compile(r"Read as text, UTF-8, ','-separated, header row; ignored: "
                                r"'customer_id' \(text ID")).wait_for()
    # The picker (Choices.js, in the widget's shadow root) shows the column left out.
    page.locator(".ignore-columns .choices__list--multiple .choices__item",
                 has_text="customer_id").wait_for()
    assert app.run() > 0.9

    lying = tmp_path / "rows.parquet"
    lying.write_bytes(lying_parquet())
    app.upload(lying)
    page.get_by_text(re.compile(r"reading rows\.parquet: rows\.parquet: 75,000,000 rows × 1 "
                                r"columns, decoded needs about 572 MiB, more than the app's "
                                r"limit")).wait_for()
    page.locator(".upload .filepond--item").first.wait_for(state="detached")  # withdrawn
    # (FilePond's hidden live region still announces the transfer; the drop area does not.)
    assert page.locator(".upload .filepond--file-status-main",
                        has_text="Upload complete").count() == 0
    assert page.get_by_text("Traceback").count() == 0

    name = "Messwerte " + "ä" * 200 + ".csv"  # 410 bytes of UTF-8
    page.locator(".upload input.filepond--browser").set_input_files(
        files=[{"name": name, "mimeType": "text/csv",
                "buffer": b"x,y\n0,0\n0.1,0\n3,3\n3.1,3\n"}])
    page.get_by_text(re.compile(r"Messwerte ä+\.csv: n = 4, d = 2")).wait_for()
    assert page.get_by_text(re.compile(r"Unexpected|File name too long|/tmp/")).count() == 0
    assert not [e for e in app.errors if e.startswith("page error")]
