"""Inside the sandbox, for ``network="allowlist"``: 127.0.0.1 -> the host's CONNECT proxy.

Run as ``python -I -S -c <this file's source> SOCKET FILTER_HEX -- PROGRAM ARGS...``
(the source is passed, not the path, because the package may live under a
directory the sandbox hides). It:

1. makes itself non-dumpable, so the command (same uid, no capabilities)
   cannot ptrace it or read its memory to borrow its unix socket access;
2. listens on ``127.0.0.1:<free port>`` in the sandbox's network namespace;
3. forks the command with ``HTTP(S)_PROXY``/``ALL_PROXY`` pointing there and
   ``NO_PROXY`` covering the loopback, after installing the seccomp filter
   (``PR_SET_NO_NEW_PRIVS`` first) in the child only;
4. forwards each accepted connection to the proxy's unix ``SOCKET``;
5. exits with the command's status (``128 + n`` for a signal) when it ends.

Standard library only. Any failure before the command starts exits 126.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import threading

_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
_NO_PROXY = "localhost,127.0.0.1,::1"


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _prctl(libc: ctypes.CDLL, *args: object) -> None:
    if libc.prctl(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl{args[:1]}: {os.strerror(err)}")


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the peer went away; the other direction ends on its own


def _forward(client: socket.socket, path: str) -> None:
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
        try:
            upstream.connect(path)
        except OSError:
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_forward, args=(client, path), daemon=True).start()


def main(args: list[str]) -> int:
    """Bridge, fork and exec the command; its exit status (126 if it never ran)."""
    if len(args) < 4 or args[2] != "--":
        print("prism sandbox bridge: bad arguments; not running the command", file=sys.stderr)
        return 126
    path, program, argv = args[0], bytes.fromhex(args[1]), args[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        _prctl(libc, _PR_SET_DUMPABLE, 0, 0, 0, 0)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
    except OSError as exc:
        print(f"prism sandbox bridge: {exc}; not running the command", file=sys.stderr)
        return 126
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = dict(os.environ)
    env.update(dict.fromkeys(_PROXY_VARIABLES, proxy))
    env["NO_PROXY"] = env["no_proxy"] = _NO_PROXY
    pid = os.fork()
    if pid == 0:
        try:
            listener.close()
            buffer = ctypes.create_string_buffer(program, len(program))
            fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
            _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            _prctl(libc, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.pointer(fprog), 0, 0)
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            print(f"prism sandbox bridge: {exc}; not running the command", file=sys.stderr)
        os._exit(126)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
