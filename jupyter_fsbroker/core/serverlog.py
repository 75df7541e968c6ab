"""What a server says about itself: its stderr lines and its MCP log messages, in the order they came.

One :class:`ServerLog` per server connection. The protocol layer feeds it (a
stdio server's stderr, line by line, and every ``notifications/message``); the
notebook (``conn.server_log()``), the dashboard and the command line read or
follow it. Entries are frozen :class:`LogEntry` values; the log is bounded in
entries and in the length of each one, whatever a server sends.

Nothing here is ever sent to a server or written to disk, and nothing here
decides anything: a server's words are shown, never obeyed.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .listeners import Listeners

__all__ = ["LEVELS", "LogEntry", "ServerLog"]

#: MCP's log levels (RFC 5424's), least severe first.
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: Entries a log keeps by default (the oldest are dropped first).
DEFAULT_MAX_ENTRIES = 2000

#: Characters of one entry kept by default (a longer one is cut, and says so).
DEFAULT_MAX_TEXT = 8192


@dataclass(frozen=True)
class LogEntry:
    """One line of a server's log.

    Attributes
    ----------
    time
        When it arrived (seconds since the epoch).
    source
        ``"stderr"`` (a line the server process wrote on its stderr) or
        ``"message"`` (an MCP ``notifications/message``).
    text
        The line, or the message's data as text (JSON for structured data).
    level
        For messages: the MCP level (one of :data:`LEVELS`); ``None`` for stderr.
    logger
        For messages: the server's own logger name, if it gave one.
    """

    time: float
    source: Literal["stderr", "message"]
    text: str
    level: str | None = None
    logger: str | None = None

    @property
    def severity(self) -> int:
        """The level's rank in :data:`LEVELS` (stderr lines rank as ``info``)."""
        return LEVELS.index(self.level) if self.level in LEVELS else 1

    def line(self) -> str:
        """One line for people: ``HH:MM:SS.mmm [level] logger: text``, or ``… stderr: text``."""
        clock = time.strftime("%H:%M:%S", time.localtime(self.time)) + f".{int(self.time * 1000) % 1000:03d}"
        if self.source == "stderr":
            return f"{clock} stderr: {self.text}"
        origin = f"{self.logger}: " if self.logger else ""
        return f"{clock} [{self.level}] {origin}{self.text}"


class ServerLog:
    """The bounded, ordered log of one server connection. Thread-safe.

    Parameters
    ----------
    max_entries
        Entries kept; the oldest are dropped first (counted in :attr:`dropped`).
    max_text
        Characters kept of one entry.
    """

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES, max_text: int = DEFAULT_MAX_TEXT) -> None:
        if max_entries < 1 or max_text < 1:
            raise ValueError("max_entries and max_text must be at least 1")
        self._lock = threading.Lock()
        self._entries: collections.deque[LogEntry] = collections.deque(maxlen=max_entries)
        self._max_text = max_text
        self._listeners: Listeners[[LogEntry]] = Listeners()
        #: Entries dropped because the log was full.
        self.dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def add_stderr(self, text: str) -> LogEntry:
        """Record one line the server wrote on its stderr."""
        return self._add(LogEntry(time.time(), "stderr", self._cut(text)))

    def add_message(self, level: str, text: str, logger: str | None = None) -> LogEntry:
        """Record one MCP log message (an unknown *level* is kept as ``info``)."""
        kept = level if level in LEVELS else "info"
        return self._add(LogEntry(time.time(), "message", self._cut(text), kept, logger))

    def entries(self, last: int | None = None) -> tuple[LogEntry, ...]:
        """The entries, oldest first (only the *last* ones if given)."""
        with self._lock:
            entries = tuple(self._entries)
        return entries if last is None else entries[-last:] if last > 0 else ()

    def text(self, last: int = 50) -> str:
        """The *last* entries as lines (see :meth:`LogEntry.line`), each ending with a newline."""
        return "".join(entry.line() + "\n" for entry in self.entries(last))

    def follow(self, listener: Callable[[LogEntry], object]) -> Callable[[], None]:
        """Call *listener(entry)* for every entry added from now on; returns an unsubscribe.

        The listener runs on the thread that added the entry (the event loop
        of the connection): it must not block.
        """
        return self._listeners.add(listener)

    def _cut(self, text: str) -> str:
        text = text.rstrip("\r\n")
        if len(text) > self._max_text:
            return text[: self._max_text] + f"… ({len(text) - self._max_text} more characters)"
        return text

    def _add(self, entry: LogEntry) -> LogEntry:
        with self._lock:
            if len(self._entries) == self._entries.maxlen:
                self.dropped += 1
            self._entries.append(entry)
        self._listeners.notify(entry)
        return entry
