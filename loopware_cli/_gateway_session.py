"""One principal's session: its calls, run by its turns, several at once, rolling over.

A principal (the process on stdio, the authenticated caller over HTTP) has one `Session`
however many MCP sessions, connections or conversation names it uses: its calls are run by
one turn at a time of a `TurnRunner` with the gateway's middleware, so its limits, repetition
history and approvals are one state that no reconnect resets.

**Iterations.** The turn's executor takes the next call (waiting for one, up to the idle
timeout) and runs it; calls arriving while the iteration has calls in flight join it, up to
``max_concurrent`` at once, each as its own task: one slow or hanging upstream call (bounded by
its upstream's ``timeout``) holds no other. The iteration ends when none is in flight. Every
call still passes the ``tool_call`` stage before its handler, where limits reserve their
slots before any await, so 20 concurrent calls under a limit of 5 forward exactly 5.

**Roll-over.** After ``roll_over`` calls, or when a call names another conversation of the
principal, the turn ends and the next begins with the previous turn's stash (the limits'
counts, the repetition window, approvals): a turn's records stay bounded, and the store keeps
only the principal's latest calls (`WindowStore`), so a session of any length stays flat. An
idle timeout ends the turn the same way; the next call starts another, counts carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
from collections.abc import Callable
from typing import Any, Final

from pipeline import DispatchContext, TurnRunner
from pipeline.calls import ToolCall

__all__ = ["Session", "conversation_name", "keep_raw"]

_raw: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("raw", default=None)
_ATTEMPTS: Final = 3
"""Turns a queued call may see end before one runs it (then it fails)."""
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def keep_raw(remote: str, result: Any) -> None:
    """Keep an upstream's raw result for the call being run (``MCPToolset(on_result=...)``)."""
    box = _raw.get()
    if box is not None:
        box.append(result)


def conversation_name(value: object) -> str | None:
    """A conversation name a client may give (``[A-Za-z0-9._-]{1,64}``), else None."""
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


class _Call:
    __slots__ = ("args", "attempts", "conversation", "done", "name")

    def __init__(self, name: str, args: dict[str, Any], conversation: str | None) -> None:
        self.name = name
        self.args = args
        self.conversation = conversation
        self.attempts = 0
        self.done: asyncio.Future[tuple[ToolCall, Any]] = asyncio.get_running_loop().create_future()


_STOP: Final = None


