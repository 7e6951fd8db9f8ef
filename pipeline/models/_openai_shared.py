"""What the two OpenAI models share: the client, call ids and arguments, media as data URLs.

`openai` is imported inside the functions: importing this module never loads the SDK.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from .._extras import import_extra
from .._tool_checks import is_tool_name
from ..calls._toolcall import ToolCall
from ..errors import ModelAuthenticationError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from ..artifacts._media import Media

__all__ = [
    "NO_RESULT",
    "UNKNOWN_TOOL",
    "arguments_text",
    "call_arguments",
    "call_id",
    "check_settings",
    "data_url",
    "int_field",
    "make_client",
    "media_label",
    "provider_name",
    "read_media",
    "wire_name",
]

NO_RESULT: Final = "Error: no result was recorded for this call."
"""What the model reads for a call its assistant message announced but no record answers (a
turn aborted mid-call): providers refuse a conversation with an unanswered call."""

UNKNOWN_TOOL: Final = "unknown_tool"
"""The tool name sent for such a call (the message keeps only the ids)."""

_NAME_BAD: Final = re.compile(r"[^A-Za-z0-9_-]")

_PLACEHOLDER_KEY: Final = "EMPTY"
"""The API key sent to an OpenAI-compatible server when none is configured (vLLM's convention;
local servers ignore it, the SDK refuses to start without one)."""


def check_settings(model: object, settings: Mapping[str, Any], reserved: frozenset[str]) -> None:
    """Reject an empty model name and settings the model sets itself."""
    if not isinstance(model, str) or not model:
        raise ValueError(f"model must be a non-empty model name, got {model!r}")
    clash = sorted(reserved.intersection(settings))
    if clash:
        raise TypeError(f"settings {clash} are set by the model itself; remove them")


def make_client(
    client: AsyncOpenAI | None,
    *,
    base_url: str | None,
    api_key: str | None,
    max_retries: int | None,
    model: str,
) -> AsyncOpenAI:
    """The `AsyncOpenAI` to use: ``client`` as given, or one built from the arguments.

    Without ``client``, the SDK reads its usual environment variables (``OPENAI_API_KEY``,
    ``OPENAI_BASE_URL``, ``OPENAI_ORG_ID``...). With ``base_url`` and no key anywhere, a
    placeholder key is sent (OpenAI-compatible servers seldom check it).

    Raises:
        TypeError: ``client`` given together with ``base_url`` or ``api_key``.
        ModelAuthenticationError: no API key was given or found in the environment.
    """
    if client is not None:
        if base_url is not None or api_key is not None:
            raise TypeError("give client= or base_url=/api_key=, not both")
        return client if max_retries is None else client.with_options(max_retries=max_retries)
    import_extra("openai", "openai", "an OpenAI model")
    import openai

    if base_url is not None and api_key is None and not os.environ.get("OPENAI_API_KEY"):
        api_key = _PLACEHOLDER_KEY
    try:
        if max_retries is None:
            return openai.AsyncOpenAI(api_key=api_key, base_url=base_url)
        return openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries)
    except openai.OpenAIError as exc:  # missing credentials: a configuration problem
        raise ModelAuthenticationError(str(exc), provider="openai", model=model) from exc


def provider_name(client: AsyncOpenAI) -> str:
    """``"openai"`` for OpenAI's own API, ``"openai-compatible"`` for any other server."""
    host = client.base_url.host
    if host == "api.openai.com" or host.endswith(".api.openai.com"):
        return "openai"
    return "openai-compatible"


def wire_name(name: str) -> str:
    """A stored call's tool name as the API accepts it in a conversation.

    Names must match ``[A-Za-z0-9_-]{1,64}``: a name the model made up (``math.add``, none at
    all) would otherwise make every later request of the conversation fail.
    """
    if is_tool_name(name):
        return name
    return _NAME_BAD.sub("_", name)[:64] or UNKNOWN_TOOL


def call_arguments(call: ToolCall) -> str:
    """A stored call's arguments as the model is shown it sent them.

    The text it sent when that was no JSON object (``unparsed_args``: the call was refused, and
    the model reads the same text back), else the arguments as compact JSON.
    """
    if call.unparsed_args is not None:
        return call.unparsed_args
    return json.dumps(call.args, separators=(",", ":"), ensure_ascii=False)


def arguments_text(value: object) -> str:
    """A proposed call's arguments as JSON text.

    Text is kept as sent; an object (some OpenAI-compatible servers send one) is re-encoded;
    nothing becomes ``{}``.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def call_id(value: object) -> str:
    """The provider's call id, or a minted ``call_<hex>`` when the server sent none."""
    return value if isinstance(value, str) and value else ToolCall.new_id()


def int_field(data: object, *path: str) -> int:
    """The int at ``path`` in plain data, or 0 when any step is missing or not an int."""
    for key in path:
        if not isinstance(data, Mapping):
            return 0
        data = data.get(key)
    return data if type(data) is int else 0


def read_media(media: Media) -> bytes | None:
    """The media's bytes, or None when its reader fails (the model is told instead)."""
    try:
        return media.read_bytes()
    except Exception:  # a failing reader must not fail the model call: a placeholder says so
        return None


def data_url(media: Media, content: bytes) -> str:
    """``data:<mime>;base64,<content>``."""
    return f"data:{media.mime_type};base64,{base64.b64encode(content).decode('ascii')}"


def media_label(media: Media, call: str, note: str = "") -> str:
    """The text placed before (or instead of) an attached media item."""
    text = (
        f"[attachment: media id {media.id} ({media.kind}, {json.dumps(media.filename)}) from "
        f"tool call {call}; its trust tier is given in that call's result]"
    )
    return f"{text[:-1]}; {note}]" if note else text
