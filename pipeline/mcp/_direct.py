"""A lean ``tools/call`` over a stdio link: one JSON line out, one matched line back.

The ``mcp`` SDK's client spends a few hundred microseconds of CPU on each call besides the
wire (request models, a dispatcher with memory streams and tasks between the caller and the
pipe, the response parsed twice; README, "MCP", gateway overhead). `DirectCalls` sits inside
the stdio transport (``pipeline/mcp/_stdio.py``): it writes the call's request line itself and
takes its response line off the reader before the SDK would parse it, and the result then goes
through the same checks the SDK's client applies (``finish``). Everything else on the link
(the handshake, ``tools/list``, pings, notifications, server requests) stays with the SDK.

The request is the one the SDK would send: the same method and params, and on a 2026-07-28
link the same per-request envelope, copied from the SDK's own latest request on this link.
Ids are strings (``"loopware-N"``) so they never collide with the SDK's integer ids. A call
abandoned by its caller (a timeout, a cancelled turn) is followed by ``notifications/cancelled``,
as the SDK does. When the link ends, every waiting call fails with ``CONNECTION_CLOSED``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any, Final

__all__ = ["DirectCalls", "finish", "sdk"]

_log = logging.getLogger("pipeline.mcp")
_MARK: Final = b'"loopware-'
_ENVELOPE_KEYS: Final = (
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
)
_VERSION_KEY: Final = _ENVELOPE_KEYS[0]


class DirectCalls:
    """Requests written straight to a stdio server, answered by id (see the module docstring)."""

    __slots__ = ("_ids", "_pending", "_send", "closed", "envelope")

    def __init__(self) -> None:
        """No link yet: `attach` gives the writer once the process runs."""
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._send: Callable[[bytes], Awaitable[None]] | None = None
        self.closed = False
        self.envelope: dict[str, Any] | None = None
        """The 2026-07-28 envelope of the SDK's latest request (None: it sent none)."""

    @property
    def ready(self) -> bool:
        """True while the link is open."""
        return self._send is not None and not self.closed

    def attach(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        """Use ``send`` (one whole line to the server's stdin) for the direct requests."""
        self._send = send

    def saw_request(self, params: Any) -> None:
        """Note the envelope of a request the SDK sends (the direct requests copy it)."""
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and _VERSION_KEY in meta:
            self.envelope = {k: meta[k] for k in _ENVELOPE_KEYS if k in meta}
        else:
            self.envelope = None

    def take(self, line: bytes) -> bool:
        """Resolve a waiting request with ``line`` when it is its response (True)."""
        if not self._pending or _MARK not in line:
            return False
        try:
            msg = json.loads(line)
        except ValueError:
            return False
        if not isinstance(msg, dict) or "method" in msg:
            return False
        rid = msg.get("id")
        waiter = self._pending.pop(rid, None) if isinstance(rid, str) else None
        if waiter is None:
            return False
        if not waiter.done():
            waiter.set_result(msg)
        return True

    def close(self) -> None:
        """The link ended: fail every waiting request with ``CONNECTION_CLOSED``."""
        self.closed = True
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            if not waiter.done():
                waiter.set_result({"error": {"code": -32000, "message": "Connection closed"}})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its response message (``result`` or ``error``).

        The caller bounds the wait; when it gives up, the server is told so.

        Raises:
            UnicodeEncodeError: ``params`` hold a lone surrogate (UTF-8 JSON cannot carry it);
                nothing was sent.
            OSError: the server's stdin is closed.
            anyio.BrokenResourceError: likewise.
        """
        send = self._send
        if send is None or self.closed:
            return {"error": {"code": -32000, "message": "Connection closed"}}
        rid = f"loopware-{next(self._ids)}"
        if self.envelope is not None:
            params = {**params, "_meta": {**params.get("_meta", {}), **self.envelope}}
        line = _encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = waiter
        try:
            await send(line + b"\n")
            return await waiter
        except BaseException:
            if self._pending.pop(rid, None) is not None and not self.closed:
                await self._abandon(send, rid)
            raise

    async def _abandon(self, send: Callable[[bytes], Awaitable[None]], rid: str) -> None:
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": rid, "reason": "the caller stopped waiting"},
        }
        try:
            async with asyncio.timeout(1):
                await asyncio.shield(send(json.dumps(note).encode("utf-8") + b"\n"))
        except BaseException as exc:  # a courtesy: never in the way of the caller's error
            _log.debug("could not tell the MCP server a call was abandoned: %r", exc)


def _encode(message: dict[str, Any]) -> bytes:
    """``message`` as one line of UTF-8 JSON, in one serializer pass.

    pydantic's serializer (a quarter of ``json.dumps``' time here) writes what the SDK's
    client writes; NaN and infinities as ``json.dumps`` writes them. What it refuses goes to
    ``json.dumps``, which raises the same way as before.

    Raises:
        UnicodeEncodeError: a lone surrogate in a string (UTF-8 cannot carry it).
        TypeError: a value JSON has no form for.
    """
    try:
        encoded: bytes = sdk().to_json(message, inf_nan_mode="constants")
    except ValueError:  # PydanticSerializationError
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return encoded


def finish(version: str, raw: dict[str, Any]) -> Any:
    """A ``tools/call`` result as the SDK's client reads it at ``version`` (a ``CallToolResult``).

    The same steps as its ``send_request``: a negative ``ttlMs`` floored to 0, the result checked
    against the version's schema, fields of later revisions dropped, then the version-free model.

    Raises:
        pydantic.ValidationError: the result does not fit the version's schema.
        mcp.MCPError: the server asked for input (``input_required``): loopware declares no
            input capabilities, so that is not an answer it can use.
    """
    names = sdk()
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    surface = _surface(version)
    if surface is not None:
        surface.validate_python(raw, by_name=False)
    foreign = _later_fields(version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    result = _adapter().validate_python(raw, by_name=False)
    if not isinstance(result, names.CallToolResult):
        raise names.MCPError(
            code=names.INTERNAL_ERROR,
            message="the server asked for input (input_required), which loopware does not provide",
        )
    return result


@cache
def sdk() -> Any:
    """The ``mcp`` names the direct link uses, imported once (never by ``import pipeline``)."""
    from types import SimpleNamespace

    from mcp import MCPError
    from mcp_types import (
        CONNECTION_CLOSED,
        HEADER_MISMATCH,
        INTERNAL_ERROR,
        REQUEST_TIMEOUT,
        CallToolResult,
    )
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
    from pydantic_core import to_json

    return SimpleNamespace(
        to_json=to_json,
        MCPError=MCPError,
        CallToolResult=CallToolResult,
        CONNECTION_CLOSED=CONNECTION_CLOSED,
        HEADER_MISMATCH=HEADER_MISMATCH,
        INTERNAL_ERROR=INTERNAL_ERROR,
        REQUEST_TIMEOUT=REQUEST_TIMEOUT,
        MODERN_PROTOCOL_VERSIONS=frozenset(MODERN_PROTOCOL_VERSIONS),
    )


@cache
def _surface(version: str) -> Any:
    """The validator of ``version``'s own ``tools/call`` result schema (None: none defined)."""
    from mcp_types.methods import SERVER_RESULTS
    from pydantic import TypeAdapter

    row: Any = SERVER_RESULTS.get(("tools/call", version))
    return None if row is None else TypeAdapter(row)


@cache
def _adapter() -> Any:
    from mcp_types import CallToolResult, InputRequiredResult
    from pydantic import TypeAdapter

    return TypeAdapter(CallToolResult | InputRequiredResult)


@cache
def _later_fields(version: str) -> frozenset[str]:
    """Result keys a revision after ``version`` defines for ``tools/call`` and it does not."""
    from types import UnionType
    from typing import get_args

    from mcp_types.methods import SERVER_RESULTS
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
    from pydantic import BaseModel

    def fields(row: Any) -> set[str]:
        members = get_args(row) if isinstance(row, UnionType) else (row,)
        names: set[str] = set()
        for model in members:
            if isinstance(model, type) and issubclass(model, BaseModel):
                names.update(f.alias or n for n, f in model.model_fields.items())
        return names

    current = SERVER_RESULTS.get(("tools/call", version))
    if current is None or version not in KNOWN_PROTOCOL_VERSIONS:
        return frozenset()
    later: set[str] = set()
    for revision in KNOWN_PROTOCOL_VERSIONS[KNOWN_PROTOCOL_VERSIONS.index(version) + 1 :]:
        row = SERVER_RESULTS.get(("tools/call", revision))
        if row is not None:
            later |= fields(row)
    return frozenset(later - fields(current))
