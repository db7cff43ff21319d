"""Regenerate the tables of docs/robustness.md from the code itself.

    PYTHONPATH=. python docs/robustness_tables.py          # rewrites docs/robustness.md
    PYTHONPATH=. python docs/robustness_tables.py --check  # exit 1 if a row is stale

Runs the four printers (``python tests/test_robustness_library.py``, ``..._files.py``,
``..._cli.py``, ``..._app.py``: each prints its table's rows, then an HTML comment with
its counts), puts each one's rows in place of the table under its heading
(:data:`SECTIONS`) and rewrites the counts in the page's opening paragraph. Every other
line of the page is kept as written.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "robustness.md"

#: Heading of the page's section -> the printer whose rows fill its table.
SECTIONS = {
    "## Library": "tests/test_robustness_library.py",
    "## Malformed files (`explorer.data.read`)": "tests/test_robustness_files.py",
    "## Command line (`spectral-explorer`)": "tests/test_robustness_cli.py",
    "## App (`explorer.ui.state`, what the widgets and alerts see)":
        "tests/test_robustness_app.py",
}

#: The opening paragraph's counts (rewritten from the printers' comments).
COUNTS = re.compile(
    r"The tables below hold \*\*\d+ bad inputs\*\* \(\d+ through the library entries,\n"
    r"\d+ malformed files, \d+ through the CLI, \d+ through the app's\nstate\), and \d+ files")


#: What differs from run to run and machine to machine, masked by ``--check``: the
#: memory available, and the bytes of a zip file (its members' timestamps).
VOLATILE = (re.compile(r"only [\d.]+ GiB of memory is available"),
            re.compile(r"`b'PK\\x03\\x04.*?'`"))


def _masked(lines):
    out = set()
    for line in lines:
        for pattern in VOLATILE:
            line = pattern.sub("…", line)
        out.add(line)
    return out


def rows_of(script: str) -> tuple[list[str], str]:
    """(the table rows `script` prints, its closing comment)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, script], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    rows = [line for line in out if line.startswith("| ")]
    comments = [line for line in out if line.startswith("<!--")]
    if not rows or not comments:
        raise RuntimeError(f"{script} printed no table rows or no closing comment")
    return rows, comments[-1]


def replace_table(lines: list[str], heading: str, rows: list[str]) -> list[str]:
    """`lines` with the body of the first table after `heading` replaced by `rows`
    (the header row and its rule kept)."""
    start = lines.index(heading)
    head = next(i for i in range(start, len(lines)) if lines[i].startswith("| "))
    body = head + 2  # the header row and the | --- | rule
    end = body
    while end < len(lines) and lines[end].startswith("| "):
        end += 1
    return lines[:body] + rows + lines[end:]


def regenerate(text: str) -> str:
    """The page `text` with every table and count regenerated."""
    lines = text.split("\n")
    counts = {}
    for heading, script in SECTIONS.items():
        rows, comment = rows_of(script)
        lines = replace_table(lines, heading, rows)
        counts[script] = (len(rows), comment)
    library, files, cli, app = (counts[s] for s in SECTIONS.values())
    read = int(re.search(r"(\d+) files read", files[1]).group(1))
    bad_files = files[0] - read
    total = library[0] + bad_files + cli[0] + app[0]
    out = "\n".join(lines)
    opening = (f"The tables below hold **{total} bad inputs** ({library[0]} through the "
               f"library entries,\n{bad_files} malformed files, {cli[0]} through the CLI, "
               f"{app[0]} through the app's\nstate), and {read} files")
    if not COUNTS.search(out):
        raise RuntimeError("the opening paragraph's counts were not found in "
                           f"{PAGE.relative_to(ROOT)}")
    return COUNTS.sub(opening, out, count=1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="only compare: exit 1 when the page differs from the code")
    args = p.parse_args(argv)
    before = PAGE.read_text()
    after = regenerate(before)
    if args.check:
        stale = sorted(_masked(after.splitlines()) - _masked(before.splitlines()))
        for line in stale:
            print(line)
        return 1 if stale else 0
    PAGE.write_text(after)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
