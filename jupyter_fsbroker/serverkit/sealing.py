"""Sealed continuations: a modern call's state, carried by the client, opened by any replica.

A continuation is attacker-controlled input (PROTOCOL.md, "Sealing"). It is compressed and
sealed with AES-256-GCM (mcp's :class:`~mcp.server.request_state.AESGCMRequestStateCodec`) under
a key list every replica shares, and opened only for the principal, tool and arguments it was
sealed for, before it expires. Replicas share no store, so "once" holds per process: each
process opens a given (call, step) once; see PROTOCOL.md for what that does and does not
guarantee.

A continuation is its head (the :class:`CallState` but its journal) followed by the journal's
segments, ``head,segment,segment...``: each round seals the answers it adds as one more segment,
bound to the call and to its place, and the head says how many there are. So a round costs the
same however long the call has run (the replica holding the call live never opens the segments
it passes on), and a replica that replays the call takes only the segments sealed for this call,
all of them, in their order (:meth:`ContinuationSealer.entries`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import stat
import time
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from ..wire.modern import MAX_CONTINUATION_CHARS
from .exceptions import ContinuationRefusedError, TooLargeError

__all__ = [
    "CallState",
    "ContinuationSealer",
    "Entries",
    "Journal",
    "digest",
    "journal_too_large",
    "load_state_keys",
]

log = logging.getLogger(__name__)

_VERSION = 2
# What separates the head and the segments of a continuation (outside the sealer's alphabet).
_SEGMENT_MARK = ","
# Minted at most this far in the future (replicas' clocks differ a little).
_FUTURE_SKEW = 60.0


def digest(value: Any) -> str:
    """A short digest of a JSON value, the same for equal values whatever their key order."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:18]).decode()


Entries = tuple[tuple[str, Mapping[str, Any]], ...]


@dataclass(frozen=True)
class Journal:
    """A call's recorded answers as its continuation carries them: sealed segments, one a round.

    Attributes
    ----------
    segments
        The sealed segments, in the order sealed (each the entries a round added).
    """

    segments: tuple[str, ...] = ()

    @property
    def chars(self) -> int:
        """The characters its segments take in a continuation."""
        return sum(len(segment) + 1 for segment in self.segments)


@dataclass(frozen=True)
class CallState:
    """What one continuation of a call holds.

    Attributes
    ----------
    call
        The call's random id.
    step
        How many batches the call has asked for before this one (0 for the first).
    started
        When the call began (``time.time()``).
    tool, arguments
        The tool's name and the digest of its arguments.
    principal
        The digest of the principal the call began with.
    batch
        The batch this continuation answers: ``(id, operation key)`` pairs.
    journal
        Every operation answered so far, in the order answered, as sealed segments of
        ``(operation key, answer)`` entries, the answer ``{"result": …}`` or ``{"error": …}``
        (:meth:`ContinuationSealer.entries` opens them); ``None`` when the call is live in one
        instance only (:mod:`.live_calls`) and cannot be replayed elsewhere.
    cancelled
        Whether the client cancelled the call: the batch is the tool's clean-up as it ends.
    """

    call: str
    step: int
    started: float
    tool: str
    arguments: str
    principal: str
    batch: tuple[tuple[str, str], ...]
    journal: Journal | None
    cancelled: bool = False


