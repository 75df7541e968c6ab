"""The terminal consent prompt: asks on a terminal, one request at a time, for the CLI and a terminal IPython.

:class:`TerminalConsenter` is a :class:`~jupyter_fsbroker.core.consent.Consenter`
that puts each request to the user as text (:mod:`.consent_text`, the same words
and answers as the notebook's stdin prompt) and resolves the request's future with
the answer. It decides nothing itself: no answer means a refusal, and the broker
still drops whatever was not approvable or not requested.

Threading: requests queue up and are asked in order on one daemon thread, which
:meth:`TerminalConsenter.close` stops and joins. Reading never blocks past the
request's deadline or its cancellation (the terminal is polled), so a request
that times out or whose connection closes is withdrawn from the terminal.
"""

from __future__ import annotations

import queue
import select
import sys
import threading
import time
from concurrent.futures import Future
from typing import TextIO

from ..core.consent import ConsentDecision, ConsentRequest
from .consent_text import parse_answer, question_text

__all__ = ["TerminalConsenter"]

#: Seconds between checks of the terminal (and of the request's cancellation and deadline).
_POLL = 0.2


class TerminalConsenter:
    """Asks for consent on the terminal, one request at a time.

    Parameters
    ----------
    input
        Where answers are read from; default ``sys.stdin``. Must be selectable
        (a terminal or a pipe).
    output
        Where prompts are written; default ``sys.stderr``, so stdout stays clean
        for results.
    """

    def __init__(self, input: TextIO | None = None, output: TextIO | None = None) -> None:
        self._input = input or sys.stdin
        self._output = output or sys.stderr
        self._queue: queue.Queue[tuple[ConsentRequest, Future[ConsentDecision]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="fsbroker-consent-prompt", daemon=True)
        self._thread.start()

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        """Queue *request* for the terminal; the future resolves with the answer."""
        future: Future[ConsentDecision] = Future()
        self._queue.put((request, future))
        return future

    def close(self) -> None:
        """Stop the prompt thread."""
        self._queue.put(None)
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            request, future = item
            if future.set_running_or_notify_cancel():
                try:
                    decision = self._ask(request, future)
                except Exception as exc:  # a closed terminal must not hang the server
                    future.set_exception(exc)
                else:
                    if decision is not None:
                        future.set_result(decision)

    def _say(self, text: str) -> None:
        self._output.write(text)
        self._output.flush()

    def _ask(self, request: ConsentRequest, future: Future[ConsentDecision]) -> ConsentDecision | None:
        self._say("\n" + question_text(request))
        answer = self._read_line(future, request.deadline)
        if answer is None:
            self._say("\n(no answer: denied)\n")
            return None if future.cancelled() else ConsentDecision.deny()
        return parse_answer(request, answer)

    def _read_line(self, future: Future[ConsentDecision], deadline: float) -> str | None:
        while not future.cancelled() and time.time() < deadline:
            ready, _, _ = select.select([self._input], [], [], _POLL)
            if ready:
                line = self._input.readline()
                return line if line else None
        return None
