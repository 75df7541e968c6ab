"""A test server over Streamable HTTP in a subprocess, on a listening socket bound here and handed over.

The test binds and listens (:func:`~.ports.listening_socket`) before the server exists, so no
other process can take the port, and the server inherits the socket as a descriptor. Both
sides live here:

* the test's: :class:`HandedOverServer` starts ``SCRIPT --http --fd N`` and waits for its
  ``PORT <n>`` line;
* the server's: :func:`serve_on` prints that line and runs uvicorn on the socket, and
  :func:`run_server` reads the command line that chooses between it and stdio
  (:func:`run_files_server` for a server built with the package's server helper).

Standard library only at module level: the hand-written servers import it too.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
from collections.abc import Callable, Sequence
from typing import Any, Literal

from .ports import LOOPBACK, listening_socket, port_of
from .processes import stop_process

#: Whether uvicorn runs the app's lifespan (startup and shutdown events).
Lifespan = Literal["on", "off"]


def serve_on(app: Any, sock: socket.socket, *, lifespan: Lifespan = "on") -> None:
    """Say ``PORT <n>`` on stdout, then serve the ASGI *app* under uvicorn on the listening *sock*."""
    import uvicorn

    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan=lifespan)
    uvicorn.Server(config).run(sockets=[sock])


def serve_on_inherited(app: Any, fd: int, *, lifespan: Lifespan = "on") -> None:
    """:func:`serve_on` the socket inherited as descriptor *fd* (bound and listening: the parent made it)."""
    serve_on(app, socket.socket(fileno=fd), lifespan=lifespan)


def run_server(stdio: Callable[[], None], http: Callable[[int], None]) -> None:
    """A test server's command line: ``--http --fd N`` runs ``http(N)``, no option ``stdio()``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--fd", type=int)
    args = parser.parse_args()
    if args.http:
        http(args.fd)
    else:
        stdio()


def run_files_server(build: Callable[[], Any]) -> None:
    """:func:`run_server` for a test server built with the server helper: *build()* makes the ``MCPServer``.

    Over stdio it runs under :func:`~jupyter_fsbroker.serverkit.run_stdio`; over HTTP its
    Streamable HTTP app is served on the inherited socket.
    """
    from jupyter_fsbroker.serverkit import run_stdio

    def http(fd: int) -> None:
        serve_on_inherited(build().streamable_http_app(host=LOOPBACK), fd)

    run_server(lambda: run_stdio(build()), http)


class HandedOverServer:
    """``[*command, "--http", "--fd", N, *args]`` serving on a socket bound here, until :meth:`stop`.

    Parameters
    ----------
    command
        The server, e.g. ``[sys.executable, SCRIPT]``.
    args
        More options after ``--fd N``.
    listener
        A listening socket to hand over (the one of a server killed with ``kill(keep_port=True)``,
        for a successor on the same port); default: a new one.
    env
        The server's environment (default: this process's).
    """

    def __init__(
        self,
        command: Sequence[str],
        *args: str,
        listener: socket.socket | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.listener = listener if listener is not None else listening_socket()
        fd = self.listener.fileno()
        self.process = subprocess.Popen(
            [*command, "--http", "--fd", str(fd), *args],
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=(fd,),
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the HTTP test server did not start: {line!r}")
        self.port = port_of(self.listener)
        self.url = f"http://{LOOPBACK}:{self.port}/mcp"

    def __enter__(self) -> HandedOverServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kill(self, *, keep_port: bool = False) -> None:
        """Make the server go away at once, without any goodbye.

        Its port then refuses connections, unless *keep_port*: then it stays
        bound and listening here (connections wait) for a successor.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        if not keep_port:
            self.listener.close()

    def stop(self) -> None:
        """Terminate the server (kill it if it lingers), and close its pipe and the socket."""
        stop_process(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.listener.close()
