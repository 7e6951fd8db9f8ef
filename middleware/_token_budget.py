"""`TokenBudget`: stop a turn before its model calls spend more tokens than allowed."""

from __future__ import annotations

from datetime import timedelta

from pipeline import DispatchContext, StashKey, TurnContext
from pipeline.calls import LimitReading
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.models import Usage
from pipeline.stages import CallNext, MiddlewareSpec

from ._options import check_int, check_namespace
from ._registration import dispatch_input, turn_output
from ._scope import (
    DEFAULT_TTL,
    Clock,
    Scope,
    ScopedCounts,
    default_clock,
    scoped_counts,
)

__all__ = ["TokenBudget"]


class TokenBudget:
    """End the dispatch, before the next model call, once the turn's tokens reach a budget.

    The executor adds each model call's `Usage` to the turn (``loopware.usage`` in the stash,
    `TurnContext.usage`); at the start of every iteration, before the model is asked again, this
    middleware compares it with the budgets and nacks the dispatch with `PolicyViolationError`
    (``details`` holds the budget, the tokens used and which count ran over) when one is reached.
    A call in flight is never cut: the budget stops the next one. The error (``policy`` is the
    namespace) is kept in the turn's errors and its audit row. At least one budget must be
    given.

    With ``scope="conversation"`` or a key callable (and optionally a rolling ``window``) the
    tokens are summed in the turn's store (a `CounterStore`) over every turn of the scope:
    each iteration adds the tokens spent since it last added (``turn_output`` adds the last
    call's), then compares the scope's sum with the budgets. Tokens are known only after a
    call, so turns running at once in one scope may each make one more call past the budget;
    ``details`` then hold the scope, key and count (a `LimitReading`'s data).

    Args:
        max_total_tokens: Input plus output tokens allowed in the scope.
        max_input_tokens: Input (prompt) tokens allowed, cached ones included.
        max_output_tokens: Output tokens allowed, reasoning ones included.
        namespace: Its name as a policy (default ``loopware.token_budget``).
        scope: ``"turn"`` (default), ``"conversation"`` or a key callable
            ``(TurnContext) -> str``.
        window: A rolling window for a scope other than ``"turn"``.
        clock: Seconds since the epoch (default ``time.time``).
        scope_name: What a key is called in messages.

    Raises:
        InvalidMiddlewareConfigError: no budget, a budget that is not an int >= 1, a bad
            namespace or scope, or a window on the turn scope.
    """

    __slots__ = ("_counts", "_limits", "_namespace", "_recorded", "_scope")

    def __init__(
        self,
        max_total_tokens: int | None = None,
        *,
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        namespace: str = "loopware.token_budget",
        scope: Scope = "turn",
        window: timedelta | None = None,
        clock: Clock = default_clock,
        scope_name: str = "key",
    ) -> None:
        """Configure the budgets (see the class docstring)."""
        owner = "TokenBudget"
        given = {
            "max_total_tokens": max_total_tokens,
            "max_input_tokens": max_input_tokens,
            "max_output_tokens": max_output_tokens,
        }
        self._limits = {
            name: check_int(owner, name, value, minimum=1)
            for name, value in given.items()
            if value is not None
        }
        if not self._limits:
            raise InvalidMiddlewareConfigError(
                f"{owner}: give max_total_tokens, max_input_tokens or max_output_tokens",
                option="max_total_tokens",
            )
        self._namespace = check_namespace(owner, namespace)
        self._scope, self._counts = scoped_counts(
            owner,
            namespace,
            scope,
            window=window,
            clock=clock,
            reservation_ttl=DEFAULT_TTL,
            scope_name=scope_name,
        )
        self._recorded = {
            name: StashKey[int](f"{namespace}.recorded.{name}", default=0) for name in _USED
        }

    def __repr__(self) -> str:
        """Show the configuration."""
        limits = ", ".join(f"{name}={value}" for name, value in self._limits.items())
        scope = (
            ""
            if self._scope == "turn"
            else ", scope=" + repr(self._scope if isinstance(self._scope, str) else "<key>")
        )
        return f"TokenBudget({limits}, namespace={self._namespace!r}{scope})"

    @property
    def scope(self) -> Scope:
        """What it counts over: ``"turn"``, ``"conversation"`` or the key callable."""
        return self._scope

    def middleware_specs(self) -> list[MiddlewareSpec]:
        """This instance's stage middleware: the turn check, or the scoped check and tally."""
        methods: list[object] = (
            [TokenBudget.check]
            if self._counts is None
            else [TokenBudget.check_scoped, TokenBudget.record_late]
        )
        return [
            registration.bind(self)
            for method in methods
            for registration in getattr(method, "__loopware_registrations__", ())
        ]

    @property
    def namespace(self) -> str:
        """Its name as a policy."""
        return self._namespace

    def spent(self, usage: Usage) -> tuple[str, int, int] | None:
        """The first budget ``usage`` reached, as ``(name, budget, used)``, or None."""
        used = {
            "max_total_tokens": usage.total_tokens,
            "max_input_tokens": usage.input_tokens,
            "max_output_tokens": usage.output_tokens,
        }
        for name, budget in self._limits.items():
            if used[name] >= budget:
                return name, budget, used[name]
        return None

    @dispatch_input
    async def check(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Nack the dispatch before the next model call once a budget is reached."""
        if not ctx.is_signalled:
            reached = self.spent(ctx.usage)
            if reached is not None:
                name, budget, used = reached
                what = name.removeprefix("max_").replace("_", " ")
                reason = f"{used} {what} used, budget {budget}"
                ctx.nack(
                    PolicyViolationError(
                        f"token budget: {reason}",
                        policy=self._namespace,
                        details={"budget": name, "limit": budget, "used": used},
                    )
                )
        await call_next()

    async def _record(
        self, ctx: TurnContext | DispatchContext, counts: ScopedCounts
    ) -> dict[str, int]:
        """Add the tokens spent since the last record to the store; return the scope's sums."""
        turn = ctx if isinstance(ctx, TurnContext) else ctx.turn
        key = counts.key(turn)
        store = counts.store(turn)
        stash = ctx.stash
        now = counts.clock()
        sums: dict[str, int] = {}
        for name, used in _used(ctx.usage).items():
            if name not in self._limits:
                continue
            counter = counts.counter(key, name.removeprefix("max_"))
            delta = used - stash[self._recorded[name]]
            if delta > 0:
                where = (
                    f"{ctx.dispatch_id}/{ctx.iteration}"
                    if isinstance(ctx, DispatchContext)
                    else "end"
                )
                slot = counts.slot_id(f"{ctx.turn_id}/{where}/{name}")
                await store.settle_slot(slot, [counter], consume=True, now=now, amount=delta)
                stash[self._recorded[name]] = used
            sums[name] = await store.count_slots(counter, window=counts.window, now=now)
        return sums

    @dispatch_input
    async def check_scoped(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Add the turn's new tokens to the scope's sum; nack once a budget is reached."""
        counts = self._counts
        if counts is not None and not ctx.is_signalled:
            try:
                sums = await self._record(ctx, counts)
            except Exception as exc:  # no key, no counter store, a failing store: stop
                ctx.nack(
                    PolicyViolationError(
                        f"token budget: its count cannot be kept: {exc}",
                        policy=self._namespace,
                        details={"error": str(exc)},
                    )
                )
            else:
                for name, budget in self._limits.items():
                    if sums[name] >= budget:
                        key = counts.key(ctx.turn)
                        what = name.removeprefix("max_").replace("_", " ")
                        reason = (
                            f"{sums[name]} {what} used {key.phrase}{counts.window_text}, "
                            f"budget {budget}"
                        )
                        reading = LimitReading(
                            scope=key.kind,
                            key=key.key,
                            counter=name.removeprefix("max_"),
                            count=sums[name],
                            limit=budget,
                            window_s=counts.window,
                        )
                        ctx.nack(
                            PolicyViolationError(
                                f"token budget: {reason}",
                                policy=self._namespace,
                                details={"budget": name, **reading.as_dict()},
                            )
                        )
                        break
        await call_next()

    @turn_output
    async def record_late(self, ctx: TurnContext, call_next: CallNext) -> None:
        """Add the tokens of the turn's last model calls to the scope's sum."""
        counts = self._counts
        if counts is not None:
            try:
                await self._record(ctx, counts)
            except Exception as exc:  # the turn is over: say so, do not fail it
                ctx.log.warning("token_budget.record_failed", f"tokens not recorded: {exc}")
        await call_next()


_USED = ("max_total_tokens", "max_input_tokens", "max_output_tokens")


def _used(usage: Usage) -> dict[str, int]:
    return {
        "max_total_tokens": usage.total_tokens,
        "max_input_tokens": usage.input_tokens,
        "max_output_tokens": usage.output_tokens,
    }


TokenBudget.__module__ = "middleware"
