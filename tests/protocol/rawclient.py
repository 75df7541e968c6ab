"""A hand-written MCP client for tests: plain JSON-RPC over stdio or Streamable HTTP.

It plays the notebook's part without ``mcp``'s client: it sends ``initialize``
with ``capabilities.roots = {"listChanged": true, "filesystemBrokering": true,
"filesystemBrokeringFeatures": ["perPathConsent"]}`` (or without the flag, or
with other features), answers the server's ``files/*`` requests by calling the
core engine (``Connection.ahandle``), answers ``roots/list`` and ``ping``, and
forwards the core's watch events as ``notifications/files/changed``.

For tests it records every server→client request and its answer, counts the
requests in flight per method, and can intercept ``files/*`` requests (to
inject errors or latency) before the core sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import httpx2
import pydantic_core

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.consent import Consenter
from jupyter_fsbroker.core.errors import FilesError, to_jsonrpc_error
from jupyter_fsbroker.core.watch import ChangeEvent

PROTOCOL_VERSION = "2025-11-25"
MiB = 1024 * 1024

#: ``intercept(method, params)``: a result dict to answer with, ``None`` to let the
#: core answer; raising a core ``FilesError`` answers with that error.
Interceptor = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]


class WireError(Exception):
    """Raised by an interceptor to answer with this raw JSON-RPC ``error`` object, as given."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code: int = error.get("code", 0)
        self.message: str = error.get("message", "")
        self.data: Any = error.get("data")


@dataclass
class Answered:
    """One server→client request and what the client answered."""

    method: str
    params: dict[str, Any]
    result: dict[str, Any] | None
    error: dict[str, Any] | None


