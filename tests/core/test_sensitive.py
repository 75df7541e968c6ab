"""Sensitive names: the default list, patterns of several components, and rules on resolved paths.

A path is sensitive when a run of its components matches a pattern, wherever it
lies below the root, whatever the case. The rules are applied to the path a
request resolves to, every link on the way included: a link named
``notes.txt`` that points at ``.env`` in the same root is ``.env`` to every
operation, and is left out of listings and watch events as ``.env`` is.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker, Connection
from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision, ConsentRequest
from jupyter_fsbroker.core.sensitive import SensitiveNames
from jupyter_fsbroker.core.watch import ChangeEvent

from .conftest import ALL_OPS, error_of, tree_snapshot

TIMEOUT = 30.0

SENSITIVE_PATHS = [
    # What was there before.
    ".env",
    ".env.production",
    ".git/config",
    ".ssh/id_rsa",
    ".aws/credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "tls/server.pem",
    "tls/server.key",
    "id_rsa",
    "id_ed25519.pub",
    "vault.kdbx",
    # Added: folders of credentials, and everything below them.
    ".gnupg",
    ".gnupg/private-keys-v1.d/ABC.key",
    ".kube/config",
    ".azure/msal_token_cache.json",
    ".config/gcloud",
    ".config/gcloud/application_default_credentials.json",
    ".config/gcloud/configurations/config_default",
    ".docker/config.json",
    # Added: files of credentials, and keys, in any folder.
    ".git-credentials",
    ".pgpass",
    ".htpasswd",
    "certs/client.p12",
    "certs/client.pfx",
    "android/release.keystore",
    "id_dsa",
    "keys/id_ecdsa",
    "keys/id_ecdsa.pub",
    "keys/id_ed25519_sk",
    # Anywhere below the root: patterns of several components match at any depth.
    "home/alice/.docker/config.json",
    "backup/2026/.config/gcloud/credentials.db",
    "projects/site/.htpasswd",
    # Whatever the case (a case-insensitive file system serves either spelling).
    ".ENV",
    ".Docker/Config.JSON",
    ".CONFIG/GCloud/x",
    "KEYS/ID_ECDSA",
    "Cert.P12",
]

ORDINARY_PATHS = [
    "notes.txt",
    "config.json",
    "docker/config.json",  # not .docker
    ".docker/daemon.json",  # .docker is not secret as a whole; its config.json is
    ".docker/config.json.bak",  # another name
    ".config",
    ".config/other/settings.ini",
    ".config/gcloudx/y",
    "gcloud/credentials.db",  # gcloud outside .config
    "tools/.dockerignore",
    "my.p12.txt",
    "keystore",
    "envelope.txt",
    "rsa_id.txt",
]


@pytest.mark.parametrize("path", SENSITIVE_PATHS)
def test_the_default_names_cover(path: str) -> None:
    assert SensitiveNames().matches(tuple(path.split("/"))), path


@pytest.mark.parametrize("path", ORDINARY_PATHS)
def test_ordinary_paths_are_not_sensitive(path: str) -> None:
    assert not SensitiveNames().matches(tuple(path.split("/"))), path


def test_patterns_of_several_components() -> None:
    names = SensitiveNames(("a/b", "deep/*.cfg/", "x?z"))
    assert names.matches(("a", "b"))
    assert names.matches(("top", "a", "b"))  # anywhere
    assert names.matches(("a", "b", "c", "d"))  # and everything below
    assert not names.matches(("a", "x", "b"))  # consecutive components only
    assert not names.matches(("ab",)) and not names.matches(("a",)) and not names.matches(("b",))
    assert names.matches(("deep", "one.cfg")) and names.matches(("p", "deep", "one.cfg", "f"))
    assert not names.matches(("deep", "sub", "one.cfg"))
    assert names.matches(("xyz",)) and not names.matches(("x/z",))
    # A wildcard stays inside one component: "*" never spans a "/".
    assert not SensitiveNames(("a*b",)).matches(("a", "b"))
    assert SensitiveNames(("a*b",)).matches(("a-to-b",))
    assert not SensitiveNames(()).matches((".env",))


def test_a_first_look_at_a_name_never_misses_a_sensitive_path() -> None:
    """``could_match`` is the listing's first look at an entry: it may say yes too often, never too rarely."""
    names = SensitiveNames()
    for path in SENSITIVE_PATHS:
        parts = tuple(path.split("/"))
        # The last component of every sensitive path whose parent is not sensitive itself.
        if not names.matches(parts[:-1]):
            assert names.could_match(parts[-1]), path
    assert not names.could_match("notes.txt") and not names.could_match("data")


