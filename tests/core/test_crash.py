"""A writer killed with SIGKILL in the middle of a large write never leaves half a file.

A child process runs its own broker on the same root (and the same lock directory) and writes
2 MiB contents, either as whole-file writes in a loop or as a chunked upload; the test kills it
at some point of the write and checks that the target is one complete version, never a mix.
"""

from __future__ import annotations

import base64
import inspect
import os
import queue
import random
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker, BrokerConfig, Connection
from jupyter_fsbroker.core.errors import FileLocked
from tests.support.env import server_env

TARGET = "target.bin"
CHUNK = 64 * 1024
#: How long the test waits for one line of the child before giving up (it never sleeps).
LINE_TIMEOUT = 30.0
OLD = (b"the old content, complete\n" * 60_000)[: 3 * 1024 * 1024 // 2]


def version(i: int) -> bytes:
    """The *i*-th new content: 2 MiB (a little less for later versions), headed by its number."""
    size = 2 * 1024 * 1024 - 4096 * (i % 64)
    head = f"<version {i}>".encode()
    return (head * (size // len(head) + 1))[:size]


CHILD = r"""
import base64
import sys

from jupyter_fsbroker.core.broker import Broker, BrokerConfig

root, lock_dir, trash_dir, mode = sys.argv[1:5]
CHUNK = 64 * 1024

with Broker(BrokerConfig(lock_dir=lock_dir, trash_dir=trash_dir)) as broker:
    broker.add_root(root, name="data")
    broker.allow("data", ops=("read", "write"))
    conn = broker.connect("crasher")
    if mode == "chunked":
        content = version(0)
        for n, offset in enumerate(range(0, len(content), CHUNK)):
            piece = content[offset : offset + CHUNK]
            final = offset + CHUNK >= len(content)
            if final:
                print("staged", flush=True)
                sys.stdin.readline()  # the test kills this process before the final chunk
            conn.handle(
                "files/write",
                {
                    "path": "data/target.bin",
                    "content": base64.b64encode(piece).decode("ascii"),
                    "encoding": "base64",
                    "offset": offset,
                    "final": final,
                },
            )
            print("writing" if n == 0 else f"chunk {n}", flush=True)
    else:
        print("writing", flush=True)
        i = 0
        while True:
            content = base64.b64encode(version(i)).decode("ascii")
            conn.handle("files/write", {"path": "data/target.bin", "content": content, "encoding": "base64"})
            print(f"wrote {i}", flush=True)
            i += 1
"""


@dataclass
class Child:
    """A writer process and the lines it printed."""

    proc: subprocess.Popen[bytes]
    lines: queue.Queue[str | None]
    stderr: Path

    def line(self) -> str:
        try:
            text = self.lines.get(timeout=LINE_TIMEOUT)
        except queue.Empty:
            pytest.fail(f"the writer printed nothing for {LINE_TIMEOUT} s; stderr:\n{self.stderr_text()}")
        if text is None:
            pytest.fail(f"the writer exited early ({self.proc.wait()}); stderr:\n{self.stderr_text()}")
        return text

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=LINE_TIMEOUT) == -signal.SIGKILL, self.stderr_text()


@dataclass
class Scene:
    data: Path
    lock_dir: Path
    trash_dir: Path
    broker: Broker
    conn: Connection

    @property
    def target(self) -> Path:
        return self.data / TARGET

    def spawn(self, mode: str) -> Child:
        env = {**os.environ, **server_env()}
        script = textwrap.dedent(inspect.getsource(version)) + CHILD
        stderr = self.data.parent / f"child-{mode}.stderr"
        with stderr.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", script, str(self.data), str(self.lock_dir), str(self.trash_dir), mode],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
            )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                lines.put(raw.decode().strip())
            lines.put(None)

        threading.Thread(target=pump, name="child-stdout", daemon=True).start()
        self._children.append(proc)
        return Child(proc, lines, stderr)

    def __post_init__(self) -> None:
        self._children: list[subprocess.Popen[bytes]] = []

    def reap(self) -> None:
        for proc in self._children:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=LINE_TIMEOUT)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    data = tmp_path / "data"
    data.mkdir()
    (data / TARGET).write_bytes(OLD)
    os.chmod(data / TARGET, 0o640)
    lock_dir = tmp_path / "state" / "locks"
    trash_dir = tmp_path / "state" / "trash"
    with Broker(BrokerConfig(lock_dir=str(lock_dir), trash_dir=str(trash_dir))) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read", "write"))
        scene = Scene(data, lock_dir, trash_dir, broker, broker.connect("observer"))
        try:
            yield scene
        finally:
            scene.reap()


