"""What loopware's host adapters add per tool call, inside the host's own run.

Run from the repository root (needs the ``adapters`` extra)::

    python -m bench.adapters            # full run
    python -m bench.adapters --quick    # fewer runs, for a smoke test

What is measured
----------------
Per host (pydantic-ai with its ``FunctionModel``, LangChain v1 through ``ainvoke`` with a fake
chat model, the OpenAI Agents SDK with its ``ScriptedModel``, Google ADK with a small
``BaseLlm``), one run of 20 model steps, each
proposing 5 parallel calls of a trivial tool with fresh arguments (so no policy fires: the
common case), then an answer: 100 tool calls a run.
The tool is an ``async def`` (a sync one runs in the host's thread pool, whose hand-offs are
noise larger than what is measured).
Five configurations, timed in interleaved repeats in one process:

* ``bare``: the host with no hooks;
* ``native``: the host's own no-op hook (a pydantic-ai capability whose ``wrap_tool_execute``
  calls the handler; a LangChain middleware whose ``awrap_tool_call`` calls the handler; a
  ``FunctionTool`` whose ``on_invoke_tool`` calls the tool's own; an ADK plugin whose
  ``before_tool_callback`` returns None);
* ``model`` (LangChain): the no-op middleware with an ``awrap_model_call`` that only calls the
  model: what LangGraph charges for the hook an adapter needs to filter the tools shown;
* ``shape`` (LangChain): a hand-written middleware with the adapter's hooks and state keys
  (``before_agent``, ``after_agent``, ``wrap_model_call``, ``wrap_tool_call``, a private state
  key) doing only its per-call lookups (the thread id, the turn's key in the state): what the
  host's own machinery charges for that shape, before loopware does anything;
* ``empty``: the loopware adapter with no middleware;
* ``policies``: the adapter with ``ToolPolicy``, ``ToolCallLimit`` and ``RepetitionDetector``;
* ``audit``: the same plus ``AuditLog`` on a JSON Lines sink (a file written per call).

Each agent (and LangChain's compiled graph) is built once per configuration, as an application
builds it; a run is one invocation. Per call = (run time) / 100; the figures printed are the
best repeat (the least disturbed on a shared machine) and the median, of wall time and of the
process's CPU time. The target: ``policies`` adds at most 25 us per call over ``native``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, JsonlAuditSink

STEPS = 20
BATCH = 5
CALLS = STEPS * BATCH
TARGET_US = 25.0
CONFIGS = ("bare", "native", "empty", "policies", "audit")


def _stack(config: str, audit_dir: Path) -> list[object]:
    if config == "empty":
        return []
    stack: list[object] = [
        ToolPolicy(deny=["shell*"]),
        ToolCallLimit({"echo": CALLS * 10}),
        RepetitionDetector(threshold=3),
    ]
    if config == "audit":
        stack.append(AuditLog(JsonlAuditSink(audit_dir / f"audit-{time.monotonic_ns()}.jsonl")))
    return stack


def pydantic_ai_runs(audit_dir: Path) -> dict[str, Callable[[], Awaitable[None]]]:
    """One awaitable run per configuration, on a pydantic-ai agent."""
    from dataclasses import dataclass

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from middleware.adapters.pydantic_ai import LoopwareCapability

    @dataclass
    class NoOp(AbstractCapability[Any]):
        async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:  # noqa: E501
            return await handler(args)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < STEPS:
            return ModelResponse(
                parts=[
                    ToolCallPart("echo", {"text": f"{step}-{i}"}, tool_call_id=f"c{step}-{i}")
                    for i in range(BATCH)
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    def agent(capabilities: list[Any]) -> Agent[None, str]:
        built = Agent(FunctionModel(model), capabilities=capabilities)

        @built.tool_plain
        async def echo(text: str) -> str:
            """Echo."""
            return text

        return built

    def capabilities(config: str) -> list[Any]:
        if config == "bare":
            return []
        if config == "native":
            return [NoOp()]
        return [LoopwareCapability(middleware=_stack(config, audit_dir))]

    agents = {config: agent(capabilities(config)) for config in CONFIGS}

    def run(config: str) -> Callable[[], Awaitable[None]]:
        async def once() -> None:
            await agents[config].run("go")

        return once

    return {config: run(config) for config in CONFIGS}


def langchain_runs(audit_dir: Path) -> dict[str, Callable[[], Awaitable[None]]]:
    """One awaitable run per configuration, on a LangChain agent (``ainvoke``)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware.types import AgentMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.config import get_config

    from middleware.adapters.langchain import LoopwareMiddleware, LoopwareState

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    class NoOp(AgentMiddleware[Any, Any, Any]):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    class ModelHook(NoOp):
        """The no-op middleware with a ``awrap_model_call`` that only calls the model."""

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    class Shape(AgentMiddleware[Any, Any, Any]):
        """The adapter's hooks and state keys, doing nothing but its per-call lookups."""

        state_schema = LoopwareState

        async def abefore_agent(self, state: Any, runtime: Any) -> Any:
            return {"loopware_turn": "k"}

        async def aafter_agent(self, state: Any, runtime: Any) -> Any:
            return None

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            get_config().get("configurable", {}).get("thread_id")
            request.state.get("loopware_turn")
            return await handler(request)

    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    def script() -> list[AIMessage]:
        steps = [
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "echo", "args": {"text": f"{s}-{i}"}, "id": f"c{s}-{i}"}
                    for i in range(BATCH)
                ],
            )
            for s in range(STEPS)
        ]
        return [*steps, AIMessage(content="done")]

    def middleware(config: str) -> list[Any]:
        if config == "bare":
            return []
        if config == "native":
            return [NoOp()]
        if config == "model":
            return [ModelHook()]
        if config == "shape":
            return [Shape()]
        return [LoopwareMiddleware(middleware=_stack(config, audit_dir))]

    configs = ("bare", "native", "model", "shape", *CONFIGS[2:])
    stacks = {config: middleware(config) for config in configs}

    class Script:
        """The fake model's messages, started again before each run (the agent is built once)."""

        def __init__(self) -> None:
            self.steps = iter(script())

        def __iter__(self) -> Script:
            return self

        def __next__(self) -> AIMessage:
            return next(self.steps)

    def run(config: str) -> Callable[[], Awaitable[None]]:
        messages = Script()
        agent = create_agent(Fake(messages=messages), tools=[echo], middleware=stacks[config])

        async def once() -> None:
            messages.steps = iter(script())
            state: Any = {"messages": [("user", "go")]}
            await agent.ainvoke(state)

        return once

    return {config: run(config) for config in stacks}


