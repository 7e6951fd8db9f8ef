"""`AuditLog` through real turns: rows per call and per turn, decisions, flushing, concurrency.

The `sink` fixture runs the tests against every sink (JSON Lines, SQLite, PostgreSQL).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Awaitable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from middleware import (
    AuditEntry,
    AuditHead,
    AuditLog,
    AuditRow,
    Middleware,
    RepetitionDetector,
    SqliteAuditSink,
)
from pipeline import (
    CallNext,
    DispatchContext,
    InvalidMiddlewareConfigError,
    Log,
    ModelRequest,
    ModelResponse,
    ProposedToolCall,
    ToolLoopExecutor,
    TurnContext,
    TurnRunner,
    canonical_json,
    tool,
)
from pipeline.testing import ScriptedModel

from ._sinks import Sink, SinkBackend


@tool
def search(q: str) -> str:
    """Search for ``q``."""
    return f"results for {q}"


@tool
def explode(n: int) -> str:
    """Always fail."""
    raise RuntimeError("kaboom")


def propose(name: str, args: dict[str, Any], call_id: str) -> ProposedToolCall:
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps(args))


def step(*calls: ProposedToolCall) -> ModelResponse:
    return ModelResponse(tool_calls=calls)


@pytest.fixture
def sink(sinks: SinkBackend, tmp_path: Path) -> Iterator[Sink]:
    opened = sinks.open(tmp_path)
    yield opened
    opened.close()


def runner_for(audit: AuditLog, steps: list[ModelResponse], **kwargs: Any) -> TurnRunner:
    middleware = [audit, *kwargs.pop("middleware", [])]
    return TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(steps)),
        tools=[search, explode],
        middleware=middleware,
        **kwargs,
    )


def entries(sink: Sink) -> list[AuditEntry]:
    return [row.entry for row in sink.rows()]


def final_calls(sink: Sink) -> dict[str, AuditEntry]:
    """Each call's final form, as a reader computes it: the last row of its call id."""
    return {e.call_id: e for e in entries(sink) if e.kind == "tool_call" and e.call_id}


async def test_one_row_per_call_and_one_per_turn_written_before_run_returns(
    sink: Sink,
) -> None:
    """Each completed call and the turn get a row, readable as soon as run() returns."""
    runner = runner_for(
        AuditLog(sink),
        [
            step(propose("search", {"q": "x ✓"}, "c1"), propose("explode", {"n": 1}, "c2")),
            step(propose("nope", {}, "c3")),
            ModelResponse(text="done"),
        ],
    )
    result = await runner.run("find x", conversation_id="conv-1")
    rows = entries(sink)
    assert [(e.kind, e.call_id, e.tool) for e in rows] == [
        ("tool_call", "c1", "search"),
        ("tool_call", "c2", "explode"),
        ("tool_call", "c3", "nope"),
        ("turn", None, None),
    ]
    first, failed, unknown, turn = rows
    assert first.args == canonical_json({"q": "x ✓"})
    assert first.checksum == result.tool_calls[0].checksum
    assert (first.is_error, failed.is_error, unknown.is_error) == (False, True, True)
    assert first.duration_ms is not None
    assert first.duration_ms >= 0
    assert failed.duration_ms is not None
    assert unknown.duration_ms is None  # never executed
    assert {e.decision for e in rows[:3]} == {"allowed"}
    assert {e.turn_id for e in rows} == {result.turn_id}
    assert {e.conversation_id for e in rows} == {"conv-1"}
    assert (turn.status, turn.input, turn.is_error, turn.decision) == (
        "completed", "find x", False, None
    )
    assert turn.duration_ms is not None
    assert turn.duration_ms > 0
    assert sink.verify() is None