def temp_files(folder: Path) -> list[str]:
    return [n for _, _, names in os.walk(folder) for n in names if n.startswith(".fsbroker-")]


def assert_not_listed(scene: Scene) -> None:
    """The broker's temporary files, even left behind by a dead writer, are never listed."""
    for recursive in (False, True):
        listing = scene.conn.handle(
            "files/list", {"path": "data", "includeHidden": True, "recursive": recursive}
        )
        names = [e["name"] for e in listing["entries"]]
        assert names == [TARGET], names


def assert_still_writable(scene: Scene) -> None:
    """The dead writer's locks went with it: this process can write and read the target."""
    result = scene.conn.handle("files/write", {"path": f"data/{TARGET}", "content": "after the crash\n"})
    assert result["size"] == len(b"after the crash\n")
    assert scene.conn.handle("files/read", {"path": f"data/{TARGET}"})["content"] == "after the crash\n"


def read_through_broker(conn: Connection) -> bytes:
    out = b""
    offset = 0
    while True:
        chunk = conn.handle(
            "files/read", {"path": f"data/{TARGET}", "encoding": "base64", "offset": offset, "length": 2**21}
        )
        out += base64.b64decode(chunk["content"])
        offset += chunk["bytesRead"]
        if chunk["eof"]:
            return out


@pytest.mark.parametrize("trial", range(4))
def test_killed_during_whole_file_writes_leaves_one_complete_version(scene: Scene, trial: int) -> None:
    rng = random.Random(trial)
    child = scene.spawn("loop")
    assert child.line() == "writing"
    last = -1
    for _ in range(rng.randrange(0, 4)):
        line = child.line()
        match = re.fullmatch(r"wrote (\d+)", line)
        assert match, line
        last = int(match[1])
    child.kill()

    content = scene.target.read_bytes()
    if content == OLD:
        assert last == -1, f"the write of version {last} was answered, yet the old content is back"
    else:
        head = re.match(rb"<version (\d+)>", content)
        assert head, f"neither the old content nor a version: {content[:60]!r}... ({len(content)} bytes)"
        n = int(head[1])
        assert n >= last
        assert content == version(n), f"version {n} is incomplete or mixed ({len(content)} bytes)"
    assert read_through_broker(scene.conn) == content
    assert os.stat(scene.target).st_mode & 0o777 == 0o640
    assert_not_listed(scene)
    assert_still_writable(scene)


@pytest.mark.parametrize("trial", range(3))
def test_killed_during_chunked_upload_leaves_the_old_content(scene: Scene, trial: int) -> None:
    rng = random.Random(100 + trial)
    chunks = len(version(0)) // CHUNK
    child = scene.spawn("chunked")
    assert child.line() == "writing"
    # Chunk 0 prints "writing", chunks 1 .. chunks-2 "chunk n"; the last one is never sent.
    for n in range(1, rng.randrange(1, chunks - 1)):
        assert child.line() == f"chunk {n}"
    child.kill()

    assert scene.target.read_bytes() == OLD
    assert os.stat(scene.target).st_mode & 0o777 == 0o640
    assert read_through_broker(scene.conn) == OLD
    # The staged content of the dead writer may stay on disk, but is never listed.
    assert len(temp_files(scene.data)) <= 1
    assert_not_listed(scene)
    assert_still_writable(scene)


def test_staged_upload_of_another_process_locks_the_target_until_it_dies(scene: Scene) -> None:
    child = scene.spawn("chunked")
    assert child.line() == "writing"
    for n in range(1, len(version(0)) // CHUNK - 1):
        assert child.line() == f"chunk {n}"
    assert child.line() == "staged"
    # Everything but the final chunk is staged in the other process: the target is untouched,
    # and locked for that process's connection.
    assert scene.target.read_bytes() == OLD
    with pytest.raises(FileLocked) as info:
        scene.conn.handle("files/write", {"path": f"data/{TARGET}", "content": "intruder"})
    assert info.value.code == -32100
    assert str(info.value.data.get("lockedBy")).startswith("crasher")
    assert "lockId" not in info.value.data
    staged = temp_files(scene.data)
    assert len(staged) == 1
    assert os.path.getsize(scene.data / staged[0]) == len(version(0)) - CHUNK

    child.kill()
    assert scene.target.read_bytes() == OLD
    assert_not_listed(scene)
    assert_still_writable(scene)
