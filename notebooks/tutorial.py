"""What the tutorial notebooks need and a real project would not.

A scratch folder beside the notebooks (``_work/``, removed at the end of each
notebook), the example analysis server started over Streamable HTTP on
127.0.0.1 (a stand-in for a server that runs elsewhere), tables that read well
on GitHub too, and waits on the broker's live audit log and consent queue so
that a notebook can run unattended.

Nothing here is part of ``jupyter_fsbroker``, and nothing here changes what a
server may do: every decision stays with the broker.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import html
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jupyter_fsbroker.kernel.servers import warm_up

__all__ = [
    "WORK",
    "ChangeFeed",
    "ExampleServer",
    "Table",
    "audit_record",
    "clean_up",
    "consent_request",
    "describe_request",
    "scratch",
]

#: Where the notebooks make their files (``.gitignore`` keeps it out of the repository).
WORK = Path("_work")

#: The example analysis server's module.
SERVER_MODULE = "jupyter_fsbroker.examples.analysis_server"

_LISTENING = re.compile(r"listening on (http://\S+)")


# -- folders ---------------------------------------------------------------------------------------


def scratch(name: str) -> Path:
    """A fresh, empty folder ``_work/NAME`` beside the notebook (what an earlier run left is removed)."""
    folder = WORK / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def clean_up(folder: Path) -> None:
    """Remove *folder*, and ``_work/`` once it is empty."""
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):  # another notebook's folder is still there
        WORK.rmdir()


# -- the "remote" server ---------------------------------------------------------------------------


class ExampleServer:
    """The example analysis server over Streamable HTTP on ``127.0.0.1`` and a free port.

    It stands in for a server that runs somewhere else: the notebook reaches it
    by URL only. The server binds port 0 itself and names the port it got on
    stderr; :attr:`url` is read from there. :meth:`stop` (or the end of the
    kernel) ends it.

    Parameters
    ----------
    args
        Extra command-line arguments for the server.
    """

    def __init__(self, *args: str) -> None:
        self.log: collections.deque[str] = collections.deque(maxlen=200)
        self._process = subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "--http", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        atexit.register(self.stop)
        self.url = self._wait_listening()
        self._drain = threading.Thread(target=self._read_rest, name="example-server-log", daemon=True)
        self._drain.start()

    def _wait_listening(self) -> str:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self.log.append(line)
            found = _LISTENING.search(line)
            if found is not None:
                return found[1]
        self.stop()
        raise RuntimeError("the example server ended before it listened:\n" + "".join(self.log))

    def _read_rest(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self.log.append(line)

    @property
    def running(self) -> bool:
        """Whether the server process is still running."""
        return self._process.poll() is None

    def stop(self) -> None:
        """End the server and wait for it. Idempotent."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        drain = getattr(self, "_drain", None)
        if drain is not None and drain is not threading.current_thread():
            drain.join(10)
        if self._process.stderr is not None:
            self._process.stderr.close()
        atexit.unregister(self.stop)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<example analysis server, {state}>"


# -- waiting on the broker -------------------------------------------------------------------------


async def consent_request(broker: Any) -> Any:
    """The next consent request waiting for an answer, once its prompt is on screen.

    A person would click Approve or Deny in the prompt; an unattended run
    answers it with ``broker.answer_consent(request.id, ...)``, the same entry
    point a sidebar or any other view uses.
    """
    while True:
        waiting = broker.pending_consents()
        if waiting:
            break
        await asyncio.sleep(0.02)
    # The kernel shows its first prompt once the imports it starts in the background at %load_ext
    # are done: wait for them (the import lock makes this wait, not import twice), and then for as
    # long as a person takes to see the prompt.
    await asyncio.to_thread(warm_up)
    await asyncio.sleep(0.3)
    return waiting[0]


def describe_request(request: Any) -> str:
    """A consent request in words: who asks, why, and what for each path."""
    lines = [f"{request.server} asks: {request.message!r}"]
    for item in request.already:
        ops = " + ".join(request.operations_of(item))
        lines.append(f"  {ops} on {item.rel or item.path}: granted already, approved without asking")
    for item in request.items:
        where = item.rel or _shown(item.path)
        if item.approvable:
            lines.append(f"  {' + '.join(request.operations_of(item))} on {where}")
        else:
            lines.append(f"  {where}: cannot be approved ({item.reason})")
    return "\n".join(lines)


def _shown(path: str) -> str:
    """*path*, relative to the notebook's folder when it is inside (no machine-specific prefix)."""
    here = os.getcwd()
    if path == here or path.startswith(here + os.sep):
        return os.path.join(".", os.path.relpath(path, here))
    return path


async def audit_record(broker: Any, match: Callable[[Any], bool]) -> Any:
    """Wait for the first audit record from now on for which *match* is true, and return it.

    The audit log calls its listeners as each request ends, on the broker's
    threads; this hands the record over to the notebook's event loop.
    """
    loop = asyncio.get_running_loop()
    found: asyncio.Future[Any] = loop.create_future()

    def deliver(record: Any) -> None:
        if not found.done():
            found.set_result(record)

    def listen(record: Any) -> None:
        if match(record):
            loop.call_soon_threadsafe(deliver, record)

    unsubscribe = broker.core.audit.subscribe(listen)
    try:
        return await found
    finally:
        unsubscribe()


class ChangeFeed:
    """The broker's change feed, kept in a list: every watch event sent to a server, as sent.

    It is what the dashboard's *Changes* section shows. :meth:`close` stops it.

    Parameters
    ----------
    broker
        The notebook's broker.
    """

    def __init__(self, broker: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self._taken: set[int] = set()
        self._lock = threading.Lock()
        self._unsubscribe = broker.core.on_change(self._add)

    def _add(self, event: Any, connection: Any) -> None:
        with self._lock:
            self.events.append(
                {
                    "server": connection.server,
                    "event": event.event,
                    "path": event.path,
                    "old_path": event.old_path,
                }
            )

    async def wait_for(self, path: str, event: str | None = None) -> dict[str, Any]:
        """Wait until the feed has an event on *path* (of kind *event*) that no earlier wait returned."""
        while True:
            with self._lock:
                for i, seen in enumerate(self.events):
                    if i not in self._taken and seen["path"] == path and event in (None, seen["event"]):
                        self._taken.add(i)
                        return seen
            await asyncio.sleep(0.01)

    def close(self) -> None:
        """Stop following the broker's changes. Idempotent."""
        self._unsubscribe()


# -- tables ----------------------------------------------------------------------------------------


class Table:
    """Rows shown as an HTML table in a notebook and as aligned text elsewhere.

    Parameters
    ----------
    rows
        One mapping per row.
    columns
        The columns to show, in order; default: the keys of the first row.
    """

    def __init__(self, rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
        self.rows = [dict(row) for row in rows]
        self.columns = list(columns) if columns is not None else list(self.rows[0]) if self.rows else []

    @staticmethod
    def _text(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, float):
            return f"{value:,.0f}" if abs(value) >= 1e5 else f"{value:.6g}"
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{value:,}"
        return str(value).replace("\n", "⏎")

    def __repr__(self) -> str:
        cells = [[self._text(row.get(c)) for c in self.columns] for row in self.rows]
        widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)).rstrip()]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(self._text(row.get(c)))}</td>" for c in self.columns)
            + "</tr>"
            for row in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __len__(self) -> int:
        return len(self.rows)
