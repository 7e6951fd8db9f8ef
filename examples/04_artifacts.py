"""Artifacts: a tool returns a 100,000-line log and the model queries it through a handle.

Long text results are written to a spool store and shown to the model as a handle (size, line
count, and the query tools to call with the result's ``call_id``), never pasted whole into the
prompt. The model then calls forged, ephemeral tools such as ``artifact_grep`` and
``artifact_tail``; their ``call_id`` argument is an enum of exactly this turn's artifacts. JSON
results get JSONPath tools too (``artifact_json_get`` returns every match) when the tool declares
``artifact_constructor=lambda: SpooledJsonArtifact``. ``FileSpoolStore`` keeps the bodies on
disk.

Run it with ``python examples/04_artifacts.py``.
"""

from __future__ import annotations

import json
import tempfile

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import SpooledJsonArtifact, render_tool_result
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stores import FileSpoolStore
from pipeline.testing import ScriptedModel


@tool
def build_log() -> str:
    """Return the CI build log."""
    lines = [f"step {i}: ok" for i in range(100_000)]
    lines[73_512] = "step 73512: ERROR no space left on device"
    return "\n".join(lines)


@tool(artifact_constructor=lambda: SpooledJsonArtifact)
def list_jobs() -> str:
    """List the CI jobs as JSON."""
    jobs = [{"name": f"job-{i}", "status": "failed" if i == 3 else "passed"} for i in range(200)]
    return json.dumps({"jobs": jobs})


def call(proposal_id: str, name: str, **args: object) -> ModelResponse:
    return ModelResponse(
        tool_calls=[ProposedToolCall(id=proposal_id, name=name, arguments=json.dumps(args))]
    )


SCRIPT = [
    call("log", "build_log"),
    call("g1", "artifact_grep", call_id="log", pattern="ERROR"),
    call("t1", "artifact_tail", call_id="log", n=2),
    call("jobs", "list_jobs"),
    call("j1", "artifact_json_get", call_id="jobs", path="$.jobs[?(@.status == 'failed')].name"),
    ModelResponse(text="Step 73512 ran out of disk space; job-3 failed."),
]


class ShowingModel:
    """The scripted model, keeping the first tool result as the model was shown it."""

    def __init__(self, steps: list[ModelResponse]) -> None:
        """Play ``steps`` back."""
        self.script = ScriptedModel(steps)
        self.handle = ""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer with the next step, keeping the first result the model is shown."""
        # Rendered against this request's registry: the query tools offered right now.
        if not self.handle and request.tool_calls and request.tool_view is not None:
            self.handle = render_tool_result(request.tool_calls[0], request.tool_view).text
        return await self.script.complete(request)


def main() -> None:
    with tempfile.TemporaryDirectory() as spool_dir:
        model = ShowingModel(SCRIPT)
        runner = TurnRunner(
            executor=ToolLoopExecutor(model),
            tools=[build_log, list_jobs],
            spool=FileSpoolStore(spool_dir),
        )
        result = runner.run_sync("Why did the build fail?")
        print("The model saw this handle instead of 100,000 lines:\n")
        print(model.handle)
        print("\nTools offered on the next request:")
        print("  " + ", ".join(t["name"] for t in model.script.requests[1].tools))
        for stored in result.tool_calls[1:]:
            if stored.from_artifact_tool:
                print(f"\n{stored.tool}({dict(stored.args)}) ->\n{stored.results}")
        print(f"\n{result.status}: {result.output}")


if __name__ == "__main__":
    main()
