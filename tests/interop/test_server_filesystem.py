"""jupyter_fsbroker as the client of the official filesystem server (npm: server-filesystem).

That server is started without directories, adopts the client's roots (they
replace its arguments), fetches them asynchronously after the handshake, and
opens files itself: it knows nothing of grants, read-only roots or the audit.
By default it is told the roots' names only, so it reaches none of them; the
user may hand it their locations (``advertise_roots``), and then it reads and
writes there with no grant and no audit record. These tests show both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import connect
from tests.interop.npm import NodeTools
from tests.support.brokers import make_broker
from tests.support.env import server_env

pytestmark = pytest.mark.anyio

CLI = [sys.executable, "-m", "jupyter_fsbroker", "connect"]

#: How many times the ``--call`` race is run; every run must pass.
RACE_RUNS = 10


def text_of(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return "\n".join(str(block.get("text", "")) for block in content)


def run_cli_call(
    tools: NodeTools, data: Path, tool: str, arguments: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI,
            "--root",
            f"data={data}",
            *options,
            "--call",
            tool,
            "--args",
            json.dumps(arguments),
            "--",
            *tools.server_filesystem,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **server_env()},
    )


def test_from_the_command_line_it_is_told_why_it_reaches_nothing(node_tools: NodeTools, data: Path) -> None:
    path = str((data / "notes.txt").resolve())
    run = run_cli_call(node_tools, data, "read_text_file", {"path": path})
    assert run.returncode == 1, run.stderr[-500:]  # the tool failed
    assert "hello from the notebook" not in run.stdout
    notices = [line for line in run.stderr.splitlines() if line.startswith("jupyter-fsbroker: ")]
    assert len(notices) == 1 and notices[0].startswith(
        "jupyter-fsbroker: secure-filesystem-server asked where the shared folders are (roots/list) "
        "and got only their names (data): "
    ), run.stderr[-1000:]
    assert "--advertise-roots" in notices[0]


def test_connect_call_never_races_the_servers_roots(node_tools: NodeTools, data: Path) -> None:
    """``jupyter-fsbroker connect --advertise-roots --call`` right after the handshake: roots in force.

    The race is that of a server handed the roots' locations: it applies them itself.
    """
    path = str((data / "notes.txt").resolve())
    with ThreadPoolExecutor(2) as pool:
        runs = list(
            pool.map(
                lambda _: run_cli_call(
                    node_tools, data, "read_text_file", {"path": path}, "--advertise-roots"
                ),
                range(RACE_RUNS),
            )
        )
    failures = [(run.returncode, run.stdout[-300:], run.stderr[-300:]) for run in runs if run.returncode != 0]
    assert failures == [], f"{len(failures)} of {RACE_RUNS} runs failed: {failures[:2]}"
    for run in runs:
        assert json.loads(run.stdout)["content"][0]["text"] == "hello from the notebook\n"
    # The server's stderr reached the user, one line each under its name; it needed no notice.
    assert "[secure-filesystem-server] Secure MCP Filesystem Server running on stdio" in runs[0].stderr
    assert "got only their names" not in runs[0].stderr


async def test_by_default_it_learns_no_location_and_cannot_read_the_shared_folder(
    node_tools: NodeTools, broker: Broker, data: Path
) -> None:
    """The default: the roots' names only, so a server that opens files itself reaches none of them."""
    conn = await connect(
        broker, "fs", command=node_tools.server_filesystem[0], args=node_tools.server_filesystem[1:]
    )
    try:
        read = await conn.call_tool("read_text_file", {"path": str((data / "notes.txt").resolve())})
        allowed = text_of(await conn.call_tool("list_allowed_directories", {}))
    finally:
        await conn.aclose()
    assert read["isError"] is True and "hello from the notebook" not in text_of(read), text_of(read)
    assert str(data.resolve()) not in allowed
    assert list(broker.audit.records()) == []  # it sent no files/* request: nothing was asked of us
    notice = conn.roots_offer.notice
    assert notice is not None and notice.withheld == ("data",)
    assert "fs asked where the shared folders are (roots/list) and got only their names" in notice.text
    assert "advertise_roots=True" in notice.text and "sandbox='roots'" in notice.text


