"""A tool's result and a server's tools as the notebook shows them: :class:`ToolResult`, :class:`ToolError`,
:class:`Tool` and :class:`Tools`.

:class:`ToolResult` is the wire's ``CallToolResult`` (a dict, as before) with the
shortcuts a data scientist uses — :attr:`~ToolResult.data` (the structured
content when the server sent it, else the text parsed as JSON, else the text)
and :attr:`~ToolResult.text` — and a rich display that shows the data once,
not the envelope with its JSON text repeated. :class:`ToolError` is what a
failed call raises by default (``call_tool(..., raise_on_error=False)`` returns
the result instead). :class:`Tools` is ``conn.tools``: a tuple of the server's
tool descriptions that displays as a table, each a :class:`Tool` that reads
like a function's signature.

Plain values: nothing here talks to a server or changes after it is made.
"""

from __future__ import annotations

import html
import json
import re
import textwrap
from collections.abc import Iterable
from typing import Any

from ..core.errors import BrokerError
from .tables import Table, find_table, html_table, to_dataframe

__all__ = ["CallInterrupted", "Tool", "ToolError", "ToolResult", "Tools", "show_value", "tool_failure"]

#: Characters of a value shown in a display before it is cut.
_SHOWN = 20_000


def show_value(value: Any) -> str:
    """*value* as text for people, as IPython prints it (``str`` for text).

    So a result displays exactly as its data does, and as ``%fsbroker call`` shows it.
    """
    if isinstance(value, str):
        return value
    try:
        from IPython.lib.pretty import pretty
    except ImportError:  # pragma: no cover - IPython is a dependency
        return repr(value)
    return str(pretty(value))  # type: ignore[no-untyped-call,unused-ignore]


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + f"\n… ({len(text) - _SHOWN:,} more characters)"


class ToolResult(dict[str, Any]):
    """A tool's result: the MCP ``CallToolResult`` as a JSON-able dict, with shortcuts.

    Keys are the wire's: ``content`` (a list of content blocks), ``isError``,
    and ``structuredContent`` when the server sent it.

    Examples
    --------
    >>> result = conn.call_tool("profile_csv", {"path": "data/sales.csv"})   # doctest: +SKIP
    >>> result.data["rows"]                                                  # doctest: +SKIP
    4
    """

    #: The tool's name, when known (for displays and errors).
    tool: str = ""

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

    @property
    def images(self) -> list[dict[str, Any]]:
        """The image content blocks (``data`` base64, ``mimeType``)."""
        return [b for b in self.get("content") or [] if isinstance(b, dict) and b.get("type") == "image"]

    @property
    def table(self) -> Table | None:
        """The table in :attr:`data` (see :func:`~.tables.find_table`), ``None`` if it is not tabular."""
        return None if self.is_error else find_table(self.data)

    def to_pandas(self) -> Any:
        """The result's table as a :class:`pandas.DataFrame`.

        The data itself when it is a list of records or a dict of columns;
        otherwise its one list of records (``profile_csv``'s ``columns``: one row per
        CSV column).

        Raises
        ------
        ValueError
            The result is an error or holds no table.
        ImportError
            pandas is not installed.
        """
        table = self.table
        if table is None:
            what = "an error" if self.is_error else "no table (a list of records or a dict of columns)"
            raise ValueError(f"the result of {self.tool or 'the tool'} is {what}; see .data")
        return to_dataframe(table.columns, table.rows)

    def summary(self) -> str:
        """The result for people, as plain text: the data (or the error message), once."""
        if self.is_error:
            return f"{self.tool or 'the tool'} reported an error: {self.text or '(no message)'}"
        return show_value(self.data)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if cycle:
            printer.text("ToolResult(...)")
        elif self.is_error:
            printer.text(self.summary())
        else:
            printer.pretty(self.data)  # what `%fsbroker call` shows: the data, as Python prints it

    def _repr_markdown_(self) -> str:
        fence = "~~~~" if "~~~" in self.summary() else "~~~"  # a fence the text cannot close
        return f"{fence}\n{_cut(self.summary())}\n{fence}"

    def _repr_html_(self) -> str:
        name = html.escape(self.tool or "tool")
        state = "fsbroker-result-error" if self.is_error else "fsbroker-result-ok"
        title = f"{name} reported an error" if self.is_error else f"{name} → result"
        images = "".join(
            f'<img alt="image" src="data:{html.escape(str(b.get("mimeType", "image/png")))};base64,'
            f'{html.escape(str(b.get("data", "")))}" style="max-width:100%">'
            for b in self.images
        )
        table = self.table
        if table is not None:
            return self._table_html(title, table) + images
        body = html.escape(_cut(self.text if self.is_error else show_value(self.data)))
        return (
            f'<div class="fsbroker-result {state}" style="border-left:3px solid '
            f"var({'--jp-error-color1' if self.is_error else '--jp-brand-color1'},#888);"
            'padding:2px 8px;margin:2px 0">'
            f'<div style="font-size:var(--jp-ui-font-size1,12px);color:var(--jp-ui-font-color2,#666)">'
            f'{title}</div><pre style="margin:2px 0;white-space:pre-wrap">{body}</pre>{images}</div>'
        )

    def _table_html(self, title: str, table: Table) -> str:
        # The values beside the table (profile_csv's path and rows) on one line above it.
        data = self.data
        beside = (
            ", ".join(f"{k}: {show_value(v)}" for k, v in data.items() if k != table.key)
            if table.key and isinstance(data, dict)
            else ""
        )
        caption = f"{title} · {table.key}" if table.key else title
        return (
            '<div class="fsbroker-result fsbroker-result-ok" style="border-left:3px solid '
            'var(--jp-brand-color1,#888);padding:2px 8px;margin:2px 0">'
            f'<div style="font-size:var(--jp-ui-font-size1,12px);color:var(--jp-ui-font-color2,#666)">'
            f"{caption}</div>"
            + (f'<div style="margin:2px 0">{html.escape(_cut(beside))}</div>' if beside else "")
            + html_table(table.columns, table.rows, css_class="fsbroker-result-table")
            + "</div>"
        )


