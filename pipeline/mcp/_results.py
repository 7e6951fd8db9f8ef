"""An MCP ``CallToolResult`` as a loopware tool output.

* ``isError`` results raise `MCPToolError` with the server's text: an error call.
* Text (and resource links, as a line naming them) becomes one string: the executor spools it
  as an artifact like any other text result. A result with only ``structuredContent`` becomes
  its JSON text.
* Images, audio and embedded resources become `Media` with the configured trust tier
  (``third-party-private`` by default); when media are present, the text parts become one
  ``text/plain`` document next to them, so nothing is dropped.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from ..artifacts import Media, MediaKind, ModalityHazard, TrustTier
from ..errors import InvalidMediaError
from ._errors import MCPServerError, MCPToolError

if TYPE_CHECKING:
    from .._tool import ToolOutput

__all__ = ["to_output"]


def _kind(mime: str) -> tuple[MediaKind, str]:
    top = mime.split("/", 1)[0].strip().lower()
    if top in ("image", "audio", "video"):
        return top, mime  # type: ignore[return-value]  # narrowed by the membership test
    if top in ("application", "text"):
        return "document", mime
    return "document", "application/octet-stream"


def _media(
    kind_mime: str, data: bytes, name: str, tier: TrustTier, source: str | None
) -> Media | None:
    if not data:
        return None
    kind, mime = _kind(kind_mime or "application/octet-stream")
    hazard: ModalityHazard = (
        "extractable-instructions" if kind == "document" else "opaque-perceptual"
    )
    try:
        return Media(
            kind=kind,
            mime_type=mime,
            filename=name,
            trust_tier=tier,
            modality_hazard=hazard,
            data=data,
            source=source,
        )
    except InvalidMediaError:
        return Media(
            kind="document",
            mime_type="application/octet-stream",
            filename=name,
            trust_tier=tier,
            modality_hazard="extractable-instructions",
            data=data,
            source=source,
        )


def _decode(text: str, tool: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MCPServerError(
            f"the MCP server sent {what} for tool {tool!r} that is not base64: {exc}",
            tool_name=tool,
        ) from None


def to_output(result: Any, tool: str, tier: TrustTier) -> ToolOutput:
    """Turn a ``CallToolResult`` of ``tool`` into a `ToolOutput` (see the module docstring).

    Raises:
        MCPToolError: the result has ``isError`` set.
        MCPServerError: a media item is not valid base64.
    """
    texts: list[str] = []
    media: list[Media] = []
    for n, block in enumerate(result.content):
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            data = _decode(block.data, tool, f"{kind} data")
            item = _media(block.mime_type, data, f"{tool}-{n}.{kind}", tier, None)
            if item is not None:
                media.append(item)
        elif kind == "resource":
            res = block.resource
            uri = str(res.uri)
            mime = res.mime_type or ("text/plain" if hasattr(res, "text") else "")
            raw = (
                res.text.encode("utf-8")
                if hasattr(res, "text")
                else _decode(res.blob, tool, "a resource blob")
            )
            label = uri.rstrip("/").rsplit("/", 1)[-1][:200] or f"{tool}-{n}"
            item = _media(mime, raw, _clean(label) or f"{tool}-{n}", tier, uri or None)
            if item is not None:
                media.append(item)
        elif kind == "resource_link":
            texts.append(f"[resource {block.name}: {block.uri}]")
    if result.is_error:
        message = "\n".join(texts) or "the tool reported an error without a message"
        raise MCPToolError(message, tool_name=tool)
    if not texts and not media and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(texts)
    if not media:
        return text
    if text:
        document = _media("text/plain", text.encode("utf-8"), f"{tool}-text.txt", tier, None)
        if document is not None:
            media.insert(0, document)
    return media


def _clean(label: str) -> str:
    return "".join(ch for ch in label if ch.isprintable())
