"""`ContextWindow`: keep each model request within a token budget by dropping the oldest turns."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final, get_args

from pipeline import DispatchContext, canonical_json
from pipeline.artifacts import EncodingName, estimate_tokens, render_tool_result
from pipeline.calls import ToolCall
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.models import Message, ModelRequest
from pipeline.stages import CallNext

from ._options import check_int, check_namespace
from ._registration import dispatch_input

__all__ = ["ContextWindow"]

MESSAGE_OVERHEAD: Final = 4
"""Tokens counted per message and per call beside their text (role and framing)."""

_CACHE_SIZE: Final = 65_536
"""How many messages' estimates one `ContextWindow` keeps (least recently used out)."""


class ContextWindow:
    """Drop the oldest turns of the conversation from each model request over a token budget.

    Before every model call (``dispatch_input``) it estimates the request's tokens (the
    system prompt, the offered tools' definitions, and each message with the calls it announced
    and their results as the model reads them) with `pipeline.artifacts.estimate_tokens`, and
    when they exceed ``max_tokens`` it keeps the longest tail of the conversation that fits
    and starts at a user message (`DispatchContext.keep_history_from`). So:

    - the system prompt and the tools are always sent;
    - a call is never separated from its result, nor from the message that announced it;
    - the request begins with a user message (as providers require);
    - nothing is deleted: the turn and the store keep the whole conversation; only the request
      is shorter.

    When even the latest user message and what followed it exceed the budget, the request
    starts there (the current input is never dropped) and a ``context_window`` warning is
    logged; pair it with `TokenBudget` to stop such a turn. Estimates are estimates: leave the
    provider's context length some headroom (the heuristic is within about 10% of cl100k on
    English prose and code; with tiktoken's files cached locally the count is exact).

    Args:
        max_tokens: The most tokens a request may hold (the estimate).
        encoding: The tokenizer to estimate with (`pipeline.artifacts.EncodingName`).
        namespace: Its name in logs (default ``loopware.context_window``).

    Raises:
        InvalidMiddlewareConfigError: ``max_tokens`` is not an int >= 1, an unknown encoding,
            or a bad namespace.
    """

    __slots__ = ("_cache", "_encoding", "_max_tokens", "_namespace")

    def __init__(
        self,
        max_tokens: int,
        *,
        encoding: EncodingName = "cl100k_base",
        namespace: str = "loopware.context_window",
    ) -> None:
        """Configure the budget (see the class docstring)."""
        owner = "ContextWindow"
        self._max_tokens = check_int(owner, "max_tokens", max_tokens, minimum=1)
        if encoding not in get_args(EncodingName):
            raise InvalidMiddlewareConfigError(
                f"{owner}: encoding must be one of {', '.join(get_args(EncodingName))}, "
                f"got {encoding!r}",
                option="encoding",
            )
        self._encoding: EncodingName = encoding
        self._namespace = check_namespace(owner, namespace)
        self._cache: OrderedDict[tuple[Any, ...], int] = OrderedDict()

    def __repr__(self) -> str:
        """Show the configuration."""
        return (
            f"ContextWindow(max_tokens={self._max_tokens}, encoding={self._encoding!r}, "
            f"namespace={self._namespace!r})"
        )

    @property
    def max_tokens(self) -> int:
        """The most tokens a request may hold."""
        return self._max_tokens

    @property
    def namespace(self) -> str:
        """Its name in logs."""
        return self._namespace

    def tokens(self, request: ModelRequest) -> int:
        """The estimated tokens of ``request`` as this window counts them."""
        calls = _by_id(request.tool_calls)
        fixed = self._fixed(request)
        return fixed + sum(self._message(m, calls, request) for m in request.messages)

    def first_kept(self, request: ModelRequest) -> int:
        """The index of the first message of ``request`` to send (0: all of them).

        The smallest index of a user message whose tail, with the system prompt and the tools,
        fits in `max_tokens`; the last user message's index when none fits.
        """
        messages = request.messages
        calls = _by_id(request.tool_calls)
        total = self._fixed(request)
        if total + sum(self._message(m, calls, request) for m in messages) <= self._max_tokens:
            return 0
        last_user: int | None = None
        best: int | None = None
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            total += self._message(message, calls, request)
            if message.role != "user":
                continue
            if last_user is None:
                last_user = index
            if total > self._max_tokens:
                break
            best = index
        if best is not None:
            return best
        return 0 if last_user is None else last_user

    @dispatch_input
    async def trim(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Start this iteration's request at the oldest turn that keeps it within the budget."""
        await ctx.load_history()  # it reads the whole conversation: loaded off the event loop
        if not ctx.is_signalled and ctx.messages:
            request = dataclasses.replace(
                ctx.model_request(), messages=ctx.messages, tool_calls=ctx.tool_calls
            )
            ctx.keep_history_from(self.first_kept(request))
            used = self.tokens(ctx.model_request())
            if used > self._max_tokens:
                ctx.log.warning(
                    "context_window",
                    f"the latest turn alone holds about {used} tokens, over the window's "
                    f"{self._max_tokens}: it is sent whole",
                    policy=self._namespace,
                    tokens=used,
                    max_tokens=self._max_tokens,
                )
        await call_next()

    # -- the estimate ---------------------------------------------------------------------------
    def _fixed(self, request: ModelRequest) -> int:
        """The system prompt's and the tool definitions' tokens."""
        text = [request.system_prompt or ""]
        text += [canonical_json(dict(tool)) for tool in request.tools]
        return self._estimate(("fixed", *text), text)

    def _message(
        self, message: Message, calls: Mapping[str, ToolCall], request: ModelRequest
    ) -> int:
        """A message's tokens with the calls it announced and their results."""
        announced = [calls[i] for i in message.tool_call_ids if i in calls]
        key = (message.id, message.content, *((c.id, c.updated_at) for c in announced))
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        text = [message.content]
        for call in announced:
            text += [call.tool, canonical_json(dict(call.args))]
            text.append(render_tool_result(call, request.tool_view).text)
        tokens = estimate_tokens(text, self._encoding) + MESSAGE_OVERHEAD * (1 + len(announced))
        self._cache[key] = tokens
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return tokens

    def _estimate(self, key: tuple[Any, ...], text: Sequence[str]) -> int:
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = estimate_tokens(text, self._encoding)
        return cached


def _by_id(calls: Sequence[ToolCall]) -> dict[str, ToolCall]:
    return {call.id: call for call in calls}


ContextWindow.__module__ = "middleware"
