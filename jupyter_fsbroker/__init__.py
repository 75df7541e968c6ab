"""jupyter_fsbroker: a Jupyter kernel as a safe MCP client for brokered filesystem access.

The names below are the public API. The engine is :class:`Broker`: it holds
the shared folders (roots), the grants, locks, watches and audit log, and
answers the ``files/*`` requests of each server connection.

In a notebook: ``%load_ext jupyter_fsbroker`` (or ``broker = jupyter_fsbroker.get_broker()``).
Every name is imported on first use: the core's on first access, the kernel entry points
below (IPython, ``ipywidgets``, the MCP client) only when called. So ``import
jupyter_fsbroker`` loads nothing but this module and :mod:`._lazy`, and a process that uses
one layer (the server kit, the sandbox's launcher) loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _lazy

if TYPE_CHECKING:
    from ._version import __version__
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
    from .kernel import NotebookBroker

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {
        "Broker": ".core",
        "BrokerConfig": ".core",
        "BrokerError": ".core",
        "CallbackConsenter": ".core",
        "ChangeEvent": ".core",
        "ConfigError": ".core",
        "ConsentDecision": ".core",
        "ConsentRequest": ".core",
        "Consenter": ".core",
        "FilesError": ".core",
        "Grant": ".core",
        "Limits": ".core",
        "Root": ".core",
        "SensitiveNames": ".core",
        "__version__": "._version",
    },
)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_fsbroker``: start this kernel's broker (quietly)."""
    from .kernel import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext jupyter_fsbroker``: close every connection and stop the broker."""
    from .kernel import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built JupyterLab extension is, for ``jupyter labextension develop``."""
    return [{"src": "labextension", "dest": "jupyter_fsbroker"}]


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
