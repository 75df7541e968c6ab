"""Fixtures of the sandbox tests: Landlock must be there (CI fails without it), and a way to run confined."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from jupyter_fsbroker.sandbox import Sandbox, choose, prepare
from jupyter_fsbroker.sandbox.launch import Launch, SandboxUnavailable, landlock_abi
from tests.support.ci import cannot_run
from tests.support.env import server_env

PROBE = Path(__file__).resolve().parent / "probe.py"


@pytest.fixture(scope="session")
def abi() -> int:
    """The kernel's Landlock ABI; skips (fails under CI) where there is none."""
    try:
        return landlock_abi()
    except SandboxUnavailable as exc:
        cannot_run(f"SANDBOX TESTS NOT RUN: Landlock is unavailable here: {exc}")


def environment(**extra: str) -> dict[str, str]:
    """The environment a test's confined process gets: this one, importing this checkout."""
    return {**os.environ, **server_env(), **extra}


def run_launch(
    launch: Launch, command: Sequence[str] | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**environment(**extra), **launch.env}
    return subprocess.run(
        launch.command if command is None else command,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def probe(
    actions: Iterable[str],
    *,
    sandbox: Sandbox | None,
    roots: Iterable[tuple[str | Path, bool]] = (),
    **extra: str,
) -> dict[str, str]:
    """Run :mod:`probe` with *actions*, confined by *sandbox* (``None``: not confined)."""
    command = [sys.executable, str(PROBE), *actions]
    env = environment(**extra)
    root_list = [(str(p), ro) for p, ro in roots]
    with prepare(command, choose(sandbox) if sandbox else choose(False), env=env, roots=root_list) as launch:
        if sandbox is not None:
            assert launch.status.confined, launch.status
        done = run_launch(launch, **extra)
    assert done.returncode == 0, done.stderr
    results: dict[str, str] = json.loads(done.stdout)
    return results
