"""Instructions per forwarded call in the gateway process and in the plain SDK proxy's.

Run: ``python -m bench.mcp_gateway_instructions [--few 50] [--many 300]``. The mcp SDK's
`Client` calls the same ``echo`` upstream as ``bench.mcp_gateway``, through the gateway (the
full stack, the audit ``synchronous = "normal"``) and through the plain SDK proxy
(``bench/mcp_gateway_proxy.py``), each started under ``valgrind --tool=callgrind`` (the
upstream, a child, is not counted), once with ``--few`` calls and once with ``--many``; the
difference of the two totals over the difference of the calls is what one call costs, start-up
and shut-down cancelled out. Counted instructions do not depend on the machine's speed or load,
so this compares the gateway with the proxy (and two trees) on a shared machine, where the
timings of ``bench.mcp_gateway`` move with the load. It needs valgrind, and takes a few minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench._callgrind import callgrind_argv, read_total
from bench.mcp_gateway import upstream_command, write_config
from bench.mcp_gateway_proxy import proxy_command

PATHS = ("gateway", "plain SDK proxy")


async def total(path: str, calls: int, folder: Path) -> int:
    """Instructions of a gateway or proxy process that served ``calls`` calls (start to exit)."""
    from mcp import Client, StdioServerParameters

    out = folder / f"callgrind.{path.replace(' ', '-')}.{calls}.out"
    if path == "gateway":
        config = write_config(folder, "normal", name=f"gateway-{calls}.toml")
        served = ["-m", "loopware_cli", "gateway", "--config", str(config)]
    else:
        served = proxy_command(upstream_command("proxied"))
    argv = [*callgrind_argv(out), sys.executable, *served]
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with Client(server, read_timeout_seconds=600) as client:
        for n in range(calls):
            result = await client.call_tool("echo", {"text": f"call {n}"})
            if result.is_error:
                raise SystemExit(f"a call failed: {result.content}")
    return read_total(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=50)
    parser.add_argument("--many", type=int, default=300)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    per_call = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in PATHS:
            few = asyncio.run(total(path, args.few, Path(tmp)))
            many = asyncio.run(total(path, args.many, Path(tmp)))
            per_call[path] = (many - few) / (args.many - args.few)
            print(f"{path}: {per_call[path] / 1000:,.0f}k instructions per forwarded call")
    extra = per_call["gateway"] - per_call["plain SDK proxy"]
    print(f"the gateway runs {extra / 1000:,.0f}k instructions per call more than the proxy")


if __name__ == "__main__":
    main()
