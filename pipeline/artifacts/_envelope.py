"""Trust rendering: what the model reads for a tool call (DESIGN 10.4).

Every result is wrapped in an envelope whose tag carries a nonce (the call's checksum)::

    <untrusted_content_NONCE nonce="NONCE" kind="tool-result" tool="NAME">
    BODY
    </untrusted_content_NONCE>

``trusted_content_`` and ``kind="trusted-tool-result"`` are used instead when the registry's tool
is ``trusted``. Kinds: ``tool-result`` / ``trusted-tool-result`` (text, inline artifacts, error
text), ``artifact-handle`` (a spooled artifact shown as metadata plus the tools that query it:
always untrusted) and ``media`` / ``trusted-media`` (one placeholder per media item, trusted only
for first-party media, whatever the tool's flag says).

The body can never close or open an envelope: every ``<`` that starts something that reads as an
envelope tag (``<``, optional spaces, optional ``/``, optional spaces, then ``trusted_content`` or
``untrusted_content`` in any letter case, complete or not) is written as ``&lt;``. That is the
only change made to a body. Attribute values are HTML-escaped, control characters included. The
nonce is not a secret (checksums are computable), so the neutralising does not depend on it.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ._artifact import SpooledArtifact
from ._media import Media

if TYPE_CHECKING:
    from .._tool import Tool
    from .._toolcall import ToolCall

__all__ = ["RenderedResult", "neutralise", "render_tool_result"]

_NEUTRAL = re.compile(r"<(?=\s*/?\s*(?:un)?trusted_content)", re.IGNORECASE)
_TAG_SAFE = re.compile(r"[A-Za-z0-9_-]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PREVIEW_LINES = 5
_PREVIEW_WIDTH = 160

_handles: weakref.WeakKeyDictionary[SpooledArtifact, tuple[str, str, str]] = (
    weakref.WeakKeyDictionary()
)
"""Rendered handle bodies per artifact (keyed with call id and tool name): rendering repeats
every iteration, and a file-backed artifact's preview should be read once."""


@dataclass(frozen=True, slots=True)
class RenderedResult:
    """What the model reads for one tool call."""

    text: str
    """The enveloped text."""

    media: tuple[Media, ...] = ()
    """Media to attach next to the text (each has a placeholder in ``text``)."""


class _ToolLookup(Protocol):
    def get(self, name: str) -> Tool[object] | None: ...


def neutralise(body: str) -> str:
    """Return ``body`` with every ``<`` that could start an envelope tag written as ``&lt;``."""
    return _NEUTRAL.sub("&lt;", body)


def _attr(value: str) -> str:
    escaped = html.escape(value, quote=True)
    return _CONTROL.sub(lambda m: f"&#{ord(m.group())};", escaped)


def _nonce(checksum: str) -> str:
    if _TAG_SAFE.fullmatch(checksum):
        return checksum
    return hashlib.sha256(checksum.encode("utf-8", "surrogatepass")).hexdigest()


def _envelope(trusted: bool, kind: str, tool: str, nonce: str, body: str) -> str:
    tag = ("trusted_content_" if trusted else "untrusted_content_") + nonce
    return (
        f'<{tag} nonce="{_attr(nonce)}" kind="{_attr(kind)}" tool="{_attr(tool)}">\n'
        f"{neutralise(body)}\n</{tag}>"
    )


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _preview(artifact: SpooledArtifact) -> list[str]:
    lines = artifact.head(_PREVIEW_LINES)
    return [
        line if len(line) <= _PREVIEW_WIDTH else line[:_PREVIEW_WIDTH] + " [...]" for line in lines
    ]


