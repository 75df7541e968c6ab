"""Text views, for terminals and frontends without widgets: the consent prompt on a terminal."""

from __future__ import annotations

import queue
import select
import sys
import threading
import time
from concurrent.futures import Future
from typing import TextIO

from ..core.consent import ConsentDecision, ConsentRequest

__all__ = ["TerminalConsenter"]


class TerminalConsenter:
    """Asks for consent on the terminal, one request at a time.

    Prompts go to *output* (stderr by default, so stdout stays clean for
    results); answers are read from *input*. A request that times out or whose
    connection closes is withdrawn from the terminal and refused.
    """

    def __init__(self, input: TextIO | None = None, output: TextIO | None = None) -> None:
        self._input = input or sys.stdin
        self._output = output or sys.stderr
        self._queue: queue.Queue[tuple[ConsentRequest, Future[ConsentDecision]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="fsbroker-consent-prompt", daemon=True)
        self._thread.start()

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
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
        lines = [f"\n{request.server} asks for access: {request.message or '(no message)'}"]
        for item in request.items:
            mark = "  +" if item.approvable else "  -"
            note = "" if item.approvable else f"  (not approvable: {item.reason})"
            ro = "  (read-only folder)" if item.read_only else ""
            lines.append(f"{mark} {item.path}{note}{ro}")
        lines.append(f"  operations: {', '.join(request.operations)}")
        lines.append(f"Approve? [y]es / [r]ead only / [N]o (refused in {request.timeout:.0f} s): ")
        self._say("\n".join(lines))
        answer = self._read_line(future, request.deadline)
        if answer is None:
            self._say("\n(no answer: refused)\n")
            return None if future.cancelled() else ConsentDecision.deny()
        answer = answer.strip().lower()
        if answer in ("y", "yes"):
            return ConsentDecision.approve_all(request)
        if answer in ("r", "read"):
            return ConsentDecision(request.approvable_paths, ("read",))
        return ConsentDecision.deny()

    def _read_line(self, future: Future[ConsentDecision], deadline: float) -> str | None:
        while not future.cancelled() and time.time() < deadline:
            ready, _, _ = select.select([self._input], [], [], 0.2)
            if ready:
                line = self._input.readline()
                return line if line else None
        return None
