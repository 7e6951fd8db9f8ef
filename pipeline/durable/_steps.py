"""Steps: every model call and every tool handler of a durable turn is a DBOS step.

A step's output is recorded in the system database the moment it returns; when the turn's
workflow re-runs after a crash, a recorded step returns its output without running again, so a
handler whose call was recorded never runs twice and a model is never asked twice. Each step
also records the digest of the stash as it stood when the step began (see ``_replay.py``).

Handler failures are recorded as outcomes, not raised through DBOS, and re-raised the same way
on every run, so the call's record reads the same ``Error: ...`` text whether the step ran now
or was replayed.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Any

from ..calls._toolcall import ToolCall
from ..errors import LoopError, TurnAbortedError
from ..stores._counters import CounterStore
from ..stores._store import JointStore, is_durable
from ._errors import RecordedToolError, ToolInterruptedError
from ._replay import current_run, stash_digest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._dispatch import DispatchContext
    from .._dispatch_loop import Executor
    from .._stash import Stash
    from .._tool import Tool, ToolHandler, ToolOutput
    from ..models._message import Message
    from ..models._seam import ChatModel, ModelRequest, ModelResponse
    from ..stores._counters import CounterLimit, SlotGrant
    from ..stores._store import TransactionWriter, TurnRecord, TurnStore

__all__ = ["DurableModel", "DurableStore", "StashBinder", "durable_tool"]

MODEL_STEP = "loopware.model"
"""The name of a model call's step."""
TOOL_START = "loopware.tool-start:"
"""The prefix of the step marking that a tool's handler starts (the tool's name follows)."""
TOOL_STEP = "loopware.tool:"
"""The prefix of a tool handler's step name (the tool's name follows)."""

Outcome = tuple[str, Any, Any]
"""How a handler ended: ``("ok", output, None)``, ``("abort", message, None)``,
``("loop", text, None)`` (a `LoopError`), ``("raised", type name, text)`` or
``("interrupted", None, None)`` (the handler was running when its worker died)."""


async def _run_step(name: str, fn: Any, *args: Any) -> Any:
    from dbos import DBOS  # the durable extra; imported only inside a durable turn

    return await DBOS.run_step_async({"name": name}, fn, *args)


class DurableModel:
    """A `ChatModel` whose every ``complete`` is a checkpointed step of the durable turn.

    Outside a durable turn it simply delegates. Proposed calls without an id get one inside the
    step, so a replayed response names its calls exactly as the first run did.
    """

    __slots__ = ("model",)

    def __init__(self, model: ChatModel) -> None:
        """Wrap ``model``."""
        self.model = model

    def __repr__(self) -> str:
        """Show the wrapped model."""
        return f"DurableModel({self.model!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the model once per turn position: replayed from the record after a crash."""
        run = current_run()
        if run is None:
            return await self.model.complete(request)
        digest = stash_digest(run.stash)
        recorded, response = await _run_step(MODEL_STEP, self._ask, request, digest)
        run.check(recorded, digest, MODEL_STEP)
        return response  # type: ignore[no-any-return]  # the step returns what _ask did

    async def _ask(self, request: ModelRequest, digest: str) -> tuple[str, ModelResponse]:
        response = await self.model.complete(request)
        if any(not p.id for p in response.tool_calls):
            calls = [
                p if p.id else dataclasses.replace(p, id=ToolCall.new_id())
                for p in response.tool_calls
            ]
            response = dataclasses.replace(response, tool_calls=calls)
        return digest, response


class StashBinder:
    """An executor wrapper that tells the running durable turn where its stash is."""

    __slots__ = ("inner",)

    def __init__(self, inner: Executor) -> None:
        """Wrap the executor ``inner``."""
        self.inner = inner

    def __repr__(self) -> str:
        """Show the wrapped executor."""
        return f"StashBinder({self.inner!r})"

    async def __call__(self, ctx: DispatchContext) -> None:
        """Bind the stash, then run the wrapped executor."""
        run = current_run()
        if run is not None:
            run.stash = ctx.stash
        await self.inner(ctx)


def durable_tool(tool: Tool[Any], *, rerun_interrupted: bool = False) -> Tool[Any]:
    """A copy of ``tool`` whose handler runs as a checkpointed step inside a durable turn.

    Two steps per call: a start mark, then the handler's outcome. A re-run that finds the mark
    without an outcome knows the handler was running when its worker died: by default it is
    not run again (at most once) and the call reads a `ToolInterruptedError`;
    ``rerun_interrupted=True`` runs it again (for idempotent tools).
    """
    name = tool.name
    start, step = TOOL_START + name, TOOL_STEP + name

    def wrap(handler: ToolHandler[Any]) -> ToolHandler[Any]:
        async def durable_handler(args: Any, ctx: DispatchContext, meta: Stash) -> ToolOutput:
            run = current_run()
            if run is None:
                return await _invoke_plain(handler, args, ctx, meta)
            digest = stash_digest(getattr(ctx, "stash", None))
            fresh = False

            async def mark() -> str:
                nonlocal fresh
                fresh = True
                return digest

            run.check(await _run_step(start, mark), digest, start)

            async def invoke() -> tuple[str, Outcome]:
                if not fresh and not rerun_interrupted:  # started before, never recorded
                    return digest, ("interrupted", None, None)
                return await _invoke(handler, args, ctx, meta, digest)

            recorded, outcome = await _run_step(step, invoke)
            run.check(recorded, digest, step)
            return _unpack(outcome, name)

        return durable_handler

    return tool.with_handler(wrap)


