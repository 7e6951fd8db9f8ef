"""A call to a model provider failed: the `ModelError` family.

Provider models (``pipeline.models``) map their SDK's exceptions to these after the SDK's own
retries and timeouts are spent; a turn whose model call fails ends ``failed`` with the error
itself (not wrapped), and every record stored before it stays stored.
"""

from __future__ import annotations

from typing import Any

from ._root import LoopError

__all__ = [
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelContextLengthError",
    "ModelError",
    "ModelRateLimitedError",
    "ModelRefusalError",
    "ModelTimeoutError",
    "ModelUnavailableError",
]


class ModelError(LoopError):
    """Family: the model provider refused or failed a request.

    Attributes:
        provider: ``"openai"``, ``"anthropic"``, ``"openai-compatible"``..., when known.
        model: The model name, when known.
        status_code: The HTTP status the provider answered with, when there was one.
        request_id: The provider's request id, when it sent one (quote it to their support).
    """

    code = "E_MODEL_ERROR"
    status = 502
    fatal = False
    default_message = "the model provider failed the request"
    provider: str | None
    model: str | None
    status_code: int | None
    request_id: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        status_code: int | None = None,
        request_id: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(
            message,
            provider=provider,
            model=model,
            status_code=status_code,
            request_id=request_id,
            **context,
        )


class ModelRateLimitedError(ModelError):
    """The provider rate-limited the request and the SDK's retries did not get through."""

    code = "E_MODEL_RATE_LIMITED"
    status = 429
    default_message = "the model provider rate-limited the request"


class ModelAuthenticationError(ModelError):
    """The provider refused the credentials (a missing or wrong API key, no permission)."""

    code = "E_MODEL_AUTHENTICATION"
    status = 401
    fatal = True
    default_message = "the model provider refused the credentials"


class ModelBadRequestError(ModelError):
    """The provider refused the request as malformed (an unknown model, a bad parameter)."""

    code = "E_MODEL_BAD_REQUEST"
    status = 400
    default_message = "the model provider refused the request"


class ModelContextLengthError(ModelBadRequestError):
    """The conversation no longer fits the model's context window."""

    code = "E_MODEL_CONTEXT_LENGTH"
    status = 413
    default_message = "the conversation is longer than the model's context window"


class ModelUnavailableError(ModelError):
    """The provider could not be reached or kept failing (5xx, connection) after retries."""

    code = "E_MODEL_UNAVAILABLE"
    status = 503
    default_message = "the model provider is unavailable"


class ModelTimeoutError(ModelError, TimeoutError):
    """The request timed out (the SDK's timeout, after its retries)."""

    code = "E_MODEL_TIMEOUT"
    status = 504
    default_message = "the model request timed out"


class ModelRefusalError(ModelError):
    """The model refused to answer or the provider's content filter stopped the answer."""

    code = "E_MODEL_REFUSAL"
    status = 422
    default_message = "the model refused to answer"
