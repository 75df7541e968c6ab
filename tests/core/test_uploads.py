"""Chunked uploads (``files/write`` with ``offset``): staged beside the target, committed atomically
by the ``final`` chunk, locked for the uploading connection until then, discarded when abandoned.
"""

from __future__ import annotations

import base64
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core import uploads
from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.errors import (
    AlreadyExists,
    FileLocked,
    FilesError,
    InvalidParams,
    PreconditionFailed,
    TooLarge,
)
from jupyter_fsbroker.core.limits import Limits, MiB
from tests.support.brokers import make_broker

ALL_OPS = ("read", "write", "delete", "watch")
OLD = b"the old content of the target\n" * 1000
#: Long enough that waiting it out would show in the timings of conflicts that must be immediate,
#: however loaded the machine: they are checked against half of it.
LOCK_WAIT = 60.0


@dataclass
class Env:
    data: Path
    broker: Broker

    def connect(self, server: str) -> Connection:
        return self.broker.connect(server)

    def temp_files(self) -> list[str]:
        return [
            os.path.join(d, n)
            for d, dirs, names in os.walk(self.data)
            for n in dirs + names
            if n.startswith(".fsbroker-")
        ]


@contextmanager
def make_env(tmp_path: Path, **limits: Any) -> Iterator[Env]:
    data = tmp_path / "data"
    data.mkdir(parents=True)
    with make_broker(tmp_path / "state", limits=Limits(lock_wait=LOCK_WAIT, **limits)) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)
        yield Env(data, broker)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with make_env(tmp_path) as e:
        yield e


@pytest.fixture
def target(env: Env) -> Path:
    """An existing target with the old content and mode 0o640."""
    path = env.data / "target.bin"
    path.write_bytes(OLD)
    os.chmod(path, 0o640)
    return path


def put(
    conn: Connection, path: str, data: bytes, offset: int, final: bool = False, **extra: Any
) -> dict[str, Any]:
    """Send one chunk of an upload."""
    params = {
        "path": path,
        "content": base64.b64encode(data).decode("ascii"),
        "encoding": "base64",
        "offset": offset,
        "final": final,
        **extra,
    }
    return conn.handle("files/write", params)


def refused(call: Callable[[], object]) -> FilesError:
    with pytest.raises(FilesError) as info:
        call()
    return info.value


def assert_locked_at_once(call: Callable[[], object], holder: str) -> None:
    """*call* meets the upload's lock: FILE_LOCKED at once, naming the holder, never its lockId."""
    started = time.monotonic()
    exc = refused(call)
    assert isinstance(exc, FileLocked), repr(exc)
    assert (exc.name, exc.code) == ("FILE_LOCKED", -32100)
    assert str(exc.data["lockedBy"]).startswith(holder)
    assert "retryAfterMs" in exc.data
    assert "lockId" not in exc.data
    assert time.monotonic() - started < LOCK_WAIT / 2


def assert_writable(conn: Connection, path: str) -> None:
    """No lock is left on *path*: another connection writes it at once."""
    started = time.monotonic()
    result = conn.handle("files/write", {"path": path, "content": "free again\n"})
    assert result["size"] == len("free again\n")
    assert time.monotonic() - started < LOCK_WAIT / 2


# -- the tests -------------------------------------------------------------------------------


def test_five_mib_upload_commits_atomically_and_keeps_the_mode(env: Env, target: Path) -> None:
    content = random.Random(5).randbytes(5 * MiB)
    uploader = env.connect("uploader")
    other = env.connect("other")
    path = "data/target.bin"
    old_stat = other.handle("files/stat", {"path": path})
    assert old_stat["locked"] is False

    for offset in range(0, len(content), MiB):
        piece = content[offset : offset + MiB]
        final = offset + MiB >= len(content)
        result = put(uploader, path, piece, offset, final)
        assert result["bytesWritten"] == len(piece)
        if final:
            break
        assert result["size"] == offset + len(piece)
        # Until the final chunk the target is untouched ...
        assert target.read_bytes() == OLD
        assert len(env.temp_files()) == 1
        now = other.handle("files/stat", {"path": path})
        assert (now["size"], now["etag"], now["locked"]) == (len(OLD), old_stat["etag"], True)
        # ... the uploading connection itself still reads the old content ...
        assert uploader.handle("files/read", {"path": path})["content"].encode() == OLD
        # ... and it is locked for everyone else: writes, and reads too (an exclusive lock).
        assert_locked_at_once(lambda: other.handle("files/write", {"path": path, "content": "x"}), "uploader")
        assert_locked_at_once(lambda: other.handle("files/read", {"path": path}), "uploader")
        assert_locked_at_once(lambda: other.handle("files/delete", {"path": path}), "uploader")

    assert result["size"] == len(content)
    assert target.read_bytes() == content
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert env.temp_files() == []
    final_stat = other.handle("files/stat", {"path": path})
    assert (final_stat["size"], final_stat["locked"]) == (len(content), False)
    assert result["etag"] == final_stat["etag"] != old_stat["etag"]
    assert "lockId" not in result
    assert_writable(other, path)


