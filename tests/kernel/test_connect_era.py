"""``broker.connect(..., era=...)`` in a real kernel: a 2026-07-28 era server of the batch shape (stdio)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tests.support.notebook_kernel import load

from .harness import Kernel

BATCH_COMMAND = repr(
    [sys.executable, str(Path(__file__).resolve().parents[1] / "protocol" / "servers" / "batch_server.py")]
)
STEPS = "{'steps': [[{'id': 'r', 'method': 'files/read', 'params': {'path': 'data/sales.csv'}}]]}"


def test_the_modern_era_over_stdio_and_every_view_says_so(start_kernel: Callable[..., Kernel]) -> None:
    kernel = start_kernel()
    load(kernel)
    kernel.run("broker.allow('data', ops=('read',))")
    connected = kernel.run(f"batches = broker.connect('batches', command={BATCH_COMMAND}, era='modern')")
    assert connected.stderr == ""
    card = kernel.wait_widget("fsbroker-connection")
    assert "2026-07-28 era (files in batches)" in kernel.text_of(card)
    assert kernel.value("batches.era") == "modern"
    out = kernel.run(
        f"r = batches.call_tool('batches', {STEPS})\nprint(r.data['answers'][0][0]['result']['size'])"
    )
    assert out.stderr == "" and int(out.stdout.strip()) > 0
    status = kernel.run("print(broker.status())").stdout
    assert "2026-07-28 era (files in batches)" in status
    assert kernel.value("[c['era'] for c in broker.snapshot()['connections']]") == ["modern"]


def test_the_default_over_stdio_is_the_handshake_era_and_a_bad_era_is_refused(
    start_kernel: Callable[..., Kernel],
) -> None:
    # auto asks an stdio server for the handshake era first: its first request fixes the era.
    kernel = start_kernel()
    load(kernel)
    kernel.run(f"plain = broker.connect('plain', command={BATCH_COMMAND})")
    assert kernel.value("plain.era") == "legacy"
    assert "handshake era" in kernel.run("print(broker.status())").stdout
    error = kernel.run_fail(f"broker.connect('other', command={BATCH_COMMAND}, era='newest')")
    assert error["ename"] == "ConfigError"
    assert "era must be one of 'auto', 'legacy', 'modern'" in error["evalue"]