class ContinuationSealer:
    """Seals and opens :class:`CallState` values.

    Parameters
    ----------
    keys
        The key ring (each at least 32 bytes of secret randomness): the first seals, all open.
    ttl
        Seconds a continuation stays valid after it is issued.
    call_lifetime
        Seconds a call may last in all.
    remembered
        How many opened (call, step) pairs a process remembers, to refuse a second opening.
    """

    def __init__(
        self,
        keys: Sequence[bytes],
        *,
        ttl: float = 600.0,
        call_lifetime: float = 3600.0,
        remembered: int = 100_000,
    ) -> None:
        self._codec = AESGCMRequestStateCodec(list(keys))
        self.ttl = ttl
        self.call_lifetime = call_lifetime
        self._remembered = remembered
        self._opened: OrderedDict[tuple[str, int], float] = OrderedDict()

    @classmethod
    def ephemeral(cls, *, ttl: float = 600.0) -> ContinuationSealer:
        """A sealer under a key made now, known to this process only (one replica)."""
        return cls([os.urandom(32)], ttl=ttl)

    @staticmethod
    def new_call_id() -> str:
        """A fresh call id."""
        return secrets.token_urlsafe(16)

    def seal(self, state: CallState) -> str:
        """The continuation of *state*: its head, then its journal's segments.

        Raises
        ------
        TooLargeError
            The continuation would outgrow its 1.25 MiB (``journal_too_large``).
        """
        now = time.time()
        journal = state.journal
        claims = {
            "v": _VERSION,
            "call": state.call,
            "step": state.step,
            "started": state.started,
            "iat": now,
            "exp": min(now + self.ttl, state.started + self.call_lifetime),
            "tool": state.tool,
            "args": state.arguments,
            "p": state.principal,
            "batch": [list(pair) for pair in state.batch],
            "journal": None if journal is None else len(journal.segments),
            "cancelled": state.cancelled,
        }
        token = self._codec.seal(zlib.compress(json.dumps(claims, separators=(",", ":")).encode(), 1))
        if journal is not None and journal.segments:
            token = _SEGMENT_MARK.join((token, *journal.segments))
        if len(token) > MAX_CONTINUATION_CHARS:
            raise journal_too_large()
        return token

    def extend(self, journal: Journal, call: str, entries: Entries) -> Journal | None:
        """*journal* with *entries* (the answers of one round of call *call*) sealed as its next
        segment; ``None`` when they do not fit in a continuation (the head aside)."""
        if not entries:
            return journal
        room = MAX_CONTINUATION_CHARS - _HEAD_ROOM - journal.chars
        # Base64 of random bytes compresses little: past four times the room, do not even try.
        if room <= 0 or _entries_chars(entries) > 4 * room:
            return None
        index = len(journal.segments)
        text = json.dumps(
            [call, index, [[key, dict(answer)] for key, answer in entries]], separators=(",", ":")
        )
        payload = _compressed(text.encode(), (room - 128) * 3 // 4)
        segment = None if payload is None else self._codec.seal(payload)
        if segment is None or len(segment) + 1 > room:
            return None
        return Journal((*journal.segments, segment))

    def entries(self, journal: Journal, call: str) -> Entries:
        """The answers *journal* records for call *call*, in the order answered.

        Raises
        ------
        ContinuationRefusedError
            The segments are not the ones sealed for this call, all of them, in their order.
        """
        recorded: list[tuple[str, Mapping[str, Any]]] = []
        for index, segment in enumerate(journal.segments):
            try:
                owner, at, items = json.loads(zlib.decompress(self._codec.unseal(segment), bufsize=1 << 16))
                if (owner, at) != (call, index):
                    raise ValueError("another segment")
                recorded += ((str(key), cast("Mapping[str, Any]", answer)) for key, answer in items)
            except InvalidRequestState as exc:
                raise _refuse("invalid", f"journal seal: {exc}") from None
            except (ValueError, TypeError, zlib.error):
                raise _refuse("invalid", "malformed journal") from None
        return tuple(recorded)

    def open(self, token: str, *, tool: str, arguments: str, principal: str) -> CallState:
        """The state sealed in *token*, for this tool, arguments digest and principal digest.

        Raises
        ------
        ContinuationRefusedError
            The token was not sealed by this key ring unchanged, is for another call or
            principal, has expired, or was opened by this process before. Nothing is touched;
            the real reason is logged, the error says only ``expired`` or ``invalid``.
        """
        head, *segments = token.split(_SEGMENT_MARK)
        try:
            claims = json.loads(zlib.decompress(self._codec.unseal(head), bufsize=1 << 16))
            journal = claims["journal"]
            if journal is not None and int(journal) != len(segments):
                raise ValueError("segments missing or added")
            state = CallState(
                str(claims["call"]),
                int(claims["step"]),
                float(claims["started"]),
                str(claims["tool"]),
                str(claims["args"]),
                str(claims["p"]),
                tuple((str(i), str(k)) for i, k in claims["batch"]),
                None if journal is None else Journal(tuple(segments)),
                claims["cancelled"] is True,
            )
            issued, expires, version = float(claims["iat"]), float(claims["exp"]), claims["v"]
        except InvalidRequestState as exc:
            raise _refuse("invalid", f"seal: {exc}") from None
        except (ValueError, KeyError, TypeError, zlib.error):
            raise _refuse("invalid", "malformed") from None
        now = time.time()
        if version != _VERSION:
            raise _refuse("invalid", "version")
        if not issued <= now + _FUTURE_SKEW:
            raise _refuse("invalid", "issued in the future")
        if not now < expires:
            raise _refuse("expired", "expired")
        if (state.tool, state.arguments) != (tool, arguments):
            raise _refuse("invalid", "another call")
        if not secrets.compare_digest(state.principal, principal):
            raise _refuse("invalid", "another principal")
        self._remember(state.call, state.step, expires, now)
        return state

    def _remember(self, call: str, step: int, expires: float, now: float) -> None:
        while self._opened and (
            next(iter(self._opened.values())) <= now or len(self._opened) >= self._remembered
        ):
            self._opened.popitem(last=False)
        if (call, step) in self._opened:
            raise _refuse("invalid", "replayed")
        self._opened[(call, step)] = expires


# What a continuation keeps for its head (a few hundred characters) and segment marks.
_HEAD_ROOM = 8 * 1024
_PIECE = 256 * 1024


def _entries_chars(entries: Entries) -> int:
    """Roughly the characters *entries* take: their content dominates."""
    total = 0
    for _, answer in entries:
        result = answer.get("result")
        content = result.get("content") if isinstance(result, Mapping) else None
        total += 64 + (len(content) if isinstance(content, str) else 0)
    return total


def _compressed(text: bytes, room: int) -> bytes | None:
    """*text* compressed; ``None`` as soon as it is clear that it will not fit in *room* bytes.

    Level 1: a fifth of level 6's cost for some tenth less room. Stopping early bounds what
    answers that do not fit cost: once a piece is in, the rest is judged by how well it went
    (base64 of random bytes, a binary file's read, keeps three quarters of its size).
    """
    packer = zlib.compressobj(1)
    out: list[bytes] = []
    size = 0
    for start in range(0, len(text), _PIECE):
        out.append(packer.compress(text[start : start + _PIECE]))
        size += len(out[-1])
        done = min(start + _PIECE, len(text))
        if size > room or (size > _PIECE // 8 and size * len(text) > 2 * room * done):
            return None
    out.append(packer.flush())
    return b"".join(out)


def journal_too_large() -> TooLargeError:
    """The error of a call whose recorded answers outgrow a continuation, and which no
    instance keeps live."""
    return TooLargeError(
        "the call's recorded answers outgrow a continuation: read less in one call, "
        "or call this tool on the legacy wire",
        data={"error": "TOO_LARGE", "reason": "journal_too_large", "maxBytes": MAX_CONTINUATION_CHARS},
    )


def _refuse(reason: str, why: str) -> ContinuationRefusedError:
    log.warning("continuation refused: %s", why)
    return ContinuationRefusedError(reason)


def load_state_keys(path: str | os.PathLike[str]) -> list[bytes]:
    """The key ring in *path*: one key a line (the first seals), blank lines and ``#`` lines ignored.

    Raises
    ------
    ValueError
        The file holds no key, a key shorter than 32 bytes, or other accounts may read it.
    OSError
        The file cannot be read.
    """
    file = Path(path)
    mode = file.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"{file}: other accounts may read this key file; chmod 600 it")
    keys = [
        line.strip().encode()
        for line in file.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not keys:
        raise ValueError(f"{file}: no key in it (one a line, at least 32 characters)")
    for number, key in enumerate(keys, 1):
        if len(key) < 32:
            raise ValueError(
                f"{file}: key {number} is {len(key)} characters; use at least 32 "
                '(python -c "import secrets; print(secrets.token_hex(32))")'
            )
    return keys
