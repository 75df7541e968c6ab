"""The short spellings users type for roots, pre-approvals and headers, parsed in one place.

The command line (``--root``, ``--allow``, ``--header``), the ``%fsbroker`` magics and the
``FSBroker`` settings all accept them.
"""

from __future__ import annotations

from .errors import ConfigError
from .grants import OPERATIONS

__all__ = ["split_allow", "split_header", "split_root"]


def split_root(spec: str) -> tuple[str | None, str]:
    """``'data=~/x'`` → ``('data', '~/x')``; ``'~/x'`` → ``(None, '~/x')`` (the name is the folder's)."""
    name, sep, path = spec.partition("=")
    if sep and name and "/" not in name and path:
        return name.strip(), path.strip()
    return None, spec.strip()


def split_allow(spec: str) -> tuple[str, tuple[str, ...]]:
    """``'data/raw:read,watch'`` → ``('data/raw', ('read', 'watch'))``; without ``:OPS``, read.

    Raises
    ------
    ConfigError
        OPS names an unknown operation.
    """
    path, sep, ops = spec.rpartition(":")
    if not sep or not path or "/" in ops:
        return spec.strip(), ("read",)
    names = tuple(op.strip() for op in ops.split(",") if op.strip())
    unknown = [op for op in names if op not in OPERATIONS]
    if unknown:
        raise ConfigError(f"{spec!r}: unknown operation(s) {', '.join(unknown)}; use {', '.join(OPERATIONS)}")
    return path.strip(), names or ("read",)


def split_header(spec: str) -> tuple[str, str]:
    """``'Authorization: Bearer x'`` → ``('Authorization', 'Bearer x')``.

    Raises
    ------
    ConfigError
        Not written as ``NAME: VALUE``.
    """
    name, sep, value = spec.partition(":")
    if not sep or not name.strip():
        raise ConfigError(f"header {spec!r}: write it as 'NAME: VALUE'")
    return name.strip(), value.strip()
