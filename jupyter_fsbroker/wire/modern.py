"""The 2026-07-28 era's ``files/*`` extension (PROTOCOL.md, "The 2026-07-28 era"): its identifier,
the batch a ``tools/call`` may answer with, and the continuation that answers it.

Standard library only, so that the client (which performs batches) and the server kit (which
asks for them) read and write the same shapes. The extension is identified by reverse DNS under
``io.github.jupyter-fsbroker``, the namespace the project's GitHub organisation proves: it owns
no domain of its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .caps import MiB
from .methods import FILES_METHODS

__all__ = [
    "ANSWERS",
    "BATCH_METHODS",
    "CANCEL",
    "CANCEL_FEATURE",
    "CHANGES",
    "CHANGES_FEATURE",
    "CLIENT_CAPABILITIES_META",
    "CONNECTION",
    "CONTINUATION",
    "EXTENSION_ID",
    "MAX_BATCH_OPERATIONS",
    "MAX_BATCH_READ_BYTES",
    "MAX_BATCH_WRITE_BYTES",
    "MAX_CONTINUATION_CHARS",
    "RESULT_TYPE",
    "ROOTS_LIST",
    "ROUTE_HEADER",
    "Answer",
    "Continuation",
    "Operation",
    "batch_result",
    "continuation_meta",
    "extension_settings",
    "lists_extension",
    "read_batch",
    "read_continuation",
    "routed",
    "split_route",
]

#: The extension's identifier (version 1: a breaking change takes a new identifier).
EXTENSION_ID = "io.github.jupyter-fsbroker/files"

#: The ``resultType`` of a ``tools/call`` result that carries a batch.
RESULT_TYPE = "io.github.jupyter-fsbroker/filesBatch"

#: The ``_meta`` key of the client capabilities every modern request carries.
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"

#: The feature of ``files/changes``: watching without notifications.
CHANGES_FEATURE = "changes"
#: The feature of a server that ends a call the client cancels, its clean-up included.
CANCEL_FEATURE = "cancel"

#: The batch operation that hands over a watch's buffered events.
CHANGES = "files/changes"

#: ``roots/list`` as a batch operation (the modern wire has no ``roots/list`` of its own).
ROOTS_LIST = "roots/list"

#: Every method a batch may carry.
BATCH_METHODS: frozenset[str] = FILES_METHODS | {CHANGES, ROOTS_LIST}

#: Members of ``_meta[EXTENSION_ID]`` on a ``tools/call``.
CONNECTION = "connection"
CONTINUATION = "continuation"
ANSWERS = "answers"
CANCEL = "cancel"

MAX_BATCH_OPERATIONS = 64
#: The ``length`` a batch's reads ask for, summed, at most.
MAX_BATCH_READ_BYTES = 2 * MiB
#: The decoded content a batch's writes carry, summed, at most.
MAX_BATCH_WRITE_BYTES = 2 * MiB
MAX_CONTINUATION_CHARS = 1280 * 1024

#: The HTTP header a client sets on a continuation that names an instance (PROTOCOL.md, "Routing
#: a call to the instance that holds it"): the continuation's clear prefix, for a proxy to route on.
ROUTE_HEADER = "Fsbroker-Instance"
#: What ends a continuation's clear instance prefix (outside base64url, so never in a sealed part).
_ROUTE_MARK = "~"
_INSTANCE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def routed(instance: str | None, sealed: str) -> str:
    """The continuation *sealed*, prefixed with *instance* when there is one.

    Raises
    ------
    ValueError
        *instance* is not 1 to 64 of ``A-Z a-z 0-9 _ -``.
    """
    if instance is None:
        return sealed
    if not _INSTANCE.fullmatch(instance):
        raise ValueError(f"an instance name is 1 to 64 of A-Z a-z 0-9 _ -, not {instance!r}")
    return f"{instance}{_ROUTE_MARK}{sealed}"


def split_route(token: str) -> tuple[str | None, str]:
    """``(instance, sealed part)`` of a continuation; the instance is ``None`` when it names none
    (or names one that is not a valid instance name: the prefix is then left to the seal to refuse)."""
    instance, mark, sealed = token.partition(_ROUTE_MARK)
    if not mark or not _INSTANCE.fullmatch(instance):
        return None, token
    return instance, sealed


@dataclass(frozen=True)
class Operation:
    """One operation of a batch: ``{"id", "method", "params"}``."""

    id: str
    method: str
    params: Mapping[str, Any]

    def to_wire(self) -> dict[str, Any]:
        """The operation as the batch carries it."""
        return {"id": self.id, "method": self.method, "params": dict(self.params)}


@dataclass(frozen=True)
class Answer:
    """The answer to one operation: its ``result``, or its JSON-RPC ``error`` object."""

    id: str
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        """The answer as the continuation carries it."""
        if self.error is not None:
            return {"id": self.id, "error": dict(self.error)}
        return {"id": self.id, "result": dict(self.result or {})}

    @classmethod
    def from_wire(cls, value: object) -> Answer | None:
        """Read one answer strictly; ``None`` when it is not ``{"id", "result"|"error"}``."""
        if not isinstance(value, Mapping):
            return None
        item = cast("Mapping[str, Any]", value)
        answer_id, result, error = item.get("id"), item.get("result"), item.get("error")
        if not isinstance(answer_id, str) or (result is None) == (error is None):
            return None
        if result is not None:
            return (
                cls(answer_id, result=cast("Mapping[str, Any]", result))
                if isinstance(result, Mapping)
                else None
            )
        if not isinstance(error, Mapping):
            return None
        error = cast("Mapping[str, Any]", error)
        code, message = error.get("code"), error.get("message")
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
            return None
        return cls(answer_id, error=error)


@dataclass(frozen=True)
class Continuation:
    """What a ``tools/call`` carries in ``_meta[EXTENSION_ID]``.

    Attributes
    ----------
    connection
        The client's connection id (``c_…``), or ``None`` when it sent none.
    token
        The continuation to open, ``None`` on a call's first request.
    answers
        The answers to the last batch, by ``id`` (empty on a first request).
    cancel
        Whether the client cancels the call: *answers* are then those of the operations it
        performed before it stopped, and the server ends the tool (PROTOCOL.md, "Cancelling a call").
    """

    connection: str | None
    token: str | None = None
    answers: tuple[Answer, ...] = ()
    cancel: bool = False


def extension_settings(*, features: Sequence[str] = (CHANGES_FEATURE, CANCEL_FEATURE)) -> dict[str, Any]:
    """The server's ``capabilities.extensions[EXTENSION_ID]``."""
    return {"resultType": RESULT_TYPE, "features": list(features)}


