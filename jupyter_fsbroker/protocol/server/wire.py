"""To and from the wire's JSON: request params without unset members, lenient reads of answers.

The brokering client is a peer the server does not control. A member of the
wrong type reads as its default here instead of failing deep inside a tool;
the only reader that raises is :func:`decode_base64`, for content that cannot
be decoded at all.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from .errors import InternalError

__all__ = ["compact_params", "decode_base64", "get_int", "get_opt_str", "get_str", "get_strs"]


def compact_params(**values: Any) -> dict[str, Any]:
    """Request params from keyword arguments, leaving out those that are ``None``."""
    return {key: value for key, value in values.items() if value is not None}


def get_str(result: Mapping[str, Any], key: str, default: str = "") -> str:
    """``result[key]`` if it is a string, else *default*."""
    value = result.get(key, default)
    return value if isinstance(value, str) else default


def get_opt_str(result: Mapping[str, Any], key: str) -> str | None:
    """``result[key]`` if it is a string, else ``None``."""
    value = result.get(key)
    return value if isinstance(value, str) else None


def get_int(result: Mapping[str, Any], key: str, default: int = 0) -> int:
    """``result[key]`` if it is an integer (not a bool), else *default*."""
    value = result.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def get_strs(result: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """The strings of the list ``result[key]`` (other items skipped); ``()`` if it is no list."""
    value = result.get(key)
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


def decode_base64(content: str) -> bytes:
    """The bytes of base64 *content* read from the client.

    Raises
    ------
    InternalError
        The client sent something that is not base64.
    """
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise InternalError("the client sent invalid base64", method="files/read") from None
