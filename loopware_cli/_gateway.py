"""``loopware gateway``: an MCP server in front of MCP servers, with loopware's policies.

The gateway connects to every upstream server (`pipeline.mcp.MCPToolset`), offers their tools
(with their prefixes, minus the ones `ToolPolicy` denies) to its own clients, and runs every
call a client makes through one `TurnRunner` with the configured middleware: `ToolPolicy`,
`ToolCallLimit`, `RepetitionDetector`, `ApprovalGate` (all acting in the ``tool_call`` stage,
before the call is forwarded) and `AuditLog`.

Each connected client is one conversation, served by one long-running turn whose executor
takes the client's calls one at a time (one dispatch iteration per call): limits and
repetition count over the client's whole session, and the audit chain gets a row for every
call, allowed or denied. A call that is denied never reaches the upstream server. If a policy
ends the turn (``nack``), the next call starts a new turn in the same conversation. Who is a
client: the process on stdio; over HTTP the ``X-Loopware-Conversation`` header when sent, else
``Mcp-Session-Id``, else the client's name and TCP peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from fnmatch import fnmatchcase
from typing import Any, Final, Literal

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, AuditSink, JsonlAuditSink, SqliteAuditSink
from pipeline import DispatchContext, Tool, TurnRunner
from pipeline.calls import ToolCall
from pipeline.mcp import MCPToolset
from pipeline.stores import MemoryStore

from ._gateway_approval import build_approver
from ._gateway_config import GatewayConfig

__all__ = ["Gateway", "answer_call", "call_result", "forwarded"]

_log = logging.getLogger("loopware.gateway")
_raw: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("raw", default=None)
_STOP: Final = None


def _keep_raw(remote: str, result: Any) -> None:
    box = _raw.get()
    if box is not None:
        box.append(result)


_ATTEMPTS: Final = 3
"""Turns a queued call may see end before one runs it (then it fails)."""


class _Call:
    __slots__ = ("args", "attempts", "done", "name")

    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name = name
        self.args = args
        self.attempts = 0
        self.done: asyncio.Future[tuple[ToolCall, Any]] = asyncio.get_running_loop().create_future()


class _Session:
    """One client's conversation: a queue of calls and the turn that runs them."""

    __slots__ = (
        "_idle_at",
        "_idle_timer",
        "_queue",
        "_runner",
        "_turn",
        "_waiting",
        "gateway",
        "key",
    )

    def __init__(self, gateway: Gateway, key: str) -> None:
        self.gateway = gateway
        self.key = key
        self._queue: asyncio.Queue[_Call | None] = asyncio.Queue()
        self._turn: asyncio.Future[Any] | None = None
        self._runner: TurnRunner | None = None
        self._waiting = False  # the executor waits for the client's next call
        self._idle_at = 0.0  # when that wait becomes idle (loop time)
        self._idle_timer: asyncio.TimerHandle | None = None

    async def executor(self, ctx: DispatchContext) -> None:
        """Run the next call of this client (one per iteration); ack when the client is gone.

        A wait longer than the session's idle timeout ends the turn (the next call starts
        another). One timer serves every wait: it is armed when none is, and when it fires
        early (a later wait moved the idle time) it re-arms at the current one.
        """
        queue = self._queue
        if queue.empty():
            loop = asyncio.get_running_loop()
            self._idle_at = loop.time() + self.gateway.config.session_idle_timeout
            if self._idle_timer is None:
                self._idle_timer = loop.call_at(self._idle_at, self._idle_check)
            self._waiting = True
            try:
                call = await queue.get()
            finally:
                self._waiting = False
        else:
            call = queue.get_nowait()
        if call is _STOP:
            ctx.ack()
            return
        box: list[Any] = []
        token = _raw.set(box)
        try:
            call_id = ToolCall.new_id()
            record = await ctx.run_tool(call.name, call.args, call_id=call_id)
            await ctx.store_tool_call(record)
        except BaseException as exc:
            if not call.done.done():
                call.done.set_exception(exc)
            raise
        finally:
            _raw.reset(token)
        if not call.done.done():
            call.done.set_result((record, box[-1] if box else None))

    def _idle_check(self) -> None:
        """The idle timer fired: stop a wait that has gone on too long, or re-arm."""
        self._idle_timer = None
        if not self._waiting or not self._queue.empty():
            return  # no wait now (the next one arms the timer), or a call is on its way
        loop = asyncio.get_running_loop()
        if loop.time() >= self._idle_at:
            self._queue.put_nowait(_STOP)
        else:
            self._idle_timer = loop.call_at(self._idle_at, self._idle_check)

    def enqueue(self, name: str, args: dict[str, Any]) -> asyncio.Future[tuple[ToolCall, Any]]:
        """Queue one call for this client's turn (started when none runs).

        The future completes with the call's record and the upstream's raw result once the
        turn ran it; cancelling it leaves the call to run, unanswered.
        """
        call = _Call(name, args)
        self._queue_call(call)
        return call.done

    def _queue_call(self, call: _Call) -> None:
        turn = self._turn
        if turn is None or turn.done():
            if self._runner is None:
                self._runner = self.gateway.runner(self)
            handle = self._runner.start(f"MCP gateway session {self.key}", conversation_id=self.key)
            turn = self._turn = asyncio.ensure_future(handle)  # one waiter per turn
            turn.add_done_callback(self._turn_ended)
        self._queue.put_nowait(call)

    def _turn_ended(self, turn: asyncio.Future[Any]) -> None:
        """Queue the calls no executor took for the next turn (each at most `_ATTEMPTS` times)."""
        if turn is not self._turn:  # an older turn: the queue already feeds the next one
            return
        for waiting in _drain(self._queue):
            if waiting is None or waiting.done.done():
                continue
            waiting.attempts += 1
            if waiting.attempts >= _ATTEMPTS:
                waiting.done.set_exception(RuntimeError("the gateway could not run the call"))
            else:
                self._queue_call(waiting)

    async def close(self) -> None:
        """End this client's turn."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        turn = self._turn
        if turn is not None and not turn.done():
            await self._queue.put(_STOP)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(turn, 10)


def _drain(queue: asyncio.Queue[_Call | None]) -> list[_Call | None]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


class Gateway:
    """The upstream toolsets, the middleware stack and one session per client."""

    __slots__ = ("_middleware", "_sessions", "_sink", "_store", "_tools", "config", "toolsets")

    def __init__(self, config: GatewayConfig) -> None:
        """Build the toolsets and the middleware; nothing connects until `start`."""
        self.config = config
        self.toolsets = [
            MCPToolset(
                u.server,
                prefix=u.prefix,
                allow=u.allow,
                timeout=u.timeout,
                env=u.env,
                cwd=u.cwd,
                on_result=_keep_raw,
            )
            for u in config.upstreams
        ]
        stack: list[object] = [ToolPolicy(allow=config.allow, deny=config.deny)]
        if config.limits or config.total is not None:
            stack.append(ToolCallLimit(config.limits, total=config.total, on_exceed="hide"))
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
        self._sessions: dict[str, _Session] = {}
        self._store = MemoryStore()  # one store: a session's later turns see its earlier calls
        self._tools: tuple[Tool[Any], ...] = ()

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

    def runner(self, session: _Session) -> TurnRunner:
        """The runner of one session's turns (the session's executor, the shared stack)."""
        return TurnRunner(
            executor=session.executor,
            tools=self._tools,
            middleware=self._middleware,
            store=self._store,
            max_iterations=None,
        )

    def offered(self) -> list[Tool[Any]]:
        """The tools clients are shown: every upstream tool `ToolPolicy` permits."""
        allow, deny = self.config.allow, self.config.deny
        return [
            t
            for t in self._tools
            if (allow is None or any(fnmatchcase(t.name, g) for g in allow))
            and not any(fnmatchcase(t.name, g) for g in deny)
        ]

    def session(self, key: str) -> _Session:
        """The session of client ``key`` (made on its first call)."""
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session(self, key)
        return session

    async def call(self, key: str, name: str, args: dict[str, Any]) -> tuple[ToolCall, Any]:
        """Run client ``key``'s call of ``name``: its record, and the upstream's raw result.

        Cancelling the wait (the client cancelled its request) leaves the call to run; only its
        outcome is no longer awaited.
        """
        return await self.session(key).enqueue(name, args)

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


async def answer_call(gateway: Gateway, key: str, name: str, args: dict[str, Any]) -> Any:
    """The ``tools/call`` result of client ``key``'s call (an MCP ``CallToolResult``).

    The upstream's own result when the call was forwarded; else an ``isError`` result with
    loopware's message (or, for a call that succeeded without an upstream result, its text).
    """
    record, raw = await gateway.call(key, name, args)
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
