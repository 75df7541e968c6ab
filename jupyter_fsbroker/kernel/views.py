"""What a notebook broker shows, and where a consent request goes when no cell waits for it.

:class:`NotebookViews` builds and keeps the notebook's views (:mod:`jupyter_fsbroker.widgets`):
the dashboard (one per broker), a card under each cell that connected, and the
call panels that cells showed. It closes all of them with the broker. A request
that arrives while no call of its connection is in flight goes to the dashboard
when the user has shown it, else to its connection's card, else (with a warning)
to the dashboard, which ``%fsbroker status`` shows.

The views are honest about their own state. When the broker closes, the
dashboard and the connection cards stay on the page marked stale, their
buttons disabled (:meth:`~jupyter_fsbroker.widgets.dashboard.Dashboard.retire`).
When a frontend closes a view's comm under it (Notebook 7's file browser tab
cannot open widgets of a notebook made with *Files → New*, and closes them:
from then on the kernel answers their clicks with "No such comm"), the view is
dropped, the next :meth:`NotebookViews.dashboard` builds a fresh one, and a
notice (:meth:`NotebookViews.take_notices`) tells the user in the next cell's
output that those buttons cannot work, and what always does.

Where there are no widgets (a terminal IPython, a script) the views are text.
The dashboard and its rows are built in a context detached from the running
cell, with their comm routing freed (:mod:`.ipykernel_compat`), so that its
buttons work while a cell blocks (consent prompts are built so by the
consenter). This module never decides what a server may do, and never blocks.

Every change of a view that an event causes runs on the views' own thread
(:attr:`NotebookViews.thread`, a :class:`~jupyter_fsbroker.widgets.view_thread.ViewThread`
detached from the cells), never on the thread that reported the event: the pipe's
reading thread, a worker, the background loop. Those pay a queue ``put``.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..console.sign_in_text import sign_in_text
from ..console.status import TextView, status_text
from ..core.broker import Broker
from ..core.consent import ConsentRequest
from ..core.errors import ClosedError
from ..widgets.view_thread import ViewThread
from . import ipykernel_compat as ipk
from .notebook_connection import KernelConnection
from .prompting import Ask
from .snapshot import state_snapshot

if TYPE_CHECKING:  # the widget modules import ipywidgets (and IPython): only when widgets show
    from ..protocol.auth import SignIn
    from ..widgets.places import PromptShelf

__all__ = ["NotebookViews", "widgets_available"]

log = logging.getLogger(__name__)


def widgets_available() -> bool:
    """Whether ``ipywidgets`` is installed (found, not imported: the views import it when first shown,
    or the kernel's warm-up does, so ``%load_ext`` does not pay for it)."""
    try:
        return importlib.util.find_spec("ipywidgets") is not None
    except (ImportError, ValueError):
        return False


def _tell_outcome(sign_in: SignIn) -> None:
    """Where there are no widgets: say how a sign-in ended (the cell still runs)."""
    if sign_in.state != "waiting":
        print(sign_in_text(sign_in), file=sys.stderr)


def _render_detached(dashboard: Any, render: Callable[[], None]) -> None:
    # Rows are created while rendering, on the views' thread: keep their comms unpinned so
    # Disconnect works while a cell blocks (see ipykernel_compat).
    ipk.run_detached(render)
    ipk.free_routing(dashboard)


class NotebookViews:
    """The views of one notebook broker.

    Parameters
    ----------
    core
        The core broker shown.
    connections
        Returns the notebook's connections (called from the dashboard's thread).
    widgets
        Whether to show widgets; otherwise the views are text.
    closed
        Returns whether the notebook broker is closed: then nothing new is shown.
    pending
        Returns the consent requests waiting for an answer (for the dashboard's
        summary line and the status).

    Attributes
    ----------
    thread
        The views' thread (see the module docstring), closed with the views.
    """

    def __init__(
        self,
        core: Broker,
        connections: Callable[[], Sequence[KernelConnection]],
        *,
        widgets: bool,
        closed: Callable[[], bool],
        pending: Callable[[], Sequence[ConsentRequest]] = tuple,
    ) -> None:
        self.widgets = widgets
        self._core = core
        self._connections = connections
        self._closed = closed
        self._pending = pending
        self._notices: list[str] = []
        self._lock = threading.RLock()
        self._dashboard: Any | None = None
        self._dashboard_shelf: PromptShelf | None = None
        self._dashboard_shown = False
        self._cards: dict[str, tuple[Any, PromptShelf]] = {}  # connection id: card and its shelf
        self._kept: list[Any] = []
        self.thread = ViewThread(prepare=ipk.detach)

    # -- the dashboard -------------------------------------------------------------------------

    def dashboard(self) -> Any:
        """The dashboard widget (created on first use), or the status as text without widgets.

        From now on, consent requests outside a call go to it.

        Raises
        ------
        ClosedError
            The broker is closed.
        """
        if not self.widgets:
            return TextView(self.status)
        dash = self._ensure_dashboard()
        with self._lock:
            self._dashboard_shown = True
        return dash

    def status(self) -> str:
        """The dashboard as text (with the consent requests waiting)."""
        text = status_text(self._core, self._connections)
        waiting = self._pending()
        if waiting:
            text += "\nWaiting for consent:\n" + "\n".join(
                f"  {r.server}: {r.message or '(no message)'}  "
                f"(refused in {max(0, round(r.deadline - time.time()))} s)  [{r.id}]"
                for r in waiting
            )
        return text

    def snapshot(self) -> dict[str, Any]:
        """The dashboard's state as JSON-ready data.

        See :func:`~jupyter_fsbroker.kernel.snapshot.state_snapshot`.
        """
        return state_snapshot(self._core, self._connections, pending=self._pending())

    # -- notices -------------------------------------------------------------------------------

    def notice(self, text: str) -> None:
        """Queue a one-line notice for the next cell's output (any thread)."""
        log.warning("%s", text)
        with self._lock:
            self._notices.append(text)

    def take_notices(self) -> list[str]:
        """The notices queued since the last call (the kernel prints them after a cell)."""
        with self._lock:
            notices, self._notices = self._notices, []
        return notices

    def _lost(self, view: Any, what: str) -> None:
        """A frontend closed *view*'s comm: forget it (so a fresh one can be made) and say so."""
        with self._lock:
            if view is self._dashboard:
                self._dashboard, self._dashboard_shelf = None, None
                self._dashboard_shown = False
            self._cards = {key: card for key, card in self._cards.items() if card[0] is not view}
        try:
            view.mark_lost()
            view.retire("a frontend cut this view off from the kernel")  # what still shows says so
        except Exception:
            log.debug("could not retire a lost view", exc_info=True)
        self.notice(
            f"jupyter_fsbroker: a frontend closed the widgets of {what} (another tab of this notebook "
            "could not open them?), so their buttons no longer reach the kernel. broker.dashboard() shows "
            "a working one; %fsbroker disconnect NAME and conn.close() always work."
        )

    def _ensure_dashboard(self) -> Any:
        with self._lock:
            if self._closed():
                raise ClosedError("the broker is closed (%reload_ext jupyter_fsbroker starts a new one)")
            if self._dashboard is not None:
                return self._dashboard
            from ..widgets.closing import watch_comm_closed
            from ..widgets.dashboard import Dashboard
            from ..widgets.places import PromptShelf

            dash = ipk.run_detached(
                Dashboard,
                self._core,
                self._connections,
                render_with=_render_detached,
                pending=self._pending,
                views=self.thread,
            )
            ipk.free_routing(dash)
            watch_comm_closed(dash, lambda: self._lost(dash, "the dashboard"))
            self._dashboard = dash
            self._dashboard_shelf = PromptShelf(dash)
            return dash

    def refresh(self) -> None:
        """Bring the dashboard up to date soon (a connection's state changed). Never blocks."""
        dash = self._dashboard
        if dash is not None:
            dash.schedule_refresh()

    def follow_consent(self, ask: Ask) -> None:
        """Follow a new consent request (any thread): the dashboard's "waiting" line shows it now
        and drops it once it is decided."""
        self.refresh()
        ask.future.add_done_callback(self._decided)

    def _decided(self, future: object) -> None:
        try:
            self.refresh()
        except Exception:  # a view must never break the answer
            log.debug("the dashboard could not follow a consent request", exc_info=True)

    # -- connections ---------------------------------------------------------------------------

    def show_card(self, conn: KernelConnection) -> None:
        """Display the card of a new connection in the running cell's output.

        Only from the main thread with widgets: a display from another thread
        would land in whatever cell the kernel handled last.
        """
        if not self.widgets or threading.current_thread() is not threading.main_thread():
            return
        try:
            from IPython.display import display

            from ..widgets.closing import watch_comm_closed
            from ..widgets.places import ConnectionCard, PromptShelf

            card = ConnectionCard(conn)
            with self._lock:
                self._cards[conn.id] = (card, PromptShelf(card))
            # The card follows its connection from here. A change that came while it was being
            # built was shown before it could be found: show the state in force now, posted
            # after that change (the views' thread runs posts in order).
            self.connection_changed(conn)
            watch_comm_closed(card, lambda: self._lost(card, f"the card of connection {conn.name!r}"))
            display(card)  # type: ignore[no-untyped-call,unused-ignore]
        except Exception:
            log.exception("could not show the connection card")

    def show_sign_in(self, sign_in: SignIn, respond: Callable[[str, str], tuple[bool, str]]) -> None:
        """Show a sign-in a connect started, in the connecting cell's output (call it on the cell's
        thread): the card (built on the views' thread, its clicks free to arrive while the cell
        blocks), or the words where there are no widgets."""
        if not self.widgets:
            print(sign_in_text(sign_in), file=sys.stderr)
            sign_in.subscribe(_tell_outcome)
            return
        try:
            from IPython.display import display

            from ..widgets.sign_in_card import SignInCard

            def build() -> Any:
                card = SignInCard(sign_in, lambda address: respond(sign_in.id, address), views=self.thread)
                ipk.free_routing(card)
                return card

            card = self.thread.call(lambda: ipk.run_detached(build))
            self.keep(card)
            display(card)  # type: ignore[no-untyped-call,unused-ignore]
        except Exception:
            log.exception("could not show the sign-in card")
            print(sign_in_text(sign_in), file=sys.stderr)

    def connection_changed(self, conn: KernelConnection) -> None:
        """Show a connection's new state (it opened, closed or ended): its card and the dashboard.

        Any thread; the card changes on the views' thread.
        """
        if not self.thread.post(self._show_connection, conn):
            self._show_connection(conn)

    def _show_connection(self, conn: KernelConnection) -> None:
        with self._lock:
            shown = self._cards.get(conn.id)
        if shown is not None:
            try:
                shown[0].update()
            except Exception:
                log.debug("could not update the connection card", exc_info=True)
        self.refresh()

    def keep(self, widget: Any) -> None:
        """Close *widget* (a call's panel) with the views."""
        with self._lock:
            self._kept.append(widget)

    # -- consent requests outside a call -------------------------------------------------------

    def place_outside(self, ask: Ask) -> None:
        """Show a consent request that no call in flight took (see the module docstring)."""
        if ask.prompt is None or self._closed():
            return
        with self._lock:
            shelf = self._dashboard_shelf if self._dashboard_shown else None
            if shelf is None:
                card = self._cards.get(ask.request.connection_id)
                shelf = card[1] if card is not None else None
        if shelf is None:
            log.warning(
                "consent request from %s with no visible place to ask: run %%fsbroker status to see it",
                ask.request.server,
            )
            try:
                self._ensure_dashboard()
            except ClosedError:
                return
            shelf = self._dashboard_shelf
        assert shelf is not None
        shelf.put(ask.prompt)

    # -- lifetime ------------------------------------------------------------------------------

    def close(self, *, at_exit: bool = False, why: str = "the file broker was closed") -> None:
        """End every view. Idempotent.

        The call panels are closed; the dashboard and the connection cards stay
        on the page, marked stale with *why* and their buttons disabled, so the
        page never shows a live-looking view that does nothing. When the process
        is ending the widgets are left alone.
        """
        with self._lock:
            dash, self._dashboard, self._dashboard_shelf = self._dashboard, None, None
            cards, self._cards = [card for card, _ in self._cards.values()], {}
            kept, self._kept = self._kept, []
        if at_exit:
            self.thread.close()
            return
        self.thread.settle()  # what events posted runs before the views end
        for widget in kept:
            try:
                widget.close()
            except Exception:
                log.debug("could not close a view", exc_info=True)
        for view in [*cards, *([dash] if dash is not None else [])]:
            try:
                view.retire(why)
            except Exception:
                log.debug("could not retire a view", exc_info=True)
        self.thread.close()
