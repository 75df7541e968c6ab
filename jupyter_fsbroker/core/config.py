"""The settings of a broker: one immutable, validated value, and the per-user folders it defaults to.

A :class:`BrokerConfig` is built once for a :class:`~jupyter_fsbroker.core.broker.Broker`;
the settings that may change while it runs are changed through
:meth:`Broker.configure <jupyter_fsbroker.core.broker.Broker.configure>`, which
validates a new value with :meth:`BrokerConfig.replace`. Nothing here creates a
folder or reads a file.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

import platformdirs

from .errors import ConfigError
from .limits import Limits
from .sensitive import SensitiveNames

__all__ = ["BrokerConfig", "default_lock_dir", "default_trash_dir"]

_LIMIT_NAMES = frozenset(f.name for f in dataclasses.fields(Limits))


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of a :class:`~jupyter_fsbroker.core.broker.Broker`; every field has a sane default.

    Attributes
    ----------
    limits
        Sizes, rates, timeouts.
    sensitive
        Names refused even inside a root unless explicitly allowed.
    permanent_delete
        Delete for good instead of moving to the trash.
    trash_dir, lock_dir
        Where deleted files and cross-process lock files go; both outside
        every root. Default: per-user folders from ``platformdirs``.
    audit_path
        Append audit records to this JSON Lines file.
    audit_capacity
        Records kept in memory for views.
    coalesce
        Seconds within which watch events on one path are merged.
    workers
        Threads that run requests for :meth:`Connection.ahandle
        <jupyter_fsbroker.core.connection.Connection.ahandle>`.
    stale_temp_age
        Seconds a temporary file left behind by a writer that died must have
        been left unmodified before the broker removes it (the next time its
        folder is written, or when a broker starts on its root). Whether its
        writer is alive is decided by the writer's OS lock on the file; the
        age is a second guard (see :mod:`jupyter_fsbroker.core.tempfiles`).
    advertise_read_only_roots
        List read-only roots in ``roots/list`` (marked ``_meta.readOnly``).
        Off by default: a server that reads the roots and opens files itself
        (the official filesystem server does) would get the operating
        system's access to them, writes included; ``files/*`` reaches them
        either way, under the same grants.

    Raises
    ------
    ConfigError
        ``limits``, ``sensitive``, ``permanent_delete``, ``coalesce`` or
        ``stale_temp_age`` has the wrong type, or ``coalesce`` or
        ``stale_temp_age`` is negative.
    """

    limits: Limits = field(default_factory=Limits)
    sensitive: SensitiveNames = field(default_factory=SensitiveNames)
    permanent_delete: bool = False
    trash_dir: str | None = None
    lock_dir: str | None = None
    audit_path: str | None = None
    audit_capacity: int = 2000
    coalesce: float = 0.05
    workers: int = 32
    stale_temp_age: float = 60.0
    advertise_read_only_roots: bool = False

    def __post_init__(self) -> None:
        """Validate the fields that may change at run time; see the class's *Raises* section."""
        if not isinstance(self.limits, Limits):
            raise ConfigError(f"limits must be a Limits, not {self.limits!r}")
        if not isinstance(self.sensitive, SensitiveNames):
            raise ConfigError(f"sensitive must be a SensitiveNames, not {self.sensitive!r}")
        if not isinstance(self.permanent_delete, bool):
            raise ConfigError(f"permanent_delete must be True or False, not {self.permanent_delete!r}")
        for name in ("coalesce", "stale_temp_age"):
            seconds = getattr(self, name)
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not 0 <= seconds < math.inf
            ):
                raise ConfigError(f"{name} must be a non-negative number of seconds, not {seconds!r}")

    def replace(self, **changes: Any) -> BrokerConfig:
        """Return a copy with *changes* applied, validated.

        Parameters
        ----------
        **changes
            Fields of this class, and fields of :class:`Limits` by name
            (``lock_wait=0.5``), which change the limits (those given as
            ``limits=...``, if any, else the current ones).

        Raises
        ------
        ConfigError
            An unknown name or an invalid value.
        """
        own = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - own - _LIMIT_NAMES)
        if unknown:
            raise ConfigError(
                f"unknown setting(s): {', '.join(unknown)}; known: {', '.join(sorted(own | _LIMIT_NAMES))}"
            )
        mine = {name: value for name, value in changes.items() if name in own}
        limit_changes = {name: value for name, value in changes.items() if name in _LIMIT_NAMES}
        if limit_changes:
            limits = mine.get("limits", self.limits)
            if not isinstance(limits, Limits):
                raise ConfigError(f"limits must be a Limits, not {limits!r}")
            mine["limits"] = limits.replace(**limit_changes)
        return dataclasses.replace(self, **mine)


def default_lock_dir() -> str:
    """Where cross-process lock files go when the configuration names no folder."""
    # The per-user runtime folder when the session has one (it is cleared at logout, like
    # the locks); otherwise the per-user cache folder.
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return os.path.join(runtime, "jupyter_fsbroker", "locks")
    return str(platformdirs.user_cache_path("jupyter_fsbroker") / "locks")


def default_trash_dir() -> str:
    """Where deleted files go when the configuration names no folder."""
    return str(platformdirs.user_data_path("jupyter_fsbroker") / "trash")
