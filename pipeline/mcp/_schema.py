"""A server's JSON Schema as a loopware input schema: strict validation, the same error calls.

`schema_model` turns an MCP tool's ``inputSchema`` into a pydantic model class that `Tool`
compiles like any other (``pipeline/_tool_schema.py``): its JSON Schema is the server's (what
the model is shown), and validation runs the server's schema with ``jsonschema`` before the
handler, raising pydantic errors (``loc``, ``msg``, ``type``), so a bad argument becomes the
same ``E_INVALID_TOOL_ARGS`` error call as for a pydantic-schema tool. The rules match the
pydantic tools' strict JSON mode: nothing is coerced (JSON Schema never coerces), top-level
defaults are applied, and unknown top-level keys are rejected unless the schema itself says
what extras may be (``additionalProperties``, ``patternProperties`` or
``unevaluatedProperties``): the described schema then carries ``additionalProperties: false``.

``jsonschema`` (a dependency of the ``mcp`` SDK) is imported when a schema is compiled, never
by ``import pipeline``.
"""

from __future__ import annotations

import copy
import importlib
import json
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
        found = zip(range(_MAX_ERRORS), _iter(cls, data), strict=False)  # jsonschema decides
        errors = [detail for _, error in found for detail in _details(error)]
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        if cls._defaults:
            missing = [(k, v) for k, v in cls._defaults if k not in data]
            if missing:
                data = dict(data)
                for key, text in missing:
                    data[key] = json.loads(text)  # a fresh copy for every call
        return data

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        """The server's schema (as amended by `schema_model`), not pydantic's."""
        return copy.deepcopy(cls._json_schema)


def _iter(cls: type[MCPArguments], data: dict[str, Any]) -> Any:
    try:
        yield from cls._validator.iter_errors(data)
    except Exception as exc:  # an unresolvable $ref, a broken format checker, ...
        yield _Broken(f"the schema cannot validate these arguments: {exc}")


class _Broken:
    """A stand-in for a jsonschema error when the schema itself failed while validating."""

    validator = "schema"
    absolute_path: tuple[object, ...] = ()
    validator_value: object = None
    instance: object = None

    def __init__(self, message: str) -> None:
        self.message = message


def _details(error: Any) -> list[InitErrorDetails]:
    """One jsonschema error as pydantic error details (one per missing or unknown key)."""
    loc = tuple(p for p in error.absolute_path if isinstance(p, str | int))
    kind = str(error.validator)
    instance = error.instance
    if kind == "required" and isinstance(instance, dict):
        missing = [k for k in error.validator_value or () if k not in instance]
        return [
            InitErrorDetails(
                type=PydanticCustomError("missing", "Field required"),
                loc=(*loc, str(key)),
                input=_short(instance),
            )
            for key in missing
        ]
    schema = getattr(error, "schema", None)
    if kind == "additionalProperties" and isinstance(instance, dict) and isinstance(schema, dict):
        known = schema.get("properties") or {}
        unknown = [k for k in instance if k not in known] if isinstance(known, dict) else []
        if unknown and not schema.get("patternProperties"):
            return [
                InitErrorDetails(
                    type=PydanticCustomError("extra_forbidden", "Extra inputs are not permitted"),
                    loc=(*loc, key),
                    input=_short(instance[key]),
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
    # jsonschema ships no type stubs (and none are installable here): it is used as Any.
    jsonschema: Any = importlib.import_module("jsonschema")
    validators: Any = importlib.import_module("jsonschema.validators")
    from referencing import Registry

    if not isinstance(schema, dict):
        raise _problem(tool_name, f"must be a JSON object, got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise _problem(tool_name, "must describe a JSON object (JSON Schema type object)")
    described = copy.deepcopy(schema)
    if not any(key in described for key in _EXTRAS_KEYWORDS):
        described["additionalProperties"] = False
    try:
        json.dumps(described)
        cls: Any = validators.validator_for(described, default=validators.Draft202012Validator)
        cls.check_schema(described)
        validator = cls(described, registry=Registry())
    except jsonschema.SchemaError as exc:
        raise _problem(tool_name, f"is not a valid JSON Schema: {exc.message}") from None
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
    }
    model: type[MCPArguments] = type(f"MCPArguments_{tool_name}", (MCPArguments,), namespace)
    return model


MCPArguments.__module__ = "pipeline.mcp"
schema_model.__module__ = "pipeline.mcp"
