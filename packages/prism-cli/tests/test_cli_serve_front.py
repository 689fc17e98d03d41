"""``prism serve`` over stdio answers ``initialize`` before the gateway is imported (_front).

The early answer must be the gateway's own, byte for byte: each case is served
twice in this process, once answered early and once (a garbage line first, so
nothing is answered early) by the gateway alone, and the two answers compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio

from prism.cli import _front
from prism.cli._cmd_run import read_config
from prism.cli._listing import early_listing
from prism.cli._serve import _serve

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PING = b'{"jsonrpc":"2.0","id":"p","method":"ping"}\n'
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
LIST = b'{"jsonrpc":"2.0","id":"list","method":"tools/list"}\n'
ALL_CAPABILITIES = {
    "roots": {"listChanged": True},
    "sampling": {"context": {}, "tools": {}},
    "elicitation": {"form": {}, "url": {}},
}


def _initialize(request_id: Any = 1, version: str = "2025-11-25", **change: Any) -> bytes:
    params: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "host", "version": "1.0"},
    }
    params.update(change)
    message = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
    return json.dumps(message).encode() + b"\n"


@contextmanager
def _std_fds_on_pipes() -> Iterator[tuple[int, int]]:
    """fd 0 and 1 on pipes: the ends to write fd 0's input to and to read fd 1's output from."""
    to_stdin, stdin = os.pipe()
    stdout, from_stdout = os.pipe()
    saved = [os.dup(0), os.dup(1)]
    os.dup2(to_stdin, 0)
    os.dup2(from_stdout, 1)
    os.close(to_stdin)
    os.close(from_stdout)
    try:
        yield stdin, stdout
    finally:
        for fd, original in enumerate(saved):
            os.dup2(original, fd)
            os.close(original)


def _read_line(fd: int) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        assert chunk, "stdout closed"
        data += chunk
    return data


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    return data


@pytest.fixture
def plain_config(tmp_path: Path) -> Path:
    config = tmp_path / "prism.toml"
    config.write_text(f'[workspace]\nroots = ["{tmp_path}"]\ncoding_tools = false\n')
    return config


async def _served(config: Path, sent: bytes, *, front: bool, early_lines: int = 1) -> list[bytes]:
    """The lines ``prism serve``'s runner writes for ``sent`` (then EOF); early answers first.

    With ``front``, the listing is offered as ``_serve`` offers it, and
    ``early_lines`` lines are read before the gateway is made.
    """
    loaded = read_config(config)
    early = b""
    with _std_fds_on_pipes() as (stdin, stdout):
        os.write(stdin, sent)
        os.close(stdin)
        try:
            if front:
                _front.start(["serve", str(config)])
                _front.offer(lambda: early_listing(loaded))
            for _ in range(early_lines if front else 0):
                # Written before the gateway exists: nothing of it is running yet.
                with trio.fail_after(30):
                    early += await trio.to_thread.run_sync(
                        _read_line, stdout, abandon_on_cancel=True
                    )
            with trio.fail_after(30):
                await _serve(loaded, None, None)
        finally:
            _front.take()
    rest = _read_all(stdout)
    os.close(stdout)
    return (early + rest).splitlines(keepends=True)


@pytest.mark.parametrize(
    ("request_id", "version", "capabilities"),
    [
        (1, "2025-11-25", {}),
        ("init-1", "2025-06-18", ALL_CAPABILITIES),
        (0, "2025-03-26", {"roots": {}}),
        (-(2**53), "2024-11-05", {"sampling": {}}),
        (2**53, "2026-07-28", {}),  # not a handshake version: the latest one is answered
        ("", "1999-01-01", ALL_CAPABILITIES),
    ],
)
async def test_the_early_answer_is_the_gateways_and_is_written_once(
    plain_config: Path, request_id: Any, version: str, capabilities: dict[str, Any]
) -> None:
    initialize = _initialize(request_id, version, capabilities=capabilities)
    assert _front.answer_for(initialize.rstrip(b"\n")) is not None
    sent = initialize + INITIALIZED + LIST + PING
    early = await _served(plain_config, sent, front=True, early_lines=2)
    late = await _served(plain_config, b"garbage\n" + sent, front=False)
    assert json.loads(late[0])["error"]["code"] == -32700
    assert json.loads(late[1])["id"] == request_id
    assert json.loads(early[1]) == {"jsonrpc": "2.0", "id": "list", "result": {"tools": []}}
    # Answered once (the gateway's own answer to the same request dropped), same bytes.
    assert early == late[1:]
    assert json.loads(early[-1]) == {"jsonrpc": "2.0", "id": "p", "result": {}}


async def test_a_first_line_that_is_not_initialize_is_left_to_the_gateway(
    plain_config: Path,
) -> None:
    # A ping before initialize: the gateway answers it, then initialize, in order.
    sent = PING + _initialize() + PING
    lines = await _served(plain_config, sent, front=True, early_lines=0)
    assert [json.loads(x).get("id") for x in lines] == ["p", 1, "p"]
    assert json.loads(lines[1])["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize(
    "line",
    [
        _initialize(True),  # a bool id
        _initialize(1.0),
        _initialize(None),
        _initialize(2**53 + 1),
        _initialize("caf\u00e9"),  # escaped by json.dumps: a backslash
        _initialize(1).replace(b'"1.0"', '"\u00e9"'.encode()),  # raw UTF-8
        _initialize(1).replace(b'"host"', b'"h\\u0000"'),
        _initialize(1).replace(b'"id": 1', b'"id": 1, "id": 2'),
        _initialize(1).replace(b"\n", b"\r\n"),
        _initialize(1, _meta={}),
        _initialize(1, protocolVersion=5),
        _initialize(1, capabilities=[]),
        _initialize(1, capabilities={"roots": {"listChanged": 1}}),
        _initialize(1, capabilities={"sampling": {"context": {"x": 1}}}),
        _initialize(1, capabilities={"experimental": {}}),
        _initialize(1, capabilities={"roots": []}),
        _initialize(1, clientInfo={"name": "host"}),
        _initialize(1, clientInfo={"name": "host", "version": 1}),
        _initialize(1, clientInfo={"name": "h", "version": "1", "icons": []}),
        _initialize(1).replace(b'"initialize"', b'"initialized"'),
        _initialize(1).replace(b'"2.0"', b'"1.0"', 1),
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\n',
        b"[" + _initialize(1).rstrip() + b"]\n",
        b"[" * 100_000 + b"\n",
        b"not json\n",
        _initialize("x" * 20_000),
    ],
)
def test_only_plain_initialize_requests_are_answered_early(line: bytes) -> None:
    assert _front.answer_for(line.removesuffix(b"\n")) is None


def test_configurations_that_do_not_serve_at_once_get_no_early_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _front._config_allows(None)  # no prism.toml: the defaults
    assert not _front._config_allows("missing.toml")
    (tmp_path / "bad.toml").write_text("[workspace\n")
    assert not _front._config_allows("bad.toml")
    required = tmp_path / "required.toml"
    required.write_text(
        '[mcp.servers.a]\ncommand = "x"\n[mcp.servers.b]\ncommand = "y"\nrequired = true\n'
    )
    assert not _front._config_allows(str(required))
    (tmp_path / "prism.toml").write_text(required.read_text())
    assert not _front._config_allows(None)
    (tmp_path / "prism.toml").write_text('[mcp.servers.a]\ncommand = "x"\nrequired = false\n')
    assert _front._config_allows(None)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve"], (True, None)),
        (["serve", "a.toml"], (True, "a.toml")),
        (["serve", "--config", "a.toml", "--ledger", "l.jsonl"], (True, "a.toml")),
        (["serve", "--config=a.toml", "a.toml", "--stateless"], (True, "a.toml")),
        (["serve", "--approve-command", "./ok.sh", "b.toml"], (True, "b.toml")),
        (["serve", "a.toml", "--config", "b.toml"], (False, None)),
        (["serve", "a.toml", "b.toml"], (False, None)),
        (["serve", "--http", "127.0.0.1:0"], (False, None)),
        (["serve", "--http=127.0.0.1:0"], (False, None)),
        (["serve", "--help"], (False, None)),
        (["serve", "--config"], (False, None)),
        (["serve", "--unknown"], (False, None)),
    ],
)
def test_only_stdio_serving_is_answered_early(
    argv: list[str], expected: tuple[bool, str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRISM_CONFIG", raising=False)
    assert _front._config_argument(argv[1:]) == expected


def test_the_entry_point_and_the_early_listing_import_nothing_heavy(tmp_path: Path) -> None:
    # What `prism` loads before it can answer initialize: none of click, trio, the SDK or
    # Prism's packages; then what the listing (answering tools/list) adds: none of the SDK,
    # the policy machinery or the gateway. One process for both (a start is costly).
    config = _coding_config(tmp_path, "work")
    code = (
        "import sys, prism.cli; print(' '.join(sorted(sys.modules)))\n"
        "from pathlib import Path; from prism.cli._cmd_run import read_config\n"
        "from prism.cli._listing import early_listing\n"
        "assert early_listing(read_config(Path(sys.argv[1]))).startswith(b'[{')\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    first, then = subprocess.run(
        [sys.executable, "-c", code, str(config)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    loaded = first.split()
    heavy = [
        m
        for m in loaded
        if m.split(".")[0]
        in {"click", "trio", "mcp", "mcp_types", "attrs", "cattrs", "pydantic", "rich"}
    ]
    assert not heavy
    assert not [
        m for m in loaded if m.startswith("prism.") and m not in {"prism.cli", "prism.cli._main"}
    ]
    kinds = ("mcp", "mcp_types", "pydantic", "prism.coding.security", "prism.gateway", "prism.mcp")
    listed = then.split()
    assert "prism.coding.tools" in listed
    assert not [m for m in listed if m.split(".")[0] in kinds or m.startswith(kinds)]


def test_an_initialize_already_sent_is_answered_before_start_returns(plain_config: Path) -> None:
    # Nothing else is loaded meanwhile (the two threads would take turns at the interpreter).
    with _std_fds_on_pipes() as (stdin, stdout):
        os.write(stdin, _initialize(5))
        try:
            _front.start(["serve", str(plain_config)])
            os.set_blocking(stdout, False)
            answered = os.read(stdout, 65536)  # no wait: written already, or BlockingIOError
        finally:
            _front.take()
            os.close(stdin)
            os.close(stdout)
    assert json.loads(answered)["id"] == 5


def _coding_config(tmp_path: Path, root_name: str) -> Path:
    root = tmp_path / root_name
    root.mkdir()
    config = tmp_path / "coding.toml"
    quoted = json.dumps(str(root), ensure_ascii=False)
    config.write_text(f'[workspace]\nroots = [{quoted}]\nsandbox = "none"\n', encoding="utf-8")
    return config


@pytest.mark.parametrize(
    ("version", "root_name"),
    [
        ("2024-11-05", "work"),
        ("2025-11-25", 'w\u00f6rk "\t\\ \u2028 \U0001f600'),  # what JSON escapes, and what not
    ],
)
async def test_the_early_listing_of_the_coding_tools_is_the_gateways(
    tmp_path: Path, version: str, root_name: str
) -> None:
    config = _coding_config(tmp_path, root_name)
    listing = b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}\n'
    sent = _initialize(1, version) + INITIALIZED + LIST + listing + PING
    early = await _served(config, sent, front=True, early_lines=3)
    late = await _served(config, b"garbage\n" + sent, front=False)
    tools = json.loads(early[1])["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["read", "write", "edit", "shell"]
    assert root_name in tools[0]["description"]
    assert early == late[1:]


async def test_a_listing_that_cannot_be_told_early_is_left_to_the_gateway(tmp_path: Path) -> None:
    # A control character in the root: the wire form's escape is not guessed.
    config = _coding_config(tmp_path, "work\x01")
    assert early_listing(read_config(config)) is None
    lines = await _served(config, _initialize() + INITIALIZED + LIST + PING, front=True)
    assert [json.loads(x)["id"] for x in lines] == [1, "list", "p"]
    assert "work\x01" in json.loads(lines[1])["result"]["tools"][0]["description"]


async def test_the_front_stops_at_the_first_request_it_does_not_answer(
    plain_config: Path,
) -> None:
    # tools/list before notifications/initialized, and anything after a ping: the gateway's.
    for sent, early in (
        (_initialize() + LIST + INITIALIZED + PING, 1),
        (_initialize() + INITIALIZED + PING + LIST, 1),
    ):
        lines = await _served(plain_config, sent, front=True, early_lines=early)
        assert [json.loads(x)["id"] for x in lines] == [
            json.loads(x).get("id") for x in sent.splitlines() if b"notifications" not in x
        ]


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"x"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}',
        b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":"\\u0031","method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/lis"}',
        b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","x":1}',
        b'{"jsonrpc":"2.0","id":"' + b"x" * 2000 + b'","method":"tools/list"}',
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
        b"[" * 100_000,
    ],
)
def test_only_plain_tools_list_requests_are_answered_early(line: bytes) -> None:
    assert _front.list_request_id(line) is None


def test_plain_tools_list_requests_are_recognised() -> None:
    assert _front.list_request_id(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}') == 3
    spaced = b'{"method": "tools/list", "params": {}, "id": "a", "jsonrpc": "2.0"}'
    assert _front.list_request_id(spaced) == "a"


async def test_a_listing_request_reusing_an_answered_id_is_left_to_the_gateway(
    plain_config: Path,
) -> None:
    again = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
    lines = await _served(plain_config, _initialize(1) + INITIALIZED + again + PING, front=True)
    assert [json.loads(x)["id"] for x in lines] == [1, 1, "p"]
    assert json.loads(lines[1])["result"] == {"tools": []}


def _no_listing() -> bytes | None:
    raise RuntimeError("the listing could not be made")


def test_a_listing_that_fails_to_be_made_leaves_tools_list_to_the_gateway(
    plain_config: Path,
) -> None:
    sent = _initialize(5) + INITIALIZED + LIST
    with _std_fds_on_pipes() as (stdin, stdout):
        os.write(stdin, sent)
        try:
            _front.start(["serve", str(plain_config)])
            _front.offer(_no_listing)
        finally:
            read, answered = _front.take()
            os.close(stdin)
            os.close(stdout)
    assert read == sent
    assert answered is not None
    assert [json.loads(line)["id"] for line in answered.splitlines()] == [5]