class RawClient:
    """The transport-independent part: requests, dispatch, answers through the core.

    Parameters
    ----------
    broker
        The core broker whose connection answers ``files/*``.
    name
        The server's name for the broker connection.
    brokering
        Advertise ``filesystemBrokering`` in ``initialize``.
    features
        What ``filesystemBrokeringFeatures`` lists (``None``: leave the key out).
        The core implements ``perPathConsent``; a client that leaves it out
        still gets its answers from the core, which reads flat requests too.
    consenter
        The connection's consenter (default: the broker's, refusing).
    """

    def __init__(
        self,
        broker: Broker,
        *,
        name: str = "test-server",
        brokering: bool = True,
        features: Sequence[str] | None = ("perPathConsent",),
        consenter: Consenter | None = None,
    ) -> None:
        self.broker = broker
        self.brokering = brokering
        self.features = features
        self.conn = broker.connect(name, consenter=consenter, notify=self._on_change)
        self.answered: list[Answered] = []
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.in_flight: Counter[str] = Counter()
        self.max_in_flight: Counter[str] = Counter()
        self.intercept: Interceptor | None = None
        #: What ``roots/list`` is answered with; ``None``: every root with its location.
        self.roots_result: dict[str, Any] | None = None
        self.initialize_result: dict[str, Any] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._waiters: list[tuple[Callable[[Answered], bool], asyncio.Future[Answered]]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._notify_lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self._closed = False

    # -- transport (subclasses) ----------------------------------------------------------------

    async def _write(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _send_request(self, message: dict[str, Any]) -> None:
        await self._write(message)

    async def close(self) -> None:
        """Close the transport and the broker connection."""
        self._closed = True
        self.conn.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("closed"))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- outgoing ------------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 30) -> Any:
        """Send a request; return its result or raise :class:`RpcError`."""
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._pending[request_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send_request(message)
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)

    async def initialize(self) -> dict[str, Any]:
        """The handshake: ``initialize`` (with or without the flag), then ``notifications/initialized``."""
        roots: dict[str, Any] = {"listChanged": True}
        if self.brokering:
            roots["filesystemBrokering"] = True
        if self.features is not None:
            roots["filesystemBrokeringFeatures"] = list(self.features)
        result = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"roots": roots},
                "clientInfo": {"name": "rawclient", "version": "0"},
            },
        )
        self.initialize_result = result
        self._initialized(result)
        await self.notify("notifications/initialized")
        return result

    def _initialized(self, result: dict[str, Any]) -> None:
        pass

    async def _started(self, initialize: bool) -> Self:
        """This client once its transport is up: after the handshake if *initialize* (closed if it fails)."""
        if initialize:
            try:
                await self.initialize()
            except BaseException:
                await self.close()
                raise
        return self

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, timeout: float = 60
    ) -> Any:
        """``tools/call``; returns the raw ``CallToolResult`` dict."""
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout=timeout)

    async def tool_json(
        self, name: str, arguments: dict[str, Any] | None = None, *, timeout: float = 60
    ) -> Any:
        """Call a tool that returns JSON; return the decoded value or raise ``AssertionError`` on isError."""
        result = await self.call_tool(name, arguments, timeout=timeout)
        text = result["content"][0]["text"] if result.get("content") else ""
        assert not result.get("isError"), text
        if "structuredContent" in result:
            structured = result["structuredContent"]
            if isinstance(structured, dict) and set(structured) == {"result"}:
                return structured["result"]
            return structured
        return json.loads(text)

    # -- incoming ------------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message:
            if "id" in message:
                self._spawn(self._answer(message))
            else:
                self.notifications.append((message["method"], message.get("params") or {}))
            return
        future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            return
        if "error" in message:
            future.set_exception(RpcError(message["error"]))
        else:
            future.set_result(message.get("result") or {})

    async def _answer(self, message: dict[str, Any]) -> None:
        method: str = message["method"]
        params: dict[str, Any] = message.get("params") or {}
        result: dict[str, Any] | None = None
        error: dict[str, Any] | None = None
        try:
            if method.startswith("files/"):
                self.in_flight[method] += 1
                self.max_in_flight[method] = max(self.max_in_flight[method], self.in_flight[method])
                try:
                    if self.intercept is not None:
                        result = await self.intercept(method, params)
                    if result is None:
                        result = await self.conn.ahandle(method, params)
                finally:
                    self.in_flight[method] -= 1
            elif method == "roots/list":
                result = self.roots_result or {"roots": [_root_item(root) for root in self.broker.roots]}
            elif method == "ping":
                result = {}
            else:
                error = {"code": -32601, "message": "Method not found"}
        except FilesError as exc:
            error = to_jsonrpc_error(exc)
        except WireError as exc:
            error = exc.error
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if error is not None:
            answer["error"] = error
        else:
            answer["result"] = result
        if self._closed:
            return
        await self._write(answer)
        if result is not None and isinstance(result.get("content"), str):
            # Keep the record small: read contents are not kept, only their length.
            result = {**result, "content": f"<{len(result['content'])} chars>"}
        record = Answered(method, params, result, error)
        self.answered.append(record)
        for waiter in list(self._waiters):
            predicate, future = waiter
            if not future.done() and predicate(record):
                future.set_result(record)
                self._waiters.remove(waiter)

    def _on_change(self, event: ChangeEvent) -> None:
        """The core's watch sink (another thread): forward as ``notifications/files/changed``."""
        if self._closed:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self._loop.call_soon_threadsafe(self._send_change, event.to_params())

    def _send_change(self, params: dict[str, Any]) -> None:
        if not self._closed:
            self._spawn(self._notify_in_order("notifications/files/changed", params))

    async def _notify_in_order(self, method: str, params: dict[str, Any]) -> None:
        # Over HTTP each notification is a POST of its own: sent at once, two of them may reach
        # the server in either order, and a server may rely on the order of change events.
        async with self._notify_lock:
            await self.notify(method, params)

    # -- assertions ----------------------------------------------------------------------------

    def requests(self, method: str) -> list[Answered]:
        """The answered server→client requests of *method*, in answer order."""
        return [a for a in self.answered if a.method == method]

    async def wait_answered(
        self, method: str, predicate: Callable[[Answered], bool] | None = None, *, timeout: float = 10
    ) -> Answered:
        """Wait until a *method* request (matching *predicate*) has been answered."""

        def match(record: Answered) -> bool:
            return record.method == method and (predicate is None or predicate(record))

        for record in self.answered:
            if match(record):
                return record
        future: asyncio.Future[Answered] = self._loop.create_future()
        self._waiters.append((match, future))
        return await asyncio.wait_for(future, timeout)

    def reset(self) -> None:
        """Forget recorded requests and in-flight maxima; remove the interceptor."""
        self.answered.clear()
        self.notifications.clear()
        self.max_in_flight.clear()
        self.intercept = None
        self.roots_result = None


