"""Packaging, enforced: declared dependencies, pins on the internals we read, one version, the
licence, an import that works on every platform the package claims (macOS has no O_PATH), and the
two distributions: the server kit alone (``packaging/serverkit/``) and the rest, which requires it.

``pyproject.toml`` of this checkout is read directly: the installed metadata may belong to
another checkout (an editable install) and say nothing about this one.
"""

from __future__ import annotations

import email
import email.message
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.env import REPO, run_python
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
    or in one of its own extras (``keyring``, imported where it is installed), not the test extra
    (a transitive dependency may vanish or change under us)."""
    own_extras = [extra for extra in PROJECT["optional-dependencies"] if extra != "test"]
    assert _undeclared([PACKAGE], _requirements(*own_extras)) == {}


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
        "pip install -e ./packaging/serverkit -e '.[test]'"
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
    out = run_python(code, timeout=60, check=True)
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
    out = run_python(WITHOUT_O_PATH)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.strip()) == len(package_modules()) - 2  # all but the package and __main__


# -- two distributions: the server kit alone, and the rest ---------------------------------------

KIT_PROJECT = REPO / "packaging" / "serverkit"
KIT = tomllib.loads((KIT_PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
#: The package's folders that are the kit's distribution, not the main one.
KIT_FOLDERS = ("serverkit", "wire")
#: Distributions a kit-only install must not bring, even indirectly: Jupyter, and what the core and
#: the notebook side need.
NOT_FOR_THE_KIT = frozenset(
    _normalized(name)
    for name in (
        "ipykernel",
        "ipython",
        "ipywidgets",
        "traitlets",
        "pyzmq",
        "comm",
        "jupyter_client",
        "jupyter_core",
        "jupyterlab",
        "notebook",
        "watchdog",
        "portalocker",
        "platformdirs",
        NAME,
    )
)


def _build_wheel(project: Path, out: Path, **env: str) -> Path:
    """A wheel of *project*, built by its backend (hatchling) in a subprocess, without the network."""
    done = subprocess.run(
        [sys.executable, "-c", f"from hatchling.build import build_wheel; print(build_wheel({str(out)!r}))"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def kit_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(KIT_PROJECT, tmp_path_factory.mktemp("kit"))


@pytest.fixture(scope="module")
def main_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Without the build hooks: they build the JupyterLab extension with npm, which is not what
    # these tests are about (the file selection and the metadata are).
    return _build_wheel(REPO, tmp_path_factory.mktemp("main"), HATCH_BUILD_NO_HOOKS="true")


def _files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {
            name for name in archive.namelist() if not name.split("/")[0].endswith((".dist-info", ".data"))
        }


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def _sources(folders: tuple[str, ...]) -> set[str]:
    """The checkout's files of the package under *folders*, as a wheel names them."""
    return {
        path.relative_to(REPO).as_posix()
        for folder in folders
        for path in (PACKAGE / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_the_kit_wheel_holds_exactly_the_kits_folders(kit_wheel: Path) -> None:
    assert _sources(KIT_FOLDERS), "the kit's folders are missing"
    assert _files(kit_wheel) == _sources(KIT_FOLDERS)  # and so no jupyter_fsbroker/__init__.py


def test_the_main_wheel_holds_the_rest_of_the_package(main_wheel: Path, kit_wheel: Path) -> None:
    main = _files(main_wheel)
    assert not {f for f in main if f.startswith(tuple(f"{NAME}/{folder}/" for folder in KIT_FOLDERS))}
    modules = {path.relative_to(REPO).as_posix() for path in package_modules().values()}
    assert {f for f in main | _files(kit_wheel) if f.endswith(".py")} == modules  # between them, all of it


def test_the_kit_declares_every_distribution_it_imports_and_no_other() -> None:
    """In ``dependencies`` or one of the kit's extras (``fsspec``, imported only when asked for)."""
    extras = [r for requirements in KIT.get("optional-dependencies", {}).values() for r in requirements]
    declared = {_normalized(Requirement(r).name): Requirement(r) for r in [*KIT["dependencies"], *extras]}
    folders = [PACKAGE / folder for folder in KIT_FOLDERS if (PACKAGE / folder).is_dir()]
    assert _undeclared(folders, declared) == {}
    providers = importlib.metadata.packages_distributions()
    imported = {
        _normalized(d)
        for folder in folders
        for path in folder.rglob("*.py")
        for module in absolute_imports(parse(path))
        for d in providers.get(module, ())
    }
    assert set(declared) - imported == set()


def _closure(requirements: list[str]) -> set[str]:
    """The distributions a list of requirements installs, as the installed metadata says."""
    found: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = _normalized(requirement.name)
        if name in found or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        found.add(name)
        todo.extend(Requirement(r) for r in importlib.metadata.requires(name) or ())
    return found


def test_the_kit_brings_no_jupyter_package(kit_wheel: Path) -> None:
    # The extras' requirements carry an ``extra == ...`` marker: what a plain install brings has none.
    requires = [r for r in _metadata(kit_wheel).get_all("Requires-Dist") or [] if not Requirement(r).marker]
    assert sorted(_normalized(Requirement(r).name) for r in requires) == sorted(
        _normalized(Requirement(r).name) for r in KIT["dependencies"]
    )
    assert sorted(_closure(requires) & NOT_FOR_THE_KIT) == []


def test_the_kit_pins_what_it_shares_with_the_main_distribution_alike() -> None:
    main = _requirements()
    for requirement in map(Requirement, KIT["dependencies"]):
        assert main[_normalized(requirement.name)].specifier == requirement.specifier, requirement


def test_the_two_distributions_have_one_version(kit_wheel: Path, main_wheel: Path) -> None:
    version = PROJECT["version"]
    assert "version" not in KIT and KIT["dynamic"] == ["version"]  # read from PROJECT by its build
    assert _metadata(kit_wheel)["Version"] == _metadata(main_wheel)["Version"] == version
    pin = _requirements()[_normalized(KIT["name"])]
    assert str(pin.specifier) == f"=={version}"
    assert f"{KIT['name']}=={version}" in (_metadata(main_wheel).get_all("Requires-Dist") or [])


def test_the_kit_carries_the_repositorys_license() -> None:
    assert KIT["license"] == PROJECT["license"] and KIT["license-files"] == ["LICENSE"]
    assert (KIT_PROJECT / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()


KIT_ALONE = f"""
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
import {NAME}.serverkit
print(json.dumps({{
    "modules": sorted(m for m in sys.modules if m == "{NAME}" or m.startswith("{NAME}.")),
    "namespace": getattr({NAME}, "__file__", None) is None,
    "kit": {NAME}.serverkit.__file__,
}}))
"""


def test_the_kit_wheel_alone_imports_and_loads_nothing_else_of_the_package(
    kit_wheel: Path, tmp_path: Path
) -> None:
    """Unpacked alone, with only the interpreter's installed distributions beside it (``-S``: no
    ``.pth`` file, so not the editable install of this checkout either)."""
    with zipfile.ZipFile(kit_wheel) as archive:
        archive.extractall(tmp_path / "kit")
    installed = list(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))
    if any((Path(p) / NAME / "__init__.py").is_file() for p in installed):
        pytest.skip(f"{NAME} is installed here as files, whose __init__.py would hide the kit's namespace")
    paths = [str(tmp_path / "kit"), *installed]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-S", "-c", KIT_ALONE, json.dumps(paths)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stdout)
    assert loaded["namespace"]  # no jupyter_fsbroker/__init__.py: a namespace package
    assert Path(loaded["kit"]).is_relative_to(tmp_path / "kit")
    assert f"{NAME}.serverkit" in loaded["modules"]
    assert [m for m in loaded["modules"] if m != NAME and m.split(".")[1] not in KIT_FOLDERS] == []
