"""`AuditLog` through real turns: rows per call and per turn, decisions, flushing, concurrency.

The `sink` fixture runs the tests against every sink (JSON Lines, SQLite, PostgreSQL).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import weakref
from collections.abc import Awaitable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from middleware import Middleware, RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import (
    AuditEntry,
    AuditHead,
    AuditLog,
    AuditRow,
    AuditVerification,
    SqliteAuditSink,
)
from pipeline import (
    DispatchContext,
    ToolLoopExecutor,
    TurnContext,
    TurnRunner,
    canonical_json,
    tool,
)
from pipeline.calls import ToolCall, ToolCallContext, ToolCallNext
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.events import Log
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext, RecordChange
from pipeline.stores import SqliteStore, TransactionWriter
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


async def test_one_row_per_call_and_one_per_turn_written_before_run_returns(
    sink: Sink,
) -> None:
    """Each stored call and the turn get a row, readable as soon as run() returns; a call's
    row says what its record says (ran, verdict, duration)."""
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
    assert [(e.ran, e.decision) for e in (first, failed, unknown)] == [
        (True, "allowed"), (True, "allowed"), (False, "invalid")
    ]
    assert (first.decisions, failed.decisions) == ("[]", "[]")
    assert [first.duration_ms, failed.duration_ms] == [
        c.duration_ms for c in result.tool_calls[:2]
    ]
    assert first.duration_ms is not None
    assert unknown.duration_ms is None  # never executed
    assert (unknown.policy, unknown.reason) == ("loopware.registry", "unknown tool 'nope'")
    assert {e.turn_id for e in rows} == {result.turn_id}
    assert {e.conversation_id for e in rows} == {"conv-1"}
    assert (turn.status, turn.input, turn.is_error, turn.decision, turn.ran) == (
        "completed", "find x", False, None, None
    )
    assert turn.duration_ms is not None
    assert turn.duration_ms > 0
    assert sink.verify()


@tool
def shell_exec(cmd: str) -> str:
    """Run a shell command (never allowed)."""
    raise AssertionError("a denied call's handler must never run")


async def test_a_call_a_policy_refused_has_one_row_denied_and_not_run(sink: Sink) -> None:
    """A call to a tool ToolPolicy denies: exactly one row, ``denied``, ``ran`` false, the
    policy and its reason; the withdrawal of the tool is a ``tool`` row of its own."""
    runner = TurnRunner(
        executor=ToolLoopExecutor(
            ScriptedModel([step(propose("shell_exec", {"cmd": "ls"}, "s1")), ModelResponse()])
        ),
        tools=[search, shell_exec],
        middleware=[AuditLog(sink), ToolPolicy(deny=["shell*"])],
    )
    result = await runner.run("go")
    [call] = result.tool_calls
    [row] = [e for e in entries(sink) if e.call_id == "s1"]
    assert (row.kind, row.decision, row.ran, row.is_error) == ("tool_call", "denied", False, True)
    assert (row.policy, row.reason) == ("loopware.policy", call.deciding.reason)  # type: ignore[union-attr]
    assert "shell*" in (row.reason or "")
    assert json.loads(row.decisions or "") == [d.as_dict() for d in call.decisions]
    [withdrawn] = [e for e in entries(sink) if e.kind == "tool"]
    assert (withdrawn.tool, withdrawn.decision, withdrawn.policy, withdrawn.call_id) == (
        "shell_exec", "withdrawn", "loopware.policy", None
    )


async def test_a_call_denied_by_a_tool_call_hook_has_one_row_with_its_reason(
    sink: Sink,
) -> None:
    """A ``tool_call`` hook's ``ctx.deny`` gives one row: denied, not run, the hook's name."""
    guard = Middleware("guard")

    @guard.tool_call
    async def refuse(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        ctx.deny("not on weekends")

    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "1"}, "a"))],
                        middleware=[guard])
    await runner.run("go")
    [row] = [e for e in entries(sink) if e.kind == "tool_call"]
    assert (row.decision, row.ran, row.reason) == ("denied", False, "not on weekends")
    assert row.policy is not None
    assert "guard" in row.policy


async def test_unknown_tools_and_invalid_arguments_get_one_row_each_never_allowed(
    sink: Sink,
) -> None:
    """A name no tool has, arguments that are not JSON, and arguments failing the schema: one
    row per call, each ``invalid`` and not run."""
    runner = runner_for(
        AuditLog(sink),
        [
            step(
                propose("nope", {}, "u"),
                ProposedToolCall(id="j", name="search", arguments="{not json"),
                propose("search", {"q": 7}, "s"),
            ),
            ModelResponse(text="done"),
        ],
    )
    await runner.run("go")
    calls = [e for e in entries(sink) if e.kind == "tool_call"]
    assert [(e.call_id, e.decision, e.ran) for e in calls] == [
        ("u", "invalid", False), ("j", "invalid", False), ("s", "invalid", False)
    ]
    assert [e.policy for e in calls] == ["loopware.registry", "loopware.arguments",
                                         "loopware.arguments"]
    assert sink.verify()


async def test_a_result_withheld_after_the_handler_ran_is_denied_and_ran(sink: Sink) -> None:
    """A hook that lets the handler run, then withholds its result: ``ran`` true, ``denied``,
    the decision taken ``after``."""
    ran: list[str] = []

    @tool
    def secret(q: str) -> str:
        """Return a secret."""
        ran.append(q)
        return "the secret"

    censor = Middleware("censor")

    @censor.tool_call
    async def withhold(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        await call_next()
        ctx.deny("the result names a customer")

    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([step(propose("secret", {"q": "x"}, "a"))])),
        tools=[secret],
        middleware=[AuditLog(sink), censor],
    )
    await runner.run("go")
    assert ran == ["x"]
    [row] = [e for e in entries(sink) if e.kind == "tool_call"]
    assert (row.decision, row.ran, row.is_error) == ("denied", True, True)
    assert row.duration_ms is not None
    [decision] = json.loads(row.decisions or "")
    assert (decision["action"], decision["when"]) == ("denied", "after")


async def test_a_tool_hidden_by_a_limit_is_a_row_of_its_own_and_the_call_stays_allowed(
    sink: Sink,
) -> None:
    """``ToolCallLimit({"search": 2})``: the second call, which used the limit up, keeps its
    ``allowed`` row; the hide is a ``tool`` row naming that call; the third call is denied."""
    runner = runner_for(
        AuditLog(sink),
        [step(propose("search", {"q": str(i)}, f"c{i}")) for i in range(3)],
        middleware=[ToolCallLimit({"search": 2})],
    )
    result = await runner.run("go")
    rows = entries(sink)
    assert [(e.kind, e.call_id, e.decision) for e in rows] == [
        ("tool_call", "c0", "allowed"),
        ("tool_call", "c1", "allowed"),
        ("tool", "c1", "hidden"),
        ("tool_call", "c2", "denied"),
        ("turn", None, None),
    ]
    hidden = rows[2]
    assert (hidden.tool, hidden.policy) == ("search", "loopware.limit")
    assert hidden.reason == result.tool_decisions[0].reason
    assert (hidden.ran, hidden.decisions, hidden.args) == (None, None, None)
    assert [e.ran for e in rows if e.kind == "tool_call"] == [True, True, False]
    assert sink.verify()


async def test_a_repetition_hide_is_a_tool_row_never_a_second_row_of_the_call(
    sink: Sink,
) -> None:
    """RepetitionDetector hiding a repeated tool: the repeated call has one row (allowed), the
    hide a ``tool`` row; counting ``tool_call`` rows counts the stored calls."""
    same = {"q": "loop"}
    runner = runner_for(
        AuditLog(sink),
        [step(propose("search", same, "a")), step(propose("search", same, "b"))],
        middleware=[RepetitionDetector(threshold=2, on_repeat="hide")],
    )
    result = await runner.run("go")
    assert result.status == "completed"
    rows = entries(sink)
    calls = [e for e in rows if e.kind == "tool_call"]
    assert [(e.call_id, e.decision) for e in calls] == [("a", "allowed"), ("b", "allowed")]
    assert len(calls) == len(result.tool_calls)
    [hide] = [e for e in rows if e.kind == "tool"]
    assert (hide.decision, hide.policy, hide.call_id) == ("hidden", "loopware.repetition", "b")


async def test_policy_decision_logs_no_longer_change_any_row(sink: Sink) -> None:
    """``Log(kind="policy.decision")`` events are not read: a call's row is its record's."""

    async def judge(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            ctx.log.info("policy.decision", "denied", policy="judge", call_id=call.id,
                         checksum=call.checksum, action="denied", reason="because")
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_output(judge)
    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "1"}, "a"))],
                        middleware=[plain])
    await runner.run("go")
    [call] = [e for e in entries(sink) if e.kind == "tool_call"]
    assert (call.decision, call.policy) == ("allowed", None)


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
    assert sink.verify()


async def test_a_mutated_call_keeps_its_row_and_gets_an_amended_row_with_the_new_form(
    sink: Sink,
) -> None:
    """``mutate_tool_call`` never rewrites the call's row: an ``amended`` row records the new
    form, after it."""

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
    first, amended = [e for e in entries(sink) if e.call_id == "a"]
    assert (first.kind, amended.kind) == ("tool_call", "amended")
    assert first.args == canonical_json({"q": "secret"})
    assert (first.ran, first.decision) == (True, "allowed")
    assert first.duration_ms is not None
    assert amended.args == canonical_json({"q": "[redacted]"})
    assert amended.ran is True  # ToolCall.completed: a result came from somewhere
    assert amended.duration_ms is None  # the new record has none
    assert sink.verify()


async def test_a_deleted_call_gets_a_deleted_row_and_keeps_its_own(sink: Sink) -> None:
    """``delete_tool_call``: a ``deleted`` row naming the record removed."""

    async def drop(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            assert await ctx.delete_tool_call(call.id)
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_output(drop)
    runner = runner_for(AuditLog(sink), [step(propose("search", {"q": "1"}, "a"))],
                        middleware=[plain])
    result = await runner.run("go")
    assert result.tool_calls == ()
    rows = [e for e in entries(sink) if e.call_id == "a"]
    assert [(e.kind, e.decision) for e in rows] == [("tool_call", "allowed"), ("deleted", None)]
    assert (rows[1].tool, rows[1].args) == ("search", canonical_json({"q": "1"}))


async def test_hostile_names_and_huge_arguments_never_break_the_turn_or_lose_a_row(
    sink: Sink,
) -> None:
    """A tool name with a lone surrogate, a reason with one, and 2 MB of arguments: every call
    has its row, the turn completes and the chain verifies."""
    guard = Middleware("guard")

    @guard.tool_call
    async def refuse(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        ctx.deny("bad \ud800 reason")

    runner = runner_for(
        AuditLog(sink),
        [
            step(
                ProposedToolCall(id="s\udc80", name="sea\ud800rch", arguments="{}"),
                propose("search", {"q": "x" * 2_000_000}, "big"),
            ),
            ModelResponse(text="done"),
        ],
        middleware=[guard],
    )
    result = await runner.run("go")
    assert result.status == "completed"
    calls = {e.call_id: e for e in entries(sink) if e.kind == "tool_call"}
    assert set(calls) == {c.id for c in result.tool_calls} == {"s\udc80", "big"}
    assert calls["s\udc80"].decision == "invalid"
    assert (calls["big"].decision, calls["big"].reason) == ("denied", "bad \ud800 reason")
    assert len(calls["big"].args or "") > 2_000_000
    assert sink.verify()


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

    def verify(self, *, head: AuditHead | None = None) -> AuditVerification:
        return AuditVerification(ok=True, rows_checked=0)

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
    assert [log.kind for log in logs if "disk full" in log.message] == [
        "record_error", "listener_error"  # the call's row (the turn goes on), the turn's row
    ]


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
    assert [log.kind for log in logs if "disk full" in log.message] == ["record_error"]
    assert sink.answered() == 300  # the 299 other calls and the turn


class _CheckingStore(SqliteStore):
    """A SqliteStore that, as each call's write returns, looks for the call's audit row from
    another connection (what a process killed right then would leave)."""

    def __init__(self, path: Path, audit: Path) -> None:
        super().__init__(path, synchronous="normal")  # fast, so a late row would show
        self.audit = audit
        self.seen: dict[str, bool] = {}

    async def save_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call: ToolCall,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> None:
        await super().save_tool_call(conversation_id, turn_id, call, writers=writers)
        with sqlite3.connect(self.audit) as conn:
            found = conn.execute(
                "SELECT count(*) FROM audit_rows WHERE kind = 'tool_call' AND call_id = ?",
                (call.id,),
            ).fetchone()[0]
        conn.close()
        self.seen[call.id] = found == 1


@pytest.mark.parametrize("layout", ["same-file", "own-file"])
async def test_with_a_durable_store_a_calls_row_is_committed_when_its_store_returns(
    tmp_path: Path, layout: str
) -> None:
    """SqliteStore with SqliteAuditSink (``synchronous="full"``, whose appends go to its
    writer thread): when the store's write of a call returns, the call's row is committed
    already, in the store's transaction (one file) or before it (two files)."""
    path = tmp_path / "store.sqlite"
    audit = path if layout == "same-file" else tmp_path / "audit.sqlite"
    sink = SqliteAuditSink(audit)
    store = _CheckingStore(path, audit)
    try:
        runner = TurnRunner(
            executor=ToolLoopExecutor(ScriptedModel(
                [step(propose("search", {"q": str(i)}, f"c{i}")) for i in range(4)]
            )),
            tools=[search],
            middleware=[AuditLog(sink)],
            store=store,
        )
        result = await runner.run("go", conversation_id="conv")
        assert result.status == "completed"
        assert store.seen == {f"c{i}": True for i in range(4)}
        assert sink.verify()
        assert sink.head().count == len(sink.rows()) == 5
    finally:
        store.close()
        sink.close()


