"""The forger of the keyed-audit tests: a keyed log, and what someone without the key writes.

The forger knows the format, can read and write the log's storage (a JSON Lines file and its
head, an SQLite file, a PostgreSQL chain through the views of ``tests/middleware/_sinks.py``)
and has no key: `recomputed` chains rows again as it can, `store` replaces a log's rows and
stored head (unsealed: it cannot seal), `found` is what a verifier holding the key finds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from middleware.audit import AuditEntry, AuditHead, AuditKey, AuditKeyMismatchError, AuditRow
from middleware.audit._chain import entry_to_fields, hashed_fields, row_hash
from middleware.audit._seal import canonical_row

from ._sinks import Sink, SinkBackend

__all__ = [
    "KEY",
    "OTHER",
    "Forge",
    "append",
    "chain_from",
    "digest_of",
    "edited",
    "entry",
    "found",
    "logged",
    "recomputed",
    "store",
    "write",
]

KEY = AuditKey(bytes(range(32)))
OTHER = AuditKey(b"\x07" * 32)
_BYTEA = {
    "turn_id", "conversation_id", "call_id", "tool", "checksum", "args", "policy", "reason",
    "error", "input", "decisions",
}
_COLUMNS = (
    "kind", "turn_id", "conversation_id", "recorded_at", "call_id", "tool", "checksum", "args",
    "is_error", "duration_ms", "decision", "policy", "reason", "status", "error", "input",
    "ran", "decisions",
)


def entry(i: int) -> AuditEntry:
    return AuditEntry(
        kind="tool_call",
        turn_id="t1",
        conversation_id="c" if i % 2 else None,
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC),
        call_id=f"call-{i}",
        tool="refund",
        checksum=f"{i:064x}",
        args=json.dumps({"cents": 100 * i}),
        is_error=False,
        duration_ms=i * 1.5,
        decision="allowed",
        ran=True,
        decisions="[]",
    )


def write(sink: Sink, count: int) -> list[AuditRow]:
    async def go() -> list[AuditRow]:
        rows: list[AuditRow] = []
        for i in range(count):
            rows += await sink.append([entry(i)])
        return rows

    return asyncio.run(go())


def logged(sinks: SinkBackend, folder: Path, count: int, **options: Any) -> list[AuditRow]:
    """Write ``count`` rows to a keyed log in ``folder``; return them (the sink is closed)."""
    sink = sinks.open(folder, key=KEY, **options)
    try:
        rows = write(sink, count)
        assert sink.verify()
    finally:
        sink.close()
    return rows


# -- the forger --------------------------------------------------------------------------------
Forge = Literal["unkeyed", "other-key", "key-id-on-sha256"]


def digest_of(how: Forge) -> Callable[[bytes], str]:
    """How a forger without the key hashes a recomputed row."""
    if how == "other-key":
        return OTHER.row_hash
    sha = _sha256_hex
    if how == "unkeyed":
        return sha
    return lambda data: f"hmac-sha256:{KEY.id}:{sha(data)}"  # the right id, a hash anyone makes


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def recomputed(rows: list[AuditRow], how: Forge) -> list[AuditRow]:
    """The rows chained again, from the first, as the forger can."""
    digest = digest_of(how)
    out: list[AuditRow] = []
    prev = "0" * 64
    for i, row in enumerate(rows):
        text = canonical_row(row.entry, i, prev)
        if how == "unkeyed":
            assert _sha256_hex(text) == row_hash(i, hashed_fields(row.entry), prev)
        out.append(AuditRow(i, row.entry, prev, digest(text)))
        prev = out[-1].hash
    return out


def sql_values(sinks: SinkBackend, row: AuditRow) -> tuple[object, ...]:
    fields = entry_to_fields(row.entry)
    fields["is_error"] = int(fields["is_error"])
    fields["ran"] = None if fields["ran"] is None else int(fields["ran"])
    values: list[object] = [row.index]
    for name in _COLUMNS:
        value = fields[name]
        if sinks.name == "postgres" and name in _BYTEA and value is not None:
            value = value.encode("utf-8")
        values.append(value)
    return (*values, row.prev_hash, row.hash)


def store(
    sinks: SinkBackend, folder: Path, rows: list[AuditRow], head: AuditHead | None
) -> None:
    """Replace the log's rows by ``rows`` and its stored head by ``head`` (None: deleted).

    What the forger writes is unsealed: it has no key to seal a head with.
    """
    if sinks.name == "jsonl":
        path = folder / "audit.jsonl"
        path.write_text("".join(
            json.dumps({**hashed_fields(r.entry), "index": r.index, "prev_hash": r.prev_hash,
                        "hash": r.hash}) + "\n"
            for r in rows
        ))
        head_path = folder / "audit.jsonl.head"
        if head is None:
            head_path.unlink()
        else:
            head_path.write_text(json.dumps({"count": head.count, "hash": head.hash}))
        return
    sinks.sql(folder, "DELETE FROM audit_rows")
    marks = ", ".join("?" * (len(_COLUMNS) + 3))
    for row in rows:
        sinks.sql(
            folder,
            f"INSERT INTO audit_rows (idx, {', '.join(_COLUMNS)}, prev_hash, hash) "
            f"VALUES ({marks})",
            sql_values(sinks, row),
        )
    if sinks.name == "sqlite":
        if head is not None:
            sinks.sql(folder, "INSERT INTO audit_rows (idx, head_count, hash) VALUES (?, ?, ?)",
                      (head.count, head.count, head.hash))
        return
    sinks.sql(folder, "DELETE FROM audit_head")
    if head is not None:
        sinks.sql(folder, "INSERT INTO audit_head (chain, count, hash) VALUES (?, ?, ?)",
                  (str(folder), head.count, head.hash))


def found(sinks: SinkBackend, folder: Path) -> int | str | None:
    """What a verifier holding the key finds: the first bad row (None: intact), or the
    refusal's code."""
    try:
        sink = sinks.open(folder, key=KEY)
    except AuditKeyMismatchError as exc:
        return exc.code
    try:
        return sink.verify().first_bad_row
    finally:
        sink.close()


def edited(rows: list[AuditRow], k: int) -> list[AuditRow]:
    """Row ``k`` with a larger refund, its hash left as it was."""
    forged = dataclasses.replace(rows[k].entry, args=json.dumps({"cents": 990_000}))
    return [*rows[:k], dataclasses.replace(rows[k], entry=forged), *rows[k + 1 :]]


async def append(sink: Sink, entries: list[AuditEntry]) -> list[AuditRow]:
    """Append ``entries``; return their rows."""
    return await sink.append(entries)


def chain_from(start: int, rows: list[AuditRow], prev: str) -> list[AuditRow]:
    """``rows`` chained again from index ``start`` after ``prev``, the key id on SHA-256s."""
    digest = digest_of("key-id-on-sha256")
    out: list[AuditRow] = []
    for i, row in enumerate(rows, start):
        out.append(AuditRow(i, row.entry, prev, digest(canonical_row(row.entry, i, prev))))
        prev = out[-1].hash
    return out
