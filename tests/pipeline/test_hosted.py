"""A loopware stack driven by someone else's loop (`pipeline.hosted`), with a hostile driver.

The driver plays a host: it runs its own handlers, proposes parallel batches, repeats calls,
spells out defaults, calls a denied tool and asks again for call ids already decided (as hosts
do when they resume a call after an approval).
"""

from __future__ import annotations

import asyncio
import gc
import random
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, JsonlAuditSink
from pipeline.hosted import HostedRunner, HostedTurn, HostTool

SEARCH = HostTool(
    "search",
    "Search.",
    {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
        "required": ["q"],
    },
)
SHELL = HostTool("shell", "Run a command.", {"type": "object", "properties": {}})


class Host:
    """A scripted host: its own handlers, counting every run."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def centre(self, name: str) -> Callable[[dict[str, Any]], Awaitable[object]]:
        async def run(args: dict[str, Any]) -> object:
            self.runs.append((name, args))
            await asyncio.sleep(0)
            return {"tool": name, "args": args}

        return run

    async def batch(
        self, turn: HostedTurn, calls: list[tuple[str, str, dict[str, Any]]], **validated: Any
    ) -> list[Any]:
        turn.offer([SEARCH, SHELL])
        results = await asyncio.gather(
            *(
                turn.call(cid, name, args, self.centre(name), validated=validated.get(cid))
                for cid, name, args in calls
            )
        )
        await turn.end_batch()
        return results


def _sink(tmp_path: Path) -> JsonlAuditSink:
    return JsonlAuditSink(tmp_path / "audit.jsonl")


async def test_ten_parallel_calls_under_a_limit_of_three_run_three_handlers() -> None:
    """A batch of 10 parallel calls with a limit of 3 runs the host's handler exactly 3 times;
    the other 7 are denied on their call ids before the handler."""
    runner = HostedRunner(middleware=[ToolCallLimit({"search": 3})])
    host = Host()
    turn = await runner.begin("go")
    calls = await host.batch(turn, [(f"c{i}", "search", {"q": f"q{i}"}) for i in range(10)])
    result = await turn.finish()
    assert len(host.runs) == 3
    assert [c.forwarded for c in calls] == [True] * 3 + [False] * 7
    assert all("E_CALL_DENIED" in c.text for c in calls[3:])
    assert result.status == "completed"
    assert len(result.tool_calls) == 10
    assert {c.verdict for c in result.tool_calls} == {"allowed", "denied"}


async def test_asking_again_for_a_call_id_returns_the_same_decision_and_takes_no_slot() -> None:
    """A host that runs its pre-handler hook again for a call id (a resumed call) gets the same
    decision: no second handler run, no second limit slot, no second repetition count."""
    runner = HostedRunner(
        middleware=[ToolCallLimit({"search": 2}), RepetitionDetector(threshold=2)]
    )
    host = Host()
    turn = await runner.begin("go")
    turn.offer([SEARCH])
    first = await turn.call("a", "search", {"q": "x"}, host.centre("search"))
    again = await turn.call("a", "search", {"q": "x"}, host.centre("search"))
    other = await turn.call("b", "search", {"q": "y"}, host.centre("search"))
    result = await turn.finish()
    assert again is first
    assert first.forwarded
    assert other.forwarded  # "b" got the second slot: "a" took only one
    assert len(host.runs) == 2
    assert [c.id for c in result.tool_calls] == ["a", "b"]


async def test_a_spelled_out_default_is_a_repetition_when_the_host_validates() -> None:
    """The host's validated arguments (defaults applied) are what repetition compares: a call
    that spells out a default repeats one that left it out."""
    runner = HostedRunner(middleware=[RepetitionDetector(threshold=2)])
    host = Host()
    turn = await runner.begin("go")
    await host.batch(turn, [("a", "search", {"q": "x"})], a={"q": "x", "limit": 10})
    [second] = await host.batch(
        turn, [("b", "search", {"q": "x", "limit": 10})], b={"q": "x", "limit": 10}
    )
    result = await turn.finish()
    assert not second.forwarded
    assert len(host.runs) == 1
    assert host.runs[0] == ("search", {"q": "x", "limit": 10})  # the host's own arguments
    assert result.tool_calls[0].args == {"q": "x"}  # the record keeps what the model sent


async def test_a_denied_tool_is_hidden_and_its_call_refused_before_the_handler() -> None:
    """`ToolPolicy` withdraws the host's denied tool (`hidden` lists it, so the host does not
    offer it) and a call that names it anyway never reaches the host's handler."""
    runner = HostedRunner(middleware=[ToolPolicy(deny=["shell"])])
    host = Host()
    turn = await runner.begin("go")
    turn.offer([SEARCH, SHELL])
    assert turn.hidden() == {"shell"}
    [denied, allowed] = await host.batch(
        turn, [("s", "shell", {}), ("q", "search", {"q": "x"})]
    )
    await turn.finish()
    assert not denied.forwarded
    assert "E_TOOL_UNAVAILABLE" in denied.text
    assert allowed.forwarded
    assert host.runs == [("search", {"q": "x"})]


