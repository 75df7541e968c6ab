"""What the parts of a connection use of the broker that opened it, as a :class:`~typing.Protocol`.

A connection's access checks, staged uploads and consent flow work against
:class:`BrokerServices`, not against the ``Broker`` class that creates them: the
modules stay free of import cycles, and each part states how little of the
broker it needs. This module holds no logic.
"""

from __future__ import annotations

from typing import Protocol

from .config import BrokerConfig
from .grants import GrantTable
from .locks import LockManager
from .roots import RootSet
from .tempfiles import TempFiles
from .trashcan import TrashCan
from .watch import WatchManager

__all__ = ["BrokerServices"]


class BrokerServices(Protocol):
    """The state every connection of a broker shares."""

    @property
    def config(self) -> BrokerConfig:
        """The current settings (they may change between two requests, never during a check)."""
        ...

    @property
    def roots(self) -> RootSet:
        """The shared folders."""
        ...

    @property
    def grants(self) -> GrantTable:
        """Who may do what, where."""
        ...

    @property
    def locks(self) -> LockManager:
        """The locks of every connection, and of other processes."""
        ...

    @property
    def watches(self) -> WatchManager:
        """The watches of every connection."""
        ...

    @property
    def temp_files(self) -> TempFiles:
        """Sweeps the temporary files of writers that died out of the folders written."""
        ...

    @property
    def trash(self) -> TrashCan:
        """Where deleted files go, within the retention."""
        ...
