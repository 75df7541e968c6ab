"""The shape of the package, enforced: no import cycle, no oversized module, no copied block, no
name used twice, no reference to a document that does not exist, no benchmark figure in the code.

Every check reads whatever modules exist, so it stays right when modules move. Read the
docstring of each test for the rule and how it is measured.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tests.support.env import REPO
from tests.support.sources import NAME, PACKAGE, is_type_checking, package_modules, parse, runtime_imports

MODULES = package_modules()


def _relative(path: Path) -> str:
    """*path* as the patterns below spell it: ``jupyter_fsbroker/core/paths.py``."""
    return path.relative_to(PACKAGE.parent).as_posix() if path.is_relative_to(PACKAGE) else path.name


# -- the import graph ------------------------------------------------------------------------------


def _package_of(module: str) -> str:
    """The package a module's relative imports start from (a package's ``__init__`` is its own)."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules of this package that *node* imports.

    ``from X import name`` reaches ``X.name`` when that is a module, else ``X`` (its
    ``__init__``). Parent packages, which Python imports first, are not edges: each
    package's ``__init__`` imports its own modules, so they would make every module a cycle.
    """
    if isinstance(node, ast.Import):
        found = set()
        for alias in node.names:
            parts = alias.name.split(".")
            candidates = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
            deepest = next((c for c in candidates if c in MODULES), None)
            if deepest is not None:
                found.add(deepest)
        return found
    if node.level:
        base = _package_of(module).split(".")
        base = base[: len(base) - node.level + 1]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    if source not in MODULES:
        return set()
    return {f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names}


def import_graph() -> dict[str, set[str]]:
    """``{module: the modules of this package it imports}``, from the sources."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = parse(path)
        graph[module] = set()
        for node in runtime_imports(tree):
            graph[module] |= _targets(module, node) - {module}
    return graph


