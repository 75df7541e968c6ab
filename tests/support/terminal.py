"""A consent request asked at a terminal whose keyboard is a pipe the test types into."""

from __future__ import annotations

import io
import os

from jupyter_fsbroker.console.prompt import TerminalConsenter
from jupyter_fsbroker.core.consent import ConsentDecision, ConsentRequest


def ask_at_the_terminal(
    request: ConsentRequest, answer: bytes | None, timeout: float = 10.0
) -> tuple[ConsentDecision, str]:
    """Ask *request* with a :class:`TerminalConsenter`, type *answer* (``None``: nothing at all).

    Returns the decision, once made within *timeout* seconds, and the text the prompt showed.
    """
    read_fd, write_fd = os.pipe()
    shown = io.StringIO()
    with os.fdopen(read_fd) as reader:
        consenter = TerminalConsenter(input=reader, output=shown)
        try:
            future = consenter.request_consent(request)
            if answer is not None:
                os.write(write_fd, answer)
            decision = future.result(timeout)
        finally:
            consenter.close()
            os.close(write_fd)
    return decision, shown.getvalue()
