"""The MCP gateway's approvals in the console: the webhook ``loopware gateway`` posts to.

The gateway's ``[approval] webhook`` points at ``POST /hooks/approval?token=HOOK_TOKEN`` (the
URL the console prints at start). The hook token is a second random token, not the access
token: it only lets a caller ask for an approval (which lists it on the page), never open a
session, and it is read from the query string only (never from a cookie). A request without
it, or with a wrong one, is refused (403) before its body is read; a body over `MAX_BODY`
bytes (413), or that is not a JSON object with ``tool``, ``call_id``, ``args`` and ``reason``
(400), is refused too: nothing is listed.

A valid request is held open while its approval waits (listed on the approvals page beside the
durable gates), and answered ``{"approved": bool, "reason": ..., "by": "console:NAME"}`` when a
person answers it there. When the gateway gives up first (its timeout closes the connection,
or the body's ``timeout`` runs out), the approval leaves the page, is listed as expired, and
an answer for it changes nothing. Pending approvals live in this process's memory only: a
console restart drops their connections, which the gateway treats as rejections.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import json
import math
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "HOOK_PATH",
    "MAX_BODY",
    "MAX_PENDING",
    "HookApproval",
    "HookApprovals",
    "HookDoor",
    "HookEndpoint",
    "HookRequestError",
    "HookVerdict",
    "parse_hook_request",
]

HOOK_PATH: Final = "/hooks/approval"
"""Where the gateway's webhook posts."""

MAX_BODY: Final = 1 << 20
"""The largest request body accepted (bytes)."""

MAX_PENDING: Final = 200
"""How many gateway approvals may wait at once (more are refused, 503)."""

_MARGIN: Final = 1.0
"""Seconds before the gateway's own ``timeout`` at which the console stops taking answers."""

_EXPIRED_KEPT: Final = 50


class HookRequestError(ValueError):
    """A webhook body the console does not accept (the message says why)."""


@dataclass(frozen=True, slots=True)
class HookApproval:
    """One approval the gateway asked for, as its webhook body gives it."""

    hook_id: str
    """The console's id for it (random; what the page's form names)."""
    tool: str
    """The tool called."""
    call_id: str
    """The call's id."""
    args: Any
    """The arguments the handler will receive (validated, as JSON data)."""
    reason: str
    """The gate's text."""
    gate: str | None = None
    """The gateway's gate id, when the body names it."""
    principal: str | None = None
    """Who called, when the body names it."""
    conversation: str | None = None
    """The gateway turn's conversation id, when the body names it."""
    turn_id: str | None = None
    """The gateway turn's id, when the body names it."""
    timeout: float | None = None
    """Seconds the gateway waits, when the body says."""
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When the console received it."""
    received: float = field(default_factory=time.monotonic)
    """The same, on the monotonic clock."""

    def waited(self) -> float:
        """Seconds it has waited so far."""
        return time.monotonic() - self.received

    def open_for_answers(self) -> bool:
        """Whether an answer may still reach the gateway in time."""
        return self.timeout is None or self.waited() < self.timeout - _MARGIN


def _text(body: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise HookRequestError(f"{key!r} must be a non-empty string")
    return value


def parse_hook_request(raw: bytes) -> HookApproval:
    """The approval a webhook body asks for.

    Raises:
        HookRequestError: the body is not UTF-8 JSON, not an object, or lacks a field.
    """
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HookRequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise HookRequestError("the body must be a JSON object")
    if not isinstance(body.get("args"), dict):
        raise HookRequestError("'args' must be a JSON object")
    if "reason" not in body or not isinstance(body["reason"], str | None):
        raise HookRequestError("'reason' must be a string")
    timeout = body.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise HookRequestError("'timeout' must be a positive number of seconds")
    return HookApproval(
        hook_id=secrets.token_urlsafe(12),
        tool=_text(body, "tool", required=True) or "",
        call_id=_text(body, "call_id", required=True) or "",
        args=body["args"],
        reason=body["reason"] or "",
        gate=_text(body, "gate"),
        principal=_text(body, "principal"),
        conversation=_text(body, "conversation"),
        turn_id=_text(body, "turn_id"),
        timeout=None if timeout is None else float(timeout),
    )


@dataclass(frozen=True, slots=True)
class HookVerdict:
    """The answer a person gave on the page, as the webhook's answer carries it."""

    approved: bool
    """Approve (True) or reject."""
    reason: str | None
    """Why, if they said."""


