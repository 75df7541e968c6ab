"""A 2026-07-28 era server of the test's own: it answers ``tools/call`` with batches of the files extension.

Run it as ``python batch_server.py`` (stdio) or ``--http --fd N`` (Streamable HTTP, stateless).
It keeps nothing between requests: its continuation is the call's progress in clear JSON
(base64url), which is enough to drive the client (a real server seals it: PROTOCOL.md,
"Sealing"). Options: ``--no-extension`` (it does not list the extension), ``--legacy-only``
(it does not answer ``server/discover``).

Tools:

``batches {steps}``
    *steps* is a list of batches, each a list of operations ``{"id", "method", "params"}``;
    the server answers the call with each batch in turn, then with a ``CallToolResult`` whose
    structured content is ``{"answers": [[...], ...], "connections": [...]}``: every batch's
    answers as the client sent them, and the connection id each request of the call carried.
    Without the extension's ``_meta`` (the handshake era), the tool runs as a plain tool.
    A continuation with ``cancel`` (the server lists the ``cancel`` feature) ends the call: the
    server answers with a clean-up batch that releases every lock the call's answers hold, if
    any, then with the answers as above; it records each cancel it took.
``cancels {}``
    The cancels this process took: ``{"cancels": [{"step", "answers"}, ...]}``.
``plain {}``
    ``"plain"``: a tool that needs no files.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolRequestParams

from tests.support.handover import serve_on_inherited
from tests.support.ports import LOOPBACK

EXTENSION = "io.github.jupyter-fsbroker/files"
BATCH = "io.github.jupyter-fsbroker/filesBatch"


#: The cancels this process took (``cancels`` returns them).
CANCELS: list[dict[str, Any]] = []


def _seal(progress: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(progress).encode()).decode()


def _open(continuation: str) -> dict[str, Any]:
    opened: dict[str, Any] = json.loads(base64.urlsafe_b64decode(continuation))
    return opened


class Batches(Extension):
    identifier = EXTENSION

    def settings(self) -> dict[str, Any]:
        return {"resultType": BATCH, "features": ["cancel"]}

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        ours = dict((params.meta or {}).get(EXTENSION) or {})
        if params.name != "batches" or "connection" not in ours:  # not a call on the modern wire
            return await call_next(ctx)
        steps = (params.arguments or {})["steps"]
        progress = (
            _open(ours["continuation"]) if "continuation" in ours else {"answers": [], "connections": []}
        )
        if "answers" in ours:
            progress["answers"].append(ours["answers"])
        progress["connections"].append(ours.get("connection"))
        step = len(progress["answers"])
        if ours.get("cancel") is True:
            CANCELS.append({"step": step, "answers": ours["answers"]})
            held = [
                answer["result"]["lockId"]
                for answers in progress["answers"]
                for answer in answers
                if "lockId" in answer.get("result", {})
            ]
            if held:
                progress["cleaning"] = True
                unlocks = [
                    {"id": f"u{n}", "method": "files/unlock", "params": {"lockId": lock}}
                    for n, lock in enumerate(held)
                ]
                return {"resultType": BATCH, "operations": unlocks, "continuation": _seal(progress)}
        if progress.get("cleaning") or ours.get("cancel") is True:
            return {
                "resultType": "complete",
                "content": [{"type": "text", "text": "cancelled"}],
                "isError": True,
            }
        if step < len(steps):
            return {"resultType": BATCH, "operations": steps[step], "continuation": _seal(progress)}
        return {
            "resultType": "complete",
            "content": [{"type": "text", "text": "done"}],
            "structuredContent": progress,
            "isError": False,
        }


def build(extension: bool) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(
        "fsbroker-batch-test", version="1", log_level="WARNING", extensions=[Batches()] if extension else []
    )

    @server.tool()
    async def batches(steps: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Answered by the extension (batches, then the answers)."""
        return {"unanswered": "the files extension is not in use"}

    @server.tool()
    async def cancels() -> dict[str, Any]:
        """The cancels this process took."""
        return {"cancels": CANCELS}

    @server.tool()
    async def plain() -> str:
        """A tool that needs no files."""
        return "plain"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--fd", type=int)
    parser.add_argument("--no-extension", action="store_true")
    args = parser.parse_args()
    server = build(not args.no_extension)
    if args.http:
        serve_on_inherited(server.streamable_http_app(host=LOOPBACK, stateless_http=True), args.fd)
    else:
        anyio.run(server.run_stdio_async)


if __name__ == "__main__":
    main()
