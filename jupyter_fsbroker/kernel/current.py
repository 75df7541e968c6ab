"""The broker of this kernel: one per process, created on first use, closed when the process exits.

The only holder of "the current :class:`~.notebook.NotebookBroker`". Everything
that needs it goes through here: :func:`get_broker` (the Python API), the
extension (which makes the broker it creates current, and clears it when
unloaded) and the ``%fsbroker`` magics (which call :func:`get_broker`).

In IPython or a kernel, :func:`get_broker` loads the extension through the
shell's extension manager, by name; it never imports the extension module, nor
IPython, itself: a plain Python process gets a broker without loading either.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from typing import Any

from .notebook import NotebookBroker

__all__ = ["EXTENSION", "clear_current", "current", "get_broker", "set_current"]

log = logging.getLogger(__name__)

#: The extension's name for ``%load_ext``.
EXTENSION = "jupyter_fsbroker"

_lock = threading.Lock()
_current: NotebookBroker | None = None


def current() -> NotebookBroker | None:
    """The current broker, open or closed, or ``None`` when there is none."""
    return _current


def set_current(broker: NotebookBroker) -> None:
    """Make *broker* this process's broker; it is closed when the process exits (if still current)."""
    with _lock:
        _set_locked(broker)


def _set_locked(broker: NotebookBroker) -> None:
    global _current
    _current = broker
    # Registered again at every change, so that it runs before whatever was registered since
    # (hooks run last-in first-out): the connections close while their libraries still work.
    atexit.unregister(_close_at_exit)
    atexit.register(_close_at_exit)


def clear_current(broker: NotebookBroker) -> None:
    """Forget *broker* if it is the current one (it was closed); otherwise do nothing."""
    global _current
    with _lock:
        if _current is broker:
            _current = None
            atexit.unregister(_close_at_exit)


def _shell() -> Any | None:
    if "IPython" not in sys.modules:
        return None
    from IPython.core.getipython import get_ipython

    return get_ipython()  # type: ignore[no-untyped-call,unused-ignore]


def get_broker() -> NotebookBroker:
    """The broker of this kernel, started (as ``%load_ext jupyter_fsbroker`` would) if needed.

    In IPython or a Jupyter kernel this loads the extension, so ``%fsbroker``
    and the ``FSBroker`` settings work too; in a plain Python process it starts
    a broker that closes when the process exits.

    Returns
    -------
    NotebookBroker
        The same object on every call until the extension is unloaded (or the
        broker closed).
    """
    broker = _current
    if broker is not None and not broker.closed:
        return broker
    shell = _shell()
    manager = getattr(shell, "extension_manager", None)
    if manager is not None:
        if EXTENSION in manager.loaded:  # loaded once, then its broker was closed by hand
            manager.unload_extension(EXTENSION)
        manager.load_extension(EXTENSION)
        broker = _current
        if broker is None or broker.closed:
            raise RuntimeError(f"loading the {EXTENSION} extension started no broker")
        return broker
    with _lock:
        broker = _current
        if broker is None or broker.closed:
            broker = NotebookBroker()
            _set_locked(broker)
        return broker


def _close_at_exit() -> None:
    broker = _current
    if broker is not None:
        try:
            broker.close(at_exit=True)
        except Exception:
            log.exception("closing the file broker at exit failed")
