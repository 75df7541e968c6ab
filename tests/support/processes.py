"""Processes, read from ``/proc`` (Linux): what a test started, whether it still runs, and its end."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Proc:
    """A process, identified by its pid and its start time (so a reused pid is not mistaken for it)."""

    pid: int
    started: int
    command: str

    def alive(self) -> bool:
        """Whether it still runs (a zombie does not count: it only waits to be reaped)."""
        stat = _stat(self.pid)
        return stat is not None and stat[2] == self.started and stat[1] != "Z"

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _stat(pid: int) -> tuple[int, str, int] | None:
    """``(ppid, state, start time)`` of *pid* from ``/proc``, or ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return None
    # The command name is in parentheses and may contain anything: split after the last one.
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]), fields[0], int(fields[19])


def command_of(pid: int) -> str:
    """The command line of *pid* (``?`` when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def descendants(root: int) -> list[Proc]:
    """Every live process below *root* (children, their children ...)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is None or stat[1] == "Z":
            continue
        children.setdefault(stat[0], []).append(int(entry))
        starts[int(entry)] = stat[2]
    found: list[Proc] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found.append(Proc(pid, starts[pid], command_of(pid)))
        stack.extend(children.get(pid, ()))
    return found


def pid_alive(pid: int) -> bool:
    """Whether a process *pid* exists (a zombie counts: it was not reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_process(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """Terminate *process* and wait for it; kill it if it lingers past *timeout* seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def lines_until(fd: int, done: Callable[[str], bool], timeout: float = 30.0) -> list[str]:
    """The lines read from the pipe *fd* until one of them is *done*; fails after *timeout* seconds.

    Reads the descriptor itself, not a buffered file object over it: ``select`` on a file whose
    buffer already holds the next line would wait for bytes that have arrived long ago.
    """
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    pending = b""
    while not any(done(line) for line in seen):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no such line within {timeout} s: {seen}")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"the pipe ended first: {seen}")
        *complete, pending = (pending + chunk).split(b"\n")
        seen += [line.decode("utf-8", "replace") + "\n" for line in complete]
    return seen
