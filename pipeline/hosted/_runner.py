"""`HostedRunner`: a loopware stack (tools, middleware, store) for turns a host's loop drives."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._runner import TurnRunner
from .._tool import Tool
from ._iterations import DRIVER
from ._tools import HostTool, HostToolCache
from ._turn import HostedTurn

if TYPE_CHECKING:
    from .._dispatch import DispatchContext
    from ..stores._spool import SpoolStore
    from ..stores._store import TurnStore

__all__ = ["HostedRunner"]


async def _drive(ctx: DispatchContext) -> None:
    """The executor of every hosted turn: the serving step of the turn whose task runs it."""
    serve = DRIVER.get()
    if serve is None:  # a turn started on the runner by hand, not by `HostedRunner.begin`
        raise RuntimeError("a hosted turn is started with HostedRunner.begin")
    await serve(ctx)


class HostedRunner:
    """The loopware side of a host: the same ``middleware=[...]`` a `TurnRunner` takes.

    Each host run is one turn (`begin`); the host's loop decides when the model is called and
    which tools run, loopware decides, per call id, whether each call runs (`HostedTurn.call`).

    Args:
        tools: Tools known before the host offers any (`Tool` or `HostTool`); the host's own
            tools are registered as it offers them (`HostedTurn.offer`).
        middleware: Middleware sets and class-based middleware, as for `TurnRunner`.
        store: Where turns and calls are persisted (default `MemoryStore`).
        spool: Where artifact bodies are written (default `MemorySpoolStore`).

    Raises:
        InvalidRunnerConfigError: as `TurnRunner` does, naming every bad field.
    """

    __slots__ = ("_runner", "_tools")

    def __init__(
        self,
        *,
        tools: Iterable[Tool[Any] | HostTool] = (),
        middleware: Sequence[object] = (),
        store: TurnStore | None = None,
        spool: SpoolStore | None = None,
    ) -> None:
        """Compose the stack once (see the class docstring)."""
        self._tools = HostToolCache()  # the host's tools, built once for every turn
        self._runner = TurnRunner(
            executor=_drive,
            tools=[t if isinstance(t, Tool) else self._tools.tool(t) for t in tools],
            middleware=middleware,
            store=store,
            spool=spool,
            max_iterations=None,  # the host's loop has its own cap
        )

    def __repr__(self) -> str:
        """Show the stack."""
        return f"HostedRunner({self._runner!r})"

    @property
    def runner(self) -> TurnRunner:
        """The underlying runner: subscribe to events with ``runner.on(...)``."""
        return self._runner

    async def begin(
        self,
        input: str = "",
        *,
        conversation_id: str | None = None,
        stash: Mapping[str, Any] | None = None,
    ) -> HostedTurn:
        """Begin one host run as a turn: ``turn_input`` runs, then the turn waits for calls.

        Args:
            input: The run's user input, as the turn's user message.
            conversation_id: The host's thread or session id: earlier turns of it are loaded
                (their calls count for repetition) and this turn's are saved into it.
            stash: The stash to start from (a `HostedTurn.snapshot` when the host resumes).

        Raises:
            TypeError: ``input`` is not a string or ``conversation_id`` is malformed.
            InvalidStashValueError: ``stash`` is not a mapping of plain data.
        """
        turn = HostedTurn(conversation_id, self._tools)
        runner = self._runner
        await turn.start(lambda: runner.start(input, stash=stash, conversation_id=conversation_id))
        return turn


HostedRunner.__module__ = "pipeline.hosted"