async def _invoke_plain(handler: ToolHandler[Any], args: Any, ctx: Any, meta: Any) -> ToolOutput:
    result = handler(args, ctx, meta)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _invoke(
    handler: ToolHandler[Any], args: Any, ctx: Any, meta: Any, digest: str
) -> tuple[str, Outcome]:
    """Run the handler once and record how it ended (a cancellation is not an outcome)."""
    try:
        return digest, ("ok", await _invoke_plain(handler, args, ctx, meta), None)
    except TurnAbortedError as exc:
        return digest, ("abort", exc.message, None)
    except LoopError as exc:
        return digest, ("loop", str(exc), None)
    except Exception as exc:
        return digest, ("raised", type(exc).__name__, str(exc))


_NAMED: dict[str, type[Exception]] = {}


def _unpack(outcome: Outcome, tool_name: str) -> ToolOutput:
    """Return the recorded output, or raise what reads exactly like the recorded failure."""
    kind, first, second = outcome
    if kind == "ok":
        return first  # type: ignore[no-any-return]  # a handler's recorded output
    if kind == "abort":
        raise TurnAbortedError(first)
    if kind == "loop":
        raise RecordedToolError(first, tool_name=tool_name)
    if kind == "interrupted":
        raise ToolInterruptedError(
            f"tool {tool_name!r} was running when its worker stopped and was not run again "
            "(whether it took effect is unknown)",
            tool_name=tool_name,
        )
    cls = _NAMED.get(first)
    if cls is None:  # same name, same text: the runner wraps it exactly as the original
        cls = _NAMED[first] = type(first, (Exception,), {"__module__": "builtins"})
    raise cls(second)


LOAD_STEP = "loopware.load_conversation"
"""The name of the step that loads a durable turn's conversation."""


class DurableStore:
    """A `TurnStore` whose ``load_conversation`` is a step of the durable turn.

    A re-run must start from the history the first run saw, not from the store as it is now
    (which holds the interrupted run's own messages and calls). Writes go straight through:
    they are idempotent (keyed by the deterministic ids), so writing again on a re-run is safe.
    It is as durable as the wrapped store, shares its transactions with other writers when
    that store does (`JointStore`), and keeps scoped limits' counts in it (`CounterStore`).
    """

    __slots__ = ("store",)

    def __init__(self, store: TurnStore) -> None:
        """Wrap ``store``."""
        self.store = store

    def __repr__(self) -> str:
        """Show the wrapped store."""
        return f"DurableStore({self.store!r})"

    async def save_turn(self, record: TurnRecord) -> None:
        """Save the turn's summary."""
        await self.store.save_turn(record)

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Save a message."""
        await self.store.save_message(conversation_id, turn_id, message)

    @property
    def durable(self) -> bool:
        """Whether the wrapped store's writes survive the process."""
        return is_durable(self.store)

    @property
    def transaction_database(self) -> str | None:
        """The wrapped store's, when it is a `JointStore` (else None)."""
        store = self.store
        return store.transaction_database if isinstance(store, JointStore) else None

    async def save_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call: ToolCall,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> None:
        """Save a tool call (``writers`` in its transaction, see `JointStore`)."""
        if writers:
            await self._joint().save_tool_call(conversation_id, turn_id, call, writers=writers)
        else:
            await self.store.save_tool_call(conversation_id, turn_id, call)

    async def delete_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call_id: str,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> bool:
        """Delete a tool call (``writers`` in its transaction, see `JointStore`)."""
        if writers:
            joint = self._joint()
            return await joint.delete_tool_call(conversation_id, turn_id, call_id, writers=writers)
        return await self.store.delete_tool_call(conversation_id, turn_id, call_id)

    def _joint(self) -> JointStore:
        store = self.store
        if not isinstance(store, JointStore):  # writers are only given to a JointStore's wrapper
            raise TypeError(f"{store!r} runs no other writers in its transactions")
        return store

    # -- CounterStore: straight through (a re-run reserves the same slot ids: idempotent) -----
    def _counters(self) -> CounterStore:
        store = self.store
        if not isinstance(store, CounterStore):
            raise TypeError(f"the turn's store {type(store).__name__} is not a CounterStore")
        return store

    async def reserve_slot(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """The wrapped store's `CounterStore.reserve_slot` (TypeError if it keeps no counts)."""
        return await self._counters().reserve_slot(slot, limits, now=now, ttl=ttl)

    async def settle_slot(
        self,
        slot: str,
        counters: Sequence[str],
        *,
        consume: bool,
        now: float,
        amount: int = 1,
    ) -> None:
        """The wrapped store's `CounterStore.settle_slot`."""
        await self._counters().settle_slot(
            slot, counters, consume=consume, now=now, amount=amount
        )

    async def count_slots(self, counter: str, *, window: float | None, now: float) -> int:
        """The wrapped store's `CounterStore.count_slots`."""
        return await self._counters().count_slots(counter, window=window, now=now)

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Load the conversation once per turn: a re-run gets what the first run got."""
        if current_run() is None:
            return await self.store.load_conversation(conversation_id)
        loaded: tuple[Sequence[Message], Sequence[ToolCall]] = await _run_step(
            LOAD_STEP, self._load, conversation_id
        )
        return loaded

    async def _load(self, conversation_id: str) -> tuple[list[Message], list[ToolCall]]:
        messages, calls = await self.store.load_conversation(conversation_id)
        return list(messages), list(calls)


for _public in (DurableModel, DurableStore, durable_tool):
    _public.__module__ = "pipeline.durable"
