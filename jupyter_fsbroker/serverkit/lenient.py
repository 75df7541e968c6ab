"""To and from the wire's JSON: request params without unset members, lenient reads of answers.

The brokering client is a peer the server does not control. A member of the
wrong type reads as its default here instead of failing deep inside a tool;
the only reader that raises is :func:`decode_base64`, for content that cannot
be decoded at all. :func:`byte_length` measures content as it travels, so that
answers can be checked against what they claim (see :mod:`.answers`).
"""

from __future__ import annotations

import binascii
import codecs
from collections.abc import Mapping
from typing import Any

from .exceptions import IntegrityError

try:
    # SIMD base64: many times binascii's speed, which otherwise bounds a server's read rate
    # (benchmarks/README.md, "Why the code is shaped this way").
    from pybase64 import b64decode as _b64decode

    #: Whether base64 is decoded fast here (with pybase64, SIMD, rather than binascii).
    FAST_BASE64 = True
except ImportError:  # pragma: no cover - a declared dependency; binascii does the same, slower
    FAST_BASE64 = False

    def _b64decode(s: str | bytes | memoryview, altchars: None = None, validate: bool = False) -> bytes:  # type: ignore[misc]
        # binascii takes the text as it is (base64.b64decode would copy it to bytes first).
        return binascii.a2b_base64(s, strict_mode=validate)


__all__ = [
    "CHUNK_SAFE_CODECS",
    "FAST_BASE64",
    "byte_length",
    "compact_params",
    "decode_base64",
    "get_int",
    "get_opt_str",
    "get_str",
    "get_strs",
    "is_base64",
]

#: Codecs whose chunks, split at any character boundary, decode independently and
#: re-encode to exactly the bytes they came from.
CHUNK_SAFE_CODECS = frozenset(
    {
        "utf-8",
        "ascii",
        "latin-1",
        "iso8859-1",
        *(f"iso8859-{i}" for i in range(2, 17)),
        *(f"cp125{i}" for i in range(9)),
    }
)


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


def decode_base64(content: str | bytes | memoryview) -> bytes:
    """The bytes of base64 *content* read from the client.

    Raises
    ------
    IntegrityError
        The client sent something that is not base64.
    """
    try:
        return _b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise IntegrityError("the client sent invalid base64", method="files/read") from None


# Checked in slices of this many characters (a multiple of 4, so no quantum straddles two):
# each slice's bytes are small and dropped at once, where checking a 1.4 MB content whole
# would make and drop 1 MiB.
_CHECK_SLICE = 64 * 1024


def is_base64(data: str | bytes | memoryview) -> bool:
    """Whether *data* is valid base64 (what :func:`decode_base64` accepts)."""
    size = len(data)
    try:
        for start in range(0, size, _CHECK_SLICE):
            decoded = len(_b64decode(data[start : start + _CHECK_SLICE], validate=True))
            # Padding ends the text: a slice before the last one decodes to all its quanta.
            if start + _CHECK_SLICE < size and decoded != _CHECK_SLICE // 4 * 3:
                return False
    except (binascii.Error, ValueError):
        return False
    return True


def byte_length(content: str, encoding: str) -> int | None:
    """How many bytes *content*, as it travels in *encoding*, stands for; ``None`` if not exactly knowable.

    ``base64`` is measured from its length and padding (an invalid string is
    caught when it is decoded); the codecs of :data:`CHUNK_SAFE_CODECS` are
    exact. For other codecs (UTF-16 without its BOM in a later chunk,
    ISO-2022 ...) the encoded length of a piece is not the length it was read
    from, so nothing is claimed.
    """
    if encoding == "base64":
        if len(content) % 4:
            return None
        padding = 2 if content.endswith("==") else 1 if content.endswith("=") else 0
        return len(content) // 4 * 3 - padding
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    if name not in CHUNK_SAFE_CODECS:
        return None
    if name == "utf-8":
        try:
            return len(content.encode("utf-8"))
        except UnicodeEncodeError:  # lone surrogates: not what any file decodes to
            return None
    return len(content)  # one byte per character
