"""Onion composition of one stage's middleware, with fresh state on every run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._errors import NextCalledTwiceError

__all__ = ["Onion"]

StageFn = Callable[[Any, Callable[[], Awaitable[None]]], Awaitable[None]]


class _Next:
    """The ``call_next`` handed to layer ``index`` during one run of a stage."""

    __slots__ = ("_called", "_index", "_run")

    def __init__(self, run: _Run, index: int) -> None:
        self._run = run
        self._index = index
        self._called = False

    def __repr__(self) -> str:
        return f"call_next(layer={self._index}, called={self._called})"

    async def __call__(self) -> None:
        if self._called:
            raise NextCalledTwiceError(
                f"middleware {self._run.names[self._index]!r} awaited call_next() twice",
                middleware=self._run.names[self._index],
            )
        self._called = True
        await self._run.enter(self._index + 1)


class _Run:
    """The state of one run of a stage: created fresh for every turn and every iteration."""

    __slots__ = ("ctx", "fns", "names", "reached_end")

    def __init__(self, fns: Sequence[StageFn], names: Sequence[str], ctx: Any) -> None:
        self.fns = fns
        self.names = names
        self.ctx = ctx
        self.reached_end = False

    async def enter(self, index: int) -> None:
        if index == len(self.fns):
            self.reached_end = True
            return
        if self.ctx.aborted:
            return  # an abort skips every middleware that has not started yet
        await self.fns[index](self.ctx, _Next(self, index))


class Onion:
    """An ordered, immutable list of middleware for one stage; the first is the outermost."""

    __slots__ = ("fns", "names")

    def __init__(self, fns: Sequence[StageFn], names: Sequence[str]) -> None:
        """Compose ``fns`` (outermost first); ``names`` are for errors and `describe`."""
        self.fns = tuple(fns)
        self.names = tuple(names)

    def __repr__(self) -> str:
        """List the middleware names in order."""
        return f"Onion({list(self.names)!r})"

    def __len__(self) -> int:
        """Number of middleware."""
        return len(self.fns)

    async def run(self, ctx: Any) -> bool:
        """Run the stage on ``ctx``; return True when the innermost ``call_next`` was reached.

        Exceptions propagate as raised; an empty stage is trivially complete.
        """
        if not self.fns:
            return True
        run = _Run(self.fns, self.names, ctx)
        await run.enter(0)
        return run.reached_end
