"""Words and numbers for people: the formatting every view shares, widget or text.

Refusal reasons in words, sizes, ages, clock times, durations and grant expiries,
plurals, and :func:`printable`, which escapes what servers chose so that it
cannot drive a terminal. Pure functions of their arguments; nothing here decides
anything or imports ``ipywidgets``.
"""

from __future__ import annotations

import time
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.grants import Grant

__all__ = [
    "clock_text",
    "duration_text",
    "expiry_text",
    "format_age",
    "format_bytes",
    "plural",
    "printable",
    "reason_text",
]


_REASONS: dict[str, str] = {
    "outside_roots": "outside the shared folders",
    "no_roots": "no folders are shared",
    "sensitive": "a sensitive name (keys, credentials, .env ...), never shared unless you allow it",
    "traversal": "leads outside the shared folders",
    "escaping_symlink": "a link that leads outside the shared folders",
    "unsupported_scheme": "not a local file path",
    "foreign_host": "a file on another machine",
    "invalid_uri": "not a valid file:// address",
    "nul_byte": "contains an invalid character",
    "empty_path": "an empty path",
    "root_removed": "its shared folder was removed",
    "special_file": "not a regular file or folder",
    "symlink_loop": "a loop of links",
    "read_only": "the folder is shared read-only",
    "not_granted": "not granted",
    "connection_closed": "the connection is closed",
    "nothing_approvable": "nothing requested could be approved",
    "consent_refused": "consent refused",
}


_SPACES = {"\t": " ", "\n": " ", "\r": " "}


def printable(text: str) -> str:
    """*text* made safe to show: control and format characters written as escapes.

    Servers choose messages and paths. Shown raw, a terminal escape sequence
    could rewrite the screen and a bidirectional override (U+202E) could make
    ``evil.exe`` look like ``exe.live``; tabs and line breaks become spaces.
    """
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char in _SPACES:
            out.append(_SPACES[char])
        elif unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def reason_text(reason: str | None) -> str:
    """A refusal reason (``outside_roots``) in words (``outside the shared folders``).

    Parameters
    ----------
    reason
        A snake_case reason from the core; ``None`` gives ``"not allowed"``.
    """
    if not reason:
        return "not allowed"
    return _REASONS.get(reason, reason.replace("_", " "))


def format_bytes(count: float) -> str:
    """A byte count for people: ``512 B``, ``1.5 kB``, ``12.3 MB`` (powers of 1000, like MB/s)."""
    value = float(count)
    if abs(value) < 1000:
        return f"{int(value)} B"
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000.0
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def plural(count: int, word: str) -> str:
    """``1 grant``, ``2 grants``: a count and its noun (regular plurals only)."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def format_age(seconds: float) -> str:
    """A span of time, roughly: ``5 s``, ``3 min``, ``2 h 5 min``, ``3 d``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{int(seconds)} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} d"


def clock_text(timestamp: float) -> str:
    """A :func:`time.time` value as local wall-clock time, ``12:30:05``."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def duration_text(duration: float | None) -> str:
    """How long a consent lasts: ``for this connection``, ``for 15 min``, ``for 1 h``."""
    if duration is None:
        return "for this connection"
    return f"for {format_age(duration)}"


def expiry_text(grant: Grant, now: float | None = None) -> str:
    """How long a grant lasts: ``until revoked``, ``for this connection``, ``14 min left (until 12:45:00)``.

    Parameters
    ----------
    grant
        The grant.
    now
        The current time; default :func:`time.time`.
    """
    if grant.expires_at is None:
        return "until revoked" if grant.connection_id is None else "for this connection"
    left = grant.expires_at - (time.time() if now is None else now)
    return f"{format_age(left)} left (until {clock_text(grant.expires_at)})"
