"""Execute a notebook in a Jupyter kernel (nbclient), as a reader would run it; exit 1 on
any cell error. ``python .ci/run_notebook.py examples/explorer.ipynb``."""

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main(path: str) -> int:
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    cells = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in cells for o in c.outputs if o.output_type == "error"]
    for error in errors:
        print(f"{error.ename}: {error.evalue}")
    print(f"{path}: {len(cells)} code cells executed in {time.perf_counter() - t0:.1f} s, "
          f"{len(errors)} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
