"""``loopware run``: one real turn against a real model, printed like the demo.

The model is named by a string (``openai:gpt-4.1-mini``, ``anthropic:claude-sonnet-4-5``,
``openai-compatible:<name>@<base_url>``; see `pipeline.models.infer_model`), tools and
middleware by ``module:attr``. The answer streams as it arrives; each iteration is printed with
the tools offered, every call, its result and the stack's decisions; a summary with the token
usage follows. Without the provider's API key it says which variable to set and points at
``loopware demo``, which needs none.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from typing import Final, TextIO

from middleware.transcripts import policy_labels
from pipeline import Tool, ToolLoopExecutor, TurnRunner
from pipeline.errors import LoopError, MissingExtraError, ModelAuthenticationError
from pipeline.events import IterationEnd, ModelTextDelta
from pipeline.models import ChatModel, ModelRequest, ModelResponse, infer_model

from ._live import LiveOutput
from ._resolve import resolve_middleware, resolve_tools
from ._style import Style

__all__ = ["EXIT_MODEL", "RunOptions", "run_model_turn", "run_turn"]

EXIT_MODEL: Final = 5
"""``run``: the model cannot be used (no API key, a refused key, an unknown model spec)."""

_KEY_VARIABLES: Final = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(slots=True)
class RunOptions:
    """What ``loopware run`` was asked to do."""

    prompt: str
    """The user input of the turn."""
    model: str
    """The model string."""
    tools: list[str] = field(default_factory=list)
    """``module:attr`` of tools (repeatable)."""
    middleware: list[str] = field(default_factory=list)
    """``module:attr`` of middleware (repeatable, outermost first)."""
    system_prompt: str | None = None
    """The system prompt."""
    max_iterations: int = 20
    """The iteration cap."""
    plain: bool = False
    """No colour."""


class _Offered:
    """A `ChatModel` wrapper that remembers which tools each iteration offered (names only)."""

    __slots__ = ("names", "wrapped")

    def __init__(self, wrapped: ChatModel) -> None:
        self.wrapped = wrapped
        self.names: list[str] = []

    def __repr__(self) -> str:
        return f"_Offered({self.wrapped!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.names.append(", ".join(t["name"] for t in request.tools))
        return await self.wrapped.complete(request)

    def at(self, iteration: int) -> str:
        return self.names[iteration] if iteration < len(self.names) else "-"


class _Streamed:
    """The model's text as it streams: ``assistant: ...``, its line ended before other output."""

    __slots__ = ("any", "open", "out", "style")

    def __init__(self, out: TextIO, style: Style) -> None:
        self.out = out
        self.style = style
        self.any = False
        self.open = False

    def __repr__(self) -> str:
        return f"_Streamed(any={self.any}, open={self.open})"

    def write(self, event: ModelTextDelta) -> None:
        if not self.open:
            self.out.write(f"{self.style.paint('assistant', 'bold')}: ")
            self.open = self.any = True
        self.out.write(event.text)
        self.out.flush()

    def end_line(self, event: object = None) -> None:
        """End a streamed line still open, so the next output starts on a line of its own."""
        if self.open:
            self.out.write("\n")
            self.open = False


def _missing_key(spec: str) -> str | None:
    """The variable a model string needs that is not set, if any."""
    provider = spec.partition(":")[0].removesuffix("-responses")
    variable = _KEY_VARIABLES.get(provider)
    if variable is not None and not os.environ.get(variable):
        return variable
    return None


def run_turn(options: RunOptions, out: TextIO, err: TextIO | None = None) -> int:
    """Run one turn as ``options`` say, printing to ``out`` (errors to ``err``).

    Returns:
        0 when the turn completed, 1 when it failed or was aborted, 4 for a bad ``module:attr``,
        5 when the model cannot be used (no key, refused key, bad spec).
    """
    err = sys.stderr if err is None else err
    variable = _missing_key(options.model)
    if variable is not None:
        print(
            f"loopware run: error: {options.model!r} needs an API key: set {variable} "
            "(or try `loopware demo`, which runs a scripted model with no key)",
            file=err,
        )
        return EXIT_MODEL
    try:
        model = infer_model(options.model)
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except LoopError as exc:
        print(f"loopware run: error: {exc}", file=err)
        return EXIT_MODEL
    return run_model_turn(options, model, out, err)


def run_model_turn(options: RunOptions, chat_model: ChatModel, out: TextIO, err: TextIO) -> int:
    """Run one turn as ``options`` say against ``chat_model``, printing to ``out``.

    What `run_turn` does once the model string is resolved (``options.model`` is not read).

    Returns:
        0 when the turn completed, 1 when it failed or was aborted, 4 for a bad ``module:attr``,
        5 when the provider refused the key.
    """
    style = Style.for_stream(out, plain=options.plain)
    model = _Offered(chat_model)
    try:
        tools: list[Tool[object]] = [t for spec in options.tools for t in resolve_tools(spec)]
        items = [m for spec in options.middleware for m in resolve_middleware(spec)]
        runner = TurnRunner(
            executor=ToolLoopExecutor(model),
            tools=tools,
            middleware=items,
            system_prompt=options.system_prompt,
            max_iterations=options.max_iterations,
        )
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except LoopError as exc:
        print(f"loopware run: error: {exc}", file=err)
        return 4
    streamed = _Streamed(out, style)
    runner.on(ModelTextDelta, streamed.write)
    runner.on(IterationEnd, streamed.end_line)  # before the iteration's own lines
    LiveOutput(out, style, model.at, policy_labels(items)).observe(runner)
    print(f"{style.paint('user', 'bold')}: {options.prompt}", file=out)
    result = asyncio.run(runner.run(options.prompt))
    if streamed.any:
        streamed.end_line()
    elif result.output is not None:
        print(f"{style.paint('assistant', 'bold')}: {result.output}", file=out)
    usage = result.usage
    print(f"\n{style.paint('summary', 'bold')}", file=out)
    print(f"  {'turn':<14}{result.status} in {result.iterations} iteration(s)", file=out)
    print(f"  {'tool calls':<14}{len(result.tool_calls)}", file=out)
    print(
        f"  {'tokens':<14}{usage.input_tokens} in ({usage.cached_tokens} cached), "
        f"{usage.output_tokens} out ({usage.reasoning_tokens} reasoning)",
        file=out,
    )
    if result.status != "completed":
        error = result.errors[0] if result.errors else None
        print(f"  {'error':<14}{error if error else result.abort_reason}", file=out)
        if isinstance(error, ModelAuthenticationError):
            return EXIT_MODEL
        return 1
    return 0
