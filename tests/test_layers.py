"""The layers of DESIGN.md, enforced: the core imports neither Jupyter nor ``mcp``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "jupyter_fsbroker"
FORBIDDEN_IN_CORE = (
    "mcp",
    "IPython",
    "ipykernel",
    "ipywidgets",
    "jupyter_client",
    "comm",
    "traitlets",
    "anyio",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_sources_import_no_jupyter_and_no_mcp() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(_imports(path) & set(FORBIDDEN_IN_CORE))
        for path in sorted((PACKAGE / "core").rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_core_loads_no_jupyter_and_no_mcp() -> None:
    code = (
        "import sys, jupyter_fsbroker.core.broker\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN_IN_CORE!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
