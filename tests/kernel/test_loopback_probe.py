"""The loopback probe: only a request for the nonce's URL, in time, says the browser reaches the kernel."""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from jupyter_fsbroker.kernel.loopback_probe import reaches_loopback


@pytest.fixture
def fetching() -> Iterator[Callable[[Callable[[str], str]], Callable[[str], None]]]:
    """An ``ask`` that GETs a URL (made from the probe's by *alter*) in a thread, as a panel would."""
    threads: list[threading.Thread] = []

    def make(alter: Callable[[str], str]) -> Callable[[str], None]:
        def get(url: str) -> None:
            with contextlib.suppress(OSError):  # URLError is one; refused or dropped: no matter
                urllib.request.urlopen(alter(url), timeout=5).close()

        def ask(url: str) -> None:
            thread = threading.Thread(target=get, args=(url,))
            threads.append(thread)
            thread.start()

        return ask

    yield make
    for thread in threads:
        thread.join(10)


def test_a_fetch_of_the_probe_url_is_a_yes(
    fetching: Callable[[Callable[[str], str]], Callable[[str], None]],
) -> None:
    assert reaches_loopback(fetching(lambda url: url), timeout=10)


def test_no_fetch_is_a_no_once_the_time_is_up() -> None:
    asked: list[str] = []
    assert not reaches_loopback(asked.append, timeout=0.3)
    assert len(asked) == 1 and asked[0].startswith("http://127.0.0.1:")


def test_another_path_or_a_bare_connection_is_a_no(
    fetching: Callable[[Callable[[str], str]], Callable[[str], None]],
) -> None:
    # Any local process can connect to the port: without the nonce it proves nothing.
    assert not reaches_loopback(fetching(lambda url: url.rsplit("/", 1)[0] + "/guess"), timeout=1.0)

    def connect_only(url: str) -> None:
        port = int(url.split(":")[2].split("/")[0])
        socket.create_connection(("127.0.0.1", port), timeout=5).close()

    assert not reaches_loopback(connect_only, timeout=1.0)
