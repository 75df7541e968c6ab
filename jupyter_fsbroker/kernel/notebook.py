"""The notebook's broker: :class:`NotebookBroker`, one per kernel.

::

    import jupyter_fsbroker as fsb

    broker = fsb.get_broker()                               # one per kernel
    broker.add_root("./data", name="data")
    broker.allow("data/raw", ops=("read",))                 # pre-approval
    conn = broker.connect("analysis", url="http://127.0.0.1:8765/mcp")
    result = conn.call_tool("profile_csv", {"path": "data/sales.csv"})         # sync cell
    result = await conn.acall_tool("profile_csv", {"path": "data/sales.csv"})  # async cell
    conn.revoke("data/raw"); conn.close()
    broker.dashboard()
    broker.trash()                                          # what servers deleted; .restore(ID)

It ties together a core :class:`~jupyter_fsbroker.core.broker.Broker` (roots,
grants, locks, audit), the background loop its connections run on
(:mod:`.loop`, reached through :mod:`.calls`), its connections by name
(:mod:`.connecting`) and the servers they reach (:mod:`.servers`), the
``FSBroker`` settings it follows (:mod:`.settings_link`), who answers consent
(:mod:`.notebook_consent`, :mod:`.prompting`), the views (:mod:`.views`) and
what it does between cells (:mod:`.cell_events`). Its methods
are thin, thread-safe entry points: the work happens on the loop or in the core,
and policy is the core's. It never blocks the loop's thread, and closing it
leaves no thread, process, lock or temporary file behind.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from ..core.broker import Broker
from ..core.config import BrokerConfig
from ..core.consent import ConsentDecision, Consenter, ConsentRequest
from ..core.errors import ClosedError
from ..core.grants import Grant
from ..core.locks import LockInfo
from ..core.roots import Root
from ..sandbox import Sandbox
from . import ipykernel_compat as ipk
from .calls import CallRunner
from .cell_events import CellEvents
from .connecting import CLOSE_TIMEOUT, ConnectionRegistry
from .loop import BackgroundLoop
from .notebook_connection import KernelConnection
from .notebook_consent import NotebookConsent
from .running_calls import RunningCall, RunningCalls
from .servers import DEFAULT_CONNECT_TIMEOUT, ERAS, TargetOptions
from .settings import FSBroker
from .settings_link import SettingsLink
from .sign_ins import NotebookSignIns
from .views import NotebookViews, widgets_available
from .warming import WarmUp

if TYPE_CHECKING:  # the MCP client is imported with the first connection (see .servers)
    from ..protocol.auth import OAuth
    from ..protocol.handshake import EraChoice
    from ..widgets.view_thread import ViewThread
    from .audit_records import AuditRecords
    from .trashbin import NotebookTrash

__all__ = ["NotebookBroker"]


class NotebookBroker:
    """The kernel's broker: shared folders, grants and server connections, with their views.

    One per kernel: get it with :func:`~jupyter_fsbroker.kernel.current.get_broker`
    (``%load_ext jupyter_fsbroker`` creates it). It owns a core
    :class:`~jupyter_fsbroker.core.broker.Broker` (:attr:`core`) and the
    background event loop its connections run on.

    Parameters
    ----------
    settings
        The ``FSBroker`` configurable; default: its defaults.
    shell
        The IPython shell, if any.
    consenter
        Who answers consent requests; default: prompts in the notebook (widgets,
        stdin), the terminal in a terminal IPython, or refusal without either.
    config
        The core configuration to start from (lock and trash folders ...);
        *settings* are applied over it.
    widgets
        Whether to show widgets; default: inside a kernel with ``ipywidgets``.

    Attributes
    ----------
    settings
        As given.
    shell
        As given.
    core
        The core broker: roots, grants, locks, watches, audit.
    """

    def __init__(
        self,
        settings: FSBroker | None = None,
        *,
        shell: Any | None = None,
        consenter: Consenter | None = None,
        config: BrokerConfig | None = None,
        widgets: bool | None = None,
    ) -> None:
        self.settings = settings if settings is not None else FSBroker()
        self.shell = shell
        self._kernel = ipk.get_kernel() if shell is None or hasattr(shell, "kernel") else None
        if widgets is None:  # widgets need a kernel (and a frontend) to show them
            widgets = self._kernel is not None and widgets_available()
        self._lock = threading.RLock()
        self._closed = False
        self._base_config = config or BrokerConfig()
        self.core = Broker(self.settings.make_config(self._base_config))
        #: The sign-ins of URL connections (see :mod:`.sign_ins`).
        self.sign_ins = NotebookSignIns(self.settings, self.core.audit)
        self._views = NotebookViews(
            self.core,
            lambda: self._registry.all(),
            widgets=widgets,
            closed=lambda: self._closed,
            pending=self.pending_consents,
        )
        self._loop = BackgroundLoop(prepare=lambda: ipk.detach(self._kernel))
        try:
            self._loop.start()
        except BaseException:
            self.core.close()
            raise
        self._warm = WarmUp(self._loop, enabled=self._kernel is not None)
        self._consent = NotebookConsent(
            self.core,
            self.settings,
            kernel=self._kernel,
            views=self._views,
            warm=self._warm,
            consenter=consenter,
        )
        self._runner = CallRunner(
            self._loop,
            new_scope=self._consent.new_scope,
            consenter=self._consent.kernel_consenter,
            keep=self._views.keep,
            running=RunningCalls(),
        )
        self._registry = ConnectionRegistry(
            self,
            self.core,
            runner=self._runner,
            views=self._views,
            consenter=lambda: self._consent.consenter,
            default_sandbox=self.settings.default_sandbox,
            # The sign-in settings import the MCP client on this thread: never beside the warm-up's.
            before=self._warm.complete,
            closed=lambda: self._closed,
            sign_ins=self.sign_ins,
        )
        self._settings_link = SettingsLink(
            self.settings,
            target=self,
            core=self.core,
            base_config=self._base_config,
            closed=lambda: self._closed,
        )
        self._settings_link.apply_specs()
        self._cells = CellEvents(shell, warm=self._warm, views=self._views)

    @property
    def consenter(self) -> Consenter:
        """Who answers the consent requests of every connection (see the *consenter* parameter)."""
        return self._consent.consenter

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<NotebookBroker {state}: {len(self.core.roots.snapshot())} roots, "
            f"{len(self._registry.all())} connections>"
        )

    # -- roots and grants ----------------------------------------------------------------------

    @property
    def roots(self) -> tuple[Root, ...]:
        """The shared folders."""
        return self.core.roots.snapshot()

    def add_root(
        self, path: str | os.PathLike[str], name: str | None = None, *, read_only: bool = False
    ) -> Root:
        """Share the folder *path* with servers as root *name* (default: the folder's name).

        Adding the same folder under the same name again (re-running a cell)
        returns the existing root.

        Parameters
        ----------
        path
            An existing folder; ``~`` and relative paths are expanded. ``/`` and
            your home folder itself are refused.
        name
            The root's name: servers write paths as ``NAME/rest``.
        read_only
            Refuse every change below this folder.

        Raises
        ------
        ConfigError
            Missing or too broad folder, or the name is taken by another folder.
        """
        self._check_open()
        wanted = os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(path))))
        existing = self.core.roots.get(name if name is not None else os.path.basename(wanted))
        if existing is not None and existing.path == wanted and existing.read_only == read_only:
            return existing
        return self.core.add_root(path, name, read_only=read_only)

    def remove_root(self, name: str) -> Root:
        """Stop sharing root *name*; its grants, watches and staged uploads end with it.

        Raises
        ------
        ConfigError
            No root has that name.
        """
        self._check_open()
        return self.core.remove_root(name)

    def allow(
        self,
        path: str,
        ops: Sequence[str] | str = ("read",),
        *,
        include_sensitive: bool = False,
        duration: float | None = None,
    ) -> Grant:
        """Pre-approve *path* for *ops* for every connection (no consent prompt needed).

        Takes the arguments of :meth:`Broker.allow <jupyter_fsbroker.core.broker.Broker.allow>`:
        a root-relative, absolute or ``file://`` *path* inside a root; *ops*
        some of ``read``, ``write``, ``delete``, ``watch`` (a sequence or a
        comma list); *include_sensitive* to allow ``.env``, keys ... below it;
        *duration* in seconds (``None``: until revoked).

        Raises
        ------
        ConfigError
            *path* is outside every root, or an operation is unknown.
        """
        self._check_open()
        operations = tuple(ops) if not isinstance(ops, str) else ops
        return self.core.allow(path, operations, include_sensitive=include_sensitive, duration=duration)

    def revoke(
        self, path: str | None = None, *, connection: str | KernelConnection | None = None
    ) -> tuple[Grant, ...]:
        """Revoke grants on *path* (or all): of *connection*, or the pre-approvals when ``None``.

        Returns
        -------
        tuple of Grant
            What was revoked.
        """
        self._check_open()
        if connection is None:
            return self.core.revoke(path)
        conn = self.connection(connection) if isinstance(connection, str) else connection
        return conn.revoke(path)

    def grants(self) -> tuple[Grant, ...]:
        """Every live grant: consents of each connection and the pre-approvals."""
        return self.core.grants.grants()

    def locks(self) -> tuple[LockInfo, ...]:
        """Every lock held now (kept locks carry a ``lock_id``)."""
        try:
            return self.core.locks.held()
        except ClosedError:
            return ()

    def force_unlock(self, lock_id: str) -> None:
        """Release a kept lock, whoever holds it."""
        self.core.force_unlock(lock_id)

    def audit(
        self, server: str | KernelConnection | None = None, *, limit: int | None = None
    ) -> AuditRecords:
        """What happened to the servers' ``files/*`` requests, newest last: frozen records, as a table.

        Parameters
        ----------
        server
            Only this server's records (a connection, or its name).
        limit
            At most this many (the newest).

        Returns
        -------
        AuditRecords
            A tuple of :class:`~jupyter_fsbroker.core.audit.AuditRecord`; ``.to_pandas()`` makes a
            DataFrame of it when pandas is installed.

        Raises
        ------
        ValueError
            *limit* is negative.
        """
        from .audit_records import AuditRecords

        name = server.name if isinstance(server, KernelConnection) else server
        return AuditRecords(self.core.audit.records(server=name, limit=limit))

    def trash(self) -> NotebookTrash:
        """What servers deleted, to list, restore (``.restore(ID)``) or empty (see :mod:`.trashbin`)."""
        from .trashbin import NotebookTrash

        return NotebookTrash(self.core.trash)

    # -- connections ---------------------------------------------------------------------------

    @property
    def connections(self) -> dict[str, KernelConnection]:
        """The connections by name (closed ones stay listed until replaced)."""
        return self._registry.by_name()

    def connection(self, name: str) -> KernelConnection:
        """The connection called *name*.

        Raises
        ------
        ConfigError
            No connection has that name.
        """
        return self._registry.get(name)

    def __getitem__(self, name: str) -> KernelConnection:
        return self.connection(name)

    def connect(
        self,
        name: str,
        *,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        command: str | Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        sandbox: bool | str | Sandbox | None = None,
        advertise_roots: bool | None = None,
        auth: OAuth | bool | None = None,
        era: EraChoice = ERAS[0],
    ) -> KernelConnection:
        """Connect to an MCP server and give it brokered access to the shared folders.

        Give either *url* (Streamable HTTP) or *command* (stdio: the server is
        started as a subprocess). Connecting again under a name in use closes
        the old connection first (re-running a cell does what it says).

        Parameters
        ----------
        name
            Your name for the connection: prompts, the dashboard and the audit log use it.
        url, headers
            The server's Streamable HTTP endpoint and extra HTTP headers (``Authorization`` ...).
        command, env, cwd
            The server's command line (a list, or a string split like a shell
            would), extra environment variables and working folder.
        timeout
            Seconds for the server to start and complete the handshake.
        sandbox
            Confine a local server (Linux, Landlock) so that it reaches your
            files only through ``files/*``: ``True`` (or ``"files"``),
            ``"roots"`` (the roots too, read-only ones read-only), a
            :class:`~jupyter_fsbroker.sandbox.Sandbox` (no network but some
            ports, more paths to read), ``False``; ``None``: the
            ``FSBroker.sandbox`` setting. ``conn.sandbox`` says what is in force.
        advertise_roots
            Hand the server the locations (``file://`` paths) of the read-write
            shared folders (``True``), or not (``False``); ``None``: the
            ``FSBroker.advertise_roots`` setting, whose default hands them only
            to a server sandboxed with ``sandbox="roots"``. Without them it
            learns their names only, which is all that ``files/*`` needs; a
            server that opens files itself then finds none of them, and
            ``conn.roots_notice`` says so when it asked.
        auth
            Sign in to a *url* server that asks for it (MCP authorization): ``None``/``True``
            with the ``FSBroker.oauth_*`` settings, an :class:`~jupyter_fsbroker.protocol.auth.OAuth`,
            or ``False`` (a ``401`` fails). On by default: it does nothing until the server
            answers ``401``, and then signing in is the only way on; the cell shows a "Sign in"
            card (nothing opens by itself) and the tokens are kept (``sign_out`` forgets them).
        era
            The era of MCP: ``"auto"`` (the default: the 2026-07-28 era with the
            ``io.github.jupyter-fsbroker/files`` extension when an HTTP server offers it,
            ``files/*`` in batches; else the handshake era, which is also what a local server
            over stdio gets unless it speaks only the 2026-07-28 era), ``"legacy"`` (the
            handshake era, ``files/*`` requests) or ``"modern"`` (the 2026-07-28 era or fail).
            ``conn.era`` and ``status()`` say which one the connection speaks.

        Returns
        -------
        KernelConnection
            Open, with its tools listed.

        Raises
        ------
        ConnectError
            The server could not be started or reached, or refused the handshake.
        ProtocolVersionError
            The server cannot speak the MCP versions with server-to-client requests.
        ConfigError
            Neither or both of *url* and *command*, a URL that is not http(s),
            an empty name, or a sandbox for a URL.
        SandboxUnavailable
            The sandbox was asked for and Landlock is unavailable here (a
            sandbox that is only the setting's default is a warning instead).
        SandboxError
            The sandbox cannot be set up as asked (a path that contains a root ...).
        """
        return self._registry.connect(
            name,
            url=url,
            headers=headers,
            command=command,
            env=env,
            cwd=cwd,
            timeout=timeout,
            sandbox=sandbox,
            advertise_roots=advertise_roots,
            auth=auth,
            era=era,
        )

    def sign_out(self, name: str) -> bool:
        """Forget the tokens kept for connection *name*'s server, close the connection if open;
        whether tokens were kept. ``ConfigError``: no URL connection of that name."""
        conn = self._registry.by_name().get(name)
        url = conn.target if conn is not None and conn.transport == "http" else None
        known = self.sign_ins.sign_out(name, url)
        if conn is not None and not conn.closed:
            conn.close()  # its token is no longer the user's wish
        return known

    async def aconnect(self, name: str, **options: Unpack[TargetOptions]) -> KernelConnection:
        """:meth:`connect` for async cells: ``conn = await broker.aconnect(...)``; the same arguments."""
        return await self._registry.aconnect(name, **options)

    def disconnect(self, name: str, *, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close the connection *name* and wait (at most *timeout* seconds) until it is down."""
        self._registry.disconnect(name, timeout=timeout)

    # -- views ---------------------------------------------------------------------------------

    @property
    def views_thread(self) -> ViewThread:
        """The thread every view of this broker changes on (see :mod:`.views`); closed with it."""
        return self._views.thread

    def dashboard(self) -> Any:
        """The dashboard widget: folders, connections (Disconnect), grants (Revoke), locks
        (Force release), changes, activity, and consent requests outside calls.

        One per broker; each display of it is a live view. In a terminal, the
        same information as text.
        """
        return self._views.dashboard()

    def show_status(self) -> None:
        """Display the dashboard (or print the status where there are no widgets)."""
        if self._views.widgets:
            from IPython.display import display

            display(self.dashboard())  # type: ignore[no-untyped-call,unused-ignore]
        else:
            print(self.status())

    def status(self) -> str:
        """The dashboard as text."""
        return self._views.status()

    def snapshot(self) -> dict[str, Any]:
        """What the dashboard shows, as JSON-ready data (for views outside the notebook's cells).

        See :func:`~jupyter_fsbroker.kernel.snapshot.state_snapshot`: shared
        folders, connections, grants, kept locks, the consent requests waiting
        (each with its ``id`` for :meth:`answer_consent`), bytes per server and
        recent activity.
        """
        return self._views.snapshot()

    def pending_consents(self) -> tuple[ConsentRequest, ...]:
        """The consent requests waiting for an answer, wherever their prompts are shown."""
        return self._consent.pending()

    def answer_consent(self, request_id: str, decision: ConsentDecision | bool) -> bool:
        """Answer a waiting consent request from elsewhere than its prompt (the first answer counts).

        Parameters
        ----------
        request_id
            The request's ``id`` (see :meth:`pending_consents`, :meth:`snapshot`).
        decision
            ``True`` approves everything approvable as asked, ``False`` denies;
            or a :class:`~jupyter_fsbroker.core.consent.ConsentDecision`.

        Returns
        -------
        bool
            Whether this answer counted (``False``: unknown, or decided already).
        """
        return self._consent.answer(request_id, decision)

    @property
    def running_calls(self) -> RunningCalls:
        """The tool calls in flight (``.running()``), which the cells' running lines and the panel show."""
        return self._runner.running

    def cancel_call(self, call_id: str) -> RunningCall | None:
        """Cancel the tool call *call_id* in flight (see :attr:`running_calls`); returns at once.

        Its cell raises :class:`~.tool_results.CallCancelled`. Returns the call,
        or ``None`` when no such call is in flight.
        """
        return self._runner.running.cancel(call_id)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the broker is closed (%reload_ext jupyter_fsbroker starts a new one)")

    # -- lifetime ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self, *, at_exit: bool = False, why: str = "the file broker was closed") -> None:
        """Close every connection, then the broker: no thread, watcher, lock or temp file remains.

        Idempotent. Waits a few seconds at most for transports to come down.
        The dashboard and connection cards stay on the page, marked stale.

        Parameters
        ----------
        at_exit
            The process is ending (``atexit``): leave the widgets alone.
        why
            What the stale views say happened.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._cells.close()
        self._settings_link.close()
        self._registry.close()
        self._warm.finish()  # requests still waiting for it go to their (closing) views now
        self._consent.withdraw(at_exit=at_exit)
        self._views.close(at_exit=at_exit, why=why)
        self.core.close()
        self._loop.stop()
        self._consent.close()

    def __enter__(self) -> NotebookBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
