"""What the JupyterLab panel is shown: a notebook broker's state as one JSON-ready snapshot.

:class:`PanelState` builds on :func:`~..snapshot.state_snapshot`, the one
serialisation of the broker's roots, connections, grants, kept locks, consent
requests waiting and activity (also ``broker.snapshot()``), which reads a
:class:`~..notebook.NotebookBroker` through its public API only. It adds the two
things the broker does not keep: the tail of the change feed, and how recent
consent requests ended (answered here, in the notebook, timed out or
withdrawn), so the panel can say so. It never decides or changes anything, and
every method is safe from any thread.
"""

from __future__ import annotations

import collections
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._version import __version__
from ...console.consent_text import TIMED_OUT, ending, withdrawn_text
from ...console.status import decision_text, follow_broker
from ...core.connection import Connection
from ...core.consent import ConsentDecision, ConsentRequest
from ...core.watch import ChangeEvent
from ...wire.timestamps import iso_utc
from .. import ipykernel_compat as ipk
from ..prompting import Ask, KernelConsenter
from ..snapshot import state_snapshot

__all__ = ["SIGNING_IN", "Outcome", "PanelState"]

#: The id prefix of a connection entry that stands for a sign-in before its connection exists.
SIGNING_IN = "signing-in:"

#: How many change events, audit records and consent outcomes a snapshot carries.
TAIL = 50


@dataclass(frozen=True)
class Outcome:
    """How one consent request ended."""

    id: str
    server: str
    outcome: str  # approved, denied, timeout, withdrawn
    text: str
    answered_by: str  # panel, notebook, broker
    at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "server": self.server,
            "outcome": self.outcome,
            "text": self.text,
            "answeredBy": self.answered_by,
            "at": iso_utc(self.at),
        }


def _outcome(ask: Ask, answered_here: bool) -> Outcome:
    request, future = ask.request, ask.future
    now = time.time()
    how = ending(request, future)
    if how == "timeout":
        return Outcome(request.id, request.server, "timeout", TIMED_OUT, "broker", now)
    if how == "withdrawn":
        return Outcome(request.id, request.server, "withdrawn", withdrawn_text(future), "broker", now)
    if how == "failed":
        return Outcome(request.id, request.server, "denied", "Denied", "broker", now)
    text = decision_text(request, future.result())
    kind = "approved" if text != "Denied" else "denied"
    return Outcome(request.id, request.server, kind, text, "panel" if answered_here else "notebook", now)


def _add_sign_ins(connections: list[dict[str, Any]], broker: Any) -> None:
    """Each connection's ``auth``, and an entry for each sign-in whose connection is not open yet."""
    sign_ins = getattr(broker, "sign_ins", None)
    if sign_ins is None:
        return
    for entry in connections:
        entry["auth"] = sign_ins.auth_json(entry["name"])
    open_names = {e["name"] for e in connections if e["state"] not in ("closed", "closing")}
    for sign_in in sign_ins.waiting():
        if sign_in.server in open_names:
            continue
        connections.append(
            {
                "id": SIGNING_IN + sign_in.id,
                "name": sign_in.server,
                "serverName": None,
                "server": None,
                "transport": "http",
                "target": sign_in.url,
                "state": "connecting",
                "closeReason": None,
                "protocolVersion": None,
                "sandbox": None,
                "confined": None,
                "auth": sign_ins.auth_json(sign_in.server),
            }
        )


