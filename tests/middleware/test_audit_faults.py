"""Audit faults: a torn JSON Lines tail is cut and recorded once, and a call's
row is written when the call is stored, not at the end of its iteration."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from middleware.audit import AuditEntry, AuditLog, AuditRow, JsonlAuditSink, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.events import ToolCallStored
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

from ._sinks import SinkBackend

ROOT = Path(__file__).resolve().parents[2]


def entry(i: int) -> AuditEntry:
    return AuditEntry(
        kind="tool_call",
        turn_id="t1",
        conversation_id=None,
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC),
        call_id=f"call-{i}",
        tool="search",
        checksum=f"{i:064x}",
        args=json.dumps({"q": i}),
        decision="allowed",
    )


def append(sink: JsonlAuditSink, entries: list[AuditEntry]) -> list[AuditRow]:
    async def go() -> list[AuditRow]:
        return await sink.append(entries)

    return asyncio.run(go())


def log_with(path: Path, count: int) -> None:
    with opened(path) as sink:
        for i in range(count):
            append(sink, [entry(i)])


def next_lines(path: Path, entries: list[AuditEntry]) -> bytes:
    """The bytes the next append of ``entries`` writes to the log at ``path`` (a dry run)."""
    scratch = path.parent / "scratch"
    scratch.mkdir()
    shutil.copy(path, scratch / path.name)
    shutil.copy(f"{path}.head", scratch / f"{path.name}.head")
    before = (scratch / path.name).stat().st_size
    sink = JsonlAuditSink(scratch / path.name, synchronous="normal")
    append(sink, entries)
    sink.close()
    data = (scratch / path.name).read_bytes()[before:]
    shutil.rmtree(scratch)
    return data


def tear(path: Path, entries: list[AuditEntry], keep: float = 0.5) -> bytes:
    """Leave what a writer killed mid-append leaves: part of its bytes, the head not updated."""
    data = next_lines(path, entries)
    torn = data[: int(len(data) * keep)]
    assert not torn.endswith(b"\n")
    with path.open("ab") as f:
        f.write(torn)
    return torn[torn.rfind(b"\n") + 1 :]


@contextmanager
def opened(path: Path) -> Iterator[JsonlAuditSink]:
    sink = JsonlAuditSink(path, synchronous="normal")
    try:
        yield sink
    finally:
        sink.close()


def repair_details(row: AuditRow) -> dict[str, object]:
    assert row.entry.kind == "repair"
    assert row.entry.args is not None
    details: dict[str, object] = json.loads(row.entry.args)
    return details


# -- item 5: a torn JSON Lines tail -------------------------------------------------------------


def test_a_torn_tail_is_cut_recorded_once_and_the_chain_goes_on(tmp_path: Path) -> None:
    """The torn row is cut and a repair row records it; the chain verifies, now and later."""
    path = tmp_path / "audit.jsonl"
    log_with(path, 3)
    offset = path.stat().st_size
    torn = tear(path, [entry(3)])
    with opened(path) as sink:
        assert sink.verify()
        rows = sink.rows()
        assert [(r.index, r.entry.kind) for r in rows] == [
            (0, "tool_call"), (1, "tool_call"), (2, "tool_call"), (3, "repair")
        ]
        digest = hashlib.sha256(torn).hexdigest()
        assert repair_details(rows[3]) == {
            "offset": offset, "length": len(torn), "sha256": digest,
            "base64": base64.b64encode(torn).decode(),
        }
        assert (rows[3].entry.checksum, rows[3].entry.is_error) == (digest, True)
        assert rows[3].entry.reason is not None
        assert f"{len(torn)} bytes" in rows[3].entry.reason
        append(sink, [entry(4), entry(5)])
        assert sink.verify()
    assert path.read_bytes().endswith(b"\n")
    with opened(path) as again:  # reported once: no second repair
        kinds = [r.entry.kind for r in again.rows()]
        assert kinds == ["tool_call"] * 3 + ["repair"] + ["tool_call"] * 2
        assert again.verify()


def test_a_torn_batch_keeps_its_complete_rows(tmp_path: Path) -> None:
    """Rows of the killed append that were written whole stay; the repair follows them."""
    path = tmp_path / "audit.jsonl"
    log_with(path, 2)
    tear(path, [entry(2), entry(3), entry(4)], keep=0.8)
    with opened(path) as sink:
        rows = sink.rows()
        assert [(r.index, r.entry.call_id) for r in rows[:4]] == [
            (0, "call-0"), (1, "call-1"), (2, "call-2"), (3, "call-3")
        ]
        assert (rows[4].index, rows[4].entry.kind) == (4, "repair")
        assert sink.verify()


def test_a_log_holding_only_a_torn_row_starts_with_its_repair(tmp_path: Path) -> None:
    """A first append cut short leaves no row: the repair row is row 0."""
    path = tmp_path / "audit.jsonl"
    torn = b'{"kind":"tool_call","turn_id":"t1","conversation_id":nu'
    path.write_bytes(torn)
    with opened(path) as sink:
        [row] = sink.rows()
        details = repair_details(row)
        assert (row.index, details["offset"], details["length"]) == (0, 0, len(torn))
        assert sink.verify()


def test_rows_and_verify_never_raise_for_a_tail_torn_while_the_sink_is_open(
    tmp_path: Path,
) -> None:
    """Another writer killed mid-append: reads skip its torn tail; the next append repairs it."""
    path = tmp_path / "audit.jsonl"
    log_with(path, 2)
    with opened(path) as sink:
        tear(path, [entry(2)])  # another process, killed
        assert [r.index for r in sink.rows()] == [0, 1]
        assert sink.verify()
        [row] = append(sink, [entry(9)])
        assert [(r.index, r.entry.kind) for r in sink.rows()] == [
            (0, "tool_call"), (1, "tool_call"), (2, "repair"), (3, "tool_call")
        ]
        assert row.index == 3
        assert sink.verify()


def _edit(path: Path, k: int, field: str, value: object) -> None:
    lines = path.read_text().splitlines(keepends=True)
    row = json.loads(lines[k])
    row[field] = value
    lines[k] = json.dumps(row, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))


@pytest.mark.parametrize(
    ("how", "broken"),
    [("edit-before", 1), ("edit-repair", 3), ("delete-repair", 3), ("edit-after", 4),
     ("torn-middle", 1)],
    ids=["edit-before", "edit-repair", "delete-repair", "edit-after", "torn-middle"],
)
def test_tampering_is_still_detected_after_a_repair(
    tmp_path: Path, how: str, broken: int
) -> None:
    """A repair hides nothing: edits around or of it, or a cut line mid-file, are reported."""
    path = tmp_path / "audit.jsonl"
    log_with(path, 3)
    tear(path, [entry(3)])
    with opened(path) as sink:
        append(sink, [entry(4), entry(5)])
        assert sink.verify()
    if how == "edit-before":
        _edit(path, 1, "args", '{"q":"forged"}')
    elif how == "edit-repair":
        _edit(path, 3, "args", '{"length":0}')
    elif how == "delete-repair":
        text = path.read_text().splitlines(keepends=True)
        path.write_text("".join(text[:3] + text[4:]))
    elif how == "edit-after":
        _edit(path, 4, "is_error", True)
    else:  # a row in the middle cut short: not a tail, so not repaired
        lines = path.read_bytes().splitlines(keepends=True)
        lines[1] = lines[1][:40] + b"\n"
        path.write_bytes(b"".join(lines))
    with opened(path) as reopened:
        assert reopened.verify().first_bad_row == broken


_KILLED_MID_APPEND = """
import asyncio, os, signal, sys
sys.path.insert(0, {root!r})
from tests.middleware.test_audit_faults import append, entry, next_lines
from middleware.audit import JsonlAuditSink
from pathlib import Path
path = Path({path!r})
sink = JsonlAuditSink(path, synchronous="normal")
for i in range(3):
    append(sink, [entry(i)])
