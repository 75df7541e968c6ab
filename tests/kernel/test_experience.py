"""What a data scientist meets in a real kernel: per-path consent, refusals that say why, results
and tools for people, and a lifecycle that says what it did (stale views, lost comms, reload)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.env import server_env

from .conftest import PROFILE, analysis_kernel, shown_prompt
from .harness import Kernel

pytestmark = pytest.mark.usefixtures("fresh_grants")


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    yield analysis_kernel(start_kernel, pythonpath=True)


@pytest.fixture
def subshell(kernel: Kernel) -> str:
    return kernel.create_subshell()


def test_write_is_granted_on_the_report_only(kernel: Kernel, subshell: str) -> None:
    cell = kernel.submit(
        "r = analysis.call_tool('write_report', {'path': 'data/sales.csv'})\nprint(r.data['rows'])"
    )
    prompt = shown_prompt(kernel)
    boxes = {
        (kernel.text_of(w), cls)
        for w in kernel.descendants(prompt)
        for cls in ("fsbroker-op-read", "fsbroker-op-write")
        if cls in w.classes and "fsbroker-consent-op" in w.classes
    }
    assert boxes == {("read", "fsbroker-op-read"), ("write", "fsbroker-op-write")}  # one per path, as asked
    kernel.click(kernel.child(prompt, "fsbroker-approve"), subshell_id=subshell)
    kernel.wait(cell, 60).check()
    assert cell.stdout.strip() == "4"
    grants = kernel.value("sorted((g.path, g.operations) for g in analysis.grants())")
    assert grants == [("data/sales.csv", ("read",)), ("data/sales.report.md", ("write",))]
    assert kernel.value("open('data/sales.report.md').read().startswith('#')")


def test_a_denied_consent_raises_a_tool_error_that_says_so(kernel: Kernel, subshell: str) -> None:
    cell = kernel.submit(PROFILE)
    kernel.click(kernel.child(shown_prompt(kernel), "fsbroker-deny"), subshell_id=subshell)
    kernel.wait(cell, 60)
    failure = cell.failure
    assert failure is not None and failure["ename"] == "ToolError"
    assert failure["evalue"] == "analysis · profile_csv was refused: you denied read on data/sales.csv"


def test_a_timed_out_prompt_says_so_in_the_cell(kernel: Kernel) -> None:
    kernel.run("%config FSBroker.consent_timeout = 2")
    cell = kernel.submit(PROFILE)
    prompt = shown_prompt(kernel)
    kernel.wait(cell, 60)
    assert cell.failure is not None and "timed out" in cell.failure["evalue"]
    assert "consent request for data/sales.csv timed out after 2 s" in cell.stderr
    outcome = kernel.child(prompt, "fsbroker-consent-outcome")
    assert "Timed out" in kernel.wait_for(lambda: outcome.state.get("value"), 60, "the outcome")


def test_results_and_tools_display_for_people(kernel: Kernel) -> None:
    kernel.run("broker.allow('data/sales.csv', ops=('read',))")
    try:
        shown = kernel.run(PROFILE, 60)
        magic = kernel.run('%fsbroker call analysis profile_csv {"path": "data/sales.csv"}', 60)
    finally:
        kernel.run("broker.revoke('data/sales.csv')")
    assert shown.result is not None
    assert "'rows': 4" in shown.result["text/plain"]  # what %fsbroker call prints
    assert "fsbroker-result" in shown.result["text/html"] and "content" not in shown.result["text/plain"]
    assert magic.result is not None

    def same(text: str) -> list[str]:  # the two calls took different times
        return [line for line in text.splitlines() if "'seconds'" not in line]

    assert same(magic.result["text/plain"]) == same(shown.result["text/plain"])
    tools = kernel.run("analysis.tools").result
    assert (
        tools is not None and "fsbroker-tools" in tools["text/html"] and "write_report" in tools["text/html"]
    )
    signature = "profile_csv(path: string, engine?: string)"
    assert signature in tools["text/plain"]
    assert kernel.value("analysis.tools['profile_csv'].signature()") == signature


def test_a_consent_can_be_answered_from_elsewhere(kernel: Kernel, subshell: str) -> None:
    cell = kernel.submit(f"print({PROFILE}.data['rows'])")
    shown_prompt(kernel)
    snapshot = kernel.wait(
        kernel.submit("print(broker.snapshot()['pending'][0]['server'])", subshell_id=subshell), 30
    ).check()
    assert snapshot.stdout.strip() == "analysis"
    kernel.wait(
        kernel.submit("broker.answer_consent(broker.pending_consents()[0].id, True)", subshell_id=subshell),
        30,
    ).check()
    kernel.wait(cell, 60).check()
    assert cell.stdout.strip() == "4"


def test_a_dashboard_closed_by_a_frontend_is_noticed_and_replaced(kernel: Kernel) -> None:
    kernel.run("broker.dashboard()")
    dash = kernel.wait_widget("fsbroker-dashboard")
    # What Notebook 7's file browser tab does with a widget it cannot open: it closes its comm.
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_close", {"comm_id": dash.comm_id, "data": {}}))
    after = kernel.run("1 + 1")
    assert "a frontend closed the widgets of the dashboard" in after.stderr
    assert "%fsbroker disconnect NAME" in after.stderr
    kernel.run("broker.dashboard()")
    fresh = kernel.wait_widget("fsbroker-dashboard", exclude={dash.comm_id})
    assert fresh.comm_id != dash.comm_id


def test_the_importable_extension_does_not_import_mcp() -> None:
    code = "import sys, jupyter_fsbroker.kernel.extension\nprint('mcp' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, **server_env()},
    )
    assert out.stdout.strip() == "False"


def test_reload_says_what_it_closed_and_keeps_the_folders(start_kernel: Callable[..., Kernel]) -> None:
    kernel = analysis_kernel(start_kernel, pythonpath=True)
    kernel.run("broker.dashboard()")
    dash = kernel.wait_widget("fsbroker-dashboard")
    out = kernel.run("%reload_ext jupyter_fsbroker", 60)
    assert "closed 1 connection (analysis)" in out.stdout
    assert "nothing is shared until the next %load_ext, which shares the folder data again" in out.stdout
    assert "kept" not in out.stdout  # the files are the user's: only the list of folders is remembered
    assert kernel.value("[r.name for r in fsb.get_broker().roots]") == ["data"]
    kernel.wait_for(
        lambda: any("Stale" in str(w.state.get("value", "")) for w in kernel.descendants(dash)),
        30,
        "the old dashboard to say it is stale",
    )
    assert not dash.closed  # it stays on the page, marked stale


def _short(failure: dict[str, Any] | None) -> list[str]:
    """The lines a frontend shows for an error, without their ANSI styles; a few, with no frames."""
    assert failure is not None
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in failure["traceback"]]
    assert len(lines) <= 3, lines
    assert not any("jupyter_fsbroker" in line or "File " in line for line in lines), lines
    assert lines[-1] == "(the full traceback: %fsbroker why)"
    return lines


def test_a_refused_tool_is_a_short_message_and_why_has_the_traceback(kernel: Kernel, subshell: str) -> None:
    cell = kernel.submit(PROFILE)
    kernel.click(kernel.child(shown_prompt(kernel), "fsbroker-deny"), subshell_id=subshell)
    kernel.wait(cell, 60)
    lines = _short(cell.failure)
    assert lines[0] == "ToolError: analysis · profile_csv was refused: you denied read on data/sales.csv"
    why = kernel.run("%fsbroker why").stdout
    assert "notebook_connection.py" in why and "ToolError" in why


def test_missing_arguments_are_named_without_a_validation_dump(kernel: Kernel) -> None:
    cell = kernel.wait(kernel.submit("analysis.call_tool('profile_csv', {})"), 60)
    lines = _short(cell.failure)
    assert lines[0] == (
        "ToolError: analysis · profile_csv failed: missing argument `path` (see `conn.tools['profile_csv']`)"
    )


def test_an_unreachable_url_is_a_short_message(kernel: Kernel) -> None:
    cell = kernel.wait(kernel.submit("broker.connect('far', url='http://127.0.0.1:9/mcp', timeout=10)"), 60)
    lines = _short(cell.failure)
    assert lines[0].startswith("ConnectError: cannot reach the server of 'far' at http://127.0.0.1:9/mcp: ")
    assert lines[0].count("ConnectError") == 1


def test_an_interrupted_consent_wait_is_a_short_message(kernel: Kernel) -> None:
    cell = kernel.submit(PROFILE)
    shown_prompt(kernel)
    kernel.interrupt()
    kernel.wait(cell, 60)
    lines = _short(cell.failure)
    assert lines[0] == "CallInterrupted: analysis · profile_csv was interrupted and cancelled"
    assert kernel.value("isinstance(__import__('sys').last_value, KeyboardInterrupt)")


def test_bare_and_misspelt_magics_list_the_commands(kernel: Kernel) -> None:
    bare = kernel.wait(kernel.submit("%fsbroker"), 30)
    assert bare.failure is not None and "::" not in bare.stderr
    assert "%fsbroker connect" in bare.stderr and "%fsbroker why" in bare.stderr
    typo = kernel.wait(kernel.submit("%fsbroker conect"), 30)
    assert "Did you mean `connect`?" in typo.stderr


def test_a_profile_is_a_table_and_a_dataframe(kernel: Kernel) -> None:
    kernel.run("broker.allow('data/sales.csv', ops=('read',))")
    try:
        shown = kernel.run(f"r = {PROFILE}\nr", 60)
        frame = kernel.value(
            "(lambda f: (list(f.columns)[:2], list(f['name']), int(f['missing'].sum())))(r.to_pandas())"
        )
        audit = kernel.value(
            "(lambda a: (type(a).__name__, a[-1].method, a[-1].path, a[-1].decision,"
            " list(a.to_pandas().columns)[:3], str(a.to_pandas()['time'].dtype)))"
            "(broker.audit('analysis', limit=1))"
        )
    finally:
        kernel.run("broker.revoke('data/sales.csv')")
    assert shown.result is not None
    page = shown.result["text/html"]
    assert "fsbroker-result-table" in page and "profile_csv → result · columns" in page
    assert '<td style="padding:1px 10px 1px 0;vertical-align:top;text-align:left">region</td>' in page
    assert frame == (["name", "type"], ["region", "amount"], 1)
    assert audit[:4] == ("AuditRecords", "files/read", "data/sales.csv", "allow")
    assert audit[4] == ["time", "server", "connection_id"] and audit[5] == "datetime64[ns, UTC]"
    assert kernel.value("all(r.server == 'analysis' for r in broker.audit(analysis))")
    assert kernel.value("len(broker.audit(limit=0))") == 0


def test_a_connection_shows_as_a_card(kernel: Kernel) -> None:
    shown = kernel.run("analysis")
    assert shown.result is not None
    page, text = shown.result["text/html"], shown.result["text/plain"]
    assert 'class="fsbroker-connection-card"' in page and "<strong>analysis</strong>" in page
    assert "jupyter-fsbroker-analysis" in page and "stdio" in page and ">open<" in page
    assert text.startswith("analysis: a connection to an MCP server\n") and "<KernelConnection" not in text
    assert re.search(r"^  state\s+open$", text, re.MULTILINE), text


def test_pre_approving_a_change_in_a_read_only_folder_says_why_it_cannot(kernel: Kernel) -> None:
    kernel.run("import os\nos.makedirs('ref', exist_ok=True)\n%fsbroker root ref=./ref --read-only")
    try:
        error = kernel.run_fail("%fsbroker allow ref write")
        assert error["ename"] == "UsageError"
        assert error["evalue"].startswith("ref is shared read-only, so write on ref cannot take effect")
        error = kernel.run_fail("broker.allow('ref', 'read,delete')")
        assert error["ename"] == "ConfigError" and "so delete on ref cannot take effect" in error["evalue"]
        assert kernel.value("[g.path for g in broker.grants() if g.path.startswith('ref')]") == []
    finally:
        kernel.run("%fsbroker unroot ref")
