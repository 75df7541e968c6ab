"""How long and how much the trash keeps: :class:`Retention`, and which entries it removes.

Without a bound the trash only grows, and a server with delete grants fills
the disk by writing and deleting. The retention bounds it
(:attr:`BrokerConfig.trash_max_age <jupyter_fsbroker.core.config.BrokerConfig.trash_max_age>`
and ``trash_max_bytes``):

* **Age**: an entry deleted more than ``max_age`` seconds ago goes (30 days
  by default).
* **Size**: the sizes of the entries add up to at most ``max_bytes``; when
  something new is trashed, the oldest entries go first until the rest fits.
  An object larger than ``max_bytes`` on its own is never trashed: its delete
  is refused and changes nothing (TOO_LARGE, ``exceeds_trash``). Deleting it
  for good instead would lose what the user was promised to get back, and
  keeping it would break the bound; the user can raise the bound, turn on
  permanent delete, or delete it themselves.

**The default size** (:func:`default_trash_max_bytes`): 1 GiB, or a tenth of
the size of the file system that holds the trash, whichever is smaller.
1 GiB keeps the ordinary mistakes recoverable — a notebook's data files, a
folder of results, a model checkpoint of a few hundred MiB — while a server
deleting in a loop can hold back at most that much; on a small disk (a
container's overlay, a home quota of a few GiB) a tenth of it keeps the trash
from taking the room the work needs. Sizes are the files' sizes, so a sparse
file counts what it could take, not what it takes now.

Entries are removed where the retention is applied: when something is trashed,
when a broker starts and every minute while it runs (:meth:`TrashCan.enforce
<jupyter_fsbroker.core.trashcan.TrashCan.enforce>`), under the trash's lock,
never outside the trash directory. The check after an addition counts this
process's additions at once and other processes' with a delay of a second at
most (it lists the trash again at most once a second: listing thousands of
entries on every delete would cost milliseconds each); once over a bound, what
goes is decided under the lock from a fresh listing. So the trash may pass its
size by what other processes added in the second before a check, until the
next check (a delete, or the minute's). This module only decides.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass

from .config import BrokerConfig
from .trashentry import TrashEntry

__all__ = ["MAX_AGE", "MAX_BYTES", "TRASH_BYTES_CAP", "Retention", "default_trash_max_bytes"]

#: The most the default size of the trash is: 1 GiB.
TRASH_BYTES_CAP = 1024**3
#: The share of its file system's size the default size of the trash may be.
_DISK_SHARE = 10

#: The reason of an entry removed for its age.
MAX_AGE = "max_age"
#: The reason of an entry removed to keep the trash within its size.
MAX_BYTES = "max_bytes"


@dataclass(frozen=True)
class Retention:
    """How long (seconds) and how much (bytes) the trash keeps.

    Attributes
    ----------
    max_age
        Entries deleted longer ago than this go.
    max_bytes
        The entries' sizes add up to at most this; a larger object is not trashed.
    """

    max_age: float
    max_bytes: int

    @classmethod
    def of(cls, config: BrokerConfig, directory: str) -> Retention:
        """The retention *config* asks for, for the trash in *directory* (which need not exist yet)."""
        max_bytes = config.trash_max_bytes
        return cls(
            max_age=config.trash_max_age,
            max_bytes=default_trash_max_bytes(directory) if max_bytes is None else max_bytes,
        )

    def fits(self, size: int) -> bool:
        """Whether an object of *size* bytes may go to the trash at all."""
        return size <= self.max_bytes

    def select(self, entries: Sequence[TrashEntry], now: float) -> list[tuple[TrashEntry, str]]:
        """The entries to remove, oldest first, each with its reason (:data:`MAX_AGE`, :data:`MAX_BYTES`).

        Parameters
        ----------
        entries
            The trash's entries, in any order.
        now
            :func:`time.time` now.
        """
        chosen: list[tuple[TrashEntry, str]] = []
        kept: list[TrashEntry] = []
        for entry in sorted(entries, key=operator.attrgetter("deleted_at", "id")):
            if now - entry.deleted_at > self.max_age:
                chosen.append((entry, MAX_AGE))
            else:
                kept.append(entry)
        total = sum(entry.size for entry in kept)
        for entry in kept:
            if total <= self.max_bytes:
                break
            chosen.append((entry, MAX_BYTES))
            total -= entry.size
        return chosen


def default_trash_max_bytes(directory: str) -> int:
    """1 GiB, or a tenth of the size of the file system holding *directory* if that is smaller.

    *directory* need not exist: its nearest existing parent says which file
    system it will be on. Where that cannot be told, 1 GiB.
    """
    place = os.path.abspath(directory)
    while not os.path.isdir(place) and os.path.dirname(place) != place:
        place = os.path.dirname(place)
    try:
        st = os.statvfs(place)
    except (OSError, AttributeError):  # no statvfs (Windows), or an unreadable place
        return TRASH_BYTES_CAP
    size = st.f_blocks * st.f_frsize
    return max(1, min(TRASH_BYTES_CAP, size // _DISK_SHARE)) if size else TRASH_BYTES_CAP