# -- resolved paths, through a real broker --------------------------------------------------------


@pytest.fixture
def world(data: Path) -> Path:
    (data / ".env").write_text("KEY=1")
    (data / "plain.txt").write_text("plain")
    (data / ".ssh").mkdir()
    (data / ".ssh" / "known_hosts").write_text("host")
    (data / ".ssh" / "out").symlink_to("../plain.txt")  # a link kept inside a sensitive folder
    (data / "proj" / ".docker").mkdir(parents=True)
    (data / "proj" / ".docker" / "config.json").write_text('{"auths": {}}')
    (data / "proj" / ".docker" / "daemon.json").write_text("{}")
    (data / "proj" / ".config" / "gcloud").mkdir(parents=True)
    (data / "proj" / ".config" / "gcloud" / "credentials.db").write_text("token")
    (data / "proj" / ".config" / "app.ini").write_text("[app]")
    # Links with ordinary names that lead to sensitive paths in the same root.
    (data / "notes.txt").symlink_to(".env")
    (data / "again.txt").symlink_to("notes.txt")  # a chain
    (data / "keys").symlink_to(".ssh")
    (data / "cloud").symlink_to("proj/.config/gcloud")
    (data / "registry.json").symlink_to("proj/.docker/config.json")
    (data / "through").symlink_to(".ssh/../plain.txt")  # passes through .ssh on the way
    (data / "via").symlink_to(".ssh/out")  # follows a link that lives in .ssh
    (data / "pending").symlink_to(".env.local")  # to a sensitive name that does not exist yet
    return data


THROUGH_LINKS = [
    "data/notes.txt",
    "data/again.txt",
    "data/keys/known_hosts",
    "data/cloud/credentials.db",
    "data/registry.json",
    "data/through",
    "data/via",
]


@pytest.mark.parametrize("path", THROUGH_LINKS)
def test_reading_and_stat_through_a_link_are_refused(world: Path, conn: Connection, path: str) -> None:
    for method in ("files/read", "files/stat"):
        error = error_of(conn, method, {"path": path})
        assert (error.name, error.reason) == ("PERMISSION_DENIED", "sensitive"), (method, path)
        assert "KEY=1" not in error.message and "token" not in error.message
    assert conn.handle("files/read", {"path": "data/plain.txt"})["content"] == "plain"


@pytest.mark.parametrize("path", [*THROUGH_LINKS, "data/keys/new_key", "data/cloud/new.db"])
def test_writing_through_a_link_is_refused_and_changes_nothing(
    world: Path, conn: Connection, path: str
) -> None:
    before = tree_snapshot(world)
    error = error_of(conn, "files/write", {"path": path, "content": "EVIL=1"})
    assert (error.name, error.reason) == ("PERMISSION_DENIED", "sensitive")
    assert tree_snapshot(world) == before


@pytest.mark.parametrize("path", ["data/keys/new_key", "data/cloud/new.db", "data/keys/sub/new"])
def test_creating_through_a_link_is_refused(world: Path, conn: Connection, path: str) -> None:
    before = tree_snapshot(world)
    for kind in ("file", "directory"):
        error = error_of(conn, "files/create", {"path": path, "type": kind, "parents": True})
        assert (error.name, error.reason) == ("PERMISSION_DENIED", "sensitive"), (path, kind)
    assert tree_snapshot(world) == before


def test_rename_and_delete_refuse_a_sensitive_end(world: Path, conn: Connection) -> None:
    before = tree_snapshot(world)
    for source, target in [
        ("data/plain.txt", "data/keys/plain.txt"),  # into .ssh through a link
        ("data/keys/known_hosts", "data/hosts.txt"),  # out of .ssh through a link
        ("data/plain.txt", "data/cloud/plain.txt"),
        ("data/proj/.docker/daemon.json", "data/proj/.docker/config.json"),
        ("data/notes.txt", "data/renamed.txt"),  # the link to .env is .env's business
        ("data/plain.txt", "data/notes.txt"),  # so it is not replaced either
    ]:
        error = error_of(conn, "files/rename", {"path": source, "newPath": target, "overwrite": True})
        assert (error.name, error.reason) == ("PERMISSION_DENIED", "sensitive"), (source, target)
    for path in ("data/notes.txt", "data/keys/known_hosts", "data/registry.json", "data/pending"):
        assert error_of(conn, "files/delete", {"path": path}).reason == "sensitive", path
    assert tree_snapshot(world) == before
    assert conn.handle("files/rename", {"path": "data/plain.txt", "newPath": "data/plain2.txt"})