def cycle_groups(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan's strongly
    connected components with more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(groups)


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``, as short as can be) through each group of :func:`cycle_groups`."""
    return [_cycle_through(graph, group) for group in cycle_groups(graph)]


def _cycle_through(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A shortest way from the group's first module back to itself."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        step = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    step.append(target)
        frontier = step
    raise AssertionError(f"no way back to {start} in {group}")


def test_the_import_graph_reads_relative_function_level_and_type_checking_imports() -> None:
    """The graph's reading of imports, on a module of known shape: the package's own ``__init__``."""
    graph = import_graph()
    # The root: ``from . import _lazy``; its entry points' function-level ``from .kernel import``
    # (the kernel package's __init__); not the ``from .core import`` under TYPE_CHECKING.
    assert graph[NAME] == {f"{NAME}._lazy", f"{NAME}.kernel"}
    kernel_imports = graph[f"{NAME}.kernel"]
    assert not {m for m in kernel_imports if m.startswith(f"{NAME}.kernel.")}, (
        "kernel/__init__ names its modules only under TYPE_CHECKING and in its lazy table"
    )
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set(), "c": {"c"}}) == []


def test_no_import_cycle() -> None:
    """No module imports, even from inside a function, a module that imports it back.

    A lazy import inside a function is still an edge: it runs whenever the function does,
    and a cycle through it is one concept leaning on another that leans back. Imports under
    ``if TYPE_CHECKING:`` are for the type checker only; the names of a lazy ``__getattr__``
    table are not imports.
    """
    graph = import_graph()
    groups = cycle_groups(graph)
    described = [
        f"{', '.join(group)} import each other, e.g. {' -> '.join(_cycle_through(graph, group))}"
        for group in groups
    ]
    assert groups == [], "import cycles:\n" + "\n".join(described)


# -- module size -----------------------------------------------------------------------------------

#: A module longer than this almost always holds more than one concept.
MAX_LINES = 600


def test_no_module_over_600_lines() -> None:
    """No module has more than 600 lines (blank lines, comments and docstrings included)."""
    sizes = {_relative(p): len(p.read_text(encoding="utf-8").splitlines()) for p in MODULES.values()}
    offenders = {path: lines for path, lines in sorted(sizes.items()) if lines > MAX_LINES}
    assert offenders == {}, f"modules over {MAX_LINES} lines: {offenders}"


# -- function size ---------------------------------------------------------------------------------

#: A function with more lines of code than this almost always does more than one thing.
MAX_FUNCTION_LINES = 80

#: The written reason that lets a function be longer: ``# long: <reason>``.
_LONG = re.compile(r"#\s*long:\s*\S")


def long_functions(paths: list[Path]) -> dict[str, int]:
    """``{"file:line name": lines of code}`` of the functions of *paths* over the limit, unexplained.

    Lines of code are the function's lines (nested functions included) that are not blank,
    a comment or a docstring. A function is explained by a ``# long: <reason>`` comment on
    its ``def`` line, on the line above it, or above its first decorator.
    """
    found: dict[str, int] = {}
    for path in paths:
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source, str(path))
        docstrings = _docstring_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            code = [n for n in span if n not in docstrings and lines[n - 1].strip()[:1] not in ("", "#")]
            if len(code) <= MAX_FUNCTION_LINES:
                continue
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            marks = {node.lineno, node.lineno - 1, first - 1} - {0}
            if not any(_LONG.search(lines[n - 1]) for n in marks):
                found[f"{_relative(path)}:{node.lineno} {node.name}"] = len(code)
    return found


def test_the_function_measure_counts_code_and_reads_reasons(tmp_path: Path) -> None:
    def function(name: str, code_lines: int, above: str = "") -> str:
        body = "\n".join(f"    x{i} = {i}  # why" for i in range(code_lines - 2))
        doc = '    """A docstring\n\n    of four lines.\n    """'
        return f"{above}\ndef {name}():\n{doc}\n\n    # a comment\n{body}\n    return x0\n"

    source = tmp_path / "mod.py"
    source.write_text(
        function("fits", 80)
        + function("too_long", 81)
        + function("explained", 81, "# long: one table, row by row")
        + function("no_reason", 81, "# long:")
        + function("decorated", 81, "# long: one table\n@staticmethod")
    )
    lines = source.read_text().splitlines()
    line_of = {name: lines.index(f"def {name}():") + 1 for name in ("too_long", "no_reason")}
    assert long_functions([source]) == {f"{source.name}:{n} {name}": 81 for name, n in line_of.items()}


def test_no_function_over_80_lines_of_code() -> None:
    """No function has more than 80 lines of code without a written reason.

    Measured as :func:`long_functions` says (docstrings, comments and blank lines aside); the
    reason is a ``# long: <reason>`` comment on the ``def`` line or the line above.
    """
    found = long_functions(list(MODULES.values()))
    assert found == {}, f"functions over {MAX_FUNCTION_LINES} lines of code without # long: {found}"


# -- names -----------------------------------------------------------------------------------------

#: Module stems that every package may have.
PACKAGE_FILES = frozenset({"__init__", "__main__"})


def module_stems() -> dict[str, list[str]]:
    """``{file stem: the modules of that stem}``, packages' own files aside."""
    stems: dict[str, list[str]] = defaultdict(list)
    for path in MODULES.values():
        if path.stem not in PACKAGE_FILES:
            stems[path.stem].append(_relative(path))
    return stems


