"""The public API, enforced in the spirit of httpx's ``tests/test_exported_members.py``.

Each public package's ``__all__`` lists exactly the public names its ``__init__`` defines or
takes from the package (read from the source), every listed name resolves, and each one is
documented: a docstring for classes and functions, a ``#:`` comment (or a string right
below) for constants and type aliases.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from types import ModuleType
from typing import Any

import pytest

from tests.support.sources import NAME, is_type_checking, package_modules, parse

MODULES = package_modules()

PUBLIC_PACKAGES = (
    NAME,
    f"{NAME}.core",
    f"{NAME}.protocol",
    f"{NAME}.serverkit",
    f"{NAME}.console",
    f"{NAME}.widgets",
    f"{NAME}.kernel",
)
#: Module attributes that are public although they start with an underscore.
PUBLIC_DUNDERS = ("__version__",)


def _lazy_table(node: ast.stmt) -> dict[str, str]:
    """The table of ``__getattr__, __dir__ = _lazy.lazy_exports(__name__, globals(), {name: module})``."""
    call = getattr(node, "value", None)
    if not isinstance(call, ast.Call):
        return {}
    function = call.func
    called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    table = next((a for a in call.args if isinstance(a, ast.Dict)), None)
    if called != "lazy_exports" or table is None:
        return {}
    return {
        k.value: v.value
        for k, v in zip(table.keys, table.values, strict=True)
        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
    }


def public_names(package: str) -> set[str]:
    """The public names an ``__init__`` defines or takes from its own package.

    Read from the source: classes, functions and assignments at module level, names imported
    from the package itself (relative imports), and the names of its lazy table. Imports of
    other libraries (``typing``, ``importlib``) and anything under ``if TYPE_CHECKING:`` are not
    part of its API.
    """
    tree = parse(MODULES[package])
    names: set[str] = set()

    def collect(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.ImportFrom) and node.level:
                names.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
                names.update(_lazy_table(node))
            elif isinstance(node, ast.Try):
                collect(node.body)
                for handler in node.handlers:
                    collect(handler.body)
            elif isinstance(node, ast.If) and not is_type_checking(node.test):
                collect(node.body)
                collect(node.orelse)

    collect(tree.body)
    return {n for n in names if not n.startswith("_") or n in PUBLIC_DUNDERS}


def _documented_constant(name: str) -> bool:
    """Whether a module-level assignment of *name* somewhere in the package is documented, by a
    ``#:`` comment right above it or a string right below it."""
    for path in MODULES.values():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        for index, node in enumerate(tree.body):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
                continue
            above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
            below = tree.body[index + 1] if index + 1 < len(tree.body) else None
            documented_below = isinstance(below, ast.Expr) and isinstance(below.value, ast.Constant)
            if above.startswith("#:") or documented_below:
                return True
    return False


def _undocumented(name: str, value: Any) -> bool:
    if name in PUBLIC_DUNDERS:
        return False
    if inspect.isclass(value) or inspect.isroutine(value):
        doc = value.__doc__ or ""
        generated = inspect.isclass(value) and dataclasses.is_dataclass(value) and doc.startswith(f"{name}(")
        return not doc.strip() or generated
    return not _documented_constant(name)


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_all_lists_exactly_the_public_names(package: str) -> None:
    """In the spirit of httpx's ``test_exported_members``: ``__all__`` is the package's API."""
    module = importlib.import_module(package)
    listed = set(module.__all__)
    assert len(listed) == len(module.__all__), "a name is listed twice"
    expected = public_names(package)
    assert sorted(listed - expected) == [], "listed in __all__ but not defined or imported by the __init__"
    assert sorted(expected - listed) == [], "public in the __init__ but missing from __all__"


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_every_exported_name_resolves_and_is_documented(package: str) -> None:
    module: ModuleType = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == [], f"{package}.__all__ lists names that do not resolve"
    assert set(module.__all__) <= set(dir(module))
    undocumented = [name for name in module.__all__ if _undocumented(name, getattr(module, name))]
    assert undocumented == [], (
        f"{package}: give these a docstring (a ``#:`` comment above a constant): {undocumented}"
    )
