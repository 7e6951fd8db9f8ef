"""`Tool`: an immutable value (name, description, input schema, options) plus a private handler.

A tool is run only through ``tool.run(ctx, args, call_id=...)`` (or its bound form
``tool.bind(ctx)``), which checksums the raw arguments, validates them (strict JSON-mode rules,
see `ArgsSchema`), emits `ToolExecutionStart` / `ToolExecutionEnd` around the handler and wraps a
handler failure in `ToolDownstreamError`. In a turn, a call reaches `Tool.run` through its run
(``pipeline/calls/_run.py``), after the ``tool_call`` stage.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from time import perf_counter
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    Generic,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
)

from ._events import Event, ToolExecutionEnd, ToolExecutionStart
from ._frozen import freeze_json
from ._ids import new_id
from ._json import tool_call_checksum
from ._stash import Stash
from ._tool_checks import (
    bad,
    check_description,
    check_flag,
    check_handler,
    check_name,
    not_json,
    resolve_artifact_class,
)
from ._tool_schema import ArgsSchema
from ._tool_threads import threads_of
from .artifacts._artifact import SpooledArtifact
from .artifacts._media import Media
from .errors import LoopError, ToolDownstreamError

if TYPE_CHECKING:
    from .models._tool_defs import ToolDescription

__all__ = [
    "DataclassOutput",
    "JsonValue",
    "ModelOutput",
    "OnCollision",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolOutput",
    "is_async_callable",
    "run_in_thread",
]

ArgsT = TypeVar("ArgsT")

JsonValue: TypeAlias = (
    Mapping[str, "JsonValue"] | Sequence["JsonValue"] | str | int | float | bool | None
)
"""JSON data: objects with string keys, arrays (lists, tuples), strings, numbers, booleans, null."""


class DataclassOutput(Protocol):
    """Any dataclass instance (a tool output serialised as canonical JSON)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


class ModelOutput(Protocol):
    """Any pydantic model instance (a tool output serialised as canonical JSON)."""

    __pydantic_fields__: ClassVar[dict[str, Any]]


ToolOutput: TypeAlias = (
    str | bytes | SpooledArtifact | Media | Sequence[Media] | JsonValue | ModelOutput
    | DataclassOutput
)
"""What a handler returns: text, bytes, an artifact, one media item or a sequence of them, or
structured data the model reads as canonical JSON (a JSON value, a pydantic model, a
dataclass; an artifact when large: ``pipeline/calls/_outcome.py``)."""

# ``ctx`` is Any on purpose: `Tool.run` hands the handler the context it was given, a
# `DispatchContext` in a turn or any `ToolContext` in a test, so a handler may annotate it as
# either. (`ToolContext` here would refuse handlers taking a `DispatchContext`; `DispatchContext`
# would make the tool, a value below the registry, name the turn machinery above it:
# docs/architecture.md, "The layers".)
ToolHandler: TypeAlias = Callable[[ArgsT, Any, Stash], "ToolOutput | Awaitable[ToolOutput]"]
"""A handler: ``(args, ctx, meta) -> ToolOutput``, or an awaitable of it.

``ctx`` is the context the tool is run with: the turn's `DispatchContext` (or, in a test, any
`ToolContext`). It is typed ``Any``, so annotate it in the handler as what you rely on."""

OnCollision: TypeAlias = Literal["throw", "replace", "keep"]
"""How `ToolRegistry.merge` treats an incoming tool whose name is already taken."""

ON_COLLISION_VALUES: Final = ("throw", "replace", "keep")


class ToolContext(Protocol):
    """What ``tool.run`` / ``tool.bind`` need of a context; `DispatchContext` satisfies it.

    A context may also have a ``listening`` flag (False skips building events) and a
    ``tool_threads`` (`ToolThreads`: where sync handlers run; without one, the process's
    default).
    """

    @property
    def turn_id(self) -> str:
        """The turn the events are emitted for."""
        ...

    def emit(self, event: Event) -> None:
        """Emit an event synchronously."""
        ...