def class_definitions() -> dict[str, list[str]]:
    """``{class name: where it is defined}``, every class of every module, nested ones included."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in MODULES.values():
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{_relative(path)}:{node.lineno}")
    return found


def test_no_two_modules_share_a_name() -> None:
    """Two modules of one name say two things with one word (which ``connection.py``?).

    File stems are compared across the whole package; ``__init__`` and ``__main__`` aside.
    """
    shared = {stem: places for stem, places in sorted(module_stems().items()) if len(places) > 1}
    assert shared == {}, "module names used twice:\n" + "\n".join(f"{s}: {p}" for s, p in shared.items())


def test_no_two_classes_share_a_name() -> None:
    """A class name means one class in the package: public and private ones, nested ones too."""
    shared = {name: places for name, places in sorted(class_definitions().items()) if len(places) > 1}
    assert shared == {}, "class names used twice:\n" + "\n".join(f"{n}: {p}" for n, p in shared.items())


def test_the_name_checks_find_what_they_look_for() -> None:
    assert module_stems()["broker"] == [f"{NAME}/core/broker.py"]
    assert len(class_definitions()["Broker"]) == 1
    (kit_error,) = class_definitions()["NotFoundError"]
    assert kit_error.startswith(f"{NAME}/serverkit/exceptions.py:")


# -- duplicated blocks -----------------------------------------------------------------------------

#: Consecutive lines that make a duplicated block.
BLOCK = 6

_TRIVIAL = re.compile(r"^[\s()\[\]{},:]*$|^(else|try|finally|pass|return|continue|break|\.\.\.):?$")


@dataclass(frozen=True)
class _Line:
    path: str
    number: int
    text: str
    trivial: bool
    owner: str | None  # the top-level definition the line belongs to


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _is_all(node: ast.stmt) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def _owners(tree: ast.Module) -> tuple[dict[int, str], set[int]]:
    """``{line: top-level definition}`` and the lines of imports and ``__all__``."""
    owners: dict[int, str] = {}
    boilerplate: set[int] = set()
    for node in tree.body:
        span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        name: str | None = None
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name
            span = range(min([node.lineno, *(d.lineno for d in node.decorator_list)]), span.stop)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            name = names[0] if names else None
            if _is_all(node):
                boilerplate.update(span)
        elif isinstance(node, ast.Import | ast.ImportFrom) or (
            isinstance(node, ast.If) and is_type_checking(node.test)
        ):
            boilerplate.update(span)
        if name is not None:
            owners.update(dict.fromkeys(span, name))
    for node in ast.walk(tree):  # imports inside functions are boilerplate too
        if isinstance(node, ast.Import | ast.ImportFrom):
            boilerplate.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return owners, boilerplate


def _normalized_lines(path: Path) -> list[_Line]:
    """The lines that carry code: stripped, without blank lines, comments and docstrings."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    docstrings = _docstring_lines(tree)
    owners, boilerplate = _owners(tree)
    lines = []
    for number, raw in enumerate(source.splitlines(), start=1):
        text = raw.strip()
        if not text or text.startswith("#") or number in docstrings:
            continue
        trivial = number in boilerplate or bool(_TRIVIAL.match(text))
        lines.append(_Line(_relative(path), number, text, trivial, owners.get(number)))
    return lines


@dataclass(frozen=True)
class Duplicate:
    """Two places with the same block of code lines."""

    first: tuple[_Line, ...]
    second: tuple[_Line, ...]

    def describe(self) -> str:
        a, b = self.first, self.second
        return (
            f"{a[0].path}:{a[0].number}-{a[-1].number} == {b[0].path}:{b[0].number}-{b[-1].number} "
            f"({len(a)} lines, starting {a[0].text!r})"
        )


def find_duplicates(paths: list[Path], size: int = BLOCK) -> list[Duplicate]:
    """Blocks of at least *size* identical code lines found twice (or more) among *paths*.

    Each file becomes its code lines (:func:`_normalized_lines`); every window of *size*
    consecutive ones is hashed, and windows made only of imports, ``__all__`` entries and
    lines of brackets or keywords are skipped. Overlapping matches are merged into one
    block per pair of places.
    """
    files = {_relative(p): _normalized_lines(p) for p in paths}
    seen: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for name, lines in files.items():
        for i in range(len(lines) - size + 1):
            window = lines[i : i + size]
            if all(line.trivial for line in window):
                continue
            digest = hashlib.sha1("\n".join(line.text for line in window).encode()).hexdigest()
            seen[digest].append((name, i))
    pairs: set[tuple[str, int, str, int]] = set()
    for places in seen.values():
        for x in range(len(places)):
            for y in range(x + 1, len(places)):
                (fa, ia), (fb, ib) = places[x], places[y]
                if fa == fb and abs(ia - ib) < size:
                    continue  # a run of repeated lines matching itself shifted
                pairs.add((fa, ia, fb, ib))
    duplicates = []
    for fa, ia, fb, ib in sorted(pairs):
        if (fa, ia - 1, fb, ib - 1) in pairs:
            continue  # inside a block that starts earlier
        length = size
        while (fa, ia + length - size + 1, fb, ib + length - size + 1) in pairs:
            length += 1
        duplicates.append(Duplicate(tuple(files[fa][ia : ia + length]), tuple(files[fb][ib : ib + length])))
    return duplicates


