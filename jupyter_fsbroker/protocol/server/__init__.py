"""Deprecated: the server kit is :mod:`jupyter_fsbroker.serverkit` (this name goes in the next release).

Importing ``jupyter_fsbroker.protocol.server`` (or one of its modules, by their old names) warns
once and gives the kit's own objects, not copies: ``except
jupyter_fsbroker.protocol.server.NotFound`` catches what the kit raises. The old module names are
aliases in :data:`sys.modules` rather than a second search path, because a module loaded twice
under two names would make two ``FilesError`` classes.
"""

from __future__ import annotations

import importlib
import sys
import warnings

from ... import serverkit
from ...serverkit import *  # noqa: F403 - the same objects, under the old path
from ...serverkit import __all__ as __all__

warnings.warn(
    "jupyter_fsbroker.protocol.server is now jupyter_fsbroker.serverkit; "
    "the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)

#: The old module names, and the kit's modules they now are.
_MOVED = {
    "capability": "capability",
    "chunks": "chunks",
    "client": "files_client",
    "connection": "peers",
    "contract": "contract",
    "direct": "direct",
    "errors": "exceptions",
    "inbound": "inbound",
    "locks": "locking",
    "mcp_internals": "mcp_internals",
    "policy": "retry",
    "requester": "requester",
    "results": "answers",
    "stdio": "stdio_server",
    "uploads": "writing",
    "watch": "subscription",
    "wire": "lenient",
}

for _old, _new in _MOVED.items():
    sys.modules[f"{__name__}.{_old}"] = globals()[_old] = importlib.import_module(
        f"{serverkit.__name__}.{_new}"
    )


def __getattr__(name: str) -> object:
    """The kit's names outside ``__all__`` (a renamed one warns on its own)."""
    return getattr(serverkit, name)
