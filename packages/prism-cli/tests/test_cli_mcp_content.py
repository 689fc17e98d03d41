"""`prism mcp call` shows every content kind, in human and --json output."""

import base64
import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CliRunner = Callable[..., subprocess.CompletedProcess[str]]

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

# A hand-written 2025-11-25 server with one tool per content kind.
SERVER_CODE = r"""
import json, sys

PNG = sys.argv[1]
RESULTS = {
    "image": {"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]},
    "link": {"content": [{"type": "resource_link", "uri": "file:///docs/a.md", "name": "a.md",
                          "mimeType": "text/markdown", "description": "the A doc"}]},
    "embedded": {"content": [
        {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain",
                                          "text": "the notes"}},
        {"type": "resource", "resource": {"uri": "file:///blob.bin",
                                          "mimeType": "application/octet-stream",
                                          "blob": "AAECAw=="}}]},
    "audio": {"content": [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]},
    "structured": {"structuredContent": {"answer": 42}},
    "hostile": {"content": [{"type": "resource_link", "uri": "file:///x\u001b[2J",
                             "name": "evil\u001b]0;title\u0007"}]},
}
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "kinds", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in RESULTS]}
    elif method == "tools/call":
        result = RESULTS[msg["params"]["name"]]
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": rid,
                          "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), flush=True)
"""


@pytest.fixture
def server(tmp_path: Path) -> str:
    script = tmp_path / "kinds_server.py"
    script.write_text(SERVER_CODE)
    return shlex.join([sys.executable, str(script), base64.b64encode(PNG).decode()])


def call(
    run_cli: CliRunner, server: str, tool: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_cli("mcp", "call", "--stdio", server, "--server-id", "kinds", tool, *extra)


def test_an_image_shows_its_type_and_size(run_cli: CliRunner, server: str) -> None:
    proc = call(run_cli, server, "image")
    assert proc.returncode == 0, proc.stderr
    assert f"[image image/png, {len(PNG)} bytes]" in proc.stdout


def test_a_resource_link_shows_its_uri_name_type_and_description(
    run_cli: CliRunner, server: str
) -> None:
    proc = call(run_cli, server, "link")
    assert proc.returncode == 0, proc.stderr
    assert "[resource link] file:///docs/a.md" in proc.stdout
    assert "name: a.md" in proc.stdout
    assert "text/markdown" in proc.stdout
    assert "the A doc" in proc.stdout


def test_embedded_resources_show_their_uri_and_text_or_size(
    run_cli: CliRunner, server: str
) -> None:
    proc = call(run_cli, server, "embedded")
    assert proc.returncode == 0, proc.stderr
    assert "[resource file:///notes.txt (text/plain)]" in proc.stdout
    assert "the notes" in proc.stdout
    assert "[resource file:///blob.bin (application/octet-stream), 4 bytes]" in proc.stdout


def test_audio_shows_its_type_and_size(run_cli: CliRunner, server: str) -> None:
    proc = call(run_cli, server, "audio")
    assert proc.returncode == 0, proc.stderr
    assert "[audio audio/wav, 4 bytes]" in proc.stdout


def test_a_result_with_only_structured_content_shows_it(run_cli: CliRunner, server: str) -> None:
    proc = call(run_cli, server, "structured")
    assert proc.returncode == 0, proc.stderr
    assert '"answer": 42' in proc.stdout


def test_control_characters_in_content_are_escaped(run_cli: CliRunner, server: str) -> None:
    proc = call(run_cli, server, "hostile")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    assert "\\x1b" in proc.stdout


def test_json_output_carries_every_block(run_cli: CliRunner, server: str) -> None:
    kinds = {}
    for tool in ("image", "link", "embedded", "audio"):
        proc = call(run_cli, server, tool, "--json")
        assert proc.returncode == 0, proc.stderr
        kinds[tool] = json.loads(proc.stdout)["content"]
    assert kinds["image"] == [
        {
            "type": "image",
            "mime_type": "image/png",
            "bytes": len(PNG),
            "data": base64.b64encode(PNG).decode(),
        }
    ]
    assert kinds["link"] == [
        {
            "type": "resource_link",
            "uri": "file:///docs/a.md",
            "name": "a.md",
            "mime_type": "text/markdown",
            "description": "the A doc",
        }
    ]
    assert [block["type"] for block in kinds["embedded"]] == ["resource", "resource"]
    assert kinds["embedded"][0]["text"] == "the notes"
    assert kinds["embedded"][1]["bytes"] == 4
    assert kinds["audio"][0]["type"] == "audio"
    assert kinds["audio"][0]["mime_type"] == "audio/wav"
