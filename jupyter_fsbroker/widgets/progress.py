"""Transfer progress: one bar per file read or written in chunks.

:class:`TransferProgress` listens to :meth:`Broker.on_transfer
<jupyter_fsbroker.core.broker.Broker.on_transfer>`. A file moved in one request
(the common small read) shows nothing; a file moved in several chunks gets a row
with a bar (bytes of total, rate) that is marked done on its last chunk. Rows of
connections that closed are removed; finished rows beyond ``keep_finished`` and
rows idle for ``stale_after`` seconds are dropped as new transfers arrive.

Threading: transfers are reported on the broker's request threads, in the middle
of a read. Given a :class:`~.view_thread.ViewThread` (as the kernel's views are),
the progress tests each event there (:meth:`TransferProgress.follows`: a file moved
in one request is declined at once) and changes its widgets on the views' thread
only, closing included. Without one, it updates on the reporting thread. The state
is guarded by a lock either way, so updates from concurrent chunks never interleave.
No thread is started.
"""

from __future__ import annotations

import html
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets  # type: ignore[import-untyped,unused-ignore]

from ..console.format import format_age, format_bytes, printable
from ..core.broker import Broker
from ..core.transfers import Transfer
from .closing import close_parts, close_tree
from .text_fallback import WholeText

if TYPE_CHECKING:
    from .view_thread import ViewThread

__all__ = ["TransferProgress"]

_Key = tuple[str, str, str]  # connection id, path, direction


@dataclass
class _Row:
    key: _Key
    box: Any
    label: Any
    bar: Any
    info: Any
    started: float
    start_done: int
    done: int = 0
    total: int | None = None
    updated: float = 0.0  # monotonic time of the last widget update
    seen: float = 0.0  # monotonic time of the last transfer event
    finished: bool = False

    def close(self) -> None:
        close_tree(self.box)


def _rate(done: int, start_done: int, started: float, now: float) -> float | None:
    """Bytes per second since the first chunk seen, or ``None`` before there is a span to measure."""
    elapsed = now - started
    if elapsed <= 0 or done <= start_done:
        return None
    return (done - start_done) / elapsed