data = next_lines(path, [entry(3), entry(4)])
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
os.write(fd, data[: len(data) * 3 // 4])  # the kernel got this much of the append's write
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_killed_mid_append_leaves_a_log_that_verifies(tmp_path: Path) -> None:
    """A child process SIGKILLed with an append half written: reopening repairs the tail."""
    path = tmp_path / "audit.jsonl"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_APPEND.format(root=str(ROOT), path=str(path))],
        capture_output=True, timeout=60, check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert not path.read_bytes().endswith(b"\n")
    with opened(path) as sink:
        rows = sink.rows()
        assert [r.entry.kind for r in rows] == ["tool_call"] * 4 + ["repair"]
        assert sink.verify()
        append(sink, [entry(5)])
        assert sink.verify()


# -- item 6: rows are written when calls are stored ----------------------------------------------


@tool
def search(q: str) -> str:
    """Search for ``q``."""
    return f"results for {q}"


def propose(call_id: str, name: str = "search") -> ProposedToolCall:
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps({"q": call_id}))


async def test_a_call_has_its_row_as_soon_as_it_is_stored(
    tmp_path: Path, sinks: SinkBackend
) -> None:
    """Inside a ToolCallStored listener, the call's row is already in the sink (every sink)."""
    sink = sinks.open(tmp_path)
    runner = TurnRunner(
        executor=ToolLoopExecutor(
            ScriptedModel([ModelResponse(tool_calls=[propose("a"), propose("b"), propose("c")])])
        ),
        tools=[search],
        middleware=[AuditLog(sink)],
    )
    seen: list[tuple[str, list[str | None]]] = []

    def check(event: ToolCallStored) -> None:  # subscribed after the AuditLog: runs after it
        seen.append((event.call.id, [r.entry.call_id for r in sink.rows()]))

    runner.on(ToolCallStored, check)
    await runner.run("go")
    assert seen == [("a", ["a"]), ("b", ["a", "b"]), ("c", ["a", "b", "c"])]
    sink.close()


