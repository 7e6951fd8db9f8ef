"""Write and verify a 10,000-row audit chain with each sink.

Run: ``python -m bench.audit_chain [--rows 10000]``. For `SqliteAuditSink` and `JsonlAuditSink`,
with ``synchronous="full"`` (every append survives power loss: fsync) and ``"normal"`` (every
append survives a process kill), rows are appended two ways: one awaited ``append`` per row (the
worst case: one transaction per row) and in batches of 100 (what `AuditLog` does when an
iteration completes several calls). Then ``verify()`` re-reads and re-hashes the whole chain.
Each case fails loudly if the chain does not verify or has the wrong length.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from middleware import AuditEntry, JsonlAuditSink, SqliteAuditSink
from pipeline import canonical_json

Sink = SqliteAuditSink | JsonlAuditSink


def entries(count: int) -> list[AuditEntry]:
    """Tool-call entries shaped like real ones (canonical args, durations, decisions)."""
    now = datetime.now(UTC)
    return [
        AuditEntry(
            kind="tool_call",
            turn_id=f"turn_{i // 10:08d}",
            conversation_id="bench",
            recorded_at=now,
            call_id=f"call_{i:08d}",
            tool="search",
            checksum=f"{i:064x}",
            args=canonical_json({"query": f"item {i}", "limit": 10, "filters": ["a", "b"]}),
            is_error=i % 17 == 0,
            duration_ms=1.5 + i % 7,
            decision="allowed" if i % 5 else "approved",
            policy=None if i % 5 else "loopware.approval",
            reason=None if i % 5 else "approved",
        )
        for i in range(count)
    ]


async def write(sink: Sink, rows: list[AuditEntry], batch: int) -> None:
    """Append ``rows`` in awaited batches of ``batch``."""
    for start in range(0, len(rows), batch):
        await sink.append(rows[start : start + batch])


def case(
    label: str, make: Callable[[Path], Sink], rows: list[AuditEntry], batch: int
) -> tuple[float, float]:
    """Return (seconds to write, seconds to verify) for one sink configuration."""
    with tempfile.TemporaryDirectory() as folder:
        sink = make(Path(folder))
        t0 = time.perf_counter()
        asyncio.run(write(sink, rows, batch))
        t1 = time.perf_counter()
        broken = sink.verify()
        t2 = time.perf_counter()
        count = sink.head().count
        sink.close()
    if broken is not None or count != len(rows):
        raise SystemExit(f"{label}: chain broken at {broken} or wrong length {count}")
    return t1 - t0, t2 - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    rows = entries(args.rows)
    print(f"{args.rows:,} audit rows per case")
    header = ("sink", "synchronous", "batch", "write s", "µs/row", "verify s")
    print("{:8} {:12} {:>5} {:>8} {:>7} {:>9}".format(*header))
    for name, cls in (("sqlite", SqliteAuditSink), ("jsonl", JsonlAuditSink)):
        for sync in ("full", "normal"):
            for batch in (1, 100):
                file = "audit.sqlite" if name == "sqlite" else "audit.jsonl"

                def make(folder: Path, cls: type = cls, sync: str = sync, file: str = file) -> Sink:
                    sink: Sink = cls(folder / file, synchronous=sync)
                    return sink

                written, verified = case(f"{name}/{sync}/{batch}", make, rows, batch)
                per_row = written / args.rows * 1e6
                print(
                    f"{name:8} {sync:12} {batch:>5} {written:>8.2f} {per_row:>7.0f} "
                    f"{verified:>9.2f}"
                )


if __name__ == "__main__":
    main()
