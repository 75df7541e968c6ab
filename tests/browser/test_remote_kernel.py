"""JupyterLab in Chromium runs cells on a kernel whose loopback the browser cannot reach.

The harness of the remote-kernel sign-in tests (:mod:`.remote`), checked on its own: the
kernel runs in another network namespace, reaches the one host port it was given, and a
listener it opens on its ``127.0.0.1`` cannot be reached from the host, where the browser
runs, as with JupyterHub or a kernel on another machine.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.netns import NetworkNamespace, require_netns

from .lab import JupyterLab
from .notebook import Notebook
from .remote import KERNEL_NAME, remote_kernel_lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"the host service"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def host_service() -> Iterator[int]:
    """A host HTTP service on 127.0.0.1 (stands for the MCP server): its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, name="host-service")
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def remote(
    tmp_path_factory: pytest.TempPathFactory, host_service: int
) -> Iterator[tuple[JupyterLab, NetworkNamespace]]:
    with remote_kernel_lab(tmp_path_factory.mktemp("jupyterlab"), expose=[host_service]) as both:
        yield both


@pytest.fixture
def jupyterlab(remote: tuple[JupyterLab, NetworkNamespace]) -> JupyterLab:
    """The browser fixtures' JupyterLab: the one with the remote kernelspec."""
    return remote[0]


def test_a_cell_runs_on_the_remote_kernel_whose_listener_the_host_cannot_reach(
    remote: tuple[JupyterLab, NetworkNamespace], host_service: int, page: Any
) -> None:
    lab, namespace = remote
    # A port the kernel will listen on: held (bound, not listening) on the host, so that nothing
    # of the host answers on it and a refusal can only mean the kernel's listener is out of reach.
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    try:
        code = (
            "import os, socket, urllib.request\n"
            f"listener = socket.socket(); listener.bind(('127.0.0.1', {port})); listener.listen()\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()  # it listens, inside\n"
            "print('pid', os.getpid(), 'netns', os.readlink('/proc/self/ns/net'))\n"
            f"print(urllib.request.urlopen('http://127.0.0.1:{host_service}/', timeout=10).read().decode())\n"
        )
        path = lab.create_notebook("remote.ipynb", [code], kernel=KERNEL_NAME)
        notebook = Notebook(page, lab, path)
        notebook.open()
        notebook.run_and_wait(0)
        text = notebook.output_text(0)
        assert "the host service" in text, text
        words = text.split()
        kernel_pid, kernel_netns = int(words[words.index("pid") + 1]), words[words.index("netns") + 1]
        assert kernel_netns != os.readlink("/proc/self/ns/net")
        assert kernel_pid in namespace.pids()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        held.close()


def test_the_namespace_is_gone_after_a_failure() -> None:
    require_netns()
    namespace = NetworkNamespace([1])
    with pytest.raises(RuntimeError, match="boom"), namespace:
        assert namespace.name in _namespaces()
        raise RuntimeError("boom")
    assert namespace.name not in _namespaces()


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]
