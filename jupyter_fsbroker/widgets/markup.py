"""The dashboard's sections as HTML: tables, feeds and one-line rows, with everything escaped.

Pure functions from the broker's values (roots, grants, locks, audit records,
change events) to HTML strings for ``ipywidgets.HTML``. Whatever a server chose
(names, paths, messages, reasons) goes through :func:`escape`, which also makes
control and bidirectional characters visible (:func:`~..console.format.printable`), so no
server can inject markup or disguise a path. Views only: nothing here reads the
broker or decides anything, and nothing imports ``ipywidgets``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..console.format import clock_text, expiry_text, format_age, format_bytes, plural, printable, reason_text
from ..console.status import grant_holder, trash_rows, trash_summary
from ..core.outcomes import outcomes
from ..core.refusals import cause_text

if TYPE_CHECKING:
    from ..core.audit import AuditRecord
    from ..core.consent import ConsentRequest
    from ..core.grants import Grant
    from ..core.locks import LockInfo
    from ..core.outcomes import RecordOutcome
    from ..core.retention import Retention
    from ..core.roots import Root
    from ..core.serverlog import LogEntry
    from ..core.trashentry import TrashEntry
    from ..core.watch import ChangeEvent

__all__ = [
    "activity_html",
    "changes_html",
    "connection_html",
    "escape",
    "grant_html",
    "header_html",
    "lock_html",
    "muted",
    "outcome_html",
    "roots_html",
    "server_log_html",
    "table",
    "totals_html",
    "trash_entry_html",
    "trash_html",
]

_TABLE = '<table style="border-collapse:collapse;font-size:90%;line-height:1.3">'
_CELL = "padding:0 0.8em 0 0;text-align:left;vertical-align:top"
_BREAK = re.compile(r"<(?:br|/div|/p|/td|/th|/tr|/li)\b[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<style\b.*?</style>|<[^>]*>", re.DOTALL | re.IGNORECASE)


def escape(value: object) -> str:
    """*value* as text that is safe inside HTML: escaped, with invisible characters made visible."""
    return html.escape(printable(str(value)))


def plain(markup: str) -> str:
    """The text of *markup*: tags dropped, entities decoded, white space collapsed (``text/plain`` views)."""
    return " ".join(html.unescape(_TAG.sub("", _BREAK.sub(" ", markup))).split())


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table with the column titles *head*; every cell of *rows* must already be escaped."""
    out = [_TABLE, "<tr>", *(f'<th style="{_CELL}">{escape(h)}</th>' for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f'<td style="{_CELL}">{cell}</td>' for cell in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def muted(text: str) -> str:
    """*text* in grey italics: what an empty section says."""
    return f'<span class="fsbroker-muted" style="opacity:0.7"><i>{escape(text)}</i></span>'


def header_html(
    *,
    roots: int,
    connections: int,
    grants: int,
    locks: int,
    totals: Mapping[str, Mapping[str, int]],
    waiting: int,
    closed: bool,
    oldest: ConsentRequest | None = None,
) -> str:
    """The dashboard's one-line summary: counts, bytes moved, consent requests waiting.

    With *oldest* (the waiting request refused first), the line also says who
    asks and when it will be refused, so a prompt forgotten in a scrolled-away
    cell shows here too.
    """
    read = sum(t["read"] for t in totals.values())
    written = sum(t["written"] for t in totals.values())
    parts = [
        plural(roots, "shared folder"),
        plural(connections, "connection"),
        plural(grants, "grant"),
        plural(locks, "lock"),
        f"{format_bytes(read)} read",
        f"{format_bytes(written)} written",
    ]
    summary = " · ".join(escape(part) for part in parts)
    if waiting:
        summary += f" · <b>{escape(plural(waiting, 'consent request'))} waiting</b>"
        if oldest is not None:
            summary += (
                f'<br><span class="fsbroker-banner">{escape(oldest.server)} waits for your consent '
                f"({escape(oldest.message or 'no message')}): answer in the calling cell, or it is refused "
                f"at {escape(clock_text(oldest.deadline))}</span>"
            )
    if closed:
        summary += " · <b>broker closed</b>"
    return f"<b>File broker</b> — {summary}"


def roots_html(roots: Sequence[Root]) -> str:
    """The shared folders as a table."""
    if not roots:
        return muted("No shared folders: %fsbroker root DIR")
    rows = [
        (
            f"<b>{escape(r.name)}</b>",
            f"<code>{escape(r.path)}</code>",
            "read-only" if r.read_only else "read-write",
        )
        for r in roots
    ]
    return table(("name", "folder", "access"), rows)


def connection_html(
    name: str, server: str, transport: str, version: str | None, state: str, sandbox: str = ""
) -> str:
    """One connection's row: its name, server, transport, protocol version, state and sandbox."""
    return (
        f"<b>{escape(name)}</b> · server {escape(server or '?')} · {escape(transport)} · "
        f"protocol {escape(version or '?')} · <i>{escape(state)}</i>"
        + (f" · {escape(sandbox)}" if sandbox else "")
    )


def grant_html(grant: Grant, servers: dict[str, str], now: float) -> str:
    """One grant's row: who holds it, on what, for which operations, until when, from where."""
    holder = grant_holder(grant, servers)
    who = f"<i>{escape(holder)}</i>" if grant.connection_id is None else f"<b>{escape(holder)}</b>"
    extra = " · incl. sensitive names" if grant.include_sensitive else ""
    return (
        f"{who} · <code>{escape(grant.path)}</code> · {escape(', '.join(grant.operations))} · "
        f"{escape(expiry_text(grant, now))} · {escape(grant.source)}{extra}"
    )


def lock_html(info: LockInfo, now: float) -> str:
    """One kept lock's row: the path, who holds it, since when."""
    return (
        f"<code>{escape(info.path)}</code> · held by <b>{escape(info.owner_label)}</b> · "
        f"for {escape(format_age(now - info.since))} (since {escape(clock_text(info.since))})"
    )


def trash_entry_html(entry: TrashEntry, now: float) -> str:
    """One trash entry's row: the path it had, its size, when and by whom it was deleted, where it was."""
    tail, path, size, deleted, by, origin = trash_rows([entry], now)[0]
    return (
        f'<code title="{escape(origin)}">{escape(path)}</code> · {escape(size)} · deleted {escape(deleted)} '
        f'by <b>{escape(by)}</b> · <span class="fsbroker-soft">{escape(tail)}</span>'
    )


def trash_html(entries: Sequence[TrashEntry], now: float, retention: Retention | None = None) -> str:
    """The trash's entries (newest first, as given) as a table under a summary line."""
    summary = f"<b>Trash</b> — {escape(trash_summary(entries, retention))}"
    if not entries:
        return summary
    rows = [tuple(escape(cell) for cell in row) for row in trash_rows(entries, now)]
    body = table(("id", "path", "size", "deleted", "by", "was at"), rows)
    return f'<div class="fsbroker-trash">{summary}{body}</div>'


def totals_html(totals: Mapping[str, Mapping[str, int]]) -> str:
    """Bytes read and written, and operations allowed and denied, per server, as a table."""
    if not totals:
        return muted("Nothing read or written yet.")
    rows = [
        (
            escape(server),
            format_bytes(t["read"]),
            format_bytes(t["written"]),
            str(t["allowed"]),
            str(t["denied"]),
        )
        for server, t in sorted(totals.items())
    ]
    return table(("server", "read", "written", "allowed", "denied"), rows)


def changes_html(changes: Sequence[tuple[str, ChangeEvent]]) -> str:
    """The change feed, newest first, from ``(server, event)`` pairs in the order they came."""
    if not changes:
        return muted("No changes seen yet (servers see changes under the paths they watch).")
    rows = []
    for server, ev in reversed(changes):
        path = f"<code>{escape(ev.path)}</code>"
        if ev.old_path:
            path = f"<code>{escape(ev.old_path)}</code> → {path}"
        rows.append((escape(clock_text(ev.time)), escape(ev.event), path, escape(server)))
    return table(("time", "event", "path", "server"), rows)


def outcome_html(record: AuditRecord, outcome: RecordOutcome) -> str:
    """The outcome cell of one record: its word in its tone (DOM classes ``fsbroker-outcome`` and
    ``fsbroker-tone-green``, ``-grey`` or ``-red``; :mod:`..core.outcomes`), what the record says on hover."""
    said = [record.decision, reason_text(record.reason) if record.reason else None]
    if record.cause:
        said.append(cause_text(record.cause))
    title = escape("; ".join(part for part in said if part))
    return (
        f'<span class="fsbroker-outcome fsbroker-tone-{outcome.tone}" title="{title}">'
        f"{escape(outcome.word)}</span>"
    )


def activity_html(activity: Sequence[AuditRecord]) -> str:
    """The activity log, newest first, from audit records in the order they came.

    Each record's outcome is the one every view shows (:func:`~..core.outcomes.outcomes`):
    the refusal that opens a consent flow reads "asked for consent", in grey
    (the audit record itself still says deny, not_granted).
    """
    if not activity:
        return muted("No activity yet.")
    said = outcomes(activity)
    rows = []
    for index in range(len(activity) - 1, -1, -1):
        record = activity[index]
        parts = (record.error, record.reason, cause_text(record.cause) if record.cause else None)
        detail = ": ".join(escape(part) for part in parts if part)
        rows.append(
            (
                escape(clock_text(record.time)),
                escape(record.server),
                escape(record.method),
                f"<code>{escape(record.canonical or record.path or '-')}</code>",
                outcome_html(record, said[index]),
                detail,
                escape(format_bytes(record.bytes)) if record.bytes else "",
            )
        )
    return table(("time", "server", "method", "path", "outcome", "error", "bytes"), rows)


def server_log_html(entries: Sequence[tuple[str, LogEntry]]) -> str:
    """What the servers said, newest first: ``(connection name, entry)`` pairs in the order they came.

    Every word is the server's: escaped, and marked as coming from it.
    """
    if not entries:
        return muted("No server has said anything yet.")
    rows = []
    for server, entry in reversed(entries):
        if entry.source == "stderr":
            kind = '<span style="opacity:0.7">stderr</span>'
        else:
            color = "#c62828" if entry.severity >= 4 else "#e65100" if entry.severity == 3 else "inherit"
            kind = f'<span style="color:{color}">{escape(entry.level or "")}</span>'
        origin = f"{escape(entry.logger)}: " if entry.logger else ""
        rows.append(
            (
                escape(clock_text(entry.time)),
                escape(server),
                kind,
                f"<code>{origin}{escape(entry.text)}</code>",
            )
        )
    return table(("time", "server", "level", "message"), rows)
