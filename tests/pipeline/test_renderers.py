"""Tool descriptions render into each provider's documented tool-definition shape."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel

from pipeline import tool
from pipeline.models import to_anthropic_tools, to_gemini_tools, to_openai_tools


class Address(BaseModel):
    city: str
    zip: str | None = None


@tool
def ship(to: Address, speed: Literal["slow", "fast"] = "slow") -> str:
    """Ship a parcel."""
    return "ok"


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def test_openai_shape_wraps_each_schema_in_a_function_tool() -> None:
    """OpenAI tools are ``{"type": "function", "function": {name, description, parameters}}``."""
    rendered = to_openai_tools([ping.describe(), ship.describe()])
    assert [t["type"] for t in rendered] == ["function", "function"]
    assert rendered[0]["function"] == {
        "name": "ping",
        "description": "Ping.",
        "parameters": ping.describe()["input_schema"],
    }


def test_anthropic_shape_uses_input_schema() -> None:
    """Anthropic tools carry ``name``, ``description`` and ``input_schema``."""
    (rendered,) = to_anthropic_tools([ship.describe()])
    assert set(rendered) == {"name", "description", "input_schema"}
    assert rendered["input_schema"]["properties"]["speed"]["enum"] == ["slow", "fast"]


def test_gemini_shape_inlines_refs_and_drops_unsupported_keywords() -> None:
    """Gemini gets one tool of function declarations, refs inlined, no $defs or titles."""
    (gemini,) = to_gemini_tools([ship.describe(), ping.describe()])
    ship_decl, ping_decl = gemini["function_declarations"]
    params = ship_decl["parameters"]
    text = repr(params)
    assert "$ref" not in text
    assert "$defs" not in text
    assert "title" not in text
    assert "additionalProperties" not in text
    assert params["properties"]["to"]["properties"]["city"]["type"] == "string"
    assert ping_decl["name"] == "ping"
    assert to_gemini_tools([]) == []


def test_gemini_shape_writes_optional_fields_as_nullable() -> None:
    """``X | None`` becomes the OpenAPI 3.0 ``nullable: true``; no ``{"type": "null"}`` remains."""
    (gemini,) = to_gemini_tools([ship.describe()])
    zip_code = gemini["function_declarations"][0]["parameters"]["properties"]["to"]["properties"][
        "zip"
    ]
    assert zip_code == {"type": "string", "default": None, "nullable": True}
    assert "'null'" not in repr(gemini)


def test_gemini_shape_keeps_default_and_enum_values_as_data() -> None:
    """Keys inside a default value (``title``, ``type``) are data, not schema keywords."""

    @tool
    def label(style: dict[str, str] = {"title": "Bold", "type": "null"}) -> str:  # noqa: B006
        """Label something."""
        return "ok"

    (gemini,) = to_gemini_tools([label.describe()])
    style = gemini["function_declarations"][0]["parameters"]["properties"]["style"]
    assert style["default"] == {"title": "Bold", "type": "null"}
    assert "nullable" not in style


def test_a_rendered_schema_is_editable_and_the_description_stays_as_it_was() -> None:
    """A rendering is plain data the caller may edit (the read-only description is copied),
    and editing it leaves the tool's own description untouched."""
    description = ship.describe()
    before = json.loads(json.dumps(description))
    to_openai_tools([description])[0]["function"]["parameters"]["properties"].clear()
    to_anthropic_tools([description])[0]["input_schema"]["properties"].clear()
    (gemini,) = to_gemini_tools([description])
    gemini["function_declarations"][0]["parameters"]["properties"].clear()
    assert description == before
