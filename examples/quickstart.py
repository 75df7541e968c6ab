"""Quickstart: share a folder, pre-approve part of it, and broker the requests a server would send.

Run ``python examples/quickstart.py``. It makes a sample folder in a temporary
directory, shares it as the root ``data``, and plays the part of an MCP server
sending ``files/*`` requests, printing each request and the broker's answer as
they would travel on the wire — including the ones the broker refuses.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from jupyter_fsbroker.core.broker import Broker, BrokerConfig
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.errors import FilesError, to_jsonrpc_error


def approve_reads(request: ConsentRequest) -> ConsentDecision:
    """A stand-in for the notebook's consent widget: approve reads of what can be approved."""
    print(f"  [consent] {request.server!r} asks: {request.message!r}")
    for item in request.items:
        verdict = "approvable" if item.approvable else f"not approvable ({item.reason})"
        print(f"  [consent]   {item.path}: {verdict}")
    return ConsentDecision(request.approvable_paths, ("read",), duration=15 * 60)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        data = base / "data"
        (data / "sales").mkdir(parents=True)
        (data / "sales" / "2024.csv").write_text("region,revenue\nnorth,120\nsouth,95\n")
        (data / ".env").write_text("API_KEY=do-not-share\n")
        (base / "secret.txt").write_text("outside every root\n")

        config = BrokerConfig(lock_dir=str(base / "locks"), trash_dir=str(base / "trash"))
        with Broker(config) as broker:
            broker.add_root(data, name="data")
            conn = broker.connect("analysis-server", consenter=CallbackConsenter(approve_reads))

            def send(method: str, params: dict[str, object]) -> None:
                print(f"→ {method} {json.dumps(params)}")
                try:
                    print(f"← {json.dumps(conn.handle(method, params))}")
                except FilesError as exc:
                    print(f"← error {json.dumps(to_jsonrpc_error(exc))}")

            send("files/read", {"path": "data/sales/2024.csv"})
            send(
                "files/consent",
                {
                    "message": "Profile the sales data",
                    "requestedPaths": ["data/sales", str(base / "secret.txt")],
                },
            )
            send("files/list", {"path": "data/sales"})
            send("files/read", {"path": "data/sales/2024.csv", "length": 16})
            send("files/read", {"path": "data/sales/../../secret.txt"})
            send("files/read", {"path": "data/.env"})
            send("files/write", {"path": "data/sales/summary.md", "content": "# Summary\n"})

            print("\nAudit log:")
            for record in broker.audit.records():
                outcome = record.decision if record.error is None else f"{record.decision} {record.error}"
                print(f"  {record.method:<13} {record.path or '':<34} {outcome} {record.reason or ''}")


if __name__ == "__main__":
    main()
