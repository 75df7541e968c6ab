"""The protocol-independent core: roots, paths, grants, operations, locks, watches, audit.

Nothing here imports Jupyter or ``mcp``; the protocol and kernel layers build on it.
"""
