"""Sandboxed servers for real, through the broker: the OS refuses what only ``files/*`` may give.

* A server written with the helper opens the user's files itself and is refused by
  the kernel, while the same file read through ``files/*`` works once approved.
* The official filesystem server (npm, as installed for the interop tests) under
  ``sandbox="roots"`` reads a root but cannot write into a read-only root, nor read a
  root it was shown after it started.
* The example analysis server runs unchanged under the sandbox.
* By default only a server confined to the roots (``sandbox="roots"``) is told where
  they are; any other learns their names.
* Without Landlock, asking for the sandbox is an error that says why; a default
  sandbox becomes a warning and the connection says it is not sandboxed.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.protocol import connect
from jupyter_fsbroker.sandbox import Sandbox, SandboxUnavailable, choose
from tests.interop.npm import NodeTools, install_or_skip
from tests.sandbox.test_confine import placed
from tests.support import without_landlock
from tests.support.brokers import make_broker
from tests.support.ci import cannot_run
from tests.support.env import server_env

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("abi")]

SNOOPING = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "snooping_server.py")]
ANALYSIS = [sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def node_tools() -> NodeTools:
    return install_or_skip("SANDBOX TESTS OF THE OFFICIAL SERVER")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "sales.csv").write_text("region,amount\nnorth,2.5\nsouth,4.0\n")
    (folder / "notes.txt").write_text("hello from the notebook\n")
    return folder


@pytest.fixture
def broker(tmp_path: Path, data: Path) -> Iterator[Broker]:
    with make_broker(tmp_path) as b:
        b.add_root(data, name="data")
        yield b


def etc_files(stack: contextlib.ExitStack) -> list[Path]:
    """Files under /etc this user can read unconfined and the sandbox does not grant."""
    if os.access("/etc", os.W_OK):  # root, as in CI: a file of the test's own, and /etc/shadow
        return [stack.enter_context(placed(Path("/etc"))), Path("/etc/shadow")]
    public = [Path(p) for p in ("/etc/issue", "/etc/debian_version", "/etc/fstab") if os.access(p, os.R_OK)]
    if not public:
        cannot_run("no file under /etc that this user can read and the sandbox does not grant")
    return public[:1]


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(str(block.get("text", "")) for block in result["content"])


async def test_a_sandboxed_server_is_refused_by_the_os_and_served_by_files(
    broker: Broker, data: Path
) -> None:
    asked: list[ConsentRequest] = []

    def decide(request: ConsentRequest) -> ConsentDecision:
        asked.append(request)
        return ConsentDecision.approve_all(request)

    conn = await connect(
        broker,
        "snoop",
        command=SNOOPING[0],
        args=SNOOPING[1:],
        env=server_env(),
        sandbox=True,
        consenter=CallbackConsenter(decide),
    )
    try:
        assert conn.sandbox is not None and conn.sandbox.confined
        assert conn.sandbox.describe().startswith("sandboxed (files; Landlock ABI ")
        with contextlib.ExitStack() as stack:
            attempts = [stack.enter_context(placed(Path.home())), data / "notes.txt", *etc_files(stack)]
            # This process (the same user, unconfined) reads every one of them: a refusal is the sandbox's.
            assert [p for p in attempts if not os.access(p, os.R_OK)] == []
            results = {
                str(p): text_of(await conn.call_tool("open_directly", {"path": str(p)})) for p in attempts
            }
            public = text_of(await conn.call_tool("open_directly", {"path": "/etc/passwd"}))
        assert results == {str(p): "EACCES" for p in attempts}
        assert public == "ok"  # a public system file programs need
        # The same file through files/*: the server asks, the user approves, the broker reads it.
        brokered = await conn.call_tool("read_brokered", {"path": "data/notes.txt"})
        assert text_of(brokered) == "hello from the notebook\n"
        assert [r.approvable_paths for r in asked] == [("data/notes.txt",)]
        where = (await conn.call_tool("where", {}))["structuredContent"]
        assert "/fsbroker-sandbox-" in where["tmpdir"] and os.path.isdir(where["tmpdir"])
    finally:
        await conn.aclose()
    assert not os.path.exists(where["tmpdir"]), "the private folder goes with the connection"
    assert [r.decision for r in broker.audit.records() if r.method == "files/read"] == ["deny", "allow"]


async def test_the_example_analysis_server_runs_unchanged_under_the_sandbox(
    broker: Broker, data: Path
) -> None:
    broker.allow("data", ("read", "write"))
    conn = await connect(
        broker, "analysis", command=ANALYSIS[0], args=ANALYSIS[1:], env=server_env(), sandbox=True
    )
    try:
        assert conn.sandbox is not None and conn.sandbox.confined
        profile = await conn.call_tool("profile_csv", {"path": "data/sales.csv"})
        assert profile["isError"] is False, text_of(profile)
        assert "amount" in text_of(profile)
        report = await conn.call_tool("write_report", {"path": "data/sales.csv"})
        assert report["isError"] is False, text_of(report)
    finally:
        await conn.aclose()
    assert (data / "sales.report.md").exists()


async def test_the_official_server_under_the_roots_level(
    node_tools: NodeTools, data: Path, tmp_path: Path
) -> None:
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "r.txt").write_text("reference")
    later = tmp_path / "later"
    later.mkdir()
    (later / "l.txt").write_text("shown after the start")
    command, *args = node_tools.server_filesystem
    # Read-only roots are advertised here so that the server tries to write into one.
    with make_broker(tmp_path, advertise_read_only_roots=True) as b:
        b.add_root(data, name="data")
        b.add_root(ref, name="ref", read_only=True)
        conn = await connect(b, "fs", command=command, args=args, sandbox="roots")
        try:
            assert conn.sandbox is not None and conn.sandbox.describe().startswith("sandboxed (roots;")
            read = await conn.call_tool("read_text_file", {"path": str((data / "notes.txt").resolve())})
            assert text_of(read) == "hello from the notebook\n"
            wrote = await conn.call_tool(
                "write_file", {"path": str((data / "new.txt").resolve()), "content": "x"}
            )
            assert wrote["isError"] is False, text_of(wrote)
            refused = await conn.call_tool(
                "write_file", {"path": str((ref / "r.txt").resolve()), "content": "overwritten"}
            )
            assert refused["isError"] is True and "EACCES" in text_of(refused)
            b.add_root(later, name="later")  # the server adopts it; the kernel was never told
            outside = await conn.call_tool("read_text_file", {"path": str((later / "l.txt").resolve())})
            assert outside["isError"] is True and "EACCES" in text_of(outside), text_of(outside)
        finally:
            await conn.aclose()
    assert (ref / "r.txt").read_text() == "reference"
    assert (data / "new.txt").read_text() == "x"


@pytest.mark.parametrize(
    ("sandbox", "advertise", "located"),
    [("roots", None, True), ("files", None, False), ("roots", False, False), (False, None, False)],
    ids=["roots", "files", "roots-withheld", "unconfined"],
)
async def test_by_default_only_a_server_confined_to_the_roots_is_told_where_they_are(
    broker: Broker, data: Path, sandbox: str | bool, advertise: bool | None, located: bool
) -> None:
    conn = await connect(
        broker,
        "snoop",
        command=SNOOPING[0],
        args=SNOOPING[1:],
        env=server_env(),
        sandbox=sandbox,
        advertise_roots=advertise,
    )
    try:
        told = await conn.call_tool("roots")
    finally:
        await conn.aclose()
    assert told["isError"] is False, text_of(told)
    path = str(data.resolve()) if located else None
    assert told["structuredContent"]["result"] == [{"name": "data", "path": path}]
    notice = conn.roots_offer.notice  # it asked, and used no files/*
    assert (notice is None) == located
    if sandbox == "files":
        assert notice is not None and "its sandbox lets it open none of your files itself" in notice.text
        assert notice.text.endswith("To let it open them itself: run it with sandbox='roots'.")


async def test_without_landlock_asking_is_an_error_and_a_default_is_a_warning(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    without_landlock.simulate(monkeypatch, "this kernel has no Landlock (test)")
    with pytest.raises(
        SandboxUnavailable, match=r"the sandbox was asked for, but this kernel has no Landlock"
    ):
        await connect(broker, "snoop", command=SNOOPING[0], args=SNOOPING[1:], env=server_env(), sandbox=True)
    default = choose(None, default=Sandbox())
    conn = await connect(
        broker, "snoop", command=SNOOPING[0], args=SNOOPING[1:], env=server_env(), sandbox=default
    )
    try:
        assert conn.sandbox is not None and not conn.sandbox.confined
        assert conn.sandbox.describe().startswith(
            "not sandboxed (sandbox unavailable: this kernel has no Landlock"
        )
        assert text_of(await conn.call_tool("open_directly", {"path": "/etc/hostname"})) == "ok"
    finally:
        await conn.aclose()
    assert [r.getMessage() for r in caplog.records if "without the default sandbox" in r.getMessage()]


async def test_a_url_cannot_be_sandboxed(broker: Broker) -> None:
    with pytest.raises(ValueError, match="confines local servers"):
        await connect(broker, "remote", url="http://127.0.0.1:9/mcp", sandbox=True)


async def test_a_launcher_that_cannot_confine_says_why_in_the_connect_error(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Landlock gone between the broker's check and the start: the server never runs, the user reads why."""
    from jupyter_fsbroker.protocol import ConnectError
    from jupyter_fsbroker.sandbox import launch

    real = launch.launcher_command
    reason = "gone since the check (test)"

    def without(policy: str, command: Sequence[str]) -> list[str]:
        return without_landlock.launcher(reason, real(policy, command))

    monkeypatch.setattr(launch, "launcher_command", without)
    with pytest.raises(
        ConnectError, match=r"jupyter-fsbroker sandbox: Landlock is unavailable, the server was not"
    ) as info:
        await connect(broker, "snoop", command=SNOOPING[0], args=SNOOPING[1:], env=server_env(), sandbox=True)
    assert reason in str(info.value)


async def test_the_private_folder_goes_when_the_server_is_killed(broker: Broker) -> None:
    import signal

    conn = await connect(
        broker, "snoop", command=SNOOPING[0], args=SNOOPING[1:], env=server_env(), sandbox=True
    )
    try:
        where = (await conn.call_tool("where", {}))["structuredContent"]
        os.kill(where["pid"], signal.SIGKILL)
        with anyio.fail_after(30):
            await conn.wait_closed()
    finally:
        await conn.aclose()
    assert not os.path.exists(where["tmpdir"])
    assert not os.path.exists(os.path.dirname(where["tmpdir"]))
