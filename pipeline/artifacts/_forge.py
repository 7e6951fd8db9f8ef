"""Forging artifact query tools: `ArtifactTool` and ``SpooledArtifact.forge_tools``.

For an artifact class, forging makes one `ArtifactTool` per tool method. Its input schema is the
method's own arguments plus a required ``call_id`` restricted to this turn's artifact call ids
(an ``enum`` in the JSON Schema, so validation rejects any other id before the handler runs).
A class forges its artifact bases' tools too: a base tool's ``call_id`` lists every artifact
that is an instance of the base (subclass instances included), a class's own tools list only
its own instances.

Forging runs whenever the turn's artifacts change, so it is cached: the tools for one class and
one tuple of ids are built once (schemas and validators included) and reused. Tools are
immutable values whose handlers find the artifact through the context they are called with, so
sharing them between turns is safe.

Every result is capped at the artifact class's ``max_result_bytes`` (``_cap.py``): tool methods
with a ``capped`` renderer build it within the cap as they stream, others are cut afterwards.

Every query runs in a worker thread of the turn's `ToolThreads` (``ctx.tool_threads``, as sync
tool handlers do), whatever the body's size: a query parses, scans or searches a body a model
chose, and the event loop must keep serving every other turn meanwhile. A tool method with a
``time_limit`` (``artifact_grep``) also has a wall-clock deadline: past it the call ends with an
error, and the thread's late outcome is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from .._registry import ToolRegistry
from .._stash import Stash
from .._tool import OnCollision, Tool, ToolOutput
from .._tool_threads import threads_of
from ..errors import InvalidToolArgsError, InvalidToolError
from ._artifact import ArtifactContext, SpooledArtifact, install_forger, own_tool_methods
from ._cap import cap_text
from ._toolmethod import ToolMethod

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["ArtifactTool", "forge_tools"]

_GRACE = 0.25
"""Seconds a time-limited query's thread gets past its limit to report its own (clearer) error."""


class ArtifactTool(Tool[Any]):
    """A `Tool` that queries spooled artifacts; calls through it are stored as text results.

    It is a `Tool` in every way (the executor stores its calls with ``from_artifact_tool=True``
    so they never become artifacts themselves), except that it takes no
    ``artifact_constructor``, and its defaults are those of forged tools: ``ephemeral=True``,
    ``on_collision="replace"``, ``trusted=False``. Usually made by
    ``SomeArtifact.forge_tools(ctx)``; build one directly for a custom query tool.

    Raises:
        InvalidToolError: an ``artifact_constructor`` was given, or any `Tool` rule is broken.
    """

    __slots__ = ("_artifact_class_queried", "_tool_method")

    _artifact_class_queried: type[SpooledArtifact]
    _tool_method: ToolMethod | None

    def __init__(
        self,
        *,
        name: str,
        description: str,
        input_schema: type[Any],
        handler: Callable[[Any, Any, Stash], ToolOutput | Awaitable[ToolOutput]],
        meta: Mapping[str, Any] | None = None,
        ephemeral: bool = True,
        trusted: bool = False,
        on_collision: OnCollision = "replace",
        artifact_constructor: object = None,
        queries: type[SpooledArtifact] = SpooledArtifact,
        tool_method: ToolMethod | None = None,
    ) -> None:
        """Build the tool; ``queries`` is the artifact class it reads, ``tool_method`` its method.

        Raises:
            InvalidToolError: ``artifact_constructor`` is not None (field ``artifact_constructor``),
                ``queries`` is not a `SpooledArtifact` class, or a `Tool` rule is broken.
        """
        if artifact_constructor is not None:
            raise InvalidToolError(
                f"tool {name!r}: artifact_constructor is not allowed on an ArtifactTool (its "
                "results are text, never spooled)",
                field="artifact_constructor",
            )
        queried: object = queries
        if not (isinstance(queried, type) and issubclass(queried, SpooledArtifact)):
            raise InvalidToolError(
                f"tool {name!r}: queries must be a SpooledArtifact class, got {queries!r}",
                field="queries",
            )
        super().__init__(
            name=name,
            description=description,
            input_schema=input_schema,
            handler=handler,
            meta=meta,
            ephemeral=ephemeral,
            trusted=trusted,
            on_collision=on_collision,
        )
        object.__setattr__(self, "_artifact_class_queried", queries)
        object.__setattr__(self, "_tool_method", tool_method)

    @property
    def queries(self) -> type[SpooledArtifact]:
        """The artifact class whose instances this tool reads."""
        return self._artifact_class_queried

    @property
    def tool_method(self) -> ToolMethod | None:
        """The tool method this tool runs, when it was forged from one."""
        return self._tool_method


