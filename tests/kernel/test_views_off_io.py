"""Views never change on an I/O thread: every update of a widget runs on the thread ``fsbroker-views``.

A real kernel, two real stdio servers built with the server kit (the example server, whose
call asks for consent, and one that reads a file in chunks), and the views a user sees: the
card of a connection, the dashboard, the consent prompt of a call (left to time out) and
the transfer progress of a chunked read. Every trait
change of every widget of those views, from the moment each view is built, is
recorded with the name of the thread it ran on.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable

from tests.support.env import REPO

from .conftest import PROFILE_RAW, connect_stdio, load
from .harness import Kernel

STREAM_SERVER = repr([sys.executable, str(REPO / "tests" / "protocol" / "servers" / "stream_server.py")])

#: Follows every widget of a view (and the widgets added to it later), recording each trait change.
RECORDER = """
import threading, traitlets, ipywidgets
from jupyter_fsbroker.widgets.consent_prompt import ConsentPrompt
from jupyter_fsbroker.widgets.progress import TransferProgress
seen = []
_followed = set()

def _follow(view, widget):
    if not isinstance(widget, ipywidgets.Widget) or id(widget) in _followed:
        return
    _followed.add(id(widget))
    def changed(change):
        seen.append((view, type(change['owner']).__name__, change['name'], threading.current_thread().name))
        for new in change['new'] if change['name'] == 'children' else ():
            _follow(view, new)
    widget.observe(changed, names=traitlets.All)
    for part in ('layout', 'style'):
        _follow(view, getattr(widget, part, None))
    for child in getattr(widget, 'children', ()):
        _follow(view, child)

def _built_followed(cls, view):
    init = cls.__init__
    def built(self, *args, **kwargs):
        seen.append((view, cls.__name__, '(built)', threading.current_thread().name))
        init(self, *args, **kwargs)
        _follow(view, self)
    cls.__init__ = built

_built_followed(ConsentPrompt, 'prompt')
_built_followed(TransferProgress, 'progress')
"""


def test_every_view_update_runs_on_the_views_thread(start_kernel: Callable[..., Kernel]) -> None:
    kernel = start_kernel()
    load(kernel, consent_timeout=2)
    kernel.run(
        "%config FSBroker.stdin_fallback = 'never'\n"
        "open('data/big.bin', 'wb').write(b'\\x01' * (16 * 1024 * 1024))\n" + RECORDER
    )
    kernel.run(f"stream = broker.connect('stream', command={STREAM_SERVER})")
    kernel.run(
        "_follow('card', broker._views._cards[stream.id][0])\n_follow('dashboard', broker.dashboard())"
    )
    digest = "stream.call_tool('digest', {'path': 'data/big.bin', 'chunk_size': 65536, 'concurrency': 1}"
    # No grant: the server asks, nobody answers, the prompt times out and the call fails.
    connect_stdio(kernel)
    refused = kernel.run(f"print({PROFILE_RAW}.is_error)")
    assert refused.stdout.strip() == "True", refused.stdout
    kernel.run("broker.allow('data', ops=('read',))")
    read = kernel.run(f"print({digest}).data['bytes'])")
    assert read.stdout.strip() == str(16 * 1024 * 1024), read.stdout
    kernel.run("stream.close(); stream.wait_closed(10)")
    kernel.wait_for(
        lambda: kernel.value("any(v == 'card' and t == 'value' for v, _, t, _ in seen)"),
        10,
        "the card showing that the connection closed",
    )
    seen: list[tuple[str, str, str, str]] = [tuple(row) for row in kernel.value("seen")]
    views = {view for view, *_ in seen}
    assert views == {"card", "dashboard", "prompt", "progress"}, views  # each view was built and changed
    assert any(view == "progress" and cls == "FloatProgress" for view, cls, *_ in seen), seen
    elsewhere = Counter((view, thread) for view, _, _, thread in seen if thread != "fsbroker-views")
    assert not elsewhere, f"view updates off the views' thread (view, thread: count): {dict(elsewhere)}"
