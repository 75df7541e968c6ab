"""``files/list`` pages: each folder is read once per listing, whatever the page, and cursors are sealed.

Before: a cursor re-read every folder on the way to its position and looked at every entry
before it, so the deeper the page, the slower it was. Now a connection keeps where each of its
listings stands, and the page after a cursor goes on from there. The invariant is counted, never
timed: the number of directory reads (``scandir``) of a whole paginated listing equals the
number of directories listed, however small the pages.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core import cursors, listing
from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.limits import Limits
from tests.support.brokers import ALL_OPS, make_broker

from .conftest import error_of


class Scans:
    """Counts the directories read by listings (a wrapper around ``os.scandir`` in the listing module)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = os.scandir

        def counting(fd: Any) -> Any:
            self.count += 1
            return real(fd)

        monkeypatch.setattr(listing.os, "scandir", counting)

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Scans:
    return Scans(monkeypatch)


@pytest.fixture
def tree(data: Path) -> Path:
    """120 files at the top, and 6 folders of 20 files, one holding a folder of 15 more."""
    for i in range(120):
        (data / f"top{i:03d}.csv").write_text("x")
    for d in range(6):
        (data / f"dir{d}").mkdir()
        for i in range(20):
            (data / f"dir{d}" / f"f{i:02d}").write_text("y" * i)
    (data / "dir3" / "inner").mkdir()
    for i in range(15):
        (data / "dir3" / "inner" / f"g{i:02d}").write_text("z")
    return data


DIRECTORIES = 1 + 6 + 1  # the listed folder, dir0..dir5, dir3/inner


