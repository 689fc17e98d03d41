"""``prism serve`` over stdio answers the host's first requests before it imports the gateway.

Importing what serving takes (the MCP SDK and its models, Prism's packages)
costs seconds of CPU, more on a busy machine, and hosts give the handshake
about 5 s. So from the moment the process starts, a thread waits for the
first line on stdin while the main thread imports and builds the gateway.
When that line is an ``initialize`` request of the plain shape hosts send, the
thread writes the answer the gateway would write: the same bytes, as the
gateway's answer depends on nothing but the request's id and the protocol
version it asks for (a test compares the two for every version).

The host's next requests, ``notifications/initialized`` and ``tools/list``,
are taken too: each plain ``tools/list`` is answered with the listing the
main thread offers once it has read the configuration (see ``_listing``:
the coding tools, as the gateway lists them before any MCP server is up).

The gateway, once serving, is handed the bytes read (see
``serve_stdio(read_ahead=..., answered=...)``): it serves those requests
as usual, so its session is the same, and writes no second answer (for a
listing that changed meanwhile, ``notifications/tools/list_changed``).
Anything else first (a garbage line, a request of another shape, a
2026-07-28 client's first request) is left for the gateway as it came, and
so is any later line the thread does not answer, and all after it.

Nothing heavy is imported here: this module runs before the rest of the
command line is loaded.
"""

from __future__ import annotations

import json
import os
import select
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Front", "answer_for", "list_request_id", "offer", "start", "take"]

# What the gateway says of itself (prism.gateway's Gateway: its SDK Server's options). A
# test serves the real gateway and compares its answer's bytes with answer_for's.
_INSTRUCTIONS = (
    "Prism: every tool call passes Prism's gates (permission, validation, "
    "execution policy, sandbox) before it runs."
)
_HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_LATEST = "2025-11-25"  # what the SDK answers a version it does not speak
_LONGEST_LINE = 16 * 1024
_FIRST_LINE_S = 1.0  # the longest start() waits for a first line begun before it ran
_LARGEST_ID = 2**53
# The most tools/list requests answered before the gateway serves (each answer blocks this
# thread until the host reads it, and the gateway waits for this thread).
_MOST_LISTINGS = 4
_CLIENT_INFO = frozenset({"name", "version", "title"})
_EMPTY_ONLY = {
    "sampling": frozenset({"context", "tools"}),
    "elicitation": frozenset({"form", "url"}),
}


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) != len(pairs):
        raise _Duplicate
    return made


def _plain_capabilities(capabilities: object) -> bool:
    """Client capabilities of the shapes hosts send, each one the SDK surely accepts."""
    if not isinstance(capabilities, dict):
        return False
    for name, value in capabilities.items():
        if not isinstance(value, dict):
            return False
        if name == "roots":
            if not set(value) <= {"listChanged"} or not all(
                type(flag) is bool for flag in value.values()
            ):
                return False
        elif name in _EMPTY_ONLY:
            if not set(value) <= _EMPTY_ONLY[name] or any(part != {} for part in value.values()):
                return False
        else:
            return False
    return True


