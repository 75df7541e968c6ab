"""The helper's copies of the wire contract (PROTOCOL.md): names, caps and limits it relies on.

The helper stands alone (a server author needs only it and ``mcp``), so it cannot
import these facts from :mod:`jupyter_fsbroker.core`; it keeps copies here, and the
error tree of :mod:`.exceptions` and the event shape of :class:`.answers.ChangeEvent`
are copies too. ``tests/serverkit/test_contract_copies.py`` compares every one of
them with the core's, so the two sides can never drift apart.

Only facts of the contract belong here: nothing computed, nothing configurable.
"""

from __future__ import annotations

__all__ = [
    "BROKERING_CAPABILITY",
    "BROKERING_FEATURES",
    "CHANGED_NOTIFICATION",
    "DEFAULT_CHUNK_BYTES",
    "MAX_CHUNK_BYTES",
    "MISSING_CAPABILITY_MESSAGE",
    "NOT_GRANTED",
    "OPERATIONS",
    "PER_PATH_CONSENT",
    "REQUEST_TOO_LARGE",
    "ROOTS_META",
    "WATCH_EVENTS",
    "MiB",
]

MiB = 1024 * 1024

#: The wire's cap on the content of one request (PROTOCOL.md): 2 MiB.
MAX_CHUNK_BYTES = 2 * MiB

#: Default chunk size for reads and staged writes (SEP-1708: 1 MB; the client's default read).
DEFAULT_CHUNK_BYTES = MiB

#: The four grantable operations.
OPERATIONS = ("read", "write", "delete", "watch")

#: The event kinds a watch reports.
WATCH_EVENTS = ("created", "modified", "deleted", "moved")

#: The notification a brokering client sends for watch events.
CHANGED_NOTIFICATION = "notifications/files/changed"

#: The key of ``capabilities.roots`` in ``initialize`` by which a client says it brokers files.
BROKERING_CAPABILITY = "filesystemBrokering"

#: The key of ``capabilities.roots`` listing the optional parts of PROTOCOL.md the client implements.
BROKERING_FEATURES = "filesystemBrokeringFeatures"

#: The feature of a client that takes per-path items in ``files/consent`` (PROTOCOL.md).
PER_PATH_CONSENT = "perPathConsent"

#: The key of the ``roots/list`` result's ``_meta`` under which a brokering client lists every
#: root by name (``{"roots": [{"name": "data"}, {"name": "ref", "readOnly": true}]}``).
ROOTS_META = "filesystemBrokering"

#: The error message SEP-1708 prescribes when the client does not broker files.
MISSING_CAPABILITY_MESSAGE = (
    "Filesystem access is required but the client is not advertising the filesystemBrokering capability"
)

#: ``data.reason`` of the PERMISSION_DENIED that consent can cure.
NOT_GRANTED = "not_granted"

#: ``data.reason`` of the TOO_LARGE that announces the client's per-request cap (``data.maxBytes``).
REQUEST_TOO_LARGE = "request_too_large"
