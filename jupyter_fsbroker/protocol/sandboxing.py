"""A local server started confined: the sandbox's launch wrapped around the stdio transport.

What it is for: :func:`sandboxed_stdio` prepares the launch (:mod:`jupyter_fsbroker.sandbox`:
the policy computed from the command and the broker's roots, the private temporary
folder) off the event loop, and gives the connection the stdio parameters that start
the launcher instead of the bare command, together with an opener that removes the
private folder once the transport has ended — the server has exited or was killed.

What it must never do: start anything itself, or let a launch outlive its connection
(the connector closes it if the connection never starts).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar

import anyio
from mcp.client.stdio import StdioServerParameters, get_default_environment

from ..core.broker import Broker
from ..sandbox import Launch, Sandbox, SandboxChoice, choose, prepare

__all__ = ["SandboxValue", "closing_launch", "sandboxed_stdio"]

#: What ``connect(sandbox=...)`` takes: ``True``/``"files"``, ``"roots"``, a :class:`Sandbox`, a
#: :class:`SandboxChoice` (a setting's default, told apart from an explicit request), or
#: ``False``/``None`` (not confined).
SandboxValue = bool | str | Sandbox | SandboxChoice | None

_T = TypeVar("_T")


async def sandboxed_stdio(
    broker: Broker,
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    sandbox: SandboxValue,
) -> tuple[StdioServerParameters, Launch]:
    """The stdio parameters that start *command* with the *sandbox* asked for, and its launch.

    Raises
    ------
    jupyter_fsbroker.sandbox.SandboxUnavailable
        The sandbox was asked for and Landlock is unavailable here (the message says why).
    jupyter_fsbroker.sandbox.SandboxError
        The sandbox cannot be set up as asked (a path that contains a root...).
    """
    choice = sandbox if isinstance(sandbox, SandboxChoice) else choose(sandbox or False)
    # The environment the server will see: mcp's minimal one plus what was given.
    full_env = get_default_environment() | dict(env or {})
    roots = [(root.path, root.read_only) for root in broker.roots.snapshot()]
    launch = await anyio.to_thread.run_sync(
        functools.partial(prepare, [command, *args], choice, env=full_env, cwd=cwd, roots=roots)
    )
    if not launch.status.confined:
        return StdioServerParameters(command=command, args=list(args), env=_copy(env), cwd=cwd), launch
    first, *rest = launch.command
    parameters = StdioServerParameters(command=first, args=rest, env={**(env or {}), **launch.env}, cwd=cwd)
    return parameters, launch


@asynccontextmanager
async def closing_launch(transport: AbstractAsyncContextManager[_T], launch: Launch) -> AsyncIterator[_T]:
    """*transport*, then the launch's private folder removed (the server is gone by then)."""
    try:
        async with transport as streams:
            yield streams
    finally:
        launch.close()


def _copy(env: Mapping[str, str] | None) -> dict[str, str] | None:
    return dict(env) if env is not None else None
