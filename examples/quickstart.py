"""Quickstart: share a folder with a real MCP server, then see what a hostile one would get.

Run ``python examples/quickstart.py``. It makes a sample folder in a temporary
directory and shares it as the root ``data``. First it connects to the example
analysis server (started over stdio) and calls two of its tools: the server
asks for consent, reads the CSV in chunks and writes a report next to it, all
through the broker. Then it plays a hostile server sending ``files/*``
requests by hand, printing each request and the broker's answer as they would
travel on the wire.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from jupyter_fsbroker.core.broker import Broker, BrokerConfig
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.errors import FilesError, to_jsonrpc_error
from jupyter_fsbroker.protocol import connect


def approve(request: ConsentRequest) -> ConsentDecision:
    """A stand-in for the notebook's consent widget: approve what can be approved, for 15 minutes."""
    print(f"  [consent] {request.server!r} asks: {request.message!r} for {', '.join(request.operations)}")
    for item in request.items:
        verdict = "approvable" if item.approvable else f"not approvable ({item.reason})"
        print(f"  [consent]   {item.path}: {verdict}")
    return ConsentDecision.approve_all(request, duration=15 * 60)


def approve_reads(request: ConsentRequest) -> ConsentDecision:
    """Approve reads only."""
    return ConsentDecision(approve(request).approved_paths, ("read",), duration=15 * 60)


async def analyse(broker: Broker) -> None:
    """Connect to the example analysis server over stdio and call two of its tools."""
    command = [sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server"]
    conn = await connect(
        broker, "analysis", command=command[0], args=command[1:], consenter=CallbackConsenter(approve)
    )
    try:
        print(f"connected to {conn.server_name} over {conn.transport}, protocol {conn.protocol_version}")
        print(f"its tools: {', '.join(tool['name'] for tool in conn.tools)}")
        profile = await conn.call_tool("profile_csv", {"path": "data/sales/2024.csv"})
        for column in profile["structuredContent"]["columns"]:
            summary = {k: column[k] for k in ("name", "type", "count", "missing") if k in column}
            print(f"  {json.dumps(summary)}")
        report = await conn.call_tool("write_report", {"path": "data/sales/2024.csv"})
        print(f"  report written: {report['structuredContent']['report']}")
    finally:
        await conn.aclose()


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
            print("== A real MCP server, over stdio ==")
            asyncio.run(analyse(broker))
            print((data / "sales" / "2024.report.md").read_text().splitlines()[0])

            print("\n== A hostile server, request by request ==")
            conn = broker.connect("hostile-server", consenter=CallbackConsenter(approve_reads))

            def send(method: str, params: dict[str, object]) -> None:
                print(f"→ {method} {json.dumps(params)}")
                try:
                    print(f"← {json.dumps(conn.handle(method, params))}")
                except FilesError as exc:
                    print(f"← error {json.dumps(to_jsonrpc_error(exc))}")

            send("files/read", {"path": "data/sales/2024.csv"})
            send("files/read", {"path": str(base / "secret.txt")})
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
                where = f"{record.server:<15} {record.method:<13} {record.path or '':<30}"
                print(f"  {where} {outcome} {record.reason or ''}")


if __name__ == "__main__":
    main()
