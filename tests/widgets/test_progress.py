"""Transfer progress: chunked reads and writes get a bar that finishes; single requests show nothing."""

from __future__ import annotations

import base64
from pathlib import Path

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.limits import MiB
from jupyter_fsbroker.widgets.progress import TransferProgress

from .conftest import ALL_OPS


def _conn(broker: Broker, name: str = "analysis") -> Connection:
    broker.allow("data", ops=ALL_OPS)
    return broker.connect(name)


def _big(data: Path) -> int:
    size = 3 * MiB + 10
    (data / "big.bin").write_bytes(b"\x01" * size)
    return size


def _read(conn: Connection, offset: int) -> dict[str, object]:
    return conn.handle(
        "files/read", {"path": "data/big.bin", "encoding": "base64", "offset": offset, "length": MiB}
    )


def test_a_chunked_read_shows_and_finishes(broker: Broker, data: Path) -> None:
    size = _big(data)
    conn = _conn(broker)
    progress = TransferProgress(broker, min_interval=0.0)
    assert "fsbroker-progress" in progress._dom_classes
    assert progress.transfers() == []
    _read(conn, 0)
    (row,) = progress.transfers()
    assert row["path"] == "data/big.bin" and row["direction"] == "read"
    assert row["done"] == MiB and row["total"] == size and not row["finished"]
    assert abs(row["fraction"] - MiB / size) < 1e-9
    assert "1.0 MB of 3.1 MB read" in row["text"]
    _read(conn, MiB)
    (row,) = progress.transfers()
    assert row["done"] == 2 * MiB and "MB/s" in row["text"]
    _read(conn, 2 * MiB)
    result = _read(conn, 3 * MiB)
    assert result["eof"] is True
    (row,) = progress.transfers()
    assert row["finished"] and row["fraction"] == 1.0
    assert row["text"].startswith("done: 3.1 MB read")
    assert progress.rows_box.children[0].children[1].bar_style == "success"
    progress.close()


def test_a_single_request_shows_nothing(broker: Broker) -> None:
    conn = _conn(broker)
    progress = TransferProgress(broker)
    conn.handle("files/read", {"path": "data/x.csv"})
    conn.handle("files/write", {"path": "data/y.csv", "content": "y"})
    assert progress.transfers() == []
    progress.close()


def test_a_chunked_write_shows_and_finishes(broker: Broker, data: Path) -> None:
    conn = _conn(broker)
    progress = TransferProgress(broker, min_interval=0.0)
    chunk = base64.b64encode(b"\x02" * MiB).decode()
    for i in range(3):
        conn.handle(
            "files/write",
            {
                "path": "data/up.bin",
                "content": chunk,
                "encoding": "base64",
                "offset": i * MiB,
                "final": i == 2,
            },
        )
        (row,) = progress.transfers()
        assert row["direction"] == "write" and row["done"] == (i + 1) * MiB
        if i < 2:
            assert row["total"] is None and not row["finished"]
            assert "written so far" in row["text"]
    assert row["finished"] and row["text"].startswith("done: 3.1 MB written")
    assert (data / "up.bin").stat().st_size == 3 * MiB
    progress.close()


def test_finished_rows_are_kept_up_to_a_limit(broker: Broker, data: Path) -> None:
    _big(data)
    conn = _conn(broker)
    progress = TransferProgress(broker, keep_finished=1)
    for name in ("a.bin", "b.bin"):
        (data / name).write_bytes(b"\x03" * (MiB + 1))
        conn.handle("files/read", {"path": f"data/{name}", "encoding": "base64", "length": MiB})
        conn.handle("files/read", {"path": f"data/{name}", "encoding": "base64", "offset": MiB})
    assert [row["path"] for row in progress.transfers()] == ["data/b.bin"]
    # Reading the same file again in chunks follows it afresh; in one request keeps the row.
    conn.handle("files/read", {"path": "data/b.bin", "encoding": "base64", "length": 2 * MiB})
    assert [row["finished"] for row in progress.transfers()] == [True]
    conn.handle("files/read", {"path": "data/b.bin", "encoding": "base64", "length": MiB})
    assert [row["finished"] for row in progress.transfers()] == [False]
    progress.clear_finished()
    assert len(progress.transfers()) == 1
    progress.close()


def test_rows_of_a_closed_connection_are_removed(broker: Broker, data: Path) -> None:
    _big(data)
    conn = _conn(broker)
    progress = TransferProgress(broker)
    _read(conn, 0)
    assert len(progress.transfers()) == 1
    conn.close()
    assert progress.transfers() == []
    progress.close()


def test_filter_by_connection(broker: Broker, data: Path) -> None:
    _big(data)
    mine = _conn(broker, "mine")
    theirs = broker.connect("theirs")
    progress = TransferProgress(broker, connection_id=mine.id)
    _read(theirs, 0)
    assert progress.transfers() == []
    _read(mine, 0)
    assert [row["connection_id"] for row in progress.transfers()] == [mine.id]
    progress.close()


def test_close_unsubscribes(broker: Broker, data: Path) -> None:
    _big(data)
    conn = _conn(broker)
    progress = TransferProgress(broker)
    _read(conn, 0)
    progress.close()
    assert progress.transfers() == []
    _read(conn, MiB)
    conn.close()
    assert progress.transfers() == []
    progress.close()  # idempotent
