"""The core on platforms without Linux's ``O_PATH`` (macOS): it imports, answers the same, stays inside.

``O_PATH`` is hidden from ``os`` in a child process before ``jupyter_fsbroker`` is imported, so
that the core takes the path it takes on macOS (plain ``O_RDONLY`` directory descriptors for the
walk). The same requests are then answered with and without it, and the symlink-swap race runs
in that mode too.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core import posix

REPO = Path(__file__).resolve().parents[2]
#: Generous: a child process here imports the package, and the machine may be busy.
CHILD_TIMEOUT = 300

#: Runs a script (argv[1]) as ``__main__`` with ``os.O_PATH`` gone, as on macOS.
WITHOUT_O_PATH = (
    "import os, runpy, sys\n"
    "del os.O_PATH\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)

IMPORT_EVERYTHING = r"""
import importlib, json, os, pkgutil
import jupyter_fsbroker
from jupyter_fsbroker.core import posix

names = sorted(
    m.name
    for m in pkgutil.walk_packages(jupyter_fsbroker.__path__, "jupyter_fsbroker.")
    if not m.name.endswith(".__main__")  # runs the command line
)
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": names, "walk_flags": posix.DIR_WALK_FLAGS, "has_o_path": hasattr(os, "O_PATH")}))
"""

SCENARIO = r"""
import base64, json, os, sys
from pathlib import Path

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.config import BrokerConfig
from jupyter_fsbroker.core.errors import FilesError
from jupyter_fsbroker.core import posix

base = Path(sys.argv[1])
data, outside = base / "data", base / "outside"
(data / "sub" / "deep").mkdir(parents=True)
(data / "sub" / "deep" / "f.txt").write_text("deep file\n")
(data / "top.txt").write_text("top\n")
(data / ".env").write_text("TOKEN=1\n")
outside.mkdir()
(outside / "secret.txt").write_text("SECRET\n")
(data / "inner_link").symlink_to("sub/deep")
(data / "sub" / "up").symlink_to("..")
(data / "abs_out").symlink_to(outside)
(data / "rel_out").symlink_to("../outside")
(data / "file_out").symlink_to(outside / "secret.txt")
(data / "loop").symlink_to("loop")
payload = bytes(range(256)) * 12
half = len(payload) // 2

def b64(raw):
    return base64.b64encode(raw).decode("ascii")

def clean(value):
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if k not in ("etag", "mtime", "lockId")}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value

calls = [
    ("files/read", {"path": "data/top.txt"}),
    ("files/read", {"path": "data/inner_link/f.txt"}),
    ("files/read", {"path": "data/sub/up/top.txt"}),
    ("files/read", {"path": str(data / "sub" / "deep" / "f.txt")}),
    ("files/read", {"path": "file://" + str(data / "top.txt")}),
    ("files/read", {"path": "data/../outside/secret.txt"}),
    ("files/read", {"path": "data/sub/../../outside/secret.txt"}),
    ("files/read", {"path": str(outside / "secret.txt")}),
    ("files/read", {"path": "data/abs_out/secret.txt"}),
    ("files/read", {"path": "data/rel_out/secret.txt"}),
    ("files/read", {"path": "data/file_out"}),
    ("files/read", {"path": "data/loop/x"}),
    ("files/read", {"path": "data/.env"}),
    ("files/read", {"path": "data/sub"}),
    ("files/read", {"path": "data/nothing/here.txt"}),
    ("files/stat", {"path": "data/sub/deep"}),
    ("files/stat", {"path": "data"}),
    ("files/list", {"path": "data", "recursive": True, "includeHidden": True}),
    ("files/list", {"path": "data/inner_link"}),
    ("files/list", {"path": "data/rel_out"}),
    ("files/write", {"path": "data/sub/new.txt", "content": "new\n"}),
    ("files/write", {"path": "data/abs_out/evil.txt", "content": "x"}),
    ("files/write", {"path": "data/file_out", "content": "x"}),
    ("files/write", {"path": "data/inner_link/via-link.txt", "content": "through a link inside\n"}),
    ("files/write", {"path": "data/sub/big.bin", "content": b64(payload[:half]), "encoding": "base64",
                     "offset": 0}),
    ("files/write", {"path": "data/sub/big.bin", "content": b64(payload[half:]), "encoding": "base64",
                     "offset": half + 1, "final": True}),
    ("files/write", {"path": "data/sub/big.bin", "content": b64(payload[half:]), "encoding": "base64",
                     "offset": half, "final": True}),
    ("files/read", {"path": "data/sub/big.bin", "encoding": "base64", "length": 10000}),
    ("files/create", {"path": "data/a/b/c", "type": "directory", "parents": True}),
    ("files/create", {"path": "data/rel_out/made", "type": "directory", "parents": True}),
    ("files/create", {"path": "data/a/b/c/made.txt", "type": "file", "content": "made\n"}),
    ("files/rename", {"path": "data/sub/new.txt", "newPath": "data/a/b/c/moved.txt"}),
    ("files/rename", {"path": "data/top.txt", "newPath": "data/rel_out/stolen.txt"}),
    ("files/rename", {"path": "data/top.txt", "newPath": "data/a/b/c/made.txt"}),
    ("files/read", {"path": "data/a/b/c/moved.txt"}),
    ("files/delete", {"path": "data/a"}),
    ("files/delete", {"path": "data/a", "recursive": True}),
    ("files/delete", {"path": "data/abs_out"}),
    ("files/delete", {"path": "data"}),
    ("files/list", {"path": "data"}),
]

