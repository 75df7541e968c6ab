"""The ``files/*`` contract once (PROTOCOL.md): names, sizes, the capability, the change event and
the error catalogue.

Standard library only, so that both ends import it: the core and the MCP client
(the client side) and the server kit (the server side). Nothing here does I/O or
holds state; every name is a fact of the contract or a pure reading of one.
"""

from __future__ import annotations

from . import catalogue, modern
from .brokering import (
    BROKERING_CAPABILITY,
    BROKERING_FEATURES,
    CLIENT_FEATURES,
    MISSING_CAPABILITY_MESSAGE,
    PER_PATH_CONSENT,
    ROOTS_META,
    advertises_brokering,
    brokering_features,
    roots_capability,
)
from .caps import DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, MiB
from .catalogue import ErrorKind, error_object, kind_of
from .events import ChangeEvent
from .methods import CHANGED_NOTIFICATION, FILES_METHODS, FILES_PREFIX, OPERATIONS, WATCH_EVENTS
from .timestamps import iso_utc, iso_utc_ns, parse_iso

__all__ = [
    "BROKERING_CAPABILITY",
    "BROKERING_FEATURES",
    "CHANGED_NOTIFICATION",
    "CLIENT_FEATURES",
    "DEFAULT_CHUNK_BYTES",
    "FILES_METHODS",
    "FILES_PREFIX",
    "MAX_CHUNK_BYTES",
    "MISSING_CAPABILITY_MESSAGE",
    "OPERATIONS",
    "PER_PATH_CONSENT",
    "ROOTS_META",
    "WATCH_EVENTS",
    "ChangeEvent",
    "ErrorKind",
    "MiB",
    "advertises_brokering",
    "brokering_features",
    "catalogue",
    "error_object",
    "iso_utc",
    "iso_utc_ns",
    "kind_of",
    "modern",
    "parse_iso",
    "roots_capability",
]
