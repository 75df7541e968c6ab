"""Consent while a cell runs: clicks on a subshell, on the main shell, stdin, timeout, interrupt.

Each test makes the example server ask for consent by calling ``profile_csv`` on
a file no grant covers; ``analysis.revoke()`` between tests makes it ask again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from .conftest import PROFILE, PROFILE_RAW, analysis_kernel, shown_prompt
from .harness import Kernel, Widget


@pytest.fixture(scope="module")
def kernel(start_kernel: Callable[..., Kernel]) -> Iterator[Kernel]:
    """A kernel with the extension loaded, ``./data`` shared and the example server over stdio."""
    yield analysis_kernel(start_kernel)


def outcome(kernel: Kernel, prompt: Widget, timeout: float = 10.0) -> str:
    """What the prompt says was decided, once it says it."""
    box = kernel.child(prompt, "fsbroker-consent-outcome")
    text: str = kernel.wait_for(lambda: box.state.get("value"), timeout, "the prompt's outcome")
    return text


@pytest.mark.usefixtures("fresh_grants")
def test_sync_call_is_unblocked_by_a_click_on_a_subshell(kernel: Kernel) -> None:
    subshell = kernel.create_subshell()  # what JupyterLab does for the widget comm target
    cell = kernel.submit(f"result = {PROFILE}\nprint(result.data['rows'])")
    prompt = shown_prompt(kernel)
    assert not cell.done, "the cell should be blocked in call_tool"
    kernel.click(kernel.child(prompt, "fsbroker-approve"), subshell_id=subshell)
    kernel.wait(cell).check()
    # The click answered, not the consent timeout (120 s): that one denies, and the call raises.
    assert cell.stdout.strip() == "4"
    assert "Approved read on data/sales.csv" in outcome(kernel, prompt)


@pytest.mark.usefixtures("fresh_grants")
def test_async_call_is_unblocked_by_a_click_on_the_main_shell(kernel: Kernel) -> None:
    cell = kernel.submit(
        "result = await analysis.acall_tool('profile_csv', {'path': 'data/sales.csv'})\n"
        "print(result.data['rows'])"
    )
    prompt = shown_prompt(kernel)
    assert not cell.done
    kernel.click(kernel.child(prompt, "fsbroker-approve"))  # no subshell: the main shell, busy awaiting
    kernel.wait(cell, 30).check()
    assert cell.stdout.strip() == "4"


@pytest.mark.usefixtures("fresh_grants")
def test_no_answer_is_denied_at_the_timeout_and_the_cell_returns(kernel: Kernel) -> None:
    kernel.run("%config FSBroker.consent_timeout = 3")
    started = time.monotonic()
    cell = kernel.submit(f"result = {PROFILE_RAW}\nprint(result.is_error, result.text)")
    prompt = shown_prompt(kernel)
    kernel.wait(cell, 60).check()  # well before the default timeout (120 s): the configured one applied
    elapsed = time.monotonic() - started
    assert elapsed > 2.5, elapsed  # it waited for the 3 s timeout
    assert cell.stdout.startswith("True"), cell.stdout
    assert "Timed out" in outcome(kernel, prompt)
    decisions = kernel.value(
        "[(r.method, r.decision, r.reason) for r in broker.core.audit.records() "
        "if r.method == 'files/consent'][-1:]"
    )
    assert decisions == [("files/consent", "deny", "consent_refused")]


@pytest.mark.usefixtures("fresh_grants")
def test_interrupt_cancels_a_blocked_call(kernel: Kernel) -> None:
    cell = kernel.submit(f"result = {PROFILE}")
    prompt = shown_prompt(kernel)
    kernel.interrupt()
    kernel.wait(cell, 30)
    assert cell.failure is not None and cell.failure["ename"] == "CallInterrupted"  # a KeyboardInterrupt
    assert "Withdrawn: the call was interrupted" in outcome(kernel, prompt)
    assert kernel.value("analysis.state") == "open"  # the connection survives a cancelled call
    assert kernel.value("broker.core.connections()[0].grants() == ()")


def test_stdin_answers_where_clicks_cannot_arrive(start_kernel: Callable[..., Kernel]) -> None:
    kernel = analysis_kernel(
        start_kernel
    )  # no subshell: a frontend that cannot deliver clicks to a busy kernel
    cell = kernel.submit(f"result = {PROFILE}\nprint(result.data['rows'])", allow_stdin=True)
    shown_prompt(kernel)  # the widget still shows, for frontends that render it
    request = kernel.wait_stdin_request()
    prompt = request["content"]["prompt"]
    assert "analysis asks for access" in prompt and "data/sales.csv" in prompt and "[y]es" in prompt
    kernel.answer_stdin("y")
    kernel.wait(cell, 30).check()
    assert cell.stdout.strip().endswith("4")
    assert "(approved read on data/sales.csv)" in cell.stdout

    # A refusal on stdin, then the next request times out while the text box waits: the cell returns.
    kernel.run("analysis.revoke()")
    cell = kernel.submit(f"result = {PROFILE_RAW}\nprint(result.is_error)", allow_stdin=True)
    kernel.wait_stdin_request()
    kernel.answer_stdin("n")
    kernel.wait(cell, 30).check()
    assert "(denied)" in cell.stdout and cell.stdout.strip().endswith("True")
    kernel.run("analysis.revoke()\n%config FSBroker.consent_timeout = 4")
    cell = kernel.submit(f"result = {PROFILE_RAW}\nprint(result.is_error)", allow_stdin=True)
    kernel.wait_stdin_request()
    kernel.wait(cell, 30).check()
    assert "(no answer in time: denied)" in cell.stdout and cell.stdout.strip().endswith("True")
