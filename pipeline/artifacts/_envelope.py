r"""Trust rendering: what the model reads for a tool call (docs/concepts/artifacts.md).

Every result is wrapped in an envelope whose tag carries a nonce (the call's checksum)::

    <untrusted_content_NONCE nonce="NONCE" kind="tool-result" tool="NAME">
    BODY
    </untrusted_content_NONCE>

``trusted_content_`` and ``kind="trusted-tool-result"`` are used instead when the turn's tool
is ``trusted``. Kinds: ``tool-result`` / ``trusted-tool-result`` (text, inline artifacts, error
text), ``artifact-handle`` (a spooled artifact shown as metadata plus the tools that query it:
always untrusted) and ``media`` / ``trusted-media`` (one placeholder per media item, trusted only
for first-party media, whatever the tool's flag says).

The body can never close or open an envelope. Every ``<`` that starts something a model could
read as an envelope tag is written as ``&lt;`` (a look-alike of ``<`` as a numeric character
reference, ``&#xFF1C;``); nothing else in a body changes. What reads as a tag is decided on the
text folded for detection, character by character: compatibility decomposition (NFKD, so
full-width and small forms count), format and zero-width characters, combining marks, NUL and
other control characters dropped, case folded, Cyrillic, Greek and Armenian look-alikes of the
tag's letters, and look-alikes of ``<``, ``/`` and ``\`` mapped to them. On that text a tag is
``<``, optional spaces and backslashes, an optional ``/`` (``<\/`` counts), optional spaces and
backslashes, then ``trusted`` or ``untrusted``, any run of ``_``, ``-`` or spaces, and
``content`` (no nonce or ``>`` needed). Ordinary text, markup included, is left as it is.
Attribute values are HTML-escaped (control characters included) and neutralised the same way.
The nonce is not a secret (checksums are computable), so the neutralising does not depend on it.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from ._artifact import SpooledArtifact
from ._media import Media

if TYPE_CHECKING:
    from .._tool import Tool
    from ..calls._toolcall import ToolCall

__all__ = ["RenderedResult", "ToolLookup", "neutralise", "render_tool_result"]

_LESS_THAN = "<\ufe64\uff1c\u226e\u2039\u276e\u3008\u2329\u27e8\u276c\u2770\u29fc\u1438\u02c2"
"""``<`` and what a model could read as one: small, full-width, not-less-than (``<`` with a
stroke), single angle quotation marks and brackets, ornaments, arrowheads. (A test checks that
every character whose NFKD form holds ``<`` is here.)"""


@lru_cache(maxsize=1)
def _candidates() -> re.Pattern[str]:
    """Match the openers worth a closer look.

    An opener is skipped at C speed when what follows it (past spaces, backslashes and a
    ``/``) is printable ASCII that cannot begin ``trusted`` or ``untrusted`` (``<td>``, ``<ul>``).
    """
    gap = r"[ \t\n\r\f\v\\]*(?:/[ \t\n\r\f\v\\]*)?"

    def other(letters: str) -> str:
        return rf"(?![{letters}])[\x21-\x7e]"

    first = other(r"tTuU/\\")
    tr = rf"[tT](?:{other('rR')}|[rR]{other('uU')})"
    un = rf"[uU](?:{other('nN')}|[nN]{other('tT')})"
    return re.compile(rf"[{_LESS_THAN}](?!{gap}(?:{first}|{tr}|{un}))")




@lru_cache(maxsize=1)
def _ascii_prefix() -> re.Pattern[str]:
    """Match the longest start of a tag in ASCII text, folded the way `_reads_as_tag` folds it."""
    dropped = r"[\x00-\x08\x0e-\x1b\x7f]*"
    gap = rf"(?:[\t-\r\x1c-\x20\\]|{dropped[:-1]})*"

    def chain(word: str, tail: str = "") -> str:
        out = tail
        for letter in reversed(word):
            out = f"(?:{letter}{dropped}{out})?"
        return out

    def name(group: str) -> str:
        content = chain("conten", f"(?P<{group}>t){dropped}")
        return chain("trusted", rf"(?:[\t-\r\x1c-\x20_-]|{dropped[:-1]})*{content}")

    words = rf"(?:u{dropped}(?:n{dropped}{name('untrusted')})?|{name('trusted')})"
    return re.compile(rf"[{_LESS_THAN}]{gap}(?:/{gap})?{words}", re.ASCII | re.IGNORECASE)


# Both patterns are compiled on the first body that holds a "<" (or a look-alike), not on import.
# `_ascii_prefix` decides most candidates at C speed; where it stops at a non-ASCII character
# (which may fold to a letter of the tag), `_reads_as_tag` decides.
_LOOKALIKES: dict[str, str] = {
    **dict.fromkeys(_LESS_THAN, "<"),
    **dict.fromkeys("\u2044\u2215\u29f8\u2571\u27cb\u3033\u30ce\u4e3f", "/"),
    **dict.fromkeys("\u2216\u29f5\u29f9", "\\"),
    **dict.fromkeys("\u02cd\u23bd\u2017", "_"),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212", "-"),
    **dict.fromkeys("\u2800\u3164\u115f\u1160\uffa0", " "),
    # letters of "untrusted content": Latin small capitals, Cyrillic, Greek, Armenian, Cherokee
    **dict.fromkeys("\u1d1c\u028b\u028a\u03c5\u057d\u054d\u0443\u222a", "u"),
    **dict.fromkeys("\u0274\u043f\u03b7\u0578\u057c\u039d", "n"),
    **dict.fromkeys("\u1d1b\u0442\u0422\u03c4\u03a4", "t"),
    **dict.fromkeys("\u0280\u0433\u1d26\u2c85\u13a1", "r"),
    **dict.fromkeys("\ua731\u0455\u0405\u13da", "s"),
    **dict.fromkeys("\u1d07\u0435\u0415\u04bd\u03b5\u0395", "e"),
    **dict.fromkeys("\u1d05\u0501\u13a0", "d"),
    **dict.fromkeys("\u1d04\u0441\u0421\u03f2\u03f9", "c"),
    **dict.fromkeys("\u1d0f\u043e\u041e\u03bf\u039f\u0585\u0555", "o"),
}
"""Characters a model could read as one of the tag's, checked before and after NFKD."""
_DROPPED = frozenset(("Cf", "Cn", "Cs", "Mn", "Mc", "Me"))
_NAME = "trusted"
_SUFFIX = "content"
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


