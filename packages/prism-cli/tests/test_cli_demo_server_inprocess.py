"""The demo MCP server in this process, through the MCP SDK's in-memory client session.

The stdio tests (test_cli_demo_server.py) run it as the subprocess ``prism demo`` starts,
where coverage cannot follow; these call each of its tools, and its option checks, here.
"""

import pytest
import trio
from mcp import Client
from mcp.types import TextContent

from prism.cli.demo_server import PAGES, build_server, main


def _text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert len(content) == 1
    assert isinstance(content[0], TextContent)
    text: str = content[0].text
    return text


async def test_every_tool_answers_in_process() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with trio.fail_after(30):
        async with Client(build_server(step_seconds=0)) as client:
            listed = await client.list_tools()
            found = await client.call_tool("search_docs", {"query": "ledger records", "limit": 2})
            missing = await client.call_tool("search_docs", {"query": "zzzqqq"})
            page = await client.call_tool("get_page", {"slug": "dispatch"})
            unknown = await client.call_tool("get_page", {"slug": "nope"})
            built = await client.call_tool(
                "build_index", {"pages": 7}, progress_callback=on_progress
            )
            deleted = await client.call_tool("delete_index", {})
            bad = await client.call_tool("search_docs", {"query": "x", "limit": 99})
    assert {tool.name for tool in listed.tools} == {
        "search_docs",
        "get_page",
        "build_index",
        "delete_index",
    }
    assert not found.is_error
    lines = _text(found).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("ledger (")
    assert not missing.is_error
    assert _text(missing) == "no pages match 'zzzqqq'"
    title, body = PAGES["dispatch"]
    assert _text(page) == f"# {title}\n\n{body}\n"
    assert unknown.is_error
    assert "no page 'nope'" in _text(unknown)
    assert all(slug in _text(unknown) for slug in PAGES)
    assert not built.is_error
    assert _text(built) == "indexed 7 pages"
    assert [p for p, _, _ in seen] == [float(n) for n in range(1, 8)]
    # Seven pages over five slugs: the sixth wraps round to the first page again.
    slugs = list(PAGES)
    assert [m for _, _, m in seen] == [f"indexed {slugs[n % len(slugs)]}" for n in range(7)]
    assert not deleted.is_error
    assert _text(deleted) == "index deleted"
    assert bad.is_error  # limit is at most 10: the SDK's argument validation refuses it


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--step-seconds", "-1"], "--step-seconds must be from 0 to 10"),
        (["--step-seconds", "11"], "--step-seconds must be from 0 to 10"),
        (["--http", "0"], "--http must be a port from 1 to 65535"),
        (["--http", "70000"], "--http must be a port from 1 to 65535"),
    ],
)
def test_main_refuses_out_of_range_options(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert named in capsys.readouterr().err
