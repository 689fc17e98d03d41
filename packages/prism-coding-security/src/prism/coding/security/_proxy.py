"""The host side of ``network="allowlist"``: an HTTP CONNECT proxy on a unix socket.

The sandbox has its own network namespace (only ``lo``). Inside it a small
bridge (``_bridge.py``) listens on ``127.0.0.1`` and forwards each connection
to this proxy's unix socket, which is bound into the sandbox. The proxy reads
one ``CONNECT host:port`` request, checks it against the allowlist, opens the
TCP connection from the host, answers ``200`` and then copies bytes both ways.
Anything else is answered ``403`` (not allowed) or ``405`` (not CONNECT: plain
``http://`` requests through the proxy are not supported).

The proxy connects from the host, so it never connects to the host itself: a
destination is resolved first, and when any address it resolves to is this
machine's own (loopback, unspecified, link-local, multicast, also written as
IPv6 around an IPv4 address) it is refused (``403``); otherwise the proxy
connects to the addresses it checked, never resolving the name again. The one
exception is a configured ``allowed_hosts`` entry that is itself such an
address literal (``127.0.0.1:8080``): the operator named exactly that address.
A host granted to one command never gets that exception.
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

__all__ = [
    "PROXY_SOCKET_NAME",
    "HostAllowlist",
    "granted_host_refusal",
    "host_own_address",
    "normalize_allowed_hosts",
    "serve_connect_proxy",
]

PROXY_SOCKET_NAME = "proxy.sock"
_MAX_HEAD = 8192
_HEAD_TIMEOUT_S = 30.0
_CONNECT_TIMEOUT_S = 30.0
_DEFAULT_PORTS = (80, 443)
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
# names a resolver answers with a loopback address (besides *.localhost)
_LOOPBACK_NAMES = frozenset({
    "localhost", "localhost.localdomain", "localhost6", "localhost6.localdomain6",
    "ip6-localhost", "ip6-loopback",
})  # fmt: skip


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64), or None."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    value = int(address)
    if 1 < value < 2**32:  # IPv4-compatible ::a.b.c.d (not :: and ::1)
        return ipaddress.IPv4Address(value)
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return None


def host_own_address(text: str) -> str | None:
    """What ``text`` is when it is an address of this machine itself, else None.

    Loopback, unspecified (``0.0.0.0/8``, ``::``), link-local, multicast, also
    written as an IPv6 address around an IPv4 one (``::ffff:7f00:1``).
    """
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    what = ""
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            found = host_own_address(str(inner))
            return None if found is None else f"{found} ({inner} written as IPv6)"
    elif address in _THIS_NETWORK:
        what = "this machine (unspecified)"
    if address.is_loopback:
        what = "this machine's loopback"
    elif address.is_unspecified:
        what = "this machine (unspecified)"
    elif address.is_link_local:
        what = "link-local"
    elif address.is_multicast:
        what = "multicast"
    return what or None


def granted_host_refusal(target: str) -> str | None:
    """Why ``host:port`` (``[v6]:port``) is never granted to one command; None: it can be.

    The proxy connects from this machine: a name or literal of this machine
    (``localhost``, ``*.localhost``, loopback, ``0.0.0.0``, link-local), an IPv4
    address written as IPv6 (mapped, compatible, 6to4, NAT64) and any other
    address that is not global (private, reserved) are refused.
    """
    try:
        host, _ = _split(target)
    except ValueError:
        return f"{target!r} is not host:port"
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return f"{host} names this machine itself, and the proxy connects from this machine"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    own = host_own_address(host)
    if own is not None:
        return f"{host} is {own}, and the proxy connects from this machine"
    inner = embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else None
    if inner is not None:
        return f"{host} is the IPv4 address {inner} written as IPv6; it is granted only as itself"
    if not address.is_global:
        return f"{host} is not a global address (private or reserved)"
    return None


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
    """Which ``host:port`` a CONNECT may reach (entries already normalised).

    ``entries``: configured (``allowed_hosts``); ``granted``: approved for one
    command. Only a configured address literal may be one of the host's own.
    """

    entries: tuple[str, ...]
    granted: tuple[str, ...] = ()

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host:port`` matches an entry (no port in the entry: 80 or 443)."""
        return _matches((*self.entries, *self.granted), host, port)

    def configured_address(self, host: str, port: int) -> bool:
        """Whether ``host`` is an address literal a configured entry names with ``port``."""
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return False
        return _matches(tuple(e for e in self.entries if "*" not in e), host, port)


def _matches(entries: tuple[str, ...], host: str, port: int) -> bool:
    host = host.lower().rstrip(".")
    with contextlib.suppress(ValueError):
        host = str(ipaddress.ip_address(host))
    for entry in entries:
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
                if allowlist.configured_address(host, port):
                    addresses, own = [host], None  # the operator named exactly this address
                else:
                    addresses = await _resolve(host, port)
                    own = next(((a, w) for a in addresses if (w := host_own_address(a))), None)
                if own is not None:
                    await _reply(
                        stream,
                        "403 Forbidden",
                        f"{host}:{port} is {own[0]}, {own[1]}: the proxy runs on the host and "
                        "never connects to the host itself",
                    )
                    return
                upstream = await _connect(addresses, port)
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


async def _resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now (a literal: itself), each once."""
    found = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


async def _connect(addresses: list[str], port: int) -> trio.SocketStream:
    """A connection to the first of ``addresses`` that answers (no name resolved again)."""
    error: OSError = OSError(f"no address to connect to for port {port}")
    for address in addresses:
        try:
            return await trio.open_tcp_stream(address, port)
        except OSError as exc:
            error = exc
    raise error


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
