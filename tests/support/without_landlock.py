"""A machine without Landlock, for tests: the kernel's answer replaced inside one process only.

The sandbox asks the kernel for its Landlock ABI in one place,
``landlock._query_abi``. Tests replace it — in their own process
(:func:`simulate`), in a kernel (:func:`kernel_code`), or in a child process
they start, by running the child through this file:

``python without_landlock.py REASON -m MODULE [ARG...]``
    runs ``MODULE`` (the command line: ``jupyter_fsbroker``) as ``python -m`` would;
``python -I -S without_landlock.py REASON --launcher FOLDER [ARG...]``
    runs the sandbox launcher as :func:`jupyter_fsbroker.sandbox.launch.launcher_command`
    starts it (:func:`launcher` turns that command into this one).

In each, every query answers ``LandlockUnavailable(ENOSYS, REASON)``: what an
older kernel, macOS or a container that blocks the system calls answers. No
environment variable is involved, so nothing outside the test can make a shipped
process believe that Landlock is missing. Run as a script, this file imports
only the standard library before the module it runs (the launcher runs isolated).
"""

from __future__ import annotations

import errno
import importlib.util
import os
import runpy
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

SCRIPT = os.path.abspath(__file__)


def _unavailable(landlock: ModuleType, reason: str) -> Callable[[], int]:
    """A stand-in for ``landlock._query_abi`` that answers as a machine without Landlock."""

    def query() -> int:
        raise landlock.LandlockUnavailable(errno.ENOSYS, reason)

    return query


def simulate(monkeypatch: pytest.MonkeyPatch, reason: str) -> None:
    """Make this process's Landlock queries fail with *reason* until the test ends."""
    from jupyter_fsbroker.sandbox import landlock

    monkeypatch.setattr(landlock, "_query_abi", _unavailable(landlock, reason))


def kernel_code(reason: str) -> str:
    """A cell making the kernel's Landlock queries fail with *reason*; :data:`KERNEL_RESTORE` undoes it."""
    return (
        "import jupyter_fsbroker.sandbox.landlock as _landlock\n"
        "_real_query_abi = _landlock._query_abi\n"
        "def _no_landlock():\n"
        f"    raise _landlock.LandlockUnavailable({errno.ENOSYS}, {reason!r})\n"
        "_landlock._query_abi = _no_landlock\n"
    )


#: A cell that gives the kernel its real Landlock queries back after :func:`kernel_code`.
KERNEL_RESTORE = "_landlock._query_abi = _real_query_abi"


def module_command(reason: str, module: str, *args: str) -> list[str]:
    """``python -m MODULE ARGS`` with Landlock missing in that process."""
    return [sys.executable, SCRIPT, reason, "-m", module, *args]


def launcher(reason: str, command: Sequence[str]) -> list[str]:
    """The sandbox launcher's *command* (``python -I -S -c BOOTSTRAP FOLDER ...``), with Landlock missing."""
    at = list(command).index("-c")
    return [*command[:at], SCRIPT, reason, "--launcher", *command[at + 2 :]]


def _run_launcher(reason: str, folder: str, args: list[str]) -> int:
    # As the launcher's bootstrap does: the sandbox folder as a package of its own.
    spec = importlib.util.spec_from_file_location(
        "fsbroker_sandbox", os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    assert spec is not None and spec.loader is not None
    sys.modules[spec.name] = package = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package)
    landlock = importlib.import_module("fsbroker_sandbox.landlock")
    landlock._query_abi = _unavailable(landlock, reason)
    run = importlib.import_module("fsbroker_sandbox.run")
    return int(run.main(args))


def _run_module(reason: str, module: str, args: list[str]) -> None:
    sys.path[0] = os.getcwd()  # as "python -m" has it, not this file's folder
    from jupyter_fsbroker.sandbox import landlock

    landlock._query_abi = _unavailable(landlock, reason)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def main(argv: list[str]) -> int:
    reason, mode, target, *rest = argv
    if mode == "--launcher":
        return _run_launcher(reason, target, rest)
    if mode == "-m":
        _run_module(reason, target, rest)
        return 0
    raise SystemExit(f"usage: {os.path.basename(SCRIPT)} REASON (-m MODULE | --launcher FOLDER) [ARG...]")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
