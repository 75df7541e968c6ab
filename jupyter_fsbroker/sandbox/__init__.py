"""Sandboxed local servers: a server the broker starts reaches the user's files only through ``files/*``.

Linux only (Landlock, ABI 1 and later; the network level needs ABI 4). The
modules, each one concept:

* :mod:`.request` — :class:`Sandbox`: what the user asked for (level, network, extra
  paths), and whether it was asked for or is the default.
* :mod:`.reach` — which paths a server needs, computed from its command: the policy.
* :mod:`.policy` — the policy as a value and its JSON form.
* :mod:`.launch` — starting a server confined: the launcher's command, the private
  temporary folder, and what happens where Landlock is unavailable.
* :mod:`.run` — the launcher: confines its own process, then executes the server.
* :mod:`.confine` — the confinement itself (Landlock, no new privileges, no capabilities).
* :mod:`.landlock` — the ``ctypes`` binding of the Landlock system calls.

This package imports nothing of ``jupyter_fsbroker`` outside itself, and only
relatively, so that the launcher can load it as a package of its own without
the rest (see :mod:`.launch`). The names below are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .launch import Launch, SandboxStatus, SandboxUnavailable, prepare
    from .reach import SandboxError
    from .request import Sandbox, SandboxChoice, choose

__all__ = [
    "Launch",
    "Sandbox",
    "SandboxChoice",
    "SandboxError",
    "SandboxStatus",
    "SandboxUnavailable",
    "choose",
    "prepare",
]

_WHERE = {
    "Launch": ".launch",
    "SandboxStatus": ".launch",
    "SandboxUnavailable": ".launch",
    "prepare": ".launch",
    "SandboxError": ".reach",
    "Sandbox": ".request",
    "SandboxChoice": ".request",
    "choose": ".request",
}


def __getattr__(name: str) -> Any:
    # Not jupyter_fsbroker._lazy: the launcher loads this folder without its parent package.
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value
