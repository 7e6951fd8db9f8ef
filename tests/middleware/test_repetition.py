"""`RepetitionDetector`: identical-call threshold, A-B-A-B oscillation, actions, exemptions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware import RepetitionDetector
from middleware._repetition import find_oscillation
from pipeline import (
    InvalidMiddlewareConfigError,
    Log,
    PolicyViolationError,
    ToolCall,
    TurnRunner,
)
from pipeline.testing import make_dispatch_context


async def check(detector: RepetitionDetector, ctx: Any) -> None:
    async def end() -> None:
        return None

    await detector.check(ctx, end)


# -- acceptance: a model that calls search with the same arguments forever -----------------


async def test_hide_removes_the_tool_from_offers_and_the_turn_completes(
    make_runner: Callable[..., TurnRunner],
    repeating: Callable[..., Any],
    decisions_log: Callable[[TurnRunner], list[Log]],
) -> None:
    """The third identical call hides search, which is no longer offered; the stash says why."""
    model = repeating("search", {"q": "same"})
    runner = make_runner(model, [RepetitionDetector(threshold=3, on_repeat="hide")])
    decisions = decisions_log(runner)
    result = await runner.run("find it")

    assert result.status == "completed"
    assert result.output == "finished"
    assert [c.tool for c in result.tool_calls] == ["search"] * 3
    assert ["search" in offered for offered in model.offered] == [True, True, True, False]
    (decision,) = result.stash["loopware"]["repetition"]["decisions"]
    assert decision == {
        "tool": "search",
        "checksum": result.tool_calls[2].checksum,
        "call_id": result.tool_calls[2].id,
        "iteration": 2,
        "action": "hidden",
        "reason": "identical call made 3 times (threshold 3)",
    }
    (log,) = decisions
    assert log.payload["policy"] == "loopware.repetition"
    assert log.payload["call_id"] == result.tool_calls[2].id
    assert log.payload["action"] == "hidden"


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
    (decision,) = result.stash["loopware"]["repetition"]["decisions"]
    assert decision["action"] == "denied"


async def test_warn_only_records_and_logs(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """on_repeat="warn" never changes the turn: it records, and logs a warning."""
    model = plan_model([("search", {"q": "x"})] * 4)
    runner = make_runner(model, [RepetitionDetector(threshold=3, on_repeat="warn")])
    warnings: list[Log] = []
    runner.on(Log, lambda e: warnings.append(e) if e.level == "warning" else None)
    result = await runner.run("go")
    assert result.status == "completed"
    assert len(result.tool_calls) == 4
    actions = [d["action"] for d in result.stash["loopware"]["repetition"]["decisions"]]
    assert actions == ["warned", "warned"]
    assert [w.kind for w in warnings] == ["repetition", "repetition"]


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
    decisions = result.stash["loopware"]["repetition"]["decisions"]
    assert {d["tool"] for d in decisions} == {"search", "fetch"}
    assert all(d["action"] == "hidden" and d["iteration"] == 3 for d in decisions)
    assert "oscillating" in decisions[0]["reason"]
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
    call: Callable[..., ToolCall],
) -> None:
    """a, x, b, a, y, b is an oscillation within 6 calls but not within 4."""
    sequence = [
        call("search", {"q": "a"}),
        call("poll", {"job": "x"}),
        call("fetch", {"url": "b"}),
        call("search", {"q": "a"}),
        call("poll", {"job": "y"}),
        call("fetch", {"url": "b"}),
    ]
    results = {}
    for window in (4, 6):
        ctx = make_dispatch_context()
        detector = RepetitionDetector(threshold=10, window=window, on_repeat="warn")
        for c in sequence:
            ctx = make_dispatch_context(stash=ctx.stash, new_tool_calls=(c,))
            await check(detector, ctx)
        results[window] = ctx.stash.get("loopware.repetition.decisions", [])
    assert results[4] == []
    assert len(results[6]) == 1


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
    assert "repetition" not in result.stash.get("loopware", {})


async def test_repeats_count_history_loaded_from_the_conversation(
    call: Callable[..., ToolCall],
) -> None:
    """tool_call_count includes earlier turns, so a repeat across turns is seen."""
    earlier = [call("search", {"q": "same"}), call("search", {"q": "same"})]
    now = call("search", {"q": "same"})
    ctx = make_dispatch_context(history_tool_calls=earlier, tool_calls=[now])
    await check(RepetitionDetector(threshold=3, on_repeat="hide"), ctx)
    assert ctx.tools.hidden() == []  # search is not registered here: hiding is a no-op
    (decision,) = ctx.stash.get("loopware.repetition.decisions")
    assert decision["reason"] == "identical call made 3 times (threshold 3)"


async def test_several_identical_calls_in_one_iteration_record_one_decision(
    call: Callable[..., ToolCall],
) -> None:
    """Three identical calls proposed together trigger once, not three times."""
    same = [call("search", {"q": "z"}) for _ in range(3)]
    ctx = make_dispatch_context(tool_calls=same)
    await check(RepetitionDetector(threshold=3, on_repeat="warn"), ctx)
    assert len(ctx.stash.get("loopware.repetition.decisions")) == 1


async def test_two_repeats_in_one_iteration_nack_once_and_record_both(
    call: Callable[..., ToolCall],
) -> None:
    """Two different repeated calls in one iteration: the first nacks, the second only records."""
    calls = [call("search", {"q": "z"}), call("search", {"q": "z"}),
             call("fetch", {"url": "u"}), call("fetch", {"url": "u"})]
    ctx = make_dispatch_context(tool_calls=calls)
    await check(RepetitionDetector(threshold=2, on_repeat="nack"), ctx)
    assert isinstance(ctx.nack_error, PolicyViolationError)
    assert ctx.nack_error.details["tool"] == "search"
    decisions = ctx.stash.get("loopware.repetition.decisions")
    assert [(d["tool"], d["action"]) for d in decisions] == [
        ("search", "denied"), ("fetch", "denied")
    ]


async def test_an_oscillation_must_recur_in_full_to_trigger_again(
    call: Callable[..., ToolCall],
) -> None:
    """After a, b, a, b triggers, a, b, a do not: only a whole new a, b, a, b does."""
    a, b = call("search", {"q": "a"}), call("fetch", {"url": "b"})
    ctx = make_dispatch_context()
    detector = RepetitionDetector(threshold=10, window=4, on_repeat="warn")
    counts = []
    for c in (a, b) * 4:
        ctx = make_dispatch_context(stash=ctx.stash, new_tool_calls=(c,))
        await check(detector, ctx)
        counts.append(len(ctx.stash.get("loopware.repetition.decisions", [])))
    assert counts == [0, 0, 0, 1, 1, 1, 1, 2]


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
    flagged = {d["tool"] for d in result.stash["loopware"]["repetition"]["decisions"]}
    assert flagged == {"search"}  # "poll" matched the glob; "Search" does not match "search"
