"""Anthropic's ``messages`` parameter, built from a loopware conversation one step at a time.

An assistant message that announced calls becomes one assistant message (the thinking blocks
its answer began with, kept on the message as its Anthropic `ProviderState`; a text block when
it has text; then one
``tool_use`` block per call with its exact id and its stored arguments as ``input``), followed
by ONE user message holding all its results, as ``tool_result`` blocks: the result's text in
its trust envelope (`render_tool_result`), ``is_error`` for error calls, and media as
``image`` / ``document`` blocks. An announced id with no stored result still gets an error
``tool_result``, or the API would refuse the conversation. `Alternation` then merges
consecutive messages of one role (the results of the last step and the next user input share
one user message), per turn and incrementally, as the API wants roles to alternate.
"""

from __future__ import annotations

import base64
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..artifacts._envelope import render_tool_result
from ._anthropic_errors import PROVIDER

if TYPE_CHECKING:
    from ..artifacts._envelope import ToolLookup
    from ..artifacts._media import Media
    from ..calls._toolcall import ToolCall
    from ._prefix import ConversationStep

__all__ = [
    "NO_RESULT",
    "UNKNOWN_TOOL",
    "Alternation",
    "Wire",
    "alternate",
    "convert_step",
    "media_block",
    "tool_result",
]

Wire = dict[str, Any]
"""One message or content block in the API's JSON shape."""

NO_RESULT: Final = "Error: no result was recorded for this call."
UNKNOWN_TOOL: Final = "unknown_tool"
"""The name a ``tool_use`` block gets when its call has no stored record (nor name)."""

_IMAGE_TYPES: Final = frozenset({"image/gif", "image/jpeg", "image/png", "image/webp"})
_TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,128}")
"""The tool names the API accepts (a record made for another provider may hold another)."""


def convert_step(step: ConversationStep, tools: ToolLookup | None) -> list[Wire]:
    """One conversation step as API messages.

    A user or assistant message, or an assistant message with ``tool_use`` blocks followed by
    the user message with all its results.

    ``tools`` are the turn's tools (a request's ``tool_view``): they say which tools' results
    render as trusted (None: none do). The thinking blocks an answer began with (its
    ``provider_state``, when Anthropic's) go first: with extended thinking on, the API wants
    them back, unchanged, before the calls.
    """
    message = step.message
    text = message.content
    ids = message.tool_call_ids
    if not ids:
        return [{"role": message.role, "content": text}] if text else []
    by_id = {call.id: call for call in step.results}
    state = message.provider_state
    uses: list[Wire] = (
        [dict(block) for block in state.items]
        if state is not None and state.provider == PROVIDER
        else []
    )
    if text:
        uses.append({"type": "text", "text": text})
    results: list[Wire] = []
    for call_id in ids:
        call = by_id.get(call_id)
        if call is None:
            uses.append({"type": "tool_use", "id": call_id, "name": UNKNOWN_TOOL, "input": {}})
            missing: Wire = {"type": "tool_result", "tool_use_id": call_id, "content": NO_RESULT}
            results.append({**missing, "is_error": True})
            continue
        name = call.tool if _TOOL_NAME.fullmatch(call.tool) else UNKNOWN_TOOL
        use: Wire = {"type": "tool_use", "id": call_id, "name": name}
        uses.append({**use, "input": _plain(call.args)})
        results.append(tool_result(call, tools))
    return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]


def tool_result(call: ToolCall, tools: ToolLookup | None) -> Wire:
    """A stored call as a ``tool_result`` block: its enveloped text, then its media."""
    rendered = render_tool_result(call, tools)
    block: Wire = {"type": "tool_result", "tool_use_id": call.id}
    if rendered.media:
        text: Wire = {"type": "text", "text": rendered.text}
        block["content"] = [text, *(media_block(item) for item in rendered.media)]
    else:
        block["content"] = rendered.text
    if call.is_error:
        block["is_error"] = True
    return block


def media_block(item: Media) -> Wire:
    """One media item as a content block.

    An ``image`` block (JPEG, PNG, GIF, WebP), a ``document`` block (PDF or text), or a text
    block saying why the media is not attached (the API takes nothing else).
    """
    mime = item.mime_type.partition(";")[0].strip().lower()
    image = item.kind == "image" and mime in _IMAGE_TYPES
    pdf = item.kind == "document" and mime == "application/pdf"
    text = item.kind == "document" and mime.startswith("text/")
    if not (image or pdf or text):
        return {
            "type": "text",
            "text": f"[media {item.id} ({mime}) is not attached: the Anthropic API takes JPEG, "
            "PNG, GIF or WebP images and PDF or plain-text documents]",
        }
    try:
        data = item.read_bytes()
    except Exception as exc:  # a failing reader must not fail the model call: the model is told
        return {"type": "text", "text": f"[media {item.id} could not be read: {exc}]"}
    if text:
        source: Wire = {"type": "text", "media_type": "text/plain"}
        source["data"] = data.decode("utf-8", errors="replace")
    else:
        source = {"type": "base64", "media_type": mime, "data": base64.b64encode(data).decode()}
    if image:
        return {"type": "image", "source": source}
    return {"type": "document", "source": source, "title": item.filename}


def alternate(messages: list[Wire], into: list[Wire] | None = None) -> list[Wire]:
    """Merge consecutive messages of one role into one (content blocks in order).

    ``messages`` are appended to ``into`` (a fresh list by default), which is returned; a
    merge replaces the last message with a new one (no message is changed in place).
    """
    out: list[Wire] = [] if into is None else into
    for message in messages:
        if out and out[-1]["role"] == message["role"]:
            previous = out[-1]
            content = [*_blocks(previous["content"]), *_blocks(message["content"])]
            out[-1] = {"role": message["role"], "content": content}
        else:
            out.append(message)
    return out


@dataclass(slots=True)
class _Merged:
    count: int = 0
    """How many converted messages are merged."""
    last: Wire | None = None
    """The last of them (the converted prefix is unchanged while it is the same object)."""
    out: list[Wire] = field(default_factory=list)


class Alternation:
    """Per turn, the merged (alternating) messages built so far.

    Each request merges only the converted messages that are new: a `PrefixCache` hands out
    the same message objects for the prefix it keeps, and new ones when it converts again from
    the start (then the turn is merged anew).
    """

    __slots__ = ("_max_turns", "_turns")

    def __init__(self, *, max_turns: int = 256) -> None:
        """Keep the merged messages of up to ``max_turns`` turns (least recently used out)."""
        self._max_turns = max_turns
        self._turns: OrderedDict[str, _Merged] = OrderedDict()

    def __repr__(self) -> str:
        """Show how many turns are kept."""
        return f"Alternation(turns={len(self._turns)}, max_turns={self._max_turns})"

    def messages(self, turn_id: str | None, converted: list[Wire]) -> list[Wire]:
        """``converted`` with consecutive messages of one role merged (a fresh list)."""
        if turn_id is None:
            return alternate(converted)
        state = self._turns.get(turn_id)
        if state is None or not (
            state.count <= len(converted)
            and (state.count == 0 or converted[state.count - 1] is state.last)
        ):
            state = self._turns[turn_id] = _Merged()
            while len(self._turns) > self._max_turns:
                self._turns.popitem(last=False)
        self._turns.move_to_end(turn_id)
        alternate(converted[state.count :], state.out)
        state.count = len(converted)
        state.last = converted[-1] if converted else None
        return list(state.out)


def _blocks(content: str | list[Wire]) -> list[Wire]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _plain(value: Any) -> Any:
    """A call's read-only arguments as plain ``dict`` / ``list`` data."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
