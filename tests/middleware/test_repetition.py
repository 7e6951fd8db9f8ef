"""`RepetitionDetector`: identical-call threshold, A-B-A-B oscillation, actions, exemptions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware import RepetitionDetector
from middleware._repetition import find_oscillation
from pipeline import TurnRunner, tool
from pipeline.calls import Decision, ToolDecision
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.events import ToolDecided
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel

# -- acceptance: a model that calls search with the same arguments forever -----------------


async def test_hide_removes_the_tool_from_offers_and_the_turn_completes(
    make_runner: Callable[..., TurnRunner], repeating: Callable[..., Any]
) -> None:
    """The third identical call runs, then search is hidden: a decision about the tool, kept
    by the turn and emitted as `ToolDecided`, never a second word on the call that ran."""
    model = repeating("search", {"q": "same"})
    runner = make_runner(model, [RepetitionDetector(threshold=3, on_repeat="hide")])
    emitted: list[ToolDecided] = []
    runner.on(ToolDecided, emitted.append)
    result = await runner.run("find it")

    assert result.status == "completed"
    assert result.output == "finished"
    verdicts = [(c.tool, c.verdict, c.ran) for c in result.tool_calls]
    assert verdicts == [("search", "allowed", True)] * 3
    assert ["search" in offered for offered in model.offered] == [True, True, True, False]
    third = result.tool_calls[2]
    assert result.tool_decisions == (
        ToolDecision(
            tool="search",
            policy="loopware.repetition",
            action="hidden",
            reason="the same call was made 3 times (threshold 3)",
            call_id=third.id,
        ),
    )
    assert [e.decision for e in emitted] == list(result.tool_decisions)


async def test_the_next_turn_on_the_same_runner_offers_the_tool_again(
    make_runner: Callable[..., TurnRunner], repeating: Callable[..., Any]
) -> None:
    """Hiding edits only the turn's registry, never the runner's baseline."""
    model = repeating()
    runner = make_runner(model, [RepetitionDetector(on_repeat="hide")])
    first = await runner.run("one")
    offers_at_turn_two = len(model.offered)
    second = await runner.run("two")
    assert "search" not in model.offered[offers_at_turn_two - 1]
    assert "search" in model.offered[offers_at_turn_two]
    assert len(second.tool_calls) == len(first.tool_calls) == 3
    assert "search" in runner.tools


async def test_nack_fails_the_turn_and_keeps_every_stored_call(
    make_runner: Callable[..., TurnRunner], repeating: Callable[..., Any]
) -> None:
    """With on_repeat="nack" the turn fails with PolicyViolationError; stored calls stay."""
    runner = make_runner(repeating(), [RepetitionDetector(threshold=3, on_repeat="nack")])
    result = await runner.run("find it")
    assert result.status == "failed"
    error = result.errors[-1]
    assert isinstance(error, PolicyViolationError)
    assert error.policy == "loopware.repetition"
    assert error.details["tool"] == "search"
    assert error.details["checksum"] == result.tool_calls[-1].checksum
    assert len(result.tool_calls) == 3
    with pytest.raises(PolicyViolationError):
        result.raise_for_status()
    assert [(c.verdict, c.ran) for c in result.tool_calls] == [("allowed", True)] * 3


async def test_warn_lets_the_call_run_with_a_warning_on_its_record(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """on_repeat="warn" never changes the turn: the third and fourth calls run, warned."""
    model = plan_model([("search", {"q": "x"})] * 4)
    runner = make_runner(model, [RepetitionDetector(threshold=3, on_repeat="warn")])
    result = await runner.run("go")
    assert result.status == "completed"
    assert [(c.verdict, c.ran) for c in result.tool_calls] == [
        ("allowed", True),
        ("allowed", True),
        ("warned", True),
        ("warned", True),
    ]
    assert result.tool_calls[3].decisions == (
        Decision(
            policy="loopware.repetition",
            action="warned",
            reason="the same call was made 4 times (threshold 3)",
        ),
    )


# -- oscillation --------------------------------------------------------------------------


async def test_oscillation_a_b_a_b_is_detected_within_the_window(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """a, b, a, b with window=4 hides both tools at the fourth call."""
    model = plan_model(
        [("search", {"q": "a"}), ("fetch", {"url": "b"})] * 3,
    )
    detector = RepetitionDetector(threshold=10, window=4, on_repeat="hide")
    result = await make_runner(model, [detector]).run("go")
    assert result.status == "completed"
    assert [c.tool for c in result.tool_calls] == ["search", "fetch", "search", "fetch"]
    fourth = result.tool_calls[3].id
    assert [(d.tool, d.action, d.call_id) for d in result.tool_decisions] == [
        ("search", "hidden", fourth),
        ("fetch", "hidden", fourth),
    ]
    assert "oscillating" in result.tool_decisions[0].reason
    assert "search" not in model.offered[-1]
    assert "fetch" not in model.offered[-1]


async def test_oscillation_nack_names_the_second_tool(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """Oscillation with on_repeat="nack" fails the dispatch at the completing call."""
    model = plan_model([("search", {"q": "a"}), ("search", {"q": "b"})] * 3)
    detector = RepetitionDetector(threshold=10, window=4, on_repeat="nack")
    result = await make_runner(model, [detector]).run("go")
    assert result.status == "failed"
    assert len(result.tool_calls) == 4
    assert isinstance(result.errors[-1], PolicyViolationError)
    assert "oscillating" in result.errors[-1].details["reason"]


async def test_a_window_too_small_misses_a_spread_out_oscillation(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """a, x, b, a, y, b is an oscillation within 6 calls but not within 4."""
    plan = [
        ("search", {"q": "a"}),
        ("poll", {"job": "x"}),
        ("fetch", {"url": "b"}),
        ("search", {"q": "a"}),
        ("poll", {"job": "y"}),
        ("fetch", {"url": "b"}),
    ]
    warned = {}
    for window in (4, 6):
        detector = RepetitionDetector(threshold=10, window=window, on_repeat="warn")
        result = await make_runner(plan_model(plan), [detector]).run("go")
        warned[window] = [i for i, c in enumerate(result.tool_calls) if c.verdict == "warned"]
    assert warned == {4: [], 6: [5]}


async def test_an_exempt_tool_is_never_flagged(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """Polling the same job many times, or alternating with it, triggers nothing."""
    model = plan_model(
        [("poll", {"job": "j"})] * 5 + [("poll", {"job": "j"}), ("poll", {"job": "k"})] * 3
    )
    detector = RepetitionDetector(threshold=2, window=4, exempt=["poll"])
    result = await make_runner(model, [detector]).run("wait")
    assert result.status == "completed"
    assert len(result.tool_calls) == 11
    assert all(c.decisions == () and c.ran for c in result.tool_calls)


async def test_repeats_count_the_conversation_s_earlier_turns(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """Two identical calls in one turn and a third in the next turn of the conversation: the
    third is denied (the earlier turns' calls are counted by their validated arguments)."""
    store = MemoryStore()
    first = await make_runner(
        plan_model([("search", {"q": "same"})] * 2), [RepetitionDetector(threshold=3)], store=store
    ).run("one", conversation_id="c")
    assert [c.verdict for c in first.tool_calls] == ["allowed", "allowed"]
    second = await make_runner(
        plan_model([("search", {"q": "same"})]), [RepetitionDetector(threshold=3)], store=store
    ).run("two", conversation_id="c")
    [third] = second.tool_calls
    assert (third.verdict, third.ran) == ("denied", False)
    assert third.deciding == Decision(
        policy="loopware.repetition",
        action="denied",
        reason="the same call would be made 3 times (threshold 3)",
    )


async def test_spelling_out_a_default_is_the_same_call(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """``{"q": "x"}`` and ``{"q": "x", "limit": 10}`` (10 is the default) are one call: with
    threshold 3 the handler runs twice whichever way the model spells it."""
    ran: list[tuple[str, int]] = []

    @tool
    def lookup(q: str, limit: int = 10) -> str:
        """Look something up."""
        ran.append((q, limit))
        return "ok"

    plan = [("lookup", {"q": "x"}), ("lookup", {"q": "x", "limit": 10})] * 2
    runner = make_runner(plan_model(plan), [RepetitionDetector(threshold=3)], tools=[lookup])
    result = await runner.run("go")
    assert ran == [("x", 10), ("x", 10)]
    assert [c.verdict for c in result.tool_calls] == ["allowed", "allowed", "denied", "denied"]
    # the raw checksums differ (the seeds' checksum is over what was sent) ...
    assert len({c.checksum for c in result.tool_calls}) == 2
    # ... the validated ones do not
    assert len({c.validated_checksum for c in result.tool_calls[:2]}) == 1


async def test_identical_calls_in_one_batch_count_as_they_pass(
    make_runner: Callable[..., TurnRunner],
) -> None:
    """Three identical calls proposed together: the third is the threshold-th (warned)."""
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ProposedToolCall(id=f"c{i}", name="search", arguments='{"q": "z"}')
                    for i in range(3)
                ]
            )
        ]
    )
    result = await make_runner(model, [RepetitionDetector(threshold=3, on_repeat="warn")]).run(
        "go"
    )
    assert [c.verdict for c in result.tool_calls] == ["allowed", "allowed", "warned"]


