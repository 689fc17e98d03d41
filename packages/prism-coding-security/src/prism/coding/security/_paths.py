"""Realpath containment of paths within roots."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import attrs

from prism.core import ConfigurationError
from prism.core.options import instance_of, sequence_of, string

from ._executables import claim_roots

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._protected import ProtectedPaths

__all__ = [
    "MAX_COMPONENT_BYTES",
    "MAX_PATH_BYTES",
    "PathVerdict",
    "Roots",
    "links_on_the_way",
    "normalize_roots",
    "protected_link_on_the_way",
    "protected_links_on_the_way",
]

MAX_PATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255


@attrs.frozen(kw_only=True)
class PathVerdict:
    """Where a path really leads and whether that is inside a root."""

    path: str
    inside: bool
    real: str | None = None
    root: str | None = None
    reason: str | None = None


def _is_within(real: str, root: str) -> bool:
    return real == root or real.startswith(root if root.endswith("/") else root + "/")


_PATHS = sequence_of(string() | instance_of(os.PathLike, description="a path"))


def normalize_roots(
    roots: Sequence[str], *, owner: str, option: str = "roots", allow_empty: bool = False
) -> tuple[str, ...]:
    """Realpath every root; each must be an existing directory.

    Each is remembered (:func:`._executables.claim_roots`): no program Prism
    itself runs is found on ``PATH`` inside it.

    Raises:
        ConfigurationError: (naming ``<owner>.<option>`` and the value) ``roots``
            is not a sequence of paths, is empty (unless ``allow_empty``), or
            names something that is not an existing directory.
    """
    _PATHS.check(owner, option, roots)
    if not roots and not allow_empty:
        raise ConfigurationError(
            f"{owner}.{option} must name at least one directory, got {roots!r}",
            option=f"{owner}.{option}",
            value=roots,
        )
    out: list[str] = []
    for item in roots:
        text = os.fspath(item)
        if not isinstance(text, str) or not text or "\x00" in text:
            raise ConfigurationError(
                f"{owner}.{option} entries must be non-empty paths, got {item!r}",
                option=f"{owner}.{option}",
                value=roots,
            )
        real = os.path.realpath(text)
        if not os.path.isdir(real):
            raise ConfigurationError(
                f"{owner}.{option} entry {text!r} is not an existing directory",
                option=f"{owner}.{option}",
                value=roots,
            )
        if real not in out:
            out.append(real)
    claim_roots(out)
    return tuple(out)


@attrs.frozen
class Roots:
    """A fixed set of real root directories."""

    paths: tuple[str, ...]

    def resolve(self, path: str, *, base: str | None = None) -> PathVerdict:
        """Resolve ``path`` (relative to ``base``, else the first root) and check containment.

        Every existing component is resolved with realpath (symlinks followed,
        ``..`` applied physically); a path that does not exist yet is judged by
        where its nearest existing parent really is. Never raises for a hostile path.
        """
        if not isinstance(path, str):
            return PathVerdict(path=repr(path), inside=False, reason="the path is not a string")
        if path in self.paths and base is None:
            # a root itself (the usual working directory): real since the roots were built
            return PathVerdict(path=path, inside=True, real=path, root=path)
        if "\x00" in path:
            return PathVerdict(path=path, inside=False, reason="the path contains a NUL byte")
        try:
            encoded = os.fsencode(path)
        except UnicodeError:
            return PathVerdict(path=path, inside=False, reason="the path cannot be encoded")
        if len(encoded) > MAX_PATH_BYTES:
            return PathVerdict(
                path=path, inside=False, reason=f"the path is longer than {MAX_PATH_BYTES} bytes"
            )
        if any(len(part) > MAX_COMPONENT_BYTES for part in encoded.split(b"/")):
            return PathVerdict(
                path=path,
                inside=False,
                reason=f"a path component is longer than {MAX_COMPONENT_BYTES} bytes",
            )
        if not path:
            return PathVerdict(path=path, inside=False, reason="the path is empty")
        joined = os.path.join(base if base is not None else self.paths[0], path)
        try:
            real = os.path.realpath(joined)
        except (OSError, ValueError, RuntimeError) as exc:
            return PathVerdict(path=path, inside=False, reason=f"cannot resolve the path ({exc})")
        for root in self.paths:
            if _is_within(real, root):
                return PathVerdict(path=path, inside=True, real=real, root=root)
        return PathVerdict(
            path=path,
            inside=False,
            real=real,
            reason=f"it resolves to {real!r}, outside the roots",
        )

    def contains_real(self, real: str) -> bool:
        """Whether an already-resolved path lies within a root."""
        return any(_is_within(real, root) for root in self.paths)


# as the kernel's own bound on the links one lookup follows
_MAX_LINKS = 40


def links_on_the_way(path: str) -> list[str]:
    """Where each symbolic link met while resolving the absolute ``path`` lies.

    Resolved as :func:`os.path.realpath` resolves it (``..`` physically, a
    missing component and what follows it lexically); each link's own place
    (its directory resolved), in the order met. At most 40 links are followed.
    """
    out: list[str] = []
    pending = [p for p in reversed(path.split("/")) if p]
    current = "/"
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            info = os.lstat(candidate)
        except (OSError, ValueError):
            current = candidate
            continue
        if not stat.S_ISLNK(info.st_mode):
            current = candidate
            continue
        out.append(candidate)
        if len(out) > _MAX_LINKS:
            break
        try:
            target = os.readlink(candidate)
        except OSError:  # pragma: no cover - replaced since the lstat
            current = candidate
            continue
        if target.startswith("/"):
            current = "/"
        pending += [p for p in reversed(target.split("/")) if p]
    return out


def protected_link_on_the_way(path: str, roots: Roots, protected: ProtectedPaths) -> str | None:
    """The protected entry a symbolic link met while resolving ``path`` is named by; else None.

    A link whose own name is protected (``svc/.envrc -> ../envrc.shared``,
    ``x/.git/config -> ../../.repo/projects/x.git/config``) makes what it leads
    to that entry: writing through it writes the protected name's content.
    Only links inside the roots count (``path`` absolute).
    """
    for link in links_on_the_way(path):
        for root in roots.paths:
            if _is_within(link, root) and link != root:
                entry = protected.match("/" + link[len(root) :].lstrip("/"))
                if entry is not None:
                    return entry
    return None


def protected_links_on_the_way(path: str, roots: Roots, protected: ProtectedPaths) -> list[str]:
    """Every link inside the roots met while resolving ``path`` whose own name is protected.

    ``path`` absolute; the links as met, absolute.
    """
    out: list[str] = []
    for link in links_on_the_way(path):
        for root in roots.paths:
            relative = "/" + link[len(root) :].lstrip("/")
            if _is_within(link, root) and link != root and protected.match(relative) is not None:
                out.append(link)
                break
    return out
