"""Audit sinks against a raw write with the same durability, measured paired in one run.

Run: ``python -m bench.audit_chain [--rounds 20] [--chunk 100] [--sinks ...] [--conninfo DSN]``
(``--quick``: a smoke run). For `SqliteAuditSink`, `JsonlAuditSink` and `PostgresAuditSink`,
unkeyed and keyed (``+key``: ``key=AuditKey(...)``, HMAC-SHA256 rows and a sealed head; the raw
write is the same), with ``synchronous="full"`` (every append survives power loss) and
``"normal"`` (every append survives a process kill; for PostgreSQL the connection's
``synchronous_commit`` is ``on`` and ``off``, see ``bench/_audit_postgres.py``, which also
starts a throw-away server with ``fsync`` unless ``--conninfo`` names one), rows are appended
three ways:

- ``1``: one awaited ``append`` per row (the worst case: one transaction or ``fdatasync`` per
  row);
- ``100``: awaited appends of 100 rows each;
- ``100x1``: 100 tasks (concurrent turns) each append one row at once; the sink's group
  commit writes them together (the raw limit: the same tasks, their rows gathered until the
  event loop gets control back and written by one raw write).

The raw write is the limit: the same rows, of the same size, written from the same coroutine
with the same durability and transaction shape, without the chain. Each row holds the entry's
fields, its index, and two fixed 64-digit hex strings in place of ``prev_hash`` and ``hash``
(so the bytes written match the sink's; only the SHA-256s, the canonical text they are taken
of, the head and the locking are left out). JSON Lines: every row serialised once with the
stdlib's C JSON encoder (one encoder, reused), the lines of one append written by one
``os.write`` to a file opened with ``O_APPEND`` (+ one ``fdatasync`` with ``full``). SQLite:
one ``BEGIN``/``INSERT``/``COMMIT`` per append (``executemany`` for 100 rows) into the same
table (``idx INTEGER PRIMARY KEY``, the same 20 columns) in a WAL database with the same
``synchronous`` and SQLite's automatic checkpoints (the sink checkpoints after as many pages,
on its writer thread). Both do their I/O on the event loop thread, blocking it (for the whole
``fdatasync`` with ``full``); a sink never does (see ``middleware/audit/_writer.py``).
PostgreSQL: one pipelined ``BEGIN``/``INSERT``/``COMMIT`` per append (``executemany``; one
round trip) into a table of the sink's layout, on an ``AsyncConnection`` of the benchmark's own
loop (no thread hop; the sink's connection lives on a loop of its own).

Each case opens a sink and a raw writer on fresh files in one process and writes ``--rounds``
chunks of ``--chunk`` rows (a fifth of that for one-row appends with ``full``) with each in
turn, alternating which goes first, so that both see the same load on a shared machine. The
table shows the medians of µs per row and of the paired ratios (sink / raw) over the rounds;
the ratio of the CPU time both used (all threads; unlike wall time it leaves out the time the
process waited for a core on a busy machine); the 99th percentile of how long one ``append``
call held the event loop (the sink's, and the raw write's); and how long ``verify()`` took on
the sink's chain at the end (the run fails loudly if it does not verify or has the wrong
length).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from bench._audit_postgres import RawPostgres, durable, server
from middleware.audit import (
    AuditEntry,
    AuditKey,
    JsonlAuditSink,
    PostgresAuditSink,
    SqliteAuditSink,
)
from pipeline import canonical_json

Sync = Literal["full", "normal"]
SINKS = ["sqlite", "sqlite+key", "jsonl", "jsonl+key", "postgres", "postgres+key"]
_sync = getattr(os, "fdatasync", os.fsync)


_APPROVED = canonical_json(
    [{"policy": "loopware.approval", "action": "approved", "reason": "approved", "when": "before"}]
)


def entries(count: int) -> list[AuditEntry]:
    """Tool-call entries shaped like real ones (canonical args, durations, verdicts, ``ran``
    and the decisions as `AuditLog` writes them)."""
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
            ran=True,
            decisions="[]" if i % 5 else _APPROVED,
        )
        for i in range(count)
    ]


def _values(e: AuditEntry) -> tuple[Any, ...]:
    return (
        e.kind, e.turn_id, e.conversation_id, e.recorded_at.isoformat(), e.call_id, e.tool,
        e.checksum, e.args, e.is_error, e.duration_ms, e.decision, e.policy, e.reason,
        e.status, e.error, e.input, e.ran, e.decisions,
    )


_COLUMNS = (
    "kind", "turn_id", "conversation_id", "recorded_at", "call_id", "tool", "checksum", "args",
    "is_error", "duration_ms", "decision", "policy", "reason", "status", "error", "input",
    "ran", "decisions",
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


_FILLER = "f" * 64
"""Stands in for ``prev_hash`` and ``hash`` in a raw row: the same size, no hashing."""
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class RawJsonl:
    """Lines appended with ``os.write`` (+ ``fdatasync``): no chain, no head, no lock."""

    def __init__(self, path: Path, sync: Sync) -> None:
        """Open ``path`` for appending."""
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._fsync = sync == "full"
        self._count = 0

    def append(self, entries: Sequence[AuditEntry]) -> Awaitable[None]:
        """Serialise and write the entries (one write), then sync when ``full``."""
        start = self._count
        self._count += len(entries)
        data = b"".join(
            (_ENCODE({**dict(zip(_COLUMNS, _values(e), strict=True)), "index": i,
                      "prev_hash": _FILLER, "hash": _FILLER}) + "\n").encode()
            for i, e in enumerate(entries, start)
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

    _INSERT = f"INSERT INTO audit_rows VALUES ({', '.join('?' * (len(_COLUMNS) + 3))})"

    def __init__(self, path: Path, sync: Sync) -> None:
        """Create the table."""
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute(f"PRAGMA synchronous = {sync.upper()}")
        self._conn.execute(
            f"CREATE TABLE audit_rows (idx INTEGER PRIMARY KEY, {', '.join(_COLUMNS)}, "
            "prev_hash, hash)"
        )
        self._count = 0

    def append(self, entries: Sequence[AuditEntry]) -> Awaitable[None]:
        """Insert the entries in one transaction."""
        conn = self._conn
        start = self._count
        self._count += len(entries)
        conn.execute("BEGIN")
        if len(entries) == 1:
            conn.execute(self._INSERT, (start, *_values(entries[0]), _FILLER, _FILLER))
        else:
            conn.executemany(
                self._INSERT,
                [(i, *_values(e), _FILLER, _FILLER) for i, e in enumerate(entries, start)],
            )
        conn.execute("COMMIT")
        return _written()

    def close(self) -> None:
        """Close the database."""
        self._conn.close()


class RawGroup:
    """The least a group commit costs: the rows of appends made until the event loop gets
    control back, written by one raw write (the tasks and futures are the sink's too)."""

    def __init__(self, raw: RawJsonl | RawSqlite | RawPostgres) -> None:
        """Wrap a raw writer."""
        self._raw = raw
        self._rows: list[AuditEntry] = []
        self._waits: list[asyncio.Future[None]] = []
        self.holds: list[float] = []
        """How long each write took, in seconds (it runs on the event loop)."""

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
        written = self._raw.append(rows)  # done on return, but for PostgreSQL's round trip
        self.holds.append(time.perf_counter() - s)

        def settle(outcome: asyncio.Future[Any]) -> None:
            failed = outcome.exception()
            for done in waits:
                if failed is None:
                    done.set_result(None)
                else:
                    done.set_exception(failed)

        outcome = asyncio.ensure_future(written)
        if outcome.done():
            settle(outcome)
        else:
            outcome.add_done_callback(settle)

    def close(self) -> None:
        """Close the raw writer."""
        self._raw.close()

    async def aclose(self) -> None:
        """Close the raw writer's connection (PostgreSQL)."""
        if isinstance(self._raw, RawPostgres):
            await self._raw.aclose()


async def _write(writer: Writer, rows: list[AuditEntry], mode: str, holds: list[float]) -> float:
    """Append ``rows`` as ``mode`` says; return the seconds taken, add each append's hold."""
    clock = time.perf_counter
    t0 = clock()
    if mode == "1":
        for entry in rows:
            s = clock()
            pending = writer.append([entry])
            holds.append(clock() - s)
            await pending
    elif mode == "100":
        for start in range(0, len(rows), 100):
            s = clock()
            pending = writer.append(rows[start : start + 100])
            holds.append(clock() - s)
            await pending
    else:  # 100x1: 100 tasks append one row each (concurrent turns), gathered

        async def one(entry: AuditEntry) -> None:
            s = clock()
            pending = writer.append([entry])
            holds.append(clock() - s)
            await pending

        for start in range(0, len(rows), 100):
            await asyncio.gather(*(one(entry) for entry in rows[start : start + 100]))
    return clock() - t0


async def _case(
    name: str, sync: Sync, mode: str, rounds: int, chunk: int, folder: Path, conninfo: str
) -> list[float]:
    """Write ``rounds`` chunks with the raw writer and the sink in turn (alternating which goes
    first); return the medians and figures of one table line (see the module docstring)."""
    rows = entries(rounds * chunk)
    key = AuditKey(os.urandom(32)) if name.endswith("+key") else None
    sink: SqliteAuditSink | JsonlAuditSink | PostgresAuditSink
    if name.startswith("postgres"):
        dsn = durable(conninfo, sync)
        sink = PostgresAuditSink(dsn, chain=f"{name}-{sync}-{mode}-{folder.name}", key=key)
        raw: Writer = await RawPostgres.create(dsn, _COLUMNS, _values)
    elif name.startswith("sqlite"):
        sink = SqliteAuditSink(folder / "audit.sqlite", synchronous=sync, key=key)
        raw = RawSqlite(folder / "raw.sqlite", sync)
    else:
        sink = JsonlAuditSink(folder / "audit.jsonl", synchronous=sync, key=key)
        raw = RawJsonl(folder / "raw.jsonl", sync)
    if mode == "100x1":
        raw = RawGroup(raw)  # type: ignore[arg-type]
    raw_us: list[float] = []
    sink_us: list[float] = []
    raw_cpu: list[float] = []
    sink_cpu: list[float] = []
    raw_holds: list[float] = []
    sink_holds: list[float] = []
    try:
        for r in range(rounds):
            part = rows[r * chunk : (r + 1) * chunk]
            for writer in (raw, sink) if r % 2 == 0 else (sink, raw):
                holds = raw_holds if writer is raw else sink_holds
                cpu = time.process_time()
                seconds = await _write(writer, part, mode, holds)
                cpu = time.process_time() - cpu
                (raw_us if writer is raw else sink_us).append(seconds / chunk * 1e6)
                (raw_cpu if writer is raw else sink_cpu).append(cpu)
        if isinstance(raw, RawGroup):
            raw_holds += raw.holds
        t0 = time.perf_counter()
        broken = sink.verify()
        verified = time.perf_counter() - t0
        count = sink.head().count
        if not broken or count != len(rows):
            raise SystemExit(f"{sink!r}: {broken.explain()} or {count} rows")
    finally:
        sink.close()
        raw.close()
        aclose = getattr(raw, "aclose", None)
        if aclose is not None:
            await aclose()
    return [
        statistics.median(raw_us),
        statistics.median(sink_us),
        statistics.median(s / r for r, s in zip(raw_us, sink_us, strict=True)),
        sum(sink_cpu) / max(sum(raw_cpu), 1e-9),
        _p99(sink_holds) * 1e6,
        _p99(raw_holds) * 1e6,
        verified,
    ]


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="paired rounds per case")
    parser.add_argument("--chunk", type=int, default=100, help="rows per round (a multiple of "
                        "100; a fifth of it for one-row appends with full)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds of 100 rows")
    parser.add_argument("--sinks", nargs="+", choices=SINKS, default=SINKS, help="which sinks")
    parser.add_argument("--conninfo", help="a PostgreSQL server to use instead of a throw-away "
                        "one (the sink's tables are created there)")
    args = parser.parse_args()
    postgres = any(name.startswith("postgres") for name in args.sinks)
    with server(args.conninfo) if postgres else contextlib.nullcontext("") as conninfo:
        _table(args, conninfo)


