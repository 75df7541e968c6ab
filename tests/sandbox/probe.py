"""A program to run confined: it tries what it is told and prints what the kernel answered.

``python probe.py ACTION…`` where each action is ``read:PATH``, ``write:PATH``,
``list:PATH``, ``connect:PORT``, ``bind:PORT``, ``signal:PID``, ``abstract:NAME``
(connect to an abstract UNIX socket), ``import:MODULE``, ``tmpfile`` (write a file
in ``tempfile.gettempdir()``) or ``caps`` (the effective capabilities). It prints
one JSON object: ``{action: "ok" | "ok:<detail>" | "<errno name>"}``.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import socket
import sys
import tempfile


def attempt(action: str) -> str:
    kind, _, arg = action.partition(":")
    try:
        if kind == "read":
            with open(arg, "rb") as f:
                f.read(1)
        elif kind == "write":
            with open(arg, "a") as f:
                f.write("x")
        elif kind == "list":
            os.listdir(arg)
        elif kind in ("connect", "bind"):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                if kind == "connect":
                    sock.connect(("127.0.0.1", int(arg)))
                else:
                    sock.bind(("127.0.0.1", int(arg)))
        elif kind == "signal":
            os.kill(int(arg), 0)
        elif kind == "abstract":
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect("\0" + arg)
        elif kind == "import":
            importlib.import_module(arg)
        elif kind == "tmpfile":
            with tempfile.NamedTemporaryFile("w", delete=False) as f:
                f.write("x")
            return "ok:" + f.name
        elif kind == "caps":
            with open("/proc/self/status") as status:
                line = next(line for line in status if line.startswith("CapEff:"))
            return "ok:" + line.split()[1]
        else:
            return "unknown action"
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    return "ok"


if __name__ == "__main__":
    print(json.dumps({action: attempt(action) for action in sys.argv[1:]}))