class ToolLookup(Protocol):
    """What rendering a result needs of a turn's tools (`ToolRegistry.view` gives one).

    ``get`` finds any tool of the turn, hidden or not (a result renders trusted only when its
    tool is ``trusted``); ``get_visible`` only those offered to the model (an artifact handle
    names only query tools the model may call).
    """

    def get(self, name: str) -> Tool[Any] | None:
        """The tool named ``name``, hidden or not, or None."""
        ...

    def get_visible(self, name: str) -> Tool[Any] | None:
        """The tool named ``name`` if it is offered to the model, else None."""
        ...


def neutralise(body: str) -> str:
    """Return ``body`` with every ``<`` (or look-alike) that could start an envelope tag escaped.

    ``<`` becomes ``&lt;``; a look-alike becomes its numeric character reference. See the
    module docstring for what counts as a tag.
    """
    if "<" not in body and (body.isascii() or not any(c in body for c in _LESS_THAN)):
        return body
    parts: list[str] = []
    done = 0
    ascii_prefix = _ascii_prefix().match
    for match in _candidates().finditer(body):
        start = match.start()
        prefix = ascii_prefix(body, start)
        end = start + 1 if prefix is None else prefix.end()
        if prefix is not None and (prefix["trusted"] or prefix["untrusted"]):
            pass  # an ASCII tag
        elif end >= len(body) or body[end].isascii():
            continue  # what stopped the tag is plain ASCII (or the end): not a tag
        elif not _reads_as_tag(_folded(body, start + 1)):
            continue
        char = match.group()
        parts += (body[done:start], "&lt;" if char == "<" else f"&#x{ord(char):X};")
        done = start + 1
    if not parts:
        return body
    parts.append(body[done:])
    return "".join(parts)


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """What ``char`` reads as for tag detection (empty when a model would not see it)."""
    mapped = _LOOKALIKES.get(char)
    if mapped is not None:
        return mapped
    out: list[str] = []
    for part in unicodedata.normalize("NFKD", char):
        mapped = _LOOKALIKES.get(part)
        if mapped is not None:
            out.append(mapped)
            continue
        for folded in part.casefold():
            category = unicodedata.category(folded)
            if category in _DROPPED or (category == "Cc" and not folded.isspace()):
                continue
            out.append(_LOOKALIKES.get(folded, folded))
    return "".join(out)


def _folded(body: str, start: int) -> Iterator[str]:
    for index in range(start, len(body)):
        yield from _fold(body[index])


def _skip_gap(chars: Iterator[str]) -> str:
    """Return the next character that is neither a space nor a backslash ("" at the end)."""
    for char in chars:
        if char != "\\" and not char.isspace():
            return char
    return ""