config = BrokerConfig(lock_dir=str(base / "state" / "locks"), trash_dir=str(base / "state" / "trash"))
answers = []
with Broker(config) as broker:
    broker.add_root(data, name="data")
    broker.allow("data", ops=("read", "write", "delete", "watch"))
    conn = broker.connect("portable")
    for method, params in calls:
        try:
            answers.append([method, params["path"], "ok", clean(conn.handle(method, params))])
        except FilesError as exc:
            answers.append([method, params["path"], "error", exc.name, exc.reason])
outside_now = sorted(os.listdir(outside))
report = {
    "walk_flags": posix.DIR_WALK_FLAGS,
    "answers": answers,
    "outside": outside_now,
    "secret": (outside / "secret.txt").read_text(),
}
print(json.dumps(report).replace(str(base), "<base>"))
"""

#: The directory swap of ``test_race.py``, run with its helpers; prints what the requests met.
DIRECTORY_SWAP = r"""
import json, sys
from pathlib import Path

from jupyter_fsbroker.core import posix
from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.config import BrokerConfig
from jupyter_fsbroker.core.limits import Limits
from tests.core import test_race as race

sys.setswitchinterval(1e-5)
base = Path(sys.argv[1])
data, outside = base / "data", base / "outside"
(data / "d").mkdir(parents=True)
(data / "d" / "f.txt").write_bytes(race.INSIDE_F)
(outside / "d").mkdir(parents=True)
(outside / "d" / "f.txt").write_bytes(race.OUTSIDE_F)
(outside / "d" / race.OUTSIDE_SECRET_FILE).write_bytes(race.OUTSIDE_F)
before = race.snapshot(outside)
limits = Limits(ops_per_second=1e6, ops_burst=10**7, lock_wait=0.2)
config = BrokerConfig(lock_dir=str(base / "locks"), trash_dir=str(base / "trash"), limits=limits)


def read_f(result):
    assert result["content"].encode() == race.INSIDE_F


def listing(result):
    names = {e["name"] for e in result["entries"]}
    assert names <= {"f.txt", "new.txt"}, names


def written(result):
    assert result["bytesWritten"] == result["size"]


with Broker(config) as broker:
    broker.add_root(data, name="data")
    broker.allow("data", ops=race.ALL_OPS)
    swapper = race.Swapper(data / "d", [str(outside / "d"), "../outside/d"])
    tally = race.run_race(
        race.Scene(base, data, outside, broker),
        swapper,
        [
            ("files/read", {"path": "data/d/f.txt"}, read_f),
            ("files/list", {"path": "data/d", "includeHidden": True}, listing),
            ("files/stat", {"path": "data/d/f.txt"}, lambda result: None),
            ("files/read", {"path": "data/d/new.txt"}, lambda result: None),
        ],
        ("files/write", lambda i: {"path": "data/d/new.txt", "content": f"written {i}"}, written),
    )
