"""The durable parts outside a running workflow, and the pieces a re-run relies on: deterministic
ids, handlers wrapped without losing anything, gate ids and decisions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import StrictBool

from pipeline import Gate, ToolLoopExecutor, TurnRunner, tool
from pipeline._ids import new_id, reset_id_source, use_id_source
from pipeline.durable import (
    DurableModel,
    DurableStore,
    GateNotWaitingError,
    durable_tool,
)
from pipeline.durable._gates import decision_message, settle, split_gate_id
from pipeline.errors import PolicyViolationError
from pipeline.models import Message, ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel

from .app import text_of


@tool
def shout(text: str) -> str:
    """Shout."""
    return text.upper()


def test_a_durable_tool_outside_a_workflow_runs_its_handler_once_as_before() -> None:
    ran: list[str] = []

    @tool
    async def note(text: str) -> str:
        """Note."""
        ran.append(text)
        return f"noted {text}"

    wrapped = durable_tool(note)
    assert wrapped.describe() == note.describe()
    call = ProposedToolCall(id="c1", name="note", arguments='{"text": "a"}')
    model = ScriptedModel([ModelResponse(tool_calls=[call]), ModelResponse(text="done")])
    runner = TurnRunner(
        executor=ToolLoopExecutor(DurableModel(model)),
        tools=[wrapped],
        store=DurableStore(MemoryStore()),
    )
    result = runner.run_sync("go", conversation_id="c")
    assert result.output == "done"
    assert ran == ["a"]
    assert text_of(result.tool_calls[0].results) == "noted a"


def test_with_handler_keeps_the_schema_and_events_and_wraps_only_the_handler() -> None:
    seen: list[str] = []

    def wrap(handler: Any) -> Any:
        async def wrapped(args: Any, ctx: Any, meta: Any) -> str:
            seen.append("wrapper")
            return f"[{handler(args, ctx, meta)}]"

        return wrapped

    loud = shout.with_handler(wrap)
    assert loud.describe() == shout.describe()
    out = asyncio.run(loud.run(_Ctx(), {"text": "hi"}, call_id="c1"))
    assert out == "[HI]"
    assert seen == ["wrapper"]
    assert asyncio.run(shout.run(_Ctx(), {"text": "hi"}, call_id="c2")) == "HI"  # untouched


def test_with_handler_refuses_a_wrapper_that_is_not_a_handler() -> None:
    from pipeline.errors import InvalidToolError

    with pytest.raises(InvalidToolError):
        shout.with_handler("nope")  # type: ignore[arg-type]
    with pytest.raises(InvalidToolError):
        shout.with_handler(_no_args_handler)


def _no_args_handler(handler: Any) -> Any:
    return lambda: "x"  # not (args, ctx, meta)


class _Ctx:
    turn_id = "t"
    listening = False

    def emit(self, event: object) -> None:
        pass


def test_an_id_source_makes_ids_deterministic_in_its_context_only() -> None:
    counter = iter(range(100))
    token = use_id_source(lambda kind: f"{kind}-{next(counter)}")
    try:
        assert [new_id("msg"), new_id("dsp"), Message(role="user", content="x").id] == [
            "msg-0",
            "dsp-1",
            "msg-2",
        ]
    finally:
        reset_id_source(token)
    assert new_id("msg").startswith("msg_")
    assert new_id("msg") != new_id("msg")


@given(st.text(min_size=1).filter(lambda t: ":gate-" not in t), st.integers(1, 10**6))
def test_a_durable_gate_id_names_its_turn(turn: str, n: int) -> None:
    assert split_gate_id(f"{turn}:gate-{n}") == turn


@pytest.mark.parametrize("bad", ["", "turn", "turn:gate-", "turn:gate-x", ":gate-1", "t:gate-1a"])
def test_a_malformed_gate_id_is_refused(bad: str) -> None:
    with pytest.raises(GateNotWaitingError, match="not a durable gate id"):
        split_gate_id(bad)


def _gate(schema: Any = StrictBool) -> Gate[Any]:
    return Gate(id="g", reason="why", schema=schema)


def test_decisions_settle_a_gate_as_sent_and_bad_ones_reject_it() -> None:
    approved = _gate()
    settle(approved, decision_message(True))
    assert asyncio.run(approved.wait()) is True

    rejected = _gate()
    settle(rejected, decision_message(False, reason="too large"))
    with pytest.raises(PolicyViolationError, match="too large"):
        asyncio.run(rejected.wait())

    typed = _gate(int)
    settle(typed, decision_message(True, value="not a number"))  # fails the gate's schema
    assert typed.result == "rejected"

    for junk in [None, "yes", 3, {"approve": "yes"}]:
        gate = _gate()
        settle(gate, junk)
        assert gate.result == "rejected"


def test_the_durable_model_and_store_delegate_outside_a_workflow() -> None:
    model = ScriptedModel([ModelResponse(text="hi")])
    request = ModelRequest(None, (), (), ())
    assert asyncio.run(DurableModel(model).complete(request)).text == "hi"
    store = DurableStore(MemoryStore())
    asyncio.run(store.save_message("c", "t", Message(role="user", content="x")))
    messages, calls = asyncio.run(store.load_conversation("c"))
    assert [m.content for m in messages] == ["x"]
    assert not calls
    assert not asyncio.run(store.delete_tool_call("c", "t", "nope"))



def test_importing_the_libraries_and_the_durable_wing_never_imports_dbos() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pipeline, middleware, loopware_cli, pipeline.durable\n"
        "from loopware_cli._main import build_parser\n"
        "build_parser()\n"
        "assert 'dbos' not in sys.modules, 'dbos imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)


@given(_JSONISH)
def test_any_message_settles_the_gate_and_never_raises(message: object) -> None:
    gate = _gate()
    settle(gate, message)
    assert gate.is_settled
    if gate.result == "resolved":
        assert gate.value is True  # only a well-formed approval with a valid value resolves


def test_bad_turn_arguments_are_refused_before_anything_is_queued(tmp_path: Any) -> None:
    from pipeline.durable import DurableClient
    from pipeline.errors import InvalidStashValueError

    pytest.importorskip("dbos")
    with DurableClient(f"sqlite:///{tmp_path / 'system.sqlite'}") as client:
        with pytest.raises(TypeError, match="input must be a string"):
            client.enqueue(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="conversation_id"):
            client.enqueue("hi", conversation_id="")
        with pytest.raises(TypeError, match="turn_id"):
            client.enqueue("hi", turn_id="a:gate-1")
        with pytest.raises(InvalidStashValueError):
            client.enqueue("hi", stash={"when": object()})
        assert client.waiting_gates() == []
        turn = client.enqueue("hi", turn_id="turn-fixed")
        assert client.enqueue("hi again", turn_id="turn-fixed") == turn  # the same turn
        assert client.statuses([turn, "unknown"]) == {turn: "ENQUEUED"}
        with pytest.raises(TimeoutError):
            client.result(turn, timeout=0.2)