def test_upload_creates_a_new_file(env: Env) -> None:
    conn = env.connect("uploader")
    put(conn, "data/sub-new.bin", b"abc", 0)
    assert not (env.data / "sub-new.bin").exists()
    result = put(conn, "data/sub-new.bin", b"def", 3, final=True)
    assert result["size"] == 6
    assert (env.data / "sub-new.bin").read_bytes() == b"abcdef"
    assert env.temp_files() == []


def test_chunk_at_the_wrong_offset_is_refused_and_the_upload_stays_usable(env: Env, target: Path) -> None:
    conn = env.connect("uploader")
    path = "data/target.bin"
    first, second = b"A" * 1000, b"B" * 500
    put(conn, path, first, 0)
    for wrong in (500, 999, 1001, 5000):
        exc = refused(lambda wrong=wrong: put(conn, path, second, wrong, final=True))
        assert isinstance(exc, InvalidParams)
        assert exc.code == -32602
        assert exc.data["expectedOffset"] == 1000
        assert target.read_bytes() == OLD
    # The staged upload is as it was: the right chunk next finishes it.
    result = put(conn, path, second, 1000, final=True)
    assert result["size"] == 1500
    assert target.read_bytes() == first + second
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert env.temp_files() == []


def test_chunk_without_a_staged_upload_expects_offset_zero(env: Env, target: Path) -> None:
    conn = env.connect("uploader")
    exc = refused(lambda: put(conn, "data/target.bin", b"x", 10, final=True))
    assert exc.code == -32602
    assert exc.data["expectedOffset"] == 0
    assert target.read_bytes() == OLD


def test_upload_abandoned_by_disconnect_is_discarded(env: Env, target: Path) -> None:
    uploader = env.connect("uploader")
    put(uploader, "data/target.bin", b"1" * 4096, 0)
    put(uploader, "data/target.bin", b"2" * 4096, 4096)
    put(uploader, "data/fresh.bin", b"3" * 4096, 0)
    assert len(env.temp_files()) == 2
    uploader.close()

    assert target.read_bytes() == OLD
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert not (env.data / "fresh.bin").exists()
    assert env.temp_files() == []
    other = env.connect("other")
    assert other.handle("files/stat", {"path": "data/target.bin"})["locked"] is False
    assert_writable(other, "data/target.bin")
    assert_writable(other, "data/fresh.bin")


def test_upload_abandoned_by_silence_is_discarded(tmp_path: Path) -> None:
    with make_env(tmp_path, upload_idle_timeout=0.5) as env:
        target = env.data / "target.bin"
        target.write_bytes(OLD)
        uploader = env.connect("uploader")
        other = env.connect("other")
        put(uploader, "data/target.bin", b"1" * 4096, 0)
        put(uploader, "data/target.bin", b"2" * 4096, 4096)
        assert len(env.temp_files()) == 1
        assert other.handle("files/stat", {"path": "data/target.bin"})["locked"] is True

        # The janitor runs every second: poll for the discard, with a deadline.
        deadline = time.monotonic() + 60.0
        while env.temp_files() or other.handle("files/stat", {"path": "data/target.bin"})["locked"]:
            assert time.monotonic() < deadline, "the silent upload was not discarded"
            time.sleep(0.05)

        assert target.read_bytes() == OLD
        # The upload is gone: its next chunk has nothing to follow.
        exc = refused(lambda: put(uploader, "data/target.bin", b"3" * 10, 8192, final=True))
        assert exc.code == -32602
        assert exc.data["expectedOffset"] == 0
        assert target.read_bytes() == OLD
        assert_writable(other, "data/target.bin")


