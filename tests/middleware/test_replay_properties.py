"""`middleware.transcripts.replay` on hypothesis-generated transcripts, checked against an
independent count.

Random conversations (turns of steps of one to three calls, a few tools and argument values so
repeats happen, results answered in any order, some missing, some recorded as errors, some with
arguments the model cut off) are written as OpenAI chat-completions or Anthropic messages, as
data or as a JSON Lines file, and replayed. The report must list every generated call once, in
order, under its own id and recorded result; bad arguments must be the only calls that are
invalid and never run, a recorded error the only error of a call that ran; and with
``RepetitionDetector(on_repeat="warn")`` the warned calls must be exactly those the test counts
as repeats on its own.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from middleware import RepetitionDetector
from middleware.transcripts import read_transcript, replay

TOOLS = ("search", "read_file", "Final Answer")


@dataclass(frozen=True)
class Call:
    id: str
    tool: str
    args: dict[str, int]
    result: str | None
    error: bool
    bad_args: bool = False

    @property
    def arguments(self) -> str:
        """The recorded argument text: JSON, or (a model error) a cut-off object."""
        return '{"q": ' if self.bad_args else json.dumps(self.args)


@st.composite
def conversations(draw: st.DrawFn) -> list[list[list[Call]]]:
    """Turns of steps of calls; ids may repeat across turns, as some providers do."""
    turns: list[list[list[Call]]] = []
    reuse_ids = draw(st.booleans())
    n = 0
    for _ in range(draw(st.integers(1, 3))):
        steps: list[list[Call]] = []
        for k in range(draw(st.integers(0, 4))):
            calls = []
            for j in range(draw(st.integers(1, 3))):
                missing = draw(st.integers(0, 9)) == 0
                calls.append(
                    Call(
                        id=f"call_{k}_{j}" if reuse_ids else f"c{n}",
                        tool=draw(st.sampled_from(TOOLS)),
                        args={"q": draw(st.integers(0, 2))},
                        result=None if missing else f"result {n}",
                        error=not missing and draw(st.integers(0, 5)) == 0,
                        bad_args=draw(st.integers(0, 7)) == 0,
                    )
                )
                n += 1
            steps.append(calls)
        turns.append(steps)
    return turns


def openai_messages(turns: list[list[list[Call]]], order: list[int]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t, steps in enumerate(turns):
        messages.append({"role": "user", "content": f"task {t}"})
        for calls in steps:
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.tool, "arguments": c.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            answered = [c for c in calls if c.result is not None]
            for i in _shuffled(len(answered), order):
                c = answered[i]
                messages.append({"role": "tool", "tool_call_id": c.id, "content": c.result})
        messages.append({"role": "assistant", "content": "done"})
    return messages


def anthropic_messages(turns: list[list[list[Call]]], order: list[int]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for t, steps in enumerate(turns):
        messages.append({"role": "user", "content": f"task {t}"})
        for calls in steps:
            # one block per entry, as coding-agent exports store them
            for c in calls:
                args: object = c.arguments if c.bad_args else c.args
                block = {"type": "tool_use", "id": c.id, "name": c.tool, "input": args}
                messages.append({"role": "assistant", "content": [block]})
            answered = [c for c in calls if c.result is not None]
            for i in _shuffled(len(answered), order):
                c = answered[i]
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": c.id,
                    "content": c.result,
                }
                if c.error:
                    result["is_error"] = True
                messages.append({"role": "user", "content": [result]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    return messages


def _shuffled(n: int, order: list[int]) -> list[int]:
    """A permutation of range(n) picked by ``order`` (the results' arrival order)."""
    rest = list(range(n))
    return [rest.pop(order[i % len(order)] % len(rest)) for i in range(n)] if order else rest


def warned_by_count(turns: list[list[list[Call]]], threshold: int) -> list[bool]:
    """Independently, as `RepetitionDetector` documents it: a call is warned about when it is
    at least the ``threshold``-th identical call of the conversation (same tool, same
    arguments), counting every call that got past its arguments (a call with bad arguments is
    invalid: nobody judged it, and it counts for nothing)."""
    seen: Counter[tuple[str, str]] = Counter()
    flags = []
    for steps in turns:
        for calls in steps:
            for c in calls:
                if c.bad_args:
                    flags.append(False)
                    continue
                seen[(c.tool, c.arguments)] += 1
                flags.append(seen[(c.tool, c.arguments)] >= threshold)
    return flags


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    turns=conversations(),
    anthropic=st.booleans(),
    as_file=st.booleans(),
    order=st.lists(st.integers(0, 5), max_size=4),
    threshold=st.integers(2, 4),
)
def test_replay_matches_an_independent_count_of_calls_and_repeats(
    turns: list[list[list[Call]]],
    anthropic: bool,
    as_file: bool,
    order: list[int],
    threshold: int,
) -> None:
    """Every generated call is replayed once, in order, with its own result; its verdict is its
    record's; warnings for repeats fall exactly on the calls the independent count names."""
    messages = (anthropic_messages if anthropic else openai_messages)(turns, order)
    if as_file:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "t.jsonl"
            path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
            transcript = read_transcript(path)
    else:
        transcript = read_transcript(messages)
    generated = [c for steps in turns for calls in steps for c in calls]
    assert transcript.errors == ()
    assert len(transcript.model_errors) == sum(c.bad_args for c in generated)
    assert len(transcript.turns) == len(turns)
    report = replay(transcript, [RepetitionDetector(threshold=threshold, on_repeat="warn")])
    outcomes = report.calls
    assert [(o.call.id, o.call.tool, o.call.result) for o in outcomes] == [
        (c.id, c.tool, c.result) for c in generated
    ]
    assert len({o.call.replay_id for o in outcomes}) == len(outcomes)
    assert [o.ran for o in outcomes] == [not c.bad_args for c in generated]
    assert all(o.offered for o in outcomes)
    assert all(o.stored is not None and o.verdict == o.stored.verdict for o in outcomes)
    errors = [c.bad_args or (anthropic and c.error) for c in generated]
    assert [o.error is not None for o in outcomes] == errors
    warned = warned_by_count(turns, threshold)
    assert [any(d.action == "warned" for d in o.decisions) for o in outcomes] == warned
    expected = [
        "invalid" if c.bad_args else ("warned" if w else "allowed")
        for c, w in zip(generated, warned, strict=True)
    ]
    assert [o.verdict for o in outcomes] == expected
    assert [o.alias for o in outcomes] == [
        "Final_Answer" if c.tool == "Final Answer" else None for c in generated
    ]
    assert all(t.status == "completed" for t in report.turns)
    assert not report.refused
    assert sum(report.counts().values()) == len(generated)
