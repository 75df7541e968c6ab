"""The trash on disk: deleted objects kept outside the roots until restored or deleted for good.

``files/delete`` moves the object into a :class:`Trash` (a per-user directory
the broker chooses, outside every root) unless the notebook asked for
permanent deletion, which uses :func:`~jupyter_fsbroker.core.trees.remove_tree`.
What may stay, and for how long, is decided elsewhere
(:mod:`~jupyter_fsbroker.core.retention`, applied by
:class:`~jupyter_fsbroker.core.trashcan.TrashCan`); this module keeps the entries.

Layout of the trash directory::

    <trash>/<id>/payload     the deleted file, directory or link
    <trash>/<id>/item.json   its metadata (the fields of TrashEntry)
    <trash>/.lock            the lock every change but an addition takes

An entry's id is ``"<UTC time>-<8 hex>"``. Its metadata is written last, so an
entry shows in :meth:`Trash.entries` only once it is complete, and an entry
never changes after that (its size and time are read once per process).

**Links, and names planted in the trash.** Every operation on an entry is
relative to a directory descriptor and never follows a symbolic link: a
deleted link is moved, copied or removed as a link, a directory swapped for a
link while it is being removed cannot lead the removal outside, an entry
directory that is a link is no entry (and is left alone), and metadata that is
a link is not read. Only names of the id's form are ever removed; nothing here
opens a path below the trash by its absolute spelling.

**Several processes.** The trash is per user: every kernel and command line of
that user shares it. Adding an entry needs no lock (a new directory with a
random id, then renames inside it). Taking entries out — restoring, deleting
for good, emptying, the retention's removals — happens under an exclusive OS
lock (``flock``) on ``.lock``, held by one thread of one process at a time
(:meth:`Trash.exclusive`), so two processes never restore or remove the same
entry; an entry gone meanwhile is skipped, not an error. A process that dies
loses its lock at once.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import operator
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator

import portalocker

from .errors import ConfigError
from .posix import DIR_READ_FLAGS, rename_noreplace
from .trashentry import META, PAYLOAD, TrashEntry, read_entry, write_meta
from .trees import check_name, copy_tree, remove_tree, tree_size

__all__ = ["Trash", "TrashEntry"]

log = logging.getLogger(__name__)

_LOCK = ".lock"
_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$")
#: Entry directories without metadata older than this (seconds) are leftovers of an interrupted move.
_ORPHAN_AGE = 3600.0
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
#: Oldest first; the id breaks ties.
_AGE_ORDER = operator.attrgetter("deleted_at", "id")


class Trash:
    """The entries of the trash directory *directory*, outside every root.

    Parameters
    ----------
    directory
        Created (mode ``0o700``) if missing; made private if it is not.

    Raises
    ------
    ConfigError
        The directory cannot be created or opened, or is a symbolic link.

    Notes
    -----
    Thread-safe, and safe to share with other processes (see the module's docstring).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = os.path.abspath(os.fspath(directory))
        self._lock = threading.Lock()  # the cache of entries
        self._exclusive = threading.RLock()  # this process's share of the OS lock
        self._held = 0
        self._lock_fd = -1
        # This process's view of the complete entries (read once each), and what they add up to.
        self._known: dict[str, TrashEntry] = {}
        self._total = 0
        self._oldest: float | None = None
        self._listed = -math.inf  # time.monotonic() of the last listing of the directory
        try:
            os.makedirs(self._directory, mode=0o700, exist_ok=True)
            fd = os.open(self._directory, DIR_READ_FLAGS)
        except OSError as exc:
            raise ConfigError(f"cannot use {self._directory!r} as the trash: {exc.strerror}") from exc
        try:
            if os.fstat(fd).st_mode & 0o077:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o700)
        finally:
            os.close(fd)

    @property
    def directory(self) -> str:
        """The trash directory (absolute)."""
        return self._directory

    def _open(self) -> int:
        return os.open(self._directory, DIR_READ_FLAGS)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the trash's lock: no other thread or process takes entries out meanwhile.

        Waits for the holder to finish. Re-entrant within a thread.

        Raises
        ------
        OSError
            The lock file cannot be opened or locked.
        """
        with self._exclusive:
            if self._held == 0:
                self._lock_fd = self._lock_file()
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
                if self._held == 0:
                    fd, self._lock_fd = self._lock_fd, -1
                    os.close(fd)  # and with it the OS lock

    def _lock_file(self) -> int:
        trash_fd = self._open()
        try:
            try:
                fd = os.open(_LOCK, _LOCK_FLAGS, 0o600, dir_fd=trash_fd)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                # A link planted in its place is never followed: it goes, and a file takes its place.
                os.unlink(_LOCK, dir_fd=trash_fd)
                fd = os.open(_LOCK, _LOCK_FLAGS | os.O_EXCL, 0o600, dir_fd=trash_fd)
        finally:
            os.close(trash_fd)
        try:
            portalocker.lock(fd, portalocker.LockFlags.EXCLUSIVE)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- moving in -------------------------------------------------------------------------------

    # long: a public method's numpy docstring; its code is one move into the trash and its undo,
    # which read best in one piece.
    def move_in(
        self,
        dir_fd: int,
        name: str,
        *,
        origin: str,
        root: str,
        path: str,
        server: str,
        connection_id: str = "",
        size: int | None = None,
    ) -> TrashEntry:
        """Move the entry *name* of the directory open as *dir_fd* into the trash.

        The entry is renamed into the trash relative to *dir_fd*, never by
        path and never following a link (a link is trashed as a link). When
        the trash is on another filesystem, the entry is copied in
        descriptor-relative, fsynced, and then removed with :func:`remove_tree`.

        Parameters
        ----------
        dir_fd
            A descriptor of the directory holding *name* (one that only names it is fine).
        name
            A single path component.
        origin
            The entry's absolute path, where a restore puts it back.
        root, path, server, connection_id
            As in :class:`TrashEntry`.
        size
            Its size, when the caller measured it already (with
            :func:`~jupyter_fsbroker.core.trees.tree_size`); else it is measured here.

        Returns
        -------
        TrashEntry
            The new entry.

        Raises
        ------
        FileNotFoundError
            *name* does not exist.
        ValueError
            *name* is not a single component or *origin* is not absolute.
        OSError
            The move failed; the entry is where it was. After a successful
            cross-filesystem copy, an error removing the original is raised
            too, and the complete copy stays in the trash.
        """
        check_name(name)
        if not os.path.isabs(origin):
            raise ValueError(f"origin must be an absolute path, not {origin!r}")
        trash_fd = self._open()
        try:
            now = time.time()
            entry_id, entry_fd = _new_entry_dir(trash_fd, now)
            try:
                copied = _fill(dir_fd, name, trash_fd, entry_id, entry_fd)
                try:
                    st = os.stat(PAYLOAD, dir_fd=entry_fd, follow_symlinks=False)
                    entry = TrashEntry(
                        id=entry_id,
                        root=root,
                        path=path,
                        origin=origin,
                        size=tree_size(entry_fd, PAYLOAD) if size is None else size,
                        deleted_at=now,
                        server=server,
                        connection_id=connection_id,
                        is_dir=stat.S_ISDIR(st.st_mode),
                    )
                    write_meta(entry_fd, entry)
                except BaseException:
                    _undo(dir_fd, name, trash_fd, entry_id, entry_fd, copied)
                    raise
            finally:
                os.close(entry_fd)
        finally:
            os.close(trash_fd)
        with self._lock:
            self._known[entry.id] = entry
            self._total += entry.size
            self._oldest = entry.deleted_at if self._oldest is None else min(self._oldest, entry.deleted_at)
        if copied:
            remove_tree(dir_fd, name)
        return entry

    # -- listing ---------------------------------------------------------------------------------

    def entries(self) -> tuple[TrashEntry, ...]:
        """The complete entries, oldest first.

        The metadata of an entry is read once per process; each call lists
        the directory again, so entries other processes added or took out are
        seen.
        """
        found = self._scan()
        found.sort(key=_AGE_ORDER)
        return tuple(found)

    def usage(self, *, fresh: float = 0.0) -> tuple[int, float | None]:
        """The bytes of all complete entries, and when the oldest was deleted (``None``: none).

        Parameters
        ----------
        fresh
            Seconds: a view of the directory listed at most this long ago will
            do, with this process's own additions and removals since (what the
            retention checks after every addition: listing a trash of thousands
            of entries each time would cost milliseconds per delete). ``0``:
            list it now.
        """
        with self._lock:
            if time.monotonic() - self._listed <= fresh:
                return self._total, self._oldest
        self._scan()
        with self._lock:
            return self._total, self._oldest

    def _scan(self) -> list[TrashEntry]:
        listed = time.monotonic()
        trash_fd = self._open()
        try:
            names = os.listdir(trash_fd)
            with self._lock:
                known = self._known
            found = []
            for name in names:
                entry = known.get(name)
                if entry is None and _ID_RE.match(name):
                    # Opened without following a link: a link dressed as an entry is none.
                    entry = read_entry(trash_fd, name)
                if entry is not None:
                    found.append(entry)
        finally:
            os.close(trash_fd)
        with self._lock:
            self._known = {entry.id: entry for entry in found}
            self._total = sum(entry.size for entry in found)
            self._oldest = min((entry.deleted_at for entry in found), default=None)
            self._listed = listed
        return found

    # -- taking out ------------------------------------------------------------------------------

    def restore(self, entry_id: str, *, to: str | None = None, overwrite: bool = False) -> str:
        """Move the entry back to its origin (or to *to*), creating missing parents; return where.

        The payload is renamed into place in one step (across filesystems:
        copied beside the destination, then renamed), so nothing ever sees
        half of it; it keeps its content and modes.

        Parameters
        ----------
        entry_id
            The entry's id.
        to
            An absolute path to restore to instead of the origin.
        overwrite
            Replace whatever is at the destination now (it is deleted for
            good; a directory there is removed first). Without it, something
            at the destination is never replaced, even if it appears while
            the entry is being restored.

        Returns
        -------
        str
            The destination path.

        Raises
        ------
        KeyError
            No such entry (any more).
        FileExistsError
            Something is at the destination and *overwrite* is false.
        ValueError
            *to* is not absolute.
        OSError
            The destination's parents cannot be created, or the move failed;
            the entry stays in the trash.
        """
        if to is not None and not os.path.isabs(to):
            raise ValueError(f"restore to an absolute path, not {to!r}")
        with self.exclusive():
            trash_fd = self._open()
            try:
                entry = read_entry(trash_fd, entry_id) if _ID_RE.match(entry_id) else None
                if entry is None:
                    raise KeyError(entry_id)
                destination = to or entry.origin
                parent, base = os.path.split(destination)
                check_name(base)
                # The destination is the user's own path: its parents are followed and made as written.
                os.makedirs(parent, exist_ok=True)
                parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    entry_fd = os.open(entry_id, DIR_READ_FLAGS, dir_fd=trash_fd)
                    try:
                        _put_back(entry_fd, parent_fd, base, entry, overwrite)
                        os.unlink(META, dir_fd=entry_fd)
                    finally:
                        os.close(entry_fd)
                finally:
                    os.close(parent_fd)
                self._forget(entry_id)
                remove_tree(trash_fd, entry_id, force=True)
            finally:
                os.close(trash_fd)
        return destination

    def purge(self, entry_id: str) -> TrashEntry | None:
        """Delete the entry permanently; return it (``None`` for a leftover without metadata).

        Raises
        ------
        KeyError
            No such entry.
        """
        if not _ID_RE.match(entry_id):
            raise KeyError(entry_id)
        with self.exclusive():
            trash_fd = self._open()
            try:
                try:
                    st = os.stat(entry_id, dir_fd=trash_fd, follow_symlinks=False)
                except FileNotFoundError:
                    raise KeyError(entry_id) from None
                if not stat.S_ISDIR(st.st_mode):
                    raise KeyError(entry_id)
                entry = read_entry(trash_fd, entry_id)
                self._forget(entry_id)
                _purge(trash_fd, entry_id)
            finally:
                os.close(trash_fd)
        return entry

    def empty(self, *, older_than: float | None = None) -> tuple[TrashEntry, ...]:
        """Delete entries permanently and return them.

        Parameters
        ----------
        older_than
            Only entries deleted more than this many seconds ago; ``None`` for
            all. Leftovers of interrupted moves are removed too
            (:meth:`remove_leftovers`), without being returned.

        Raises
        ------
        ValueError
            *older_than* is negative.
        """
        if older_than is not None and older_than < 0:
            raise ValueError(f"older_than must not be negative, not {older_than}")
        removed = []
        with self.exclusive():
            now = time.time()
            for entry in self.entries():
                if older_than is not None and now - entry.deleted_at <= older_than:
                    continue
                if self.take_out(entry):
                    removed.append(entry)
            self.remove_leftovers()
        return tuple(removed)

    def take_out(self, entry: TrashEntry) -> bool:
        """Delete *entry* permanently if it is still there; return whether it was (under :meth:`exclusive`).

        An entry that cannot be removed is logged and left.
        """
        try:
            self.purge(entry.id)
        except KeyError:
            return False
        except OSError:
            log.exception("cannot delete the trash entry %s", entry.id)
            return False
        return True

    def remove_leftovers(self) -> int:
        """Remove the entry directories without metadata over an hour old; return how many.

        They are what a move or a removal interrupted by a crash left.
        """
        count = 0
        with self.exclusive():
            now = time.time()
            trash_fd = self._open()
            try:
                for entry_id in _entry_dirs(trash_fd):
                    try:
                        st = os.stat(entry_id, dir_fd=trash_fd, follow_symlinks=False)
                        if now - st.st_mtime <= _ORPHAN_AGE or read_entry(trash_fd, entry_id) is not None:
                            continue
                        _purge(trash_fd, entry_id)
                    except (FileNotFoundError, KeyError):
                        continue
                    except OSError:
                        log.exception("cannot remove the trash leftover %s", entry_id)
                        continue
                    count += 1
            finally:
                os.close(trash_fd)
        return count

    def _forget(self, entry_id: str) -> None:
        with self._lock:
            entry = self._known.pop(entry_id, None)
            if entry is not None:
                self._total -= entry.size
                if entry.deleted_at == self._oldest:
                    self._oldest = min((e.deleted_at for e in self._known.values()), default=None)


# -- entry directories ------------------------------------------------------------------------------


def _new_entry_dir(trash_fd: int, now: float) -> tuple[str, int]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    while True:
        entry_id = f"{stamp}-{secrets.token_hex(4)}"
        try:
            os.mkdir(entry_id, 0o700, dir_fd=trash_fd)
        except FileExistsError:
            continue
        try:
            return entry_id, os.open(entry_id, DIR_READ_FLAGS, dir_fd=trash_fd)
        except BaseException:
            os.rmdir(entry_id, dir_fd=trash_fd)
            raise


def _fill(dir_fd: int, name: str, trash_fd: int, entry_id: str, entry_fd: int) -> bool:
    """Put the object into the entry directory; return whether it was copied (not renamed)."""
    try:
        try:
            os.rename(name, PAYLOAD, src_dir_fd=dir_fd, dst_dir_fd=entry_fd)
            return False
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        try:
            copy_tree(dir_fd, name, entry_fd, PAYLOAD)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                remove_tree(entry_fd, PAYLOAD, force=True)
            raise
        return True
    except BaseException:
        with contextlib.suppress(OSError):
            os.rmdir(entry_id, dir_fd=trash_fd)
        raise


def _undo(dir_fd: int, name: str, trash_fd: int, entry_id: str, entry_fd: int, copied: bool) -> None:
    """Take back a move whose metadata could not be written."""
    try:
        if copied:
            remove_tree(entry_fd, PAYLOAD, force=True)
        else:
            os.rename(PAYLOAD, name, src_dir_fd=entry_fd, dst_dir_fd=dir_fd)
        os.rmdir(entry_id, dir_fd=trash_fd)
    except OSError:
        log.exception("cannot take back the move of an object into the trash (%s)", entry_id)


def _entry_dirs(trash_fd: int) -> list[str]:
    with os.scandir(trash_fd) as it:
        return [e.name for e in it if _ID_RE.match(e.name) and e.is_dir(follow_symlinks=False)]


def _put_back(entry_fd: int, parent_fd: int, base: str, entry: TrashEntry, overwrite: bool) -> None:
    if overwrite:
        try:
            existing: os.stat_result | None = os.stat(base, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None and (stat.S_ISDIR(existing.st_mode) or entry.is_dir):
            # A rename cannot replace these: clear the way (a file or link is replaced atomically).
            remove_tree(parent_fd, base, force=False)
    place = _rename if overwrite else rename_noreplace
    try:
        place(entry_fd, PAYLOAD, parent_fd, base)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    # Another filesystem: copy beside the destination, then rename into place in one step.
    temp = f".fsbroker-restore-{secrets.token_hex(8)}"
    try:
        copy_tree(entry_fd, PAYLOAD, parent_fd, temp)
        place(parent_fd, temp, parent_fd, base)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_tree(parent_fd, temp, force=False)
        raise
    remove_tree(entry_fd, PAYLOAD, force=True)


def _rename(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    """:func:`os.rename` spelled as :func:`~jupyter_fsbroker.core.posix.rename_noreplace`."""
    os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)


def _purge(trash_fd: int, entry_id: str) -> None:
    """Remove the entry directory, metadata first so that the entry disappears at once."""
    try:
        entry_fd = os.open(entry_id, DIR_READ_FLAGS, dir_fd=trash_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise KeyError(entry_id) from None
        raise
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(META, dir_fd=entry_fd)
    finally:
        os.close(entry_fd)
    remove_tree(trash_fd, entry_id, force=True)
