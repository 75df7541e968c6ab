"""Example MCP servers that use a notebook's files through SEP-1708 brokering.

* :mod:`jupyter_fsbroker.examples.analysis_server` — the "remote analysis
  server" of the tutorials: profiles CSV files of any size, writes Markdown
  reports next to them, keeps a locked counter, reports file changes.
  Run ``python -m jupyter_fsbroker.examples.analysis_server`` (stdio) or add
  ``--http 127.0.0.1:8765`` (Streamable HTTP at ``/mcp``).

They are written with :mod:`jupyter_fsbroker.protocol.server`, the helper a
server author would use, and import nothing else from this package.
"""
