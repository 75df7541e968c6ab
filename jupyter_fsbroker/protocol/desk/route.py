"""Who answers one ``files/*`` request: :func:`decide`, a pure function of a snapshot of the desk.

A request can be answered in one of three places, and refused in two ways:

* :attr:`Route.HERE` — by the transport's reading thread that read it, now,
  without waking the event loop. Only a request *alone* on its connection goes
  this way: nothing else in flight, no memory held or waited for, its answer
  within the budget, and the roots gate not armed (a tool call waits on the
  gate, which must see the server's requests on the loop). Alone, it is within
  every bound by construction, so it takes neither a slot nor a reservation.
* :attr:`Route.WORKER` — on one of the broker's worker threads, which writes the
  answer itself when the transport takes it at once. The request needs a free
  slot and memory granted at once, a named broker side and an open pool.
* :attr:`Route.TASK` — in a task on the loop, which may wait for a slot, for
  memory, for the connection's name, or for the user (a consent always goes
  this way: its prompt lives on the loop).
* :attr:`Route.BUSY` — refused at once (``RATE_LIMITED``, ``memory_budget``):
  too many requests already wait for memory.
* :attr:`Route.CLOSED` — refused at once (``PERMISSION_DENIED``,
  ``connection_closed``): the connection closed before it had a broker side,
  or the desk is closing.

A request the reading thread does not answer gets :attr:`Route.LOOP`: the
reader hands it to the loop, in order, and the loop decides again there.

:func:`decide` reads only a :class:`DeskState` (a frozen snapshot the desk
takes, under its lock, as the request arrives) and the request's method and
estimated answer size, so every rule is testable without a thread or a pipe.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["CONSENT", "ON_LOOP", "DeskState", "Route", "Where", "decide"]

#: A ``files/*`` method answered on the loop whatever the state: it waits for the user.
CONSENT = "files/consent"
#: The methods that may wait long (for the user, for a change: ``files/changes`` with
#: ``waitMs``): answered on the loop, holding no thread meanwhile.
ON_LOOP: frozenset[str] = frozenset({CONSENT, "files/changes"})


class Where(enum.Enum):
    """Where a request is offered to the desk."""

    #: On the transport's reading thread, as it is read.
    READER = "reader"
    #: On the event loop (the reading thread handed it over, or the transport reads on the loop).
    LOOP = "loop"


class Route(enum.Enum):
    """Who answers a request (see the module's docstring)."""

    HERE = "here"
    LOOP = "loop"
    WORKER = "worker"
    TASK = "task"
    BUSY = "busy"
    CLOSED = "closed"


class DeskState(NamedTuple):
    """What :func:`decide` needs to know of one connection's desk, at one instant: an immutable value.

    A named tuple rather than a frozen dataclass: one is made for every request
    the reading thread reads, and a frozen dataclass costs several times more to
    make (each field is set through ``object.__setattr__``).

    Attributes
    ----------
    closing
        The desk is closing (the connection ends): nothing more is answered by the core.
    core_ready
        The broker side exists (the connection is named).
    core_gone
        The connection closed before its broker side was opened: it never will be.
    executor_open
        The broker's worker pool takes work.
    writes_directly
        The transport takes a whole answer from any thread (stdio's pipes; not HTTP).
    in_flight
        Requests of this connection on their way (any state, any route).
    free_slots
        Slots free for one more request to run the core now.
    budget_used, budget_waiting, budget_limit
        The memory budget: bytes reserved, requests waiting for memory, its size.
    grants_at_once
        The budget would grant this request's estimate now, without waiting.
    may_wait
        The budget would let this request wait its turn (else: too many wait already).
    gate_armed
        The roots gate holds tool calls back, waiting for the server's fetch of the roots.
    """

    closing: bool = False
    core_ready: bool = True
    core_gone: bool = False
    executor_open: bool = True
    writes_directly: bool = True
    in_flight: int = 0
    free_slots: int = 16
    budget_used: int = 0
    budget_waiting: int = 0
    budget_limit: int = 32 * 1024 * 1024
    grants_at_once: bool = True
    may_wait: bool = True
    gate_armed: bool = False


def decide(method: str, where: Where, state: DeskState, estimate: int) -> Route:
    """Who answers a ``files/*`` request for *method*, offered *where*, its answer taking *estimate* bytes.

    A pure function: the same arguments always give the same route.
    """
    if state.closing or (state.core_gone and not state.core_ready):
        return Route.CLOSED
    if where is Where.READER:
        return Route.HERE if _alone(method, state, estimate) else Route.LOOP
    if not state.grants_at_once and not state.may_wait:
        return Route.BUSY
    if (
        method not in ON_LOOP
        and state.core_ready
        and state.executor_open
        and state.free_slots > 0
        and state.grants_at_once
    ):
        return Route.WORKER
    return Route.TASK


def _alone(method: str, state: DeskState, estimate: int) -> bool:
    """Whether the reading thread may answer the request itself (see :attr:`Route.HERE`)."""
    return (
        method not in ON_LOOP
        and state.core_ready
        and state.executor_open
        and state.writes_directly
        and state.in_flight == 0
        and state.budget_used == 0
        and state.budget_waiting == 0
        and not state.gate_armed
        and estimate <= state.budget_limit
    )
