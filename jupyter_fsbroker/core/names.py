"""Names that JSON cannot carry: how a name read from disk crosses to the wire.

On POSIX a file name is bytes. Python hands names read from disk
(``scandir``, ``readlink``, a watch event's path) to the core as ``str``
decoded with ``surrogateescape``: every byte that is not valid UTF-8 becomes a
lone surrogate (U+DC80 to U+DCFF). Such a string names the file exactly, so the
core keeps it for every call on disk; but JSON cannot carry a lone surrogate,
and a reply holding one can never be sent.

PROTOCOL.md ("Names that are not valid UTF-8 on disk") says how such a name is
shown: readable, each undecodable byte replaced by U+FFFD, with
``"undecodableName": true`` beside it. :func:`readable` makes that spelling;
:func:`is_wire_safe` tells whether a text needs it. A request naming such a
file can only spell it lossily, so it names nothing on disk (NOT_FOUND);
:func:`find_surrogate` lets the request dispatch refuse a request that holds a
lone surrogate itself, so that no file is ever created with a name JSON cannot
carry.

This module only looks at text: it never touches the file system.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["find_surrogate", "is_wire_safe", "readable", "readable_parts"]

# Every lone surrogate becomes U+FFFD (surrogateescape only makes U+DC80..U+DCFF, one per byte).
_REPLACE = dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)


def is_wire_safe(text: str) -> bool:
    """Whether *text* holds no lone surrogate, so JSON can carry it as it is."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def readable(text: str) -> str:
    """*text* with each lone surrogate (each undecodable byte of a name) replaced by U+FFFD."""
    return text if is_wire_safe(text) else text.translate(_REPLACE)


def readable_parts(parts: Iterable[str]) -> tuple[tuple[str, ...], bool]:
    """The readable spelling of path components, and whether any of them had to change."""
    out = tuple(readable(p) for p in parts)
    return out, any(not is_wire_safe(p) for p in parts)


def find_surrogate(value: Any, *, skip: frozenset[str] = frozenset()) -> str | None:
    """The key (dotted for nested values) of the first text in *value* holding a lone surrogate.

    Walks dictionaries (keys and values) and lists without recursion, so any
    nesting is fine. Top-level keys in *skip* are not looked at (content
    whose codec decides what a surrogate means).

    Returns
    -------
    str or None
        ``"path"``, ``"requestedPaths.1"``, ... or ``None`` when every text is wire-safe.
    """
    # Each entry is (item, key, its container's entry): a dotted name is spelled out only for
    # the text returned, not for every key on the way (most requests have none).
    top: tuple[Any, Any, Any] = (value, None, None)
    stack = [top]
    while stack:
        entry = stack.pop()
        item = entry[0]
        if isinstance(item, str):
            if not is_wire_safe(item):
                return _name(entry) or "params"
        elif isinstance(item, dict):
            for key, child in item.items():
                if entry is top and key in skip:
                    continue
                if isinstance(key, str) and not is_wire_safe(key):
                    return readable(_name((child, key, entry)))
                stack.append((child, key, entry))
        elif isinstance(item, list | tuple):
            stack.extend((child, i, entry) for i, child in enumerate(item))
    return None


def _name(entry: tuple[Any, Any, Any]) -> str:
    """The dotted name of an entry of :func:`find_surrogate`'s walk (``""`` for the value itself)."""
    keys: list[str] = []
    while entry[2] is not None:
        keys.append(str(entry[1]))
        entry = entry[2]
    return ".".join(reversed(keys))
