"""The folders import-linter cannot see keep their place at the bottom of the layers.

``explorer.kernels`` and ``explorer.data`` are installed from their own folders
(``package-dir``), outside ``explorer/`` where ``lint-imports`` walks the tree
(pyproject.toml, ``[tool.importlinter]``): their imports are read here instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What the data layer may import of the library: the argument checks and the
#: memory preflight, below every stage.
DATA_MAY_IMPORT = ("explorer._validation", "explorer.memory", "explorer._backend",
                   "explorer.inputs", "explorer.params")


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside its own folder
                continue
            module = node.module or ""
            yield from (f"{module}.{alias.name}" if module == "explorer" else module
                        for alias in node.names)


@pytest.mark.parametrize("path", sorted((ROOT / "kernels").glob("*.py")), ids=lambda p: p.name)
def test_kernels_never_import_the_library(path):
    found = [name for name in _imports(path) if name.split(".")[0] == "explorer"]
    assert not found, f"{path.name} imports {found}: kernels take plain arrays and numbers"


@pytest.mark.parametrize("path", sorted((ROOT / "data").glob("*.py")), ids=lambda p: p.name)
def test_data_imports_only_the_bottom_layer(path):
    found = [name for name in _imports(path) if name.split(".")[0] == "explorer"
             and not name.startswith(DATA_MAY_IMPORT)]
    assert not found, (f"{path.name} imports {found}: the data layer may import only "
                       f"{', '.join(DATA_MAY_IMPORT)}")


def test_the_layer_contract_is_checked_in_ci():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nlint-imports\n" in ci
    assert "[tool.importlinter]" in (ROOT / "pyproject.toml").read_text()
