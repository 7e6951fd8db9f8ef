"""Mapping the OpenAI SDK's exceptions (and failed Responses) to the `ModelError` family.

The SDK has already spent its own retries and timeouts when one of its exceptions reaches
loopware, so each maps to one error with a stable code::

    openai exception                                 loopware error
    RateLimitError (429)                             ModelRateLimitedError
    AuthenticationError (401), PermissionDenied      ModelAuthenticationError
    BadRequestError (400) about the context length   ModelContextLengthError
    BadRequestError, NotFound (404), Unprocessable   ModelBadRequestError
    APITimeoutError, a 408                           ModelTimeoutError
    APIConnectionError, InternalServerError (5xx),   ModelUnavailableError
      Conflict (409)
    anything else the SDK raises                     ModelError

`openai` is imported inside the functions: importing this module never loads the SDK.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelError,
    ModelRateLimitedError,
    ModelRefusalError,
    ModelTimeoutError,
    ModelUnavailableError,
)

if TYPE_CHECKING:
    from openai import OpenAIError

__all__ = ["from_openai_error", "from_response_error"]

_CONTEXT_LENGTH = re.compile(
    r"context[_ ]length|context (?:window|size)|maximum context|exceed_context_size"
    r"|too many tokens|prompt is too long",
    re.IGNORECASE,
)
"""What OpenAI (``context_length_exceeded``), vLLM ("maximum context length"), llama.cpp
(``exceed_context_size_error``) and others say when the conversation does not fit."""

_RESPONSE_ERRORS: dict[str, type[ModelError]] = {
    "rate_limit_exceeded": ModelRateLimitedError,
    "server_error": ModelUnavailableError,
    "vector_store_timeout": ModelTimeoutError,
    "bio_policy": ModelRefusalError,
    "misalignment_policy_violation": ModelRefusalError,
    "image_content_policy_violation": ModelRefusalError,
    "context_length_exceeded": ModelContextLengthError,
    "insufficient_quota": ModelRateLimitedError,
}
"""Error codes a failed Response (or a stream's ``error`` event) carries; others are bad
requests (``invalid_prompt``, ``invalid_image``...)."""


def from_openai_error(exc: OpenAIError, *, provider: str, model: str) -> ModelError:
    """The `ModelError` for an exception the OpenAI SDK raised (the caller chains ``exc``).

    Args:
        exc: What the SDK raised, after its own retries.
        provider: ``"openai"`` or ``"openai-compatible"``.
        model: The model name that was asked for.
    """
    import openai

    status_code: int | None = None
    request_id: str | None = None
    message = str(exc)
    if isinstance(exc, openai.APIError):
        message = exc.message
    if isinstance(exc, openai.APIStatusError):
        status_code, request_id = exc.status_code, exc.request_id
    kind: type[ModelError]
    if isinstance(exc, openai.APITimeoutError):  # before APIConnectionError, its base
        kind = ModelTimeoutError
    elif isinstance(exc, openai.APIConnectionError):
        kind = ModelUnavailableError
    elif isinstance(exc, openai.RateLimitError):
        kind = ModelRateLimitedError
    elif isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        kind = ModelAuthenticationError
    elif isinstance(exc, openai.BadRequestError):
        kind = ModelContextLengthError if _is_context_length(exc) else ModelBadRequestError
    elif isinstance(exc, openai.NotFoundError | openai.UnprocessableEntityError):
        kind = ModelBadRequestError
    elif isinstance(exc, openai.APIStatusError):
        kind = _by_status(exc.status_code)
    elif isinstance(exc, openai.ContentFilterFinishReasonError):
        kind = ModelRefusalError
    elif isinstance(exc, openai.APIError) and exc.code is not None:  # an error inside a stream
        kind = _RESPONSE_ERRORS.get(exc.code, ModelError)
    else:
        kind = ModelError
    return kind(
        message, provider=provider, model=model, status_code=status_code, request_id=request_id
    )


def from_response_error(
    code: str | None, message: str | None, *, provider: str, model: str
) -> ModelError:
    """The `ModelError` for a Response that failed (``status: failed`` or an ``error`` event)."""
    kind = _RESPONSE_ERRORS.get(code or "", ModelBadRequestError if code else ModelError)
    if kind is ModelBadRequestError and _CONTEXT_LENGTH.search(f"{code} {message}"):
        kind = ModelContextLengthError
    text = f"{code}: {message}" if code and message else message or code
    return kind(text, provider=provider, model=model)


def _is_context_length(exc: OpenAIError) -> bool:
    code = getattr(exc, "code", None)
    if code == "context_length_exceeded":
        return True
    return bool(_CONTEXT_LENGTH.search(f"{code or ''} {getattr(exc, 'message', '')}"))


def _by_status(status: int) -> type[ModelError]:
    if status == 408:
        return ModelTimeoutError
    if status == 409 or status >= 500:
        return ModelUnavailableError
    if status == 429:
        return ModelRateLimitedError
    if status in (401, 403):
        return ModelAuthenticationError
    return ModelBadRequestError if 400 <= status < 500 else ModelError
