"""The layers of docs/design.md ("Layers"), enforced: the core imports neither Jupyter nor ``mcp``,
the wire only the standard library, the server kit nothing of the package but the wire."""

from __future__ import annotations

import ast
import json
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


def test_the_server_kit_imports_only_the_wire_of_the_package() -> None:
    """Server authors need only the ``serverkit/`` and ``wire/`` folders and ``mcp``."""
    kit, wire = "jupyter_fsbroker.serverkit", "jupyter_fsbroker.wire"
    files = _module_files("serverkit")
    assert files, "the server kit's folder is missing"
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            m
            for m in _all_imports(path)
            if m.startswith("jupyter_fsbroker")
            and not any(m == p or m.startswith(p + ".") for p in (kit, wire))
        )
        for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_wire_imports_only_the_standard_library() -> None:
    """``wire/`` is the contract both ends import: nothing outside the standard library and itself."""
    files = _module_files("wire")
    assert files, "the wire's folder is missing"
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            m
            for m in _all_imports(path)
            if not m.startswith("jupyter_fsbroker.wire") and m.split(".")[0] not in sys.stdlib_module_names
        )
        for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_wire_loads_only_the_standard_library() -> None:
    """At run time too. The package's root ``__init__`` is left out (a bare package object stands in
    for it): what is measured is what ``wire`` itself loads."""
    code = (
        "import json, sys, types\n"
        f"root = types.ModuleType('jupyter_fsbroker'); root.__path__ = [{str(PACKAGE)!r}]\n"
        "sys.modules['jupyter_fsbroker'] = root\n"
        "before = set(sys.modules)\n"
        "import jupyter_fsbroker.wire\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert "jupyter_fsbroker.wire.catalogue" in loaded
    others = [
        m
        for m in loaded
        if not m.startswith("jupyter_fsbroker.wire") and m.split(".")[0] not in sys.stdlib_module_names
    ]
    assert others == []


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
