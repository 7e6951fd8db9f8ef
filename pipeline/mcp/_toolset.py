"""`MCPToolset`: an MCP server's tools as loopware `Tool` values.

Each tool the server lists becomes a `Tool` whose input schema is the server's JSON Schema
(``pipeline/mcp/_schema.py``: strict validation, the same ``E_INVALID_TOOL_ARGS`` error calls),
whose description is the server's, and whose handler calls the server through a `Connection`
(``pipeline/mcp/_connection.py``). Results become tool outputs as ``pipeline/mcp/_results.py``
says. A tool whose name is not provider-safe is renamed (or skipped when it cannot be), and a
tool whose schema is invalid is skipped; both are logged on the ``pipeline.mcp`` logger and
kept in `MCPToolset.skipped` / `MCPToolset.renamed`.

Lifetime: ``async with MCPToolset(...) as tools`` connects, lists and closes at the end, and
the toolset is an iterable of tools (``TurnRunner(tools=tools)``,
``TurnRunner(tools=[*tools, other])``). Or hand it to the runner as middleware
(``TurnRunner(middleware=[toolset])``): each turn then connects when needed (first turn, or
after the server died) and adds the tools to the turn's registry before any other middleware
runs; ``await toolset.aclose()`` ends the connection.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from fnmatch import fnmatchcase
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from .._tool import Tool
from ..errors import InvalidToolError, ToolAlreadyRegisteredError
from ..stages import MiddlewareSpec
from ._connection import Connection, ServerSpec
from ._results import to_output
from ._schema import MCPArguments, schema_model

if TYPE_CHECKING:
    from .._context import TurnContext
    from .._stash import Stash
    from .._tool import OnCollision, ToolOutput
    from ..artifacts import TrustTier

__all__ = ["MCPToolset"]

_log = logging.getLogger("pipeline.mcp")
_TIERS: Final = ("first-party", "third-party-public", "third-party-private")

ResultHook = Callable[[str, Any], None]
"""``(server_tool_name, call_tool_result) -> None``, called in the handler with each result."""


class MCPToolset:
    """The tools of one MCP server, as loopware tools (see the module docstring).

    Example::

        async with MCPToolset(["python", "-m", "mcp_server_time"], prefix="time_") as time:
            runner = TurnRunner(model="openai:gpt-4.1-mini", tools=time,
                                middleware=[ToolPolicy(deny=["time_convert*"])])
            result = await runner.run("What time is it in Oslo?")
    """

    __slots__ = (
        "_allow",
        "_connection",
        "_on_collision",
        "_on_result",
        "_prefix",
        "_renamed",
        "_skipped",
        "_tier",
        "_timeout",
        "_tools",
        "_trusted",
    )

    def __init__(
        self,
        server: ServerSpec,
        *,
        prefix: str = "",
        allow: Collection[str] | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        trusted: bool = False,
        trust_tier: TrustTier = "third-party-private",
        on_collision: OnCollision = "throw",
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        on_result: ResultHook | None = None,
    ) -> None:
        """Configure the toolset; nothing connects until `connect` or the first turn.

        Args:
            server: A URL (``http://...``: streamable HTTP) or a command line (a list of
                arguments, or one string split like a shell would; stdio). A command ``python``
                means the interpreter running loopware.
            prefix: Put before every tool name (avoids collisions between servers).
            allow: Server tool names (globs) to keep; None keeps every tool.
            timeout: Seconds one call may take (None: no limit); past it the call is an error
                call (`MCPTimeoutError`).
            connect_timeout: Seconds the handshake and the tool listing may take.
            trusted: Passed to every tool (text results in the trusted envelope).
            trust_tier: The tier of media results (images, audio, embedded resources).
            on_collision: Passed to every tool (`ToolRegistry.merge` consults it).
            env: Extra environment variables for a stdio server.
            cwd: The working directory of a stdio server.
            on_result: Called in the handler with each raw ``CallToolResult`` (the gateway
                forwards the server's own result this way).

        Raises:
            InvalidToolError: a bad option (``field`` names it).
        """
        if not isinstance(prefix, str):
            raise InvalidToolError("MCPToolset: prefix must be a string", field="prefix")
        given: object = allow  # checked at run time whatever the annotation says
        if given is not None and (
            isinstance(given, str)
            or not isinstance(given, Collection)
            or not all(isinstance(a, str) for a in given)
        ):
            raise InvalidToolError("MCPToolset: allow must be a list of tool names", field="allow")
        seconds: tuple[tuple[str, object], ...] = (
            ("timeout", timeout),
            ("connect_timeout", connect_timeout),
        )
        for field, value in seconds:
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
            ):
                raise InvalidToolError(
                    f"MCPToolset: {field} must be a positive number of seconds, got {value!r}",
                    field=field,
                )
        if trust_tier not in _TIERS:
            raise InvalidToolError(
                f"MCPToolset: trust_tier must be one of {list(_TIERS)}, got {trust_tier!r}",
                field="trust_tier",
            )
        try:
            self._connection = Connection(
                server, connect_timeout=float(connect_timeout), env=env, cwd=cwd
            )
        except ValueError as exc:
            raise InvalidToolError(f"MCPToolset: {exc}", field="server") from None
        self._prefix = prefix
        self._allow = None if allow is None else tuple(allow)
        self._timeout = None if timeout is None else float(timeout)
        self._trusted = trusted
        self._tier: TrustTier = trust_tier
        self._on_collision: OnCollision = on_collision
        self._on_result = on_result
        self._tools: tuple[Tool[Any], ...] | None = None
        self._skipped: dict[str, str] = {}
        self._renamed: dict[str, str] = {}

    def __repr__(self) -> str:
        """Return ``MCPToolset(server, tools=[...])``."""
        names = None if self._tools is None else [t.name for t in self._tools]
        return f"MCPToolset({self._connection.label!r}, tools={names!r})"

    @property
    def server(self) -> str:
        """The server's URL or command line."""
        return self._connection.label

    @property
    def connected(self) -> bool:
        """True while the connection to the server is open."""
        return self._connection.connected

    @property
    def tools(self) -> tuple[Tool[Any], ...]:
        """The tools, once listed (empty before the first `connect`)."""
        return self._tools or ()

    @property
    def skipped(self) -> dict[str, str]:
        """Server tool names left out, with the reason (bad schema, unusable name, ...)."""
        return dict(self._skipped)

    @property
    def renamed(self) -> dict[str, str]:
        """Server tool names that were changed, mapped to their loopware names."""
        return dict(self._renamed)

    def __iter__(self) -> Iterator[Tool[Any]]:
        """Iterate the tools (so ``TurnRunner(tools=toolset)`` works once connected)."""
        return iter(self.tools)

    async def connect(self) -> tuple[Tool[Any], ...]:
        """Connect if needed, list the tools (the first time) and return them.

        Raises:
            MCPServerError: the server cannot be started, reached or listed.
            MCPTimeoutError: it did not answer within ``connect_timeout``.
        """
        await self._connection.client()
        if self._tools is None:
            self._tools = self._build(await self._connection.list_tools())
        return self._tools

    async def aclose(self) -> None:
        """Close the connection (a stdio server's process ends); a later call reconnects."""
        await self._connection.aclose()

    async def __aenter__(self) -> MCPToolset:
        """Connect and list the tools."""
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection."""
        await self.aclose()

    def _build(self, listed: Iterable[Any]) -> tuple[Tool[Any], ...]:
        from ._names import plan_names

        listed = list(listed)
        wanted = [
            t
            for t in listed
            if self._allow is None or any(fnmatchcase(t.name, a) for a in self._allow)
        ]
        kept, skipped = plan_names(self._prefix, [t.name for t in wanted])
        self._skipped = dict(skipped)
        tools: list[Tool[Any]] = []
        for mcp_tool in wanted:
            name = kept.get(mcp_tool.name)
            if name is None:
                continue
            try:
                tools.append(self._tool(mcp_tool, name))
            except InvalidToolError as exc:
                self._skipped[mcp_tool.name] = exc.message
                continue
            if name != self._prefix + mcp_tool.name:
                self._renamed[mcp_tool.name] = name
                _log.warning(
                    "MCP server %s: tool %r renamed to %r (not a provider-safe name)",
                    self.server,
                    mcp_tool.name,
                    name,
                )
        for name, reason in self._skipped.items():
            _log.warning("MCP server %s: tool %r skipped: %s", self.server, name, reason)
        return tuple(tools)

    def _tool(self, mcp_tool: Any, name: str) -> Tool[Any]:
        model = schema_model(name, mcp_tool.input_schema)
        description = (mcp_tool.description or "").strip() or (
            getattr(mcp_tool, "title", None) or f"The MCP tool {mcp_tool.name}."
        )
        return Tool(
            name=name,
            description=description,
            input_schema=model,
            handler=self._handler(mcp_tool.name, name),
            trusted=self._trusted,
            on_collision=self._on_collision,
            meta={"mcp": {"server": self.server, "tool": mcp_tool.name}},
        )

    def _handler(
        self, remote: str, local: str
    ) -> Callable[[MCPArguments, Any, Stash], Awaitable[ToolOutput]]:
        connection = self._connection
        timeout = self._timeout
        tier = self._tier
        hook = self._on_result

        async def call_mcp_tool(args: MCPArguments, ctx: Any, meta: Stash) -> ToolOutput:
            result = await connection.call(remote, args.as_dict(), timeout)
            if hook is not None:
                hook(remote, result)
            return to_output(result, local, tier)

        return call_mcp_tool

    # -- runner-owned lifetime: a turn_input middleware ------------------------------------
    def middleware_specs(self) -> Iterable[MiddlewareSpec]:
        """One ``turn_input`` middleware, outermost, adding this server's tools to each turn."""
        return (
            MiddlewareSpec(
                stage="turn_input",
                name=f"mcp[{self.server}]",
                fn=self._add_tools,
                order=-1_000_000,
            ),
        )

    async def _add_tools(self, ctx: TurnContext, call_next: Callable[[], Awaitable[None]]) -> None:
        """Connect when needed and register the tools the turn does not have yet.

        A server that cannot be reached leaves the turn without its tools (logged as a
        warning on the turn); the turn goes on.
        """
        try:
            tools = await self.connect()
        except InvalidToolError:
            raise
        except Exception as exc:
            ctx.log.warning("mcp.unavailable", f"MCP server {self.server}: {exc}")
            tools = ()
        registry = ctx.tools
        for tool in tools:
            if registry.get(tool.name) is tool:
                continue
            try:
                registry.register(tool)
            except ToolAlreadyRegisteredError:
                ctx.log.warning(
                    "mcp.collision", f"MCP tool {tool.name!r} not added: the name is taken"
                )
        await call_next()


MCPToolset.__module__ = "pipeline.mcp"
