"""What every row of ``run.py`` shares: the options, the scratch folder and its files, the workers.

:class:`Bench` makes each data file once, when the first row needs it, in a
temporary folder that :meth:`Bench.close` removes; it installs the official
filesystem server once (npm, into a cache folder) for the rows that compare
with it, and hands out worker processes (``bench_wire.Runner``). It never
times anything itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_wire import Runner, Worker, make_file

__all__ = ["Bench", "DataFile", "Settings", "Skipped"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class DataFile:
    """A file of random bytes the rows read: on disk, as the broker names it, its size and sha256."""

    path: Path
    name: str
    size: int
    sha256: str


class Skipped(Exception):
    """A row cannot be measured here (no node, no registry ...); the message says why."""


@dataclass(frozen=True)
class Settings:
    """Sizes and counts of one run; :meth:`for_run` picks them for a full or a ``--quick`` run."""

    quick: bool
    repeats: int  # runs behind each median
    kernels: int  # fresh kernels for rows 6 and 7
    read_mib: int  # rows 1, 2 and 10
    media_mib: int  # row 3
    small_reads: int  # row 4
    list_files: int  # row 5
    list_page: int  # row 5
    watch_events: int  # row 8
    rss_mib: int  # row 9
    probes: int  # row 10, idle

    @classmethod
    def for_run(cls, *, quick: bool, repeats: int | None = None, kernels: int | None = None) -> Settings:
        if quick:
            return cls(
                quick=True,
                repeats=repeats or 3,
                kernels=kernels or 1,
                read_mib=32,
                media_mib=16,
                small_reads=200,
                list_files=10_000,
                list_page=1_000,
                watch_events=30,
                rss_mib=32,
                probes=40,
            )
        return cls(
            quick=False,
            repeats=repeats or 5,
            kernels=kernels or 5,
            read_mib=256,
            media_mib=16,
            small_reads=1000,
            list_files=100_000,
            list_page=10_000,
            watch_events=100,
            rss_mib=1024,
            probes=100,
        )


class Bench:
    """The shared state of one ``run.py`` invocation.

    Attributes
    ----------
    settings
        Sizes and counts.
    root
        The folder shared with every broker as the root ``data``.
    runner
        Starts worker processes (a broker connected to ``wire_server.py``);
        see also :meth:`stdio_worker`.
    """

    def __init__(self, settings: Settings, *, install_dir: Path) -> None:
        self.settings = settings
        self.install_dir = install_dir
        self.tmp = Path(tempfile.mkdtemp(prefix="fsbroker-bench-"))
        self.root = self.tmp / "data"
        self.root.mkdir()
        (self.tmp / "state").mkdir()
        self.runner = Runner(self.root, self.tmp / "state")
        self._files: dict[str, DataFile] = {}
        self._official: tuple[Path, str] | str | None = None
        self._stdio: Worker | None = None
        self._owned = contextlib.ExitStack()
        self._started = time.monotonic()

    def log(self, message: str) -> None:
        """Progress on stderr, with the seconds since the start."""
        print(f"[{time.monotonic() - self._started:6.1f} s] {message}", file=sys.stderr, flush=True)

    def scratch(self, name: str) -> Path:
        """A new empty folder outside the root (kernel homes, server folders ...)."""
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.tmp))
        return path

    def random_file(self, mib: int) -> DataFile:
        """A file of *mib* MiB of random bytes in the root, made once (rows of the same size share it)."""
        name = f"random-{mib}MiB.bin"
        if name not in self._files:
            self.log(f"writing {name}")
            path = self.root / name
            self._files[name] = DataFile(path, f"data/{name}", mib * MiB, make_file(path, mib * MiB))
        return self._files[name]

    def text_file(self, name: str, text: str) -> Path:
        """``data/<name>`` holding *text*."""
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return path

    def small_files(self, name: str, count: int) -> Path:
        """The folder ``data/<name>`` of *count* 100-byte files ``f0000.txt`` ..., made once."""
        folder = self.root / name
        if not folder.exists():
            folder.mkdir()
            for index in range(count):
                (folder / f"f{index:04d}.txt").write_bytes(b"%099d\n" % index)
        return folder

    def tree(self, files: int) -> str:
        """A folder of *files* empty files; its root-relative path.

        Half are in subfolders of 1,000 (``part-000/`` ...), the other half in
        one large folder that sorts after them (``tiles/``): a listing's first
        pages walk small folders, its last pages go deep into a large one.
        """
        name = f"tree{files}"
        top = self.root / name
        if not top.exists():
            self.log(f"creating {files:,} files")
            half = files // 2
            folders = [(f"part-{i:03d}", 1000) for i in range(half // 1000)] + [("tiles", files - half)]
            for folder, count in folders:
                (top / folder).mkdir(parents=True)
                for index in range(count):
                    os.close(os.open(top / folder / f"f{index:06d}.csv", os.O_WRONLY | os.O_CREAT, 0o644))
        return f"data/{name}"

    def official_server(self) -> tuple[Path, str]:
        """The official filesystem server's entry point and version, installed on first use.

        Raises
        ------
        Skipped
            It cannot be installed here.
        """
        from compare_official import install

        if self._official is None:
            self.log(f"installing the official filesystem server into {self.install_dir}")
            self._official = install(self.install_dir)
        if isinstance(self._official, str):
            raise Skipped(f"the official server is not available: {self._official}")
        return self._official

    def stdio_worker(self) -> Worker:
        """A worker connected to ``wire_server.py`` over stdio (read and watch granted), shared by rows.

        Rows that time inside the server (throughput, latency) share it, which
        spares a process start each; a row that measures the worker itself
        (its memory) starts its own with ``runner``.
        """
        if self._stdio is None:
            self._stdio = self._owned.enter_context(self.runner.open("helper", ops=("read", "watch")))
        return self._stdio

    def close(self) -> None:
        self._owned.close()
        self.runner.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
