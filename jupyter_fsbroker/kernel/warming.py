"""The warm-up: what connections and answers need, imported once on a worker thread while the user goes on.

``%load_ext`` stays quick: the MCP client and jsonschema (which mcp imports when
a tool's structured result is first checked: seconds) are imported on a worker
thread of the background loop once the loading cell is over (or at the first
connect). The first consent prompt is shown once that is done
(:attr:`WarmUp.ready`), so the user's answer never waits for an import; and a
cell that starts meanwhile waits for it first (:meth:`WarmUp.wait`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading

from .loop import BackgroundLoop, LoopClosedError
from .servers import warm_up

__all__ = ["WarmUp"]

#: Seconds a cell waits at most for the warm-up's imports to end (a few on a busy machine).
_WAIT = 60.0


class WarmUp:
    """The warm-up of one notebook broker.

    Parameters
    ----------
    loop
        The background loop whose worker thread imports.
    enabled
        Whether to warm up at all (inside a kernel); otherwise every call does nothing.

    Attributes
    ----------
    ready
        Done once the imports are (or the broker closed); ``None`` when not enabled.
    """

    def __init__(self, loop: BackgroundLoop, *, enabled: bool) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._started = False
        self.ready: concurrent.futures.Future[None] | None = concurrent.futures.Future() if enabled else None

    def start(self) -> None:
        """Start the imports (once; any thread, never blocks)."""
        ready = self.ready
        with self._lock:
            if ready is None or self._started:
                return
            self._started = True
        try:
            done = self._loop.submit(asyncio.to_thread(warm_up))
        except LoopClosedError:
            self.finish()
            return
        done.add_done_callback(lambda _done: self.finish())

    def wait(self) -> None:
        """Before a cell: let the imports end first, if they run (at most a minute, once per kernel).

        Two threads importing one package whose modules import each other (mcp,
        pydantic) can meet in Python's deadlock detection, and one of them then
        gets a module half made ("cannot import name ... from partially
        initialized module"): the user's code must never run beside the imports.
        """
        ready = self.ready
        if ready is not None and self._started and not ready.done():
            concurrent.futures.wait([ready], timeout=_WAIT)

    def complete(self) -> None:
        """Start the imports and wait for them to end (the caller imports the MCP client next)."""
        self.start()
        self.wait()

    def finish(self) -> None:
        """Mark the warm-up done (its imports ended, or the broker is closing). Idempotent."""
        if self.ready is not None:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # finished already
                self.ready.set_result(None)
