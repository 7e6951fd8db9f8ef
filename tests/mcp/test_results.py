"""MCP results become loopware tool outputs: text, Media with a trust tier, or error calls."""

from __future__ import annotations

import base64

import pytest

types = pytest.importorskip("mcp_types")

from pipeline.artifacts import Media  # noqa: E402
from pipeline.mcp import MCPServerError, MCPToolError  # noqa: E402
from pipeline.mcp._results import to_output  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def text(s: str) -> object:
    return types.TextContent(type="text", text=s)


def test_text_parts_become_one_string() -> None:
    result = types.CallToolResult(content=[text("a"), text("b")])
    assert to_output(result, "t", "third-party-private") == "a\nb"


def test_structured_content_alone_becomes_json_text() -> None:
    result = types.CallToolResult(content=[], structured_content={"n": 1})
    assert to_output(result, "t", "third-party-private") == '{"n": 1}'


def test_is_error_becomes_a_tool_error_with_the_servers_text() -> None:
    result = types.CallToolResult(content=[text("disk on fire")], is_error=True)
    with pytest.raises(MCPToolError, match="disk on fire") as info:
        to_output(result, "t", "third-party-private")
    assert info.value.code == "E_MCP_TOOL_ERROR"
    assert info.value.tool_name == "t"


def test_images_and_embedded_resources_become_media_of_the_configured_tier() -> None:
    image = types.ImageContent(
        type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"
    )
    doc = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(
            uri="file:///r/notes.md", mime_type="text/markdown", text="# hi"
        ),
    )
    blob = types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(
            uri="file:///r/data.bin",
            mime_type="application/weird",
            blob=base64.b64encode(b"\x01").decode(),
        ),
    )
    output = to_output(
        types.CallToolResult(content=[text("caption"), image, doc, blob]),
        "t",
        "third-party-private",
    )
    assert isinstance(output, list)
    caption, picture, notes, data = output
    assert all(isinstance(m, Media) and m.trust_tier == "third-party-private" for m in output)
    assert caption.data == b"caption"
    assert caption.mime_type == "text/plain"
    assert picture.kind == "image"
    assert picture.data == PNG
    assert notes.kind == "document"
    assert notes.source == "file:///r/notes.md"
    assert notes.filename == "notes.md"
    assert data.data == b"\x01"
    assert not data.trusted
    public = to_output(types.CallToolResult(content=[image]), "t", "third-party-public")
    assert isinstance(public, list)
    assert public[0].trust_tier == "third-party-public"


def test_media_that_is_not_base64_is_a_server_error() -> None:
    image = types.ImageContent(type="image", data="not base64!!", mime_type="image/png")
    with pytest.raises(MCPServerError, match="not base64"):
        to_output(types.CallToolResult(content=[image]), "t", "third-party-private")


def test_an_unknown_mime_type_is_kept_as_an_opaque_document() -> None:
    image = types.ImageContent(
        type="image", data=base64.b64encode(b"x").decode(), mime_type="model/gltf"
    )
    output = to_output(types.CallToolResult(content=[image]), "t", "third-party-private")
    assert isinstance(output, list)
    (media,) = output
    assert media.kind == "document"
    assert media.mime_type == "application/octet-stream"


def test_resource_links_are_named_in_the_text() -> None:
    link = types.ResourceLink(type="resource_link", name="report", uri="file:///r/report.pdf")
    assert to_output(types.CallToolResult(content=[link]), "t", "third-party-private") == (
        "[resource report: file:///r/report.pdf]"
    )
