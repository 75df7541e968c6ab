"""The one room that decides who answers a ``files/*`` request, and answers it.

:mod:`.route` decides (a pure function of a snapshot), :mod:`.table` holds every
request on its way and the connection's slots, :mod:`.budget` the bytes their
answers may hold.
"""

from __future__ import annotations

from .budget import MemoryBudget, Reservation, answer_estimate
from .route import DeskState, Route, Where, decide
from .table import InFlight, Ticket, TicketState

__all__ = [
    "DeskState",
    "InFlight",
    "MemoryBudget",
    "Reservation",
    "Route",
    "Ticket",
    "TicketState",
    "Where",
    "answer_estimate",
    "decide",
]