_KILLED_IN_A_HANDLER = """
import asyncio, json, os, signal, sys
sys.path.insert(0, {root!r})
from middleware.audit import AuditLog, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnRunner
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import SqliteStore
from pipeline import tool
from pipeline.testing import ScriptedModel

@tool
def search(q: str) -> str:
    \"\"\"Search.\"\"\"
    return "found " + q

@tool
async def crash(q: str) -> str:
    \"\"\"Wait a little, then die the hard way.\"\"\"
    await asyncio.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"

calls = [ProposedToolCall(id=f"s{{i}}", name="search", arguments=json.dumps({{"q": str(i)}}))
         for i in range(3)]
calls.append(ProposedToolCall(id="boom", name="crash", arguments=json.dumps({{"q": "x"}})))
runner = TurnRunner(
    executor=ToolLoopExecutor(ScriptedModel([ModelResponse(tool_calls=calls)])),
    tools=[search, crash],
    middleware=[AuditLog(SqliteAuditSink({audit!r}, synchronous="normal"))],
    store=SqliteStore({store!r}),
)
asyncio.run(runner.run("go", conversation_id="c1"))
"""


async def test_calls_stored_before_a_kill_have_their_rows(tmp_path: Path) -> None:
    """A process killed while a later call of the same iteration runs keeps the earlier rows."""
    audit, store = tmp_path / "audit.sqlite", tmp_path / "store.sqlite"
    script = _KILLED_IN_A_HANDLER.format(root=str(ROOT), audit=str(audit), store=str(store))
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, timeout=60, check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    sink = SqliteAuditSink(audit, synchronous="normal")
    try:
        assert [(r.entry.kind, r.entry.call_id) for r in sink.rows()] == [
            ("tool_call", "s0"), ("tool_call", "s1"), ("tool_call", "s2")
        ]
        assert sink.verify()
    finally:
        sink.close()
