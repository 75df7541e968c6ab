"""The one timestamp format of the wire: ISO 8601, UTC, milliseconds, ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso_utc"]


def iso_utc(timestamp: float) -> str:
    """Format a ``time.time()`` value as ``2026-11-29T12:30:00.123Z``."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
