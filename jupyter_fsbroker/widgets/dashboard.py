"""The dashboard: roots, connections, grants, locks, changes, activity, server logs and trash, with controls.

A :class:`Dashboard` observes one :class:`~jupyter_fsbroker.core.broker.Broker`
and the kernel's connections. Its buttons only call public methods: the
connection's ``close()`` (Disconnect, the kill switch), ``broker.grants.revoke``
(Revoke), ``broker.force_unlock`` (Force release), and the trash's ``restore``
and ``empty`` (:mod:`.trashsection`). It decides nothing.

It is composed of parts that each hold one concept: the sections with a button
per row (:mod:`.dashboard_sections`), the feeds (:mod:`.dashboard_feeds`), the
Trash section (:mod:`.trashsection`), each inside a collapsible
:class:`~.rows.Section`.

Threading: the broker's listeners fire on arbitrary threads, and clicks may run
on a kernel subshell's thread. Listeners only record what they must (new change
events, new audit records) and ask for a refresh; refreshes are coalesced on a
:class:`~.view_thread.ViewThread` (the notebook's, or one of the dashboard's own)
to at most one per ``refresh_interval``, and rendering is serialised by a lock.
A Disconnect (or Restore, or Empty) runs on that thread too, so a click handler
never blocks. The dashboard starts no thread of its own but that one;
:meth:`Dashboard.close` unsubscribes everything and joins it.

Look: one summary line, then collapsible sections in JupyterLab's style
(:mod:`.style`), each titled with its count; a section opens when it gets its
first row and closes when it empties. :meth:`Dashboard.retire` leaves a
dashboard on the page but inert, saying why (the broker was closed), and
:attr:`Dashboard.lost` tells whether a frontend closed its comm (then its
buttons no longer reach the kernel; see :func:`.closing.watch_comm_closed`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.status import ConnectionView, follow_broker, kept_locks
from ..core.audit import AuditRecord
from ..core.broker import Broker
from ..core.connection import Connection
from ..core.consent import ConsentRequest
from ..core.trashentry import TrashEntry
from ..core.watch import ChangeEvent
from .closing import close_parts
from .dashboard_feeds import ActivityFeed, ChangesFeed, ServerLogFeed
from .dashboard_sections import ConnectionsSection, GrantsSection, LocksSection
from .markup import escape, header_html, plain, roots_html, totals_html
from .rows import Section, set_value
from .style import style_html
from .text_fallback import WholeText
from .trashsection import TrashSection
from .view_thread import ViewThread

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)


class Dashboard(WholeText, widgets.VBox):  # type: ignore[misc]
    """A live view of a broker with its kill switches (DOM class ``fsbroker-dashboard``).

    Parameters
    ----------
    broker
        The broker to show.
    connections
        Returns the kernel's connections (see :class:`ConnectionView`); called
        on every refresh, from the refreshing thread.
    max_changes, max_activity, max_server_log
        How many change events, audit records and server log entries the feeds keep.
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
    views
        The thread that refreshes and runs the buttons' actions (the
        notebook's); ``None``: one of the dashboard's own, closed with it.

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
    connections, grants, locks
        The sections with one row per connection, grant and kept lock, each
        with its button (:mod:`.dashboard_sections`).
    connections_box, grants_box, locks_box
        Their bodies.
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
        views: ViewThread | None = None,
    ) -> None:
        super().__init__()
        self.broker = broker
        self._pending = pending
        self._render_with = render_with
        self._connections: Callable[[], Sequence[ConnectionView]] = connections or tuple
        self._interval = max(0.0, float(refresh_interval))
        self._own_thread = views is None
        self._thread = views if views is not None else ViewThread()
        self._state = threading.Condition(threading.Lock())
        self._render_lock = threading.Lock()
        self._dirty = False
        self._rendering = False
        self._closed = False
        self._retired = False
        self.lost = False
        self.renders = 0

        self.header = widgets.HTML()
        self.header.add_class("fsbroker-dashboard-header")
        self.message = widgets.HTML()
        self.message.add_class("fsbroker-dashboard-message")
        self.consent_area = widgets.VBox()
        self.consent_area.add_class("fsbroker-consent-area")
        self.roots_html = widgets.HTML()
        self.totals_html = widgets.HTML()
        self.connections = ConnectionsSection(act=self._act, changed=self.schedule_refresh)
        self.grants = GrantsSection(broker, say=self._say, changed=self.schedule_refresh)
        self.locks = LocksSection(broker, say=self._say, changed=self.schedule_refresh)
        self.connections_box = self.connections.box
        self.grants_box = self.grants.box
        self.locks_box = self.locks.box
        self._activity = ActivityFeed(max_activity)
        self._changes = ChangesFeed(max_changes)
        self._server_log = ServerLogFeed(max_server_log, self.schedule_refresh)
        self.activity_html = self._activity.html
        self.changes_html = self._changes.html
        self.server_log_html = self._server_log.html
        self.trash = TrashSection(broker.trash, act=self._act)
        self._sections = {
            key: Section.collapsible(key, title, body)
            for key, title, body in (
                ("folders", "Shared folders", self.roots_html),
                ("connections", "Connections", self.connections_box),
                ("grants", "Grants", self.grants_box),
                ("locks", "Kept locks", self.locks_box),
                ("bytes", "Bytes per server", self.totals_html),
                ("changes", "Changes", self.changes_html),
                ("activity", "Activity", self.activity_html),
                ("serverlog", "Server log", self.server_log_html),
                ("trash", "Trash", self.trash.body),
            )
        }
        self._style = widgets.HTML(style_html(), layout=widgets.Layout(display="none"))
        self.children = (
            self._style,
            self.header,
            self.message,
            self.consent_area,
            *(section.box for section in self._sections.values()),
        )
        self.add_class("fsbroker-dashboard")
        # Subscribe first, then read what is there: nothing appended in between is lost.
        self._unsubscribe = follow_broker(
            broker, self._on_event, audit=self._on_audit, change=self._on_change
        )
        self._activity.seed(broker.audit.records(limit=self._activity.keep))
        self.refresh()

    # -- events (any thread) -----------------------------------------------------------------

    def _on_event(self, *args: object) -> None:
        del args
        self.schedule_refresh()

    def _on_audit(self, record: AuditRecord) -> None:
        if not self._closed:
            self._activity.add(record)
            self.schedule_refresh()

    def _on_change(self, event: ChangeEvent, connection: Connection) -> None:
        if not self._closed:
            self._changes.add(connection.server, event)
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
        self._thread.coalesce(("dashboard", id(self)), self._refresh_scheduled, self._interval)

    def _refresh_scheduled(self) -> None:
        try:
            self.refresh()
        except Exception:  # a broken view must never break the others
            log.exception("the dashboard could not refresh")

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every scheduled refresh (and Disconnect) has run; return whether it did in time.

        Parameters
        ----------
        timeout
            Seconds to wait at most.
        """
        deadline = time.monotonic() + timeout
        settled_clean = False
        while not settled_clean:
            try:  # the actions posted so far have run (and asked for their refresh)
                self._thread.call(lambda: None, timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return False
            with self._state:
                clean = self._state.wait_for(
                    lambda: self._closed or not (self._dirty or self._rendering),
                    max(0.0, deadline - time.monotonic()),
                )
                if not clean:
                    return False
                settled_clean = self._closed or not self._dirty
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
            try:
                if self._render_with is None:
                    self._render()
                else:
                    self._render_with(self, self._render)
            finally:
                with self._state:
                    self._rendering = False
                    self.renders += 1
                    self._state.notify_all()

    def _connection_views(self) -> tuple[ConnectionView, ...]:
        try:
            return tuple(self._connections())
        except Exception:
            log.exception("the dashboard could not list the connections")
            return ()

    def _waiting(self) -> tuple[int, ConsentRequest | None]:
        """How many consent requests wait, and the one to be refused first."""
        if self._pending is None:
            return sum(1 for child in self.consent_area.children if not getattr(child, "done", True)), None
        try:
            asks = tuple(self._pending())
        except Exception:
            log.exception("the dashboard could not list the consent requests")
            asks = ()
        return len(asks), min(asks, key=lambda r: r.deadline, default=None)

    def _render(self) -> None:
        broker = self.broker
        now = time.time()
        roots = broker.roots.snapshot()
        views = self._connection_views()
        grants = sorted(
            broker.grants.grants(),
            key=lambda g: (g.connection_id is not None, g.server, g.path, g.created_at),
        )
        locks = kept_locks(broker)
        totals = broker.audit.totals()
        waiting, oldest = self._waiting()
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
        self.connections.sync(views)
        self.grants.sync(grants, {conn.id: conn.server for conn in broker.connections()}, now)
        self.locks.sync(locks, now)
        set_value(self.totals_html, totals_html(totals))
        trash = self._trash_entries()
        self.trash.sync(trash, now, broker.trash.retention)
        counts = {
            "folders": len(roots),
            "connections": len(views),
            "grants": len(grants),
            "locks": len(locks),
            "bytes": len(totals),
            "changes": self._changes.render(),
            "activity": self._activity.render(),
            "serverlog": self._server_log.render(views),
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

    # -- actions -----------------------------------------------------------------------------

    def _act(self, name: str, work: Callable[[], str]) -> None:
        """Run a button's *work* on the views' thread (a click never blocks); show what it returns."""
        del name  # the thread it runs on is the views' own
        with self._state:
            if self._closed:
                return
        self._thread.post(functools.partial(self._run_act, work))

    def _run_act(self, work: Callable[[], str]) -> None:
        try:
            text = work()
        except Exception as exc:
            log.exception("a dashboard action failed")
            text = f"That did not work: {escape(exc)}"
        self._say(text)
        self.schedule_refresh()

    def _say(self, text: str) -> None:
        with self._state:
            if self._closed:
                return
        self.message.value = text

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
            return self.connections.by_name()

    def revoke_buttons(self) -> dict[str, Any]:
        """The Revoke buttons shown, by grant id."""
        with self._render_lock:
            return self.grants.buttons()

    def force_unlock_buttons(self) -> dict[str, Any]:
        """The Force release buttons shown, by lock id."""
        with self._render_lock:
            return self.locks.buttons()

    def restore_buttons(self) -> dict[str, Any]:
        """The Restore buttons of the Trash section, by entry id."""
        with self._render_lock:
            return self.trash.restore_buttons()

    def row_texts(self, section: str) -> list[str]:
        """The HTML of each row of ``"connections"``, ``"grants"`` or ``"locks"``, in display order."""
        sections = {"connections": self.connections, "grants": self.grants, "locks": self.locks}
        with self._render_lock:
            return sections[section].texts()

    # -- lifetime ----------------------------------------------------------------------------

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
        alive and does nothing. Its own thread is joined as in :meth:`close`;
        the widgets stay open until :meth:`close`.
        """
        with self._render_lock:
            for section in (self.connections, self.grants, self.locks):
                section.disable()
            self.trash.disable()
        self._stop_following()
        self._retired = True
        self.header.value = (
            f'<span class="fsbroker-banner">Stale: {escape(why)} — this view no longer updates and its '
            "buttons do nothing.</span> " + str(self.header.value)
        )
        self.add_class("fsbroker-stale")

    def _stop_following(self) -> bool:
        """Unsubscribe, end the own thread; whether this was done already."""
        with self._state:
            already = self._closed
            self._closed = True
            unsubscribe, self._unsubscribe = self._unsubscribe, []
            self._state.notify_all()
        for stop in unsubscribe:
            stop()
        self._server_log.close()
        if self._own_thread:
            self._thread.close()  # a Disconnect still running is waited for
        return already

    def close(self) -> None:
        """Unsubscribe from the broker, join its own thread, close the widgets. Idempotent.

        A Disconnect still running is waited for a few seconds; consent prompts
        in :attr:`consent_area` are left to their owner.
        """
        already = self._stop_following()
        if not already or self._retired:
            self._retired = False
            with self._render_lock:
                for section in (self.connections, self.grants, self.locks):
                    section.close()
                self.trash.close()
                self.consent_area.children = ()  # the prompts belong to whoever added them
                close_parts(self)
        super().close()
