"""Limits on what one connection may ask for, and the rate limiter that enforces the rates.

:class:`Limits` is an immutable, validated set of numbers (chunk sizes, list
sizes, watch and upload counts, timeouts, rates). :class:`RateLimiter` holds
one connection's two token buckets: operations per second and bytes per second.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..wire.caps import DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, MiB
from .errors import ConfigError, RateLimited

__all__ = ["MAX_CHUNK_BYTES", "Limits", "MiB", "RateLimiter"]

_INT_FIELDS = frozenset(
    {
        "max_chunk_bytes",
        "default_read_bytes",
        "max_list_entries",
        "max_watches",
        "max_uploads",
        "ops_burst",
        "bytes_burst",
        "memory_budget",
        "max_in_flight",
    }
)

#: Limits for which 0 makes sense (a lock conflict then fails at once).
_ZERO_ALLOWED = frozenset({"lock_wait"})

# Relative tolerance for float rounding when comparing bucket levels.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Limits:
    """The limits applied to every connection.

    Attributes
    ----------
    max_chunk_bytes
        Largest read length and largest decoded content of one request
        (at most 2 MiB, the wire's cap).
    default_read_bytes
        Read length when a request gives none.
    max_list_entries
        Most entries in one ``files/list`` answer.
    max_watches
        Most watches per connection.
    max_uploads
        Most concurrent staged (chunked) uploads per connection.
    upload_idle_timeout
        Seconds of silence after which a staged upload is discarded.
    lock_wait
        Seconds an operation waits for a conflicting short operation's lock
        (0: a conflict fails at once).
    ops_per_second
        Sustained operations per second per connection (200,000; see *Rates*).
    ops_burst
        Operations a connection may make at once after being idle (2,000).
    bytes_per_second
        Sustained bytes (read plus written) per second per connection (16 GiB).
    bytes_burst
        Bytes a connection may move at once after being idle (64 MiB).
    consent_timeout
        Seconds a consent prompt waits before it counts as denied.
    memory_budget
        Bytes that one connection's answers may hold while they are produced
        and until they are written; past it, new requests wait their turn (or,
        when too many wait, are answered RATE_LIMITED with ``retryAfterMs``).
        A connection holds at most about twice this (answers, and requests
        waiting), whatever a server sends; one request always proceeds alone.
    max_in_flight
        Most ``files/*`` requests of one connection being answered at once;
        the rest wait their turn in arrival order.

    Raises
    ------
    ConfigError
        A value is not a positive number (integers where counts are meant;
        ``lock_wait`` may be 0),
        ``max_chunk_bytes`` exceeds 2 MiB, or ``default_read_bytes`` exceeds
        ``max_chunk_bytes``.

    Notes
    -----
    **Rates.** The default rates must never bind a server that sends one
    request at a time as fast as the broker answers: that is ordinary work,
    and a limit below the broker's own speed would only slow it down. So they
    lie above the fastest such client there is, the core driven in a tight
    loop with no transport at all, whether it sends small requests or the
    largest chunks. The defaults, 200,000 operations and 16 GiB per second,
    are several times what that client reached on the project's 2-core test
    machine, room for a machine several times faster (the measurements are in
    ``benchmarks/README.md``, "Why the code is shaped this way"). The bursts
    are small beside them (a hundredth of a second of operations, 32 largest
    chunks: what the worker pool can have in hand at once), so that what a
    client meets is the rate, not an allowance saved up while idle.

    The rates are thus a backstop. A flood is held by the memory budget: its
    waiting line, once as large as the budget, is answered RATE_LIMITED with
    ``retryAfterMs`` at once (and many requests in flight are answered no
    faster than one at a time: they queue for the same interpreter). A
    server whose requests do arrive faster than the rates (a much faster
    machine, an interpreter that runs requests in parallel) is refused
    RATE_LIMITED with ``retryAfterMs`` by them.
    """

    max_chunk_bytes: int = MAX_CHUNK_BYTES
    default_read_bytes: int = DEFAULT_CHUNK_BYTES
    max_list_entries: int = 10_000
    max_watches: int = 64
    max_uploads: int = 16
    upload_idle_timeout: float = 300.0
    lock_wait: float = 2.0
    ops_per_second: float = 200_000.0
    ops_burst: int = 2_000
    bytes_per_second: float = 16 * 1024 * MiB
    bytes_burst: int = 64 * MiB
    consent_timeout: float = 120.0
    memory_budget: int = 32 * MiB
    max_in_flight: int = 16

    def __post_init__(self) -> None:
        """Validate every field; see the class's *Raises* section."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _INT_FIELDS:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ConfigError(f"limit {f.name} must be an integer, not {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"limit {f.name} must be a number, not {value!r}")
            if not math.isfinite(value) or value < 0 or (value == 0 and f.name not in _ZERO_ALLOWED):
                zero = " or 0" if f.name in _ZERO_ALLOWED else ""
                raise ConfigError(f"limit {f.name} must be a positive number{zero}, not {value!r}")
        if self.max_chunk_bytes > MAX_CHUNK_BYTES:
            raise ConfigError(
                f"limit max_chunk_bytes must be at most {MAX_CHUNK_BYTES} (2 MiB, the protocol's cap), "
                f"not {self.max_chunk_bytes}"
            )
        if self.default_read_bytes > self.max_chunk_bytes:
            raise ConfigError(
                f"limit default_read_bytes ({self.default_read_bytes}) must not exceed "
                f"max_chunk_bytes ({self.max_chunk_bytes})"
            )

    def replace(self, **changes: Any) -> Limits:
        """Return a copy with *changes* applied, validated.

        Raises
        ------
        ConfigError
            An unknown limit name or an invalid value.
        """
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(f"unknown limit(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)


class _Bucket:
    """A token bucket; the owner holds the lock."""

    __slots__ = ("burst", "level", "rate", "stamp")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.level = burst
        self.stamp = now

    def refill(self, now: float) -> None:
        elapsed = now - self.stamp
        if elapsed > 0:
            self.level = min(self.burst, self.level + elapsed * self.rate)
        self.stamp = max(self.stamp, now)

    def retune(self, rate: float, burst: float, now: float) -> None:
        """New rate and burst from *now* on; tokens used stay used (the level never rises)."""
        self.refill(now)
        self.rate = rate
        self.burst = burst
        self.level = min(self.level, burst)

    def try_take(self, need: float, n: float) -> bool:
        """Take *n* tokens if at least *need* are there (float noise forgiven and not carried)."""
        if self.level + _EPSILON * max(1.0, need) < need:
            return False
        self.level = max(self.level, need) - n
        return True

    def retry_after_ms(self, need: float) -> int:
        # Rounded first so that float noise (0.050000000001 s) does not add a millisecond.
        return max(1, math.ceil(round((need - self.level) / self.rate * 1000, 6)))


class RateLimiter:
    """One connection's operation and byte rates, as two token buckets.

    Both buckets start full. Thread-safe.

    Parameters
    ----------
    limits
        Supplies ``ops_per_second``/``ops_burst`` and ``bytes_per_second``/``bytes_burst``.
    clock
        A monotonic clock in seconds (for tests).
    """

    def __init__(self, limits: Limits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._ops = _Bucket(limits.ops_per_second, limits.ops_burst, now)
        self._bytes = _Bucket(limits.bytes_per_second, limits.bytes_burst, now)

    @property
    def limits(self) -> Limits:
        """The limits this limiter enforces."""
        return self._limits

    def update(self, limits: Limits) -> None:
        """Enforce the rates and bursts of *limits* from now on.

        What the connection used so far stays counted: lowering a burst takes
        away tokens above it, raising one adds none at once.
        """
        with self._lock:
            now = self._clock()
            self._ops.retune(limits.ops_per_second, limits.ops_burst, now)
            self._bytes.retune(limits.bytes_per_second, limits.bytes_burst, now)
            self._limits = limits

    def take_op(self, *, path: str | None = None) -> None:
        """Count one operation.

        Parameters
        ----------
        path
            The request's path, for the error's ``data.path``.

        Raises
        ------
        RateLimited
            The operation bucket is empty (``reason="ops_rate"``, ``data.retryAfterMs``).
        """
        with self._lock:
            bucket = self._ops
            bucket.refill(self._clock())
            if bucket.try_take(1, 1):
                return
            retry = bucket.retry_after_ms(1)
        raise RateLimited(
            f"too many operations: at most {self._limits.ops_per_second:g} per second; retry in {retry} ms",
            reason="ops_rate",
            path=path,
            retryAfterMs=retry,
        )

    def take_bytes(self, n: int, *, path: str | None = None) -> None:
        """Count *n* bytes read or written.

        A request larger than the burst passes when the bucket is full and
        leaves it in debt, so a maximal chunk always passes eventually while
        the long-run rate still holds.

        Parameters
        ----------
        n
            Bytes moved; 0 takes nothing.
        path
            The request's path, for the error's ``data.path``.

        Raises
        ------
        RateLimited
            The byte bucket lacks *n* tokens (``reason="bytes_rate"``, ``data.retryAfterMs``).
        ValueError
            *n* is negative.
        """
        if n < 0:
            raise ValueError(f"byte count must not be negative, not {n}")
        if n == 0:
            return
        with self._lock:
            bucket = self._bytes
            bucket.refill(self._clock())
            need = min(n, bucket.burst)
            if bucket.try_take(need, n):
                return
            retry = bucket.retry_after_ms(need)
        raise RateLimited(
            f"too many bytes: at most {self._limits.bytes_per_second / MiB:g} MiB per second; "
            f"retry in {retry} ms",
            reason="bytes_rate",
            path=path,
            retryAfterMs=retry,
        )
