"""Where a consent prompt appears, and how the user's answer gets back while a cell blocks.

The broker asks a :class:`KernelConsenter`; it returns a future at once and
shows the request where the user is looking:

* **a call in flight** (a cell blocked in ``conn.call_tool(...)`` or awaiting
  ``conn.acall_tool(...)`` on that connection): the request goes to the call's
  :class:`CallScope`, and the *calling cell itself* — woken from its wait —
  displays a small panel in its own output and puts the prompt in it. The prompt
  widgets were built on the background loop with an empty parent header and
  their comm routing freed (:mod:`.ipykernel_compat`), so a click sent on a
  kernel subshell (JupyterLab) is handled at once although the main shell is
  busy; an async cell handles clicks on the main shell while it awaits.
* **no call in flight**: the request goes to the notebook broker's *outside*
  place (the dashboard's consent area, or the card shown under the connecting
  cell).
* **clicks cannot arrive** (a synchronous call, and no kernel subshell exists:
  VS Code, classic frontends, consoles) or there are no widgets at all: the
  blocked cell asks on stdin (``input_request``) with the words and answers of
  every text prompt (:mod:`jupyter_fsbroker.console.consent_text`), racing the
  widget; whichever answers first counts.

Whatever the path, the broker itself denies when ``consent_timeout`` passes; a
cell never waits for anything but its call's future, and Ctrl-C / Interrupt
cancels the call (and withdraws its pending prompts). Nothing here decides
what is granted, and no click handler ever blocks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..console.consent_text import outcome_text, parse_answer, question_text
from ..core.broker import Broker
from ..core.consent import ConsentDecision, ConsentRequest, note_withdrawal, withdraw
from ..core.transfers import Transfer
from . import ipykernel_compat as ipk
from .running_calls import GRACE

if TYPE_CHECKING:
    from ..widgets.view_thread import ViewThread
    from .running_calls import RunningCall

__all__ = ["Ask", "CallScope", "KernelConsenter"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds a blocked call waits for a frontend to create a subshell before asking on stdin.
SUBSHELL_GRACE = 1.0


@dataclass(eq=False)
class Ask:
    """One consent request on its way to the user."""

    request: ConsentRequest
    future: Future[ConsentDecision]
    prompt: Any | None = None  # the ConsentPrompt widget, when widgets are shown
    built: bool = False  # whether the prompt (if any) was made: until then it may still come


def _resolve(future: Future[ConsentDecision], decision: ConsentDecision) -> bool:
    try:
        future.set_result(decision)
    except InvalidStateError:
        return False  # answered, timed out or withdrawn meanwhile: the first answer counts
    return True


class CallScope:
    """One tool call in flight, seen from the cell that waits for it.

    Created by the kernel connection around each call. The consenter offers it
    the requests of its connection (:meth:`offer`, any thread); the waiting
    cell (:meth:`wait` or :meth:`wait_async`) wakes up, shows them in a panel
    in its own output, and for a synchronous call may ask on stdin.

    Parameters
    ----------
    connection_id
        The broker-side connection the call runs on.
    broker
        For transfer progress.
    kernel
        The ipykernel kernel, or ``None`` (terminal IPython, scripts).
    widgets
        Whether prompts and progress are shown as widgets.
    stdin_mode
        Returns ``"auto"``, ``"always"`` or ``"never"`` (read when a request arrives).
    show_progress
        Returns whether to show transfer progress.
    place_outside
        Where a request goes that arrives after the call ended.
    views
        The views' thread: the call's transfer progress is built, changed and
        closed there. ``None``: on the calling thread.
    """

    def __init__(
        self,
        connection_id: str,
        *,
        broker: Broker,
        kernel: Any | None,
        widgets: bool,
        stdin_mode: Callable[[], str],
        show_progress: Callable[[], bool],
        place_outside: Callable[[Ask], None],
        views: ViewThread | None = None,
    ) -> None:
        self.connection_id = connection_id
        self._views = views
        self._broker = broker
        self._kernel = kernel
        self._stdin_mode = stdin_mode
        self._show_progress = show_progress
        self._place_outside = place_outside
        self._lock = threading.Lock()
        self._bell: Future[None] = Future()
        self._pending: list[Ask] = []
        self._asks: list[Ask] = []
        self._want_progress = False
        self._ended = False
        self.panel: Any | None = None
        self.progress: Any | None = None
        self.line: Any | None = None
        self._widgets = widgets
        self._call: RunningCall | None = None
        self._cancel: Callable[[], object] | None = None
        self._shown_at: float | None = None
        self._unsubscribe: Callable[[], None] | None = None
        if widgets:
            self._unsubscribe = broker.on_transfer(self._on_transfer)

    # -- any thread ----------------------------------------------------------------------------

    def offer(self, ask: Ask) -> bool:
        """Hand a request to this call; ``False`` when the call already ended."""
        with self._lock:
            if self._ended:
                return False
            self._pending.append(ask)
            self._asks.append(ask)
            self._ring()
        return True

    def _on_transfer(self, transfer: Transfer) -> None:
        if transfer.connection_id != self.connection_id or transfer.finished:
            return
        with self._lock:
            if self._ended or self._want_progress:
                return
            if not self._show_progress():
                return
            self._want_progress = True
            self._ring()

    def follow(self, call: RunningCall, cancel: Callable[[], object]) -> None:
        """The call in flight this scope frames: after :data:`~.running_calls.GRACE` seconds the cell
        shows its running line, whose Cancel calls *cancel*."""
        with self._lock:
            self._call, self._cancel = call, cancel

    def _line_in(self) -> float | None:
        """Seconds until the running line is due; ``None`` when none is (shown, or nothing to show)."""
        with self._lock:
            call = self._call
            if call is None or not self._widgets or self.line is not None or self._ended:
                return None
        return max(0.0, GRACE - call.elapsed())

    def _ring(self) -> None:
        if not self._bell.done():
            self._bell.set_result(None)

    # -- the waiting cell ----------------------------------------------------------------------

    def wait(self, result: Future[T]) -> T:
        """Block until *result* is done, showing requests as they come; Ctrl-C cancels the call."""
        try:
            while True:
                with self._lock:
                    bell = self._bell
                waited: tuple[Future[Any], ...] = (result, bell)
                timeout = self._line_in()
                concurrent.futures.wait(waited, timeout, return_when=concurrent.futures.FIRST_COMPLETED)
                self._service(result, sync=True)
                if result.done():
                    self._report_timeouts()
                    return result.result()
        except BaseException as exc:
            self._withdraw(exc, result)
            raise
        finally:
            self.end()

    async def wait_async(self, result: Future[T]) -> T:
        """Await *result* on the caller's event loop, showing requests as they come."""
        wrapped = asyncio.wrap_future(result)
        rung: asyncio.Future[None] | None = None
        try:
            while True:
                with self._lock:
                    bell = self._bell
                rung = asyncio.wrap_future(bell)
                timeout = self._line_in()
                await asyncio.wait((wrapped, rung), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                self._service(result, sync=False)
                if wrapped.done():
                    self._report_timeouts()
                    return wrapped.result()
        except BaseException as exc:
            self._withdraw(exc, result)
            raise
        finally:
            if rung is not None and not rung.done():
                rung.cancel()
            self.end()

    def _take(self) -> tuple[list[Ask], bool]:
        with self._lock:
            items, self._pending = self._pending, []
            progress = self._want_progress and self.progress is None
            if self._bell.done():
                self._bell = Future()
        return items, progress

    def _service(self, result: Future[Any], *, sync: bool) -> None:
        items, progress = self._take()
        shown = [ask for ask in items if ask.prompt is not None]
        line = not result.done() and self._line_in() == 0.0
        if shown or progress or line:
            try:
                self._show(shown, progress, line=line)
            except Exception:
                log.exception("could not show the call's panel")
        if sync:
            for ask in items:
                if not ask.future.done() and self._should_ask_stdin(ask, result):
                    self._ask_stdin(ask)

    def _show(self, prompts: list[Ask], progress: bool, *, line: bool = False) -> None:
        """On the calling thread: display the panel (once) and add the running line, progress and prompts."""
        from IPython.display import display

        from ..widgets.places import CallPanel

        new: list[Any] = []
        if line:
            self.line = self._make_line()
            new.append(self.line)
        if progress:
            from ..widgets.progress import TransferProgress

            views = self._views
            if views is None:
                self.progress = TransferProgress(self._broker, connection_id=self.connection_id)
            else:  # built where it changes: the views' thread (the cell only displays it)
                broker, connection_id = self._broker, self.connection_id
                self.progress = views.call(
                    lambda: TransferProgress(broker, connection_id=connection_id, views=views)
                )
            new.append(self.progress)
        new += [ask.prompt for ask in prompts]
        if self.panel is None:
            self.panel = CallPanel(new)
            display(self.panel)  # type: ignore[no-untyped-call,unused-ignore]
            self._shown_at = time.monotonic()
        else:
            self.panel.add(*new)

    def _make_line(self) -> Any:
        """The running line, built where it ticks (the views' thread); its Cancel may arrive on a subshell."""
        from ..widgets.running import RunningLine

        call, cancel, views = self._call, self._cancel, self._views
        if call is None or cancel is None:  # pragma: no cover - _line_in said a line is due
            raise RuntimeError("no call to show")

        def build() -> Any:
            made = RunningLine(call.text, cancel, views=views)
            ipk.free_routing(made)
            return made

        return build() if views is None else views.call(build)

    def _should_ask_stdin(self, ask: Ask, result: Future[Any]) -> bool:
        mode = self._stdin_mode()
        if mode == "never" or not ipk.stdin_allowed(self._kernel):
            return False
        if ask.prompt is None or mode == "always":
            return True
        # auto: a click can arrive only on a subshell. A frontend that shows widgets creates one
        # as soon as it sees the first widget; give it a moment.
        deadline = (self._shown_at or time.monotonic()) + SUBSHELL_GRACE
        while not ipk.has_subshells(self._kernel):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            waited: tuple[Future[Any], ...] = (ask.future, result)
            concurrent.futures.wait(waited, timeout=min(remaining, 0.05))
            if ask.future.done() or result.done():
                return False
        return False

    def _ask_stdin(self, ask: Ask) -> None:
        request = ask.request
        answer = ipk.ask_stdin(self._kernel, question_text(request), ask.future)
        if answer is not None:
            _resolve(ask.future, parse_answer(request, answer))
        print(outcome_text(request, ask.future))

    def _report_timeouts(self) -> None:
        """One line in the calling cell for each of its consent requests that nobody answered in time."""
        with self._lock:
            asks = list(self._asks)
        for ask in asks:
            request = ask.request
            if ask.future.cancelled() and time.time() >= request.deadline - 1.0:
                paths = ", ".join(item.rel or item.path for item in request.items if item.approvable)
                print(
                    f"jupyter_fsbroker: {request.server}'s consent request for {paths} timed out after "
                    f"{request.timeout:g} s without an answer and was refused",
                    file=sys.stderr,
                )

    def _withdraw(self, exc: BaseException, call: Future[Any]) -> None:
        """Cancel the call that raised *exc*, and withdraw its requests saying why."""
        interrupted = isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)
        why = "the call was interrupted" if interrupted else "the call failed"
        with self._lock:
            asks = list(self._asks)
        for ask in asks:  # before the call's cancellation reaches them on the loop
            note_withdrawal(ask.future, why)
        call.cancel()
        for ask in asks:
            withdraw(ask.future, why)

    def end(self) -> None:
        """The call is over: later requests go elsewhere; the progress bars go away. Idempotent."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            leftovers, self._pending = self._pending, []
            unsubscribe, self._unsubscribe = self._unsubscribe, None
            progress, self.progress = self.progress, None
            line, self.line = self.line, None
        if unsubscribe is not None:
            unsubscribe()
        if line is not None:
            self._close_line(line)
        for ask in leftovers:
            self._place_outside(ask)
        if progress is not None:
            try:
                progress.close()
            except Exception:
                log.debug("could not close the progress widget", exc_info=True)

    def _close_line(self, line: Any) -> None:
        """The call ended: its running line goes (on the views' thread, which ticks it)."""
        views = self._views
        if views is None or not views.post(line.close):
            try:
                line.close()
            except Exception:
                log.debug("could not close the running line", exc_info=True)


class KernelConsenter:
    """The consenter of a notebook broker: routes each request to a call in flight or elsewhere.

    Parameters
    ----------
    make_prompt
        Builds the prompt widget for ``(request, future)``; ``None`` when there
        are no widgets. Called on the broker's loop thread inside a detached
        context; the consenter frees the prompt's comm routing.
    place_outside
        Shows a request that no call in flight can take.
    ready
        Done once what answering needs is imported (see
        :func:`~.servers.warm_up`); a request that arrives before is shown when
        it is done, so the user's answer never waits for an import.
    views
        The views' thread: the prompt is built and routed there, and the broker's
        thread that asked only posts it. ``None``: on the asking thread.
    """

    def __init__(
        self,
        *,
        make_prompt: Callable[[ConsentRequest, Future[ConsentDecision]], Any] | None,
        place_outside: Callable[[Ask], None],
        ready: Future[Any] | None = None,
        views: ViewThread | None = None,
    ) -> None:
        self._ready = ready
        self._views = views
        self._closed = False
        self._make_prompt = make_prompt
        self._place_outside = place_outside
        self._lock = threading.Lock()
        self._scopes: dict[str, list[CallScope]] = {}
        self._asks: list[Ask] = []
        self._listeners: list[Callable[[Ask], object]] = []

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        """Show *request* (see the module docstring); the future resolves with the answer.

        Returns at once: with a views' thread, the prompt is built and shown there.
        """
        future: Future[ConsentDecision] = Future()
        ask = Ask(request, future)
        with self._lock:
            self._asks = [a for a in self._asks if not (a.built and a.future.done() and _gone(a.prompt))]
            self._asks.append(ask)
        views = self._views
        if views is None or not views.post(self._show, ask):
            self._show(ask)
        return future

    def _show(self, ask: Ask) -> None:
        """Build *ask*'s prompt, tell the listeners, and route it (when what answering needs is ready)."""
        request, future = ask.request, ask.future
        if self._make_prompt is not None and not future.done() and not self._closed:
            try:
                ask.prompt = ipk.run_detached(self._make_prompt, request, future)
                ipk.free_routing(ask.prompt)
            except Exception:
                log.exception("could not build the consent prompt")
                ask.prompt = None
        ask.built = True
        with self._lock:
            scopes = list(self._scopes.get(request.connection_id, ()))
            listeners = list(self._listeners)
        for listener in listeners:  # views outside the prompt (the dashboard, the JupyterLab panel)
            try:
                listener(ask)
            except Exception:
                log.exception("a consent listener failed")
        ready = self._ready
        if ready is None or ready.done():
            self._route(ask, scopes)
        else:
            ready.add_done_callback(lambda _ready: self._route_later(ask, scopes))

    def _route_later(self, ask: Ask, scopes: list[CallScope]) -> None:
        views = self._views
        if views is None or not views.post(self._route, ask, scopes):
            self._route(ask, scopes)

    def _route(self, ask: Ask, scopes: list[CallScope]) -> None:
        for scope in reversed(scopes):  # the most recent call of the connection
            if scope.offer(ask):
                return
        self._place_outside(ask)

    def subscribe(self, listener: Callable[[Ask], object]) -> Callable[[], None]:
        """Call *listener(ask)* for every new request (on the broker's thread; it must not block).

        Returns a function that unsubscribes. The listener may answer the
        request by resolving ``ask.future``; the first answer counts. A view
        that follows the decision too adds a done callback to ``ask.future``.
        """
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # -- calls in flight -----------------------------------------------------------------------

    def enter(self, scope: CallScope) -> None:
        """Route requests of *scope*'s connection to it until :meth:`leave`."""
        with self._lock:
            self._scopes.setdefault(scope.connection_id, []).append(scope)

    def leave(self, scope: CallScope) -> None:
        """Stop routing requests to *scope* (its call ended)."""
        with self._lock:
            scopes = self._scopes.get(scope.connection_id, [])
            if scope in scopes:
                scopes.remove(scope)
            if not scopes:
                self._scopes.pop(scope.connection_id, None)

    def asks(self) -> list[Ask]:
        """Every request seen whose prompt may still need closing."""
        with self._lock:
            return list(self._asks)

    def pending(self) -> list[ConsentRequest]:
        """The requests still waiting for an answer, oldest first."""
        with self._lock:
            return [ask.request for ask in self._asks if not ask.future.done()]

    def answer(self, request_id: str, decision: ConsentDecision) -> bool:
        """Answer the waiting request *request_id* from elsewhere (another view); whether it counted.

        The first answer counts, wherever it comes from: the prompt then shows
        the outcome. ``False`` when the request is unknown or already decided.
        """
        with self._lock:
            found = [ask for ask in self._asks if ask.request.id == request_id]
        return bool(found) and _resolve(found[0].future, decision)

    def close(self) -> list[Ask]:
        """Withdraw every open request; the requests seen, whose prompts may need closing."""
        with self._lock:
            self._closed = True
            asks, self._asks = self._asks, []
            self._scopes.clear()
        for ask in asks:
            withdraw(ask.future, "the file broker was closed")
        return asks


def _gone(prompt: Any | None) -> bool:
    """Whether a prompt needs no closing any more (there is none, or a view closed it)."""
    return prompt is None or bool(getattr(prompt, "closed", False))
