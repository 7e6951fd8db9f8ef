"""The compiled input schema of a tool: one validator and one JSON Schema, built once.

`ArgsSchema` turns a tool's ``input_schema`` (a pydantic model class, a ``TypedDict`` or a
dataclass) into what the hot path needs:

- a pydantic validator with **strict JSON-mode** semantics: nothing is coerced (``"5"`` is not an
  ``int``), but values JSON can only carry as strings (datetimes, UUIDs, enums by value, bytes)
  validate exactly as they would from JSON text; defaults are applied;
- the set of accepted top-level keys, so unknown keys are rejected unless the schema's own config
  allows extras (``extra="allow"``); nested models keep their own ``extra`` setting;
- the JSON Schema, kept as text so that `json_schema` hands out a fresh copy.

How validation runs (strict Python validation is the cheaper of the two): strict
``validate_python`` first. For JSON-like input a strict Python success is also a strict JSON
success with the same result (strict Python only accepts values that are already of the target
type). When it fails, the arguments are written as JSON text and validated with strict
``validate_json``, so the JSON-only forms (``"2024-01-01"`` for a ``date``, a UUID string, an enum
value) are accepted and the errors reported are the JSON-mode errors. Top-level dataclasses go
straight to JSON mode, since strict Python mode only accepts dataclass instances.

A schema whose top level is wrapped in a ``mode="before"``, ``"wrap"`` or ``"plain"`` model
validator owns the shape of its raw input (it may rename keys), so the unknown-key check is left
to its own ``extra`` config there.

pydantic is imported by the first `ArgsSchema`, not by ``import pipeline`` (docs/architecture.md,
"Import time"); the schema keeps pydantic's ``ValidationError`` class for its ``except`` clauses.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

from typing_extensions import is_typeddict

from ._json import canonical_json
from .errors import InvalidToolArgsError, InvalidToolError

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic_core import CoreSchema, ValidationError

__all__ = ["ArgsSchema"]

ArgsT = TypeVar("ArgsT")

_PASS_THROUGH = frozenset({"function-after"})
"""Wrappers that validate after the fields, so the raw input keys are still the field keys."""
_OPAQUE = frozenset({"function-before", "function-wrap", "function-plain"})
"""Wrappers that see the raw input first and may reshape it."""


def _schema_error(tool_name: str, reason: str) -> InvalidToolError:
    return InvalidToolError(f"tool {tool_name!r}: input_schema {reason}", field="input_schema")


def _alias_keys(alias: Any) -> list[str]:
    """Return the top-level keys a ``validation_alias`` (str, path, or choices of paths) reads."""
    if isinstance(alias, str):
        return [alias]
    if isinstance(alias, list) and alias:
        if isinstance(alias[0], list):  # AliasChoices: a list of paths
            return [path[0] for path in alias if path and isinstance(path[0], str)]
        if isinstance(alias[0], str):  # AliasPath: the first element is the top-level key
            return [alias[0]]
    return []


def _field_keys(
    fields: list[tuple[str, dict[str, Any]]], config: Mapping[str, Any]
) -> frozenset[str]:
    by_name = bool(config.get("validate_by_name", False))
    by_alias = bool(config.get("validate_by_alias", True))
    keys: set[str] = set()
    for name, field in fields:
        aliases = _alias_keys(field.get("validation_alias"))
        if not aliases or by_name:
            keys.add(name)
        if by_alias:
            keys.update(aliases)
    return frozenset(keys)


def _accepted_keys(schema: CoreSchema) -> frozenset[str] | None:
    """Return the top-level keys the schema accepts, or None when extras are its own business.

    None means: the schema allows or forbids extras itself, or its raw input is reshaped by a
    top-level validator, or it has no named fields (a root model).
    """
    definitions: dict[str, Any] = {}
    config: Mapping[str, Any] = {}
    node: Any = schema
    while True:
        kind = node["type"]
        if kind == "definitions":
            definitions.update((d["ref"], d) for d in node["definitions"] if "ref" in d)
            node = node["schema"]
        elif kind == "definition-ref":
            node = definitions[node["schema_ref"]]
        elif kind in ("model", "dataclass"):
            if node.get("root_model"):
                return None
            config = node.get("config", config)
            behaviour = node.get("extra_behavior", config.get("extra_fields_behavior"))
            if behaviour in ("allow", "forbid"):
                return None
            node = node["schema"]
        elif kind in _PASS_THROUGH:
            node = node["schema"]
        elif kind in _OPAQUE:
            return None
        elif kind in ("model-fields", "typed-dict", "dataclass-args"):
            config = node.get("config", config)
            behaviour = node.get("extra_behavior", config.get("extra_fields_behavior"))
            if behaviour in ("allow", "forbid"):
                return None
            raw = node["fields"]
            pairs = (
                [(field["name"], field) for field in raw]
                if isinstance(raw, list)
                else list(raw.items())
            )
            return _field_keys(pairs, config)
        else:
            return None


def _top_level_object(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline a top-level ``$ref`` (recursive models) so the root itself is the object schema."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if isinstance(ref, str) and isinstance(defs, dict) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict):
            merged = {key: value for key, value in schema.items() if key != "$ref"}
            merged.update(target)
            return merged
    return schema


def _own_json_schema(schema: type[Any]) -> dict[str, Any] | None:
    """The JSON Schema a model class says it is shown as, when it overrides `model_json_schema`.

    An MCP tool's arguments (`pipeline.mcp.MCPArguments`) and a host's tool's
    (`pipeline.hosted.HostArguments`) are shown as their server's or host's schema, ``$defs``
    and ``$ref`` included, which pydantic's own generation cannot resolve; any other class is
    shown as pydantic generates it.
    """
    from pydantic import BaseModel

    if not issubclass(schema, BaseModel):
        return None
    method = getattr(schema.model_json_schema, "__func__", None)
    if method is None or method is getattr(BaseModel.model_json_schema, "__func__", None):
        return None
    own: dict[str, Any] = schema.model_json_schema()
    return own


def _is_schema_class(value: object) -> bool:
    # pydantic's model machinery loads with the first tool (docs/architecture.md, "Import time")
    from pydantic import BaseModel

    return isinstance(value, type) and (
        issubclass(value, BaseModel) or is_typeddict(value) or dataclasses.is_dataclass(value)
    )


def _json_safe_errors(exc: ValidationError) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = json.loads(exc.json(include_url=False))
    return errors


def _describe_errors(tool_name: str, errors: list[dict[str, Any]]) -> str:
    parts = []
    for error in errors:
        loc = ".".join(str(part) for part in error.get("loc", ())) or "(arguments)"
        parts.append(f"{loc}: {error.get('msg', 'invalid')}")
    return f"invalid arguments for tool {tool_name!r}: " + "; ".join(parts)


def _sort_sets(python: Any, data: Any) -> Any:
    """``data`` (a JSON-mode dump) with each list that was a set in ``python`` sorted."""
    if isinstance(python, set | frozenset) and isinstance(data, list):
        return sorted(data, key=canonical_json)
    if isinstance(python, dict) and isinstance(data, dict):
        return {key: _sort_sets(python.get(key), value) for key, value in data.items()}
    if isinstance(python, list | tuple) and isinstance(data, list):
        return [_sort_sets(p, d) for p, d in zip(python, data, strict=False)]
    return data


class ArgsSchema(Generic[ArgsT]):
    """A tool's input schema compiled once: validator, accepted keys and JSON Schema text."""

    __slots__ = (
        "_accepted",
        "_adapter",
        "_dump_python",
        "_has_sets",
        "_invalid",
        "_json_text",
        "_python_first",
        "_tool_name",
        "_validate_python",
        "schema",
    )

    schema: type[ArgsT]
    _adapter: TypeAdapter[ArgsT]
    _invalid: type[ValidationError]
    _accepted: frozenset[str] | None
    _validate_python: Callable[..., Any]
    _dump_python: Callable[..., Any]
    _python_first: bool
    _has_sets: bool
    _json_text: str
    _tool_name: str

    def __init__(self, schema: type[ArgsT], tool_name: str) -> None:
        """Compile ``schema``.

        Raises:
            InvalidToolError: ``schema`` is not a model class, TypedDict or dataclass, pydantic
                cannot build it, or its JSON Schema is not ``type: object``; ``field`` is
                ``"input_schema"``.
        """
        if not _is_schema_class(schema):
            raise _schema_error(
                tool_name,
                f"must be a pydantic model class, a TypedDict or a dataclass, not {schema!r}",
            )
        from pydantic import TypeAdapter
        from pydantic_core import SchemaValidator, ValidationError

        try:
            adapter: TypeAdapter[ArgsT] = TypeAdapter(schema)
            own = _own_json_schema(schema)
            json_schema = own if own is not None else _top_level_object(adapter.json_schema())
        except Exception as exc:  # pydantic raises several unrelated types here
            raise _schema_error(tool_name, f"cannot be compiled: {exc}") from exc
        if json_schema.get("type") != "object":
            raise _schema_error(tool_name, "must describe a JSON object (JSON Schema type object)")
        accepted = _accepted_keys(adapter.core_schema)
        if accepted is not None:
            json_schema.setdefault("additionalProperties", False)
        self.schema = schema
        self._adapter = adapter
        validator = adapter.validator
        # The compiled validator, called directly on the hot path (the adapter's wrapper adds a
        # Python frame and its keyword checks to every call); a deferred one goes through it.
        self._validate_python = (
            validator.validate_python
            if isinstance(validator, SchemaValidator)
            else adapter.validate_python
        )
        # likewise the compiled serializer dumps validated arguments (`dump`)
        self._dump_python = adapter.serializer.to_python
        self._invalid = ValidationError
        self._accepted = accepted
        self._python_first = not dataclasses.is_dataclass(schema)
        self._json_text = json.dumps(json_schema, separators=(",", ":"))
        self._has_sets = '"uniqueItems":true' in self._json_text  # pydantic's sets
        self._tool_name = tool_name

    def json_schema(self) -> dict[str, Any]:
        """Return a fresh copy of the JSON Schema (plain JSON data)."""
        copy: dict[str, Any] = json.loads(self._json_text)
        return copy

    def dump(self, validated: ArgsT) -> dict[str, Any]:
        """Return validated arguments as JSON data (defaults included, JSON-mode values).

        A set is written as a list sorted by its items' canonical JSON, so equal sets dump
        alike (pydantic writes them in iteration order, which depends on the hash seed).
        """
        dumped: dict[str, Any] = self._dump_python(validated, mode="json")
        if self._has_sets:
            dumped = _sort_sets(self._dump_python(validated), dumped)
        return dumped

    def validate(self, args: Mapping[str, Any]) -> ArgsT:
        """Validate raw arguments with strict JSON-mode rules and return the validated value.

        Raises:
            InvalidToolArgsError: the arguments fail the schema (or one of its validators raised
                anything at all); ``errors`` holds pydantic's error list (JSON-safe) and the
                message names every failing field.
        """
        if type(args) is not dict:  # a copy: pydantic reads a plain dict fastest
            if not isinstance(args, dict) and not isinstance(args, Mapping):
                raise self._error(
                    [{"type": "dict_type", "loc": [], "msg": "arguments must be a JSON object"}]
                )
            args = dict(args)
        accepted = self._accepted
        if accepted is not None and not accepted.issuperset(args):
            self._reject_unknown(args, accepted)
        if self._python_first:
            try:
                return self._validate_python(args, strict=True)  # type: ignore[no-any-return]
            except self._invalid:
                pass  # JSON mode decides: it accepts the JSON-only forms and words the errors
            except Exception as exc:  # a validator of the user's raising TypeError, KeyError...
                raise self._raised(exc) from exc
        try:
            text = json.dumps(args)
        except (TypeError, ValueError, RecursionError) as exc:
            raise self._error(
                [{"type": "json_type", "loc": [], "msg": f"arguments are not JSON data: {exc}"}]
            ) from exc
        try:
            return self._adapter.validate_json(text, strict=True)
        except self._invalid as exc:
            raise self._error(_json_safe_errors(exc)) from None
        except Exception as exc:
            raise self._raised(exc) from exc

    def _raised(self, exc: Exception) -> InvalidToolArgsError:
        """A schema validator raised something other than ``ValueError``: still invalid args."""
        what = f"a validator of the schema raised {type(exc).__name__}: {exc}"
        return self._error([{"type": "validator_raised", "loc": [], "msg": what}])

    def _reject_unknown(self, args: dict[str, Any], accepted: frozenset[str]) -> NoReturn:
        """Raise for unknown keys, reporting the other field errors in the same error."""
        errors: list[dict[str, Any]] = []
        known: dict[str, Any] = {}
        for key, value in args.items():
            if key in accepted:
                known[key] = value
            else:
                errors.append(
                    {
                        "type": "extra_forbidden",
                        "loc": [key],
                        "msg": "Extra inputs are not permitted",
                        "input": value,
                    }
                )
        try:
            self.validate(known)
        except InvalidToolArgsError as exc:
            errors = exc.errors + errors
        error = self._error(errors)
        try:  # keep the errors JSON-safe even when a value is not JSON
            json.dumps(error.errors)
        except (TypeError, ValueError):
            for item in error.errors:
                if "input" in item:
                    item["input"] = repr(item["input"])
        raise error

    def _error(self, errors: list[dict[str, Any]]) -> InvalidToolArgsError:
        return InvalidToolArgsError(
            _describe_errors(self._tool_name, errors), errors=errors, tool_name=self._tool_name
        )
