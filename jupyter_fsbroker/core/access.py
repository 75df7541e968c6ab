"""What one connection may touch: the checks of every request against roots, grants and locks.

An :class:`Access` belongs to one connection. It decides whether a path inside
a root may be used for an operation (the root is still shared, a read-only
root is not written, a sensitive name is explicitly allowed, a live grant
covers it, the connection is still open), resolves request paths under that
check (:func:`~jupyter_fsbroker.core.resolve.resolve`), checks once more right
before the I/O with the locks held, and takes those locks.

Sensitive names are judged on resolved paths: the path a request resolves
to, every place the resolution passed through on the way (see
:func:`~jupyter_fsbroker.core.resolve.resolve`), and, where the object is a
symbolic link itself (delete, rename, listings, watch events), where that link
leads in its root. A link named ``notes.txt`` that points at ``.env`` is thus
refused, left out of listings and of watch events, as ``.env`` is.

It never caches a decision: every check reads the grant table as it is at
that moment, so a revocation also stops requests that were already queued. A
refusal for a missing grant names the path, the operation and, when known, why
the grant is missing (``data.cause``: the user denied, narrowed or let the
consent time out, or revoked it; see :mod:`.refusals`); its ``reason`` stays
``not_granted``, the one a consent may cure.
"""

from __future__ import annotations

import os
import stat
import threading
from typing import Literal

from .audit import AuditNote
from .consent_facts import Asker
from .errors import FilesError, NotFound, PermissionDenied
from .holds import Hold
from .ops import check_if_match, check_writable
from .paths import parse
from .refusals import Refusals, cause_text
from .resolve import Check, Resolved, resolve
from .rootpath import RootPath
from .roots import Root
from .services import BrokerServices
from .tempfiles import is_temp_name

__all__ = ["Access"]


