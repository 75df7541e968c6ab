"""The notebook broker's state as one JSON-ready value, for the views that live outside the cells.

:func:`state_snapshot` reads a core broker, the kernel's connections and the
consent requests waiting, and returns what the dashboard shows — shared
folders, connections, grants, kept locks, consent requests waiting, bytes per
server, recent activity — as plain JSON types with camelCase keys. It is the one
serialisation of that state: :meth:`NotebookBroker.snapshot
<jupyter_fsbroker.kernel.notebook.NotebookBroker.snapshot>` returns it as it is,
and the JupyterLab panel's state (:mod:`.panel.state`,
``labextension/PROTOCOL.md``) is this value plus what only the panel follows
(the change feed's tail, how consent requests ended). A view acts through the
broker's public methods (``revoke``, ``force_unlock``, a connection's
``close``, ``NotebookBroker.answer_consent``).

Two formats grew from this state, and each promises its keys until its version
changes: format :data:`SNAPSHOT_VERSION` of ``broker.snapshot()`` and version 1
of the panel protocol. Both let a field be added, neither lets one go, so every
entry carries the keys of both; where they named one thing twice, both names
stay: a connection's ``serverName`` and ``server`` (the name the server gives
itself), a lock's ``id`` and ``lockId``, ``server`` and ``heldBy``, an audit
record's ``at`` and ``time``.

Why the kernel layer: this is no widget — it displays nothing and imports no
widget library — but the data behind two kernel interfaces, ``broker.snapshot()``
and the panel's comm; what it reads beyond the core (a connection's id, target,
transport, close reason and sandbox, the requests the kernel's consenter holds)
is the kernel's, and the core knows nothing of transports. The words it shares
with the dashboard (who holds a grant, whether a server is sandboxed) come from
:mod:`..console.status`, and an activity entry's ``outcome`` (``{"word", "tone"}``)
from :mod:`..core.outcomes`, so every view says the same. It reads, and never decides.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..console.status import ConnectionView, grant_holder, kept_locks, sandbox_text
from ..core.outcomes import outcomes
from ..wire.timestamps import iso_utc

if TYPE_CHECKING:
    from ..core.audit import AuditRecord
    from ..core.broker import Broker
    from ..core.consent import ConsentRequest
    from ..core.grants import Grant
    from ..core.locks import LockInfo
    from ..core.outcomes import RecordOutcome

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
    """The broker's state as JSON-ready data.

    Parameters
    ----------
    broker
        The broker shown.
    connections
        The kernel's connections (or a function that returns them), in the
        order to list them. Besides what a :class:`~..console.status.ConnectionView`
        has, a connection may have ``id``, ``target`` and ``close_reason``
        (the kernel's connections do); the keys are ``None`` where it has not.
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
    return {
        "version": SNAPSHOT_VERSION,
        "time": iso_utc(now),
        "closed": broker.closed,
        "roots": [
            {"name": root.name, "path": root.path, "readOnly": root.read_only}
            for root in broker.roots.snapshot()
        ],
        "connections": [_connection(view) for view in views],
        "grants": [_grant(grant, servers) for grant in broker.grants.grants()],
        "locks": [_lock(info) for info in kept_locks(broker)],
        "pending": [request.to_json() for request in pending],
        "totals": broker.audit.totals(),
        "activity": _activity(broker.audit.records(limit=activity)) if activity > 0 else [],
    }


def _connection(view: ConnectionView) -> dict[str, Any]:
    return {
        "id": getattr(view, "id", None),
        "name": view.name,
        "serverName": view.server_name,
        "server": view.server_name,
        "transport": view.transport,
        "target": getattr(view, "target", None),
        "state": view.state,
        "closeReason": getattr(view, "close_reason", None),
        "protocolVersion": view.protocol_version,
        "era": getattr(view, "era", None),
        "sandbox": sandbox_text(view) or None,
        "confined": _confined(view),
    }


def _confined(view: ConnectionView) -> bool | None:
    """Whether the server runs confined; ``None`` for a remote one (or a view that cannot tell)."""
    sandbox = getattr(view, "sandbox", None)
    return None if sandbox is None else bool(sandbox.confined)


def _grant(grant: Grant, servers: dict[str, str]) -> dict[str, Any]:
    return {
        "id": grant.id,
        "connectionId": grant.connection_id,
        "server": grant.server,
        "holder": grant_holder(grant, servers),
        "path": grant.path,
        "operations": list(grant.operations),
        "expiresAt": None if grant.expires_at is None else iso_utc(grant.expires_at),
        "source": grant.source,
        "includeSensitive": grant.include_sensitive,
    }


def _lock(info: LockInfo) -> dict[str, Any]:
    return {
        "id": info.lock_id,
        "lockId": info.lock_id,
        "path": info.path,
        "connectionId": info.owner,
        "server": info.owner_label,
        "heldBy": info.owner_label,
        "mode": info.mode,
        "since": iso_utc(info.since),
    }


def _activity(records: Sequence[AuditRecord]) -> list[dict[str, Any]]:
    """The records as entries, each with the ``outcome`` every view shows (:mod:`..core.outcomes`)."""
    return [_record(record, said) for record, said in zip(records, outcomes(records), strict=True)]


def _record(record: AuditRecord, said: RecordOutcome) -> dict[str, Any]:
    entry = record.to_json()
    entry["at"] = entry["time"]
    entry["outcome"] = said.to_json()
    return entry