class Session:
    """One principal's calls: a queue, the running turn, the calls in flight."""

    __slots__ = (
        "_active",
        "_calls_in_turn",
        "_conversation",
        "_decisions_seen",
        "_dispatch",
        "_drained",
        "_held",
        "_idle_at",
        "_idle_timer",
        "_queue",
        "_roll_next",
        "_runner",
        "_running",
        "_stash",
        "_stop_next",
        "_tasks",
        "_turn",
        "_waiting",
        "idle_timeout",
        "max_concurrent",
        "principal",
        "roll_over",
        "transient",
    )

    def __init__(
        self,
        principal: str,
        make_runner: Callable[[Session], TurnRunner],
        *,
        roll_over: int,
        max_concurrent: int,
        idle_timeout: float,
        transient: str | None = None,
    ) -> None:
        """A session for ``principal``; ``make_runner`` builds the runner of its turns.

        A tool decision by a policy whose name starts with ``transient`` (the caps') rolls the
        turn over after its iteration, so the tool it hid is offered again in the next turn.
        """
        self.principal = principal
        self.transient = transient
        self._roll_next = False
        self._decisions_seen = 0
        self.roll_over = roll_over
        self.max_concurrent = max_concurrent
        self.idle_timeout = idle_timeout
        self._runner = make_runner(self)
        self._queue: asyncio.Queue[_Call | None] = asyncio.Queue()
        self._turn: asyncio.Future[Any] | None = None
        self._active = False  # a turn runs (until its end is handled: no second one meanwhile)
        self._stop_next = False  # a stop was taken from the queue while calls were in flight
        self._held: _Call | None = None  # a call the ended turn left for the next one
        self._stash: dict[str, Any] | None = None  # carried from the last turn
        self._conversation: str | None = None  # the running turn's conversation name
        self._calls_in_turn = 0
        self._dispatch: DispatchContext | None = None  # the iteration taking calls, if any
        self._running = 0
        self._drained: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting = False  # the executor waits for the principal's next call
        self._idle_at = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        """The principal and what is in flight."""
        return f"Session({self.principal!r}, running={self._running}, queued={self._queue.qsize()})"

    @property
    def turn(self) -> asyncio.Future[Any] | None:
        """The running (or last) turn's result, as a future."""
        return self._turn

    @property
    def running(self) -> int:
        """Calls of this principal in flight now."""
        return self._running

    @property
    def calls_in_turn(self) -> int:
        """Calls the current turn has taken."""
        return self._calls_in_turn

    def conversation_id(self, name: str | None) -> str:
        """The turn conversation id of ``name`` within this principal."""
        return self.principal if name is None else f"{self.principal}#{name}"

    def _fits(self, call: _Call) -> bool:
        """Whether ``call`` may run in the current turn (else the turn rolls over first)."""
        return (
            call.conversation == self._conversation
            and self._calls_in_turn < self.roll_over
            and not self._roll_next
        )

    async def executor(self, ctx: DispatchContext) -> None:
        """One iteration: the next call, with every call that joins it while one is in flight."""
        call = self._held
        self._held = None
        if call is None and not self._stop_next:
            call = await self._next()
        if call is _STOP:
            self._stop_next = False
            ctx.ack()
            return
        if not self._fits(call):
            self._held = call  # the next turn runs it: this one ends here
            ctx.ack()
            return
        self._dispatch = ctx
        self._calls_in_turn += 1
        self._running += 1
        self._fill(ctx)  # calls queued before the iteration began join it
        try:
            await self._run(ctx, call)
            if self._running:
                drained = self._drained = asyncio.get_running_loop().create_future()
                await drained
            if self.transient is not None:
                self._check_decisions(ctx, self.transient)
        except BaseException:
            for task in self._tasks:
                task.cancel()
            raise
        finally:
            self._dispatch = None
            self._drained = None

    def _check_decisions(self, ctx: DispatchContext, prefix: str) -> None:
        """Roll over after this iteration when a transient policy decided about a tool."""
        decisions = ctx.tool_decisions
        fresh = decisions[self._decisions_seen :]
        self._decisions_seen = len(decisions)
        if any(d.policy.startswith(prefix) for d in fresh):
            self._roll_next = True

    async def _next(self) -> _Call | None:
        """The principal's next call; `_STOP` when it stayed idle past the timeout.

        One timer serves every wait: armed when none is, and when it fires early (a later
        wait moved the idle time) it re-arms at the current one.
        """
        queue = self._queue
        if not queue.empty():
            return queue.get_nowait()
        loop = asyncio.get_running_loop()
        self._idle_at = loop.time() + self.idle_timeout
        if self._idle_timer is None:
            self._idle_timer = loop.call_at(self._idle_at, self._idle_check)
        self._waiting = True
        try:
            return await queue.get()
        finally:
            self._waiting = False

    def _idle_check(self) -> None:
        """The idle timer fired: stop a wait that has gone on too long, or re-arm."""
        self._idle_timer = None
        if not self._waiting or not self._queue.empty():
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._idle_at:
            self._queue.put_nowait(_STOP)
        else:
            self._idle_timer = loop.call_at(self._idle_at, self._idle_check)

    async def _run(self, ctx: DispatchContext, call: _Call) -> None:
        """Run one call through the stage, store its record, answer its waiter."""
        box: list[Any] = []
        token = _raw.set(box)
        try:
            record = await ctx.run_tool(call.name, call.args, call_id=ToolCall.new_id())
            await ctx.store_tool_call(record)
        except BaseException as exc:
            if not call.done.done():
                call.done.set_exception(
                    exc if isinstance(exc, Exception) else RuntimeError("the call was stopped")
                )
            raise
        finally:
            _raw.reset(token)
            self._finished(ctx)
        if not call.done.done():
            call.done.set_result((record, box[-1] if box else None))

    def _finished(self, ctx: DispatchContext) -> None:
        """A call of the iteration ended: start the queued calls that fit, or end the wait."""
        self._running -= 1
        self._fill(ctx)
        drained = self._drained
        if self._running == 0 and drained is not None and not drained.done():
            drained.set_result(None)

    def _fill(self, ctx: DispatchContext) -> None:
        """Start queued calls in the iteration while there is room and they fit."""
        if self._held is not None or self._stop_next:
            return  # the iteration takes nothing more: the next one starts with that
        queue = self._queue
        while self._dispatch is ctx and not queue.empty() and self._running < self.max_concurrent:
            following = queue.get_nowait()
            if following is _STOP:
                self._stop_next = True  # the iteration after this one ends the turn
                break
            if not self._fits(following):
                self._held = following  # the iteration's next call: after the others end
                break
            self._launch(ctx, following)

    def _launch(self, ctx: DispatchContext, call: _Call) -> None:
        """Run ``call`` in the current iteration, beside the calls in flight."""
        self._calls_in_turn += 1
        self._running += 1
        task = asyncio.get_running_loop().create_task(self._run(ctx, call))
        self._tasks.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the call's waiter got it

    def enqueue(
        self, name: str, args: dict[str, Any], conversation: str | None = None
    ) -> asyncio.Future[tuple[ToolCall, Any]]:
        """Take one call: run at once beside the calls in flight when it fits, else queued.

        The future completes with the call's record and the upstream's raw result once it
        ran; cancelling it leaves the call to run, unanswered.
        """
        call = _Call(name, args, conversation)
        ctx = self._dispatch
        if (
            ctx is not None
            and self._held is None
            and not self._stop_next
            and self._queue.empty()
            and self._running < self.max_concurrent
            and self._fits(call)
        ):
            self._launch(ctx, call)
        else:
            self._queue_call(call)
        return call.done

    def _queue_call(self, call: _Call) -> None:
        if not self._active:
            self._start(call.conversation)
        self._queue.put_nowait(call)

    def _start(self, conversation: str | None) -> None:
        """Start the next turn (the last turn's stash carried) for conversation ``name``."""
        self._active = True
        self._conversation = conversation
        self._calls_in_turn = 0
        self._stop_next = False
        self._roll_next = False
        self._decisions_seen = 0
        handle = self._runner.start(
            f"MCP gateway session {self.principal}",
            stash=self._stash,
            conversation_id=self.conversation_id(conversation),
        )
        turn = self._turn = asyncio.ensure_future(handle)  # one waiter per turn
        turn.add_done_callback(self._turn_ended)

    def _turn_ended(self, turn: asyncio.Future[Any]) -> None:
        """Carry the stash; start the next turn for the calls no executor took.

        Until this runs the session counts the turn as running (`_queue_call` starts none),
        so no turn ever starts with a stash older than the last turn's.
        """
        self._active = False
        if not turn.cancelled() and turn.exception() is None:
            self._stash = dict(turn.result().stash)
        waiting = [c for c in [self._held, *_drain(self._queue)] if c is not None]
        self._held = None
        waiting = [c for c in waiting if not c.done.done()]
        for call in waiting:
            call.attempts += 1
        failed = [c for c in waiting if c.attempts >= _ATTEMPTS]
        for call in failed:
            call.done.set_exception(RuntimeError("the gateway could not run the call"))
        left = [c for c in waiting if c.attempts < _ATTEMPTS]
        if left:
            self._start(left[0].conversation)
            self._held = left[0]
            for call in left[1:]:
                self._queue.put_nowait(call)

    async def close(self) -> None:
        """End this principal's turn."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        turn = self._turn
        if turn is not None and not turn.done():
            await self._queue.put(_STOP)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(turn, 10)


def _drain(queue: asyncio.Queue[_Call | None]) -> list[_Call | None]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items
