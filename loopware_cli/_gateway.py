"""``loopware gateway``: an MCP server in front of MCP servers, with loopware's policies.

The gateway connects to every upstream server (`pipeline.mcp.MCPToolset`), offers their tools
(with their prefixes, minus the ones `ToolPolicy` denies) to its own clients, and runs every
call a client makes through one `HostedRunner` (``pipeline.hosted``) with the configured
middleware: `ToolPolicy`, `ToolCallLimit`, `RepetitionDetector`, `ApprovalGate` (all acting in
the ``tool_call`` stage, before the call is forwarded) and `AuditLog`.

Each principal (the process on stdio; over HTTP the authenticated caller, or the one local
principal when no authentication is configured) has one session
(``loopware_cli/_gateway_session.py``): its calls run through its hosted turns, several at once,
rolling over to a new turn every ``roll_over`` calls with the counts carried, so limits,
repetition and approvals hold over everything the principal does, across MCP sessions,
reconnects and conversation names, and the audit chain gets a row for every call, allowed or
denied. A call that is denied never reaches the upstream server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any, Final, Literal

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, AuditSink, JsonlAuditSink, SqliteAuditSink
from pipeline import Tool
from pipeline.calls import ToolCall
from pipeline.hosted import HostedRunner
from pipeline.mcp import MCPToolset

from ._gateway_approval import build_approver
from ._gateway_caps import CAP_PREFIX, cap_limits
from ._gateway_config import GatewayConfig
from ._gateway_session import Session, keep_raw
from ._gateway_store import WindowStore

__all__ = ["Gateway", "answer_call", "call_result", "forwarded"]

_log = logging.getLogger("loopware.gateway")


class Gateway:
    """The upstream toolsets, the middleware stack and one session per client."""

    __slots__ = (
        "_hosted",
        "_middleware",
        "_sessions",
        "_sink",
        "_store",
        "_tools",
        "config",
        "toolsets",
    )

    def __init__(self, config: GatewayConfig, *, clock: Callable[[], float] = time.time) -> None:
        """Build the toolsets and the middleware; nothing connects until `start`.

        ``clock`` (seconds since the epoch) is what the caps' windows are read on; a test
        moves it by hand.
        """
        self.config = config
        self.toolsets = [
            MCPToolset(
                u.server,
                prefix=u.prefix,
                allow=u.allow,
                timeout=u.timeout,
                env=u.env,
                cwd=u.cwd,
                on_result=keep_raw,
            )
            for u in config.upstreams
        ]
        stack: list[object] = [ToolPolicy(allow=config.allow, deny=config.deny)]
        if config.limits or config.total is not None:
            stack.append(ToolCallLimit(config.limits, total=config.total, on_exceed="hide"))
        stack.extend(cap_limits(config.caps, clock))
        if config.repetition is not None:
            stack.append(RepetitionDetector(threshold=config.repetition))
        if config.approval is not None:
            stack.append(
                ApprovalGate(
                    config.approval.tools,
                    build_approver(config.approval),
                    timeout=config.approval.timeout,
                )
            )
        self._sink: AuditSink | None = None
        if config.audit is not None:
            suffix = config.audit.suffix.lower()
            sqlite = suffix in (".sqlite", ".sqlite3", ".db")
            sync: Literal["full", "normal"] = (
                "normal" if config.audit_synchronous == "normal" else "full"
            )
            self._sink = (
                SqliteAuditSink(config.audit, synchronous=sync)
                if sqlite
                else JsonlAuditSink(config.audit, synchronous=sync)
            )
            stack.append(AuditLog(self._sink))
        self._middleware: tuple[object, ...] = tuple(stack)
        self._sessions: dict[str, Session] = {}
        # one store: a principal's later turns see its latest calls (a window: flat memory)
        self._store = WindowStore(window=config.roll_over)
        self._tools: tuple[Tool[Any], ...] = ()
        self._hosted: HostedRunner | None = None

    async def start(self) -> None:
        """Connect to every upstream and list its tools.

        Raises:
            MCPServerError: an upstream cannot be started or listed.
        """
        tools: list[Tool[Any]] = []
        seen: set[str] = set()
        for upstream, toolset in zip(self.config.upstreams, self.toolsets, strict=True):
            for tool in await toolset.connect():
                if tool.name in seen:
                    _log.warning(
                        "upstream %s: tool %r skipped: another upstream has it (set a prefix)",
                        upstream.name,
                        tool.name,
                    )
                    continue
                seen.add(tool.name)
                tools.append(tool)
            for name, reason in toolset.skipped.items():
                _log.warning("upstream %s: tool %r skipped: %s", upstream.name, name, reason)
        self._tools = tuple(tools)
        self._hosted = None  # built again with the tools listed

    @property
    def hosted(self) -> HostedRunner:
        """The runner of every principal's turns: the upstream tools and the shared stack."""
        hosted = self._hosted
        if hosted is None:
            hosted = self._hosted = HostedRunner(
                tools=self._tools, middleware=self._middleware, store=self._store
            )
        return hosted

    def offered(self) -> list[Tool[Any]]:
        """The tools clients are shown: every upstream tool `ToolPolicy` permits."""
        allow, deny = self.config.allow, self.config.deny
        return [
            t
            for t in self._tools
            if (allow is None or any(fnmatchcase(t.name, g) for g in allow))
            and not any(fnmatchcase(t.name, g) for g in deny)
        ]

    @property
    def store(self) -> WindowStore:
        """The store of every principal's latest calls."""
        return self._store

    def session(self, principal: str) -> Session:
        """The session of ``principal`` (made on its first call; kept for the process)."""
        session = self._sessions.get(principal)
        if session is None:
            config = self.config
            session = self._sessions[principal] = Session(
                principal,
                self.hosted,
                roll_over=config.roll_over,
                max_concurrent=config.max_concurrent,
                idle_timeout=config.session_idle_timeout,
                transient=CAP_PREFIX if config.caps else None,
            )
        return session

    async def call(
        self, principal: str, name: str, args: dict[str, Any], conversation: str | None = None
    ) -> tuple[ToolCall, Any]:
        """Run ``principal``'s call of ``name``: its record, and the upstream's raw result.

        ``conversation`` names a conversation within the principal (its policy state is the
        principal's whatever the name). Cancelling the wait (the client cancelled its request)
        leaves the call to run; only its outcome is no longer awaited.
        """
        return await self.session(principal).enqueue(name, args, conversation)

    async def aclose(self) -> None:
        """End every session's turn, close the upstreams and the audit sink."""
        for session in list(self._sessions.values()):
            await session.close()
        self._sessions.clear()
        for toolset in self.toolsets:
            await toolset.aclose()
        if self._sink is not None:
            close = getattr(self._sink, "close", None)
            if close is not None:
                result = close()
                if asyncio.iscoroutine(result):
                    await result

    @property
    def sink(self) -> AuditSink | None:
        """The audit sink, when one is configured."""
        return self._sink


