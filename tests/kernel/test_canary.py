"""CANARY: the ipykernel behaviour that answering consent while a cell blocks relies on,
and the status messages the kernel's Busy while a cell runs follows (``kernel/busy_status.py``).

If one of these fails after upgrading ipykernel, consent prompts may stop
answering while a synchronous cell blocks in JupyterLab. Read
``jupyter_fsbroker/kernel/ipykernel_compat.py`` and docs/design.md ("Consent while a
cell is blocked"), check the new ipykernel's comm routing
(``ipykernel/kernelbase.py: shell_channel_thread_main``, ``ipykernel/comm/comm.py``),
and adapt ``ipykernel_compat`` before anything else.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .harness import Kernel

INTERNALS = """
import contextvars
from ipykernel.comm.comm import BaseComm
from ipykernel.kernelbase import Kernel
from jupyter_fsbroker.kernel import ipykernel_compat as ipk
k = Kernel.instance()
missing = []
if not callable(getattr(BaseComm, ipk.ROUTING_HOOK, None)):
    missing.append(f"BaseComm.{ipk.ROUTING_HOOK} (the per-comm routing hook that free_routing overrides)")
for name in ("_shell_parent", "_shell_parent_ident"):
    if not isinstance(getattr(k, name, None), contextvars.ContextVar):
        missing.append(f"Kernel.{name} (the ContextVar that detach() empties)")
if not ipk.supports_subshells(k):
    missing.append("kernel subshells (Kernel._supports_kernel_subshells and shell_channel_thread)")
elif not callable(getattr(k.shell_channel_thread.manager, "list_subshell", None)):
    missing.append("shell_channel_thread.manager.list_subshell (has_subshells)")
for name in ("_parent_ident", "stdin_socket", "session", "_allow_stdin"):
    if not hasattr(k, name):
        missing.append(f"Kernel.{name} (ask_stdin)")
import inspect
status = getattr(Kernel, ipk.STATUS_HOOK, None)
expected = ["self", "status", "channel", "parent"]
if not callable(status) or list(inspect.signature(status).parameters) != expected:
    missing.append(f"Kernel.{ipk.STATUS_HOOK}(status, channel, parent) (on_status, the busy status)")
for name in ("iopub_socket", "_topic", "get_parent"):
    if not hasattr(k, name):
        missing.append(f"Kernel.{name} (publish_status)")
print(missing)
"""

ROUTING = """
import threading, ipywidgets as w
from jupyter_fsbroker.kernel import ipykernel_compat as ipk
pinned_clicked, free_clicked = threading.Event(), threading.Event()
pinned = w.Button(description="made by a cell")
pinned.on_click(lambda _: pinned_clicked.set())
holder = {}
def make():
    button = ipk.run_detached(w.Button, description="made detached")
    ipk.free_routing(button)
    button.on_click(lambda _: free_clicked.set())
    holder["free"] = button
maker = threading.Thread(target=make)
maker.start()
maker.join()
free = holder["free"]
ids = (pinned.model_id, free.model_id)
"""

BLOCKED = """
print("blocked", flush=True)
free_handled = free_clicked.wait(60)
pinned_handled_meanwhile = pinned_clicked.is_set()
print(free_handled, pinned_handled_meanwhile)
"""


def test_canary_ipykernel_internals_exist(start_kernel: Callable[..., Kernel]) -> None:
    kernel = start_kernel()
    missing = ast.literal_eval(kernel.run(INTERNALS).stdout.strip())
    assert missing == [], (
        "CANARY: ipykernel changed the internals jupyter_fsbroker relies on for consent while a cell "
        f"blocks: {missing}. Adapt jupyter_fsbroker/kernel/ipykernel_compat.py."
    )


def test_canary_subshell_click_reaches_a_detached_widget_while_the_main_shell_blocks(
    start_kernel: Callable[..., Kernel],
) -> None:
    kernel = start_kernel()
    kernel.run(ROUTING)
    pinned_id, free_id = kernel.value("ids")
    subshell = kernel.create_subshell()
    cell = kernel.submit(BLOCKED)
    kernel.wait_for(lambda: "blocked" in cell.stdout, 30, "the cell to block")
    # FIFO on one subshell: were the cell-made widget routed by the frontend's choice, its
    # click (sent first) would be handled before the detached widget's click.
    kernel.click(pinned_id, subshell_id=subshell)
    kernel.click(free_id, subshell_id=subshell)
    kernel.wait(cell, 120).check()
    free_handled, pinned_meanwhile = cell.stdout.split()[-2:]
    assert free_handled == "True", (
        "CANARY: a click sent on a kernel subshell no longer reaches a widget published from a "
        "detached context (ipykernel_compat.run_detached + free_routing) while the main shell is "
        "blocked. Consent prompts cannot be answered during a synchronous call_tool in JupyterLab: "
        "check ipykernel's comm routing (Kernel.shell_channel_thread_main, BaseComm."
        "_reply_subshell_for) and adapt jupyter_fsbroker/kernel/ipykernel_compat.py."
    )
    assert pinned_meanwhile == "False", (
        "CANARY: ipykernel no longer pins a cell-made widget's comm messages to the main shell "
        "(the reason for ipykernel_compat's workaround). Good news, but the comm routing changed: "
        "review jupyter_fsbroker/kernel/ipykernel_compat.py and docs/design.md, then update this canary."
    )
    # The pinned click was only queued: it is handled once the main shell is free.
    assert kernel.value("pinned_clicked.wait(60)") is True
