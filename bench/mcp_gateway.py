"""Overhead of ``loopware gateway`` per forwarded MCP call.

Run: ``python -m bench.mcp_gateway [--calls 400] [--quick] [--no-http]``. One upstream MCP
server (a minimal ``echo`` server written with the mcp SDK, started by this module as a
subprocess) is called with the mcp SDK's own `Client`, directly and through the gateway, over
stdio; each round makes one call on every path in turn (the order rotating), so all paths see
the same machine load at the same moment. The gateway runs the full stack on every call:
`ToolPolicy`, `ToolCallLimit`, `RepetitionDetector` and `AuditLog`, the audit both with
``synchronous = "normal"`` (each row survives a process kill) and ``"full"`` (each row is
fsynced). Arguments differ per call so the repetition detector lets every call through.
Reported: the median round trip of each path and the difference (the gateway's overhead per
forwarded call). The 1 ms target is for stdio, the transport a client launching the gateway
uses. The same comparison over streamable HTTP (the upstream served over HTTP directly, versus
the gateway serving HTTP in front of it over stdio) is reported beside it, without a target.
For scale, a "bare relay" path runs the least any stdio proxy does: an asyncio process that
copies lines between the client and the same upstream, reading nothing; its overhead is the
cost of the two extra pipe hops alone on the machine at that moment.

``--quick`` runs 30 calls per path: a smoke test that every path works.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TARGET_MS = 1.0


def serve_upstream(http_port: int | None = None) -> None:
    """The upstream: one ``echo`` tool, over stdio (or streamable HTTP on ``http_port``)."""
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
    if http_port is not None:
        import uvicorn

        app = server.streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=http_port, log_level="warning")
        return

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(serve())


def serve_relay() -> None:
    """The bare relay: start the upstream, copy lines both ways, nothing else."""

    async def relay() -> None:
        loop = asyncio.get_running_loop()
        command = upstream_command()
        upstream = await asyncio.create_subprocess_exec(
            *command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert upstream.stdin is not None
        assert upstream.stdout is not None
        client = asyncio.StreamReader(limit=2**30)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(client), os.fdopen(0, "rb", closefd=False)
        )
        out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", closefd=False))
        upstream_out = upstream.stdout

        async def back() -> None:
            while line := await upstream_out.readline():
                out.write(line)

        answers = asyncio.create_task(back())
        while line := await client.readline():
            upstream.stdin.write(line)
        upstream.stdin.close()
        await upstream.wait()
        answers.cancel()

    asyncio.run(relay())


def upstream_command() -> list[str]:
    return [sys.executable, "-m", "bench.mcp_gateway", "--serve-upstream"]


def write_config(folder: Path, synchronous: str, name: str | None = None) -> Path:
    config = folder / (name or f"gateway-{synchronous}.toml")
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
path = "audit-{config.stem}.jsonl"
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
    """Pids of this process's stdio children whose command line contains ``marker``."""
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
        if parent == me and marker in command and "--http" not in command:
            found.append(int(entry.name))
    return found


