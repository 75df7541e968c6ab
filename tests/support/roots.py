"""A fixed ``roots/list`` answer for middleware tests that need no broker (a ``RootsProvider``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StaticRoots:
    """Answers every ``roots/list`` with *result*; offers locations when it lists any."""

    result: dict[str, Any] = field(default_factory=lambda: {"roots": []})

    def answer(self) -> dict[str, Any]:
        return self.result

    def located(self) -> bool:
        return bool(self.result.get("roots"))
