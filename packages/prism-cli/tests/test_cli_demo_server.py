import shutil
import sys
from pathlib import Path

import cli_prewarmed as prewarmed
import pytest
import trio
from mcp import Client, StdioServerParameters

from prism.cli import demo_server
from prism.cli.demo_server import PAGES

_TOOLS = ("search_docs", "get_page", "build_index", "delete_index")


def _params(step: str = "0.01") -> StdioServerParameters:
    command, args = prewarmed.command("-m", "prism.cli.demo_server", "--step-seconds", step)
    return StdioServerParameters(command=command, args=args)


async def test_demo_server_lists_its_tools_with_schemas_over_stdio() -> None:
    with trio.fail_after(30):
        async with Client(_params()) as client:
            listed = await client.list_tools()
    names = {tool.name: tool for tool in listed.tools}
    assert set(names) == set(_TOOLS)
    schema = names["search_docs"].input_schema
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["required"] == ["query"]


async def test_search_ranks_the_matching_page_first() -> None:
    with trio.fail_after(30):
        async with Client(_params()) as client:
            result = await client.call_tool("search_docs", {"query": "timeout retrying"})
    assert not result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("retries")


async def test_unknown_page_is_an_error_result_naming_the_known_pages() -> None:
    with trio.fail_after(30):
        async with Client(_params()) as client:
            result = await client.call_tool("get_page", {"slug": "nope"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "no page 'nope'" in text
    assert all(slug in text for slug in PAGES)


async def test_slow_tool_reports_progress_for_every_page() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with trio.fail_after(30):
        async with Client(_params()) as client:
            result = await client.call_tool(
                "build_index", {"pages": 3}, progress_callback=on_progress
            )
    assert not result.is_error
    assert [p for p, _, _ in seen] == [1.0, 2.0, 3.0]
    assert all(total == 3.0 for _, total, _ in seen)


def test_demo_server_refuses_a_silly_step_option() -> None:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "prism.cli.demo_server", "--step-seconds", "99"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "--step-seconds" in proc.stderr


async def test_the_prism_demo_server_command_serves_the_same_tools() -> None:
    # Installed beside the interpreter by prism-cli's [project.scripts].
    command = shutil.which("prism-demo-server", path=str(Path(sys.executable).parent))
    assert command is not None
    with trio.fail_after(30):
        async with Client(StdioServerParameters(command=command, args=[])) as client:
            listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == set(_TOOLS)


def test_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        demo_server.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: prism-demo-server")
    assert "``" not in out  # no reStructuredText markup
    assert "  get_page(slug)  " in out
    assert "--http PORT" in out
