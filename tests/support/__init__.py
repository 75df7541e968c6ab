"""Helpers every test folder shares: one of each, so that no folder grows its own copy.

* :mod:`.brokers` — :func:`~.brokers.make_broker`: a broker whose lock files and trash stay in
  the test's temporary folder.
* :mod:`.env` — :func:`~.env.server_env`: the environment that makes a subprocess (a server, a
  kernel, the command line) import this checkout.
* :mod:`.ports` — listening sockets and ports that are bound *before* anyone hears of them.
* :mod:`.servers` — the example analysis server over Streamable HTTP, in a subprocess.
* :mod:`.processes` — the processes below a pid, read from ``/proc``.
* :mod:`.leaks` — what a test left behind (threads, child processes, open files).
* :mod:`.sources` — the package's modules and the imports they run, read from the sources.

Nothing here imports Jupyter or ``mcp`` at module level: the core tests use it too.
"""