def openai_agents_runs(audit_dir: Path) -> dict[str, Callable[[], Awaitable[None]]]:
    """One awaitable run per configuration, on an OpenAI Agents SDK agent."""
    import dataclasses

    from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from middleware.adapters.openai_agents import Loopware

    @function_tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    invoke = echo.on_invoke_tool

    async def passthrough(ctx: Any, arguments: str) -> Any:
        return await invoke(ctx, arguments)

    no_op = dataclasses.replace(echo, on_invoke_tool=passthrough)  # the SDK's own hook point

    def model() -> ScriptedModel:
        steps: list[Any] = [
            [function_call("echo", {"text": f"{s}-{i}"}, call_id=f"c{s}-{i}") for i in range(BATCH)]
            for s in range(STEPS)
        ]
        return ScriptedModel([*steps, [assistant_message("done")]])

    config = RunConfig(tracing_disabled=True)
    adapters = {
        c: Loopware(middleware=_stack(c, audit_dir)) for c in ("empty", "policies", "audit")
    }

    def run(name: str) -> Callable[[], Awaitable[None]]:
        tool: FunctionTool = no_op if name == "native" else echo

        async def once() -> None:
            agent = Agent(name="bench", model=model(), tools=[tool])
            if name in adapters:
                await adapters[name].run(agent, "go", run_config=config, max_turns=STEPS + 2)
            else:
                await Runner.run(agent, "go", run_config=config, max_turns=STEPS + 2)

        return once

    return {config_name: run(config_name) for config_name in CONFIGS}