async def test_a_repeat_in_a_batch_nacks_the_dispatch_once(
    make_runner: Callable[..., TurnRunner],
) -> None:
    """Two different repeats in one batch: the first nacks (naming search); the dispatch ends."""
    pairs = [("search", '{"q": "z"}')] * 2 + [("fetch", '{"url": "u"}')] * 2
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ProposedToolCall(id=f"c{i}", name=name, arguments=args)
                    for i, (name, args) in enumerate(pairs)
                ]
            )
        ]
    )
    result = await make_runner(model, [RepetitionDetector(threshold=2, on_repeat="nack")]).run(
        "go"
    )
    assert result.status == "failed"
    [error] = result.errors
    assert isinstance(error, PolicyViolationError)
    assert (error.details["tool"], error.details["call_id"]) == ("search", "c1")


async def test_an_oscillation_must_recur_in_full_to_trigger_again(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """After a, b, a, b triggers, a, b, a do not: only a whole new a, b, a, b does."""
    plan = [("search", {"q": "a"}), ("fetch", {"url": "b"})] * 4
    detector = RepetitionDetector(threshold=10, window=4, on_repeat="warn")
    result = await make_runner(plan_model(plan), [detector]).run("go")
    assert [i for i, c in enumerate(result.tool_calls) if c.verdict == "warned"] == [3, 7]


@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=12))
def test_find_oscillation_matches_a_brute_force_search(recent: list[str]) -> None:
    """The one-pass search agrees with checking every A..B..A..B subsequence ending last."""
    newest = recent[-1]
    expected = set()
    n = len(recent)
    for i in range(n - 1):
        for j in range(i + 1, n - 1):
            for k in range(j + 1, n - 1):
                a = recent[i]
                if a != newest and recent[j] == newest and recent[k] == a:
                    expected.add(a)
    found = find_oscillation(recent)
    if expected:
        assert found in expected
    else:
        assert found is None


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"threshold": 1}, "threshold must be an int >= 2"),
        ({"threshold": "3"}, "threshold must be an int >= 2"),
        ({"threshold": True}, "threshold must be an int >= 2"),
        ({"window": 3}, "window must be an int >= 4"),
        ({"window": 4.0}, "window must be an int >= 4"),
        ({"on_repeat": "stop"}, "on_repeat must be one of"),
        ({"exempt": "poll"}, "exempt must be a collection"),
        ({"exempt": ["poll", ""]}, "non-empty strings"),
        ({"namespace": "a..b"}, "namespace"),
    ],
    ids=[
        "threshold-1",
        "threshold-str",
        "threshold-bool",
        "window-3",
        "window-float",
        "bad-action",
        "exempt-bare-string",
        "exempt-empty-name",
        "bad-namespace",
    ],
)
def test_bad_options_raise_at_construction(options: dict[str, Any], match: str) -> None:
    """Every option is validated in __init__ with the middleware config error."""
    with pytest.raises(InvalidMiddlewareConfigError, match=match) as info:
        RepetitionDetector(**options)
    assert info.value.code == "E_INVALID_MIDDLEWARE_CONFIG"


