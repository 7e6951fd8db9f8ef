"""A host's tool as a loopware `Tool`: the host's schema shown, the host's handler at the centre.

A host (pydantic-ai, LangChain, ...) owns its tools: it validates their arguments and runs their
functions. For loopware's ``tool_call`` stage to see a host call as it sees its own, each host
tool is registered in the turn's registry as a `Tool` built by `host_tool`:

* its input schema is `HostArguments`: any JSON object is accepted (the host validates), and
  the JSON Schema shown is the host's own;
* when the host hands over its own validated arguments (defaults applied), they are what the
  hooks read as ``ctx.args`` and ``validated_args``, so a call that spells out a default
  compares equal to one that leaves it out (`ToolCallContext.validated_checksum`);
* its handler is the host's handler of the one call being run (`HostedCall.centre`), found
  through the call's own context (a `contextvars.ContextVar` set by `HostedTurn.call` around the
  run, so parallel calls each reach their own).
"""

from __future__ import annotations

import contextvars
import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, model_validator

from .._tool import Tool

if TYPE_CHECKING:
    from .._stash import Stash
    from ._call import HostedCall

__all__ = ["CURRENT", "HostArguments", "HostCentre", "HostTool", "HostToolCache", "host_tool"]

HostCentre = Callable[[dict[str, Any]], Awaitable[object]]
"""The host's own handler of one call: its (possibly replaced) arguments in, the host's value
out. Whatever it raises is the host's (re-raised to the host by the adapter)."""

CURRENT: Final[contextvars.ContextVar[HostedCall | None]] = contextvars.ContextVar(
    "loopware_hosted_call", default=None
)
"""The host call being run in this context (set by `HostedTurn.call` around its run)."""

_ANY_OBJECT: Final = {"type": "object"}
_CACHED: Final = 256
"""How many built host tools a runner keeps (the oldest is dropped past it)."""


class HostArguments(BaseModel):
    """The arguments of a host tool's call: any JSON object; read them with `as_dict`.

    The host validates its own arguments. When it handed them over (`HostedTurn.call`'s
    ``validated``), validating the model's arguments yields the host's, defaults applied.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    _json_schema: ClassVar[dict[str, Any]] = _ANY_OBJECT

    def as_dict(self) -> dict[str, Any]:
        """The arguments as plain JSON data (a fresh dict)."""
        extra = self.__pydantic_extra__
        return {} if extra is None else dict(extra)

    @model_validator(mode="before")
    @classmethod
    def _host_validated(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("arguments must be a JSON object")
        call = CURRENT.get()
        if call is not None and call.validated is not None and data == call.raw_args:
            return dict(call.validated)  # the host's validation of what the model sent
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The host's schema, not pydantic's: ``$defs`` and ``$ref`` as given (a fresh copy)."""
        return copy.deepcopy(cls._json_schema)


class HostTool:
    """What loopware needs to know of a host's tool: its name, description and JSON Schema.

    Args:
        name: The tool's name as the host offers it to the model.
        description: The host's description (a placeholder when the host gives none).
        json_schema: The JSON Schema of its arguments as the host shows it (default: any object).
    """

    __slots__ = ("description", "json_schema", "name")

    def __init__(
        self,
        name: str,
        description: str | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> None:
        """Describe a host tool (see the class docstring)."""
        self.name = name
        """The tool's name."""
        self.description = description or f"The host's tool {name}."
        """The tool's description."""
        schema = dict(json_schema) if json_schema else {}
        if schema.get("type") != "object":
            schema = dict(_ANY_OBJECT)
        self.json_schema: dict[str, Any] = json.loads(json.dumps(schema, default=str))
        """The JSON Schema of its arguments (a JSON object schema)."""

    def __repr__(self) -> str:
        """Show the tool's name."""
        return f"HostTool({self.name!r})"


async def _run_centre(args: HostArguments, ctx: Any, meta: Stash) -> Any:
    """The handler of every host tool: the host's handler of the call running in this context."""
    call = CURRENT.get()
    if call is None:  # run outside `HostedTurn.call` (someone called ``tool.run`` directly)
        raise RuntimeError("a host tool runs only through HostedTurn.call")
    return await call.enter_centre(args.as_dict())


def host_tool(spec: HostTool) -> Tool[HostArguments]:
    """Build the loopware `Tool` of a host's tool (see the module docstring).

    Raises:
        InvalidToolError: the name is not a tool name loopware accepts.
    """
    model: type[HostArguments] = type(
        f"HostArguments_{spec.name}",
        (HostArguments,),
        {
            "__module__": __name__,
            "__qualname__": f"HostArguments[{spec.name}]",
            "_json_schema": spec.json_schema,
        },
    )
    return Tool(
        name=spec.name,
        description=spec.description,
        input_schema=model,
        handler=_run_centre,
    )


class HostToolCache:
    """The `Tool`s built for a runner's host tools, kept across its turns.

    Building one makes a pydantic model class (`host_tool`), which costs more than a run's
    tool calls; a host offers the same tools run after run, so each is built once per runner,
    keyed by its name, description and schema (a changed schema is a new tool).
    """

    __slots__ = ("_built",)

    def __init__(self) -> None:
        """Start with no tool built."""
        self._built: dict[tuple[str, str, str], Tool[HostArguments]] = {}

    def __repr__(self) -> str:
        """Show how many tools are kept."""
        return f"HostToolCache(tools={len(self._built)})"

    def tool(self, spec: HostTool) -> Tool[HostArguments]:
        """The `Tool` of ``spec``: built on first use, the same one afterwards.

        Raises:
            InvalidToolError: the name is not a tool name loopware accepts.
        """
        key = (spec.name, spec.description, json.dumps(spec.json_schema, sort_keys=True))
        built = self._built.get(key)
        if built is None:
            built = host_tool(spec)
            if len(self._built) >= _CACHED:
                del self._built[next(iter(self._built))]
            self._built[key] = built
        return built


for _cls in (HostArguments, HostTool, HostToolCache):
    _cls.__module__ = "pipeline.hosted"
host_tool.__module__ = "pipeline.hosted"
