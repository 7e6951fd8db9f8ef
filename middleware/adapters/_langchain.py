"""`LoopwareMiddleware`: loopware's stack as a LangChain v1 agent middleware.

The guide: docs/adapters/langchain.md.

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

With ``defer_approvals=True`` an `middleware.ApprovalGate` maps onto LangGraph's ``interrupt()``
and the graph's checkpointer: a gated call defers (`pipeline.hosted`: nothing runs, nothing is
stored) and interrupts with ``{"loopware": "approval", "call_id", "tool", "args"}``; each call
that completes writes the stash as plain data into the ``loopware`` state key (a reducer keeps
the newest of parallel writes). Resumed with ``Command(resume=True | False | {"approve": ...})``
in any process with the same checkpointer and ``thread_id``, the call is decided once with that
decision. The turn of an invocation that stops at ``interrupt()`` (or raises in the model call)
never reaches ``after_agent``: it is parked and finished when its thread is invoked again, or by
`LoopwareMiddleware.aclose`; a model call that raises aborts and finishes it.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypeVar

from langchain.agents.middleware.types import AgentMiddleware, AgentState, PrivateStateAttr
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.types import Command, interrupt

from pipeline.errors import LoopError
from pipeline.hosted import HostedCall, HostedRunner, HostedTurn

from ._langchain_parts import (
    _announce,
    _answer,
    _approved,
    _described,
    _input_of,
    _LoopThread,
    _now,
    _thread_id,
    _tool_name,
    _validated,
    _with_args,
    newest_snapshot,
)

if TYPE_CHECKING:
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime

    from pipeline.stores import TurnStore

__all__ = ["LoopwareMiddleware", "LoopwareState"]

T = TypeVar("T")
_KEY = "loopware_turn"


class LoopwareState(AgentState[Any]):
    """The agent state `LoopwareMiddleware` adds.

    ``loopware_turn``: the invocation's loopware turn (untracked); ``loopware``: the stash as
    plain data (``{"at", "stash"}``, checkpointed) when ``defer_approvals`` is on.
    """

    loopware_turn: NotRequired[Annotated[str, UntrackedValue, PrivateStateAttr]]
    loopware: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, newest_snapshot]]


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
        defer_approvals: Pause at an `middleware.ApprovalGate` with ``interrupt()`` (the
            graph needs a checkpointer; see the module docstring).
    """

    state_schema = LoopwareState

    def __init__(
        self,
        *,
        middleware: Sequence[object] = (),
        store: TurnStore | None = None,
        defer_approvals: bool = False,
    ) -> None:
        """Compose the stack once (every invocation shares it)."""
        super().__init__()
        self._hosted = HostedRunner(middleware=middleware, store=store)
        self._defer = defer_approvals
        self._turns: dict[str, HostedTurn] = {}
        self._threads: dict[str, str] = {}  # thread id -> the key of its parked or resumed turn
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

    def _turn(self, state: Any, thread: str | None = None) -> HostedTurn | None:
        key = state.get(_KEY) if isinstance(state, dict) else getattr(state, _KEY, None)
        if key is None and self._defer:  # a run resumed after interrupt(): its thread's turn
            key = self._threads.get(thread or _thread_id() or "")
        return None if key is None else self._turns.get(key)

    # -- the invocation ---------------------------------------------------------------------------
    async def _begin(
        self, state: Any, conversation_id: str | None, stash: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        await self._finish_thread(conversation_id)
        turn = await self._hosted.begin(
            _input_of(state), conversation_id=conversation_id, stash=stash
        )
        key = uuid.uuid4().hex
        self._turns[key] = turn
        return {_KEY: key}

    async def _finish(self, state: Any, thread: str | None) -> None:
        key = state.get(_KEY) if isinstance(state, dict) else None
        if key is None and self._defer:
            key = self._threads.pop(thread or "", None)
        turn = None if key is None else self._turns.pop(key, None)
        if turn is not None:
            await turn.finish()

    async def _finish_thread(self, thread: str | None) -> None:
        """Finish the turn parked (or resumed) on ``thread`` before a new one begins on it."""
        key = None if thread is None else self._threads.pop(thread, None)
        turn = None if key is None else self._turns.pop(key, None)
        if turn is not None:
            await turn.finish()

    async def _resumed(self, state: Any, thread: str | None) -> HostedTurn | None:
        """The turn of a run resumed after ``interrupt()`` (``before_agent`` did not run)."""
        turn = self._turn(state, thread)
        if turn is not None or not self._defer:
            return turn
        saved = state.get("loopware") if isinstance(state, dict) else None
        stash = saved.get("stash") if isinstance(saved, dict) else None
        update = await self._begin(state, thread, stash if isinstance(stash, dict) else None)
        if thread is not None:
            self._threads[thread] = update[_KEY]
        return self._turns[update[_KEY]]

    def _park(self, turn: HostedTurn) -> None:
        """Keep the turn of an invocation that stopped at ``interrupt()`` for its thread."""
        thread = _thread_id()
        for key, known in self._turns.items():
            if known is turn and thread is not None:
                self._threads[thread] = key

    async def _before_model(self, state: Any, turn: HostedTurn, thread: str | None) -> None:
        """Close the previous batch; a turn a policy ended (a nack) or aborted ends the run.

        Raises:
            LoopError: why the turn ended (`HostedTurn.before_model`); the turn is let go
                (``after_agent`` will not run).
        """
        try:
            await turn.before_model()
        except LoopError:
            await self._finish(state, thread)  # the turn has ended: this only lets it go
            raise

    async def _fail(self, state: Any, reason: str) -> None:
        """Abort and finish the turn of an invocation whose model call raised."""
        key = state.get(_KEY) if isinstance(state, dict) else None
        turn = None if key is None else self._turns.pop(key, None)
        if turn is not None:
            turn.abort(reason)
            await turn.finish()

    async def aclose(self) -> None:
        """Finish every turn still open (parked at ``interrupt()``, or left by a failed run)."""
        self._threads.clear()
        turns, self._turns = list(self._turns.values()), {}
        for turn in turns:
            await turn.finish()

    def close(self) -> None:
        """`aclose` for sync callers (the turns of sync invocations live on their own loop)."""
        self._loop_thread().run(self.aclose())

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
        self._loop_thread().run(self._finish(state, _thread_id()))
        return None

    async def aafter_agent(
        self, state: LoopwareState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Finish the invocation's turn (``turn_output``)."""
        await self._finish(state, _thread_id())
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
        thread.run(self._before_model(request.state, turn, _thread_id()))
        try:
            response = handler(thread.run(_now(self._filtered, request)))
        except Exception as exc:
            thread.run(self._fail(request.state, f"the model call raised {type(exc).__name__}"))
            raise
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
        await self._before_model(request.state, turn, _thread_id())
        try:
            response = await handler(self._filtered(request))
        except Exception as exc:
            await self._fail(request.state, f"the model call raised {type(exc).__name__}")
            raise
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
        turn = self._loop_thread().run(self._resumed(request.state, _thread_id()))
        if turn is None:
            return handler(request)
        hosted = self._decide_sync(turn, request, handler, None)
        if hosted.deferred:
            approval = self._interrupt(turn, hosted)  # raises GraphInterrupt the first time
            hosted = self._decide_sync(turn, request, handler, approval)
        return self._answered(turn, hosted, request)

    def _decide_sync(
        self,
        turn: HostedTurn,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
        approval: bool | None,
    ) -> HostedCall:
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
                approval=approval,
                defer=self._defer,
            )
        )
        done.add_done_callback(lambda _: asks.put(None))
        while (ask := asks.get()) is not None:  # the tool runs here, in the worker thread
            args, answer = ask
            try:
                answer.set_result(handler(_with_args(request, args)))
            except BaseException as exc:
                answer.set_exception(exc)
        return done.result()

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run the call through loopware's ``tool_call`` stage on its ``tool_call["id"]``."""
        turn = self._turn(request.state)  # the invocation's own turn (the common case)
        if turn is None:  # a run resumed after ``interrupt()``, or no turn at all
            turn = await self._resumed(request.state, _thread_id())
        if turn is None:
            return await handler(request)

        async def centre(args: dict[str, Any]) -> object:
            return await handler(_with_args(request, args))

        call = request.tool_call
        hosted = await turn.call(
            str(call["id"]),
            call["name"],
            call["args"],
            centre,
            validated=_validated(request),
            defer=self._defer,
        )
        if hosted.deferred:
            approval = self._interrupt(turn, hosted)  # raises GraphInterrupt the first time
            hosted = await turn.call(
                str(call["id"]), call["name"], call["args"], centre, approval=approval
            )
        return self._answered(turn, hosted, request)

    def _interrupt(self, turn: HostedTurn, hosted: HostedCall) -> bool:
        """Pause the graph for the call's approval; return the decision it resumes with."""
        self._park(turn)
        payload = {
            "loopware": "approval",
            "call_id": hosted.call_id,
            "tool": hosted.name,
            "args": hosted.raw_args,
        }
        return _approved(interrupt(payload))

    def _answered(
        self, turn: HostedTurn, hosted: HostedCall, request: ToolCallRequest
    ) -> ToolMessage | Command[Any]:
        """The call's answer; with ``defer_approvals``, with the stash written into the state."""
        answer = _answer(hosted, request)
        if not self._defer or not isinstance(answer, ToolMessage):
            return answer
        saved = {"at": time.time_ns(), "stash": turn.snapshot()}
        return Command(update={"messages": [answer], "loopware": saved})


for _cls in (LoopwareMiddleware, LoopwareState):
    _cls.__module__ = "middleware.adapters.langchain"
