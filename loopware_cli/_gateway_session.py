"""One principal's session: its calls, run by its hosted turns, several at once, rolling over.

A principal (the process on stdio, the authenticated caller over HTTP) has one `Session`
however many MCP sessions, connections or conversation names it uses: its calls are run by
one turn at a time of the gateway's `HostedRunner` (``pipeline.hosted``, the core's seam for
a loopware stack driven by someone else's loop, here the MCP clients'), so its limits,
repetition history and approvals are one state that no reconnect resets.

**Calls.** Each ``tools/call`` is `HostedTurn.call` with a fresh call id and no host handler:
the upstream's `Tool` (an `MCPToolset` tool) runs its own handler in the caller's task, after
the ``tool_call`` stage, where limits reserve their slots before any await, so 20 concurrent
calls under a limit of 5 forward exactly 5. At most ``max_concurrent`` of a principal's calls
are in flight; the others wait their turn in arrival order. Each upstream call is bounded by
its upstream's ``timeout``: one that hangs holds no other.

**Batches.** Calls that overlap in time are one batch (one iteration of the turn); the batch
is closed (`HostedTurn.end_batch`, ``dispatch_output``) when a call arrives with none in flight.
Calls in flight when a policy ends the turn are answered by that turn as it ends (not run, one
record and one audit row each); a call that finds the turn ended by closing the last batch
runs in the next turn (`HostedCall.late`), once: a turn that ends as it begins refuses it.

**Roll-over.** After ``roll_over`` calls, when a call names another conversation of the
principal, after a transient policy's decision (the caps'), or when a policy ended the turn,
the turn is finished once its calls are done and the next begins with its stash (the limits'
counts, the repetition window, approvals): a turn's records stay bounded, and the store keeps
only the principal's latest calls (`WindowStore`), so a session of any length stays flat. An
idle timeout finishes the turn the same way; the next call begins another, counts carried.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import re
from typing import TYPE_CHECKING, Any, Final, TypeGuard

from pipeline.calls import ToolCall

from ._gateway_approval import CALLER

if TYPE_CHECKING:
    from pipeline.hosted import HostedCall, HostedRunner, HostedTurn

__all__ = ["Session", "conversation_name", "keep_raw"]

_raw: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("raw", default=None)
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_CLOSE_WAIT: Final = 10.0
"""Seconds `Session.close` waits for the calls in flight before it finishes the turn anyway."""


def keep_raw(remote: str, result: Any) -> None:
    """Keep an upstream's raw result for the call being run (``MCPToolset(on_result=...)``)."""
    box = _raw.get()
    if box is not None:
        box.append(result)


def conversation_name(value: object) -> str | None:
    """A conversation name a client may give (``[A-Za-z0-9._-]{1,64}``), else None."""
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


