"""`ToolDescription` (what the model is told about a tool) and its provider wire shapes.

A `ToolDescription` is provider-neutral (a name, a description and a JSON Schema object): a
`Tool` describes itself with one and a `ModelRequest` carries them, so it sits below both (plain
data, no import of either). The functions here turn a sequence of them into the shape each
provider documents for its tools parameter. They copy, never mutate, the descriptions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typing_extensions import TypedDict

from .._frozen import thaw_json

__all__ = ["ToolDescription", "to_anthropic_tools", "to_gemini_tools", "to_openai_tools"]


class ToolDescription(TypedDict):
    """What the model is told about a tool (plain JSON data)."""

    name: str
    """The tool's name."""
    description: str
    """What the tool does."""
    input_schema: dict[str, Any]
    """The JSON Schema of the tool's arguments."""


# JSON Schema keywords outside the OpenAPI 3.0 subset that Gemini function declarations accept.
_GEMINI_DROP = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "definitions",
        "additionalProperties",
        "title",
        "examples",
        "const",
        "$comment",
        "unevaluatedProperties",
        "patternProperties",
        "dependentRequired",
    }
)


_DATA_KEYWORDS = frozenset({"default", "enum", "example"})
"""Keywords whose values are data (a default dict may well hold a "title" or "type" key)."""


def to_openai_tools(descriptions: Iterable[ToolDescription]) -> list[dict[str, Any]]:
    """Render for OpenAI chat completions (and compatible servers): ``type: function`` tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": d["name"],
                "description": d["description"],
                "parameters": thaw_json(d["input_schema"]),
            },
        }
        for d in descriptions
    ]


def to_anthropic_tools(descriptions: Iterable[ToolDescription]) -> list[dict[str, Any]]:
    """Render for the Anthropic messages API: ``name``, ``description``, ``input_schema``."""
    return [
        {
            "name": d["name"],
            "description": d["description"],
            "input_schema": thaw_json(d["input_schema"]),
        }
        for d in descriptions
    ]


def to_gemini_tools(descriptions: Iterable[ToolDescription]) -> list[dict[str, Any]]:
    """Render for Gemini: one tool holding ``function_declarations`` (empty list when none).

    Gemini accepts an OpenAPI 3.0 subset of JSON Schema, so local ``$ref`` pointers are inlined
    and keywords outside that subset (``additionalProperties``, ``$defs``, ``title``, ...) are
    dropped; ``const`` becomes a one-value ``enum``; a ``null`` alternative (what ``X | None``
    gives: ``anyOf: [X, {"type": "null"}]``) becomes OpenAPI's ``nullable: true``.
    """
    declarations = []
    for d in descriptions:
        schema = d["input_schema"]
        defs = schema.get("$defs", {})
        declarations.append(
            {
                "name": d["name"],
                "description": d["description"],
                "parameters": _gemini_schema(schema, defs, depth=0),
            }
        )
    return [{"function_declarations": declarations}] if declarations else []


def _gemini_schema(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if depth > 32:  # a recursive model: stop inlining rather than loop forever
        return {"type": "object"}
    if isinstance(node, list):
        return [_gemini_schema(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"), {})
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _gemini_schema(merged, defs, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _GEMINI_DROP:
            if key == "const":
                out["enum"] = [thaw_json(value)]
            continue
        if key in _DATA_KEYWORDS:  # values, not schemas: copied as they are
            out[key] = thaw_json(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _gemini_schema(v, defs, depth + 1) for name, v in value.items()}
        else:
            out[key] = _gemini_schema(value, defs, depth + 1)
    return _nullable(out)


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """Turn a ``null`` type or ``anyOf`` branch into ``nullable: true`` (OpenAPI 3.0 form)."""
    kind = node.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [k for k in kind if k != "null"]
        node = {**node, "nullable": True}
        if rest:
            node["type"] = rest[0] if len(rest) == 1 else rest
        else:
            del node["type"]
    branches = node.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if b != {"type": "null"}]
        if len(kept) < len(branches) and kept:
            outer = {k: v for k, v in node.items() if k != "anyOf"}
            if len(kept) == 1 and isinstance(kept[0], dict):
                return {**kept[0], **outer, "nullable": True}
            return {**outer, "anyOf": kept, "nullable": True}
    return node


for _public in (ToolDescription, to_openai_tools, to_anthropic_tools, to_gemini_tools):
    _public.__module__ = "pipeline.models"
