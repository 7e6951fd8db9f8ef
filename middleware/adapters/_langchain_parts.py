"""The parts of `LoopwareMiddleware` (``_langchain.py``).

Its loop thread, the ``loopware`` state key's reducer, and how a LangChain request, response
and tool map onto a hosted call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import AIMessage, ToolMessage
from pydantic import BaseModel

from pipeline.hosted import HostedCall, HostedTurn, HostTool

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command

T = TypeVar("T")


class _LoopThread:
    """An event loop in a daemon thread, for the turns of sync invocations."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="loopware-langchain", daemon=True
        )
        self._thread.start()

    def run(self, work: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(_awaited(work), self.loop).result()

    def submit(self, work: Awaitable[T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(_awaited(work), self.loop)


async def _awaited(work: Awaitable[T]) -> T:
    return await work


def newest_snapshot(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """The reducer of the ``loopware`` state key: the newer of two stash snapshots.

    Parallel tool calls of one step each write one; the newest (``"at"``, ns) is kept.
    """
    if not new:
        return old or {}
    if not old:
        return new
    return new if int(new.get("at", 0)) >= int(old.get("at", 0)) else old


def _approved(decision: object) -> bool:
    """A resume value as a decision: ``True``, or a mapping whose ``"approve"`` is True."""
    if isinstance(decision, dict):
        decision = decision.get("approve")
    return decision is True


def _announce(turn: HostedTurn) -> Callable[[Any], None]:
    """Announce a model response's tool calls in proposal order (they take slots in it)."""

    def announce(response: Any) -> None:
        messages = response.result if hasattr(response, "result") else [response]
        for message in messages:
            if isinstance(message, AIMessage):
                ids = [str(call["id"]) for call in message.tool_calls if call.get("id")]
                if ids:
                    turn.announce(ids)

    return announce


async def _now(fn: Callable[[Any], T], arg: Any) -> T:
    """Run ``fn(arg)`` on the loop that owns the turns of sync invocations."""
    return fn(arg)


def _answer(hosted: HostedCall, request: ToolCallRequest) -> ToolMessage | Command[Any]:
    """The host's own outcome when it stands, else an error ``ToolMessage`` with loopware's text."""
    if hosted.forwarded:
        value: ToolMessage | Command[Any] = hosted.value
        return value
    if hosted.raises and hosted.host_error is not None:
        raise hosted.host_error
    call = request.tool_call
    return ToolMessage(
        content=hosted.text, tool_call_id=str(call["id"]), name=call["name"], status="error"
    )


def _with_args(request: ToolCallRequest, args: dict[str, Any]) -> ToolCallRequest:
    if args == request.tool_call["args"]:
        return request
    return request.override(tool_call={**request.tool_call, "args": args})


def _validated(request: ToolCallRequest) -> dict[str, Any] | None:
    """The tool's own validation of the call's arguments (defaults applied), when it has one."""
    tool = request.tool
    schema = getattr(tool, "tool_call_schema", None) if tool is not None else None
    if not isinstance(schema, type) or not issubclass(schema, BaseModel):
        return None
    try:
        dumped: dict[str, Any] = schema.model_validate(request.tool_call["args"]).model_dump(
            mode="json"
        )
    except Exception:  # the tool reports its own validation errors when it runs
        return None
    return dumped


def _tool_name(tool: Any) -> str:
    return str(tool.get("name", "")) if isinstance(tool, dict) else str(tool.name)


def _described(tool: Any) -> HostTool:
    if isinstance(tool, dict):
        return HostTool(_tool_name(tool), tool.get("description"), tool.get("parameters"))
    schema: dict[str, Any] | None
    try:
        call_schema = tool.tool_call_schema
        schema = (
            call_schema.model_json_schema()
            if isinstance(call_schema, type) and issubclass(call_schema, BaseModel)
            else dict(call_schema)
        )
    except Exception:  # a tool whose schema cannot be rendered: any object
        schema = None
    return HostTool(tool.name, tool.description, schema)


def _input_of(state: Any) -> str:
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for message in reversed(messages):
        if getattr(message, "type", None) == "human":
            content = message.content
            return content if isinstance(content, str) else ""
    return ""


def _thread_id() -> str | None:
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable", {})
    except RuntimeError:  # outside a runnable context
        return None
    thread = configurable.get("thread_id")
    return str(thread) if thread is not None else None
