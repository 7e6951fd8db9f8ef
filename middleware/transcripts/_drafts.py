"""The drafts a transcript is folded into while it is read, and the helpers of the folding."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

from ._types import RecordedCall

__all__ = [
    "LOG_ENTRY_TYPES",
    "NEAR_ROLES",
    "Assistant",
    "CallDraft",
    "TurnDraft",
    "content_text",
    "hosted",
    "kind_of",
    "take",
]

NEAR_ROLES: Final = {
    "human": "user",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "function_call": "assistant",
    "tool_result": "tool",
}
"""Roles other frameworks use, and the role loopware expects instead."""
LOG_ENTRY_TYPES: Final = frozenset(
    {"summary", "system", "file-history-snapshot", "queue-operation", "progress", "result"}
)
"""Coding-agent log entries that are not messages (skipped with a note)."""


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
                elif isinstance(part.get("refusal"), str):
                    parts.append(part["refusal"])
                elif part.get("type") in ("image", "image_url", "input_image"):
                    parts.append("[image]")
        return "\n".join(parts)
    return None


@dataclass(slots=True)
class CallDraft:
    index: int
    turn: int
    message_index: int
    line: int | None
    id: str
    replay_id: str
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
            replay_id=self.replay_id,
        )


@dataclass(slots=True)
class TurnDraft:
    index: int
    input: str
    message_index: int | None
    steps: list[tuple[str | None, list[CallDraft]]] = field(default_factory=list)
    answer: str | None = None
    answered: bool = False


@dataclass(slots=True)
class Assistant:
    """The assistant message being assembled from consecutive assistant entries."""

    turn: TurnDraft
    texts: list[str] = field(default_factory=list)
    calls: list[CallDraft] = field(default_factory=list)
    attempted: bool = False
    """True once a tool call was proposed (even an unreadable one)."""
    said: bool = False
    """True once an assistant message entry was added (not only reasoning or hosted items)."""


def hosted(kind: str) -> bool:
    """A Responses API item of a hosted (built-in) tool: web search, computer use, MCP..."""
    return kind.endswith(("_call", "_call_output")) or kind.startswith("mcp_")


def take(waiting: deque[CallDraft]) -> CallDraft:
    """The call a result with this id answers: the first such call of the latest message.

    Providers reuse ids across turns; within one message, results come in order.
    """
    latest = waiting[-1].message_index
    i = len(waiting) - 1
    while i > 0 and waiting[i - 1].message_index == latest:
        i -= 1
    draft = waiting[i]
    del waiting[i]
    return draft


def kind_of(value: object) -> str:
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
