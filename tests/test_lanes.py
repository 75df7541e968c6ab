"""The two lanes of the suite: plain ``pytest`` is the fast one, ``pytest -m system`` the rest.

Each check runs pytest in a subprocess, collecting only (seconds, not the suites themselves),
with this checkout's ``pyproject.toml``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SYSTEM_FOLDERS
from tests.support.env import REPO, server_env

#: One folder of each lane, and the one system file that lives in a fast folder.
SYSTEM = ("tests/browser", "tests/sandbox", "tests/kernel/test_sandbox.py")
FAST = ("tests/cli",)


def run_pytest(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **server_env()},
    )


def selected(*args: str) -> set[str]:
    """The ids of the tests a ``--collect-only`` run of :data:`SYSTEM` and :data:`FAST` selects."""
    out = run_pytest("--collect-only", "-q", *SYSTEM, *FAST, *args)
    assert out.returncode in (0, 5), out.stdout + out.stderr  # 5: nothing selected
    return {line for line in out.stdout.splitlines() if "::" in line}


@pytest.fixture(scope="module")
def everything() -> set[str]:
    """Every test of those folders, whatever its lane (``addopts`` emptied)."""
    found = selected("-o", "addopts=")
    assert {i for i in found if i.startswith(FAST)} and {i for i in found if i.startswith(SYSTEM)}
    return found


def test_the_system_folders_are_the_ones_that_exist() -> None:
    folders = {p.name for p in (REPO / "tests").iterdir() if p.is_dir()}
    assert folders >= SYSTEM_FOLDERS


def test_plain_pytest_leaves_the_system_suites_out_and_system_selects_only_them(everything: set[str]) -> None:
    fast = selected()
    system = selected("-m", "system")
    assert fast == {i for i in everything if i.startswith(FAST)}
    assert system == {i for i in everything if i.startswith(SYSTEM)}
    assert fast | system == everything


def test_the_test_script_runs_both_lanes(everything: set[str]) -> None:
    script = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    (line,) = [line for line in script.splitlines() if line.startswith("python -m pytest")]
    words = shlex.split(line)
    assert "-m" in words, f"scripts/test.sh runs pytest without -m, so the fast lane only: {line}"
    expression = words[words.index("-m", words.index("pytest")) + 1]
    assert selected("-m", expression) == everything


def test_a_misspelled_marker_fails_the_run(tmp_path: Path) -> None:
    test = tmp_path / "test_typo.py"
    test.write_text("import pytest\n\n\n@pytest.mark.sytem\ndef test_x():\n    pass\n")
    typo = run_pytest(
        "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), "--collect-only", str(test)
    )
    assert typo.returncode != 0
    assert "'sytem' not found in `markers` configuration option" in typo.stdout + typo.stderr


def test_a_test_marked_to_fail_that_passes_fails_the_run(tmp_path: Path) -> None:
    config = str(REPO / "pyproject.toml")
    (tmp_path / "test_passes.py").write_text(
        "import pytest\n\n\n@pytest.mark.xfail(reason='fixed since')\ndef test_x():\n    pass\n"
    )
    out = run_pytest("-c", config, "--rootdir", str(tmp_path), str(tmp_path / "test_passes.py"))
    assert out.returncode == 1
    assert "XPASS(strict)" in out.stdout
