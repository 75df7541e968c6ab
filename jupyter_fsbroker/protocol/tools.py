"""A server's tool list, read page by page into plain dicts.

Tool descriptions are cleaned (``inspect.cleandoc``): servers often send their
docstrings raw, with the indentation of the source they came from.
"""

from __future__ import annotations

import inspect
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession

__all__ = ["MAX_TOOL_PAGES", "list_tools"]

#: Pages read at most: a server whose cursor never ends cannot hang the connection.
MAX_TOOL_PAGES = 1000


async def list_tools(session: ClientSession) -> tuple[dict[str, Any], ...]:
    """Every tool of the server behind *session*, in its wire spelling."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(_tool_dict(tool) for tool in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(tools)


def _tool_dict(tool: types.Tool) -> dict[str, Any]:
    dumped: dict[str, Any] = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    description = dumped.get("description")
    if isinstance(description, str):
        dumped["description"] = inspect.cleandoc(description)
    return dumped