def lists_extension(meta: Mapping[str, Any] | None) -> bool:
    """Whether a modern request's ``_meta`` lists the extension in the client capabilities."""
    caps = (meta or {}).get(CLIENT_CAPABILITIES_META)
    extensions = cast("Mapping[str, Any]", caps).get("extensions") if isinstance(caps, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION_ID in extensions


def batch_result(operations: Sequence[Operation], continuation: str) -> dict[str, Any]:
    """The ``tools/call`` result that asks the client for *operations*."""
    return {
        "resultType": RESULT_TYPE,
        "operations": [op.to_wire() for op in operations],
        "continuation": continuation,
    }


def read_batch(result: Mapping[str, Any]) -> tuple[tuple[Operation, ...], str]:
    """The operations and continuation of a batch result.

    Raises
    ------
    ValueError
        *result* is not a batch as PROTOCOL.md writes it.
    """
    if result.get("resultType") != RESULT_TYPE:
        raise ValueError(f"resultType is not {RESULT_TYPE!r}")
    raw_ops, token = result.get("operations"), result.get("continuation")
    if not isinstance(token, str) or not isinstance(raw_ops, list) or not raw_ops:
        raise ValueError("a batch needs operations and a continuation")
    operations: list[Operation] = []
    for item in raw_ops:
        op_id = item.get("id") if isinstance(item, Mapping) else None
        method = item.get("method") if isinstance(item, Mapping) else None
        params = item.get("params", {}) if isinstance(item, Mapping) else None
        if not isinstance(op_id, str) or not isinstance(method, str) or not isinstance(params, Mapping):
            raise ValueError("each operation needs a string id and method and object params")
        operations.append(Operation(op_id, method, cast("Mapping[str, Any]", params)))
    if len({op.id for op in operations}) != len(operations):
        raise ValueError("operation ids repeat in a batch")
    return tuple(operations), token


def continuation_meta(
    connection: str, token: str | None = None, answers: Sequence[Answer] = (), *, cancel: bool = False
) -> dict[str, Any]:
    """``_meta[EXTENSION_ID]`` of a ``tools/call``: the connection id, and on a continuation the
    token and the answers (and ``cancel`` when the client cancels the call)."""
    meta: dict[str, Any] = {CONNECTION: connection}
    if token is not None:
        meta[CONTINUATION] = token
        meta[ANSWERS] = [answer.to_wire() for answer in answers]
        if cancel:
            meta[CANCEL] = True
    return meta


def read_continuation(meta: Mapping[str, Any] | None) -> Continuation | None:
    """``_meta[EXTENSION_ID]`` of a ``tools/call``; ``None`` when absent.

    Raises
    ------
    ValueError
        A member is there but malformed (a continuation without its answers, an answer that is
        neither a result nor an error, a continuation over its size).
    """
    raw = (meta or {}).get(EXTENSION_ID)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"_meta[{EXTENSION_ID!r}] is not an object")
    item = cast("Mapping[str, Any]", raw)
    connection, token, answers = item.get(CONNECTION), item.get(CONTINUATION), item.get(ANSWERS)
    if connection is not None and not isinstance(connection, str):
        raise ValueError("the connection id is not a string")
    if token is None:
        return Continuation(connection)
    if not isinstance(token, str) or len(token) > MAX_CONTINUATION_CHARS:
        raise ValueError("the continuation is not a string within its size")
    if not isinstance(answers, list):
        raise ValueError("a continuation needs its answers")
    read = [Answer.from_wire(answer) for answer in answers]
    if any(answer is None for answer in read):
        raise ValueError("an answer is neither a result nor an error")
    cancel = item.get(CANCEL, False)
    if not isinstance(cancel, bool):
        raise ValueError("cancel is not a boolean")
    return Continuation(connection, token, tuple(cast("list[Answer]", read)), cancel)
