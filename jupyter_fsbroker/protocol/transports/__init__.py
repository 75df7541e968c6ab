"""The client's transports to MCP servers: stdio (:mod:`.stdio`) and Streamable HTTP (:mod:`.http`).

Both yield a ``(read_stream, write_stream)`` pair like mcp's own transports,
parse what a server sends with :mod:`.framing` (a malformed message reaches
the middleware as a :class:`~.framing.MalformedMessage`, to be answered), and
accept messages already encoded as JSON (``send_bytes``), which the
middleware uses for its ``files/*`` answers.
"""
