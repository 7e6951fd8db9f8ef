"""`TurnRunner`: builds a fresh registry, stash and context for every turn and runs it."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._bus import EventBus
from ._compose import build_onions, resolve_item
from ._dispatch import DispatchContext
from ._events import Event
from ._executor import ToolLoopExecutor
from ._ids import new_id
from ._record_keeping import RecordKeeping, keepers_among
from ._registry import ToolRegistry
from ._stages import STAGES, EventObserver, MiddlewareSpec
from ._stash import Stash
from ._sync_loop import SyncLoop
from ._tool import Tool, is_async_callable
from ._tool_threads import DEFAULT_TOOL_THREADS, ToolThreads
from ._turn import Turn
from ._turn_state import TurnState
from .errors import (
    ConfigurationError,
    InvalidRunnerConfigError,
    LoopError,
    ToolAlreadyRegisteredError,
)
from .stores._store import MemoryStore

if TYPE_CHECKING:
    from ._result import TurnResult
    from .models._seam import ChatModel
    from .stores._spool import SpoolStore
    from .stores._store import TurnStore

__all__ = ["TurnHandle", "TurnRunner"]

E = TypeVar("E", bound=Event)
Executor = Callable[[DispatchContext], Awaitable[None]]

_STORE_METHODS = (
    "save_turn",
    "save_message",
    "save_tool_call",
    "delete_tool_call",
    "load_conversation",
)
_SPOOL_METHODS = ("write", "read", "delete")


class TurnHandle:
    """A turn started with `TurnRunner.start`: abort it from outside, or await its result."""

    __slots__ = ("_task", "_turn")

    def __init__(self, turn: Turn, task: asyncio.Task[TurnResult]) -> None:
        """Wrap a running turn."""
        self._turn = turn
        self._task = task

    def __repr__(self) -> str:
        """Show the turn id and whether it is done."""
        return f"TurnHandle(turn_id={self.turn_id!r}, done={self._task.done()})"

    @property
    def turn_id(self) -> str:
        """The id of the running turn."""
        return self._turn.ctx.turn_id

    def done(self) -> bool:
        """True once the turn has finished."""
        return self._task.done()

    def abort(self, reason: str | None = None) -> None:
        """Abort the turn; an in-flight executor or tool call is cancelled promptly."""
        self._turn.ctx.abort(reason)

    def __await__(self) -> Generator[Any, None, TurnResult]:
        """Wait for the turn's `TurnResult`."""
        return self._task.__await__()