class Access:
    """The policy of one connection: checks, resolution and locks, in the order a request needs them.

    Parameters
    ----------
    broker
        The broker's shared state.
    owner
        The connection's id: grants and locks belong to it.
    label
        The server's name, shown to others as ``lockedBy``.

    Attributes
    ----------
    refusals
        What this connection's user did not grant, and why.
    asker
        Who the server says it is and where it runs, for consent prompts (set
        by whoever opened the connection once the handshake told it).
    """

    def __init__(self, broker: BrokerServices, owner: str, label: str) -> None:
        self.broker = broker
        self.owner = owner
        self.label = label
        self.refusals = Refusals()
        self.asker = Asker()
        self._lock = threading.Lock()
        self._closed = False
        #: Why the connection was closed, for the refusals that follow.
        self.close_reason = "the connection is closed"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: every check refuses from then on."""
        return self._closed

    def close(self, reason: str | None = None) -> bool:
        """Refuse every check from now on; return whether it was open until now.

        *reason*, in words, ends the message of every refusal that follows.
        """
        with self._lock:
            was_open = not self._closed
            if was_open and reason:
                self.close_reason = f"the connection is closed ({reason})"
            self._closed = True
        return was_open

    # -- checks ----------------------------------------------------------------------------------

    def check(self, operation: str) -> Check:
        """The check of *operation*, as :func:`~jupyter_fsbroker.core.resolve.resolve` calls it.

        The returned ``check(root, parts)`` raises :class:`PermissionDenied`
        (``connection_closed``, ``root_removed``, ``temporary_file``,
        ``read_only``, ``sensitive`` or ``not_granted``) when the path may not
        be used. The broker's own temporary files (``.fsbroker-*.tmp``) are
        never a request's business: reading one would show another
        connection's staged upload, writing one could swap it.
        """
        broker = self.broker

        def check(root: Root, parts: tuple[str, ...]) -> None:
            if self._closed:
                raise PermissionDenied(self.close_reason, reason="connection_closed")
            if any(is_temp_name(part) for part in parts):
                raise PermissionDenied(
                    "names of the form .fsbroker-*.tmp are the broker's temporary files",
                    reason="temporary_file",
                )
            if not broker.roots.is_current(root):
                raise PermissionDenied("the shared folder was removed", reason="root_removed")
            if operation in ("write", "delete") and root.read_only:
                raise PermissionDenied(f"the folder {root.name!r} is shared read-only", reason="read_only")
            sensitive = broker.config.sensitive.matches(parts)
            location = RootPath(root, parts)
            if broker.grants.find(self.owner, location, operation, sensitive=sensitive) is None:
                if sensitive:
                    raise PermissionDenied("sensitive files are not shared", reason="sensitive")
                raise self.not_granted(location, operation)

        return check

    def passage(self, operation: str | None) -> Check:
        """The check of the sensitive names alone, for places a resolution for *operation* passes.

        The returned ``passage(root, parts)`` raises :class:`PermissionDenied`
        (``sensitive``) unless *parts* is not sensitive or a grant that
        includes sensitive names covers it for *operation* (``None``: whatever
        the grants say).
        """
        broker = self.broker

        def passage(root: Root, parts: tuple[str, ...]) -> None:
            if broker.config.sensitive.matches(parts) and (
                operation is None
                or broker.grants.find(self.owner, RootPath(root, parts), operation, sensitive=True) is None
            ):
                raise PermissionDenied("sensitive files are not shared", reason="sensitive")

        return passage

    def leads_to_sensitive(self, location: RootPath, operation: str | None) -> bool:
        """Whether *location*, resolved, leads to a sensitive path that *operation* may not use.

        Every place on the way counts, and so does where a link points whether
        or not something is there (a link to a missing ``.env`` leads to
        ``.env``); a path that leads out of the root, or loops, leads to
        nothing sensitive (it is refused for that reason). ``None``: whatever
        the grants say.
        """
        passage = self.passage(operation)
        try:
            resolve(self.broker.roots, location, check=passage, passage=passage).close()
        except PermissionDenied as exc:
            return exc.reason == "sensitive"
        except (FilesError, OSError):
            return False
        return False

    def not_granted(self, location: RootPath, operation: str) -> PermissionDenied:
        """The refusal of *operation* on *location* for want of a grant, saying why there is none."""
        refusal = self.refusals.find(location, operation)
        cause = refusal.cause if refusal is not None else None
        if cause is None:
            lost = self.broker.grants.lost(self.owner, location, operation)
            cause = lost.why if lost is not None else None
        if cause is None:
            return PermissionDenied(
                f"no {operation} access to {location.rel} has been granted here (ask with files/consent)",
                reason="not_granted",
            )
        return PermissionDenied(
            f"no {operation} access to {location.rel}: {cause_text(cause)}", reason="not_granted", cause=cause
        )

    def may_list(self, location: RootPath) -> bool:
        """Whether a listing may show *location*: it is not sensitive, or explicitly allowed."""
        broker = self.broker
        return (
            not broker.config.sensitive.matches(location.parts)
            or broker.grants.find(self.owner, location, "read", sensitive=True) is not None
        )

    def may_list_link(self, location: RootPath) -> bool:
        """Whether a listing may show the symbolic link at *location*: it leads to nothing hidden."""
        return not self.leads_to_sensitive(location, "read")

    def may_watch(self, root: Root, parts: tuple[str, ...]) -> bool:
        """Whether a watch event on *parts* may be sent (the ``accept`` of a watch).

        A link that leads to a sensitive path counts as that path; whether the
        path is a link is looked up at delivery, by its absolute path (a
        decision to leave an event out, never to reach a file).
        """
        if self._closed or not parts or is_temp_name(parts[-1]):
            return False
        try:
            self.check("watch")(root, parts)
        except PermissionDenied:
            return False
        location = RootPath(root, parts)
        try:
            is_link = stat.S_ISLNK(os.lstat(location.key).st_mode)
        except OSError:
            return True  # gone (a deletion), or unreadable: nothing to follow
        return not (is_link and self.leads_to_sensitive(location, "watch"))

    # -- resolution and locks --------------------------------------------------------------------

    def resolve(
        self,
        raw: str,
        operation: str,
        note: AuditNote | None = None,
        *,
        follow_last: bool = True,
        make_parents: bool = False,
    ) -> Resolved:
        """Parse and resolve the request path *raw* for *operation*; the caller closes the result.

        *note*, when given, learns the root and then the canonical path.

        Raises
        ------
        FilesError
            What :func:`~jupyter_fsbroker.core.paths.parse` and
            :func:`~jupyter_fsbroker.core.resolve.resolve` raise.
        """
        target = parse(raw, self.broker.roots)
        if note is not None:
            note.root = target.root.name
        res = resolve(
            self.broker.roots,
            target,
            check=self.check(operation),
            follow_last=follow_last,
            make_parents=make_parents,
            raw=raw,
            passage=self.passage(operation),
        )
        if note is not None:
            note.locate(res.location)
        if (
            not follow_last
            and res.st is not None
            and stat.S_ISLNK(res.st.st_mode)
            and self.leads_to_sensitive(res.location, operation)
        ):
            # The link itself is the object (delete, rename): one to a secret is the secret's.
            res.close()
            raise PermissionDenied("sensitive files are not shared", reason="sensitive", path=raw)
        return res

    def recheck(self, res: Resolved, operation: str) -> None:
        """The last check, with the locks held, right before the I/O."""
        self.check(operation)(res.root, res.location.parts)

    def hold(self, res: Resolved, mode: Literal["shared", "exclusive"]) -> Hold:
        """Lock the object *res* for one operation of this connection (see :meth:`LockManager.hold`)."""
        location = res.location
        return self.broker.locks.hold(
            location.key, mode, owner=self.owner, owner_label=self.label, path=location.rel
        )

    def hold_to_write(
        self, res: Resolved, shown: str, *, create: bool, exclusive: bool, if_match: str | None
    ) -> Hold:
        """Lock *res* exclusively to write it whole, once the write may certainly go ahead.

        The target is checked (not a directory, there or not as *create* and
        *exclusive* want) before the lock is taken; with the lock held, the
        grants are checked once more and the target is looked at again, with
        *if_match*.

        Raises
        ------
        FilesError
            A refused check: the lock is released again.
        """
        check_writable(res, shown, create=create, exclusive=exclusive)
        hold = self.hold(res, "exclusive")
        try:
            self.recheck(res, "write")
            res.refresh()
            check_writable(res, shown, create=create, exclusive=exclusive)
            check_if_match(res.st, if_match, shown)
        except BaseException:
            hold.release()
            raise
        return hold

    def check_lock_id(self, lock_id: str | None) -> None:
        """Accept an optional ``lockId`` only if it is one of this connection's kept locks.

        Raises
        ------
        NotFound
            ``reason="unknown_lock"``: someone else's lock, or none at all.
        """
        if lock_id is not None and lock_id not in {
            info.lock_id for info in self.broker.locks.held() if info.owner == self.owner
        }:
            raise NotFound("unknown lockId", reason="unknown_lock")
