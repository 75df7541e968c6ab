"""The ``filesystemBrokering`` capability: how a client says in ``initialize`` that it brokers files.

The client writes it with :func:`roots_capability`; a server reads it from the
raw ``initialize`` params with :func:`advertises_brokering` and
:func:`brokering_features` (raw, because mcp's typed models drop unknown keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

__all__ = [
    "BROKERING_CAPABILITY",
    "BROKERING_FEATURES",
    "CLIENT_FEATURES",
    "MISSING_CAPABILITY_MESSAGE",
    "PER_PATH_CONSENT",
    "ROOTS_META",
    "advertises_brokering",
    "brokering_features",
    "roots_capability",
]

#: The key of ``capabilities.roots`` by which a client says it brokers files.
BROKERING_CAPABILITY = "filesystemBrokering"

#: The key of ``capabilities.roots`` listing the optional parts of PROTOCOL.md a client implements.
BROKERING_FEATURES = "filesystemBrokeringFeatures"

#: The feature of a client that takes per-path items in ``files/consent``.
PER_PATH_CONSENT = "perPathConsent"

#: The features this package's client implements (its core takes per-path consent items).
CLIENT_FEATURES: tuple[str, ...] = (PER_PATH_CONSENT,)

#: The key of the ``roots/list`` result's ``_meta`` under which a brokering client lists every
#: root by name (``{"roots": [{"name": "data"}, {"name": "ref", "readOnly": true}]}``).
ROOTS_META = "filesystemBrokering"

#: The error message SEP-1708 prescribes when the client does not broker files.
MISSING_CAPABILITY_MESSAGE = (
    "Filesystem access is required but the client is not advertising the filesystemBrokering capability"
)


def roots_capability() -> dict[str, Any]:
    """A fresh ``capabilities.roots`` for an ``initialize`` request of a brokering client."""
    return {"listChanged": True, BROKERING_CAPABILITY: True, BROKERING_FEATURES: list(CLIENT_FEATURES)}


def _roots_of(initialize_params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    capabilities = (initialize_params or {}).get("capabilities")
    roots = capabilities.get("roots") if isinstance(capabilities, Mapping) else None
    return cast("Mapping[str, Any]", roots) if isinstance(roots, Mapping) else {}


def advertises_brokering(initialize_params: Mapping[str, Any] | None) -> bool:
    """Whether raw ``initialize`` params carry ``capabilities.roots.filesystemBrokering: true``."""
    return _roots_of(initialize_params).get(BROKERING_CAPABILITY) is True


def brokering_features(initialize_params: Mapping[str, Any] | None) -> frozenset[str]:
    """The optional parts of PROTOCOL.md a client implements, from raw ``initialize`` params.

    The strings of ``capabilities.roots.filesystemBrokeringFeatures`` (today
    PROTOCOL.md names one, ``perPathConsent``); a missing key, or one that is
    not a list, means none, and entries that are not strings are skipped.
    """
    listed = _roots_of(initialize_params).get(BROKERING_FEATURES)
    if not isinstance(listed, list):
        return frozenset()
    return frozenset(item for item in cast("list[object]", listed) if isinstance(item, str))
