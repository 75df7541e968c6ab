"""The symlink-swap race: swapping a directory (or file) for a symlink to the outside while the
broker serves requests on it must never lead outside the root.

A swapper thread replaces ``data/d`` with a symlink to ``outside/d`` and back, as fast as it can,
while other threads send thousands of reads, writes, listings and stats through the broker. Refusals
are fine; what must never happen is a result that carries outside content or names, or any change
below ``outside/``.
"""

from __future__ import annotations

import base64
import os
import stat
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import FileLocked, FilesError, NotFound, PermissionDenied, WrongType
from jupyter_fsbroker.core.limits import Limits
from tests.support.brokers import make_broker

MARKER = "OUTSIDE-SECRET"
ALL_OPS = ("read", "write", "delete", "watch")
#: Requests the main thread sends per scenario (the writer thread adds its own).
MAIN_OPS = 3000
#: Seconds the swapper holds the real object in place for a request to get through (a safety net).
HOLD_TIMEOUT = 60.0
#: Errors a request may legitimately meet while its path is being swapped. (WRONG_TYPE: a listing
#: whose directory became a symlink just before it is opened; ``O_DIRECTORY|O_NOFOLLOW`` on a
#: symlink fails with ENOTDIR on Linux, not ELOOP.)
ALLOWED_ERRORS = (PermissionDenied, NotFound, FileLocked, WrongType)

