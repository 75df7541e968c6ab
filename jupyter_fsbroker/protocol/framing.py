"""Reading one JSON-RPC message from the bytes a server sent, and answering the ones that are not.

Both client transports (:mod:`.transports.pipes`, :mod:`.transports.http`) hand every line or
server-sent event to :func:`parse_message`. It returns a ``SessionMessage``
for a valid message and a :class:`MalformedMessage` otherwise, so that the
middleware can answer every request exactly once (PROTOCOL.md, Errors):

* bytes that are not JSON: ``-32700`` with ``id: null``;
* JSON that is not a valid request — not an object, ``params`` that is not an
  object, an ``id`` that is neither a string nor an integer, a lone surrogate
  (``"\\ud800"``), invalid UTF-8 inside a string, nesting deeper than the
  parser allows, a message over :data:`MAX_MESSAGE_BYTES` — ``-32600`` with the
  request's ``id`` whenever one can be read.

A response of the server's that cannot be read is never answered (JSON-RPC
answers requests only); when its ``id`` can be read it becomes a JSON-RPC
error for that id, so the call waiting for it fails instead of hanging.

Why not mcp's own parsing: ``jsonrpc_message_adapter.validate_json`` turns a
request whose ``id`` is ``true`` or ``1.5`` into a *notification* (never
answered), and a line it refuses is dropped by mcp's stdio client with no
answer at all. Parsing here is also cheaper: ``pydantic_core.from_json``
followed by ``validate_python`` costs a fraction of ``validate_json`` on a
chunk's message (``benchmarks/README.md``, "Why the code is shaped this way").

Nothing here does I/O or keeps state; it never raises on any input. A large
answer is written into a buffer lent by the connection's
:class:`~jupyter_fsbroker.core.buffers.BufferPool` (a :class:`LentMessage`,
given back once it is written), so that every chunk of a transfer reuses the
same memory rather than making and dropping ~3 MB of new bytes.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from typing import Any

import pydantic_core
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from pydantic import ValidationError

from ..core.buffers import POOLED_MIN, BufferPool
from ..wire.modern import EXTENSION_ID

__all__ = [
    "MAX_MESSAGE_BYTES",
    "LentMessage",
    "MalformedMessage",
    "encode_message",
    "encode_outgoing",
    "encode_response",
    "parse_message",
    "read_id",
    "release",
]

# Contents shorter than this are encoded the plain way.
_SPLICE_MIN = 4096
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/=]*")
# A content is copied into a lent buffer in slices this long: each slice's bytes are small
# and dropped at once (under 64 KiB, the size whose release makes the allocator trim its heap).
_COPY_SLICE = 32 * 1024

#: The largest message a transport accepts from a server, in bytes. A ``files/*``
#: request carries at most 2 MiB of content (under 3 MB of base64); the margin is
#: for tool results. Longer messages are dropped (and answered when they are requests).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class MalformedMessage(Exception):
    """A message from the server that is not valid JSON-RPC, and the answer it is owed.

    Transports yield it on their read stream in place of a ``SessionMessage``;
    the middleware sends :attr:`reply` (when there is one) and goes on.

    Attributes
    ----------
    code
        ``-32700`` (not JSON) or ``-32600`` (not a valid request).
    reason
        A snake_case detail, also sent as ``data.reason``.
    request_id
        The id the message carried, when one could be read.
    reply
        The error response to send, or ``None`` (the message was a response).
    """

    def __init__(
        self, code: int, message: str, reason: str, request_id: RequestId | None, *, answer: bool
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.request_id = request_id
        self.reply: JSONRPCError | None = None
        if answer:
            self.reply = JSONRPCError(
                jsonrpc="2.0",
                id=request_id,
                error=ErrorData(code=code, message=message, data={"reason": reason}),
            )


def parse_message(data: bytes | bytearray) -> SessionMessage | MalformedMessage:
    """Read one JSON-RPC message (a line of stdio, the data of a server-sent event).

    Returns
    -------
    SessionMessage or MalformedMessage
        The message, or what was wrong with it and the answer it is owed.
    """
    try:
        obj = pydantic_core.from_json(data)
    except ValueError as exc:
        return _diagnose(bytes(data), str(exc))
    return _classify(obj, None)


def encode_message(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as compact UTF-8 JSON (no newline).

    Raises
    ------
    ValueError
        The message holds something JSON cannot carry (a lone surrogate, a
        non-string key ...).
    """
    try:
        return pydantic_core.to_json(message)
    except pydantic_core.PydanticSerializationError as exc:
        raise ValueError(str(exc)) from None