#: mcp's frame around the message of an exception a tool raised ("Error executing tool NAME: ...").
_EXECUTING = re.compile(r"\AError executing tool \S+: ")
#: A pydantic report of one argument: its name, then an indented "Field required [type=missing ...".
_MISSING = re.compile(r"^(\S+)\n\s+Field required", re.MULTILINE)
#: The broker's refusal as the kit's servers pass it on (core/access.py's words).
_REFUSED = re.compile(
    r"\APERMISSION_DENIED: no (?P<op>\w+) access to (?P<path>.+?)(?:: (?P<cause>.+))?\Z", re.DOTALL
)
#: The user denied it: said from the user's side.
_DENIED = "the user denied it"


def tool_failure(tool: str, text: str) -> str:
    """What happened to a failed call of *tool*, in the user's words: ``failed: …`` or ``was refused: …``.

    The server's message is said once: mcp prefixes an exception's message with
    "Error executing tool NAME:" (the caller names the tool already), reports
    missing arguments as a pydantic validation dump, and the broker's refusals
    arrive as ``PERMISSION_DENIED: no read access to PATH: why``.
    """
    message = _EXECUTING.sub("", text.strip()) or "(no message)"
    refused = _REFUSED.match(message)
    if refused is not None:
        op, path, cause = refused["op"], refused["path"], refused["cause"] or ""
        if cause == _DENIED:
            return f"was refused: you denied {op} on {path}"
        if " has been granted" in path:  # "no read access to X has been granted here (ask ...)"
            return f"was refused: {op} on {path.split(' has been granted')[0]} is not granted"
        return f"was refused: {op} on {path} ({cause})" if cause else f"was refused: {op} on {path}"
    if message.startswith("PERMISSION_DENIED: "):
        return "was refused: " + message.removeprefix("PERMISSION_DENIED: ")
    if "validation error for" in message:
        missing = _MISSING.findall(message)
        if missing:
            names = ", ".join(f"`{name}`" for name in missing)
            plural = "s" if len(missing) > 1 else ""
            return f"failed: missing argument{plural} {names} (see `conn.tools[{tool!r}]`)"
        return "failed: " + message.splitlines()[0]
    return "failed: " + message


class ToolError(BrokerError, RuntimeError):
    """A tool reported a failure (``isError``): what ``call_tool`` raises unless ``raise_on_error=False``.

    Its message names the connection and the tool once, then what happened
    (:func:`tool_failure`): ``analysis · profile_csv was refused: you denied read
    on data/sales.csv``.

    Attributes
    ----------
    result
        The tool's :class:`ToolResult` (``result.text`` holds the server's message).
    tool, connection
        The tool's name and the connection's name.
    """

    def __init__(self, result: ToolResult, *, tool: str, connection: str) -> None:
        super().__init__(f"{connection} · {tool} {tool_failure(tool, result.text)}")
        self.result = result
        self.tool = tool
        self.connection = connection


