"""Request paths read, touching no file: the three path forms, the root, ``.`` and ``..``.

:func:`parse` is the first of resolution's two stages: it is lexical and
touches no file. It accepts the three path forms of PROTOCOL.md
(root-relative, absolute, ``file://`` URI), picks the root, and collapses ``.``
and ``..``. Anything outside every root is refused here, before any existence
check, so the answer reveals nothing about the outside. A request path holding
a lone surrogate is refused here too (it could only name a file whose name is
not valid UTF-8, and create one).

The second stage, the walk to the object on disk, is :mod:`jupyter_fsbroker.core.resolve`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes, urlsplit

from .errors import InvalidParams, PermissionDenied
from .names import is_wire_safe, readable
from .rootpath import RootPath
from .roots import Root, RootSet

__all__ = ["parse"]

_URI_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?P<rest>.*)$", re.DOTALL)


def parse(raw: str, roots: RootSet) -> RootPath:
    """Turn a request path into a root and clean components, touching no file.

    Raises
    ------
    PermissionDenied
        Foreign URI schemes or hosts, NUL bytes, paths outside every root,
        ``..`` above a root, no roots at all.
    InvalidParams
        An empty path, or one holding a lone surrogate.
    """
    if raw == "":
        raise InvalidParams("the path is empty", reason="empty_path", path=raw)
    if not is_wire_safe(raw):
        raise InvalidParams(
            "the path holds a lone surrogate, which names no character",
            reason="lone_surrogate",
            path=readable(raw),
        )
    if "\x00" in raw:
        raise PermissionDenied("the path contains a NUL byte", reason="nul_byte", path=raw)
    available = roots.snapshot()
    if not available:
        raise PermissionDenied("no folders are shared with this server", reason="no_roots", path=raw)

    uri = _URI_RE.match(raw)
    if uri is not None and (uri["rest"].startswith("//") or uri["scheme"].lower() == "file"):
        return _parse_absolute(_uri_to_path(raw), available, raw)
    if raw.startswith("/"):
        return _parse_absolute(raw, available, raw)

    segments = [s for s in raw.split("/") if s not in ("", ".")]
    if not segments:
        raise PermissionDenied("the path names no root", reason="outside_roots", path=raw)
    by_name = {r.name: r for r in available}
    root = by_name.get(segments[0])
    if root is not None:
        rest = segments[1:]
    elif len(available) == 1:
        root, rest = available[0], segments
    else:
        raise PermissionDenied("the path is outside every shared folder", reason="outside_roots", path=raw)
    return RootPath(root, _collapse(rest, raw))


def _uri_to_path(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme.lower() != "file":
        raise PermissionDenied(
            f"only file:// URIs are accepted, not {parts.scheme}:", reason="unsupported_scheme", path=raw
        )
    if parts.netloc.lower() not in ("", "localhost"):
        raise PermissionDenied("file:// URIs must name this machine", reason="foreign_host", path=raw)
    if parts.query or parts.fragment or "?" in raw or "#" in raw:
        raise PermissionDenied(
            "file:// URIs may not carry a query or fragment", reason="invalid_uri", path=raw
        )
    try:
        path = unquote_to_bytes(parts.path).decode("utf-8")
    except UnicodeDecodeError:
        raise PermissionDenied("the URI does not decode to UTF-8", reason="invalid_uri", path=raw) from None
    if "\x00" in path:
        raise PermissionDenied("the path contains a NUL byte", reason="nul_byte", path=raw)
    if not path.startswith("/"):
        raise PermissionDenied("file:// URIs must be absolute", reason="invalid_uri", path=raw)
    return path


def _parse_absolute(path: str, available: tuple[Root, ...], raw: str) -> RootPath:
    segments = tuple(s for s in path.split("/") if s not in ("", "."))
    best: tuple[int, Root] | None = None
    for root in available:
        for prefix in (root.parts, root.given_parts):
            n = len(prefix)
            if segments[:n] == prefix and (best is None or n > best[0]):
                best = (n, root)
    if best is None:
        raise PermissionDenied("the path is outside every shared folder", reason="outside_roots", path=raw)
    n, root = best
    return RootPath(root, _collapse(segments[n:], raw))


def _collapse(segments: list[str] | tuple[str, ...], raw: str) -> tuple[str, ...]:
    out: list[str] = []
    for s in segments:
        if s in ("", "."):
            continue
        if s == "..":
            if not out:
                raise PermissionDenied("the path climbs out of its root", reason="traversal", path=raw)
            out.pop()
        else:
            out.append(s)
    return tuple(out)
