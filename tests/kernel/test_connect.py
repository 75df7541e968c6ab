"""Connecting the kernel to the example server over stdio and Streamable HTTP, from Python and magics."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator

import pytest

from tests.support.env import REPO
from tests.support.servers import TOOLS as SERVER_TOOLS

from .conftest import ASK_BETWEEN_CELLS, STDIO_COMMAND, load
from .harness import Kernel, Widget

HANDSHAKE_VERSIONS = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
TOOLS = sorted(SERVER_TOOLS)
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    """The extension loaded, ``./data`` shared and pre-approved for reading (no consent needed)."""
    kernel = start_kernel()
    load(kernel)
    kernel.run("broker.allow('data', ops=('read',))")
    yield kernel


def describe(kernel: Kernel, name: str) -> dict[str, object]:
    out = kernel.run(
        f"c = broker.connection({name!r})\n"
        "print(repr(dict(transport=c.transport, state=c.state, version=c.protocol_version, "
        "server=c.server_name, tools=sorted(c.tool_names))))"
    )
    described: dict[str, object] = ast.literal_eval(out.stdout.strip())
    return described


def test_stdio_connection_lists_tools_and_calls_them(kernel: Kernel) -> None:
    connected = kernel.run(f"analysis = broker.connect('analysis', command={STDIO_COMMAND})")
    assert connected.stderr == ""
    card = kernel.wait_widget("fsbroker-connection")  # the one line under the connecting cell
    assert "Connected" in kernel.text_of(card) and "analysis" in kernel.text_of(card)
    info = describe(kernel, "analysis")
    assert info["transport"] == "stdio" and info["state"] == "open"
    assert info["version"] in HANDSHAKE_VERSIONS
    assert info["server"] == "jupyter-fsbroker-analysis" and info["tools"] == TOOLS
    out = kernel.run(
        "r = analysis.call_tool('profile_csv', {'path': 'data/sales.csv'})\nprint(r.data['rows'])"
    )
    assert out.stdout.strip() == "4"
    assert kernel.value("r.is_error") is False
    # What the server writes on its stderr stays out of the cells, and can be read on demand.
    failed = kernel.run(
        "r = analysis.call_tool('atomic_increment', {'path': '/etc/counter'}, raise_on_error=False)\n"
        "print(r.is_error)"
    )
    assert failed.stdout.strip() == "True" and failed.stderr == ""
    assert "atomic_increment" in kernel.value("analysis.server_log()")


def test_http_connection_with_headers_from_python_and_magics(kernel: Kernel, http_url: str) -> None:
    kernel.run(f"web = broker.connect('web', url={http_url!r}, headers={{'X-Notebook': 'test'}})")
    info = describe(kernel, "web")
    assert info["transport"] == "http" and info["state"] == "open" and info["tools"] == TOOLS
    assert kernel.value("web.call_tool('profile_csv', {'path': 'data/sales.csv'}).data['rows']") == 4

    kernel.run(f"%fsbroker connect web2 --url {http_url} --header 'Authorization: Bearer not-a-secret'")
    out = kernel.run('%fsbroker call web2 profile_csv {"path": "data/sales.csv"}')
    assert "'rows': 4" in out.text
    assert "Revoked 0 grants of web2" in kernel.run("%fsbroker revoke web2").stdout
    assert "Disconnected web2" in kernel.run("%fsbroker disconnect web2").stdout
    assert kernel.value("broker.connection('web2').state") == "closed"
    assert kernel.value("web.state") == "open"


def test_magics_connect_over_stdio_and_reconnecting_replaces(kernel: Kernel) -> None:
    command = " ".join(ast.literal_eval(STDIO_COMMAND))
    kernel.run(f'%fsbroker connect local --command "{command}"')
    kernel.run("first = broker.connection('local')")
    kernel.run(f'%fsbroker connect local --command "{command}"')  # re-running the cell
    assert kernel.value("first.state") == "closed"
    assert (
        kernel.value("broker.connection('local') is not first and broker.connection('local').state") == "open"
    )
    out = kernel.run("%fsbroker call local profile_csv")  # the tool fails: a missing argument
    assert "local: profile_csv reported an error" in out.stderr and out.result is None


def test_connection_problems_are_clear(kernel: Kernel) -> None:
    error = kernel.run_fail("broker.connect('nope', command=['/nonexistent/server'])")
    assert error["ename"] == "ConnectError" and "cannot start the server" in error["evalue"]
    error = kernel.run_fail("%fsbroker connect nope --command /nonexistent/server")
    assert error["ename"] == "UsageError"
    error = kernel.run_fail("broker.connect('nope', url='http://127.0.0.1:9/mcp', timeout=5)")
    assert error["ename"] == "ConnectError"


def test_progress_shows_while_a_call_reads_in_chunks(kernel: Kernel) -> None:
    rows = "\n".join(f"{i},north,{i % 97}" for i in range(240_000))
    (kernel.cwd / "data" / "big.csv").write_text("id,region,amount\n" + rows + "\n", encoding="utf-8")
    assert (kernel.cwd / "data" / "big.csv").stat().st_size > 3 * MiB
    kernel.run("analysis = broker.connection('analysis')")
    out = kernel.run("print(analysis.call_tool('profile_csv', {'path': 'data/big.csv'}).data['rows'])")
    assert out.stdout.strip() == "240000"
    progress = kernel.find_widgets("fsbroker-progress", open_only=False)
    assert progress, "no progress widget was shown"
    assert all(w.closed for w in progress), "the progress widget outlived its call"
    panels = kernel.find_widgets("fsbroker-call")
    assert any(f"IPY_MODEL_{progress[-1].comm_id}" in p.state.get("children", []) for p in panels)


def test_consent_outside_a_call_appears_under_the_connecting_cell(kernel: Kernel) -> None:
    kernel.run("analysis = broker.connection('analysis')\n" + ASK_BETWEEN_CELLS)  # no dashboard shown

    def prompt() -> Widget | None:
        for card in kernel.find_widgets("fsbroker-connection"):
            if "<b>analysis</b>" not in kernel.text_of(card):
                continue
            for widget in kernel.descendants(card):
                if "fsbroker-consent" in widget.classes:
                    return widget
        return None

    shown: Widget = kernel.wait_for(prompt, 30, "a consent prompt under the connecting cell")
    kernel.click(kernel.child(shown, "fsbroker-deny"))
    refusal = {"granted": False, "approvedPaths": [], "operations": []}
    assert kernel.value("asker.join(60) or answers[0]") == refusal


ROOTS_SERVER = repr(
    [sys.executable, str(REPO / "tests/protocol/servers/roots_server.py"), "--ask-after", "0"]
)
NOTICE = "late asked where the shared folders are (roots/list) and got only their names (data): "


def test_a_server_that_asks_where_the_folders_are_is_told_why_it_got_their_names_only(kernel: Kernel) -> None:
    cards = {card.comm_id for card in kernel.find_widgets("fsbroker-connection")}
    kernel.run(f"late = broker.connect('late', command={ROOTS_SERVER})")
    card = kernel.wait_widget("fsbroker-connection", exclude=cards)
    # The card says it under the connecting cell once the server has asked (it asks on its own time).
    kernel.wait_for(lambda: NOTICE in kernel.text_of(card), 30, "the notice on the connection card")
    assert "fsbroker-roots-notice" in kernel.text_of(card)
    assert kernel.value("late.roots_notice.withheld") == ("data",)
    status = str(kernel.value("broker.status()"))
    [line] = [line for line in status.splitlines() if NOTICE in line]
    assert line.startswith("    roots: ") and "advertise_roots=True" in line
    # Handed the locations, it gets them and there is nothing to say.
    kernel.run(f"told = broker.connect('told', command={ROOTS_SERVER}, advertise_roots=True)")
    assert kernel.value("told.call_tool('roots').data['applied']") == [
        (kernel.cwd / "data").resolve().as_uri()
    ]
    assert kernel.value("told.roots_notice") is None
    command = " ".join(ast.literal_eval(ROOTS_SERVER))
    out = kernel.run(f'%fsbroker connect magic --command "{command}" --advertise-roots')
    assert out.stderr == ""
    assert kernel.value("broker.connection('magic').call_tool('roots').data['asked']") == 1
    assert kernel.value("broker.connection('magic').roots_notice") is None
    for name in ("late", "told", "magic"):
        kernel.run(f"broker.disconnect({name!r})")
