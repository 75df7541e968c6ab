"""The dashboard's state as one JSON-ready value, for views that live outside the cell's widgets.

:func:`state_snapshot` reads a broker and the kernel's connections and returns
what the dashboard shows — shared folders, connections, grants, kept locks,
consent requests waiting, bytes per server, recent activity — as plain JSON
types with camelCase keys and a format version. A second view (a JupyterLab
sidebar talking to the kernel over its own comm) can render it and act through
the broker's public methods (``revoke``, ``force_unlock``, a connection's
``close``, ``NotebookBroker.answer_consent``).

A view: it reads, never decides, and imports no widget library.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..core.errors import ClosedError
from ..core.timestamps import iso_utc
from .text import ConnectionView, grant_holder, sandbox_text

if TYPE_CHECKING:
    from ..core.broker import Broker
    from ..core.consent import ConsentRequest

__all__ = ["SNAPSHOT_VERSION", "state_snapshot"]

#: The format of :func:`state_snapshot`'s value; raised when a key changes meaning or goes away.
SNAPSHOT_VERSION = 1


def state_snapshot(
    broker: Broker,
    connections: Callable[[], Sequence[ConnectionView]] | Sequence[ConnectionView] = (),
    *,
    pending: Sequence[ConsentRequest] = (),
    activity: int = 50,
    now: float | None = None,
) -> dict[str, Any]:
    """The dashboard's state as JSON-ready data.

    Parameters
    ----------
    broker
        The broker shown.
    connections
        The kernel's connections (or a function that returns them).
    pending
        The consent requests waiting for an answer.
    activity
        How many of the newest audit records to include.
    now
        The current time; default :func:`time.time`.

    Returns
    -------
    dict
        ``{"version", "time", "closed", "roots", "connections", "grants",
        "locks", "pending", "totals", "activity"}``.
    """
    now = time.time() if now is None else now
    views = tuple(connections() if callable(connections) else connections)
    servers = {conn.id: conn.server for conn in broker.connections()}
    try:
        locks = tuple(info for info in broker.locks.held() if info.kept and info.lock_id)
    except ClosedError:
        locks = ()
    return {
        "version": SNAPSHOT_VERSION,
        "time": iso_utc(now),
        "closed": broker.closed,
        "roots": [
            {"name": root.name, "path": root.path, "readOnly": root.read_only}
            for root in broker.roots.snapshot()
        ],
        "connections": [
            {
                "name": view.name,
                "server": view.server_name,
                "transport": view.transport,
                "protocolVersion": view.protocol_version,
                "state": view.state,
                "sandbox": sandbox_text(view) or None,
            }
            for view in views
        ],
        "grants": [
            {
                "id": grant.id,
                "holder": grant_holder(grant, servers),
                "connectionId": grant.connection_id,
                "path": grant.path,
                "operations": list(grant.operations),
                "expiresAt": None if grant.expires_at is None else iso_utc(grant.expires_at),
                "source": grant.source,
                "includeSensitive": grant.include_sensitive,
            }
            for grant in broker.grants.grants()
        ],
        "locks": [
            {
                "lockId": info.lock_id,
                "path": info.path,
                "heldBy": info.owner_label,
                "since": iso_utc(info.since),
            }
            for info in locks
        ],
        "pending": [request.to_json() for request in pending],
        "totals": broker.audit.totals(),
        "activity": [record.to_json() for record in broker.audit.records(limit=activity)]
        if activity > 0
        else [],
    }