INSIDE_F = b"inside f: harmless content\n"
INSIDE_G = b"inside g: more harmless content, of another length\n"
OUTSIDE_F = f"{MARKER}: the content of outside/d/f.txt, which must never be served\n".encode()
OUTSIDE_G = f"{MARKER}: g\n".encode()
OUTSIDE_SECRET_FILE = f"{MARKER}.txt"
WRITTEN_PREFIX = "written by the broker "


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fast_thread_switches() -> Iterator[None]:
    """Switch threads often, so that the swapper lands between the broker's steps more often."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def snapshot(folder: Path) -> dict[str, tuple[int, int, int, int, bytes | str]]:
    """Every entry below *folder*, and *folder* itself: mode, inode, size, mtime and content."""
    result: dict[str, tuple[int, int, int, int, bytes | str]] = {}

    def add(path: str) -> None:
        st = os.lstat(path)
        content: bytes | str
        if stat.S_ISLNK(st.st_mode):
            content = os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                content = f.read()
        else:
            content = ""
        result[os.path.relpath(path, folder)] = (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, content)

    add(str(folder))
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            add(os.path.join(dirpath, name))
    return result


@dataclass
class Tally:
    """What the requests of one scenario met, shared by the threads that send them."""

    #: Guards the counts; notified at each success (the swapper may be waiting for one).
    lock: threading.Condition = field(default_factory=threading.Condition)
    ok: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def success(self, method: str) -> None:
        with self.lock:
            self.ok[method] += 1
            self.lock.notify_all()

    def refusal(self, method: str, exc: FilesError) -> None:
        with self.lock:
            self.refused[f"{method}:{exc.name}:{exc.reason}"] += 1

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    @property
    def successes(self) -> int:
        return sum(self.ok.values())

    @property
    def refusals(self) -> int:
        return sum(self.refused.values())


def check_error(exc: FilesError, method: str, outside: Path, tally: Tally) -> None:
    """An error met in the race: an expected kind, and revealing nothing of the outside."""
    text = f"{exc.message} {exc.reason} {exc.path} {exc.data!r}"
    if MARKER in text or str(outside) in text:
        tally.problem(f"{method}: the error reveals the outside: {text}")
    if not isinstance(exc, ALLOWED_ERRORS):
        tally.problem(f"{method}: unexpected error {exc!r} (code {exc.code})")
    tally.refusal(method, exc)


def call(
    conn: Connection,
    method: str,
    params: dict[str, Any],
    check: Callable[[dict[str, Any]], None],
    outside: Path,
    tally: Tally,
) -> None:
    """Send one request; check its result with *check* or its error with :func:`check_error`."""
    try:
        result = conn.handle(method, params)
    except FilesError as exc:
        check_error(exc, method, outside, tally)
        return
    if MARKER in repr(result):
        tally.problem(f"{method} {params.get('path')}: the result carries the outside marker: {result!r}")
    try:
        check(result)
    except AssertionError as exc:
        tally.problem(f"{method} {params.get('path')}: {exc}: {result!r}")
    tally.success(method)


class Swapper(threading.Thread):
    """Swap *victim* for a symlink to each of *links* in turn, and back, until stopped.

    Every cycle ends with the real object back in place, so the tree is in its
    original shape once the thread has been joined.

    The real object is in place only between two cycles, for as long as this thread
    waits for the interpreter: on a loaded machine that can be too short for any
    request to be served whole. So until each method of *needs* has got through
    once since the first swap, the real object stays in place after a cycle until
    it has (or the race is stopped).
    """

    def __init__(self, victim: Path, links: list[str], *, needs: tuple[str, ...] = ()) -> None:
        super().__init__(name="symlink-swapper", daemon=True)
        self.victim = victim
        self.aside = victim.with_name(victim.name + "-real")
        self.links = links
        self.needs = needs
        self.tally = Tally()
        self.stop = threading.Event()
        self.swaps = 0
        self.collisions = 0
        self.error: BaseException | None = None

    def race(self, tally: Tally) -> None:
        """Start swapping; *tally* counts the requests that race with the swaps."""
        self.tally = tally
        self.start()

    def halt(self) -> None:
        """Stop at the end of the current cycle (a hold for a request to get through ends too)."""
        self.stop.set()
        with self.tally.lock:
            self.tally.lock.notify_all()

    def _hold(self, before: Counter[str]) -> None:
        """Keep the real object in place until each method of *needs* got through since *before*."""

        def through() -> bool:
            return self.stop.is_set() or all(self.tally.ok[m] > before[m] for m in self.needs)

        with self.tally.lock:
            self.tally.lock.wait_for(through, HOLD_TIMEOUT)

    def run(self) -> None:
        try:
            with self.tally.lock:
                before = Counter(self.tally.ok)
            i = 0
            while not self.stop.is_set():
                os.rename(self.victim, self.aside)
                try:
                    os.symlink(self.links[i % len(self.links)], self.victim)
                except FileExistsError:
                    # A broker write (create=True) put a new file there meanwhile: it goes too.
                    self.collisions += 1
                i += 1
                os.unlink(self.victim)
                os.rename(self.aside, self.victim)
                self.swaps += 1
                self._hold(before)
        except BaseException as exc:  # reported by the test
            self.error = exc


@dataclass
class Scene:
    tmp_path: Path
    data: Path
    outside: Path
    broker: Broker


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    data = tmp_path / "data"
    outside = tmp_path / "outside"
    (data / "d").mkdir(parents=True)
    (data / "d" / "f.txt").write_bytes(INSIDE_F)
    (data / "d" / "g.txt").write_bytes(INSIDE_G)
    (data / "top.txt").write_bytes(INSIDE_F)
    (outside / "d").mkdir(parents=True)
    (outside / "d" / "f.txt").write_bytes(OUTSIDE_F)
    (outside / "d" / "g.txt").write_bytes(OUTSIDE_G)
    (outside / "d" / OUTSIDE_SECRET_FILE).write_bytes(OUTSIDE_F)
    (outside / "secret.txt").write_bytes(OUTSIDE_F)
    # Generous rates: the race sends thousands of requests in a few seconds.
    limits = Limits(ops_per_second=1e6, ops_burst=10**7, lock_wait=0.2)
    with make_broker(tmp_path / "state", limits=limits) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)
        yield Scene(tmp_path, data, outside, broker)


def run_race(
    scene: Scene,
    swapper: Swapper,
    main_requests: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None]]],
    writer_request: tuple[str, Callable[[int], dict[str, Any]], Callable[[dict[str, Any]], None]],
) -> Tally:
    """Run the swapper, a writer thread and the main thread's requests; return what they met."""
    tally = Tally()
    outside = scene.outside
    main_conn = scene.broker.connect("racer-main")
    writer_conn = scene.broker.connect("racer-writer")
    done = threading.Event()
    writer_errors: list[BaseException] = []

    def writer() -> None:
        method, make_params, check = writer_request
        i = 0
        try:
            while not done.is_set():
                call(writer_conn, method, make_params(i), check, outside, tally)
                i += 1
        except BaseException as exc:  # reported by the test
            writer_errors.append(exc)

    writer_thread = threading.Thread(target=writer, name="racer-writer", daemon=True)
    swapper.race(tally)
    writer_thread.start()
    try:
        for i in range(MAIN_OPS):
            method, params, check = main_requests[i % len(main_requests)]
            call(main_conn, method, params, check, outside, tally)
    finally:
        done.set()
        swapper.halt()
        writer_thread.join(timeout=30)
        swapper.join(timeout=30)
    assert not writer_thread.is_alive(), "the writer thread did not stop"
    assert not swapper.is_alive(), "the swapper did not stop"
    assert swapper.error is None, f"the swapper failed: {swapper.error!r}"
    assert not writer_errors, f"the writer thread failed: {writer_errors!r}"
    main_conn.close()
    writer_conn.close()
    return tally


