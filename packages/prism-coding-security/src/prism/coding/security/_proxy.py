"""The host side of ``network="allowlist"``: an HTTP CONNECT proxy on a unix socket.

The sandbox has its own network namespace (only ``lo``). Inside it a small
bridge (``_bridge.py``) listens on ``127.0.0.1`` and forwards each connection
to this proxy's unix socket, which is bound into the sandbox. The proxy reads
one ``CONNECT host:port`` request, checks it against the allowlist, opens the
TCP connection from the host, answers ``200`` and then copies bytes both ways.
Anything else is answered ``403`` (not allowed) or ``405`` (not CONNECT: plain
``http://`` requests through the proxy are not supported).
"""

from __future__ import annotations

import contextlib
import fnmatch
import ipaddress
import os
import shutil
import tempfile
from typing import TYPE_CHECKING

import attrs
import trio

from prism.core import ConfigurationError
from prism.core.options import sequence_of, string

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["PROXY_SOCKET_NAME", "HostAllowlist", "normalize_allowed_hosts", "serve_connect_proxy"]

PROXY_SOCKET_NAME = "proxy.sock"
_MAX_HEAD = 8192
_HEAD_TIMEOUT_S = 30.0
_CONNECT_TIMEOUT_S = 30.0
_DEFAULT_PORTS = (80, 443)


def _split(entry: str) -> tuple[str, int | None]:
    host, port = entry, None
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            raise ValueError("unclosed [")
        host, rest = entry[1:close], entry[close + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError("text after ]")
            port = int(rest[1:])
    elif entry.count(":") == 1:
        host, _, text = entry.partition(":")
        port = int(text)
    if port is not None and not 0 < port < 65536:
        raise ValueError("port out of range")
    return host.lower().rstrip("."), port


def normalize_allowed_hosts(
    value: Iterable[str], *, option: str = "BubblewrapSandbox.allowed_hosts"
) -> tuple[str, ...]:
    """Check ``allowed_hosts`` entries: ``host``, ``*.domain``, ``host:port``, ``[v6]:port``.

    Raises:
        ConfigurationError: (naming ``option`` and the value) ``value`` is not a
            sequence of strings, or an entry is malformed.
    """
    owner, _, name = option.rpartition(".")
    sequence_of(string()).check(owner, name, value)
    out: list[str] = []
    for item in value:
        problem = None
        if any(ch in item for ch in " /\x00@"):
            problem = "must be host[:port]"
        else:
            try:
                host, _ = _split(item)
            except ValueError as exc:
                problem = str(exc)
            else:
                if not host or host == "*" or ("*" in host and not host.startswith("*.")):
                    problem = "a wildcard only as a leading '*.'"
        if problem is not None:
            raise ConfigurationError(
                f"{option} entry {item!r}: {problem}", option=option, value=value
            )
        if item not in out:
            out.append(item)
    return tuple(out)


@attrs.frozen
class HostAllowlist:
    """Which ``host:port`` a CONNECT may reach (entries already normalised)."""

    entries: tuple[str, ...]

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host:port`` matches an entry (no port in the entry: 80 or 443)."""
        host = host.lower().rstrip(".")
        with contextlib.suppress(ValueError):
            host = str(ipaddress.ip_address(host))
        for entry in self.entries:
            pattern, allowed_port = _split(entry)
            ports = (allowed_port,) if allowed_port is not None else _DEFAULT_PORTS
            if port not in ports:
                continue
            if pattern.startswith("*."):
                if fnmatch.fnmatchcase(host, pattern) and host.count(".") >= 1:
                    return True
                continue
            with contextlib.suppress(ValueError):
                pattern = str(ipaddress.ip_address(pattern))
            if host == pattern:
                return True
        return False


def _target(text: str) -> tuple[str, int] | None:
    try:
        host, port = _split(text)
    except ValueError:
        return None
    if not host or port is None:
        return None
    return host, port


async def _read_head(stream: trio.SocketStream) -> tuple[bytes, bytes] | None:
    data = b""
    with trio.move_on_after(_HEAD_TIMEOUT_S):
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(_MAX_HEAD)
            if not chunk:
                return None
            data += chunk
            if len(data) > _MAX_HEAD:
                return None
        head, _, rest = data.partition(b"\r\n\r\n")
        return head, rest
    return None


async def _reply(stream: trio.SocketStream, status: str, text: str) -> None:
    body = f"prism sandbox proxy: {text}\n".encode()
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(head.encode() + body)


async def _pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        while chunk := await source.receive_some(65536):
            await sink.send_all(chunk)
        await sink.send_eof()


async def _handle(stream: trio.SocketStream, allowlist: HostAllowlist) -> None:
    # A client or server that goes away ends its connection, never the proxy.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await _serve_one(stream, allowlist)


async def _serve_one(stream: trio.SocketStream, allowlist: HostAllowlist) -> None:
    async with stream:
        request = await _read_head(stream)
        if request is None:
            return
        head, rest = request
        words = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(words) != 3 or words[0] != "CONNECT":
            await _reply(stream, "405 Method Not Allowed", "only CONNECT (https) is proxied")
            return
        target = _target(words[1])
        if target is None:
            await _reply(stream, "400 Bad Request", f"bad CONNECT target {words[1]!r}")
            return
        host, port = target
        if not allowlist.allows(host, port):
            await _reply(stream, "403 Forbidden", f"{host}:{port} is not in allowed_hosts")
            return
        try:
            with trio.fail_after(_CONNECT_TIMEOUT_S):
                upstream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            await _reply(stream, "502 Bad Gateway", f"cannot reach {host}:{port}: {exc}")
            return
        async with upstream:
            await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                await upstream.send_all(rest)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_pump, stream, upstream)
                nursery.start_soon(_pump, upstream, stream)


async def serve_connect_proxy(
    allowlist: HostAllowlist,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the proxy on ``<new private dir>/proxy.sock``; start with that directory.

    For ``nursery.start``. Runs until cancelled; then every connection is
    closed and the directory removed (shielded).

    Raises:
        OSError: the socket could not be created.
    """
    directory = await trio.to_thread.run_sync(tempfile.mkdtemp, "", "prism-proxy-")
    try:
        with trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM) as sock:
            await sock.bind(os.path.join(directory, PROXY_SOCKET_NAME))
            sock.listen(64)
            listener = trio.SocketListener(sock)

            async def handler(stream: trio.SocketStream) -> None:
                await _handle(stream, allowlist)

            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, handler, [listener])
                task_status.started(directory)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, directory, True)
