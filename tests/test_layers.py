"""The layers of docs/design.md ("Layers"), enforced: the core imports neither Jupyter nor ``mcp``,
the wire only the standard library, the server kit nothing of the package but the wire.

Statically, from the sources; and at run time, each import in a fresh interpreter, since what a
process loads is what a user pays for (a server author installs the kit alone, the sandbox's
launcher starts every confined server).
"""

from __future__ import annotations

import ast
import fnmatch
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import run_python

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


# -- at run time: what one import loads, in a fresh interpreter ---------------------------------

#: What every import of the package may load of it: the root (lazy) and its two helpers.
ROOT = ("jupyter_fsbroker", "jupyter_fsbroker._lazy", "jupyter_fsbroker._version")
KIT = (*ROOT, "jupyter_fsbroker.serverkit", "jupyter_fsbroker.serverkit.*", "jupyter_fsbroker.wire*")
#: What the kit must not load. Not uvicorn: mcp 2.3 loads it itself, on ``import mcp`` (through
#: ``mcp.server.streamable_http`` and sse_starlette); what the kit adds to mcp is checked below.
NOT_IN_THE_KIT = (
    "watchdog",
    "portalocker",
    "platformdirs",
    "IPython",
    "ipykernel",
    "ipywidgets",
    "traitlets",
    "zmq",
    "jupyter_client",
    "comm",
)

#: ``(import, the package modules it may load, the top-level modules it must not load)``.
RUNTIME = [
    ("jupyter_fsbroker", ROOT, ("mcp", "watchdog", "portalocker", "platformdirs", "IPython")),
    ("jupyter_fsbroker.serverkit", KIT, NOT_IN_THE_KIT),
    # The kit's old path, for one release: the kit and the (lazy) protocol package, nothing more
    # (``.errors`` is a module of its own there: the kit's exceptions under their old names).
    (
        "jupyter_fsbroker.protocol.server",
        (
            *KIT,
            "jupyter_fsbroker.protocol",
            "jupyter_fsbroker.protocol.server",
            "jupyter_fsbroker.protocol.server.errors",
        ),
        NOT_IN_THE_KIT,
    ),
    (
        "jupyter_fsbroker.core.broker",
        (*ROOT, "jupyter_fsbroker.core*", "jupyter_fsbroker.wire*"),
        FORBIDDEN_IN_CORE,
    ),
    # The launcher of every confined server: the sandbox, and nothing else of the package.
    (
        "jupyter_fsbroker.sandbox.run",
        (*ROOT, "jupyter_fsbroker.sandbox*", "jupyter_fsbroker.wire*"),
        ("mcp", "watchdog"),
    ),
]


def loaded_by(statement: str) -> set[str]:
    """The modules a fresh interpreter has loaded after *statement*, by their own names: an alias
    in :data:`sys.modules` (the kit's old module names) is the module it points at."""
    code = (
        "import json, sys, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        f"{statement}\n"
        "print(json.dumps(sorted({getattr(m, '__name__', k) for k, m in list(sys.modules.items())})))\n"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-3000:]
    return set(json.loads(out.stdout))


def _package_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "jupyter_fsbroker" or m.startswith("jupyter_fsbroker.")}


@pytest.mark.parametrize(("module", "allowed", "forbidden"), RUNTIME, ids=[m for m, _, _ in RUNTIME])
def test_an_import_loads_only_its_own_layer(
    module: str, allowed: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    loaded = loaded_by(f"import {module}")
    package = _package_modules(loaded)
    assert module in package
    assert sorted(m for m in package if not any(fnmatch.fnmatchcase(m, p) for p in allowed)) == []
    assert sorted({m.split(".")[0] for m in loaded} & set(forbidden)) == []


def _third_party(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"jupyter_fsbroker"}


def test_the_root_loads_nothing_outside_the_standard_library() -> None:
    assert sorted(_third_party(loaded_by("import jupyter_fsbroker")) - _third_party(loaded_by("pass"))) == []


def test_the_kit_loads_nothing_its_requirements_do_not_load_themselves() -> None:
    """What ``import jupyter_fsbroker.serverkit`` costs beyond mcp, anyio and pybase64: nothing."""
    requirements = loaded_by("import anyio, mcp, mcp_types, pybase64, pydantic, pydantic_core")
    assert (
        sorted(_third_party(loaded_by("import jupyter_fsbroker.serverkit")) - _third_party(requirements))
        == []
    )


def test_a_public_name_of_the_root_loads_its_layer_on_first_use() -> None:
    code = (
        "import sys, jupyter_fsbroker\n"
        "before = 'jupyter_fsbroker.core.broker' in sys.modules\n"
        "from jupyter_fsbroker import Broker\n"
        "from jupyter_fsbroker.core.broker import Broker as Engine\n"
        "from jupyter_fsbroker._version import __version__\n"
        "print(before, Broker is Engine, jupyter_fsbroker.__version__ is __version__)\n"
    )
    out = run_python(code, check=True)
    assert out.stdout.split() == ["False", "True", "True"]