def test_the_duplicate_finder_finds_a_copied_block(tmp_path: Path) -> None:
    body = "\n".join(f"    total = total + {i} * scale" for i in range(7))
    one = tmp_path / "one.py"
    two = tmp_path / "two.py"
    one.write_text(f"def f(total, scale):\n    # sum\n{body}\n    return total\n")
    two.write_text(f'def g(total, scale):\n    """Doc."""\n\n{body}\n    return total\n')
    (imports := tmp_path / "imports.py").write_text("import os\nimport sys\n" * 4)
    (found,) = find_duplicates([one, two, imports])
    assert [line.number for line in found.first] == list(range(3, 11))  # the 7 sums and the return
    assert [line.number for line in found.second] == list(range(4, 12))


def test_no_duplicated_block_of_six_lines() -> None:
    """No block of six or more code lines appears twice in the package.

    Lines are compared stripped, without blank lines, comments and docstrings; blocks made
    only of imports, ``__all__`` entries and bracket or keyword lines do not count.
    """
    duplicates = find_duplicates(list(MODULES.values()))
    assert duplicates == [], "duplicated blocks:\n" + "\n".join(d.describe() for d in duplicates)


# -- documents named in the code -------------------------------------------------------------------

#: A document named by its path: an upper-case name (``PROTOCOL.md``) or a file under one of the
#: repository's folders of documents. Test data (``data/notes.md``) is neither.
DOCUMENT = re.compile(
    r"(?<![\w/.-])((?:docs|benchmarks|labextension|notebooks|examples)/[\w./-]*[\w-]\.md|[A-Z][A-Z_]*\.md)\b"
)


