"""Every store keeps what a provider asked to keep with a message, and a call's arguments text as
the model sent it when it was no JSON object (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import dataclasses

from pipeline.calls import ToolCall
from pipeline.models import Message, ProviderState
from pipeline.stores import TurnStore

THINKING = ProviderState(
    provider="anthropic",
    items=({"type": "thinking", "thinking": "Sum them. — ✓", "signature": "EqQBCgIYAh"},),
)
REASONING = ProviderState(
    provider="openai-responses",
    items=({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},),
    phase="commentary",
)


async def test_provider_state_and_unparsed_arguments_load_back_as_stored(store: TurnStore) -> None:
    """Messages with and without state, and a refused call with its original text, load back
    equal to what was saved."""
    messages = [
        Message(role="user", content="1+2?"),
        Message(
            role="assistant", content="Adding.", tool_call_ids=("c1",), provider_state=THINKING
        ),
        Message(role="assistant", content="3", provider_state=REASONING),
    ]
    call = dataclasses.replace(
        ToolCall.completed(id="c1", tool="add", args={}, results="Error: not JSON", is_error=True),
        unparsed_args='{"a": 1,',
    )
    for message in messages[:2]:
        await store.save_message("conv", "t1", message)
    await store.save_tool_call("conv", "t1", call)
    await store.save_message("conv", "t1", messages[2])
    loaded, calls = await store.load_conversation("conv")
    assert [(m.id, m.provider_state) for m in loaded] == [
        (m.id, m.provider_state) for m in messages
    ]
    assert [c.unparsed_args for c in calls] == ['{"a": 1,']
