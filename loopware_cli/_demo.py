"""``loopware demo``: a scripted support-agent turn through a realistic policy stack.

No network and no keys: a `ScriptedModel` plays the agent. The stack is `ToolPolicy` (shell tools
are never offered), `RepetitionDetector` (a third identical search hides ``search_kb``),
`ToolCallLimit` (one refund per turn) and `AuditLog` writing a hash-chained SQLite file: a new
temporary file unless ``--audit PATH`` names one (recreated on every run); the output says where.
Each iteration is printed as it ends, with what the model was offered, every call, its result and
the stack's decision; a summary table follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final, TextIO

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, AuditRow, AuditVerification, SqliteAuditSink
from middleware.transcripts import policy_labels
from pipeline import Tool, ToolLoopExecutor, TurnResult, TurnRunner, tool
from pipeline.errors import LoopError, MissingExtraError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

from ._live import LiveOutput
from ._style import Style

__all__ = ["run_demo", "temporary_audit_path"]

USER_INPUT: Final = (
    "Hi, I was charged twice for order NW-20417 ($64.90 each time). "
    "Can you refund the duplicate charge?"
)

_ORDER: Final = {
    "order_id": "NW-20417",
    "customer_id": "cus_3310",
    "status": "delivered",
    "total": 64.9,
    "payments": [{"id": "pay_8841", "amount": 64.9}, {"id": "pay_8842", "amount": 64.9}],
}
_KB: Final = "KB-112 Duplicate charges: refund the later payment in full. No approval under $200."


def demo_tools() -> list[Tool[Any]]:
    """The support agent's tools (built on demand, so ``replay`` never pays for them)."""

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up by id: status, customer and payments."""
        return json.dumps(_ORDER) if order_id == _ORDER["order_id"] else f"no order {order_id}"

    @tool
    def search_kb(query: str) -> str:
        """Search the help-centre knowledge base."""
        return _KB

    @tool
    def issue_refund(payment_id: str, amount: float, reason: str) -> str:
        """Refund a payment, in full or in part."""
        return json.dumps({"refund_id": "re_5521", "payment_id": payment_id, "status": "pending"})

    @tool
    def send_email(customer_id: str, template: str) -> str:
        """Send the customer a templated email."""
        return "queued"

    @tool
    def shell_exec(command: str) -> str:
        """Run a shell command on the support server."""
        raise RuntimeError("the tool policy removes shell_exec, so this never runs")

    return [lookup_order, search_kb, issue_refund, shell_exec, send_email]


def demo_script() -> list[ModelResponse]:
    """What the scripted agent does: look up, search three times, try a shell, refund, email."""

    def call(n: int, name: str, **args: object) -> ProposedToolCall:
        return ProposedToolCall(f"call_{n}", name, json.dumps(args))

    search = {"query": "duplicate charge refund"}
    psql = "psql -c \"select * from payments where order_id = 'NW-20417'\""
    refund = {"payment_id": "pay_8842", "amount": 64.9, "reason": "duplicate charge"}
    return [
        ModelResponse(
            text="Let me look that order up.",
            tool_calls=[call(1, "lookup_order", order_id="NW-20417")],
        ),
        ModelResponse(tool_calls=[call(2, "search_kb", **search)]),
        ModelResponse(tool_calls=[call(3, "search_kb", **search)]),
        ModelResponse(tool_calls=[call(4, "search_kb", **search)]),
        ModelResponse(
            text="Checking the payments table.", tool_calls=[call(5, "shell_exec", command=psql)]
        ),
        ModelResponse(tool_calls=[call(6, "issue_refund", **refund)]),
        ModelResponse(
            tool_calls=[call(7, "send_email", customer_id="cus_3310", template="refund_done")]
        ),
        ModelResponse(
            text="Done: I refunded the duplicate charge of $64.90 (payment pay_8842). "
            "A confirmation email is on its way."
        ),
    ]


def _offered_by(model: ScriptedModel) -> Callable[[int], str]:
    def offered(iteration: int) -> str:
        requests = model.requests
        if iteration >= len(requests):
            return "-"
        return ", ".join(t["name"] for t in requests[iteration].tools)

    return offered


def _remove_database(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


def _tally(words: Iterable[str]) -> str:
    """``6 allowed, 1 denied``: how many of each word, most first (then by name)."""
    counts = Counter(words)
    return ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda i: (-i[1], i[0])))


_ROW_KINDS: Final = {
    "tool_call": ("call", "calls"),
    "tool": ("tool decision", "tool decisions"),
    "turn": ("turn end", "turn ends"),
}


def _row_kinds(rows: list[AuditRow]) -> str:
    """``7 calls (6 allowed, 1 denied) + 3 tool decisions (2 hidden, 1 withdrawn) + 1 turn end``.

    Every row is counted in exactly one kind, so the kinds add up to the number of rows; the
    words in brackets (a call's verdict, a tool decision's action) add up to their kind's count.
    """
    kinds: dict[str, list[str | None]] = {}
    for row in rows:
        kinds.setdefault(row.entry.kind, []).append(row.entry.decision)
    parts = []
    for kind, words in kinds.items():
        one, many = _ROW_KINDS.get(kind, (kind, f"{kind}s"))
        part = f"{len(words)} {one if len(words) == 1 else many}"
        if kind in ("tool_call", "tool"):
            part += f" ({_tally(w or 'undecided' for w in words)})"
        parts.append(part)
    return " + ".join(parts)


def _summary(
    result: TurnResult,
    rows: list[AuditRow],
    verified: AuditVerification,
    style: Style,
    audit_path: str,
    repetition: str,
) -> list[tuple[str, str]]:
    """The summary table's rows, read from the turn's records; the audit file's rows counted.

    A call's word is its record's verdict (as the live lines above and ``loopware replay``
    say); ``repetition`` is the `RepetitionDetector`'s name, whose decisions are the repeats.
    """
    calls = result.tool_calls
    tools = result.tool_decisions
    repeats = [
        c.tool
        for c in calls
        if any(d.policy == repetition for d in c.decisions)
        or any(t.policy == repetition and t.call_id == c.id for t in tools)
    ]
    refused = [f"{c.tool} {c.verdict}" for c in calls if not c.ran]
    duration_ms = (result.ended_at - result.started_at).total_seconds() * 1000.0
    status = style.verdict(result.status, key="ok" if result.ok else "failed")
    verdicts = _tally(c.verdict for c in calls)
    decided = ", ".join(f"{t.tool} {t.action}" for t in tools)
    return [
        ("turn", f"{status} in {result.iterations} iterations, {duration_ms:.0f} ms"),
        ("tool calls", f"{len(calls)} ({verdicts or 'none'})"),
        ("repeats caught", f"{len(repeats)} ({', '.join(repeats) or '-'})"),
        ("tool decisions", f"{len(tools)} ({decided or '-'})"),
        ("calls not run", f"{len(refused)} ({', '.join(refused) or '-'})"),
        ("audit rows", f"{len(rows)} = {_row_kinds(rows)}" if rows else "0"),
        (
            "audit verified",
            style.verdict("yes")
            if verified
            else style.verdict(f"no: row {verified.first_bad_row} is broken", key="no"),
        ),
    ]


def temporary_audit_path() -> str:
    """A fresh ``audit.sqlite`` path in a new directory under the system's temporary folder."""
    return str(Path(tempfile.mkdtemp(prefix="loopware-demo-")) / "audit.sqlite")


