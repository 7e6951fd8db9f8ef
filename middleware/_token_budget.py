"""`TokenBudget`: stop a turn before its model calls spend more tokens than allowed."""

from __future__ import annotations

from pipeline import DispatchContext
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.models import Usage
from pipeline.stages import CallNext

from ._options import check_int, check_namespace
from ._registration import dispatch_input

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

    Args:
        max_total_tokens: Input plus output tokens allowed in the turn.
        max_input_tokens: Input (prompt) tokens allowed, cached ones included.
        max_output_tokens: Output tokens allowed, reasoning ones included.
        namespace: Its name as a policy (default ``loopware.token_budget``).

    Raises:
        InvalidMiddlewareConfigError: no budget, a budget that is not an int >= 1, or a bad
            namespace.
    """

    __slots__ = ("_limits", "_namespace")

    def __init__(
        self,
        max_total_tokens: int | None = None,
        *,
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        namespace: str = "loopware.token_budget",
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

    def __repr__(self) -> str:
        """Show the configuration."""
        limits = ", ".join(f"{name}={value}" for name, value in self._limits.items())
        return f"TokenBudget({limits}, namespace={self._namespace!r})"

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


TokenBudget.__module__ = "middleware"
