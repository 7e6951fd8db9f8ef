"""Artifacts in real turns: handles, forged query tools, pruning on ack, kept on nack."""

from __future__ import annotations

from middleware import Middleware
from pipeline import DispatchContext, ToolLoopExecutor, ToolRegistry, TurnRunner, tool
from pipeline.artifacts import SpooledArtifact, render_tool_result
from pipeline.calls import ToolCall
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

LINES = 100_000


class _OneCall:
    """The two lookups forging needs, over one stored call."""

    def __init__(self, call: ToolCall) -> None:
        self.call = call

    def artifact_call_ids(self, cls: type[SpooledArtifact]) -> list[str]:
        return [self.call.id] if isinstance(self.call.results, cls) else []

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        return self.call if call_id == self.call.id else None


@tool
def build_log() -> str:
    """Return the build log."""
    return "\n".join(
        f"{i}: ERROR disk full" if i % 25_000 == 7 else f"{i}: ok" for i in range(LINES)
    )


def _call(cid: str, name: str, arguments: str) -> ModelResponse:
    return ModelResponse(tool_calls=[ProposedToolCall(id=cid, name=name, arguments=arguments)])


async def test_model_queries_a_100k_line_result_through_its_handle() -> None:
    """The model sees a handle, greps and tails it by call id, and the next turn has no tools."""
    model = ScriptedModel(
        [
            _call("log", "build_log", "{}"),
            _call("g", "artifact_grep", '{"call_id": "log", "pattern": "ERROR"}'),
            _call("t", "artifact_tail", '{"call_id": "log", "n": 2}'),
            ModelResponse(text="The disk is full."),
            ModelResponse(text="second turn"),
        ]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[build_log])
    result = await runner.run("why did the build fail?")
    assert result.status == "completed"
    log_call, grep_call, tail_call = result.tool_calls
    assert isinstance(log_call.results, SpooledArtifact)
    assert not log_call.inline
    assert log_call.results.line_count() == LINES
    # Rendered against the turn's registry as the model saw it: the forged tools are in it.
    rendered = render_tool_result(log_call, SpooledArtifact.forge_tools(_OneCall(log_call)))
    assert 'kind="artifact-handle"' in rendered.text
    assert "artifact_grep" in rendered.text
    assert "99999: ok" not in rendered.text  # the body itself is not pasted into the prompt
    assert grep_call.from_artifact_tool
    assert not grep_call.is_error
    assert isinstance(grep_call.results, str)
    assert "7: ERROR disk full" in grep_call.results
    assert "75007: ERROR disk full" in grep_call.results
    assert tail_call.results == "99998: ok\n99999: ok"
    enum = next(t for t in model.requests[1].tools if t["name"] == "artifact_grep")
    assert enum["input_schema"]["properties"]["call_id"]["enum"] == ["log"]
    second = await runner.run("again")
    assert second.status == "completed"
    assert not [t for t in model.requests[-1].tools if t["name"].startswith("artifact_")]


async def test_made_up_call_id_is_an_error_call_the_model_reads() -> None:
    """An id outside the enum fails validation before the handler runs, as an error call."""
    model = ScriptedModel(
        [
            _call("log", "build_log", "{}"),
            _call("g", "artifact_head", '{"call_id": "nope", "n": 1}'),
        ]
    )
    result = await TurnRunner(executor=ToolLoopExecutor(model), tools=[build_log]).run("go")
    bad = result.tool_calls[1]
    assert bad.is_error
    assert "E_INVALID_TOOL_ARGS" in str(bad.results)


async def test_forged_tools_are_pruned_on_ack_and_kept_on_nack() -> None:
    """Acked: the turn registry loses its artifact tools. Nacked: it keeps them."""
    seen: dict[str, list[str]] = {}

    async def nack_after_first(ctx: DispatchContext, call_next: object) -> None:
        await call_next()  # type: ignore[operator]
        if ctx.iteration == 1:
            ctx.nack()

    async def remember(ctx: object, call_next: object) -> None:
        await call_next()  # type: ignore[operator]
        seen["tools"] = [t.name for t in ctx.tools.all()]  # type: ignore[attr-defined]

    plain = Middleware("plain")
    plain.turn_output(remember)
    acked = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([_call("log", "build_log", "{}")])),
        tools=[build_log],
        middleware=[plain],
    )
    assert (await acked.run("go")).status == "completed"
    assert seen["tools"] == ["build_log"]

    registries: list[ToolRegistry] = []

    async def inspect_tools(ctx: DispatchContext, call_next: object) -> None:
        await call_next()  # type: ignore[operator]
        registries.append(ctx.tools)

    plain = Middleware("plain")
    plain.dispatch_output(nack_after_first)
    plain.dispatch_output(inspect_tools)
    nacked = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([_call("log", "build_log", "{}")] * 3)),
        tools=[build_log],
        middleware=[plain],
    )
    result = await nacked.run("go")
    assert result.status == "failed"
    assert "artifact_head" in registries[-1]  # the turn's registry after the nack