def _missing(call_id: str) -> str:
    return f"Error: no artifact with id {call_id} in this turn"


def _handler(
    method: ToolMethod, owner: type[SpooledArtifact]
) -> Callable[[Any, Any, Stash], Awaitable[str]]:
    names = tuple(method.args_schema.model_fields)
    serialise = method.serialise

    async def handle(args: Any, ctx: Any, meta: Stash) -> str:
        call_id: str = args.call_id
        call = ctx.get_tool_call(call_id)
        artifact = None if call is None else call.results
        if not isinstance(artifact, owner):
            return _missing(call_id)
        kwargs = {name: getattr(args, name) for name in names}
        cap = type(artifact).max_result_bytes
        capped = method.capped
        if capped is not None:

            def run() -> str:
                return cap_text(capped(artifact, cap, **kwargs), cap)

        else:
            bound = method.bind(artifact)

            def run() -> str:
                return cap_text(serialise(bound(**kwargs)), cap)

        threads = threads_of(ctx)
        if method.time_limit is None:
            return await threads.run(run)
        limit = method.time_limit(artifact)
        scope = asyncio.timeout(limit + _GRACE)
        try:
            async with scope:
                return await threads.run(run)
        except TimeoutError:
            if not scope.expired():
                raise  # the method's own TimeoutError
            raise InvalidToolArgsError(
                f"{method.name} did not finish within its {limit:.1f} s time limit for this "
                "artifact; narrow or simplify the query"
            ) from None

    handle.__qualname__ = handle.__name__ = f"{owner.__name__}.{method.name}"
    return handle


def _input_model(method: ToolMethod, ids: tuple[str, ...]) -> type[BaseModel]:
    from pydantic import Field, create_model  # lazily: docs/architecture.md, "Import time"

    enum = list(ids)

    def as_enum(schema: dict[str, Any]) -> None:
        # One id makes pydantic write "const"; providers read "enum" more widely.
        schema.pop("const", None)
        schema["enum"] = enum

    id_type: Any = Literal.__getitem__(ids)  # Literal["id1", "id2", ...] built at run time
    model: type[BaseModel] = create_model(
        f"{method.args_schema.__name__}_{method.name}",
        __base__=method.args_schema,
        call_id=(
            id_type,
            Field(
                description="The call_id of the artifact to query (one of the listed ids).",
                json_schema_extra=as_enum,
            ),
        ),
    )
    return model


_CACHE_SIZE = 256
_cache: dict[tuple[type[SpooledArtifact], tuple[str, ...]], tuple[ArtifactTool, ...]] = {}


def _forged(owner: type[SpooledArtifact], ids: tuple[str, ...]) -> tuple[ArtifactTool, ...]:
    """Return the query tools for ``owner``'s own methods over ``ids`` (cached, bounded)."""
    key = (owner, ids)
    tools = _cache.get(key)
    if tools is None:
        if len(_cache) >= _CACHE_SIZE:
            del _cache[next(iter(_cache))]  # drop the oldest entry
        tools = _cache[key] = _build(owner, ids)
    return tools


def _build(owner: type[SpooledArtifact], ids: tuple[str, ...]) -> tuple[ArtifactTool, ...]:
    return tuple(
        ArtifactTool(
            name=method.name,
            description=method.description,
            input_schema=_input_model(method, ids),
            handler=_handler(method, owner),
            ephemeral=True,
            trusted=False,
            on_collision="replace",
            queries=owner,
            tool_method=method,
        )
        for method in own_tool_methods(owner)
    )


def forge_tools(cls: type[SpooledArtifact], ctx: ArtifactContext) -> ToolRegistry:
    """Return a registry of the query tools for ``cls`` in ``ctx``'s turn.

    For ``cls`` and each of its artifact bases that has instances in the turn, that class's own
    tools, each restricted to the ids of its own class's instances. So a subclass with no
    artifacts of its own still returns the base tools for the turn's base artifacts (as the
    seeds do); only its own tools are absent. Empty when the turn holds no artifact of ``cls``
    or of any of its bases.
    """
    tools: list[ArtifactTool] = []
    for owner in reversed(cls.__mro__):
        if issubclass(owner, SpooledArtifact):
            ids = ctx.artifact_call_ids(owner)
            if ids:
                tools.extend(_forged(owner, tuple(ids)))
    return ToolRegistry(tools)


install_forger(forge_tools)
ArtifactTool.__module__ = "pipeline.artifacts"
