"""A hand-written MCP server (no SDK) for the connection tests: ``raw_server.py MODE LOG``.

It speaks newline-delimited JSON-RPC on stdio, answers ``server/discover`` and ``tools/list``
with one ``echo`` tool (a ``text`` string, any other arguments allowed), logs every line it
receives to LOG, and answers ``tools/call`` as MODE says: ``echo`` (the text back), ``error``
(a JSON-RPC error), ``junk`` (a result that is not an object), ``silent`` (never), ``die``
(exits), ``noisy`` (a non-JSON line and a stray notification first, then the text back),
``shape`` (the ``result`` argument, as it is, whatever it holds).
"""

from __future__ import annotations

import json
import os
import sys

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": True,
}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    mode, log = sys.argv[1], sys.argv[2]
    for line in sys.stdin:
        with open(log, "a", encoding="utf-8") as out:
            out.write(line)
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            continue
        if method == "server/discover":
            result: object = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": False}},
                "resultType": "complete",
                "cacheScope": "private",
                "ttlMs": 0,
            }
        elif method == "tools/list":
            tool = {"name": "echo", "description": "Echo.", "inputSchema": SCHEMA}
            result = {
                "tools": [tool],
                "resultType": "complete",
                "cacheScope": "private",
                "ttlMs": 0,
            }
        elif method == "tools/call":
            arguments = message["params"].get("arguments") or {}
            text = arguments.get("text")
            if mode == "error":
                error = {"code": -32050, "message": "quota exceeded", "data": {"left": 0}}
                send({"jsonrpc": "2.0", "id": rid, "error": error})
                continue
            if mode == "silent":
                continue
            if mode == "die":
                os._exit(3)
            if mode == "junk":
                result = "not an object"
            elif mode == "shape":
                result = arguments.get("result")
            else:
                if mode == "noisy":
                    sys.stdout.write("this is not JSON\n")
                    notice = {"note": f'"loopware-{rid}"'}
                    send({"jsonrpc": "2.0", "method": "notifications/message", "params": notice})
                result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    main()
