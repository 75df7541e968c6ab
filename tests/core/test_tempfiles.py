"""Temporary files left by writers that died are swept, and a live writer's never are.

A writer holds an OS lock (``flock``) on its temporary file for as long as it
writes; a sweep removes only temporary files whose lock it takes at once, that
were left unmodified for ``stale_temp_age`` seconds, and only the broker's own
names. Here the writers are real: other processes killed with SIGKILL, other
open files in this process, staged uploads of another broker.
"""

from __future__ import annotations

import base64
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.core import tempfiles
from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import ConfigError, FilesError, PermissionDenied
from jupyter_fsbroker.core.tempfiles import TempFiles, is_temp_name, new_temp, remove_if_stale
from tests.support.brokers import ALL_OPS, make_broker
from tests.support.env import server_env

#: Seconds a line of a writer process is awaited.
LINE_TIMEOUT = 30.0
#: How far back a leftover is dated to count as stale for the default age.
LONG_AGO = 3600.0

WRITER = r"""
import os, sys
from jupyter_fsbroker.core.tempfiles import new_temp

fd_dir = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
name, fd = new_temp(fd_dir)
os.write(fd, b"half of something")
print(name, flush=True)
sys.stdin.readline()  # killed before it ever commits
"""


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if is_temp_name(name))


def age(path: Path, seconds: float = LONG_AGO) -> None:
    """Date *path*'s modification back by *seconds* (a leftover from a while ago)."""
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def dead_leftover(folder: Path, name: str = ".fsbroker-1-0123456789abcdef.tmp") -> Path:
    """A temporary file nobody holds, as a writer that died leaves it."""
    path = folder / name
    path.write_bytes(b"half")
    age(path)
    return path


class Writer:
    """Another process that holds a temporary file in a folder, until it is killed."""

    def __init__(self, folder: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **server_env()},
        )
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            self.name = lines.get(timeout=LINE_TIMEOUT).strip()
        except queue.Empty:
            self.kill()
            pytest.fail("the writer process printed nothing")
        reader.join()
        self.path = folder / self.name

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(LINE_TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def writer(data: Path) -> Iterator[Writer]:
    w = Writer(data)
    try:
        yield w
    finally:
        w.kill()


def folder_fd(folder: Path) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY)


def sweep(folder: Path, stale_age: float = 60.0) -> int:
    fd = folder_fd(folder)
    try:
        return TempFiles(stale_age).sweep(fd)
    finally:
        os.close(fd)


# -- the liveness test -----------------------------------------------------------------------------


def test_a_live_writer_in_another_process_keeps_its_file_however_old(data: Path, writer: Writer) -> None:
    age(writer.path)
    assert sweep(data, stale_age=0) == 0
    assert writer.path.read_bytes() == b"half of something"


def test_the_file_of_a_writer_killed_with_sigkill_is_swept(data: Path, writer: Writer) -> None:
    writer.kill()  # the OS drops its lock with it
    age(writer.path)
    assert sweep(data) == 1
    assert leftovers(data) == []


def test_a_fresh_leftover_stays_until_it_is_old_enough(data: Path, writer: Writer) -> None:
    writer.kill()
    assert sweep(data, stale_age=60.0) == 0  # dead, but modified just now: the age guard holds
    assert leftovers(data) == [writer.name]
    assert sweep(data, stale_age=0) == 1


def test_a_live_writer_in_this_process_keeps_its_file(data: Path) -> None:
    fd = folder_fd(data)
    try:
        name, temp = new_temp(fd)
        try:
            age(data / name)
            # flock belongs to the open file: another open of it in this process is refused too.
            assert not remove_if_stale(fd, name, 0)
            assert TempFiles(0).sweep(fd) == 0
        finally:
            os.close(temp)
        assert remove_if_stale(fd, name, 0)
    finally:
        os.close(fd)
    assert leftovers(data) == []


