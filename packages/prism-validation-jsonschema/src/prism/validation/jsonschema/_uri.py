"""RFC 3986 references, resolved and normalised the generous way the analysis needs.

``uri_key`` maps every spelling of one resource the engine could merge
(case, percent-escapes, dot segments, default ports, IPv6 short forms,
relative resolution against the enclosing ``$id``) to one key, so two
``$id``s the engine would treat as one resource are seen as one here.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from urllib.parse import unquote

__all__ = ["DEFAULT_BASE", "uri_key"]

# The base the engine gives a document without an ``$id`` (jsonschema-rs).
DEFAULT_BASE = "json-schema:///"
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:")
# Ports the engine drops for some scheme (http and ws 80, https and wss 443,
# ftp 21); dropped for every scheme here, which only merges more.
_DEFAULT_PORTS = frozenset({80, 443, 21})
_PORT = re.compile(r":([0-9]*)$")


def _remove_dots(path: str) -> str:
    """RFC 3986 section 5.2.4 (dot segments), on an already case-folded path."""
    out: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1 or (out and out[0] != ""):
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)


def uri_key(uri: str, base: str = DEFAULT_BASE) -> str:
    """A generous normal form of ``uri`` resolved against ``base``.

    Two ``$id``s the engine could treat as one resource (its URI normalisation
    is case-insensitive in places, decodes percent-escapes, removes dot
    segments and default ports) always get the same key here; some it keeps
    apart get the same key too, which refuses a schema rather than missing a
    merge. ``base`` must itself be a key.
    """
    text = uri.partition("#")[0]
    for _ in range(4):  # percent-decoding is idempotent after a few rounds
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    text = text.casefold()
    if not _SCHEME.match(text):
        text = _join(base, text)
    scheme, _, rest = text.partition(":")
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        path = _remove_dots(slash + path) or "/"
        return f"{scheme}://{_authority(authority)}{path}"
    return f"{scheme}:{_remove_dots(rest)}"


def _authority(authority: str) -> str:
    """Port as a number (default ports dropped), IPv6 hosts in their short form."""
    port = _PORT.search(authority)
    if port is not None:
        authority = authority[: port.start()]
        digits = port.group(1)
        if digits and int(digits) not in _DEFAULT_PORTS:
            authority = authority + f":{int(digits)}"
    user, at, host = authority.rpartition("@")
    if host.startswith("[") and "]" in host:
        inner, _, tail = host[1:].partition("]")
        with contextlib.suppress(ValueError):
            inner = ipaddress.IPv6Address(inner).compressed
        host = f"[{inner}]{tail}"
    return f"{user}{at}{host}"


def _join(base: str, ref: str) -> str:
    """RFC 3986 section 5.2.2 for a reference without a scheme (dots removed later)."""
    scheme, _, rest = base.partition(":")
    authority = ""
    path = rest
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        authority, path = "//" + authority, slash + tail
    if ref.startswith("//"):
        return f"{scheme}:{ref}"
    if ref.startswith("/"):
        return f"{scheme}:{authority}{ref}"
    if ref == "" or ref.startswith("?"):
        return f"{scheme}:{authority}{path.partition('?')[0]}{ref}"
    directory = path.partition("?")[0].rpartition("/")[0]
    if authority and not directory:
        return f"{scheme}:{authority}/{ref}"
    if directory or authority:
        return f"{scheme}:{authority}{directory}/{ref}"
    return f"{scheme}:{ref}"
