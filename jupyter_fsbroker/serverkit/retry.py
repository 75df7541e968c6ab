"""How long the helper waits for an answer, and when it repeats a refused request.

Frozen values a server author may pass to :func:`~.files_client.files`; they decide
nothing by themselves and send nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..wire.caps import MiB
from .exceptions import FileLockedError, FilesRequestError, RateLimitedError

__all__ = ["RetryPolicy", "Timeouts"]


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before repeating a refused request.

    FILE_LOCKED and RATE_LIMITED are refused before anything happens, so
    repeating them is always safe.

    Attributes
    ----------
    retries
        Repetitions after the first attempt (SEP-1708: 3).
    backoff
        First delay in seconds when the client suggests none; doubled each time.
    max_delay
        Longest single delay.
    codes
        The JSON-RPC codes worth repeating.
    """

    retries: int = 3
    backoff: float = 0.1
    max_delay: float = 5.0
    codes: frozenset[int] = frozenset({FileLockedError.default_code, RateLimitedError.default_code})

    def delay(self, attempt: int, error: FilesRequestError) -> float:
        """Seconds to wait before repetition *attempt* (0-based) after *error*.

        ``data.retryAfterMs`` is honoured when present; a little jitter keeps
        several waiting tools from retrying in lockstep.
        """
        suggested = error.retry_after
        base = suggested if suggested is not None else self.backoff * (2**attempt)
        return min(self.max_delay, base) * (1.0 + 0.1 * random.random())


@dataclass(frozen=True)
class Timeouts:
    """How long to wait for an answer.

    Attributes
    ----------
    base
        Seconds for any request (SEP-1708: 60 s).
    per_mib
        Extra seconds per MiB the request carries or asks for.
    consent
        Seconds for ``files/consent``: the user is deciding (the broker itself
        denies after its own consent timeout, 120 s by default).
    """

    base: float = 60.0
    per_mib: float = 30.0
    consent: float = 300.0

    def for_bytes(self, nbytes: int) -> float:
        """The timeout of a request that moves *nbytes* bytes."""
        return self.base + self.per_mib * max(0, nbytes) / MiB