class LentMessage:
    """An encoded message in a buffer lent by a pool: :attr:`view` until :meth:`release`.

    Whoever writes it releases it once written, or dropped; a message never
    released is only a buffer the pool does not get back.
    """

    __slots__ = ("_buffer", "_pool", "view")

    def __init__(self, buffer: bytearray, size: int, pool: BufferPool) -> None:
        self._buffer = buffer
        self._pool: BufferPool | None = pool
        #: The message's bytes (no newline).
        self.view = memoryview(buffer)[:size]

    def __len__(self) -> int:
        return len(self.view)

    def release(self) -> None:
        """Give the buffer back (the message may not be used any more). Idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.give(self._buffer)


def release(data: bytes | LentMessage) -> None:
    """Give back the buffer of *data* if it is a :class:`LentMessage` (written or dropped)."""
    if isinstance(data, LentMessage):
        data.release()


def encode_response(
    request_id: RequestId, kind: str, body: dict[str, Any], *, buffers: BufferPool | None = None
) -> bytes | LentMessage:
    """The answer ``{"jsonrpc", "id", kind: body}`` to one request, as compact UTF-8 JSON.

    A ``files/read`` result in base64 carries up to 2.7 MB of text that needs no
    escaping (the base64 alphabet is plain ASCII): its ``content`` is spliced in
    as bytes rather than scanned by the JSON encoder, which costs as much as
    the base64 encoding itself; with *buffers*, a large one is written into a
    lent buffer (a :class:`LentMessage`).

    Raises
    ------
    ValueError
        Something JSON cannot carry (see :func:`encode_message`).
    """
    if kind != "result" or not _spliceable(body):
        return encode_message({"jsonrpc": "2.0", "id": request_id, kind: body})
    content: str = body["content"]
    rest = {key: value for key, value in body.items() if key != "content"}
    head = encode_message({"jsonrpc": "2.0", "id": request_id, kind: rest})
    # head ends with the two closing braces of the result and the message.
    before = (head[:-2], b"," if rest else b"", b'"content":"')
    return _assemble((*before, content, b'"}}'), buffers)


def encode_outgoing(
    message: JSONRPCRequest | JSONRPCNotification | JSONRPCResponse | JSONRPCError,
    *,
    buffers: BufferPool | None = None,
) -> bytes | LentMessage:
    """A message the client sends, as compact UTF-8 JSON (what ``model_dump_json`` makes).

    A 2026-07-28 continuation (a ``tools/call`` whose ``_meta`` carries the files extension's
    answers) holds up to 2.7 MB of base64 file content per read, which the core made and which
    needs no escaping: it is spliced in as bytes, as :func:`encode_response` does on the legacy
    wire, rather than scanned by the JSON encoder (which costs as much as encoding it again);
    with *buffers*, into a lent buffer (a :class:`LentMessage`).
    """
    if not isinstance(message, JSONRPCRequest) or message.method != "tools/call":
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
    data = message.model_dump(by_alias=True, exclude_unset=True, mode="json")
    # A placeholder no message holds by chance: a fresh random marker, numbered.
    marker = f"fsbroker-content-{secrets.token_hex(8)}-"
    contents = _take_contents(data, marker)
    head = encode_message(data)
    if not contents:
        return head
    pieces: list[bytes | str] = []
    at = 0
    for number, content in enumerate(contents):
        placeholder = f'"{marker}{number}"'.encode("ascii")
        found = head.index(placeholder, at)
        pieces += (head[at:found], b'"', content, b'"')
        at = found + len(placeholder)
    pieces.append(head[at:])
    return _assemble(pieces, buffers)


def _assemble(pieces: Sequence[bytes | str], buffers: BufferPool | None) -> bytes | LentMessage:
    """*pieces* (bytes, and the ASCII text of spliced contents) one after the other: in a buffer
    lent by *buffers* when they are large, else as bytes."""
    size = sum(map(len, pieces))
    if buffers is None or size < POOLED_MIN:
        return b"".join(part.encode("ascii") if isinstance(part, str) else part for part in pieces)
    buffer = buffers.take(size)
    with memoryview(buffer) as view:
        at = 0
        for part in pieces:
            if isinstance(part, bytes):
                view[at : at + len(part)] = part
                at += len(part)
                continue
            for start in range(0, len(part), _COPY_SLICE):
                piece = part[start : start + _COPY_SLICE].encode("ascii")
                view[at : at + len(piece)] = piece
                at += len(piece)
    return LentMessage(buffer, size, buffers)


def _spliceable(result: dict[str, Any]) -> bool:
    """Whether the ``content`` of a ``files/read`` *result* is long base64 to splice in as bytes."""
    content = result.get("content")
    return (
        isinstance(content, str)
        and result.get("encoding") == "base64"
        and len(content) >= _SPLICE_MIN
        and content.isascii()
        and _BASE64_TEXT.fullmatch(content, 0, 64) is not None  # what the core made; checked where cheap
    )


def _take_contents(data: dict[str, Any], marker: str) -> list[str]:
    """Take the long base64 contents out of a continuation's answers in *data*, in order, each
    replaced by *marker* and its number; the contents taken."""
    params = data.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    ours = meta.get(EXTENSION_ID) if isinstance(meta, dict) else None
    answers = ours.get("answers") if isinstance(ours, dict) else None
    taken: list[str] = []
    for answer in answers if isinstance(answers, list) else ():
        result = answer.get("result") if isinstance(answer, dict) else None
        if isinstance(result, dict) and _spliceable(result):
            taken.append(result["content"])
            result["content"] = f"{marker}{len(taken) - 1}"
    return taken


def read_id(value: object) -> RequestId | None:
    """*value* if it is a valid JSON-RPC id for MCP (a string or an integer, not a boolean)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def too_large(prefix: bytes, size: int) -> MalformedMessage:
    """The answer to a message longer than :data:`MAX_MESSAGE_BYTES` (only its *prefix* was kept)."""
    request_id = _top_level_id(prefix.decode("utf-8", "replace"))
    return MalformedMessage(
        INVALID_REQUEST,
        f"the message is longer than {MAX_MESSAGE_BYTES} bytes ({size} bytes or more) and was dropped",
        "message_too_large",
        request_id,
        answer=_looks_like_request(prefix),
    )


