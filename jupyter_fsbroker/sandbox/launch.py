"""Starting a server confined: the broker's side of the sandbox.

What it is for: :func:`prepare` turns a server's command into the command
that starts it confined — the launcher (:mod:`.run`), a policy file, and a
private temporary folder that the broker creates, points ``TMPDIR`` to and
removes when the connection ends (:meth:`Launch.close`; folders left by a
broker that was killed are removed by the next one). It also decides what
happens where Landlock is unavailable: an error that says why when the
sandbox was asked for, a one-line warning when it was only the default, and
never a "sandboxed" claim for a server that is not.

What it must never do: import Jupyter, ``mcp`` or the rest of the package; run
code in the child between ``fork`` and ``exec`` (the launcher confines
itself); claim confinement without the launcher in the command.

The launcher is started as ``python -I -S -c BOOTSTRAP <this folder> --policy
FILE -- CMD…``: isolated from the server's environment (``PYTHONPATH``,
``PYTHONHOME``, user site), without ``site``, and without importing
``jupyter_fsbroker``'s ``__init__`` (which loads the core): the bootstrap loads
this folder as a package of its own. Its modules import only the standard
library and each other (a test keeps it so). ``python -m
jupyter_fsbroker.sandbox.run`` does the same for people.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from . import landlock
from .reach import plan
from .request import Sandbox, SandboxChoice

__all__ = ["Launch", "SandboxStatus", "SandboxUnavailable", "landlock_abi", "launcher_command", "prepare"]

log = logging.getLogger("jupyter_fsbroker.sandbox")

_FOLDER = os.path.dirname(os.path.abspath(__file__))
_BOOTSTRAP = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('fsbroker_sandbox', sys.argv[1] + '/__init__.py', "
    "submodule_search_locations=[sys.argv[1]])\n"
    "sys.modules[spec.name] = package = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(package)\n"
    "from fsbroker_sandbox.run import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)
_PREFIX = "fsbroker-sandbox-"
_STALE = re.compile(re.escape(_PREFIX) + r"(\d+)-")


class SandboxUnavailable(RuntimeError):
    """The sandbox was asked for and cannot be had here; the message says why."""


def landlock_abi() -> int:
    """The kernel's Landlock ABI, or :class:`SandboxUnavailable` saying why there is none."""
    try:
        return landlock.abi_version()
    except landlock.LandlockUnavailable as exc:
        raise SandboxUnavailable(str(exc.strerror or exc)) from None


@dataclass(frozen=True)
class SandboxStatus:
    """Whether a server runs confined, and how: what the connection card, dashboard and status show.

    Attributes
    ----------
    sandbox
        What is in force; ``None``: the server is not confined.
    abi
        The kernel's Landlock ABI version, when confined.
    reason
        Why a sandbox that was the default is not in force (Landlock unavailable...).
    notes
        Paths found for the server but not granted (a folder that contains a root).
    """

    sandbox: Sandbox | None = None
    abi: int | None = None
    reason: str = ""
    notes: tuple[str, ...] = ()

    @property
    def confined(self) -> bool:
        """Whether the server runs under the sandbox."""
        return self.sandbox is not None

    def describe(self) -> str:
        """One line for people: ``sandboxed (files; Landlock ABI 7)``, ``not sandboxed (…)``."""
        if self.sandbox is not None:
            extra = "" if self.abi is None or self.abi >= 6 else ", no signal or abstract-socket scoping"
            return f"sandboxed ({self.sandbox.describe()}; Landlock ABI {self.abi}{extra})"
        return f"not sandboxed ({self.reason})" if self.reason else "not sandboxed"


class Launch:
    """How to start one server: its command, what to add to its environment, and its sandbox.

    Use it as a context manager, or call :meth:`close` when the connection has
    ended (the server has exited): it removes the private temporary folder.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        status: SandboxStatus,
        private: str | None = None,
    ) -> None:
        self._command = list(command)
        self._env = dict(env)
        self._status = status
        self._private = private

    @property
    def command(self) -> list[str]:
        """The command to start (the launcher and the server's command, when confined)."""
        return list(self._command)

    @property
    def env(self) -> dict[str, str]:
        """Variables to add to the server's environment (``TMPDIR``, ``TMP``, ``TEMP``)."""
        return dict(self._env)

    @property
    def status(self) -> SandboxStatus:
        """Whether the server will run confined, and how."""
        return self._status

    @property
    def private_folder(self) -> str | None:
        """The folder this launch created (policy file and ``TMPDIR``), until :meth:`close`."""
        return self._private

    def close(self) -> None:
        """Remove the private temporary folder (and whatever the server left in it)."""
        private, self._private = self._private, None
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launcher_command(policy_file: str, command: Sequence[str]) -> list[str]:
    """The command that confines itself to *policy_file* and then executes *command*."""
    return [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, _FOLDER, "--policy", policy_file, "--", *command]


def prepare(
    command: Sequence[str],
    choice: SandboxChoice,
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    roots: Iterable[tuple[str, bool]] = (),
) -> Launch:
    """How to start *command* with the sandbox *choice*.

    Parameters
    ----------
    command
        The server's command and arguments.
    choice
        The sandbox asked for (:func:`~.request.choose`).
    env
        The whole environment the server will get (its ``PATH`` finds the command).
    cwd
        Its working directory.
    roots
        ``(path, read_only)`` for each root of the broker at start.

    Raises
    ------
    SandboxUnavailable
        The sandbox was asked for explicitly and Landlock is unavailable, or the
        network level was asked for and the kernel is older than Landlock ABI 4.
    reach.SandboxError
        The sandbox cannot be set up as asked (see :func:`~.reach.plan`).
    """
    sandbox = choice.sandbox
    if sandbox is None:
        return Launch(command, {}, SandboxStatus())
    try:
        abi = landlock_abi()
        if sandbox.connect_ports is not None and abi < 4:
            raise SandboxUnavailable(
                f"confining the network needs Landlock ABI 4 (Linux 6.7); this kernel offers ABI {abi}"
            )
    except SandboxUnavailable as exc:
        if choice.explicit:
            raise SandboxUnavailable(f"the sandbox was asked for, but {exc}") from None
        log.warning("jupyter-fsbroker: starting %s without the default sandbox: %s", command[0], exc)
        return Launch(command, {}, SandboxStatus(reason=f"sandbox unavailable: {exc}"))
    private = _private_folder()
    try:
        tmp = os.path.join(private, "tmp")
        os.mkdir(tmp, 0o700)
        found = plan(
            command,
            env=env,
            cwd=cwd,
            roots=roots,
            private_tmp=tmp,
            level=sandbox.level,
            paths=sandbox.paths,
            connect_ports=sandbox.connect_ports,
        )
        policy_file = os.path.join(private, "policy.json")
        descriptor = os.open(policy_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            f.write(found.policy.to_json())
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    for note in found.notes:
        log.info("jupyter-fsbroker sandbox of %s: %s", command[0], note)
    status = SandboxStatus(sandbox, abi, notes=found.notes)
    return Launch(
        launcher_command(policy_file, command), dict.fromkeys(("TMPDIR", "TMP", "TEMP"), tmp), status, private
    )


def _private_folder() -> str:
    """A new folder only this user can enter, named for this process; stale ones are removed first."""
    base = tempfile.gettempdir()
    _remove_stale(base)
    return tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=base)


def _remove_stale(base: str) -> None:
    """Remove private folders of brokers that are gone (killed before they could clean up)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            match = _STALE.match(entry.name)
            if match is None or _alive(int(match.group(1))):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
                    shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
