"""Folding positioned transcript records into turns, steps and recorded calls.

Understands both OpenAI chat-completions messages (``tool_calls`` / ``tool`` messages) and
Anthropic messages (``tool_use`` / ``tool_result`` blocks), even mixed in one file. Every problem
becomes a `TranscriptIssue` and the message (or the one bad call) is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._replay_json import Record
from ._replay_types import (
    E_ARGS,
    E_MESSAGE,
    E_RESULT,
    RecordedCall,
    RecordedStep,
    RecordedTurn,
    TranscriptIssue,
)

__all__ = ["TurnBuilder", "content_text"]


def content_text(content: object) -> str | None:
    """The text of a content value: a string, or a list of text parts/blocks."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") in ("image", "image_url", "input_image"):
                    parts.append("[image]")
        return "\n".join(parts)
    return None


@dataclass(slots=True)
class _CallDraft:
    index: int
    turn: int
    message_index: int
    line: int | None
    id: str
    tool: str
    arguments: str
    args_valid: bool
    result: str | None = None
    result_is_error: bool = False

    def freeze(self) -> RecordedCall:
        return RecordedCall(
            index=self.index,
            turn=self.turn,
            message_index=self.message_index,
            line=self.line,
            id=self.id,
            tool=self.tool,
            arguments=self.arguments,
            args_valid=self.args_valid,
            result=self.result,
            result_is_error=self.result_is_error,
        )


@dataclass(slots=True)
class _TurnDraft:
    index: int
    input: str
    message_index: int | None
    steps: list[tuple[str | None, list[_CallDraft]]] = field(default_factory=list)
    answer: str | None = None
    answered: bool = False


