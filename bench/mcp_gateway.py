"""Overhead of ``loopware gateway`` per forwarded MCP call.

Run: ``python -m bench.mcp_gateway [--calls 400] [--quick]``. One upstream MCP server (a
minimal ``echo`` server written with the mcp SDK, started by this module as a subprocess) is
called with the mcp SDK's own `Client` over stdio, directly and through the gateway (also over
stdio), in interleaved blocks so both see the same machine load. The gateway runs the full
stack on every call: `ToolPolicy`, `ToolCallLimit`, `RepetitionDetector` and `AuditLog`, the
audit both with ``synchronous = "normal"`` (each row survives a process kill) and
``"full"`` (each row is fsynced). Arguments differ per call so the repetition detector lets
every call through. Reported: the median round trip of each path and the difference (the
gateway's overhead per forwarded call; target: at most 1 ms).

``--quick`` runs 30 calls per path: a smoke test that every path works.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_MS = 1.0


def serve_upstream() -> None:
    """The upstream: one ``echo`` tool, over stdio."""
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="echo", description="Echo.", input_schema=schema)]
        )

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server("bench-echo", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(main())


def upstream_command() -> list[str]:
    return [sys.executable, "-m", "bench.mcp_gateway", "--serve-upstream"]


def write_config(folder: Path, synchronous: str) -> Path:
    config = folder / f"gateway-{synchronous}.toml"
    config.write_text(
        f"""
[[upstream]]
command = {json.dumps(upstream_command())}

[policy]
deny = ["nothing_*"]

[limits]
total = 1000000

[repetition]
threshold = 3

[audit]
path = "audit-{synchronous}.jsonl"
synchronous = "{synchronous}"
"""
    )
    return config


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def children(marker: str) -> list[int]:
    """Pids of this process's children whose command line contains ``marker``."""
    found = []
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if parent == me and marker in command:
            found.append(int(entry.name))
    return found


async def timed(client: Any, calls: int, offset: int) -> list[float]:
    """Milliseconds per call for ``calls`` sequential calls."""
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        result = await client.call_tool("echo", {"text": f"call {offset + i}"})
        samples.append((time.perf_counter() - start) * 1000.0)
        if result.is_error:
            raise SystemExit(f"a call failed: {result.content}")
    return samples


async def run(calls: int, block: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        command = upstream_command()
        paths = {
            "direct": StdioServerParameters(command=command[0], args=command[1:]),
        }
        for sync in ("normal", "full"):
            config = write_config(folder, sync)
            paths[f"gateway (audit {sync})"] = StdioServerParameters(
                command=sys.executable,
                args=["-m", "loopware_cli", "gateway", "--config", str(config)],
            )
        samples: dict[str, list[float]] = {name: [] for name in paths}
        markers = {
            "direct": "--serve-upstream",
            **{n: f"gateway-{n.split()[-1][:-1]}.toml" for n in paths if n != "direct"},
        }
        async with contextlib.AsyncExitStack() as stack:  # closed in reverse order (anyio)
            clients = {
                name: await stack.enter_async_context(Client(params, read_timeout_seconds=60))
                for name, params in paths.items()
            }
            for name, client in clients.items():  # warm up every path
                await timed(client, 20, 10_000_000 + len(samples[name]))
            pids = {name: children(marker) for name, marker in markers.items()}
            cpu = dict.fromkeys(paths, 0.0)
            done = 0
            while done < calls:
                n = min(block, calls - done)
                for name, client in clients.items():
                    before = sum(cpu_seconds(p) for p in pids[name])
                    samples[name] += await timed(client, n, done)
                    cpu[name] += sum(cpu_seconds(p) for p in pids[name]) - before
                done += n
    return samples, {name: 1000.0 * seconds / calls for name, seconds in cpu.items()}


async def in_process(calls: int) -> tuple[list[float], list[float]]:
    """Loopware's own share: `Gateway.call` (stack, audit, turn) against the bare upstream call.

    Both go through the same `MCPToolset` connection to the same upstream process, interleaved
    call by call, so the difference is what the gateway adds besides being an MCP server.
    """
    from loopware_cli._gateway import Gateway
    from loopware_cli._gateway_config import load_config

    with tempfile.TemporaryDirectory() as tmp:
        gateway = Gateway(load_config(write_config(Path(tmp), "normal")))
        await gateway.start()
        try:
            (tool,) = gateway.toolsets[0].tools
            bare: list[float] = []
            stacked: list[float] = []
            for i in range(calls + 20):
                start = time.perf_counter()
                await tool.run(_Quiet(), {"text": f"bare {i}"}, call_id=f"b{i}")
                middle = time.perf_counter()
                record, _ = await gateway.call("bench", "echo", {"text": f"gateway {i}"})
                end = time.perf_counter()
                if record.is_error:
                    raise SystemExit(f"a gateway call failed: {record.results}")
                if i >= 20:
                    bare.append((middle - start) * 1000.0)
                    stacked.append((end - middle) * 1000.0)
        finally:
            await gateway.aclose()
    return bare, stacked


class _Quiet:
    """The smallest `ToolContext`: no listeners, so no events are built."""

    turn_id = "bench"
    listening = False

    def emit(self, event: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="30 calls per path (smoke test)")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream()
        return
    calls = 30 if args.quick else args.calls
    samples, cpu = asyncio.run(run(calls, block=10 if args.quick else 50))
    direct = statistics.median(samples["direct"])
    print(f"{calls} calls per path, median round trip (ms), mcp SDK client over stdio")
    print(f"{'path':<24} {'median':>8} {'p90':>8} {'overhead':>9} {'server CPU':>11}")
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        extra = "" if name == "direct" else f"{median - direct:9.3f}"
        print(f"{name:<24} {median:8.3f} {p90:8.3f} {extra:>9} {cpu[name]:11.3f}")
    worst = max(statistics.median(v) for k, v in samples.items() if k != "direct") - direct
    verdict = "meets" if worst <= TARGET_MS else "misses"
    print(f"gateway overhead {worst:.3f} ms per call: {verdict} the {TARGET_MS:g} ms target")
    bare, stacked = asyncio.run(in_process(calls))
    share = statistics.median(stacked) - statistics.median(bare)
    print(
        f"in-process: upstream call alone {statistics.median(bare):.3f} ms, through "
        f"Gateway.call (policy, limit, repetition, audit, turn) {statistics.median(stacked):.3f}"
        f" ms: loopware's share {share:.3f} ms per call"
    )
    print(
        "server CPU: CPU ms per call of the process the client talks to (the upstream for "
        "direct, the gateway process alone otherwise), robust to a loaded machine"
    )


if __name__ == "__main__":
    main()
