"""Replay cost as a transcript grows: calls per second and peak memory at 1k, 10k, 100k calls.

Run from the repository root::

    python -m bench.replay_scale            # 1k, 10k and 100k calls, two shapes (minutes)
    python -m bench.replay_scale --quick    # 200 and 2,000 calls, for a smoke test

What is measured
----------------
* A synthetic OpenAI chat-completions transcript written as JSON Lines, in two shapes: every
  call in one turn (the shape that used to be quadratic in the replay itself) and turns of 100
  calls (``--per-turn N`` picks shapes); one call per assistant message, each answered by a tool
  message; arguments cycle through 50 values so repeats occur, three tools.
* ``loopware replay`` as a user runs it, through the Python API: `read_transcript` streams the
  file, `replay` runs it through ``RepetitionDetector(threshold=3, window=6)`` and
  ``ToolCallLimit(total=1000)``, and the report is rendered as JSON piece by piece
  (``ReplayReport.iter_json``, what ``loopware replay --json`` writes).
* Each size runs in a fresh subprocess; peak memory is that process's maximum resident set size
  (``ru_maxrss``: the interpreter and imports included). Calls per second = calls / wall time of
  read + replay + JSON; calls per CPU second = calls / the process's CPU time for the same work
  (steadier than wall time on a shared machine).
* Verdict: linear cost means calls per CPU second stay about the same as the size grows (the
  largest run keeps at least half the smallest run's rate); a 100k run must stay under 1 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from middleware import RepetitionDetector, ToolCallLimit
from middleware.transcripts import read_transcript, replay

_TOOLS = ("read_file", "run_command", "search")
_MB = 1024 * 1024
_LIMIT_GB = 1.0


def write_transcript(path: Path, calls: int, per_turn: int) -> None:
    """Write a JSON Lines transcript of ``calls`` calls, ``per_turn`` per turn (0: one turn)."""
    per_turn = per_turn or calls
    with path.open("w", encoding="utf-8") as out:
        for k in range(calls):
            if k % per_turn == 0:
                if k:
                    out.write(json.dumps({"role": "assistant", "content": "done"}) + "\n")
                out.write(json.dumps({"role": "user", "content": f"task {k // per_turn}"}) + "\n")
            call = {
                "id": f"call_{k}",
                "type": "function",
                "function": {
                    "name": _TOOLS[k % len(_TOOLS)],
                    "arguments": json.dumps({"arg": k % 50}),
                },
            }
            out.write(json.dumps({"role": "assistant", "content": None, "tool_calls": [call]}))
            out.write("\n")
            out.write(json.dumps({"role": "tool", "tool_call_id": f"call_{k}", "content": f"r{k}"}))
            out.write("\n")
        out.write(json.dumps({"role": "assistant", "content": "done"}) + "\n")


def run_one(path: Path) -> dict[str, Any]:
    """Read, replay and render one transcript in this process; return the figures."""
    cpu = time.process_time()
    started = time.perf_counter()
    transcript = read_transcript(path)
    read = time.perf_counter()
    report = replay(
        transcript, [RepetitionDetector(threshold=3, window=6), ToolCallLimit(total=1000)]
    )
    replayed = time.perf_counter()
    size = sum(len(piece) for piece in report.iter_json())  # as `loopware replay --json` writes
    ended = time.perf_counter()
    cpu = time.process_time() - cpu
    calls = len(report.calls)
    return {
        "calls": calls,
        "turns": len(report.turns),
        "issues": len(transcript.issues),
        "read_s": read - started,
        "replay_s": replayed - read,
        "json_s": ended - replayed,
        "calls_per_s": calls / (ended - started),
        "cpu_s": cpu,
        "calls_per_cpu_s": calls / cpu,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "json_mb": size / _MB,
        "verdicts": report.counts(),
    }


def measure(calls: int, per_turn: int, folder: Path) -> dict[str, Any]:
    """Write the transcript, then replay it in a fresh interpreter."""
    path = folder / f"t{calls}_{per_turn}.jsonl"
    write_transcript(path, calls, per_turn)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "bench.replay_scale", "--one", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    path.unlink()
    if done.returncode != 0:
        raise SystemExit(f"the {calls}-call run failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def run_shape(sizes: list[int], per_turn: int, folder: Path) -> bool:
    """Measure one transcript shape at every size; print the table; True when linear."""
    shape = "every call in one turn" if per_turn == 0 else f"{per_turn} calls per turn"
    print(f"\n{shape}")
    print(
        f"{'calls':>8} {'turns':>6} {'calls/s':>9} {'calls/cpu-s':>12} {'wall s':>8} "
        f"{'cpu s':>7} {'peak MB':>8}"
    )
    rows = []
    for calls in sizes:
        row = measure(calls, per_turn, folder)
        rows.append(row)
        wall = row["read_s"] + row["replay_s"] + row["json_s"]
        print(
            f"{row['calls']:>8} {row['turns']:>6} {row['calls_per_s']:>9.0f} "
            f"{row['calls_per_cpu_s']:>12.0f} {wall:>8.2f} {row['cpu_s']:>7.2f} "
            f"{row['peak_mb']:>8.0f}",
            flush=True,
        )
    first, last = rows[0], rows[-1]
    ratio = last["calls_per_cpu_s"] / first["calls_per_cpu_s"]
    rate_kept = ratio >= 0.5
    under = last["calls"] < 100_000 or last["peak_mb"] < _LIMIT_GB * 1024
    print(
        f"calls per CPU second at {last['calls']} calls: {ratio:.0%} of the rate at "
        f"{first['calls']} ({'linear' if rate_kept else 'NOT linear'}); "
        f"peak {last['peak_mb']:.0f} MB{'' if under else ' (over 1 GB)'}"
    )
    return bool(rate_kept and under)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0 when every shape is linear and 100k calls fit in 1 GB."""
    parser = argparse.ArgumentParser(prog="python -m bench.replay_scale")
    parser.add_argument("--quick", action="store_true", help="200 and 2,000 calls only")
    parser.add_argument(
        "--per-turn",
        type=int,
        action="append",
        default=None,
        help="calls per turn, 0 for one turn (repeatable; default: 0 and 100)",
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="call counts")
    parser.add_argument("--one", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(Path(args.one))))
        return 0
    sizes = args.sizes or ([200, 2_000] if args.quick else [1_000, 10_000, 100_000])
    shapes = args.per_turn or [0, 100]
    print(f"replay scale: Python {platform.python_version()}, {platform.machine()}")
    with tempfile.TemporaryDirectory(prefix="loopware-bench-") as folder:
        linear = [run_shape(sizes, per_turn, Path(folder)) for per_turn in shapes]
    return 0 if all(linear) else 1


if __name__ == "__main__":
    raise SystemExit(main())
