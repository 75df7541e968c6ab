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
import sys
from dataclasses import dataclass, field
from typing import Any

import platformdirs

from .errors import ConfigError
from .limits import Limits
from .sensitive import SensitiveNames

__all__ = ["DEFAULT_TRASH_MAX_AGE", "BrokerConfig", "default_lock_dir", "default_trash_dir"]

#: Seconds a deleted object stays in the trash by default: 30 days, long enough to notice a
#: mistake after a holiday, short enough that the trash does not become an archive.
DEFAULT_TRASH_MAX_AGE = 30 * 86400.0

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
        every root. Default: :func:`default_trash_dir` (a per-user folder from
        ``platformdirs``) and :func:`default_lock_dir` (one folder per user
        account, whatever the session's environment says, so that every
        process of the user meets there).
    trash_max_age
        Seconds a deleted object is kept in the trash (default 30 days;
        ``math.inf``: no age limit). Older entries are deleted for good when
        something is trashed, when a broker starts and every minute while it runs.
    trash_max_bytes
        Bytes the trash may hold in all (each entry counts the sizes of its
        files); when something is trashed the oldest entries are deleted for
        good until the rest fits, and a delete of an object larger than this
        alone is refused (TOO_LARGE, ``exceeds_trash``) and changes nothing.
        ``None`` (the default): 1 GiB, or a tenth of the size of the file
        system that holds the trash if that is smaller (see
        :func:`~jupyter_fsbroker.core.retention.default_trash_max_bytes`).
    audit_path
        Append audit records to this JSON Lines file.
    audit_required
        Refuse any request whose audit record cannot be written to
        ``audit_path`` before it runs (PERMISSION_DENIED,
        ``audit_unavailable``): a line announcing the request is appended and
        flushed to disk (``fdatasync``) first, and the outcome record follows
        (see :class:`~jupyter_fsbroker.core.audit.AuditLog`). Needs
        ``audit_path``. Off by default: a failing audit file is then logged
        and the requests go on.
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
    advertise_roots
        Hand servers the ``file://`` locations of the read-write roots in
        ``roots/list``. ``None`` (the default): only to a local server that the
        operating system confines to the roots (``sandbox="roots"``); ``True``:
        to every server; ``False``: to none. Without them a server learns the
        roots' names only (in the result's ``_meta``), which is all that
        ``files/*`` needs: a server that opens files itself (the official
        filesystem server does) would bypass consent, grants and the audit, and
        a remote one would learn the user's folder layout. A connection may
        override it (``connect(..., advertise_roots=...)``).
    advertise_read_only_roots
        Hand over the locations of read-only roots too (marked
        ``_meta.readOnly``), where those of the read-write roots are handed
        over. Off by default: a server that opens files itself would get the
        operating system's access to them, writes included; ``files/*``
        reaches them either way, under the same grants.

    Raises
    ------
    ConfigError
        ``limits``, ``sensitive``, ``permanent_delete``, ``advertise_roots``,
        ``coalesce``, ``stale_temp_age``, ``trash_max_age``, ``trash_max_bytes``
        or ``audit_required`` has the wrong type, ``coalesce`` or
        ``stale_temp_age`` is negative, ``trash_max_age`` or
        ``trash_max_bytes`` is not positive, or ``audit_required`` is on
        without an ``audit_path``.
    """

    limits: Limits = field(default_factory=Limits)
    sensitive: SensitiveNames = field(default_factory=SensitiveNames)
    permanent_delete: bool = False
    trash_dir: str | None = None
    lock_dir: str | None = None
    trash_max_age: float = DEFAULT_TRASH_MAX_AGE
    trash_max_bytes: int | None = None
    audit_path: str | None = None
    audit_required: bool = False
    audit_capacity: int = 2000
    coalesce: float = 0.05
    workers: int = 32
    stale_temp_age: float = 60.0
    advertise_roots: bool | None = None
    advertise_read_only_roots: bool = False

    def __post_init__(self) -> None:
        """Validate the fields that may change at run time, and ``advertise_roots``; see *Raises*."""
        if not isinstance(self.limits, Limits):
            raise ConfigError(f"limits must be a Limits, not {self.limits!r}")
        if not isinstance(self.sensitive, SensitiveNames):
            raise ConfigError(f"sensitive must be a SensitiveNames, not {self.sensitive!r}")
        if not isinstance(self.permanent_delete, bool):
            raise ConfigError(f"permanent_delete must be True or False, not {self.permanent_delete!r}")
        if self.advertise_roots is not None and not isinstance(self.advertise_roots, bool):
            raise ConfigError(f"advertise_roots must be True, False or None, not {self.advertise_roots!r}")
        for name in ("coalesce", "stale_temp_age"):
            seconds = getattr(self, name)
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not 0 <= seconds < math.inf
            ):
                raise ConfigError(f"{name} must be a non-negative number of seconds, not {seconds!r}")
        age = self.trash_max_age
        if isinstance(age, bool) or not isinstance(age, int | float) or not age > 0:
            raise ConfigError(f"trash_max_age must be a positive number of seconds, not {age!r}")
        size = self.trash_max_bytes
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
            raise ConfigError(f"trash_max_bytes must be a positive number of bytes or None, not {size!r}")
        if not isinstance(self.audit_required, bool):
            raise ConfigError(f"audit_required must be True or False, not {self.audit_required!r}")
        if self.audit_required and not self.audit_path:
            raise ConfigError(
                "audit_required needs an audit file: set audit_path (FSBroker.audit_file, --audit)"
            )

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
    """Where cross-process lock files go when the configuration names no folder.

    One folder per user account, the same for every process of that user whatever
    its session set: ``<home>/.cache/jupyter_fsbroker/locks``, on macOS
    ``<home>/Library/Caches/jupyter_fsbroker/locks`` (the cache folders of
    ``platformdirs``' conventions), where ``<home>`` is the account's home folder in
    the user database (``pwd.getpwuid(os.getuid())``). No environment variable
    moves it: a kernel of a desktop session (with ``XDG_RUNTIME_DIR``) and a command
    line run from SSH, cron or ``sudo -H`` (without it, or with another ``HOME`` or
    ``XDG_CACHE_HOME``) must lock in the same folder, or they never see each other's
    locks. Processes of different accounts (``sudo`` to root included) have
    different folders and do not coordinate. Only a user id without an entry in the
    user database (some containers) falls back on ``HOME``. On Windows it is the
    account's local application data folder, as the shell reports it.

    The lock files are named by the canonical path of what they lock
    (:mod:`~jupyter_fsbroker.core.lockfiles`), which names one file on one machine.
    On a home folder that several machines share over NFS, Linux turns the
    ``flock`` locks into NFS byte-range locks that the server keeps: processes on
    one machine still meet as on a local disk, and brokers on different machines
    meet too. That coordinates a file they share at the same mount path, and makes
    two different local files with the same absolute path on two machines
    conflict: a FILE_LOCKED that need not have been, never a conflict missed,
    which is why it is acceptable. Across machines
    the coordination is best effort (the NFS client may cache another machine's
    removal of a lock file for a few seconds); a mount without a lock service
    (``nolock``, ``local_lock=all``) keeps the locks local to each machine, which is
    what processes on one machine need; a mount whose lock service fails makes
    taking a lock fail (INTERNAL ``lock_error``), never pass silently. Name a local
    folder (``lock_dir``) to keep locks off NFS.
    """
    if sys.platform == "win32":  # pragma: no cover - the shell's folder, per account
        return str(platformdirs.user_cache_path("jupyter_fsbroker") / "locks")
    home = _account_home()
    if sys.platform == "darwin":  # pragma: no cover - platformdirs' macOS cache folder
        return os.path.join(home, "Library", "Caches", "jupyter_fsbroker", "locks")
    return os.path.join(home, ".cache", "jupyter_fsbroker", "locks")


def _account_home() -> str:
    """The home folder of this process's user account, whatever ``HOME`` says."""
    import pwd

    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        home = ""
    # A user id without an entry (or an empty one): the environment is all there is.
    return home or os.path.expanduser("~")


def default_trash_dir() -> str:
    """Where deleted files go when the configuration names no folder."""
    return str(platformdirs.user_data_path("jupyter_fsbroker") / "trash")
