"""What a test left behind: threads, child processes and open file descriptors.

:func:`snapshot` records what exists, :func:`appeared_since` what is new
since a snapshot, and :func:`wait_gone` waits (up to a timeout, returning as
soon as nothing is left) for such leftovers to go away. ``tests/conftest.py``
uses them around every test. Processes and descriptors are read from ``/proc``
(Linux); elsewhere only threads are checked.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .processes import Proc, descendants

F = TypeVar("F", bound=Callable[..., Any])

_FD_DIR = "/proc/self/fd"
#: Seconds between two looks at processes and descriptors while waiting for them to go.
_POLL = 0.02
_ENDS_WITH_EACH_USER = "_fsbroker_tests_ends_with_each_user"


@dataclass(frozen=True)
class Snapshot:
    """The threads, live descendant processes and open descriptors of this process at one moment."""

    threads: frozenset[threading.Thread]
    processes: frozenset[Proc]
    fds: frozenset[tuple[int, str]]


def _fds() -> frozenset[tuple[int, str]]:
    """``(fd, what it points to)`` for every open descriptor (empty where ``/proc`` is missing)."""
    try:
        numbers = os.listdir(_FD_DIR)
    except OSError:
        return frozenset()
    found = set()
    for name in numbers:
        try:
            target = os.readlink(f"{_FD_DIR}/{name}")
        except OSError:  # the descriptor listdir itself used, or one closed meanwhile
            continue
        found.add((int(name), target))
    return frozenset(found)


def _processes() -> frozenset[Proc]:
    if not os.path.isdir("/proc/self"):
        return frozenset()
    return frozenset(descendants(os.getpid()))


def snapshot() -> Snapshot:
    """What exists now."""
    return Snapshot(frozenset(threading.enumerate()), _processes(), _fds())


@dataclass(frozen=True)
class Leaks:
    """What appeared since a snapshot and did not go away."""

    threads: tuple[threading.Thread, ...] = ()
    processes: tuple[Proc, ...] = ()
    fds: tuple[tuple[int, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.threads or self.processes or self.fds)

    def describe(self) -> str:
        """One line per thing left behind."""
        lines = [
            f"  thread {t.name!r} ({type(t).__module__}.{type(t).__qualname__}, daemon={t.daemon})"
            for t in self.threads
        ]
        lines += [f"  child process {p.pid}: {p.command}" for p in self.processes]
        lines += [f"  file descriptor {fd} -> {target}" for fd, target in self.fds]
        return "\n".join(lines)


def appeared_since(before: Snapshot) -> Leaks:
    """What exists now and did not when *before* was taken (without waiting)."""
    threads = tuple(t for t in threading.enumerate() if t not in before.threads and t.is_alive())
    processes = tuple(p for p in _processes() if p not in before.processes and p.alive())
    fds = tuple(sorted(fd for fd in _fds() if fd not in before.fds))
    return Leaks(threads, processes, fds)


def _still_there(leaks: Leaks) -> Leaks:
    open_fds = _fds()
    return Leaks(
        tuple(t for t in leaks.threads if t.is_alive()),
        tuple(p for p in leaks.processes if p.alive()),
        tuple(fd for fd in leaks.fds if fd in open_fds),
    )


def wait_gone(leaks: Leaks, timeout: float) -> Leaks:
    """Wait up to *timeout* seconds for *leaks* to go away; return what is still there."""
    deadline = time.monotonic() + timeout
    while True:
        left = _still_there(leaks)
        remaining = deadline - time.monotonic()
        if not left or remaining <= 0:
            return left
        if left.threads:
            left.threads[0].join(remaining)  # wakes as soon as it ends
        else:
            time.sleep(min(_POLL, remaining))  # processes and descriptors: no event to wait on


def ends_with_each_user(function: F) -> F:
    """Mark a fixture function whose products end with the test or fixture that made them.

    A test that uses a module- or session-scoped fixture may leave behind what
    that fixture makes lazily (a worker thread of a pool, a pooled connection):
    its leftovers are judged when the fixture ends. A wider-scoped fixture that
    starts nothing after its own set-up, or whose products end with whoever
    asked for them (a factory), says so with this mark, so that the tests using
    it are judged at once. Put it *under* ``@pytest.fixture``.
    """
    setattr(function, _ENDS_WITH_EACH_USER, True)
    return function


def judged_at_once(fixture_function: object) -> bool:
    """Whether *fixture_function* carries :func:`ends_with_each_user`."""
    return getattr(fixture_function, _ENDS_WITH_EACH_USER, False) is True
