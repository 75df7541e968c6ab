"""A kernel "on another host": a network namespace whose loopback the browser cannot reach.

:class:`NetworkNamespace` adds a network namespace (``ip netns add``) with only its own
loopback up, and makes the host ports it is given appear on that loopback (a unix-socket
forwarder on each side, :mod:`tests.support.forward`): the kernel inside reaches the MCP
server and the authorization server, and nothing else of the host. What listens inside (the
kernel's loopback redirect listener) is out of reach of the host, as on JupyterHub or a kernel
on another machine. :meth:`NetworkNamespace.kernelspec` writes a kernelspec whose ``argv``
runs ipykernel inside; the Jupyter server talks to it over ZMQ's ``ipc`` transport (unix
sockets, files again), so it must run with ``--KernelManager.transport=ipc``.

Needs root and ``ip`` (iproute2): :func:`require_netns` skips without them, and fails under
CI (``CI=true``). The namespace is deleted on :meth:`~NetworkNamespace.close`, which the
context manager calls after a failure too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from tests.support.ci import cannot_run
from tests.support.processes import lines_until, stop_process

__all__ = ["KERNEL_NAME", "NetworkNamespace", "require_netns"]

FORWARD = Path(__file__).with_name("forward.py")
#: The kernelspec :meth:`NetworkNamespace.kernelspec` writes.
KERNEL_NAME = "fsbroker-remote"
#: Seconds a forwarder gets to say it listens.
READY_TIMEOUT = 30.0

_numbers = itertools.count()


def require_netns(who: str = "the remote-kernel tests") -> None:
    """Skip (locally) or fail (CI) unless this process can add network namespaces."""
    if shutil.which("ip") is None:
        cannot_run("`ip` (iproute2) is missing: apt-get install -y iproute2", who)
    if os.geteuid() != 0:
        cannot_run("adding a network namespace needs root", who)


class NetworkNamespace:
    """One network namespace, from :meth:`open` to :meth:`close`.

    Parameters
    ----------
    expose
        Host ports (on ``127.0.0.1``) that appear at the same port on the namespace's loopback.
    python
        The interpreter of the forwarders and the kernel.
    """

    def __init__(self, expose: Iterable[int] = (), *, python: str = sys.executable) -> None:
        self.expose = sorted(set(expose))
        self.python = python
        self.name = f"fsbroker{os.getpid()}n{next(_numbers)}"
        self._folder: Path | None = None
        self._forwarders: list[subprocess.Popen[str]] = []
        self._added = False

    def open(self) -> NetworkNamespace:
        """Add the namespace, bring its loopback up and start the forwarders."""
        try:
            subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True, text=True)
            self._added = True
            subprocess.run(self.command(["ip", "link", "set", "lo", "up"]), check=True)
            if self.expose:
                self._folder = Path(tempfile.mkdtemp(prefix="fsbroker-ns-"))
                sockets = {port: self._folder / f"{port}.sock" for port in self.expose}
                self._start(["unix2tcp", *(f"{s}=127.0.0.1:{p}" for p, s in sockets.items())])
                self._start(["tcp2unix", *(f"127.0.0.1:{p}={s}" for p, s in sockets.items())], inside=True)
        except BaseException:
            self.close()
            raise
        return self

    def command(self, argv: list[str]) -> list[str]:
        """*argv*, run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def pids(self) -> list[int]:
        """The processes running inside the namespace now."""
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def kernelspec(self, data_dir: Path, name: str = KERNEL_NAME) -> Path:
        """Write a kernelspec *name* under *data_dir* (a Jupyter data folder) that runs ipykernel inside."""
        folder = data_dir / "kernels" / name
        folder.mkdir(parents=True, exist_ok=True)
        spec = {
            "argv": self.command([self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]),
            "display_name": "Python (remote host)",
            "language": "python",
        }
        (folder / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
        return folder

    def close(self) -> None:
        """End what still runs inside, stop the forwarders and delete the namespace (idempotent)."""
        forwarders, self._forwarders = self._forwarders, []
        for process in reversed(forwarders):
            stop_process(process)
            if process.stdout is not None:
                process.stdout.close()
        if self._added:
            # What the test started there (a kernel its server did not shut down): by pid, then gone.
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", self.name], check=False, capture_output=True)
            self._added = False
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _start(self, args: list[str], *, inside: bool = False) -> None:
        argv = [self.python, str(FORWARD), *args]
        process = subprocess.Popen(
            self.command(argv) if inside else argv,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self._forwarders.append(process)
        assert process.stdout is not None
        try:
            lines_until(process.stdout.fileno(), lambda line: line.strip() == "ready", READY_TIMEOUT)
        except Exception as exc:
            raise RuntimeError(f"the forwarder {args[0]} did not start: {exc}") from exc

    def __enter__(self) -> NetworkNamespace:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