class TurnBuilder:
    """Folds records into turns, collecting issues."""

    __slots__ = ("anthropic", "calls", "issues", "pending", "system", "turns")

    def __init__(self, issues: list[TranscriptIssue], system: object = None) -> None:
        """Start with no turns; ``system`` is a raw top-level system value, if any."""
        self.issues = issues
        self.system = content_text(system)
        self.turns: list[_TurnDraft] = []
        self.calls: list[_CallDraft] = []
        self.pending: dict[str, _CallDraft] = {}
        self.anthropic = False

    def issue(self, code: str, record: Record, message: str) -> None:
        self.issues.append(
            TranscriptIssue(code, message, message_index=record.index, line=record.line)
        )

    def add(self, record: Record) -> None:
        msg = record.value
        if not isinstance(msg, dict):
            self.issue(E_MESSAGE, record, f"a message must be a JSON object, not {_kind(msg)}")
            return
        role = msg.get("role")
        content = msg.get("content")
        if role == "function" or "function_call" in msg:
            self.issue(
                E_MESSAGE, record, "legacy function_call messages are not supported; use tool_calls"
            )
        elif role in ("system", "developer"):
            if self.system is None:
                self.system = content_text(content)
        elif role == "user":
            self._user(record, content)
        elif role == "assistant":
            self._assistant(record, msg, content)
        elif role == "tool":
            self._tool_message(record, msg)
        else:
            self.issue(E_MESSAGE, record, f"unknown message role {role!r}")

    def _turn(self) -> _TurnDraft:
        if not self.turns or self.turns[-1].answered:
            self.turns.append(_TurnDraft(len(self.turns), "", None))
        return self.turns[-1]

    def _user(self, record: Record, content: object) -> None:
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            self.anthropic = True
            for block in results:
                self._result(record, block.get("tool_use_id"), block.get("content"), block)
            return
        text = content_text(content)
        if text is None:
            self.issue(E_MESSAGE, record, "user content must be a string or a list of parts")
            text = ""
        self.turns.append(_TurnDraft(len(self.turns), text, record.index))

    def _assistant(self, record: Record, msg: dict[str, Any], content: object) -> None:
        turn = self._turn()
        calls: list[_CallDraft] = []
        attempted = False
        raw_calls = msg.get("tool_calls")
        if isinstance(raw_calls, list):
            attempted = bool(raw_calls)
            for k, raw in enumerate(raw_calls):
                self._openai_call(record, turn, k, raw, calls)
        elif raw_calls is not None:
            attempted = True
            self.issue(E_MESSAGE, record, "tool_calls must be a JSON array")
        if isinstance(content, list):
            for k, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.anthropic = attempted = True
                    self._anthropic_call(record, turn, k, block, calls)
        elif content is not None and not isinstance(content, str):
            self.issue(E_MESSAGE, record, "assistant content must be a string, a list or null")
        text = content_text(content)
        if calls:
            turn.steps.append((text or None, calls))
        elif not attempted:  # no tool calls: the model answered
            turn.answer = text or ""
            turn.answered = True
        # else every proposed call was unreadable (issues recorded): nothing to replay

    def _new_call(
        self, record: Record, turn: _TurnDraft, call_id: object, tool: str, args: str, ok: bool
    ) -> _CallDraft:
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_m{record.index}_{len(self.calls)}"
        draft = _CallDraft(
            len(self.calls), turn.index, record.index, record.line, call_id, tool, args, ok
        )
        self.calls.append(draft)
        self.pending[call_id] = draft
        return draft

    def _openai_call(
        self, record: Record, turn: _TurnDraft, k: int, raw: object, calls: list[_CallDraft]
    ) -> None:
        where = f"tool_calls[{k}]"
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(fn, dict):
            self.issue(E_MESSAGE, record, f'{where} must be an object with a "function" object')
            return
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            self.issue(E_MESSAGE, record, f"{where}.function.name must be a non-empty string")
            return
        arguments = fn.get("arguments", "")
        if isinstance(arguments, dict):  # some exports store the parsed object
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            self.issue(E_ARGS, record, f"{where} ({name}): arguments must be JSON text")
            arguments = json.dumps(arguments)
        ok = self._check_args(record, f"{where} ({name})", arguments)
        calls.append(self._new_call(record, turn, raw.get("id"), name, arguments, ok))

    def _anthropic_call(
        self,
        record: Record,
        turn: _TurnDraft,
        k: int,
        block: dict[str, Any],
        calls: list[_CallDraft],
    ) -> None:
        where = f"content[{k}]"
        name = block.get("name")
        if not isinstance(name, str) or not name:
            self.issue(E_MESSAGE, record, f'{where}: tool_use needs a non-empty "name"')
            return
        raw_input = block.get("input", {})
        if isinstance(raw_input, str):
            arguments = raw_input
            ok = self._check_args(record, f"{where} ({name})", arguments)
        else:
            arguments = json.dumps(raw_input, ensure_ascii=False)
            ok = isinstance(raw_input, dict)
            if not ok:
                self.issue(
                    E_ARGS,
                    record,
                    f"{where} ({name}): input must be a JSON object, not {_kind(raw_input)}",
                )
        calls.append(self._new_call(record, turn, block.get("id"), name, arguments, ok))

    def _check_args(self, record: Record, where: str, arguments: str) -> bool:
        if not arguments.strip():
            return True  # providers send "" for a call without arguments
        try:
            value = json.loads(arguments)
        except RecursionError:
            self.issue(E_ARGS, record, f"{where}: arguments are nested too deeply to read")
            return False
        except json.JSONDecodeError as exc:
            self.issue(
                E_ARGS,
                record,
                f"{where}: arguments are not valid JSON ({exc.msg} at character {exc.pos} of "
                f"{arguments[:60]!r})",
            )
            return False
        if not isinstance(value, dict):
            self.issue(
                E_ARGS, record, f"{where}: arguments must be a JSON object, not {_kind(value)}"
            )
            return False
        return True

    def _tool_message(self, record: Record, msg: dict[str, Any]) -> None:
        self._result(record, msg.get("tool_call_id"), msg.get("content"), msg)

    def _result(
        self, record: Record, call_id: object, content: object, source: Mapping[str, Any]
    ) -> None:
        if not isinstance(call_id, str) or not call_id:
            self.issue(E_RESULT, record, "a tool result needs the id of its tool call")
            return
        draft = self.pending.pop(call_id, None)
        if draft is None:
            self.issue(E_RESULT, record, f"tool result for unknown call id {call_id!r}")
            return
        text = content_text(content)
        draft.result = text if text is not None else json.dumps(content)
        draft.result_is_error = source.get("is_error") is True

    def finish(self) -> tuple[RecordedTurn, ...]:
        return tuple(
            RecordedTurn(
                index=t.index,
                input=t.input,
                message_index=t.message_index,
                steps=tuple(
                    RecordedStep(text, tuple(c.freeze() for c in calls)) for text, calls in t.steps
                ),
                answer=t.answer if t.answered else None,
            )
            for t in self.turns
        )


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
