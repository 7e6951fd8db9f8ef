"""The scenario on loopware: TurnRunner + ToolLoopExecutor(ScriptedModel), middleware layers.

Run with loopware's own interpreter (``/work/main/.venv`` or ``$LOOPWARE_PYTHON``) with the repo
root on ``PYTHONPATH``; ``run.sh`` does both. Prints one JSON line. Written against the
public API only (docs/concepts/).

- Fake model: ``pipeline.testing.ScriptedModel(steps)``, 20 steps of one ``ProposedToolCall``
  each; past the script it answers ``"done"``. A ScriptedModel answers by call count, so it
  serves exactly one turn: each timed turn gets its own runner, built untimed before the batch
  (as ADK's sessions are). Runner construction (validation, stage composition) is therefore not
  billed to loopware, and nothing a runner might cache across turns helps it either.
- Layers: one ``middleware.Middleware`` set with five ``@dispatch_output`` layers
  ``async (ctx, call_next)`` that react to ``ctx.new_tool_calls``. loopware checksums every call
  and counts checksums itself (``call.checksum``, ``ctx.tool_call_count``), so the repetition
  layer reads those instead of hashing: that work is in loopware's 0-layer figure already.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from _scenario import (
    ARGS_JSON,
    ECHO,
    ITERATIONS,
    Config,
    Layers,
    call_id,
    emit,
    measure,
    run_main,
)

from middleware import Middleware
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel

LAYERS = Layers()
STEPS = tuple(
    ModelResponse(
        tool_calls=[ProposedToolCall(id=call_id(k), name="echo", arguments=ARGS_JSON[k % 3])]
    )
    for k in range(ITERATIONS)
)
ECHO_TOOL = tool(ECHO)

layers = Middleware("bench")


@layers.dispatch_output
async def count(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        LAYERS.count(call.tool)
    await call_next()


@layers.dispatch_output
async def repetition(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        LAYERS.repetition_seen(call.checksum, ctx.tool_call_count(call.checksum))
    await call_next()


@layers.dispatch_output
async def audit(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        LAYERS.record(call.tool, call.args, call.results)
    await call_next()


@layers.dispatch_output
async def deny(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        LAYERS.deny(call.tool)
    await call_next()


@layers.dispatch_output
async def pass_through(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


def make_runner(n_layers: int) -> TurnRunner:
    """Build a runner whose ScriptedModel serves one turn."""
    return TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(STEPS)),
        tools=[ECHO_TOOL],
        middleware=[layers] if n_layers else [],
        max_iterations=ITERATIONS + 5,
    )


def loopware_version() -> str:
    """Return the installed distribution's version, or say it runs from the source tree."""
    try:
        return f"loopware {version('loopware')}"
    except PackageNotFoundError:
        return "loopware (source tree)"


async def build(n_layers: int) -> Config:
    runners: list[TurnRunner] = []

    async def prepare(n: int) -> None:
        runners[:] = [make_runner(n_layers) for _ in range(n)]

    async def run_turn() -> str | None:
        result = await runners.pop().run("go")
        if result.status != "completed":  # run() reports failures instead of raising
            result.raise_for_status()
            raise AssertionError(f"turn ended {result.status}: {result.errors}")
        return result.output

    return Config(run_turn, prepare)


async def main() -> None:
    samples = await measure(build, LAYERS)
    emit(
        "loopware",
        loopware_version(),
        samples,
        "TurnRunner + ToolLoopExecutor(ScriptedModel); five @dispatch_output layers",
    )


if __name__ == "__main__":
    run_main(main)