@pytest.mark.parametrize(
    ("content", "encoding"),
    [
        ("a" * (2 * MiB + 1), "utf-8"),
        ("\u00e9" * (MiB + 1), "utf-8"),  # 1 MiB + 1 characters, 2 MiB + 2 bytes
        (base64.b64encode(b"\0" * (2 * MiB + 1)).decode("ascii"), "base64"),
    ],
    ids=["ascii", "two-byte-chars", "base64"],
)
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunk"])
def test_single_request_over_2_mib_is_too_large(
    env: Env, target: Path, content: str, encoding: str, chunked: bool
) -> None:
    conn = env.connect("uploader")
    params: dict[str, Any] = {"path": "data/target.bin", "content": content, "encoding": encoding}
    if chunked:
        params.update(offset=0, final=False)
    exc = refused(lambda: conn.handle("files/write", params))
    assert isinstance(exc, TooLarge)
    assert (exc.name, exc.code) == ("TOO_LARGE", -32106)
    assert exc.data["maxBytes"] == 2 * MiB
    assert exc.path == "data/target.bin"
    assert target.read_bytes() == OLD
    assert env.temp_files() == []
    assert_writable(env.connect("other"), "data/target.bin")


def test_exactly_2_mib_in_one_request_is_accepted(env: Env, target: Path) -> None:
    conn = env.connect("uploader")
    content = random.Random(2).randbytes(2 * MiB)
    result = put(conn, "data/target.bin", content, 0, final=True)
    assert result["size"] == 2 * MiB
    result = conn.handle(
        "files/write", {"path": "data/whole.bin", "content": "z" * (2 * MiB), "encoding": "utf-8"}
    )
    assert result["size"] == 2 * MiB
    assert target.read_bytes() == content


def test_exclusive_upload_onto_an_existing_file_fails(env: Env, target: Path) -> None:
    conn = env.connect("uploader")
    exc = refused(lambda: put(conn, "data/target.bin", b"new", 0, exclusive=True))
    assert isinstance(exc, AlreadyExists)
    assert (exc.name, exc.code) == ("ALREADY_EXISTS", -32103)
    assert target.read_bytes() == OLD
    assert env.temp_files() == []
    assert_writable(env.connect("other"), "data/target.bin")


def test_exclusive_upload_fails_when_the_file_appears_before_the_commit(env: Env) -> None:
    conn = env.connect("uploader")
    put(conn, "data/late.bin", b"mine", 0, exclusive=True)
    # Another program (not using the broker's locks) creates the file meanwhile.
    (env.data / "late.bin").write_bytes(b"theirs")
    exc = refused(lambda: put(conn, "data/late.bin", b"!", 4, final=True))
    assert isinstance(exc, AlreadyExists)
    assert (env.data / "late.bin").read_bytes() == b"theirs"
    assert env.temp_files() == []
    assert_writable(env.connect("other"), "data/late.bin")


def test_exclusive_upload_of_a_new_file_succeeds(env: Env) -> None:
    conn = env.connect("uploader")
    put(conn, "data/new.bin", b"one", 0, exclusive=True)
    put(conn, "data/new.bin", b"two", 3, final=True, exclusive=True)
    assert (env.data / "new.bin").read_bytes() == b"onetwo"


def test_if_match_mismatch_at_commit_fails_and_leaves_no_temp(env: Env, target: Path) -> None:
    conn = env.connect("uploader")
    etag = conn.handle("files/stat", {"path": "data/target.bin"})["etag"]
    put(conn, "data/target.bin", b"new " * 1000, 0, ifMatch=etag)
    put(conn, "data/target.bin", b"more" * 1000, 4000)
    # Another program changes the target behind the broker's back (a different size, so that
    # the change shows whatever the timestamp granularity).
    changed = b"changed behind the broker's back\n"
    target.write_bytes(changed)
    exc = refused(lambda: put(conn, "data/target.bin", b"end", 8000, final=True))
    assert isinstance(exc, PreconditionFailed)
    assert (exc.name, exc.code) == ("PRECONDITION_FAILED", -32104)
    assert target.read_bytes() == changed
    assert env.temp_files() == []
    assert_writable(env.connect("other"), "data/target.bin")