class PanelState:
    """The snapshot source of one notebook broker.

    Parameters
    ----------
    broker
        The notebook broker (a :class:`~..notebook.NotebookBroker`).
    changed
        Called (any thread, must not block) whenever something a snapshot
        shows may have changed.
    """

    def __init__(self, broker: Any, changed: Callable[[], None]) -> None:
        self._broker = broker
        self._changed = changed
        self._lock = threading.Lock()
        self._changes: collections.deque[tuple[str, ChangeEvent]] = collections.deque(maxlen=TAIL)
        self._outcomes: collections.deque[Outcome] = collections.deque(maxlen=TAIL)
        self._answered_here: set[str] = set()
        # Each request is followed once, whoever sees it first: the consenter tells its listeners on
        # the views' thread, which may come after the request is listed as waiting and answered here.
        self._followed: weakref.WeakSet[Ask] = weakref.WeakSet()
        self._kernel = ipk.get_kernel()
        self._closed = False
        self._unsubscribe = follow_broker(broker.core, changed, change=self._on_change)
        sign_ins = getattr(broker, "sign_ins", None)
        if sign_ins is not None:
            self._unsubscribe.append(sign_ins.subscribe(lambda sign_in: changed()))
        running = getattr(broker, "running_calls", None)
        if running is not None:
            self._unsubscribe.append(running.subscribe(changed))
        consenter = broker.consenter
        self._consenter = consenter if isinstance(consenter, KernelConsenter) else None
        if self._consenter is not None:
            self._unsubscribe.append(self._consenter.subscribe(self._on_ask))
            for ask in self._consenter.asks():
                if not ask.future.done():
                    self._follow(ask)

    # -- events (any thread) -------------------------------------------------------------------

    def _on_change(self, event: ChangeEvent, connection: Connection) -> None:
        with self._lock:
            if self._closed:
                return
            self._changes.append((connection.server, event))
        self._changed()

    def _on_ask(self, ask: Ask) -> None:
        self._follow(ask)
        self._changed()

    def _follow(self, ask: Ask) -> None:
        """Record how *ask* ends (at once if it has), unless it is followed already."""
        with self._lock:
            if self._closed or ask in self._followed:
                return
            self._followed.add(ask)
        ask.future.add_done_callback(lambda future: self._ended(ask))

    def _ended(self, ask: Ask) -> None:
        if self._record(ask):
            self._changed()

    def _record(self, ask: Ask) -> bool:
        """Record how *ask* ended, once; whether this call recorded it."""
        with self._lock:
            request_id = ask.request.id
            if self._closed or any(outcome.id == request_id for outcome in self._outcomes):
                return False
            here = request_id in self._answered_here
            self._answered_here.discard(request_id)
            self._outcomes.append(_outcome(ask, here))
            return True

    # -- what the panel may do -----------------------------------------------------------------

    def pending(self) -> tuple[ConsentRequest, ...]:
        """The consent requests waiting for an answer, oldest first."""
        return tuple(self._broker.pending_consents())

    def outcome_of(self, request_id: str) -> Outcome | None:
        """How the request *request_id* ended, if it did recently."""
        with self._lock:
            return next((o for o in reversed(self._outcomes) if o.id == request_id), None)

    def answer(self, request: ConsentRequest, decision: ConsentDecision) -> bool:
        """Answer *request* with *decision*; ``False`` when something else answered first.

        Once this returns, :meth:`outcome_of` knows how the request ended.
        """
        asks = self._consenter.asks() if self._consenter is not None else []
        for ask in asks:
            if ask.request.id == request.id:
                self._follow(ask)  # before answering: the outcome is recorded as the answer resolves it
        with self._lock:
            self._answered_here.add(request.id)
        if self._broker.answer_consent(request.id, decision):
            return True
        with self._lock:
            self._answered_here.discard(request.id)
        return False

    # -- the snapshot --------------------------------------------------------------------------

    def snapshot(self, *, used_subshell: bool) -> dict[str, Any]:
        """Everything the panel shows (``PROTOCOL.md``, "The state"), JSON-ready.

        The broker's state as :func:`~..snapshot.state_snapshot` serialises it
        (connections by name, the pre-approvals first), with the waiting
        requests under the protocol's name ``consents``, plus what the panel
        alone follows.
        """
        broker = self._broker
        pending = self.pending()
        # A request no longer waiting has its outcome in the same snapshot: its future is done
        # before the callback that records the outcome has run (on another thread), and a view
        # that saw it go without one could say only that it no longer waits.
        with self._lock:
            followed = list(self._followed)
        for ask in followed:
            if ask.future.done():
                self._record(ask)
        with self._lock:
            changes = list(self._changes)
            outcomes = list(self._outcomes)
        connections = sorted(broker.connections.values(), key=lambda conn: conn.name)
        state = state_snapshot(broker.core, connections, pending=pending, activity=TAIL)
        _add_sign_ins(state["connections"], broker)
        state["grants"].sort(key=lambda g: (g["connectionId"] is not None, g["server"], g["path"]))
        state["consents"] = state.pop("pending")
        state.update(
            packageVersion=__version__,
            closed=bool(broker.closed),  # the notebook broker's: it is closed before its core
            outcomes=[outcome.to_json() for outcome in outcomes],
            changes=[
                {
                    "at": event.timestamp,
                    "server": server,
                    "path": event.path,
                    "event": event.event,
                    "oldPath": event.old_path,
                }
                for server, event in changes
            ],
            subshells={"supported": ipk.supports_subshells(self._kernel), "used": used_subshell},
            calls=[call.to_json() for call in self.calls()],
        )
        return state

    def calls(self) -> tuple[Any, ...]:
        """The tool calls in flight (:class:`~..running_calls.RunningCall`), oldest first."""
        running = getattr(self._broker, "running_calls", None)
        return running.running() if running is not None else ()

    def signing_in_name(self, placeholder_id: str) -> str | None:
        """The connection name of a placeholder entry's id (a sign-in before its connection)."""
        sign_ins = getattr(self._broker, "sign_ins", None)
        sign_in = sign_ins.find(placeholder_id.removeprefix(SIGNING_IN)) if sign_ins is not None else None
        return sign_in.server if sign_in is not None else None

    def transitional(self) -> bool:
        """Whether a connection is in transit: connecting or closing, or opened in the core and not yet
        listed by the notebook broker (these changes come without an event)."""
        listed = self._broker.connections.values()
        if any(conn.state in ("connecting", "closing") for conn in listed):
            return True
        return bool({c.id for c in self._broker.core.connections()} - {conn.id for conn in listed})

    def close(self) -> None:
        """Stop following the broker. Idempotent."""
        with self._lock:
            self._closed = True
            unsubscribe, self._unsubscribe = self._unsubscribe, []
        for stop in unsubscribe:
            stop()
