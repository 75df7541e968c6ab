"""Two threads taking turns at reading one pipe, so that answering on the reading thread holds nothing up.

A small ``files/*`` request answered by the very thread that read it costs
no thread wake at all (see :mod:`..desk`), but while that thread answers,
nothing else of its connection is read: a request stuck in a slow file system
would hold up its own connection's cancels, pings and later requests.
:class:`ReadingThreads` keeps a second thread beside the reading one. The
reading thread marks the time it answers (:meth:`ReadingThreads.answering`,
no wake-up); the other one looks every :data:`RELIEF_TICK` seconds while
answers come, and once the same answer has been running for a whole tick it
takes over the reading. The thread that was answering becomes the looking
one when it is done. After :data:`IDLE_TICKS` ticks without an answer the
looking thread sleeps until the next answer begins, so an idle connection
costs no wake-ups.

Only the thread holding the reading role touches the pipe and the parser's
state (the role passes under a lock, and only while the holder is inside
``answering``, its last step before it reads again).

A server sending its requests one after another sends the next one soon after
it has the answer. A thread that blocks in ``poll`` for it lets its CPU go
idle, and waking it is slow: on a virtual machine the first request after the
wait costs markedly more CPU than the same request right after another, and
the wake-up itself is a good part of a small request's cost (the figures are
in ``benchmarks/README.md``, "Why the code is shaped this way"). So after an
answer the holder polls
without blocking for up to :data:`SPIN` seconds first, but only while requests
have come within that time of the answer before them: a server that pauses
between requests costs at most one spin (then none until requests come
quickly again). Over stdio, that made a small ``files/read`` about a fifth
cheaper, server included.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["IDLE_TICKS", "RELIEF_TICK", "SPIN", "ReadingThreads"]

log = logging.getLogger(__name__)

#: How often the looking thread checks on an answer in progress; an answer running for one
#: to two ticks has its connection read on by the other thread.
RELIEF_TICK = 0.005
#: Ticks without an answer after which the looking thread sleeps until the next one.
IDLE_TICKS = 40
#: How long the holder polls without blocking after an answer, while requests come that soon.
SPIN = 0.0002


class ReadingThreads:
    """The threads reading one pipe *fd*, with flow control towards the consumer.

    Parameters
    ----------
    fd
        The pipe, non-blocking.
    step
        Called by the thread holding the reading role when *fd* is readable:
        reads and handles what came; returns ``False`` at end of file, which
        ends both threads.
    pause_at
        ``(messages, bytes)`` handed over (:meth:`posted`) and not yet taken
        (:meth:`taken`) at which reading pauses.
    name
        The threads' name.
    """

    def __init__(self, fd: int, *, step: Callable[[], bool], pause_at: tuple[int, int], name: str) -> None:
        self._fd = fd
        self._step = step
        self._pause_messages, self._pause_bytes = pause_at
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # the holder waits here while paused
        self._relief = threading.Condition(self._lock)  # the looking thread waits here
        self._posted = 0
        self._posted_bytes = 0
        self._stopping = False
        self._answers = itertools.count(1)
        self._answering: int | None = None  # the answer the holder is making, if any
        self._asleep = False
        self._answered = False  # the holder answered a message since it last read
        self._quick = False  # the last wait after an answer ended within SPIN
        self._wake_r, self._wake_w = os.pipe()
        self._running = 2  # threads not yet ended; the last one closes the wake-up pipe's read end
        self._threads = [threading.Thread(target=self._run, name=name, daemon=True) for _ in range(2)]
        self._holder = self._threads[0]

    def start(self, posted: int = 0, posted_bytes: int = 0) -> None:
        """Start reading, counting *posted* messages of *posted_bytes* as handed over already."""
        self._posted, self._posted_bytes = posted, posted_bytes
        for thread in self._threads:
            thread.start()

    @property
    def alive(self) -> bool:
        """Whether either thread still runs."""
        return any(thread.is_alive() for thread in self._threads)

    @property
    def handed_over(self) -> int:
        """Messages handed to the consumer that it is not done with."""
        return self._posted

    def on_reading_thread(self) -> bool:
        """Whether the caller is one of the reading threads."""
        return threading.current_thread() in self._threads

    def posted(self, size: int) -> None:
        """One message of *size* bytes was handed to the consumer."""
        with self._lock:
            self._posted += 1
            self._posted_bytes += size

    def taken(self, count: int, size: int) -> None:
        """The consumer is done with *count* messages of *size* bytes in all."""
        with self._lock:
            self._posted -= count
            self._posted_bytes -= size
            self._room.notify()

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """On the holder: it answers a message now; the other thread takes over reading if this lasts."""
        with self._lock:
            mine = self._answering = next(self._answers)
            if self._asleep:
                self._relief.notify()
        try:
            yield
        finally:
            with self._lock:
                if self._answering == mine:
                    self._answering = None
            self._answered = True

    def stop(self) -> None:
        """End both threads (at their next wake-up; a thread answering ends when its answer is done)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self._room.notify_all()
            self._relief.notify_all()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        os.close(self._wake_w)

    # -- the threads ---------------------------------------------------------------------------

    def _run(self) -> None:
        me = threading.current_thread()
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        try:
            while self._my_turn(me):
                events = self._wait(poller)
                if self._stopping_now():
                    return
                if events and not self._step():
                    self.stop()  # end of file: the other thread ends too
                    return
        finally:
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                os.close(self._wake_r)

    def _wait(self, poller: select.poll) -> list[tuple[int, int]]:
        """Wait until the pipe or the wake-up pipe is readable (after an answer spinning first, see above)."""
        if not self._answered:
            return poller.poll()
        self._answered = False
        start = time.perf_counter()
        if self._quick:
            deadline = start + SPIN
            while not (events := poller.poll(0)):
                if time.perf_counter() >= deadline:
                    break
            else:
                return events
        events = poller.poll()
        self._quick = time.perf_counter() - start < SPIN
        return events

    def _my_turn(self, me: threading.Thread) -> bool:
        """Wait until *me* holds the reading role and may read; ``False`` once stopping."""
        seen: int | None = None
        idle = 0
        with self._lock:
            while not self._stopping:
                if self._holder is me:
                    if self._posted < self._pause_messages and self._posted_bytes < self._pause_bytes:
                        return True
                    self._room.wait()
                elif self._answering is None:
                    seen = None
                    idle += 1
                    if idle < IDLE_TICKS:
                        self._relief.wait(RELIEF_TICK)
                    else:
                        self._asleep = True
                        self._relief.wait()
                        self._asleep = False
                        idle = 0
                elif self._answering == seen:
                    log.debug("an answer outlasted %.0f ms: another thread reads on", RELIEF_TICK * 1e3)
                    self._holder = me
                else:
                    seen, idle = self._answering, 0
                    self._relief.wait(RELIEF_TICK)
            return False

    def _stopping_now(self) -> bool:
        return self._stopping  # read anew after a wait (a separate call: no stale narrowing)
