"""The wire form of the fast lane's ``tools/call`` answers (``_gateway_fast.py``).

`Shaper.shape` gives a handler result the form the SDK's runner gives it: dumped by alias
without ``None`` fields, passed through the protocol version's result sieve
(``serialize_server_result``), then on a 2026-07-28 connection ``resultType`` and the
``serverInfo`` stamp in ``_meta``. That is a pydantic dump and a validation per answer.

Almost every answer is plain text: a ``CallToolResult`` of ``TextContent`` blocks (text only,
no annotations or block ``_meta``), no ``structuredContent``, ``resultType`` ``"complete"``,
and a ``_meta`` that is either absent or the same as the last one (an upstream stamps every
result with the same ``serverInfo``). Its wire form is then a dict built directly, with the
same keys in the same order. Two checks keep that honest: per protocol version, the first
plain answer is built both ways and the direct build is used only if the JSON text is the same
(else that version always takes the SDK's steps); and a ``_meta`` is only reused as the SDK
shaped it for an equal one (same JSON types too) earlier on the connection. Anything else takes
the SDK's steps, unchanged.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from mcp import MCPError
from mcp_types import (
    CORE_RESULT_TYPES,
    INTERNAL_ERROR,
    SERVER_INFO_META_KEY,
    CallToolResult,
    TextContent,
)
from mcp_types.methods import serialize_server_result
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

__all__ = ["Shaper", "same_json"]

_log = logging.getLogger("loopware.gateway")
_NO_META: Final = object()


def same_json(a: object, b: object) -> bool:
    """Whether two decoded JSON values are equal with the same types throughout.

    ``==`` alone takes ``1 == 1.0 == True``, which a schema may not.
    """
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if type(a) is list:
        assert isinstance(b, list)
        return len(a) == len(b) and all(map(same_json, a, b))
    return a == b


def _same_order(a: object, b: object) -> bool:
    """Whether two values `same_json` calls equal list their objects' keys in the same order.

    The SDK writes ``_meta`` in its keys' order, so a remembered ``_meta`` is reused only for
    one whose keys come in the same order, at every depth.
    """
    if type(a) is dict:
        assert isinstance(b, dict)
        return list(a) == list(b) and all(_same_order(v, b[k]) for k, v in a.items())
    if type(a) is list:
        assert isinstance(b, list)
        return all(map(_same_order, a, b))
    return True


def _plain_texts(result: object) -> list[str] | None:
    """The texts of a plain-text ``CallToolResult`` (see the module docstring), else None."""
    if (
        type(result) is not CallToolResult
        or result.structured_content is not None
        or result.result_type != "complete"
        or (result.meta is not None and type(result.meta) is not dict)
    ):
        return None
    texts = []
    for block in result.content:
        if (
            type(block) is not TextContent
            or block.annotations is not None
            or block.meta is not None
        ):
            return None
        texts.append(block.text)
    return texts


class Shaper:
    """Shapes one connection's ``tools/call`` answers (see the module docstring)."""

    __slots__ = ("_checked", "_meta_in", "_meta_out", "_stamp")

    def __init__(self, stamp: Any) -> None:
        """``stamp`` is the server's ``serverInfo`` (modern answers carry it in ``_meta``)."""
        self._stamp = stamp
        self._checked: dict[tuple[str, bool], bool] = {}  # (version, modern): direct build ok
        self._meta_in: object = _NO_META  # the last ``_meta`` shaped the SDK's way ...
        self._meta_out: object = _NO_META  # ... and what it became (for the same version)

    def shape(self, result: Any, version: str, modern: bool) -> dict[str, Any]:
        """The wire form of a handler result, as the SDK's runner shapes it.

        Raises:
            MCPError: the result does not fit the version's result schema (as the SDK raises).
        """
        texts = _plain_texts(result)
        if texts is None:
            return self._sdk_shape(result, version, modern)
        key = (version, modern)
        trusted = self._checked.get(key)
        if trusted is None:
            trusted = self._checked[key] = self._probe(version, modern)
        meta = result.meta
        if not trusted or (meta is not None and not self._known_meta(meta, key)):
            shaped = self._sdk_shape(result, version, modern)
            if trusted and meta is not None:  # reused only where the SDK put it: first
                first = next(iter(shaped), None) == "_meta"
                self._meta_in = (key, meta)
                self._meta_out = shaped["_meta"] if first else _NO_META
            return shaped
        return self._build(texts, result.is_error, modern, meta is not None)

    def _known_meta(self, meta: dict[str, Any], key: tuple[str, bool]) -> bool:
        """Whether ``meta`` is the remembered one, keys in the same order (the wire's order)."""
        seen = self._meta_in
        return (
            type(seen) is tuple
            and seen[0] == key
            and self._meta_out is not _NO_META
            and same_json(seen[1], meta)
            and _same_order(seen[1], meta)
        )

    def _build(
        self, texts: list[str], is_error: bool, modern: bool, has_meta: bool
    ) -> dict[str, Any]:
        """The SDK's wire form of a plain-text result, built directly (key order included)."""
        shaped: dict[str, Any] = {}
        if has_meta:
            shaped["_meta"] = self._meta_out
        shaped["content"] = [{"text": text, "type": "text"} for text in texts]
        shaped["isError"] = is_error
        if modern:
            shaped["resultType"] = "complete"
            if not has_meta:
                shaped["_meta"] = {SERVER_INFO_META_KEY: self._stamp}
        return shaped

    def _probe(self, version: str, modern: bool) -> bool:
        """Whether the direct build gives the SDK's JSON text at ``version`` (checked once)."""
        probe = CallToolResult(
            content=[TextContent(type="text", text="a"), TextContent(type="text", text="b")],
            is_error=True,
        )
        try:
            expected = to_json(self._sdk_shape(probe, version, modern))
        except MCPError:
            return False
        same = to_json(self._build(["a", "b"], True, modern, False)) == expected
        if not same:
            _log.debug("tools/call answers at %s take the SDK's steps", version)
        return same

    def _sdk_shape(self, result: Any, version: str, modern: bool) -> dict[str, Any]:
        """The SDK runner's steps: dump, the version's sieve, ``resultType``, the stamp."""
        if isinstance(result, BaseModel):
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        else:
            dumped = dict(result)
        result_type = dumped.get("resultType")
        if not modern or not isinstance(result_type, str) or result_type in CORE_RESULT_TYPES:
            try:
                dumped = serialize_server_result("tools/call", version, dumped)
            except ValidationError:
                _log.exception("the gateway's tools/call answer is not a valid result")
                raise MCPError(
                    code=INTERNAL_ERROR, message="Handler returned an invalid result"
                ) from None
        if modern:
            if dumped.get("resultType") is None:
                dumped["resultType"] = "complete"
            meta = dumped.get("_meta")
            if meta is None:
                dumped["_meta"] = {SERVER_INFO_META_KEY: self._stamp}
            elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
                dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: self._stamp}
        return dumped
