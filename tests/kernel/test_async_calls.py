"""``await conn.acall_tool(...)`` in a real kernel: cancelling the awaiting task cancels the call.

The awaiting code sees ``CancelledError`` (asyncio's cancellation propagates,
it is not turned into another error), the server is told (its tool stops: the
watch it held on the broker ends long before the tool's own deadline), and the
connection and the broker go on serving the next call. Cancelled while the
server waits for the user's consent, the prompt is withdrawn, saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .conftest import analysis_kernel, shown_prompt
from .harness import Kernel


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    kernel = analysis_kernel(start_kernel)
    kernel.run("%fsbroker allow data read,watch")
    yield kernel


WATCHES = "len(broker.core.watches.watches())"


def test_cancelling_the_awaiting_task_raises_there_and_cancels_the_call_on_the_server(kernel: Kernel) -> None:
    kernel.run(
        "import asyncio\n"
        "seen = []\n"
        "async def watch_long():\n"
        "    try:\n"
        "        return await analysis.acall_tool('watch_changes', {'path': 'data', 'seconds': 120})\n"
        "    except BaseException as exc:\n"
        "        seen.append(type(exc).__name__)\n"
        "        raise\n"
        "watching = asyncio.ensure_future(watch_long())"
    )
    kernel.wait_for(lambda: kernel.value(WATCHES) == 1, 60, "the server to watch data/")
    kernel.run("watching.cancel()\ndone, _ = await asyncio.wait([watching], timeout=60)")
    assert kernel.value("watching.cancelled()"), kernel.value("seen")
    assert kernel.value("seen") == ["CancelledError"]
    # The server was told: its tool ends and gives its watch back, well before its 120 s.
    kernel.wait_for(lambda: kernel.value(WATCHES) == 0, 30, "the server's watch to end")
    # Its record follows the unwatch itself (the audit is written once the operation is done).
    recent = "[r.method for r in broker.core.audit.records() if r.server == 'analysis'][-2:]"
    kernel.wait_for(lambda: "files/unwatch" in kernel.value(recent), 30, "the unwatch's audit record")
    # Nothing else ended with it: the connection and the broker answer the next call.
    assert kernel.value("analysis.state") == "open"
    result = kernel.run(
        "listed = await analysis.acall_tool('list_files', {'path': 'data'})\n"
        "print(sorted(e['name'] for e in listed.data['entries']))"
    )
    assert "sales.csv" in result.stdout


def test_cancelling_while_consent_is_asked_withdraws_the_prompt_and_writes_nothing(kernel: Kernel) -> None:
    kernel.run("analysis.revoke()\n%config FSBroker.consent_timeout = 120")
    kernel.run(
        "import asyncio\n"
        "seen = []\n"
        "async def report():\n"
        "    try:\n"
        "        return await analysis.acall_tool('write_report', {'path': 'data/sales.csv'})\n"
        "    except BaseException as exc:\n"
        "        seen.append(type(exc).__name__)\n"
        "        raise\n"
        "reporting = asyncio.ensure_future(report())"
    )
    prompt = shown_prompt(kernel)  # write on data/sales.report.md is asked
    kernel.run("reporting.cancel()\ndone, _ = await asyncio.wait([reporting], timeout=60)")
    assert kernel.value("reporting.cancelled()") and kernel.value("seen") == ["CancelledError"]
    outcome = kernel.child(prompt, "fsbroker-consent-outcome")
    kernel.wait_for(
        lambda: "Withdrawn: the call was interrupted" in str(outcome.state.get("value", "")),
        30,
        "the prompt to say it was withdrawn",
    )
    assert kernel.value("broker.pending_consents()") == ()
    assert not (kernel.cwd / "data" / "sales.report.md").exists()
    assert kernel.value("analysis.state") == "open"