print(json.dumps({
    "walk_flags": posix.DIR_WALK_FLAGS,
    "problems": tally.problems[:20],
    "requests": tally.successes + tally.refusals,
    "swaps": swapper.swaps,
    "outside_unchanged": race.snapshot(outside) == before,
}))
"""

#: Reads a file inside a directory that may be searched (``--x``) but not read.
SEARCHABLE_ONLY = r"""
import json, os, sys
from pathlib import Path

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.config import BrokerConfig
from jupyter_fsbroker.core.errors import FilesError

base = Path(sys.argv[1])
data = base / "data"
(data / "locked").mkdir(parents=True)
(data / "locked" / "f.txt").write_text("inside\n")
os.chmod(data / "locked", 0o311)
config = BrokerConfig(lock_dir=str(base / "state" / "locks"), trash_dir=str(base / "state" / "trash"))
try:
    with Broker(config) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        conn = broker.connect("portable")
        try:
            outcome = conn.handle("files/read", {"path": "data/locked/f.txt"})["content"]
        except FilesError as exc:
            outcome = [exc.name, exc.reason]
finally:
    os.chmod(data / "locked", 0o755)
print(json.dumps(outcome))
"""

FALLBACK_WALK_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

needs_o_path = pytest.mark.skipif(not hasattr(os, "O_PATH"), reason="this platform has no O_PATH to hide")


def run_child(args: list[str], *, hide_o_path: bool) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", WITHOUT_O_PATH, *args] if hide_o_path else [sys.executable, *args]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=CHILD_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def run_script(tmp_path: Path, name: str, source: str, *args: str, hide_o_path: bool) -> Any:
    script = tmp_path / f"{name}.py"
    script.write_text(source)
    return json.loads(run_child([str(script), *args], hide_o_path=hide_o_path).stdout)


@needs_o_path
def test_every_module_imports_without_o_path(tmp_path: Path) -> None:
    found = run_script(tmp_path, "import_all", IMPORT_EVERYTHING, hide_o_path=True)
    assert found["has_o_path"] is False
    assert found["walk_flags"] == FALLBACK_WALK_FLAGS
    assert "jupyter_fsbroker.core.broker" in found["modules"]
    assert "jupyter_fsbroker.kernel.extension" in found["modules"]


@needs_o_path
def test_same_answers_with_and_without_o_path(tmp_path: Path) -> None:
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    native = run_script(tmp_path, "scenario", SCENARIO, str(tmp_path / "with"), hide_o_path=False)
    fallback = run_script(tmp_path, "scenario", SCENARIO, str(tmp_path / "without"), hide_o_path=True)
    assert native["walk_flags"] & os.O_PATH
    assert fallback["walk_flags"] == FALLBACK_WALK_FLAGS
    for a, b in zip(native["answers"], fallback["answers"], strict=True):
        assert a == b
    for run in (native, fallback):
        assert run["outside"] == ["secret.txt"]
        assert run["secret"] == "SECRET\n"
        assert "SECRET" not in json.dumps(run["answers"])
    # The answers themselves are the contract's, not merely equal to each other.
    outcome = {(a[0], a[1]): a[2:] for a in native["answers"]}
    assert outcome[("files/read", "data/inner_link/f.txt")][1]["content"] == "deep file\n"
    assert outcome[("files/read", "data/sub/up/top.txt")][1]["content"] == "top\n"
    assert outcome[("files/read", "data/../outside/secret.txt")] == [
        "error",
        "PERMISSION_DENIED",
        "traversal",
    ]
    for escaping in ("data/abs_out/secret.txt", "data/rel_out/secret.txt", "data/file_out"):
        assert outcome[("files/read", escaping)] == ["error", "PERMISSION_DENIED", "escaping_symlink"]
    assert outcome[("files/read", "data/loop/x")] == ["error", "PERMISSION_DENIED", "symlink_loop"]
    assert outcome[("files/read", "data/.env")] == ["error", "PERMISSION_DENIED", "sensitive"]
    assert outcome[("files/write", "data/abs_out/evil.txt")][:2] == ["error", "PERMISSION_DENIED"]
    assert outcome[("files/read", "data/a/b/c/moved.txt")][1]["content"] == "new\n"
    assert outcome[("files/delete", "data/abs_out")] == ["ok", {"path": "data/abs_out", "trashed": True}]


@needs_o_path
def test_directory_swap_race_without_o_path(tmp_path: Path) -> None:
    """``data/d`` swapped for links to the outside while it is read, listed and written: never outside.

    The walk opens each directory with plain ``O_RDONLY | O_NOFOLLOW | O_DIRECTORY`` here.
    Only safety is asserted: how many requests get through depends on the machine's load.
    """
    found = run_script(tmp_path, "directory_swap", DIRECTORY_SWAP, str(tmp_path / "race"), hide_o_path=True)
    assert found["walk_flags"] == FALLBACK_WALK_FLAGS
    assert found["problems"] == []
    assert found["outside_unchanged"] is True
    assert found["swaps"] > 0
    assert found["requests"] >= 3000


def permission_bits_bind(folder: Path) -> bool:
    """Whether this process is refused what a directory's mode refuses (not so for root)."""
    probe = folder / "probe"
    probe.mkdir(mode=0o311)
    try:
        os.listdir(probe)
    except PermissionError:
        return True
    finally:
        probe.chmod(0o755)
        probe.rmdir()
    return False


