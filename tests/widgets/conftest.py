"""Fixtures for the widget tests: a real broker in a temporary folder, widgets without a frontend.

ipywidgets works without a kernel (comm messages go nowhere), so every view is
built in-process and clicked with ``button.click()``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future

import ipywidgets
import pytest

from jupyter_fsbroker.core.consent import ConsentDecision, ConsentRequest
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from tests.support.brokers import ALL_OPS as ALL_OPS  # re-exported for the tests here
from tests.support.brokers import make_broker
from tests.support.views import WAIT, FakeConnection, FakeView, broker, data, make_request, ref


@pytest.fixture(autouse=True)
def _close_widgets() -> Iterator[None]:
    """Close every widget a test left open (which also stops any countdown it left running)."""
    yield
    ipywidgets.Widget.close_all()


def countdown_threads(request: ConsentRequest | None = None) -> list[threading.Thread]:
    """The countdown threads alive (of one request, or of all)."""
    prefix = "fsbroker-consent-countdown-" + ("" if request is None else request.id)
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def join_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), thread


class PromptConsenter:
    """The consenter glue a kernel would have: each request becomes a ConsentPrompt."""

    def __init__(self) -> None:
        self.prompts: list[ConsentPrompt] = []
        self.shown = threading.Condition()

    def request_consent(self, request: ConsentRequest) -> Future[ConsentDecision]:
        future: Future[ConsentDecision] = Future()
        prompt = ConsentPrompt(request, future)
        with self.shown:
            self.prompts.append(prompt)
            self.shown.notify_all()
        return future

    def next_prompt(self, index: int = 0) -> ConsentPrompt:
        with self.shown:
            assert self.shown.wait_for(lambda: len(self.prompts) > index, WAIT)
            return self.prompts[index]


__all__ = [
    "ALL_OPS",
    "WAIT",
    "FakeConnection",
    "FakeView",
    "PromptConsenter",
    "broker",
    "countdown_threads",
    "data",
    "join_all",
    "make_broker",
    "make_request",
    "ref",
]