def test_repr_and_properties_show_the_configuration() -> None:
    """The repr and read-only properties reflect the options."""
    detector = RepetitionDetector(4, window=6, on_repeat="warn", exempt=("poll",))
    assert repr(detector) == (
        "RepetitionDetector(threshold=4, window=6, on_repeat='warn', exempt=['poll'], "
        "namespace='loopware.repetition')"
    )
    assert (detector.threshold, detector.window, detector.on_repeat) == (4, 6, "warn")
    assert detector.exempt == frozenset({"poll"})
    assert detector.namespace == "loopware.repetition"


async def test_exempt_takes_globs_like_the_other_policies(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """``exempt=["poll*"]`` spares every polling tool, and only those, case-sensitively."""
    model = plan_model([("poll", {"job": "j"})] * 3 + [("search", {"q": "x"})] * 2)
    detector = RepetitionDetector(threshold=2, on_repeat="warn", exempt=["poll*", "Search"])
    result = await make_runner(model, [detector]).run("wait")
    assert result.status == "completed"
    flagged = {c.tool for c in result.tool_calls if c.verdict == "warned"}
    assert flagged == {"search"}  # "poll" matched the glob; "Search" does not match "search"


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
@pytest.mark.parametrize("on_repeat", ["hide", "nack"])
async def test_a_batch_of_repeats_cannot_run_past_the_threshold_when_the_action_comes_after(
    on_repeat: Any, parallel: bool
) -> None:
    """``hide`` and ``nack`` let the triggering call run and act after it; the identical calls
    proposed with it in one batch are denied, never run (6 proposed, threshold 3: 3 runs)."""
    from ._hostile import Counted, batch, call, play

    counted = Counted()
    played = await play(
        [batch(*(call(f"c{i}", "search", q="x") for i in range(6)))],
        [counted.tool("search")],
        [RepetitionDetector(threshold=3, on_repeat=on_repeat)],
        parallel=parallel,
    )
    assert counted.ran("search") == ["x", "x", "x"]
    verdicts = played.verdicts()
    assert [verdicts[f"c{i}"] for i in range(6)] == [("allowed", True)] * 3 + [
        ("denied", False)
    ] * 3
    # one by one, the tool is hidden before c3 is looked up; in a batch run together, the
    # detector denies the calls after the one that triggered
    assert "loopware.repetition" in played.read("c5")
    assert played.calls["c5"].deciding is not None
    assert played.calls["c5"].deciding.policy == "loopware.repetition"


async def test_the_same_set_spelled_in_another_order_is_the_same_call() -> None:
    """A ``set[str]`` argument sent as 6 orderings of one set: the handler runs twice (the
    threshold is 3), whatever order the set iterates in."""
    import itertools

    from pydantic import BaseModel

    from pipeline import Tool

    from ._hostile import batch, call, play

    class Tags(BaseModel):
        tags: set[str]

    runs: list[set[str]] = []

    async def tag(args: Tags, ctx: Any, meta: Any) -> str:
        runs.append(args.tags)
        return "tagged"

    items = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    orders = list(itertools.islice(itertools.permutations(items), 0, 720, 120))
    steps = [batch(call(f"c{i}", "tag", tags=list(order))) for i, order in enumerate(orders)]
    await play(
        steps,
        [Tool(name="tag", description="Tag.", input_schema=Tags, handler=tag)],
        [RepetitionDetector(threshold=3)],
    )
    assert len(runs) == 2