class TurnRunner:
    """Runs turns: one fresh registry, stash and context per turn; reusable and concurrent-safe.

    Args:
        executor: The model seam, an async callable ``(ctx: DispatchContext) -> None`` (an
            ``async def``, or an object with an ``async def __call__`` such as a
            `ToolLoopExecutor`).
        model: Instead of ``executor``: a `ChatModel` or a model string
            (``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``,
            ``"openai-compatible:<name>@<base_url>"``, see `pipeline.models.infer_model`),
            run by the standard `ToolLoopExecutor`.
        tools: The baseline tools; copied into every turn's registry, never mutated by a turn.
        middleware: ``middleware.Middleware`` sets and class-based middleware instances, the one
            way in for middleware: a plain ``async (ctx, call_next)`` function joins a set
            (``policy.dispatch_output(fn)``) and the set is listed here. An item may also
            observe the runner's events (`EventObserver`) and keep a record of every stored
            call (`RecordKeeper`: written with the store's write, see its docstring).
        store: Where turns, messages and tool calls are persisted (default `MemoryStore`).
        spool: Where artifact bodies are written (default `MemorySpoolStore`).
        system_prompt: The system prompt handed to the executor's model.
        max_iterations: Cap on dispatch iterations (``None`` disables it).
        tool_threads: How many sync (``def``) tool handlers of this runner's turns run at once,
            each in a worker thread (`ToolThreads`); ``async def`` handlers run on the event
            loop and are not counted.

    Raises:
        InvalidRunnerConfigError: naming every bad field at once. The checks are of values the
            annotations cannot express: an executor that is not async, duplicate tool names, an
            item that is not middleware (or a string in place of the list), a store or spool
            missing its protocol's methods, and ``max_iterations`` or ``tool_threads`` below 1
            (or a bool).
    """

    __slots__ = (
        "__weakref__",
        "_baseline",
        "_bus",
        "_executor",
        "_keeping",
        "_max_iterations",
        "_middleware",
        "_onions",
        "_owns_spool",
        "_spool",
        "_store",
        "_sync_loop",
        "_system_prompt",
        "_tool_threads",
    )

    def __init__(
        self,
        *,
        executor: Executor | None = None,
        model: ChatModel | str | None = None,
        tools: Iterable[Tool[Any]] | ToolRegistry = (),
        middleware: Sequence[object] = (),
        store: TurnStore | None = None,
        spool: SpoolStore | None = None,
        system_prompt: str | None = None,
        max_iterations: int | None = 50,
        tool_threads: int = DEFAULT_TOOL_THREADS,
    ) -> None:
        """Check the configuration's values and compose the stages once."""
        problems: dict[str, list[str]] = {}

        def bad(field: str, why: str) -> None:
            problems.setdefault(field, []).append(f"{field}: {why}")

        if model is not None:
            if executor is not None:
                bad("model", "give executor= or model=, not both")
            else:
                try:
                    executor = ToolLoopExecutor(model)
                except (TypeError, ValueError, ConfigurationError) as exc:  # a bad spec
                    bad("model", exc.message if isinstance(exc, LoopError) else str(exc))
        if executor is None:
            if "model" not in problems:
                bad("executor", "give an executor (or model= for the standard one)")
        elif not is_async_callable(executor):
            bad("executor", f"must be an async callable (ctx) -> None, got {executor!r}")
        if isinstance(tools, ToolRegistry):
            baseline = ToolRegistry(tools)
        else:
            baseline = ToolRegistry()
            for tool in tools:
                try:
                    baseline.register(tool)
                except ToolAlreadyRegisteredError:
                    bad("tools", f"duplicate tool name {tool.name!r}")
        resolved: list[Sequence[MiddlewareSpec]] = []
        items: list[object] = []
        if isinstance(middleware, str | bytes):  # a str is a Sequence[object] too
            bad("middleware", f"must be a list of middleware, got {middleware!r}")
        else:
            for item in middleware:
                try:
                    resolved.append(resolve_item(item))
                except TypeError as exc:
                    bad("middleware", str(exc))
                else:
                    items.append(item)
        if store is None:
            store = MemoryStore()
        elif not all(callable(getattr(store, m, None)) for m in _STORE_METHODS):
            bad("store", f"must implement TurnStore ({', '.join(_STORE_METHODS)})")
        owns_spool = False
        if spool is None:
            from .stores._spool import MemorySpoolStore

            spool = MemorySpoolStore()
            owns_spool = True
        elif not all(callable(getattr(spool, m, None)) for m in _SPOOL_METHODS):
            bad("spool", f"must implement SpoolStore ({', '.join(_SPOOL_METHODS)})")
        if max_iterations is not None and (isinstance(max_iterations, bool) or max_iterations < 1):
            bad("max_iterations", f"must be an int >= 1 or None, got {max_iterations!r}")
        threads: ToolThreads | None = None
        try:
            threads = ToolThreads(tool_threads)
        except ValueError as exc:
            bad("tool_threads", str(exc))
        if problems:
            raise InvalidRunnerConfigError(
                "invalid TurnRunner configuration: "
                + "; ".join(why for whys in problems.values() for why in whys),
                fields=list(problems),
            )
        # every path that leaves these None reported a problem
        assert executor is not None
        assert threads is not None
        self._executor = executor
        self._baseline = baseline
        self._middleware = tuple(items)
        self._store: TurnStore = store
        keepers = keepers_among(items)
        self._keeping = RecordKeeping(keepers, store) if keepers else None
        self._spool: SpoolStore = spool
        self._owns_spool = owns_spool
        self._system_prompt = system_prompt
        self._max_iterations = max_iterations
        self._tool_threads = threads
        self._onions = build_onions(resolved)
        self._bus = EventBus()
        self._sync_loop = SyncLoop()
        weakref.finalize(self, self._sync_loop.close)
        for item in items:
            if isinstance(item, EventObserver):
                item.observe(self)

    def __repr__(self) -> str:
        """Summarise the runner's configuration."""
        return (
            f"TurnRunner(tools={[t.name for t in self._baseline.all()]!r}, "
            f"middleware={sum(len(o) for o in self._onions.values())}, "
            f"max_iterations={self._max_iterations})"
        )

    @property
    def tools(self) -> ToolRegistry:
        """A copy of the baseline registry (editing it does not change the runner)."""
        return ToolRegistry(self._baseline)

    def describe_pipelines(self) -> dict[str, list[str]]:
        """Return each stage's middleware names in execution order (outermost first)."""
        return {stage: list(self._onions[stage].names) for stage in STAGES}

    def on(self, event_type: type[E], handler: Callable[[E], object]) -> Callable[[], None]:
        """Subscribe to one event type (and subclasses); return the unsubscribe."""
        return self._bus.on(event_type, handler)

    def on_any(self, handler: Callable[[Event], object]) -> Callable[[], None]:
        """Subscribe to every event; return the unsubscribe."""
        return self._bus.on_any(handler)

    def _new_turn(
        self, input: str, stash: Mapping[str, Any] | None, conversation_id: str | None
    ) -> Turn:
        given: object = input
        if not isinstance(given, str):
            raise TypeError(f"run() input must be a string, got {type(given).__name__}")
        cid: object = conversation_id
        if cid is not None and (not isinstance(cid, str) or not cid):
            raise TypeError("conversation_id must be a non-empty string or None")
        self._baseline.definitions()  # kept by the baseline, shared by every turn's copy
        state = TurnState(
            turn_id=new_id("turn"),
            input=input,
            tools=ToolRegistry(self._baseline),
            stash=Stash(stash),
            store=self._store,
            spool=self._spool,
            bus=self._bus,
            tool_call_onion=self._onions["tool_call"],
            system_prompt=self._system_prompt,
            conversation_id=conversation_id,
            keeping=self._keeping,
            tool_threads=self._tool_threads,
        )
        return Turn(
            state,
            executor=self._executor,
            onions=self._onions,
            max_iterations=self._max_iterations,
            release_spool=self._owns_spool,
        )

    async def run(
        self,
        input: str,
        *,
        stash: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
    ) -> TurnResult:
        """Run one turn and return its `TurnResult` (turn failures never raise).

        Raises:
            TypeError: ``input`` is not a string or ``conversation_id`` is malformed.
            InvalidStashValueError: ``stash`` is not a mapping of plain data.
            asyncio.CancelledError: re-raised after recording the turn as aborted.
        """
        turn = self._new_turn(input, stash, conversation_id)
        return await turn.execute(conversation_id)

    def run_sync(
        self,
        input: str,
        *,
        stash: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
    ) -> TurnResult:
        """Run one turn from synchronous code, on an event loop the runner keeps for these calls.

        Each call behaves like ``asyncio.run`` (tasks the turn leaves are cancelled before it
        returns) without building a new loop per turn (``pipeline/_sync_loop.py``). The loop is
        closed by `close`, when the runner is collected, or at exit.

        Raises:
            RuntimeError: called from a running event loop (``await runner.run(...)`` there).
        """
        return self._sync_loop.run(self.run(input, stash=stash, conversation_id=conversation_id))

    def close(self) -> None:
        """Close the event loop `run_sync` keeps (idempotent; a later `run_sync` opens one)."""
        self._sync_loop.close()

    def start(
        self,
        input: str,
        *,
        stash: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
    ) -> TurnHandle:
        """Start a turn as a task and return its `TurnHandle` (needs a running loop)."""
        turn = self._new_turn(input, stash, conversation_id)
        task = asyncio.get_running_loop().create_task(turn.execute(conversation_id))
        return TurnHandle(turn, task)


for _cls in (TurnHandle, TurnRunner):
    _cls.__module__ = "pipeline"
