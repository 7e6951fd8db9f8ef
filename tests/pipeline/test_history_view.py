"""The history a turn hands out is shared, not copied, and never changes after it was read."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.calls import ToolCall
from pipeline.models import HistoryView, Message
from pipeline.testing import make_dispatch_context


def call(call_id: str, text: str = "x") -> ToolCall:
    return ToolCall.completed(id=call_id, tool="echo", args={"text": text}, results=text)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.integers(0, 9)),
        st.tuples(st.just("store"), st.integers(0, 9)),
        st.tuples(st.just("mutate"), st.integers(0, 30)),
        st.tuples(st.just("delete"), st.integers(0, 30)),
        st.tuples(st.just("read"), st.integers(0, 0)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, history=st.integers(0, 3))
async def test_every_view_keeps_showing_what_it_showed_when_read(
    ops: list[tuple[str, int]], history: int
) -> None:
    """Appends, edits and deletions after a read never change what that read returned."""
    ctx = make_dispatch_context(
        messages=[Message(role="user", content="go")],
        history_tool_calls=[call(f"h{k}") for k in range(history)],
    )
    taken: list[tuple[Sequence[object], ...]] = []
    made = 0
    for op, n in ops:
        if op == "message":
            await ctx.store_message(Message(role="assistant", content=f"m{n}"))
        elif op == "store":
            made += 1
            await ctx.store_tool_call(call(f"c{made}", str(n)))
        elif op in ("mutate", "delete") and ctx.turn_tool_calls:
            target = ctx.turn_tool_calls[n % len(ctx.turn_tool_calls)]
            if op == "mutate":
                await ctx.mutate_tool_call(call(target.id, "edited"))
            else:
                await ctx.delete_tool_call(target.id)
        taken.append(
            (
                ctx.messages,
                ctx.tool_calls,
                ctx.turn_tool_calls,
                tuple(ctx.messages),
                (*ctx.history_tool_calls, *ctx.turn_tool_calls),
            )
        )
    for messages, calls, turn_calls, messages_then, calls_then in taken:
        assert tuple(messages) == messages_then
        assert tuple(calls) == calls_then
        assert tuple(turn_calls) == calls_then[history:]


def test_a_view_indexes_slices_and_compares_like_a_tuple() -> None:
    """Indexes (negative too), slices and equality behave as on the tuple it replaces."""
    tail = [1, 2, 3]
    view = HistoryView((-1, 0), tail)
    tail.append(4)  # appended after the view was made: not seen
    want = (-1, 0, 1, 2, 3)
    assert len(view) == 5
    assert list(view) == list(want)
    assert [view[i] for i in range(-5, 5)] == [want[i] for i in range(-5, 5)]
    assert view[1:4] == want[1:4]
    assert view[::-2] == want[::-2]
    assert view[3:] == (2, 3)
    assert view == want
    assert view == list(want)
    assert view != (-1, 0, 1, 2, 3, 4)
    assert view != "abc"
    with pytest.raises(IndexError):
        view[5]
    with pytest.raises(IndexError):
        view[-6]
    with pytest.raises(TypeError):
        hash(view)


def test_a_view_pickles_and_copies_as_a_plain_tuple() -> None:
    """A request or context view can be pickled or deep-copied; it comes back as a tuple."""
    message = Message(role="user", content="hi")
    view = HistoryView((), [message])
    assert pickle.loads(pickle.dumps(view)) == (message,)
    copied: object = copy.deepcopy(view)
    assert copied == (message,)
    assert isinstance(copied, tuple)
