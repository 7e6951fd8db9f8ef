"""The ``@tool`` decorator: a `Tool` built from a typed function.

The function's signature is the single source of truth:

- every parameter becomes a field of a generated pydantic input model (``extra="forbid"``),
  keeping its default and honouring ``Annotated[T, Field(description=...)]``;
- a parameter annotated `DispatchContext` receives the context and is not part of the schema;
- a parameter named ``meta`` annotated `Stash` receives the tool's meta stash;
- the docstring, whole (``inspect.cleandoc``-ed), is the description unless ``description=``
  is given.

Annotations are resolved with ``typing.get_type_hints`` against the function's module and the
namespace the decorator was applied in, so string annotations and local classes both work.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, overload

from ._stash import Stash
from ._tool import OnCollision, Tool, ToolOutput, is_async_callable
from .artifacts._artifact import SpooledArtifact
from .errors import InvalidToolError

if TYPE_CHECKING:
    from pydantic import BaseModel, ConfigDict

__all__ = ["ToolFunction", "tool"]

_FORBID: ConfigDict = {"extra": "forbid"}


def _bad(fn: Callable[..., Any], field: str, problem: str) -> InvalidToolError:
    name = getattr(fn, "__qualname__", repr(fn))
    return InvalidToolError(f"@tool {name}: {field} {problem}", field=field)


def _hints(fn: Callable[..., Any], localns: Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, localns=dict(localns or {}), include_extras=True)
    except Exception as exc:  # NameError for unknown names, TypeError for bad annotations
        raise _bad(fn, "input_schema", f"annotations cannot be resolved: {exc}") from exc


def _field_name(index: int, name: str) -> str:
    """A model field name for a parameter; parameters pydantic cannot name get an alias."""
    from pydantic import BaseModel

    if name.startswith("_") or hasattr(BaseModel, name):
        return f"p{index}_{name.lstrip('_')}"
    return name


def _description(fn: Callable[..., Any], given: str | None) -> str:
    if given is not None:
        return given
    doc = inspect.getdoc(fn)
    if not doc or not doc.strip():
        raise _bad(fn, "description", "is missing: give the function a docstring or description=")
    return doc


def _build(
    fn: Callable[..., Any],
    localns: Mapping[str, Any] | None,
    *,
    name: str | None,
    description: str | None,
    ephemeral: bool,
    trusted: bool,
    on_collision: OnCollision,
    meta: Mapping[str, Any] | None,
    artifact_constructor: Callable[[], type[SpooledArtifact]] | None,
) -> Tool[BaseModel]:
    if not callable(fn):
        raise InvalidToolError(f"@tool needs a function, got {fn!r}", field="handler")
    from pydantic import Field, create_model  # lazily: docs/architecture.md, "Import time"

    from ._dispatch import DispatchContext  # lazily: the contexts import the tool machinery

    tool_name = name if name is not None else getattr(fn, "__name__", "")
    text = _description(fn, description)
    hints = _hints(fn, localns)
    positional: list[str] = []  # field names passed by position (positional-only parameters)
    keyword: list[tuple[str, str]] = []  # (parameter, field) pairs passed by keyword
    ctx_param: str | None = None
    meta_param: str | None = None
    fields: dict[str, Any] = {}
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise _bad(fn, "input_schema", f"*args/**kwargs ({param.name!r}) are not allowed")
        if param.name not in hints:
            raise _bad(fn, "input_schema", f"parameter {param.name!r} has no annotation")
        annotation = hints[param.name]
        if annotation is DispatchContext:
            ctx_param = param.name
            continue
        if annotation is Stash:
            if param.name != "meta":
                raise _bad(
                    fn,
                    "input_schema",
                    f"a Stash parameter receives the tool's meta stash and must be named 'meta' "
                    f"(not {param.name!r}); use ctx.stash for the turn's stash",
                )
            meta_param = param.name
            continue
        field = _field_name(index, param.name)
        default = ... if param.default is param.empty else param.default
        if field != param.name:
            default = Field(default, alias=param.name)
        fields[field] = (annotation, default)
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(field)
        else:
            keyword.append((param.name, field))
    try:
        model = create_model(
            getattr(fn, "__name__", "tool_args"),
            __config__=_FORBID,
            __module__=getattr(fn, "__module__", __name__),
            **fields,
        )
    except Exception as exc:  # pydantic raises several unrelated types here
        raise _bad(fn, "input_schema", f"cannot be built from the signature: {exc}") from exc
    handler = _adapter(fn, positional, keyword, ctx_param, meta_param)
    return Tool(
        name=tool_name,
        description=text,
        input_schema=model,
        handler=handler,
        meta=meta,
        ephemeral=ephemeral,
        trusted=trusted,
        on_collision=on_collision,
        artifact_constructor=artifact_constructor,
    )


def _adapter(
    fn: Callable[..., Any],
    positional: list[str],
    keyword: list[tuple[str, str]],
    ctx_param: str | None,
    meta_param: str | None,
) -> Callable[[BaseModel, Any, Stash], Any]:
    """Return ``(args, ctx, meta) -> fn(...)``: spreads the validated model over ``fn``.

    The adapter is ``async def`` exactly when ``fn`` is, so `Tool` runs it where ``fn`` belongs:
    on the event loop, or in a worker thread (``pipeline/_tool_threads.py``).
    """
    direct = not positional and all(param == field for param, field in keyword)

    def call(args: BaseModel, ctx: Any, meta: Stash) -> Any:
        values = args.__dict__
        # ``direct``: the model's fields are exactly the keyword parameters.
        kwargs = values.copy() if direct else {param: values[f] for param, f in keyword}
        if ctx_param is not None:
            kwargs[ctx_param] = ctx
        if meta_param is not None:
            kwargs[meta_param] = meta
        if positional:
            return fn(*[values[field] for field in positional], **kwargs)
        return fn(**kwargs)

    if not is_async_callable(fn):
        return call

    async def handler(args: BaseModel, ctx: Any, meta: Stash) -> Any:
        return await call(args, ctx, meta)

    return handler


ToolFunction: TypeAlias = Callable[..., "ToolOutput | Awaitable[ToolOutput]"]
"""What ``@tool`` decorates: a sync or async function returning a `ToolOutput`.

