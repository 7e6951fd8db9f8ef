"""A server's JSON Schema as a loopware input schema: strict validation, the same error calls.

`schema_model` turns an MCP tool's ``inputSchema`` into a pydantic model class that `Tool`
compiles like any other (``pipeline/_tool_schema.py``): its JSON Schema is the server's (what
the model is shown), and validation runs the server's schema with ``jsonschema_rs`` (the
``jsonschema-rs`` package: the schema compiled once per tool, each call checked in Rust) before
the handler, raising pydantic errors (``loc``, ``msg``, ``type``), so a bad argument becomes the
same ``E_INVALID_TOOL_ARGS`` error call as for a pydantic-schema tool. The rules match the
pydantic tools' strict JSON mode: nothing is coerced (JSON Schema never coerces), top-level
defaults are applied, and unknown top-level keys are rejected unless the schema itself says
what extras may be (``additionalProperties``, ``patternProperties`` or
``unevaluatedProperties``): the described schema then carries ``additionalProperties: false``.
``format`` is an annotation, as in ``jsonschema``'s validators by default; no ``$ref`` is
fetched from the network (a schema that needs one is refused when it is compiled).

``jsonschema_rs`` is imported when a schema is compiled, never by ``import pipeline``.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..errors import InvalidToolError

__all__ = ["MCPArguments", "schema_model"]

_MAX_ERRORS: Final = 20
"""At most this many field errors are reported for one call (a huge bad payload stays short)."""
_EXTRAS_KEYWORDS: Final = ("additionalProperties", "patternProperties", "unevaluatedProperties")


class MCPArguments(BaseModel):
    """The validated arguments of an MCP tool call: read them with `as_dict`.

    Built per tool by `schema_model`; the handler receives an instance whose extras are the
    arguments (defaults applied) exactly as they are sent to the server.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    _validator: ClassVar[Any] = None
    _json_schema: ClassVar[dict[str, Any]] = {}
    _defaults: ClassVar[tuple[tuple[str, str], ...]] = ()
    _recursive: ClassVar[bool] = False
    """The schema has a ``$ref``: its validation may recurse as deep as the arguments go."""

    def as_dict(self) -> dict[str, Any]:
        """The arguments as plain JSON data (a fresh dict)."""
        extra = self.__pydantic_extra__
        return {} if extra is None else dict(extra)

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if cls._validator is None:  # the base class itself is never a tool's schema
            return data
        if not isinstance(data, dict):
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError("dict_type", "arguments must be a JSON object"),
                        loc=(),
                        input=data,
                    )
                ],
            )
        if cls._recursive and _deeper_than(data, _MAX_DEPTH):
            refused: Any = [_Broken(f"the arguments are nested deeper than {_MAX_DEPTH} levels")]
        elif _accepts(cls._validator, data):  # the verdict first; the errors only when refused
            refused = None
        else:
            found = zip(range(_MAX_ERRORS), _iter(cls._validator, data), strict=False)
            refused = [error for _, error in found] or [_Broken("the schema refused them")]
        if refused is not None:
            schema = cls._json_schema
            errors = [d for error in refused for d in _details(error, data, schema)]
            raise ValidationError.from_exception_data(cls.__name__, errors)
        if cls._defaults:
            missing = [(k, v) for k, v in cls._defaults if k not in data]
            if missing:
                data = dict(data)
                for key, text in missing:
                    data[key] = json.loads(text)  # a fresh copy for every call
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The server's schema as amended by `schema_model`, ``$defs`` and ``$ref`` as given."""
        return copy.deepcopy(cls._json_schema)


def _accepts(validator: Any, data: dict[str, Any]) -> bool:
    """The validator's verdict (False when it cannot validate ``data``: `_iter` says why)."""
    try:
        return bool(validator.is_valid(data))
    except Exception:
        return False


def _iter(validator: Any, data: dict[str, Any]) -> Any:
    """The validator's errors for ``data`` (a `_Broken` when it cannot validate them)."""
    try:
        yield from validator.iter_errors(data)
    except UnicodeEncodeError as exc:  # a lone surrogate: no JSON text sent as UTF-8 holds it
        bad = exc.object[exc.start : exc.end]
        yield _Broken(
            f"the arguments hold a lone surrogate ({bad!a}), which JSON sent as UTF-8 cannot carry"
        )
    except Exception as exc:  # not JSON data (a key that is no string), nested too deeply, ...
        yield _Broken(f"the schema cannot validate these arguments: {exc}")


_MAX_DEPTH: Final = 256
"""How deep arguments may nest under a schema with a ``$ref`` (its validation recurses in native
code as deep as they go, which an unbounded depth could overflow)."""


