"""Bad configuration or construction: the `ConfigurationError` family."""

from __future__ import annotations

from typing import Any

from ._root import LoopError

__all__ = [
    "ConfigurationError",
    "InvalidGateError",
    "InvalidMediaError",
    "InvalidMiddlewareConfigError",
    "InvalidRunnerConfigError",
    "InvalidStashValueError",
    "InvalidToolCallError",
    "InvalidToolError",
    "NotASpoolReaderError",
    "ToolAlreadyRegisteredError",
]


class ConfigurationError(LoopError):
    """Family: something was configured or built from bad parts (a developer error).

    Raised at construction, registration or decoration time; no retry can fix it.

    Attributes:
        field: The bad field or option, when one is to blame.
    """

    code = "E_CONFIGURATION_ERROR"
    status = 500
    fatal = True
    default_message = "invalid configuration"
    field: str | None

    def __init__(
        self, message: str | None = None, *, field: str | None = None, **context: Any
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, field=field, **context)


class InvalidToolError(ConfigurationError):
    """A Tool was built from bad parts; the message and ``field`` name the part."""

    code = "E_INVALID_INITIAL_TOOL_VALUE"
    default_message = "invalid tool"


class InvalidToolCallError(ConfigurationError):
    """A ToolCall record was built from bad parts, or its id clashes with a stored one.

    Attributes:
        call_id: The id of the clashing call, when an id clash is to blame.
    """

    code = "E_INVALID_INITIAL_TOOL_CALL_VALUE"
    default_message = "invalid tool call"
    call_id: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        field: str | None = None,
        call_id: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, field=field, call_id=call_id, **context)


class InvalidStashValueError(ConfigurationError):
    """A stash seed or value is not plain data, or a path is malformed.

    Attributes:
        path: The dot path of the bad value (``""`` for the seed itself), when known.
    """

    code = "E_INVALID_STASH_VALUE"
    default_message = "invalid stash value"
    path: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        path: str | None = None,
        field: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, field=field, path=path, **context)


class InvalidRunnerConfigError(ConfigurationError):
    """Bad runner (or store) configuration; the message names every bad field.

    Attributes:
        fields: Every bad `TurnRunner` option, in order (empty when ``field`` says it).
        spec: The ``module:attr`` spec the CLI could not turn into a runner, when one is to blame.
    """

    code = "E_INVALID_TURN_RUNNER_CONFIG"
    status = 529
    default_message = "invalid turn runner configuration"
    fields: list[str]
    spec: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        fields: list[str] | None = None,
        field: str | None = None,
        spec: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        fields = [] if fields is None else fields
        super().__init__(message, field=field, fields=fields, spec=spec, **context)


class InvalidMiddlewareConfigError(ConfigurationError, ValueError):
    """Bad options were given to a built-in middleware or a registration decorator.

    Attributes:
        option: The bad keyword option of a built-in middleware, when one is to blame.
        middleware: The name of the middleware being registered, when it is to blame.
        stage: The stage it was being registered on, when known.
        extra: The pip extra to install when a dependency is missing (``"otel"``).
        spec: The ``module:attr`` spec the CLI could not turn into middleware, when known.
    """

    code = "E_INVALID_MIDDLEWARE_CONFIG"
    default_message = "invalid middleware configuration"
    option: str | None
    middleware: str | None
    stage: str | None
    extra: str | None
    spec: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        option: str | None = None,
        middleware: str | None = None,
        stage: str | None = None,
        extra: str | None = None,
        spec: str | None = None,
        field: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(
            message,
            field=field,
            option=option,
            middleware=middleware,
            stage=stage,
            extra=extra,
            spec=spec,
            **context,
        )


class InvalidGateError(ConfigurationError):
    """A Gate was built from bad parts; the message and ``field`` name the part."""

    code = "E_INVALID_INITIAL_TURN_GATE_VALUE"
    default_message = "invalid gate"


class InvalidMediaError(ConfigurationError):
    """A Media value was built from bad parts; the message and ``field`` name the part."""

    code = "E_INVALID_INITIAL_MEDIA_VALUE"
    default_message = "invalid media"


class NotASpoolReaderError(ConfigurationError, TypeError):
    """An artifact was built over something that is not a spool reader.

    Attributes:
        reader_type: The name of the type that was given instead, when known.
    """

    code = "E_NOT_A_SPOOL_READER"
    default_message = "not a spool reader"
    reader_type: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        reader_type: str | None = None,
        field: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, field=field, reader_type=reader_type, **context)


class ToolAlreadyRegisteredError(ConfigurationError):
    """A tool name clashed in a registry.

    Attributes:
        tool_name: The clashing name.
    """

    code = "E_TOOL_ALREADY_REGISTERED"
    status = 409
    default_message = "tool already registered"
    tool_name: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        field: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, field=field, tool_name=tool_name, **context)


class MissingExtraError(ConfigurationError, ImportError):
    """A feature needs an optional extra that is not installed (``pip install 'loopware[X]'``).

    Raised when the feature is first used (a model built, a worker launched, a sink opened),
    never at import: ``import pipeline`` works on a core install. The message names the
    command that installs what is missing; the CLI prints it as one line and exits 7.

    Attributes:
        extra: The extra to install (``"openai"``, ``"durable"``, ...).
        package: The module that could not be imported (``"openai"``, ``"dbos"``, ...).
        needed_by: What needs it (``"OpenAIChatModel"``, ``"durable turns"``, ...).
    """

    code = "E_MISSING_EXTRA"
    default_message = "an optional extra is not installed"
    extra: str | None
    package: str | None
    needed_by: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        extra: str | None = None,
        package: str | None = None,
        needed_by: str | None = None,
        field: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error; without ``message``, it is made from ``needed_by`` and ``extra``."""
        if message is None and extra is not None:
            message = (
                f"{needed_by or 'this feature'} needs the {extra} extra: "
                f"pip install 'loopware[{extra}]'"
            )
        super().__init__(
            message,
            field=field,
            extra=extra,
            package=package,
            needed_by=needed_by,
            **context,
        )