def assert_race_outcome(tally: Tally, swapper: Swapper, before: dict[str, Any], scene: Scene) -> None:
    summary = f"ok={dict(tally.ok)} refused={dict(tally.refused)} swaps={swapper.swaps}"
    assert not tally.problems, "\n".join(tally.problems[:20]) + "\n" + summary
    assert swapper.swaps > 0, summary
    assert tally.successes + tally.refusals >= MAIN_OPS, summary
    # Both paths were exercised: requests that got through, and requests that were refused.
    assert tally.successes > 0, summary
    assert tally.refusals > 0, summary
    # Nothing below outside/ changed: no new file, same content, same mtimes.
    assert snapshot(scene.outside) == before
    # The broker's temporary files are never left behind in the root by a finished write.
    leftovers = [n for _, _, names in os.walk(scene.data) for n in names if n.startswith(".fsbroker-")]
    assert leftovers == []


# -- the tests -------------------------------------------------------------------------------


def test_directory_swapped_for_symlink_never_leads_outside(scene: Scene) -> None:
    """``data/d`` swapped for a symlink to ``outside/d`` (absolute and relative links)."""
    before = snapshot(scene.outside)
    inside_names = {"f.txt", "g.txt", "new.txt"}

    def read_f(result: dict[str, Any]) -> None:
        assert result["content"].encode() == INSIDE_F
        assert result["size"] == len(INSIDE_F)

    def read_g(result: dict[str, Any]) -> None:
        assert result["content"].encode() == INSIDE_G

    def read_g_base64(result: dict[str, Any]) -> None:
        assert base64.b64decode(result["content"]) == INSIDE_G

    def read_new(result: dict[str, Any]) -> None:
        assert result["content"].startswith(WRITTEN_PREFIX)

    def listing(result: dict[str, Any]) -> None:
        names = {e["name"] for e in result["entries"]}
        assert names <= inside_names, f"foreign names {names - inside_names}"
        assert all(e["path"] == f"data/d/{e['name']}" for e in result["entries"])

    def stat_f(result: dict[str, Any]) -> None:
        assert result["type"] == "file"
        assert result["size"] == len(INSIDE_F)

    def stat_d(result: dict[str, Any]) -> None:
        assert result["type"] == "directory"
        assert result["path"] == "data/d"

    def written(result: dict[str, Any]) -> None:
        assert result["bytesWritten"] == result["size"]

    # What the test expects to have got through: a write, and reads.
    swapper = Swapper(
        scene.data / "d", [str(scene.outside / "d"), "../outside/d"], needs=("files/read", "files/write")
    )
    tally = run_race(
        scene,
        swapper,
        [
            ("files/read", {"path": "data/d/f.txt"}, read_f),
            ("files/list", {"path": "data/d", "includeHidden": True}, listing),
            ("files/stat", {"path": "data/d/f.txt"}, stat_f),
            ("files/read", {"path": "data/d/g.txt", "encoding": "base64"}, read_g_base64),
            ("files/stat", {"path": "data/d"}, stat_d),
            ("files/read", {"path": "data/d/new.txt"}, read_new),
            ("files/read", {"path": "data/d/f.txt", "offset": 5, "length": 7}, lambda r: None),
            ("files/read", {"path": "data/d/g.txt"}, read_g),
        ],
        (
            "files/write",
            lambda i: {"path": "data/d/new.txt", "content": f"{WRITTEN_PREFIX}{i}\n"},
            written,
        ),
    )
    assert_race_outcome(tally, swapper, before, scene)
    assert tally.ok["files/write"] > 0, dict(tally.refused)
    # The tree is back in shape, and the broker serves it normally.
    assert not (scene.data / "d").is_symlink()
    conn = scene.broker.connect("after-the-race")
    assert conn.handle("files/read", {"path": "data/d/f.txt"})["content"].encode() == INSIDE_F
    names = {e["name"] for e in conn.handle("files/list", {"path": "data/d"})["entries"]}
    assert names == inside_names
    assert (scene.data / "d" / "new.txt").read_text().startswith(WRITTEN_PREFIX)
    conn.handle("files/write", {"path": "data/d/new.txt", "content": "after\n"})
    assert (scene.data / "d" / "new.txt").read_text() == "after\n"
    assert snapshot(scene.outside) == before


