"""Everything the extension relies on that ipykernel does not promise: in one place.

Checked against ipykernel 7.4 (the canary test in ``tests/kernel`` fails loudly
when upstream behaviour changes):

* **Parent headers.** Whatever a thread publishes on IOPub carries the parent
  header of the kernel's *shell context*; a thread with no context of its own
  falls back to the last request the kernel handled. :func:`detach` gives the
  current context an empty parent header; :func:`run_detached` runs a function
  in a fresh context with one.
* **Comm routing.** ipykernel 7.4 routes a ``comm_msg`` to the subshell that
  last *published* on that comm (``BaseComm._reply_subshell_for``), which pins
  widgets made by a cell to the main shell: their clicks wait until the cell
  ends. Widgets published from a detached context keep the frontend's choice
  (JupyterLab sends comm messages on a subshell), and :func:`free_routing`
  overrides the hook on a widget tree so later publishes from a cell cannot pin
  it again.
* **Subshells.** :func:`has_subshells` tells whether a frontend created any
  subshell (JupyterLab does so for the first widget it sees); without one,
  clicks cannot arrive while a synchronous cell blocks.
* **Comm targets.** :func:`register_comm_target` and
  :func:`unregister_comm_target` use the kernel's own comm manager (the panel
  protocol's target); :func:`free_comm` frees one comm's routing, and
  :func:`on_subshell` tells whether the running handler was given a subshell.
* **Status.** ipykernel publishes every ``status`` (``busy`` / ``idle``) through
  ``Kernel._publish_status(status, channel, parent=None)``, with the parent header
  of the request it handled; :func:`on_status` follows those publishes on one
  kernel instance (the class is left alone) and :func:`publish_status` publishes one.
* **stdin.** :func:`ask_stdin` sends an ``input_request`` for the running cell
  and waits for the reply *or* for a future to be done, so a consent answered
  elsewhere or timed out never leaves the cell waiting for a line of text.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = [
    "ROUTING_HOOK",
    "STATUS_HOOK",
    "ask_stdin",
    "detach",
    "free_comm",
    "free_routing",
    "get_kernel",
    "has_subshells",
    "on_status",
    "on_subshell",
    "publish_status",
    "register_comm_target",
    "run_detached",
    "stdin_allowed",
    "supports_subshells",
    "unregister_comm_target",
    "walk_widgets",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The name of ipykernel 7.4's per-comm routing hook that :func:`free_routing` overrides.
ROUTING_HOOK = "_reply_subshell_for"

# Seconds between checks of the stdin socket (and of the future) in ask_stdin.
_STDIN_POLL_MS = 100


def get_kernel() -> Any | None:
    """The running ipykernel kernel, or ``None`` outside one (terminal IPython, scripts)."""
    if "ipykernel" not in sys.modules:
        return None
    try:
        from ipykernel.kernelbase import Kernel
    except ImportError:  # pragma: no cover - ipykernel is a dependency
        return None
    if not Kernel.initialized():
        return None
    return Kernel.instance()


def detach(kernel: Any | None = None) -> None:
    """Give the *current* context an empty shell parent header.

    IOPub messages published from this context (widget ``comm_open`` and
    updates) then belong to no request, so they pin no comm to a shell.
    """
    kernel = kernel if kernel is not None else get_kernel()
    if kernel is None:
        return
    parent = getattr(kernel, "_shell_parent", None)
    ident = getattr(kernel, "_shell_parent_ident", None)
    if isinstance(parent, contextvars.ContextVar):
        parent.set({})
    if isinstance(ident, contextvars.ContextVar):
        ident.set(b"")


def run_detached(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call *fn* in a fresh context whose shell parent header is empty (see :func:`detach`)."""
    kernel = get_kernel()
    if kernel is None:
        return fn(*args, **kwargs)

    def call() -> T:
        detach(kernel)
        return fn(*args, **kwargs)

    return contextvars.Context().run(call)


def walk_widgets(root: Any) -> Iterator[Any]:
    """*root* and every widget below it (through ``children`` and widget-valued traits), once each."""
    try:
        from ipywidgets import Widget  # type: ignore[import-untyped,unused-ignore]
    except ImportError:  # pragma: no cover - ipywidgets is a dependency
        return
    seen: set[int] = set()
    stack = [root]
    while stack:
        widget = stack.pop()
        if not isinstance(widget, Widget) or id(widget) in seen:
            continue
        seen.add(id(widget))
        yield widget
        for name in widget.keys:
            if name.startswith("_"):
                continue
            try:
                value = getattr(widget, name)
            except Exception:  # noqa: S112 - a trait that cannot be read has no widgets to walk
                continue
            if isinstance(value, Widget):
                stack.append(value)
            elif isinstance(value, list | tuple):
                stack.extend(v for v in value if isinstance(v, Widget))


def _frontend_choice(data: object, default: str | None) -> str | None:
    """The routing hook's replacement: honour the subshell the frontend sent the message on."""
    del data
    return default


def free_comm(comm: Any) -> bool:
    """Let the frontend choose the subshell for messages to *comm*; whether it changed anything.

    Harmless where the hook does not exist.
    """
    if comm is None or not hasattr(comm, ROUTING_HOOK) or getattr(comm, ROUTING_HOOK) is _frontend_choice:
        return False
    try:
        setattr(comm, ROUTING_HOOK, _frontend_choice)
    except (AttributeError, TypeError):  # pragma: no cover - a comm that refuses attributes
        return False
    return True