def named_documents(paths: list[Path]) -> dict[str, list[str]]:
    """``{document: where it is named}`` in *paths*; a document is a path from the repository's root
    or, for an upper-case name, from the naming file's folder."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in DOCUMENT.finditer(line):
                where = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
                found[match.group(1)].append(f"{where}:{number}")
    return found


def _missing(document: str, places: list[str]) -> bool:
    folders = {(REPO / place.rpartition(":")[0]).parent for place in places}
    return not (REPO / document).is_file() and not any((folder / document).is_file() for folder in folders)


def test_the_document_finder_reads_what_it_should(tmp_path: Path) -> None:
    md = ".md"  # spelled apart, so that this file names no document itself
    text = tmp_path / "x.py"
    text.write_text(f'"""See PROTOCOL{md} and docs/design{md}, "Layers"; data/notes{md} is test data."""\n')
    assert sorted(named_documents([text])) == [f"PROTOCOL{md}", f"docs/design{md}"]
    (tmp_path / f"LOCAL{md}").write_text("")
    assert not _missing(f"PROTOCOL{md}", [f"{text}:1"])
    assert not _missing(f"LOCAL{md}", [f"{text}:1"])
    assert _missing(f"NOWHERE{md}", [f"{text}:1"])


def test_every_document_the_code_names_exists() -> None:
    """A path to a ``*.md`` named in the package, the tests or the benchmarks is a file of the repository."""
    sources = [
        p
        for folder in (PACKAGE, REPO / "tests", REPO / "benchmarks")
        for p in sorted(folder.rglob("*"))
        if p.suffix in (".py", ".md") and p.is_file()
    ]
    missing = {d: places for d, places in sorted(named_documents(sources).items()) if _missing(d, places)}
    assert missing == {}, "documents named but not in the repository:\n" + "\n".join(
        f"{d}: {', '.join(p)}" for d, p in missing.items()
    )


# -- benchmark figures -----------------------------------------------------------------------------

#: A measured figure: a cost below a second, a throughput, page faults, a speed-up, a share in
#: per cent, a duration given as approximate (``~1.4 s``). Settings and timeouts (``30 s``,
#: ``2 MiB``) are not figures: they are what the code does, not what a run measured.
FIGURE = re.compile(
    r"\d[\d.,]*(?:\s*(?:-|\u2013|to)\s*\d[\d.,]*)?\s*(?:µs|ms)\b"
    r"|\d[\d.,]*\s*[kMG]i?B/s\b"
    r"|\d[\d,]*\s+page faults"
    r"|\d[\d.]*\s*(?:times|x)\s+(?:faster|slower|binascii)"
    r"|\d[\d.]*\s*%\s*(?:more|less|faster|slower)\b"
    r"|~\s*\d[\d.,]*(?:\s*-\s*\d[\d.,]*)?\s*s\b"
)


def docstrings_and_comments(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every docstring and comment of a module."""
    source = path.read_text(encoding="utf-8")
    found = [
        (node.body[0].lineno, node.body[0].value.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    ]
    found += [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    return found


def test_the_figure_pattern_tells_figures_from_settings() -> None:
    figures = [
        "~34 ms for one message",
        "0.1 to 0.8 ms per lock",
        "90 µs",
        "115 MB/s",
        "~1,100 page faults",
        "25 times faster",
        "~40 % more CPU",
        "compiles for ~1.4 s",
        "20-50 ms, cold",
    ]
    settings = [
        "wait 2 s, SIGTERM",
        "timeout=30.0 s",
        "2 MiB chunks",
        "16 GiB per second",
        "at most 8 free",
        "``12.3 MB`` (like MB/s)",
        "retried 3 times",
        "50 % of the budget",
    ]
    assert [f for f in figures if not FIGURE.search(f)] == []
    assert [s for s in settings if FIGURE.search(s)] == []


def test_no_benchmark_figure_in_docstrings_and_comments() -> None:
    """Measured figures live in ``benchmarks/README.md`` ("Why the code is shaped this way"), with how
    they were measured; the code says the reason in words and points there."""
    found = [
        f"{_relative(path)}:{line}: {match.group(0)!r}"
        for path in MODULES.values()
        for line, text in docstrings_and_comments(path)
        for match in FIGURE.finditer(text)
    ]
    assert found == [], "figures in docstrings or comments:\n" + "\n".join(found)


# -- the core's dispatch ---------------------------------------------------------------------------


def test_a_handler_gets_no_way_back_into_the_broker() -> None:
    """``Connection → Dispatch → handler(ctx)``: what a ``files/*`` handler may use is its
    :class:`RequestContext` (the connection's state, the shared state, params, note, limits,
    progress); neither the context nor the connection state it holds offers the broker, and no
    handler reads a ``.broker`` attribute of anything."""
    from jupyter_fsbroker.core.context import ConnectionState, RequestContext

    fields = set(RequestContext.__dataclass_fields__)
    assert fields == {"conn", "services", "params", "note", "limits", "progress"}
    assert not hasattr(RequestContext, "broker")
    state = {name for name in vars(ConnectionState) if not name.startswith("_")}
    assert "broker" not in state and {"access", "rate", "uploads"} <= state
    handlers = MODULES["jupyter_fsbroker.core.handlers"]
    reaching = [
        f"{_relative(handlers)}:{node.lineno}"
        for node in ast.walk(parse(handlers))
        if isinstance(node, ast.Attribute) and node.attr == "broker"
    ]
    assert reaching == [], "handlers reaching the broker: " + ", ".join(reaching)
    assert "conn.broker" not in handlers.read_text()