async def test_policy_decisions_are_recorded_on_their_calls(sink: Sink) -> None:
    """A RepetitionDetector hide decision lands on the call that triggered it, by call id.

    The hide is taken in dispatch_output, after the call's row was written at its store
    (issue 18), so the call's row is written again with the decision: its last row says hidden.
    """
    same = {"q": "loop"}
    runner = runner_for(
        AuditLog(sink),
        [step(propose("search", same, "a")), step(propose("search", same, "b"))],
        middleware=[RepetitionDetector(threshold=2, on_repeat="hide")],
    )
    result = await runner.run("go")
    assert result.status == "completed"
    calls = [e for e in entries(sink) if e.kind == "tool_call"]
    assert [(e.call_id, e.decision) for e in calls] == [
        ("a", "allowed"), ("b", "allowed"), ("b", "hidden")
    ]
    assert calls[2].policy == "loopware.repetition"
    assert calls[2].reason
    assert (calls[2].args, calls[2].duration_ms) == (calls[1].args, calls[1].duration_ms)
    assert {k: e.decision for k, e in final_calls(sink).items()} == {"a": "allowed", "b": "hidden"}


async def test_checksum_decisions_apply_and_the_strongest_wins(sink: Sink) -> None:
    """Decisions without a call id match by checksum; denied outranks approved and warned.

    Taken after the store, each one that raises the call's decision writes the call's row
    again (approved, then denied; the weaker warned changes nothing).
    """

    async def judge(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            for action in ("approved", "denied", "warned"):
                ctx.log.info("policy.decision", action, policy="judge", checksum=call.checksum,
                             call_id=None, action=action, reason=f"because {action}")
        ctx.log.info("policy.decision", "odd", policy="judge", action="exploded", call_id="a")
        ctx.log.info("other.kind", "ignored", action="rejected", call_id="a")
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_output(judge)
    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "1"}, "a"))],
                        middleware=[plain])
    await runner.run("go")
    calls = [e for e in entries(sink) if e.kind == "tool_call"]
    assert [e.decision for e in calls] == ["allowed", "approved", "denied"]
    call = final_calls(sink)["a"]
    assert (call.decision, call.policy, call.reason) == ("denied", "judge", "because denied")


async def test_a_failing_turn_is_still_audited(sink: Sink) -> None:
    """A middleware that raises after calls were stored cannot keep them out of the log."""

    async def fail(ctx: DispatchContext, call_next: CallNext) -> None:
        raise RuntimeError("middleware broke")

    plain = Middleware("plain")
    plain.dispatch_output(fail)
    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "1"}, "a"))],
                        middleware=[plain])
    result = await runner.run("go")
    assert result.status == "failed"
    rows = entries(sink)
    assert [(e.kind, e.call_id) for e in rows] == [("tool_call", "a"), ("turn", None)]
    assert rows[1].status == "failed"
    assert rows[1].is_error is True
    assert rows[1].error is not None
    assert rows[1].error.startswith("E_DISPATCH_PIPELINE_ERROR")


async def test_short_circuited_turn_input_still_gets_a_turn_row(sink: Sink) -> None:
    """A turn input middleware that never calls call_next cannot skip the turn's row."""

    async def block(ctx: TurnContext, call_next: CallNext) -> None:
        return None

    plain = Middleware("plain")
    plain.turn_input(block)
    runner = runner_for(AuditLog(sink), [], middleware=[plain])
    result = await runner.run("blocked")
    assert result.status == "failed"
    [row] = entries(sink)
    assert (row.kind, row.status, row.input) == ("turn", "failed", "blocked")


async def test_aborted_turn_row_says_aborted(sink: Sink) -> None:
    """Aborting a turn from a middleware records a turn row with status aborted."""

    async def stop(ctx: DispatchContext, call_next: CallNext) -> None:
        ctx.abort("enough")
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_output(stop)
    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "1"}, "a"))],
                        middleware=[plain])
    result = await runner.run("go")
    assert result.status == "aborted"
    rows = entries(sink)
    assert [(e.kind, e.status) for e in rows] == [("tool_call", None), ("turn", "aborted")]


