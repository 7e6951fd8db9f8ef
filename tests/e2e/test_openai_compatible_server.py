"""End to end over a real socket: the official `openai` client, driven by `TurnRunner`, talks to
a tiny OpenAI-compatible server on 127.0.0.1 (no call ids, arguments as objects, streaming)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from middleware import ToolCallLimit, ToolPolicy
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.events import ModelTextDelta
from pipeline.models import infer_model

from .compat_server import CompatServer, Reply

searches: list[str] = []
opened: list[Any] = []


@pytest.fixture(autouse=True)
async def close_models() -> AsyncIterator[None]:
    """Every model a test builds has its client's connections closed."""
    yield
    while opened:
        await opened.pop().aclose()


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    searches.append(query)
    return f"3 articles about {query}"


@tool
def shell(cmd: str) -> str:
    """Run a shell command."""
    raise AssertionError("a denied tool's handler must never run")


def brain(body: dict[str, Any]) -> Reply:
    """First a denied shell call, then a search, then the answer (once a search result is in)."""
    messages = body["messages"]
    said = [m for m in messages if m["role"] == "tool"]
    if messages[-1]["role"] == "user" and "slow" in str(messages[-1]["content"]):
        return Reply(text="never sent", delay=10.0)
    if not said:
        return Reply(tool="shell", arguments={"cmd": "rm -rf /"})
    if len(said) == 1:
        return Reply(tool="search", arguments={"query": "refunds"})
    return Reply(text="Refunds take five days to reach your card.")


def runner_for(server: CompatServer) -> TurnRunner:
    model = infer_model(f"openai-compatible:brain@{server.base_url}")
    opened.append(model)
    return TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[search, shell],
        middleware=[ToolPolicy(deny=["shell"]), ToolCallLimit({"search": 1})],
        system_prompt="You are a support agent.",
    )


async def test_a_real_client_runs_a_turn_with_policies_against_a_local_server() -> None:
    """Ids are minted for a server that sends none, the denied tool never runs, and the next
    request carries each result in its envelope under the id the assistant message used."""
    searches.clear()
    async with CompatServer(brain) as server:
        result = await runner_for(server).run("How long do refunds take?")
    assert result.status == "completed", result.errors
    assert result.output == "Refunds take five days to reach your card."
    assert searches == ["refunds"]
    denied, searched = result.tool_calls
    assert (denied.verdict, denied.ran, denied.is_error) == ("denied", False, True)
    assert str(denied.results).startswith(
        "Error: E_TOOL_UNAVAILABLE: tool 'shell' is no longer available in this turn "
        "(loopware.policy: matches deny pattern 'shell')"
    )
    assert (searched.verdict, searched.ran, searched.is_error) == ("allowed", True, False)
    third = server.requests[2]["messages"]
    assistant = [m for m in third if m["role"] == "assistant"]
    tool_messages = [m for m in third if m["role"] == "tool"]
    announced = [c["id"] for m in assistant for c in m["tool_calls"]]
    assert announced == [denied.id, searched.id]
    assert [m["tool_call_id"] for m in tool_messages] == announced
    assert "<untrusted_content_" in tool_messages[1]["content"]
    assert "3 articles about refunds" in tool_messages[1]["content"]
    assert third[0] == {"role": "system", "content": "You are a support agent."}
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["search"]
    assert result.usage.input_tokens == 36
    assert result.usage.output_tokens == 15


async def test_a_streamed_answer_arrives_as_text_deltas_and_the_same_result() -> None:
    """With a listener, the client streams: deltas in order, tool arguments assembled."""
    searches.clear()
    deltas: list[ModelTextDelta] = []
    async with CompatServer(brain) as server:
        runner = runner_for(server)
        runner.on(ModelTextDelta, deltas.append)
        result = await runner.run("How long do refunds take?")
    assert all(body.get("stream") for body in server.requests)
    assert result.status == "completed", result.errors
    assert searches == ["refunds"]
    assert "".join(d.text for d in deltas) == result.output
    assert len(deltas) > 3
    assert {d.iteration for d in deltas} == {2}


async def test_aborting_a_turn_cancels_the_request_in_flight() -> None:
    """An abort while the server thinks ends the turn at once and hangs up the connection."""
    async with CompatServer(brain) as server:
        handle = runner_for(server).start("be slow")
        while not server.requests:
            await asyncio.sleep(0.01)
        started = time.perf_counter()
        handle.abort("user left")
        result = await handle
        elapsed = time.perf_counter() - started
        for _ in range(100):
            if server.hung_up:
                break
            await asyncio.sleep(0.01)
    assert result.status == "aborted"
    assert result.abort_reason == "user left"
    assert elapsed < 1.0
    assert server.hung_up == 1


async def test_loopware_run_prints_a_real_turn(tmp_path: Path) -> None:
    """`loopware run` drives the local server: the answer, each call labelled with its record's
    verdict (the refused shell call reads denied, never allowed), the usage."""
    (tmp_path / "support_tools.py").write_text(
        "from middleware import ToolPolicy\n"
        "from tests.e2e.test_openai_compatible_server import search, shell\n"
        "TOOLS = [search, shell]\n"
        "def stack():\n"
        "    return [ToolPolicy(deny=['shell'])]\n",
        encoding="utf-8",
    )
    root = Path(__file__).resolve().parents[2]
    async with CompatServer(brain) as server:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "loopware_cli",
            "run",
            "How long do refunds take?",
            "--model",
            f"openai-compatible:brain@{server.base_url}",
            "--tools",
            "support_tools:TOOLS",
            "-m",
            "support_tools:stack",
            "--plain",
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{tmp_path}"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
    text = out.decode()
    assert process.returncode == 0, err.decode()
    assert "assistant: Refunds take five days to reach your card." in text
    lines = text.splitlines()
    withdrawn = "tool shell withdrawn - tool policy: matches deny pattern 'shell' [loopware.policy]"
    assert f"  {withdrawn}" in lines
    decisions = [line.strip() for line in lines if line.startswith("    decision: ")]
    assert decisions == [
        "decision: denied - tool policy: the tool was withdrawn: matches deny pattern 'shell' "
        "[loopware.policy]",
        "decision: allowed",
    ]
    assert "tokens        36 in (0 cached), 15 out (0 reasoning)" in text
    assert json.loads(json.dumps(server.requests[0]["messages"][-1]))["content"] == (
        "How long do refunds take?"
    )
