"""`DispatchContext.keep_history_from`: a request that starts later in the conversation, and a
provider's per-turn conversion that follows the window when it moves."""

from __future__ import annotations

import pytest

from pipeline.calls import ToolCall
from pipeline.models import Message, ModelRequest
from pipeline.models._prefix import PrefixCache
from pipeline.testing import make_dispatch_context


def _conversation() -> tuple[list[Message], list[ToolCall]]:
    call = ToolCall.completed(id="c1", tool="lookup", args={}, results="r")
    messages = [
        Message(role="user", content="u1"),
        Message(role="assistant", content="", tool_call_ids=("c1",)),
        Message(role="assistant", content="a1"),
        Message(role="user", content="u2"),
    ]
    return messages, [call]


def test_a_window_sends_the_messages_from_its_start_and_only_their_calls() -> None:
    """From a user message on, the request holds those messages and the calls they announce;
    the system prompt stays, and 0 shows the whole conversation again."""
    messages, calls = _conversation()
    ctx = make_dispatch_context(messages=messages, history_tool_calls=calls, system_prompt="S")
    ctx.keep_history_from(3)
    request = ctx.model_request()
    assert ([m.content for m in request.messages], list(request.tool_calls)) == (["u2"], [])
    assert request.system_prompt == "S"
    assert len(ctx.messages) == 4  # the turn keeps everything
    ctx.keep_history_from(0)
    assert [c.id for c in ctx.model_request().tool_calls] == ["c1"]


@pytest.mark.parametrize(
    "index", [1, 2, 4, -1, True], ids=["call", "answer", "past", "negative", "bool"]
)
def test_a_window_must_start_at_a_user_message(index: int) -> None:
    """A start that would split a call from its message, or is no index, is refused."""
    messages, calls = _conversation()
    ctx = make_dispatch_context(messages=messages, history_tool_calls=calls)
    with pytest.raises(ValueError, match=r"index|user message"):
        ctx.keep_history_from(index)


def test_a_provider_conversion_starts_again_when_the_window_moves() -> None:
    """A window that dropped old messages and gained as many new ones is converted anew: the
    dropped messages are not sent from the cache."""
    cache: PrefixCache[str] = PrefixCache(lambda step: [step.message.content])
    m = [Message(role="user", content=f"m{i}") for i in range(4)]
    first = ModelRequest(None, m[:2], [], (), turn_id="t")
    assert cache.messages(first) == ["m0", "m1"]
    moved = ModelRequest(None, m[2:4], [], (), turn_id="t")
    assert cache.messages(moved) == ["m2", "m3"]
