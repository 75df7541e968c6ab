"""What a consent asks, in facts a non-expert can weigh: what a path covers, what an operation does, who asks.

A server asks for ``read`` and ``delete`` on ``data``; the user must learn from
the prompt that ``data`` is the whole shared folder with every file below it,
that delete is destructive, and that a write to ``report.md`` replaces a 12 kB
file rather than creating one. :func:`path_facts` gathers those facts when the
request is prepared (on a worker thread, never the event loop): one ``stat``,
and for a folder a count of the files below it that stops at
:data:`COUNT_CAP`, so a huge tree costs a bounded walk. :class:`Asker` says who
asks: the server's own name, local or remote (and the host), sandboxed or not.

The words live here, beside the facts, so that the cell's prompt, the text
prompt and the JupyterLab dialog (through the panel's JSON) say exactly the same.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from typing import Literal

from .rootpath import RootPath

__all__ = [
    "COUNT_CAP",
    "DESTRUCTIVE",
    "Asker",
    "PathFacts",
    "asker_text",
    "covers_text",
    "effect_text",
    "path_facts",
    "size_text",
    "until_disconnect",
]

#: Files counted below a requested folder before the prompt says "more than".
COUNT_CAP = 10_000

#: Operations that can destroy data: always delete; write only over an existing file.
DESTRUCTIVE = ("delete", "write")

Kind = Literal["folder", "file", "missing", "other", ""]


@dataclass(frozen=True)
class PathFacts:
    """What one requested path is on disk, when the request was prepared.

    Attributes
    ----------
    kind
        ``folder``, ``file``, ``missing`` (a write would create it), ``other``
        (a device, a socket), or ``""`` (unknown: not inside a root).
    whole_root
        The path is a shared folder itself, not something in it.
    root_name
        The shared folder it lies in.
    location
        Its real location on this computer (shown on hover).
    files
        Files below a folder, counted up to :data:`COUNT_CAP`; ``None`` for a non-folder.
    more
        The count stopped at the cap (then *files*): there are more.
    size
        Bytes of an existing file; ``None`` otherwise.
    """

    kind: Kind = ""
    whole_root: bool = False
    root_name: str = ""
    location: str = ""
    files: int | None = None
    more: bool = False
    size: int | None = None

    def destructive(self, op: str) -> bool:
        """Whether granting *op* here can destroy data: delete, or a write over an existing file."""
        if op == "delete":
            return True
        return op == "write" and self.kind == "file"


def path_facts(target: RootPath, cap: int = COUNT_CAP) -> PathFacts:
    """The facts of *target* (blocking: a ``stat``, and a walk of at most *cap* files for a folder).

    Symbolic links are not followed below the path (a link to elsewhere is
    counted as one file), and unreadable folders are skipped: the count is an
    honest lower bound, never an error.
    """
    location = os.path.join(target.root.path, *target.parts)
    unknown = PathFacts("", target.is_root, target.root.name, location)
    try:
        st = os.stat(location)
    except FileNotFoundError:
        return replace(unknown, kind="missing")
    except OSError:
        return unknown
    if stat.S_ISDIR(st.st_mode):
        files, more = _count_files(location, cap)
        return replace(unknown, kind="folder", files=files, more=more)
    if stat.S_ISREG(st.st_mode):
        return replace(unknown, kind="file", size=st.st_size)
    return replace(unknown, kind="other")


def _count_files(top: str, cap: int) -> tuple[int, bool]:
    """Files (non-folders) below *top*, stopping after *cap*: ``(count, stopped)``."""
    count = 0
    pending = [top]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        folder = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    if folder:
                        pending.append(entry.path)
                        continue
                    count += 1
                    if count > cap:
                        return cap, True
        except OSError:
            continue  # unreadable: what it holds stays uncounted
    return count, False


def size_text(size: int) -> str:
    """``12 kB``, ``3.4 MB``, ``512 bytes``: a size in decimal units, as file managers show it."""
    if size < 1000:
        return f"{size} byte{'' if size == 1 else 's'}"
    value = float(size)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if value < 999.5 or unit == "TB":
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def _file_of(size: int) -> str:
    """``12 kB file``, ``436-byte file``: a file's size as an adjective."""
    return f"{size}-byte file" if size < 1000 else f"{size_text(size)} file"


def covers_text(facts: PathFacts) -> str:
    """What granting the path covers, in words.

    ``the whole shared folder: 1,204 files, subfolders included``, ``a 12 kB file``.
    """
    if facts.kind == "folder":
        where = "the whole shared folder" if facts.whole_root else "a folder"
        if facts.more:
            count = f"more than {facts.files:,} files"
        else:
            count = f"{facts.files:,} file{'' if facts.files == 1 else 's'}"
        return f"{where}: {count}, subfolders included"
    if facts.kind == "file":
        return f"a {_file_of(facts.size or 0)}"
    if facts.kind == "missing":
        return "does not exist yet"
    if facts.kind == "other":
        return "not a regular file"
    return ""


def effect_text(facts: PathFacts, op: str, rel: str) -> str:
    """What *op* would do on the path, when it says more than the operation's name ('' otherwise).

    ``creates data/x.md``, ``replaces a 12 kB file``, ``deletes 1,204 files``.
    """
    if op == "write":
        if facts.kind == "missing":
            return f"creates {rel}"
        if facts.kind == "file":
            return f"replaces a {_file_of(facts.size or 0)}"
        if facts.kind == "folder":
            return "creates or replaces files in it"
    if op == "delete":
        if facts.kind == "folder":
            more = "more than " if facts.more else ""
            return f"can delete {more}{facts.files or 0:,} file{'' if facts.files == 1 else 's'}"
        if facts.kind == "file":
            return "deletes the file"
    return ""


@dataclass(frozen=True)
class Asker:
    """Who asks for consent: what the server says it is and where it runs.

    Attributes
    ----------
    title
        The server's own name (``serverInfo`` ``title`` or ``name``); ``""``: it gave none.
    place
        ``local`` (a command on this computer), ``remote`` (a URL), ``""`` unknown.
    host
        The URL's host, for a remote server.
    sandboxed
        Whether a local server runs confined to the shared folders; ``None``: not known (remote).
    """

    title: str = ""
    place: Literal["local", "remote", ""] = ""
    host: str = ""
    sandboxed: bool | None = None


def asker_text(asker: Asker, label: str) -> str:
    """Who asks, beside the user's *label* ('' when nothing is known).

    ``the server calls itself "Sales Analysis" · local program · sandboxed``;
    the server's own name is left out when it is the label itself.
    """
    parts: list[str] = []
    if asker.title and asker.title != label:
        parts.append(f'the server calls itself "{asker.title}"')
    if asker.place == "local":
        parts.append("local program")
    elif asker.place == "remote":
        parts.append(f"remote, at {asker.host}" if asker.host else "remote")
    if asker.sandboxed is True:
        parts.append("sandboxed")
    elif asker.sandboxed is False:
        parts.append("not sandboxed")
    return " · ".join(parts)


def until_disconnect(label: str) -> str:
    """The duration label of grants that last the connection: ``until you disconnect analysis``."""
    return f"until you disconnect {label}"