def run_demo(
    out: TextIO,
    *,
    plain: bool = False,
    audit_path: str | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the demo, printing to ``out`` (errors to ``err``, default stderr).

    ``audit_path`` is where the audit database goes (recreated); None writes a temporary file.

    Returns:
        0, or 1 when the audit file cannot be written, the turn did not complete or the audit
        chain does not verify.
    """
    err = sys.stderr if err is None else err
    started = time.perf_counter()
    style = Style.for_stream(out, plain=plain)
    policy = ToolPolicy(deny=["shell*"])
    repetition = RepetitionDetector(threshold=3, on_repeat="hide")
    limit = ToolCallLimit({"issue_refund": 1})
    temporary = audit_path is None
    try:
        if audit_path is None:
            audit_path = temporary_audit_path()
        _remove_database(audit_path)
        sink = SqliteAuditSink(audit_path)
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except (OSError, LoopError) as exc:
        print(f"loopware demo: error: cannot write the audit file {audit_path!r}: {exc}", file=err)
        return 1
    try:
        model = ScriptedModel(demo_script())
        runner = TurnRunner(
            executor=ToolLoopExecutor(model),
            tools=demo_tools(),
            middleware=[policy, repetition, limit, AuditLog(sink)],
            system_prompt="You are the support assistant of Northwind Outfitters.",
        )
        labels = policy_labels([policy, repetition, limit])
        LiveOutput(out, style, _offered_by(model), labels).observe(runner)
        print(
            style.paint("loopware demo: a scripted support-agent turn", "bold")
            + " (no network, no API keys)",
            file=out,
        )
        print("stack, outermost first:", file=out)
        for item, what in (
            ("ToolPolicy(deny=['shell*'])", "shell tools are never offered"),
            ("RepetitionDetector(threshold=3)", "a 3rd identical call hides the tool"),
            ("ToolCallLimit({'issue_refund': 1})", "one refund per turn"),
            ("AuditLog(SqliteAuditSink(...))", f"hash-chained audit rows in {audit_path}"),
        ):
            print(f"  {item:<36} {style.paint(what, 'dim')}", file=out)
        print(f"\n{style.paint('user', 'bold')}: {USER_INPUT}", file=out)
        result = asyncio.run(runner.run(USER_INPUT))
        print(f"{style.paint('assistant', 'bold')}: {result.output}", file=out)
        verified = sink.verify()
        try:
            rows = sink.rows()
        except ValueError:  # a row no longer parses: verify() has already located it
            rows = []
    finally:
        sink.close()
    table = _summary(result, rows, verified, style, audit_path, repetition.namespace)
    print(f"\n{style.paint('summary', 'bold')}", file=out)
    for name, value in table:
        print(f"  {name:<16}{value}", file=out)
    note = " (temporary; --audit PATH keeps it where you say)" if temporary else ""
    print(f"audit file: {audit_path}{note}", file=out)
    elapsed = (time.perf_counter() - started) * 1000.0
    print(style.paint(f"done in {elapsed:.0f} ms", "dim"), file=out)
    return 0 if result.ok and verified else 1
