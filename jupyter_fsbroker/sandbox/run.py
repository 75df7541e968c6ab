"""The launcher: ``python -m jupyter_fsbroker.sandbox.run --policy FILE -- CMD ARGS…``.

What it is for: the broker starts a confined server through it. It reads the
policy (:mod:`.policy`), confines its own process (:mod:`.confine`) and then
*becomes* the server with ``execve`` — same process, same pid, same pipes —
so the broker never runs code between ``fork`` and ``exec`` (no
``preexec_fn``, which is unsafe in a threaded process like a kernel).

What it must never do: execute the command unconfined. Every failure before
the ``execve`` ends the process with a message on stderr that begins
``jupyter-fsbroker sandbox:`` and an exit status of 126 (cannot confine) or 127
(the command was not found); the broker shows that message as the reason the
server did not start.

It imports only the standard library and its sibling modules, and reads the
policy file before confining itself (the file is not in the policy).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .confine import confine
from .landlock import LandlockUnavailable
from .policy import Policy, PolicyError

__all__ = ["CANNOT_CONFINE", "NOT_FOUND", "main"]

#: Exit status when the sandbox could not be put in place (nothing was executed).
CANNOT_CONFINE = 126
#: Exit status when the command does not exist (or is not executable) inside the sandbox.
NOT_FOUND = 127

_USAGE = "usage: python -m jupyter_fsbroker.sandbox.run --policy FILE -- COMMAND [ARGS...]"


def _fail(message: str, status: int = CANNOT_CONFINE) -> int:
    print(f"jupyter-fsbroker sandbox: {message}", file=sys.stderr, flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Confine this process to the policy and execute the command; returns only on failure."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "--policy" or args[2] != "--":
        return _fail(_USAGE, 2)
    policy_file, command = args[1], args[3:]
    try:
        with open(policy_file, encoding="utf-8") as f:
            policy = Policy.from_json(f.read())
    except (OSError, PolicyError) as exc:
        return _fail(f"cannot read the policy {policy_file}: {exc}")
    try:
        confine(policy)
    except LandlockUnavailable as exc:
        return _fail(f"Landlock is unavailable, the server was not started: {exc.strerror or exc}")
    except (OSError, ValueError) as exc:
        return _fail(f"cannot confine the server, it was not started: {exc}")
    try:
        os.execvp(command[0], command)  # noqa: S606 - the command the user asked for, confined
    except OSError as exc:
        return _fail(f"cannot execute {command[0]!r} inside the sandbox: {exc.strerror}", NOT_FOUND)


if __name__ == "__main__":
    sys.exit(main())
