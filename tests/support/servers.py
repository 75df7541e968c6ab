"""The example analysis server over Streamable HTTP, in a subprocess, on a port it binds itself.

The server is started with ``--http 127.0.0.1:0``: uvicorn binds port 0 and
keeps the socket, so no other process can take the port between the choice and
the bind. The port is read from the server's stderr: its own ``listening on
http://HOST:PORT/mcp`` line, or uvicorn's ``Uvicorn running on http://HOST:PORT``.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .env import server_env
from .processes import stop_process

MODULE = "jupyter_fsbroker.examples.analysis_server"
#: The tools the example server offers.
TOOLS = frozenset(
    {
        "atomic_increment",
        "checksum",
        "filter_csv",
        "list_files",
        "lock_file",
        "profile_csv",
        "profile_parquet",
        "query",
        "read_text",
        "unlock_file",
        "watch_changes",
        "write_report",
        "write_text",
    }
)
#: What a server built with the helper answers a client that does not broker files: SEP-1708's
#: words, spelled here as the specification has them (not taken from the package).
SEP_MESSAGE = (
    "Filesystem access is required but the client is not advertising the filesystemBrokering capability"
)
#: Seconds the server gets to listen after it was started.
STARTUP_TIMEOUT = 30.0
#: Lines of the server's stderr kept for failure messages.
KEPT_LINES = 200

_LISTENING = re.compile(r"(?:listening on|Uvicorn running on) (http://[^\s/]+):(\d+)")


class AnalysisServer:
    """``python -m jupyter_fsbroker.examples.analysis_server --http 127.0.0.1:0``.

    Attributes
    ----------
    url
        The ``/mcp`` endpoint, once the server listens.
    stderr
        The last lines the server wrote on stderr (its log).
    """

    def __init__(self, *args: str, env: dict[str, str] | None = None, module: str = MODULE) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-m", module, "--http", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**(os.environ if env is None else env), **server_env()},
        )
        self.stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="analysis-server-stderr", daemon=True)
        self._reader.start()
        try:
            self.url = self._wait_listening()
        except BaseException:
            self.stop()
            raise

    @property
    def log(self) -> str:
        """The last lines of the server's stderr, as one text."""
        return "".join(self.stderr)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            del self.stderr[:-KEPT_LINES]
            self._lines.put(line)
        self._lines.put(None)

    def _wait_listening(self) -> str:
        while True:
            try:
                line = self._lines.get(timeout=STARTUP_TIMEOUT)
            except queue.Empty:
                raise AssertionError(
                    f"the analysis server did not listen within {STARTUP_TIMEOUT:g} s:\n"
                    + "".join(self.stderr)
                ) from None
            if line is None:
                raise AssertionError(f"the analysis server exited:\n{self.log}")
            found = _LISTENING.search(line)
            if found is not None:
                return f"{found[1]}:{found[2]}/mcp"

    def stop(self) -> None:
        """Terminate the server (kill it if it lingers) and wait for it."""
        stop_process(self.process)
        self._reader.join(10)
        if self.process.stderr is not None:
            self.process.stderr.close()


@contextmanager
def analysis_server_http(
    *args: str, env: dict[str, str] | None = None, module: str = MODULE
) -> Iterator[AnalysisServer]:
    """The example analysis server (or *module*, served alike) over Streamable HTTP in the ``with``."""
    server = AnalysisServer(*args, env=env, module=module)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def stateless_analysis_server(keys: Path) -> Iterator[AnalysisServer]:
    """The example server over HTTP with no session (``--stateless``), its continuations sealed with a
    new key in the private file ``state.keys`` of the folder *keys*."""
    key_file = keys / "state.keys"
    key_file.write_text(secrets.token_hex(32) + "\n", encoding="utf-8")
    key_file.chmod(0o600)
    with analysis_server_http("--stateless", "--state-key-file", str(key_file)) as server:
        yield server