class HookApprovals:
    """The gateway's approvals waiting in this console (in memory), and those that expired."""

    __slots__ = ("_expired", "_pending")

    def __init__(self) -> None:
        """No approval waits yet."""
        self._pending: dict[str, tuple[HookApproval, asyncio.Future[HookVerdict]]] = {}
        self._expired: collections.deque[tuple[HookApproval, datetime]] = collections.deque(
            maxlen=_EXPIRED_KEPT
        )

    def __repr__(self) -> str:
        """How many wait."""
        return f"HookApprovals(pending={len(self._pending)})"

    def pending(self) -> list[HookApproval]:
        """The approvals waiting, oldest first."""
        return [approval for approval, _ in self._pending.values()]

    def expired(self) -> list[tuple[HookApproval, datetime]]:
        """The approvals the gateway gave up on, with when, latest first."""
        return list(reversed(self._expired))

    def is_expired(self, hook_id: str) -> bool:
        """Whether ``hook_id`` expired (among the latest kept)."""
        return any(approval.hook_id == hook_id for approval, _ in self._expired)

    def take(self, hook_id: str) -> HookApproval | None:
        """The pending approval ``hook_id`` (None when it is not waiting, or too late)."""
        found = self._pending.get(hook_id)
        if found is None:
            return None
        if not found[0].open_for_answers():
            self._expire(hook_id)
            return None
        return found[0]

    def settle(self, hook_id: str, approved: bool, reason: str | None) -> bool:
        """Answer ``hook_id``; False (nothing happens) when it no longer waits."""
        found = self._pending.pop(hook_id, None)
        if found is None or found[1].done():
            return False
        found[1].set_result(HookVerdict(approved, reason))
        return True

    def _expire(self, hook_id: str) -> None:
        found = self._pending.pop(hook_id, None)
        if found is not None:
            self._expired.append((found[0], datetime.now(UTC)))
            if not found[1].done():
                found[1].cancel()

    async def wait(self, approval: HookApproval, receive: Receive) -> HookVerdict | None:
        """Hold ``approval`` until it is answered (its verdict) or the gateway gives up (None)."""
        verdict: asyncio.Future[HookVerdict] = asyncio.get_running_loop().create_future()
        self._pending[approval.hook_id] = (approval, verdict)
        gone: asyncio.Future[None] = asyncio.ensure_future(_disconnected(receive))
        limit = None if approval.timeout is None else max(approval.timeout - _MARGIN, 0.0)
        try:
            waiting: set[asyncio.Future[Any]] = {verdict, gone}
            await asyncio.wait(waiting, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not verdict.done():
                self._expire(approval.hook_id)
        return None if verdict.cancelled() else verdict.result()

    def __len__(self) -> int:
        """How many wait."""
        return len(self._pending)


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _read_body(receive: Receive) -> bytes | None:
    """The request body, or None when it is over `MAX_BODY` (or the client left)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class HookEndpoint:
    """The ASGI endpoint at `HOOK_PATH`: checks the hook token, holds the request, answers.

    Args:
        approvals: Where pending approvals are kept.
        token: The hook token (compared in constant time).
        by: Who answers, as the webhook's answer names it (``console:NAME``).
        headers: Sent with every response.
    """

    def __init__(
        self,
        approvals: HookApprovals,
        token: str,
        by: str,
        headers: Mapping[str, str],
    ) -> None:
        """Serve ``approvals`` to whoever presents ``token``."""
        self.approvals = approvals
        self.token = token
        self.by = by
        self.headers = dict(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse, or hold until answered or given up (see the module docstring)."""
        query = dict(_query_items(scope))
        presented = query.get("token", "")
        if not presented or not hmac.compare_digest(presented.encode(), self.token.encode()):
            await self._send(send, 403, {"error": "the hook token is missing or wrong"})
            return
        raw = await _read_body(receive)
        if raw is None:
            await self._send(send, 413, {"error": f"the body is over {MAX_BODY} bytes"})
            return
        try:
            approval = parse_hook_request(raw)
        except HookRequestError as exc:
            await self._send(send, 400, {"error": str(exc)})
            return
        if len(self.approvals) >= MAX_PENDING:
            await self._send(send, 503, {"error": "too many approvals waiting"})
            return
        verdict = await self.approvals.wait(approval, receive)
        if verdict is None:  # the gateway gave up (or is about to): it rejects the call
            answer = {"approved": False, "reason": "no answer in the console in time"}
        else:
            answer = {"approved": verdict.approved, "reason": verdict.reason, "by": self.by}
        await self._send(send, 200, answer)

    async def _send(self, send: Send, status: int, body: dict[str, Any]) -> None:
        await _send_json(send, status, body, self.headers)


async def _send_json(
    send: Send, status: int, body: dict[str, Any], extra: Mapping[str, str]
) -> None:
    data = json.dumps(body).encode("utf-8")
    headers = [(k.lower().encode(), v.encode()) for k, v in extra.items()]
    headers += [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    try:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})
    except OSError:  # the gateway left meanwhile: it rejects the call itself
        pass


class HookDoor:
    """ASGI middleware: `HOOK_PATH` goes to its endpoint (its own token), the rest to ``app``.

    It sits inside the trusted-host check and outside the session check, so the webhook needs
    no session cookie and a session cookie never opens the webhook.
    """

    def __init__(self, app: ASGIApp, endpoint: HookEndpoint | None) -> None:
        """Route `HOOK_PATH` to ``endpoint`` (404 when None: no webhook served)."""
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Dispatch on the path."""
        if scope["type"] != "http" or scope.get("path") != HOOK_PATH:
            await self.app(scope, receive, send)
        elif self.endpoint is None:
            await _send_json(send, 404, {"error": "no webhook here"}, {})
        elif scope.get("method") != "POST":
            await _send_json(send, 405, {"error": "POST only"}, self.endpoint.headers)
        else:
            await self.endpoint(scope, receive, send)


def _query_items(scope: Scope) -> list[tuple[str, str]]:
    raw = scope.get("query_string", b"").decode("latin-1")
    return parse_qsl(raw, keep_blank_values=True)
