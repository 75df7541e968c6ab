"""The tool calls in flight of a notebook broker: :class:`RunningCalls`, and Cancel.

Each tool call a cell makes (``conn.call_tool(...)``, ``await conn.acall_tool(...)``)
is listed here from the moment it is submitted to the moment its cell stops
waiting (:meth:`~.calls.CallRunner.run_call`). The views read the list: the
calling cell shows ``running: analysis · watch_changes · 12 s`` with a Cancel
button once a call has run for :data:`GRACE` seconds (:class:`~..widgets.running.RunningLine`),
and the JupyterLab panel lists every call with its Cancel (``calls`` and
``cancel_call``, ``labextension/PROTOCOL.md``).

Cancel (:meth:`RunningCalls.cancel`, any thread, returns at once) cancels the
call's work on the background loop, as an interrupt would (the server is told
the request was cancelled, its pending consent requests are withdrawn), and
marks the call so that its cell raises :class:`~.tool_results.CallCancelled`,
which says who stopped it, rather than the "connection closed" of a call
cancelled by the broker closing under it.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..core.listeners import Listeners
from ..wire.timestamps import iso_utc

__all__ = ["GRACE", "CallName", "RunningCall", "RunningCalls"]

#: Seconds a call runs before its cell shows the running line: a quick call shows nothing.
GRACE = 1.0


@dataclass(frozen=True)
class CallName:
    """Which tool call: of which connection (its broker-side id and its name), and which tool."""

    connection_id: str
    server: str = ""
    tool: str = ""


@dataclass(frozen=True)
class RunningCall:
    """One tool call in flight.

    Attributes
    ----------
    id
        The call's id in this broker (``call1`` ...), as the panel's ``cancel_call`` names it.
    connection_id
        The broker-side id of the connection it runs on.
    server
        The connection's name in the notebook (``analysis``).
    tool
        The tool's name.
    started_at
        When it started (seconds since the epoch).
    started
        When it started, on the monotonic clock (for the elapsed seconds).
    """

    id: str
    connection_id: str
    server: str
    tool: str
    started_at: float
    started: float

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the call started (*now*: a :func:`time.monotonic` reading)."""
        return max(0.0, (time.monotonic() if now is None else now) - self.started)

    def text(self, now: float | None = None) -> str:
        """``running: analysis · watch_changes · 12 s``."""
        return f"running: {self.server} · {self.tool} · {int(self.elapsed(now))} s"

    def to_json(self) -> dict[str, Any]:
        """The call as the panel's state lists it (``calls[]``)."""
        return {
            "id": self.id,
            "connectionId": self.connection_id,
            "server": self.server,
            "tool": self.tool,
            "startedAt": iso_utc(self.started_at),
            "elapsed": round(self.elapsed(), 1),
        }


def _cancel(future: Future[Any]) -> None:
    """Cancel *future* and wake whoever waits for it.

    ``Future.cancel()`` alone wakes ``future.result()`` but not ``concurrent.futures.wait``,
    where the cell waits (with its consent bell): only ``set_running_or_notify_cancel`` tells
    those waiters, for a future that no executor runs.
    """
    if future.cancel():
        with contextlib.suppress(RuntimeError):  # told already (cancelled twice at once)
            future.set_running_or_notify_cancel()


@dataclass
class _InFlight:
    call: RunningCall
    future: Future[Any] | None = None
    cancelled: bool = False


class RunningCalls:
    """The registry of one notebook broker's tool calls in flight. Thread-safe.

    Listeners (:meth:`subscribe`) are told, on the thread that changed the list,
    whenever a call starts, ends or is cancelled; they must not block.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _InFlight] = {}
        self._ids = itertools.count(1)
        self._listeners: Listeners[[]] = Listeners()

    def start(self, name: CallName) -> RunningCall:
        """List a new call: *name*'s tool on its connection."""
        with self._lock:
            call = RunningCall(
                f"call{next(self._ids)}",
                name.connection_id,
                name.server,
                name.tool,
                time.time(),
                time.monotonic(),
            )
            self._entries[call.id] = _InFlight(call)
        self._tell()
        return call

    def attach(self, call_id: str, future: Future[Any]) -> None:
        """The call's work on the loop: what :meth:`cancel` cancels."""
        with self._lock:
            entry = self._entries.get(call_id)
            if entry is None:
                return
            entry.future = future
            cancel_now = entry.cancelled
        if cancel_now:  # Cancel came between start and submit
            _cancel(future)

    def cancel(self, call_id: str) -> RunningCall | None:
        """Cancel the call *call_id* (any thread, at once); the call, or ``None`` when it is gone."""
        with self._lock:
            entry = self._entries.get(call_id)
            if entry is None:
                return None
            entry.cancelled = True
            future = entry.future
        if future is not None:
            _cancel(future)
        self._tell()
        return entry.call

    def was_cancelled(self, call_id: str) -> bool:
        """Whether :meth:`cancel` was asked for the call (while it was listed)."""
        with self._lock:
            entry = self._entries.get(call_id)
            return entry is not None and entry.cancelled

    def end(self, call_id: str) -> None:
        """The call's cell stopped waiting: it leaves the list. Idempotent."""
        with self._lock:
            gone = self._entries.pop(call_id, None)
        if gone is not None:
            self._tell()

    def running(self) -> tuple[RunningCall, ...]:
        """The calls in flight, oldest first."""
        with self._lock:
            return tuple(entry.call for entry in self._entries.values())

    def subscribe(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call *listener()* whenever the list changes; returns a function that unsubscribes."""
        return self._listeners.add(listener)

    def _tell(self) -> None:
        self._listeners.notify()
