"""One MCP server connection: held open by its own task, reopened after the server dies.

The ``mcp`` SDK's `Client` is an async context manager whose transport (a subprocess or an HTTP
session) belongs to the task that entered it. A `Connection` enters it in a task of its own
and waits there until closed, so calls may come from any task (every turn is one). When the
server dies (its process exits, its HTTP endpoint goes away, the transport breaks), the call in
flight fails with `MCPServerError` and the link is marked dead; the next call opens a new one.
Every wait is bounded: connecting by ``connect_timeout``, each call by its ``timeout`` (the
SDK client's own read timeout).

Every request goes through the SDK's `Client`; a stdio server is reached through
``pipeline/mcp/_stdio.py`` (the SDK's client on a transport that reads long lines in linear
time). The one check loopware adds before the SDK: arguments JSON cannot carry as UTF-8 (a lone
surrogate) are refused before the call is sent, since the SDK's client would fail its link's
writer with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._extras import import_extra
from ..errors import InvalidToolArgsError
from ._errors import MCPServerError, MCPTimeoutError

__all__ = ["Connection", "ServerSpec"]

ServerSpec = str | Sequence[str]
"""A server: an ``http://`` or ``https://`` URL (streamable HTTP), or a command line (stdio)."""

_log = logging.getLogger("pipeline.mcp")
_PAGES: Final = 100
"""At most this many ``tools/list`` pages are read (a paginator that never ends cannot hang)."""
_CLOSE_GRACE: Final = 5.0


def _is_url(server: ServerSpec) -> bool:
    return isinstance(server, str) and server.startswith(("http://", "https://"))


def describe_server(server: ServerSpec) -> str:
    """A short label for logs and errors: the URL, or the command line."""
    if isinstance(server, str):
        return server
    return shlex.join(server)


class _Link:
    """One open client: its holder task and the signal that ends it."""

    __slots__ = ("client", "closing", "dead", "task")

    def __init__(self) -> None:
        self.client: Any = None
        self.closing = asyncio.Event()
        self.dead = False
        self.task: asyncio.Task[None] | None = None

    @property
    def usable(self) -> bool:
        return not self.dead and self.task is not None and not self.task.done()


