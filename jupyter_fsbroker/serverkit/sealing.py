"""Sealed continuations: a modern call's state, carried by the client, opened by any replica.

A continuation is attacker-controlled input (PROTOCOL.md, "Sealing"). It is compressed and
sealed with AES-256-GCM (mcp's :class:`~mcp.server.request_state.AESGCMRequestStateCodec`) under
a key list every replica shares, and opened only for the principal, tool and arguments it was
sealed for, before it expires. Replicas share no store, so "once" holds per process: each
process opens a given (call, step) once; see PROTOCOL.md for what that does and does not
guarantee.
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

__all__ = ["CallState", "ContinuationSealer", "digest", "load_state_keys"]

log = logging.getLogger(__name__)

_VERSION = 1
# Minted at most this far in the future (replicas' clocks differ a little).
_FUTURE_SKEW = 60.0


def digest(value: Any) -> str:
    """A short digest of a JSON value, the same for equal values whatever their key order."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:18]).decode()


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
        Every operation answered so far, in the order answered: ``(operation key, answer)``,
        the answer ``{"result": …}`` or ``{"error": …}``; ``None`` when the call is live in one
        instance only (:mod:`.live_calls`) and cannot be replayed elsewhere.
    """

    call: str
    step: int
    started: float
    tool: str
    arguments: str
    principal: str
    batch: tuple[tuple[str, str], ...]
    journal: tuple[tuple[str, Mapping[str, Any]], ...] | None


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
        """The continuation of *state*.

        Raises
        ------
        TooLargeError
            The sealed state would outgrow a continuation's 1.25 MiB (``journal_too_large``).
        """
        now = time.time()
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
            "journal": None
            if state.journal is None
            else [[key, dict(answer)] for key, answer in state.journal],
        }
        payload = _compressed(json.dumps(claims, separators=(",", ":")).encode())
        token = None if payload is None else self._codec.seal(payload)
        if token is None or len(token) > MAX_CONTINUATION_CHARS:
            raise TooLargeError(
                "the call's recorded answers outgrow a continuation: read less in one call, "
                "or call this tool on the legacy wire",
                data={
                    "error": "TOO_LARGE",
                    "reason": "journal_too_large",
                    "maxBytes": MAX_CONTINUATION_CHARS,
                },
            )
        return token

    def open(self, token: str, *, tool: str, arguments: str, principal: str) -> CallState:
        """The state sealed in *token*, for this tool, arguments digest and principal digest.

        Raises
        ------
        ContinuationRefusedError
            The token was not sealed by this key ring unchanged, is for another call or
            principal, has expired, or was opened by this process before. Nothing is touched;
            the real reason is logged, the error says only ``expired`` or ``invalid``.
        """
        try:
            claims = json.loads(zlib.decompress(self._codec.unseal(token), bufsize=1 << 16))
            state = CallState(
                str(claims["call"]),
                int(claims["step"]),
                float(claims["started"]),
                str(claims["tool"]),
                str(claims["args"]),
                str(claims["p"]),
                tuple((str(i), str(k)) for i, k in claims["batch"]),
                None
                if claims["journal"] is None
                else tuple((str(k), cast("Mapping[str, Any]", a)) for k, a in claims["journal"]),
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


# The compressed bytes a continuation can hold (base64url of them, the seal's own bytes aside).
_MAX_PAYLOAD = (MAX_CONTINUATION_CHARS - 128) * 3 // 4
_PIECE = 256 * 1024


def _compressed(text: bytes) -> bytes | None:
    """*text* compressed; ``None`` as soon as it is clear that it will not fit in a continuation.

    Level 1: a journal is compressed again in each round that carries it, and level 1 costs a
    fifth of level 6 for some tenth less room. Stopping early bounds what a journal that does not
    fit costs to the room of a continuation.
    """
    packer = zlib.compressobj(1)
    out: list[bytes] = []
    size = 0
    for start in range(0, len(text), _PIECE):
        out.append(packer.compress(text[start : start + _PIECE]))
        size += len(out[-1])
        if size > _MAX_PAYLOAD:
            return None
    out.append(packer.flush())
    return b"".join(out)


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
