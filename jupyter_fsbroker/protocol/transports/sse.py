"""Server-sent events, read from raw bytes (the ``text/event-stream`` format of the HTML standard).

:class:`EventStream` splits a stream into events as the standard does (lines ended by CR LF,
LF or CR; ``data``, ``event``, ``id`` and ``retry`` fields; comments) and keeps what a client
needs to resume the stream: the last event ID and the server's reconnection delay. Streamable
HTTP (2025-11-25) builds resumption on exactly these two fields: a server may prime a stream
with an event that has an ``id`` and empty ``data``, close the connection, and expect the
client to wait ``retry`` milliseconds and continue with a GET carrying ``Last-Event-ID``.

An event whose data is empty dispatches nothing (the standard's rule, and what makes a
priming event harmless); an event whose ``event`` names another type than ``message`` is
ignored, because MCP sends only messages. An event larger than
:data:`~jupyter_fsbroker.protocol.framing.MAX_MESSAGE_BYTES` is dropped as it arrives and
reported once, as a :class:`~jupyter_fsbroker.protocol.framing.MalformedMessage`, so that the
connection can answer it rather than hold it in memory.
"""

from __future__ import annotations

from ..framing import MAX_MESSAGE_BYTES, MalformedMessage, too_large

__all__ = ["EventStream"]

# How much of an event too large to keep is quoted in its report.
_PREFIX = 4096


class EventStream:
    """The events of one stream, fed chunk by chunk.

    A line that spans chunks is kept as a list of chunks and joined once, when it ends
    (growing one buffer chunk by chunk would copy a 2.7 MB event dozens of times).

    Attributes
    ----------
    last_event_id
        The stream's last event ID (the ``id`` field of the last event that set one), which
        a resumption sends as ``Last-Event-ID``; ``None`` until the server sends one.
    retry_ms
        The reconnection delay the server asked for, in milliseconds; ``None`` until it does.
    """

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self.reconnected()

    def reconnected(self) -> None:
        """Forget the event being read when the connection broke; keep the cursor and the delay.

        A resumed stream starts at an event boundary, so a line or event cut short must not be
        joined to its first line.
        """
        self._parts: list[bytes] = []  # the line not yet ended
        self._partial = 0  # its size
        self._skip_lf = False  # the last chunk ended with CR: a LF next ends nothing
        self._data: list[bytes] = []
        self._size = 0
        self._event = b""
        self._id: str | None = None  # the id field of the event being read
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | MalformedMessage]:
        """The events that *chunk* completes: each one's data, or the report of one too large."""
        events: list[bytes | MalformedMessage] = []
        position = 0
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                position = 1
        while True:
            end, after = _end_of_line(chunk, position)
            if end < 0:
                break
            if self._parts:
                line = b"".join((*self._parts, chunk[position:end]))
                self._parts.clear()
                self._partial = 0
            else:
                line = chunk[position:end]
            self._line(line, events)
            position = after
            if after == len(chunk) and chunk[end : end + 1] == b"\r":
                self._skip_lf = True
        if position < len(chunk):
            self._parts.append(chunk[position:] if position else chunk)
            self._partial += len(chunk) - position
        if self._size + self._partial > MAX_MESSAGE_BYTES and not self._skipping:
            prefix = (self._data[0] if self._data else self._parts[0])[:_PREFIX]
            events.append(too_large(prefix, self._size + self._partial))
            self._skipping = True
        if self._skipping:
            self._data.clear()
            self._size = 0
            self._parts.clear()
            self._partial = 0
        return events

    def _line(self, line: bytes, events: list[bytes | MalformedMessage]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line.startswith(b":"):
            return
        if line.startswith(b"data:"):
            value = line[6:] if line[5:6] == b" " else line[5:]
            self._data.append(value)
            self._size += len(value)
            return
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"event":
            self._event = value
        elif name == b"id" and b"\0" not in value:
            # The standard ignores an id holding NUL; an empty one resets the cursor.
            self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self.retry_ms = int(value)

    def _dispatch(self, events: list[bytes | MalformedMessage]) -> None:
        # The cursor moves only when an event is complete: a stream that breaks in the middle
        # of one resumes before it, so the server sends it again.
        if self._id is not None:
            self.last_event_id = self._id or None
            self._id = None
        if self._size > MAX_MESSAGE_BYTES and not self._skipping:
            events.append(too_large(self._data[0][:_PREFIX], self._size))
        elif self._data and not self._skipping and self._event in (b"", b"message"):
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            if data:
                events.append(data)
        self._data = []
        self._size = 0
        self._event = b""
        self._skipping = False


def _end_of_line(chunk: bytes, position: int) -> tuple[int, int]:
    """``(end, after)`` of the first line ending (CR LF, LF or CR) from *position*, or ``(-1, -1)``.

    Two ``find`` calls (memchr) rather than a regular expression: a 2.7 MB event
    costs microseconds instead of milliseconds.
    """
    lf = chunk.find(b"\n", position)
    cr = chunk.find(b"\r", position, lf if lf >= 0 else len(chunk))
    if cr < 0:
        return (lf, lf + 1) if lf >= 0 else (-1, -1)
    if cr + 1 == lf:
        return cr, lf + 1
    return cr, cr + 1
