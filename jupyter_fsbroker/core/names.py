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
    if _all_wire_safe(value, skip):
        return None  # the common case, found without naming every key on the way
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if not is_wire_safe(item):
                return where or "params"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not where and key in skip:
                    continue
                name = str(key) if not where else f"{where}.{key}"
                if isinstance(key, str) and not is_wire_safe(key):
                    return readable(name)
                stack.append((name, child))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}.{i}" if where else str(i), child) for i, child in enumerate(item))
    return None


def _all_wire_safe(value: Any, skip: frozenset[str]) -> bool:
    """Whether no text in *value* (but the top-level keys in *skip*) holds a lone surrogate."""
    stack: list[Any] = [value]
    top = True
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not is_wire_safe(item):
                return False
        elif isinstance(item, dict):
            for key, child in item.items():
                if top and key in skip:
                    continue
                if isinstance(key, str) and not is_wire_safe(key):
                    return False
                stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        top = False
    return True
