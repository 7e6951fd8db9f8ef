"""Folding positioned transcript records into turns, steps and recorded calls.

Understands OpenAI chat-completions messages (``tool_calls`` / ``tool`` messages), OpenAI
Responses API items (``message``, ``function_call``, ``function_call_output``, ``reasoning``)
and Anthropic messages (``tool_use`` / ``tool_result`` / ``thinking`` blocks), even mixed in one
file, and entries wrapped as ``{"type": ..., "message": {...}}`` (coding-agent logs).
Consecutive assistant entries are one assistant message: exports that store one content block per
entry (text, then each tool call) read as the one model step they were. Only a chat-completions
message (string content) that follows one with tool calls starts a new step on its own. Every
problem becomes a `TranscriptIssue` and the entry (or the one bad call) is skipped.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any

from ._drafts import (
    LOG_ENTRY_TYPES,
    NEAR_ROLES,
    Assistant,
    CallDraft,
    TurnDraft,
    content_text,
    hosted,
    kind_of,
    take,
)
from ._json import Record
from ._types import (
    E_ARGS,
    E_MESSAGE,
    E_RESULT,
    N_SKIPPED,
    RecordedStep,
    RecordedTurn,
    TranscriptFormat,
    TranscriptIssue,
)

__all__ = ["TurnBuilder"]


class TurnBuilder:
    """Folds records into turns, collecting issues (feed with `add`, end with `finish`)."""

    __slots__ = (
        "answered",
        "calls",
        "current",
        "issues",
        "kinds",
        "pending",
        "skipped",
        "system",
        "turns",
        "used_ids",
    )

    def __init__(self, issues: list[TranscriptIssue], system: object = None) -> None:
        """Start with no turns; ``system`` is a raw top-level system value, if any."""
        self.issues = issues
        self.system = content_text(system)
        self.turns: list[TurnDraft] = []
        self.calls = 0
        self.pending: dict[str, deque[CallDraft]] = {}
        """Recorded id -> its calls still waiting for a result, oldest first."""
        self.answered: set[str] = set()
        self.skipped: set[str] = set()
        """Ids of hosted-tool items that are not replayed (their outputs are skipped too)."""
        self.used_ids: set[str] = set()
        self.current: Assistant | None = None
        self.kinds: set[TranscriptFormat] = set()

    @property
    def format(self) -> TranscriptFormat:
        """The convention seen: Responses items, else Anthropic blocks, else chat completions."""
        if "openai-responses" in self.kinds:
            return "openai-responses"
        return "anthropic" if "anthropic" in self.kinds else "openai"

    def issue(self, code: str, record: Record, message: str) -> None:
        self.issues.append(
            TranscriptIssue(code, message, message_index=record.index, line=record.line)
        )

    def add(self, record: Record) -> None:
        """Fold one decoded entry in."""
        msg = record.value
        if not isinstance(msg, dict):
            self.flush()
            self.issue(E_MESSAGE, record, f"a message must be a JSON object, not {kind_of(msg)}")
            return
        inner = msg.get("message")
        if "role" not in msg and isinstance(inner, dict) and "role" in inner:
            msg = inner  # a log entry wrapping the message: {"type": "assistant", "message": ...}
        role = msg.get("role")
        kind = msg.get("type")
        if role == "assistant" and "function_call" not in msg:
            if kind == "message":
                self.kinds.add("openai-responses")
            self._assistant(record, msg)
        elif role is None and kind in ("function_call", "reasoning"):
            self.kinds.add("openai-responses")
            if kind == "function_call":
                self._function_call_item(record, msg)
            else:
                self._part()  # reasoning opens the response its calls and text belong to
        elif role is None and isinstance(kind, str) and hosted(kind) and kind.endswith("_call"):
            self._part()  # a hosted tool's call is part of the model's response
            self._item_type(record, msg, kind)
        else:
            self.flush()
            self._other(record, msg, role, kind)

    def _other(self, record: Record, msg: dict[str, Any], role: object, kind: object) -> None:
        content = msg.get("content")
        if role is None and kind == "function_call_output":
            self.kinds.add("openai-responses")
            self._result(record, msg.get("call_id"), msg.get("output"), msg)
        elif role is None and isinstance(kind, str):
            self._item_type(record, msg, kind)
        elif role == "function" or "function_call" in msg:
            self.issue(
                E_MESSAGE, record, "legacy function_call messages are not supported; use tool_calls"
            )
        elif role in ("system", "developer"):
            if kind == "message":
                self.kinds.add("openai-responses")
            if self.system is None:
                self.system = content_text(content)
        elif role == "user":
            if kind == "message":
                self.kinds.add("openai-responses")
            self._user(record, content)
        elif role == "tool":
            self._tool_message(record, msg)
        elif role is None:
            hint = ' (Gemini "parts" are not supported)' if "parts" in msg else ""
            self.issue(
                E_MESSAGE,
                record,
                f'a message needs a "role" (or a Responses API "type"){hint}; keys: '
                + ", ".join(sorted(str(k) for k in msg)[:8]),
            )
        elif isinstance(role, str) and role in NEAR_ROLES:
            self.issue(
                E_MESSAGE,
                record,
                f"unknown message role {role!r}: did you mean {NEAR_ROLES[role]!r}? (loopware "
                "reads OpenAI and Anthropic roles: system, developer, user, assistant, tool)",
            )
        else:
            self.issue(E_MESSAGE, record, f"unknown message role {role!r}")

    def _item_type(self, record: Record, msg: dict[str, Any], kind: str) -> None:
        """A Responses API (or log) item that is neither a message nor a function call."""
        if hosted(kind):
            self.kinds.add("openai-responses")
            call_id = msg.get("call_id") or msg.get("id")
            if isinstance(call_id, str):
                self.skipped.add(call_id)
            self.issue(
                N_SKIPPED,
                record,
                f"a {kind!r} item is not replayed (replay covers function tools only)",
            )
        elif kind in LOG_ENTRY_TYPES:
            self.issue(N_SKIPPED, record, f"a {kind!r} log entry is not a message: skipped")
        else:
            self.issue(
                E_MESSAGE,
                record,
                f"unknown item type {kind!r} (expected a message with a role, or a Responses "
                "API message, function_call, function_call_output or reasoning item)",
            )

    def _turn(self) -> TurnDraft:
        if not self.turns or self.turns[-1].answered:
            self.turns.append(TurnDraft(len(self.turns), "", None))
        return self.turns[-1]

    def _part(self) -> Assistant:
        current = self.current
        if current is None:
            current = self.current = Assistant(self._turn())
        return current

    def flush(self) -> None:
        """End the assistant message being assembled: one step, or the turn's answer."""
        current = self.current
        if current is None:
            return
        self.current = None
        text = "\n".join(t for t in current.texts if t) or None
        if current.calls:
            current.turn.steps.append((text, current.calls))
        elif current.said and not current.attempted:  # no tool calls: the model answered
            current.turn.answer = text or ""
            current.turn.answered = True
        # else every proposed call was unreadable (issues recorded): nothing to replay

    def _user(self, record: Record, content: object) -> None:
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            self.kinds.add("anthropic")
            for block in results:
                self._result(record, block.get("tool_use_id"), block.get("content"), block)
            return
        text = content_text(content)
        if text is None:
            self.issue(E_MESSAGE, record, "user content must be a string or a list of parts")
            text = ""
        self.turns.append(TurnDraft(len(self.turns), text, record.index))

    def _assistant(self, record: Record, msg: dict[str, Any]) -> None:
        content = msg.get("content")
        current = self.current
        if current is not None and current.calls and not isinstance(content, list):
            # a whole chat-completions message after one that proposed calls (their results
            # are missing): a new model step, not more blocks of the same message
            self.flush()
        part = self._part()
        part.said = True
        raw_calls = msg.get("tool_calls")
        if isinstance(raw_calls, list):
            part.attempted |= bool(raw_calls)
            for k, raw in enumerate(raw_calls):
                self._openai_call(record, part, k, raw)
        elif raw_calls is not None:
            part.attempted = True
            self.issue(E_MESSAGE, record, "tool_calls must be a JSON array")
        if isinstance(content, list):
            for k, block in enumerate(content):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind == "tool_use" and isinstance(block, dict):
                    self.kinds.add("anthropic")
                    part.attempted = True
                    self._anthropic_call(record, part, k, block)
                elif kind in ("thinking", "redacted_thinking"):
                    self.kinds.add("anthropic")
                elif kind == "tool_result":
                    self.issue(
                        E_MESSAGE,
                        record,
                        f"content[{k}]: a tool_result block belongs in a user message, not an "
                        "assistant one",
                    )
        elif content is not None and not isinstance(content, str):
            self.issue(E_MESSAGE, record, "assistant content must be a string, a list or null")
        text = content_text(content)
        if text:
            part.texts.append(text)

    def _new_call(
        self, record: Record, part: Assistant, call_id: object, tool: str, args: str, ok: bool
    ) -> None:
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_m{record.index}_{self.calls}"
        replay_id = call_id
        if replay_id in self.used_ids:  # providers reuse ids: replay each call under its own
            replay_id = f"{call_id}~{self.calls}"
        self.used_ids.add(replay_id)
        draft = CallDraft(
            self.calls,
            part.turn.index,
            record.index,
            record.line,
            call_id,
            replay_id,
            tool,
            args,
            ok,
        )
        self.calls += 1
        part.calls.append(draft)
        self.pending.setdefault(call_id, deque()).append(draft)

    def _openai_call(self, record: Record, part: Assistant, k: int, raw: object) -> None:
        where = f"tool_calls[{k}]"
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(fn, dict):
            hint = (
                ' (found "name" at the top level: a Responses API item belongs outside tool_calls)'
                if isinstance(raw, dict) and "name" in raw
                else ""
            )
            self.issue(
                E_MESSAGE, record, f'{where} must be an object with a "function" object{hint}'
            )
            return
        self._named_call(record, part, where, raw.get("id"), fn.get("name"), fn, "function.name")

    def _function_call_item(self, record: Record, msg: dict[str, Any]) -> None:
        part = self._part()
        part.attempted = True
        call_id = msg.get("call_id") or msg.get("id")
        self._named_call(record, part, "function_call", call_id, msg.get("name"), msg, "name")

    def _named_call(
        self,
        record: Record,
        part: Assistant,
        where: str,
        call_id: object,
        name: object,
        holder: Mapping[str, Any],
        name_key: str,
    ) -> None:
        if not isinstance(name, str) or not name:
            self.issue(E_MESSAGE, record, f"{where}.{name_key} must be a non-empty string")
            return
        arguments = holder.get("arguments", "")
        if isinstance(arguments, dict):  # some exports store the parsed object
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            self.issue(E_ARGS, record, f"{where} ({name}): arguments must be JSON text")
            arguments = json.dumps(arguments)
        ok = self._check_args(record, f"{where} ({name})", arguments)
        self._new_call(record, part, call_id, name, arguments, ok)

    def _anthropic_call(
        self, record: Record, part: Assistant, k: int, block: dict[str, Any]
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
                    f"{where} ({name}): input must be a JSON object, not {kind_of(raw_input)}",
                )
        self._new_call(record, part, block.get("id"), name, arguments, ok)

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
                E_ARGS, record, f"{where}: arguments must be a JSON object, not {kind_of(value)}"
            )
            return False
        return True

    def _tool_message(self, record: Record, msg: dict[str, Any]) -> None:
        call_id = msg.get("tool_call_id")
        listed = msg.get("tool_call_ids")
        if call_id is None and isinstance(listed, list) and listed:
            # trajectories that list the ids a tool message answers (usually one)
            for one in listed:
                self._result(record, one, msg.get("content"), msg)
            return
        if call_id is None and listed is not None:
            self.issue(
                E_RESULT,
                record,
                "a tool message needs the id of its call: tool_call_id (a string) or "
                f"tool_call_ids (a non-empty list), got tool_call_ids={listed!r:.40}",
            )
            return
        self._result(record, call_id, msg.get("content"), msg)

    def _result(
        self, record: Record, call_id: object, content: object, source: Mapping[str, Any]
    ) -> None:
        if not isinstance(call_id, str) or not call_id:
            self.issue(
                E_RESULT,
                record,
                "a tool result needs the id of its tool call (tool_call_id, tool_use_id or "
                f"call_id), got {call_id!r:.40}",
            )
            return
        waiting = self.pending.get(call_id)
        if not waiting:
            if call_id in self.skipped:
                return
            what = "was already answered" if call_id in self.answered else "is unknown"
            self.issue(E_RESULT, record, f"tool result for call id {call_id!r}, which {what}")
            return
        draft = take(waiting)
        if not waiting:
            del self.pending[call_id]
            self.answered.add(call_id)
        text = content_text(content)
        draft.result = text if text is not None else json.dumps(content)
        draft.result_is_error = source.get("is_error") is True

    def finish(self) -> tuple[RecordedTurn, ...]:
        """Every turn read, with the recorded results filled in."""
        self.flush()
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
