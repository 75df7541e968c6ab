"""The kernel layer: ``%load_ext jupyter_fsbroker``, ``%fsbroker``, the Python API, the background loop.

* :mod:`.api` — :func:`get_broker`, :class:`NotebookBroker`, :class:`KernelConnection`.
* :mod:`.settings` — the ``FSBroker`` traitlets configurable.
* :mod:`.consent` — where consent prompts appear while a cell runs.
* :mod:`.loop` — the background event loop thread.
* :mod:`.magics`, :mod:`.extension` — the IPython side.
* :mod:`.ipykernel_compat` — everything relied on that ipykernel does not promise.

The names below are imported on first use, so a plain Python process that calls
:func:`get_broker` never imports IPython.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from .api import KernelConnection, NotebookBroker, ToolResult, get_broker
    from .extension import load_ipython_extension, unload_ipython_extension
    from .settings import FSBroker

__all__ = [
    "FSBroker",
    "KernelConnection",
    "NotebookBroker",
    "ToolResult",
    "get_broker",
    "load_ipython_extension",
    "unload_ipython_extension",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {
        "FSBroker": ".settings",
        "KernelConnection": ".api",
        "NotebookBroker": ".api",
        "ToolResult": ".api",
        "get_broker": ".api",
        "load_ipython_extension": ".extension",
        "unload_ipython_extension": ".extension",
    },
)
