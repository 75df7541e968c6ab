"""The one table of a connection's ``files/*`` requests on their way: :class:`InFlight`.

Every request the desk takes is one :class:`Ticket`, from the moment it is taken
until its answer is written (or dropped), whichever thread answers it::

    QUEUED ──run()──► RUNNING ──writing()──► WRITING ──finish()──► DONE (out of the table)
       │                 │                      │
       │                 │                      └── cancel(): too late (not found)
       │                 └── cancel(): dropped; writing() says False, its answer is never written
       └── cancel(): dropped; run() says False, it never runs

* A slot is a RUNNING ticket: :meth:`InFlight.run` moves a ticket there only
  while fewer than ``max_in_flight`` are, so one server cannot occupy every
  worker thread the broker shares between its connections.
* A ``notifications/cancelled`` (:meth:`InFlight.cancel`) stops a ticket that
  has not started (its handle, the worker's future or the task, is cancelled)
  and drops the answer of one that has. Once its answer is being written it is
  no longer cancellable: an answer cut off halfway would break the framing.
* :meth:`InFlight.stop` (the connection closing) drops every ticket not yet
  being written, and refuses new ones.

Every transition happens under one lock, so "still cancellable?" and "being
written now" are one step on either side, from the reading thread, a worker or
the loop alike. The table knows nothing of JSON-RPC, the loop or the budget:
a ticket only carries the reservation its owner gives back.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["InFlight", "Ticket", "TicketState"]

#: What a request is known by: its JSON-RPC id.
RequestKey = str | int


class TicketState(enum.Enum):
    """Where a ticket is on its way."""

    #: Taken, not yet running the core (waiting for a slot, memory, the name or a thread).
    QUEUED = "queued"
    #: Running the core: holds one of the connection's slots.
    RUNNING = "running"
    #: Its answer is being written: no longer cancellable.
    WRITING = "writing"
    #: Finished, or dropped after it ran: nothing more happens to it.
    DONE = "done"


class Ticket:
    """One request on its way: its id, method, state, and what its owner needs to finish it.

    Mutable, and changed only by its :class:`InFlight` under the table's lock.
    """

    __slots__ = ("cancel_handle", "dropped", "method", "request_id", "reservation", "route", "state")

    def __init__(self, request_id: RequestKey, method: str, route: Any, reservation: Any) -> None:
        self.request_id = request_id
        self.method = method
        #: Who answers it (a :class:`~.route.Route`).
        self.route = route
        #: What the owner gives back once the ticket is done (a budget reservation, or ``None``).
        self.reservation = reservation
        self.state = TicketState.QUEUED
        #: Its answer is not wanted any more: cancelled by the server, or the table stopped.
        self.dropped = False
        #: Stops it if it has not started: a future's or a task's ``cancel``.
        self.cancel_handle: Callable[[], object] | None = None

    def __repr__(self) -> str:
        dropped = " dropped" if self.dropped else ""
        return f"<Ticket {self.request_id!r} {self.method} {self.state.value}{dropped}>"


class InFlight:
    """The requests of one connection on their way, and its slots.

    Parameters
    ----------
    max_in_flight
        How many requests may run the core at once (the RUNNING tickets).
    on_slot_free
        Called (on whatever thread freed it, outside the lock) whenever a
        RUNNING ticket leaves that state, so that a request waiting for a slot
        can be woken; it must not block.
    """

    def __init__(self, max_in_flight: int, *, on_slot_free: Callable[[], None] | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.max_in_flight = max_in_flight
        self._on_slot_free = on_slot_free
        self._lock = threading.Lock()
        self._tickets: set[Ticket] = set()
        self._cancellable: dict[RequestKey, Ticket] = {}
        self._running = 0
        self._writing = 0
        self._stopped = False

    # -- what is in it --------------------------------------------------------------------------

    def __len__(self) -> int:
        """Entries not yet finished, whatever their state."""
        return len(self._tickets)

    @property
    def answering(self) -> int:
        """Tickets whose answer is not yet being written (QUEUED or RUNNING)."""
        return len(self._tickets) - self._writing

    @property
    def running(self) -> int:
        """Entries RUNNING (the slots taken)."""
        return self._running

    @property
    def free_slots(self) -> int:
        """Slots free for one more ticket to run now."""
        return max(0, self.max_in_flight - self._running)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called: no ticket is added any more."""
        return self._stopped

    # -- the way of one ticket -------------------------------------------------------------------

    def add(self, request_id: RequestKey, method: str, route: Any, reservation: Any = None) -> Ticket | None:
        """Take one request, QUEUED; ``None`` once the table is stopped (nothing is taken then).

        A request whose id is already in flight replaces it as the one a cancel
        finds (a server must not reuse an id; the earlier one still finishes).
        """
        ticket = Ticket(request_id, method, route, reservation)
        with self._lock:
            if self._stopped:
                return None
            self._tickets.add(ticket)
            self._cancellable[request_id] = ticket
        return ticket

    def run(self, ticket: Ticket) -> bool:
        """QUEUED → RUNNING if a slot is free and the ticket is still wanted; whether it moved."""
        with self._lock:
            if (
                ticket.dropped
                or ticket.state is not TicketState.QUEUED
                or self._running >= self.max_in_flight
            ):
                return False
            ticket.state = TicketState.RUNNING
            self._running += 1
        return True

    def run_now(self, ticket: Ticket) -> None:
        """QUEUED → RUNNING at once, slot or not: for a request alone on its connection.

        Alone, it cannot exceed the bound (nothing else runs); the caller made sure.
        """
        with self._lock:
            ticket.state = TicketState.RUNNING
            self._running += 1

    def writing(self, ticket: Ticket) -> bool:
        """RUNNING → WRITING: its answer goes out whole from now on; ``False``: dropped, do not write.

        Either way the ticket's slot is free again.
        """
        with self._lock:
            freed = self._leave_running(ticket)
            wanted = not ticket.dropped
            ticket.state = TicketState.WRITING if wanted else TicketState.DONE
            self._writing += wanted
            self._forget(ticket)
        if freed:
            self._slot_free()
        return wanted

    def finish(self, ticket: Ticket) -> bool:
        """The ticket is done (written, dropped, or never run): out of the table. Idempotent.

        Returns whether it was still in the table (the caller gives its reservation back once).
        """
        with self._lock:
            if ticket not in self._tickets:
                return False
            freed = self._leave_running(ticket)
            if ticket.state is TicketState.WRITING:
                self._writing -= 1
            ticket.state = TicketState.DONE
            self._tickets.discard(ticket)
            self._forget(ticket)
        if freed:
            self._slot_free()
        return True

    # -- from outside ---------------------------------------------------------------------------

    def cancel(self, request_id: RequestKey) -> Ticket | None:
        """The server cancelled *request_id*: drop it; the ticket, or ``None`` if none is cancellable.

        A QUEUED or RUNNING ticket is dropped (its answer is never written) and
        its handle cancelled (a future or a task not yet started never runs);
        its owner still finishes it. A WRITING one is no longer found.
        """
        with self._lock:
            ticket = self._cancellable.pop(request_id, None)
            if ticket is None:
                return None
            ticket.dropped = True
            handle = ticket.cancel_handle
        if handle is not None:
            handle()
        return ticket

    def stop(self) -> list[Ticket]:
        """The connection is closing: drop every ticket not yet being written; take no more.

        Returns every ticket still in the table (the WRITING ones too), for the
        owner to finish; their handles are cancelled.
        """
        with self._lock:
            self._stopped = True
            self._cancellable.clear()
            tickets = list(self._tickets)
            for ticket in tickets:
                if ticket.state is not TicketState.WRITING:
                    ticket.dropped = True
        for ticket in tickets:
            if ticket.cancel_handle is not None and ticket.state is not TicketState.WRITING:
                ticket.cancel_handle()
        return tickets

    # -- inside the lock ------------------------------------------------------------------------

    def _leave_running(self, ticket: Ticket) -> bool:
        if ticket.state is TicketState.RUNNING:
            self._running -= 1
            return True
        return False

    def _forget(self, ticket: Ticket) -> None:
        if self._cancellable.get(ticket.request_id) is ticket:
            del self._cancellable[ticket.request_id]

    def _slot_free(self) -> None:
        if self._on_slot_free is not None:
            self._on_slot_free()
