"""The memory budget of a connection's answers: bytes, arrival order, the queue's bounds, the estimates."""

from __future__ import annotations

import sys
import threading

import anyio
import pytest

from jupyter_fsbroker.protocol.desk.budget import MIN_HELD, MemoryBudget, answer_estimate

MiB = 1024 * 1024
TIMEOUT = 5.0


@pytest.mark.anyio
async def test_the_budget_lets_requests_in_by_bytes_in_arrival_order() -> None:
    budget = MemoryBudget(10)
    first = budget.request(6)
    assert first is not None and first.granted
    big, small = budget.request(8, held=1), budget.request(1, held=1)  # small fits, but waits behind big
    assert big is not None and small is not None
    assert not big.granted and not small.granted and budget.waiting == 2
    first.resize(4)  # the answer turned out smaller: still no room for 8
    assert not big.granted
    first.release()
    with anyio.fail_after(TIMEOUT):
        await big.wait()
        await small.wait()
    assert budget.used == 9 and budget.peak == 9
    big.release()
    small.release()
    small.release()  # idempotent
    assert budget.used == 0


@pytest.mark.anyio
async def test_one_answer_larger_than_the_budget_goes_alone_and_a_cancelled_wait_leaves_nothing() -> None:
    budget = MemoryBudget(10)
    huge = budget.request(100)  # nothing else is reserved: it goes
    assert huge is not None and huge.granted
    waiting = budget.request(1, held=1)
    assert waiting is not None
    with anyio.move_on_after(0.01) as scope:
        await waiting.wait()
    assert scope.cancelled_caught and budget.waiting == 0 and budget.used == 100
    huge.release()
    assert budget.used == 0
    with pytest.raises(ValueError):
        MemoryBudget(0)


@pytest.mark.anyio
async def test_too_many_waiting_are_refused_by_count_and_by_bytes() -> None:
    budget = MemoryBudget(4 * MIN_HELD, max_waiting=3)
    assert budget.request(1) is not None
    budget.request(4 * MIN_HELD)  # waits: the first is not released
    waiting = [budget.request(1) for _ in range(3)]
    assert waiting[-1] is None and budget.waiting == 3
    assert budget.request(1) is None
    by_bytes = MemoryBudget(4 * MIN_HELD)
    assert by_bytes.request(4 * MIN_HELD) is not None  # full
    assert by_bytes.request(1, held=3 * MIN_HELD) is not None  # waits, carrying 3 * MIN_HELD
    assert by_bytes.request(1, held=2 * MIN_HELD) is None


def test_answers_are_estimated_from_what_the_request_asks() -> None:
    sizes = {"read_default": MiB, "read_max": 2 * MiB, "list_max": 10_000}
    assert answer_estimate("files/read", {"length": 10**12}, **sizes) > 7 * MiB
    assert answer_estimate("files/read", {}, **sizes) > 3 * MiB
    assert answer_estimate("files/read", {"length": True}, **sizes) == answer_estimate(
        "files/read", {}, **sizes
    )
    assert answer_estimate("files/list", {"maxEntries": 10}, **sizes) < answer_estimate(
        "files/list", {}, **sizes
    )
    assert answer_estimate("files/write", {"content": "x" * MiB}, **sizes) > MiB
    assert answer_estimate("files/stat", None, **sizes) < 64 * 1024


@pytest.mark.anyio
async def test_what_the_desk_asks_before_it_reserves_is_what_request_then_does() -> None:
    budget = MemoryBudget(4 * MIN_HELD, max_waiting=1)
    assert budget.would_grant(10 * MIN_HELD)  # nothing reserved: one answer may always go alone
    first = budget.request(3 * MIN_HELD)
    assert first is not None and first.granted
    assert budget.would_grant(MIN_HELD) and not budget.would_grant(MIN_HELD + 1)
    assert budget.may_wait(MIN_HELD)
    second = budget.request(2 * MIN_HELD)
    assert second is not None and not second.granted
    # Someone waits: nothing is granted past it, and the queue (one deep) is full.
    assert not budget.would_grant(1) and not budget.may_wait(MIN_HELD)
    assert budget.request(1) is None
    first.release()
    with anyio.fail_after(TIMEOUT):
        await second.wait()
    assert budget.may_wait() and not budget.would_grant(3 * MIN_HELD)
    second.release()
    assert budget.would_grant(4 * MIN_HELD) and budget.used == 0


@pytest.mark.anyio
async def test_another_thread_reads_the_budget_while_the_loop_changes_it() -> None:
    # The reading thread asks whether the budget is empty while the loop reserves and releases:
    # it must never see a queue without the reservation it waits behind (used 0, waiting 1).
    budget = MemoryBudget(2 * MIN_HELD)
    stop = threading.Event()
    seen: list[tuple[int, int]] = []

    def read() -> None:
        while not stop.is_set():
            used, waiting = budget.snapshot()
            if waiting and not used:
                seen.append((used, waiting))

    reader = threading.Thread(target=read)
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns every few bytecodes: into every window
    reader.start()
    try:
        for _ in range(20_000):
            held = budget.request(2 * MIN_HELD)
            queued = budget.request(MIN_HELD)
            assert held is not None and queued is not None
            held.release()  # grants the queued one in the same step
            queued.release()
    finally:
        stop.set()
        reader.join(TIMEOUT)
        sys.setswitchinterval(switching)
    assert seen == []