class Session:
    """One principal's calls: the running hosted turn, the calls in flight, the carried stash."""

    __slots__ = (
        "_caller",
        "_calls_in_turn",
        "_conversation",
        "_decisions_seen",
        "_drained",
        "_id_prefix",
        "_idle_at",
        "_idle_timer",
        "_ids",
        "_roll_next",
        "_runner",
        "_running",
        "_slots",
        "_stash",
        "_switching",
        "_tasks",
        "_turn",
        "idle_timeout",
        "max_concurrent",
        "principal",
        "roll_over",
        "transient",
    )

    def __init__(
        self,
        principal: str,
        runner: HostedRunner,
        *,
        roll_over: int,
        max_concurrent: int,
        idle_timeout: float,
        transient: str | None = None,
    ) -> None:
        """A session for ``principal`` whose turns ``runner`` runs.

        A tool decision by a policy whose name starts with ``transient`` (the caps') rolls the
        turn over once its calls are done, so the tool it hid is offered again in the next turn.
        """
        self.principal = principal
        self.transient = transient
        self.roll_over = roll_over
        self.max_concurrent = max_concurrent
        self.idle_timeout = idle_timeout
        self._runner = runner
        self._slots = asyncio.Semaphore(max_concurrent)
        self._turn: HostedTurn | None = None
        self._switching: asyncio.Task[None] | None = None  # a turn being finished or begun
        self._stash: dict[str, Any] | None = None  # carried from the last turn
        self._conversation: str | None = None  # the running turn's conversation name
        self._calls_in_turn = 0
        self._decisions_seen = 0
        self._roll_next = False
        self._running = 0
        self._drained: asyncio.Future[None] | None = None
        self._idle_at = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any] | None] = set()  # the calls `enqueue` runs
        self._caller: dict[str, str | None] | None = None  # the running turn's (`CALLER`)
        # call ids: random per session, then a counter (no system call per call)
        self._id_prefix = f"call_{os.urandom(8).hex()}_"
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        """The principal and what is in flight."""
        return f"Session({self.principal!r}, running={self._running})"

    @property
    def turn(self) -> HostedTurn | None:
        """The running (or last) hosted turn; None before the first call."""
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

    # -- calls -----------------------------------------------------------------------------------
    def enqueue(
        self, name: str, args: dict[str, Any], conversation: str | None = None
    ) -> asyncio.Future[tuple[ToolCall, Any]]:
        """Take one call: a future of what `call` gives, the call running in a task of its own.

        Cancelling the future (the client gave up waiting) leaves the call to run to its end:
        its slot, its record and its audit row are the same as for a call whose answer is read.
        """
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[tuple[ToolCall, Any]] = loop.create_future()
        task = loop.create_task(self._answer(answer, name, args, conversation))
        self._tasks.add(task)  # a strong reference while it runs (the loop keeps a weak one)
        return answer

    async def _answer(
        self,
        answer: asyncio.Future[tuple[ToolCall, Any]],
        name: str,
        args: dict[str, Any],
        conversation: str | None,
    ) -> None:
        """Run one call and settle ``answer`` with its outcome (unless it was cancelled)."""
        try:
            outcome = await self.call(name, args, conversation)
        except BaseException as exc:
            if answer.done() or not isinstance(exc, Exception):
                answer.cancel()  # a no-op when it is done; the task reports its own end
                raise
            answer.set_exception(exc)
            return
        finally:
            self._tasks.discard(asyncio.current_task())
        if not answer.done():
            answer.set_result(outcome)

    async def call(
        self, name: str, args: dict[str, Any], conversation: str | None = None
    ) -> tuple[ToolCall, Any]:
        """Run one call in the principal's turn: its record and the upstream's raw result.

        Waits while ``max_concurrent`` calls are in flight or a turn is being rolled over.
        """
        call_id = f"{self._id_prefix}{next(self._ids):x}"
        box: list[Any] = []
        hosted: HostedCall | None = None
        async with self._slots:
            for attempt in (1, 2):
                current = self._turn
                if self._switching is None and self._fits(current, conversation):
                    turn = current
                else:
                    turn = await self._turn_for(conversation)
                self._calls_in_turn += 1
                self._running += 1
                token = _raw.set(box)
                caller = CALLER.set(self._caller)
                try:
                    if self._running == 1:
                        await turn.end_batch()  # none in flight: the last batch is closed
                    hosted = await turn.call(call_id, name, args)
                finally:
                    CALLER.reset(caller)
                    _raw.reset(token)
                    self._finished(turn)
                if not hosted.late or attempt == 2:  # late: closing the batch ended the turn
                    break
        record = None if hosted is None else hosted.record
        if record is None:  # `HostedTurn.call` always sets it; a typed guard
            raise RuntimeError(f"the call to {name!r} has no record")
        return record, box[-1] if box else None

    def _fits(self, turn: HostedTurn | None, conversation: str | None) -> TypeGuard[HostedTurn]:
        """Whether a call of ``conversation`` may run in ``turn`` (else the turn rolls over)."""
        return (
            turn is not None
            and not turn.ended
            and not turn.aborted
            and conversation == self._conversation
            and self._calls_in_turn < self.roll_over
            and not self._roll_next
        )

    async def _turn_for(self, conversation: str | None) -> HostedTurn:
        """The turn the call runs in: the current one if it fits, else the next one."""
        while True:
            switching = self._switching
            if switching is not None and not switching.done():
                await asyncio.shield(switching)
                continue
            turn = self._turn
            if self._fits(turn, conversation):
                return turn
            self._switching = asyncio.get_running_loop().create_task(self._switch(conversation))

    def _finished(self, turn: HostedTurn) -> None:
        """A call ended: when none is in flight, check decisions, wake a roll-over, arm idling."""
        self._running -= 1
        if self._running:
            return
        if self.transient is not None:
            self._check_decisions(turn, self.transient)
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)
        loop = asyncio.get_running_loop()
        self._idle_at = loop.time() + self.idle_timeout
        if self._idle_timer is None:
            self._idle_timer = loop.call_at(self._idle_at, self._idle_check)

    def _check_decisions(self, turn: HostedTurn, prefix: str) -> None:
        """Roll over when a transient policy decided about a tool since the last check."""
        d = turn.dispatch
        if d is None:
            return
        decisions = d.tool_decisions
        if len(decisions) == self._decisions_seen:
            return
        fresh = decisions[self._decisions_seen :]
        self._decisions_seen = len(decisions)
        if any(decision.policy.startswith(prefix) for decision in fresh):
            self._roll_next = True

    # -- turns -----------------------------------------------------------------------------------
    async def _switch(self, conversation: str | None) -> None:
        """Finish the current turn once its calls are done; begin the next, stash carried."""
        try:
            await self._retire()
            self._conversation = conversation
            self._calls_in_turn = 0
            self._decisions_seen = 0
            self._roll_next = False
            conversation_id = self.conversation_id(conversation)
            turn = self._turn = await self._runner.begin(
                f"MCP gateway session {self.principal}",
                conversation_id=conversation_id,
                stash=self._stash,
            )
            self._caller = {
                "principal": self.principal,
                "conversation": conversation_id,
                "turn_id": turn.turn_id,
            }
        finally:
            self._switching = None

    async def _retire(self, wait: float | None = None) -> None:
        """Finish the current turn (after its calls in flight) and keep its stash."""
        turn = self._turn
        if turn is None:
            return
        if self._running:
            drained = self._drained = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(asyncio.shield(drained), wait)
            except TimeoutError:
                pass  # closing: the turn is finished with the calls still out
            finally:
                self._drained = None
        try:
            await turn.end_batch()  # its last batch closes as any other (``dispatch_output``)
            result = await turn.finish()
        except Exception:  # the turn failed: the next begins from the last stash carried
            return
        self._stash = dict(result.stash)

    def _idle_check(self) -> None:
        """The idle timer fired: finish a turn idle for too long, or re-arm.

        One timer serves every wait: armed when none is; when it fires early (a later call
        moved the idle time) it re-arms at the current one; with calls in flight it is left
        unarmed (the last of them arms it).
        """
        self._idle_timer = None
        turn = self._turn
        if self._running or turn is None or turn.ended or self._switching is not None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._idle_at:
            self._switching = loop.create_task(self._end())
        else:
            self._idle_timer = loop.call_at(self._idle_at, self._idle_check)

    async def _end(self, wait: float | None = None) -> None:
        """Finish the current turn (a switching task: it clears itself when done)."""
        try:
            await self._retire(wait)
        finally:
            self._switching = None

    async def close(self) -> None:
        """Finish this principal's turn (after its calls in flight, up to a few seconds)."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        while self._switching is not None and not self._switching.done():
            await asyncio.shield(self._switching)
        closing = self._switching = asyncio.get_running_loop().create_task(self._end(_CLOSE_WAIT))
        await asyncio.shield(closing)
