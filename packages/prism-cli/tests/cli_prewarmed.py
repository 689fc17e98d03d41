"""Fixture MCP servers started without paying for their imports each time.

Importing the MCP SDK costs a Python process about a CPU-second (its protocol
models are built at import), and many tests start a fixture server of their
own. A *warm parent* imports the server scripts' modules once; each start is
then a small relay process (``python -I -S THIS_FILE relay ...``, only the
standard library) that hands its stdin, stdout and stderr to the warm parent,
which forks a child that runs the script as ``__main__`` on exactly those
descriptors, in the relay's directory and environment. The server is
the real script on the very pipes its client made; only the imports were done
before.

The relay stands for the server to whoever started it: it exits when the
server exits, with its status (killed by the same signal when the server was),
passes SIGTERM, SIGINT, SIGHUP and SIGQUIT on to it, and when the relay itself
is killed the warm parent kills the server. The server is not the relay's
child, and its /proc/PID/environ is the warm parent's (os.environ is the
relay's): tests about the server *process* (its tree, its pid, what it
inherits) start the script directly instead.

Each package whose tests start such servers has its own copy of this file
(its tests run with only that package's dependencies): PACKAGE_prewarmed.py.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve()
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_HEAD = 4  # the request's length, big-endian, before its JSON


class WarmParent:
    """A warm parent process for ``scripts`` (paths, or ``-m NAME``; started by :meth:`start`)."""

    def __init__(self, *scripts: Path | str) -> None:
        self.scripts = scripts
        self._dir = tempfile.mkdtemp(prefix="prism-warm-")
        self.socket = os.path.join(self._dir, "s")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> WarmParent:
        argv = [sys.executable, str(HERE), "parent", self.socket, *map(str, self.scripts)]
        self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._process.stdout is not None
        ready = self._process.stdout.readline()
        assert ready == b"ready\n", ready
        return self

    def argv(self, script: Path | str, *args: str) -> list[str]:
        """The command that starts ``script ARGS`` from this parent (argv[0] the interpreter);
        ``script`` ``-m`` runs the module ARGS[0] as ``python -m`` does."""
        return [sys.executable, "-I", "-S", str(HERE), "relay", self.socket, str(script), *args]

    def stop(self) -> None:
        """End the parent and every server it started (closing its stdin tells it)."""
        process = self._process
        if process is not None:
            stdin: IO[bytes] | None = process.stdin
            if stdin is not None:
                stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        for name in os.listdir(self._dir):
            os.unlink(os.path.join(self._dir, name))
        os.rmdir(self._dir)


_scripts: tuple[Path | str, ...] = ()
_started: WarmParent | None = None
_parent_socket: str | None = None  # set in a warm parent (and so in the servers it forks)


def configure(*scripts: Path | str) -> None:
    """The scripts (a path) and modules (``-m NAME``) the session's warm parent imports
    for (set by conftest.py)."""
    global _scripts
    _scripts = scripts


def command(script: Path | str, *args: str) -> tuple[str, list[str]]:
    """``(command, args)`` that start ``script ARGS`` from the session's warm parent.

    The parent starts at the first call (its imports take a moment, once) and ends
    at :func:`stop_all`.
    """
    global _started
    if _started is None:
        _started = WarmParent(*_scripts).start()
    first, *rest = _started.argv(script, *args)
    return first, rest


def toml_command(script: Path | str, *args: str) -> str:
    """The ``command`` and ``args`` lines of a TOML server table that starts ``script
    ARGS`` from the session's warm parent (as :func:`command`)."""
    first, rest = command(script, *args)
    return f"command = {json.dumps(first)}\nargs = {json.dumps(rest)}\n"


def inherited_command(script: Path | str, *args: str) -> tuple[str, list[str]]:
    """Like :func:`command` in a server a warm parent started (its own parent's relay);
    elsewhere the plain ``python SCRIPT ARGS``."""
    if _parent_socket is None:
        return sys.executable, [str(script), *args]
    return sys.executable, ["-I", "-S", str(HERE), "relay", _parent_socket, str(script), *args]


def stop_all() -> None:
    """End the session's warm parent, if it started, and the servers it runs."""
    global _started
    if _started is not None:
        _started.stop()
        _started = None


