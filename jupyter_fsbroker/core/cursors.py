"""The cursors of ``files/list``: opaque, tamper-proof, and resumed without re-reading a folder.

A connection's :class:`Listings` keeps the listings it has paged through and
not finished yet, each a :class:`~jupyter_fsbroker.core.listing.Walk` that
knows where it stands. The ``nextCursor`` it hands out names one of them and
also carries the last entry sent, so that the listing can go on even when its
walk is no longer kept:

* the cursor of the page just sent resumes its walk as it stands (the fast
  path: no directory is read again);
* any other valid cursor of this connection (an older page sent again, or a
  listing whose walk was dropped because it stayed idle for
  :data:`IDLE_SECONDS` or because more than :data:`KEPT` listings were open)
  resumes a new walk right after its last entry, reading only the directories
  on the way to it; the order is the same, so the answer is too.

A cursor is ``<payload>.<tag>``: the payload (the listed path, the options,
the last entry, which walk and which page) in URL-safe base64, and an HMAC of
it under a key that only this connection knows. A cursor that another
connection made, that was altered, or that belongs to another listing (another
path, or recursive where it was not) is refused with -32602
``reason="bad_cursor"``; nothing in it is trusted before its tag is checked.

Walks are kept per connection and never hold a descriptor between pages
(:mod:`jupyter_fsbroker.core.listing`), so a kept listing costs memory for
the names of its open directories only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidParams
from .listing import Walk
from .rootpath import RootPath

__all__ = ["IDLE_SECONDS", "KEPT", "Listing", "Listings"]

#: Listings of one connection kept between pages; beyond that the least recently used is dropped.
KEPT = 8
#: Seconds a kept listing waits for its next page before it is dropped.
IDLE_SECONDS = 60.0

_TAG_BYTES = 16


@dataclass(eq=False)
class Listing:
    """One listing being answered: its walk, and which listing of the connection it is.

    Attributes
    ----------
    walk
        Where the listing stands.
    listing_id
        Names the listing in its cursors.
    pages
        The pages sent so far.
    """

    walk: Walk
    listing_id: str
    pages: int = 0


@dataclass
class _KeptListing:
    listing: Listing
    used: float = field(default_factory=time.monotonic)


class Listings:
    """The ``files/list`` listings of one connection that a cursor may resume. Thread-safe.

    Parameters
    ----------
    kept
        How many unfinished listings are kept at most.
    idle
        Seconds after which an unfinished listing nobody resumed is dropped.
    """

    def __init__(self, *, kept: int = KEPT, idle: float = IDLE_SECONDS) -> None:
        self._key = secrets.token_bytes(32)
        self._most = kept
        self._idle = idle
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, _KeptListing] = OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def begin(
        self,
        cursor: str | None,
        location: RootPath,
        *,
        recursive: bool,
        include_hidden: bool,
        shown: str,
    ) -> Listing:
        """The listing that answers a ``files/list`` of *location* with *cursor* (``None``: from the start).

        A resumed listing is taken out of the kept ones while its page is made
        (two requests with one cursor never share a walk); :meth:`keep` puts it
        back and makes the next cursor.

        Raises
        ------
        InvalidParams
            ``reason="bad_cursor"``: not a cursor of this connection, altered,
            or one of another listing.
        """
        if cursor is None:
            return self._new(Walk(location, recursive=recursive, include_hidden=include_hidden))
        payload = self._open(cursor, shown)
        try:
            listed, was_recursive, hidden = payload["p"], payload["r"], payload["h"]
            after = tuple(payload["a"])
            listing_id, pages = payload["i"], payload["n"]
        except (KeyError, TypeError):
            raise _bad_cursor(shown) from None
        base = location.parts
        if (
            listed != location.rel
            or was_recursive is not recursive
            or not all(isinstance(a, str) for a in after)
            or len(after) <= len(base)
            or after[: len(base)] != base
        ):
            raise _bad_cursor(shown)
        with self._lock:
            kept = self._kept.get(listing_id)
            if kept is not None and kept.listing.pages == pages:
                del self._kept[listing_id]
            else:
                kept = None
        if kept is not None and hidden is include_hidden:
            return kept.listing
        # An older page asked again, or a listing no longer kept: resume after its last entry.
        return self._new(Walk(location, recursive=recursive, include_hidden=include_hidden, after=after))

    def keep(self, listing: Listing) -> str:
        """Keep *listing* (its page was sent and more remain); return the ``nextCursor`` that resumes it."""
        walk = listing.walk
        assert walk.last is not None
        listing.pages += 1
        with self._lock:
            self._kept.pop(listing.listing_id, None)
            self._kept[listing.listing_id] = _KeptListing(listing)
            while len(self._kept) > self._most:
                self._kept.popitem(last=False)
        payload = {
            "p": walk.location.rel,
            "r": walk.recursive,
            "h": walk.include_hidden,
            "a": list(walk.last),
            "i": listing.listing_id,
            "n": listing.pages,
        }
        return self._seal(payload)

    def _new(self, walk: Walk) -> Listing:
        return Listing(walk, f"{next(self._ids):x}")

    def discard_idle(self) -> None:
        """Drop the listings nobody resumed for :data:`IDLE_SECONDS`."""
        limit = time.monotonic() - self._idle
        with self._lock:
            for listing_id in [i for i, kept in self._kept.items() if kept.used < limit]:
                del self._kept[listing_id]

    def close(self) -> None:
        """Drop every kept listing (the connection ended)."""
        with self._lock:
            self._kept.clear()

    # -- the cursor itself -----------------------------------------------------------------------

    def _seal(self, payload: dict[str, Any]) -> str:
        # ensure_ascii keeps undecodable names (lone surrogates) as \\udcXX escapes, which
        # json.loads turns back into the very same names.
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=True).encode("ascii")
        tag = hmac.new(self._key, body, hashlib.sha256).digest()[:_TAG_BYTES]
        return f"{_b64(body)}.{_b64(tag)}"

    def _open(self, cursor: str, shown: str) -> dict[str, Any]:
        body_text, dot, tag_text = cursor.partition(".")
        try:
            if not dot:
                raise ValueError("no tag")
            body = _unb64(body_text)
            tag = _unb64(tag_text)
        except (ValueError, UnicodeError):
            raise _bad_cursor(shown) from None
        expected = hmac.new(self._key, body, hashlib.sha256).digest()[:_TAG_BYTES]
        if not hmac.compare_digest(tag, expected):
            raise _bad_cursor(shown)
        payload = json.loads(body)
        if not isinstance(payload, dict):
            raise _bad_cursor(shown)
        return payload


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    data = text.encode("ascii")
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))


def _bad_cursor(shown: str) -> InvalidParams:
    return InvalidParams("the cursor does not belong to this listing", reason="bad_cursor", path=shown)
