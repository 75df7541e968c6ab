"""The per-connection server log: ordered, bounded, followed, never more than it was told."""

from __future__ import annotations

from jupyter_fsbroker.core.serverlog import LEVELS, LogEntry, ServerLog


def test_entries_keep_their_order_source_and_level() -> None:
    log = ServerLog()
    log.add_stderr("starting\r\n")
    log.add_message("warning", "slow disk", "io")
    log.add_message("shouting", "unknown level")
    assert [(e.source, e.level, e.logger, e.text) for e in log.entries()] == [
        ("stderr", None, None, "starting"),
        ("message", "warning", "io", "slow disk"),
        ("message", "info", None, "unknown level"),
    ]
    lines = log.text().splitlines()
    assert lines[0].endswith(" stderr: starting") and lines[1].endswith(" [warning] io: slow disk")
    assert [e.severity for e in log.entries()] == [1, LEVELS.index("warning"), 1]
    assert log.entries(1) == log.entries()[-1:] and log.entries(0) == ()


def test_the_log_is_bounded_in_entries_and_in_length() -> None:
    log = ServerLog(max_entries=3, max_text=10)
    for i in range(5):
        log.add_stderr(f"line {i}")
    assert [e.text for e in log.entries()] == ["line 2", "line 3", "line 4"] and log.dropped == 2
    assert log.add_stderr("x" * 25).text == "x" * 10 + "… (15 more characters)"


def test_follow_sees_every_new_entry_until_unsubscribed() -> None:
    log = ServerLog()
    seen: list[LogEntry] = []
    stop = log.follow(seen.append)
    log.add_message("error", "one")
    stop()
    log.add_message("error", "two")
    assert [e.text for e in seen] == ["one"]