def test_if_match_mismatch_at_the_start_fails_at_once(env: Env, target: Path) -> None:
    conn = env.connect("uploader")
    exc = refused(lambda: put(conn, "data/target.bin", b"new", 0, ifMatch="not-the-etag"))
    assert isinstance(exc, PreconditionFailed)
    assert target.read_bytes() == OLD
    assert env.temp_files() == []
    assert_writable(env.connect("other"), "data/target.bin")


def test_if_match_that_still_matches_commits(env: Env, target: Path) -> None:
    conn = env.connect("uploader")
    etag = conn.handle("files/stat", {"path": "data/target.bin"})["etag"]
    put(conn, "data/target.bin", b"new ", 0, ifMatch=etag)
    result = put(conn, "data/target.bin", b"content", 4, final=True, ifMatch=etag)
    assert target.read_bytes() == b"new content"
    assert result["etag"] != etag
    assert os.stat(target).st_mode & 0o777 == 0o640


@pytest.mark.parametrize("final", [False, True], ids=["middle-chunk", "final-chunk"])
@pytest.mark.parametrize("ending", ["disconnect", "silence"])
def test_upload_discarded_during_an_inflight_chunk_writes_nothing_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, final: bool, ending: str
) -> None:
    """A discard (disconnect, or the janitor after silence) racing with a chunk being written.

    Regression test: the discard used to close the upload's descriptors while another thread was
    about to write the chunk, which then went into whatever file reused the descriptor number (and
    a final chunk closed that file's descriptor again).
    """
    with make_env(tmp_path / "broker", upload_idle_timeout=0.5 if ending == "silence" else 300.0) as env:
        target = env.data / "target.bin"
        target.write_bytes(OLD)
        uploader = env.connect("uploader")
        put(uploader, "data/target.bin", b"first", 0)

        # Hold the next chunk inside the broker, right before its bytes are written, while the
        # upload is discarded from another thread.
        entered, go = threading.Event(), threading.Event()
        fds: list[int] = []
        original = uploads.Upload.append

        def paused_append(self: uploads.Upload, data: bytes) -> None:
            fds.append(self.fd)
            entered.set()
            assert go.wait(10)
            original(self, data)

        monkeypatch.setattr(uploads.Upload, "append", paused_append)
        outcome: list[object] = []

        def send() -> None:
            try:
                outcome.append(put(uploader, "data/target.bin", b"SECOND-CHUNK", 5, final=final))
            except FilesError as exc:
                outcome.append(exc)

        sender = threading.Thread(target=send, name="inflight-chunk")
        sender.start()
        victims: list[tuple[int, int, Path]] = []  # descriptor, inode, path
        try:
            assert entered.wait(10)
            if ending == "disconnect":
                uploader.close()  # as a transport does when the server goes away
            else:
                deadline = time.monotonic() + 60.0
                while env.temp_files():  # the janitor runs every second
                    assert time.monotonic() < deadline, "the silent upload was not discarded"
                    time.sleep(0.05)
            # Some other file of the process (a notebook's file, a lock file, another upload)
            # is opened now and gets the descriptor number the discarded upload had.
            for i in range(200):
                path = tmp_path / f"victim-{i}.txt"
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                victims.append((fd, os.fstat(fd).st_ino, path))
                if fd == fds[0]:
                    break
            else:
                pytest.fail("the upload's descriptor number was not reused")
        finally:
            go.set()
            sender.join(10)
        assert not sender.is_alive()
        try:
            # The upload is gone: the chunk is refused, neither staged nor committed.
            assert len(outcome) == 1
            assert isinstance(outcome[0], FilesError), outcome
            assert outcome[0].code != -32603, outcome
            fd, ino, path = victims[-1]
            assert path.read_bytes() == b"", "the chunk was written into an unrelated file"
            for fd, ino, path in victims:
                # Still open: nobody closed it behind our back.
                assert _open_as(fd, ino), f"{path.name} was closed by the broker"
            assert target.read_bytes() == OLD
            assert env.temp_files() == []
            if ending == "silence":
                assert_writable(env.connect("other"), "data/target.bin")
        finally:
            for fd, ino, _ in victims:
                if _open_as(fd, ino):  # never close a number the broker freed and someone reused
                    os.close(fd)


def _open_as(fd: int, ino: int) -> bool:
    try:
        return os.fstat(fd).st_ino == ino
    except OSError:
        return False
