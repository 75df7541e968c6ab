"""The one timestamp format of the wire: ISO 8601, UTC, milliseconds, ``Z``.

Times outside what the format can spell (years before 1 or after 9999: a file
whose modification time is set to something absurd) are clamped to its first
or last moment, so an odd file never turns a listing into an error.
:func:`parse_iso` reads the format back (and any ISO 8601 time a client sends).
"""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime

__all__ = ["iso_utc", "iso_utc_ns", "parse_iso"]

# The first and last whole seconds ISO 8601 with four-digit years can spell.
_FIRST_SECOND = -62_135_596_800  # 0001-01-01T00:00:00Z
_LAST_SECOND = 253_402_300_799  # 9999-12-31T23:59:59Z
_NS = 1_000_000_000


def iso_utc(timestamp: float) -> str:
    """Format a ``time.time()`` value as ``2026-11-29T12:30:00.123Z``."""
    try:
        moment = datetime.fromtimestamp(timestamp, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return iso_utc_ns(_FIRST_SECOND * _NS if timestamp < 0 else _LAST_SECOND * _NS + _NS - 1)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def iso_utc_ns(ns: int) -> str:
    """Format a time in nanoseconds since the epoch (``st_mtime_ns``) as ``2026-11-29T12:30:00.123Z``.

    The fast path of listings: whole seconds are formatted once and remembered.
    """
    second, rest = divmod(ns, _NS)
    if second < _FIRST_SECOND:
        second, rest = _FIRST_SECOND, 0
    elif second > _LAST_SECOND:
        second, rest = _LAST_SECOND, _NS - 1
    return f"{_second(second)}.{rest // 1_000_000:03d}Z"


def parse_iso(text: str) -> float:
    """The ``time.time()`` value of an ISO 8601 time (``2026-11-29T12:30:00.123Z``).

    A time without an offset is taken as UTC, the wire's zone.

    Raises
    ------
    ValueError
        *text* is not an ISO 8601 time.
    """
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


@functools.lru_cache(maxsize=4096)
def _second(second: int) -> str:
    t = time.gmtime(second)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
