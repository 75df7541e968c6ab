"""Who answers a notebook broker's consent requests: :class:`NotebookConsent`.

In a kernel, the notebook's own prompts (:class:`~.prompting.KernelConsenter`:
under the cell of the call that asked, on the dashboard or a connection's card,
on stdin); in a terminal IPython, the terminal
(:class:`~jupyter_fsbroker.console.prompt.TerminalConsenter`); without either,
refusal; or the consenter the caller gave. It also keeps what the notebook
broker's public API answers about consent (the requests waiting, an answer
from elsewhere than a prompt), builds each tool call's
:class:`~.prompting.CallScope`, and at close withdraws the requests still
waiting and closes their prompts.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import sys
from typing import TYPE_CHECKING, Any

from ..core.broker import Broker
from ..core.consent import ConsentDecision, Consenter, ConsentRequest, DenyingConsenter
from ..core.resource import Closeable
from .prompting import CallScope, KernelConsenter
from .views import NotebookViews
from .warming import WarmUp

if TYPE_CHECKING:
    from ..widgets.view_thread import ViewThread
    from .settings import FSBroker

__all__ = ["NotebookConsent"]

log = logging.getLogger(__name__)


class NotebookConsent(Closeable):
    """The consent of one notebook broker: who answers it, what waits, each call's scope.

    Parameters
    ----------
    core
        The core broker that asks.
    settings
        The ``FSBroker`` settings a call's scope reads (``stdin_fallback``, ``show_progress``).
    kernel
        The kernel, if any: then the notebook's prompts answer.
    views
        The notebook's views: where prompts show outside a call.
    warm
        The warm-up: a prompt shows once its imports are done.
    consenter
        Who answers instead (``None``: the default above).
    """

    def __init__(
        self,
        core: Broker,
        settings: FSBroker,
        *,
        kernel: Any | None,
        views: NotebookViews,
        warm: WarmUp,
        consenter: Consenter | None = None,
    ) -> None:
        self._core = core
        self._settings = settings
        self._kernel = kernel
        self._views = views
        self._warm = warm
        self.kernel_consenter: KernelConsenter | None = None
        """The notebook's prompts, when they answer (they route requests to the calls in flight)."""
        self._terminal: Any | None = None
        self.consenter: Consenter = consenter if consenter is not None else self._default_consenter()
        """Who answers the consent requests of every connection."""

    def _default_consenter(self) -> Consenter:
        if self._kernel is not None:
            views = self._views.thread
            make_prompt = functools.partial(_make_prompt, views=views) if self._views.widgets else None
            self.kernel_consenter = KernelConsenter(
                make_prompt=make_prompt,
                place_outside=self._views.place_outside,
                ready=self._warm.ready,
                views=views,
            )
            self.kernel_consenter.subscribe(self._views.follow_consent)
            return self.kernel_consenter
        if sys.stdin is not None and sys.stdin.isatty():
            from ..console.prompt import TerminalConsenter

            self._terminal = TerminalConsenter()
            return self._terminal
        return DenyingConsenter()

    def pending(self) -> tuple[ConsentRequest, ...]:
        """The consent requests waiting for an answer, wherever their prompts are shown."""
        consenter = self.kernel_consenter
        return tuple(consenter.pending()) if consenter is not None else ()

    def answer(self, request_id: str, decision: ConsentDecision | bool) -> bool:
        """Answer a waiting request from elsewhere than its prompt (see
        :meth:`NotebookBroker.answer_consent <.notebook.NotebookBroker.answer_consent>`)."""
        consenter = self.kernel_consenter
        if consenter is None:
            return False
        if isinstance(decision, bool):
            found = [r for r in consenter.pending() if r.id == request_id]
            if not found:
                return False
            decision = ConsentDecision.approve_all(found[0]) if decision else ConsentDecision.deny()
        return consenter.answer(request_id, decision)

    def new_scope(self, connection_id: str) -> CallScope:
        """The scope of a tool call on the connection *connection_id* (the core's id)."""
        return CallScope(
            connection_id,
            broker=self._core,
            kernel=self._kernel,
            widgets=self._views.widgets,
            stdin_mode=lambda: str(self._settings.stdin_fallback).lower(),
            show_progress=lambda: bool(self._settings.show_progress),
            place_outside=self._views.place_outside,
            views=self._views.thread,
        )

    def withdraw(self, *, at_exit: bool = False) -> None:
        """Withdraw every request still waiting and close its prompt (not *at_exit*: the widgets stay)."""
        if self.kernel_consenter is None:
            return
        asks = self.kernel_consenter.close()
        self._views.thread.settle()  # a prompt being built meanwhile is among them once built
        if at_exit:
            return
        for prompt in [ask.prompt for ask in asks if ask.prompt is not None]:
            try:
                prompt.close()
            except Exception:
                log.debug("could not close a consent prompt", exc_info=True)

    def close(self) -> None:
        """Close the terminal prompt, if it answers (after :meth:`withdraw`)."""
        if self._terminal is not None:
            self._terminal.close()


def _make_prompt(
    request: ConsentRequest, future: concurrent.futures.Future[ConsentDecision], *, views: ViewThread
) -> Any:
    """A consent prompt widget (``ipywidgets`` is imported with the first one, not at ``%load_ext``)."""
    from ..widgets.consent_prompt import ConsentPrompt

    return ConsentPrompt(request, future, views=views)
