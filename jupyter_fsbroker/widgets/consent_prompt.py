"""The consent prompt: a server's ``files/consent`` request as a widget.

A :class:`ConsentPrompt` shows one :class:`~jupyter_fsbroker.core.consent.ConsentRequest`
and resolves the :class:`~concurrent.futures.Future` the consenter returned to
the broker. It decides nothing: it offers what the broker says is approvable,
lets the user narrow it, and reports the answer. The broker waits for the future
with a timeout and cancels it when the time is up or the connection closes; the
prompt then shows what happened.

Threading: the prompt may be built, clicked and resolved on any thread (click
handlers run on a kernel subshell's thread while a cell blocks; the broker
cancels from its own threads). Its own state is guarded by a lock; the future
guarantees that only the first answer counts. The countdown ticks on a
:class:`~.view_thread.ViewThread` clock: given one (as the kernel's prompts are,
the views' thread, one clock for every prompt), the prompt is changed there only,
the outcome of a timeout or of a click included. Without one, the prompt's own
(a daemon thread ``fsbroker-consent-countdown-ID``) ticks until the future is
done, the deadline passes or :meth:`ConsentPrompt.close` is called, which joins
it, and the outcome shows on the thread that resolves the future.
"""

from __future__ import annotations

import contextlib
import html
import math
import threading
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.consent_text import TIMED_OUT, ending, withdrawn_text
from ..console.format import printable
from ..console.status import decision_text
from ..core.consent import ConsentDecision, ConsentRequest
from .closing import close_parts
from .consent_rows import (
    DURATION_CHOICES,
    all_paths_row,
    already_note,
    answer_buttons,
    duration_toggle,
    path_row,
)
from .style import style_html
from .text_fallback import WholeText
from .view_thread import ViewThread

__all__ = ["DURATION_CHOICES", "ConsentPrompt"]