async def timed_call(client: Any, n: int) -> float:
    """Milliseconds for one call (its arguments differ from every other call's)."""
    start = time.perf_counter()
    result = await client.call_tool("echo", {"text": f"call {n}"})
    elapsed = (time.perf_counter() - start) * 1000.0
    if result.is_error:
        raise SystemExit(f"a call failed: {result.content}")
    return elapsed


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _listening(argv: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` (a server on ``port``) until the block ends; yield once it listens."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{argv[2:5]} did not start listening") from None
                time.sleep(0.1)
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def run(calls: int, http: bool) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Time every path, one call each in turn (the order rotating), so all see the same load."""
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        folder = Path(tmp)
        command = upstream_command()
        paths: dict[str, Any] = {
            "direct": StdioServerParameters(command=command[0], args=command[1:]),
        }
        markers = {"direct": "--serve-upstream"}
        paths["bare relay"] = StdioServerParameters(
            command=sys.executable, args=["-m", "bench.mcp_gateway", "--serve-relay"]
        )
        markers["bare relay"] = "--serve-relay"
        for sync in ("normal", "full"):
            config = write_config(folder, sync)
            name = f"gateway (audit {sync})"
            paths[name] = StdioServerParameters(
                command=sys.executable,
                args=["-m", "loopware_cli", "gateway", "--config", str(config)],
            )
            markers[name] = config.name
        if http:
            port = _free_port()
            servers.enter_context(_listening([*command, "--http-port", str(port)], port))
            paths["direct, http"] = f"http://127.0.0.1:{port}/mcp"
            port = _free_port()
            config = write_config(folder, "normal", name="gateway-http.toml")
            gateway = [sys.executable, "-m", "loopware_cli", "gateway", "--config", str(config)]
            servers.enter_context(_listening([*gateway, "--http", f"127.0.0.1:{port}"], port))
            paths["gateway, http"] = f"http://127.0.0.1:{port}/mcp"
        samples: dict[str, list[float]] = {name: [] for name in paths}
        async with contextlib.AsyncExitStack() as stack:  # closed in reverse order (anyio)
            clients = {
                name: await stack.enter_async_context(Client(target, read_timeout_seconds=60))
                for name, target in paths.items()
            }
            for client in clients.values():  # warm up every path
                for i in range(20):
                    await timed_call(client, 10_000_000 + i)
            pids = {name: children(marker) for name, marker in markers.items()}
            before = {name: sum(cpu_seconds(p) for p in pids[name]) for name in pids}
            order = list(clients.items())
            for i in range(calls):
                shift = i % len(order)
                for name, client in order[shift:] + order[:shift]:
                    samples[name].append(await timed_call(client, i))
            cpu = {
                name: 1000.0 * (sum(cpu_seconds(p) for p in pids[name]) - before[name]) / calls
                for name in pids
            }
    return samples, cpu


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
    parser.add_argument("--no-http", action="store_true", help="skip the streamable HTTP paths")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-relay", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--http-port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.http_port)
        return
    if args.serve_relay:
        serve_relay()
        return
    calls = 30 if args.quick else args.calls
    samples, cpu = asyncio.run(run(calls, http=not args.no_http))
    print(f"{calls} calls per path, one call of each path in turn; round trip (ms), mcp SDK client")
    print(f"{'path':<24} {'median':>8} {'p90':>8} {'overhead':>9} {'server CPU':>11}")
    base = {"stdio": statistics.median(samples["direct"])}
    if "direct, http" in samples:
        base["http"] = statistics.median(samples["direct, http"])
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        transport = "http" if "http" in name else "stdio"
        extra = "" if name.startswith("direct") else f"{median - base[transport]:9.3f}"
        used = f"{cpu[name]:11.3f}" if name in cpu else ""
        print(f"{name:<24} {median:8.3f} {p90:8.3f} {extra:>9} {used}")
    stdio = [statistics.median(v) for k, v in samples.items() if k.startswith("gateway (")]
    worst = max(stdio) - base["stdio"]
    verdict = "meets" if worst <= TARGET_MS else "misses"
    print(
        f"gateway overhead, stdio: {worst:.3f} ms per call ({verdict} the {TARGET_MS:g} ms target)"
    )
    if "http" in base:
        http = statistics.median(samples["gateway, http"]) - base["http"]
        print(f"gateway overhead, streamable HTTP (audit normal): {http:.3f} ms per call")
    bare, stacked = asyncio.run(in_process(calls))
    share = statistics.median(stacked) - statistics.median(bare)
    print(
        f"in-process: upstream call alone {statistics.median(bare):.3f} ms, through "
        f"Gateway.call (policy, limit, repetition, audit, turn) {statistics.median(stacked):.3f}"
        f" ms: loopware's share {share:.3f} ms per call"
    )
    print(
        "server CPU: CPU ms per call of the process the client talks to over stdio (the "
        "upstream for direct, the gateway or relay process alone otherwise); bare relay: the "
        "two extra pipe hops alone"
    )


if __name__ == "__main__":
    main()
