"""What the console shows, as values: audit rows, stored calls and waiting gates read into views.

Nothing here imports the web parts (Starlette, Jinja2): the pages render these values, and the
tests read them without a browser. Every text a model or a tool wrote (arguments, results,
reasons, inputs) stays a plain ``str`` here; the templates escape it (autoescape on).

Turns are read from the audit chain: each ``tool_call`` row (an ``amended`` row replaces it) is
a call of its turn, in chain order, and a ``turn`` row ends the turn. A turn with calls but no
``turn`` row is still running; a turn a gate holds is waiting. The store, when given, adds each
call's result preview (the chain keeps arguments and decisions, not results).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from middleware.audit import AuditRow, AuditVerification
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.durable import WaitingGate

from ._console_hooks import HookApproval
from ._console_views import (
    AnswerView,
    CallView,
    ChainView,
    DecisionView,
    GateView,
    HookView,
    TurnView,
)

__all__ = [
    "PREVIEW_CHARS",
    "answers_of",
    "calls_of",
    "chain_view",
    "gate_views",
    "hook_view",
    "pretty_json",
    "result_preview",
    "turns_of",
    "usage_text",
    "waited_text",
]

PREVIEW_CHARS = 2000
"""How much of a result the turn page shows."""


def pretty_json(text: str | None) -> str:
    """Canonical JSON text indented for reading (the text itself when it does not parse)."""
    if text is None:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return text


def _decisions(text: str | None) -> tuple[DecisionView, ...]:
    try:
        found = json.loads(text) if text else []
    except ValueError:
        return ()
    if not isinstance(found, list):
        return ()
    return tuple(
        DecisionView(
            action=str(d.get("action", "")),
            policy=str(d.get("policy", "")),
            reason=str(d.get("reason") or ""),
            when=str(d.get("when", "")),
        )
        for d in found
        if isinstance(d, Mapping)
    )


def calls_of(rows: Iterable[AuditRow]) -> list[CallView]:
    """Each call of the chain, in the order it was first stored (an amendment replaces it)."""
    calls: dict[tuple[str, str], CallView] = {}
    for row in rows:
        e = row.entry
        if e.kind not in ("tool_call", "amended") or e.call_id is None:
            continue
        calls[(e.turn_id, e.call_id)] = CallView(
            row=row.index,
            call_id=e.call_id,
            tool=e.tool or "",
            turn_id=e.turn_id,
            conversation_id=e.conversation_id,
            verdict=e.decision or "",
            ran=e.ran,
            duration_ms=e.duration_ms,
            is_error=e.is_error,
            args=pretty_json(e.args),
            decisions=_decisions(e.decisions),
        )
    return list(calls.values())


def turns_of(
    rows: Sequence[AuditRow],
    *,
    waiting: Iterable[str] = (),
    usage: Mapping[str, str] | None = None,
) -> list[TurnView]:
    """The chain's turns, latest first; ``waiting`` names the turns a gate holds now."""
    held = set(waiting)
    calls: dict[str, list[CallView]] = {}
    for call in calls_of(rows):
        calls.setdefault(call.turn_id, []).append(call)
    ended = {row.entry.turn_id: row for row in rows if row.entry.kind == "turn"}
    order: list[str] = []
    for row in rows:
        turn_id = row.entry.turn_id
        if turn_id and turn_id not in order and (turn_id in calls or turn_id in ended):
            order.append(turn_id)
    order += sorted(held.difference(order))
    turns = []
    for turn_id in order:
        mine = tuple(calls.get(turn_id, ()))
        end = ended.get(turn_id)
        entry = end.entry if end is not None else None
        status = (
            entry.status or "completed"
            if entry is not None
            else "waiting"
            if turn_id in held
            else "running"
        )
        conversation = entry.conversation_id if entry is not None else None
        if conversation is None and mine:
            conversation = mine[0].conversation_id
        turns.append(
            TurnView(
                turn_id=turn_id,
                conversation_id=conversation,
                status=status,
                input=entry.input if entry is not None else None,
                duration_ms=entry.duration_ms if entry is not None else None,
                error=entry.error if entry is not None else None,
                usage=(usage or {}).get(turn_id),
                calls=mine,
                ended_at=entry.recorded_at if entry is not None else None,
            )
        )
    turns.reverse()
    return turns


def answers_of(rows: Iterable[AuditRow]) -> list[AnswerView]:
    """The gates answered from the console, latest first."""
    found = [
        AnswerView(
            row=row.index,
            gate_id=row.entry.checksum or "",
            turn_id=row.entry.turn_id,
            tool=row.entry.tool,
            decision=row.entry.decision or "",
            who=row.entry.policy or "",
            reason=row.entry.reason,
            recorded_at=row.entry.recorded_at,
        )
        for row in rows
        if row.entry.kind == "answer"
    ]
    found.reverse()
    return found


def gate_views(gates: Iterable[WaitingGate]) -> list[GateView]:
    """The waiting gates as the approvals page shows them, in the order given."""
    views = []
    for gate in gates:
        payload = gate["payload"]
        held: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
        shown = held.get("args", payload)
        tool, call_id = held.get("tool"), held.get("call_id")
        views.append(
            GateView(
                gate_id=gate["gate_id"],
                turn_id=gate["gate_id"].rpartition(":gate-")[0],
                tool=tool if isinstance(tool, str) else None,
                call_id=call_id if isinstance(call_id, str) else None,
                reason=gate["reason"],
                args=json.dumps(shown, indent=2, ensure_ascii=False, sort_keys=True, default=str),
            )
        )
    return views


def waited_text(seconds: float) -> str:
    """A wait as text: ``42 s``, ``3 min 5 s``, ``2 h 1 min``."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def hook_view(approval: HookApproval) -> HookView:
    """An MCP gateway approval as the approvals page shows it."""
    return HookView(
        hook_id=approval.hook_id,
        tool=approval.tool,
        call_id=approval.call_id,
        args=json.dumps(approval.args, indent=2, ensure_ascii=False, sort_keys=True, default=str),
        reason=approval.reason,
        principal=approval.principal,
        conversation=approval.conversation,
        received_at=approval.received_at,
        waited=waited_text(approval.waited()),
    )


def chain_view(found: AuditVerification) -> ChainView:
    """The verification as the pages show it."""
    return ChainView(
        ok=found.ok,
        rows_checked=found.rows_checked,
        first_bad_row=found.first_bad_row,
        reason=found.reason,
        text=found.explain(),
    )


def result_preview(call: ToolCall) -> str:
    """The start of a stored call's result, as text (`PREVIEW_CHARS` at most)."""
    results = call.results
    if isinstance(results, str):
        text = results
    elif isinstance(results, SpooledArtifact):
        try:
            text = results.as_string()
        except Exception:  # the body's spool is not open here: say so, do not fail the page
            text = f"({type(results).__name__}: its body is in the spool)"
    else:
        text = f"({type(results).__name__})"
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


def _walk(data: object, *path: str) -> object:
    for part in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def usage_text(stash: Mapping[str, Any]) -> str | None:
    """A durable turn's token usage, from its final stash (``loopware.usage``)."""
    usage = _walk(stash, "loopware", "usage")
    if not isinstance(usage, Mapping):
        usage = stash.get("loopware.usage")
    if not isinstance(usage, Mapping):
        return None
    inp, out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    calls = usage.get("calls")
    text = f"{inp} in, {out} out"
    return f"{text} ({calls} model calls)" if calls else text
