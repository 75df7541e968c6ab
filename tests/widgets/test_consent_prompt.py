"""The consent prompt: narrowing, answers, timeouts, withdrawal, its countdown thread, and races."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import ConsentDecision, ConsentItem
from jupyter_fsbroker.core.errors import PermissionDenied
from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt

from .conftest import (
    WAIT,
    PromptConsenter,
    countdown_threads,
    join_all,
    make_broker,
    make_request,
)


def _prompt(**kwargs: Any) -> tuple[ConsentPrompt, Future[ConsentDecision]]:
    future: Future[ConsentDecision] = Future()
    return ConsentPrompt(make_request(**kwargs), future), future


def _controls(prompt: ConsentPrompt) -> list[Any]:
    return [*prompt.checkboxes, *prompt.op_toggles.values(), prompt.duration]


def test_prompt_shows_the_request() -> None:
    prompt, _ = _prompt(message="<script>alert(1)</script> profile")
    assert "fsbroker-consent" in prompt._dom_classes
    assert "fsbroker-approve" in prompt.approve_button._dom_classes
    assert "fsbroker-deny" in prompt.deny_button._dom_classes
    assert "<b>analysis</b>" in prompt.header.value
    assert "&lt;script&gt;" in prompt.header.value and "<script>" not in prompt.header.value
    # Every requested path is shown; only approvable ones can be checked.
    assert [box.description for box in prompt.checkboxes] == [
        "data/sales",
        "/home/ana/config.json",
        "data/.env",
        "ref/tables",
    ]
    assert [box.disabled for box in prompt.checkboxes] == [False, True, True, False]
    assert [box.value for box in prompt.checkboxes] == [True, False, False, True]
    notes = " ".join(row.children[1].value for row in prompt.children[1:5])
    assert "outside the shared folders" in notes
    assert "sensitive" in notes
    assert "read-only folder" in notes
    assert list(prompt.op_toggles) == ["read", "write"]
    labels = [label for label, _ in prompt.duration.options]
    assert labels == ["until you disconnect analysis", "15 min", "1 h"]
    assert "refused automatically in" in prompt.countdown.value and "2:00" in prompt.countdown.value
    assert prompt.outcome_text == ""
    assert not prompt.approve_button.disabled and not prompt.deny_button.disabled
    prompt.close()


def test_prompt_shows_server_strings_safely() -> None:
    future: Future[ConsentDecision] = Future()
    request = make_request(message="look \u202eexe.txt\x1b[2J")
    spoof = ConsentItem("data/\u202ecod.exe", "data/\u202ecod.exe", True)
    request = dataclasses.replace(request, items=(spoof, *request.items))
    prompt = ConsentPrompt(request, future)
    assert "\u202e" not in prompt.header.value and "\x1b" not in prompt.header.value
    assert "look \\u202eexe.txt\\x1b[2J" in prompt.header.value
    assert prompt.checkboxes[0].description == "data/\\u202ecod.exe"
    prompt.approve_button.click()
    assert future.result(0).approved_paths[0] == "data/\u202ecod.exe"  # the path as the server wrote it
    prompt.close()


def test_approve_with_narrowed_paths_operations_and_duration() -> None:
    prompt, future = _prompt()
    prompt.checkboxes[3].value = False  # not ref/tables
    prompt.op_toggles["write"].value = False
    prompt.duration.value = 900
    prompt.approve_button.click()
    assert future.result(0) == ConsentDecision(("data/sales",), ("read",), 900.0)
    assert prompt.outcome_text == "Approved read on data/sales for 15 min"
    assert all(control.disabled for control in _controls(prompt))
    assert prompt.approve_button.disabled and prompt.deny_button.disabled
    assert prompt.countdown.value == ""
    prompt.close()


def test_approve_everything_for_the_connection() -> None:
    prompt, future = _prompt()
    prompt.approve_button.click()
    assert future.result(0) == ConsentDecision(("data/sales", "ref/tables"), ("read", "write"), None)
    assert prompt.outcome_text == "Approved read, write on data/sales, ref/tables for this connection"
    prompt.close()


def test_one_hour() -> None:
    prompt, future = _prompt()
    prompt.duration.value = 3600
    prompt.approve_button.click()
    assert future.result(0).duration == 3600.0
    assert prompt.outcome_text.endswith("for 1 h")
    prompt.close()


def test_default_duration() -> None:
    future: Future[ConsentDecision] = Future()
    prompt = ConsentPrompt(make_request(), future, default_duration=900)
    assert prompt.duration.value == 900
    prompt.close()


def test_deny() -> None:
    prompt, future = _prompt()
    prompt.deny_button.click()
    assert future.result(0) == ConsentDecision.deny()
    assert prompt.outcome_text == "Denied"
    assert all(control.disabled for control in _controls(prompt))
    # A later click changes nothing.
    prompt.approve_button.click()
    assert future.result(0) == ConsentDecision.deny()
    prompt.close()


def test_paths_that_are_not_approvable_are_never_approved() -> None:
    prompt, future = _prompt()
    # Even if a frontend (or a test) checks them, they do not count.
    prompt.checkboxes[1].value = True
    prompt.checkboxes[2].value = True
    prompt.approve_button.click()
    assert future.result(0).approved_paths == ("data/sales", "ref/tables")
    prompt.close()


def test_approve_is_disabled_when_nothing_is_chosen() -> None:
    prompt, future = _prompt()
    prompt.checkboxes[0].value = False
    prompt.checkboxes[3].value = False
    assert prompt.approve_button.disabled
    prompt.approve_button.click()  # a stray click (e.g. a programmatic one) does nothing
    assert not future.done()
    prompt.checkboxes[0].value = True
    prompt.op_toggles["read"].value = False
    prompt.op_toggles["write"].value = False
    assert prompt.approve_button.disabled
    prompt.op_toggles["read"].value = True
    assert not prompt.approve_button.disabled
    prompt.deny_button.click()
    assert future.result(0) == ConsentDecision.deny()
    prompt.close()


def test_operations_can_only_be_narrowed() -> None:
    prompt, future = _prompt(operations=("read",))
    assert list(prompt.op_toggles) == ["read"]
    prompt.approve_button.click()
    assert future.result(0).operations == ("read",)
    prompt.close()


def test_timeout_shows_timed_out_and_later_clicks_do_nothing() -> None:
    prompt, future = _prompt(timeout=120.0, created_at=time.time() - 121.0)
    assert "time is up" in prompt.countdown.value
    assert future.cancel()  # what the broker does at the deadline
    assert prompt.outcome_text == "Timed out — denied"
    prompt.approve_button.click()
    prompt.deny_button.click()
    assert future.cancelled()
    assert all(control.disabled for control in _controls(prompt))
    prompt.close()


def test_cancellation_before_the_deadline_is_a_withdrawal() -> None:
    prompt, future = _prompt()
    future.cancel()  # the connection closed
    assert prompt.outcome_text.startswith("Withdrawn")
    prompt.approve_button.click()
    assert future.cancelled()
    prompt.close()


def test_a_future_resolved_elsewhere_is_shown() -> None:
    prompt, future = _prompt()
    future.set_result(ConsentDecision(("data/sales",), ("read",), None))  # e.g. the stdin fallback
    assert prompt.outcome_text == "Approved read on data/sales for this connection"
    prompt.close()


def test_a_prompt_for_a_finished_future_starts_no_thread() -> None:
    before = set(threading.enumerate())
    future: Future[ConsentDecision] = Future()
    future.cancel()
    request = make_request()
    prompt = ConsentPrompt(request, future)
    assert prompt.outcome_text.startswith("Withdrawn")
    assert countdown_threads(request) == []
    prompt.close()
    assert set(threading.enumerate()) <= before


def test_the_countdown_ticks() -> None:
    prompt, _ = _prompt(timeout=120.4)
    ticked = threading.Event()
    first = prompt.countdown.value
    prompt.countdown.observe(lambda change: ticked.set(), names="value")
    assert ticked.wait(WAIT)
    assert prompt.countdown.value != first
    prompt.close()


def test_the_countdown_thread_stops_when_the_future_is_done() -> None:
    before = set(threading.enumerate())
    prompt, _ = _prompt()
    ticker = countdown_threads(prompt.request)
    assert len(ticker) == 1 and ticker[0].daemon
    prompt.deny_button.click()
    join_all(ticker)
    assert set(threading.enumerate()) == before
    prompt.close()


def test_the_countdown_thread_stops_at_close() -> None:
    before = set(threading.enumerate())
    prompt, future = _prompt()
    assert countdown_threads(prompt.request)
    prompt.close()  # joins it
    assert countdown_threads(prompt.request) == []
    assert set(threading.enumerate()) == before
    assert not future.done()  # close does not answer: the broker's timeout still does
    prompt.close()  # idempotent


def test_the_countdown_thread_stops_at_the_deadline() -> None:
    prompt, future = _prompt(timeout=0.2)
    join_all(countdown_threads(prompt.request))
    assert "time is up" in prompt.countdown.value
    assert not future.done()  # the broker, not the view, decides what the timeout means
    future.cancel()
    assert prompt.outcome_text == "Timed out — denied"
    prompt.close()


class _CountingFuture(Future[ConsentDecision]):
    def __init__(self) -> None:
        super().__init__()
        self.resolutions = 0
        self._count = threading.Lock()

    def set_result(self, result: ConsentDecision) -> None:
        super().set_result(result)  # raises InvalidStateError for every answer but the first
        with self._count:
            self.resolutions += 1


@pytest.mark.parametrize("round_", range(5))
def test_clicks_from_eight_threads_resolve_the_future_exactly_once(round_: int) -> None:
    future = _CountingFuture()
    prompt = ConsentPrompt(make_request(), future)
    callbacks: list[object] = []
    future.add_done_callback(callbacks.append)
    barrier = threading.Barrier(8)

    def click(i: int) -> None:
        barrier.wait(WAIT)
        (prompt.approve_button if i % 2 else prompt.deny_button).click()

    threads = [threading.Thread(target=click, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    join_all(threads)
    assert future.resolutions == 1
    assert len(callbacks) == 1
    decision = future.result(0)
    assert decision in (
        ConsentDecision.deny(),
        ConsentDecision(("data/sales", "ref/tables"), ("read", "write")),
    )
    assert prompt.outcome_text.startswith("Approved" if decision.granted else "Denied")
    prompt.close()


def _click_at(barrier: threading.Barrier, button: Any) -> threading.Thread:
    def click() -> None:
        barrier.wait(WAIT)
        button.click()

    thread = threading.Thread(target=click)
    thread.start()
    return thread


def test_clicks_racing_the_timeout() -> None:
    for _ in range(20):
        future: Future[ConsentDecision] = Future()
        prompt = ConsentPrompt(make_request(timeout=120.0, created_at=time.time() - 120.0), future)
        barrier = threading.Barrier(2)
        thread = _click_at(barrier, prompt.approve_button)
        barrier.wait(WAIT)
        cancelled = future.cancel()
        join_all([thread])
        assert future.done()
        if cancelled:
            assert future.cancelled() and prompt.outcome_text == "Timed out — denied"
        else:
            assert future.result(0).granted and prompt.outcome_text.startswith("Approved")
        prompt.close()


# -- with a real broker ---------------------------------------------------------------------------


@contextmanager
def _asking(broker: Broker, consenter: PromptConsenter) -> Iterator[tuple[Any, Future[dict[str, Any]]]]:
    """A connection of *consenter* asking ``files/consent`` in another thread: it and the answer to come."""
    conn = broker.connect("analysis", consenter=consenter)
    pool = ThreadPoolExecutor(1)
    params = {
        "message": "Profile the sales data",
        "requestedPaths": ["data/sales", "/etc/passwd", "data/.env"],
        "operations": ["read", "write"],
    }
    try:
        yield conn, pool.submit(conn.handle, "files/consent", params)
    finally:
        pool.shutdown()


def test_broker_consent_answered_with_the_prompt(broker: Broker) -> None:
    consenter = PromptConsenter()
    with _asking(broker, consenter) as (conn, result):
        prompt = consenter.next_prompt()
        assert [box.disabled for box in prompt.checkboxes] == [False, True, True]
        prompt.op_toggles["write"].value = False
        prompt.duration.value = 900
        prompt.approve_button.click()
        answer = result.result(WAIT)
        assert answer["granted"] is True
        assert answer["approvedPaths"] == ["data/sales"]
        assert answer["operations"] == ["read"]
        assert "expiresAt" in answer
        assert prompt.outcome_text == "Approved read on data/sales for 15 min"
        assert conn.handle("files/read", {"path": "data/sales/2024.csv"})["content"].startswith("month")
        with pytest.raises(PermissionDenied):
            conn.handle("files/write", {"path": "data/sales/2024.csv", "content": "x"})
        with pytest.raises(PermissionDenied):
            conn.handle("files/read", {"path": "data/x.csv"})


def test_broker_consent_denied_with_the_prompt(broker: Broker) -> None:
    consenter = PromptConsenter()
    with _asking(broker, consenter) as (conn, result):
        consenter.next_prompt().deny_button.click()
        assert result.result(WAIT) == {"granted": False, "approvedPaths": [], "operations": []}
        with pytest.raises(PermissionDenied):
            conn.handle("files/read", {"path": "data/sales/2024.csv"})


def test_broker_timeout_shows_timed_out(tmp_path: Any, data: Any) -> None:
    with make_broker(tmp_path, limits=Limits(consent_timeout=0.3)) as broker:
        broker.add_root(data, name="data")
        consenter = PromptConsenter()
        with _asking(broker, consenter) as (conn, result):
            prompt = consenter.next_prompt()
            assert result.result(WAIT)["granted"] is False
            assert prompt.outcome_text == "Timed out — denied"
            prompt.approve_button.click()  # too late: nothing happens
            assert prompt.future.cancelled()
            with pytest.raises(PermissionDenied):
                conn.handle("files/read", {"path": "data/sales/2024.csv"})
            join_all(countdown_threads(prompt.request))


def test_connection_closed_withdraws_the_prompt(broker: Broker) -> None:
    consenter = PromptConsenter()
    with _asking(broker, consenter) as (conn, result):
        prompt = consenter.next_prompt()
        conn.close()
        assert result.result(WAIT)["granted"] is False
        assert (
            prompt.outcome_text == "Withdrawn: the connection closed"
        )  # which one, not "closed or cancelled"
        join_all(countdown_threads(prompt.request))


def test_async_broker_consent_answered_from_another_thread(broker: Broker) -> None:
    """The kernel's path: the consent is awaited on an event loop; the click comes from another thread."""
    consenter = PromptConsenter()
    conn = broker.connect("analysis", consenter=consenter)
    params = {"requestedPaths": ["data/sales"], "operations": ["read", "watch"]}
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(asyncio.run, conn.ahandle("files/consent", params))
        prompt = consenter.next_prompt()
        prompt.op_toggles["watch"].value = False
        prompt.approve_button.click()
        answer = result.result(WAIT)
    assert answer == {"granted": True, "approvedPaths": ["data/sales"], "operations": ["read"]}
    assert prompt.outcome_text == "Approved read on data/sales for this connection"
    join_all(countdown_threads(prompt.request))


def test_async_broker_timeout_and_a_closed_prompt(tmp_path: Any, data: Any) -> None:
    with make_broker(tmp_path, limits=Limits(consent_timeout=0.3)) as broker:
        broker.add_root(data, name="data")
        consenter = PromptConsenter()
        conn = broker.connect("analysis", consenter=consenter)
        params = {"requestedPaths": ["data/sales"], "operations": ["read"]}
        with ThreadPoolExecutor(1) as pool:
            result = pool.submit(asyncio.run, conn.ahandle("files/consent", params))
            first = consenter.next_prompt()
            assert result.result(WAIT)["granted"] is False
            assert first.outcome_text == "Timed out — denied"
            # A prompt closed before the broker gives up: the cancellation finds it quietly.
            again = pool.submit(asyncio.run, conn.ahandle("files/consent", params))
            second = consenter.next_prompt(1)
            second.close()
            assert again.result(WAIT)["granted"] is False
            assert second.future.cancelled()
        join_all(countdown_threads())