async def answer_call(
    gateway: Gateway,
    principal: str,
    name: str,
    args: dict[str, Any],
    conversation: str | None = None,
) -> Any:
    """The ``tools/call`` result of ``principal``'s call (an MCP ``CallToolResult``).

    The upstream's own result when the call was forwarded; else an ``isError`` result with
    loopware's message (or, for a call that succeeded without an upstream result, its text).
    """
    record, raw = await gateway.call(principal, name, args, conversation)
    return call_result(record, raw)


_FORWARDED: Final = frozenset({"allowed", "approved", "warned"})
"""Verdicts under which a call that ran keeps the upstream's own outcome (no decision answered
it, withheld its result or replaced it)."""


def forwarded(record: ToolCall) -> bool:
    """Whether the upstream's own result is the call's outcome, as its record says.

    True when the handler ran (the call was forwarded), did not fail, and no decision replaced
    or withheld its result. A call refused before it ran (denied, rejected, a name no tool has,
    a look-alike of one, bad arguments) has ``ran`` False and never reached the upstream.
    """
    return record.ran and not record.is_error and record.verdict in _FORWARDED


def call_result(record: ToolCall, raw: Any) -> Any:
    """The ``tools/call`` result of a call's record and raw upstream result (see `answer_call`).

    The upstream's own result only when the record says it is the call's outcome
    (`forwarded`); otherwise the record's text, ``isError`` when the record is an error.
    """
    import mcp_types as types

    if raw is not None and forwarded(record):
        return raw
    results = record.results
    body = results if isinstance(results, str) else str(results)
    if not record.is_error and results is not None:
        reader = getattr(results, "as_string", None)
        body = reader() if callable(reader) else body
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=body)], is_error=record.is_error
    )