# -- what is wrong -------------------------------------------------------------------------------


def _classify(obj: Any, problem: tuple[str, str] | None) -> SessionMessage | MalformedMessage:
    """Turn parsed JSON into a message; *problem* is why the strict parser refused it, if it did."""
    if not isinstance(obj, dict):
        kind = "a batch (array)" if isinstance(obj, list) else "not an object"
        return MalformedMessage(
            INVALID_REQUEST,
            f"the message is {kind}; a JSON-RPC object was expected",
            "not_an_object",
            None,
            answer=True,
        )
    has_id = "id" in obj
    request_id = read_id(obj.get("id"))
    if "method" in obj:
        bad = problem or _request_problem(obj, has_id, request_id)
        if bad is not None:
            message, reason = bad
            return MalformedMessage(INVALID_REQUEST, message, reason, request_id, answer=True)
        model = JSONRPCRequest if has_id else JSONRPCNotification
        try:
            return SessionMessage(model.model_validate(obj))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "message"
            return MalformedMessage(
                INVALID_REQUEST,
                f"invalid request: {where}: {first['msg']}",
                "invalid_request",
                request_id,
                answer=True,
            )
    if "result" in obj or "error" in obj:
        bad = problem or _response_problem(obj, request_id)
        if bad is None:
            model_r = JSONRPCResponse if "result" in obj else JSONRPCError
            try:
                return SessionMessage(model_r.model_validate(obj))
            except ValidationError as exc:
                bad = (f"the server's response is not valid: {exc.errors()[0]['msg']}", "invalid_response")
        message, reason = bad
        return _unreadable_response(message, reason, request_id)
    if problem is not None:
        return MalformedMessage(INVALID_REQUEST, problem[0], problem[1], request_id, answer=True)
    return MalformedMessage(
        INVALID_REQUEST,
        "the message has neither a method nor a result",
        "invalid_request",
        request_id,
        answer=True,
    )


