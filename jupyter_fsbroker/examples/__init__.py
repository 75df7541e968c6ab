"""Example MCP servers that use a notebook's files through SEP-1708 brokering.

* :mod:`jupyter_fsbroker.examples.analysis_server` — the "remote analysis
  server" of the tutorials: profiles CSV and Parquet files of any size, runs
  SQL over them, writes Markdown reports and filtered copies back atomically,
  reads and writes text with etags, lists folders, keeps a locked counter,
  holds locks across calls, reports file changes. Run
  ``python -m jupyter_fsbroker.examples.analysis_server`` (stdio) or add
  ``--http 127.0.0.1:8765`` (Streamable HTTP at ``/mcp``).
* :mod:`jupyter_fsbroker.examples.csvstream` — its CSV side: statistics and
  filtered rows of text that arrives in chunks cut anywhere.
* :mod:`jupyter_fsbroker.examples.arrowstats` — the same statistics with
  pyarrow, of a CSV or of chosen Parquet columns, at C speed.
* :mod:`jupyter_fsbroker.examples.sqlquery` — its ``query`` tool: DuckDB over
  the brokered CSV and Parquet files, locked down to them.

They are written with :mod:`jupyter_fsbroker.serverkit`, the helper a
server author would use, and import nothing else from this package.
"""
