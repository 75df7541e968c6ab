"""Give a server a brief, bounded chance to fetch the roots before a tool call races it.

Servers that read the roots themselves fetch them *after* the handshake:
``notifications/initialized`` (or ``notifications/roots/list_changed``) goes
out, the server asks ``roots/list`` when it gets round to it, and applies the
answer asynchronously. MCP gives it no way to hold tool calls back meanwhile,
so a call sent right after connecting (``jupyter-fsbroker connect --call``)
reaches ``@modelcontextprotocol/server-filesystem`` before its roots and is
refused ("path outside allowed directories").

:class:`RootsGate` follows what the middleware sees and lets a tool call wait,
only while the roots are *unsettled*:

* the gate is armed when ``initialized`` or ``roots/list_changed`` goes out,
  and only if some roots are shared (nothing to fetch otherwise);
* while armed, a call waits until either the server has asked ``roots/list``
  and ``settle`` seconds have passed since the answer was written (the server
  applies it asynchronously; the official filesystem server was seen to need
  tens of milliseconds, cold: ``benchmarks/README.md``, "Why the code is shaped
  this way"), or the server has been quiet for ``quiet`` seconds without
  asking (a server that does not use roots), and never longer than ``limit``
  seconds in all;
* once settled, calls pass at once: a server that asked and got its answer
  more than ``settle`` ago costs nothing, and so does every later call.

It never delays a message of the server's, never sends anything, and decides
nothing about access: it only orders the client's own tool calls. It runs on
asyncio (the middleware's loop; its hooks may be called from plain loop
callbacks, outside any task).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

__all__ = ["RootsGate", "RootsGrace"]


@dataclass(frozen=True)
class RootsGrace:
    """How long a tool call may wait for the server to take in the roots (seconds).

    Attributes
    ----------
    quiet
        A server that has sent nothing for this long since the roots were
        offered is taken not to fetch them.
    settle
        After the server's ``roots/list`` was answered, time for it to apply
        the answer before a call goes out.
    limit
        The most one call waits in all.
    """

    quiet: float = 0.15
    settle: float = 0.15
    limit: float = 1.0

    def __post_init__(self) -> None:
        if min(self.quiet, self.settle, self.limit) < 0:
            raise ValueError("RootsGrace times must not be negative")


class RootsGate:
    """The roots' state as the client sees it, and the wait it imposes on tool calls.

    Fed by the middleware (on the event loop): :meth:`offered` when
    ``initialized`` or ``roots/list_changed`` went out, :meth:`activity` for
    every message from the server, :meth:`asked` and :meth:`answered` around
    each ``roots/list``. :meth:`wait` is awaited before a tool call.

    Attributes
    ----------
    waits
        Tool calls that had to wait (at least one loop turn).
    last_outcome
        How the last wait ended: ``"settled"`` (nothing to wait for),
        ``"answered"`` (the roots were fetched and given time to apply),
        ``"quiet"`` (the server never asked), ``"limit"`` (bounded out), or
        ``None`` before any call.
    """

    def __init__(self, grace: RootsGrace | None = None) -> None:
        self.grace = grace if grace is not None else RootsGrace()
        self.waits = 0
        self.last_outcome: str | None = None
        self._armed_at: float | None = None
        self._last_activity = 0.0
        self._asked = False
        self._answered_at: float | None = None
        self._changed = asyncio.Event()

    @property
    def armed(self) -> bool:
        """Whether roots were offered and may not have been taken in yet."""
        return self._armed_at is not None

    def offered(self, shared: bool) -> None:
        """``initialized`` or ``roots/list_changed`` went out; *shared*: some roots are listed."""
        now = _now()
        self._last_activity = now
        self._armed_at = now if shared else None
        self._asked = False
        self._answered_at = None
        self._wake()

    def activity(self) -> None:
        """The server sent a message."""
        # Only a gate armed by an offer of roots reads it (an offer sets it anew); every message
        # of a busy connection comes through here.
        if self._armed_at is not None:
            self._last_activity = _now()
            self._wake()

    def asked(self) -> None:
        """The server asked ``roots/list``."""
        self._asked = True
        self._answered_at = None
        self.activity()

    def answered(self) -> None:
        """The answer to ``roots/list`` has been written to the transport."""
        self._answered_at = _now()
        self._wake()

    async def wait(self) -> str:
        """Wait (bounded) until the roots are settled; return how it ended (see :attr:`last_outcome`)."""
        waited = False
        start = _now()
        while True:
            outcome, remaining = self._state(_now(), start)
            if outcome is not None:
                self._armed_at = None  # settled for good, until roots are offered again
                if waited:
                    self.waits += 1
                self.last_outcome = outcome
                return outcome
            waited = True
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)

    def _state(self, now: float, start: float) -> tuple[str | None, float]:
        """``(outcome, None)`` when a call may go, else ``(None, seconds to wait at most)``."""
        grace = self.grace
        if self._armed_at is None:
            return "settled", 0.0
        if self._answered_at is not None:
            left = self._answered_at + grace.settle - now
            if left <= 0:
                return "answered", 0.0
        elif not self._asked:
            left = self._last_activity + grace.quiet - now
            if left <= 0:
                return "quiet", 0.0
        else:
            left = grace.limit  # asked, answer not written yet
        bound = start + grace.limit - now
        if bound <= 0:
            return "limit", 0.0
        return None, max(0.0, min(left, bound))

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


def _now() -> float:
    return asyncio.get_running_loop().time()