def adk_runs(audit_dir: Path) -> dict[str, Callable[[], Awaitable[None]]]:
    """One awaitable run per configuration, on a Google ADK runner."""
    from collections.abc import AsyncGenerator

    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from middleware.adapters.adk import LoopwarePlugin

    class Steps(BaseLlm):
        model: str = "bench"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            step = sum(1 for c in llm_request.contents if c.role == "model")
            parts = (
                [
                    types.Part(
                        function_call=types.FunctionCall(
                            id=f"c{step}-{i}", name="echo", args={"text": f"{step}-{i}"}
                        )
                    )
                    for i in range(BATCH)
                ]
                if step < STEPS
                else [types.Part(text="done")]
            )
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    class NoOp(BasePlugin):
        async def before_tool_callback(
            self, *, tool: Any, tool_args: Any, tool_context: Any
        ) -> Any:
            return None

    async def echo(text: str) -> str:
        """Echo."""
        return text

    def plugins(config: str) -> list[Any]:
        if config == "bare":
            return []
        if config == "native":
            return [NoOp(name="no-op")]
        return [LoopwarePlugin(middleware=_stack(config, audit_dir))]

    runners = {
        config: InMemoryRunner(
            app=App(
                name="bench",
                root_agent=LlmAgent(name="bench", model=Steps(), tools=[echo]),
                plugins=plugins(config),
            )
        )
        for config in CONFIGS
    }

    def run(config: str) -> Callable[[], Awaitable[None]]:
        async def once() -> None:
            runner = runners[config]
            session = await runner.session_service.create_session(
                app_name=runner.app_name, user_id="u"
            )
            message = types.Content(role="user", parts=[types.Part(text="go")])
            events = runner.run_async(user_id="u", session_id=session.id, new_message=message)
            async for _ in events:
                pass

        return once

    return {config: run(config) for config in CONFIGS}


Times = dict[str, tuple[list[float], list[float]]]
"""Per configuration: per-call microseconds of wall time and of CPU time, one per repeat."""


async def measure(runs: dict[str, Callable[[], Awaitable[None]]], repeats: int) -> Times:
    """Per-call microseconds (wall, CPU) of each configuration, repeats interleaved."""
    for once in runs.values():  # warm up: imports, schema compilation, first-call caches
        await once()
    times: Times = {config: ([], []) for config in runs}
    for _ in range(repeats):
        for config, once in runs.items():
            start, cpu = time.perf_counter(), time.process_time()
            await once()
            wall, used = times[config]
            wall.append((time.perf_counter() - start) * 1e6 / CALLS)
            used.append((time.process_time() - cpu) * 1e6 / CALLS)
    return times


def report(host: str, times: Times) -> bool:
    """Print the figures and the verdict; return whether the target holds."""
    best = {config: min(wall) for config, (wall, _) in times.items()}
    cpu = {config: min(used) for config, (_, used) in times.items()}
    print(f"\n{host}: us per tool call ({CALLS} calls a run), wall best / median, CPU best")
    for config, (wall, _) in times.items():
        line = f"{best[config]:8.1f} / {statistics.median(wall):8.1f}   {cpu[config]:8.1f}"
        print(f"  {config:9s} {line}")
    added = best["policies"] - best["native"]
    ok = added <= TARGET_US
    print(
        f"  policies over native: {added:+.1f} us per call wall, "
        f"{cpu['policies'] - cpu['native']:+.1f} CPU "
        f"(target <= {TARGET_US:.0f}): {'ok' if ok else 'MISSED'}"
    )
    if "model" in best:
        print(
            f"  model hook over native: {best['model'] - best['native']:+.1f} us per call wall "
            "(a wrap_model_call that only calls the model: the hook that filters the tools shown)"
        )
    if "shape" in best:
        print(
            f"  shape over native:    {best['shape'] - best['native']:+.1f} us per call wall, "
            f"{cpu['shape'] - cpu['native']:+.1f} CPU (the host's own cost of the adapter's hooks)"
        )
    print(f"  audit over native:    {best['audit'] - best['native']:+.1f} us per call")
    return ok


async def main_async(repeats: int) -> bool:
    """Run every host's configurations; True when every target holds."""
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        audit_dir = Path(tmp)
        hosts = (
            ("pydantic-ai", pydantic_ai_runs),
            ("LangChain", langchain_runs),
            ("OpenAI Agents SDK", openai_agents_runs),
            ("Google ADK", adk_runs),
        )
        for host, build in hosts:
            ok = report(host, await measure(build(audit_dir), repeats)) and ok
    return ok


def main() -> None:
    """Parse ``--quick`` and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    args = parser.parse_args()
    logging.getLogger("google_adk").setLevel(logging.ERROR)  # a warning per model step
    ok = asyncio.run(main_async(2 if args.quick else 15))
    if not ok and not args.quick:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
