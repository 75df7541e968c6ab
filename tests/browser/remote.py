"""JupyterLab whose notebooks run on a "remote" kernel: one in its own network namespace.

:func:`remote_kernel_lab` starts a :class:`~tests.support.netns.NetworkNamespace` exposing the
given host ports, writes its kernelspec into the server's data folder and starts JupyterLab
with the ZMQ ``ipc`` transport (a TCP kernel inside the namespace could not be reached by the
server). A notebook made with ``create_notebook(..., kernel=KERNEL_NAME)`` runs there: it
reaches the exposed ports, while what it listens on is out of the browser's reach.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tests.support.netns import KERNEL_NAME, NetworkNamespace, require_netns

from .lab import JupyterLab

__all__ = ["KERNEL_NAME", "remote_kernel_lab"]


@contextlib.contextmanager
def remote_kernel_lab(
    base: Path, expose: Iterable[int] = (), **options: Any
) -> Iterator[tuple[JupyterLab, NetworkNamespace]]:
    """A started JupyterLab (in *base*) and the namespace its ``KERNEL_NAME`` kernels run in."""
    require_netns()
    with NetworkNamespace(expose) as namespace:
        options.setdefault("server_args", ())
        options["server_args"] = ("--KernelManager.transport=ipc", *options["server_args"])
        lab = JupyterLab(base, **options)
        namespace.kernelspec(Path(lab.env["JUPYTER_DATA_DIR"]))
        # The ipc sockets are named after the connection files in the runtime folder: a unix
        # socket's path must stay under 108 bytes, which a pytest temporary folder is not.
        runtime = tempfile.mkdtemp(prefix="fsb-rt-", dir="/tmp")
        lab.env["JUPYTER_RUNTIME_DIR"] = runtime
        try:
            lab.start()
            try:
                yield lab, namespace
            finally:
                left = lab.stop()
        finally:
            shutil.rmtree(runtime, ignore_errors=True)
        if left:
            listed = "\n".join(f"  {p.pid}: {p.command}" for p in left)
            raise AssertionError(f"processes outlived JupyterLab (killed now):\n{listed}\n{lab.log_tail()}")
