"""The trash as the broker and the user use it: :class:`TrashCan`.

The broker puts what a server deletes into it (:meth:`TrashCan.take`), within
the retention (:mod:`~jupyter_fsbroker.core.retention`), which it applies after
every addition and when it starts (:meth:`TrashCan.enforce`). The user lists
the entries, restores them and empties the trash (:meth:`~TrashCan.list`,
:meth:`~TrashCan.restore`, :meth:`~TrashCan.empty`) from the notebook, the
command line or the dashboard.

Every entry that leaves the trash leaves an audit record: ``trash/restore``
and ``trash/empty`` as the user's actions, ``trash/expire`` as the retention's
(see :mod:`~jupyter_fsbroker.core.audit`). When the broker requires an audit,
a restore or an emptying is announced first, like a request, and does nothing
if that cannot be written.

The storage (:class:`~jupyter_fsbroker.core.trash.Trash`) is made on first
use: listing or enforcing a trash that was never used creates nothing.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable

from .audit import BROKER_ACTOR, USER_ACTOR, AuditLog, AuditRecord, new_audit_id
from .config import BrokerConfig
from .errors import ConfigError, TooLarge
from .retention import Retention
from .rootpath import RootPath
from .trash import Trash
from .trashentry import TrashEntry
from .trees import tree_size

__all__ = ["TrashCan"]

log = logging.getLogger(__name__)

#: The length of an id's random tail, which names an entry on its own when it is unique.
_TAIL = 8
#: Seconds the view of the trash the check after an addition uses may be old (see :mod:`.retention`).
_FRESH = 1.0


class TrashCan:
    """The trash in *directory*: what the broker puts in, what the user takes out, all audited.

    Parameters
    ----------
    directory
        The trash directory (created, private, on first use).
    audit
        Where the records of the entries taken out go.
    config
        Returns the settings in force (the retention, and whether the audit is required).
    """

    def __init__(self, directory: str, *, audit: AuditLog, config: Callable[[], BrokerConfig]) -> None:
        self._directory = os.path.abspath(directory)
        self._audit = audit
        self._config = config
        self._lock = threading.Lock()
        self._trash: Trash | None = None

    @property
    def directory(self) -> str:
        """The trash directory (absolute)."""
        return self._directory

    @property
    def retention(self) -> Retention:
        """The retention in force now."""
        return Retention.of(self._config(), self._directory)

    def _storage(self, *, create: bool = True) -> Trash | None:
        with self._lock:
            if self._trash is None and (create or os.path.isdir(self._directory)):
                self._trash = Trash(self._directory)
            return self._trash

    def storage(self) -> Trash:
        """The entries on disk (the directory is made now if it was not).

        Raises
        ------
        ConfigError
            The directory cannot be used.
        """
        trash = self._storage()
        assert trash is not None
        return trash

    # -- the broker's side -------------------------------------------------------------------------

    def take(
        self, dir_fd: int, name: str, *, location: RootPath, server: str, connection_id: str, shown: str
    ) -> TrashEntry:
        """Move what a server deletes into the trash, then apply the retention.

        Parameters
        ----------
        dir_fd, name
            The object: the entry *name* of the directory open as *dir_fd*
            (resolved, checked and locked by the caller).
        location
            Where it is.
        server, connection_id
            Who deletes it.
        shown
            The path as the request wrote it, for the error.

        Raises
        ------
        TooLarge
            It is larger than the trash holds (``exceeds_trash``): nothing was moved.
        OSError
            The move failed; the object is where it was.
        """
        size = tree_size(dir_fd, name)
        retention = self.retention
        if not retention.fits(size):
            raise TooLarge(
                f"{shown} ({size:,} bytes) is larger than the trash holds ({retention.max_bytes:,} bytes): "
                "nothing was deleted",
                reason="exceeds_trash",
                path=shown,
                maxBytes=retention.max_bytes,
            )
        entry = self.storage().move_in(
            dir_fd,
            name,
            origin=location.key,
            root=location.root.name,
            path=location.rel,
            server=server,
            connection_id=connection_id,
            size=size,
        )
        try:
            self._enforce(self.storage(), retention, fresh=_FRESH)
        except Exception:  # the delete is done; the next one (or the next start) tries again
            log.exception("could not apply the trash's retention")
        return entry

    def enforce(self) -> tuple[TrashEntry, ...]:
        """Remove the entries the retention no longer keeps, and leftovers of crashes; return the entries.

        Raises
        ------
        OSError
            The trash's lock cannot be taken.
        """
        trash = self._storage(create=False)
        if trash is None:
            return ()
        removed = self._enforce(trash, self.retention, fresh=0.0)
        trash.remove_leftovers()
        return removed

    def _enforce(self, trash: Trash, retention: Retention, *, fresh: float) -> tuple[TrashEntry, ...]:
        total, oldest = trash.usage(fresh=fresh)
        if total <= retention.max_bytes and (oldest is None or time.time() - oldest <= retention.max_age):
            return ()  # the usual case: no lock taken, nothing listed or sorted
        removed = []
        with trash.exclusive():
            # Another process may have removed some meanwhile: decide again under the lock.
            for entry, reason in retention.select(trash.entries(), time.time()):
                if trash.take_out(entry):
                    removed.append(entry)
                    log.info("the trash's retention (%s) deleted %s for good", reason, entry.path)
                    self._record("trash/expire", entry, BROKER_ACTOR, reason=reason)
        return tuple(removed)

    # -- the user's side ---------------------------------------------------------------------------

    def list(self) -> tuple[TrashEntry, ...]:
        """The entries, newest first (nothing is created when the trash was never used)."""
        trash = self._storage(create=False)
        return tuple(reversed(trash.entries())) if trash is not None else ()

    def find(self, entry: TrashEntry | str) -> TrashEntry:
        """The entry named by *entry*: an entry, its id, or the last 8 characters of its id.

        Raises
        ------
        ConfigError
            No entry (or more than one) has that id.
        """
        wanted = entry.id if isinstance(entry, TrashEntry) else str(entry).strip()
        entries = self.list()
        found = [e for e in entries if e.id == wanted]
        if not found and len(wanted) == _TAIL:
            found = [e for e in entries if e.id.endswith("-" + wanted)]
        if len(found) == 1:
            return found[0]
        if found:
            raise ConfigError(f"more than one trash entry ends with {wanted!r}: give the whole id")
        raise ConfigError(f"no trash entry {wanted!r} (listing the trash shows the ids)")

    def restore(
        self, entry: TrashEntry | str, *, to: str | os.PathLike[str] | None = None, overwrite: bool = False
    ) -> str:
        """Put an entry back where it was deleted from (or at *to*); return where it is now.

        Missing parent folders are made again (a root that was removed from
        the disk too). The object appears at once and whole, with its content
        and modes; it leaves the trash.

        Parameters
        ----------
        entry
            The entry, its id, or the last 8 characters of its id.
        to
            Another place: a path (``~`` and relative paths are expanded); an
            existing folder receives the object under its own name.
        overwrite
            Replace what is at that place now (for good). Without it, nothing
            there is ever replaced.

        Raises
        ------
        ConfigError
            No such entry; something is at the place and *overwrite* is
            false; the place cannot be written; or the audit is required and
            cannot be written. The entry then stays in the trash.
        """
        found = self.find(entry)
        destination = found.origin if to is None else _place(to, found)
        audit_id = self._begin("trash/restore", found)
        try:
            where = self.storage().restore(
                found.id, to=None if to is None else destination, overwrite=overwrite
            )
        except KeyError:
            self._record("trash/restore", found, USER_ACTOR, "NOT_FOUND", "not_found", audit_id)
            raise ConfigError(f"{found.path} ({found.id}) is no longer in the trash") from None
        except FileExistsError:
            self._record("trash/restore", found, USER_ACTOR, "ALREADY_EXISTS", "exists", audit_id)
            raise ConfigError(
                f"cannot restore {found.path}: something is at {destination} already "
                "(overwrite=True replaces it, to=... restores it elsewhere)"
            ) from None
        except (OSError, ValueError) as exc:
            self._record("trash/restore", found, USER_ACTOR, "INTERNAL_ERROR", "os_error", audit_id)
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"cannot restore {found.path} to {destination}: {detail}") from None
        self._record("trash/restore", found, USER_ACTOR, audit_id=audit_id)
        return where

    def empty(
        self,
        *,
        older_than: float | datetime.timedelta | None = None,
        entries: Iterable[TrashEntry | str] | None = None,
    ) -> tuple[TrashEntry, ...]:
        """Delete entries for good (all, or those deleted more than *older_than* ago); return them.

        Parameters
        ----------
        older_than
            Seconds, or a :class:`~datetime.timedelta`; ``None``: every entry.
        entries
            Only these (entries or ids), those of them still there: what a
            confirmation showed, say.

        Raises
        ------
        ConfigError
            *older_than* is negative, or the audit is required and cannot be written.
        """
        seconds = older_than.total_seconds() if isinstance(older_than, datetime.timedelta) else older_than
        if seconds is not None and not seconds >= 0:
            raise ConfigError(f"older_than must be a non-negative number of seconds, not {older_than!r}")
        only = None if entries is None else {e.id if isinstance(e, TrashEntry) else str(e) for e in entries}
        trash = self._storage(create=False)
        if trash is None:
            return ()
        now = time.time()
        removed = []
        with trash.exclusive():
            for entry in trash.entries():
                if seconds is not None and now - entry.deleted_at <= seconds:
                    continue
                if only is not None and entry.id not in only:
                    continue
                audit_id = self._begin("trash/empty", entry)
                if trash.take_out(entry):
                    removed.append(entry)
                    self._record("trash/empty", entry, USER_ACTOR, audit_id=audit_id)
            trash.remove_leftovers()
        return tuple(removed)

    # -- audit -------------------------------------------------------------------------------------

    def _begin(self, method: str, entry: TrashEntry) -> str | None:
        """Announce the user's action when the audit is required (see :meth:`AuditLog.begin`)."""
        if not self._config().audit_required:
            return None
        audit_id = new_audit_id()
        server, _ = USER_ACTOR
        try:
            self._audit.begin(
                audit_id, time=time.time(), server=server, connection_id="", method=method, path=entry.path
            )
        except OSError as exc:  # logged by the audit log
            raise ConfigError(
                f"{method} of {entry.path} refused: the audit file cannot be written "
                f"and the audit is required ({exc.strerror or exc})"
            ) from None
        return audit_id

    def _record(
        self,
        method: str,
        entry: TrashEntry,
        actor: tuple[str, str],
        error: str | None = None,
        reason: str | None = None,
        audit_id: str | None = None,
    ) -> None:
        server, kind = actor
        self._audit.append(
            AuditRecord(
                time=time.time(),
                server=server,
                connection_id="",
                method=method,
                path=entry.path,
                canonical=entry.path,
                root=entry.root,
                decision="allow",
                error=error,
                reason=reason,
                bytes=0 if error else entry.size,
                actor=kind,
                audit_id=audit_id,
            )
        )


def _place(to: str | os.PathLike[str], entry: TrashEntry) -> str:
    """Where a restore *to* puts *entry*: the path, or the entry's name inside it if it is a folder."""
    place = os.path.abspath(os.path.expanduser(os.fspath(to)))
    return os.path.join(place, entry.name) if os.path.isdir(place) else place
