"""What the gateway adds to a tool call: the same call through ``prism serve`` and direct.

Every row is the official MCP SDK client calling a tool over stdio (the last
one over HTTP), measured in one run with the samples interleaved. The tools:
``echo`` on the gateway tests' server (packages/prism-gateway/tests/
gateway_fixture_server.py), and the gateway of packages/prism-gateway/tests/
gateway_stdio_main.py, which bridges that server and offers its own tools
(arguments checked by the JSON Schema validator, as ``prism serve`` does).

1. direct: the client calls the server's ``echo`` (the baseline: one MCP hop).
2. gateway, local tool: the gateway's in-process ``local_echo`` (the same work
   as the server's echo) through every gate; one MCP hop, so this row is the
   gateway's own cost against a bare SDK server's.
3. gateway, ``read``: a coding tool (file read, contained), one MCP hop.
4. SDK relay: a bare low-level SDK server that forwards each call to the
   server with the SDK client (this script run with ``--relay``): two MCP
   hops and no Prism code, the floor for any MCP proxy built on the SDK.
4b. byte relay: a process that copies bytes between the client's pipes and
   the server's, parsing nothing (``--pipe-relay``): the cost of the second
   process hop alone, the floor for any proxy at all.
4c. JSON relay: the byte relay, but every message is parsed (``json.loads``)
   and written again (``json.dumps``), nothing else (``--json-relay``): the
   floor for a Python proxy that reads what it forwards.
4d. shape floor: a stand-in for the gateway that does only what a bridged
   call must, Prism's gates, ledger record and events called inline by the
   two pipes' reader tasks, nothing else per call (``--shape-floor``, see
   ``_shape_floor``): the floor of a gateway in that shape.
4e. the same work in today's shape, a task and two cancel scopes per call
   (``--shape-floor-tasks``).
5. gateway, bridged: ``mcp__fx__echo`` through every gate and prism-mcp's
   bridge: two MCP hops. The issue's target is <= 1.2x the direct call.
5b. the same gateway with its fast paths turned off (this script run with
   ``--gateway-sdk-path``): every request through the SDK's whole server path
   and every bridged call through the SDK client's ``call_tool`` (rows 2 and
   5 as they were before the fast paths), the baseline of what they save.
5c. the same gateway with only the bridge's direct stdio calls off
   (``--gateway-no-direct``): its calls to the server through the SDK
   client's dispatcher, everything else as in row 5.
6. the same bridged call over Streamable HTTP (gateway in this process).

Then ``prism serve`` itself, as a host meets it:

7. time to ``initialize`` with 0, 1 and 5 downstream MCP servers that each
   take ``SLOW_START_S`` to start (this script run with ``--slow-server``):
   from the gateway serving (a first garbage line has been answered with a
   parse error) to the ``initialize`` answer, and from spawning the process;
   the same with the 5 servers ``required = true`` (the old, all-or-nothing
   start) for comparison.
7b. spawn -> ``initialize`` as a host meets it (``initialize`` written at
   once, the first line): ``prism serve`` answers it before loading the
   gateway, wall and CPU of the process to the first byte of the answer,
   against ``python -c "import mcp"`` (the floor of any server built on the
   SDK) in the same run.
7c. spawn -> each of a host's first requests (``--first-requests``): the
   ``initialize`` answer, the ``tools/list`` answer (sent once ``initialize``
   is answered, after ``notifications/initialized``) and a first
   ``tools/call`` (the coding tool ``read``; a bridged ``echo`` once the
   listing offers it), wall and the gateway process's CPU, for ``prism
   serve`` with no tools, with the coding tools, and with the coding tools
   and 4 MCP servers, against ``python -c "import mcp"`` in the same run;
   with ``--against TREE``, the same from that checkout's ``prism serve``,
   the two taking turns.
8. memory per idle HTTP session: the RSS a ``prism serve --http`` process
   grows by while ``SESSIONS`` sessions are opened and left idle.

The note gives the CPU time each process spent per call, read from /proc:
the middle process (the server of row 1, the gateway, the relay), the server
behind it, and the client (this process). CPU time is less noisy than wall
time on a shared machine, and it separates the gateway's own work from the
time it waits for the bridged server.

Each compared row's note also gives its ratio to the direct call per round
(every round times each case once, one right after the other, so load that
moved under both cancels out): the median and the middle half.

Run: ``uv run python benchmarks/bench_gateway.py [--json] [--quick]`` (``--calls``,
``--startup`` or ``--sessions``: only rows 1-6, 7 or 8; ``--fast-paths``: only
rows 1, 2 and 5 with and without the fast paths, twice the samples;
``--ratios``: only rows 1, 4b-4e and the bridged rows 5, 5b and 5c, three
times the rounds; ``--floors``: the CPU per call of rows 4c, 4d, 4e and 5
side by side, see ``floor_rows``; ``--stages``: the gateway's CPU per bridged call taken
apart stage by stage in its own process, see ``_probed_gateway``;
``--first-requests``: only row 7c (with ``--against TREE``: beside that
checkout's); ``--against TREE``: this checkout's gateway and the gateway of another
checkout side by side, bridged calls only, see ``against_rows``).

Rows 1-6 (``--calls --quick``) on the shared 2-core machine, quiet (load
average 0.2-0.8; wall median vs the direct call, then per round with its
middle half; CPU µs per call of the middle process, the server behind it,
the client), and the ``--ratios --quick`` rows right after it:

    case                       --calls                           --ratios
    direct                     1.53 ms      1000/-/625           1.32 ms      929/-/493
    local_echo                 0.43x 0.45x  143/-/348
    local_echo, fast path off  0.53x 0.62x  714/-/334
    read (coding tool)         0.83x 1.06x  1071/-/377
    bare SDK relay             1.80x 2.32x  1643/1071/664
    byte relay                 0.85x 0.95x  143/786/492          1.09x 1.09x  190/929/456
    JSON relay                 0.93x 1.01x  214/786/487          1.15x 1.14x  238/929/458
    bridged                    1.39x 1.65x  857/929/574          1.55x 1.56x  714/952/490
    bridged, fast paths off    1.59x 2.03x  1000/1071/606        1.78x 1.78x  976/1000/500
    bridged, direct calls off  1.43x 1.75x  786/1071/552         1.67x 1.67x  833/1024/513
    bridged over HTTP          3.66x 3.75x

Before the gateway answered stdio calls on its own request path (a
``--ratios --quick`` run at load 0.3-5): bridged 1.75x per round, the
gateway's CPU 1262 µs per call against 1643 with the fast paths off.

The bridged target (<= 1.2x) is not met yet. The gateway now answers a
bridged stdio call from its two pipes' readers, with no task per call (the
shape the floors below measure); its CPU per call is still about 1.4x the
floor's. Function calls per bridged call in the gateway's process (a
profile's count over 1,000 calls after 300, which load does not move):
1,091 before the earlier cuts, 881 with a task per call, 614 now.
``--against`` the tree before (8 rounds of 400 calls, load 12.6-18): the
gateway's CPU per bridged call 988 µs (850-1250) against 1362 (1050-1825),
0.70 per round (0.63-0.93); per round against the direct call 1.58x
against 1.83x. ``--floors`` (8 rounds of 400 calls, load 10.3-13.8, so two
to three times a quiet machine's CPU; function calls per call, CPU µs per
call as medians, then per round against the floor):

    process between client and server      calls  CPU    vs the floor
    JSON relay                               335  638    0.68
    shape floor (gates inline, 2 readers)    504  950    1
    the same, a task per call                678  1150   1.20
    gateway, bridged (readers answer)        614  1313   1.43
    gateway, bridged, a task per call        881         1.75-1.91 (earlier runs)

A ``--ratios --quick`` run at load 10.8-17, per round against the direct
call: JSON relay 0.96x, shape floor 1.19x, with a task per call 1.27x, the
gateway 1.63x (middle half 1.12-2.28; an earlier run at load 10.8-12.9,
before the readers answered: 0.92x, 1.13x, 1.31x, 1.58x). ``--stages``
probes the path of calls that take a task (the readers' path has no
stages of its own to probe). docs/gateway.md ("Performance") says what
the gateway does beyond the floor.

Row 7b (``--startup --quick``, 3 rounds, load 11.9 with a test suite running
beside it; medians, range): ``prism serve`` answers ``initialize`` before it
loads the gateway, in about a thirtieth of the CPU the SDK's import alone
takes. Before, the answer came after the whole load, as the rows "spawn ->
initialize" (a garbage line first, so the gateway answers) still show:
10.8-19.6 s wall at this load.

    case                                          wall                      CPU
    python -c "import mcp" (the floor)            8.23 s (5.57-10.32)      1.11 s (0.89-1.17)
    prism serve, 5 servers starting               337 ms (159-536)         40 ms (40-50)
    prism serve, coding tools only                313 ms (186-749)         40 ms (20-50)

Row 7c (``--first-requests --against TREE``, TREE the checkout before
``tools/list`` was answered early; 5 rounds, load 13-22 with other work;
medians, range; CPU is the gateway process's own). ``prism serve`` answers
``tools/list`` as soon as the configuration is read, before the MCP SDK,
the gateway and the policy machinery are imported (before: once the gateway
was loaded). The first ``tools/call`` still waits for the whole load (a
bridged one also for its server: the 4 servers start once the gateway is
loaded).

    spawn -> tools/list         CPU, now          CPU, before        wall, now          wall, before
    python -c "import mcp"      1.11 s (0.86-1.19)                   6.70 s (4.04-11.4)
    no tools                    370 ms (270-390)  1.65 s (1.58-1.89) 2.11 s (1.31-4.10) 8.87 s
    coding tools                350 ms (330-440)  1.75 s (1.55-1.98) 1.88 s (1.53-2.98) 10.4 s
    4 servers + coding tools    400 ms (350-470)  1.66 s (1.31-2.14) 2.75 s (1.90-3.52) 10.4 s

    spawn -> first tools/call   CPU, now           CPU, before
    coding tools, read          1.69 s (1.44-1.95) 1.75 s (1.56-1.99)
    4 servers, bridged echo     1.90 s (1.57-1.98) 1.72 s (1.38-2.17)

``initialize``: 30-60 ms of CPU in both. What ``tools/list`` still waits
for is reading the configuration: ``prism.core`` (trio, attrs classes) and
cattrs. What the first ``tools/call`` waits for, past the SDK's own import,
is mostly ``prism.coding.security``'s command-judging machinery (about a
third of Prism's share in ``python -X importtime``), which a ``read`` does
not use.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from _harness import Row, row, run
from mcp import Client, StdioServerParameters

from prism.core import ToolRegistry, create_rule_permission_policy
from prism.core.ledger import RunLedger
from prism.gateway import HttpOptions, open_gateway, serve_http
from prism.mcp import StdioTransport, open_mcp_tools

if TYPE_CHECKING:
    import mcp_types as types

BENCH = "gateway"
QUICK = "--quick" in sys.argv[1:]
INNER = 20 if QUICK else 50
REPEAT = 7 if QUICK else 21
# --fast-paths: only the direct call and the gateway's rows with and without its fast paths
FAST_PATHS_ONLY = "--fast-paths" in sys.argv[1:]
_FAST_PATH_ROWS = frozenset(
    {"direct", "local", "local-sdk", "bridged", "bridged-sdk", "bridged-no-direct"}
)
# --ratios: the direct call, both relays and the bridged rows, three times the rounds
RATIOS_ONLY = "--ratios" in sys.argv[1:]
_RATIO_ROWS = frozenset(
    {
        "direct",
        "pipe",
        "parsing",
        "floor",
        "floor-tasks",
        "bridged",
        "bridged-sdk",
        "bridged-no-direct",
    }
)
ROUNDS = REPEAT * 3 if RATIOS_ONLY else REPEAT * 2 if FAST_PATHS_ONLY else REPEAT
TESTS = Path(__file__).resolve().parents[1] / "packages/prism-gateway/tests"
SERVER = TESTS / "gateway_fixture_server.py"
GATEWAY = TESTS / "gateway_stdio_main.py"
ARGS: dict[str, Any] = {"text": "ping"}
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _children() -> dict[str, int]:
    """This process's child processes: the script each runs, to its pid."""
    found: dict[str, int] = {}
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            key = " ".join(part.decode() for part in argv[1:3] if part)
            found[key] = int(pid)
    return found