def test_only_the_brokers_own_regular_files_are_removed(data: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    others = {
        "report.tmp": "not ours",
        ".fsbroker-notes.txt": "not ours either",
        "fsbroker-1-0123456789abcdef.tmp": "no leading dot",
    }
    for name, text in others.items():
        (data / name).write_text(text)
        age(data / name)
    (data / ".fsbroker-dir.tmp").mkdir()
    (data / ".fsbroker-link.tmp").symlink_to(outside)
    age(data / ".fsbroker-link.tmp")
    dead_leftover(data)
    assert sweep(data, stale_age=0) == 1
    for name, text in others.items():
        assert (data / name).read_text() == text
    assert (data / ".fsbroker-dir.tmp").is_dir()
    assert (data / ".fsbroker-link.tmp").is_symlink()
    assert outside.read_text() == "precious"


def test_a_folder_is_swept_at_most_once_per_stale_age(data: Path) -> None:
    sweeper = TempFiles(3600.0)
    fd = folder_fd(data)
    try:
        dead_leftover(data, ".fsbroker-1-aaaaaaaaaaaaaaaa.tmp")
        assert sweeper.sweep_due(fd) == 1
        dead_leftover(data, ".fsbroker-1-bbbbbbbbbbbbbbbb.tmp")
        assert sweeper.sweep_due(fd) == 0  # swept a moment ago
        assert sweeper.sweep(fd) == 1
        sweeper.stale_age = 0
        dead_leftover(data, ".fsbroker-1-cccccccccccccccc.tmp")
        assert sweeper.sweep_due(fd) == 1
    finally:
        os.close(fd)


def test_a_writer_whose_fresh_file_a_sweep_took_makes_another(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the creation of a temporary file and its lock, a sweep may hold it: use another name."""
    real_lock = tempfiles._lock
    calls: list[int] = []

    def lock_once_taken(fd: int, *, writer: bool) -> bool:
        calls.append(fd)
        if len(calls) == 1:
            return False  # as if a sweep held it at that instant
        return real_lock(fd, writer=writer)

    monkeypatch.setattr(tempfiles, "_lock", lock_once_taken)
    fd = folder_fd(data)
    try:
        name, temp = new_temp(fd)
        os.close(temp)
    finally:
        os.close(fd)
    assert len(calls) == 2
    assert leftovers(data) == [name]  # the first one was given up and removed


# -- when a broker sweeps --------------------------------------------------------------------------


def test_a_broker_sweeps_the_folder_of_each_root_it_is_given(tmp_path: Path, data: Path) -> None:
    (data / "sub").mkdir()
    top = dead_leftover(data)
    deep = dead_leftover(data / "sub")
    readonly = tmp_path / "ro"
    readonly.mkdir()
    kept = dead_leftover(readonly)
    with make_broker(tmp_path) as broker:
        broker.add_root(data, name="data")
        broker.add_root(readonly, name="ro", read_only=True)
        assert not top.exists()
        assert deep.exists()  # deeper folders wait until they are written
        assert kept.exists()  # a read-only root is never written, not even to tidy it
        broker.allow("data", ops=ALL_OPS)
        conn = broker.connect("writer")
        conn.handle("files/write", {"path": "data/sub/new.txt", "content": "x"})
        assert not deep.exists()
    assert leftovers(data) == leftovers(data / "sub") == []


@pytest.mark.parametrize("how", ["write", "create", "staged"])
def test_writing_a_folder_sweeps_it(broker: Broker, conn: Connection, data: Path, how: str) -> None:
    (data / "sub").mkdir()  # the root's own folder was swept when the root was added
    leftover = dead_leftover(data / "sub")
    if how == "write":
        conn.handle("files/write", {"path": "data/sub/a.txt", "content": "a"})
    elif how == "create":
        conn.handle("files/create", {"path": "data/sub/a.txt", "type": "file", "content": "a"})
    else:
        conn.handle("files/write", {"path": "data/sub/a.txt", "content": "a", "offset": 0, "final": False})
    assert not leftover.exists()
    assert (data / "sub" / "a.txt").exists() != (how == "staged")


def test_a_staged_upload_of_another_broker_is_never_swept(tmp_path: Path, data: Path) -> None:
    with make_broker(tmp_path, stale_temp_age=0) as first, make_broker(tmp_path) as second:
        first.add_root(data, name="data")
        first.allow("data", ops=ALL_OPS)
        uploader = first.connect("uploader")
        chunk = base64.b64encode(b"x" * 1000).decode()
        params = {"path": "data/big.bin", "content": chunk, "encoding": "base64"}
        uploader.handle("files/write", {**params, "offset": 0, "final": False})
        [staged] = leftovers(data)
        age(data / staged)
        second.add_root(data, name="data")  # a broker starting on the same folder
        second.configure(stale_temp_age=0)
        second.allow("data", ops=ALL_OPS)
        second.connect("other").handle("files/write", {"path": "data/other.txt", "content": "o"})
        assert leftovers(data) == [staged]
        result = uploader.handle("files/write", {**params, "offset": 1000, "final": True})
        assert result["size"] == 2000
    assert (data / "big.bin").read_bytes() == b"x" * 2000
    assert leftovers(data) == []


def test_the_age_guard_is_a_setting(tmp_path: Path) -> None:
    with make_broker(tmp_path, stale_temp_age=5) as broker:
        assert broker.temp_files.stale_age == 5
        broker.configure(stale_temp_age=0.5)
        assert broker.temp_files.stale_age == 0.5
        for bad in (-1, float("inf"), "60", True):
            with pytest.raises(ConfigError, match="stale_temp_age"):
                broker.configure(stale_temp_age=bad)
        assert broker.temp_files.stale_age == 0.5


# -- requests never name a temporary file ----------------------------------------------------------

TEMP = ".fsbroker-4242-0123456789abcdef.tmp"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("files/read", {"path": f"data/{TEMP}"}),
        ("files/write", {"path": f"data/{TEMP}", "content": "swap"}),
        ("files/write", {"path": f"data/{TEMP}", "content": "swap", "offset": 0}),
        ("files/create", {"path": f"data/{TEMP}", "type": "file"}),
        ("files/create", {"path": f"data/{TEMP}/inside", "type": "file", "parents": True}),
        ("files/stat", {"path": f"data/{TEMP}"}),
        ("files/delete", {"path": f"data/{TEMP}"}),
        ("files/rename", {"path": "data/plain.txt", "newPath": f"data/{TEMP}"}),
        ("files/rename", {"path": f"data/{TEMP}", "newPath": "data/taken.txt"}),
        ("files/watch", {"path": f"data/{TEMP}"}),
        ("files/list", {"path": f"data/{TEMP}"}),
    ],
)
def test_requests_cannot_name_the_brokers_temporary_files(
    conn: Connection, data: Path, method: str, params: dict[str, object]
) -> None:
    """Another connection's staged upload is never read, replaced or moved through its temporary name."""
    (data / TEMP).write_bytes(b"someone's staged upload")
    (data / "plain.txt").write_text("plain")
    with pytest.raises(FilesError) as info:
        conn.handle(method, params)
    assert isinstance(info.value, PermissionDenied), info.value
    assert info.value.reason == "temporary_file"
    assert (data / TEMP).read_bytes() == b"someone's staged upload"
    assert (data / "plain.txt").read_text() == "plain"
    assert not (data / "taken.txt").exists()


def test_a_link_to_a_temporary_file_is_refused_too(conn: Connection, data: Path) -> None:
    (data / TEMP).write_bytes(b"staged")
    (data / "alias").symlink_to(TEMP)
    with pytest.raises(PermissionDenied) as info:
        conn.handle("files/read", {"path": "data/alias"})
    assert info.value.reason == "temporary_file"


def test_writers_and_sweeps_in_one_folder_at_once(tmp_path: Path, data: Path) -> None:
    """Every write sweeps the folder (age 0) while others write there: no live file is ever taken."""
    threads_count, rounds = 6, 60
    errors: list[BaseException] = []
    with make_broker(tmp_path, stale_temp_age=0) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)

        def work(n: int) -> None:
            conn = broker.connect(f"writer{n}")
            chunk = base64.b64encode(bytes([n]) * 5000).decode()
            try:
                for i in range(rounds):
                    conn.handle("files/write", {"path": f"data/w{n}.txt", "content": f"{n}:{i}"})
                    staged = {"path": f"data/s{n}.bin", "content": chunk, "encoding": "base64"}
                    conn.handle("files/write", {**staged, "offset": 0, "final": False})
                    conn.handle("files/write", {"path": f"data/c{n}-{i}.txt", "content": "c"})
                    conn.handle("files/write", {**staged, "offset": 5000, "final": True})
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads_count)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert errors == []
    for n in range(threads_count):
        assert (data / f"w{n}.txt").read_text() == f"{n}:{rounds - 1}"
        assert (data / f"s{n}.bin").read_bytes() == bytes([n]) * 10_000
    assert leftovers(data) == []