def test_file_swapped_for_symlink_never_leads_outside(scene: Scene) -> None:
    """``data/top.txt`` swapped for a symlink to ``outside/secret.txt``, while it is read and written."""
    before = snapshot(scene.outside)

    def read_top(result: dict[str, Any]) -> None:
        text = result["content"]
        assert text.encode() == INSIDE_F or text.startswith(WRITTEN_PREFIX)

    def read_top_base64(result: dict[str, Any]) -> None:
        content = base64.b64decode(result["content"])
        assert content == INSIDE_F[1:] or content.startswith(WRITTEN_PREFIX[1:].encode())

    def stat_top(result: dict[str, Any]) -> None:
        assert result["type"] == "file"
        assert result["size"] != len(OUTSIDE_F)

    def listing(result: dict[str, Any]) -> None:
        for e in result["entries"]:
            assert MARKER not in e["name"]
            if e["name"] == "top.txt":
                # Listed as what it is at that moment: the file or the link, never the outside file.
                assert e["type"] in ("file", "symlink")
                assert e["type"] == "symlink" or e["size"] != len(OUTSIDE_F)

    def written(result: dict[str, Any]) -> None:
        assert result["bytesWritten"] == result["size"]

    swapper = Swapper(
        scene.data / "top.txt",
        [str(scene.outside / "secret.txt"), "../outside/secret.txt"],
        needs=("files/read",),
    )
    tally = run_race(
        scene,
        swapper,
        [
            ("files/read", {"path": "data/top.txt"}, read_top),
            ("files/stat", {"path": "data/top.txt"}, stat_top),
            ("files/read", {"path": "data/top.txt", "encoding": "base64", "offset": 1}, read_top_base64),
            ("files/list", {"path": "data"}, listing),
        ],
        (
            "files/write",
            lambda i: {"path": "data/top.txt", "content": f"{WRITTEN_PREFIX}{i}\n"},
            written,
        ),
    )
    assert_race_outcome(tally, swapper, before, scene)
    assert not (scene.data / "top.txt").is_symlink()
    conn = scene.broker.connect("after-the-race")
    text = conn.handle("files/read", {"path": "data/top.txt"})["content"]
    assert text.encode() == INSIDE_F or text.startswith(WRITTEN_PREFIX)
    conn.handle("files/write", {"path": "data/top.txt", "content": "after\n"})
    assert (scene.data / "top.txt").read_text() == "after\n"
    assert snapshot(scene.outside) == before
