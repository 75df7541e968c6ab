"""The short spellings users type for roots, pre-approvals and headers: parsed, and applied, in one place.

The command line (``--root``, ``--root-ro``, ``--allow``, ``--header``), the
``%fsbroker`` magics and the ``FSBroker`` settings all accept them, and all
apply roots and pre-approvals with :func:`apply_specs` (or its one-spec parts),
so they accept the same things and report problems the same way. Applying goes
through the target's own ``add_root`` and ``allow``: nothing here checks a path
or grants anything itself. Pure Python: no Jupyter, no ``mcp``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from .errors import ConfigError
from .grants import OPERATIONS

__all__ = [
    "AllowTarget",
    "RootTarget",
    "SpecProblem",
    "SpecTarget",
    "add_root_spec",
    "allow_spec",
    "apply_specs",
    "split_allow",
    "split_header",
    "split_root",
]

R_co = TypeVar("R_co", covariant=True)
G_co = TypeVar("G_co", covariant=True)


def split_root(spec: str) -> tuple[str | None, str]:
    """``'data=~/x'`` → ``('data', '~/x')``; ``'~/x'`` → ``(None, '~/x')`` (the name is the folder's)."""
    name, sep, path = spec.partition("=")
    if sep and name and "/" not in name and path:
        return name.strip(), path.strip()
    return None, spec.strip()


def split_allow(spec: str) -> tuple[str, tuple[str, ...]]:
    """``'data/raw:read,watch'`` → ``('data/raw', ('read', 'watch'))``; without ``:OPS``, read.

    Raises
    ------
    ConfigError
        OPS names an unknown operation.
    """
    path, sep, ops = spec.rpartition(":")
    if not sep or not path or "/" in ops:
        return spec.strip(), ("read",)
    names = tuple(op.strip() for op in ops.split(",") if op.strip())
    unknown = [op for op in names if op not in OPERATIONS]
    if unknown:
        raise ConfigError(f"{spec!r}: unknown operation(s) {', '.join(unknown)}; use {', '.join(OPERATIONS)}")
    return path.strip(), names or ("read",)


def split_header(spec: str) -> tuple[str, str]:
    """``'Authorization: Bearer x'`` → ``('Authorization', 'Bearer x')``.

    Raises
    ------
    ConfigError
        Not written as ``NAME: VALUE``.
    """
    name, sep, value = spec.partition(":")
    if not sep or not name.strip():
        raise ConfigError(f"header {spec!r}: write it as 'NAME: VALUE'")
    return name.strip(), value.strip()


# -- applying ----------------------------------------------------------------------------------


class RootTarget(Protocol[R_co]):
    """Anything that shares folders: a core broker, a notebook broker."""

    def add_root(self, path: str, name: str | None = None, *, read_only: bool = False) -> R_co:
        """Share the folder *path* as root *name*; raise :class:`ConfigError` when it cannot be."""
        ...


class AllowTarget(Protocol[G_co]):
    """Anything that takes pre-approvals: a core broker, a notebook broker."""

    def allow(self, path: str, ops: tuple[str, ...]) -> G_co:
        """Pre-approve *path* for *ops*; raise :class:`ConfigError` when it cannot be."""
        ...


class SpecTarget(RootTarget[object], AllowTarget[object], Protocol):
    """Anything that takes both roots and pre-approvals (what :func:`apply_specs` needs)."""


def add_root_spec(target: RootTarget[R_co], spec: str, *, read_only: bool = False) -> R_co:
    """Share the folder that the ``[NAME=]DIR`` *spec* names, and return what *target* returns.

    Raises
    ------
    ConfigError
        The target refuses the folder (missing, too broad, the name is taken ...).
    """
    name, path = split_root(spec)
    return target.add_root(path, name, read_only=read_only)


def allow_spec(target: AllowTarget[G_co], spec: str) -> G_co:
    """Pre-approve what the ``PATH[:OPS]`` *spec* names, and return what *target* returns.

    Raises
    ------
    ConfigError
        An unknown operation, or the target refuses the path (outside every root ...).
    """
    path, ops = split_allow(spec)
    return target.allow(path, ops)


@dataclass(frozen=True)
class SpecProblem:
    """A root or pre-approval that could not be applied, for the user.

    Attributes
    ----------
    kind
        ``"root"``, ``"read-only root"`` or ``"pre-approval"``.
    spec
        The spelling as the user wrote it.
    message
        Why it was refused (the target's :class:`ConfigError`).
    """

    kind: Literal["root", "read-only root", "pre-approval"]
    spec: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind} {self.spec!r}: {self.message}"


def apply_specs(
    target: SpecTarget,
    *,
    roots: Iterable[str] = (),
    read_only_roots: Iterable[str] = (),
    allow: Iterable[str] = (),
    existing_roots: Collection[str] = (),
) -> tuple[SpecProblem, ...]:
    """Share *roots* (read-write) and *read_only_roots*, then pre-approve *allow*, in that order.

    Every spec is tried, so one bad spelling does not hide the others; each
    refusal becomes a :class:`SpecProblem`. A root spec that names a root in
    *existing_roots* and fails is not a problem: settings applied again must not
    complain about a root the user has changed since.

    Parameters
    ----------
    target
        What to apply them to (a core broker, a notebook broker).
    roots, read_only_roots
        ``[NAME=]DIR`` specs.
    allow
        ``PATH[:OPS]`` specs.
    existing_roots
        The names of the target's roots before this call.

    Returns
    -------
    tuple of SpecProblem
        What could not be applied, in the order given; empty when all was.
    """
    problems: list[SpecProblem] = []
    for specs, read_only in ((roots, False), (read_only_roots, True)):
        for spec in specs:
            try:
                add_root_spec(target, spec, read_only=read_only)
            except ConfigError as exc:
                name, _ = split_root(spec)
                if name is None or name not in existing_roots:
                    problems.append(SpecProblem("read-only root" if read_only else "root", spec, str(exc)))
    for spec in allow:
        try:
            allow_spec(target, spec)
        except ConfigError as exc:
            problems.append(SpecProblem("pre-approval", spec, str(exc)))
    return tuple(problems)
