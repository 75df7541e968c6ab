"""A small, thread-safe list of listeners, shared by every observable part of the core."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, ParamSpec

__all__ = ["Listeners"]

P = ParamSpec("P")
log = logging.getLogger(__name__)


class Listeners(Generic[P]):
    """Listeners called with the same arguments after a change.

    :meth:`notify` calls them outside any lock of the caller's choosing; an
    exception in one listener is logged and does not stop the others, so a
    broken view can never break the broker.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Callable[P, object]] = []

    def add(self, listener: Callable[P, object]) -> Callable[[], None]:
        """Register *listener*; return a function that unregisters it."""
        with self._lock:
            self._items.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._items:
                    self._items.remove(listener)

        return remove

    def notify(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Call every listener with the given arguments."""
        with self._lock:
            items = list(self._items)
        for listener in items:
            try:
                listener(*args, **kwargs)
            except Exception:
                log.exception("a listener failed")

    def clear(self) -> None:
        """Forget every listener."""
        with self._lock:
            self._items.clear()
