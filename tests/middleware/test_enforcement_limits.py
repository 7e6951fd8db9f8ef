"""Adversarial: a hostile model tries to run more, or again, than a policy allows.

Routes: a batch over a limit (parallel and sequential, per tool and in total, hide and nack,
failed calls), identical calls in one batch under approval and repetition, repeats and
oscillation across iterations, and arguments the approver does not see. Every test counts real
handler runs and asserts, per call id, what the model read and what each layer decided.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit
from pipeline import DispatchContext, Gate, Tool
from pipeline.errors import PolicyViolationError
from pipeline.models import ModelResponse, ProposedToolCall

from ._hostile import PARALLEL, Counted, audit_rows, audit_tool_rows, batch, call, denied, play

LIMIT_3 = "the limit of 3 runs of 'search' per turn is used up"

# -- 3. a batch over the limit ------------------------------------------------------------------


@PARALLEL
async def test_ten_calls_in_one_batch_under_a_limit_of_three_run_exactly_the_first_three(
    parallel: bool, tmp_path: Path
) -> None:
    """Slots go in proposal order; the seven others are denied on their own ids, never run."""
    tools = Counted()
    ids = [f"c{i}" for i in range(10)]
    played = await play(
        [batch(*(call(i, "search", q=i[1:]) for i in ids))],
        [tools.tool("search"), tools.tool("fetch")],
        [ToolCallLimit({"search": 3})],
        parallel=parallel,
        audit=tmp_path / "a.sqlite",
    )
    assert played.result.status == "completed"
    assert tools.ran("search") == ["0", "1", "2"]
    assert played.started == ["c0", "c1", "c2"]
    assert played.errors() == ids[3:]
    for i in ids[3:]:
        assert played.read(i) == denied("loopware.limit", "search", LIMIT_3)
    assert played.decided() == {i: [("loopware.limit", "denied", "before")] for i in ids[3:]}
    assert played.verdicts() == {
        **{i: ("allowed", True) for i in ids[:3]},
        **{i: ("denied", False) for i in ids[3:]},
    }
    # hiding the tool is a decision about the tool, never a second word on the call that ran
    assert played.tools_decided() == [("search", "loopware.limit", "hidden", "c2")]
    assert played.result.stash["loopware"]["limit"]["used"] == {"search": 3}
    assert played.offered(1) == ["fetch"]
    assert audit_rows(tmp_path / "a.sqlite") == {
        **{i: [("allowed", None, True)] for i in ids[:3]},
        **{i: [("denied", "loopware.limit", False)] for i in ids[3:]},
    }
    assert audit_tool_rows(tmp_path / "a.sqlite") == [
        ("search", "hidden", "loopware.limit", "c2")
    ]


@PARALLEL
async def test_a_total_limit_holds_across_tools_within_one_batch(parallel: bool) -> None:
    """total=3 runs the first three proposed calls, whatever their tools, and denies the rest."""
    tools = Counted()
    names = ["search", "fetch"] * 3
    played = await play(
        [batch(*(call(f"c{i}", name, q=str(i)) for i, name in enumerate(names)))],
        [tools.tool("search"), tools.tool("fetch")],
        [ToolCallLimit(total=3)],
        parallel=parallel,
    )
    assert tools.runs == [("search", "0"), ("fetch", "1"), ("search", "2")]
    assert played.errors() == ["c3", "c4", "c5"]
    assert played.read("c4") == denied(
        "loopware.limit", "search", "the limit of 3 tool runs per turn is used up"
    )
    assert played.decided() == {
        i: [("loopware.limit", "denied", "before")] for i in ("c3", "c4", "c5")
    }
    assert played.offered(1) == []


@PARALLEL
async def test_nack_runs_nothing_past_the_limit_and_fails_the_turn(
    parallel: bool, tmp_path: Path
) -> None:
    """on_exceed="nack": the call past the limit and every later call of the batch never run."""
    tools = Counted()
    played = await play(
        [
            batch(
                *(call(f"c{i}", "search", q=str(i)) for i in range(5)),
                call("f1", "fetch", q="after"),
            )
        ],
        [tools.tool("search"), tools.tool("fetch")],
        [ToolCallLimit({"search": 3}, on_exceed="nack")],
        parallel=parallel,
        audit=tmp_path / "a.sqlite",
    )
    assert played.result.status == "failed"
    assert len(played.model.requests) == 1
    assert tools.runs == [("search", "0"), ("search", "1"), ("search", "2")]
    [error] = played.result.errors
    assert isinstance(error, PolicyViolationError)
    assert error.code == "E_POLICY_VIOLATION"
    assert error.details["call_id"] == "c3"
    assert played.errors() == ["c3", "c4", "f1"]
    assert played.read("c3") == denied("loopware.limit", "search", LIMIT_3)
    assert played.read("f1") == denied(
        "loopware.limit", "fetch", "the dispatch was ended by call 'c3' beyond a limit"
    )
    stopped = ("c3", "c4", "f1")
    assert played.decided() == {i: [("loopware.limit", "denied", "before")] for i in stopped}
    assert audit_rows(tmp_path / "a.sqlite") == {
        **{f"c{i}": [("allowed", None, True)] for i in range(3)},
        **{i: [("denied", "loopware.limit", False)] for i in stopped},
    }


@PARALLEL
async def test_a_handler_that_raises_after_its_side_effect_uses_its_slot(parallel: bool) -> None:
    """count="runs" (the default): ten calls whose handler acts, then raises, run three times."""
    tools = Counted()
    played = await play(
        [batch(*(call(f"c{i}", "search", q="boom") for i in range(10)))],
        [tools.tool("search", fails_on="boom")],
        [ToolCallLimit({"search": 3})],
        parallel=parallel,
    )
    assert tools.ran("search") == ["boom"] * 3
    assert played.verdicts() == {
        **{f"c{i}": ("allowed", True) for i in range(3)},
        **{f"c{i}": ("denied", False) for i in range(3, 10)},
    }
    assert played.read("c0") == (
        "Error: E_TOOL_DOWNSTREAM_ERROR: tool 'search' failed: RuntimeError: search broke"
    )
    assert played.result.stash["loopware"]["limit"]["used"] == {"search": 3}


async def test_a_handler_whose_result_a_hook_withholds_uses_its_slot() -> None:
    """The handler ran even though the model never sees its result: it counts as a run."""
    from middleware import Middleware
    from pipeline.calls import ToolCallContext, ToolCallNext

    tools = Counted()
    redact = Middleware("redact")

    @redact.tool_call
    async def withhold(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        await call_next()
        ctx.deny("the result is classified")

    played = await play(
        [batch(*(call(f"c{i}", "search", q=str(i)) for i in range(5)))],
        [tools.tool("search")],
        [ToolCallLimit({"search": 3}), redact],
    )
    assert tools.ran("search") == ["0", "1", "2"]
    assert played.verdicts() == {
        **{f"c{i}": ("denied", True) for i in range(3)},
        **{f"c{i}": ("denied", False) for i in range(3, 5)},
    }
    assert played.decided()["c0"] == [("redact.withhold", "denied", "after")]
    assert played.decided()["c3"] == [("loopware.limit", "denied", "before")]


async def test_count_successes_gives_a_failed_call_its_slot_back() -> None:
    """count="successes": a call whose handler raised frees its slot for the next of the batch."""
    tools = Counted()
    played = await play(
        [batch(*(call(f"c{i}", "search", q=q) for i, q in enumerate(["boom", "1", "2", "3"])))],
        [tools.tool("search", fails_on="boom")],
        [ToolCallLimit({"search": 2}, count="successes")],
    )
    assert tools.ran("search") == ["boom", "1", "2"]
    assert played.errors() == ["c0", "c3"]
    assert played.read("c0") == (
        "Error: E_TOOL_DOWNSTREAM_ERROR: tool 'search' failed: RuntimeError: search broke"
    )
    assert played.decided() == {"c3": [("loopware.limit", "denied", "before")]}
    assert played.tools_decided() == [("search", "loopware.limit", "hidden", "c2")]
    assert played.result.stash["loopware"]["limit"]["used"] == {"search": 2}


async def test_count_successes_gives_back_the_slot_of_a_call_whose_output_is_no_tool_output() -> (
    None
):
    """A handler that returns an object loopware cannot show is not a success: its slot frees."""
    tools = Counted()
    played = await play(
        [batch(*(call(f"c{i}", "search", q=q) for i, q in enumerate(["bad", "1", "2", "3"])))],
        [tools.tool("search", bad_output_on="bad")],
        [ToolCallLimit({"search": 2}, count="successes")],
    )
    assert tools.ran("search") == ["bad", "1", "2"]
    assert played.errors() == ["c0", "c3"]
    assert played.read("c0").startswith("Error: tool 'search' returned object, which is not")
    assert played.verdicts()["c0"] == ("allowed", True)
    assert played.decided() == {"c3": [("loopware.limit", "denied", "before")]}
    assert played.result.stash["loopware"]["limit"]["used"] == {"search": 2}


async def test_count_successes_in_a_parallel_batch_frees_a_failed_slot_for_the_next_iteration() -> (
    None
):
    """Slots are taken in proposal order before anything fails; the freed one is used next time."""
    tools = Counted()
    played = await play(
        [
            batch(*(call(f"c{i}", "search", q=q) for i, q in enumerate(["boom", "1", "2"]))),
            batch(call("c3", "search", q="3"), call("c4", "search", q="4")),
        ],
        [tools.tool("search", fails_on="boom")],
        [ToolCallLimit({"search": 2}, count="successes")],
        parallel=True,
    )
    assert tools.ran("search") == ["boom", "1", "3"]
    assert played.errors() == ["c0", "c2", "c4"]
    assert played.decided() == {
        "c2": [("loopware.limit", "denied", "before")],
        "c4": [("loopware.limit", "denied", "before")],
    }
    assert played.tools_decided() == [("search", "loopware.limit", "hidden", "c3")]


# -- 6. identical calls in one batch ------------------------------------------------------------


@PARALLEL
@pytest.mark.parametrize(
    ("proposed_ids", "approved", "rejected"),
    [(("a", "b"), "a", "b"), (("a", "b"), "b", "a"), (("a", "a"), "a", "a-2")],
    ids=["approve-first", "approve-second", "reused-id"],
)
async def test_identical_calls_in_one_batch_are_approved_or_rejected_each_on_its_own_id(
    proposed_ids: tuple[str, str], approved: str, rejected: str, parallel: bool, tmp_path: Path
) -> None:
    """One approval never covers a twin call: each waits on its own gate, decided by call id."""
    tools = Counted()
    asked: list[tuple[str, str]] = []

    def approver(gate: Gate) -> bool:
        asked.append((gate.payload["call_id"], gate.payload["checksum"]))
        return bool(gate.payload["call_id"] == approved)

    played = await play(
        [batch(*(call(i, "refund", q="order-7") for i in proposed_ids))],
        [tools.tool("refund")],
        [ApprovalGate(["refund"], approver)],
        parallel=parallel,
        audit=tmp_path / "a.sqlite",
    )
    assert tools.ran("refund") == ["order-7"]
    assert played.started == [approved]
    assert sorted(i for i, _ in asked) == sorted([approved, rejected])
    assert len({checksum for _, checksum in asked}) == 1  # the twins are the same ask
    assert played.errors() == [rejected]
    assert played.read(rejected) == denied(
        "loopware.approval", "refund", "the approver said no", action="rejected"
    )
    assert played.decided() == {
        approved: [("loopware.approval", "approved", "before")],
        rejected: [("loopware.approval", "rejected", "before")],
    }
    assert played.verdicts() == {approved: ("approved", True), rejected: ("rejected", False)}
    assert audit_rows(tmp_path / "a.sqlite") == {
        approved: [("approved", "loopware.approval", True)],
        rejected: [("rejected", "loopware.approval", False)],
    }


@PARALLEL
async def test_identical_calls_in_one_batch_run_once_under_repetition_block(
    parallel: bool, tmp_path: Path
) -> None:
    """threshold=2: the first of three twins runs, the others are denied on their own ids."""
    tools = Counted()
    played = await play(
        [batch(*(call(f"r{i}", "search", q="same") for i in range(3)))],
        [tools.tool("search")],
        [RepetitionDetector(threshold=2)],
        parallel=parallel,
        audit=tmp_path / "a.sqlite",
    )
    assert tools.ran("search") == ["same"]
    assert played.started == ["r0"]
    assert played.errors() == ["r1", "r2"]
    assert played.read("r1") == denied(
        "loopware.repetition", "search", "the same call would be made 2 times (threshold 2)"
    )
    assert played.decided() == {
        i: [("loopware.repetition", "denied", "before")] for i in ("r1", "r2")
    }
    assert audit_rows(tmp_path / "a.sqlite") == {
        "r0": [("allowed", None, True)],
        "r1": [("denied", "loopware.repetition", False)],
        "r2": [("denied", "loopware.repetition", False)],
    }


# -- 7. repetition blocks before the handler ----------------------------------------------------


LAYOUTS = pytest.mark.parametrize(
    "layout", ["one-per-iteration", "one-batch-sequential", "one-batch-parallel"]
)


def laid_out(layout: str, calls: list[ProposedToolCall]) -> tuple[list[ModelResponse], bool]:
    """The steps proposing ``calls`` in ``layout``, and whether the executor runs them parallel."""
    if layout == "one-per-iteration":
        return [batch(c) for c in calls], False
    return [batch(*calls)], layout == "one-batch-parallel"


@LAYOUTS
async def test_threshold_three_means_two_runs_whatever_the_json_spelling(layout: str) -> None:
    """The same arguments spelled four ways are one call: two runs, then denials, batched or not."""
    tools = Counted()
    spellings = ['{"q": "same", "n": 1}', '{"n":1,"q":"same"}', '{ "q" : "same" , "n" : 1 }']
    spellings.append(json.dumps({"n": 1, "q": "same"}))

    class Query(BaseModel):
        q: str
        n: int

    def handler(args: Query, ctx: DispatchContext, meta: Any) -> str:
        tools.runs.append(("search", args.q))
        return "ok"

    search = Tool(name="search", description="Search.", input_schema=Query, handler=handler)
    calls = [
        ProposedToolCall(id=f"r{i}", name="search", arguments=text)
        for i, text in enumerate(spellings)
    ]
    steps, parallel = laid_out(layout, calls)
    played = await play(steps, [search], [RepetitionDetector(threshold=3)], parallel=parallel)
    assert tools.ran("search") == ["same", "same"]
    assert played.started == ["r0", "r1"]
    assert played.errors() == ["r2", "r3"]
    assert played.read("r2") == denied(
        "loopware.repetition", "search", "the same call would be made 3 times (threshold 3)"
    )
    assert played.decided() == {
        i: [("loopware.repetition", "denied", "before")] for i in ("r2", "r3")
    }


@LAYOUTS
async def test_an_oscillation_is_denied_before_its_fourth_call_runs(layout: str) -> None:
    """window=4: A, B, A run; the B that completes A-B-A-B is denied, in a batch or not."""
    tools = Counted()
    calls = [
        call("a1", "search", q="a"),
        call("b1", "fetch", q="b"),
        call("a2", "search", q="a"),
        call("b2", "fetch", q="b"),
    ]
    steps, parallel = laid_out(layout, calls)
    played = await play(
        steps,
        [tools.tool("search"), tools.tool("fetch")],
        [RepetitionDetector(threshold=10, window=4)],
        parallel=parallel,
    )
    assert tools.runs == [("search", "a"), ("fetch", "b"), ("search", "a")]
    assert played.errors() == ["b2"]
    assert played.read("b2") == denied(
        "loopware.repetition",
        "fetch",
        "oscillating between two calls (search and fetch) within the last 4 calls",
    )
    assert played.decided() == {"b2": [("loopware.repetition", "denied", "before")]}


@PARALLEL
async def test_exempt_tools_are_never_blocked(parallel: bool) -> None:
    """Identical calls to an exempt tool all run; the same repeat of another tool is denied."""
    tools = Counted()
    polls = [call(f"p{i}", "poll_job", q="j") for i in range(3)]
    played = await play(
        [
            batch(*polls, call("s0", "search", q="x")),
            batch(call("p3", "poll_job", q="j"), call("s1", "search", q="x")),
        ],
        [tools.tool("poll_job"), tools.tool("search")],
        [RepetitionDetector(threshold=2, exempt=["poll*"])],
        parallel=parallel,
    )
    assert tools.ran("poll_job") == ["j"] * 4
    assert tools.ran("search") == ["x"]
    assert played.errors() == ["s1"]
    assert played.decided() == {"s1": [("loopware.repetition", "denied", "before")]}


# -- 8. the approver sees the arguments that will run -------------------------------------------


class RefundArgs(BaseModel):
    order: str
    cents: int = 100_000


async def test_the_approver_sees_the_default_the_handler_would_run_with(tmp_path: Path) -> None:
    """An omitted argument is shown to the approver with its default, so it cannot slip by."""
    refunded: list[RefundArgs] = []
    payloads: list[dict[str, Any]] = []

    def refund(args: RefundArgs, ctx: DispatchContext, meta: Any) -> str:
        refunded.append(args)
        return f"refunded {args.cents}"

    def approver(gate: Gate) -> bool:
        payloads.append(gate.payload)
        return bool(gate.payload["args"]["cents"] <= 5_000)

    tool = Tool(name="refund", description="Refund.", input_schema=RefundArgs, handler=refund)
    played = await play(
        [
            batch(call("big", "refund", order="A")),
            batch(call("small", "refund", order="B", cents=900)),
        ],
        [tool],
        [ApprovalGate(["refund"], approver)],
        audit=tmp_path / "a.sqlite",
    )
    assert refunded == [RefundArgs(order="B", cents=900)]
    big = payloads[0]
    assert (big["call_id"], big["args"], big["raw_args"]) == (
        "big",
        {"order": "A", "cents": 100_000},
        {"order": "A"},
    )
    assert played.errors() == ["big"]
    assert played.decided() == {
        "big": [("loopware.approval", "rejected", "before")],
        "small": [("loopware.approval", "approved", "before")],
    }
    assert audit_rows(tmp_path / "a.sqlite") == {
        "big": [("rejected", "loopware.approval", False)],
        "small": [("approved", "loopware.approval", True)],
    }
