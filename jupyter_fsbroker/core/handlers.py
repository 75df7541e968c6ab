"""The ``files/*`` methods: one function per method, from checked params to the result dict.

Each handler takes the request's :class:`~jupyter_fsbroker.core.context.RequestContext`
(the connection's state, the shared state, the params, the audit note, the
limits) and returns the result or raises a
:class:`~jupyter_fsbroker.core.errors.FilesError`. The dispatch
(:mod:`jupyter_fsbroker.core.dispatch`) looks them up, rate-limits, maps what
they raise and audits them; the file I/O is in :mod:`jupyter_fsbroker.core.ops`.
A handler never reaches the broker: what it may use is in its context.

Every handler resolves its path through the connection's checks and checks
again with its locks held, right before the I/O: a handler must never touch a
file it has not resolved, nor skip that last check.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from . import ops
from .audit import AuditNote
from .change_log import MAX_WAIT_MS
from .changes import ChangeEvent
from .context import RequestContext
from .errors import (
    AlreadyExists,
    FileLocked,
    InvalidParams,
    NotFound,
    PermissionDenied,
    RateLimited,
    TooLarge,
    WrongType,
)
from .resolve import Resolved
from .textcodec import text_codec
from .transfers import Transfer
from .trees import remove_tree
from .watch import EVENTS

__all__ = [
    "changes",
    "changes_params",
    "consent",
    "create",
    "delete",
    "list_directory",
    "read",
    "rename_path",
    "stat_path",
    "still_watched",
    "unlock",
    "unwatch",
    "watch",
    "write",
]

# -- files/read ------------------------------------------------------------------------------------


def read(ctx: RequestContext) -> dict[str, Any]:
    """``files/read``: a chunk of a file, text split on characters."""
    conn, p, note = ctx.conn, ctx.params, ctx.note
    raw = p.path()
    encoding = p.get("encoding", str, "utf-8")
    offset = p.count("offset", 0) or 0
    limits = ctx.limits
    length = p.count("length", limits.default_read_bytes)
    assert length is not None
    length = min(length, limits.max_chunk_bytes)
    keep = p.flag("keepLocked", False)
    access = conn.access
    access.check_lock_id(p.get("lockId", str, None))
    with access.resolve(raw, "read", note) as res:
        if res.st is None:
            raise NotFound(f"{raw} does not exist", path=raw)
        if res.name is None or stat.S_ISDIR(res.st.st_mode):
            raise WrongType(f"{raw} is a directory", reason="is_directory", path=raw)
        if offset > res.st.st_size:
            raise InvalidParams(
                f"offset {offset} is past the end of {raw}",
                reason="bad_offset",
                path=raw,
                size=res.st.st_size,
            )
        conn.rate.take_bytes(min(length, res.st.st_size - offset), path=raw)
        with access.hold(res, "exclusive" if keep else "shared") as hold:
            access.recheck(res, "read")
            chunk = ops.read_chunk(
                res, offset=offset, length=length, encoding=encoding, shown=raw, buffers=conn.buffers
            )
            lock_id = hold.keep() if keep else None
        note.bytes = chunk.bytes_read
        done = chunk.offset + chunk.bytes_read
        transfer = Transfer(conn.id, conn.server, res.rel, "read", done, chunk.size, chunk.eof)
        ctx.progress(transfer)
        result = {
            "content": chunk.content,
            "encoding": encoding,
            "size": chunk.size,
            "offset": chunk.offset,
            "bytesRead": chunk.bytes_read,
            "eof": chunk.eof,
            "mimeType": ops.mime_type(res.name),
            "etag": chunk.etag,
        }
        return _kept(result, lock_id, note)


def _kept(result: dict[str, Any], lock_id: str | None, note: AuditNote) -> dict[str, Any]:
    """*result*, with the ``lockId`` a ``keepLocked`` request kept (also for the audit)."""
    note.lock_id = lock_id
    if lock_id is not None:
        result["lockId"] = lock_id
    return result


# -- files/write -----------------------------------------------------------------------------------


def _decode_content(ctx: RequestContext, raw: str, *, required: bool = True) -> bytes:
    p = ctx.params
    content = p.get("content", str) if required else p.get("content", str, None)
    if content is None:
        return b""
    encoding = p.get("encoding", str, "utf-8")
    limit = ctx.limits.max_chunk_bytes
    # Refuse before decoding what cannot fit: every character is at least one
    # byte, and base64 carries 3 bytes in 4 characters.
    if len(content) > (4 * (limit // 3 + 1) if encoding == "base64" else limit):
        raise _too_large(raw, limit)
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidParams("content is not valid base64", reason="bad_base64", path=raw) from None
    else:
        data = text_codec(encoding, raw).encode(content, raw)
    if len(data) > limit:
        raise _too_large(raw, limit)
    return data


def _too_large(raw: str, limit: int) -> TooLarge:
    return TooLarge(
        f"one request carries at most {limit} bytes; send chunks with offset",
        reason="request_too_large",
        path=raw,
        maxBytes=limit,
    )


def write(ctx: RequestContext) -> dict[str, Any]:
    """``files/write``: a whole file atomically, or one chunk of a staged upload (``offset``)."""
    conn, p, note = ctx.conn, ctx.params, ctx.note
    raw = p.path()
    data = _decode_content(ctx, raw)
    create = p.flag("create", True)
    exclusive = p.flag("exclusive", False)
    if_match = p.get("ifMatch", str, None)
    offset = p.count("offset", None)
    final = p.flag("final", offset is None)
    keep = p.flag("keepLocked", False)
    access = conn.access
    access.check_lock_id(p.get("lockId", str, None))
    conn.rate.take_bytes(len(data), path=raw)
    note.bytes = len(data)
    if offset is not None:
        return conn.uploads.write(
            raw,
            data,
            offset,
            final=final,
            create=create,
            exclusive=exclusive,
            if_match=if_match,
            keep=keep,
            note=note,
            progress=ctx.progress,
        )
    with (
        access.resolve(raw, "write", note) as res,
        access.hold_to_write(res, raw, create=create, exclusive=exclusive, if_match=if_match) as hold,
    ):
        ctx.services.temp_files.sweep_due(res.dir_fd)
        st = ops.write_atomic(res, data, exclusive=exclusive, shown=raw)
        lock_id = hold.keep() if keep else None
    return _kept({"bytesWritten": len(data), "size": st.st_size, "etag": ops.etag(st)}, lock_id, note)


# -- files/list, files/stat ------------------------------------------------------------------------


def list_directory(ctx: RequestContext) -> dict[str, Any]:
    """``files/list``: the entries of a directory, a page at a time (see ``core/listing.py``)."""
    conn, p, note = ctx.conn, ctx.params, ctx.note
    raw = p.path()
    recursive = p.flag("recursive", False)
    include_hidden = p.flag("includeHidden", False)
    most = ctx.limits.max_list_entries
    limit = p.count("maxEntries", most, minimum=1)
    assert limit is not None
    limit = min(limit, most)
    cursor = p.get("cursor", str, None)
    access = conn.access
    with access.resolve(raw, "read", note) as res:
        if res.st is None:
            raise NotFound(f"{raw} does not exist", path=raw)
        if not stat.S_ISDIR(res.st.st_mode):
            raise WrongType(f"{raw} is not a directory", reason="not_a_directory", path=raw)
        listing = conn.listings.begin(
            cursor or None, res.location, recursive=recursive, include_hidden=include_hidden, shown=raw
        )
        access.recheck(res, "read")
        fd = ops.open_directory(res, raw)
        try:
            entries, more = listing.walk.page(
                fd,
                limit,
                sensitive=ctx.services.config.sensitive,
                accept=access.may_list,
                accept_link=access.may_list_link,
            )
        finally:
            os.close(fd)
        result: dict[str, Any] = {"entries": entries}
        if more:
            result["nextCursor"] = conn.listings.keep(listing)
        return result


def stat_path(ctx: RequestContext) -> dict[str, Any]:
    """``files/stat``: type, size, times, etag and whether a lock is held."""
    raw = ctx.params.path()
    with ctx.conn.access.resolve(raw, "read", ctx.note) as res:
        if res.st is None:
            raise NotFound(f"{raw} does not exist", path=raw)
        info = ops.stat_info(res)
        info["locked"] = ctx.services.locks.is_locked(res.location.key)
        return info


# -- files/create, files/delete, files/rename ------------------------------------------------------


def create(ctx: RequestContext) -> dict[str, Any]:
    """``files/create``: a new file (with optional content) or directory; never replaces."""
    conn, p, note = ctx.conn, ctx.params, ctx.note
    raw = p.path()
    kind = p.get("type", str)
    if kind not in ("file", "directory"):
        raise InvalidParams("type must be 'file' or 'directory'", reason="bad_value", param="type", path=raw)
    data = _decode_content(ctx, raw, required=False)
    if kind == "directory" and data:
        raise InvalidParams("a directory has no content", reason="bad_value", param="content", path=raw)
    parents = p.flag("parents", False)
    keep = p.flag("keepLocked", False)
    access = conn.access
    with access.resolve(raw, "write", note, follow_last=False, make_parents=parents) as res:
        if res.name is None or res.st is not None:
            raise AlreadyExists(f"{raw} exists already", path=raw)
        with access.hold(res, "exclusive") as hold:
            access.recheck(res, "write")
            if res.refresh(allow_link=True) is not None:
                raise AlreadyExists(f"{raw} exists already", path=raw)
            if kind == "directory":
                ops.make_directory(res, raw)
            else:
                ctx.services.temp_files.sweep_due(res.dir_fd)
                ops.write_atomic(res, data, exclusive=True, shown=raw)
            lock_id = hold.keep() if keep else None
        note.bytes = len(data)
        return _kept({"path": res.rel, "type": kind}, lock_id, note)


def delete(ctx: RequestContext) -> dict[str, Any]:
    """``files/delete``: into the trash, or for good when the notebook asked for it."""
    conn, p, note, services = ctx.conn, ctx.params, ctx.note, ctx.services
    raw = p.path()
    recursive = p.flag("recursive", False)
    if_match = p.get("ifMatch", str, None)
    access = conn.access
    with access.resolve(raw, "delete", note, follow_last=False) as res:
        if res.name is None:
            raise PermissionDenied("a shared folder itself cannot be deleted", reason="root_itself", path=raw)
        if res.st is None:
            raise NotFound(f"{raw} does not exist", path=raw)
        with access.hold(res, "exclusive"):
            access.recheck(res, "delete")
            st = res.refresh(allow_link=True)
            if st is None:
                raise NotFound(f"{raw} does not exist", path=raw)
            is_dir = stat.S_ISDIR(st.st_mode)
            if is_dir and not recursive:
                raise WrongType(f"{raw} is a directory: pass recursive", reason="is_directory", path=raw)
            if is_dir:
                _check_no_locks_below(ctx, res, raw)
            ops.check_if_match(st, if_match, raw)
            if services.config.permanent_delete:
                remove_tree(res.dir_fd, res.name)
                trashed = False
            else:
                services.trash.take(
                    res.dir_fd,
                    res.name,
                    location=res.location,
                    server=conn.server,
                    connection_id=conn.id,
                    shown=raw,
                )
                trashed = True
        return {"path": res.rel, "trashed": trashed}


def _check_no_locks_below(ctx: RequestContext, res: Resolved, raw: str) -> None:
    holder = ctx.services.locks.conflicts_below(res.location.key, owner=ctx.conn.id)
    if holder is not None:
        raise FileLocked(
            f"a file below {raw} is locked",
            reason="locked_below",
            path=raw,
            lockedBy=holder.owner_label,
            retryAfterMs=1000,
        )


def rename_path(ctx: RequestContext) -> dict[str, Any]:
    """``files/rename``: both ends checked and locked (in a fixed order, so two renames never dead-lock)."""
    conn, p, note = ctx.conn, ctx.params, ctx.note
    raw = p.path()
    raw_new = p.path("newPath")
    overwrite = p.flag("overwrite", False)
    if_match = p.get("ifMatch", str, None)
    access = conn.access
    with ExitStack() as stack:
        src = stack.enter_context(access.resolve(raw, "write", note, follow_last=False))
        dst = stack.enter_context(access.resolve(raw_new, "write", None, follow_last=False))
        if src.name is None or dst.name is None:
            raise PermissionDenied("a shared folder itself cannot be renamed", reason="root_itself", path=raw)
        if src.st is None:
            raise NotFound(f"{raw} does not exist", path=raw)
        if src.location.key == dst.location.key:
            return {"path": dst.rel}
        if dst.st is not None and not overwrite:
            raise AlreadyExists(f"{raw_new} exists already", path=raw_new)
        first, second = sorted((src, dst), key=lambda r: r.location.key)
        stack.enter_context(access.hold(first, "exclusive"))
        stack.enter_context(access.hold(second, "exclusive"))
        access.recheck(src, "write")
        access.recheck(dst, "write")
        st = src.refresh(allow_link=True)
        if st is None:
            raise NotFound(f"{raw} does not exist", path=raw)
        dst.refresh(allow_link=True)
        if stat.S_ISDIR(st.st_mode):
            _check_no_locks_below(ctx, src, raw)
        ops.check_if_match(st, if_match, raw)
        ops.rename(src, dst, overwrite=overwrite, shown=raw_new)
        return {"path": dst.rel}


# -- files/watch, files/unwatch, files/unlock, files/consent ---------------------------------------


def watch(ctx: RequestContext) -> dict[str, Any]:
    """``files/watch``: change notifications for a file or a directory."""
    conn, p, note = ctx.conn, ctx.params, ctx.note
    raw = p.path()
    recursive = p.flag("recursive", False)
    wanted = p.strings("events", None)
    events = frozenset(EVENTS if wanted is None else wanted)
    if not events or not events <= EVENTS:
        raise InvalidParams(
            f"events must be some of {', '.join(sorted(EVENTS))}",
            reason="bad_value",
            param="events",
            path=raw,
        )
    watches = ctx.services.watches
    most = ctx.limits.max_watches
    if watches.count(conn.id) >= most:
        raise RateLimited(
            f"at most {most} watches at once", reason="too_many_watches", path=raw, retryAfterMs=1000
        )
    access = conn.access
    with access.resolve(raw, "watch", note) as res:
        if res.st is None:
            raise NotFound(f"{raw} does not exist", path=raw)
        access.recheck(res, "watch")
        watch_id = watches.add(
            owner=conn.id,
            root=res.root,
            parts=res.location.parts,
            is_dir=stat.S_ISDIR(res.st.st_mode),
            recursive=recursive,
            events=events,
            sink=conn.deliver,
            accept=access.may_watch,
        )
    return {"watchId": watch_id}


def unwatch(ctx: RequestContext) -> dict[str, Any]:
    """``files/unwatch``: stop one of this connection's watches."""
    watch_id = ctx.params.get("watchId", str)
    ctx.services.watches.remove(watch_id, owner=ctx.conn.id)
    ctx.conn.changes.forget(watch_id)
    return {}