def _request_problem(
    obj: dict[str, Any], has_id: bool, request_id: RequestId | None
) -> tuple[str, str] | None:
    if obj.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"', "bad_version"
    if not isinstance(obj["method"], str):
        return "method must be a string", "bad_method"
    if has_id and request_id is None:
        return "id must be a string or an integer", "bad_id"
    params = obj.get("params")
    if params is not None and not isinstance(params, dict):
        return "params must be an object", "params_not_object"
    return None


def _response_problem(obj: dict[str, Any], request_id: RequestId | None) -> tuple[str, str] | None:
    if request_id is None:
        return "the server's response has no valid id", "bad_id"
    if "result" in obj and "error" in obj:
        return "the server's response has both a result and an error", "invalid_response"
    if "result" in obj and not isinstance(obj["result"], dict):
        return "the server's result is not an object", "invalid_response"
    return None


def _unreadable_response(
    message: str, reason: str, request_id: RequestId | None
) -> SessionMessage | MalformedMessage:
    if request_id is None:
        return MalformedMessage(INVALID_REQUEST, message, reason, None, answer=False)
    # Fail the call that waits for it rather than leave it waiting.
    error = ErrorData(code=INVALID_REQUEST, message=message, data={"reason": reason})
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _diagnose(data: bytes, refusal: str) -> SessionMessage | MalformedMessage:
    """The strict parser refused *data*: tell "not JSON" from "JSON that is not a valid request"."""
    if not data.strip():
        return MalformedMessage(PARSE_ERROR, "an empty message", "not_json", None, answer=False)
    try:
        text = data.decode("utf-8")
        problem = _strict_problem(refusal)
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        problem = ("the message is not valid UTF-8", "invalid_utf8")
    try:
        # Python's parser accepts lone surrogates and nests deeper than the strict one.
        obj = json.loads(text)
    except RecursionError:
        request_id = _top_level_id(text)
        return _classify_unparsed(
            data, ("the message nests deeper than the parser allows", "too_deep"), request_id
        )
    except ValueError:
        return MalformedMessage(PARSE_ERROR, "the message is not JSON", "not_json", None, answer=True)
    return _classify(obj, problem)


def _strict_problem(refusal: str) -> tuple[str, str]:
    if "recursion limit" in refusal:
        return "the message nests deeper than the parser allows", "too_deep"
    if "surrogate" in refusal or "escape" in refusal:
        return (
            "the message holds a lone surrogate (\\ud800-\\udfff), which is not a character",
            "lone_surrogate",
        )
    return f"the message is not valid JSON-RPC: {refusal}", "invalid_json"


def _classify_unparsed(
    data: bytes, problem: tuple[str, str], request_id: RequestId | None
) -> MalformedMessage | SessionMessage:
    if _looks_like_request(data):
        return MalformedMessage(INVALID_REQUEST, problem[0], problem[1], request_id, answer=True)
    return _unreadable_response(problem[0], problem[1], request_id)


# A JSON string (with escapes), or a bracket: enough to walk the top level of a document.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]', re.DOTALL)
_COLON = re.compile(r"\s*:\s*")
_METHOD_KEY = re.compile(rb'"method"\s*:')
_DECODER = json.JSONDecoder()
_ID_KEY = '"id"'


def _looks_like_request(data: bytes) -> bool:
    """Whether a message that cannot be parsed seems to be a request or notification (has a method)."""
    return _METHOD_KEY.search(data) is not None


def _top_level_id(text: str) -> RequestId | None:
    """The ``id`` member of the top-level object of *text*, without parsing the rest (it may be too deep)."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1 and token == _ID_KEY:
            colon = _COLON.match(text, match.end())
            if colon is None:
                continue
            try:
                value, _ = _DECODER.raw_decode(text, colon.end())
            except (ValueError, RecursionError):
                return None
            return read_id(value)
    return None
