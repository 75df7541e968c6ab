"""The kernel stays Busy while a cell runs: :class:`BusyStatus`.

ipykernel publishes a ``status`` message around every request it handles:
``busy`` before, ``idle`` after, each with that request's parent header. A
frontend shows the kernel's state from the last status it read, whatever
request it belongs to (JupyterLab's ``KernelConnection`` does). While a cell
runs, the kernel also handles the panel's messages and the widgets' clicks
(a consent answer, Cancel) on a subshell or, for an async cell, on the main
shell, and the control channel's requests; the ``idle`` that ends each of them
makes the frontend say "Idle" while the cell still shows ``[*]``.

So, between IPython's ``pre_run_cell`` and ``post_run_cell``, after an ``idle``
that ipykernel publishes for any request but the running cell's, this publishes
``busy`` again with the running cell's parent header: the frontend reads the
cell's own state last. The ``idle`` itself is left as it is (a client that waits
for its request's ``idle`` still gets it). Nothing happens outside a running
cell, the cell's own ``idle`` is never followed, and the hook is on this kernel
instance only (:func:`~.ipykernel_compat.on_status`), removed by :meth:`close`.

One lock orders the republished ``busy`` before the cell's end: ``post_run_cell``
forgets the cell under it, so a ``busy`` sent for a click that ended at
the same moment is on IOPub before the cell's own ``idle``, never after it.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from ..core.resource import Closeable
from . import ipykernel_compat as ipk

__all__ = ["BusyStatus"]


class BusyStatus(Closeable):
    """Republishes the running cell's ``busy`` after other requests' ``idle`` (see the module docstring).

    Parameters
    ----------
    shell
        The IPython shell (its ``pre_run_cell`` and ``post_run_cell`` events are hooked).
    kernel
        The ipykernel kernel whose status messages are followed.

    Notes
    -----
    Use :meth:`start`: it returns ``None`` outside a kernel.
    """

    def __init__(self, shell: Any, kernel: Any) -> None:
        self._kernel = kernel
        self._events = shell.events
        self._lock = threading.Lock()
        # The running cells' requests, whole, by message id, oldest first: the main shell's, and
        # any a subshell runs meanwhile.
        self._cells: dict[str, dict[str, Any]] = {}
        self._republished = 0
        self._events.register("pre_run_cell", self._before_cell)
        self._events.register("post_run_cell", self._after_cell)
        self._unhook = ipk.on_status(kernel, self._on_status)
        # Started by the cell that loads the extension (whose pre_run_cell has passed): a call in
        # that same cell keeps the status Busy too. At kernel start no request is running.
        self._before_cell()

    @classmethod
    def start(cls, shell: Any) -> BusyStatus | None:
        """Follow *shell*'s kernel; ``None`` where there is none (terminal IPython, scripts)."""
        kernel = ipk.get_kernel()
        if kernel is None or getattr(shell, "events", None) is None:
            return None
        return cls(shell, kernel)

    @property
    def republished(self) -> int:
        """How many ``busy`` messages were published again (for tests and diagnostics)."""
        return self._republished

    def _request(self) -> dict[str, Any] | None:
        """The request of the cell running in the caller's context, if a frontend asked for it."""
        parent = self._kernel.get_parent("shell")
        header = parent.get("header", {}) if isinstance(parent, dict) else {}
        # A silent execute triggers no event, and a cell run without a request (the kernel's
        # startup) has no parent to speak for.
        return parent if header.get("msg_type") == "execute_request" and header.get("msg_id") else None

    def _before_cell(self, *args: object) -> None:
        request = self._request()
        if request is not None:
            with self._lock:
                self._cells[request["header"]["msg_id"]] = request

    def _after_cell(self, *args: object) -> None:
        request = self._request()
        if request is not None:
            with self._lock:
                self._cells.pop(request["header"]["msg_id"], None)

    def _on_status(self, status: str, channel: str, header: dict[str, Any]) -> None:
        if status != "idle":
            return
        with self._lock:
            if self._cells.pop(str(header.get("msg_id")), None) is not None:
                return  # a cell's own end (its post_run_cell did not run): nothing more to say for it
            if not self._cells:
                return
            cell = next(reversed(self._cells.values()))  # the latest cell still running
            ipk.publish_status(self._kernel, "busy", cell)
            self._republished += 1

    def close(self) -> None:
        """Unhook from the kernel and the shell. Idempotent."""
        self._unhook()
        with self._lock:
            self._cells.clear()
        for event, callback in (("pre_run_cell", self._before_cell), ("post_run_cell", self._after_cell)):
            with contextlib.suppress(ValueError):  # unregistered already
                self._events.unregister(event, callback)
