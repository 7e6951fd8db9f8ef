"""Audit sinks against a raw write with the same durability, measured paired in one run.

Run: ``python -m bench.audit_chain [--rows 2000] [--repeats 5]`` (``--quick``: a smoke run).
For `SqliteAuditSink` and `JsonlAuditSink`, with ``synchronous="full"`` (every append survives
power loss) and ``"normal"`` (every append survives a process kill), rows are appended three
ways:

- ``1``: one awaited ``append`` per row (the worst case: one transaction or ``fdatasync`` per
  row);
- ``100``: awaited appends of 100 rows each;
- ``100x1``: 100 tasks (concurrent turns) each append one row at once; the sink's group
  commit writes them together (the raw limit: the same tasks, their rows gathered until the
  event loop gets control back and written by one raw write).

The raw write is the limit: the same entries, each serialised once (a JSON object of the same
fields for JSON Lines, the same column values for SQLite), written from the same coroutine
with the same durability and no chain: ``os.write`` (+ ``fdatasync`` with ``full``) of
the lines to a file opened with ``O_APPEND``; one ``BEGIN``/``INSERT``/``COMMIT`` into a WAL
database with the same ``synchronous`` setting (one row per write for ``1``, 100 rows for
``100``). It does its I/O on the event loop thread, blocking it (for the whole
``fdatasync`` with ``full``); a sink never does (see ``middleware/audit/_writer.py``).

Each repeat runs the raw write and the sink back to back (alternating which goes first) on
fresh files; the table shows the medians of µs per row and the median of the paired ratios,
plus the longest time one ``append`` call held the event loop (the sink's, and the raw
write's). Every sink's chain is verified (it fails loudly if it does not verify or has the
wrong length) and the time of ``verify()`` on the last repeat's chain is shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from middleware import AuditEntry, AuditRow, JsonlAuditSink, SqliteAuditSink
from pipeline import canonical_json

Sync = Literal["full", "normal"]
_sync = getattr(os, "fdatasync", os.fsync)


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


def _values(e: AuditEntry) -> tuple[Any, ...]:
    return (
        e.kind, e.turn_id, e.conversation_id, e.recorded_at.isoformat(), e.call_id, e.tool,
        e.checksum, e.args, e.is_error, e.duration_ms, e.decision, e.policy, e.reason,
        e.status, e.error, e.input,
    )


_COLUMNS = (
    "kind", "turn_id", "conversation_id", "recorded_at", "call_id", "tool", "checksum", "args",
    "is_error", "duration_ms", "decision", "policy", "reason", "status", "error", "input",
)


def _written() -> asyncio.Future[None]:
    """A completed future: the raw write is done before ``append`` returns, as a sink's can be."""
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


class Writer(Protocol):
    """A sink, or a raw writer standing in for one."""

    def append(self, entries: Sequence[AuditEntry]) -> Awaitable[object]:
        """Write ``entries``."""
        ...

    def close(self) -> None:
        """Release the file."""
        ...


class RawJsonl:
    """Lines appended with ``os.write`` (+ ``fdatasync``): no chain, no head, no lock."""

    def __init__(self, path: Path, sync: Sync) -> None:
        """Open ``path`` for appending."""
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._fsync = sync == "full"

    def append(self, entries: Sequence[AuditEntry]) -> Awaitable[None]:
        """Serialise and write the entries (one write), then sync when ``full``."""
        data = b"".join(
            (json.dumps(dict(zip(_COLUMNS, _values(e), strict=True)), ensure_ascii=False,
                        separators=(",", ":")) + "\n").encode()
            for e in entries
        )
        os.write(self._fd, data)
        if self._fsync:
            _sync(self._fd)
        return _written()

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


class RawSqlite:
    """Rows inserted in one transaction per write, WAL, the same ``synchronous``: no chain."""

    _INSERT = (
        f"INSERT INTO audit_rows ({', '.join(_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(_COLUMNS))})"
    )

    def __init__(self, path: Path, sync: Sync) -> None:
        """Create the table."""
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute(f"PRAGMA synchronous = {sync.upper()}")
        self._conn.execute(
            f"CREATE TABLE audit_rows (idx INTEGER PRIMARY KEY, {', '.join(_COLUMNS)})"
        )

    def append(self, entries: Sequence[AuditEntry]) -> Awaitable[None]:
        """Insert the entries in one transaction."""
        conn = self._conn
        conn.execute("BEGIN")
        if len(entries) == 1:
            conn.execute(self._INSERT, _values(entries[0]))
        else:
            conn.executemany(self._INSERT, [_values(e) for e in entries])
        conn.execute("COMMIT")
        return _written()

    def close(self) -> None:
        """Close the database."""
        self._conn.close()