def free_routing(root: Any) -> int:
    """Let the frontend choose the subshell for comm messages to *root* and its descendants.

    Returns the number of comms changed. Harmless where the hook does not exist.
    """
    return sum(free_comm(getattr(widget, "comm", None)) for widget in walk_widgets(root))


def register_comm_target(kernel: Any | None, name: str, callback: Callable[[Any, Any], None]) -> bool:
    """Register comm target *name* with *kernel*'s comm manager; whether there was one to register with.

    *callback(comm, msg)* runs for every ``comm_open`` to that target, on the
    thread of the shell (or subshell) the frontend sent it on.
    """
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return False
    manager.register_target(name, callback)
    return True


def unregister_comm_target(kernel: Any | None, name: str, callback: Callable[[Any, Any], None]) -> None:
    """Undo :func:`register_comm_target` (if *callback* is still the target's)."""
    manager = getattr(kernel, "comm_manager", None)
    targets = getattr(manager, "targets", None)
    if manager is not None and isinstance(targets, dict) and targets.get(name) is callback:
        manager.unregister_target(name, callback)


def on_subshell() -> bool:
    """Whether the running handler runs on a kernel subshell (ipykernel 7 runs them on their own threads).

    The main shell runs on the main thread: a handler there waits for whatever cell is running.
    """
    return threading.current_thread() is not threading.main_thread()


def supports_subshells(kernel: Any | None) -> bool:
    """Whether *kernel* can run comm handlers on subshells (ipykernel ≥ 7 with its shell channel thread)."""
    if kernel is None:
        return False
    return bool(getattr(kernel, "_supports_kernel_subshells", False)) and (
        getattr(kernel, "shell_channel_thread", None) is not None
    )


def has_subshells(kernel: Any | None) -> bool:
    """Whether a frontend created a subshell, i.e. clicks can arrive while the main shell is busy."""
    if kernel is None or not supports_subshells(kernel):
        return False
    try:
        return bool(kernel.shell_channel_thread.manager.list_subshell())
    except Exception:
        log.debug("cannot list the kernel's subshells", exc_info=True)
        return False


#: The kernel method every status message goes through (see :func:`on_status`).
STATUS_HOOK = "_publish_status"


def on_status(kernel: Any | None, listener: Callable[[str, str, dict[str, Any]], None]) -> Callable[[], None]:
    """Call *listener(status, channel, parent_header)* after each status *kernel* publishes.

    The listener runs on the publishing thread (the main shell, a subshell, the
    control thread), in the handler's context, and must not block. Only this
    kernel instance is hooked. Returns a function that removes the hook (a no-op
    where there was nothing to hook, or once a later hook wraps this one: the
    listener then stops being called, and the method stays as it is).
    """
    original = getattr(kernel, STATUS_HOOK, None)
    if kernel is None or not callable(original):
        return lambda: None
    active = [True]

    def publish(status: str, channel: str, parent: Any = None) -> None:
        original(status, channel, parent)
        if not active[0]:
            return
        try:
            header = parent or kernel.get_parent(channel)
            listener(status, channel, header.get("header", {}) if isinstance(header, dict) else {})
        except Exception:  # a listener must never break the kernel's own messages
            log.debug("a status listener failed", exc_info=True)

    setattr(kernel, STATUS_HOOK, publish)

    def remove() -> None:
        active[0] = False
        if kernel.__dict__.get(STATUS_HOOK) is publish:
            delattr(kernel, STATUS_HOOK)  # the class's method again

    return remove


def publish_status(kernel: Any, status: str, parent: dict[str, Any]) -> None:
    """Publish ``status`` *status* on IOPub as the reply to the request *parent* (a whole message)."""
    session = getattr(kernel, "session", None)
    if session is None:
        return
    content = {"execution_state": status}
    session.send(kernel.iopub_socket, "status", content, parent=parent, ident=kernel._topic("status"))


def stdin_allowed(kernel: Any | None) -> bool:
    """Whether the running cell may ask for a line on stdin (and can, from this thread)."""
    return (
        kernel is not None
        and threading.current_thread() is threading.main_thread()
        and bool(getattr(kernel, "_allow_stdin", False))
        and getattr(kernel, "stdin_socket", None) is not None
        and getattr(kernel, "session", None) is not None
    )


def ask_stdin(kernel: Any, prompt: str, until: Future[Any]) -> str | None:
    """Ask the running cell's frontend for a line of text on the stdin channel.

    Returns the line, or ``None`` as soon as *until* is done without an answer
    (the frontend's text box then stays unanswered; a late reply is discarded
    by the next input request). Interruptible: ``KeyboardInterrupt`` passes
    through. Must run on the cell's thread (see :func:`stdin_allowed`).
    """
    import zmq

    session = kernel.session
    socket = kernel.stdin_socket
    parent = kernel.get_parent("shell")
    try:
        ident = kernel._parent_ident["shell"]
    except (AttributeError, KeyError, TypeError):
        ident = kernel._get_shell_context_var(kernel._shell_parent_ident)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    while socket.poll(0):  # stale replies to earlier requests
        session.recv(socket, mode=zmq.NOBLOCK)
    session.send(socket, "input_request", {"prompt": prompt, "password": False}, parent, ident=ident)
    while not until.done():
        if not socket.poll(_STDIN_POLL_MS):
            continue
        _, reply = session.recv(socket, mode=zmq.NOBLOCK)
        if reply is None:
            continue
        try:
            value = reply["content"]["value"]
        except (KeyError, TypeError):
            value = ""
        return value if isinstance(value, str) else ""
    return None
