"""What a provider asked to keep survives a restart: Anthropic's thinking blocks and the
Responses API's reasoning items and ``phase`` are kept on the assistant message, stored with it,
and sent back by a new model instance over a reloaded store (recorded wire traffic, through the
real SDK clients, as in ``test_anthropic.py`` and ``test_openai_responses.py``)."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.models import Message, ModelRequest, OpenAIResponsesModel, ProviderState
from pipeline.stores import SqliteStore

from . import test_anthropic as wire_a
from . import test_openai_responses as wire_r
from .conftest import Server, json_reply

Serve = Callable[..., Server]


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


THOUGHT = {"type": "thinking", "thinking": "1 plus 2; call add.", "signature": "EqQBCgIYAhIM"}
REASONING = {
    "id": "rs_68af3e1c8e0c8190a9b1c2d3e4f5a6b7",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Use add for 1+2."}],
    "encrypted_content": "gAAAAABor0Ucb5Xc3Q==",
}


async def test_a_restart_between_a_thinking_call_and_its_result_keeps_the_thinking_block(
    serve: Serve, tmp_path: Path
) -> None:
    """The process stops after the tool ran (its next request fails); a new model instance on
    the store reopened from disk sends the thinking block, signature included, before the call."""
    first = serve(
        wire_a.reply(
            wire_a.message(
                THOUGHT,
                wire_a.text("Adding."),
                wire_a.tool_use("toolu_t", "add", {"a": 1, "b": 2}),
                stop_reason="tool_use",
            )
        ),
        wire_a.error(529, "overloaded_error", "Overloaded"),  # the process goes away here
    )
    store = SqliteStore(tmp_path / "agent.db")
    model = wire_a.model_on(first, thinking={"type": "enabled", "budget_tokens": 1024})
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[add], store=store)
    failed = await runner.run("1+2?", conversation_id="c")
    assert failed.status == "failed"
    assert [c.ran for c in failed.tool_calls] == [True]
    store.close()

    reopened = SqliteStore(tmp_path / "agent.db")
    messages, calls = await reopened.load_conversation("c")
    reopened.close()
    state = messages[1].provider_state
    assert state == ProviderState(provider="anthropic", items=(THOUGHT,))
    second = serve(wire_a.reply(wire_a.message(wire_a.text("3"))))
    fresh = wire_a.model_on(second, thinking={"type": "enabled", "budget_tokens": 1024})
    answer = await fresh.complete(ModelRequest(None, messages, calls, (), turn_id="again"))
    assert answer.text == "3"
    [body] = second.bodies
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            THOUGHT,
            wire_a.text("Adding."),
            wire_a.tool_use("toolu_t", "add", {"a": 1, "b": 2}),
        ],
    }
    assert body["messages"][2]["content"][0]["tool_use_id"] == "toolu_t"


async def test_a_responses_turn_sends_the_reasoning_item_and_phase_back(
    serve: Serve, tmp_path: Path
) -> None:
    """A reasoning model's answer with a call: the request asks for encrypted reasoning, the
    next one sends the reasoning item (as received, without the SDK's nulls) before the
    narration (with its ``phase``) and the call; a later turn on a new model instance and a
    reloaded store sends it again."""
    narration = {**wire_r.message("Let me add."), "phase": "commentary"}
    reasoning_out = {**REASONING, "status": None, "content": None}
    server = serve(
        json_reply(
            wire_r.response(
                [reasoning_out, narration, wire_r.function_call("call_R1", "add", '{"a":1,"b":2}')],
                reasoning=64,
            )
        ),
        wire_r.answer("3"),
        wire_r.answer("Yes, 3."),
    )
    store = SqliteStore(tmp_path / "agent.db")
    runner = TurnRunner(
        model=OpenAIResponsesModel(wire_r.MODEL, client=server.client()), tools=[add], store=store
    )
    result = await runner.run("What is 1+2?", conversation_id="c")
    assert result.output == "3"
    first, second = server.bodies
    assert first["include"] == ["reasoning.encrypted_content"]
    assert second["input"][1:4] == [
        REASONING,
        {"role": "assistant", "content": "Let me add.", "phase": "commentary"},
        wire_r.call_item("call_R1", "add", '{"a":1,"b":2}'),
    ]
    store.close()

    reopened = SqliteStore(tmp_path / "agent.db")
    again = TurnRunner(
        model=OpenAIResponsesModel(wire_r.MODEL, client=server.client()),
        tools=[add],
        store=reopened,
    )
    await again.run("Sure?", conversation_id="c")
    reopened.close()
    assert server.bodies[2]["input"][1:3] == second["input"][1:3]


def test_provider_state_survives_what_a_durable_step_records() -> None:
    """A durable turn records a model step's response by pickling it: the state comes back;
    the stores' JSON form reads back equal, and a message holding it stays hashable."""
    state = ProviderState(provider="openai-responses", items=(REASONING,), phase="final_answer")
    assert pickle.loads(pickle.dumps(state)) == state
    assert ProviderState.from_json(state.to_json()) == state
    message = Message(role="assistant", content="3", provider_state=state)
    assert hash(message) == hash(dataclasses.replace(message))  # a message stays hashable