def _reads_as_tag(chars: Iterator[str]) -> bool:
    """Whether the folded text after a ``<`` reads as the rest of an envelope tag.

    Linear: it stops at the first character that cannot continue a tag, and a gap of spaces,
    backslashes or dropped characters ends at the next ``<``, so gaps are scanned once.
    """
    char = _skip_gap(chars)
    if char == "/":
        char = _skip_gap(chars)
    if char == "u":
        if next(chars, "") != "n":
            return False
        char = next(chars, "")
    for index, expected in enumerate(_NAME):
        if index:
            char = next(chars, "")
        if char != expected:
            return False
    char = next(chars, "")
    while char == "_" or char == "-" or char.isspace():
        char = next(chars, "")
    for index, expected in enumerate(_SUFFIX):
        if index:
            char = next(chars, "")
        if char != expected:
            return False
    return True


def _attr(value: str) -> str:
    # What ``html.escape(value, quote=True)`` does, without importing ``html`` (its entity
    # table costs a millisecond at import: docs/architecture.md, "Import time").
    escaped = (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )
    return neutralise(_CONTROL.sub(lambda m: f"&#{ord(m.group())};", escaped))


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


def _offered(artifact: SpooledArtifact, tools: ToolLookup | None) -> str:
    """Return the query tools for ``artifact`` the turn offers, comma-separated.

    A tool counts when it is visible and, for an `ArtifactTool`, it reads this artifact's
    class: a policy that removed or hid ``artifact_cat`` must not see it advertised.
    """
    if tools is None:
        return ""
    names: list[str] = []
    for name in _method_names(type(artifact)):
        tool = tools.get_visible(name)
        if tool is None:
            continue
        queries = getattr(tool, "queries", None)
        if isinstance(queries, type) and not isinstance(artifact, queries):
            continue
        names.append(name)
    return ", ".join(names)


_names: weakref.WeakKeyDictionary[type, tuple[object, tuple[str, ...]]] = (
    weakref.WeakKeyDictionary()
)
"""The query tool names of each artifact class, with the ``tool_methods`` they were read from."""


def _method_names(cls: type[SpooledArtifact]) -> tuple[str, ...]:
    declared = cls.tool_methods
    cached = _names.get(cls)
    if cached is not None and cached[0] is declared:
        return cached[1]
    names = tuple(method.name for method in cls.all_tool_methods())
    _names[cls] = (declared, names)
    return names


def _handle_body(artifact: SpooledArtifact, call_id: str, tool: str, names: str | None) -> str:
    """``names``: the query tools offered (None: a part of a multi-part result)."""
    key = tool + "\x00part" if names is None else f"{tool}\x00{names}"
    cached = _handles.get(artifact)
    if cached is not None and cached[0] == call_id and cached[1] == key:
        return cached[2]
    cls = type(artifact)
    lines = [
        f"The result of tool {json.dumps(tool)} is stored as an artifact and not shown in full: "
        f"{cls.__name__}, {_count(artifact.byte_length(), 'byte')}, "
        f"{_count(artifact.line_count(), 'line')}.",
    ]
    if names is None:
        lines.append("It is one part of a multi-part result, which query tools cannot address.")
    elif names:
        lines.append(f"Query it with these tools, passing call_id={json.dumps(call_id)}: {names}")
    else:
        lines.append("No query tools for it are offered in this turn.")
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


def render_tool_result(call: ToolCall, tools: ToolLookup | None) -> RenderedResult:
    """Render ``call`` as the model should read it, in its trust envelope.

    ``tools`` are the turn's tools (a `ToolRegistry`, or the view a `ModelRequest` carries);
    a tool missing from them (or ``None``) counts as untrusted, and an artifact handle lists
    only the query tools the turn offers (visible, reading the artifact's class). Error calls
    render their text, untrusted. A non-inline artifact renders as a handle (always
    untrusted), an inline one as its full text. Media
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
        return RenderedResult(_text_envelope(tools, tool_name, nonce, results))
    if isinstance(results, SpooledArtifact):
        if call.inline:
            return RenderedResult(_text_envelope(tools, tool_name, nonce, results.as_string()))
        body = _handle_body(results, call.id, tool_name, _offered(results, tools))
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
            parts.append(_text_envelope(tools, tool_name, nonce, item.as_string()))
        else:
            body = f"Part {index} of {len(items)}. " + _handle_body(
                item, call.id, tool_name, None
            )
            parts.append(_envelope(False, "artifact-handle", tool_name, nonce, body))
    return RenderedResult("\n".join(parts))


def _text_envelope(tools: ToolLookup | None, tool_name: str, nonce: str, body: str) -> str:
    tool = None if tools is None else tools.get(tool_name)
    trusted = tool is not None and tool.trusted
    kind = "trusted-tool-result" if trusted else "tool-result"
    return _envelope(trusted, kind, tool_name, nonce, body)


RenderedResult.__module__ = "pipeline.artifacts"
ToolLookup.__module__ = "pipeline.artifacts"
render_tool_result.__module__ = "pipeline.artifacts"
