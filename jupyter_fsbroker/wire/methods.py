"""The names of the ``files/*`` contract (PROTOCOL.md): its methods, its notification, its operations.

A name written here is the wire's spelling; the core answers these methods, the
client routes them to the core, and the server kit sends them.
"""

from __future__ import annotations

__all__ = [
    "CHANGED_NOTIFICATION",
    "CONSENT",
    "CREATE",
    "DELETE",
    "FILES_METHODS",
    "FILES_PREFIX",
    "LIST",
    "OPERATIONS",
    "READ",
    "RENAME",
    "STAT",
    "UNLOCK",
    "UNWATCH",
    "WATCH",
    "WATCH_EVENTS",
    "WRITE",
]

#: The prefix of every server→client method of the contract.
FILES_PREFIX = "files/"

READ = "files/read"
WRITE = "files/write"
LIST = "files/list"
STAT = "files/stat"
CREATE = "files/create"
DELETE = "files/delete"
RENAME = "files/rename"
WATCH = "files/watch"
UNWATCH = "files/unwatch"
UNLOCK = "files/unlock"
CONSENT = "files/consent"

#: Every method of the contract.
FILES_METHODS: frozenset[str] = frozenset(
    {READ, WRITE, LIST, STAT, CREATE, DELETE, RENAME, WATCH, UNWATCH, UNLOCK, CONSENT}
)

#: The client→server notification that carries a watch event.
CHANGED_NOTIFICATION = "notifications/files/changed"

#: The four grantable operations, in the order PROTOCOL.md lists them.
OPERATIONS: tuple[str, ...] = ("read", "write", "delete", "watch")

#: The event kinds a watch reports.
WATCH_EVENTS: tuple[str, ...] = ("created", "modified", "deleted", "moved")
