"""The layers of docs/design.md ("Layers"), enforced: the core imports neither Jupyter nor ``mcp``."""

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


def _module_files(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py")) if (PACKAGE / folder).is_dir() else []


def _all_imports(path: Path) -> set[str]:
    """Every module imported, absolute or relative, spelled from the package root."""
    found: set[str] = set()
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.add(".".join((*base, node.module)) if node.module else ".".join(base))
            elif node.module:
                found.add(node.module)
    return found


def test_only_the_client_and_the_kit_import_mcp() -> None:
    allowed = {"protocol", "serverkit", "examples"}
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in allowed
        and "mcp" in {m.split(".")[0] for m in _all_imports(path)}
    ]
    assert offenders == []


def test_the_server_helper_stands_alone() -> None:
    """Server authors need only the ``serverkit/`` folder and ``mcp``."""
    helper = "jupyter_fsbroker.serverkit"
    files = _module_files("serverkit")
    assert files, "the server helper's folder is missing"
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            m
            for m in _all_imports(path)
            if m.startswith("jupyter_fsbroker") and m != helper and not m.startswith(helper + ".")
        )
        for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_views_decide_nothing_and_speak_no_protocol() -> None:
    for path in _module_files("widgets") + _module_files("console"):
        imports = _all_imports(path)
        assert not [
            m for m in imports if m.startswith(("jupyter_fsbroker.protocol", "jupyter_fsbroker.kernel"))
        ], path


def test_importing_the_core_loads_no_jupyter_and_no_mcp() -> None:
    code = (
        "import sys, jupyter_fsbroker.core.broker\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN_IN_CORE!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
