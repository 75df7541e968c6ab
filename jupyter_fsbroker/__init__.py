"""jupyter_fsbroker: a Jupyter kernel as a safe MCP client for brokered filesystem access.

The names below are the public API. The engine is :class:`Broker`: it holds
the shared folders (roots), the grants, locks, watches and audit log, and
answers the ``files/*`` requests of each server connection.

In a notebook: ``%load_ext jupyter_fsbroker`` (or ``broker = jupyter_fsbroker.get_broker()``).
The kernel entry points below import IPython, ``ipywidgets`` and the MCP client
only when called, so ``import jupyter_fsbroker`` stays light.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Any

from .core import (
    Broker,
    BrokerConfig,
    BrokerError,
    CallbackConsenter,
    ChangeEvent,
    ConfigError,
    ConsentDecision,
    Consenter,
    ConsentRequest,
    FilesError,
    Grant,
    Limits,
    Root,
    SensitiveNames,
)

if TYPE_CHECKING:
    from .kernel import NotebookBroker

try:
    # pyproject.toml is the one place the version is written; the installed metadata carries it.
    __version__: str = importlib.metadata.version("jupyter_fsbroker")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_fsbroker``: start this kernel's broker (quietly)."""
    from .kernel import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext jupyter_fsbroker``: close every connection and stop the broker."""
    from .kernel import unload_ipython_extension as unload

    unload(ipython)


def get_broker() -> NotebookBroker:
    """The broker of this kernel (see :func:`jupyter_fsbroker.kernel.get_broker`)."""
    from .kernel import get_broker as get

    return get()


__all__ = [
    "Broker",
    "BrokerConfig",
    "BrokerError",
    "CallbackConsenter",
    "ChangeEvent",
    "ConfigError",
    "ConsentDecision",
    "ConsentRequest",
    "Consenter",
    "FilesError",
    "Grant",
    "Limits",
    "Root",
    "SensitiveNames",
    "__version__",
    "get_broker",
    "load_ipython_extension",
    "unload_ipython_extension",
]
