"""A real turn whose model and tool write hostile text, kept in an SQLite store and audit log.

Every field a model or a tool controls holds markup: the arguments, the result, the name of a
tool the model made up, the user input, the conversation id (a ``javascript:`` URL), a policy's
reason quoting the arguments, and a look-alike of the console's own "chain intact" banner.
"""

from __future__ import annotations

import json
from pathlib import Path

from middleware import ToolPolicy
from middleware.audit import AuditLog, AuditSink, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall, Usage
from pipeline.stores import SqliteStore, TurnStore
from pipeline.testing import ScriptedModel

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=2">'
LINK = '<a href="javascript:window.__pwned=3">click me</a>'
LOOK_ALIKE = '</pre><p class="chain ok" id="chain">Audit chain intact: 999 rows verified.</p>'
HOSTILE = SCRIPT + IMG + LINK + LOOK_ALIKE
CONVERSATION = "javascript:window.__pwned=4"
MADE_UP_TOOL = "<img src=x onerror=window.__pwned=5>"


@tool
def echo(text: str) -> str:
    """Say ``text`` back (the hostile result)."""
    return f"echo: {text}"


@tool
def shell_run(cmd: str) -> str:
    """Never runs: the policy denies ``shell*``."""
    return cmd


def _call(call_id: str, name: str, **args: object) -> ProposedToolCall:
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps(args))


async def hostile_turn(folder: Path) -> tuple[Path, Path, str]:
    """Run the turn on SQLite; return the audit log's path, the store's path and the turn id."""
    audit, store_path = folder / "audit.sqlite", folder / "agent.db"
    async with SqliteStore(store_path) as store:
        turn_id = await run_hostile_turn(store, SqliteAuditSink(audit))
    return audit, store_path, turn_id


async def run_hostile_turn(store: TurnStore, sink: AuditSink) -> str:
    """Run the turn with ``store`` and ``sink`` (closed at the end); return its id."""
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    _call("c1", "echo", text=HOSTILE),
                    _call("c2", "shell_run", cmd=HOSTILE),
                    _call("c3", MADE_UP_TOOL, text=HOSTILE),
                ],
                usage=Usage(input_tokens=12, output_tokens=7),
            ),
            ModelResponse(text=f"done {HOSTILE}", usage=Usage(input_tokens=20, output_tokens=3)),
        ]
    )
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[echo, shell_run],
        middleware=[ToolPolicy(deny=["shell*"]), AuditLog(sink)],
        store=store,
    )
    try:
        result = await runner.run(f"please {HOSTILE}", conversation_id=CONVERSATION)
    finally:
        sink.close()
    return result.turn_id
