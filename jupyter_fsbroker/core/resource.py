"""The shape every owner of a resource has: ``close()`` and a context manager."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closeable"]


class Closeable:
    """Base class for objects that own resources: ``with`` closes them.

    Subclasses implement :meth:`close`, idempotently.
    """

    # Empty, so that subclasses with ``__slots__`` stay without a ``__dict__``.
    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
