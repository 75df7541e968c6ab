"""A confined process, for real: what the kernel refuses it and what it can still do.

Each test starts :mod:`tests.sandbox.probe` through the launcher and reads what the
kernel answered. The tests run as root in CI: root passes every permission check
on files, so each refusal below is Landlock's (the same probe unconfined shows it).
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_fsbroker.sandbox import Sandbox
from tests.sandbox.conftest import probe
from tests.support.ports import listening_socket, port_of

pytestmark = pytest.mark.usefixtures("abi")

REFUSED = {"EACCES", "EPERM"}


@contextlib.contextmanager
def placed(folder: Path, text: str = "secret\n") -> Iterator[Path]:
    """A file of the test's own in *folder*, removed afterwards."""
    path = folder / f"fsbroker-sandbox-test-{uuid.uuid4().hex}.txt"
    path.write_text(text)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@pytest.fixture
def home_file() -> Iterator[Path]:
    with placed(Path.home()) as path:
        yield path


@pytest.fixture
def etc_file() -> Iterator[Path]:
    if not os.access("/etc", os.W_OK):
        pytest.skip("needs a file of the test's own under /etc (run as root, as CI does)")
    with placed(Path("/etc")) as path:
        yield path


@pytest.fixture
def shared_tmp_file() -> Iterator[Path]:
    with placed(Path("/tmp")) as path:
        yield path


def test_the_users_files_are_refused_by_the_kernel(
    tmp_path: Path, home_file: Path, etc_file: Path, shared_tmp_file: Path
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "sales.csv").write_text("a,b\n1,2\n")
    targets = [home_file, etc_file, shared_tmp_file, root / "sales.csv", Path("/etc/shadow")]
    reads = [f"read:{t}" for t in targets]
    unconfined = probe(reads, sandbox=None)
    assert set(unconfined.values()) == {"ok"}, "without the sandbox these files are readable here"
    confined = probe(
        [*reads, f"write:{root / 'new.txt'}", f"write:{Path.home() / 'fsbroker-new.txt'}", "list:/etc"],
        sandbox=Sandbox(),
        roots=[(root, False)],
    )
    assert {a: r for a, r in confined.items() if r not in REFUSED} == {}
    assert not (root / "new.txt").exists()
    assert not (Path.home() / "fsbroker-new.txt").exists()


def test_it_still_imports_its_packages_and_writes_in_its_private_tmpdir() -> None:
    results = probe(
        [
            "import:mcp",
            "import:jupyter_fsbroker.serverkit",
            "import:ssl",
            "tmpfile",
            "read:/etc/passwd",
        ],
        sandbox=Sandbox(),
    )
    tmpfile = results.pop("tmpfile")
    assert results == dict.fromkeys(results, "ok")
    written = tmpfile.removeprefix("ok:")
    assert tmpfile.startswith("ok:") and "/fsbroker-sandbox-" in written
    assert not os.path.exists(written), "the private folder is removed when the server is done"


def test_roots_level_reads_roots_writes_only_read_write_ones_and_nothing_else(tmp_path: Path) -> None:
    writable, read_only, outside = (tmp_path / n for n in ("work", "reference", "elsewhere"))
    for folder in (writable, read_only, outside):
        folder.mkdir()
        (folder / "f.txt").write_text("x\n")
    results = probe(
        [
            f"read:{read_only / 'f.txt'}",
            f"list:{read_only}",
            f"read:{writable / 'f.txt'}",
            f"write:{writable / 'new.txt'}",
            f"write:{read_only / 'f.txt'}",
            f"write:{read_only / 'new.txt'}",
            f"read:{outside / 'f.txt'}",
        ],
        sandbox=Sandbox(level="roots"),
        roots=[(writable, False), (read_only, True)],
    )
    assert results == {
        f"read:{read_only / 'f.txt'}": "ok",
        f"list:{read_only}": "ok",
        f"read:{writable / 'f.txt'}": "ok",
        f"write:{writable / 'new.txt'}": "ok",
        f"write:{read_only / 'f.txt'}": "EACCES",
        f"write:{read_only / 'new.txt'}": "EACCES",
        f"read:{outside / 'f.txt'}": "EACCES",
    }
    assert (read_only / "f.txt").read_text() == "x\n"


def test_network_level_connects_only_to_allowed_ports(abi: int) -> None:
    if abi < 4:
        pytest.skip(f"the network level needs Landlock ABI 4; this kernel offers {abi}")
    with listening_socket() as allowed, listening_socket() as other:
        a, b = port_of(allowed), port_of(other)
        confined = probe([f"connect:{a}", f"connect:{b}", "bind:0"], sandbox=Sandbox(connect_ports=(a,)))
        first_level = probe([f"connect:{a}", f"connect:{b}"], sandbox=Sandbox())
    assert confined == {f"connect:{a}": "ok", f"connect:{b}": "EACCES", "bind:0": "EACCES"}
    assert first_level == {f"connect:{a}": "ok", f"connect:{b}": "ok"}, "the first level leaves TCP alone"


def test_no_signal_or_abstract_socket_outside_and_no_capabilities(abi: int) -> None:
    if abi < 6:
        pytest.skip(f"scoping needs Landlock ABI 6; this kernel offers {abi}")
    name = f"fsbroker-sandbox-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + name)
        listener.listen(1)
        actions = [f"signal:{os.getpid()}", f"abstract:{name}", "caps"]
        unconfined = probe(actions, sandbox=None)
        confined = probe(actions, sandbox=Sandbox())
    assert unconfined[f"signal:{os.getpid()}"] == "ok"
    assert unconfined[f"abstract:{name}"] == "ok"
    assert confined[f"signal:{os.getpid()}"] == "EPERM"
    assert confined[f"abstract:{name}"] == "EPERM"
    assert confined["caps"] == "ok:0000000000000000"
