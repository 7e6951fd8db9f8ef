"""Onion composition of one stage's middleware, with fresh state on every run.

A layer is a middleware ``async (ctx, call_next)``, or a *check*: a one-argument hook
``(ctx)`` (`MiddlewareSpec.check`). A check never wraps what is inside it, so it gets no layer
of its own: the run calls it in line, between the layers around it, and goes on. However many
checks a stage holds, a run crosses only its real layers (and its centre).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from inspect import isawaitable
from typing import Any

from .errors import NextCalledTwiceError

__all__ = ["Check", "Onion", "StageRun"]

StageFn = Callable[[Any, Callable[[], Awaitable[None]]], Awaitable[None]]
Check = Callable[[Any], object]
"""A one-argument hook run in line (it may return an awaitable, which is awaited)."""


class StageRun:
    """One run of a stage, and the ``call_next`` every layer of that run receives.

    ``pos`` is the layer currently innermost: the only one that can be calling ``call_next``
    (``-1`` before the outermost is entered). It moves in when a layer enters the next one and
    back out when that returns, so a second call by the same layer is caught (``called`` is a
    bit per layer). Checks between two layers run in line. One object per run keeps the
    per-iteration cost to a single allocation whatever the depth.
    """

    __slots__ = (
        "called",
        "checks",
        "ctx",
        "fns",
        "last",
        "names",
        "pos",
        "reached_end",
        "turn",
    )

    def __init__(self, onion: Onion, ctx: Any, turn: Any = None) -> None:
        self.fns = onion.fns
        self.checks = onion.checks
        self.names = onion.names
        self.ctx = ctx
        self.turn = ctx if turn is None else turn  # its ``aborted``: the turn's abort flag
        self.last = len(self.fns) - 1
        self.pos = -1
        self.called = 0
        self.reached_end = False

    def __repr__(self) -> str:
        return f"call_next(layer={self.pos}, of={len(self.fns)})"

    async def __call__(self) -> None:
        """Run the rest of the stage: the checks in line, then the next layer (or the end)."""
        i = self.pos
        j = i + 1
        bit = 1 << j  # bit j: layer j - 1 (or, for bit 0, the run itself) went on
        if self.called & bit:
            raise NextCalledTwiceError(
                f"middleware {self.names[i]!r} awaited call_next() twice",
                middleware=self.names[i],
            )
        self.called |= bit
        if j > self.last:
            self.reached_end = True
            return
        if self.turn.aborted:
            return  # an abort skips every middleware that has not started yet
        checks = self.checks
        if checks[j] is not None:
            ctx, turn, last = self.ctx, self.turn, self.last
            while True:
                result = checks[j](ctx)  # type: ignore[misc]  # checked not None
                if result is not None and isawaitable(result):
                    await result
                j += 1
                if j > last:
                    self.reached_end = True
                    return
                if turn.aborted:
                    return
                if checks[j] is None:
                    break
        self.pos = j
        try:
            await self.fns[j](self.ctx, self)
        finally:
            self.pos = i


class Onion:
    """An ordered, immutable list of middleware for one stage; the first is the outermost."""

    __slots__ = ("checks", "fns", "names")

    def __init__(
        self,
        fns: Sequence[StageFn],
        names: Sequence[str],
        checks: Sequence[Check | None] | None = None,
    ) -> None:
        """Compose ``fns`` (outermost first); ``names`` are for errors and `describe`.

        ``checks`` holds, per layer, the one-argument hook it runs in line instead of
        ``fns[i]``, or None for a real layer (default: every layer is real).
        """
        self.fns = tuple(fns)
        self.names = tuple(names)
        given = (None,) * len(self.fns) if checks is None else tuple(checks)
        if len(given) != len(self.fns):
            raise ValueError("an onion needs one entry of checks per layer")
        self.checks: tuple[Check | None, ...] = (*given, None)
        """Per layer, its check (or None), and a None past the last: a run reads
        ``checks[j]`` for the layer after the last without a bounds check."""

    def __repr__(self) -> str:
        """List the middleware names in order."""
        return f"Onion({list(self.names)!r})"

    def __len__(self) -> int:
        """Number of middleware."""
        return len(self.fns)