def _table(args: argparse.Namespace, conninfo: str) -> None:
    rounds, chunk = (2, 100) if args.quick else (args.rounds, args.chunk)
    print(f"{rounds} paired rounds of {chunk} rows per case (one-row appends with full: "
          f"{max(1, chunk // 5)}); medians of µs per row and of the paired ratios; p99 of the "
          "time one append call held the event loop")
    header = ("sink", "sync", "append", "raw µs", "sink µs", "ratio", "cpu", "hold µs",
              "raw hold", "verify s")
    print("{:10} {:7} {:>6} {:>8} {:>8} {:>6} {:>6} {:>8} {:>8} {:>8}".format(*header))
    for name in args.sinks:
        for sync in ("full", "normal"):
            for mode in ("1", "100", "100x1"):
                size = max(1, chunk // 5) if (sync, mode) == ("full", "1") else chunk
                with tempfile.TemporaryDirectory() as folder:
                    line = asyncio.run(
                        _case(name, sync, mode, rounds, size, Path(folder), conninfo)
                    )
                raw_us, sink_us, ratio, cpu, hold, raw_hold, verified = line
                print(
                    f"{name:10} {sync:7} {mode:>6} {raw_us:>8.1f} {sink_us:>8.1f} {ratio:>6.2f} "
                    f"{cpu:>6.2f} {hold:>8.0f} {raw_hold:>8.0f} {verified:>8.3f}"
                )


if __name__ == "__main__":
    main()
