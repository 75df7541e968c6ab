"""Packaging, enforced: declared dependencies, pins on the internals we read, one version, the
licence, and an import that works on every platform the package claims (macOS has no O_PATH).

``pyproject.toml`` of this checkout is read directly: the installed metadata may belong to
another checkout (an editable install) and say nothing about this one.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.env import REPO, server_env
from tests.support.sources import NAME, PACKAGE, absolute_imports, package_modules, parse

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def _normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(*extras: str) -> dict[str, Requirement]:
    listed = [
        *PROJECT["dependencies"],
        *(r for extra in extras for r in PROJECT["optional-dependencies"][extra]),
    ]
    return {_normalized(r.name): r for r in map(Requirement, listed)}


def _undeclared(folders: list[Path], declared: dict[str, Requirement]) -> dict[str, str]:
    """``{module: what is wrong}`` for each third-party module imported under *folders* whose
    distribution is not among *declared*."""
    local = {p.stem for folder in folders for p in folder.rglob("*.py")} | {NAME, "tests"}
    used: dict[str, set[str]] = defaultdict(set)
    for folder in folders:
        for path in folder.rglob("*.py"):
            for module in absolute_imports(parse(path)):
                if module not in sys.stdlib_module_names and module not in local:
                    used[module].add(path.relative_to(REPO).as_posix())
    providers = importlib.metadata.packages_distributions()
    problems = {}
    for module, paths in sorted(used.items()):
        distributions = {_normalized(d) for d in providers.get(module, ())}
        where = ", ".join(sorted(paths)[:3])
        if not distributions:
            problems[module] = f"no installed distribution provides it (imported by {where})"
        elif not distributions & set(declared):
            problems[module] = (
                f"comes from {sorted(distributions)}, which is not declared (imported by {where})"
            )
    return problems


def test_the_package_declares_every_distribution_it_imports() -> None:
    """Every third-party module the package imports comes from a distribution in ``dependencies``
    (a transitive dependency may vanish or change under us)."""
    assert _undeclared([PACKAGE], _requirements()) == {}


def test_the_test_extra_declares_what_tests_and_benchmarks_import() -> None:
    folders = [REPO / "tests", REPO / "benchmarks", REPO / "examples"]
    assert _undeclared([f for f in folders if f.is_dir()], _requirements("test")) == {}


#: Distributions whose internals the code reads, and the canary that checks them: pinned to
#: one minor series (the one the canary ran against), so that an upgrade is a deliberate change.
READ_INTERNALS = {
    "mcp": "tests/protocol/test_canary_mcp.py",
    "mcp-types": "tests/protocol/test_canary_mcp.py",
    "ipykernel": "tests/kernel/test_canary.py",
}


@pytest.mark.parametrize("distribution", sorted(READ_INTERNALS))
def test_what_we_read_the_internals_of_is_pinned_to_one_minor_series(distribution: str) -> None:
    requirement = _requirements()[distribution]
    floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    ceilings = [Version(s.version) for s in requirement.specifier if s.operator == "<"]
    assert len(floors) == 1 and len(ceilings) == 1, f"{requirement}: pin it as >=X.Y,<X.(Y+1)"
    floor, ceiling = floors[0], ceilings[0]
    assert (ceiling.major, ceiling.minor) == (floor.major, floor.minor + 1), (
        f"{requirement}: one minor series only; widen it together with {READ_INTERNALS[distribution]}"
    )
    assert (REPO / READ_INTERNALS[distribution]).is_file()
    installed = importlib.metadata.version(distribution)
    assert installed in requirement.specifier, (
        f"{distribution} {installed} is installed, outside {requirement}"
    )


@pytest.mark.parametrize("tool", ["ruff", "mypy"])
def test_lint_and_type_checkers_are_pinned_exactly(tool: str) -> None:
    """A new ruff or mypy release must not fail the checks without a change to the code."""
    requirement = _requirements("test")[tool]
    (specifier,) = requirement.specifier
    assert specifier.operator == "==", f"pin {tool} exactly, not {requirement}"
    assert importlib.metadata.version(tool) == specifier.version, (
        f"{tool} {importlib.metadata.version(tool)} is installed, the test extra pins {specifier.version}: "
        "pip install -e '.[test]'"
    )


def test_the_version_is_written_only_in_pyproject() -> None:
    version = str(Version(PROJECT["version"]))  # a valid PEP 440 version
    spelled = [
        path.relative_to(REPO).as_posix()
        for path in package_modules().values()
        if re.search(r"__version__\s*(:[^=]*)?=\s*['\"](?!0\+unknown)", path.read_text(encoding="utf-8"))
        or version in path.read_text(encoding="utf-8")
    ]
    assert spelled == []
    import jupyter_fsbroker

    assert jupyter_fsbroker.__version__ == importlib.metadata.version(NAME)


def test_the_version_says_unknown_when_the_package_is_not_installed() -> None:
    code = (
        "import importlib.metadata as metadata\n"
        "def missing(name):\n"
        "    raise metadata.PackageNotFoundError(name)\n"
        "metadata.version = missing\n"
        f"import {NAME}\n"
        f"print({NAME}.__version__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **server_env()},
        check=True,
    )
    assert out.stdout.strip() == "0+unknown"


def test_the_license_file_matches_the_declared_license() -> None:
    assert PROJECT["license"] == "BSD-3-Clause"
    assert PROJECT["license-files"] == ["LICENSE"]  # hatchling puts it in the wheel and the sdist
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License")
    assert "jupyter_fsbroker developers" in text
    assert "Neither the name of the copyright holder nor the names of its" in text  # the third clause
    (backend,) = PYPROJECT["build-system"]["requires"]
    assert Requirement(backend).specifier.contains("1.27"), "license-files needs hatchling >= 1.27"


WITHOUT_O_PATH = f"""
import os, pkgutil, importlib
del os.O_PATH  # macOS and the BSDs have no O_PATH
import {NAME}, {NAME}.core
names = [m.name for m in pkgutil.walk_packages({NAME}.__path__, "{NAME}.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def test_the_package_imports_without_o_path() -> None:
    """Every module imports on a platform without ``os.O_PATH`` (macOS), tried on Linux by hiding
    it in a subprocess. How the core resolves paths without it is tested in ``tests/core``."""
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_O_PATH],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **server_env()},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.strip()) == len(package_modules()) - 2  # all but the package and __main__
