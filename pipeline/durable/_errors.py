"""The errors of durable turns, in the one tree (``pipeline/errors/__init__.py``).

``DurableConfigError`` (E_DURABLE_CONFIG) is a ``ConfigurationError``,
``GateNotWaitingError`` (E_DURABLE_GATE_NOT_WAITING) a ``GateError``,
``RecordedToolError`` (E_DURABLE_RECORDED_TOOL_ERROR) and ``ToolInterruptedError``
(E_DURABLE_TOOL_INTERRUPTED) are ``ToolError``, and
``ReplayDivergedError`` (E_DURABLE_REPLAY_DIVERGED) a ``LoopError``.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError, GateError, LoopError, ToolError

__all__ = [
    "DurableConfigError",
    "GateNotWaitingError",
    "RecordedToolError",
    "ReplayDivergedError",
    "ToolInterruptedError",
]


class DurableConfigError(ConfigurationError):
    """A durable runner, worker or client cannot be set up (bad option, missing ``dbos``)."""

    code = "E_DURABLE_CONFIG"
    status = 500
    fatal = True
    default_message = "the durable set-up is invalid"


class GateNotWaitingError(GateError):
    """``approve`` named a gate id that is malformed, unknown, or no longer waiting."""

    code = "E_DURABLE_GATE_NOT_WAITING"
    status = 404
    fatal = False
    default_message = "no turn is waiting on this gate"


class RecordedToolError(ToolError):
    """A handler's `LoopError` as its step recorded it; ``str()`` is the original's, exactly.

    A resumed turn re-raises it in place of the handler, so the call's record reads the same
    ``Error: ...`` text as on the first run.
    """

    code = "E_DURABLE_RECORDED_TOOL_ERROR"
    status = 500
    fatal = False
    default_message = "a recorded tool error"

    def __init__(self, text: str, **context: Any) -> None:
        """Wrap ``text``, the recorded ``str()`` of the handler's error."""
        super().__init__(text, **context)
        self.text = text

    def __str__(self) -> str:
        """The recorded text, unchanged."""
        return self.text


class ToolInterruptedError(ToolError):
    """A handler was running when its worker died; the resumed turn did not run it again.

    Durable tools run at most once: the call's record reads this error (the model can check
    and retry). Tools whose handler is safe to repeat opt in to a re-run instead
    (``DurableTurnRunner(rerun_interrupted=...)``).
    """

    code = "E_DURABLE_TOOL_INTERRUPTED"
    status = 500
    fatal = False
    default_message = "the tool was interrupted by a worker's crash"


class ReplayDivergedError(LoopError):
    """A resumed turn reached a step with a stash that differs from the one checkpointed there.

    Replay re-runs the middleware; a middleware whose stash depends on something other than the
    turn's own inputs and recorded steps (the clock, a random number) cannot be resumed safely.
    """

    code = "E_DURABLE_REPLAY_DIVERGED"
    status = 500
    fatal = False
    default_message = "the resumed turn diverged from its checkpoints"


for _cls in (
    DurableConfigError,
    GateNotWaitingError,
    RecordedToolError,
    ReplayDivergedError,
    ToolInterruptedError,
):
    _cls.__module__ = "pipeline.durable"