class ConsentPrompt(WholeText, widgets.VBox):  # type: ignore[misc]
    """One consent request, answerable with Approve or Deny (DOM class ``fsbroker-consent``).

    Each requested path is a row: a checkbox for the path (``fsbroker-consent-path``)
    and one checkbox per operation asked for it (``fsbroker-consent-op``, with
    ``fsbroker-op-read`` … ``fsbroker-op-watch``), so the user can grant, say,
    read on the data and write on the report only. Beside each path, what it
    covers (the whole shared folder and how many files, a file and its size)
    and what a write or delete would do; its real location on hover.
    Destructive operations (delete; write over an existing file) are marked
    (``fsbroker-destructive``) and start unticked; with nothing ticked,
    Approve is disabled. When several paths can be
    approved, a row of checkboxes "all paths" (:attr:`op_toggles`) sets an
    operation on every path at once. Once answered, the prompt shrinks to its
    one-line outcome (DOM class ``fsbroker-finished``).

    Parameters
    ----------
    request
        What the server asks for, as the broker prepared it.
    future
        The future the consenter returned; Approve and Deny resolve it. When it
        is cancelled (timeout, connection closed) the prompt says so.
    default_duration
        The duration selected at first: ``None`` (until the connection is
        disconnected), ``900`` or ``3600``.
    tick
        Seconds between countdown updates.
    views
        The thread that changes the prompt after it is built (see the module
        docstring); ``None``: the thread that resolves the future, and a
        countdown thread of its own.

    Attributes
    ----------
    request, future
        As given.
    checkboxes
        One checkbox per requested path, in request order; those of paths that
        cannot be approved are disabled and unchecked.
    path_ops
        ``path_ops[i][op]``: the checkbox of operation *op* on the *i*-th path
        (only the operations asked for that path; those that cannot be granted
        there, like write in a read-only folder, are disabled and unchecked).
    op_toggles
        One checkbox per requested operation, for all paths at once; the user
        can only narrow.
    duration
        The duration choice (values from :data:`DURATION_CHOICES`).
    approve_button, deny_button
        The answers (DOM classes ``fsbroker-approve`` and ``fsbroker-deny``).
    countdown
        The time left before the request is refused.
    outcome
        What was decided, once it was.

    Notes
    -----
    A click after the future is done (answered, timed out, withdrawn) does
    nothing. Clicks from several threads at once resolve the future exactly
    once: the future itself arbitrates.
    """

    def __init__(
        self,
        request: ConsentRequest,
        future: Future[ConsentDecision],
        *,
        default_duration: float | None = None,
        tick: float = 1.0,
        views: ViewThread | None = None,
    ) -> None:
        super().__init__()
        self._views = views
        self.request = request
        self.future = future
        self._tick = max(0.01, float(tick))
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._finished = False
        self._closed = False
        self._syncing = False
        self._answering: int | None = None  # the thread resolving the future from a click
        self._outcome_plain = ""
        # The countdown's clock: the views' thread, or one of the prompt's own (closed when counting ends).
        self._own_clock = views is None
        self._clock = (
            views if views is not None else ViewThread(name=f"fsbroker-consent-countdown-{request.id}")
        )

        message = html.escape(printable(request.message)) if request.message else "<i>(no message)</i>"
        who = html.escape(printable(request.who))
        self.header = widgets.HTML(
            f"<b>{html.escape(printable(request.server))}</b> asks for access to your files: {message}"
            + (f'<br><span class="fsbroker-note fsbroker-consent-who">{who}</span>' if who else "")
        )
        path_rows = [path_row(request, item) for item in request.items]
        self.checkboxes: list[Any] = [row.checkbox for row in path_rows]
        self.path_ops: list[dict[str, Any]] = [row.ops for row in path_rows]
        ops_row, self.op_toggles = all_paths_row(request)
        self.duration = duration_toggle(default_duration, request)
        self.approve_button, self.deny_button = answer_buttons()
        self.countdown = widgets.HTML()
        self.countdown.add_class("fsbroker-countdown")
        self.outcome = widgets.HTML()
        self.outcome.add_class("fsbroker-consent-outcome")
        self.already = already_note(request)
        self._style = widgets.HTML(style_html(), layout=widgets.Layout(display="none"))
        self.children = (
            self.header,
            *(row.row for row in path_rows),
            ops_row,
            self.already,
            widgets.HBox([widgets.HTML("For:&nbsp;"), self.duration]),
            widgets.HBox([self.approve_button, self.deny_button, self.countdown]),
            self.outcome,
            self._style,
        )
        self.add_class("fsbroker-consent")

        for toggle in self.op_toggles.values():
            toggle.observe(self._all_changed, names="value")
        for control in (*self.checkboxes, *(b for ops in self.path_ops for b in ops.values())):
            control.observe(self._selection_changed, names="value")
        self._selection_changed()
        self._show_countdown()
        if views is not None:
            future.add_done_callback(lambda done: views.post(self._on_done, done))
        else:
            future.add_done_callback(self._on_done)  # runs at once if the future is done already
        with self._lock:
            if not self._finished and not self._closed:
                self._clock.clock(self._next_tick, self._next_tick_in(request.deadline - time.time()))
        self.approve_button.on_click(self._approve_clicked)
        self.deny_button.on_click(self._deny_clicked)

    # -- what the user chose ---------------------------------------------------------------

    def selected_decision(self) -> ConsentDecision:
        """The decision the checked paths, checked operations and duration stand for.

        Paths that cannot be approved are never included, whatever their checkbox says;
        each path gets only operations asked for it. When every checked path gets
        the same operations (or all it can get of them) the decision is written
        in the flat form; otherwise per path.
        """
        chosen: dict[str, tuple[str, ...]] = {}
        for item, box, ops in zip(self.request.items, self.checkboxes, self.path_ops, strict=True):
            if item.approvable and box.value:
                chosen[item.path] = tuple(op for op in self.request.operations if op in ops and ops[op].value)
        seconds = int(self.duration.value or 0)
        duration = None if seconds <= 0 else float(seconds)
        union = tuple(op for op in self.request.operations if any(op in got for got in chosen.values()))
        flat = all(
            set(got) == set(union) & set(item.grantable(self.request.operations))
            for item in self.request.items
            if (got := chosen.get(item.path)) is not None
        )
        if flat:
            return ConsentDecision(tuple(p for p, got in chosen.items() if got), union, duration)
        return ConsentDecision.per_path(chosen, duration=duration)

    @property
    def done(self) -> bool:
        """Whether the request is answered, timed out or withdrawn."""
        return self.future.done()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the prompt is gone from every view)."""
        return self._closed

    def _all_changed(self, change: Any) -> None:
        """An "all paths" checkbox: set that operation on every path where it can be granted."""
        with self._lock:
            if self._syncing or self._finished:
                return
            self._syncing = True
            try:
                for ops in self.path_ops:
                    box = ops.get(change["owner"].description)
                    if box is not None and not box.disabled:
                        box.value = bool(change["new"])
            finally:
                self._syncing = False
        self._selection_changed()

    def _selection_changed(self, change: object = None) -> None:
        del change
        with self._lock:
            if self._finished:
                return
            if not self._syncing:  # an "all paths" box shows whether any path has its operation
                self._syncing = True
                try:
                    for op, toggle in self.op_toggles.items():
                        on = any(ops[op].value for ops in self.path_ops if op in ops and not ops[op].disabled)
                        if toggle.value != on:
                            toggle.value = on
                finally:
                    self._syncing = False
            self.approve_button.disabled = not self.selected_decision().granted

    # -- answers -----------------------------------------------------------------------------

    def _approve_clicked(self, button: object = None) -> None:
        del button
        decision = self.selected_decision()
        if decision.granted:  # nothing chosen: Approve is disabled, a stray click does nothing
            self._answer(decision)

    def _deny_clicked(self, button: object = None) -> None:
        del button
        self._answer(ConsentDecision.deny())

    def _answer(self, decision: ConsentDecision) -> None:
        # The future arbitrates between concurrent clicks and the broker's cancellation;
        # it is resolved outside our lock so that its callbacks can never deadlock with it.
        if self.future.done():
            return
        # The future's callbacks run in the order they were added, and this prompt's came first:
        # while this thread answers, the prompt's own (comm-heavy) update waits until the broker's
        # loop has been told, so the server gets its answer without waiting for the widgets.
        self._answering = threading.get_ident()
        try:
            with contextlib.suppress(InvalidStateError):  # answered, timed out or withdrawn meanwhile
                self.future.set_result(decision)
        finally:
            self._answering = None
        if self.future.done() and self._views is None:  # with views, the posted callback shows it
            self._on_done(self.future)

    def _on_done(self, future: Future[ConsentDecision]) -> None:
        if self._answering == threading.get_ident():
            return  # _answer shows the outcome once every other callback has run
        text = self._outcome_text(future)
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self._stop.set()
            closed = self._closed
        if self._own_clock:
            self._clock.close()  # outside the lock: a tick may be waiting for it
        if closed:
            return
        with self._lock:
            if self._closed:  # closed meanwhile
                return
            for control in (
                *self.checkboxes,
                *self.op_toggles.values(),
                *(box for ops in self.path_ops for box in ops.values()),
                self.duration,
            ):
                control.disabled = True
            self.approve_button.disabled = True
            self.deny_button.disabled = True
            self.countdown.value = ""
            self._outcome_plain = text
            who = html.escape(printable(self.request.server))
            self.outcome.value = (
                f'<span class="fsbroker-note">{who}: </span><b>{html.escape(printable(text))}</b>'
            )
            # Shrunk to its one-line outcome: the rest stays (disabled) but is hidden.
            for child in self.children:
                if child is not self.outcome and child is not self._style:
                    child.layout.display = "none"
            self.add_class("fsbroker-finished")

    def _outcome_text(self, future: Future[ConsentDecision]) -> str:
        how = ending(self.request, future)
        if how == "timeout":
            return TIMED_OUT
        if how == "withdrawn":
            return withdrawn_text(future)
        if how == "failed":
            return f"Failed ({type(future.exception()).__name__}) — denied"
        return decision_text(self.request, future.result())

    @property
    def outcome_text(self) -> str:
        """What was decided, as plain text; empty while the request is open."""
        return self._outcome_plain

    # -- countdown ---------------------------------------------------------------------------

    def _show_countdown(self) -> float:
        remaining = self.request.deadline - time.time()
        with self._lock:
            if not self._finished and not self._closed:
                if remaining > 0:
                    whole = math.ceil(remaining)
                    self.countdown.value = (
                        f"&nbsp;refused automatically in <b>{whole // 60}:{whole % 60:02d}</b>"
                    )
                else:
                    self.countdown.value = "&nbsp;time is up: refusing"
        return remaining

    def _next_tick_in(self, remaining: float) -> float:
        # Wake when the remaining time crosses a whole second, so the display never skips one.
        fraction = remaining - math.floor(remaining)
        return min(self._tick, remaining, fraction or self._tick)

    def _next_tick(self) -> float | None:
        """One tick of the clock: the seconds until the next, or ``None`` when counting is over."""
        remaining = 0.0 if self._stop.is_set() else self._show_countdown()
        if remaining > 0:
            return self._next_tick_in(remaining)
        # Over (the broker cancels the future at the deadline): nothing left to count.
        self._stop_clock()
        return None

    def _stop_clock(self) -> None:
        self._stop.set()
        if self._own_clock:
            self._clock.close()  # joins its thread, unless called on it

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the countdown (joining its thread) and close the prompt's widgets.

        The future is left as it is: the broker still times it out (or the
        owner may cancel it). Idempotent; safe from any thread.
        """
        with self._lock:
            already = self._closed
            self._closed = True
        self._stop_clock()
        if not already:
            close_parts(self)
        super().close()

    def __repr__(self) -> str:
        return self._summary(" (answered)" if self.future.done() else " (waiting)")

    def fallback_text(self) -> str:
        # What a view without widgets shows (GitHub, nbconvert). The text is fixed when the
        # prompt is displayed, before it is answered: "(waiting)" would stay in a saved notebook.
        return self._summary()

    def _summary(self, state: str = "") -> str:
        request = self.request
        asked = [item for item in request.items if item.approvable]
        ops = [op for op in request.operations if any(op in request.operations_of(i) for i in asked)]
        refused = len(request.items) - len(asked)
        more = f", {refused} not approvable" if refused else ""
        return (
            f"<consent request from {request.server!r}: {', '.join(ops) or 'nothing'} on "
            f"{len(asked)} path{'' if len(asked) == 1 else 's'}{more}{state}>"
        )
