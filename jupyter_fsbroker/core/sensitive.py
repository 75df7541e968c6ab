"""Sensitive names: secrets that stay hidden even inside a root.

A pattern is one or more path components joined by ``/``, each shell-style
(``*``, ``?``, ``[...]``; a wildcard never spans a ``/``). A root-relative path
is sensitive when some run of its consecutive components matches a pattern's
components, anywhere below the root: ``.env`` is any component named ``.env``,
``.docker/config.json`` a ``config.json`` in any folder named ``.docker``.
Everything below a sensitive path is sensitive too, so ``.git/`` and
``.config/gcloud/`` hide the folder and all it holds (a trailing ``/`` says that
a pattern names a folder; ``.git`` matches the same). Names are compared
case-insensitively, so that ``.ENV`` on a case-insensitive file system is
caught too.

The rules are applied to the path a request resolves to, with every link on
the way (:mod:`~jupyter_fsbroker.core.access`), so a link named ``notes.txt``
that points at ``.env`` is ``.env`` to every operation. Sensitive paths are
refused, and left out of listings and watch events, unless the notebook
explicitly allows them.

Matching runs on every request and every listed entry: all patterns are one
compiled regular expression over the whole path (:meth:`SensitiveNames.matches`),
and a listing looks at each entry's name with a second one first
(:meth:`SensitiveNames.could_match`), which is exact for patterns of one
component.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["DEFAULT_SENSITIVE_PATTERNS", "SensitiveNames"]

#: The patterns of PROTOCOL.md.
DEFAULT_SENSITIVE_PATTERNS: tuple[str, ...] = (
    # Environment files and version control (remotes may carry tokens).
    ".env",
    ".env.*",
    ".git/",
    ".git-credentials",
    # Keys, certificates and password stores.
    ".ssh/",
    ".gnupg/",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.kdbx",
    # Credentials of clouds, clusters and registries.
    ".aws/",
    ".azure/",
    ".config/gcloud/",
    ".kube/",
    ".docker/config.json",
    # Passwords of tools and services.
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".htpasswd",
)


def _tokens(component: str) -> list[str]:
    """The regular-expression atoms of one shell-style component; no wildcard spans a ``/``."""
    out: list[str] = []
    i, n = 0, len(component)
    while i < n:
        c = component[i]
        i += 1
        if c == "*":
            if not out or out[-1] != "[^/]*":
                out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1 if i < n and component[i] == "!" else i
            j = j + 1 if j < n and component[j] == "]" else j
            while j < n and component[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))  # no closing bracket: a literal "[", as fnmatch reads it
                continue
            chars = component[i:j].replace("\\", "\\\\")
            i = j + 1
            if chars.startswith("!"):
                out.append(f"[^/{chars[1:]}]")
            else:
                out.append("[" + ("\\" + chars if chars.startswith("^") else chars) + "]")
        else:
            out.append(re.escape(c))
    return out


def _pattern_tokens(pattern: str) -> list[list[str]]:
    """The atoms of each component of *pattern*; none for an empty pattern."""
    return [_tokens(part) for part in pattern.casefold().split("/") if part]


def _joined(components: list[list[str]]) -> list[str]:
    """The atoms of a pattern of several components, ``/`` between them."""
    atoms = list(components[0])
    for component in components[1:]:
        atoms += ["/", *component]
    return atoms


#: Patterns as a trie of their atoms; the key :data:`_END` marks where one ends.
_Trie = dict[str, "_Trie"]
_END = ""


def _alternation(tries: _Trie) -> str:
    """One expression for the patterns of a trie of atoms, their common starts written once.

    Patterns that begin alike (``.env``, ``.env.*``, ``.git``, ``*.pem``, ``*.key``...)
    share the atoms they begin with, so a search tries each atom at each place once
    instead of once per pattern: about twice as fast on deep paths.
    """
    branches = [atom + _alternation(rest) for atom, rest in tries.items() if atom != _END]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if _END in tries else body


def _regex(token_lists: Iterable[list[str]]) -> str:
    trie: _Trie = {}
    for tokens in token_lists:
        node = trie
        for atom in tokens:
            node = node.setdefault(atom, {})
        node[_END] = {}
    return _alternation(trie)


@dataclass(frozen=True)
class SensitiveNames:
    """A set of patterns; :meth:`matches` tells whether a root-relative path is sensitive."""

    patterns: tuple[str, ...] = DEFAULT_SENSITIVE_PATTERNS
    _path_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _name_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        compiled = [components for components in map(_pattern_tokens, self.patterns) if components]
        if not compiled:
            return
        # A run of whole components anywhere: it starts at the beginning or after a "/" and ends
        # at the end or before one (what lies below a match is below a sensitive path).
        whole = _regex(_joined(components) for components in compiled)
        object.__setattr__(self, "_path_re", re.compile(f"(?:^|/)(?:{whole})(?:/|\\Z)"))
        last = _regex(components[-1] for components in compiled)
        object.__setattr__(self, "_name_re", re.compile(f"(?:{last})\\Z"))

    @classmethod
    def of(cls, patterns: Iterable[str]) -> SensitiveNames:
        """Build from any iterable of patterns."""
        return cls(tuple(patterns))

    def matches(self, parts: Iterable[str]) -> bool:
        """Whether the root-relative path *parts* (its components) is sensitive."""
        return self._path_re is not None and self._path_re.search("/".join(parts).casefold()) is not None

    def could_match(self, name: str) -> bool:
        """Whether a path ending in the component *name* may be sensitive because of it.

        It matches the last component of some pattern: for a pattern of one
        component the path is then sensitive, for the others :meth:`matches`
        decides. ``False`` means that a path whose folder is not sensitive
        stays so with *name* added.
        """
        return self._name_re is not None and self._name_re.match(name.casefold()) is not None
