"""`LoopwareMiddleware`: loopware's stack as a LangChain v1 agent middleware (docs/adapters.md).

One agent invocation is one hosted turn (`pipeline.hosted`): ``before_agent`` begins it (its key
is kept in the graph state, untracked, so concurrent invocations each find their own),
``wrap_model_call`` closes the previous step's batch (``dispatch_output``), offers the
request's tools, leaves out the ones loopware hid or withdrew, and announces the model's tool
calls in proposal order (all inside the model node: a hook of its own would be a graph node, a
superstep per step), ``wrap_tool_call`` runs each call through the
``tool_call`` stage on its ``tool_call["id"]``, and ``after_agent`` finishes the turn. A refused
call is answered with ``ToolMessage(status="error")``; the tool never runs.

Sync and async: ``ainvoke`` runs the hooks on the caller's loop. ``invoke`` runs a batch's tools
in a thread pool, in varying order; the turns of sync invocations live on one event loop in a
thread of their own, each worker thread waits for its call's decision there, and the tool itself
runs back in the worker thread (its context, callbacks and config intact). Because the calls were
announced as the model answered, a limit of 3 lets the first 3 proposed calls run, whichever
thread starts first.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypeVar

from langchain.agents.middleware.types import AgentMiddleware, AgentState, PrivateStateAttr
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.channels.untracked_value import UntrackedValue
from pydantic import BaseModel

from pipeline.hosted import HostedCall, HostedRunner, HostedTurn, HostTool

if TYPE_CHECKING:
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command

    from pipeline.stores import TurnStore

__all__ = ["LoopwareMiddleware", "LoopwareState"]

T = TypeVar("T")
_KEY = "loopware_turn"


class LoopwareState(AgentState[Any]):
    """The agent state `LoopwareMiddleware` adds: the invocation's loopware turn (untracked)."""

    loopware_turn: NotRequired[Annotated[str, UntrackedValue, PrivateStateAttr]]


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


class LoopwareMiddleware(AgentMiddleware[LoopwareState, Any, Any]):
    """Enforce a loopware middleware stack on a LangChain agent's tool calls.

    Example::

        agent = create_agent(model, tools=[search], middleware=[LoopwareMiddleware(middleware=[
            ToolPolicy(deny=["shell*"]), ToolCallLimit({"search": 3}), RepetitionDetector(),
        ])])

    Args:
        middleware: The same list ``TurnRunner(middleware=[...])`` takes.
        store: Where turns and calls are kept (default: in memory); the invocation's
            ``thread_id`` (when the config has one) is the loopware conversation.
    """

    state_schema = LoopwareState

    def __init__(
        self, *, middleware: Sequence[object] = (), store: TurnStore | None = None
    ) -> None:
        """Compose the stack once (every invocation shares it)."""
        super().__init__()
        self._hosted = HostedRunner(middleware=middleware, store=store)
        self._turns: dict[str, HostedTurn] = {}
        self._thread: _LoopThread | None = None
        self._lock = threading.Lock()

    @property
    def hosted(self) -> HostedRunner:
        """The loopware stack (subscribe to its events with ``hosted.runner.on(...)``)."""
        return self._hosted

    def _loop_thread(self) -> _LoopThread:
        with self._lock:
            if self._thread is None:
                self._thread = _LoopThread()
            return self._thread

    def _turn(self, state: Any) -> HostedTurn | None:
        key = state.get(_KEY) if isinstance(state, dict) else getattr(state, _KEY, None)
        return None if key is None else self._turns.get(key)

    # -- the invocation ---------------------------------------------------------------------------
    async def _begin(self, state: Any, conversation_id: str | None) -> dict[str, Any]:
        turn = await self._hosted.begin(_input_of(state), conversation_id=conversation_id)
        key = uuid.uuid4().hex
        self._turns[key] = turn
        return {_KEY: key}

    async def _finish(self, state: Any) -> None:
        key = state.get(_KEY) if isinstance(state, dict) else None
        turn = None if key is None else self._turns.pop(key, None)
        if turn is not None:
            await turn.finish()

    def before_agent(self, state: LoopwareState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Begin the invocation's turn (sync invocations: on the adapter's loop thread)."""
        return self._loop_thread().run(self._begin(state, _thread_id()))

    async def abefore_agent(
        self, state: LoopwareState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Begin the invocation's turn on the caller's loop."""
        return await self._begin(state, _thread_id())

    def after_agent(self, state: LoopwareState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Finish the invocation's turn (``turn_output``)."""
        self._loop_thread().run(self._finish(state))
        return None

    async def aafter_agent(
        self, state: LoopwareState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Finish the invocation's turn (``turn_output``)."""
        await self._finish(state)
        return None

    # -- model steps ---------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Close the previous batch, filter the tools, call the model, announce its calls.

        All inside the model node (no graph node of its own: each costs a superstep).
        """
        turn = self._turn(request.state)
        if turn is None:
            return handler(request)
        thread = self._loop_thread()
        thread.run(turn.end_batch())
        response = handler(thread.run(_now(self._filtered, request)))
        thread.run(_now(_announce(turn), response))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        """Close the previous batch, filter the tools, call the model, announce its calls."""
        turn = self._turn(request.state)
        if turn is None:
            return await handler(request)
        await turn.end_batch()
        response = await handler(self._filtered(request))
        _announce(turn)(response)
        return response

    def _filtered(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        turn = self._turn(request.state)
        if turn is None:
            return request
        turn.offer(_described(t) for t in request.tools if not turn.knows(_tool_name(t)))
        hidden = turn.hidden()
        if not hidden:
            return request
        kept = [t for t in request.tools if _tool_name(t) not in hidden]
        return request.override(tools=kept)

    # -- tool calls -------------------------------------------------------------------------------
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call through loopware's ``tool_call`` stage; the tool runs in this thread."""
        turn = self._turn(request.state)
        if turn is None:
            return handler(request)
        asks: queue.Queue[tuple[dict[str, Any], Future[object]] | None] = queue.Queue()

        async def centre(args: dict[str, Any]) -> object:
            answer: Future[object] = Future()
            asks.put((args, answer))
            return await asyncio.wrap_future(answer)

        call = request.tool_call
        done = self._loop_thread().submit(
            turn.call(
                str(call["id"]),
                call["name"],
                call["args"],
                centre,
                validated=_validated(request),
            )
        )
        done.add_done_callback(lambda _: asks.put(None))
        while (ask := asks.get()) is not None:  # the tool runs here, in the worker thread
            args, answer = ask
            try:
                answer.set_result(handler(_with_args(request, args)))
            except BaseException as exc:
                answer.set_exception(exc)
        return _answer(done.result(), request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run the call through loopware's ``tool_call`` stage on its ``tool_call["id"]``."""
        turn = self._turn(request.state)
        if turn is None:
            return await handler(request)

        async def centre(args: dict[str, Any]) -> object:
            return await handler(_with_args(request, args))

        call = request.tool_call
        hosted = await turn.call(
            str(call["id"]), call["name"], call["args"], centre, validated=_validated(request)
        )
        return _answer(hosted, request)


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


for _cls in (LoopwareMiddleware, LoopwareState):
    _cls.__module__ = "middleware.adapters.langchain"
