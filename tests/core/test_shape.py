"""The core's shape: its modules import each other without a cycle, and none grows past 800 lines.

Imports made only for type checking count too: a cycle hidden behind ``TYPE_CHECKING`` is still
two concepts that cannot be understood one without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "jupyter_fsbroker" / "core"
PACKAGE = "jupyter_fsbroker.core"
MAX_LINES = 800


def core_imports(path: Path, modules: set[str]) -> set[str]:
    """The core modules *path* imports, by their names (``ops``, ``paths`` ...)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.module is not None and node.module.startswith(PACKAGE)):
                module = node.module if node.level == 1 else node.module.removeprefix(PACKAGE).lstrip(".")
                if module:
                    found.add(module.split(".")[0])
                else:  # from . import ops
                    found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.removeprefix(PACKAGE + ".").split(".")[0])
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = {path.stem: path for path in CORE.glob("*.py") if path.stem != "__init__"}
    return {name: core_imports(path, set(paths)) for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, str] = {}
    trail: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = "open"
        trail.append(name)
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                return [*trail[trail.index(other) :], other]
            if other not in state and (cycle := visit(other)) is not None:
                return cycle
        trail.pop()
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name)) is not None:
            return cycle
    return None


def test_the_graph_sees_the_imports() -> None:
    graph = import_graph()
    assert {"connection", "dispatch"} <= graph["broker"]
    assert {"context", "handlers", "params"} <= graph["dispatch"]
    assert "ops" in graph["handlers"]  # from . import ops
    assert graph["rootpath"] == {"roots"}


def test_no_import_cycle_in_the_core() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_no_core_module_is_too_long() -> None:
    lengths = {path.name: len(path.read_text().splitlines()) for path in CORE.glob("*.py")}
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}
