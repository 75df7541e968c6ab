"""The dashboard's sections with a button per row: Connections (Disconnect), Grants (Revoke), Kept locks.

Each section keeps its rows by key and updates them in place
(:func:`~.rows.sync_rows`), so that a button a user is about to click stays the
same widget. A button only calls a public method: the connection's ``close()``
(through the dashboard's *act*, off the click's thread), ``broker.grants.revoke``,
``broker.force_unlock``. What it did is said through *say*; each asks the
dashboard to refresh through *changed*. The sections decide nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.status import ENDED_STATES, ConnectionView, grant_holder, sandbox_text
from ..core.broker import Broker
from ..core.errors import BrokerError, FilesError
from ..core.grants import Grant
from ..core.locks import LockInfo
from .closing import close_tree
from .markup import connection_html, escape, grant_html, lock_html, muted
from .rows import Row, button_row, sync_rows
from .style import REJECT, WARN

__all__ = ["ConnectionsSection", "GrantsSection", "LocksSection"]

log = logging.getLogger(__name__)

_Say = Callable[[str], None]
_Act = Callable[[str, Callable[[], str]], None]


class _ButtonRows:
    """The body of a section whose rows each have a button: the rows by key, and what shows without any."""

    def __init__(self, nothing: str) -> None:
        self.box = widgets.VBox()
        self.rows: dict[Any, Row] = {}
        self.empty = widgets.HTML(muted(nothing))

    def _sync(self, items: Sequence[tuple[Hashable, str, bool]], make: Callable[[Any], Row]) -> None:
        sync_rows(self.rows, self.box, items, make, self.empty)

    def texts(self) -> list[str]:
        """The HTML of each row, in display order."""
        by_box = {id(row.box): row for row in self.rows.values()}
        return [str(by_box[id(child)].text.value) for child in self.box.children if id(child) in by_box]

    def buttons(self) -> dict[Any, Any]:
        """The rows' buttons, by key."""
        return {key: row.button for key, row in self.rows.items()}

    def disable(self) -> None:
        """Disable every button (a retired dashboard)."""
        for row in self.rows.values():
            row.button.disabled = True

    def close(self) -> None:
        """Close every row and the empty line."""
        for row in self.rows.values():
            row.close()
        self.rows.clear()
        close_tree(self.empty)


class ConnectionsSection(_ButtonRows):
    """One row per connection with **Disconnect** (DOM class ``fsbroker-disconnect``): the kill switch.

    Parameters
    ----------
    act
        Runs the disconnect off the click's thread: ``act(name, work)``.
    changed
        Asks the dashboard to refresh (any thread, never blocks).
    """

    def __init__(self, *, act: _Act, changed: Callable[[], None]) -> None:
        super().__init__("No connections.")
        self._act = act
        self._changed = changed
        self._lock = threading.Lock()
        self._disconnecting: set[int] = set()
        self._views: dict[int, ConnectionView] = {}

    def sync(self, views: tuple[ConnectionView, ...]) -> None:
        """Show *views* (on the rendering thread)."""
        items: list[tuple[Hashable, str, bool]] = []
        with self._lock:
            disconnecting = set(self._disconnecting)
        for view in views:
            key = id(view)
            self._views[key] = view
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
        self._sync(items, self._make_row)
        for key in [key for key in self._views if key not in self.rows]:
            del self._views[key]

    def by_name(self) -> dict[str, Any]:
        """The Disconnect buttons shown, by connection name."""
        return {
            str(self._views[key].name): row.button for key, row in self.rows.items() if key in self._views
        }

    def _make_row(self, key: int) -> Row:
        view = self._views[key]
        row = button_row("", "Disconnect", "fsbroker-disconnect", WARN, "End this connection now")
        row.button.on_click(lambda _button: self._disconnect(view))
        return row

    def _disconnect(self, view: ConnectionView) -> None:
        key = id(view)
        with self._lock:
            if key in self._disconnecting:
                return
            self._disconnecting.add(key)
        self._act("fsbroker-disconnect", functools.partial(self._run_disconnect, view))
        self._changed()

    def _run_disconnect(self, view: ConnectionView) -> str:
        name = "?"
        try:
            name = str(view.name)
            view.close()
        except Exception as exc:
            log.exception("disconnecting %s failed", name)
            return f"Could not disconnect {escape(name)}: {escape(exc)}"
        finally:
            with self._lock:
                self._disconnecting.discard(id(view))
        return f"Disconnected {escape(name)}."

    def close(self) -> None:
        super().close()
        self._views.clear()


class _ActionRows(_ButtonRows):
    """Rows by id, each with one button that runs :meth:`act` on its row's id and says what it did.

    Parameters
    ----------
    broker
        Whom the buttons act on.
    say, changed
        Show what a click did; ask the dashboard to refresh.
    """

    #: What shows without any row.
    nothing: ClassVar[str]
    #: The button's label, DOM class and tooltip.
    button: ClassVar[tuple[str, str, str]]

    def __init__(self, broker: Broker, *, say: _Say, changed: Callable[[], None]) -> None:
        super().__init__(self.nothing)
        self._broker = broker
        self._say = say
        self._changed = changed

    def make_row(self, key: str) -> Row:
        """The row of *key*, its button wired."""
        label, dom_class, tooltip = self.button
        row = button_row("", label, dom_class, REJECT, tooltip)
        row.button.on_click(lambda _button: self._click(key))
        return row

    def _click(self, key: str) -> None:
        self._say(self.act(key))
        self._changed()

    def act(self, key: str) -> str:
        """Do what the button of *key* does; what to say about it."""
        raise NotImplementedError


class GrantsSection(_ActionRows):
    """One row per live grant with **Revoke** (DOM class ``fsbroker-revoke``)."""

    nothing = "No grants: servers ask with files/consent, or pre-approve with %fsbroker allow."
    button = ("Revoke", "fsbroker-revoke", "Revoke this grant now")

    def sync(self, grants: Sequence[Grant], servers: dict[str, str], now: float) -> None:
        """Show *grants* (on the rendering thread)."""
        self._sync([(g.id, grant_html(g, servers, now), True) for g in grants], self.make_row)

    def act(self, key: str) -> str:
        """Revoke grant *key*."""
        try:
            grant = self._broker.grants.revoke(key)
        except FilesError:
            return "That grant was already gone."
        return (
            f"Revoked {escape(', '.join(grant.operations))} on <code>{escape(grant.path)}</code> "
            f"for {escape(grant_holder(grant))}."
        )


class LocksSection(_ActionRows):
    """One row per kept lock with **Force release** (DOM class ``fsbroker-force-unlock``)."""

    nothing = "No kept locks."
    button = ("Force release", "fsbroker-force-unlock", "Release this lock now")

    def sync(self, locks: Sequence[LockInfo], now: float) -> None:
        """Show *locks* (on the rendering thread)."""
        self._sync([(info.lock_id or "", lock_html(info, now), True) for info in locks], self.make_row)

    def act(self, key: str) -> str:
        """Force-release kept lock *key*."""
        try:
            self._broker.force_unlock(key)
        except (FilesError, BrokerError):
            return "That lock was already released."
        return "Lock released."