def changes_params(ctx: RequestContext) -> tuple[str, str | None, int, int]:
    """``files/changes``: its watch (one of this connection's), cursor, wait and most events.

    Raises
    ------
    NotFound
        ``reason="unknown_watch"``: no such watch, or one of another connection.
    """
    p = ctx.params
    watch_id = p.get("watchId", str)
    cursor = p.get("cursor", str, None)
    wait_ms = min(p.count("waitMs", 0) or 0, MAX_WAIT_MS)
    max_events = p.count("maxEvents", 1000, minimum=1) or 1000
    if ctx.conn.closed:
        raise PermissionDenied(ctx.conn.access.close_reason, reason="connection_closed")
    if not ctx.services.watches.owns(watch_id, ctx.conn.id):
        raise NotFound(f"no watch {watch_id!r}", reason="unknown_watch")
    return watch_id, cursor, wait_ms, max_events


def changes(ctx: RequestContext) -> dict[str, Any]:
    """``files/changes`` (blocking): the events of a watch after a cursor, waiting up to ``waitMs``."""
    watch_id, cursor, wait_ms, max_events = changes_params(ctx)
    log = ctx.conn.changes
    if wait_ms:
        log.wait_changes(watch_id, cursor, wait_ms)
        changes_params(ctx)  # the connection or the watch may have ended meanwhile
    return log.take(watch_id, cursor, max_events, still_watched(ctx)).to_result()


def still_watched(ctx: RequestContext) -> Callable[[ChangeEvent], bool]:
    """Whether a kept event may still be handed over: its path is granted for ``watch`` now."""
    check = ctx.conn.access.check("watch")
    roots = ctx.services.roots

    def keep(event: ChangeEvent) -> bool:
        name, _, rest = event.path.partition("/")
        root = roots.get(name)
        if root is None:
            return False
        try:
            check(root, tuple(rest.split("/")) if rest else ())
        except PermissionDenied:
            return False
        return True

    return keep


def unlock(ctx: RequestContext) -> dict[str, Any]:
    """``files/unlock``: release one of this connection's kept locks."""
    lock_id = ctx.params.get("lockId", str)
    ctx.note.lock_id = lock_id
    ctx.services.locks.release(lock_id, owner=ctx.conn.id)
    return {"unlocked": True}


def consent(ctx: RequestContext) -> dict[str, Any]:
    """``files/consent``: ask the user (blocking) and grant what they approve."""
    return ctx.conn.consent.run(ctx.params, ctx.note)