async def test_handed_the_locations_it_reads_the_shared_folder_itself_with_no_grant(
    node_tools: NodeTools, broker: Broker, data: Path
) -> None:
    """The opt-in, and its cost: the server opens the files itself, bypassing grants and the audit."""
    conn = await connect(
        broker,
        "fs",
        command=node_tools.server_filesystem[0],
        args=node_tools.server_filesystem[1:],
        advertise_roots=True,
    )
    try:
        read = await conn.call_tool("read_text_file", {"path": str((data / "notes.txt").resolve())})
    finally:
        await conn.aclose()
    assert read["isError"] is False and text_of(read) == "hello from the notebook\n"
    assert broker.grants.grants() == () and list(broker.audit.records()) == []
    assert conn.roots_offer.notice is None


async def test_roots_are_adopted_and_list_changed_is_honoured(
    node_tools: NodeTools, broker: Broker, data: Path, tmp_path: Path
) -> None:
    more = tmp_path / "more"
    more.mkdir()
    (more / "m.txt").write_text("more")
    conn = await connect(
        broker,
        None,
        command=node_tools.server_filesystem[0],
        args=node_tools.server_filesystem[1:],
        advertise_roots=True,  # what it adopts are the roots' locations
    )
    try:
        assert conn.name == "secure-filesystem-server"
        allowed = text_of(await conn.call_tool("list_allowed_directories", {}))
        assert str(data.resolve()) in allowed and str(more.resolve()) not in allowed
        broker.add_root(more, name="more")
        read = await conn.call_tool("read_text_file", {"path": str((more / "m.txt").resolve())})
        assert read["isError"] is False and text_of(read) == "more"
        broker.remove_root("more")
        gone = await conn.call_tool("read_text_file", {"path": str((more / "m.txt").resolve())})
        assert gone["isError"] is True and "outside allowed directories" in text_of(gone)
    finally:
        await conn.aclose()
    assert any("Updated allowed directories" in e.text for e in conn.log.entries())


async def test_a_read_only_root_is_not_handed_to_it_with_the_others(
    node_tools: NodeTools, broker: Broker, tmp_path: Path
) -> None:
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "r.txt").write_text("reference")
    broker.add_root(ref, name="ref", read_only=True)
    conn = await connect(
        broker,
        "fs",
        command=node_tools.server_filesystem[0],
        args=node_tools.server_filesystem[1:],
        advertise_roots=True,  # the read-write roots' locations go out; the read-only one's does not
    )
    try:
        allowed = text_of(await conn.call_tool("list_allowed_directories", {}))
        assert str(ref.resolve()) not in allowed
        wrote = await conn.call_tool("write_file", {"path": str(ref / "r.txt"), "content": "overwritten"})
        assert wrote["isError"] is True
    finally:
        await conn.aclose()
    assert (ref / "r.txt").read_text() == "reference"


async def test_where_read_only_roots_are_advertised_it_can_write_them(
    node_tools: NodeTools, tmp_path: Path
) -> None:
    """The limit the README states: a server that opens files itself is bounded by the OS, not by us."""
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "r.txt").write_text("reference")
    with make_broker(tmp_path, advertise_roots=True, advertise_read_only_roots=True) as b:
        b.add_root(ref, name="ref", read_only=True)
        conn = await connect(
            b, "fs", command=node_tools.server_filesystem[0], args=node_tools.server_filesystem[1:]
        )
        try:
            wrote = await conn.call_tool("write_file", {"path": str(ref / "r.txt"), "content": "overwritten"})
        finally:
            await conn.aclose()
        assert wrote["isError"] is False
        assert (ref / "r.txt").read_text() == "overwritten"
        assert list(b.audit.records()) == []  # nothing went through files/*: nothing was audited
