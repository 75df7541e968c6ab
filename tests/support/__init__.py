"""Helpers every test folder shares: one of each, so that no folder grows its own copy.

* :mod:`.brokers` — :func:`~.brokers.make_broker`: a broker whose lock files and trash stay in
  the test's temporary folder.
* :mod:`.env` — :func:`~.env.server_env`: the environment that makes a subprocess (a server, a
  kernel, the command line) import this checkout.
* :mod:`.ports` — listening sockets and ports that are bound *before* anyone hears of them.
* :mod:`.servers` — the example analysis server over Streamable HTTP, in a subprocess; its tools.
* :mod:`.handover` — a test server over HTTP on a listening socket bound by the test and handed
  over, both ends.
* :mod:`.linewire` — newline-delimited JSON on stdio for the servers that write the wire by hand
  (standard library only).
* :mod:`.serverlog` — waiting for an entry of a connection's server log.
* :mod:`.terminal` — a consent asked at a terminal the test types into.
* :mod:`.ci` — skipping tests whose tools are missing, except under CI, where that fails.
* :mod:`.processes` — the processes below a pid, read from ``/proc``; stopping one.
* :mod:`.leaks` — what a test left behind (threads, child processes, open files).
* :mod:`.sources` — the package's modules and the imports they run, read from the sources.

Nothing here imports Jupyter or ``mcp`` at module level: the core tests use it too
(:mod:`.terminal` imports the package's terminal consenter, which needs neither).
"""
