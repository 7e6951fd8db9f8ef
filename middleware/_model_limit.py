"""`ModelCallLimit`: stop before the next model call once the scope has had its share."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pipeline import DispatchContext, StashKey
from pipeline.calls import LimitReading
from pipeline.errors import PolicyViolationError
from pipeline.stages import CallNext, MiddlewareSpec

from ._options import check_int, check_namespace
from ._registration import dispatch_input
from ._scope import (
    DEFAULT_TTL,
    Clock,
    Scope,
    default_clock,
    scoped_counts,
)

__all__ = ["ModelCallLimit"]


class ModelCallLimit:
    """End the dispatch, before the model is asked again, once ``max_calls`` calls were made.

    Each iteration of a dispatch asks the model once (the standard executor does), so this
    counts iterations as they start: in ``dispatch_input``, before the executor runs, a call
    beyond the limit nacks the dispatch with `PolicyViolationError` (``policy`` is the
    namespace; ``details`` hold the scope, key, count and limit as a `LimitReading`'s data).
    A call in flight is never cut.

    ``scope="turn"`` (the default) counts in the stash (``<namespace>.calls``). With
    ``scope="conversation"`` or a key callable ``(TurnContext) -> str`` (and optionally a
    rolling ``window``) the count lives in the turn's store (a `CounterStore`), taken
    atomically as the iteration starts: it holds across turns, restarts and worker processes.
    A store that keeps no counts, a key that cannot be derived or a store that fails nacks the
    dispatch too (the limit never fails open).

    Args:
        max_calls: Model calls allowed in the scope (at least 1).
        namespace: Its name as a policy, and the stash path or counter prefix of its count.
        scope: ``"turn"``, ``"conversation"`` or a key callable.
        window: A rolling window (``timedelta(hours=1)``); only with a scope other than
            ``"turn"``.
        clock: Seconds since the epoch (default ``time.time``); tests pass a hand-moved clock.
        scope_name: What a key is called in messages (``"tenant"``: "for this tenant").

    Raises:
        InvalidMiddlewareConfigError: ``max_calls`` is not an int >= 1, a bad scope, a window
            on the turn scope, or another bad option.
    """

    __slots__ = ("_calls", "_counts", "_max_calls", "_namespace", "_scope")

    def __init__(
        self,
        max_calls: int,
        *,
        namespace: str = "loopware.model_limit",
        scope: Scope = "turn",
        window: timedelta | None = None,
        clock: Clock = default_clock,
        scope_name: str = "key",
    ) -> None:
        """Configure the limit (see the class docstring)."""
        owner = "ModelCallLimit"
        self._max_calls = check_int(owner, "max_calls", max_calls, minimum=1)
        self._namespace = check_namespace(owner, namespace)
        self._calls = StashKey[int](f"{namespace}.calls", default=0)
        self._scope, self._counts = scoped_counts(
            owner,
            namespace,
            scope,
            window=window,
            clock=clock,
            reservation_ttl=DEFAULT_TTL,
            scope_name=scope_name,
        )

    def __repr__(self) -> str:
        """Show the configuration."""
        scope = self._scope if isinstance(self._scope, str) else "<key>"
        return f"ModelCallLimit({self._max_calls}, scope={scope!r}, namespace={self._namespace!r})"

    @property
    def max_calls(self) -> int:
        """Model calls allowed in the scope."""
        return self._max_calls

    @property
    def namespace(self) -> str:
        """Its name as a policy."""
        return self._namespace

    @property
    def scope(self) -> Scope:
        """What it counts over: ``"turn"``, ``"conversation"`` or the key callable."""
        return self._scope

    def middleware_specs(self) -> list[MiddlewareSpec]:
        """This instance's stage middleware: the turn count or the scoped one, not both."""
        method = ModelCallLimit.check if self._counts is None else ModelCallLimit.check_scoped
        registrations = getattr(method, "__loopware_registrations__", ())
        return [registration.bind(self) for registration in registrations]

    def _stop(self, ctx: DispatchContext, reason: str, details: Mapping[str, object]) -> None:
        ctx.nack(
            PolicyViolationError(
                f"model call limit: {reason}", policy=self._namespace, details=dict(details)
            )
        )

    @dispatch_input
    async def check(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Count this iteration's model call in the turn; nack it beyond the limit."""
        if not ctx.is_signalled:
            stash = ctx.stash
            used = stash[self._calls]
            if used >= self._max_calls:
                reason = f"{used} of {self._max_calls} model calls in this turn are used up"
                details = LimitReading(
                    scope="turn",
                    key=ctx.turn_id,
                    counter="model_calls",
                    count=used,
                    limit=self._max_calls,
                )
                self._stop(ctx, reason, details.as_dict())
            else:
                stash[self._calls] = used + 1
        await call_next()

    @dispatch_input
    async def check_scoped(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Take this iteration's model call from the store's count; nack it beyond the limit."""
        counts = self._counts
        if counts is not None and not ctx.is_signalled:
            try:
                key = counts.key(ctx.turn)
                store = counts.store(ctx.turn)
                counter = counts.counter(key, "model_calls")
                slot = counts.slot_id(f"{ctx.turn_id}/{ctx.dispatch_id}/{ctx.iteration}/model")
                grant = await counts.reserve(
                    store, counts.limits([(counter, self._max_calls)]), slot, hold=False
                )
            except Exception as exc:  # no key, no counter store, a failing store: stop
                self._stop(ctx, f"its count cannot be kept: {exc}", {"error": str(exc)})
            else:
                if not grant.granted:
                    used = grant.counts[0]
                    reason = (
                        f"{used} of {self._max_calls} model calls {key.phrase}"
                        f"{counts.window_text} are used up"
                    )
                    details = LimitReading(
                        scope=key.kind,
                        key=key.key,
                        counter="model_calls",
                        count=used,
                        limit=self._max_calls,
                        window_s=counts.window,
                    )
                    self._stop(ctx, reason, details.as_dict())
        await call_next()


ModelCallLimit.__module__ = "middleware"
