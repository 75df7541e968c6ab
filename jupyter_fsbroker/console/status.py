"""The broker's state as text, for terminals and frontends without widgets.

The dashboard as plain text (:func:`status_text`, shown by :class:`TextView`
where a widget would be), what a decision means, the trash as a table, and what
every view of the broker reads the same way: what a connection shows of itself
(:class:`ConnectionView`), which events change a view (:func:`follow_broker`) and
which locks a user may release (:func:`kept_locks`). Views only: nothing here
decides anything. Nothing here imports ``ipywidgets``: the CLI and a terminal
IPython use this package alone.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.errors import ClosedError
from ..core.outcomes import outcomes
from ..core.refusals import cause_text
from .format import clock_text, duration_text, expiry_text, format_age, format_bytes, plural, printable

if TYPE_CHECKING:
    from ..core.audit import AuditRecord
    from ..core.broker import Broker
    from ..core.connection import Connection
    from ..core.consent import ConsentDecision, ConsentRequest
    from ..core.grants import Grant
    from ..core.locks import LockInfo
    from ..core.outcomes import RecordOutcome
    from ..core.retention import Retention
    from ..core.trashentry import TrashEntry
    from ..core.watch import ChangeEvent

__all__ = [
    "ConnectionView",
    "TextView",
    "decision_text",
    "era_text",
    "follow_broker",
    "grant_holder",
    "kept_locks",
    "roots_notice_text",
    "sandbox_text",
    "status_text",
    "trash_rows",
    "trash_summary",
    "trash_text",
]


@runtime_checkable
class ConnectionView(Protocol):
    """What the views need to know about one server connection, and its kill switch.

    The kernel's connection objects satisfy it (the core
    :class:`~jupyter_fsbroker.core.broker.Connection` does not: it knows
    nothing of transports). Plain attributes or read-only properties both do.

    Attributes
    ----------
    name
        The user's name for the connection (``analysis``); grants and audit
        records of the connection carry it as their ``server``.
    server_name
        The name the server reports about itself.
    transport
        ``"stdio"`` or ``"http"`` (any short word).
    protocol_version
        The MCP protocol version agreed on, or ``None`` before the handshake.
    state
        A short word: ``connecting``, ``connected``, ``closed``, ``failed`` ...

    A connection may also have ``sandbox``: an object whose ``describe()`` says
    whether its local server runs confined (``None`` for a remote server); the
    views show it where it is (:func:`sandbox_text`). And ``roots_notice``: an
    object whose ``text`` says why its server got only the shared folders'
    names (:func:`roots_notice_text`).
    """

    @property
    def name(self) -> str: ...

    @property
    def server_name(self) -> str: ...

    @property
    def transport(self) -> str: ...

    @property
    def protocol_version(self) -> str | None: ...

    @property
    def state(self) -> str: ...

    def close(self) -> object:
        """End the connection: the kill switch (revokes its grants, releases its locks)."""
        ...


def sandbox_text(view: object) -> str:
    """Whether a connection's server runs sandboxed, in words; ``""`` where that does not apply.

    ``sandboxed (files; Landlock ABI 7)``, ``not sandboxed``, ``not sandboxed (sandbox
    unavailable: …)``; empty for a remote server and for a view without ``sandbox``.
    """
    sandbox = getattr(view, "sandbox", None)
    return str(sandbox.describe()) if sandbox is not None else ""


def era_text(view: object) -> str:
    """The era of MCP a connection speaks, in words: ``2026-07-28 era (files in batches)`` or
    ``handshake era``; ``""`` for a view without ``era``, or before the handshake."""
    era = getattr(view, "era", None)
    if era == "modern":
        return "2026-07-28 era (files in batches)"
    return "handshake era" if era == "legacy" else ""


def roots_notice_text(view: object) -> str:
    """Why a connection's server was told only the shared folders' names; ``""`` when it was not.

    Read from the view's ``roots_notice`` (the kernel's connections have it):
    set when the server asked where the folders are and used no ``files/*``.
    """
    notice = getattr(view, "roots_notice", None)
    return str(notice.text) if notice is not None else ""


#: States in which a connection cannot be disconnected any more.
ENDED_STATES = frozenset({"closed", "closing", "disconnected", "failed", "stopped"})


def decision_text(request: ConsentRequest, decision: ConsentDecision) -> str:
    """What a decision means, in one line.

    Only what the broker will honour is named: approved paths that were
    requested and approvable, operations that were requested.

    Returns
    -------
    str
        ``"Approved read on data/sales for 15 min"`` or ``"Denied"``.
    """
    granted: list[tuple[str, tuple[str, ...]]] = []
    for item in request.items:
        if item.approvable and item.path in decision.approved_paths:
            asked = item.grantable(request.operations_of(item))
            ops = tuple(op for op in request.operations if op in decision.operations_for(item.path))
            if decision.path_operations:
                ops = tuple(op for op in ops if op in asked)
            if ops:
                granted.append((item.rel or item.path, ops))
    if not granted:
        return "Denied"
    if len({ops for _, ops in granted}) == 1:
        ops = granted[0][1]
        paths = ", ".join(path for path, _ in granted)
        return f"Approved {', '.join(ops)} on {paths} {duration_text(decision.duration)}"
    parts = "; ".join(f"{', '.join(ops)} on {path}" for path, ops in granted)
    return f"Approved {parts} {duration_text(decision.duration)}"


def grant_holder(grant: Grant, servers: dict[str, str] | None = None) -> str:
    """Who may use a grant: the connection's name, or ``all servers`` for a pre-approval.

    Parameters
    ----------
    grant
        The grant.
    servers
        Connection id to name, for grants that do not carry their server's name.
    """
    if grant.connection_id is None:
        return "all servers"
    return grant.server or (servers or {}).get(grant.connection_id, grant.connection_id)


def kept_locks(broker: Broker) -> tuple[LockInfo, ...]:
    """The kept locks (``keepLocked``) held now: the ones a user may need to force-release."""
    try:
        return tuple(info for info in broker.locks.held() if info.kept and info.lock_id)
    except ClosedError:
        return ()


def follow_broker(
    broker: Broker,
    changed: Callable[[], None],
    *,
    audit: Callable[[AuditRecord], None] | None = None,
    change: Callable[[ChangeEvent, Connection], object] | None = None,
) -> list[Callable[[], None]]:
    """Subscribe a view to everything that changes what it shows of *broker*.

    Parameters
    ----------
    broker
        The broker shown.
    changed
        Called (any thread, must not block) when the roots, grants, connections
        or kept locks change (a closed broker has no locks to follow).
    audit, change
        Called with each new audit record and each change event sent to a
        server, for views that keep their tails; default *changed*.

    Returns
    -------
    list
        The functions that unsubscribe. Subscribe first, then read what is
        there: nothing that happens in between is lost.
    """
    stops = [
        broker.audit.subscribe(audit if audit is not None else lambda record: changed()),
        broker.on_change(change if change is not None else lambda event, connection: changed()),
        broker.roots.subscribe(lambda generation: changed()),
        broker.grants.subscribe(changed),
        broker.on_connections(changed),
    ]
    with contextlib.suppress(ClosedError):
        stops.append(broker.locks.subscribe(changed))
    return stops


def _activity_line(record: AuditRecord, said: RecordOutcome) -> str:
    outcome = said.word
    cause = cause_text(record.cause) if record.cause else None
    detail = ": ".join(part for part in (record.error, record.reason, cause) if part)
    if detail:
        outcome += f" ({detail})"
    size = f"  {format_bytes(record.bytes)}" if record.bytes else ""
    return printable(
        f"  {clock_text(record.time)}  {record.server}  {record.method}  "
        f"{record.canonical or record.path or '-'}  {outcome}{size}"
    )


def status_text(
    broker: Broker,
    connections: Callable[[], Sequence[ConnectionView]] | Sequence[ConnectionView] = (),
    *,
    activity: int = 10,
    now: float | None = None,
) -> str:
    """The dashboard as plain text, for a terminal IPython or a log.

    Parameters
    ----------
    broker
        The broker to describe.
    connections
        The kernel's connections (or a function that returns them).
    activity
        How many of the most recent audit records to list.
    now
        The current time (for ages and expiries); default :func:`time.time`.

    Returns
    -------
    str
        Several lines: a summary, then shared folders, connections, grants,
        locks, bytes per server and recent activity.
    """
    now = time.time() if now is None else now
    views = tuple(connections() if callable(connections) else connections)
    roots = broker.roots.snapshot()
    grants = broker.grants.grants()
    locks = kept_locks(broker)
    totals = broker.audit.totals()
    servers = {conn.id: conn.server for conn in broker.connections()}
    read = sum(t["read"] for t in totals.values())
    written = sum(t["written"] for t in totals.values())

    lines = [
        "jupyter_fsbroker: "
        + ", ".join(
            (
                plural(len(roots), "shared folder"),
                plural(len(views), "connection"),
                plural(len(grants), "grant"),
                plural(len(locks), "lock"),
            )
        )
        + f"; {format_bytes(read)} read, {format_bytes(written)} written"
        + (" (broker closed)" if broker.closed else "")
    ]
    lines.append("Shared folders:")
    lines += [
        f"  {root.name}  {root.path}  ({'read-only' if root.read_only else 'read-write'})" for root in roots
    ] or ["  (none: %fsbroker root DIR)"]
    lines.append("Connections:")
    for view in views:
        lines.append(
            f"  {view.name}  server {view.server_name or '?'}  {view.transport}  "
            f"protocol {view.protocol_version or '?'}  {view.state}"
            + (f"  {era_text(view)}" if era_text(view) else "")
            + (f"  {sandbox_text(view)}" if sandbox_text(view) else "")
        )
        if roots_notice_text(view):
            lines.append(f"    roots: {roots_notice_text(view)}")
    if not views:
        lines.append("  (none)")
    lines.append("Grants:")
    lines += [
        f"  {grant_holder(grant, servers)}  {grant.path}  {', '.join(grant.operations)}  "
        f"{expiry_text(grant, now)}  [{grant.id}]"
        for grant in grants
    ] or ["  (none)"]
    lines.append("Locks:")
    lines += [
        f"  {info.path}  held by {info.owner_label}  for {format_age(now - info.since)}  [{info.lock_id}]"
        for info in locks
    ] or ["  (none)"]
    lines.append("Bytes per server:")
    lines += [
        f"  {server}  read {format_bytes(t['read'])}  written {format_bytes(t['written'])}  "
        f"({t['allowed']} allowed, {t['denied']} denied)"
        for server, t in sorted(totals.items())
    ] or ["  (nothing yet)"]
    records = broker.audit.records(limit=activity) if activity > 0 else ()
    lines.append("Recent activity (newest first):")
    said = outcomes(records)
    lines += [_activity_line(records[i], said[i]) for i in range(len(records) - 1, -1, -1)] or [
        "  (nothing yet)"
    ]
    return "\n".join(printable(line) for line in lines)


def trash_summary(entries: Sequence[TrashEntry], retention: Retention | None = None) -> str:
    """``3 entries, 1.2 MB; kept 30 d, at most 1.1 GB in all``: the trash in one line."""
    size = sum(entry.size for entry in entries)
    count = "1 entry" if len(entries) == 1 else f"{len(entries)} entries"
    text = f"{count}, {format_bytes(size)}"
    if retention is not None:
        age = format_age(retention.max_age) if math.isfinite(retention.max_age) else "with no age limit"
        text += f"; kept {age}, at most {format_bytes(retention.max_bytes)} in all"
    return text


def trash_rows(entries: Sequence[TrashEntry], now: float) -> list[tuple[str, str, str, str, str, str]]:
    """``(id, path, size, deleted, by, was at)`` of each entry, as text (not yet escaped)."""
    return [
        (
            entry.id.rpartition("-")[2],
            entry.path + ("/" if entry.is_dir else ""),
            format_bytes(entry.size),
            f"{format_age(now - entry.deleted_at)} ago",
            entry.server,
            entry.origin,
        )
        for entry in entries
    ]


def trash_text(entries: Sequence[TrashEntry], now: float, retention: Retention | None = None) -> str:
    """The trash's entries (newest first, as given) as a plain text table under a summary line.

    The ``id`` column is the last 8 characters of each id, which name an entry
    to restore (``%fsbroker trash restore ID``).
    """
    lines = [f"Trash: {trash_summary(entries, retention)}"]
    rows = trash_rows(entries, now)
    if rows:
        head = ("id", "path", "size", "deleted", "by", "was at")
        widths = [max(len(printable(row[i])) for row in [head, *rows]) for i in range(len(head) - 1)]
        for row in [head, *rows]:
            cells = [printable(cell).ljust(width) for cell, width in zip(row, widths, strict=False)]
            lines.append("  " + "  ".join([*cells, printable(row[-1])]))
    return "\n".join(lines)


class TextView:
    """Text standing in for a widget where there are no widgets (a terminal IPython).

    Its ``repr`` (what IPython shows as a cell's result) is the text *render*
    returns at that moment, so a kept reference stays up to date.

    Parameters
    ----------
    render
        Returns the text to show.
    """

    def __init__(self, render: Callable[[], str]) -> None:
        self._render = render

    def __repr__(self) -> str:
        return self._render()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self._render())
