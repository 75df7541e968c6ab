"""A call's running line: its words tick on the views' clock, Cancel asks once, and closing leaves nothing."""

from __future__ import annotations

import threading

from ipywidgets.widgets.widget import _instances

from jupyter_fsbroker.widgets.running import RunningLine
from jupyter_fsbroker.widgets.view_thread import ViewThread

from .conftest import WAIT


class Seconds:
    """The words of a call whose seconds a test sets, telling when they are read again."""

    def __init__(self) -> None:
        self.seconds = 1
        self.read = threading.Event()

    def __call__(self) -> str:
        self.read.set()
        return f"running: analysis · watch_changes · {self.seconds} s"


def test_the_line_says_its_words_and_ticks_on_the_views_clock() -> None:
    views = ViewThread()
    try:
        words = Seconds()
        line = RunningLine(words, lambda: None, views=views)
        assert "fsbroker-running" in line._dom_classes
        assert "running: analysis · watch_changes · 1 s" in line.label.value
        assert repr(line) == "running: analysis · watch_changes · 1 s"
        words.seconds, words.read = 2, threading.Event()
        assert words.read.wait(WAIT), "the clock did not tick the line"
        views.settle()
        assert "· 2 s" in line.label.value
        line.close()
        views.settle()
        # The clock's next tick finds the line closed: it says nothing and asks for no further tick.
        words.read = threading.Event()
        assert line._tick() is None
        assert not words.read.is_set()
    finally:
        views.close()


def test_cancel_asks_once_and_says_cancelling() -> None:
    asked: list[str] = []
    line = RunningLine(lambda: "running: analysis · watch_changes · 3 s", lambda: asked.append("cancel"))
    assert "fsbroker-cancel-call" in line.cancel_button._dom_classes
    line.cancel_button.click()
    line.cancel_button.click()
    assert asked == ["cancel"]
    assert line.cancel_button.disabled
    assert "cancelling…" in line.label.value
    line.close()
    assert line.closed


def test_a_line_closes_all_it_made() -> None:
    before = len(_instances)
    line = RunningLine(lambda: "running: a · t · 1 s", lambda: None)
    assert len(_instances) > before
    line.close()
    line.close()
    assert len(_instances) == before
