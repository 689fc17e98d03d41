"""A small, real MCP server that ships with prism-cli: ``prism-demo-server``.

Start it with the ``prism-demo-server`` command that prism-cli installs, or as
``<the interpreter prism is installed in> -m prism.cli.demo_server`` (from
Python: ``[sys.executable, "-m", "prism.cli.demo_server"]``).

It speaks MCP over stdio (``mcp.server.mcpserver.MCPServer``, run under trio)
and serves a handful of realistic tools over an embedded set of Prism doc
pages, so ``prism demo`` and the tests have a server to talk to with no
network and no setup:

- ``search_docs(query, limit=3)``: ranked page titles and snippets for a query.
- ``get_page(slug)``: one page's full text.
- ``build_index(pages=5)``: a slow tool that reports progress once per page.
- ``delete_index()``: a destructive tool the demo's permission rules refuse.

Options: ``--step-seconds S`` sets ``build_index``'s pause per page (default 0.2);
``--http PORT`` serves Streamable HTTP on ``http://127.0.0.1:PORT/mcp`` instead of
stdio (loopback only; the SDK's HTTP server runs on uvicorn, so that mode uses the
SDK's own runner rather than trio). The server only reads its embedded pages; it
touches no files and makes no outgoing connections.
"""

import argparse
import sys
from typing import Annotated

import anyio
import trio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

__all__ = ["PAGES", "build_server", "main"]

PAGES: dict[str, tuple[str, str]] = {
    "dispatch": (
        "The dispatch lifecycle",
        "Every tool call passes the same gates in a fixed order: call middleware, registry "
        "lookup and filters, the arguments-are-an-object check, the permission policy, the "
        "argument validator, then execute, result middleware, events and the ledger. A "
        "blocked call never reaches execute; it still gets an error result the model can read.",
    ),
    "parallel": (
        "Parallel tool calls",
        "One turn's calls run in one trio nursery with at most concurrency in flight. "
        "Results land in slots by call index, so the transcript keeps the model's order. "
        "A turn holding an exclusive tool (the shell) runs one call at a time.",
    ),
    "retries": (
        "Timeouts and retries",
        "MCP calls time out after call_timeout_s of silence; each progress notification "
        "restarts that clock, and max_call_s is a hard ceiling. A timed-out call gets an error "
        "result and the server is told to cancel. Retrying is the host's decision, never "
        "implicit, because tools may have side effects.",
    ),
    "security": (
        "Security model",
        "Permission policies decide by name (tool:<name>:execute). Execution policies see "
        "paths and commands: coding tools are contained in their roots by realpath, "
        "dangerous commands are denied and metacharacters need approval. Schemas from MCP "
        "servers are untrusted input with size, depth and $ref limits.",
    ),
    "ledger": (
        "The run ledger",
        "Each dispatched call leaves one record: call id, tool, redacted arguments, status "
        "(ok, error, blocked, cancelled), the blocked reason, timings and a result preview. "
        "The ledger exports as JSON lines; prism ledger show prints it as a table.",
    ),
}


def _score(query: str, title: str, body: str) -> int:
    words = [w for w in query.lower().split() if w]
    text = f"{title} {body}".lower()
    return sum(text.count(w) for w in words) + sum(3 for w in words if w in title.lower())


def build_server(*, step_seconds: float = 0.2) -> MCPServer:
    """The demo server, not yet running (tests may serve it in-process)."""
    server = MCPServer("prism-demo-docs", version="0.1.0", log_level="WARNING")

    @server.tool(description="Search the Prism docs; returns ranked titles with a snippet each.")
    def search_docs(
        query: Annotated[str, Field(description="words to look for", min_length=1)],
        limit: Annotated[int, Field(description="most results to return", ge=1, le=10)] = 3,
    ) -> str:
        ranked = sorted(
            ((s, slug) for slug, (t, b) in PAGES.items() if (s := _score(query, t, b)) > 0),
            reverse=True,
        )[:limit]
        if not ranked:
            return f"no pages match {query!r}"
        lines = []
        for score, slug in ranked:
            title, body = PAGES[slug]
            lines.append(f"{slug} ({score}): {title}: {body[:80]}...")
        return "\n".join(lines)

    @server.tool(description="Return one docs page by its slug.")
    def get_page(
        slug: Annotated[str, Field(description="page slug, as search_docs lists it")],
    ) -> str:
        if slug not in PAGES:
            raise ToolError(f"no page {slug!r}; known: {', '.join(sorted(PAGES))}")
        title, body = PAGES[slug]
        return f"# {title}\n\n{body}\n"

    @server.tool(description="Rebuild the search index; slow, reports progress per page.")
    async def build_index(
        ctx: Context,
        pages: Annotated[int, Field(description="pages to index", ge=1, le=50)] = 5,
    ) -> str:
        slugs = list(PAGES)
        for done in range(1, pages + 1):
            # anyio, not trio: the tool must also run under the SDK's HTTP runner.
            await anyio.sleep(step_seconds)
            slug = slugs[(done - 1) % len(slugs)]
            await ctx.report_progress(done, pages, f"indexed {slug}")
        return f"indexed {pages} pages"

    @server.tool(description="Delete the search index (destructive).")
    def delete_index() -> str:
        return "index deleted"

    return server


_HELP = """\
A small, real MCP server that ships with the prism command: a handful of tools
over an embedded set of Prism doc pages, so `prism demo` and the docs' examples
have a server to talk to with no network and no setup. It speaks MCP over stdio
unless --http is given (loopback only). It only reads its embedded pages: it
touches no files and makes no outgoing connections.

tools:
  search_docs(query, limit=3)  ranked page titles and snippets for a query
  get_page(slug)               one page's full text
  build_index(pages=5)         a slow tool that reports progress once per page
  delete_index()               a destructive tool the demo's permission rules refuse
"""


def main(argv: list[str] | None = None) -> int:
    """Serve the demo tools over stdio until stdin closes."""
    parser = argparse.ArgumentParser(
        prog="prism-demo-server",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=0.2,
        metavar="S",
        help="build_index's pause per page, 0 to 10 (default 0.2)",
    )
    parser.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve Streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio",
    )
    options = parser.parse_args(argv)
    if not 0 <= options.step_seconds <= 10:
        parser.error(f"--step-seconds must be from 0 to 10, got {options.step_seconds}")
    if options.http is not None and not 1 <= options.http <= 65535:
        parser.error(f"--http must be a port from 1 to 65535, got {options.http}")
    server = build_server(step_seconds=options.step_seconds)
    if options.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        trio.run(server.run_stdio_async)
    return 0


if __name__ == "__main__":
    sys.exit(main())
