"""The common ``tools/call`` result recognised and built in one pass (issue 16).

Most results a tool server sends are plain text: ``{"content": [{"type": "text", "text":
"..."}, ...]}``, with or without a boolean ``isError`` and a ``_meta`` object, and on a
2026-07-28 link with ``"resultType": "complete"`` (which that version requires). The direct
link checks every result the way the SDK's client does (``finish`` in ``_direct.py``): against
the protocol version's own result schema, then against the version-free ``CallToolResult |
InputRequiredResult`` union, two pydantic validations. Both accept the plain shape and give
the same ``CallToolResult``, so `quick_result` checks that shape with exact type tests and
builds the models directly, with the same set fields (the SDK's output-schema check reads
``model_fields_set``). Anything else (a text block with annotations or its own ``_meta``,
another block type, ``structuredContent``, a ``resultType`` on an older link, an unknown
version) returns None and takes the SDK's checks. ``tests/mcp/test_quick.py`` holds it
against ``finish`` with hypothesis, on every protocol version.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

__all__ = ["quick_result"]

_TEXT_KEYS: Final = frozenset({"type", "text"})
_LEGACY, _MODERN = 1, 2


def quick_result(version: str, raw: dict[str, Any]) -> Any:
    """The ``CallToolResult`` a plain-text ``raw`` result of ``version`` makes, else None."""
    result_cls, eras = _sdk()
    era = eras.get(version)
    if era is None:
        return None
    content: object = None
    typed = False
    for key, value in raw.items():
        if key == "content":
            content = value
        elif key == "isError":
            if type(value) is not bool:
                return None
        elif key == "_meta":
            if type(value) is not dict:
                return None
        elif key == "resultType" and era == _MODERN:
            if value != "complete" or type(value) is not str:
                return None
            typed = True
        else:
            return None
    if type(content) is not list or (era == _MODERN and not typed):
        return None
    for block in content:
        if (
            type(block) is not dict
            or block.keys() != _TEXT_KEYS
            or block["type"] != "text"
            or type(block["text"]) is not str
        ):
            return None
    return result_cls.model_validate(raw, by_name=False)  # the one pydantic pass


@cache
def _sdk() -> tuple[Any, dict[str, int]]:
    """``CallToolResult`` and each known version's era (the SDK imported once)."""
    from mcp_types import CallToolResult
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    eras = {
        v: _MODERN if v in MODERN_PROTOCOL_VERSIONS else _LEGACY for v in KNOWN_PROTOCOL_VERSIONS
    }
    return CallToolResult, eras
