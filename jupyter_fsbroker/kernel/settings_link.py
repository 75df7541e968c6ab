"""A running notebook broker following its ``FSBroker`` settings: :class:`SettingsLink`.

Three kinds of setting, three answers when one changes (``%config FSBroker.X = ...``):
the roots and pre-approvals are applied again (a spelling that is wrong is said
on stderr, the others still apply); the live limits and the trash's retention
reach every part of the broker that reads them; the audit file's settings are
kept by a running broker, and the user is told they take effect at the next
``%reload_ext``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from ..core.broker import Broker
from ..core.config import BrokerConfig
from ..core.errors import ConfigError
from ..core.resource import Closeable
from ..core.specs import SpecTarget, apply_specs
from .settings import LIVE_TRAITS, FSBroker

__all__ = ["SettingsLink"]

log = logging.getLogger(__name__)

#: The settings that name roots and pre-approvals.
_SPEC_TRAITS = ("roots", "read_only_roots", "allow")
#: The settings of the audit file, which a running broker keeps.
_AUDIT_TRAITS = ("audit_file", "audit_required")


class SettingsLink(Closeable):
    """Follows *settings* for a notebook broker until :meth:`close`.

    Parameters
    ----------
    settings
        The ``FSBroker`` configurable.
    target
        Where roots and pre-approvals are applied (the notebook broker).
    core
        The core broker the live settings are configured on.
    base_config
        The configuration the settings are applied over.
    closed
        Returns whether the broker is closed: then changes are ignored.
    """

    def __init__(
        self,
        settings: FSBroker,
        *,
        target: SpecTarget,
        core: Broker,
        base_config: BrokerConfig,
        closed: Callable[[], bool],
    ) -> None:
        self._settings = settings
        self._target = target
        self._core = core
        self._base_config = base_config
        self._closed = closed
        self._observers: list[tuple[Callable[[Any], None], list[str]]] = [
            (self._live_setting_changed, list(LIVE_TRAITS)),
            (self._specs_changed, list(_SPEC_TRAITS)),
            (self._audit_changed, list(_AUDIT_TRAITS)),
        ]
        for observer, names in self._observers:
            settings.observe(observer, names=names)

    def apply_specs(self) -> None:
        """Share the roots and pre-approve the paths the settings name; say what could not be."""
        settings = self._settings
        problems = apply_specs(
            self._target,
            roots=settings.roots,
            read_only_roots=settings.read_only_roots,
            allow=settings.allow,
            existing_roots={root.name for root in self._core.roots.snapshot()},
        )
        for problem in problems:
            log.warning("FSBroker %s", problem)
            print(f"jupyter_fsbroker: FSBroker {problem}", file=sys.stderr)

    def _live_setting_changed(self, change: Any) -> None:
        if self._closed():
            return
        try:
            wanted = self._settings.make_config(self._base_config)
            # Reaches every part of the broker that reads them (lock wait, rates of open connections ...).
            self._core.configure(
                limits=wanted.limits,
                permanent_delete=wanted.permanent_delete,
                trash_max_age=wanted.trash_max_age,
                trash_max_bytes=wanted.trash_max_bytes,
            )
        except ConfigError as exc:
            print(f"jupyter_fsbroker: FSBroker.{change['name']} not applied: {exc}", file=sys.stderr)

    def _specs_changed(self, change: Any) -> None:
        if not self._closed():
            self.apply_specs()

    def _audit_changed(self, change: Any) -> None:
        if not self._closed():
            print(
                f"jupyter_fsbroker: FSBroker.{change['name']} takes effect at the next %reload_ext",
                file=sys.stderr,
            )

    def close(self) -> None:
        """Stop following the settings. Idempotent."""
        observers, self._observers = self._observers, []
        for observer, names in observers:
            self._settings.unobserve(observer, names=names)
