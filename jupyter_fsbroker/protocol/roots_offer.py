"""What a connection tells its server about the roots (``roots/list``), and what it holds back.

MCP makes a root a ``file://`` URI, and a server that opens files itself
(``@modelcontextprotocol/server-filesystem``) takes that URI as a place it may
read and write, with no grant, no consent and no audit record. A server that
brokers its files through ``files/*`` needs only the roots' names
(``data/sales.csv``), and a remote one would learn nothing from a location but
the user's name and folder layout. So :class:`RootsOffer` answers
``roots/list`` with **no locations** by default::

    {"roots": [], "_meta": {"filesystemBrokering": {"roots": [
        {"name": "data"}, {"name": "ref", "readOnly": true}]}}}

The names (and the read-only mark) travel in the result's ``_meta``, which
servers that ignore it never see; a made-up ``uri`` would not do, since such
servers resolve whatever follows ``file://``. The ``file://`` locations of the
read-write roots are handed over only when the user says so
(``advertise_roots=True``), or, by default, to a local server that the
operating system confines to the roots (``sandbox="roots"``); read-only roots
only with ``advertise_read_only_roots`` as well. The names are sent either way.

When a server asks while locations are withheld and it has sent no ``files/*``
request, it probably opens files itself: the offer then keeps a
:class:`RootsNotice` (what it asked, what it was not given, why, and how to hand
it over), logs it once (INFO, this module's logger) and tells its followers
(the connection card, the command line). The notice is dropped for good at the
server's first ``files/*`` request.

What it must never do: hand a location over that the settings do not allow,
or decide anything about access (``files/*`` requests are decided by the core,
whatever was listed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..core.broker import Broker
from ..core.listeners import Listeners
from ..core.roots import Root
from ..wire.brokering import ROOTS_META

if TYPE_CHECKING:
    from ..sandbox import SandboxStatus

__all__ = ["BROKERING_META", "RootsNotice", "RootsOffer", "hands_over_locations"]

log = logging.getLogger(__name__)

#: The key of the ``roots/list`` result's ``_meta`` that carries the roots' names (PROTOCOL.md).
BROKERING_META = ROOTS_META

_ASKED = "roots/list"


def hands_over_locations(advertise: bool | None, sandbox: SandboxStatus | None) -> bool:
    """Whether the ``file://`` locations of the read-write roots go out in ``roots/list``.

    *advertise* is the user's choice (``None``: decide here); *sandbox* how the
    server runs (``None``: over HTTP). Undecided, only a server confined to the
    roots by the operating system (``sandbox="roots"``) gets them.
    """
    if advertise is not None:
        return advertise
    confined = sandbox.sandbox if sandbox is not None else None
    return confined is not None and confined.level == "roots"


@dataclass(frozen=True)
class RootsNotice:
    """A server asked where the shared folders are and was given only their names.

    Attributes
    ----------
    server
        The connection's name.
    withheld
        The names of the roots whose location it was not given.
    reason
        Why they were withheld, in words.
    remedy
        How to hand them over, in words.
    asked
        What it asked (``roots/list``).
    """

    server: str
    withheld: tuple[str, ...]
    reason: str
    remedy: str
    asked: str = _ASKED

    @property
    def text(self) -> str:
        """The whole notice, one paragraph for people."""
        return (
            f"{self.server} asked where the shared folders are ({self.asked}) and got only their names "
            f"({', '.join(self.withheld)}): {self.reason}. {self.remedy}"
        )

    def __str__(self) -> str:
        return self.text


class RootsOffer:
    """The roots as one connection's server is told them, and the notice when it needed more.

    Parameters
    ----------
    broker
        Whose roots.
    advertise
        The connection's ``advertise_roots`` (``None``: the broker's setting,
        and if that is ``None`` too, see :func:`hands_over_locations`).
    sandbox
        How a local server runs (``None``: over HTTP, it runs elsewhere).
    label
        Returns the connection's name (it may change once the server names itself).

    Notes
    -----
    :meth:`answer` and :meth:`located` run on the connection's event loop;
    :meth:`files_used` on any thread (it is on the way of every request, and
    costs one attribute test once the server has used ``files/*``).
    """

    def __init__(
        self,
        broker: Broker,
        *,
        advertise: bool | None,
        sandbox: SandboxStatus | None,
        label: Callable[[], str],
    ) -> None:
        self._broker = broker
        self._sandbox = sandbox
        self._label = label
        chosen = broker.config.advertise_roots if advertise is None else advertise
        #: Whether the read-write roots' ``file://`` locations are handed over.
        self.locations = hands_over_locations(chosen, sandbox)
        self._lock = threading.Lock()
        self._notice: RootsNotice | None = None
        self._logged = False
        self._files_seen = False
        self._listeners: Listeners[[RootsNotice | None]] = Listeners()

    @property
    def files_seen(self) -> bool:
        """Whether the server has sent a ``files/*`` request (it brokers its files)."""
        return self._files_seen

    @property
    def notice(self) -> RootsNotice | None:
        """The notice in force: the server asked for locations it was not given (``None``: it did not)."""
        return self._notice

    def follow(self, listener: Callable[[RootsNotice | None], object]) -> Callable[[], None]:
        """Call *listener* (any thread) with the notice whenever it appears or is dropped (``None``).

        Returns the function that stops following.
        """
        return self._listeners.add(listener)

    # -- the wire ------------------------------------------------------------------------------

    def answer(self) -> dict[str, Any]:
        """The server asked ``roots/list``: its result (and the notice, where it needed more)."""
        roots = self._broker.roots.snapshot()
        result: dict[str, Any] = {"roots": self._items(roots)}
        if roots:
            names = [{"name": r.name, "readOnly": True} if r.read_only else {"name": r.name} for r in roots]
            result["_meta"] = {BROKERING_META: {"roots": names}}
            if not self.locations:
                self._withheld(tuple(r.name for r in roots), any(r.read_only for r in roots))
        return result

    def located(self) -> bool:
        """Whether ``roots/list`` would hand any location over now (a tool call then waits for it)."""
        return bool(self._items(self._broker.roots.snapshot()))

    def files_used(self) -> None:
        """The server sent a ``files/*`` request: it brokers its files, and any notice is dropped."""
        if self._files_seen:
            return
        with self._lock:
            self._files_seen = True
            notice, self._notice = self._notice, None
        if notice is not None:
            log.debug("%s now uses files/*: the notice about its roots is dropped", notice.server)
            self._listeners.notify(None)

    def _items(self, roots: tuple[Root, ...]) -> list[dict[str, Any]]:
        if not self.locations:
            return []
        also_read_only = self._broker.config.advertise_read_only_roots
        items: list[dict[str, Any]] = []
        for root in roots:
            if not root.read_only:
                items.append({"uri": root.uri, "name": root.name})
            elif also_read_only:
                items.append({"uri": root.uri, "name": root.name, "_meta": {"readOnly": True}})
        return items

    # -- the notice ----------------------------------------------------------------------------

    def _withheld(self, names: tuple[str, ...], read_only: bool) -> None:
        with self._lock:
            if self._files_seen:
                return
            kind = self._kind()
            notice = RootsNotice(self._label(), names, _REASONS[kind], self._remedy(kind, read_only))
            if notice == self._notice:
                return
            self._notice = notice
            first, self._logged = not self._logged, True
        if first:
            log.info("%s", notice.text)
        self._listeners.notify(notice)

    def _kind(self) -> Literal["remote", "confined", "local"]:
        if self._sandbox is None:
            return "remote"
        return "confined" if self._sandbox.sandbox is not None else "local"

    def _remedy(self, kind: str, read_only: bool) -> str:
        if kind == "remote":
            text = "To hand them over anyway: connect with advertise_roots=True (or --advertise-roots)."
        elif kind == "confined":
            text = "To let it open them itself: run it with sandbox='roots'."
        else:
            text = (
                "To let it: connect with advertise_roots=True (or --advertise-roots), "
                "or run it with sandbox='roots'."
            )
        if read_only and not self._broker.config.advertise_read_only_roots:
            text += " Read-only folders also need advertise_read_only_roots."
        return text


_REASONS = {
    "local": "it has sent no files/* request, so it seems to open files itself, which would bypass "
    "consent, grants and the activity log",
    "confined": "it has sent no files/* request, and its sandbox lets it open none of your files itself",
    "remote": "it has sent no files/* request, and their locations would tell a remote server your "
    "user name and folder layout, while it can reach your files only through files/*",
}
