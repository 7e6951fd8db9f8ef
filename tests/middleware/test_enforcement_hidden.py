"""Adversarial: a hostile model calls a tool a policy hid, by name or by a look-alike.

A hidden tool is not callable: the turn refuses a call to it (sequentially, in a parallel
batch, later in the same batch). A tool a policy took away says so and why (the policy and its
reason); a tool hidden without a word, and a look-alike name, read as names no tool has. Every
test counts real handler runs and asserts, per call id, what the model read, the decisions on
its record and its audit row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from middleware import Middleware, RepetitionDetector, ToolCallLimit, ToolPolicy
from pipeline import DispatchContext
from pipeline.calls import ToolCallContext, ToolCallNext
from pipeline.models import ModelResponse

from ._hostile import (
    LOOK_ALIKES,
    PARALLEL,
    Counted,
    audit_rows,
    audit_tool_rows,
    batch,
    call,
    denied,
    play,
    unavailable,
    unknown,
)

NOT_OFFERED = ("loopware.registry", "invalid", "before")
"""The decision on a call to a name that is not offered (and was not taken away with a word)."""


def hide_search() -> Middleware:
    """A middleware that hides ``search`` at every iteration."""
    hider = Middleware("hider")

    @hider.dispatch_input
    def hide(ctx: DispatchContext) -> None:
        ctx.tools.hide("search")

    return hider


# -- 1. hidden by name -------------------------------------------------------------------------


@dataclass(frozen=True)
class Hider:
    """How ``search`` gets hidden, the calls that hide it, and what the model then reads."""

    middleware: Callable[[], list[object]]
    steps: tuple[ModelResponse, ...]
    runs: tuple[str, ...]
    hidden_by: tuple[str, str, str] | None
    """``(policy, reason, triggering call id)`` of the tool decision, or None (hidden silently)."""


HIDERS = {
    "limit": Hider(
        lambda: [ToolCallLimit({"search": 1})],
        (batch(call("s1", "search", q="1")),),
        ("1",),
        ("loopware.limit", "its limit of 1 run per turn is used up", "s1"),
    ),
    "repetition": Hider(
        lambda: [RepetitionDetector(threshold=2, on_repeat="hide")],
        (batch(call("s1", "search", q="same")), batch(call("s2", "search", q="same"))),
        ("same", "same"),
        ("loopware.repetition", "the same call was made 2 times (threshold 2)", "s2"),
    ),
    "middleware": Hider(
        lambda: [hide_search()],
        (batch(call("s1", "search", q="1")),),
        (),
        None,
    ),
}


@PARALLEL
@pytest.mark.parametrize("how", list(HIDERS))
async def test_a_hidden_tool_called_by_name_never_runs(
    how: str, parallel: bool, tmp_path: Path
) -> None:
    """A tool hidden by a limit, a repetition or a middleware is refused by name, in any batch.

    A policy's hiding is a decision about the tool (never a word on the call that ran): a
    later call reads which policy took the tool away and why, and is denied by that policy.
    """
    hider = HIDERS[how]
    tools = Counted()
    hostile = batch(call("x1", "search", q="again"), call("f1", "fetch", q="1"))
    played = await play(
        [*hider.steps, hostile],
        [tools.tool("search"), tools.tool("fetch")],
        hider.middleware(),
        parallel=parallel,
        audit=tmp_path / "a.sqlite",
    )
    assert played.result.status == "completed"
    assert tools.ran("search") == list(hider.runs)
    assert tools.ran("fetch") == ["1"]
    assert "search" not in played.offered(len(hider.steps))
    rows = audit_rows(tmp_path / "a.sqlite")
    if hider.hidden_by is None:
        assert played.read("x1") == unknown("search", "fetch")
        assert played.decided() == {"s1": [NOT_OFFERED], "x1": [NOT_OFFERED]}
        assert played.tools_decided() == []
        assert rows["x1"] == [("invalid", "loopware.registry", False)]
    else:
        policy, reason, trigger = hider.hidden_by
        assert played.read("x1") == unavailable("search", policy, reason, "fetch")
        assert played.decided() == {"x1": [(policy, "denied", "before")]}
        assert played.tools_decided() == [("search", policy, "hidden", trigger)]
        assert rows["x1"] == [("denied", policy, False)]
        assert rows[trigger] == [("allowed", None, True)]  # it ran; its row says so, once
        assert audit_tool_rows(tmp_path / "a.sqlite") == [("search", "hidden", policy, trigger)]
    assert rows["f1"] == [("allowed", None, True)]


async def test_a_tool_hidden_mid_batch_is_refused_to_the_rest_of_the_batch() -> None:
    """Calls are looked up as they run: a tool hidden after one call refuses its later siblings."""
    tools = Counted()
    once = Middleware("once")

    @once.tool_call(tools=["search"])
    async def hide_after(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        await call_next()
        ctx.tools.hide("search")

    played = await play(
        [
            batch(
                call("s1", "search", q="1"),
                call("s2", "search", q="2"),
                call("f1", "fetch", q="1"),
                call("s3", "search", q="3"),
            )
        ],
        [tools.tool("search"), tools.tool("fetch")],
        [once],
    )
    assert tools.runs == [("search", "1"), ("fetch", "1")]
    assert played.errors() == ["s2", "s3"]
    assert played.read("s3") == unknown("search", "fetch")
    assert played.decided() == {"s2": [NOT_OFFERED], "s3": [NOT_OFFERED]}


async def test_a_tool_unhidden_by_middleware_is_still_held_by_its_limit() -> None:
    """Hiding is not the limit: a middleware that unhides search cannot buy it another run."""
    tools = Counted()
    unhider = Middleware("unhider")

    @unhider.dispatch_input(order=10)
    def unhide(ctx: DispatchContext) -> None:
        ctx.tools.unhide("search")

    played = await play(
        [batch(call("s1", "search", q="1")), batch(call("s2", "search", q="2"))],
        [tools.tool("search")],
        [ToolCallLimit({"search": 1}), unhider],
    )
    assert "search" in played.offered(1)  # the hostile middleware did put it back
    assert tools.ran("search") == ["1"]
    assert played.read("s2") == denied(
        "loopware.limit", "search", "the limit of 1 run of 'search' per turn is used up"
    )
    assert played.decided() == {"s2": [("loopware.limit", "denied", "before")]}
    assert played.tools_decided() == [("search", "loopware.limit", "hidden", "s1")]


# -- 2. look-alike names -----------------------------------------------------------------------


@PARALLEL
@pytest.mark.parametrize("kept_away", ["hidden", "denied"])
async def test_look_alike_names_never_reach_a_hidden_or_denied_tool(
    kept_away: str, parallel: bool, tmp_path: Path
) -> None:
    """Case, spaces, homoglyphs, full width and zero-width marks are unknown names, not search.

    The real name reads why it is kept away when a policy said so (withdrawn by `ToolPolicy`),
    and as unknown when it was hidden without a word.
    """
    tools = Counted()
    keeper: object = hide_search() if kept_away == "hidden" else ToolPolicy(deny=["search"])
    names = ("search", *LOOK_ALIKES)
    ids = [f"x{i}" for i in range(len(names))]
    proposed = [call(i, name, q=name) for i, name in zip(ids, names, strict=True)]
    played = await play(
        [batch(*proposed, call("f1", "fetch", q="1"))],
        [tools.tool("search"), tools.tool("fetch")],
        [keeper],
        parallel=parallel,
        audit=tmp_path / "a.sqlite",
    )
    assert played.result.status == "completed"
    assert len(played.model.requests) == 2  # the model read every refusal and answered
    assert tools.runs == [("fetch", "1")]
    assert played.started == ["f1"]
    assert played.errors() == ids
    for call_id, name in zip(ids[1:], names[1:], strict=True):
        assert played.read(call_id) == unknown(name, "fetch")
    # only the real name is a policy matter; a look-alike is just a name no tool has
    rows = audit_rows(tmp_path / "a.sqlite")
    if kept_away == "hidden":
        assert played.read("x0") == unknown("search", "fetch")
        refusal = NOT_OFFERED
    else:
        reason = "matches deny pattern 'search'"
        assert played.read("x0") == unavailable("search", "loopware.policy", reason, "fetch")
        refusal = ("loopware.policy", "denied", "before")
    assert played.decided() == {"x0": [refusal], **{i: [NOT_OFFERED] for i in ids[1:]}}
    assert rows["x0"] == [("denied" if refusal[1] == "denied" else "invalid", refusal[0], False)]
    assert {tuple(rows[i]) for i in ids[1:]} == {(("invalid", "loopware.registry", False),)}
    assert rows["f1"] == [("allowed", None, True)]
