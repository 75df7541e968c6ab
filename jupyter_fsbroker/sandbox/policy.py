"""What a confined server may reach: the policy as a value, and its JSON form for the launcher.

What it is for: one frozen value that the broker computes (:mod:`.reach`) and
the launcher (:mod:`.run`) enforces — a list of paths, each with one of a few
named kinds of access, and optionally the TCP ports the server may connect to.
It travels between the two processes as JSON in a file, so both read the same
thing and a person can read it too.

What it must never do: import anything but the standard library (the launcher
reads it before the server runs), or accept a policy it does not fully
understand (an unknown field or kind of access is an error, not a default).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["AccessMode", "Policy", "PolicyError", "Rule"]

#: Raised to 2 when the JSON form changes in a way an older launcher must refuse.
_FORMAT = 1


class PolicyError(ValueError):
    """A policy that cannot be read or makes no sense."""


class AccessMode(enum.Enum):
    """The kinds of access a rule grants beneath its path.

    :mod:`.confine` maps each to Landlock rights; a rule on a file keeps only the
    rights that apply to files.
    """

    #: Read files and list folders.
    READ = "read"
    #: Read, list, and execute programs (the system, the interpreter and its packages).
    READ_EXECUTE = "read-execute"
    #: Read, list, create, write, truncate, rename and remove files and folders (no devices,
    #: no execution): the private temporary folder, and read-write roots at the ``roots`` level.
    READ_WRITE = "read-write"
    #: Read and write a device file (``/dev/null``), without ``ioctl``.
    DEVICE = "device"


@dataclass(frozen=True)
class Rule:
    """One path and the access granted to everything beneath it.

    Attributes
    ----------
    path
        An absolute path. Symbolic links are followed when the rule is enforced:
        the rule covers what the path names at that moment.
    access
        What may be done beneath it.
    why
        Why the server needs it, for people reading the policy.
    required
        Whether a missing path is an error (paths named by the user or the
        command) or is skipped (system paths that some distributions lack).
    """

    path: str
    access: AccessMode
    why: str = ""
    required: bool = False

    def __post_init__(self) -> None:
        if not self.path.startswith("/") or "\0" in self.path:
            raise PolicyError(f"a rule's path must be absolute: {self.path!r}")


@dataclass(frozen=True)
class Policy:
    """Everything a confined server may reach; anything not listed is refused by the kernel.

    Attributes
    ----------
    rules
        The paths it may reach, and how.
    connect_ports
        ``None``: TCP is not confined (the first level). Otherwise the only TCP
        ports it may connect to (the second level; ``()``: none); binding a TCP
        port is refused.
    level
        The name of the level, for people: ``"files"`` or ``"roots"``.
    """

    rules: tuple[Rule, ...]
    connect_ports: tuple[int, ...] | None = None
    level: str = "files"

    def __post_init__(self) -> None:
        for port in self.connect_ports or ():
            if not 0 < port <= 65535:
                raise PolicyError(f"not a TCP port: {port}")

    def to_json(self) -> str:
        """The form the launcher reads."""
        return json.dumps(
            {
                "format": _FORMAT,
                "level": self.level,
                "connectPorts": None if self.connect_ports is None else list(self.connect_ports),
                "rules": [
                    {"path": r.path, "access": r.access.value, "why": r.why, "required": r.required}
                    for r in self.rules
                ],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> Policy:
        """Read :meth:`to_json`'s form; anything else is a :class:`PolicyError`."""
        try:
            data = json.loads(text)
            _expect_keys(data, {"format", "level", "connectPorts", "rules"})
            if data["format"] != _FORMAT:
                raise PolicyError(f"policy format {data['format']!r}; this launcher reads {_FORMAT}")
            ports = data["connectPorts"]
            rules = []
            for item in data["rules"]:
                _expect_keys(item, {"path", "access", "why", "required"})
                rules.append(
                    Rule(
                        str(item["path"]),
                        AccessMode(item["access"]),
                        str(item["why"]),
                        bool(item["required"]),
                    )
                )
            return cls(
                tuple(rules),
                None if ports is None else tuple(_port(p) for p in ports),
                str(data["level"]),
            )
        except PolicyError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise PolicyError(f"not a sandbox policy: {exc}") from None


def _expect_keys(item: Any, keys: set[str]) -> None:
    if not isinstance(item, dict) or set(item) != keys:
        found = sorted(item) if isinstance(item, dict) else type(item).__name__
        raise PolicyError(f"expected the fields {sorted(keys)}, found {found}")


def _port(value: Any) -> int:
    if type(value) is not int:
        raise PolicyError(f"not a TCP port: {value!r}")
    return value
