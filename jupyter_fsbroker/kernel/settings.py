"""The ``FSBroker`` configurable: the extension's settings through traitlets.

Registered with the shell when the extension loads, so both work::

    # ipython_config.py (or ipython_kernel_config.py)
    c.FSBroker.consent_timeout = 60
    c.FSBroker.roots = ["data=~/projects/sales/data"]
    c.FSBroker.allow = ["data/raw:read"]

    # in a notebook, at any time
    %config FSBroker.consent_timeout = 60

Changes after loading take effect where they can: consent timeout, limits (lock
wait and rates included), permanent delete and the trash's retention at once, for
operations that start afterwards on every connection, new roots and
pre-approvals are added at once, and the audit file and whether it is required
at the next ``%reload_ext``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from ..core.config import BrokerConfig
from ..core.errors import ConfigError
from ..core.limits import Limits
from ..core.specs import split_allow
from ..sandbox.request import ENV_DEFAULT, Sandbox, sandbox_from_env

__all__ = ["ENV_CLIENT_SECRET", "LIVE_TRAITS", "FSBroker"]

#: The environment variable that holds ``FSBroker.oauth_client_secret`` (and the CLI's).
ENV_CLIENT_SECRET = "JUPYTER_FSBROKER_OAUTH_CLIENT_SECRET"  # noqa: S105 - a variable's name

#: Traits whose changes after load are applied to the running broker's configuration.
LIVE_TRAITS = (
    "consent_timeout",
    "limits",
    "ops_per_second",
    "bytes_per_second",
    "max_watches",
    "lock_wait",
    "permanent_delete",
    "trash_max_age",
    "trash_max_bytes",
)


class FSBroker(Configurable):
    """Settings of jupyter_fsbroker in this kernel (``c.FSBroker.*``, ``%config FSBroker.*``)."""

    consent_timeout = Float(
        120.0,
        help="Seconds a consent prompt waits for an answer before the request counts as denied.",
    ).tag(config=True)

    audit_file = Unicode(
        None,
        allow_none=True,
        help="Append one JSON line per files/* request to this file (never file content). "
        "A change takes effect at the next %reload_ext.",
    ).tag(config=True)

    audit_required = Bool(
        False,
        help="Refuse every files/* request whose audit record cannot be written to audit_file first "
        "(PERMISSION_DENIED, reason audit_unavailable): the request is announced in the file, flushed "
        "to disk, before it runs. Needs audit_file. Off: a failing audit file is logged and requests go "
        "on. A change takes effect at the next %reload_ext.",
    ).tag(config=True)

    permanent_delete = Bool(
        False,
        help="Delete files for good when a server deletes them, instead of moving them to the trash.",
    ).tag(config=True)

    trash_max_age = Float(
        None,
        allow_none=True,
        help="Seconds a deleted file stays in the trash before it is deleted for good (default 30 days).",
    ).tag(config=True)

    trash_max_bytes = Int(
        None,
        allow_none=True,
        help="Bytes the trash holds in all: when a delete goes past it the oldest entries are deleted for "
        "good, and a delete of something larger on its own is refused (TOO_LARGE). Default: 1 GiB, or a "
        "tenth of the size of the trash's file system if that is smaller.",
    ).tag(config=True)

    roots = List(
        Unicode(),
        help="Folders shared read-write when the extension loads, as '[NAME=]DIR'.",
    ).tag(config=True)

    read_only_roots = List(
        Unicode(),
        help="Folders shared read-only when the extension loads, as '[NAME=]DIR'.",
    ).tag(config=True)

    advertise_roots = Bool(
        None,
        allow_none=True,
        help="Hand servers the locations (file:// paths) of the read-write roots in roots/list. None "
        "(default): only to local servers sandboxed with sandbox='roots', where the operating system "
        "enforces the roots; True: to every server; False: to none. Otherwise a server learns only "
        "the roots' names, which is all files/* needs: a server that opens files itself would bypass "
        "consent, grants and the activity log, and a remote one would learn your folder layout. "
        "broker.connect(advertise_roots=...) overrides it. Read when the extension loads.",
    ).tag(config=True)

    advertise_read_only_roots = Bool(
        False,
        help="Hand over the locations of read-only roots too (marked readOnly), where those of the "
        "read-write roots are handed over. Off by default: a server that opens files itself would "
        "get write access to them from the operating system; files/* reaches them either way. Read "
        "when the extension loads.",
    ).tag(config=True)

    allow = List(
        Unicode(),
        help="Pre-approvals applied when the extension loads, as 'PATH[:OPS]' with OPS a comma list "
        "of read,write,delete,watch (default read), e.g. 'data/raw:read,watch'.",
    ).tag(config=True)

    ops_per_second = Float(
        None,
        allow_none=True,
        help="Sustained files/* operations per second per connection (default 200000: more than a server "
        "sending one request at a time can reach; a flood meets memory_budget first).",
    ).tag(config=True)

    bytes_per_second = Float(
        None,
        allow_none=True,
        help="Sustained bytes read plus written per second per connection (default 16 GiB: more than one "
        "request at a time can move).",
    ).tag(config=True)

    max_watches = Int(None, allow_none=True, help="Most watches per connection (default 64).").tag(
        config=True
    )

    lock_wait = Float(
        None,
        allow_none=True,
        help="Seconds an operation waits for another's short lock before FILE_LOCKED (default 2; "
        "0: at once).",
    ).tag(config=True)

    memory_budget = Int(None, allow_none=True, help="Bytes one connection's answers may hold (32 MiB).").tag(
        config=True
    )

    limits = Dict(
        help="Other limits by name (see jupyter_fsbroker.Limits), e.g. {'max_list_entries': 2000}.",
    ).tag(config=True)

    stdin_fallback = CaselessStrEnum(
        ("auto", "always", "never"),
        "auto",
        help="Ask for consent with a text prompt (input()) from a blocked synchronous call: 'auto' when "
        "widget clicks cannot arrive while the cell runs (the frontend uses no kernel subshells), "
        "'always', or 'never'.",
    ).tag(config=True)

    show_progress = Bool(
        True, help="Show a progress bar in the calling cell while a tool call moves files in chunks."
    ).tag(config=True)

    sandbox = CaselessStrEnum(
        ("off", "files", "roots"),
        help="Confine local (stdio) servers by default (Linux, Landlock): 'files' (they reach your files "
        "only through files/*), 'roots' (they also read and write the read-write roots directly, with no "
        "grant, consent or audit record, and read the read-only ones) or 'off'. "
        f"Default: ${ENV_DEFAULT} (1, files, roots or 0), else 'off'. broker.connect(sandbox=...) "
        "overrides it; where Landlock is unavailable a default sandbox is a warning, not an error.",
    ).tag(config=True)

    oauth_client_id = Unicode(
        None,
        allow_none=True,
        help="Sign in to servers that ask for authorization (OAuth) as this client, registered with "
        "their authorization server beforehand. Default: the client registers itself (or uses "
        "oauth_client_metadata_url).",
    ).tag(config=True)

    oauth_client_secret = Unicode(
        None,
        allow_none=True,
        help=f"The secret of oauth_client_id. Default: ${ENV_CLIENT_SECRET}, which is safer than a "
        "config file or a notebook. Never shown.",
    ).tag(config=True)

    oauth_client_metadata_url = Unicode(
        None,
        allow_none=True,
        help="The https URL of this client's metadata document (an OAuth Client ID Metadata Document).",
    ).tag(config=True)

    oauth_scope = Unicode(
        None,
        allow_none=True,
        help="The OAuth scopes to ask for (space-separated); default: those the server names.",
    ).tag(config=True)

    oauth_redirect = CaselessStrEnum(
        ("auto", "loopback", "page", "paste"),
        "auto",
        help="Where the sign-in's redirect comes back: 'loopback' (a listener on 127.0.0.1 of the "
        "kernel's machine), 'page' (the JupyterLab extension's callback page, for a kernel on another "
        "machine), 'paste' (you paste the address the browser ended on into the card), or 'auto': the "
        "page when JupyterLab's page is not on a loopback address and serves it, else loopback. A "
        "pasted address works in every case.",
    ).tag(config=True)

    oauth_store = Unicode(
        "auto",
        help="Where sign-in tokens are kept: 'auto' (your data folder, readable by you only, with the "
        "secrets in the system keyring where one works), 'keyring', 'file' (the data folder only), "
        "'memory' (this kernel only) or a folder.",
    ).tag(config=True)

    # -- validation ----------------------------------------------------------------------------

    @default("oauth_client_secret")
    def _secret_from_environment(self) -> str | None:
        return os.environ.get(ENV_CLIENT_SECRET) or None

    @classmethod
    def class_get_trait_help(cls, trait: Any, inst: Any = None, helptext: str | None = None) -> str:
        # %config FSBroker lists current values: never the secret's.
        if trait.name == "oauth_client_secret":
            inst = None
        return str(super().class_get_trait_help(trait, inst, helptext))

    def __repr__(self) -> str:
        return f"<FSBroker settings{' (oauth_client_secret set)' if self.oauth_client_secret else ''}>"

    @default("sandbox")
    def _sandbox_from_environment(self) -> str:
        try:
            found = sandbox_from_env()
        except ValueError:
            return "off"  # the command line says why; a kernel starts anyway
        return "off" if found is None else found.level

    @validate("consent_timeout")
    def _check_timeout(self, proposal: dict[str, Any]) -> float:
        value = float(proposal["value"])
        if not math.isfinite(value) or value <= 0:
            raise TraitError(f"consent_timeout must be a positive number of seconds, not {value!r}")
        return value

    @validate("trash_max_age", "trash_max_bytes")
    def _check_trash(self, proposal: dict[str, Any]) -> float | int | None:
        value = proposal["value"]
        if value is not None and not value > 0:
            raise TraitError(f"{proposal['trait'].name} must be positive, not {value!r}")
        return value  # type: ignore[no-any-return]

    @validate("limits")
    def _check_limits(self, proposal: dict[str, Any]) -> dict[str, Any]:
        value = dict(proposal["value"])
        try:
            Limits().replace(**value)
        except (ConfigError, TypeError) as exc:
            raise TraitError(f"FSBroker.limits: {exc}") from None
        return value

    @validate("roots", "read_only_roots")
    def _check_roots(self, proposal: dict[str, Any]) -> list[str]:
        return [str(v) for v in proposal["value"]]

    @validate("allow")
    def _check_allow(self, proposal: dict[str, Any]) -> list[str]:
        for spec in proposal["value"]:
            try:
                split_allow(spec)
            except ConfigError as exc:
                raise TraitError(str(exc)) from None
        return [str(v) for v in proposal["value"]]

    # -- what the broker gets ------------------------------------------------------------------

    def default_sandbox(self) -> Sandbox | None:
        """The sandbox a local server gets when ``connect`` does not say (``None``: not confined)."""
        return None if self.sandbox == "off" else Sandbox(level=str(self.sandbox))

    def make_limits(self, base: Limits | None = None) -> Limits:
        """The :class:`~jupyter_fsbroker.core.limits.Limits` these settings stand for.

        Raises
        ------
        ConfigError
            A combination of values that the limits refuse.
        """
        changes: dict[str, Any] = dict(self.limits)
        changes["consent_timeout"] = self.consent_timeout
        for name in ("ops_per_second", "bytes_per_second", "max_watches", "lock_wait", "memory_budget"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = value
        return (base or Limits()).replace(**changes)

    def make_config(self, base: BrokerConfig | None = None) -> BrokerConfig:
        """A :class:`~jupyter_fsbroker.core.broker.BrokerConfig` with these settings applied to *base*."""
        base = base or BrokerConfig()
        return dataclasses.replace(
            base,
            limits=self.make_limits(base.limits),
            permanent_delete=self.permanent_delete,
            trash_max_age=base.trash_max_age if self.trash_max_age is None else self.trash_max_age,
            trash_max_bytes=base.trash_max_bytes if self.trash_max_bytes is None else self.trash_max_bytes,
            audit_path=self.audit_file or base.audit_path,
            advertise_roots=self.advertise_roots,
            audit_required=self.audit_required,
            advertise_read_only_roots=self.advertise_read_only_roots,
        )
