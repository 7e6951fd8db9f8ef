"""The gateway's fast lane for ``tools/call`` over stdio (issue 16: at most 1 ms per call).

The SDK's server spends about a millisecond of CPU on every request before and after the
handler runs: it validates the line into a pydantic message, relays it through two memory
streams and a replay task, spawns a task, builds a session, a context and a tracing span,
validates the params, then dumps, re-validates and serializes the result (README, "MCP",
gateway overhead). The fast lane sees every stdin line first (``_gateway_stdio.py``) and
answers the ``tools/call`` requests it can vouch for itself, with the same wire answer the SDK
would give; every other line (``initialize``, ``tools/list``, pings, notifications, anything
malformed or unusual) goes on to the SDK unchanged, and the SDK answers it as before.

A ``tools/call`` line is the lane's when all of this holds, else the SDK gets it:

* the connection's era is settled: the client's first request went to the SDK, and either it
  opened a 2026-07-28 connection (per-request envelope) or it was the handshake and the SDK's
  ``initialize`` answer (with the negotiated version) has gone out;
* the line is one JSON object with exactly the JSON-RPC request keys, ``jsonrpc`` ``"2.0"``,
  an ``id`` that is a string or an integer;
* on a modern connection the envelope passes the SDK's own ladder
  (``classify_inbound_request``); on a handshake connection there is no modern envelope;
* the params pass the SDK's own per-version check (``validate_client_request``).

The answer is built by the same steps as the SDK's: the gateway's handler
(``_gateway.call_result``), the per-version result sieve (``serialize_server_result``),
``resultType`` and the ``serverInfo`` stamp on modern connections, the SDK's exception-to-error
ladder. A call in the lane is queued to the client's session without a task of its own, and
its answer is written by a callback once the session ran it. A ``notifications/cancelled`` for
a call in the lane cancels the wait for it (the call runs on, as on the SDK's path) and it is
never answered (it is still passed on to the SDK, which finds nothing to cancel). Progress
tokens are ignored on both paths: the gateway sends no progress. When stdin ends, calls still
in the lane are cancelled and answered ``Connection closed``, as the SDK does. What the lane
skips is the SDK's per-request machinery, including its server middleware: a tracing span the
SDK would open for the request (OpenTelemetry, when configured) is not opened for a call in
the lane.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from mcp.server.runner import modern_error_data
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import CONNECTION_CLOSED, JSONRPCRequest, jsonrpc_message_adapter
from mcp_types.methods import validate_client_request
from pydantic_core import to_json

from ._gateway import Gateway, call_result
from ._gateway_answer import Shaper, same_json

__all__ = ["FastLane"]

_log = logging.getLogger("loopware.gateway")
_Outcome = asyncio.Future[tuple[Any, Any]]
"""A queued call's outcome: its record and the upstream's raw result."""
_REQUEST_KEYS: Final = frozenset({"jsonrpc", "id", "method", "params"})
_PLAIN_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
_NO_META: Final = object()
_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
_UNSETTLED, _LEGACY, _MODERN = "unsettled", "legacy", "modern"
_CLOSED: Final = {"code": CONNECTION_CLOSED, "message": "Connection closed"}


def _is_modern(params: object) -> bool:
    """Whether ``params._meta`` carries the 2026-07-28 version key (the SDK's era test)."""
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and _VERSION_KEY in meta


def _loads(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:  # includes UnicodeDecodeError
        return None


class FastLane:
    """Answers plain ``tools/call`` requests on the gateway's stdio (see the module docstring)."""

    __slots__ = (
        "_accepted",
        "_calls",
        "_cancelled",
        "_era",
        "_gateway",
        "_init_ids",
        "_server",
        "_shaper",
        "_version",
        "_write",
    )

    def __init__(self, gateway: Gateway, server: Any, write: Callable[[bytes], None]) -> None:
        """Serve ``gateway``'s calls; ``server`` is the SDK server (its identity stamps results).

        ``write`` sends one whole line (bytes ending in a newline) to the client.
        """
        self._gateway = gateway
        self._server = server
        self._write = write
        self._era = _UNSETTLED
        self._version: str | None = None  # the negotiated version of a handshake connection
        self._init_ids: set[Any] = set()
        self._calls: dict[str | int, _Outcome] = {}  # the calls in the lane, by request id
        self._cancelled: set[_Outcome] = set()  # those the peer cancelled: never answered
        self._shaper = Shaper(server.server_info_stamp)
        # The ``_meta`` of the last call whose envelope and params the SDK's checks accepted,
        # and the version they gave: a plain call with the same ``_meta`` passes them too.
        self._accepted: tuple[object, str] | None = None

    @property
    def era(self) -> str:
        """``"unsettled"``, ``"legacy"`` (the handshake) or ``"modern"`` (2026-07-28)."""
        return self._era

    @property
    def in_flight(self) -> int:
        """How many calls the lane is running."""
        return len(self._calls)

    # -- inbound -----------------------------------------------------------------------------
    def take(self, line: bytes) -> bool:
        """Answer ``line`` here (True) or leave it to the SDK (False)."""
        era = self._era
        if era is _UNSETTLED:
            self._settle(line)
            return False
        if b'"tools/call"' not in line:
            if b'"notifications/cancelled"' in line and self._calls:
                self._peer_cancel(line)
            elif era is _LEGACY and b'"initialize"' in line:
                self._watch_initialize(line)
            return False
        if era is _LEGACY and self._version is None:
            return False
        return self._call(line)

    def _settle(self, line: bytes) -> None:
        """Learn the era from the client's first request, as the SDK decides it.

        Only a line the SDK's own parser reads as a request decides (a notification, junk or
        a request the SDK cannot parse leaves the era open, as it does for the SDK).
        """
        try:
            parsed = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return
        if not isinstance(parsed, JSONRPCRequest):
            return
        if parsed.method != "initialize" and _is_modern(parsed.params):
            self._era = _MODERN
        else:
            self._era = _LEGACY
            self._watch_initialize(line)

    def _watch_initialize(self, line: bytes) -> None:
        msg = _loads(line)
        if isinstance(msg, dict) and msg.get("method") == "initialize" and "id" in msg:
            self._init_ids.add(msg["id"])

    def _peer_cancel(self, line: bytes) -> None:
        msg = _loads(line)
        if not isinstance(msg, dict) or msg.get("method") != "notifications/cancelled":
            return
        params = msg.get("params")
        rid = params.get("requestId") if isinstance(params, dict) else None
        if not isinstance(rid, str | int) or isinstance(rid, bool):
            return
        outcome = self._calls.get(coerce_request_id(rid))
        if outcome is not None and not outcome.done():
            self._cancelled.add(outcome)
            outcome.cancel()

    def _call(self, line: bytes) -> bool:
        msg = _loads(line)
        if (
            type(msg) is not dict
            or msg.keys() != _REQUEST_KEYS
            or msg["jsonrpc"] != "2.0"
            or msg["method"] != "tools/call"
            or type(msg["id"]) not in (int, str)
            or type(msg["params"]) is not dict
        ):
            return False
        params: dict[str, Any] = msg["params"]
        modern = self._era is _MODERN
        version = self._remembered(params)
        if version is None:
            if modern:
                route = classify_inbound_request(msg)
                if isinstance(route, InboundLadderRejection):
                    return False
                version = route.protocol_version
            elif _is_modern(params) or self._version is None:
                return False
            else:
                version = self._version
            try:
                validate_client_request("tools/call", version, params)
            except Exception:  # the SDK rejects it the same way and answers with the error
                return False
            if _plain(params):
                self._accepted = (params.get("_meta", _NO_META), version)
        rid: str | int = msg["id"]
        key = coerce_request_id(rid)
        arguments = params.get("arguments") or {}
        outcome = self._gateway.queue_call("stdio", params["name"], dict(arguments))
        self._calls[key] = outcome  # a duplicate id replaces the older entry (as the SDK does)
        outcome.add_done_callback(partial(self._answer, rid, key, version, modern))
        return True

    def _remembered(self, params: dict[str, Any]) -> str | None:
        """The version of a plain call whose ``_meta`` was accepted before, else None.

        The SDK's envelope ladder reads only ``_meta``, and its params check of
        ``{"name": str, "arguments": dict, "_meta": ...}`` depends only on ``_meta`` (and the
        version): a plain call with the same ``_meta`` (same JSON types too) passes both.
        """
        accepted = self._accepted
        if accepted is None or not _plain(params):
            return None
        meta = params.get("_meta", _NO_META)
        seen = accepted[0]
        if meta is _NO_META or seen is _NO_META:
            return accepted[1] if meta is seen else None
        return accepted[1] if same_json(seen, meta) else None

    def _answer(
        self, rid: str | int, key: str | int, version: str, modern: bool, outcome: _Outcome
    ) -> None:
        """Answer a call once the session ran it (a done callback: no task per call)."""
        if self._calls.get(key) is outcome:
            del self._calls[key]
        if outcome in self._cancelled:  # a call the peer cancelled is never answered
            self._cancelled.discard(outcome)
            return
        reply: dict[str, Any]
        if outcome.cancelled():  # shutdown, not the peer: answer like the SDK
            reply = {"jsonrpc": "2.0", "id": rid, "error": _CLOSED}
        elif (exc := outcome.exception()) is not None:
            if isinstance(exc, Exception):
                reply = {"jsonrpc": "2.0", "id": rid, "error": _error(exc, modern)}
            else:  # the turn was cancelled under the call (the gateway is stopping)
                reply = {"jsonrpc": "2.0", "id": rid, "error": _CLOSED}
        else:
            try:
                shaped = self._shaper.shape(call_result(*outcome.result()), version, modern)
                reply = {"jsonrpc": "2.0", "id": rid, "result": shaped}
            except Exception as failed:
                reply = {"jsonrpc": "2.0", "id": rid, "error": _error(failed, modern)}
        self._send(reply)

    def _send(self, reply: dict[str, Any]) -> None:
        self._write(to_json(reply) + b"\n")

    # -- outbound ----------------------------------------------------------------------------
    def sent(self, data: bytes) -> None:
        """See a line the SDK sends: the ``initialize`` answer settles the negotiated version."""
        if not self._init_ids:
            return
        msg = _loads(data)
        if not isinstance(msg, dict) or msg.get("id") not in self._init_ids:
            return
        self._init_ids.discard(msg["id"])
        result = msg.get("result")
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self._version = result["protocolVersion"]

    async def aclose(self) -> None:
        """Cancel the calls still in the lane (each answered ``Connection closed``)."""
        outcomes = list(self._calls.values())
        for outcome in outcomes:
            outcome.cancel()
        if outcomes:  # their done callbacks (added first) answer them
            await asyncio.wait(outcomes, timeout=5)


def _plain(params: dict[str, Any]) -> bool:
    """Whether ``params`` are a name, an arguments object and at most ``_meta``."""
    return (
        params.keys() <= _PLAIN_PARAMS
        and type(params.get("name")) is str
        and ("arguments" not in params or type(params["arguments"]) is dict)
    )


def _error(exc: Exception, modern: bool) -> dict[str, Any]:
    """The JSON-RPC error the SDK sends for a handler that raised ``exc``."""
    data = handler_exception_to_error_data(exc)
    if data is None:
        if not modern:  # the SDK's handshake-era dispatcher answers code 0 with the message
            _log.error("the gateway's tools/call handler raised", exc_info=exc)
            return {"code": 0, "message": str(exc)}
        data = modern_error_data(exc)
    error: dict[str, Any] = data.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return error