def answer_for(line: bytes) -> bytes | None:
    """The gateway's answer line to ``line`` when it is a plain ``initialize`` request, else None.

    Plain: printable ASCII without escapes, no key twice, an integer or
    string id, and only the fields (and client capabilities) hosts send,
    each of the type the protocol gives it, so the SDK surely accepts it.
    Anything else returns None and is left to the gateway.
    """
    if len(line) > _LONGEST_LINE or b"\\" in line or not all(32 <= byte < 127 for byte in line):
        return None
    try:
        message = json.loads(line, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or set(message) != {"jsonrpc", "id", "method", "params"}:
        return None
    request_id, params = message["id"], message["params"]
    if message["jsonrpc"] != "2.0" or message["method"] != "initialize":
        return None
    if not (
        (type(request_id) is int and abs(request_id) <= _LARGEST_ID) or type(request_id) is str
    ):
        return None
    if not isinstance(params, dict) or set(params) != {
        "protocolVersion",
        "capabilities",
        "clientInfo",
    }:
        return None
    version, client = params["protocolVersion"], params["clientInfo"]
    if not isinstance(version, str) or not _plain_capabilities(params["capabilities"]):
        return None
    if (
        not isinstance(client, dict)
        or not {"name", "version"} <= set(client) <= _CLIENT_INFO
        or not all(isinstance(part, str) for part in client.values())
    ):
        return None
    result = {
        "capabilities": {"tools": {"listChanged": True}},
        "instructions": _INSTRUCTIONS,
        "protocolVersion": version if version in _HANDSHAKE_VERSIONS else _LATEST,
        "serverInfo": {"name": "prism-gateway", "version": "0.1.0"},
    }
    answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _config_allows(config: str | None) -> bool:
    """Whether ``prism serve`` with this configuration file answers at once.

    Not when the file is missing or not TOML (the command exits 2 without
    serving), nor when an MCP server is ``required`` (the command waits for it,
    and exits 2 when it does not start).
    """
    import tomllib

    if config is None:
        if not os.path.lexists("prism.toml"):
            return True
        config = "prism.toml"
    try:
        with open(config, "rb") as file:
            table = tomllib.load(file)
    except (OSError, ValueError):
        return False
    mcp = table.get("mcp", {})
    servers = mcp.get("servers", {}) if isinstance(mcp, dict) else None
    if not isinstance(servers, dict):
        return False
    return all(
        isinstance(server, dict) and server.get("required", False) is False
        for server in servers.values()
    )


class Front:
    """The thread that answers a host's first requests when they are plain.

    ``initialize`` first (when plain), then, once ``notifications/initialized``
    came, each plain ``tools/list`` with the listing :meth:`offer` gives (the
    thread waits for it). It stops at the first line it does not answer: that
    line and everything after it are the gateway's.
    """

    def __init__(self, config: str | None) -> None:
        self._config = config
        self._read = bytearray()
        self._taken = 0  # how much of _read the thread has looked at (whole lines)
        self._answers: list[bytes] = []
        self._wake_out, self._wake_in = os.pipe()
        self._offer_out, self._offer_in = os.pipe()
        self._listing: bytes | None = None
        self._request_id: object = None  # the initialize request's
        self._offered = False
        self._stopped = False
        self.decided = threading.Event()  # the first line answered, or left to the gateway
        self._thread = threading.Thread(
            target=self._run, name="prism serve: initialize", daemon=True
        )
        self._thread.start()

    @property
    def wants_listing(self) -> bool:
        """Whether :meth:`offer` may still be used (nothing was offered, the thread runs)."""
        return not self._offered and not self._stopped and self._thread.is_alive()

    def offer(self, listing: bytes | None) -> None:
        """The ``tools`` array (JSON) answering ``tools/list`` (None: the gateway answers it)."""
        self._listing = listing
        self._offered = True
        os.write(self._offer_in, b"x")

    def _run(self) -> None:
        try:
            self._answer_lines()
        finally:
            self.decided.set()

    def _next_line(self, poller: select.poll) -> bytes | None:
        """The next whole line from stdin (None: stopped, EOF, too long or unreadable)."""
        while b"\n" not in self._read[self._taken :]:
            if len(self._read) - self._taken > _LONGEST_LINE:
                return None
            if any(fd == self._wake_out for fd, _ in poller.poll()):
                return None
            chunk = os.read(0, 65536)
            if not chunk:
                return None
            self._read += chunk
        end = self._read.index(b"\n", self._taken)
        line = bytes(self._read[self._taken : end])
        self._taken = end + 1
        return line

    def _wait_listing(self) -> bytes | None:
        """The listing once offered (None: not offered before the thread was stopped)."""
        poller = select.poll()
        poller.register(self._wake_out, select.POLLIN)
        poller.register(self._offer_out, select.POLLIN)
        while not self._offered:
            if any(fd == self._wake_out for fd, _ in poller.poll()):
                return None
        return self._listing

    def _write(self, answer: bytes) -> None:
        _write_all(1, answer)
        self._answers.append(answer)

    def _answer_lines(self) -> None:
        poller = select.poll()
        poller.register(0, select.POLLIN)
        poller.register(self._wake_out, select.POLLIN)
        try:
            line = self._next_line(poller)
            answer = None if line is None else answer_for(line)
            if answer is None or not _config_allows(self._config):
                return
            self._request_id = json.loads(answer)["id"]
            self._write(answer)
            self.decided.set()
            # The host's next lines: notifications/initialized, then tools/list.
            line = self._next_line(poller)
            if line is None or not _is_initialized(line):
                return
            answered: set[tuple[type, object]] = {(type(self._request_id), self._request_id)}
            while len(answered) <= _MOST_LISTINGS and (line := self._next_line(poller)):
                request_id = list_request_id(line)
                if request_id is None or (type(request_id), request_id) in answered:
                    return  # (an id used again: the gateway's to judge)
                answered.add((type(request_id), request_id))
                listing = self._wait_listing()
                if listing is None:
                    return
                self._write(
                    b'{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}\n'
                    % (json.dumps(request_id).encode(), listing)
                )
        except OSError:
            return

    def stop(self) -> tuple[bytes, bytes | None]:
        """Stop reading; the bytes read from stdin and the answers written, if any."""
        self._stopped = True
        os.write(self._wake_in, b"x")
        self._thread.join()
        for fd in (self._wake_in, self._wake_out, self._offer_in, self._offer_out):
            os.close(fd)
        return bytes(self._read), b"".join(self._answers) or None


_INITIALIZED = (
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}',
)


