"""A LangChain invocation that never reaches ``after_agent`` still ends its loopware turn.

A model call that raises aborts and finishes the turn at once; an invocation stopped at
``interrupt()`` parks its turn: resumed in the same process, the turn goes on and ends with the
run; otherwise ``aclose`` (or the thread's next invocation) finishes it.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

pytest.importorskip("langchain", reason="LangChain is not installed (extra 'langchain')")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware import ApprovalGate
from middleware.adapters.langchain import LoopwareMiddleware
from pipeline.events import TurnEnd

MODES = pytest.mark.parametrize("mode", ["invoke", "ainvoke"])


class Fake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class Broken(Fake):
    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the provider is down")


def _ends(loopware: LoopwareMiddleware) -> list[str]:
    ends: list[str] = []
    loopware.hosted.runner.on(TurnEnd, lambda event: ends.append(event.status))
    return ends


async def _run(agent: Any, given: Any, config: Any, mode: Literal["invoke", "ainvoke"]) -> Any:
    return agent.invoke(given, config) if mode == "invoke" else await agent.ainvoke(given, config)


@MODES
async def test_a_model_call_that_raises_aborts_and_finishes_the_turn(mode: Any) -> None:
    loopware = LoopwareMiddleware()
    ends = _ends(loopware)
    agent = create_agent(Broken(messages=iter([])), tools=[], middleware=[loopware])
    with pytest.raises(RuntimeError, match="provider is down"):
        await _run(agent, {"messages": [("user", "hi")]}, None, mode)
    assert ends == ["aborted"]


@MODES
async def test_an_interrupted_invocation_parks_its_turn_until_the_thread_resumes(
    mode: Any,
) -> None:
    runs: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        runs.append(path)
        return "deleted"

    loopware = LoopwareMiddleware(middleware=[ApprovalGate(["delete"])], defer_approvals=True)
    ends = _ends(loopware)
    script = [
        AIMessage(content="", tool_calls=[{"name": "delete", "args": {"path": "a"}, "id": "d1"}]),
        AIMessage(content="done"),
    ]
    agent = create_agent(
        Fake(messages=iter(script)),
        tools=[delete],
        middleware=[loopware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    paused = await _run(agent, {"messages": [("user", "clean")]}, config, mode)
    assert "__interrupt__" in paused
    assert ends == []  # parked, not finished: the run may resume
    done = await _run(agent, Command(resume=True), config, mode)
    assert done["messages"][-1].content == "done"
    assert runs == ["a"]
    assert ends == ["completed"]  # resumed in this process: the parked turn went on, once


async def test_aclose_finishes_a_parked_turn() -> None:
    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    loopware = LoopwareMiddleware(middleware=[ApprovalGate(["delete"])], defer_approvals=True)
    ends = _ends(loopware)
    call = AIMessage(content="", tool_calls=[{"name": "delete", "args": {}, "id": "d1"}])
    agent = create_agent(
        Fake(messages=iter([call])),
        tools=[delete],
        middleware=[loopware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    await _run(agent, {"messages": [("user", "clean")]}, config, "ainvoke")
    assert ends == []
    await loopware.aclose()
    assert ends == ["completed"]
