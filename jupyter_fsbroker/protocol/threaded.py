"""``files/*`` requests answered on a worker thread that writes its own answer.

The way of a request through the event loop (the pump's turn, a task, the
thread hop back, the task's turn, the writer) costs more than the core's own
work on a small ``files/read``. Where the transport can take a whole answer
from any thread (:class:`DirectWriter`: the project's stdio pipes), the
middleware hands a request that needs nothing of the loop straight from the
transport's read callback to a worker thread (:class:`ThreadedAnswers`); the
worker decides it, encodes the answer and writes it, and only then tells the
loop, which gives back the request's slot and memory. File I/O stays off the
loop, as everywhere.

Every guarantee of the loop's way is kept:

* the request holds one of the connection's slots and its memory reservation
  (the middleware takes both before handing it over, and only when both are
  free at once; otherwise the request goes the loop's way and waits there);
* a ``notifications/cancelled`` for it (:meth:`ThreadedAnswers.cancel`) stops
  it if it has not started and drops its answer if it has; once its answer is
  being written it is no longer cancellable, as on the loop's way;
* an answer the transport cannot take at once (another message is being
  written, the pipe is full, it is larger than an atomic pipe write) is
  handed to the loop, which writes it the ordinary way;
* :meth:`ThreadedAnswers.stop` (the middleware closing: the kill switch, a
  disconnect) cancels what has not started and drops every answer not yet
  being written; the threads are the broker's, closed with it.

Where the transport reads on threads of its own (the stdio pipes), even the
hand-off to a worker can go: a request read while the connection has nothing
else in flight is answered by the reading thread itself
(:meth:`ThreadedAnswers.take_here`), which reads on once the answer is
written; the loop is not woken at all. Such a request is alone by
construction (the middleware checks that no other request of the connection
is anywhere on its way, and the reader shows it only when the loop has taken
everything read before it and nothing read after it waits), so it is within
any limit of slots, and its memory (an answer the budget would grant at once,
the budget being empty) is held by no one else. While it is answered, the
connection is not left unread for long: once an answer lasts a few
milliseconds, a second reading thread reads on (:mod:`.transports.reading`),
so a cancel for it is read and drops its answer, and later requests take the
worker's way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from mcp_types import JSONRPCRequest, RequestId

from ..core.errors import FilesError, InternalError, to_files_error, to_jsonrpc_error
from ..core.hop import post
from .desk.budget import Reservation
from .framing import LentMessage, release

__all__ = ["DirectWriter", "FilesRoute", "ThreadedAnswers", "failure_answer"]

log = logging.getLogger(__name__)

#: Where a request can be answered off the loop: ``(submit, handle)``, where
#: ``submit(fn, *args)`` runs ``fn`` on a worker thread (an executor's ``submit``)
#: and ``handle(method, params)`` answers the request there, raising ``FilesError``.
FilesRoute = tuple[Callable[..., "concurrent.futures.Future[Any]"], Callable[[str, Any], dict[str, Any]]]


@runtime_checkable
class DirectWriter(Protocol):
    """A write side that takes a whole encoded message from any thread when it can do so at once."""

    def write_now(self, data: bytes, /) -> bool:
        """Write *data* and its newline now, or return ``False`` (nothing written) if it cannot."""
        ...


def failure_answer(request: JSONRPCRequest, exc: Exception, label: str) -> dict[str, Any]:
    """The JSON-RPC error answering *request*, which failed with *exc*: the core's own mapping.

    Only a failure the mapping does not know (a bug) is logged, with its traceback.
    """
    path = (request.params or {}).get("path")
    path = path if isinstance(path, str) else None
    error = to_files_error(exc, path)
    if isinstance(error, InternalError) and not isinstance(exc, FilesError | OSError):
        log.exception("%s: unexpected failure answering %s", label, request.method)
        error = InternalError(
            f"the client failed to answer {request.method} ({type(exc).__name__})", path=path
        )
    return to_jsonrpc_error(error)


class _Entry:
    """One request handed to a worker: its future, and whether its answer is still wanted."""

    __slots__ = ("dropped", "future", "request", "reservation")

    def __init__(self, request: JSONRPCRequest, reservation: Reservation | None) -> None:
        self.request = request
        self.reservation = reservation
        self.dropped = False
        self.future: concurrent.futures.Future[Any] | None = None


class ThreadedAnswers:
    """The requests of one connection being answered on worker threads.

    Parameters
    ----------
    loop
        The connection's event loop.
    writer
        The transport's write side.
    encode
        ``encode(request, ("result" | "error", body))``: the answer's JSON line,
        as bytes or in a lent buffer (given back once written or dropped).
    finish
        Called on the loop once a request is done (answered, dropped or never
        run), with its reservation: gives back its slot and memory.
    write_later
        Called on the loop with ``(data, reservation, then)`` for an answer the
        writer could not take at once: it fits the reservation (if any) to the
        answer's size, writes it, and then calls ``then()``.
    label
        Names the connection in log messages.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        writer: DirectWriter,
        *,
        encode: Callable[[JSONRPCRequest, tuple[str, dict[str, Any]]], bytes | LentMessage],
        finish: Callable[[Reservation], None],
        write_later: Callable[[bytes | LentMessage, Reservation | None, Callable[[], None]], None],
        label: str = "",
    ) -> None:
        self._loop = loop
        self._writer = writer
        self._encode = encode
        self._finish = finish
        self._write_later = write_later
        self._label = label
        # The requests a server may still cancel, by id; the lock makes "still cancellable?"
        # and "being written now" one step on either side.
        self._lock = threading.Lock()
        self._cancellable: dict[RequestId, _Entry] = {}
        self._entries: set[_Entry] = set()  # every request not yet finished
        self._stopped = False
        self._here = 0  # requests answered by the reading thread, their answer not yet written

    @property
    def count(self) -> int:
        """Requests handed over and not yet finished."""
        # Once stopped, an answer still being made here is no longer waited for: it is dropped.
        return len(self._entries) + (0 if self._stopped else self._here)

    def take_here(
        self, request: JSONRPCRequest, handle: Callable[[str, Any], dict[str, Any]]
    ) -> Callable[[], None]:
        """On the transport's reading thread: take *request*; the call that answers it there, now.

        The caller makes sure it is the connection's only request on its way.
        A cancel read meanwhile (by the other reading thread) drops its answer;
        an answer the writer cannot take at once goes to the loop
        (``write_later`` with no reservation), and the request counts until it is written.
        """
        entry = _Entry(request, None)
        with self._lock:
            self._here += 1
            self._cancellable[request.id] = entry
        return functools.partial(self._answer_here, entry, handle)

    def _answer_here(self, entry: _Entry, handle: Callable[[str, Any], dict[str, Any]]) -> None:
        request = entry.request
        data = self._encode(request, self._decide(request, handle))
        with self._lock:
            if self._cancellable.get(request.id) is entry:
                del self._cancellable[request.id]
            if entry.dropped or self._stopped:
                self._here -= 1
                release(data)
                return
        if self._write_now(data):
            self._here_done()
        else:
            self._post(self._write_later_here, data)

    def _here_done(self) -> None:
        with self._lock:
            self._here -= 1

    def start(self, request: JSONRPCRequest, reservation: Reservation, route: FilesRoute) -> bool:
        """On the loop: hand *request* (its slot and memory taken) to a worker; ``False`` if none takes it."""
        submit, handle = route
        entry = _Entry(request, reservation)
        with self._lock:
            self._cancellable[request.id] = entry
        self._entries.add(entry)
        try:
            entry.future = submit(self._run, entry, handle)
        except RuntimeError:  # the executor is shut down: the loop's way answers the refusal
            with self._lock:
                if self._cancellable.get(request.id) is entry:
                    del self._cancellable[request.id]
            self._entries.discard(entry)
            return False
        return True

    def cancel(self, request_id: RequestId) -> bool:
        """On the loop: the server cancelled *request_id*; whether it was one of ours, still cancellable."""
        with self._lock:
            entry = self._cancellable.pop(request_id, None)
            if entry is None:
                return False
            entry.dropped = True
        if entry.future is not None and entry.future.cancel():
            self._done(entry)  # it never runs: its slot and memory come back now
        return True

    def stop(self) -> None:
        """On the loop: drop every answer not yet being written; what has not started never runs.

        Every request's slot and memory come back now, as when the loop's tasks are cancelled.
        """
        self._stopped = True
        with self._lock:
            self._cancellable.clear()
            entries = list(self._entries)
            for entry in entries:
                entry.dropped = True
        for entry in entries:
            if entry.future is not None:
                entry.future.cancel()  # not started: never runs; started: runs on, unanswered
            self._done(entry)

    # -- the worker's side ----------------------------------------------------------------------

    def _run(self, entry: _Entry, handle: Callable[[str, Any], dict[str, Any]]) -> None:
        try:
            if not entry.dropped:
                self._answer(entry, handle)
                return
        except BaseException:
            log.exception("%s: unexpected failure answering %s", self._label, entry.request.method)
        self._post(self._done, entry)

    def _decide(
        self, request: JSONRPCRequest, handle: Callable[[str, Any], dict[str, Any]]
    ) -> tuple[str, dict[str, Any]]:
        try:
            return ("result", handle(request.method, request.params))
        except Exception as exc:
            return ("error", failure_answer(request, exc, self._label))

    def _answer(self, entry: _Entry, handle: Callable[[str, Any], dict[str, Any]]) -> None:
        request = entry.request
        data = self._encode(request, self._decide(request, handle))
        with self._lock:
            if entry.dropped:
                self._post(self._done, entry)
                release(data)
                return
            # From here on the answer goes out whole: a cancel arriving now goes on to the session.
            if self._cancellable.get(request.id) is entry:
                del self._cancellable[request.id]
        if self._write_now(data):
            self._post(self._done, entry)
        else:
            self._post(self._hand_to_loop, entry, data)

    def _write_now(self, data: bytes | LentMessage) -> bool:
        # A lent answer is a large one: never one the writer takes at once.
        return isinstance(data, bytes) and self._writer.write_now(data)

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        post(self._loop, callback, *args)  # a closed loop: the connection is gone

    # -- back on the loop -----------------------------------------------------------------------

    def _done(self, entry: _Entry) -> None:
        if entry in self._entries:
            self._entries.discard(entry)
            self._release(entry)

    def _release(self, entry: _Entry) -> None:
        assert entry.reservation is not None  # a worker's request (one answered here has none)
        self._finish(entry.reservation)

    def _write_later_here(self, data: bytes | LentMessage) -> None:
        if self._stopped:
            self._here_done()
            release(data)
            return
        self._write_later(data, None, self._here_done)

    def _hand_to_loop(self, entry: _Entry, data: bytes | LentMessage) -> None:
        if entry not in self._entries:
            release(data)
            return
        self._entries.discard(entry)
        if self._stopped:
            self._release(entry)
            release(data)
            return
        self._write_later(data, entry.reservation, functools.partial(self._release, entry))
