"""The kernel layer: ``%load_ext jupyter_fsbroker``, ``%fsbroker``, the Python API, the background loop.

* :mod:`.current` — :func:`get_broker`: the one broker of this kernel (created on
  first use, closed at exit); the extension and the magics go through it.
* :mod:`.notebook` — :class:`NotebookBroker`: roots, grants and connections, with their views.
* :mod:`.connecting` — the notebook's connections by name: opened, replaced, watched, ended.
* :mod:`.settings_link` — a running broker following its ``FSBroker`` settings.
* :mod:`.warming` — the warm-up: what connections need, imported while the user goes on.
* :mod:`.notebook_connection` — :class:`KernelConnection`: one server connection (calls,
  cancellation, grants, the kill switch).
* :mod:`.tool_results` — :class:`ToolResult` (a tool's result), :class:`ToolError` (a failed tool),
  :class:`Tools` and :class:`Tool` (a server's tools, for people).
* :mod:`.trashbin` — :class:`NotebookTrash` (``broker.trash()``: list, restore, empty) and
  :class:`TrashListing` (its entries as a table).
* :mod:`.servers` — the target of a connect call, checked; each stdio server's log.
* :mod:`.calls` — how a cell waits for work on the background loop; the frame of each tool call.
* :mod:`.running_calls` — the tool calls in flight: the cell's running line, the panel's list, Cancel.
* :mod:`.prompting` — where consent prompts appear while a cell runs.
* :mod:`.busy_status` — the kernel's status stays Busy while a cell runs.
* :mod:`.views` — which views the notebook shows, and where prompts go outside a call.
* :mod:`.snapshot` — the broker's state as one JSON value (``broker.snapshot()``, the panel's state).
* :mod:`.panel` — the JupyterLab panel's comm target (:mod:`.panel.service`, :mod:`.panel.state`,
  :mod:`.panel.messages`): snapshots of the broker and the panel's actions (``labextension/PROTOCOL.md``).
* :mod:`.settings` — the ``FSBroker`` traitlets configurable.
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
    from .current import get_broker
    from .extension import load_ipython_extension, unload_ipython_extension
    from .notebook import NotebookBroker
    from .notebook_connection import KernelConnection
    from .settings import FSBroker
    from .tool_results import CallCancelled, CallInterrupted, Tool, ToolError, ToolResult, Tools
    from .trashbin import NotebookTrash, TrashListing

__all__ = [
    "CallCancelled",
    "CallInterrupted",
    "FSBroker",
    "KernelConnection",
    "NotebookBroker",
    "NotebookTrash",
    "Tool",
    "ToolError",
    "ToolResult",
    "Tools",
    "TrashListing",
    "get_broker",
    "load_ipython_extension",
    "unload_ipython_extension",
]

__getattr__, __dir__ = _lazy.lazy_exports(
    __name__,
    globals(),
    {
        "CallCancelled": ".tool_results",
        "CallInterrupted": ".tool_results",
        "FSBroker": ".settings",
        "KernelConnection": ".notebook_connection",
        "NotebookBroker": ".notebook",
        "Tool": ".tool_results",
        "ToolError": ".tool_results",
        "ToolResult": ".tool_results",
        "Tools": ".tool_results",
        "NotebookTrash": ".trashbin",
        "TrashListing": ".trashbin",
        "get_broker": ".current",
        "load_ipython_extension": ".extension",
        "unload_ipython_extension": ".extension",
    },
)