class CallInterrupted(BrokerError, KeyboardInterrupt):
    """A tool call was interrupted (Ctrl-C, Kernel → Interrupt) and cancelled, maybe waiting for consent.

    A :class:`KeyboardInterrupt`, as before, that says what was stopped instead of
    where the cell happened to wait.
    """


class CallCancelled(BrokerError, RuntimeError):
    """A tool call was cancelled with its Cancel button (under the cell, or in the JupyterLab panel).

    Not a :class:`KeyboardInterrupt`: the user stopped that one call, not the cell's
    code, so ``try: ... except CallCancelled:`` goes on with the rest of the cell.
    The server was told the request was cancelled.

    Attributes
    ----------
    tool, connection
        The tool's name and the connection's name.
    """

    def __init__(self, *, tool: str, connection: str, after: float) -> None:
        super().__init__(f"{connection} · {tool} was cancelled after {int(after)} s")
        self.tool = tool
        self.connection = connection


def _one_line(text: object) -> str:
    lines = [line.strip() for line in textwrap.dedent(str(text or "")).strip().splitlines()]
    first = []
    for line in lines:  # the first paragraph
        if not line:
            break
        first.append(line)
    return " ".join(first)


class Tool(dict[str, Any]):
    """One of a server's tools: its wire description (a dict), shown like a function's signature.

    Attributes are read from the wire keys: :attr:`name`, :attr:`description`,
    :attr:`arguments`.
    """

    @property
    def name(self) -> str:
        """The tool's name."""
        return str(self.get("name", ""))

    @property
    def description(self) -> str:
        """The description, without the indentation of a docstring."""
        return textwrap.dedent(str(self.get("description") or "")).strip()

    @property
    def summary(self) -> str:
        """The description's first paragraph, on one line."""
        return _one_line(self.get("description"))

    @property
    def arguments(self) -> list[tuple[str, str, bool]]:
        """``(name, type, required)`` of each argument, from the input schema."""
        schema = self.get("inputSchema") or {}
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        out = []
        for key, spec in props.items():
            kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
            out.append(
                (str(key), kind if isinstance(kind, str) else "|".join(map(str, kind)), key in required)
            )
        return out

    def signature(self) -> str:
        """``profile_csv(path: string, seconds?: number)``."""
        args = ", ".join(f"{n}{'' if req else '?'}: {t}" for n, t, req in self.arguments)
        return f"{self.name}({args})"

    def __repr__(self) -> str:
        return f"<Tool {self.signature()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.signature() + ("\n\n" + self.description if self.description else ""))


class Tools(tuple[Tool, ...]):
    """A server's tools (``conn.tools``): a tuple of :class:`Tool`, displayed as a table."""

    def __new__(cls, tools: Iterable[dict[str, Any]] = ()) -> Tools:
        return super().__new__(cls, (t if isinstance(t, Tool) else Tool(t) for t in tools))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            for tool in self:
                if tool.name == key:
                    return tool
            raise KeyError(key)
        return super().__getitem__(key)

    @property
    def names(self) -> list[str]:
        """The tools' names."""
        return [tool.name for tool in self]

    def _rows(self) -> list[tuple[str, str, str]]:
        return [
            (t.name, t.summary, ", ".join(f"{n}{'' if r else '?'}: {k}" for n, k, r in t.arguments))
            for t in self
        ]

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        if not self:
            printer.text("(no tools)")
            return
        printer.text("\n".join(f"{name}({args})  {summary}" for name, summary, args in self._rows()))

    def _repr_html_(self) -> str:
        cell = "padding:1px 10px 1px 0;text-align:left;vertical-align:top"
        rows = "".join(
            f'<tr><td style="{cell}"><code>{html.escape(n)}</code></td>'
            f'<td style="{cell}">{html.escape(s)}</td>'
            f'<td style="{cell}"><code>{html.escape(a)}</code></td></tr>'
            for n, s, a in self._rows()
        )
        head = "".join(f'<th style="{cell}">{h}</th>' for h in ("tool", "description", "arguments"))
        return f'<table class="fsbroker-tools"><tr>{head}</tr>{rows}</table>'
