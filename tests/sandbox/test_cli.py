"""``jupyter-fsbroker connect --sandbox``: the command line's sandbox, its default and its errors."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_fsbroker.sandbox.request import ENV_DEFAULT
from tests.sandbox.test_servers import SNOOPING
from tests.support import without_landlock
from tests.support.env import server_env

CLI = [sys.executable, "-m", "jupyter_fsbroker", "connect"]


def open_directly(
    path: Path, *options: str, no_landlock: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """The command line connects and calls ``open_directly``; *no_landlock*: as where Landlock is missing."""
    cli = CLI if no_landlock is None else without_landlock.module_command(no_landlock, *CLI[2:])
    return subprocess.run(
        [
            *cli,
            *options,
            "--call",
            "open_directly",
            "--args",
            json.dumps({"path": str(path)}),
            "--",
            *SNOOPING,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **server_env(), **env},
        check=False,
    )


def answer(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["content"][0]["text"])


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "secret.txt"
    path.parent.mkdir()
    path.write_text("x")
    return path


@pytest.mark.usefixtures("abi")
def test_sandbox_option_and_default(secret: Path) -> None:
    root = f"data={secret.parent}"
    assert answer(open_directly(secret, "--root", root)) == "ok"
    assert answer(open_directly(secret, "--root", root, "--sandbox")) == "EACCES"
    assert answer(open_directly(secret, "--root", root, "--sandbox-roots")) == "ok"
    assert answer(open_directly(secret, "--root", root, **{ENV_DEFAULT: "1"})) == "EACCES"
    assert answer(open_directly(secret, "--root", root, "--no-sandbox", **{ENV_DEFAULT: "1"})) == "ok"


def test_without_landlock_asked_is_an_error_and_the_default_a_warning(secret: Path) -> None:
    simulated = {"no_landlock": "no Landlock here (test)"}
    asked = open_directly(secret, "--sandbox", **simulated)
    assert asked.returncode == 2
    assert asked.stderr.startswith("jupyter-fsbroker: the sandbox was asked for, but no Landlock here (test)")
    default = open_directly(secret, **simulated, **{ENV_DEFAULT: "roots"})
    assert answer(default) == "ok"
    warnings = [line for line in default.stderr.splitlines() if "without the default sandbox" in line]
    assert len(warnings) == 1 and "no Landlock here (test)" in warnings[0]


def test_sandbox_usage_errors(secret: Path) -> None:
    for options, message in [
        (("--sandbox", "--no-sandbox"), "--no-sandbox contradicts"),
        (("--sandbox-net", "http"), "ports must be numbers"),
    ]:
        done = open_directly(secret, *options)
        assert done.returncode == 2 and message in done.stderr, done.stderr
    bad_default = open_directly(secret, **{ENV_DEFAULT: "maybe"})
    assert bad_default.returncode == 2 and f"{ENV_DEFAULT}='maybe'" in bad_default.stderr


def _option_help(parser: argparse.ArgumentParser, command: str, option: str) -> str:
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    (action,) = (a for a in commands.choices[command]._actions if option in a.option_strings)
    return " ".join(str(action.help).split())


def test_every_help_of_the_roots_level_says_it_writes_the_read_write_roots() -> None:
    """In words, what the roots level grants (test_reach): the read-write roots read and written."""
    from jupyter_fsbroker.cli import build_parser as command_line
    from jupyter_fsbroker.kernel.magics import build_parser as magic
    from jupyter_fsbroker.kernel.settings import FSBroker

    texts = {
        "jupyter-fsbroker connect --sandbox-roots": _option_help(
            command_line(), "connect", "--sandbox-roots"
        ),
        "%fsbroker connect --sandbox-roots": _option_help(magic(), "connect", "--sandbox-roots"),
        "FSBroker.sandbox": " ".join(str(FSBroker.class_traits()["sandbox"].help).split()),
    }
    for where, text in texts.items():
        assert "read and write the read-write roots directly" in text, where
        assert "no grant, consent or audit record" in text, where
        assert "read the read-only" in text, where
