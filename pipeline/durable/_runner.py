"""`DurableTurnRunner`: turns as DBOS workflows, queued, resumable on any worker.

It composes a plain `TurnRunner` whose executor is the standard `ToolLoopExecutor` over a
`DurableModel` (every model call a step) and whose tools run their handlers as steps
(`durable_tool`); gate waits become DBOS messages (``_gates.py``). The core gained only two
additive seams for it (`Tool.with_handler` and a context-local id source); the rest sits on the
model seam, the tools, the store and the runner's events. See
docs/guides/durable.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, TypeVar

from .._events import Event, GateClosed, GateOpened
from .._executor import DEFAULT_MAX_CALLS_PER_RESPONSE, ToolLoopExecutor
from .._runner import TurnRunner
from .._tool_threads import DEFAULT_TOOL_THREADS
from ..calls._outcome import DEFAULT_INLINE_LIMIT
from ..stores._store import MemoryStore
from ._checks import STORE_API, check_options, check_patterns, check_turn, check_waiting, load_dbos
from ._errors import DurableConfigError
from ._gates import GATE_EVENT, GateListener, decision_message, gate_waiter, split_gate_id
from ._outcome import DurableTurnOutcome
from ._steps import DurableModel, DurableStore, StashBinder, durable_tool

if TYPE_CHECKING:
    from dbos import Queue, WorkflowHandleAsync

    from .._tool import Tool
    from ..models._seam import ChatModel
    from ..stores._spool import SpoolStore
    from ..stores._store import TurnStore

__all__ = ["DEFAULT_QUEUE", "DEFAULT_SYSTEM_DATABASE", "DurableTurnRunner"]

E = TypeVar("E", bound=Event)

DEFAULT_SYSTEM_DATABASE = "sqlite:///loopware-system.sqlite"
"""The default DBOS system database: a SQLite file in the current directory (one machine)."""
DEFAULT_QUEUE = "loopware-turns"
"""The default name of the queue turns wait on."""


class DurableTurnRunner:
    """Runs each turn as a DBOS workflow on a queue: crash-safe, resumable on any worker.

    Every model call and every tool handler is a step whose output is recorded when it returns;
    after a crash the turn re-runs on any worker from its start, replaying recorded steps (no
    handler whose call was recorded runs again, no model is asked twice) and the middleware on
    them, which rebuilds the stash exactly (checked at every step). A gate the turn waits on
    is a durable wait for a message (`settle`, ``loopware approve``), so an approval can come
    hours later from another process.

    Args:
        model: A `ChatModel` or a model string (see `pipeline.models.infer_model`).
        tools: The baseline tools (their handlers become steps).
        middleware: As for `TurnRunner`; the built-ins keep their state in the stash and are
            safe to resume (docs/guides/durable.md).
        store: Where turns, messages and calls are kept: shared by all workers (a
            `SqliteStore` on one machine, a PostgreSQL store for several).
        spool: Where artifact bodies are written (a `FileSpoolStore` on a shared disk lets a
            later turn of the conversation read them on another worker).
        system_prompt: As for `TurnRunner`.
        max_iterations: As for `TurnRunner`.
        tool_threads: As for `TurnRunner`: how many sync tool handlers run at once, each in a
            worker thread (so ``concurrency`` turns with blocking tools overlap).
        inline_limit: As for `ToolLoopExecutor`.
        max_calls_per_response: As for `ToolLoopExecutor`. Calls run one at a time (a durable
            turn's steps must come in a fixed order).
        system_database: The DBOS system database URL: ``sqlite:///file`` (the default, one
            machine, run one worker) or ``postgresql://...`` (any number of workers).
        queue: The queue's name.
        concurrency: How many turns this worker runs at once.
        executor_id: This worker's id; a worker restarted with the id of a dead one resumes its
            turns. ``None``: DBOS's default (``"local"``), right for one worker per database.
        app_name: The DBOS application name (workers of one application share it).
        poll_interval: Seconds between this worker's looks at the queue.
        on_gate: Called ``(durable gate id, gate)`` when a turn starts waiting on a gate.
        rerun_interrupted: Globs of the tools whose handler may run again when its worker
            died while it ran (idempotent tools); any other tool runs at most once and such a
            call reads `ToolInterruptedError`.

    Raises:
        DurableConfigError: a bad option.
        InvalidRunnerConfigError: as `TurnRunner`.
    """

    __slots__ = (
        "_app_name",
        "_concurrency",
        "_executor_id",
        "_launched",
        "_poll_interval",
        "_queue",
        "_queue_name",
        "_runner",
        "_system_database",
    )

    def __init__(
        self,
        *,
        model: ChatModel | str,
        tools: Iterable[Tool[Any]] = (),
        middleware: Sequence[object] = (),
        store: TurnStore | None = None,
        spool: SpoolStore | None = None,
        system_prompt: str | None = None,
        max_iterations: int | None = 50,
        tool_threads: int = DEFAULT_TOOL_THREADS,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        max_calls_per_response: int | None = DEFAULT_MAX_CALLS_PER_RESPONSE,
        system_database: str = DEFAULT_SYSTEM_DATABASE,
        queue: str = DEFAULT_QUEUE,
        concurrency: int = 8,
        executor_id: str | None = None,
        app_name: str = "loopware",
        poll_interval: float = 1.0,
        on_gate: GateListener | None = None,
        rerun_interrupted: Collection[str] = (),
    ) -> None:
        """Check the options and build the underlying runner (see the class docstring)."""
        check_options(system_database, queue, concurrency, poll_interval, app_name)
        eid: object = executor_id
        if eid is not None and (not isinstance(eid, str) or not eid):
            raise DurableConfigError(f"executor_id must be a non-empty string, got {executor_id!r}")
        rerun = check_patterns(rerun_interrupted)
        if store is not None and not all(callable(getattr(store, m, None)) for m in STORE_API):
            raise DurableConfigError(f"store must implement TurnStore, got {store!r}")
        if isinstance(model, str):
            from ..models._infer import infer_model  # provider SDKs load only when named

            model = infer_model(model)
        executor = ToolLoopExecutor(
            DurableModel(model),
            inline_limit=inline_limit,
            max_calls_per_response=max_calls_per_response,
        )
        self._runner = TurnRunner(
            executor=StashBinder(executor),
            tools=[
                durable_tool(t, rerun_interrupted=any(fnmatchcase(t.name, p) for p in rerun))
                for t in tools
            ],
            middleware=middleware,
            store=DurableStore(store if store is not None else MemoryStore()),
            spool=spool,
            system_prompt=system_prompt,
            max_iterations=max_iterations,
            tool_threads=tool_threads,
        )
        opened, closed = gate_waiter(on_gate)
        self._runner.on(GateOpened, opened)
        self._runner.on(GateClosed, closed)
        self._system_database = system_database
        self._queue_name = queue
        self._concurrency = concurrency
        self._executor_id = executor_id
        self._app_name = app_name
        self._poll_interval = poll_interval
        self._queue: Queue | None = None
        self._launched = False

    def __repr__(self) -> str:
        """Show where turns queue and how many run at once."""
        return (
            f"DurableTurnRunner(queue={self._queue_name!r}, concurrency={self._concurrency}, "
            f"system_database={self._system_database!r}, launched={self._launched})"
        )

    @property
    def runner(self) -> TurnRunner:
        """The underlying `TurnRunner` (``describe_pipelines``, ``tools``)."""
        return self._runner

    @property
    def queue(self) -> str:
        """The queue's name."""
        return self._queue_name

    @property
    def system_database(self) -> str:
        """The DBOS system database URL."""
        return self._system_database

    def on(self, event_type: type[E], handler: Callable[[E], object]) -> Callable[[], None]:
        """Subscribe to the turns' events run in this process (see `TurnRunner.on`)."""
        return self._runner.on(event_type, handler)

    # -- lifecycle -----------------------------------------------------------------------------
    async def launch(self) -> None:
        """Start DBOS in this process: recover its pending turns and start taking queued ones.

        One durable runner per process (DBOS is a process-wide engine).
        """
        if self._launched:
            return
        dbos = load_dbos()
        from ._workflow import install  # registers the workflow before DBOS launches

        install(self._runner)
        config: dict[str, Any] = {
            "name": self._app_name,
            "system_database_url": self._system_database,
            "log_level": "WARNING",
        }
        if self._executor_id is not None:
            config["executor_id"] = self._executor_id
        dbos.DBOS(config=config)
        dbos.DBOS.launch()
        self._queue = await dbos.DBOS.register_queue_async(
            self._queue_name,
            worker_concurrency=self._concurrency,
            polling_interval_sec=self._poll_interval,
        )
        self._launched = True

    def shutdown(self) -> None:
        """Stop DBOS in this process; unfinished turns stay pending for the next worker."""
        if not self._launched:
            return
        from dbos import DBOS

        DBOS.destroy()
        self._launched = False
        self._queue = None

    async def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Put the unfinished turns of dead workers back on the queue; return their ids.

        Only name workers that are gone: a live worker's turn resumed elsewhere would run twice.
        """
        from dbos import DBOS

        self._require_launch()
        pending = await DBOS.list_workflows_async(
            status="PENDING", executor_id=list(executor_ids), load_input=False, load_output=False
        )
        ids = [w.workflow_id for w in pending]
        for workflow_id in ids:
            await DBOS.resume_workflow_async(workflow_id, queue_name=self._queue_name)
        return ids

    async def queue_depth(self) -> int:
        """How many turns wait on the queue (enqueued, not yet taken by any worker).

        One query of the system database.
        """
        from dbos import DBOS

        self._require_launch()
        waiting = await DBOS.list_queued_workflows_async(
            queue_name=self._queue_name, status="ENQUEUED", load_input=False, load_output=False
        )
        return len(waiting)

    # -- turns ---------------------------------------------------------------------------------
    async def enqueue(
        self,
        input: str,
        *,
        conversation_id: str | None = None,
        stash: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> str:
        """Queue a turn; return its id (also its workflow id). Enqueueing an id again is a no-op.

        Raises:
            TypeError: ``input`` is not a string or ``conversation_id`` is malformed.
            InvalidStashValueError: ``stash`` is not plain data.
        """
        from dbos import SetWorkflowID

        from ._workflow import run_turn

        queue = self._require_launch()
        turn_id, plain = check_turn(input, conversation_id, stash, turn_id)
        with SetWorkflowID(turn_id):
            await queue.enqueue_async(run_turn, input, conversation_id, plain)
        return turn_id

    async def result(self, turn_id: str, *, timeout: float | None = None) -> DurableTurnOutcome:
        """Wait for a queued turn's outcome (``timeout`` seconds at most: `TimeoutError`)."""
        from dbos import DBOS

        self._require_launch()
        handle: WorkflowHandleAsync[DurableTurnOutcome]
        handle = await DBOS.retrieve_workflow_async(turn_id)
        outcome: DurableTurnOutcome = await asyncio.wait_for(
            handle.get_result(polling_interval_sec=0.1), timeout
        )
        return outcome

    async def run(
        self,
        input: str,
        *,
        conversation_id: str | None = None,
        stash: Mapping[str, Any] | None = None,
    ) -> DurableTurnOutcome:
        """Queue a turn and wait for its outcome."""
        turn_id = await self.enqueue(input, conversation_id=conversation_id, stash=stash)
        return await self.result(turn_id)

    async def settle(
        self, gate_id: str, *, approve: bool = True, reason: str | None = None, value: Any = None
    ) -> None:
        """Approve (with ``value``, default True) or reject the gate a turn waits on.

        Raises:
            GateNotWaitingError: no turn waits on ``gate_id``.
        """
        from dbos import DBOS

        self._require_launch()
        workflow_id = split_gate_id(gate_id)
        gate = await DBOS.get_event_async(workflow_id, GATE_EVENT, timeout_seconds=0)
        check_waiting(gate_id, gate)
        message = decision_message(approve, reason=reason, value=value)
        await DBOS.send_async(workflow_id, message, gate_id, idempotency_key=gate_id)

    def _require_launch(self) -> Queue:
        if self._queue is None:
            raise DurableConfigError("call launch() before queueing or settling turns")
        return self._queue


DurableTurnRunner.__module__ = "pipeline.durable"
