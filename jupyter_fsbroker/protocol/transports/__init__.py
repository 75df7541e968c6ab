"""The client's transports to MCP servers: stdio and Streamable HTTP.

Over stdio, :mod:`.spawn` starts a server and :mod:`.pipes` carries its messages (framed
into lines by :mod:`.lines`); over
Streamable HTTP, :mod:`.http`.

:mod:`.openers` holds the two ways to reach a server that the connection uses
(:func:`stdio_transport`, :func:`http_transport`). Both transports yield a
``(read_stream, write_stream)`` pair like mcp's own, parse what a server sends
with :mod:`~jupyter_fsbroker.protocol.framing` (a malformed message reaches the
middleware as a :class:`~jupyter_fsbroker.protocol.framing.MalformedMessage`,
to be answered), and accept messages already encoded as JSON
(``send_bytes``), which the middleware uses for its ``files/*`` answers.
"""

from __future__ import annotations

from .openers import Opener, display_url, http_transport, stdio_transport

__all__ = ["Opener", "display_url", "http_transport", "stdio_transport"]