def _relay(path: str, script: str, args: list[str]) -> None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def forward(signum: int, _frame: object) -> None:
        conn.sendall(f"{signum}\n".encode())

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    conn.connect(path)
    request = {"argv": [script, *args], "cwd": os.getcwd(), "env": dict(os.environ)}
    body = json.dumps(request).encode()
    fds = array.array("i", [0, 1, 2])
    head = len(body).to_bytes(_HEAD, "big")
    conn.sendmsg([head + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
    # The server holds the pipes now: the relay keeps none of them open.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    answer = conn.makefile("rb")
    line = answer.readline()
    code = int(line.split()[1]) if line.startswith(b"exit ") else 1
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int], bytes]:
    data, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    while len(data) < _HEAD or len(data) < _HEAD + int.from_bytes(data[:_HEAD], "big"):
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise EOFError("the relay left mid-request")
        data += chunk
    size = int.from_bytes(data[:_HEAD], "big")
    request = json.loads(data[_HEAD : _HEAD + size])
    return request, list(fds), data[_HEAD + size :]


def _run_child(request: dict[str, object], fds: list[int], keep_closed: list[int]) -> None:
    """In the forked child: become the script as ``python SCRIPT ARGS`` would run it."""
    import atexit
    import runpy
    import traceback

    code: int = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        for fd in keep_closed:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        argv = request["argv"]
        env = request["env"]
        cwd = request["cwd"]
        assert isinstance(argv, list)
        assert isinstance(env, dict)
        assert isinstance(cwd, str)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [str(a) for a in argv]
        try:
            if sys.argv[0] == "-m":  # as python -m: the module's file is argv[0] when it runs
                del sys.argv[0]
                sys.path[0] = cwd
                runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
            else:
                sys.path[0] = os.path.dirname(sys.argv[0])
                runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as exit_:
            if exit_.code is None:
                code = 0
            elif isinstance(exit_.code, int):
                code = exit_.code
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            code = -signal.SIGINT
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    finally:
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code & 0xFF)


def _parent(path: str, scripts: list[str]) -> None:
    import runpy

    # The servers it forks that import this module by its name get this one, which
    # knows the parent's socket (inherited_command).
    global _parent_socket
    _parent_socket = path
    sys.modules[HERE.stem] = sys.modules[__name__]
    import importlib

    for script in scripts:  # its imports, once (the script's own body runs under another name)
        if script.startswith("-m "):
            importlib.import_module(script[3:])
            continue
        saved = sys.path[:]
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="_prewarmed")
        sys.path[:] = saved
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listen")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    selector.register(0, selectors.EVENT_READ, "parent")
    servers: dict[int, socket.socket] = {}  # the server's pid: its relay
    relays: dict[socket.socket, tuple[int, bytes]] = {}  # a relay: its server, unread bytes
    os.write(1, b"ready\n")

    def forward(pid: int, data: bytes) -> bytes:
        *lines, rest = data.split(b"\n")
        for line in lines:
            if line.strip():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, int(line))
        return rest

    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not os.read(0, 4096):
                    for pid in servers:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    os._exit(0)
            elif key.data == "listen":
                conn, _ = listener.accept()
                try:
                    request, fds, rest = _receive(conn)
                except (OSError, EOFError, ValueError):
                    conn.close()
                    continue
                closed = [listener.fileno(), wake_read, wake_write, selector.fileno()]
                closed += [c.fileno() for c in relays] + [conn.fileno(), 0]
                pid = os.fork()
                if pid == 0:
                    _run_child(request, fds, [fd for fd in closed if fd not in fds])
                for fd in fds:
                    os.close(fd)
                servers[pid] = conn
                relays[conn] = (pid, forward(pid, rest))
                selector.register(conn, selectors.EVENT_READ, "relay")
            elif key.data == "relay":
                relay = key.fileobj
                assert isinstance(relay, socket.socket)
                pid, pending = relays[relay]
                try:
                    data = relay.recv(4096)
                except OSError:
                    data = b""
                if data:
                    relays[relay] = (pid, forward(pid, pending + data))
                    continue
                # The relay is gone (killed): so is its server.
                selector.unregister(relay)
                del relays[relay]
                relay.close()
                if pid in servers:
                    del servers[pid]
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            else:
                try:
                    while os.read(wake_read, 4096):
                        pass
                except BlockingIOError:
                    pass
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    waiting = servers.pop(pid, None)
                    if waiting is None:
                        continue
                    code = os.waitstatus_to_exitcode(status)
                    with contextlib.suppress(OSError):
                        waiting.sendall(f"exit {code}\n".encode())
                    selector.unregister(waiting)
                    del relays[waiting]
                    waiting.close()


if __name__ == "__main__":
    if sys.argv[1] == "relay":
        _relay(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif sys.argv[1] == "parent":
        _parent(sys.argv[2], sys.argv[3:])
    else:
        raise SystemExit(
            f"usage: {sys.argv[0]} relay SOCKET SCRIPT ARGS... | parent SOCKET SCRIPTS"
        )