def pages(conn: Connection, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    params = dict(params)
    while True:
        result = conn.handle("files/list", params)
        yield result
        if "nextCursor" not in result:
            return
        params["cursor"] = result["nextCursor"]


def every_path(conn: Connection, params: dict[str, Any]) -> list[str]:
    return [e["path"] for page in pages(conn, params) for e in page["entries"]]


@pytest.mark.parametrize("size", [1, 7, 50, 111, 10_000])
def test_each_folder_is_read_once_per_listing(tree: Path, conn: Connection, scans: Scans, size: int) -> None:
    whole = conn.handle("files/list", {"path": "data", "recursive": True})["entries"]
    assert len(whole) == 120 + 6 + 6 * 20 + 1 + 15
    assert scans.take() == DIRECTORIES
    per_page = []
    paths: list[str] = []
    for page in pages(conn, {"path": "data", "recursive": True, "maxEntries": size}):
        per_page.append(scans.take())
        paths += [e["path"] for e in page["entries"]]
        assert len(page["entries"]) <= size
    assert paths == [e["path"] for e in whole]
    assert sum(per_page) == DIRECTORIES  # no folder read twice, whatever the number of pages
    assert max(per_page) <= DIRECTORIES


def test_the_order_is_depth_first_by_name(tree: Path, conn: Connection) -> None:
    paths = every_path(conn, {"path": "data", "recursive": True, "maxEntries": 13})
    assert paths == sorted(paths, key=lambda p: p.split("/"))
    assert paths.index("data/dir3/inner") < paths.index("data/dir3/inner/g00") < paths.index("data/dir4")


def test_a_listing_no_longer_kept_resumes_where_it_was(
    tree: Path, conn: Connection, scans: Scans, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = every_path(conn, {"path": "data", "recursive": True})
    scans.take()
    first = conn.handle("files/list", {"path": "data", "recursive": True, "maxEntries": 95})
    conn.listings.close()  # as if it had stayed idle too long
    rest = every_path(
        conn, {"path": "data", "recursive": True, "maxEntries": 95, "cursor": first["nextCursor"]}
    )
    assert [e["path"] for e in first["entries"]] + rest == expected
    # Resuming read the folders on the way to the position again, then went on.
    last = first["entries"][-1]["path"]
    assert last == "data/dir3/inner/g09"
    assert scans.take() == DIRECTORIES + len(last.split("/")) - 1
    # An idle listing is dropped by the janitor's sweep.
    conn.handle("files/list", {"path": "data", "recursive": True, "maxEntries": 3})
    assert len(conn.listings) == 1
    monkeypatch.setattr(cursors.time, "monotonic", lambda: 1e12)
    conn.listings.discard_idle()
    assert len(conn.listings) == 0


def test_an_old_cursor_sent_again_gives_the_same_page(tree: Path, conn: Connection) -> None:
    params = {"path": "data", "recursive": True, "maxEntries": 100}
    first = conn.handle("files/list", params)
    second = conn.handle("files/list", {**params, "cursor": first["nextCursor"]})
    again = conn.handle("files/list", {**params, "cursor": first["nextCursor"]})  # a retry
    assert again["entries"] == second["entries"]
    third = conn.handle("files/list", {**params, "cursor": second["nextCursor"]})
    assert third["entries"][0]["path"] > second["entries"][-1]["path"]


def test_one_cursor_used_by_two_requests_at_once(tree: Path, conn: Connection) -> None:
    params = {"path": "data", "recursive": True, "maxEntries": 200}
    first = conn.handle("files/list", params)
    results: list[dict[str, Any]] = []
    start = threading.Barrier(4)

    def go() -> None:
        start.wait()
        results.append(conn.handle("files/list", {**params, "cursor": first["nextCursor"]}))

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert all(r["entries"] == results[0]["entries"] for r in results)


def test_cursors_are_sealed_to_their_connection_and_listing(
    tree: Path, broker: Broker, conn: Connection
) -> None:
    cursor = conn.handle("files/list", {"path": "data", "maxEntries": 5})["nextCursor"]
    other = broker.connect("other")
    body, _, tag = cursor.partition(".")
    forged = [
        "e30=",
        "not a cursor",
        cursor + "x",
        body + "." + tag[::-1],
        body[:-2] + "AA." + tag,
        cursor.replace(".", ""),
        "\x00" * 64,
        "é" * 100,
        "." * 10_000,
    ]
    for bad in forged:
        err = error_of(conn, "files/list", {"path": "data", "maxEntries": 5, "cursor": bad})
        assert (err.code, err.reason) == (-32602, "bad_cursor"), bad
    assert (
        error_of(other, "files/list", {"path": "data", "maxEntries": 5, "cursor": cursor}).reason
        == "bad_cursor"
    )
    for params in ({"path": "data/dir0"}, {"path": "data", "recursive": True}):
        assert error_of(conn, "files/list", {**params, "cursor": cursor}).reason == "bad_cursor"
    # The cursor itself is fine; includeHidden may change (the same order, filtered anew).
    assert conn.handle(
        "files/list", {"path": "data", "maxEntries": 5, "cursor": cursor, "includeHidden": True}
    )


def test_changes_between_pages(tree: Path, conn: Connection) -> None:
    params: dict[str, Any] = {"path": "data", "recursive": True, "maxEntries": 25}
    first = conn.handle("files/list", params)
    assert first["entries"][-1]["path"] == "data/dir1/f02"
    (tree / "dir1" / "f03").unlink()  # not sent yet: gone
    (tree / "dir2" / "f00").unlink()
    (tree / "dir9").mkdir()  # added to a folder this listing has read: as readdir, not listed
    (tree / "dir2" / "f99").write_text("n")  # added to a folder not read yet: listed
    rest = every_path(conn, {**params, "cursor": first["nextCursor"]})
    assert "data/dir1/f03" not in rest and "data/dir2/f00" not in rest
    assert rest[0] == "data/dir1/f04"
    assert "data/dir9" not in rest and "data/dir2/f99" in rest
    assert "data/dir9" in every_path(conn, {"path": "data"})  # a new listing sees it


def test_the_listed_folder_replaced_between_pages(tree: Path, conn: Connection, data: Path) -> None:
    params: dict[str, Any] = {"path": "data/dir2", "maxEntries": 10}
    first = conn.handle("files/list", params)
    os.rename(data / "dir2", data / "old2")
    (data / "dir2").mkdir()
    for i in range(20):
        (data / "dir2" / f"f{i:02d}").write_text("new")
    rest = every_path(conn, {**params, "cursor": first["nextCursor"]})
    assert rest == [f"data/dir2/f{i:02d}" for i in range(10, 20)]  # from where it was, in the new folder


def test_a_deep_recursive_listing_holds_few_descriptors(
    data: Path, conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = data
    for level in range(120):
        folder = folder / f"d{level:03d}"
        folder.mkdir()
        (folder / "z.txt").write_text("z")  # after the subfolder: the walk comes back to every level
    peak = 0
    real_open = os.open

    def counting_open(*args: Any, **kwargs: Any) -> int:
        nonlocal peak
        fd = real_open(*args, **kwargs)
        peak = max(peak, len(os.listdir("/proc/self/fd")) - 1)
        return fd

    baseline = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(listing.os, "open", counting_open)
    paths = every_path(conn, {"path": "data", "recursive": True, "maxEntries": 37})
    assert len(paths) == 240
    assert paths == sorted(paths, key=lambda p: p.split("/"))
    assert peak - baseline <= listing.OPEN_DIRS + 3  # the listed folder, a scan, the resolution's
    assert len(os.listdir("/proc/self/fd")) == baseline


def test_kept_listings_are_bounded(tree: Path, conn: Connection) -> None:
    opened = [
        conn.handle("files/list", {"path": "data", "maxEntries": 1})["nextCursor"]
        for _ in range(cursors.KEPT + 5)
    ]
    assert len(conn.listings) == cursors.KEPT
    # The oldest are no longer kept, yet still resume (reading their folder again).
    assert (
        conn.handle("files/list", {"path": "data", "maxEntries": 1, "cursor": opened[0]})["entries"][0][
            "name"
        ]
        == "dir1"
    )
    conn.close()
    assert len(conn.listings) == 0


def test_sensitive_names_are_filtered_on_every_page(data: Path, broker: Broker) -> None:
    for name in (".env", "server.pem", "a.txt", "id_rsa", "z.txt"):
        (data / name).write_text("s")
    (data / ".git").mkdir()
    (data / ".git" / "config").write_text("c")
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("s")
    listed = every_path(conn, {"path": "data", "recursive": True, "includeHidden": True, "maxEntries": 1})
    assert listed == ["data/a.txt", "data/z.txt"]
    broker.allow("data/.git", ops=("read",), include_sensitive=True)
    listed = every_path(conn, {"path": "data", "recursive": True, "includeHidden": True, "maxEntries": 1})
    assert listed == ["data/.git", "data/.git/config", "data/a.txt", "data/z.txt"]


@pytest.fixture
def fast_broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path, limits=Limits(ops_per_second=1e6, ops_burst=10**6)) as b:
        b.add_root(data, name="data")
        b.allow("data", ops=ALL_OPS)
        yield b


def test_page_cost_stays_flat_in_a_large_folder(data: Path, fast_broker: Broker, scans: Scans) -> None:
    for i in range(1000):
        os.close(os.open(data / f"f{i:05d}", os.O_CREAT | os.O_WRONLY))
    conn = fast_broker.connect("big")
    reads = [scans.take() for _ in pages(conn, {"path": "data", "maxEntries": 50})][1:]
    assert len(reads) == 19 and set(reads) == {0}  # after the first page, no page reads the folder again
