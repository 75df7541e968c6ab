"""Sensitive names: secrets that stay hidden even inside a root.

A path is sensitive when any of its components matches one of the patterns
(shell-style, compared case-insensitively so that ``.ENV`` on a case-insensitive
filesystem is caught too). Directory patterns such as ``.git`` hide the
directory and everything below it. Sensitive paths are refused and left out of
listings and watch events unless the notebook explicitly allows them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["DEFAULT_SENSITIVE_PATTERNS", "SensitiveNames"]

#: The patterns of PROTOCOL.md.
DEFAULT_SENSITIVE_PATTERNS: tuple[str, ...] = (
    ".env",
    ".env.*",
    ".git",
    ".ssh",
    ".aws",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    "*.kdbx",
)


@dataclass(frozen=True)
class SensitiveNames:
    """A set of name patterns; :meth:`matches` tells whether a path is sensitive."""

    patterns: tuple[str, ...] = DEFAULT_SENSITIVE_PATTERNS
    _regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if self.patterns:
            joined = "|".join(fnmatch.translate(p.casefold()) for p in self.patterns)
            object.__setattr__(self, "_regex", re.compile(joined))

    @classmethod
    def of(cls, patterns: Iterable[str]) -> SensitiveNames:
        """Build from any iterable of patterns."""
        return cls(tuple(patterns))

    def name_matches(self, name: str) -> bool:
        """Whether the single component *name* is sensitive."""
        return self._regex is not None and self._regex.match(name.casefold()) is not None

    def matches(self, parts: Iterable[str]) -> bool:
        """Whether any component of the root-relative path *parts* is sensitive."""
        return any(self.name_matches(p) for p in parts)