def test_a_listing_leaves_out_links_to_sensitive_paths(world: Path, broker: Broker, conn: Connection) -> None:
    listed = {
        e["path"]: e["type"]
        for e in conn.handle("files/list", {"path": "data", "recursive": True, "includeHidden": True})[
            "entries"
        ]
    }
    assert sorted(listed) == [
        "data/plain.txt",
        "data/proj",
        "data/proj/.config",
        "data/proj/.config/app.ini",
        "data/proj/.docker",
        "data/proj/.docker/daemon.json",
    ]
    # Allowed by the notebook, the links are listed again (as links: a listing never follows one).
    broker.allow("data", ops=("read",), include_sensitive=True)
    listed = {
        e["path"]: e["type"]
        for e in conn.handle("files/list", {"path": "data", "includeHidden": True})["entries"]
    }
    assert listed["data/notes.txt"] == "symlink" and listed["data/keys"] == "symlink"
    assert listed["data/.env"] == "file"


def test_a_watch_through_a_link_is_refused(world: Path, conn: Connection) -> None:
    for path in ("data/notes.txt", "data/keys", "data/cloud", "data/proj/.config/gcloud"):
        assert error_of(conn, "files/watch", {"path": path}).reason == "sensitive", path


def collect_until(events: queue.Queue[ChangeEvent], last: Callable[[ChangeEvent], bool]) -> list[ChangeEvent]:
    got: list[ChangeEvent] = []
    deadline = time.monotonic() + TIMEOUT
    while not got or not last(got[-1]):
        try:
            got.append(events.get(timeout=max(0.001, deadline - time.monotonic())))
        except queue.Empty:
            raise AssertionError(f"the ordinary change was not reported; got {got}") from None
    return got


def test_watch_events_leave_out_sensitive_paths_and_links_to_them(world: Path, broker: Broker) -> None:
    broker.allow("data", ops=ALL_OPS)
    events: queue.Queue[ChangeEvent] = queue.Queue()
    conn = broker.connect("watcher", notify=events.put)
    conn.handle("files/watch", {"path": "data", "recursive": True})
    (world / ".env").write_text("KEY=2")
    (world / "proj" / ".docker" / "config.json").write_text('{"auths": {"x": 1}}')
    (world / "proj" / ".config" / "gcloud" / "new.db").write_text("token2")
    (world / "link_to_env").symlink_to(".env")
    # Then, the same kind of change to an ordinary file: it is reported once its window has
    # passed, after everything that changed before it would have been.
    (world / "after.txt").write_text("ordinary")
    got = collect_until(events, lambda e: e.path == "data/after.txt")
    assert [e.path for e in got if e.path != "data/after.txt"] == []


def test_consent_is_not_offered_for_a_path_that_leads_to_a_secret(world: Path, broker: Broker) -> None:
    asked: list[ConsentRequest] = []

    def approve_everything(request: ConsentRequest) -> ConsentDecision:
        asked.append(request)
        return ConsentDecision.approve_all(request)

    conn = broker.connect("asker", consenter=CallbackConsenter(approve_everything))
    paths = ["data/notes.txt", "data/keys/known_hosts", "data/through", "data/plain.txt"]
    answer = conn.handle("files/consent", {"requestedPaths": paths, "operations": ["read"]})
    assert answer["approvedPaths"] == ["data/plain.txt"]
    [request] = asked
    assert [(i.path, i.approvable, i.reason) for i in request.items] == [
        ("data/notes.txt", False, "sensitive"),
        ("data/keys/known_hosts", False, "sensitive"),
        ("data/through", False, "sensitive"),
        ("data/plain.txt", True, None),
    ]
    assert error_of(conn, "files/read", {"path": "data/notes.txt"}).name == "PERMISSION_DENIED"
    assert conn.handle("files/read", {"path": "data/plain.txt"})["content"] == "plain"