async def test_the_audit_has_one_row_per_call_id_and_its_chain_verifies(tmp_path: Path) -> None:
    """Every call id the host ran through the stage, allowed, denied or asked twice, is one
    audit row, and the chain verifies."""
    sink = _sink(tmp_path)
    runner = HostedRunner(
        middleware=[
            ToolPolicy(deny=["shell"]),
            ToolCallLimit({"search": 3}),
            RepetitionDetector(threshold=3),
            AuditLog(sink),
        ]
    )
    host = Host()
    turn = await runner.begin("go", conversation_id="thread-1")
    await host.batch(turn, [(f"c{i}", "search", {"q": f"q{i % 2}"}) for i in range(10)])
    await host.batch(turn, [("s1", "shell", {}), ("c1", "search", {"q": "q1"})])
    await turn.finish()
    try:
        ids = [str(row.entry.call_id) for row in sink.rows() if row.entry.kind == "tool_call"]
        assert sorted(ids) == sorted([f"c{i}" for i in range(10)] + ["s1"])
        assert sink.verify().ok
    finally:
        sink.close()
    assert len(host.runs) == 3


async def test_announced_order_decides_which_calls_take_the_slots() -> None:
    """Calls announced in proposal order pass the stage in that order, whatever order they
    arrive in (LangChain's thread pool): the first three proposed take a limit of three."""
    runner = HostedRunner(middleware=[ToolCallLimit({"search": 3})])
    host = Host()
    turn = await runner.begin("go")
    turn.offer([SEARCH])
    ids = [f"c{i}" for i in range(10)]
    turn.announce(ids)
    arrival = ids[:]
    random.Random(7).shuffle(arrival)
    calls = await asyncio.gather(
        *(turn.call(cid, "search", {"q": cid}, host.centre("search")) for cid in arrival)
    )
    await turn.finish()
    ran = sorted(c.call_id for c in calls if c.forwarded)
    assert ran == ["c0", "c1", "c2"]


async def test_the_stash_round_trips_as_plain_data_into_a_new_turn() -> None:
    """A snapshot is plain data; a turn begun from it (a resumed run) counts on from there."""
    runner = HostedRunner(middleware=[ToolCallLimit({"search": 2})])
    host = Host()
    turn = await runner.begin("go")
    await host.batch(turn, [("a", "search", {"q": "x"})])
    snapshot = turn.snapshot()
    await turn.finish()
    assert snapshot["loopware"]["limit"]["used"] == {"search": 1}
    resumed = await runner.begin("go on", stash=snapshot)
    calls = await host.batch(resumed, [("b", "search", {"q": "y"}), ("c", "search", {"q": "z"})])
    await resumed.finish()
    assert [c.forwarded for c in calls] == [True, False]


async def test_restore_replaces_the_stash_contents() -> None:
    """`restore` puts a snapshot in place of the live stash's contents."""
    runner = HostedRunner()
    turn = await runner.begin("go")
    assert turn.dispatch is not None
    turn.dispatch.stash.set("gone.x", 1)
    turn.restore({"kept": {"y": 2}})
    assert turn.snapshot() == {"kept": {"y": 2}}
    await turn.finish()


