"""Anthropic SDK exceptions as `ModelError` subclasses with stable codes.

`to_model_error` runs after the SDK's own retries and timeouts are spent (it never retries)::

    RateLimitError (429)                              -> ModelRateLimitedError
    AuthenticationError (401), PermissionDeniedError (403),
    PaymentRequiredError (402), CredentialsError      -> ModelAuthenticationError
    BadRequestError (400) "prompt is too long",
    ContentTooLargeError (413)                        -> ModelContextLengthError
    other BadRequestError, NotFoundError (404),
    UnprocessableEntityError (422), other 4xx         -> ModelBadRequestError
    APITimeoutError, RequestTimeoutError (408),
    GatewayTimeoutError (504)                         -> ModelTimeoutError
    APIConnectionError, InternalServerError (5xx),
    OverloadedError (529), ConflictError (409)        -> ModelUnavailableError

An error the API sends in the middle of a stream arrives with the stream's HTTP status (200); it
is classified by its ``error.type`` (``overloaded_error``, ``rate_limit_error``, ...) instead. A
connection that breaks while a stream is read raises the HTTP client's own error (``httpx2``),
mapped like the SDK's connection errors.
The ``anthropic`` package is imported only when an error is converted.
"""

from __future__ import annotations

from typing import Final

from ..errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelError,
    ModelRateLimitedError,
    ModelTimeoutError,
    ModelUnavailableError,
)

__all__ = ["PROVIDER", "to_model_error"]

PROVIDER: Final = "anthropic"

_CONTEXT_PHRASES: Final = (
    "prompt is too long",
    "context limit",
    "context window",
    "context length",
)
"""Phrases of a 400 answer meaning the conversation no longer fits (Anthropic says "prompt is
too long: 208310 tokens > 200000 maximum" or "input length and `max_tokens` exceed context
limit")."""

_BY_TYPE: Final[dict[str, type[ModelError]]] = {
    "rate_limit_error": ModelRateLimitedError,
    "authentication_error": ModelAuthenticationError,
    "permission_error": ModelAuthenticationError,
    "billing_error": ModelAuthenticationError,
    "invalid_request_error": ModelBadRequestError,
    "not_found_error": ModelBadRequestError,
    "timeout_error": ModelTimeoutError,
    "overloaded_error": ModelUnavailableError,
    "api_error": ModelUnavailableError,
    "conflict_error": ModelUnavailableError,
}
"""``error.type`` values of Anthropic's error bodies, for errors without a telling status."""

_BY_STATUS: Final[dict[int, type[ModelError]]] = {
    401: ModelAuthenticationError,
    402: ModelAuthenticationError,
    403: ModelAuthenticationError,
    408: ModelTimeoutError,
    409: ModelUnavailableError,
    413: ModelContextLengthError,
    429: ModelRateLimitedError,
    504: ModelTimeoutError,
}


def to_model_error(exc: BaseException, *, model: str | None) -> ModelError | None:
    """The `ModelError` for an exception of the Anthropic SDK, or None for any other exception.

    The caller raises the result ``from exc``. ``provider``, ``model``, ``status_code`` and
    ``request_id`` are set when known.
    """
    import anthropic  # only ever reached once the SDK is in use
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return ModelTimeoutError(
            f"reading the Anthropic API's answer timed out: {exc}", provider=PROVIDER, model=model
        )
    if isinstance(exc, httpx2.TransportError):
        return ModelUnavailableError(
            f"the connection to the Anthropic API broke: {exc}", provider=PROVIDER, model=model
        )
    if not isinstance(exc, anthropic.AnthropicError):
        return None
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelTimeoutError(
            "the Anthropic API request timed out (after the SDK's retries)",
            provider=PROVIDER,
            model=model,
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelUnavailableError(
            f"could not reach the Anthropic API (after the SDK's retries): {exc}",
            provider=PROVIDER,
            model=model,
        )
    if isinstance(exc, anthropic.CredentialsError):
        return ModelAuthenticationError(
            f"could not load Anthropic credentials: {exc}", provider=PROVIDER, model=model
        )
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        detail = exc.api_message or str(exc)
        error_type = exc.type
        cls = _classify(status, error_type, detail)
        answered = f"{status}" if status >= 400 else "an error in the stream"
        kind = f" ({error_type})" if error_type else ""
        return cls(
            f"the Anthropic API answered {answered}{kind}: {detail}",
            provider=PROVIDER,
            model=model,
            status_code=status if status >= 400 else None,
            request_id=exc.request_id,
        )
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ModelUnavailableError(
            f"the Anthropic API sent a response the SDK could not read: {exc}",
            provider=PROVIDER,
            model=model,
            status_code=exc.status_code,
        )
    return ModelUnavailableError(
        f"the Anthropic API request failed: {exc}", provider=PROVIDER, model=model
    )


def _classify(status: int, error_type: str | None, detail: str) -> type[ModelError]:
    if status >= 400:
        cls = _BY_STATUS.get(status)
        if cls is None:
            cls = ModelUnavailableError if status >= 500 else ModelBadRequestError
    else:  # an error sent inside a stream (status 200): its type says what it is
        cls = _BY_TYPE.get(error_type or "", ModelUnavailableError)
    if cls is ModelBadRequestError and any(p in detail.lower() for p in _CONTEXT_PHRASES):
        return ModelContextLengthError
    return cls
