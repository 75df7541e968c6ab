"""The package's sources, read as syntax trees: its modules and the imports that run."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from .env import REPO

#: The package's folder.
PACKAGE = REPO / "jupyter_fsbroker"
#: Its import name.
NAME = PACKAGE.name


def package_modules() -> dict[str, Path]:
    """``{dotted module name: file}`` of every module of the package (a package is its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def is_type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` tests ``TYPE_CHECKING`` (or ``typing.TYPE_CHECKING``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: module level and inside functions alike, except
    under ``if TYPE_CHECKING:`` (its ``else:`` does run)."""
    if isinstance(tree, ast.If) and is_type_checking(tree.test):
        for node in tree.orelse:
            yield from runtime_imports(node)
        return
    if isinstance(tree, ast.Import | ast.ImportFrom):
        yield tree
    for child in ast.iter_child_nodes(tree):
        yield from runtime_imports(child)


def absolute_imports(tree: ast.AST) -> Iterator[str]:
    """The top-level name of every absolute import (``import a.b``, ``from a.b import c``: ``a``),
    type-checking ones included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]
