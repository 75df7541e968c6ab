"""jupyter_fsbroker: a Jupyter kernel as a safe MCP client for brokered filesystem access."""

__version__ = "0.1.0.dev0"
