"""What the user asked for: a :class:`Sandbox` value, and whether it was asked for explicitly.

What it is for: one place that turns what the kernel API, the magics and the
command line accept (``sandbox=True | "roots" | False | None`` or a
:class:`Sandbox`) into a value, and that knows the difference between
"asked for" and "the default": the same missing Landlock is an error in the
first case and a one-line warning in the second.

What it must never do: decide anything about paths (:mod:`.reach` does) or
touch the system.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ENV_DEFAULT", "LEVELS", "Sandbox", "SandboxChoice", "choose", "parse_ports", "sandbox_from_env"]

#: The sandbox levels: ``files`` (the user's files only through ``files/*``) and ``roots``
#: (the roots are reachable directly too, read-only roots read-only).
LEVELS = ("files", "roots")

#: The environment variable that makes the sandbox the default of the command line (and of a
#: kernel's broker): ``1``/``files``, ``roots``, or ``0``.
ENV_DEFAULT = "JUPYTER_FSBROKER_SANDBOX"


@dataclass(frozen=True)
class Sandbox:
    """How a local server is confined.

    Attributes
    ----------
    level
        ``"files"``: nothing of the user's but what ``files/*`` gives; ``"roots"``:
        the roots too, directly, past grants, consent and audit: read and write
        (create, change, rename, delete; no execution) on read-write roots, read
        on read-only ones.
    connect_ports
        ``None``: the network is not confined. Otherwise the second level: the only TCP
        ports the server may connect to (``()``: none), and no TCP port to listen on.
    paths
        More paths the server may read (its data, a cache it needs); never one that
        contains a root, the home folder or the shared temporary folder.
    """

    level: str = "files"
    connect_ports: tuple[int, ...] | None = None
    paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"unknown sandbox level {self.level!r}; expected one of {LEVELS}")
        for port in self.connect_ports or ():
            if not 0 < port <= 65535:
                raise ValueError(f"not a TCP port: {port}")

    def describe(self) -> str:
        """``files``, ``roots``, ``files, no network``, ``roots, network: ports 443``…"""
        if self.connect_ports is None:
            return self.level
        if not self.connect_ports:
            return f"{self.level}, no network"
        return f"{self.level}, network: port{'s' if len(self.connect_ports) > 1 else ''} " + ", ".join(
            map(str, self.connect_ports)
        )


@dataclass(frozen=True)
class SandboxChoice:
    """The sandbox a server gets, and whether someone asked for it (or it was the default).

    Attributes
    ----------
    sandbox
        ``None``: not confined.
    explicit
        Asked for at the call (an unavailable Landlock is then an error), rather than taken
        from a default setting (a warning).
    """

    sandbox: Sandbox | None
    explicit: bool


def choose(value: bool | str | Sandbox | None, default: Sandbox | None = None) -> SandboxChoice:
    """The sandbox for *value*, as the API takes it.

    ``True`` and ``"files"``: the files level; ``"roots"``: the roots level; a
    :class:`Sandbox`: itself; ``False``: none; ``None``: *default* (a setting), not explicit.
    """
    if value is None:
        return SandboxChoice(default, explicit=False)
    if value is False:
        return SandboxChoice(None, explicit=True)
    if value is True:
        return SandboxChoice(Sandbox(), explicit=True)
    if isinstance(value, Sandbox):
        return SandboxChoice(value, explicit=True)
    if isinstance(value, str):
        return SandboxChoice(Sandbox(level=value), explicit=True)
    raise TypeError(f"sandbox must be True, False, None, 'files', 'roots' or a Sandbox, not {value!r}")


def parse_ports(text: str) -> tuple[int, ...]:
    """``"443,8080"`` → ``(443, 8080)``; ``""`` or ``"none"`` → ``()`` (no TCP at all)."""
    words = [w.strip() for w in text.replace(" ", ",").split(",") if w.strip()]
    if words in ([], ["none"]):
        return ()
    try:
        ports = tuple(sorted({int(w) for w in words}))
    except ValueError:
        raise ValueError(f"ports must be numbers separated by commas, not {text!r}") from None
    for port in ports:
        if not 0 < port <= 65535:
            raise ValueError(f"not a TCP port: {port}")
    return ports


def sandbox_from_env(environ: dict[str, str] | None = None) -> Sandbox | None:
    """The default sandbox :data:`ENV_DEFAULT` sets (``None`` when unset, empty or ``0``)."""
    value = (os.environ if environ is None else environ).get(ENV_DEFAULT, "").strip().lower()
    if value in ("", "0", "false", "no", "off", "none"):
        return None
    if value in ("1", "true", "yes", "on", "files"):
        return Sandbox()
    if value == "roots":
        return Sandbox(level="roots")
    raise ValueError(f"{ENV_DEFAULT}={value!r}: expected 1, files, roots or 0")
