"""Typed access to a request's ``params``.

Every mistake in what a server sent (a missing field, a wrong type, a value
out of range) is answered here with JSON-RPC
-32602 naming the field, before anything else happens. Nothing here looks at
the file system or at grants.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidParams

__all__ = ["Params"]

_MISSING: Any = object()


class Params:
    """A request's params object; each accessor checks one field.

    Parameters
    ----------
    raw
        The ``params`` of the request; ``None`` counts as ``{}``.

    Raises
    ------
    InvalidParams
        *raw* is not a JSON object.
    """

    def __init__(self, raw: object) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams("params must be an object", reason="invalid_params")
        self.raw: dict[str, Any] = raw

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        """The field *key*, of type *kind*; *default* when absent or ``null`` (required without one)."""
        value = self.raw.get(key, _MISSING)
        if value is _MISSING or (value is None and default is not _MISSING):
            if default is _MISSING:
                raise InvalidParams(f"missing parameter {key!r}", reason="missing_param", param=key)
            return default
        # bool is an int in Python, never on the wire.
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise InvalidParams(f"parameter {key!r} has the wrong type", reason="wrong_param_type", param=key)
        return value

    def path(self, key: str = "path") -> str:
        """A required path field, as the request wrote it."""
        return str(self.get(key, str))

    def flag(self, key: str, default: bool) -> bool:
        """An optional boolean field."""
        return bool(self.get(key, bool, default))

    def count(self, key: str, default: int | None, *, minimum: int = 0) -> int | None:
        """An integer field of at least *minimum*."""
        value = self.get(key, int, default)
        if value is not None and value < minimum:
            raise InvalidParams(
                f"parameter {key!r} must be at least {minimum}", reason="bad_value", param=key
            )
        return value  # type: ignore[no-any-return]

    def strings(self, key: str, default: Any = _MISSING) -> list[str] | None:
        """A list-of-strings field."""
        value = self.get(key, list, default)
        if value is not None and not all(isinstance(v, str) for v in value):
            raise InvalidParams(
                f"parameter {key!r} must be a list of strings", reason="wrong_param_type", param=key
            )
        return value  # type: ignore[no-any-return]