def _deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` nests lists and objects deeper than ``limit`` (walked, not recursed)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items: Any = item.values()
        elif isinstance(item, list | tuple):
            items = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in items)
    return False


class _Broken:
    """A stand-in for a validation error when the arguments could not be validated at all."""

    kind_name = "schema"
    instance_path: tuple[object, ...] = ()
    schema_path: tuple[object, ...] = ()
    instance: object = None

    def __init__(self, message: str) -> None:
        self.message = message


def _details(error: Any, data: object, schema: object) -> list[InitErrorDetails]:
    """One validation error as pydantic error details (one per unknown key)."""
    loc = tuple(p for p in error.instance_path if isinstance(p, str | int))
    kind = getattr(error, "kind_name", None) or error.kind.name
    instance = error.instance
    path = error.schema_path
    if instance is None and kind != "schema":
        value = _at(data, loc)
        if isinstance(value, float) and not math.isfinite(value):  # read as null by the validator
            return [
                InitErrorDetails(
                    type=PydanticCustomError(
                        "finite_number",
                        "Input should be a finite number (JSON has no {value})",
                        {"value": repr(value)},
                    ),
                    loc=loc,
                    input=value,
                )
            ]
    if kind == "required":
        return [
            InitErrorDetails(
                type=PydanticCustomError("missing", "Field required"),
                loc=(*loc, str(error.kind.property)),
                input=_short(instance),
            )
        ]
    if path and path[-1] == "additionalProperties" and kind in _EXTRA_KINDS:
        found = _at(data, loc)  # the object with the unknown keys
        where = _at(schema, path[:-1])  # the schema that closed it
        known = where.get("properties") if isinstance(where, dict) else None
        patterned = isinstance(where, dict) and "patternProperties" in where
        if isinstance(found, dict) and not patterned:
            unknown = [k for k in found if not isinstance(known, dict) or k not in known]
            return [
                InitErrorDetails(
                    type=PydanticCustomError("extra_forbidden", "Extra inputs are not permitted"),
                    loc=(*loc, key),
                    input=_short(found[key]),
                )
                for key in unknown
            ]
    return [
        InitErrorDetails(
            type=PydanticCustomError(
                f"json_schema_{kind}", "{message}", {"message": error.message}
            ),
            loc=loc,
            input=_short(instance),
        )
    ]


_EXTRA_KINDS: Final = frozenset({"additionalProperties", "falseSchema"})
"""The errors ``additionalProperties: false`` gives (``falseSchema`` when no ``properties``)."""


def _at(value: object, path: Sequence[object]) -> object:
    """The part of ``value`` at ``path`` (keys and indexes), or None when there is none."""
    for step in path:
        if isinstance(value, dict) and isinstance(step, str):
            value = value.get(step)
        elif isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
            value = value[step]
        else:
            return None
    return value


def _short(value: object) -> object:
    """The offending value, or its kind when it is large (error records stay small)."""
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + "..."
    if isinstance(value, dict | list) and len(json.dumps(value)) > 200:
        return f"({type(value).__name__} of {len(value)} items)"
    return value


def _problem(tool_name: str, reason: str) -> InvalidToolError:
    return InvalidToolError(f"tool {tool_name!r}: input_schema {reason}", field="input_schema")


def schema_model(tool_name: str, schema: object) -> type[MCPArguments]:
    """Compile an MCP tool's ``inputSchema`` into an `MCPArguments` subclass for `Tool`.

    Raises:
        InvalidToolError: the schema is not a JSON object schema (``type: object``) or is not a
            valid JSON Schema; ``field`` is ``"input_schema"``.
    """
    import jsonschema_rs

    if not isinstance(schema, dict):
        raise _problem(tool_name, f"must be a JSON object, got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise _problem(tool_name, "must describe a JSON object (JSON Schema type object)")
    described = copy.deepcopy(schema)
    if not any(key in described for key in _EXTRAS_KEYWORDS):
        described["additionalProperties"] = False
    try:
        text = json.dumps(described)
        # formats annotate (as jsonschema's validators do by default); no $ref is fetched
        validator = jsonschema_rs.validator_for(described, validate_formats=False, offline=True)
    except jsonschema_rs.ValidationError as exc:
        reason = exc.message.splitlines()[0] if exc.message else str(exc)
        raise _problem(tool_name, f"is not a valid JSON Schema: {reason}") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise _problem(tool_name, f"cannot be compiled: {exc}") from None
    properties = described.get("properties")
    defaults: list[tuple[str, str]] = []
    if isinstance(properties, dict):
        for key, sub in properties.items():
            if isinstance(sub, dict) and "default" in sub:
                defaults.append((key, json.dumps(sub["default"])))
    namespace = {
        "__module__": __name__,
        "__qualname__": f"MCPArguments[{tool_name}]",
        "_validator": validator,
        "_json_schema": described,
        "_defaults": tuple(defaults),
        "_recursive": "$ref" in text or "$dynamicRef" in text or "$recursiveRef" in text,
    }
    model: type[MCPArguments] = type(f"MCPArguments_{tool_name}", (MCPArguments,), namespace)
    return model


MCPArguments.__module__ = "pipeline.mcp"
schema_model.__module__ = "pipeline.mcp"