def _is_initialized(line: bytes) -> bool:
    """Whether ``line`` is a plain ``notifications/initialized`` (any spacing)."""
    if len(line) > 200 or b"\\" in line or not all(32 <= byte < 127 for byte in line):
        return False
    try:
        message = json.loads(line, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return False
    return any(message == json.loads(plain) for plain in _INITIALIZED)


def list_request_id(line: bytes) -> int | str | None:
    """The id of ``line`` when it is a plain ``tools/list`` request (no cursor), else None.

    Plain: printable ASCII without escapes, no key twice, an integer or string
    id, no ``params`` or empty ones.
    """
    if len(line) > 1024 or b"\\" in line or not all(32 <= byte < 127 for byte in line):
        return None
    try:
        message = json.loads(line, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or not {"jsonrpc", "id", "method"} <= set(message) <= {
        "jsonrpc",
        "id",
        "method",
        "params",
    }:
        return None
    if message["jsonrpc"] != "2.0" or message["method"] != "tools/list":
        return None
    if message.get("params", {}) != {} or type(message.get("params", {})) is not dict:
        return None
    request_id = message["id"]
    if (type(request_id) is int and abs(request_id) <= _LARGEST_ID) or type(request_id) is str:
        return request_id
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_running: list[Front] = []


def _config_argument(args: list[str]) -> tuple[bool, str | None]:
    """Whether ``args`` (after ``serve``) serve stdio, and the configuration file they name."""
    positional: str | None = None
    option: str | None = None
    valued = {"--config", "--token-file", "--allow-origin", "--approve-command", "--ledger"}
    words = iter(args)
    for word in words:
        name, equals, value = word.partition("=")
        if word == "--stateless":
            continue
        if name in valued:
            if not equals:
                value = next(words, "")
                if not value:
                    return False, None
            if name == "--config":
                option = value
            continue
        if word.startswith("-") or positional is not None:
            return False, None  # --http, --help, anything unknown: click's to judge
        positional = word
    if positional is not None and option is not None and positional != option:
        return False, None
    chosen = positional or option or os.environ.get("PRISM_CONFIG") or None
    return True, chosen


def start(argv: list[str]) -> None:
    """Start answering ``initialize`` when ``argv`` is a ``prism serve`` over stdio."""
    if _running or not argv or argv[0] != "serve":
        return
    stdio, config = _config_argument(argv[1:])
    if not stdio:
        return
    # Hosts write initialize as soon as they start the process: when it is there already,
    # it is answered before anything else is loaded (the loading, on this thread, would
    # slow the answer down: the two threads take turns at the interpreter).
    waiting = select.poll()
    waiting.register(0, select.POLLIN)
    sent = bool(waiting.poll(0))
    front = Front(config)
    _running.append(front)
    if sent:
        front.decided.wait(_FIRST_LINE_S)


def offer(listing: Callable[[], bytes | None]) -> None:
    """Give the running front the ``tools`` array to answer ``tools/list`` with.

    ``listing`` is called (here, on the caller's thread) only when a front runs
    and still answers; what it returns (None: nothing) is answered to each plain
    ``tools/list`` the host sends before the gateway serves.
    """
    if _running and _running[-1].wants_listing:
        try:
            made = listing()
        except Exception:  # whatever went wrong, the gateway lists the tools itself
            made = None
        _running[-1].offer(made)


def take() -> tuple[bytes, bytes | None]:
    """Stop the front (when one runs): the bytes it read from stdin and the answers it wrote."""
    if not _running:
        return b"", None
    return _running.pop().stop()
