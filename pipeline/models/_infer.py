"""`infer_model`: a model string (``"anthropic:claude-sonnet-4-5"``) names a `ChatModel`.

The provider modules, and so their SDKs, are imported only when a string names them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final, NoReturn

from ..errors import InvalidRunnerConfigError

if TYPE_CHECKING:
    from ._seam import ChatModel

__all__ = ["infer_model"]

FORMS: Final = (
    '"openai:<model>"',
    '"openai-responses:<model>"',
    '"anthropic:<model>"',
    '"openai-compatible:<name>@<base_url>"',
)
"""The model strings `infer_model` accepts."""


def infer_model(spec: str | ChatModel, **settings: Any) -> ChatModel:
    """Return the `ChatModel` a model string names (a `ChatModel` is returned as it is).

    Accepted strings:

    - ``"openai:<model>"``: `OpenAIChatModel` (chat completions), e.g. ``"openai:gpt-4.1-mini"``;
    - ``"openai-responses:<model>"``: `OpenAIResponsesModel` (the Responses API);
    - ``"anthropic:<model>"``: `AnthropicModel`, e.g. ``"anthropic:claude-sonnet-4-5"``;
    - ``"openai-compatible:<name>@<base_url>"``: `OpenAIChatModel` on an OpenAI-compatible
      server, e.g. ``"openai-compatible:llama3.2@http://localhost:11434/v1"``; the key is
      ``OPENAI_API_KEY`` when set, else a placeholder (local servers need none).

    The SDKs read their usual environment variables (``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``, ...).

    Args:
        spec: A model string, or a `ChatModel`.
        **settings: Passed to the model's constructor (``max_tokens=``, ``temperature=``,
            ``client=``...); only with a string.

    Raises:
        InvalidRunnerConfigError: ``spec`` is not one of the accepted forms (``field`` is
            ``"model"``; the message lists the forms), or settings came with a model object.
        ModelAuthenticationError: the provider's API key is missing (the message names the
            environment variable to set).
        ImportError: the provider's SDK is not installed.
    """
    if not isinstance(spec, str):
        if not callable(getattr(spec, "complete", None)):
            _bad(f"expected a model string or a ChatModel, got {spec!r}")
        if settings:
            _bad(f"settings {sorted(settings)} apply to a model string, not to {spec!r}")
        return spec
    provider, colon, name = spec.partition(":")
    provider = provider.strip().lower()
    name = name.strip()
    if not colon or not name:
        _bad(f"model string {spec!r} has no model name")
    if provider == "anthropic":
        from ._anthropic import AnthropicModel

        return AnthropicModel(name, **settings)
    if provider == "openai":
        from ._openai_chat import OpenAIChatModel

        return OpenAIChatModel(name, **settings)
    if provider == "openai-responses":
        from ._openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name, **settings)
    if provider == "openai-compatible":
        model, at, base_url = name.partition("@")
        model, base_url = model.strip(), base_url.strip()
        if not at or not model or "://" not in base_url:
            _bad(
                f"model string {spec!r} must read openai-compatible:<name>@<base_url>, "
                "e.g. openai-compatible:llama3.2@http://localhost:11434/v1"
            )
        from ._openai_chat import OpenAIChatModel

        settings.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or "not-needed")
        return OpenAIChatModel(model, base_url=base_url, **settings)
    _bad(f"unknown provider {provider!r} in model string {spec!r}")


def _bad(problem: str) -> NoReturn:
    raise InvalidRunnerConfigError(
        f"model: {problem}; use one of {', '.join(FORMS)}, or pass a ChatModel", field="model"
    )


infer_model.__module__ = "pipeline.models"