mypy rejects, at the decorator line, a function whose return type is not one (``-> object``,
``-> MyClass`` for a class that is neither a pydantic model nor a dataclass)."""


@overload
def tool(fn: ToolFunction, /) -> Tool[BaseModel]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    ephemeral: bool = False,
    trusted: bool = False,
    on_collision: OnCollision = "throw",
    meta: Mapping[str, Any] | None = None,
    artifact_constructor: Callable[[], type[SpooledArtifact]] | None = None,
) -> Callable[[ToolFunction], Tool[BaseModel]]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    ephemeral: bool = False,
    trusted: bool = False,
    on_collision: OnCollision = "throw",
    meta: Mapping[str, Any] | None = None,
    artifact_constructor: Callable[[], type[SpooledArtifact]] | None = None,
) -> Tool[BaseModel] | Callable[[ToolFunction], Tool[BaseModel]]:
    """Build a `Tool` from a typed function (sync or async); bare or with keyword options.

    Example::

        @tool
        async def search(
            query: Annotated[str, Field(description="What to look for")],
            ctx: DispatchContext,
            limit: int = 10,
        ) -> str:
            \"\"\"Search the web and return the top results as text.\"\"\"
            ...

    Args:
        fn: The function (bare ``@tool`` form).
        name: The tool name; default the function's ``__name__``.
        description: What the tool does; default the function's whole docstring.
        ephemeral: See `Tool`.
        trusted: See `Tool`.
        on_collision: See `Tool`.
        meta: See `Tool`.
        artifact_constructor: See `Tool` (e.g. ``lambda: SpooledJsonArtifact``).

    Returns:
        The `Tool` (bare form), or a decorator that returns it.

    Raises:
        InvalidToolError: a parameter has no annotation or is ``*args``/``**kwargs``, there is
            neither a docstring nor ``description=``, the signature cannot become a model, or
            an option is invalid; ``field`` names what is wrong.
    """
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    localns = (
        None if caller is None or caller.f_locals is caller.f_globals else caller.f_locals
    )
    del frame, caller  # no reference cycle through the frames
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "ephemeral": ephemeral,
        "trusted": trusted,
        "on_collision": on_collision,
        "meta": meta,
        "artifact_constructor": artifact_constructor,
    }
    if fn is not None:
        return _build(fn, localns, **options)

    def decorate(function: ToolFunction) -> Tool[BaseModel]:
        return _build(function, localns, **options)

    return decorate


tool.__module__ = "pipeline"