class RawGroup:
    """The least a group commit costs: the rows of appends made until the event loop gets
    control back, written by one raw write (the tasks and futures are the sink's too)."""

    def __init__(self, raw: RawJsonl | RawSqlite) -> None:
        """Wrap a raw writer."""
        self._raw = raw
        self._rows: list[AuditEntry] = []
        self._waits: list[asyncio.Future[None]] = []
        self.hold = 0.0
        """The longest write, in seconds (it runs on the event loop)."""

    def append(self, entries: Sequence[AuditEntry]) -> Awaitable[None]:
        """Gather ``entries``; the future completes when the group is written."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        if not self._rows:
            loop.call_soon(self._flush)
        self._rows.extend(entries)
        self._waits.append(done)
        return done

    def _flush(self) -> None:
        rows, waits, self._rows, self._waits = self._rows, self._waits, [], []
        s = time.perf_counter()
        self._raw.append(rows)
        self.hold = max(self.hold, time.perf_counter() - s)
        for done in waits:
            done.set_result(None)

    def close(self) -> None:
        """Close the raw writer."""
        self._raw.close()


async def _write(writer: Writer, rows: list[AuditEntry], mode: str) -> tuple[float, float]:
    """Append ``rows`` as ``mode`` says; return (seconds, longest append call in seconds)."""
    clock = time.perf_counter
    hold = 0.0
    t0 = clock()
    if mode == "1":
        for entry in rows:
            s = clock()
            pending = writer.append([entry])
            hold = max(hold, clock() - s)
            await pending
    elif mode == "100":
        for start in range(0, len(rows), 100):
            s = clock()
            pending = writer.append(rows[start : start + 100])
            hold = max(hold, clock() - s)
            await pending
    else:  # 100x1: 100 tasks append one row each (concurrent turns), gathered
        holds: list[float] = []

        async def one(entry: AuditEntry) -> None:
            s = clock()
            pending = writer.append([entry])
            holds.append(clock() - s)
            await pending

        for start in range(0, len(rows), 100):
            await asyncio.gather(*(one(entry) for entry in rows[start : start + 100]))
        hold = max(holds)
        if isinstance(writer, RawGroup):
            hold = max(hold, writer.hold)
    return clock() - t0, hold


def _run(make: Callable[[Path], Writer], rows: list[AuditEntry], mode: str) -> tuple[float, ...]:
    """Write ``rows`` with a fresh writer; for sinks, check and time ``verify()``."""
    with tempfile.TemporaryDirectory() as folder:
        writer = make(Path(folder))
        try:
            seconds, hold = asyncio.run(_write(writer, rows, mode))
            verified = 0.0
            if isinstance(writer, SqliteAuditSink | JsonlAuditSink):
                t0 = time.perf_counter()
                broken = writer.verify()
                verified = time.perf_counter() - t0
                count = writer.head().count
                if broken is not None or count != len(rows):
                    raise SystemExit(f"{writer!r}: chain broken at {broken} or {count} rows")
        finally:
            writer.close()
    return seconds / len(rows) * 1e6, hold * 1e6, verified


def _maker(name: str, sync: Sync, raw: bool, mode: str) -> Callable[[Path], Writer]:
    def make(folder: Path) -> Writer:
        if not raw:
            if name == "sqlite":
                return SqliteAuditSink(folder / "audit.sqlite", synchronous=sync)
            return JsonlAuditSink(folder / "audit.jsonl", synchronous=sync)
        writer = (
            RawSqlite(folder / "audit.sqlite", sync) if name == "sqlite"
            else RawJsonl(folder / "audit.jsonl", sync)
        )
        return RawGroup(writer) if mode == "100x1" else writer

    return make


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="rows per case and repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 rows, 1 repeat")
    args = parser.parse_args()
    count, repeats = (200, 1) if args.quick else (args.rows, args.repeats)
    rows = entries(count)
    print(f"{count:,} rows per case, {repeats} paired repeats; medians (µs per row)")
    header = ("sink", "sync", "append", "raw µs", "sink µs", "ratio", "hold µs", "raw hold",
              "verify s")
    print("{:7} {:7} {:>6} {:>8} {:>8} {:>6} {:>8} {:>8} {:>8}".format(*header))
    for name in ("sqlite", "jsonl"):
        for sync in ("full", "normal"):
            for mode in ("1", "100", "100x1"):
                raw_make = _maker(name, sync, True, mode)
                sink_make = _maker(name, sync, False, mode)
                raws: list[tuple[float, ...]] = []
                sinks: list[tuple[float, ...]] = []
                for r in range(repeats):
                    if r % 2:
                        sinks.append(_run(sink_make, rows, mode))
                        raws.append(_run(raw_make, rows, mode))
                    else:
                        raws.append(_run(raw_make, rows, mode))
                        sinks.append(_run(sink_make, rows, mode))
                raw_us = statistics.median(r[0] for r in raws)
                sink_us = statistics.median(s[0] for s in sinks)
                ratio = statistics.median(s[0] / r[0] for r, s in zip(raws, sinks, strict=True))
                hold = max(s[1] for s in sinks)
                raw_hold = max(r[1] for r in raws)
                print(
                    f"{name:7} {sync:7} {mode:>6} {raw_us:>8.1f} {sink_us:>8.1f} {ratio:>6.2f} "
                    f"{hold:>8.0f} {raw_hold:>8.0f} {sinks[-1][2]:>8.3f}"
                )


if __name__ == "__main__":
    main()
