"""``%load_ext jupyter_fsbroker``: start the broker quietly; ``%unload_ext``: leave nothing behind.

Loading creates the kernel's broker and makes it current (:mod:`.current`, which
also closes it when the kernel shuts down), registers the ``FSBroker``
configurable with the shell (so ``%config FSBroker.…`` works; IPython keeps
values set that way in the shell's config, so they survive ``%reload_ext``) and
the ``%fsbroker`` magic, and in a kernel the comm target of the JupyterLab
panel (:mod:`.panel.service`), and keeps the kernel's status Busy while a cell runs
(:mod:`.busy_status`). It shows nothing. Unloading tells the panels, closes
every connection and the broker, stops the background loop and removes what
loading added, and says so in one line: what was closed, and that nothing is
shared until the next load, which shares the same folders again (so
``%reload_ext`` does not forget them). It never keeps a broker of its own beyond the one it created and
made current.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from traitlets import TraitError
from traitlets.config import Config

from ..core.errors import ConfigError
from .busy_status import BusyStatus
from .current import clear_current, get_broker, set_current
from .magics import FSBrokerMagics
from .notebook import NotebookBroker
from .panel.service import PanelService
from .settings import FSBroker

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

log = logging.getLogger(__name__)


@dataclass
class _Loaded:
    shell: Any
    settings: FSBroker
    broker: NotebookBroker
    magics: FSBrokerMagics
    panel: PanelService | None
    busy: BusyStatus | None = None


_state: _Loaded | None = None
_lock = threading.RLock()
#: The settings' values when the extension was last unloaded: they replace refused values at reload.
_last_values: dict[str, Any] = {}
#: The shared folders when the extension was last unloaded, ``(name, folder, read_only)``:
#: the next load shares them again.
_kept_roots: list[tuple[str, str, bool]] = []


def load_ipython_extension(ipython: Any) -> None:
    """Start the broker of this kernel (idempotent; quiet).

    Parameters
    ----------
    ipython
        The running IPython shell.
    """
    global _state
    with _lock:
        state = _state
        if state is not None and state.shell is ipython and not state.broker.closed:
            return
        if state is not None:
            _teardown(state)
            _state = None
        settings = _make_settings(ipython)
        broker = NotebookBroker(settings, shell=ipython)
        panel = busy = None
        try:
            magics = FSBrokerMagics(ipython, broker=get_broker)
            ipython.register_magics(magics)
            if settings not in ipython.configurables:
                ipython.configurables.append(settings)
            panel = PanelService.start(broker)
            busy = BusyStatus.start(ipython)
        except BaseException:
            if panel is not None:
                panel.close()
            broker.close()
            raise
        _state = _Loaded(ipython, settings, broker, magics, panel, busy)
        set_current(broker)
        _restore_roots(broker)


def unload_ipython_extension(ipython: Any) -> None:
    """Close every connection and the broker; remove the magic and the settings. Idempotent."""
    global _state
    with _lock:
        state = _state
        _state = None
    if state is not None:
        _teardown(state)


def _restore_roots(broker: NotebookBroker) -> None:
    kept, _kept_roots[:] = list(_kept_roots), []
    for name, folder, read_only in kept:
        if broker.core.roots.get(name) is not None:
            continue  # the settings share it (or another folder under that name)
        try:
            broker.add_root(folder, name, read_only=read_only)
        except ConfigError as exc:
            print(f"jupyter_fsbroker: the shared folder {name} ({folder}) is not shared again: {exc}")


def _teardown(state: _Loaded) -> None:
    broker = state.broker
    closing = [conn.name for conn in broker.connections.values() if not conn.closed]
    roots = (
        [(root.name, root.given_path, root.read_only) for root in broker.roots] if not broker.closed else []
    )
    _kept_roots[:] = roots
    _last_values.clear()
    _last_values.update(
        {name: getattr(state.settings, name) for name in state.settings.trait_names(config=True)}
    )
    shell = state.shell
    try:
        for kind in ("line", "cell"):
            shell.magics_manager.magics[kind].pop("fsbroker", None)
        shell.magics_manager.registry.pop(type(state.magics).__name__, None)
    except AttributeError:
        log.debug("could not unregister %%fsbroker", exc_info=True)
    configurables = getattr(shell, "configurables", None)
    if configurables is not None and state.settings in configurables:
        configurables.remove(state.settings)
    if state.busy is not None:
        state.busy.close()
    if state.panel is not None:
        state.panel.close("the extension was unloaded (%unload_ext or %reload_ext)")
    try:
        broker.close(why="the extension was unloaded (%unload_ext / %reload_ext)")
    finally:
        clear_current(broker)
    closed = f"closed {len(closing)} connection{'' if len(closing) == 1 else 's'} ({', '.join(closing)})"
    # Only the list of folders is remembered: the files are the user's and stay as they are.
    names = ", ".join(n for n, _, _ in roots)
    folders = f"the folder{'s' if len(roots) > 1 else ''} {names}"  # "shares shared again" misread
    kept = f"nothing is shared until the next %load_ext, which shares {folders} again" if roots else ""
    said = "; ".join(part for part in (closed if closing else "", kept) if part) or "nothing was open"
    print(f"jupyter_fsbroker unloaded: {said}.")


def _make_settings(shell: Any) -> FSBroker:
    """``FSBroker(parent=shell)``, dropping (with a warning) values it refuses.

    ``%config`` records every value in the shell's own config, refused ones too;
    one of those must not make ``%reload_ext`` fail: the value in effect before
    the reload is kept instead.
    """
    try:
        return FSBroker(parent=shell)
    except TraitError:
        pass
    section = shell.config.get("FSBroker")
    if isinstance(section, Config):
        for key, value in list(section.items()):
            try:
                FSBroker(config=Config({"FSBroker": {key: value}}))
            except TraitError:
                if key in _last_values:
                    section[key] = _last_values[key]
                else:
                    del section[key]
    return FSBroker(parent=shell)
