"""Real kernels for rows 6, 7 and 10, started and driven the way the kernel tests do it.

The kernel itself is ``tests/kernel/harness.py``'s :class:`Kernel` (ipykernel
via ``jupyter_client``, an isolated home, widgets tracked from IOPub, clicks as
``comm_msg``); this module adds what a benchmark needs on top: a kernel that
imports this checkout, an execute request timed from outside (send → its
``execute_reply`` on the shell channel), and the consent prompt of a call.
Nothing here changes the kernel or the package.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.kernel.harness import Kernel, Widget, isolated_env

__all__ = ["Kernel", "consent_prompt", "kernel_in", "timed_execute"]

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def kernel_in(base: Path, workdir: Path) -> Iterator[Kernel]:
    """A fresh kernel in *workdir* with its home under *base*, importing this checkout; shut down after."""
    env = isolated_env(base)
    path = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
    kernel = Kernel(env, workdir)
    try:
        yield kernel
    finally:
        try:
            kernel.shutdown()
        except Exception:
            kernel.shutdown(now=True)


def timed_execute(kernel: Kernel, code: str, timeout: float = 120.0) -> float:
    """Execute *code*; the seconds from sending the request to receiving its ``execute_reply``.

    Reads the shell channel directly, so nothing else may be waiting for a
    reply meanwhile. Raises if the cell failed.
    """
    kc = kernel.kc
    deadline = time.monotonic() + timeout
    start = time.perf_counter()
    msg_id = kc.execute(code, store_history=False)
    while True:
        reply: dict[str, Any] = kc.get_shell_msg(timeout=max(0.001, deadline - time.monotonic()))
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            break
    seconds = time.perf_counter() - start
    if reply["content"].get("status") != "ok":
        content = reply["content"]
        raise RuntimeError(f"{code!r} failed: {content.get('ename')}: {content.get('evalue')}")
    kernel.pump(0)  # keep IOPub from piling up (and widget states current)
    return seconds


def consent_prompt(kernel: Kernel, timeout: float = 60.0) -> Widget:
    """The first consent prompt once it is displayed in a call's panel, where a user can click it."""

    def displayed() -> Widget | None:
        for panel in kernel.find_widgets("fsbroker-call"):
            for widget in kernel.descendants(panel):
                if "fsbroker-consent" in widget.classes:
                    return widget
        return None

    prompt: Widget = kernel.wait_for(displayed, timeout, "a consent prompt displayed in the calling cell")
    return prompt
