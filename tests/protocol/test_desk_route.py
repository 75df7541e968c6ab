"""Who answers a ``files/*`` request: every route of :func:`decide`, from a snapshot of the desk."""

from __future__ import annotations

import pytest

from jupyter_fsbroker.protocol.desk.route import DeskState, Route, Where, decide

READ = "files/read"
CONSENT = "files/consent"
SMALL = 8 * 1024

#: A connection with nothing on its way: named, its pool open, over stdio's pipes.
IDLE = DeskState()
#: The same connection while another request is on its way (a slot and some memory taken).
BUSY_ELSEWHERE = IDLE._replace(in_flight=1, free_slots=15, budget_used=SMALL)


def test_a_lone_request_is_answered_by_the_reading_thread() -> None:
    assert decide(READ, Where.READER, IDLE, SMALL) is Route.HERE


@pytest.mark.parametrize(
    ("why", "state", "method", "estimate"),
    [
        ("another request is on its way", BUSY_ELSEWHERE, READ, SMALL),
        ("memory is held by an answer being written", IDLE._replace(budget_used=1), READ, SMALL),
        ("a request waits for memory", IDLE._replace(budget_waiting=1), READ, SMALL),
        ("its answer exceeds the budget", IDLE._replace(budget_limit=SMALL - 1), READ, SMALL),
        ("the roots gate is armed", IDLE._replace(gate_armed=True), READ, SMALL),
        ("the connection is not named yet", IDLE._replace(core_ready=False), READ, SMALL),
        ("the pool is closed", IDLE._replace(executor_open=False), READ, SMALL),
        (
            "the transport cannot take an answer from a thread",
            IDLE._replace(writes_directly=False),
            READ,
            SMALL,
        ),
        ("a consent waits for the user on the loop", IDLE, CONSENT, SMALL),
    ],
)
def test_a_request_that_is_not_alone_is_handed_to_the_loop(
    why: str, state: DeskState, method: str, estimate: int
) -> None:
    assert decide(method, Where.READER, state, estimate) is Route.LOOP, why


def test_on_the_loop_a_request_with_a_slot_and_memory_goes_to_a_worker() -> None:
    assert decide(READ, Where.LOOP, BUSY_ELSEWHERE, SMALL) is Route.WORKER
    # Over HTTP too: the worker hands its answer to the loop, which writes it.
    assert decide(READ, Where.LOOP, IDLE._replace(writes_directly=False), SMALL) is Route.WORKER


@pytest.mark.parametrize(
    ("why", "state", "method"),
    [
        ("a consent waits for the user on the loop", IDLE, CONSENT),
        ("no slot is free", BUSY_ELSEWHERE._replace(free_slots=0), READ),
        ("its memory is not granted at once", IDLE._replace(grants_at_once=False), READ),
        ("the connection is not named yet", IDLE._replace(core_ready=False), READ),
        ("the pool is closed (the core answers connection_closed)", IDLE._replace(executor_open=False), READ),
    ],
)
def test_on_the_loop_a_request_that_must_wait_goes_the_tasks_way(
    why: str, state: DeskState, method: str
) -> None:
    assert decide(method, Where.LOOP, state, SMALL) is Route.TASK, why


def test_too_many_waiting_for_memory_is_busy_at_once() -> None:
    full = IDLE._replace(grants_at_once=False, may_wait=False)
    assert decide(READ, Where.LOOP, full, SMALL) is Route.BUSY
    # The queue's bound binds only a request that would have to wait.
    assert decide(READ, Where.LOOP, full._replace(grants_at_once=True), SMALL) is Route.WORKER


@pytest.mark.parametrize("where", list(Where))
@pytest.mark.parametrize("method", [READ, CONSENT])
def test_a_closing_desk_or_a_connection_closed_before_it_was_named_answers_closed(
    where: Where, method: str
) -> None:
    assert decide(method, where, IDLE._replace(closing=True), SMALL) is Route.CLOSED
    never_named = IDLE._replace(core_ready=False, core_gone=True)
    assert decide(method, where, never_named, SMALL) is Route.CLOSED


def test_a_named_connection_whose_broker_side_closed_is_answered_by_the_core() -> None:
    # The core answers connection_closed itself, with an audit record: the desk does not pre-empt it.
    closed_later = IDLE._replace(core_gone=True)
    assert decide(READ, Where.LOOP, closed_later, SMALL) is Route.WORKER
    assert decide(READ, Where.READER, closed_later, SMALL) is Route.HERE
