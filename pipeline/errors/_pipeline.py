"""A middleware stage failed: the `PipelineError` family."""

from __future__ import annotations

from typing import Any

from ._root import LoopError

__all__ = [
    "DispatchPipelineError",
    "InputPipelineError",
    "NextCalledTwiceError",
    "OutputPipelineError",
    "PipelineError",
    "PipelineShortCircuitedError",
]


class PipelineError(LoopError):
    """Family: a middleware stage failed or broke the onion's contract.

    Attributes:
        stage: The stage (``"turn_input"``, ``"dispatch_input"``, ``"dispatch_output"``,
            ``"turn_output"``, ``"executor"``), when known.
        middleware: The name of the middleware to blame, when known.
    """

    code = "E_PIPELINE_ERROR"
    status = 500
    fatal = False
    default_message = "a pipeline stage failed"
    stage: str | None
    middleware: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        stage: str | None = None,
        middleware: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, stage=stage, middleware=middleware, **context)


class InputPipelineError(PipelineError):
    """A turn input middleware raised; ``__cause__`` is the original exception."""

    code = "E_INPUT_PIPELINE_ERROR"
    default_message = "a turn input middleware failed"


class DispatchPipelineError(PipelineError):
    """A dispatch input or output middleware raised; ``__cause__`` is the original exception."""

    code = "E_DISPATCH_PIPELINE_ERROR"
    default_message = "a dispatch middleware failed"


class OutputPipelineError(PipelineError):
    """A turn output middleware raised; ``__cause__`` is the original exception."""

    code = "E_OUTPUT_PIPELINE_ERROR"
    default_message = "a turn output middleware failed"


class PipelineShortCircuitedError(PipelineError):
    """A stage ended without reaching its end; ``stage`` names it."""

    code = "E_PIPELINE_SHORT_CIRCUITED"
    default_message = "a middleware returned without calling call_next()"


class NextCalledTwiceError(PipelineError):
    """A middleware awaited ``call_next()`` twice; ``middleware`` names it."""

    code = "E_NEXT_CALLED_TWICE"
    fatal = True
    default_message = "call_next() was awaited twice by one middleware"
