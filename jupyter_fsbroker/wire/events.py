"""The change event of ``notifications/files/changed``: one value for the client that sends it and
the server that reads it.

The timestamp is kept in the wire's spelling (ISO 8601 UTC with milliseconds,
``2026-11-29T12:30:00.123Z``), so what a server reads is what the client sent;
:attr:`ChangeEvent.time` is the same moment as a ``time.time()`` value, for views.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .timestamps import parse_iso

__all__ = ["ChangeEvent"]


@dataclass(frozen=True)
class ChangeEvent:
    """One change a watch reports, as ``notifications/files/changed`` carries it.

    Attributes
    ----------
    watch_id
        The watch that reports it (``watchId``).
    path
        Root-relative path of the changed entry (``data/sub/x.csv``).
    event
        ``created``, ``modified``, ``deleted`` or ``moved``.
    timestamp
        When it changed: ISO 8601 UTC with milliseconds, as on the wire.
    old_path
        For ``moved``: the root-relative path the entry had before (``oldPath``).
    undecodable_name
        ``path`` (or ``old_path``) names something whose name is not valid
        UTF-8 on disk, spelled readable: each undecodable byte as U+FFFD
        (``undecodableName``).
    """

    watch_id: str
    path: str
    event: str
    timestamp: str
    old_path: str | None = None
    undecodable_name: bool = False

    @property
    def time(self) -> float:
        """:attr:`timestamp` as a ``time.time()`` value.

        Raises
        ------
        ValueError
            The timestamp a client sent is not an ISO 8601 time.
        """
        return parse_iso(self.timestamp)

    def to_params(self) -> dict[str, Any]:
        """The ``params`` of the notification: ``watchId``, ``path``, ``event``, ``timestamp`` and,
        when set, ``oldPath`` and ``undecodableName``."""
        params: dict[str, Any] = {
            "watchId": self.watch_id,
            "path": self.path,
            "event": self.event,
            "timestamp": self.timestamp,
        }
        if self.old_path is not None:
            params["oldPath"] = self.old_path
        if self.undecodable_name:
            params["undecodableName"] = True
        return params

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> ChangeEvent | None:
        """Read the notification's params leniently; ``None`` without a ``watchId``, ``path`` and
        ``event`` (members of the wrong type count as missing)."""
        if params is None:
            return None
        watch_id, path, event = params.get("watchId"), params.get("path"), params.get("event")
        if not (isinstance(watch_id, str) and isinstance(path, str) and isinstance(event, str)):
            return None
        timestamp, old_path = params.get("timestamp"), params.get("oldPath")
        return cls(
            watch_id,
            path,
            event,
            timestamp if isinstance(timestamp, str) else "",
            old_path if isinstance(old_path, str) else None,
            params.get("undecodableName") is True,
        )
