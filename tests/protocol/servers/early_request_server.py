"""A server that asks before the handshake ends: ``files/read`` on ``initialize``, which it never answers.

Usage: ``early_request_server.py OUT_JSON``. It reads the client's ``initialize``,
sends ``files/read`` (id ``"early"``) instead of answering, says so on stderr
(``sent files/read``), and writes every line the client sends after that to
OUT_JSON (a JSON list of parsed messages, rewritten after each line) until the
client closes its stdin. Standard library only, as the raw server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

from tests.support.linewire import LineWire


def main() -> None:
    out = Path(sys.argv[1])
    wire = LineWire()
    received: list[object] = []
    out.write_text("[]")
    while True:
        line = wire.recv_line()
        assert line is not None
        if json.loads(line).get("method") == "initialize":
            break
    wire.send({"jsonrpc": "2.0", "id": "early", "method": "files/read", "params": {"path": "data/hello.txt"}})
    print("sent files/read", file=sys.stderr, flush=True)
    while True:  # the end of stdin (the client closed the connection) exits
        line = wire.recv_line()
        assert line is not None
        received.append(json.loads(line))
        out.write_text(json.dumps(received))


if __name__ == "__main__":
    main()