class Connection:
    """A lazily opened, self-healing connection to one MCP server (see the module docstring)."""

    __slots__ = (
        "_cwd",
        "_env",
        "_label",
        "_link",
        "_lock",
        "_server",
        "connect_timeout",
    )

    def __init__(
        self,
        server: ServerSpec,
        *,
        connect_timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        """Remember the server; nothing is opened until the first call.

        Raises:
            ValueError: an empty command line.
        """
        if isinstance(server, str) and not _is_url(server):
            server = shlex.split(server)
        if not _is_url(server) and not list(server):
            raise ValueError("an MCP server needs a URL or a non-empty command line")
        self._server: ServerSpec = server if isinstance(server, str) else tuple(server)
        self._label = describe_server(server)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._link: _Link | None = None
        self._lock: asyncio.Lock | None = None
        self.connect_timeout = connect_timeout

    @property
    def label(self) -> str:
        """The server's URL or command line."""
        return self._label

    @property
    def connected(self) -> bool:
        """True while a link is open and alive."""
        return self._link is not None and self._link.usable

    def _target(self) -> Any:
        if isinstance(self._server, str):
            return self._server
        from ._stdio import stdio_transport

        command, *args = self._server
        if command == "python":  # the interpreter running loopware, not whatever PATH finds
            command = sys.executable
        return stdio_transport([command, *args], env=self._env, cwd=self._cwd)

    async def client(self) -> Any:
        """The open client, opening (or reopening) it first when needed.

        Raises:
            MCPServerError: the server cannot be started or reached, or refused the handshake.
            MCPTimeoutError: the handshake did not finish within ``connect_timeout``.
        """
        link = self._link
        if link is not None and link.usable:
            return link.client
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            link = self._link
            if link is not None and link.usable:
                return link.client
            if link is not None:
                await self._close_link(link)
                _log.info("reconnecting to MCP server %s", self._label)
            import_extra("mcp", "mcp", "MCP toolsets")  # before a task that would hide it
            link = _Link()
            ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            link.task = asyncio.create_task(self._hold(link, ready), name=f"mcp {self._label}")
            try:
                async with asyncio.timeout(self.connect_timeout):
                    link.client = await asyncio.shield(ready)
            except TimeoutError:
                await self._close_link(link)
                raise MCPTimeoutError(
                    f"the MCP server {self._label} did not finish its handshake within "
                    f"{self.connect_timeout:g} s",
                    server=self._label,
                ) from None
            except MCPServerError:
                await self._close_link(link)
                raise
            self._link = link
            return link.client

    async def _hold(self, link: _Link, ready: asyncio.Future[Any]) -> None:
        from mcp import Client

        try:
            async with Client(self._target()) as client:
                if not ready.done():
                    ready.set_result(client)
                await link.closing.wait()
        except BaseException as exc:  # the holder must end quietly, whatever ended the link
            if not ready.done():
                ready.set_exception(
                    MCPServerError(
                        f"cannot connect to the MCP server {self._label}: {_describe(exc)}",
                        server=self._label,
                    )
                )
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
            if isinstance(exc, Exception) and not link.closing.is_set():
                # A cancelled holder is its owner going away (a loop shutting down), not the
                # server: only a failure of the link itself is worth a warning.
                _log.warning("MCP server %s disconnected: %s", self._label, _describe(exc))
        finally:
            link.dead = True
            if not ready.done():
                ready.set_exception(
                    MCPServerError(f"the MCP server {self._label} closed", server=self._label)
                )

    async def _close_link(self, link: _Link) -> None:
        link.dead = True
        link.closing.set()
        task = link.task
        if task is None or task.done():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_GRACE):
                await asyncio.wait({task})
        if not task.done():
            task.cancel()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_GRACE):
                    await asyncio.wait({task})

    async def list_tools(self) -> list[Any]:
        """Every tool the server lists (all pages, at most 100).

        Raises:
            MCPServerError: the server failed or refused the listing.
            MCPTimeoutError: it did not answer within ``connect_timeout``.
        """
        client = await self.client()
        tools: list[Any] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self.connect_timeout):
                for _ in range(_PAGES):
                    page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except TimeoutError:
            raise MCPTimeoutError(
                f"the MCP server {self._label} did not list its tools within "
                f"{self.connect_timeout:g} s",
                server=self._label,
            ) from None
        except Exception as exc:
            self._broken(exc)
            raise MCPServerError(
                f"the MCP server {self._label} failed to list its tools: {_describe(exc)}",
                server=self._label,
            ) from exc
        return tools

    async def call(self, name: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        """Call tool ``name`` on the server and return its ``CallToolResult``.

        Raises:
            InvalidToolArgsError: ``arguments`` hold a lone surrogate (not sent; the link stays).
            MCPServerError: the server could not be reached, died during the call, or answered
                with a protocol error.
            MCPTimeoutError: no answer within ``timeout`` seconds.
        """
        client = await self.client()
        try:
            _check_sendable(arguments)
            return await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except UnicodeEncodeError as exc:  # raised before anything was sent: the link is fine
            bad = exc.object[exc.start : exc.end]
            raise InvalidToolArgsError(
                f"the arguments of {name!r} hold a lone surrogate ({bad!a}), which JSON sent"
                f" as UTF-8 cannot carry; the call was not sent to the MCP server {self._label}",
                tool_name=name,
            ) from None
        except TimeoutError:
            raise MCPTimeoutError(
                f"the MCP server {self._label} did not answer {name!r} within {timeout:g} s",
                server=self._label,
                tool_name=name,
            ) from None
        except Exception as exc:
            if _is_timeout(exc):
                raise MCPTimeoutError(
                    f"the MCP server {self._label} did not answer {name!r} within {timeout:g} s",
                    server=self._label,
                    tool_name=name,
                ) from None
            died = self._broken(exc)
            what = "died during the call" if died else "refused the call"
            raise MCPServerError(
                f"the MCP server {self._label} {what} to {name!r}: {_describe(exc)}",
                server=self._label,
                tool_name=name,
            ) from exc

    def _broken(self, exc: BaseException) -> bool:
        """Mark the link dead unless ``exc`` is an error the live server answered with."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        link = self._link
        alive = link is not None and link.usable
        if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED and alive:
            return False
        if link is not None:
            link.dead = True
            link.closing.set()
        return True

    async def aclose(self) -> None:
        """Close the link (ending a stdio server's process); a later call reopens it."""
        link, self._link = self._link, None
        if link is not None:
            await self._close_link(link)


def _check_sendable(arguments: dict[str, Any]) -> None:
    """Raise UnicodeEncodeError when ``arguments`` cannot travel as UTF-8 JSON.

    The SDK's client would fail its link's writer with it, after the call was registered.
    """
    json.dumps(arguments, ensure_ascii=False).encode("utf-8")


def _is_timeout(exc: BaseException) -> bool:
    from mcp import MCPError
    from mcp_types import REQUEST_TIMEOUT

    return isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        if inner:
            return _describe(inner[0])
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