@needs_o_path
def test_a_directory_that_may_be_searched_but_not_read(tmp_path: Path) -> None:
    """``O_PATH`` walks through it; without it the walk needs to read it, and is refused by the OS."""
    if not permission_bits_bind(tmp_path):
        pytest.skip("permission bits do not bind this process (root)")
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    script = "searchable"
    native = run_script(tmp_path, script, SEARCHABLE_ONLY, str(tmp_path / "with"), hide_o_path=False)
    fallback = run_script(tmp_path, script, SEARCHABLE_ONLY, str(tmp_path / "without"), hide_o_path=True)
    assert native == "inside\n"
    assert fallback == ["PERMISSION_DENIED", "os_permission"]


def test_rename_noreplace_without_the_native_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where neither ``renameat2`` nor ``renameatx_np`` exists: look, then rename."""
    monkeypatch.setattr(posix, "_NATIVE_NOREPLACE", None)  # as on a platform without either
    check_rename_noreplace(tmp_path)


def test_rename_noreplace_with_the_native_call(tmp_path: Path) -> None:
    check_rename_noreplace(tmp_path)


def check_rename_noreplace(folder: Path) -> None:
    (folder / "a").write_text("a")
    (folder / "b").write_text("b")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FileExistsError):
            posix.rename_noreplace(fd, "a", fd, "b")
        assert ((folder / "a").read_text(), (folder / "b").read_text()) == ("a", "b")
        posix.rename_noreplace(fd, "a", fd, "c")
        assert not (folder / "a").exists() and (folder / "c").read_text() == "a"
        with pytest.raises(FileNotFoundError):
            posix.rename_noreplace(fd, "a", fd, "d")
    finally:
        os.close(fd)


def test_fsync_dir_takes_any_directory_descriptor(tmp_path: Path) -> None:
    for flags in {posix.DIR_WALK_FLAGS, posix.DIR_READ_FLAGS}:
        fd = os.open(tmp_path, flags)
        try:
            posix.fsync_dir(fd)
        finally:
            os.close(fd)


def test_fsync_dir_raises_real_errors(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "not-a-dir", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError) as info:
            posix.fsync_dir(fd)
        assert info.value.errno == errno.ENOTDIR
    finally:
        os.close(fd)


def test_umask_is_the_process_umask() -> None:
    current = os.umask(0o022)
    os.umask(current)
    assert current == posix.UMASK
