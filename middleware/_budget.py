"""`IterationBudget`: a per-stack cap on dispatch iterations, below the runner's own."""

from __future__ import annotations

from pipeline import DispatchContext
from pipeline.errors import PolicyViolationError
from pipeline.stages import CallNext

from ._options import check_int, check_namespace
from ._registration import dispatch_input

__all__ = ["IterationBudget"]


class IterationBudget:
    """End the dispatch once it has run ``max_iterations`` iterations.

    At the start of iteration ``max_iterations`` (0-based), before the executor runs, the
    dispatch is nacked with `PolicyViolationError` (``details`` holds ``max_iterations`` and
    ``iteration``; ``policy`` is the namespace), which the turn's errors and its audit row
    keep. Use it for a cap tighter than ``TurnRunner(max_iterations=...)`` on one middleware
    stack.

    Args:
        max_iterations: Iterations allowed (at least 1).
        namespace: Its name as a policy (default ``loopware.budget``).

    Raises:
        InvalidMiddlewareConfigError: ``max_iterations`` is not an int >= 1, or the namespace is
            not a stash path.
    """

    __slots__ = ("_max_iterations", "_namespace")

    def __init__(self, max_iterations: int, *, namespace: str = "loopware.budget") -> None:
        """Configure the budget (see the class docstring)."""
        owner = "IterationBudget"
        self._max_iterations = check_int(owner, "max_iterations", max_iterations, minimum=1)
        self._namespace = check_namespace(owner, namespace)

    def __repr__(self) -> str:
        """Show the configuration."""
        return f"IterationBudget({self._max_iterations}, namespace={self._namespace!r})"

    @property
    def max_iterations(self) -> int:
        """Iterations allowed."""
        return self._max_iterations

    @property
    def namespace(self) -> str:
        """Its name as a policy."""
        return self._namespace

    @dispatch_input
    async def check(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Nack the dispatch when this iteration is past the budget."""
        if ctx.iteration >= self._max_iterations and not ctx.is_signalled:
            reason = f"iteration budget of {self._max_iterations} spent"
            ctx.nack(
                PolicyViolationError(
                    f"budget: {reason}",
                    policy=self._namespace,
                    details={"max_iterations": self._max_iterations, "iteration": ctx.iteration},
                )
            )
        await call_next()


IterationBudget.__module__ = "middleware"
