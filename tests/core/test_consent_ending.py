"""When an unanswered consent request counts as timed out rather than withdrawn.

The wire's ``cause`` (``consent_timeout`` / ``consent_withdrawn``) and every view
that says how a request ended (``console.consent_text.ending``) ask
``ConsentRequest.timed_out``, so they never disagree.
"""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from jupyter_fsbroker.console.consent_text import ending
from jupyter_fsbroker.core.consent import TIMEOUT_SLACK, ConsentDecision, ConsentRequest


def request(timeout: float) -> ConsentRequest:
    return ConsentRequest("srv", "c1", "why", (), ("read",), timeout, created_at=1000.0)


@pytest.mark.parametrize(
    ("timeout", "ended_after", "timed_out"),
    [
        (120.0, 60.0, False),  # long before the deadline: the call ended, the connection closed
        (120.0, 120.0 - TIMEOUT_SLACK - 0.1, False),
        (120.0, 120.0 - TIMEOUT_SLACK + 0.1, True),  # the broker's wait ends on another clock
        (120.0, 125.0, True),
        (0.2, 0.17, False),  # a short request: a tenth of its timeout, not a whole second
        (0.2, 0.19, True),
    ],
)
def test_an_end_near_the_deadline_is_the_timeout(timeout: float, ended_after: float, timed_out: bool) -> None:
    assert request(timeout).timed_out(now=1000.0 + ended_after) is timed_out


def test_the_views_say_what_the_rule_says() -> None:
    long_ago = ConsentRequest("srv", "c1", "why", (), ("read",), 120.0, created_at=0.0)
    just_now = ConsentRequest("srv", "c1", "why", (), ("read",), 3600.0)  # made now, an hour to go
    for req, expected in ((long_ago, "timeout"), (just_now, "withdrawn")):
        future: Future[ConsentDecision] = Future()
        future.cancel()
        assert ending(req, future) == expected
        assert req.timed_out() is (expected == "timeout")
