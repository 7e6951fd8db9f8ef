"""Provider models' request conversion: its cost at iteration 10 and at iteration 200 of a turn.

Run from the repository root::

    python -m bench.model_adapters            # full run (a few seconds)
    python -m bench.model_adapters --quick    # fewer turns, for a smoke test

What is measured
----------------
* A turn of 200 iterations: the user asks, then every iteration the model called one tool and
  its result was stored, so the request of iteration k carries the system prompt, the user
  message, k - 1 assistant messages and k - 1 tool results (trust envelopes). The requests
  are built beforehand, as the executor builds them; what is timed is ``model.complete`` on
  each, in order, on one turn id: what a provider model does per iteration.
* The model talks to a fake SDK client whose ``create()`` returns a canned response at once
  (no HTTP, no SDK request building), so the time is the adapter's own: converting what is
  new, assembling the body, reading the response (``model_dump`` and parsing).
* The figure per iteration is the median over the turns; the verdict is iteration 200 over
  iteration 10 (target: at most 2x, the conversion must not grow with the turn's length).
* A control row per model sends the same requests without a turn id, which makes the model
  convert the whole conversation every time: it shows what the prefix cache saves (and that
  the benchmark would see growth).

Adding a provider model: append ``(name, factory)`` to ``ADAPTERS``, where ``factory()``
returns the model on a fake client of its SDK (e.g. an ``AnthropicModel`` whose client's
``messages.create`` returns a canned ``anthropic.types.Message``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx2

from pipeline import ToolRegistry, tool
from pipeline.calls import ToolCall
from pipeline.models import ChatModel, Message, ModelRequest, OpenAIChatModel, OpenAIResponsesModel

ITERATIONS = 200
PROBES = (10, 200)
TARGET_RATIO = 2.0


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


class _Endpoint:
    """``create()`` answers with the canned response at once (keyword arguments ignored)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def create(self, **body: Any) -> Any:
        return self.answer


class FakeOpenAI:
    """The parts of ``openai.AsyncOpenAI`` the OpenAI models use."""

    def __init__(self, chat_answer: Any = None, responses_answer: Any = None) -> None:
        self.base_url = httpx2.URL("https://api.openai.com/v1")
        self.chat = type("Chat", (), {"completions": _Endpoint(chat_answer)})()
        self.responses = _Endpoint(responses_answer)


def openai_chat() -> ChatModel:
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.construct(
        id="chatcmpl-bench",
        object="chat.completion",
        created=1744917292,
        model="gpt-4o-mini-2024-07-18",
        choices=[
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "call_bench",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a":1,"b":2}'},
                        }
                    ],
                },
            }
        ],
        usage={"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920},
    )
    client: Any = FakeOpenAI(chat_answer=completion)
    return OpenAIChatModel("gpt-4o-mini", client=client)


def openai_responses() -> ChatModel:
    from openai.types.responses import Response

    response = Response.construct(
        id="resp_bench",
        object="response",
        created_at=1756311068,
        status="completed",
        model="gpt-4.1-mini-2025-04-14",
        output=[
            {
                "type": "function_call",
                "id": "fc_bench",
                "call_id": "call_bench",
                "name": "add",
                "arguments": '{"a":1,"b":2}',
                "status": "completed",
            }
        ],
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        usage={
            "input_tokens": 900,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 920,
        },
    )
    client: Any = FakeOpenAI(responses_answer=response)
    return OpenAIResponsesModel("gpt-4.1-mini", client=client)


class FakeAnthropic:
    """The part of ``anthropic.AsyncAnthropic`` `AnthropicModel` uses."""

    def __init__(self, answer: Any) -> None:
        self.messages = _Endpoint(answer)


def anthropic_messages() -> ChatModel:
    from anthropic.types import Message as AnthropicMessage

    from pipeline.models import AnthropicModel

    message = AnthropicMessage.model_validate(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "tool_use", "id": "toolu_bench", "name": "add", "input": {"a": 1, "b": 2}}
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 20, "cache_read_input_tokens": 0},
        }
    )
    client: Any = FakeAnthropic(message)
    return AnthropicModel("claude-sonnet-4-5", client=client)


ADAPTERS: list[tuple[str, Callable[[], ChatModel]]] = [
    ("OpenAIChatModel", openai_chat),
    ("OpenAIResponsesModel", openai_responses),
    ("AnthropicModel", anthropic_messages),
]


def turn_requests(turn_id: str, registry: ToolRegistry) -> list[ModelRequest]:
    """The requests of iterations 1..ITERATIONS of one turn (one call per iteration)."""
    messages = [Message(role="user", content="Add up the numbers, one call at a time.")]
    calls: list[ToolCall] = []
    for i in range(1, ITERATIONS):
        call_id = f"call_{turn_id}_{i}"
        messages.append(Message(role="assistant", content="", tool_call_ids=(call_id,)))
        calls.append(
            ToolCall.completed(id=call_id, tool="add", args={"a": i, "b": i}, results=str(2 * i))
        )
    tools = (add.describe(),)
    return [
        ModelRequest(
            "You add numbers with the add tool.",
            tuple(messages[: 1 + k]),
            tuple(calls[:k]),
            tools,
            turn_id=turn_id,
            tool_view=registry.view(),
        )
        for k in range(ITERATIONS)
    ]


async def time_turns(
    model: ChatModel, turns: int, *, cached: bool = True
) -> dict[int, list[float]]:
    """Microseconds per ``complete`` at each probed iteration, one sample per turn
    (``cached=False``: the requests carry no turn id, so nothing is kept between them)."""
    registry = ToolRegistry([add])
    samples: dict[int, list[float]] = {k: [] for k in PROBES}
    clock = time.perf_counter_ns
    for n in range(turns):
        requests = turn_requests(f"t{n}", registry)
        if not cached:
            requests = [dataclasses.replace(r, turn_id=None) for r in requests]
        gc.collect()
        gc.disable()
        try:
            for iteration, request in enumerate(requests, 1):
                start = clock()
                await model.complete(request)
                elapsed = clock() - start
                if iteration in samples:
                    samples[iteration].append(elapsed / 1000)
        finally:
            gc.enable()
    return samples


def report(label: str, samples: dict[int, list[float]]) -> float:
    """Print one row (median per probed iteration and the ratio); return the ratio."""
    medians = [statistics.median(samples[k]) for k in PROBES]
    ratio = medians[-1] / medians[0]
    cells = "".join(f"{m:>13.1f} us" for m in medians)
    print(f"{label:24}{cells}{ratio:>9.2f}x")
    return ratio


async def main_async(quick: bool) -> int:
    turns = 10 if quick else 100
    print(
        f"loopware provider models: request conversion  (python {platform.python_version()}, "
        f"{platform.machine()})"
    )
    print(
        f"{turns} turns of {ITERATIONS} iterations, fake SDK client (adapter time only); "
        "median over the turns\n"
    )
    head = "".join(f"{'iteration ' + str(k):>16}" for k in PROBES)
    print(f"{'model':24}{head}{'ratio':>10}")
    checks: list[tuple[str, bool]] = []
    for name, factory in ADAPTERS:
        ratio = report(name, await time_turns(factory(), turns))
        checks.append((f"{name}: iteration 200 <= {TARGET_RATIO:.0f}x iteration 10", ratio <= 2))
        control = await time_turns(factory(), max(2, turns // 20), cached=False)
        report("  control: no turn id", control)
    print()
    for label, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    return 0 if all(ok for _, ok in checks) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer turns (smoke test)")
    args = parser.parse_args(argv)
    return asyncio.run(main_async(args.quick))


if __name__ == "__main__":
    sys.exit(main())
