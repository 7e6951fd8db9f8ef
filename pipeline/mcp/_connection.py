"""One MCP server connection: held open by its own task, reopened after the server dies.

The ``mcp`` SDK's `Client` is an async context manager whose transport (a subprocess or an HTTP
session) belongs to the task that entered it. A `Connection` enters it in a task of its own
and waits there until closed, so calls may come from any task (every turn is one). When the
server dies (its process exits, its HTTP endpoint goes away, the transport breaks), the call in
flight fails with `MCPServerError` and the link is marked dead; the next call opens a new one.
Every wait is bounded: connecting by ``connect_timeout``, each call by its ``timeout`` (the
calls' deadlines share one timer, ``pipeline/mcp/_deadlines.py``).

On a stdio link, ``tools/call`` goes the lean way of ``pipeline/mcp/_direct.py`` (the SDK's
client still opens the link, lists the tools and checks each result against the tool's output
schema); ``direct=False`` keeps every call on the SDK's client. A call the server rejects with
``HEADER_MISMATCH`` is resent through the SDK's client, which re-lists the tools first.
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

from ..errors import InvalidToolArgsError
from ._deadlines import Deadlines
from ._direct import DirectCalls, finish, sdk
from ._errors import MCPServerError, MCPTimeoutError
from ._quick import quick_result

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

    __slots__ = ("client", "closing", "dead", "direct", "task")

    def __init__(self, direct: DirectCalls | None) -> None:
        self.client: Any = None
        self.direct = direct
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
        "_deadlines",
        "_direct",
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
        direct: bool = True,
    ) -> None:
        """Remember the server; nothing is opened until the first call.

        ``direct=False`` sends every call through the SDK's client (see the module docstring).

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
        self._direct = direct and not isinstance(self._server, str)
        self._link: _Link | None = None
        self._lock: asyncio.Lock | None = None
        self._deadlines = Deadlines()
        self.connect_timeout = connect_timeout

    @property
    def label(self) -> str:
        """The server's URL or command line."""
        return self._label

    @property
    def connected(self) -> bool:
        """True while a link is open and alive."""
        return self._link is not None and self._link.usable

    def _target(self, link: _Link) -> Any:
        if isinstance(self._server, str):
            return self._server
        from ._stdio import stdio_transport

        command, *args = self._server
        if command == "python":  # the interpreter running loopware, not whatever PATH finds
            command = sys.executable
        return stdio_transport([command, *args], env=self._env, cwd=self._cwd, direct=link.direct)

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
            link = _Link(DirectCalls() if self._direct else None)
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
            async with Client(self._target(link)) as client:
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
        link = self._link
        direct = link.direct if link is not None else None
        try:
            async with self._deadlines.after(timeout):  # one timer for all calls, not one each
                if direct is not None and _direct_fits(client, direct):
                    return await self._call_direct(client, direct, name, arguments, timeout)
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

    async def _call_direct(
        self,
        client: Any,
        direct: DirectCalls,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None,
    ) -> Any:
        """``tools/call`` the lean way; the result checked as the SDK's client checks it."""
        names = sdk()
        answer = await direct.request("tools/call", {"name": name, "arguments": arguments})
        error = answer.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            if code == names.HEADER_MISMATCH:  # the SDK's client re-lists the tool and resends once
                return await client.call_tool(name, arguments, read_timeout_seconds=timeout)
            if not isinstance(code, int) or isinstance(code, bool):
                code = -32603
            message = error.get("message") if isinstance(error, dict) else None
            data = error.get("data") if isinstance(error, dict) else None
            raise names.MCPError(code=code, message=str(message or "(no message)"), data=data)
        raw = answer.get("result")
        if not isinstance(raw, dict):
            raise names.MCPError(code=-32603, message="the response carries no result object")
        version = client.protocol_version
        result = quick_result(version, raw)  # the plain-text shape in one pass
        if result is None:
            result = finish(version, raw)
        if not result.is_error:
            await client.session.validate_tool_result(name, result)
        return result

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


def _direct_fits(client: Any, direct: DirectCalls) -> bool:
    """Whether the lean way sends what the SDK's client would (the envelope is known)."""
    if not direct.ready:
        return False
    modern = client.protocol_version in sdk().MODERN_PROTOCOL_VERSIONS
    return modern == (direct.envelope is not None)


def _check_sendable(arguments: dict[str, Any]) -> None:
    """Raise UnicodeEncodeError when ``arguments`` cannot travel as UTF-8 JSON.

    The SDK's client would fail its link's writer with it, after the call was registered.
    """
    json.dumps(arguments, ensure_ascii=False).encode("utf-8")


def _is_timeout(exc: BaseException) -> bool:
    names = sdk()
    return isinstance(exc, names.MCPError) and exc.code == names.REQUEST_TIMEOUT


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        if inner:
            return _describe(inner[0])
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
