"""One change event for both ends: what the client's watch makes is what the kit reads."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jupyter_fsbroker import serverkit as kit
from jupyter_fsbroker.core import watch
from jupyter_fsbroker.wire.events import ChangeEvent


def test_the_kit_and_the_core_share_the_one_class() -> None:
    assert kit.ChangeEvent is watch.ChangeEvent is ChangeEvent


@pytest.mark.parametrize(
    "event",
    [
        ChangeEvent("w_1", "data/new.csv", "moved", "2026-11-29T12:30:00.123Z", "data/old.csv"),
        ChangeEvent("w_1", "data/\ufffd.csv", "created", "2026-11-29T12:30:00.000Z", undecodable_name=True),
        ChangeEvent("w_2", "data/x.csv", "deleted", "2026-11-29T12:30:00.999Z"),
    ],
    ids=["moved", "undecodable", "deleted"],
)
def test_an_event_reads_back_from_its_params(event: ChangeEvent) -> None:
    assert ChangeEvent.from_params(event.to_params()) == event


def test_the_params_carry_optional_members_only_when_set() -> None:
    params = ChangeEvent("w_1", "data/x.csv", "modified", "2026-11-29T12:30:00.123Z").to_params()
    assert params == {
        "watchId": "w_1",
        "path": "data/x.csv",
        "event": "modified",
        "timestamp": "2026-11-29T12:30:00.123Z",
    }


def test_time_is_the_timestamps_moment() -> None:
    event = ChangeEvent("w_1", "data/x.csv", "modified", "2026-11-29T12:30:00.123Z")
    moment = datetime(2026, 11, 29, 12, 30, 0, 123000, tzinfo=UTC).timestamp()
    assert event.time == pytest.approx(moment, abs=1e-6)
    with pytest.raises(ValueError):
        _ = ChangeEvent("w_1", "data/x.csv", "modified", "yesterday").time


@pytest.mark.parametrize(
    "params",
    [None, {}, {"watchId": "w_1", "path": "data/x"}, {"watchId": 1, "path": "data/x", "event": "created"}],
)
def test_params_without_the_required_members_read_as_none(params: dict[str, object] | None) -> None:
    assert ChangeEvent.from_params(params) is None


def test_members_of_the_wrong_type_read_as_missing() -> None:
    params = {"watchId": "w_1", "path": "a", "event": "moved", "timestamp": 5, "oldPath": 3}
    assert ChangeEvent.from_params(params) == ChangeEvent("w_1", "a", "moved", "", None)
