"""A tool's result as the notebook gets it: the wire's ``CallToolResult``, with shortcuts.

A plain value: nothing here talks to a server or changes after it is made.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ToolResult"]


class ToolResult(dict[str, Any]):
    """A tool's result: the MCP ``CallToolResult`` as a JSON-able dict, with shortcuts.

    Keys are the wire's: ``content`` (a list of content blocks), ``isError``,
    and ``structuredContent`` when the server sent it.
    """

    @property
    def is_error(self) -> bool:
        """Whether the tool reported a failure (``isError``)."""
        return bool(self.get("isError"))

    @property
    def text(self) -> str:
        """The text content blocks, joined by newlines."""
        blocks = self.get("content") or []
        return "\n".join(
            str(block.get("text", ""))
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text"
        )

    @property
    def data(self) -> Any:
        """``structuredContent`` when present, else the text parsed as JSON, else the text."""
        if "structuredContent" in self:
            return self["structuredContent"]
        text = self.text
        try:
            return json.loads(text)
        except ValueError:
            return text
