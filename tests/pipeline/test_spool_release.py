"""A runner's own default spool frees each turn's bodies when the turn ends."""

from __future__ import annotations

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import SpooledArtifact
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemorySpoolStore
from pipeline.testing import ScriptedModel


@tool
def report() -> str:
    """A long report."""
    return "row\n" * 10_000


def _steps() -> list[ModelResponse]:
    return [ModelResponse(tool_calls=[ProposedToolCall(id="r", name="report", arguments="{}")])]


async def test_default_spool_keeps_nothing_after_the_turn_but_results_stay_readable() -> None:
    """The runner-owned store is empty after each turn; the result's artifact still reads."""
    script = [*_steps(), ModelResponse(text="ok")] * 3
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel(script)), tools=[report])
    for _ in range(3):
        result = await runner.run("go")
        artifact = result.tool_calls[0].results
        assert isinstance(artifact, SpooledArtifact)
        assert artifact.line_count() == 10_001
    spool = runner._spool
    assert isinstance(spool, MemorySpoolStore)
    assert spool._bodies == {}


async def test_a_spool_the_caller_passed_keeps_every_body() -> None:
    """A store given with `spool=` is the caller's: the runner never deletes from it."""
    spool = MemorySpoolStore()
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(_steps())), tools=[report], spool=spool
    )
    result = await runner.run("go")
    assert spool.read(f"{result.turn_id}/r") is not None
