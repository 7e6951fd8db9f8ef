"""A small MCP server for the tests, written with the mcp SDK (run as a subprocess).

``python tests/mcp/fixture_server.py [--log FILE] [--hostile] [--http PORT]``: every call it
receives is appended to ``--log`` (one JSON line: the tool and its arguments) before it is
answered, so a test can prove which calls reached it. ``shape`` answers with the result its
arguments spell out (wire JSON), to test how results travel. ``--hostile`` also lists tools a client
must not take as they are: an invalid schema, a non-object schema and names no provider
accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or []}


TOOLS = [
    types.Tool(
        name="echo",
        description="Echo the text back.",
        input_schema=_obj(
            {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1, "default": 1}},
            ["text"],
        ),
    ),
    types.Tool(name="secret", description="Reveal the secret.", input_schema=_obj({})),
    types.Tool(
        name="count", description="How many calls this server received.", input_schema=_obj({})
    ),
    types.Tool(name="fail", description="Always reports an error.", input_schema=_obj({})),
    types.Tool(
        name="picture", description="A one-pixel image and a caption.", input_schema=_obj({})
    ),
    types.Tool(
        name="big",
        description="A large text result.",
        input_schema=_obj({"mb": {"type": "integer"}}, ["mb"]),
    ),
    types.Tool(name="hang", description="Never answers.", input_schema=_obj({})),
    types.Tool(
        name="sleep",
        description="Answers after the given seconds.",
        input_schema=_obj({"seconds": {"type": "number"}, "n": {"type": "integer"}}, ["seconds"]),
    ),
    types.Tool(name="die", description="Exits the server process.", input_schema=_obj({})),
    types.Tool(
        name="shape",
        description="Answers with the CallToolResult its ``result`` argument spells out.",
        input_schema=_obj({"result": {"type": "object"}, "nonce": {"type": "integer"}}, ["result"]),
    ),
]

HOSTILE = [
    types.Tool(
        name="bad_schema",
        description="Its schema is not JSON Schema.",
        input_schema={"type": "object", "properties": {"x": {"type": "strnig"}}},
    ),
    types.Tool(
        name="not_an_object",
        description="Its schema is an array.",
        input_schema={"type": "object", "properties": {"x": {"minimum": "zero"}}},
    ),
    types.Tool(
        name="files/read.v2",
        description="A dotted, slashed name.",
        input_schema=_obj({"path": {"type": "string"}}, ["path"]),
    ),
    types.Tool(
        name="files_read_v2", description="Collides with the renamed one.", input_schema=_obj({})
    ),
    types.Tool(name="t" * 100, description="A name far too long.", input_schema=_obj({})),
    types.Tool(name="...", description="No usable character.", input_schema=_obj({})),
]


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    parser.add_argument("--hostile", action="store_true")
    parser.add_argument("--http", type=int)
    options = parser.parse_args()
    received = 0

    def record(name: str, args: dict[str, Any]) -> None:
        if options.log:
            with open(options.log, "a", encoding="utf-8") as log:
                log.write(json.dumps({"tool": name, "args": args, "pid": os.getpid()}) + "\n")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS + (HOSTILE if options.hostile else []))

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        nonlocal received
        received += 1
        args = dict(params.arguments or {})
        record(params.name, args)
        if params.name == "echo":
            return types.CallToolResult(content=[text(args["text"] * args.get("times", 1))])
        if params.name == "secret":
            return types.CallToolResult(content=[text("the secret is 42")])
        if params.name == "count":
            return types.CallToolResult(content=[text(str(received))])
        if params.name == "fail":
            return types.CallToolResult(content=[text("disk on fire")], is_error=True)
        if params.name == "picture":
            return types.CallToolResult(
                content=[
                    text("a red pixel"),
                    types.ImageContent(
                        type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"
                    ),
                ]
            )
        if params.name == "big":
            line = "x" * 1023 + "\n"
            return types.CallToolResult(content=[text(line * (1024 * args["mb"]))])
        if params.name == "hang":
            await asyncio.sleep(3600)
        if params.name == "sleep":
            await asyncio.sleep(float(args["seconds"]))
            return types.CallToolResult(content=[text(f"slept {args['seconds']}")])
        if params.name == "shape":
            return types.CallToolResult.model_validate(args["result"])
        if params.name == "die":
            sys.stdout.flush()
            os._exit(3)
        return types.CallToolResult(content=[text(f"{params.name} ok")])

    server = Server("fixture", on_list_tools=list_tools, on_call_tool=call_tool)
    if options.http:
        import uvicorn

        app = server.streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")
        return

    from mcp.server.stdio import stdio_server

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(serve())


if __name__ == "__main__":
    main()
