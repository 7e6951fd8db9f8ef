"""WAL pages an SQLite audit commit writes, against a raw insert of the same rows.

Run: ``python -m bench.audit_pages [--commits 100] [--quick]``. A `SqliteAuditSink` with
``synchronous="normal"`` and the raw writer of ``bench.audit_chain`` (the same rows, no chain)
each append ``--commits`` times one row, then a tenth as many times 100 rows, to fresh files;
the WAL's growth over those commits, in frames of one page (SQLite checkpoints the WAL only
after 1,000 pages, and the sink after as many pages as its rows' bytes, so none happens within
a run of the default size), divided by the number of commits, is what one commit writes. It is
the figure that decides one-row ``normal`` appends, where the sync does not dominate: the
chain's head shares the newest rows' page (schema 2, ``middleware/audit/_sqlite_schema.py``).

``--quick``: 10 commits of each size, a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from middleware.audit import AuditEntry, SqliteAuditSink

from .audit_chain import RawSqlite, entries

_FRAME = 24 + 4096
"""A WAL frame: its 24-byte header and one page of SQLite's default size."""


async def pages_per_commit(
    append: Callable[[Sequence[AuditEntry]], Awaitable[object]],
    wal: Path,
    rows: list[AuditEntry],
    per_commit: int,
) -> float:
    """Append ``rows`` ``per_commit`` at a time; return the WAL frames written per commit."""
    await append(rows[:1])  # the file, its first page and the WAL header exist from here
    before = wal.stat().st_size
    commits = 0
    for start in range(1, len(rows) - per_commit + 1, per_commit):
        await append(rows[start : start + per_commit])
        commits += 1
    return (wal.stat().st_size - before) / _FRAME / commits


async def measure(folder: Path, commits: int) -> list[tuple[str, int, float]]:
    """Frames per commit for the sink and the raw write, at one row and at 100 rows."""
    results: list[tuple[str, int, float]] = []
    for per_commit, count in ((1, commits), (100, max(commits // 10, 1))):
        rows = entries(1 + per_commit * count)
        sink_path = folder / f"sink-{per_commit}.sqlite"
        sink = SqliteAuditSink(sink_path, synchronous="normal")
        try:
            sink_pages = await pages_per_commit(
                sink.append, Path(f"{sink_path}-wal"), rows, per_commit
            )
            if not sink.verify():
                raise SystemExit("the sink's chain does not verify")
        finally:
            sink.close()
        raw_path = folder / f"raw-{per_commit}.sqlite"
        raw = RawSqlite(raw_path, "normal")
        try:
            raw_wal = Path(f"{raw_path}-wal")
            raw_pages = await pages_per_commit(raw.append, raw_wal, rows, per_commit)
        finally:
            raw.close()
        results += [("sqlite sink", per_commit, sink_pages), ("raw insert", per_commit, raw_pages)]
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Print the WAL pages per commit of the sink and of the raw insert."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100, help="one-row commits (a tenth "
                        "as many 100-row commits)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 10 commits")
    args = parser.parse_args(argv)
    commits = 10 if args.quick else args.commits
    with tempfile.TemporaryDirectory() as folder:
        results = asyncio.run(measure(Path(folder), commits))
    print(f"WAL pages per commit, synchronous=normal ({os.path.basename(__file__)})")
    print(f"{'writer':12} {'rows/commit':>11} {'pages':>7}")
    for writer, per_commit, pages in results:
        print(f"{writer:12} {per_commit:>11} {pages:>7.2f}")


if __name__ == "__main__":
    main()
