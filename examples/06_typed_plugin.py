"""A custom, type-checked plugin: a spending guard with typed stash keys.

Class-based middleware decorate methods with the module-level stage decorators and keep their
per-turn state in the stash, never on the instance, so one instance serves every concurrent
turn. `StashKey[T]` makes that state typed: ``ctx.stash[SPENT]`` is an ``int`` to mypy, and
assigning a ``str`` to it is a type error at the line that does it.

The guard reads each completed ``charge`` call, adds its amount to the turn's spend, and once
the budget is used up hides ``charge`` for the rest of the turn (the model adapts) and records
why. Run it with ``python examples/06_typed_plugin.py``.
"""

from __future__ import annotations

import json

from middleware import dispatch_output, turn_input, turn_output
from pipeline import DispatchContext, StashKey, ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel

SPENT = StashKey[int]("spend_guard.spent_cents", default=0)
BLOCKED = StashKey[bool]("spend_guard.blocked", default=False)


class SpendGuard:
    """Hide the ``charge`` tool once a turn has charged ``budget_cents`` in total."""

    def __init__(self, budget_cents: int) -> None:
        """Configure the budget; bad options fail here, at construction."""
        if budget_cents <= 0:
            raise ValueError("budget_cents must be positive")
        self.budget_cents = budget_cents

    def __repr__(self) -> str:
        """Show the configuration."""
        return f"SpendGuard(budget_cents={self.budget_cents})"

    @turn_input
    def announce(self, ctx: TurnContext) -> None:
        """A one-argument hook: runs before the rest of the turn input stage."""
        ctx.log.info("spend_guard", f"budget {self.budget_cents} cents")

    @dispatch_output(tools=["charge"])
    async def tally(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Runs only in iterations that completed a ``charge`` call."""
        for call in ctx.new_tool_calls:
            if call.tool == "charge" and not call.is_error:
                ctx.stash[SPENT] = ctx.stash[SPENT] + int(call.args["cents"])
        if ctx.stash[SPENT] >= self.budget_cents and not ctx.stash[BLOCKED]:
            ctx.stash[BLOCKED] = True
            ctx.tools.hide("charge")
            ctx.log.warning("spend_guard", "budget used up: charge hidden")
        await call_next()

    @turn_output
    def summary(self, ctx: TurnContext) -> None:
        """Report the turn's spend."""
        ctx.log.info("spend_guard", f"spent {ctx.stash[SPENT]} of {self.budget_cents} cents")


@tool
def charge(cents: int, memo: str) -> str:
    """Charge the customer's card."""
    return f"charged {cents} cents for {memo}"


def charge_call(call_id: str, cents: int) -> ModelResponse:
    arguments = json.dumps({"cents": cents, "memo": "extra seats"})
    return ModelResponse(
        tool_calls=[ProposedToolCall(id=call_id, name="charge", arguments=arguments)]
    )


def main() -> None:
    model = ScriptedModel(
        [charge_call("c1", 600), charge_call("c2", 500), ModelResponse(text="Charged $11.")]
    )
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[charge], middleware=[SpendGuard(1000)]
    )
    result = runner.run_sync("Add two seats to my plan.")
    offered = [[t["name"] for t in request.tools] for request in model.requests]
    print("tools offered per iteration:", offered)
    print("stash:", result.stash["spend_guard"])
    print(runner.describe_pipelines())
    print(f"{result.status}: {result.output}")


if __name__ == "__main__":
    main()