class TransferProgress(WholeText, widgets.VBox):  # type: ignore[misc]
    """Progress bars of chunked reads and writes (DOM class ``fsbroker-progress``).

    Parameters
    ----------
    broker
        The broker whose transfers to show.
    connection_id
        Show only this connection's transfers (e.g. the one a cell is calling);
        ``None``: every connection's.
    keep_finished
        How many finished transfers stay visible (marked done).
    stale_after
        Seconds without a chunk after which an unfinished transfer is dropped
        (a reader that stopped half-way).
    min_interval
        Seconds between two updates of one bar (the last chunk always shows).
    views
        The thread that runs every change of the widgets (see the module
        docstring); ``None``: the thread that reports the transfer.

    Attributes
    ----------
    rows_box
        The rows, oldest first.
    """

    def __init__(
        self,
        broker: Broker,
        *,
        connection_id: str | None = None,
        keep_finished: int = 3,
        stale_after: float = 300.0,
        min_interval: float = 0.05,
        views: ViewThread | None = None,
    ) -> None:
        super().__init__()
        self.broker = broker
        self._connection_id = connection_id
        self._keep_finished = max(0, keep_finished)
        self._stale_after = stale_after
        self._min_interval = max(0.0, min_interval)
        self._lock = threading.RLock()
        self._rows: dict[_Key, _Row] = {}
        self._finished_order: list[_Key] = []
        self._closed = False
        self.rows_box = widgets.VBox()
        self.children = (self.rows_box,)
        self.add_class("fsbroker-progress")
        self._views = views
        if views is None:
            self._unsubscribe = [
                broker.on_transfer(self._on_transfer),
                broker.on_connections(self._on_connections),
            ]
        else:
            self._unsubscribe = [
                broker.on_transfer(views.posting(self._on_transfer, when=self.follows)),
                broker.on_connections(lambda: views.post(self._on_connections)),
            ]

    # -- events --------------------------------------------------------------------------------

    def follows(self, transfer: Transfer) -> bool:
        """Whether *transfer* changes what is shown: a quick test that changes nothing (any thread).

        A file moved in one request, the common small read, is not followed.
        """
        if self._closed or self._connection_id not in (None, transfer.connection_id):
            return False
        key: _Key = (transfer.connection_id, transfer.path, transfer.direction)
        return not transfer.finished or key in self._rows

    def _on_transfer(self, transfer: Transfer) -> None:
        if not self.follows(transfer):
            return
        key: _Key = (transfer.connection_id, transfer.path, transfer.direction)
        now = time.monotonic()
        with self._lock:
            if self._closed:
                return
            row = self._rows.get(key)
            if row is not None and row.finished:
                if transfer.finished:
                    return  # the same file again, in one request: keep what is shown
                self._drop(key)  # the same file again, in chunks: follow it afresh
                row = None
            if row is None:
                if transfer.finished:
                    return  # moved in one request: nothing to follow
                row = self._add(key, transfer)
            # Chunks may be requested in parallel and reported out of order: keep the furthest.
            row.done = max(row.done, transfer.done)
            row.total = transfer.total
            row.seen = now
            row.finished = transfer.finished
            if transfer.finished:
                self._finished_order.append(key)
            if transfer.finished or now - row.updated >= self._min_interval:
                row.updated = now
                self._show(row, transfer.time)
            self._prune(now)

    def _on_connections(self) -> None:
        open_ids = {conn.id for conn in self.broker.connections()}
        with self._lock:
            if self._closed:
                return
            for key, row in list(self._rows.items()):
                if key[0] not in open_ids and not row.finished:
                    self._drop(key)

    # -- rows (under the lock) -----------------------------------------------------------------

    def _add(self, key: _Key, transfer: Transfer) -> _Row:
        arrow = "↓" if transfer.direction == "read" else "↑"
        label = widgets.HTML(
            f"{arrow} <code>{html.escape(printable(transfer.path))}</code> "
            f"<i>({html.escape(printable(transfer.server))})</i>",
            layout=widgets.Layout(min_width="16em"),
        )
        bar = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, bar_style="info")
        info = widgets.HTML()
        box = widgets.HBox([label, bar, info], layout=widgets.Layout(align_items="center"))
        box.add_class("fsbroker-transfer")
        # The first event reports the end of the first chunk: its start time is unknown, so
        # the rate is measured from here on (and shown from the second chunk).
        row = _Row(key, box, label, bar, info, started=transfer.time, start_done=transfer.done)
        self._rows[key] = row
        self.rows_box.children = (*self.rows_box.children, box)
        return row

    def _show(self, row: _Row, at: float) -> None:
        verb = "read" if row.key[2] == "read" else "written"
        rate = _rate(row.done, row.start_done, row.started, at)
        rate_text = "" if rate is None else f" · {rate / 1e6:.1f} MB/s"
        if row.total:
            row.bar.value = min(1.0, row.done / row.total)
            row.bar.layout.visibility = "visible"
        elif not row.finished:
            row.bar.layout.visibility = "hidden"  # a write's size is unknown until its last chunk
        if row.finished:
            row.bar.value = 1.0
            row.bar.layout.visibility = "visible"
            row.bar.bar_style = "success"
            took = max(0.0, at - row.started)
            row.info.value = (
                f"done: {format_bytes(row.done)} {verb}"
                + (f" in {format_age(took)}" if took >= 1 else "")
                + rate_text
            )
        elif row.total:
            row.info.value = f"{format_bytes(row.done)} of {format_bytes(row.total)} {verb}{rate_text}"
        else:
            row.info.value = f"{format_bytes(row.done)} {verb} so far{rate_text}"

    def _drop(self, key: _Key) -> None:
        row = self._rows.pop(key, None)
        if key in self._finished_order:
            self._finished_order.remove(key)
        if row is None:
            return
        self.rows_box.children = tuple(child for child in self.rows_box.children if child is not row.box)
        row.close()

    def _prune(self, now: float) -> None:
        while len(self._finished_order) > self._keep_finished:
            self._drop(self._finished_order[0])
        for key, row in list(self._rows.items()):
            if not row.finished and now - row.seen > self._stale_after:
                self._drop(key)

    # -- queries and lifetime ---------------------------------------------------------------

    def __repr__(self) -> str:
        # What a view without widgets shows (GitHub, nbconvert), at the moment it is shown.
        return "<file transfer progress (a live widget)>"

    def transfers(self) -> list[dict[str, Any]]:
        """What is shown, oldest first.

        Returns
        -------
        list of dict
            ``connection_id``, ``path``, ``direction``, ``done``, ``total``,
            ``finished``, ``fraction`` (of the bar) and ``text`` of each row.
        """
        with self._lock:
            by_box = {id(row.box): row for row in self._rows.values()}
            return [
                {
                    "connection_id": row.key[0],
                    "path": row.key[1],
                    "direction": row.key[2],
                    "done": row.done,
                    "total": row.total,
                    "finished": row.finished,
                    "fraction": float(row.bar.value),
                    "text": str(row.info.value),
                }
                for row in (by_box[id(child)] for child in self.rows_box.children if id(child) in by_box)
            ]

    def clear_finished(self) -> None:
        """Remove the finished rows."""
        with self._lock:
            for key in list(self._finished_order):
                self._drop(key)

    def close(self) -> None:
        """Stop listening and close the widgets (on the views' thread, when there is one). Idempotent."""
        views = self._views
        if views is not None and not views.is_current() and views.post(self._close_now):
            return
        self._close_now()

    def _close_now(self) -> None:
        with self._lock:
            already = self._closed
            self._closed = True
            unsubscribe, self._unsubscribe = self._unsubscribe, []
        for stop in unsubscribe:
            stop()
        if not already:
            with self._lock:
                for row in self._rows.values():
                    row.close()
                self._rows.clear()
                self._finished_order.clear()
                self.rows_box.children = ()
                close_parts(self)
        super().close()
