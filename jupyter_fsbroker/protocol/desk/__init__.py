"""The one room that decides who answers a ``files/*`` request, and answers it.

:class:`~.desk.FilesDesk` is the one object the transports and the middleware
hand a request to; :mod:`.route` decides who answers it (a pure function of a
snapshot), :mod:`.table` holds every request on its way and the connection's
slots, :mod:`.budget` the bytes their answers may hold, and
:class:`~.core_slot.CoreSlot` the broker side as the desk sees it.
"""

from __future__ import annotations

from .budget import MemoryBudget, Reservation, answer_estimate
from .core_slot import CoreSlot
from .desk import FilesDesk
from .route import DeskState, Route, Where, decide
from .table import InFlight, Ticket, TicketState

__all__ = [
    "CoreSlot",
    "DeskState",
    "FilesDesk",
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
