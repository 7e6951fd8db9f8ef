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

    __slots__ = ("called", "ctx", "onion", "pos", "reached_end", "turn")

    def __init__(self, onion: Onion, ctx: Any, turn: Any = None) -> None:
        self.onion = onion
        self.ctx = ctx
        self.turn = ctx if turn is None else turn  # its ``aborted``: the turn's abort flag
        self.pos = -1
        self.called = 0
        self.reached_end = False

    def __repr__(self) -> str:
        return f"call_next(layer={self.pos}, of={len(self.onion.fns)})"

    async def __call__(self) -> None:
        """Run the rest of the stage: the checks in line, then the next layer (or the end)."""
        i = self.pos
        j = i + 1
        bit = 1 << j  # bit j: layer j - 1 (or, for bit 0, the run itself) went on
        onion = self.onion
        called = self.called
        if called & bit:
            name = onion.names[i]
            raise NextCalledTwiceError(
                f"middleware {name!r} awaited call_next() twice", middleware=name
            )
        self.called = called | bit
        if self.turn.aborted:
            return  # an abort skips every middleware that has not started yet
        checks = onion.runs[j]  # empty for a real layer and past the last
        if checks:  # the checks up to the next real layer, in line
            ctx, turn = self.ctx, self.turn
            for check in checks:
                result = check(ctx)
                if result is not None and isawaitable(result):
                    await result
                if turn.aborted:
                    return
            j = onion.after[j]
        if j > onion.last:
            self.reached_end = True
            return
        self.pos = j
        try:
            await onion.fns[j](self.ctx, self)
        finally:
            self.pos = i


class Onion:
    """An ordered, immutable list of middleware for one stage; the first is the outermost."""

    __slots__ = ("after", "checks", "fns", "last", "names", "runs")

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
        runs: list[tuple[Check, ...]] = [()]
        after = [len(self.fns)]
        for j in range(len(self.fns) - 1, -1, -1):  # from the innermost out
            check = given[j]
            runs.append(() if check is None else (check, *runs[-1]))
            after.append(j if check is None else after[-1])
        self.runs: tuple[tuple[Check, ...], ...] = tuple(reversed(runs))
        """Per layer, the checks a run calls in line from it up to the next real layer (empty
        for a real layer), and an empty run past the last."""
        self.after: tuple[int, ...] = tuple(reversed(after))
        """Per layer, the first real layer at or after it (``len(fns)``: none, the end)."""
        self.last = len(self.fns) - 1
        """The index of the innermost layer (-1 for an empty onion)."""

    def __repr__(self) -> str:
        """List the middleware names in order."""
        return f"Onion({list(self.names)!r})"

    def __len__(self) -> int:
        """Number of middleware."""
        return len(self.fns)
