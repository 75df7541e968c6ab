"""The dashboard: roots, connections, grants, locks, changes, activity, server logs and trash, with controls.

A :class:`Dashboard` observes one :class:`~jupyter_fsbroker.core.broker.Broker`
and the kernel's connections. Its buttons only call public methods: the
connection's ``close()`` (Disconnect, the kill switch), ``broker.grants.revoke``
(Revoke), ``broker.force_unlock`` (Force release), and the trash's ``restore``
and ``empty`` (:mod:`.trashsection`). It decides nothing.

Threading: the broker's listeners fire on arbitrary threads, and clicks may run
on a kernel subshell's thread. Listeners only record what they must (new change
events, new audit records) and schedule a refresh; refreshes are coalesced to at
most one per ``refresh_interval`` by a short-lived timer thread, and rendering
is serialised by a lock. A Disconnect (or Restore, or Empty) runs on a
short-lived thread so a click handler never blocks. :meth:`Dashboard.close`
unsubscribes everything and joins every thread it started.

Look: one summary line, then collapsible sections in JupyterLab's style
(:mod:`.style`), each titled with its count; a section opens when it gets its
first row and closes when it empties. :meth:`Dashboard.retire` leaves a
dashboard on the page but inert, saying why (the broker was closed), and
:attr:`Dashboard.lost` tells whether a frontend closed its comm (then its
buttons no longer reach the kernel; see :func:`.closing.watch_comm_closed`).
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.status import (
    ENDED_STATES,
    ConnectionView,
    follow_broker,
    grant_holder,
    kept_locks,
    sandbox_text,
)
from ..core.audit import AuditRecord
from ..core.broker import Broker
from ..core.connection import Connection
from ..core.consent import ConsentRequest
from ..core.errors import BrokerError, FilesError
from ..core.serverlog import LogEntry, ServerLog
from ..core.trashentry import TrashEntry
from ..core.watch import ChangeEvent
from .closing import close_parts, close_tree
from .markup import (
    activity_html,
    changes_html,
    connection_html,
    escape,
    grant_html,
    header_html,
    lock_html,
    muted,
    plain,
    roots_html,
    server_log_html,
    totals_html,
)
from .rows import Row, Section, button_row, set_value, sync_rows
from .style import REJECT, WARN, style_html
from .trashsection import TrashSection

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)

#: How long :meth:`Dashboard.close` waits for a thread it started.
_JOIN_TIMEOUT = 5.0


@dataclass(frozen=True)
class _Change:
    server: str
    event: ChangeEvent


class Dashboard(widgets.VBox):  # type: ignore[misc]
    """A live view of a broker with its kill switches (DOM class ``fsbroker-dashboard``).

    Parameters
    ----------
    broker
        The broker to show.
    connections
        Returns the kernel's connections (see :class:`ConnectionView`); called
        on every refresh, from the refreshing thread.
    max_changes, max_activity
        How many change events and audit records the feeds keep.
    refresh_interval
        Seconds: refreshes caused by the broker's events are coalesced to at
        most one per interval.
    render_with
        Runs each render: called with the dashboard and a function that renders
        it, on whichever thread refreshes (the first time inside the
        constructor). A kernel uses it to render in a context detached from the
        running cell and to free the new rows' comm routing. Default: call the
        function.
    pending
        Returns every consent request waiting for an answer, wherever its
        prompt is (a blocked cell's output too), so the summary line shows a
        forgotten prompt; default: those in :attr:`consent_area`. Call
        :meth:`schedule_refresh` when it changes.

    Attributes
    ----------
    broker
        As given.
    header
        One line summarising the state.
    message
        The outcome of the last action (Revoke, Force release, Disconnect).
    consent_area
        A VBox where consent prompts that have no calling cell are shown
        (see :meth:`add_prompt`).
    roots_html
        The shared folders.
    connections_box, grants_box, locks_box
        One row per connection, grant and kept lock, each with its button
        (DOM classes ``fsbroker-disconnect``, ``fsbroker-revoke``, ``fsbroker-force-unlock``).
    totals_html
        Bytes read and written per server.
    changes_html
        The change feed, newest first (DOM class ``fsbroker-changes``).
    activity_html
        The activity log, newest first (DOM class ``fsbroker-activity``).
    server_log_html
        What the servers said (their stderr and MCP log messages), newest
        first (DOM class ``fsbroker-server-log``): a view of each connection's
        ``log``, for the views that have one.
    trash
        The Trash section (:class:`~.trashsection.TrashSection`): the newest
        entries with Restore, and Empty trash with a confirmation.
    renders
        How many refreshes ran (for tests and diagnostics).

    Notes
    -----
    The kernel's connection states change without a broker event: call
    :meth:`schedule_refresh` (cheap, non-blocking, any thread) when they do.
    """

    def __init__(
        self,
        broker: Broker,
        connections: Callable[[], Sequence[ConnectionView]] | None = None,
        *,
        max_changes: int = 50,
        max_activity: int = 50,
        max_server_log: int = 50,
        refresh_interval: float = 0.2,
        render_with: Callable[[Dashboard, Callable[[], None]], object] | None = None,
        pending: Callable[[], Sequence[ConsentRequest]] | None = None,
    ) -> None:
        super().__init__()
        self.broker = broker
        self._pending = pending
        self._render_with = render_with
        self._connections: Callable[[], Sequence[ConnectionView]] = connections or tuple
        self._interval = max(0.0, float(refresh_interval))
        self._state = threading.Condition(threading.Lock())
        self._render_lock = threading.Lock()
        self._changes: collections.deque[_Change] = collections.deque(maxlen=max(1, max_changes))
        self._activity: collections.deque[AuditRecord] = collections.deque(maxlen=max(1, max_activity))
        self._timer: threading.Timer | None = None
        self._dirty = False
        self._rendering = False
        self._last_render = 0.0
        self._closed = False
        self._workers: set[threading.Thread] = set()
        self._disconnecting: set[int] = set()
        self._conn_rows: dict[int, Row] = {}
        self._conn_views: dict[int, ConnectionView] = {}
        self._grant_rows: dict[str, Row] = {}
        self._lock_rows: dict[str, Row] = {}
        self._max_server_log = max(1, max_server_log)
        self._followed: dict[int, tuple[ServerLog, Callable[[], None]]] = {}
        self.renders = 0

        self.header = widgets.HTML()
        self.header.add_class("fsbroker-dashboard-header")
        self.message = widgets.HTML()
        self.message.add_class("fsbroker-dashboard-message")
        self.consent_area = widgets.VBox()
        self.consent_area.add_class("fsbroker-consent-area")
        self.roots_html = widgets.HTML()
        self.connections_box = widgets.VBox()
        self.grants_box = widgets.VBox()
        self.locks_box = widgets.VBox()
        self.totals_html = widgets.HTML()
        scroll = {"max_height": "16em", "overflow": "auto"}
        self.changes_html = widgets.HTML(layout=widgets.Layout(**scroll))
        self.changes_html.add_class("fsbroker-changes")
        self.activity_html = widgets.HTML(layout=widgets.Layout(**scroll))
        self.activity_html.add_class("fsbroker-activity")
        self.server_log_html = widgets.HTML(layout=widgets.Layout(**scroll))
        self.server_log_html.add_class("fsbroker-server-log")
        self.lost = False
        self._retired = False
        self._empty = {
            "connections": widgets.HTML(muted("No connections.")),
            "grants": widgets.HTML(
                muted("No grants: servers ask with files/consent, or pre-approve with %fsbroker allow.")
            ),
            "locks": widgets.HTML(muted("No kept locks.")),
        }
        self.trash = TrashSection(broker.trash, act=self._act)
        bodies = {
            "folders": ("Shared folders", self.roots_html),
            "connections": ("Connections", self.connections_box),
            "grants": ("Grants", self.grants_box),
            "locks": ("Kept locks", self.locks_box),
            "bytes": ("Bytes per server", self.totals_html),
            "changes": ("Changes", self.changes_html),
            "activity": ("Activity", self.activity_html),
            "serverlog": ("Server log", self.server_log_html),
            "trash": ("Trash", self.trash.body),
        }
        self._sections: dict[str, Section] = {}
        for key, (title, body) in bodies.items():
            accordion = widgets.Accordion(children=[body], titles=(title,), selected_index=None)
            accordion.add_class("fsbroker-section")
            accordion.add_class(f"fsbroker-section-{key}")
            self._sections[key] = Section(title, accordion)
        self._style = widgets.HTML(style_html(), layout=widgets.Layout(display="none"))
        self.children = (
            self._style,
            self.header,
            self.message,
            self.consent_area,
            *(section.accordion for section in self._sections.values()),
        )
        self.add_class("fsbroker-dashboard")

        # Subscribe first, then read what is there: nothing appended in between is lost.
        self._unsubscribe = follow_broker(
            broker, self._on_event, audit=self._on_audit, change=self._on_change
        )
        known = broker.audit.records(limit=self._activity.maxlen)
        with self._state:
            fresh = list(self._activity)
            self._activity.clear()
            self._activity.extend(known)
            seen = {id(record) for record in known}
            self._activity.extend(record for record in fresh if id(record) not in seen)
        self.refresh()

    # -- events (any thread) -----------------------------------------------------------------

    def _on_event(self, *args: object) -> None:
        del args
        self.schedule_refresh()

    def _on_audit(self, record: AuditRecord) -> None:
        with self._state:
            if self._closed:
                return
            self._activity.append(record)
        self.schedule_refresh()

    def _on_change(self, event: ChangeEvent, connection: Connection) -> None:
        with self._state:
            if self._closed:
                return
            self._changes.append(_Change(connection.server, event))
        self.schedule_refresh()

    def __repr__(self) -> str:
        # What a view without widgets shows (GitHub, nbconvert): the summary line.
        return f"<{plain(self.header.value)}>"

    def schedule_refresh(self) -> None:
        """Refresh soon (coalesced: at most once per ``refresh_interval``). Never blocks."""
        with self._state:
            if self._closed:
                return
            self._dirty = True
            if self._timer is not None:
                return
            delay = max(0.0, self._last_render + self._interval - time.monotonic())
            timer = threading.Timer(delay, self._timer_fired)
            timer.name = "fsbroker-dashboard-refresh"
            timer.daemon = True
            self._timer = timer
            timer.start()

    def _timer_fired(self) -> None:
        with self._state:
            if self._timer is threading.current_thread():
                self._timer = None
        try:
            self.refresh()
        except Exception:  # a broken view must never break the broker's threads
            log.exception("the dashboard could not refresh")

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every scheduled refresh (and Disconnect) has run; return whether it did in time.

        Parameters
        ----------
        timeout
            Seconds to wait at most.
        """
        deadline = time.monotonic() + timeout
        with self._state:
            while (self._dirty or self._timer or self._rendering or self._workers) and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._state.wait(remaining)
            return True

    # -- rendering ---------------------------------------------------------------------------

    def refresh(self) -> None:
        """Render the current state now, on the calling thread.

        Do not call it while holding a lock that the ``connections`` function
        needs; :meth:`schedule_refresh` is the non-blocking alternative.
        """
        with self._render_lock:
            with self._state:
                if self._closed:
                    self._state.notify_all()
                    return
                self._dirty = False
                self._rendering = True
                changes = list(self._changes)
                activity = list(self._activity)
            try:
                if self._render_with is None:
                    self._render(changes, activity)
                else:
                    self._render_with(self, functools.partial(self._render, changes, activity))
            finally:
                with self._state:
                    self._rendering = False
                    self._last_render = time.monotonic()
                    self.renders += 1
                    self._state.notify_all()

    def _views(self) -> tuple[ConnectionView, ...]:
        try:
            return tuple(self._connections())
        except Exception:
            log.exception("the dashboard could not list the connections")
            return ()

    def _render(self, changes: list[_Change], activity: list[AuditRecord]) -> None:
        broker = self.broker
        now = time.time()
        roots = broker.roots.snapshot()
        views = self._views()
        grants = sorted(
            broker.grants.grants(),
            key=lambda g: (g.connection_id is not None, g.server, g.path, g.created_at),
        )
        locks = kept_locks(broker)
        totals = broker.audit.totals()
        servers = {conn.id: conn.server for conn in broker.connections()}
        waiting = sum(1 for child in self.consent_area.children if not getattr(child, "done", True))
        oldest: ConsentRequest | None = None
        if self._pending is not None:
            try:
                asks = tuple(self._pending())
            except Exception:
                log.exception("the dashboard could not list the consent requests")
                asks = ()
            waiting = len(asks)
            oldest = min(asks, key=lambda r: r.deadline, default=None)

        set_value(
            self.header,
            header_html(
                roots=len(roots),
                connections=len(views),
                grants=len(grants),
                locks=len(locks),
                totals=totals,
                waiting=waiting,
                closed=broker.closed,
                oldest=oldest,
            ),
        )
        set_value(self.roots_html, roots_html(roots))
        self._sync_connections(views)
        sync_rows(
            self._grant_rows,
            self.grants_box,
            [(g.id, grant_html(g, servers, now), True) for g in grants],
            self._make_grant_row,
            self._empty["grants"],
        )
        sync_rows(
            self._lock_rows,
            self.locks_box,
            [(info.lock_id or "", lock_html(info, now), True) for info in locks],
            self._make_lock_row,
            self._empty["locks"],
        )
        set_value(self.totals_html, totals_html(totals))
        set_value(self.changes_html, changes_html([(c.server, c.event) for c in changes]))
        set_value(self.activity_html, activity_html(activity))
        log_entries = self._server_log(views)
        set_value(self.server_log_html, server_log_html(log_entries))
        trash = self._trash_entries()
        self.trash.sync(trash, now, broker.trash.retention)
        counts = {
            "folders": len(roots),
            "connections": len(views),
            "grants": len(grants),
            "locks": len(locks),
            "bytes": len(totals),
            "changes": len(changes),
            "activity": len(activity),
            "serverlog": len(log_entries),
            "trash": len(trash),
        }
        for key, section in self._sections.items():
            section.show(counts[key])

    def _trash_entries(self) -> tuple[TrashEntry, ...]:
        try:
            return self.broker.trash.list()
        except Exception:  # an unusable trash folder must not stop the other sections
            log.exception("the dashboard could not list the trash")
            return ()

    def _server_log(self, views: tuple[ConnectionView, ...]) -> list[tuple[str, LogEntry]]:
        """The last entries of every connection's log, merged in time order; follows new logs."""
        merged: list[tuple[str, LogEntry]] = []
        for view in views:
            server_log = getattr(view, "log", None)
            if not isinstance(server_log, ServerLog):
                continue
            key = id(server_log)
            with self._state:
                if not self._closed and key not in self._followed:
                    self._followed[key] = (server_log, server_log.follow(self._on_event))
            name = str(view.name)
            merged.extend((name, entry) for entry in server_log.entries(self._max_server_log))
        merged.sort(key=lambda item: item[1].time)
        return merged[-self._max_server_log :]

    # connections

    def _sync_connections(self, views: tuple[ConnectionView, ...]) -> None:
        items: list[tuple[Hashable, str, bool]] = []
        with self._state:
            disconnecting = set(self._disconnecting)
        for view in views:
            key = id(view)
            self._conn_views[key] = view
            try:
                name, server, transport = view.name, view.server_name, view.transport
                version, state, sandbox = view.protocol_version, view.state, sandbox_text(view)
            except Exception:
                log.exception("the dashboard could not read a connection")
                continue
            if key in disconnecting:
                state = "disconnecting"
            text = connection_html(name, server, transport, version, state, sandbox)
            items.append((key, text, str(state).lower() not in ENDED_STATES and key not in disconnecting))
        sync_rows(
            self._conn_rows,
            self.connections_box,
            items,
            self._make_connection_row,
            self._empty["connections"],
        )
        for key in [key for key in self._conn_views if key not in self._conn_rows]:
            del self._conn_views[key]

    def _make_connection_row(self, key: int) -> Row:
        view = self._conn_views[key]
        row = button_row("", "Disconnect", "fsbroker-disconnect", WARN, "End this connection now")
        row.button.on_click(lambda _button: self._disconnect(view))
        return row

    def _disconnect(self, view: ConnectionView) -> None:
        key = id(view)
        with self._state:
            if self._closed or key in self._disconnecting:
                return
            self._disconnecting.add(key)
        self._act("fsbroker-disconnect", functools.partial(self._run_disconnect, view))
        self.schedule_refresh()

    def _run_disconnect(self, view: ConnectionView) -> str:
        name = "?"
        try:
            name = str(view.name)
            view.close()
        except Exception as exc:
            log.exception("disconnecting %s failed", name)
            return f"Could not disconnect {escape(name)}: {escape(exc)}"
        finally:
            with self._state:
                self._disconnecting.discard(id(view))
        return f"Disconnected {escape(name)}."

    def _act(self, name: str, work: Callable[[], str]) -> None:
        """Run a button's *work* on a short-lived thread (a click never blocks); show what it returns."""
        with self._state:
            if self._closed:
                return
            worker = threading.Thread(target=self._run_act, args=(work,), name=name, daemon=True)
            self._workers.add(worker)
            worker.start()

    def _run_act(self, work: Callable[[], str]) -> None:
        try:
            try:
                text = work()
            except Exception as exc:
                log.exception("a dashboard action failed")
                text = f"That did not work: {escape(exc)}"
            self._say(text)
            self.schedule_refresh()
        finally:
            with self._state:  # last, so that flush() also waits for this refresh
                self._workers.discard(threading.current_thread())
                self._state.notify_all()

    # grants

    def _make_grant_row(self, grant_id: str) -> Row:
        row = button_row("", "Revoke", "fsbroker-revoke", REJECT, "Revoke this grant now")
        row.button.on_click(lambda _button: self._revoke(grant_id))
        return row

    def _revoke(self, grant_id: str) -> None:
        try:
            grant = self.broker.grants.revoke(grant_id)
        except FilesError:
            self._say("That grant was already gone.")
        else:
            self._say(
                f"Revoked {escape(', '.join(grant.operations))} on <code>{escape(grant.path)}</code> "
                f"for {escape(grant_holder(grant))}."
            )
        self.schedule_refresh()

    # locks

    def _make_lock_row(self, lock_id: str) -> Row:
        row = button_row("", "Force release", "fsbroker-force-unlock", REJECT, "Release this lock now")
        row.button.on_click(lambda _button: self._force_unlock(lock_id))
        return row

    def _force_unlock(self, lock_id: str) -> None:
        try:
            self.broker.force_unlock(lock_id)
        except (FilesError, BrokerError):
            self._say("That lock was already released.")
        else:
            self._say("Lock released.")
        self.schedule_refresh()

    # feeds

    # -- consent prompts ---------------------------------------------------------------------

    def add_prompt(self, prompt: Any) -> None:
        """Show a consent prompt in :attr:`consent_area` (thread-safe).

        The dashboard does not close prompts: their owner does (and removes
        them with :meth:`remove_prompt`).
        """
        with self._state:
            if self._closed:
                return
            if prompt not in self.consent_area.children:
                self.consent_area.children = (*self.consent_area.children, prompt)
        future = getattr(prompt, "future", None)
        if future is not None:
            future.add_done_callback(lambda _future: self.schedule_refresh())
        self.schedule_refresh()

    def remove_prompt(self, prompt: Any) -> None:
        """Take a prompt out of :attr:`consent_area` (thread-safe); a prompt not shown is ignored."""
        with self._state:
            if self._closed:
                return
            children = tuple(child for child in self.consent_area.children if child is not prompt)
            if len(children) != len(self.consent_area.children):
                self.consent_area.children = children
        self.schedule_refresh()

    # -- buttons for tests and frontends ------------------------------------------------------

    def disconnect_buttons(self) -> dict[str, Any]:
        """The Disconnect buttons shown, by connection name."""
        with self._render_lock:
            return {
                str(self._conn_views[key].name): row.button
                for key, row in self._conn_rows.items()
                if key in self._conn_views
            }

    def revoke_buttons(self) -> dict[str, Any]:
        """The Revoke buttons shown, by grant id."""
        with self._render_lock:
            return {key: row.button for key, row in self._grant_rows.items()}

    def force_unlock_buttons(self) -> dict[str, Any]:
        """The Force release buttons shown, by lock id."""
        with self._render_lock:
            return {key: row.button for key, row in self._lock_rows.items()}

    def restore_buttons(self) -> dict[str, Any]:
        """The Restore buttons of the Trash section, by entry id."""
        with self._render_lock:
            return self.trash.restore_buttons()

    def row_texts(self, section: str) -> list[str]:
        """The HTML of each row of ``"connections"``, ``"grants"`` or ``"locks"``, in display order."""
        sections: dict[str, tuple[dict[Any, Row], Any]] = {
            "connections": (self._conn_rows, self.connections_box),
            "grants": (self._grant_rows, self.grants_box),
            "locks": (self._lock_rows, self.locks_box),
        }
        rows, box = sections[section]
        with self._render_lock:
            by_box = {id(row.box): row for row in rows.values()}
            return [str(by_box[id(child)].text.value) for child in box.children if id(child) in by_box]

    # -- lifetime ----------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        with self._state:
            if self._closed:
                return
        self.message.value = text

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` (or :meth:`retire`) was called."""
        return self._closed

    @property
    def retired(self) -> bool:
        """Whether :meth:`retire` left the dashboard on the page, inert."""
        return self._retired

    def mark_lost(self) -> None:
        """A frontend closed this dashboard's comm: its buttons no longer reach the kernel (any thread)."""
        self.lost = True

    def retire(self, why: str) -> None:
        """Stop following the broker but stay on the page, saying *why* and with every button disabled.

        For a broker that closes (``%unload_ext``, ``%reload_ext``): the page
        keeps showing the last state, marked stale, instead of a view that looks
        alive and does nothing. Threads are joined as in :meth:`close`; the
        widgets stay open until :meth:`close`.
        """
        with self._render_lock:
            for rows in (self._conn_rows, self._grant_rows, self._lock_rows):
                for row in rows.values():
                    row.button.disabled = True
            self.trash.disable()
        self._stop_following()
        self._retired = True
        self.header.value = (
            f'<span class="fsbroker-banner">Stale: {escape(why)} — this view no longer updates and its '
            "buttons do nothing.</span> " + str(self.header.value)
        )
        self.add_class("fsbroker-stale")

    def _stop_following(self) -> tuple[bool, threading.Thread | None]:
        with self._state:
            already = self._closed
            self._closed = True
            timer, self._timer = self._timer, None
            workers = list(self._workers)
            unsubscribe, self._unsubscribe = self._unsubscribe, []
            unsubscribe += [stop for _, stop in self._followed.values()]
            self._followed.clear()
            self._state.notify_all()
        for stop in unsubscribe:
            stop()
        current = threading.current_thread()
        if timer is not None:
            timer.cancel()
            if timer is not current:
                timer.join(_JOIN_TIMEOUT)
        for worker in workers:
            if worker is not current:
                worker.join(_JOIN_TIMEOUT)
        return already, timer

    def close(self) -> None:
        """Unsubscribe from the broker, stop and join every thread, close the widgets. Idempotent.

        A Disconnect still running is waited for a few seconds; consent prompts
        in :attr:`consent_area` are left to their owner.
        """
        already, _ = self._stop_following()
        if not already or self._retired:
            self._retired = False
            with self._render_lock:
                for rows in (self._conn_rows, self._grant_rows, self._lock_rows):
                    for row in rows.values():
                        row.close()
                    rows.clear()
                self._conn_views.clear()
                self.trash.close()
                self.consent_area.children = ()  # the prompts belong to whoever added them
                for empty in self._empty.values():
                    close_tree(empty)
                close_parts(self)
        super().close()