async def test_a_host_error_is_re_raised_by_the_host_and_recorded_as_an_error() -> None:
    """A host handler that raises: the record is an error, and `raises` tells the host to
    re-raise its own exception (its control flow, e.g. a retry request)."""
    runner = HostedRunner()
    turn = await runner.begin("go")

    class Retry(Exception):
        pass

    async def failing(args: dict[str, Any]) -> object:
        raise Retry("try again")

    call = await turn.call("a", "search", {"q": "x"}, failing)
    result = await turn.finish()
    assert call.raises
    assert isinstance(call.host_error, Retry)
    assert result.tool_calls[0].is_error


async def test_calls_after_a_nacked_dispatch_are_refused_without_running() -> None:
    """When a policy ends the dispatch (``on_exceed="nack"``) the turn ends; the host's later
    calls are refused and never run."""
    runner = HostedRunner(middleware=[ToolCallLimit({"search": 1}, on_exceed="nack")])
    host = Host()
    turn = await runner.begin("go")
    await host.batch(turn, [("a", "search", {"q": "x"}), ("b", "search", {"q": "y"})])
    late = await turn.call("c", "search", {"q": "z"}, host.centre("search"))
    result = await turn.finish()
    assert len(host.runs) == 1
    assert not late.forwarded
    assert "turn has ended" in late.text
    assert result.status == "failed"


@pytest.mark.parametrize("arguments", ['{"q": "x"}', {"q": "x"}], ids=["json-text", "object"])
async def test_arguments_arrive_as_json_text_or_an_object(arguments: Any) -> None:
    """The model's arguments may be JSON text (as providers send them) or already parsed."""
    runner = HostedRunner()
    host = Host()
    turn = await runner.begin("go")
    call = await turn.call("a", "search", arguments, host.centre("search"))
    await turn.finish()
    assert call.forwarded
    assert call.value == {"tool": "search", "args": {"q": "x"}}


async def test_a_call_id_asked_again_while_it_runs_waits_for_its_one_decision() -> None:
    """Two hooks for one call id at once (a host retrying while the first still runs): the
    handler runs once, both get the same `HostedCall`."""
    runner = HostedRunner()
    release = asyncio.Event()
    runs: list[str] = []

    async def slow(args: dict[str, Any]) -> object:
        runs.append("ran")
        await release.wait()
        return "ok"

    turn = await runner.begin("go")
    first = asyncio.ensure_future(turn.call("a", "search", {"q": "x"}, slow))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(turn.call("a", "search", {"q": "x"}, slow))
    await asyncio.sleep(0)
    release.set()
    assert await first is await second
    await turn.finish()
    assert runs == ["ran"]


async def test_a_call_id_an_earlier_turn_stored_is_answered_without_crashing_the_host() -> None:
    """A host that reuses a call id of an earlier turn of the conversation gets its answer;
    the turn reports the clash instead of raising into the host."""
    runner = HostedRunner()
    host = Host()
    errors = []
    for _ in range(2):
        turn = await runner.begin("go", conversation_id="thread")
        call = await turn.call("same", "search", {"q": "x"}, host.centre("search"))
        errors.append([e.code for e in (await turn.finish()).errors])
        assert call.forwarded
    assert errors == [[], ["E_INVALID_INITIAL_TOOL_CALL_VALUE"]]