def _root_item(root: Any) -> dict[str, Any]:
    """A ``roots/list`` item as PROTOCOL.md spells it (``_meta.readOnly`` on read-only roots)."""
    item: dict[str, Any] = {"uri": root.uri, "name": root.name}
    if root.read_only:
        item["_meta"] = {"readOnly": True}
    return item


class StdioClient(RawClient):
    """A :class:`RawClient` that spawns the server as a subprocess and talks over its stdio."""

    def __init__(self, broker: Broker, **kwargs: Any) -> None:
        super().__init__(broker, **kwargs)
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr_lines: list[str] = []
        self._write_lock = asyncio.Lock()

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        broker: Broker,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        initialize: bool = True,
        **kwargs: Any,
    ) -> StdioClient:
        """Spawn ``argv`` and (by default) run the handshake."""
        client = cls(broker, **kwargs)
        client.proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=64 * MiB,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        client._spawn(client._read_stdout())
        client._spawn(client._read_stderr())
        return await client._started(initialize)

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            if line.strip():
                self._dispatch(json.loads(line))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError(f"the server exited: {self.stderr_tail()}"))

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr_lines.append(line.decode("utf-8", "replace").rstrip())
            del self.stderr_lines[:-200]

    def stderr_tail(self, lines: int = 30) -> str:
        return "\n".join(self.stderr_lines[-lines:])

    async def _write(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        data = pydantic_core.to_json(message) + b"\n"
        async with self._write_lock:
            if self.proc.stdin.is_closing():
                return
            self.proc.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await self.proc.stdin.drain()

    async def close(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.close()
            with contextlib.suppress(ConnectionError):
                await proc.stdin.wait_closed()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        # Let the pipe readers reach EOF before their tasks are cancelled.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 5)
        await super().close()


class HttpClient(RawClient):
    """A :class:`RawClient` over Streamable HTTP (a stateful session) with ``httpx2``.

    Each request is a POST whose answer is read as JSON or as an SSE stream;
    server→client requests arrive on that stream and are answered with POSTs.
    """

    def __init__(self, url: str, broker: Broker, **kwargs: Any) -> None:
        super().__init__(broker, **kwargs)
        self.url = url
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._http = httpx2.AsyncClient(timeout=httpx2.Timeout(None))

    @classmethod
    async def start(cls, url: str, broker: Broker, *, initialize: bool = True, **kwargs: Any) -> HttpClient:
        return await cls(url, broker, **kwargs)._started(initialize)

    def _initialized(self, result: dict[str, Any]) -> None:
        self.protocol_version = result.get("protocolVersion")

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def _post(self, message: dict[str, Any]) -> None:
        body = pydantic_core.to_json(message)
        async with self._http.stream("POST", self.url, content=body, headers=self._headers()) as response:
            session = response.headers.get("mcp-session-id")
            if session:
                self.session_id = session
            if response.status_code == 202:
                return
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", "replace")
                if "id" in message and "method" in message:
                    self._dispatch(
                        {"id": message["id"], "error": {"code": response.status_code, "message": text}}
                    )
                return
            kind = response.headers.get("content-type", "")
            if kind.startswith("application/json"):
                payload = json.loads(await response.aread())
                for item in payload if isinstance(payload, list) else [payload]:
                    self._dispatch(item)
            elif kind.startswith("text/event-stream"):
                async for data in _sse_data(response.aiter_lines()):
                    if data.strip():
                        self._dispatch(json.loads(data))

    async def _send_request(self, message: dict[str, Any]) -> None:
        # The answer comes on this POST's stream: read it in the background.
        self._spawn(self._post_safely(message))

    async def _post_safely(self, message: dict[str, Any]) -> None:
        try:
            await self._post(message)
        except httpx2.HTTPError as exc:
            future = self._pending.get(message["id"])
            if future is not None and not future.done():
                future.set_exception(ConnectionError(str(exc)))

    async def _write(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            await self._send_request(message)
        else:
            await self._post(message)

    async def close(self) -> None:
        if self.session_id is not None and not self._closed:
            with contextlib.suppress(httpx2.HTTPError):
                await self._http.delete(self.url, headers=self._headers())
        await super().close()
        await self._http.aclose()


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
    if data:
        yield "\n".join(data)


def python_argv(*args: str) -> list[str]:
    """``[sys.executable, *args]`` (unbuffered)."""
    return [sys.executable, "-u", *args]
