"""The JupyterLab extension's packaging: built by the install, never committed, found by JupyterLab.

``pip install`` (editable or not) builds ``labextension/`` into
``jupyter_fsbroker/labextension`` and the wheel installs it into
``share/jupyter/labextensions/jupyter_fsbroker``; the built extension carries
the version written in ``pyproject.toml``. These tests read this checkout's
build (the browser tests run it).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from tests.support.env import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SOURCE = REPO / "labextension"
BUILT = REPO / "jupyter_fsbroker" / "labextension"
NAME = "jupyter_fsbroker"


def _built() -> Path:
    if not (BUILT / "package.json").is_file():
        message = "the JupyterLab extension is not built: python -m pip install -e ."
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return BUILT


def test_the_wheel_puts_the_extension_where_jupyterlab_looks() -> None:
    shared = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared == {
        "jupyter_fsbroker/labextension": f"share/jupyter/labextensions/{NAME}",
        "labextension/install.json": f"share/jupyter/labextensions/{NAME}/install.json",
    }
    package = json.loads((SOURCE / "package.json").read_text(encoding="utf-8"))
    assert package["name"] == NAME  # the folder JupyterLab loads it from is named after it
    assert package["jupyterlab"]["outputDir"] == "../jupyter_fsbroker/labextension"
    install = json.loads((SOURCE / "install.json").read_text(encoding="utf-8"))
    assert (install["packageManager"], install["packageName"]) == ("python", NAME)
    import jupyter_fsbroker

    assert jupyter_fsbroker._jupyter_labextension_paths() == [{"src": "labextension", "dest": NAME}]


def test_the_jupyterlab_packages_are_locked_to_the_jupyterlab_series_installed() -> None:
    """The extension is built against the JupyterLab the tests run (its shared packages must match)."""
    series = importlib.metadata.version("jupyterlab").split(".")[:2]
    locked = json.loads((SOURCE / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    for name in ("application", "notebook", "statusbar", "ui-components", "translation", "core-meta"):
        version = locked[f"node_modules/@jupyterlab/{name}"]["version"]
        assert version.split(".")[:2] == series, f"@jupyterlab/{name} {version}, JupyterLab {series}"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_no_built_javascript_is_committed() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "ls-files", "jupyter_fsbroker/labextension", "labextension/lib", "labextension/node_modules"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked == []
    assert (SOURCE / "package-lock.json").is_file()  # the build's npm packages are pinned


def _pep440(npm: str) -> Version:
    """``0.1.0-dev.0`` → ``0.1.0.dev0`` (the spellings the build hook maps between)."""
    text = re.sub(
        r"-(alpha|beta|rc)\.(\d+)", lambda m: {"alpha": "a", "beta": "b", "rc": "rc"}[m[1]] + m[2], npm
    )
    text = re.sub(r"[-.]dev\.(\d+)", r".dev\1", text)
    return Version(text.replace("+post.", ".post"))


def test_the_built_extension_carries_the_version_of_pyproject() -> None:
    built = json.loads((_built() / "package.json").read_text(encoding="utf-8"))
    assert built["name"] == NAME
    assert _pep440(built["version"]) == Version(PYPROJECT["project"]["version"]), (
        f"built {built['version']}, pyproject {PYPROJECT['project']['version']}: pip install -e . rebuilds it"
    )
    assert (BUILT / "static" / "style.js").is_file()


def test_the_built_extension_ships_the_oauth_callback_page_as_written() -> None:
    """The wheel installs the built folder: the callback page must be in its static/ (served there)."""
    static = _built() / "static"
    for name in ("oauth-callback.html", "oauth-callback.js"):
        assert (static / name).read_bytes() == (SOURCE / "static" / name).read_bytes(), name
    ensured = PYPROJECT["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]["ensured-targets"]
    assert "jupyter_fsbroker/labextension/static/oauth-callback.html" in ensured  # no wheel without it


def test_jupyter_labextension_list_shows_it_enabled_and_ok(tmp_path: Path) -> None:
    built = _built()
    data = tmp_path / "data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / NAME).symlink_to(built, target_is_directory=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")},
        "JUPYTER_DATA_DIR": str(data),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    out = subprocess.run(
        [sys.executable, "-m", "jupyterlab.labextensions", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    listing = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # its colours
    assert re.search(rf"{NAME} v\S+ enabled\s+OK", listing), listing
