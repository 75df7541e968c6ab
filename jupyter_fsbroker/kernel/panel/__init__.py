"""The JupyterLab panel's comm target, ``jupyter_fsbroker.panel`` (``labextension/PROTOCOL.md``).

* :mod:`.service` — :class:`PanelService`: the comm target, its comms and the panel's actions.
* :mod:`.state` — :class:`PanelState`: what the panel shows, kept from the broker's events.
* :mod:`.messages` — the panel protocol's messages, read and written (standard library only).
"""
