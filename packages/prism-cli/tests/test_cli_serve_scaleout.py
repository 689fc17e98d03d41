"""``prism serve --stateless`` replicas behind nginx: no error, each call recorded once.

The test starts nginx itself (Debian's package; scripts/test installs it),
on 127.0.0.1, with a configuration in a temporary folder and no root-owned
state; without nginx on this machine it is skipped.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx2
import pytest
import trio

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import CliRunner

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
pytestmark = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (scripts/test installs it)"
)

REPLICAS = 2
CLIENTS = 20
CALLS_PER_CLIENT = 100
ACCEPT = "application/json, text/event-stream"

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log stderr notice;
{user}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream prism {{
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location /mcp {{
            proxy_pass http://prism;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUTF8"] = "1"
    env.pop("PRISM_GATEWAY_TOKEN", None)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _read_until(stream: trio.abc.ReceiveStream, marker: bytes, seen: bytes = b"") -> bytes:
    with trio.fail_after(60):
        while marker not in seen:
            chunk = await stream.receive_some(4096)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
    return seen


async def _replica(nursery: trio.Nursery, folder: Path, ledger: Path) -> tuple[trio.Process, int]:
    argv = [sys.executable, "-m", "prism.cli", "serve", "prism.toml", "--http", "127.0.0.1:0"]
    argv += ["--stateless", "--ledger", str(ledger)]
    run = functools.partial(
        trio.run_process, argv, cwd=folder, env=_env(), stdin=None, stderr=subprocess.PIPE,
        check=False,
    )  # fmt: skip
    proc: trio.Process = await nursery.start(run)
    assert proc.stderr is not None
    seen = await _read_until(proc.stderr, b"MCP endpoint ")
    seen = await _read_until(proc.stderr, b"\n", seen.split(b"MCP endpoint ", 1)[1])
    url = seen.split(b"\n", 1)[0].decode().strip()
    return proc, int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _nginx_folder(folder: Path, ports: list[int]) -> int:
    """nginx's configuration in ``folder``: a balancer over ``ports``; returns its own port."""
    folder.mkdir()
    port = _free_port()
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in ports)
    user = "user root;" if os.geteuid() == 0 else ""  # workers may then read the folder
    (folder / "nginx.conf").write_text(
        NGINX_CONF.format(dir=folder, servers=servers, port=port, user=user), encoding="utf-8"
    )
    return port


async def _nginx(nursery: trio.Nursery, folder: Path, ports: list[int]) -> tuple[trio.Process, int]:
    assert NGINX is not None
    port = _nginx_folder(folder, ports)
    argv = [NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-e", "stderr"]
    run = functools.partial(trio.run_process, argv, stdin=None, stderr=subprocess.PIPE, check=False)
    proc: trio.Process = await nursery.start(run)
    assert proc.stderr is not None
    # Logged once the listening socket is open and the worker runs.
    await _read_until(proc.stderr, b"start worker process")
    nursery.start_soon(_drain, proc.stderr)
    return proc, port


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(4096):
        pass


def _result(response: httpx2.Response) -> dict[str, object]:
    """The JSON-RPC message of a response (a JSON body or one SSE event)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        message = response.json()
    else:
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        message = json.loads(data[-1])
    assert isinstance(message, dict)
    return message


@pytest.mark.slow  # 2,000 calls: about 8 s of CPU time in all (replicas, nginx, clients)
async def test_stateless_replicas_behind_nginx_serve_every_call_once(
    tmp_path: Path, run_cli: CliRunner
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    total = CLIENTS * CALLS_PER_CLIENT
    (ws / "lines.txt").write_text("".join(f"line {i}\n" for i in range(1, total + 1)), "utf-8")
    (ws / "prism.toml").write_text(
        '[workspace]\nroots = ["."]\nsandbox = "none"\n', encoding="utf-8"
    )
    ledgers = [tmp_path / f"replica{n}.jsonl" for n in range(REPLICAS)]
    failures: list[str] = []
    async with trio.open_nursery() as nursery:
        replicas = [await _replica(nursery, ws, ledger) for ledger in ledgers]
        nginx, port = await _nginx(nursery, tmp_path / "nginx", [p for _, p in replicas])
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {
            "accept": ACCEPT,
            "content-type": "application/json",
            "mcp-protocol-version": "2025-11-25",
        }

        async def client(number: int) -> None:
            async with httpx2.AsyncClient(timeout=120, headers=headers) as http:
                for k in range(CALLS_PER_CLIENT):
                    line = number * CALLS_PER_CLIENT + k + 1
                    call = {
                        "jsonrpc": "2.0",
                        "id": line,
                        "method": "tools/call",
                        "params": {
                            "name": "read",
                            "arguments": {"path": "lines.txt", "offset": line, "limit": 1},
                        },
                    }
                    response = await http.post(url, json=call)
                    if response.status_code != 200:
                        failures.append(f"{line}: HTTP {response.status_code} {response.text}")
                        continue
                    result = _result(response).get("result")
                    text = json.dumps(result)
                    if not isinstance(result, dict) or result.get("isError"):
                        failures.append(f"{line}: {text}")
                    elif f"line {line}" not in text:
                        failures.append(f"{line}: wrong line: {text}")

        with trio.fail_after(600):
            async with trio.open_nursery() as clients:
                for number in range(CLIENTS):
                    clients.start_soon(client, number)
        for proc, _ in replicas:
            proc.terminate()
        nginx.terminate()
    assert failures == []
    shown = run_cli("ledger", "show", *map(str, ledgers), "--json")
    assert shown.returncode == 0, shown.stderr
    records = json.loads(shown.stdout)["records"]
    offsets = sorted(r["arguments"]["offset"] for r in records if r["tool_name"] == "read")
    assert offsets == list(range(1, total + 1))  # each call recorded exactly once
    assert {r["status"] for r in records} == {"ok"}
    # Both replicas served (nginx balanced the calls).
    per_replica = [
        sum('"tool_name": "read"' in line or '"tool_name":"read"' in line for line in lines)
        for lines in (ledger.read_text(encoding="utf-8").splitlines() for ledger in ledgers)
    ]
    assert all(count > 0 for count in per_replica), per_replica
    assert sum(per_replica) == total
