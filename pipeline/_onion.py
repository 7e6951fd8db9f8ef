"""Onion composition of one stage's middleware, with fresh state on every run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .errors import NextCalledTwiceError

__all__ = ["Onion", "StageRun"]

StageFn = Callable[[Any, Callable[[], Awaitable[None]]], Awaitable[None]]


class StageRun:
    """One run of a stage, and the ``call_next`` every layer of that run receives.

    ``pos`` is the layer currently innermost: the only one that can be calling ``call_next``.
    It moves in when a layer enters the next one and back out when that returns, so a second
    call by the same layer is caught (``called`` is a bit per layer). One object per run keeps
    the per-iteration cost to a single allocation whatever the depth.
    """

    __slots__ = ("called", "ctx", "fns", "last", "names", "pos", "reached_end", "turn")

    def __init__(
        self, fns: Sequence[StageFn], names: Sequence[str], ctx: Any, turn: Any = None
    ) -> None:
        self.fns = fns
        self.names = names
        self.ctx = ctx
        self.turn = ctx if turn is None else turn  # its ``aborted``: the turn's abort flag
        self.last = len(fns) - 1
        self.pos = 0
        self.called = 0
        self.reached_end = False

    def __repr__(self) -> str:
        return f"call_next(layer={self.pos}, of={len(self.fns)})"

    async def __call__(self) -> None:
        i = self.pos
        bit = 1 << i
        if self.called & bit:
            raise NextCalledTwiceError(
                f"middleware {self.names[i]!r} awaited call_next() twice",
                middleware=self.names[i],
            )
        self.called |= bit
        if i == self.last:
            self.reached_end = True
            return
        if self.turn.aborted:
            return  # an abort skips every middleware that has not started yet
        j = i + 1
        self.pos = j
        try:
            await self.fns[j](self.ctx, self)
        finally:
            self.pos = i


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