def _handle_body(artifact: SpooledArtifact, call_id: str, tool: str, queryable: bool) -> str:
    key = tool if queryable else tool + "\x00part"
    cached = _handles.get(artifact)
    if cached is not None and cached[0] == call_id and cached[1] == key:
        return cached[2]
    cls = type(artifact)
    lines = [
        f"The result of tool {json.dumps(tool)} is stored as an artifact and not shown in full: "
        f"{cls.__name__}, {_count(artifact.byte_length(), 'byte')}, "
        f"{_count(artifact.line_count(), 'line')}.",
    ]
    if queryable:
        names = ", ".join(method.name for method in cls.all_tool_methods())
        lines.append(f"Query it with these tools, passing call_id={json.dumps(call_id)}: {names}")
    else:
        lines.append("It is one part of a multi-part result, which query tools cannot address.")
    preview = _preview(artifact)
    lines.append(f"Preview (first {_count(len(preview), 'line')}):")
    lines.extend(preview)
    body = "\n".join(lines)
    _handles[artifact] = (call_id, key, body)  # SpooledArtifact has a __weakref__ slot
    return body


def _media_placeholder(item: Media, index: int, count: int) -> str:
    size = f"{item.size} bytes" if item.size is not None else "size unknown"
    source = f", source {json.dumps(item.source)}" if item.source is not None else ""
    return (
        f"[{item.kind} {index} of {count}: {json.dumps(item.filename)} ({item.mime_type}, "
        f"{size}{source}); trust tier {item.trust_tier}; modality hazard "
        f"{item.modality_hazard}; media id {item.id}; the content is attached separately]"
    )


def render_tool_result(call: ToolCall, registry: _ToolLookup) -> RenderedResult:
    """Render ``call`` as the model should read it, in its trust envelope.

    ``registry`` is the turn's `ToolRegistry` (anything with ``get(name)``); a tool missing
    from it counts as untrusted. Error calls render their text, untrusted. A non-inline
    artifact renders as a handle (always untrusted), an inline one as its full text. Media
    render as one placeholder envelope each, trusted only when first-party, and are returned in
    ``media``.
    """
    tool_name = call.tool
    nonce = _nonce(call.checksum)
    results = call.results
    if call.is_error:
        body = results.as_string() if isinstance(results, SpooledArtifact) else str(results)
        return RenderedResult(_envelope(False, "tool-result", tool_name, nonce, body))
    if isinstance(results, str):
        return RenderedResult(_text_envelope(registry, tool_name, nonce, results))
    if isinstance(results, SpooledArtifact):
        if call.inline:
            return RenderedResult(_text_envelope(registry, tool_name, nonce, results.as_string()))
        body = _handle_body(results, call.id, tool_name, queryable=True)
        return RenderedResult(_envelope(False, "artifact-handle", tool_name, nonce, body))
    items = (results,) if isinstance(results, Media) else tuple(results)
    if all(isinstance(item, Media) for item in items):
        media = tuple(item for item in items if isinstance(item, Media))
        parts = [
            _envelope(
                item.trusted,
                "trusted-media" if item.trusted else "media",
                tool_name,
                nonce,
                _media_placeholder(item, index, len(media)),
            )
            for index, item in enumerate(media, 1)
        ]
        return RenderedResult("\n".join(parts), media)
    parts = []
    for index, item in enumerate(items, 1):
        if not isinstance(item, SpooledArtifact):
            continue
        if call.inline:
            parts.append(_text_envelope(registry, tool_name, nonce, item.as_string()))
        else:
            body = f"Part {index} of {len(items)}. " + _handle_body(
                item, call.id, tool_name, queryable=False
            )
            parts.append(_envelope(False, "artifact-handle", tool_name, nonce, body))
    return RenderedResult("\n".join(parts))


def _text_envelope(registry: _ToolLookup, tool_name: str, nonce: str, body: str) -> str:
    tool = registry.get(tool_name)
    trusted = tool is not None and tool.trusted
    kind = "trusted-tool-result" if trusted else "tool-result"
    return _envelope(trusted, kind, tool_name, nonce, body)


RenderedResult.__module__ = "pipeline"
render_tool_result.__module__ = "pipeline"
