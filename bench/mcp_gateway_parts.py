"""Instructions per call of each part of the gateway's stack, in process, counted by callgrind.

Run: ``python -m bench.mcp_gateway_parts [--few 50] [--many 250] [--runs 1]``. A Python
process runs
`Gateway.call` (``loopware_cli/_gateway.py``: the turn, the tool's argument validation and the
configured middleware, then the upstream call) against the ``echo`` upstream of
``bench.mcp_gateway``, under ``valgrind --tool=callgrind``, once with ``--few`` calls and once
with ``--many``; the difference over the difference of the calls is one call's cost. It does so
for the upstream call alone (``pipeline/mcp/_connection.py``, `Connection.call`: the SDK's
client), then for the gateway with the policy only (the gateway always has one), with a call
limit added, repetition added and the audit added (``synchronous = "normal"``). Each row's
difference to the row above is what that part costs per call; no MCP server in front (the SDK's
server costs the same for any proxy: ``bench.mcp_gateway_instructions``). It needs valgrind.

A row counted twice can differ by up to about 100k instructions per call (the event loop's
passes depend on when the upstream answers), so ``--runs K`` counts every row K times, each in
fresh processes, and prints every run's figure and the median; compare trees on medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._callgrind import callgrind_argv, read_total
from bench.mcp_gateway import upstream_command

SECTIONS = {
    "limits": "[limits]\ntotal = 1000000\n",
    "repetition": "[repetition]\nthreshold = 3\n",
    "audit": '[audit]\npath = "audit.jsonl"\nsynchronous = "normal"\n',
}
ROWS = (
    ("upstream call alone (Connection.call)", None),
    ("Gateway.call, policy only", ()),
    ("  + call limit", ("limits",)),
    ("  + repetition", ("limits", "repetition")),
    ("  + audit (normal)", ("limits", "repetition", "audit")),
)


async def calls(parts: tuple[str, ...] | None, count: int) -> None:
    """Make ``count`` calls through ``parts`` of the stack (None: the upstream call alone)."""
    from loopware_cli._gateway import Gateway
    from loopware_cli._gateway_config import load_config
    from pipeline.mcp._connection import Connection

    if parts is None:
        connection = Connection(upstream_command(), connect_timeout=30)
        try:
            for n in range(20 + count):
                await connection.call("echo", {"text": f"call {n}"}, 60)
        finally:
            await connection.aclose()
        return
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gateway.toml"
        sections = "".join(SECTIONS[p] for p in parts or ())
        config.write_text(
            f"[[upstream]]\ncommand = {json.dumps(upstream_command())}\n"
            f'[policy]\ndeny = ["nothing_*"]\n{sections}'
        )
        gateway = Gateway(load_config(config))
        await gateway.start()
        try:
            for n in range(20 + count):
                record, _ = await gateway.call("bench", "echo", {"text": f"call {n}"})
                if record.is_error:
                    raise SystemExit(f"a call failed: {record.results}")
        finally:
            await gateway.aclose()


def total(parts: tuple[str, ...] | None, count: int, folder: Path) -> int:
    """Instructions of a process that made ``count`` calls through ``parts``."""
    spec = "bare" if parts is None else ",".join(parts) or "policy"
    out = folder / f"callgrind.{spec}"
    argv = callgrind_argv(Path(f"{out}.{count}"))
    argv += [sys.executable, "-m", "bench.mcp_gateway_parts", "--run", spec, str(count)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return read_total(Path(f"{out}.{count}"))


def main() -> None:
    """Count each row of `ROWS`, or (``--run``) make the calls of one row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=50)
    parser.add_argument("--many", type=int, default=250)
    parser.add_argument("--runs", type=int, default=1, help="count every row this many times")
    parser.add_argument("--run", nargs=2, metavar=("PARTS", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:
        spec, count = args.run
        parts = None if spec == "bare" else tuple(p for p in spec.split(",") if p != "policy")
        asyncio.run(calls(parts, int(count)))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [
            [per_call(parts, args.few, args.many, Path(tmp)) for _, parts in ROWS]
            for _ in range(args.runs)
        ]
    medians = [statistics.median(run[i] for run in runs) for i in range(len(ROWS))]
    for i, (label, _) in enumerate(ROWS):
        step = "" if i == 0 else f"  ({medians[i] - medians[i - 1]:+,.0f}k)"
        each = "" if args.runs == 1 else "  runs: " + ", ".join(f"{r[i]:,.0f}k" for r in runs)
        print(f"{label:<40} {medians[i]:8,.0f}k instructions per call{step}{each}")
    if args.runs > 1:
        shares = ", ".join(f"{run[-1] - run[0]:,.0f}k" for run in runs)
        print(
            f"loopware's share (last row - first), median of {args.runs} runs: "
            f"{medians[-1] - medians[0]:,.0f}k (runs: {shares})"
        )


def per_call(parts: tuple[str, ...] | None, few: int, many: int, folder: Path) -> float:
    """Thousands of instructions one call through ``parts`` costs (``many`` calls - ``few``)."""
    return (total(parts, many, folder) - total(parts, few, folder)) / (many - few) / 1000


if __name__ == "__main__":
    main()
