"""Instructions per forwarded call in the ``loopware gateway`` process, counted by callgrind.

Run: ``python -m bench.mcp_gateway_instructions [--few 50] [--many 300]``. The mcp SDK's
`Client` calls the same ``echo`` upstream as ``bench.mcp_gateway`` through a gateway (the full
stack, the audit ``synchronous = "normal"``) started under ``valgrind --tool=callgrind``, once
with ``--few`` calls and once with ``--many``; the difference of the two totals over the
difference of the calls is what one call costs, start-up and shut-down cancelled out. Counted
instructions do not depend on the machine's speed, so this compares two trees on a shared
machine (the timing paths of ``bench.mcp_gateway`` move with its load). It needs valgrind,
and takes a minute or two.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from bench.mcp_gateway import write_config


async def total(calls: int, folder: Path) -> int:
    """Instructions of a gateway process that served ``calls`` calls (start to exit)."""
    from mcp import Client, StdioServerParameters

    out = folder / f"callgrind.{calls}.out"
    config = write_config(folder, "normal", name=f"gateway-{calls}.toml")
    argv = [
        "valgrind",
        "-q",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "loopware_cli",
        "gateway",
        "--config",
        str(config),
    ]
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with Client(server, read_timeout_seconds=600) as client:
        for n in range(calls):
            result = await client.call_tool("echo", {"text": f"call {n}"})
            if result.is_error:
                raise SystemExit(f"a call failed: {result.content}")
    found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"no totals in {out}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=50)
    parser.add_argument("--many", type=int, default=300)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        few = asyncio.run(total(args.few, Path(tmp)))
        many = asyncio.run(total(args.many, Path(tmp)))
    per_call = (many - few) / (args.many - args.few)
    print(f"gateway instructions per forwarded call: {per_call / 1000:,.0f}k")


if __name__ == "__main__":
    main()