class _Echoes:
    """Each turn calls search with its own input twice, then answers."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = len(request.tool_calls)
        key = request.messages[0].content
        if done == 2:
            return ModelResponse(text=key)
        return step(propose("search", {"q": key}, f"{key}-{done}"))


async def test_concurrent_turns_share_one_intact_chain(sink: Sink) -> None:
    """Rows of 50 concurrent turns interleave in one chain that verifies, none lost."""
    runner = TurnRunner(executor=ToolLoopExecutor(_Echoes()), tools=[search],
                        middleware=[AuditLog(sink)])
    results = await asyncio.gather(*(runner.run(f"u{i}") for i in range(50)))
    rows = entries(sink)
    assert len(rows) == 150
    for result in results:
        mine = [e for e in rows if e.turn_id == result.turn_id]
        key = result.messages[0].content
        assert [(e.kind, e.call_id) for e in mine] == [
            ("tool_call", f"{key}-0"), ("tool_call", f"{key}-1"), ("turn", None)
        ]
    assert sink.verify() is None


async def test_a_mutated_call_gets_a_row_per_store_the_last_in_its_final_form(
    sink: Sink,
) -> None:
    """A call replaced by id is audited at each store; its last row holds its final form.

    (Issue 18: rows are written when a call is stored, so the replacement is a second row,
    no longer a single row written at the iteration's end.)
    """

    async def redact(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            await ctx.mutate_tool_call(type(call).completed(
                id=call.id, tool=call.tool, args={"q": "[redacted]"}, results="hidden"))
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_output(redact)
    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "secret"}, "a"))],
                        middleware=[plain])
    await runner.run("go")
    first, last = [e for e in entries(sink) if e.kind == "tool_call"]
    assert (first.call_id, last.call_id) == ("a", "a")
    assert first.args == canonical_json({"q": "secret"})
    assert last.args == canonical_json({"q": "[redacted]"})
    assert last.duration_ms is not None  # the handler's time survives the replacement
    assert last.duration_ms == first.duration_ms


async def test_a_decision_log_with_a_non_text_action_is_ignored_quietly(
    sink: Sink,
) -> None:
    """A policy.decision log whose action is not text (a list) is skipped, not a listener error."""

    async def odd(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            ctx.log.info("policy.decision", "odd", policy="odd", call_id=call.id, action=["x"])
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_output(odd)
    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "1"}, "a"))],
                        middleware=[plain])
    warnings: list[Log] = []
    runner.on(Log, lambda event: warnings.append(event) if event.level == "warning" else None)
    await runner.run("go")
    assert warnings == []
    [call] = [e for e in entries(sink) if e.kind == "tool_call"]
    assert call.decision == "allowed"


def test_default_sink_is_sqlite_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AuditLog() writes to loopware-audit.sqlite in the working directory."""
    monkeypatch.chdir(tmp_path)
    audit = AuditLog()
    assert isinstance(audit.sink, SqliteAuditSink)
    assert (tmp_path / "loopware-audit.sqlite").exists()
    assert "AuditLog(" in repr(audit)
    audit.close()


def test_sink_without_the_sink_methods_is_refused() -> None:
    """A sink lacking append/rows/verify raises InvalidMiddlewareConfigError naming them."""
    with pytest.raises(InvalidMiddlewareConfigError, match="append, rows, verify"):
        AuditLog(object())  # type: ignore[arg-type]


class _SlowSink:
    """A sink whose appends take a while to complete (records what finished)."""

    def __init__(self) -> None:
        self.finished: list[AuditEntry] = []

    def append(self, batch: Sequence[AuditEntry]) -> Awaitable[list[AuditRow]]:
        async def later() -> list[AuditRow]:
            await asyncio.sleep(0.05)
            self.finished.extend(batch)
            return []

        return later()

    def rows(self) -> list[AuditRow]:
        return []

    def head(self) -> AuditHead:
        return AuditHead(0, "0" * 64)

    def verify(self, *, head: AuditHead | None = None) -> int | None:
        return None

    def close(self) -> None:
        return None


async def test_run_returns_only_after_the_audit_writes_finished() -> None:
    """run() waits for slow audit appends: every row is written when it returns."""
    slow = _SlowSink()
    runner = runner_for(AuditLog(slow), [step(propose("search", {"q": "1"}, "a"))])
    await runner.run("go")
    assert [(e.kind, e.call_id) for e in slow.finished] == [("tool_call", "a"), ("turn", None)]


class _BrokenSink(_SlowSink):
    """A sink whose appends fail once they run."""

    def append(self, batch: Sequence[AuditEntry]) -> Awaitable[list[AuditRow]]:
        async def fail() -> list[AuditRow]:
            raise OSError("disk full")

        return fail()


async def test_a_failing_sink_is_reported_and_never_breaks_the_turn() -> None:
    """Audit write failures surface as a listener_error log; the turn result is unaffected."""
    runner = runner_for(AuditLog(_BrokenSink()), [step(propose("search", {"q": "1"}, "a"))])
    logs: list[Log] = []
    runner.on(Log, logs.append)
    result = await runner.run("go")
    assert result.status == "completed"
    assert any(log.kind == "listener_error" and "disk full" in log.message for log in logs)


@tool
async def lookup(q: str) -> str:
    """Look ``q`` up, giving the event loop a turn (as real I/O does)."""
    await asyncio.sleep(0)
    return f"found {q}"


class _Rows(list[AuditRow]):
    """A sink's answer that a weak reference can follow."""


class _CountingSink(_SlowSink):
    """A sink whose appends finish at once; ``alive()`` counts the answers still referenced.

    With ``fail_first`` its first append fails (``disk full``) and the others succeed.
    """

    def __init__(self, *, fail_first: bool = False) -> None:
        super().__init__()
        self._answers: list[weakref.ref[_Rows]] = []
        self._fail_next = fail_first

    def append(self, batch: Sequence[AuditEntry]) -> Awaitable[list[AuditRow]]:
        fail, self._fail_next = self._fail_next, False

        async def write() -> list[AuditRow]:
            if fail:
                raise OSError("disk full")
            answer = _Rows()
            self._answers.append(weakref.ref(answer))
            return answer

        return write()

    def alive(self) -> int:
        return sum(ref() is not None for ref in self._answers)

    def answered(self) -> int:
        return len(self._answers)


async def test_a_long_turn_does_not_keep_the_rows_it_already_wrote() -> None:
    """A turn of 400 calls (a gateway session is one long turn) holds the answers of the
    appends still running, not of every row written since it started."""
    sink = _CountingSink()
    seen: list[int] = []

    @tool
    def probe() -> str:
        """Count the sink's answers still held."""
        seen.append(sink.alive())
        return "counted"

    steps = [step(propose("lookup", {"q": str(i)}, f"c{i}")) for i in range(400)]
    runner = TurnRunner(
        executor=ToolLoopExecutor(
            ScriptedModel([*steps, step(propose("probe", {}, "last")), ModelResponse(text="ok")])
        ),
        tools=[lookup, probe],
        middleware=[AuditLog(sink)],
        max_iterations=None,
    )
    result = await runner.run("go")
    assert result.status == "completed"
    assert sink.answered() == 402  # 400 calls, the probe and the turn: every row was written
    assert len(seen) == 1
    assert seen[0] <= 130  # not 400: finished appends were let go during the turn


async def test_an_append_that_failed_early_in_a_long_turn_is_still_reported() -> None:
    """Letting finished appends go keeps the failed ones: the turn's end reports them."""
    sink = _CountingSink(fail_first=True)
    runner = TurnRunner(
        executor=ToolLoopExecutor(
            ScriptedModel([step(propose("lookup", {"q": str(i)}, f"c{i}")) for i in range(300)])
        ),
        tools=[lookup],
        middleware=[AuditLog(sink)],
        max_iterations=None,
    )
    logs: list[Log] = []
    runner.on(Log, logs.append)
    result = await runner.run("go")
    assert result.status == "completed"
    assert [log.kind for log in logs if "disk full" in log.message] == ["listener_error"]
    assert sink.answered() == 300  # the 299 other calls and the turn