async def test_a_registered_loopware_tool_runs_its_own_handler_without_a_host_handler() -> None:
    """A loopware `Tool` given to the runner (as the gateway's upstream tools are) runs its own
    handler when the host passes no handler: the call is forwarded with the record's results."""
    from pipeline import tool

    ran: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo."""
        ran.append(text)
        return text.upper()

    runner = HostedRunner(tools=[echo], middleware=[ToolCallLimit({"echo": 1})])
    turn = await runner.begin("go")
    first = await turn.call("a", "echo", {"text": "hi"})
    second = await turn.call("b", "echo", {"text": "again"})
    await turn.finish()
    assert ran == ["hi"]
    assert first.forwarded
    assert first.value == "HI"
    assert not second.forwarded
    assert "E_CALL_DENIED" in second.text


async def test_a_call_without_a_host_handler_to_an_unknown_name_is_refused_not_offered() -> None:
    """With no host handler, a name the turn holds no tool of is refused by the stage as any
    unknown name is (the gateway's clients may call anything): it is not registered as a host
    tool, never runs, and the turn's registry stays as it was."""
    runner = HostedRunner()
    turn = await runner.begin("go")
    call = await turn.call("a", "nothing", {})
    assert not turn.knows("nothing")
    await turn.finish()
    assert call.record is not None
    assert not call.record.ran
    assert call.record.is_error
    assert not call.forwarded


async def test_a_host_tool_is_built_once_per_runner_and_anew_when_its_schema_changes() -> None:
    """Building a host tool makes a pydantic model class: a runner builds each host tool once
    for all its turns, and builds it again only when the host describes it differently."""
    runner = HostedRunner()
    built = []
    for spec in (SEARCH, SEARCH, HostTool("search", "Search.", {"type": "object"})):
        turn = await runner.begin("go")
        turn.offer([spec])
        assert turn.dispatch is not None
        built.append(turn.dispatch.tools.get("search"))
        await turn.finish()
    assert built[0] is built[1]
    assert built[2] is not built[0]
    assert built[2] is not None
    assert built[2].describe()["input_schema"] == {"type": "object"}


async def test_a_host_tool_whose_schema_has_defs_and_refs_is_offered_as_the_host_wrote_it() -> None:
    """A host tool taking a nested model (``$defs`` and ``$ref``, as pydantic writes it) is
    built, shown to the model unchanged, and its call runs."""
    schema = {
        "type": "object",
        "$defs": {"Item": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
        "properties": {"item": {"$ref": "#/$defs/Item"}, "note": {"type": "string"}},
    }
    turn = await HostedRunner().begin("go")
    turn.offer([HostTool("order", "Order.", schema)])
    assert turn.dispatch is not None
    tool = turn.dispatch.tools.get("order")
    assert tool is not None
    assert tool.describe()["input_schema"] == schema
    ran: list[Any] = []

    async def centre(args: Any) -> str:
        ran.append(args)
        return "ordered"

    call = await turn.call("c1", "order", {"item": {"qty": 2}, "note": "n"}, centre)
    await turn.finish()
    assert call.record is not None
    assert call.record.ran
    assert len(ran) == 1


async def test_a_decided_call_lets_go_of_the_hosts_handler_while_the_turn_goes_on() -> None:
    """The turn keeps each call (a call id asked again gets the same answer), but not the host's
    per-call handler and what it holds: a long run does not keep every call's host objects."""
    class HostCallState:
        """What a host's per-call handler closes over (its run context, the parsed call)."""

    runner = HostedRunner(middleware=[ToolCallLimit({"search": 3})])
    turn = await runner.begin("go")
    turn.offer([SEARCH])
    states: list[weakref.ref[HostCallState]] = []

    def centre() -> Callable[[dict[str, Any]], Awaitable[object]]:
        state = HostCallState()
        states.append(weakref.ref(state))

        async def run(args: dict[str, Any]) -> object:
            return {"seen": repr(state), "args": args}

        return run

    first = await turn.call("c1", "search", {"q": "a"}, centre())
    denied = [await turn.call(f"c{i}", "search", {"q": str(i)}, centre()) for i in range(2, 6)]
    gc.collect()
    assert first.forwarded
    assert "HostCallState" in str(first.value["seen"])
    assert [c.forwarded for c in denied] == [True, True, False, False]
    assert [ref() for ref in states] == [None] * 5  # every handler let go, the turn still open
    again = await turn.call("c1", "search", {"q": "a"}, centre())
    assert again is first  # asked again: the same decided call, not run again
    assert again.forwarded
    await turn.end_batch()
    result = await turn.finish()
    assert [c.ran for c in result.tool_calls] == [True, True, True, False, False]
