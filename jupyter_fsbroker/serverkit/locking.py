"""Holding a client's exclusive lock on a file for an ``async with`` block.

The lock is a ``keepLocked`` lock of the client connection, taken with a
zero-byte read (or an empty create) and always released with ``files/unlock``,
also on an exception or cancellation. Concurrent tool calls of one connection
share the client's locks, so they also take turns on the same path in this
process (:class:`~.peers.LocalLocks`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator

import anyio

from .exceptions import (
    AlreadyExistsError,
    ClientDisconnectedError,
    ClientInternalError,
    FileLockedError,
    FilesRequestError,
    NotFoundError,
    RateLimitedError,
)
from .lenient import get_opt_str
from .peers import ConnectionFiles
from .requester import Requester
from .retry import RetryPolicy

__all__ = ["hold_lock", "unlock"]

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def hold_lock(
    requester: Requester, conn: ConnectionFiles, path: str, *, create: bool, wait: float
) -> AsyncIterator[str]:
    """Hold the lock of *path* for the block; yields the ``lockId`` (see :meth:`FilesClient.lock`)."""
    held = conn.kept_lock_ids
    async with conn.local_locks.hold(path):
        # *wait* is for other connections' locks: it counts once this connection's calls on the
        # path in this process have taken their turns.
        deadline = time.monotonic() + max(0.0, wait)
        lock_id = await _acquire(requester, path, create=create, deadline=deadline)
        while (holder := held.holder(lock_id)) is not None:
            # Another call of this connection holds that lock here: wait for it, then ask again.
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await holder.wait()
            if not holder.is_set():
                raise FileLockedError(f"{path} stays locked by another call of this connection")
            lock_id = await _acquire(requester, path, create=create, deadline=deadline)
        held.take(lock_id)
        try:
            try:
                yield lock_id
            except BaseException:
                with contextlib.suppress(FilesRequestError):
                    await _unlock_shielded(requester, lock_id)
                raise
            await _unlock_shielded(requester, lock_id)
        finally:
            held.let_go(lock_id)


async def unlock(requester: Requester, lock_id: str) -> None:
    """Send ``files/unlock`` (see :meth:`FilesClient.unlock`)."""
    await requester.request("files/unlock", {"lockId": lock_id})


async def _acquire(requester: Requester, path: str, *, create: bool, deadline: float) -> str:
    no_retry = RetryPolicy(retries=0)
    attempt = 0
    read = {"path": path, "encoding": "base64", "length": 0, "keepLocked": True}
    while True:
        try:
            try:
                result = await requester.op("files/read", read, op="read", paths=[path], retry=no_retry)
                lock_id = get_opt_str(result, "lockId")
            except NotFoundError:
                if not create:
                    raise
                made = {"path": path, "type": "file", "keepLocked": True}
                result = await requester.op("files/create", made, op="write", paths=[path], retry=no_retry)
                lock_id = get_opt_str(result, "lockId")
            if lock_id is None:
                raise ClientInternalError("the client kept no lock", method="files/read")
            return lock_id
        except (FileLockedError, RateLimitedError, AlreadyExistsError) as exc:
            # AlreadyExistsError: someone created the file meanwhile; lock it as it is.
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise
            delay = 0.0 if isinstance(exc, AlreadyExistsError) else requester.retry.delay(attempt, exc)
            attempt += 1
            await anyio.sleep(min(delay, remaining))


async def _unlock_shielded(requester: Requester, lock_id: str) -> None:
    with anyio.CancelScope(shield=True), anyio.move_on_after(requester.timeouts.base):
        try:
            await unlock(requester, lock_id)
        except NotFoundError:
            log.warning("lock %s was already released (force-released by the user?)", lock_id[:9])
        except ClientDisconnectedError:
            pass  # the client released every lock of the connection