class _RollbackWriter:
    def write(self, connection: object) -> None:
        raise RuntimeError("the co-writer fails")

    def settle(self, committed: bool) -> None:
        return None


class _FailsOn:
    """A second keeper on the store's file whose writer fails for one call."""

    def __init__(self, database: str, call_id: str) -> None:
        self.database = database
        self.call_id = call_id

    def keep(self, change: RecordChange) -> Awaitable[object]:
        raise AssertionError("never asked: it joins the store's file")

    def joins(self, database: str) -> bool:
        return database == self.database

    def joint(self, change: RecordChange) -> TransactionWriter:
        return _RollbackWriter() if change.call.id == self.call_id else _NoWriter()


class _NoWriter:
    def write(self, connection: object) -> None:
        return None

    def settle(self, committed: bool) -> None:
        return None


async def test_on_one_file_a_call_and_its_row_commit_together_or_not_at_all(
    tmp_path: Path,
) -> None:
    """SqliteStore and SqliteAuditSink on one file: when the store's transaction for call
    ``b`` fails, the row of ``b`` is rolled back with it; the chain, the head the sink hands
    out and later appends stay consistent."""
    path = tmp_path / "shared.sqlite"
    sink = SqliteAuditSink(path, synchronous="normal")
    store = SqliteStore(path, synchronous="normal")
    try:
        failing = _FailsOn(str(store.transaction_database), "b")
        runner = TurnRunner(
            executor=ToolLoopExecutor(ScriptedModel([step(propose("search", {"q": "1"}, "a")),
                                                     step(propose("search", {"q": "2"}, "b"))])),
            tools=[search],
            middleware=[AuditLog(sink), failing],
            store=store,
        )
        result = await runner.run("go")
        assert result.status == "failed"
        assert [c.id for c in await store.tool_calls_for_turn(result.turn_id)] == ["a"]
        assert [(e.kind, e.call_id) for e in entries(sink)] == [
            ("tool_call", "a"), ("turn", None)
        ]
        assert sink.verify()
        assert sink.head().count == 2
        await sink.append([AuditEntry(kind="turn", turn_id="t", conversation_id=None,
                                      recorded_at=result.ended_at)])
        assert sink.verify()
        assert sink.head().count == 3
    finally:
        store.close()
        sink.close()