class Tool(Generic[ArgsT]):
    """A tool the model can call: an immutable value plus a private handler.

    Every field is checked at construction (`InvalidToolError` names the bad field), and the
    argument validator and JSON Schema are built once, here. Assigning any attribute raises
    `AttributeError`. The handler is only ever run by `run` (in a turn, after the
    ``tool_call`` stage).

    Example::

        class SearchArgs(BaseModel):
            query: str
            limit: int = 10

        async def search(args: SearchArgs, ctx: DispatchContext, meta: Stash) -> str:
            ...

        search_tool = Tool(
            name="search", description="Search the web.", input_schema=SearchArgs, handler=search
        )
    """

    __slots__ = (
        "_artifact_class",
        "_artifact_constructor",
        "_described",
        "_description",
        "_ephemeral",
        "_handler",
        "_is_async",
        "_meta",
        "_name",
        "_on_collision",
        "_schema",
        "_trusted",
    )

    _name: str
    _description: str
    _described: ToolDescription
    _schema: ArgsSchema[ArgsT]
    _handler: ToolHandler[ArgsT]
    _is_async: bool
    _artifact_constructor: Callable[[], type[SpooledArtifact]] | None
    _artifact_class: type[SpooledArtifact]
    _meta: Stash
    _ephemeral: bool
    _trusted: bool
    _on_collision: OnCollision

    def __init__(
        self,
        *,
        name: str,
        description: str,
        input_schema: type[ArgsT],
        handler: ToolHandler[ArgsT],
        artifact_constructor: Callable[[], type[SpooledArtifact]] | None = None,
        meta: Mapping[str, Any] | None = None,
        ephemeral: bool = False,
        trusted: bool = False,
        on_collision: OnCollision = "throw",
    ) -> None:
        """Build and check a tool.

        Args:
            name: ``^[A-Za-z0-9_-]{1,64}$`` (the set every major provider accepts).
            description: What the tool does, for the model; a non-blank string.
            input_schema: A pydantic model class, TypedDict or dataclass describing a JSON
                object: the single source of truth for the arguments.
            handler: ``(args, ctx, meta) -> ToolOutput`` or an awaitable of it.
            artifact_constructor: Zero-argument callable returning the `SpooledArtifact`
                subclass that text and bytes results are wrapped in; called once, here.
                ``None`` means `SpooledArtifact`.
            meta: Plain data stored in a `Stash` and handed to the handler.
            ephemeral: True when the tool belongs to one dispatch (pruned on ack).
            trusted: True to flip the trust envelope for text and artifact results.
            on_collision: ``"throw"``, ``"replace"`` or ``"keep"``; consulted by
                `ToolRegistry.merge` only.

        Raises:
            InvalidToolError: a field breaks its rule; ``field`` names it.
        """
        check_name(name)
        check_description(name, description)
        schema: ArgsSchema[ArgsT] = ArgsSchema(input_schema, name)
        check_handler(name, handler)
        artifact_class = resolve_artifact_class(name, artifact_constructor)
        try:
            meta_stash = Stash(meta)
        except LoopError as exc:
            raise bad(name, "meta", f"must be a mapping of plain data: {exc.message}") from exc
        ephemeral = check_flag(name, "ephemeral", ephemeral)
        trusted = check_flag(name, "trusted", trusted)
        if on_collision not in ON_COLLISION_VALUES:
            raise bad(
                name, "on_collision", f"must be 'throw', 'replace' or 'keep', not {on_collision!r}"
            )
        init = object.__setattr__
        init(self, "_name", name)
        init(self, "_description", description)
        init(self, "_schema", schema)
        init(self, "_handler", handler)
        init(self, "_is_async", is_async_callable(handler))
        init(self, "_artifact_constructor", artifact_constructor)
        init(self, "_artifact_class", artifact_class)
        init(self, "_meta", meta_stash)
        init(self, "_ephemeral", ephemeral)
        init(self, "_trusted", trusted)
        init(self, "_on_collision", on_collision)

    def __setattr__(self, name: str, value: object) -> None:
        """Refuse every assignment: a tool is immutable."""
        raise AttributeError(f"Tool is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        """Refuse every deletion: a tool is immutable."""
        raise AttributeError(f"Tool is immutable: cannot delete {name!r}")

    def __copy__(self) -> Tool[ArgsT]:
        """Return the tool itself: it is immutable, so a copy would be indistinguishable."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Tool[ArgsT]:
        """Return the tool itself (``copy.deepcopy`` of registries and configs works)."""
        return self

    def __repr__(self) -> str:
        """Return ``Tool(name=..., input_schema=..., flags...)``."""
        schema = getattr(self._schema.schema, "__qualname__", repr(self._schema.schema))
        flags = "".join(
            f", {flag}=True"
            for flag, on in (("ephemeral", self._ephemeral), ("trusted", self._trusted))
            if on
        )
        return (
            f"Tool(name={self._name!r}, input_schema={schema}{flags}, "
            f"on_collision={self._on_collision!r})"
        )

    @property
    def name(self) -> str:
        """The tool's name, unique within a registry."""
        return self._name

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return self._description

    @property
    def input_schema(self) -> type[ArgsT]:
        """The class the arguments are validated into."""
        return self._schema.schema

    @property
    def artifact_constructor(self) -> Callable[[], type[SpooledArtifact]] | None:
        """The callable given at construction (``None`` means `SpooledArtifact`)."""
        return self._artifact_constructor

    @property
    def artifact_class(self) -> type[SpooledArtifact]:
        """The `SpooledArtifact` subclass text and bytes results are wrapped in."""
        return self._artifact_class

    @property
    def meta(self) -> Stash:
        """The tool's meta stash (the one its handler receives)."""
        return self._meta

    @property
    def ephemeral(self) -> bool:
        """True when the tool belongs to one dispatch and is pruned on ack."""
        return self._ephemeral

    @property
    def trusted(self) -> bool:
        """True when text and artifact results are rendered in the trusted envelope."""
        return self._trusted

    @property
    def on_collision(self) -> OnCollision:
        """What `ToolRegistry.merge` does when this tool arrives on a taken name."""
        return self._on_collision

    def describe(self) -> ToolDescription:
        """Return the tool's name, description and input JSON Schema: what the model is told.

        Built once and shared by every reader (the registry's offered definitions, the model
        requests), so it is read-only: changing it raises `TypeError`. Build a variant from a
        copy (``copy.deepcopy``).
        """
        try:
            return self._described
        except AttributeError:
            described: ToolDescription = freeze_json(
                {
                    "name": self._name,
                    "description": self._description,
                    "input_schema": self._schema.json_schema(),
                }
            )
            object.__setattr__(self, "_described", described)
            return described

    def validate(self, args: Mapping[str, Any]) -> ArgsT:
        """Validate raw arguments as a turn would, without running anything.

        Strict JSON-mode rules: nothing is coerced (``"5"`` is not an ``int``) but JSON-only
        forms validate (ISO datetimes, UUID strings, enum values); defaults are applied;
        unknown top-level keys are rejected unless the schema's config allows extras.

        Raises:
            InvalidToolArgsError: the arguments fail the schema; ``errors`` holds the field
                errors (JSON-safe) and ``tool_name`` this tool's name.
        """
        return self._schema.validate(args)

    def dump_args(self, validated: ArgsT) -> dict[str, Any]:
        """Validated arguments as JSON data (defaults included): what `validate` made of them."""
        return self._schema.dump(validated)

    def _copy(self) -> Tool[ArgsT]:
        copy: Tool[ArgsT] = object.__new__(type(self))
        for klass in type(self).__mro__:  # subclasses (ArtifactTool) add slots of their own
            for slot in getattr(klass, "__slots__", ()):
                if hasattr(self, slot):
                    object.__setattr__(copy, slot, getattr(self, slot))
        return copy

    def with_handler(
        self, wrap: Callable[[ToolHandler[ArgsT]], ToolHandler[ArgsT]]
    ) -> Tool[ArgsT]:
        """Return a copy of this tool whose handler is ``wrap(handler)``.

        Everything else (schema, events, error wrapping) stays as it is; the wrapper
        receives ``(args, ctx, meta)`` like the handler. `run` runs the result as it runs any
        handler: in a worker thread when it is sync, on the loop when it is ``async def`` (an
        async wrapper runs a sync handler off the loop with
        ``await ctx.tool_threads.run(handler, args, ctx, meta)``). This is how
        durable turns (``pipeline/durable/``) run each handler as a checkpointed step without
        access to the private handler.

        Raises:
            InvalidToolError: ``wrap`` is not callable or returns something not callable.
        """
        if not callable(wrap):
            raise bad(self._name, "handler", f"wrap must be callable, got {wrap!r}")
        handler = wrap(self._handler)
        check_handler(self._name, handler)
        copy = self._copy()
        object.__setattr__(copy, "_handler", handler)
        object.__setattr__(copy, "_is_async", is_async_callable(handler))
        return copy

    async def run(
        self,
        ctx: ToolContext,
        args: Mapping[str, Any],
        *,
        call_id: str,
        checksum: str | None = None,
        validated: ArgsT | None = None,
    ) -> ToolOutput:
        """Run this tool once for ``ctx`` on the raw ``args`` and return the handler's value.

        Per call: (1) ``checksum = tool_call_checksum(name, args)`` over the raw arguments
        (unless the caller already computed it); (2) validation, unless ``validated`` holds
        arguments the caller validated with `validate` (failure: `InvalidToolArgsError`, no
        event, handler not called); (3) `ToolExecutionStart`; (4) the handler: an ``async
        def`` awaited on the loop, a sync one run in a worker thread of ``ctx.tool_threads``
        (`ToolThreads`: bounded, the context copied; a cancellation returns at once while the
        thread runs on) and its result awaited if it is awaitable; (5) `ToolExecutionEnd`. The
        events carry ``call_id`` (the provider's id of the call) and ``checksum`` (what was
        asked); each is built only when a listener takes it (``ctx.listens_for``).

        When the handler raises, the end event carries ``is_error=True`` and: a `LoopError`
        (including `TurnAbortedError`) is re-raised unchanged; any other exception becomes a
        `ToolDownstreamError` (``tool_name``, ``call_id``) chained to it;
        ``asyncio.CancelledError`` and other ``BaseException`` subclasses propagate unchanged.

        ``ctx`` is handed to the handler as its context: a turn passes its `DispatchContext`;
        tests may pass any `ToolContext`. Inside a turn, calls go through the turn's
        ``tool_call`` stage first (`DispatchContext.run_tool`); this runs the tool alone.
        """
        name = self._name
        if checksum is None:
            try:
                checksum = tool_call_checksum(name, args)
            except TypeError as exc:
                raise not_json(name, exc) from exc
            except RecursionError:
                raise not_json(name, "nested too deeply") from None
        if validated is None:
            validated = self._schema.validate(args)
        wants_start = wants_end = False
        if getattr(ctx, "listening", True):  # nobody listens: nothing to ask per event type
            listens_for = getattr(ctx, "listens_for", None)  # a context that cannot tell: yes
            wants_start = listens_for is None or bool(listens_for(ToolExecutionStart))
            wants_end = listens_for is None or bool(listens_for(ToolExecutionEnd))
        started_at = datetime.now(UTC) if wants_start or wants_end else None
        if wants_start and started_at is not None:
            ctx.emit(
                ToolExecutionStart(
                    turn_id=ctx.turn_id,
                    timestamp=started_at,
                    tool_name=name,
                    call_id=call_id,
                    checksum=checksum,
                    args=validated,
                    started_at=started_at,
                )
            )
        start = perf_counter() if started_at is not None else 0.0
        try:
            handler, meta = self._handler, self._meta
            if self._is_async:
                result = await cast("Awaitable[ToolOutput]", handler(validated, ctx, meta))
            else:
                result = await run_in_thread(handler, validated, ctx, meta)
        except BaseException as exc:
            if wants_end and started_at is not None:
                ctx.emit(_end(ctx, name, call_id, checksum, validated, started_at, start, True))
            if isinstance(exc, LoopError) or not isinstance(exc, Exception):
                raise
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise ToolDownstreamError(
                f"tool {name!r} failed: {detail}", tool_name=name, call_id=call_id
            ) from exc
        if wants_end and started_at is not None:
            ctx.emit(_end(ctx, name, call_id, checksum, validated, started_at, start, False))
        return result

    def bind(self, ctx: ToolContext) -> Callable[[Mapping[str, Any]], Awaitable[ToolOutput]]:
        """Return ``async (args) -> ToolOutput`` that runs this tool for ``ctx`` (see `run`).

        Each call gets a fresh call id (``ToolCall.new_id()`` style), since no provider named
        one; use `run` to pass the provider's id.
        """
        run = self.run

        async def execute(args: Mapping[str, Any]) -> ToolOutput:
            return await run(ctx, args, call_id=new_id("call"))

        return execute


async def run_in_thread(
    handler: ToolHandler[Any], args: Any, ctx: Any, meta: Stash
) -> ToolOutput:
    """Run a sync handler in a worker thread of the context's `ToolThreads`.

    A handler that returns an awaitable has it awaited here, on the loop.
    """
    got = await threads_of(ctx).run(handler, args, ctx, meta)
    return await got if inspect.isawaitable(got) else got


def is_async_callable(fn: object) -> bool:
    """True for an ``async def`` (or a partial of one), or an object with an async ``__call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    # Python 3.11's iscoroutinefunction does not look at an object's __call__
    return callable(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def _end(
    ctx: ToolContext,
    name: str,
    call_id: str,
    checksum: str,
    validated: object,
    started_at: datetime,
    start: float,
    is_error: bool,
) -> ToolExecutionEnd:
    return ToolExecutionEnd(
        turn_id=ctx.turn_id,
        tool_name=name,
        call_id=call_id,
        checksum=checksum,
        args=validated,
        started_at=started_at,
        duration_ms=(perf_counter() - start) * 1000.0,
        is_error=is_error,
    )


for _public in (Tool, ToolContext):
    _public.__module__ = "pipeline"