def _child_of(pid: int | None) -> int | None:
    """The first child process of ``pid`` (the server a relay or gateway started)."""
    if pid is None:
        return None
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        if children:
            return int(children[0])
    return None


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) that process ``pid`` has used, without its children."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


async def _relay() -> None:
    """A bare SDK proxy on stdio: every call forwarded to the server with the SDK client."""
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    upstream_params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with Client(upstream_params) as upstream:

        async def on_list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
            return await upstream.list_tools()

        async def on_call_tool(_ctx: Any, params: Any) -> types.CallToolResult:
            return await upstream.call_tool(params.name, params.arguments)

        server: Server[Any] = Server(
            "relay", on_list_tools=on_list_tools, on_call_tool=on_call_tool
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


async def _json_relay() -> None:
    """Like the byte relay, but each message is parsed and written again (``json``)."""
    server = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdin is not None
    assert server.stdout is not None
    into, out = server.stdin, server.stdout

    async def copy(source: Any, sink: Any) -> None:
        buffer = b""
        while chunk := await source.receive_some(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
                await sink.send_all(data.encode() + b"\n")

    async with (
        trio.lowlevel.FdStream(os.dup(0)) as stdin,
        trio.lowlevel.FdStream(os.dup(1)) as stdout,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(copy, out, stdout)
        await copy(stdin, into)
        await into.aclose()
        nursery.cancel_scope.cancel()
    server.kill()
    await server.wait()


async def _gateway_sdk_path(root: str) -> None:
    """The test gateway with its fast paths off: the SDK's whole path for every request."""
    from prism.gateway import _fast
    from prism.mcp import _session

    sys.path.insert(0, str(TESTS))
    from gateway_stdio_main import main as gateway_main  # type: ignore[import-not-found]

    _fast.StdioFastPath.take = lambda self, line: False  # type: ignore[method-assign]
    _session.install_fast_call_tool = lambda *_args: None  # type: ignore[attr-defined]
    await gateway_main(root, 16 * 1024 * 1024)


async def _gateway_no_direct(root: str) -> None:
    """The test gateway with only the bridge's direct stdio calls off (the SDK's dispatcher)."""
    from prism.mcp import _fastcall, _session

    sys.path.insert(0, str(TESTS))
    from gateway_stdio_main import main as gateway_main

    install = _fastcall.install_fast_call_tool
    _session.install_fast_call_tool = lambda session, direct=None: install(session)  # type: ignore[attr-defined]
    await gateway_main(root, 16 * 1024 * 1024)


# The tests' gateway with Prism imported from another checkout (``--against``): a fresh
# interpreter, so nothing of this checkout's Prism is imported first. argv: TREE ROOT
_GATEWAY_FROM = """
import sys, pathlib, trio
tree, root = sys.argv[1:3]
sys.path[:0] = [*sorted(str(p) for p in pathlib.Path(tree).glob('packages/*/src')),
                tree + '/packages/prism-gateway/tests']
import prism.gateway, gateway_stdio_main
assert pathlib.Path(prism.gateway.__file__).is_relative_to(tree), prism.gateway.__file__
trio.run(gateway_stdio_main.main, root, 16 * 1024 * 1024)
"""


async def _shape_floor(tasks: bool) -> None:
    """The bridged call's floor in the one-reader-per-pipe shape (``--shape-floor``).

    Not a gateway: a measurement of what a bridged call costs when the
    gateway's process does nothing per call but Prism's own gates, in the
    shape of two reader tasks and no task, cancel scope or SDK object per
    call. The client's reader parses a ``tools/call`` line once and runs, inline,
    the core's gates (the permission policy and the JSON Schema validator of
    the tests' gateway, with its instance limits), the ledger's notes and the
    started event, takes two concurrency slots without waiting, and writes
    the downstream request itself; the server's reader matches the answer by
    id, runs the answer gate (objects, nesting, lone surrogates) and the
    plain answer's check, maps the result, checks it against the tool's
    output schema, writes the ledger record and the finished event, and
    writes the client's answer line. Everything else (the handshake, the
    listing) is relayed as bytes. No progress, cancellation, timeout,
    approval or fallback: what those would add comes on top.

    With ``tasks`` (``--shape-floor-tasks``), the same work in today's shape
    instead: each call gets a task of its own (started by the client's
    reader), which enters two cancel scopes (the request's, the bridge's
    deadline) and waits for its answer, handed to it by the server's reader,
    then finishes the call and writes its answer line itself.
    """
    import pydantic_core
    from mcp_types import SERVER_INFO_META_KEY

    from prism.core import ParsedJson, ToolCall, ToolDefinition, ToolResult
    from prism.core._dispatch import DispatchOptions, _CallNotes, _ended, _gate
    from prism.core._events import build_started, emit_event
    from prism.core._ledger_decision import current_note
    from prism.core._outcome import settle
    from prism.core._redaction import snapshot_json
    from prism.core._tools import NO_SIGNAL, build_context
    from prism.gateway._content import call_tool_result_json
    from prism.gateway._upstream import plain_result, result_line
    from prism.mcp._budget import loads
    from prism.mcp._content import map_plain_result
    from prism.mcp._fastcall import plain_answer
    from prism.mcp._gate import _result_nodes
    from prism.mcp._output import OutputChecker
    from prism.validation.jsonschema import create_json_schema_tool_validator

    server = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdin is not None
    assert server.stdout is not None
    into, out = server.stdin, server.stdout
    events: list[Any] = []
    ledger = RunLedger()
    options = DispatchOptions(
        registry=ToolRegistry(),
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
        validator=create_json_schema_tool_validator(),
        on_event=events.append,
        ledger=ledger,
        metadata={"client": "bench"},
    )
    checker = OutputChecker()
    stamp = {"name": "prism-gateway", "version": "0"}
    share, everyone = trio.CapacityLimiter(8), trio.CapacityLimiter(64)
    listing_ids: set[Any] = set()
    output: dict[str, Any] = {}
    waiting: dict[str, tuple[Any, ToolCall, Any, Any, float, float, object]] = {}
    ids = itertools.count(1)
    boxes: dict[str, list[Any]] = {}
    pipes: dict[str, Any] = {}

    async def _nothing(_arguments: Any, _ctx: Any) -> ToolResult:
        raise AssertionError("never run: the floor calls the server itself")

    def learn_listing(message: dict[str, Any]) -> bytes:
        """The server's tools, named as the gateway names them (the client's listing)."""
        for tool in message["result"].get("tools", []):
            tool["name"] = name = f"mcp__fx__{tool['name']}"
            options.registry.register(
                ToolDefinition(
                    name=name,
                    execute=_nothing,
                    parameters=tool.get("inputSchema") or {"type": "object"},
                )
            )
            output[name] = tool.get("outputSchema")
        return pydantic_core.to_json(message) + b"\n"

    def call_line(line: bytes) -> bytes | None:
        parsed = ParsedJson.parse(line)
        message: Any = parsed.value
        params = message.get("params") if type(message) is dict else None
        if type(params) is not dict or message.get("method") != "tools/call":
            if type(message) is dict and message.get("method") == "tools/list":
                listing_ids.add(message.get("id"))
            return None
        name: str = params["name"]
        given = parsed.member("params")
        arguments = given.member("arguments") if given is not None else None
        assert arguments is not None
        call = ToolCall.from_parsed(id=f"bench#{next(ids)}", name=name, arguments=arguments)
        started_at = time.time()
        t0 = time.perf_counter()
        ctx = build_context(call, NO_SIGNAL, options.metadata, options.on_event)
        notes = _CallNotes()
        token = current_note.set(notes)
        try:
            gates = _gate(call, options, ctx)
            try:
                gates.send(None)
            except StopIteration as done:
                call, tool, arguments = done.value
            else:
                raise AssertionError("the floor's gates are synchronous")
        finally:
            current_note.reset(token)
        notes.arguments = snapshot_json(arguments)  # type: ignore[assignment]
        notes.definition_hash = tool.definition_hash
        emit_event(events.append, build_started(call.id, tool.name, arguments, time.time()))
        slot = object()
        share.acquire_on_behalf_of_nowait(slot)
        everyone.acquire_on_behalf_of_nowait(slot)
        request_id = f"prism:{next(ids)}"
        waiting[request_id] = entry = (message["id"], call, notes, ctx, started_at, t0, slot)
        if tasks:
            boxes[request_id] = box = [trio.Event()]
            pipes["nursery"].start_soon(run_call, request_id, entry, box)
        sent = {"name": name.removeprefix("mcp__fx__"), "arguments": arguments}
        if "_meta" in params:  # (the bridge sends its own session's, the same members)
            sent["_meta"] = params["_meta"]
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": sent}
        return pydantic_core.to_json(request) + b"\n"

    def answer_line(line: bytes) -> bytes | None:
        message: Any = loads(line.decode())
        request_id: Any = message.get("id") if type(message) is dict else None
        if request_id in listing_ids:
            listing_ids.discard(request_id)
            return learn_listing(message)
        entry = waiting.pop(request_id, None) if type(request_id) is str else None
        if entry is None:
            return None
        if tasks:
            box = boxes.pop(request_id)
            box.append(message)
            box[0].set()
            return b""
        return finish(entry, message)

    async def run_call(request_id: str, entry: Any, box: list[Any]) -> None:
        with trio.CancelScope(), trio.CancelScope(deadline=trio.current_time() + 30):
            await box[0].wait()
        await pipes["stdout"].send_all(finish(entry, box[1]))

    def finish(entry: Any, message: dict[str, Any]) -> bytes:
        client_id, call, notes, _ctx, started_at, t0, slot = entry
        result = message["result"]
        if type(_result_nodes(result)) is str:
            raise AssertionError("refused")
        plain = plain_answer(result, "2026-07-28")
        assert plain is not None
        details = {"mcp_server": "fx", "mcp_tool": call.name.removeprefix("mcp__fx__")}
        mapped = map_plain_result(plain, details)
        schema = output.get(call.name)
        if schema is not None and checker.check(schema, mapped.structured, tool=call.name):
            raise AssertionError("output refused")
        everyone.release_on_behalf_of(slot)
        share.release_on_behalf_of(slot)
        outcome = _ended(call, mapped, "ok", None, notes)
        settle(options.on_event, options.ledger, outcome, started_at, time.perf_counter() - t0)
        if len(events) > 1000:
            events.clear()
        wire = call_tool_result_json(mapped, any_structured=True)
        shaped = plain_result("2026-07-28", wire)
        assert shaped is not None
        shaped["_meta"] = {SERVER_INFO_META_KEY: stamp}  # (as the gateway stamps its results)
        return result_line(client_id, shaped)

    async def pump(source: Any, sink: Any, handle: Any) -> None:
        buffer = b""
        while chunk := await source.receive_some(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line:
                    instead = handle(line)
                    if instead is None:
                        await sink.send_all(line + b"\n")
                    elif instead:
                        await sink.send_all(instead)

    async with (
        trio.lowlevel.FdStream(os.dup(0)) as stdin,
        trio.lowlevel.FdStream(os.dup(1)) as stdout,
        trio.open_nursery() as nursery,
    ):
        pipes["stdout"] = stdout
        pipes["nursery"] = nursery
        nursery.start_soon(pump, out, stdout, answer_line)
        await pump(stdin, into, call_line)
        await into.aclose()
        nursery.cancel_scope.cancel()
    server.kill()
    await server.wait()


async def _pipe_relay() -> None:
    """Copy bytes between this process's stdio and the server's, parsing nothing."""
    server = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdin is not None
    assert server.stdout is not None
    into, out = server.stdin, server.stdout

    async def copy(source: Any, sink: Any) -> None:
        while chunk := await source.receive_some(65536):
            await sink.send_all(chunk)

    async with (
        trio.lowlevel.FdStream(os.dup(0)) as stdin,
        trio.lowlevel.FdStream(os.dup(1)) as stdout,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(copy, out, stdout)
        await copy(stdin, into)
        await into.aclose()
        nursery.cancel_scope.cancel()
    server.kill()
    await server.wait()


async def main() -> list[Row]:
    root = tempfile.mkdtemp(prefix="prism-bench-gateway-")
    await trio.Path(root, "f.txt").write_text("x\n", encoding="utf-8")
    python = sys.executable
    transport = StdioTransport(python, [str(SERVER)])
    async with (
        Client(StdioServerParameters(command=python, args=[str(SERVER), "direct"])) as direct,
        Client(StdioServerParameters(command=python, args=[str(GATEWAY), root])) as gateway,
        Client(
            StdioServerParameters(command=python, args=[__file__, "--gateway-sdk-path", root])
        ) as sdk_path,
        Client(
            StdioServerParameters(command=python, args=[__file__, "--gateway-no-direct", root])
        ) as no_direct,
        Client(StdioServerParameters(command=python, args=[__file__, "--relay"])) as relay,
        Client(StdioServerParameters(command=python, args=[__file__, "--pipe-relay"])) as pipe,
        Client(StdioServerParameters(command=python, args=[__file__, "--json-relay"])) as parsing,
        Client(StdioServerParameters(command=python, args=[__file__, "--shape-floor"])) as floor,
        Client(
            StdioServerParameters(command=python, args=[__file__, "--shape-floor-tasks"])
        ) as floor_tasks,
        open_mcp_tools(server_id="fx", transport=transport) as bridge,
        open_gateway(
            bridges=[bridge],
            permission=create_rule_permission_policy(allow=["tool:*:execute"]),
            ledger=RunLedger(),
        ) as in_process,
        trio.open_nursery() as nursery,
    ):
        url = await nursery.start(serve_http, in_process, HttpOptions())
        pids = _children()
        direct_pid = pids.get(f"{SERVER} direct")
        gateway_pid = pids.get(f"{GATEWAY} {root}")
        sdk_path_pid = pids.get(f"{__file__} --gateway-sdk-path")
        no_direct_pid = pids.get(f"{__file__} --gateway-no-direct")
        relay_pid = pids.get(f"{__file__} --relay")
        pipe_pid = pids.get(f"{__file__} --pipe-relay")
        parsing_pid = pids.get(f"{__file__} --json-relay")
        floor_pid = pids.get(f"{__file__} --shape-floor")
        floor_tasks_pid = pids.get(f"{__file__} --shape-floor-tasks")
        async with Client(url) as http:
            for client in (
                direct,
                gateway,
                sdk_path,
                no_direct,
                relay,
                pipe,
                parsing,
                floor,
                floor_tasks,
                http,
            ):
                await client.list_tools()
            # (key, client, tool, arguments, middle process, the server behind it)
            cases: list[tuple[str, Client, str, dict[str, Any], int | None, int | None]] = [
                ("direct", direct, "echo", ARGS, direct_pid, None),
                ("local", gateway, "local_echo", ARGS, gateway_pid, None),
                ("local-sdk", sdk_path, "local_echo", ARGS, sdk_path_pid, None),
                ("read", gateway, "read", {"path": "f.txt"}, gateway_pid, None),
                ("relay", relay, "echo", ARGS, relay_pid, _child_of(relay_pid)),
                ("pipe", pipe, "echo", ARGS, pipe_pid, _child_of(pipe_pid)),
                ("parsing", parsing, "echo", ARGS, parsing_pid, _child_of(parsing_pid)),
                ("floor", floor, "mcp__fx__echo", ARGS, floor_pid, _child_of(floor_pid)),
                ("floor-tasks", floor_tasks, "mcp__fx__echo", ARGS, floor_tasks_pid,
                 _child_of(floor_tasks_pid)),
                ("bridged", gateway, "mcp__fx__echo", ARGS, gateway_pid, _child_of(gateway_pid)),
                ("bridged-sdk", sdk_path, "mcp__fx__echo", ARGS, sdk_path_pid,
                 _child_of(sdk_path_pid)),
                ("bridged-no-direct", no_direct, "mcp__fx__echo", ARGS, no_direct_pid,
                 _child_of(no_direct_pid)),
                ("http", http, "mcp__fx__echo", ARGS, None, None),
            ]  # fmt: skip
            if FAST_PATHS_ONLY:  # the fast paths against the SDK's whole path, twice the samples
                cases = [case for case in cases if case[0] in _FAST_PATH_ROWS]
            elif RATIOS_ONLY:
                cases = [case for case in cases if case[0] in _RATIO_ROWS]
            wall: dict[str, list[float]] = {case[0]: [] for case in cases}
            # key -> CPU seconds of (the middle process, the server behind it, the client)
            cpu: dict[str, list[float]] = {key: [0.0, 0.0, 0.0] for key in wall}
            for _ in range(ROUNDS):
                for key, client, name, arguments, pid, behind in cases:
                    before = (_cpu_s(pid), _cpu_s(behind), _self_cpu_s())
                    t0 = trio.current_time()
                    for _ in range(INNER):
                        result = await client.call_tool(name, arguments)
                        assert not result.is_error, result
                    wall[key].append((trio.current_time() - t0) / INNER * 1e6)
                    after = (_cpu_s(pid), _cpu_s(behind), _self_cpu_s())
                    for n in range(3):
                        cpu[key][n] += after[n] - before[n]
        nursery.cancel_scope.cancel()

    calls = ROUNDS * INNER

    def cpu_note(key: str, whose: str | None) -> str:
        per_call = [seconds / calls * 1e6 for seconds in cpu[key]]
        parts = [f"{whose} {per_call[0]:.0f}"] if whose is not None else []
        if per_call[1]:
            parts.append(f"server {per_call[1]:.0f}")
        parts.append(f"client {per_call[2]:.0f}")
        return f"CPU µs/call: {', '.join(parts)}"

    base = row(BENCH, "stdio: client -> server echo (direct)", wall["direct"])
    base.note = cpu_note("direct", "server")
    # (key, case, whose CPU the note gives first, what else the note says)
    compared = [
        ("local", "stdio: client -> gateway local_echo (in-process)", "gateway", "one MCP hop"),
        ("local-sdk", "stdio: client -> gateway local_echo, fast path off", "gateway",
         "one MCP hop, the SDK's whole path"),
        ("read", "stdio: client -> gateway read (coding tool)", "gateway", "one MCP hop"),
        ("relay", "stdio: client -> bare SDK relay -> server", "relay", "two MCP hops"),
        ("pipe", "stdio: client -> byte relay -> server", "relay", "one MCP hop, two processes"),
        ("parsing", "stdio: client -> JSON relay -> server", "relay",
         "each message parsed and written again, nothing else"),
        ("floor", "stdio: client -> shape floor -> server", "floor",
         "Prism's gates inline, two reader tasks, nothing else per call"),
        ("floor-tasks", "stdio: client -> shape floor, a task per call -> server", "floor",
         "the same work, a task, two cancel scopes and a wait per call"),
        ("bridged", "stdio: client -> gateway -> server (bridged)", "gateway", "two MCP hops"),
        ("bridged-sdk", "stdio: client -> gateway -> server, fast paths off", "gateway",
         "two MCP hops, the SDK's whole path"),
        ("bridged-no-direct", "stdio: client -> gateway -> server, direct calls off", "gateway",
         "two MCP hops, the bridge's calls through the SDK's dispatcher"),
        ("http", "http: client -> gateway -> server (bridged)", None, "gateway in this process"),
    ]  # fmt: skip

    def paired(key: str) -> str:
        # Each round timed this case right after the direct call: the ratio per round
        # cancels the load that moved under both.
        ratios = sorted(a / b for a, b in zip(wall[key], wall["direct"], strict=True))
        quarter = len(ratios) // 4
        return (
            f"per round {statistics.median(ratios):.2f}x "
            f"(middle half {ratios[quarter]:.2f}-{ratios[-1 - quarter]:.2f})"
        )

    rows = [base]
    for key, case, whose, note in compared:
        if key not in wall:
            continue
        note = f"{cpu_note(key, whose)}; {paired(key)}; {note}"
        target = "<= 1.2x" if key == "bridged" else None
        rows.append(row(BENCH, case, wall[key], baseline=base, target=target, note=note))
    return rows


AGAINST_CALLS = 400
AGAINST_ROUNDS = 8 if QUICK else 16


async def against_rows(tree: str) -> list[Row]:
    """This checkout's gateway against the one of checkout ``tree``, side by side (``--against``).

    Each round times the direct call, then ``AGAINST_CALLS`` bridged calls
    through each gateway (which goes first alternates), and reads each
    gateway's CPU time from /proc: the gateway's CPU per bridged call, this
    tree's against the other's per round, and each bridged call against the
    direct call per round.
    """
    root = tempfile.mkdtemp(prefix="prism-bench-gateway-")
    python = sys.executable
    async with (
        Client(StdioServerParameters(command=python, args=[str(SERVER), "direct"])) as direct,
        Client(StdioServerParameters(command=python, args=[str(GATEWAY), root])) as ours,
        Client(
            StdioServerParameters(command=python, args=["-c", _GATEWAY_FROM, tree, root])
        ) as theirs,
    ):
        pids = _children()
        pid = {
            "ours": pids.get(f"{GATEWAY} {root}"),
            "theirs": pids.get(f"-c {_GATEWAY_FROM}"),
        }
        cases = {"direct": (direct, "echo"), "ours": (ours, "mcp__fx__echo"),
                 "theirs": (theirs, "mcp__fx__echo")}  # fmt: skip
        for client, _ in cases.values():
            await client.list_tools()
        wall: dict[str, list[float]] = {key: [] for key in cases}
        cpu: dict[str, list[float]] = {"ours": [], "theirs": []}
        for n in range(AGAINST_ROUNDS):
            for key in ("direct", "ours", "theirs") if n % 2 == 0 else ("direct", "theirs", "ours"):
                client, name = cases[key]
                before = _cpu_s(pid.get(key))
                t0 = trio.current_time()
                for _ in range(AGAINST_CALLS):
                    result = await client.call_tool(name, ARGS)
                    assert not result.is_error, result
                wall[key].append((trio.current_time() - t0) / AGAINST_CALLS * 1e6)
                if key in cpu:
                    cpu[key].append((_cpu_s(pid.get(key)) - before) / AGAINST_CALLS * 1e6)

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} (range {min(values):.2f}-{max(values):.2f})"

    cpu_ratio = [a / b for a, b in zip(cpu["ours"], cpu["theirs"], strict=True)]
    base = row(BENCH, "stdio: client -> server echo (direct)", wall["direct"])
    rows = [base]
    for key, whose in (("ours", "this tree"), ("theirs", tree)):
        per_round = [a / b for a, b in zip(wall[key], wall["direct"], strict=True)]
        note = (
            f"gateway CPU µs/call median {statistics.median(cpu[key]):.0f} "
            f"(range {min(cpu[key]):.0f}-{max(cpu[key]):.0f}); per round vs direct "
            f"{spread(per_round)}"
        )
        if key == "ours":
            note += f"; gateway CPU per round vs the other tree {spread(cpu_ratio)}"
        rows.append(row(BENCH, f"stdio: bridged, gateway of {whose}", wall[key], baseline=base,
                        target="<= 1.2x", note=note))  # fmt: skip
    return rows


async def floor_rows() -> list[Row]:
    """The gateway against the floors of its shape, side by side (``--floors``).

    Each round times ``AGAINST_CALLS`` calls through the JSON relay, the
    shape floor (``--shape-floor``), the same with a task per call
    (``--shape-floor-tasks``) and the tests' gateway (bridged), in a
    rotating order, and reads each middle process's CPU time from /proc:
    its CPU per call (median and range over the rounds) and, per round,
    against the floor's of the same round.
    """
    root = tempfile.mkdtemp(prefix="prism-bench-gateway-")
    python = sys.executable
    async with (
        Client(StdioServerParameters(command=python, args=[__file__, "--json-relay"])) as parsing,
        Client(StdioServerParameters(command=python, args=[__file__, "--shape-floor"])) as floor,
        Client(
            StdioServerParameters(command=python, args=[__file__, "--shape-floor-tasks"])
        ) as floor_tasks,
        Client(StdioServerParameters(command=python, args=[str(GATEWAY), root])) as gateway,
    ):
        pids = _children()
        cases = {
            "parsing": (parsing, "echo", pids.get(f"{__file__} --json-relay")),
            "floor": (floor, "mcp__fx__echo", pids.get(f"{__file__} --shape-floor")),
            "floor-tasks": (
                floor_tasks,
                "mcp__fx__echo",
                pids.get(f"{__file__} --shape-floor-tasks"),
            ),
            "bridged": (gateway, "mcp__fx__echo", pids.get(f"{GATEWAY} {root}")),
        }
        for client, _, _ in cases.values():
            await client.list_tools()
        keys = list(cases)
        cpu: dict[str, list[float]] = {key: [] for key in keys}
        for n in range(AGAINST_ROUNDS):
            for key in keys[n % len(keys) :] + keys[: n % len(keys)]:
                client, name, pid = cases[key]
                before = _cpu_s(pid)
                for _ in range(AGAINST_CALLS):
                    result = await client.call_tool(name, ARGS)
                    assert not result.is_error, result
                cpu[key].append((_cpu_s(pid) - before) / AGAINST_CALLS * 1e6)
    rows = []
    labels = {
        "parsing": "JSON relay (each message parsed and written again)",
        "floor": "shape floor (gates inline in two reader tasks)",
        "floor-tasks": "shape floor with a task per call",
        "bridged": "gateway, bridged (every gate, the SDK's and Prism's layers)",
    }
    for key in keys:
        against = sorted(a / b for a, b in zip(cpu[key], cpu["floor"], strict=True))
        note = (
            f"CPU µs/call median {statistics.median(cpu[key]):.0f} "
            f"(range {min(cpu[key]):.0f}-{max(cpu[key]):.0f}); per round vs the floor "
            f"{statistics.median(against):.2f} (range {against[0]:.2f}-{against[-1]:.2f})"
        )
        rows.append(row(BENCH, f"stdio: {labels[key]}", cpu[key], note=note))
    return rows


SLOW_START_S = 2.0
SESSIONS = 100 if QUICK else 300
STARTS = 3 if QUICK else 5


def _coding_config(folder: Path) -> Path:
    (folder / "root").mkdir(exist_ok=True)
    config = folder / "prism-coding.toml"
    config.write_text('[workspace]\nroots = ["root"]\ncoding_tools = true\n', encoding="utf-8")
    return config


def _serve_config(folder: Path, servers: int, *, required: bool = False) -> Path:
    lines = ['[workspace]\nroots = ["."]\nsandbox = "none"\n']
    for n in range(servers):
        lines.append(
            f"[mcp.servers.s{n}]\ncommand = {json.dumps(sys.executable)}\n"
            f'args = [{json.dumps(__file__)}, "--slow-server"]\nrequired = {json.dumps(required)}\n'
        )
    config = folder / f"prism-{servers}-{required}.toml"
    config.write_text("\n".join(lines), encoding="utf-8")
    return config


async def _lines(stream: Any, buffer: bytearray) -> dict[str, Any]:
    while b"\n" not in buffer:
        chunk = await stream.receive_some(65536)
        assert chunk, "the gateway closed its stdout"
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    message: dict[str, Any] = json.loads(line)
    return message


async def _time_to_initialize(config: Path) -> tuple[float, float]:
    """Seconds from spawn, and from serving, to the ``initialize`` answer of ``prism serve``."""
    argv = [sys.executable, "-m", "prism.cli", "serve", str(config)]
    started = trio.current_time()
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        cwd=config.parent,
    )  # fmt: skip
    assert process.stdin is not None
    assert process.stdout is not None
    buffer = bytearray()
    try:
        await process.stdin.send_all(b"not json\n")
        await _lines(process.stdout, buffer)  # the parse error: the gateway serves
        serving = trio.current_time()
        request = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }  # fmt: skip
        await process.stdin.send_all(json.dumps(request).encode() + b"\n")
        answer = await _lines(process.stdout, buffer)
        assert "result" in answer, answer
        done = trio.current_time()
    finally:
        process.kill()
        await process.wait()
        await process.stdin.aclose()
        await process.stdout.aclose()
    return done - started, done - serving


_INITIALIZE_LINE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n'
)


async def _time_to_first_answer(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds from spawning ``argv`` to the first byte it writes to stdout.

    ``initialize`` is written at once, as a host does; CPU is the process's own
    (user + system, from /proc) when that byte arrives.
    """
    started = trio.current_time()
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        await process.stdin.send_all(_INITIALIZE_LINE)
        first = await process.stdout.receive_some(65536)
        wall = trio.current_time() - started
        cpu = _cpu_s(process.pid)
        assert first, "no answer"
    finally:
        process.kill()
        await process.wait()
        await process.stdin.aclose()
        await process.stdout.aclose()
    return wall, cpu


async def startup_rows() -> list[Row]:
    folder = Path(tempfile.mkdtemp(prefix="prism-bench-serve-"))
    cases = [(n, False) for n in (0, 1, 5)] + [(5, True)]
    from_serving: dict[tuple[int, bool], list[float]] = {case: [] for case in cases}
    from_spawn: dict[tuple[int, bool], list[float]] = {case: [] for case in cases}
    configs = {case: _serve_config(folder, *case[:1], required=case[1]) for case in cases}
    # Spawn -> initialize as a host meets it (initialize the first line: answered at once),
    # against the floor of any Python MCP server, `python -c "import mcp"` (its exit), and
    # a first line of garbage before it (the gateway answers then, once loaded).
    first = {
        "floor": [sys.executable, "-c", "import mcp, sys; sys.stdout.write('x')"],
        "early": [sys.executable, "-m", "prism.cli", "serve", str(configs[(5, False)])],
        "coding": [sys.executable, "-m", "prism.cli", "serve", str(_coding_config(folder))],
    }
    first_wall: dict[str, list[float]] = {key: [] for key in first}
    first_cpu: dict[str, list[float]] = {key: [] for key in first}
    for _ in range(STARTS):
        for case in cases:
            spawn_s, serving_s = await _time_to_initialize(configs[case])
            from_spawn[case].append(spawn_s * 1e6)
            from_serving[case].append(serving_s * 1e6)
        for key, argv in first.items():
            wall, cpu = await _time_to_first_answer(argv, folder)
            first_wall[key].append(wall * 1e6)
            first_cpu[key].append(cpu * 1e6)
    rows: list[Row] = []
    names = {
        "floor": "python -c 'import mcp' (the floor of an SDK server)",
        "early": "prism serve: spawn -> initialize first, 5 servers starting",
        "coding": "prism serve: spawn -> initialize first, coding tools only",
    }
    for measure, samples in (("wall", first_wall), ("CPU", first_cpu)):
        floor = None
        for key, name in names.items():
            made = row(
                BENCH, f"{name}, {measure}", samples[key], baseline=floor,
                target=None if floor is None else "<= 300 ms",
                note=f"load {os.getloadavg()[0]:.1f}",
            )  # fmt: skip
            floor = floor or made
            rows.append(made)
    base = None
    for servers, required in cases:
        if required:
            continue
        made = row(
            BENCH, f"prism serve: initialize once serving, {servers} servers starting",
            from_serving[(servers, False)], baseline=base, target="<= 300 ms",
            note=f"servers start in the background, {SLOW_START_S:g} s each",
        )  # fmt: skip
        base = base or made
        rows.append(made)
    base = None
    for servers, required in cases:
        how = "required: all up first" if required else "in the background"
        made = row(
            BENCH, f"prism serve: spawn -> initialize, {servers} servers {how}",
            from_spawn[(servers, required)], baseline=base,
            note="includes starting Python and importing Prism",
        )  # fmt: skip
        base = base or made
        rows.append(made)
    return rows


# Spawn -> each of a host's first requests (``--first-requests``): the configurations, the
# tool called first in each (None: no call), and how many MCP servers each starts.
_FIRST_CASES = {
    "no tools": ('[workspace]\nroots = ["root"]\ncoding_tools = false\nsandbox = "none"\n', None),
    "coding tools": ('[workspace]\nroots = ["root"]\n', "read"),
    "4 servers + coding": ('[workspace]\nroots = ["root"]\n', "mcp__s0__echo"),
}
_FIRST_SERVERS = 4
# Runs ``prism serve`` from another checkout (``--against TREE``: $PRISM_BENCH_TREE).
_SERVE_FROM = """
import os, sys, pathlib
tree = os.environ['PRISM_BENCH_TREE']
sys.path[:0] = sorted(str(p) for p in pathlib.Path(tree).glob('packages/*/src'))
from prism.cli import main
import prism.cli
assert pathlib.Path(prism.cli.__file__).is_relative_to(tree), prism.cli.__file__
sys.exit(main())
"""


def _first_configs(folder: Path) -> dict[str, Path]:
    (folder / "root").mkdir(exist_ok=True)
    (folder / "root" / "notes.txt").write_text("hello\n", encoding="utf-8")
    configs: dict[str, Path] = {}
    for n, (case, (text, _tool)) in enumerate(_FIRST_CASES.items()):
        if "servers" in case:
            for server in range(_FIRST_SERVERS):
                text += (
                    f"[mcp.servers.s{server}]\ncommand = {json.dumps(sys.executable)}\n"
                    f"args = [{json.dumps(str(SERVER))}]\n"
                )
        configs[case] = folder / f"prism-first-{n}.toml"
        configs[case].write_text(text, encoding="utf-8")
    return configs


async def _first_requests(
    argv: list[str], cwd: Path, tool: str | None, env: dict[str, str] | None = None
) -> dict[str, tuple[float, float]]:
    """Wall and CPU seconds (the gateway's own) from spawn to each first answer, as a host asks.

    ``initialize`` is written at once; once answered, ``notifications/initialized``
    and ``tools/list``; then a ``tools/call`` of ``tool``, once the listing
    offers it (a bridged tool: after the ``notifications/tools/list_changed``
    that announces it, listing again).
    """
    started = trio.current_time()
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
        env=env,
    )  # fmt: skip
    assert process.stdin is not None
    assert process.stdout is not None
    buffer = bytearray()
    times: dict[str, tuple[float, float]] = {}

    def mark(key: str) -> None:
        times[key] = (trio.current_time() - started, _cpu_s(process.pid))

    async def answer(request_id: int) -> dict[str, Any]:
        while True:
            message = await _lines(process.stdout, buffer)
            if message.get("id") == request_id:
                return message

    try:
        await process.stdin.send_all(_INITIALIZE_LINE)
        await answer(1)
        mark("initialize")
        await process.stdin.send_all(
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
        )
        names = [tool["name"] for tool in (await answer(2))["result"]["tools"]]
        mark("tools/list")
        request_id = 3
        while tool is not None and tool not in names:
            message = await _lines(process.stdout, buffer)
            if message.get("method") == "notifications/tools/list_changed":
                line = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
                await process.stdin.send_all(json.dumps(line).encode() + b"\n")
                names = [t["name"] for t in (await answer(request_id))["result"]["tools"]]
                request_id += 1
        if tool is not None:
            arguments = {"path": "notes.txt"} if tool == "read" else ARGS
            call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}  # fmt: skip
            await process.stdin.send_all(json.dumps(call).encode() + b"\n")
            result = (await answer(request_id))["result"]
            assert not result.get("isError"), result
            mark("tools/call")
    finally:
        process.kill()
        await process.wait()
        await process.stdin.aclose()
        await process.stdout.aclose()
    return times


async def first_request_rows(tree: str | None = None) -> list[Row]:
    """Spawn -> ``initialize``, ``tools/list`` and a first ``tools/call`` (``--first-requests``).

    Each round spawns ``prism serve`` once per configuration (and, with
    ``--against TREE``, once more from that checkout, the two taking turns at
    going first), and ``python -c "import mcp"`` (the floor of any server built
    on the SDK: its CPU at its first output).
    """
    folder = Path(tempfile.mkdtemp(prefix="prism-bench-first-"))
    configs = _first_configs(folder)
    ours = [sys.executable, "-m", "prism.cli", "serve"]
    trees: dict[str, tuple[list[str], dict[str, str] | None]] = {"": (ours, None)}
    if tree is not None:
        other = {**os.environ, "PRISM_BENCH_TREE": tree}
        trees[f" ({Path(tree).name})"] = ([sys.executable, "-c", _SERVE_FROM, "serve"], other)
    samples: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    floor: tuple[list[float], list[float]] = ([], [])
    floor_argv = [sys.executable, "-c", "import mcp, sys; sys.stdout.write('x')"]
    for n in range(STARTS):
        wall, cpu = await _time_to_first_answer(floor_argv, folder)
        floor[0].append(wall * 1e6)
        floor[1].append(cpu * 1e6)
        order = list(trees.items()) if n % 2 == 0 else list(reversed(trees.items()))
        for case, config in configs.items():
            for label, (argv, env) in order:
                times = await _first_requests([*argv, str(config)], folder,
                                              _FIRST_CASES[case][1], env)  # fmt: skip
                for request, (wall, cpu) in times.items():
                    walls, cpus = samples.setdefault((case, request, label), ([], []))
                    walls.append(wall * 1e6)
                    cpus.append(cpu * 1e6)
    load = f"load {os.getloadavg()[0]:.1f}"
    rows: list[Row] = []
    for measure in (0, 1):
        what = ("wall", "CPU")[measure]
        base = row(BENCH, f"python -c 'import mcp' (the floor), {what}", floor[measure],
                   note=load)  # fmt: skip
        rows.append(base)
        for (case, request, label), pair in samples.items():
            name = f"prism serve{label}, {case}: spawn -> {request}, {what}"
            rows.append(row(BENCH, name, pair[measure], baseline=base, note=load))
    return rows


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def session_rows() -> list[Row]:
    import httpx2

    folder = Path(tempfile.mkdtemp(prefix="prism-bench-sessions-"))
    config = _serve_config(folder, 0)
    argv = [sys.executable, "-m", "prism.cli", "serve", str(config), "--http", "127.0.0.1:0"]
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=folder
    )
    assert process.stderr is not None
    seen = b""
    while b"/mcp" not in seen:
        chunk = await process.stderr.receive_some(4096)
        assert chunk, seen
        seen += chunk
    url = seen.split(b"MCP endpoint ", 1)[1].split(b"\n", 1)[0].decode().strip()
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }  # fmt: skip
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    try:
        async with httpx2.AsyncClient(timeout=60, headers=headers) as http:

            async def open_session() -> None:
                opened = await http.post(url, json=initialize)
                session = opened.headers["mcp-session-id"]
                sent = {**headers, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
                await http.post(url, json=note, headers=sent)

            for _ in range(20):  # warm up (imports, first allocations)
                await open_session()
            before = _rss_kib(process.pid)
            for _ in range(SESSIONS):
                await open_session()
            after = _rss_kib(process.pid)
    finally:
        process.kill()
        await process.wait()
        await process.stderr.aclose()
    per_session_kib = (after - before) / SESSIONS
    made = row(
        BENCH, f"prism serve --http: memory per idle session ({SESSIONS} opened)",
        [per_session_kib * 1.0],
        note=f"{per_session_kib:.1f} KiB RSS per session ({before} -> {after} KiB); "
        "the value is KiB, not time",
    )  # fmt: skip
    return [made]


# --stages: the gateway's CPU per bridged call, stage by stage, measured in its process.
STAGE_WARMUP = 300
STAGE_CALLS = 2000 if QUICK else 6000


def _probed_gateway(root: str, out: str, measured: int) -> None:
    """The tests' gateway (``GATEWAY``), its CPU per call taken apart (``--probed-gateway``).

    Each probe reads the thread's CPU clock (``time.thread_time_ns``, so time
    spent waiting or preempted is not counted) around one stage: a function,
    or a coroutine's every resumption (so its awaits are not counted either);
    a trio instrument does the same for every task step, and the process's
    CPU clock for all of it. The window is the calls after the first
    ``STAGE_WARMUP`` answers, ``measured`` of them; the totals are written to
    ``out`` as JSON.
    """
    import collections
    import functools
    import time

    sys.path.insert(0, str(TESTS))
    import gateway_stdio_main
    import mcp.client.client as sdk_client
    import mcp_types as types

    import prism.core._outcome as outcome
    import prism.gateway._fast as fast
    import prism.gateway._gateway as gateway
    import prism.gateway._rounds as rounds
    import prism.gateway._upstream as upstream
    import prism.mcp._calls as calls
    import prism.mcp._direct as direct
    import prism.mcp._fastcall as fastcall
    import prism.mcp._gate as gate
    import prism.mcp._stdio as mcp_stdio

    clock = time.thread_time_ns
    spent: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    window = {"on": False, "answers": 0, "cpu": 0.0}

    class Resumed:
        """A coroutine whose resumptions are timed (its awaits are not)."""

        def __init__(self, coro: Any, label: str) -> None:
            self.coro = coro
            self.label = label

        def __await__(self) -> Any:
            return self

        def __next__(self) -> Any:
            return self.send(None)

        def send(self, value: Any) -> Any:
            t0 = clock()
            try:
                return self.coro.send(value)
            finally:
                if window["on"]:
                    spent[self.label] += clock() - t0

        def throw(self, *exc: Any) -> Any:
            t0 = clock()
            try:
                return self.coro.throw(*exc)
            finally:
                if window["on"]:
                    spent[self.label] += clock() - t0

        def close(self) -> Any:
            return self.coro.close()

    def probe(owner: Any, name: str, label: str, *, coroutine: bool = False) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def probed(*args: Any, **kwargs: Any) -> Any:
            if coroutine:  # (one may outlive the window's start: the gate's loops)
                return Resumed(original(*args, **kwargs), label)
            if not window["on"]:
                return original(*args, **kwargs)
            counts[label] += 1
            t0 = clock()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] += clock() - t0

        setattr(owner, name, probed)

    def answered() -> None:
        window["answers"] += 1
        if window["answers"] == STAGE_WARMUP:
            window["on"] = True
            window["cpu"] = time.process_time()
        elif window["answers"] == STAGE_WARMUP + measured:
            window["on"] = False
            window["cpu"] = time.process_time() - window["cpu"]

    line_of = upstream.result_line

    def counted_line(request_id: Any, result: Any) -> bytes:
        line = line_of(request_id, result)
        answered()
        return line

    upstream.result_line = counted_line

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            self.t0 = clock()

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            if window["on"]:
                code = getattr(task.coro, "cr_code", None)
                label = f"task step: {code.co_qualname if code else task.name}"
                spent[label] += clock() - self.t0
                counts[label] += 1

    probe(fast, "_plain_call", "client line: parsed once, taken")
    probe(fast.StdioFastPath, "_start", "client line: registered, the call's task started")
    probe(upstream.CallKernel, "_answer", "kernel: _answer", coroutine=True)
    probe(upstream.CallKernel, "_kernel", "kernel: _kernel", coroutine=True)
    probe(upstream, "classify_inbound_request", "kernel: envelope check")
    probe(upstream.CallKernel, "_envelope_connection", "kernel: envelope's connection")
    probe(upstream.RequestCheck, "check", "kernel: revision's request check")
    probe(types.CallToolRequestParams, "model_validate", "kernel: params model")
    probe(upstream._Runner, "_serialize", "kernel: result check (revision's schema)")
    probe(upstream, "result_line", "kernel: answer line encoded")
    probe(gateway.Gateway, "_on_call_tool", "handler: _on_call_tool", coroutine=True)
    probe(gateway, "client_label", "handler: client label")
    probe(gateway.Gateway, "_execute", "handler: _execute", coroutine=True)
    probe(rounds.CallSlots, "take", "handler: concurrency slots taken", coroutine=True)
    probe(rounds.CallSlots, "close", "handler: concurrency slots freed")
    probe(gateway, "call_tool_result_json", "handler: result JSON")
    probe(gateway, "dispatch_tool_call", "core: dispatch_tool_call", coroutine=True)
    probe(outcome, "settle", "core: settle (ledger record, events)")
    probe(calls.Caller, "call", "bridge: Caller.call", coroutine=True)
    probe(calls.Caller, "_finish", "bridge: result mapped, output schema")
    probe(fastcall.RawCalls, "send", "bridge's send: RawCalls.send", coroutine=True)
    probe(sdk_client.Client, "call_tool", "SDK client: call_tool", coroutine=True)
    probe(fastcall, "simple_call_result", "SDK client: answer's one-pass check, result model")
    probe(direct.DirectCalls, "request", "SDK client: request built")
    probe(direct.DirectCalls, "call", "direct call: DirectCalls.call", coroutine=True)
    probe(mcp_stdio.ServerStdin, "_write_line", "direct call: request line written")
    probe(
        mcp_stdio.ServerStdout, "receive", "server's answer: read, priced, parsed", coroutine=True
    )
    probe(gate._GatedRead, "receive", "server's answer: gate", coroutine=True)
    probe(direct.DirectCalls, "answer", "server's answer: handed to its call")

    try:
        trio.run(gateway_stdio_main.main, root, 16 * 1024 * 1024, None, instruments=[Steps()])
    finally:
        totals = {
            "calls": measured,
            "cpu_ns": window["cpu"] * 1e9,
            "spent_ns": dict(spent),
            "counts": dict(counts),
        }
        Path(out).write_text(json.dumps(totals), encoding="utf-8")


async def stage_rows() -> list[Row]:
    """The gateway's CPU per bridged call, stage by stage (``--stages``)."""
    root = tempfile.mkdtemp(prefix="prism-bench-gateway-")
    out = Path(root, "stages.json")
    python = sys.executable
    args = [__file__, "--probed-gateway", root, str(out), str(STAGE_CALLS)]
    async with Client(StdioServerParameters(command=python, args=args)) as gateway:
        await gateway.list_tools()
        for _ in range(STAGE_WARMUP + STAGE_CALLS + 10):
            result = await gateway.call_tool("mcp__fx__echo", ARGS)
            assert not result.is_error, result
    totals = json.loads(await trio.Path(out).read_text(encoding="utf-8"))
    calls = totals["calls"]
    spent = {key: ns / calls / 1000 for key, ns in totals["spent_ns"].items()}
    counts = {key: n / calls for key, n in totals["counts"].items()}
    cpu_us = totals["cpu_ns"] / calls / 1000

    def own(key: str, *inner: str) -> float:
        return float(spent.get(key, 0.0) - sum(spent.get(k, 0.0) for k in inner))

    steps = {key: us for key, us in spent.items() if key.startswith("task step: ")}
    kernel_step = "task step: CallKernel._run"
    reader = "client line: parsed once, taken", "client line: registered, the call's task started"
    # (stage, CPU µs per call) in the order a call goes; each its own part, nested parts apart
    table: list[tuple[str, float]] = [
        ("event loop: scheduling, epoll (outside every task step)", cpu_us - sum(steps.values())),
        ("reader tasks: the lines read, the rest of their steps",
         sum(us for key, us in steps.items() if key != kernel_step)
         - sum(spent.get(k, 0.0) for k in (*reader, "server's answer: gate"))),
        *((key, spent.get(key, 0.0)) for key in reader),
        ("call task: its own (cancel scope, in-flight table, answer written)",
         own(kernel_step, "kernel: _answer", "kernel: answer line encoded")),
        ("kernel: envelope check and connection, the rest of _answer",
         own("kernel: _answer", "kernel: _kernel")),
        ("kernel: request check, context, params model, result check, the rest of _kernel",
         own("kernel: _kernel", "handler: _on_call_tool")),
        ("kernel: answer line encoded", spent.get("kernel: answer line encoded", 0.0)),
        ("handler: client label, call scope, the rest of _on_call_tool",
         own("handler: _on_call_tool", "handler: _execute")),
        ("handler: slots, forwarding, trace, result JSON, the rest of _execute",
         own("handler: _execute", "core: dispatch_tool_call")),
        ("core: gates (permission, validation), ledger record, events",
         own("core: dispatch_tool_call", "bridge: Caller.call")),
        ("bridge: deadlines, plain answer mapped, output schema (Caller.call)",
         own("bridge: Caller.call", "SDK client: call_tool", "bridge's send: RawCalls.send")),
        ("bridge's send: stamp, request (RawCalls.send; the SDK client's call_tool if any)",
         spent.get("SDK client: call_tool", 0.0)
         + own("bridge's send: RawCalls.send", "direct call: DirectCalls.call")),
        ("direct call: request line (its write: "
         f"{spent.get('direct call: request line written', 0.0):.0f} µs), waiting for the answer",
         spent.get("direct call: DirectCalls.call", 0.0)),
        ("server's answer: read, split, priced, parsed, JSON-RPC model",
         spent.get("server's answer: read, priced, parsed", 0.0)),
        ("server's answer: the answer gate, handed to its call",
         own("server's answer: gate", "server's answer: read, priced, parsed")),
    ]  # fmt: skip
    step_note = ", ".join(
        f"{key.removeprefix('task step: ')} {counts.get(key, 0.0):.2f}" for key in sorted(steps)
    )
    rows = [
        row(
            BENCH,
            "bridged call: the gateway's CPU in all (process clock)",
            [cpu_us],
            note=f"task steps per call: {step_note}",
        )
    ]
    for stage, us in table:
        rows.append(row(BENCH, f"  {stage}", [us]))
    return rows


async def everything() -> list[Row]:
    rows = await main()
    rows += await startup_rows()
    rows += await session_rows()
    return rows


async def _slow_server() -> None:
    """The fixture server, after a slow start (``SLOW_START_S``)."""
    await trio.sleep(SLOW_START_S)
    sys.path.insert(0, str(TESTS))
    from gateway_fixture_server import build  # type: ignore[import-not-found]

    await build().run_stdio_async()


if __name__ == "__main__":
    if "--relay" in sys.argv[1:]:
        trio.run(_relay)
    elif "--pipe-relay" in sys.argv[1:]:
        trio.run(_pipe_relay)
    elif "--json-relay" in sys.argv[1:]:
        trio.run(_json_relay)
    elif "--shape-floor" in sys.argv[1:]:
        trio.run(_shape_floor, False)
    elif "--shape-floor-tasks" in sys.argv[1:]:
        trio.run(_shape_floor, True)
    elif "--gateway-sdk-path" in sys.argv[1:]:
        trio.run(_gateway_sdk_path, sys.argv[-1])
    elif "--gateway-no-direct" in sys.argv[1:]:
        trio.run(_gateway_no_direct, sys.argv[-1])
    elif "--first-requests" in sys.argv[1:]:
        against = sys.argv.index("--against") + 1 if "--against" in sys.argv[1:] else None
        run(lambda: first_request_rows(None if against is None else sys.argv[against]))
    elif "--against" in sys.argv[1:]:
        other = os.path.realpath(sys.argv[sys.argv.index("--against") + 1])
        run(lambda: against_rows(other))
    elif "--floors" in sys.argv[1:]:
        run(floor_rows)
    elif "--probed-gateway" in sys.argv[1:]:
        _probed_gateway(sys.argv[-3], sys.argv[-2], int(sys.argv[-1]))
    elif "--stages" in sys.argv[1:]:
        run(stage_rows)
    elif "--calls" in sys.argv[1:] or FAST_PATHS_ONLY or RATIOS_ONLY:
        run(main)
    elif "--slow-server" in sys.argv[1:]:
        trio.run(_slow_server)
    elif "--startup" in sys.argv[1:]:
        run(startup_rows)
    elif "--sessions" in sys.argv[1:]:
        run(session_rows)
    else:
        run(everything)
